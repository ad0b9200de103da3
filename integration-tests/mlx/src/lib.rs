//! Tests and benches only (see `tests/` and `benches/`): mistralrs-hlg's mlx backend on
//! MLX's CPU backend, against the slice kernel.
