//! Tensor backends: the same transform as the slice kernel, as tensor ops.

#[cfg(feature = "candle")]
#[cfg_attr(docsrs, doc(cfg(feature = "candle")))]
pub mod candle;

#[cfg(feature = "mlx")]
#[cfg_attr(docsrs, doc(cfg(feature = "mlx")))]
pub mod mlx;
