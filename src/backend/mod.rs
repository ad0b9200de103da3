//! Tensor backends: the same transform as the slice kernel, as tensor ops.

#[cfg(feature = "candle")]
pub mod candle;

#[cfg(feature = "mlx")]
pub mod mlx;
