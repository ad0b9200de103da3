//! # mistralrs-hlg
//!
//! HLG sampling for [mistral.rs]: a piecewise tone curve on the logits (toe / linear mid
//! / shoulder around a pivot) that replaces temperature's single slope.
//!
//! The temperature stays the mid gain (`m = 1/T`): the host divides by `T` after this
//! transform, so the curve here is at unit gain. See the README for the picture and the
//! measurements.
//!
//! ```
//! use mistralrs_hlg::{HlgConfig, HlgCurve};
//!
//! let cfg: HlgConfig = serde_json::from_str(r#"{"enabled": true, "toe": 3.5}"#)?;
//! let curve: HlgCurve = cfg.curve();
//! let mut logits = vec![3.0, 2.5, -1.0, -9.0, f32::NEG_INFINITY];
//! curve.apply(&mut logits);
//! assert_eq!(logits[4], f32::NEG_INFINITY);
//! # Ok::<(), serde_json::Error>(())
//! ```
//!
//! ## Features
//!
//! | feature | what it adds |
//! | --- | --- |
//! | *(none)* | [`HlgCurve`], [`HlgConfig`]: the math and the request object; no tensor or engine dependency |
//! | `candle` | `backend::candle`: the transform as candle ops on any device, `[V]` or `[B, V]` |
//! | `mlx` | `backend::mlx`: the transform as mlx-rs ops on an `mlx_rs::Array`, on MLX's default device (the CPU off Apple) |
//! | `mlx-metal` | `mlx` with MLX on Metal and Accelerate (Apple silicon) |
//! | `mistralrs` | `processor`: the mistral.rs logits processor and request arming |
//! | `server` (default) | `server`: the OpenAI-compatible server on mistralrs-server-core |
//! | `model` | `model`: the embedded default model, fetched with pip; `weights`: a GGUF's weights converted to the format served (`--weights`) |
//! | `cuda`, `cudnn`, `flash-attn` | the engine on CUDA (mistral.rs's features of the same names; need nvcc) |
//! | `metal`, `accelerate` | the engine on Metal, Accelerate for its CPU work (macOS) |
//! | `mkl` | Intel MKL for the engine's CPU work |
//!
//! The `mistralrs-hlg` binary is the `mistralrs-hlg-cli` crate (`cli/`), built on
//! `server` and `model`. The evaluation of docs/RESULTS.md is a workspace crate of its
//! own, not published (`eval/`, the `mistralrs-hlg-eval` binary).
//!
//! `mlx` and `mlx-metal` move only the HLG transform (`--hlg-backend mlx`); the engine's
//! device comes from `cuda` / `metal`, detected at start-up unless `--cpu` is given.
//!
//! [mistral.rs]: https://github.com/EricLBuehler/mistral.rs

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod config;
pub mod curve;
mod error;
mod fastmath;
pub mod params;

pub mod backend;
#[cfg(feature = "model")]
#[cfg_attr(docsrs, doc(cfg(feature = "model")))]
pub mod model;
#[cfg(feature = "mistralrs")]
#[cfg_attr(docsrs, doc(cfg(feature = "mistralrs")))]
pub mod processor;
#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub mod server;
#[cfg(feature = "model")]
#[cfg_attr(docsrs, doc(cfg(feature = "model")))]
pub mod weights;

pub use config::HlgConfig;
pub use curve::{CurveParts, HlgCurve};
pub use error::HlgError;
pub use params::{Pivot, ToeShape};
