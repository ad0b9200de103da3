//! The mistral.rs adapter: a [`CustomLogitsProcessor`] that runs the HLG curve, and the
//! arming of a request with it.
//!
//! Where it runs in mistral.rs 0.8.1's sampler, for every sampled token: the logits come
//! off the model, DRY / frequency / presence / repetition penalties are applied, **then the
//! custom processors run (here)**, then the sampler divides by the temperature,
//! softmaxes, and applies top-k / top-p / min-p. Arming a request therefore turns those
//! three off (the curve's toe is the tail control) and keeps the temperature as the mid
//! gain. Greedy requests (temperature 0) are left alone: the curve is monotone, so it
//! could not change an argmax anyway.
//!
//! ```no_run
//! use mistralrs::{GgufModelBuilder, TextMessageRole, RequestBuilder};
//! use mistralrs_hlg::{processor::HlgRequestExt, HlgCurve};
//!
//! # async fn run() -> anyhow::Result<()> {
//! let model = GgufModelBuilder::new("/models", vec!["model.gguf"]).build().await?;
//! let request = RequestBuilder::new()
//!     .add_message(TextMessageRole::User, "Name a colour.")
//!     .with_hlg(HlgCurve::default(), 0.8); // temperature 0.8 is the mid gain
//! let response = model.send_chat_request(request).await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use mistralrs_core::{CustomLogitsProcessor, NormalRequest, Request};

use crate::curve::HlgCurve;

/// The HLG curve as a mistral.rs logits processor. Stateless, so one instance may be
/// shared by the `n` choices of a request and called concurrently.
///
/// On the CPU with rank-1 f32 logits (what mistral.rs 0.8.1 passes) it copies the logits
/// out once, runs the slice kernel in place and hands the buffer back as a tensor; any
/// other device, dtype or rank goes through the candle backend. It never returns an
/// error for any logits values (an error from a processor would abort the batch step).
///
/// ```
/// use candle_core::{Device, Tensor};
/// use mistralrs_core::CustomLogitsProcessor;
/// use mistralrs_hlg::{processor::HlgProcessor, HlgCurve};
///
/// let p = HlgProcessor::new(HlgCurve::default());
/// let x = Tensor::new(&[0.0f32, -1.0, -16.0], &Device::Cpu)?;
/// let y: Vec<f32> = p.apply(&x, &[])?.to_vec1()?;
/// let mut want = vec![0.0f32, -1.0, -16.0];
/// HlgCurve::default().apply(&mut want);
/// assert_eq!(y, want);
/// # Ok::<(), candle_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct HlgProcessor {
    curve: HlgCurve,
    backend: Backend,
}

/// Which implementation of the curve a processor runs.
///
/// ```
/// use mistralrs_hlg::{processor::{Backend, HlgProcessor}, HlgCurve};
/// assert_eq!(Backend::default(), Backend::Kernel);
/// assert_eq!(HlgProcessor::new(HlgCurve::default()).backend(), Backend::Kernel);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// The slice kernel on the host (candle ops for logits that are not rank-1 f32 on
    /// the CPU). The default.
    #[default]
    Kernel,
    /// mlx-rs ops on MLX's default device (Metal on Apple silicon): the logits are
    /// handed to MLX as an array and the result read back (feature `mlx`).
    #[cfg(feature = "mlx")]
    Mlx,
}

/// A backend name that this build cannot run.
///
/// ```
/// use mistralrs_hlg::processor::{Backend, BackendError};
/// let e = Backend::parse("cuda").unwrap_err();
/// assert_eq!(e.to_string(), r#"expected "kernel" or "mlx", got "cuda""#);
/// # #[cfg(not(feature = "mlx"))]
/// assert_eq!(Backend::parse("mlx"), Err(BackendError::MlxNotBuilt));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// Neither `kernel` nor `mlx`.
    #[error("expected {expected}, got {0:?}", expected = Backend::EXPECTED)]
    Unknown(String),
    /// `mlx` in a build without the `mlx` feature.
    #[error("this build has no `mlx` feature (see the README's mlx section)")]
    MlxNotBuilt,
}

impl Backend {
    /// The accepted names, in words.
    ///
    /// ```
    /// use mistralrs_hlg::processor::Backend;
    /// assert!(Backend::parse("metal").unwrap_err().to_string().contains(Backend::EXPECTED));
    /// ```
    pub const EXPECTED: &'static str = r#""kernel" or "mlx""#;

    /// The backend named `kernel` or `mlx`.
    ///
    /// ```
    /// use mistralrs_hlg::processor::{Backend, BackendError};
    /// assert_eq!(Backend::parse("kernel"), Ok(Backend::Kernel));
    /// assert_eq!(Backend::parse("gpu"), Err(BackendError::Unknown("gpu".into())));
    /// ```
    pub fn parse(name: &str) -> Result<Self, BackendError> {
        match name {
            "kernel" => Ok(Backend::Kernel),
            #[cfg(feature = "mlx")]
            "mlx" => Ok(Backend::Mlx),
            #[cfg(not(feature = "mlx"))]
            "mlx" => Err(BackendError::MlxNotBuilt),
            other => Err(BackendError::Unknown(other.to_string())),
        }
    }
}

impl HlgProcessor {
    /// A processor for this curve, on the slice kernel.
    ///
    /// ```
    /// use mistralrs_hlg::{processor::HlgProcessor, HlgCurve};
    /// let p = HlgProcessor::new(HlgCurve::identity());
    /// assert!(p.curve().is_identity());
    /// ```
    pub fn new(curve: HlgCurve) -> Self {
        HlgProcessor {
            curve,
            backend: Backend::Kernel,
        }
    }

    /// A processor for this curve on the given backend.
    ///
    /// ```
    /// use mistralrs_hlg::{processor::{Backend, HlgProcessor}, HlgCurve};
    /// let p = HlgProcessor::with_backend(HlgCurve::default(), Backend::Kernel);
    /// assert_eq!(p.backend(), Backend::Kernel);
    /// ```
    pub fn with_backend(curve: HlgCurve, backend: Backend) -> Self {
        HlgProcessor { curve, backend }
    }

    /// The curve it applies.
    ///
    /// ```
    /// use mistralrs_hlg::{processor::HlgProcessor, HlgCurve};
    /// let curve = HlgCurve::default().with_toe(Some(2.0))?;
    /// assert_eq!(HlgProcessor::new(curve).curve().toe(), Some(2.0));
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn curve(&self) -> &HlgCurve {
        &self.curve
    }

    /// Where it runs the curve.
    ///
    /// ```
    /// use mistralrs_hlg::{processor::{Backend, HlgProcessor}, HlgCurve};
    /// assert_eq!(HlgProcessor::new(HlgCurve::default()).backend(), Backend::Kernel);
    /// ```
    pub fn backend(&self) -> Backend {
        self.backend
    }
}

impl CustomLogitsProcessor for HlgProcessor {
    /// Never fails and never panics into the engine (a processor error aborts the whole
    /// batch's sampling step, other users' sequences included): a transform that errs,
    /// panics, or leaves no finite entry or a `+inf` hands the logits back unchanged,
    /// with a warning. Every accepted curve keeps finite inputs finite or `-inf` with
    /// the top entry finite, so this is a guard, not a path that is expected to run.
    fn apply(&self, logits: &Tensor, _context: &[u32]) -> candle_core::Result<Tensor> {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.transform(logits)));
        let reason = match out {
            Ok(Ok(Some(t))) => return Ok(t),
            Ok(Ok(None)) => "left no finite logit or a +inf".to_string(),
            Ok(Err(e)) => format!("failed: {e}"),
            Err(_) => "panicked".to_string(),
        };
        tracing::warn!(curve = ?self.curve, "HLG {reason}: the logits pass through unchanged");
        Ok(logits.clone())
    }
}

impl HlgProcessor {
    /// The transformed logits, or `None` when the result has no finite entry or a `+inf`.
    fn transform(&self, logits: &Tensor) -> candle_core::Result<Option<Tensor>> {
        #[cfg(feature = "mlx")]
        if self.backend == Backend::Mlx {
            let t = apply_mlx(&self.curve, logits)?;
            return Ok(sane_tensor(&t)?.then_some(t));
        }
        if logits.rank() == 1
            && logits.dtype() == DType::F32
            && matches!(logits.device(), Device::Cpu)
        {
            let mut v: Vec<f32> = logits.to_vec1()?;
            self.curve.apply(&mut v);
            if !sane(&v) {
                return Ok(None);
            }
            Tensor::from_vec(v, logits.shape(), logits.device()).map(Some)
        } else {
            let t = crate::backend::candle::apply(&self.curve, logits)?;
            Ok(sane_tensor(&t)?.then_some(t))
        }
    }
}

/// At least one finite entry and no `+inf`: what the sampler needs to draw a token.
fn sane(v: &[f32]) -> bool {
    // Bitwise accumulation without an early exit, so the loop vectorises.
    let (mut finite, mut pos_inf) = (false, false);
    for &x in v {
        finite |= x.is_finite();
        pos_inf |= x == f32::INFINITY;
    }
    finite && !pos_inf
}

/// [`sane`] for each row of a tensor on any device: the row maxima are finite.
fn sane_tensor(t: &Tensor) -> candle_core::Result<bool> {
    let last = t.rank().saturating_sub(1);
    let max: Vec<f32> = t
        .to_dtype(DType::F32)?
        .max_keepdim(last)?
        .flatten_all()?
        .to_vec1()?;
    Ok(max.iter().all(|m| m.is_finite()))
}

/// The logits through MLX: copied to an f32 array of the same shape, transformed on
/// MLX's default device, read back into a tensor of the original dtype and device.
#[cfg(feature = "mlx")]
fn apply_mlx(curve: &HlgCurve, logits: &Tensor) -> candle_core::Result<Tensor> {
    let err =
        |e: mlx_rs::error::Exception| candle_core::Error::Msg(format!("hlg (mlx): {}", e.what()));
    let shape: Vec<i32> = logits.dims().iter().map(|&d| d as i32).collect();
    let host: Vec<f32> = logits.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
    let y = crate::backend::mlx::apply(curve, &mlx_rs::Array::from_slice(&host, &shape))
        .map_err(err)?;
    y.eval().map_err(err)?;
    let out = y
        .try_as_slice::<f32>()
        .map_err(|e| candle_core::Error::Msg(format!("hlg (mlx): {e}")))?;
    Tensor::from_slice(out, logits.shape(), &Device::Cpu)?
        .to_dtype(logits.dtype())?
        .to_device(logits.device())
}

/// What arming did to a request.
///
/// ```
/// use mistralrs_core::{NormalRequest, Request, RequestMessage, SamplingParams};
/// use mistralrs_hlg::{processor::{arm_request, Armed}, HlgCurve};
///
/// let (tx, _rx) = tokio::sync::mpsc::channel(1);
/// let mut params = SamplingParams::neutral();
/// params.temperature = Some(0.0);
/// let msg = RequestMessage::Completion { text: "Hi".into(), echo_prompt: false, best_of: None };
/// let mut req = Request::Normal(Box::new(NormalRequest::new_simple(msg, params, tx, 0, None, None)));
/// assert_eq!(arm_request(&mut req, &HlgCurve::default()), Armed::Greedy);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Armed {
    /// The processor is installed; `dropped` names the samplers of the request that
    /// were turned off (`"top_k"`, `"top_p"`, `"min_p"`).
    Installed {
        /// The request's own truncation samplers that HLG replaced.
        dropped: Vec<&'static str>,
    },
    /// Greedy (temperature 0): left untouched.
    Greedy,
    /// Not a text-generation request: left untouched.
    NotApplicable,
}

/// The temperature mistral.rs samples at when neither the request nor (on 0.9) the
/// model's generation defaults name one.
///
/// ```
/// use mistralrs_core::{NormalRequest, Request, RequestMessage, SamplingParams};
/// use mistralrs_hlg::{processor::{arm_request, Armed, HOST_DEFAULT_TEMPERATURE}, HlgCurve};
///
/// assert_eq!(HOST_DEFAULT_TEMPERATURE, 1.0);
/// // No temperature: sampled at the host's default, so armed.
/// let (tx, _rx) = tokio::sync::mpsc::channel(1);
/// let params = SamplingParams { temperature: None, ..SamplingParams::neutral() };
/// let msg = RequestMessage::Completion { text: "Hi".into(), echo_prompt: false, best_of: None };
/// let mut req = Request::Normal(Box::new(NormalRequest::new_simple(msg, params, tx, 0, None, None)));
/// assert!(matches!(arm_request(&mut req, &HlgCurve::default()), Armed::Installed { .. }));
/// ```
pub const HOST_DEFAULT_TEMPERATURE: f64 = 1.0;

/// Installs the HLG processor on a request and turns off top-k / top-p / min-p, unless
/// it is greedy (temperature 0, or below the host's 1e-7 cut-off).
///
/// The three are set to explicit off values ([`TOP_K_OFF`], [`TOP_P_OFF`],
/// [`MIN_P_OFF`]), so that a model's generation defaults cannot bring them back:
/// mistral.rs 0.9 fills the fields a request left unset from the model's
/// `generation_config.json`, and `do_sample: false` there means top-k 1. An armed request
/// is therefore sampled by HLG alone, whatever the model's defaults say; only its
/// temperature may come from them: a request without one takes the model's default
/// temperature (0.9) or 1.0 (0.8.1) as its mid gain.
///
/// ```
/// use mistralrs_core::{NormalRequest, Request, RequestMessage, SamplingParams};
/// use mistralrs_hlg::{processor::{arm_request, Armed}, HlgCurve};
///
/// let (tx, _rx) = tokio::sync::mpsc::channel(1);
/// let mut params = SamplingParams::neutral();
/// params.temperature = Some(0.7);
/// params.top_p = Some(0.9);
/// let msg = RequestMessage::Completion { text: "Hi".into(), echo_prompt: false, best_of: None };
/// let mut req = Request::Normal(Box::new(NormalRequest::new_simple(msg, params, tx, 0, None, None)));
/// assert_eq!(arm_request(&mut req, &HlgCurve::default()), Armed::Installed { dropped: vec!["top_p"] });
/// ```
pub fn arm_request(request: &mut Request, curve: &HlgCurve) -> Armed {
    arm_request_with(request, curve, Backend::Kernel)
}

/// [`arm_request`] with the processor on the given backend.
///
/// ```
/// use mistralrs_core::{NormalRequest, Request, RequestMessage, SamplingParams};
/// use mistralrs_hlg::{processor::{arm_request_with, Armed, Backend}, HlgCurve};
///
/// let (tx, _rx) = tokio::sync::mpsc::channel(1);
/// let params = SamplingParams { temperature: Some(0.9), top_k: Some(40), min_p: Some(0.05), ..SamplingParams::neutral() };
/// let msg = RequestMessage::Completion { text: "Hi".into(), echo_prompt: false, best_of: None };
/// let mut req = Request::Normal(Box::new(NormalRequest::new_simple(msg, params, tx, 0, None, None)));
/// let armed = arm_request_with(&mut req, &HlgCurve::default(), Backend::Kernel);
/// assert_eq!(armed, Armed::Installed { dropped: vec!["top_k", "min_p"] });
/// let Request::Normal(n) = &req else { unreachable!() };
/// // Explicit "off" values, which no model default replaces (mistral.rs 0.9 fills `None`s).
/// let p = &n.sampling_params;
/// assert_eq!((p.top_k, p.top_p, p.min_p), (Some(0), Some(1.0), Some(0.0)));
/// assert_eq!(n.logits_processors.as_ref().map(Vec::len), Some(1));
/// ```
pub fn arm_request_with(request: &mut Request, curve: &HlgCurve, backend: Backend) -> Armed {
    match request {
        Request::Normal(normal) => arm_normal(normal, curve, backend),
        _ => Armed::NotApplicable,
    }
}

fn arm_normal(req: &mut NormalRequest, curve: &HlgCurve, backend: Backend) -> Armed {
    let params = &mut req.sampling_params;
    let t = params.temperature.unwrap_or(HOST_DEFAULT_TEMPERATURE);
    if t < 1e-7 {
        return Armed::Greedy;
    }
    // Explicit "off" values, not `None`: mistral.rs 0.9 fills every field a request left
    // `None` from the model's generation_config.json when the request reaches the engine
    // (`fill_model_defaults`), which would bring a model's top-k / top-p / min-p (or
    // `do_sample: false`'s top-k 1) back under HLG. Both hosts treat k = 0, p = 1 and
    // min-p = 0 exactly as they treat `None` (every check is `k > 0`, `0 < p < 1`).
    // The temperature is left as it is: `None` keeps the host's meaning (0.8.1: 1.0;
    // 0.9: the model's default temperature, else 1.0), the mid gain.
    let mut dropped = Vec::new();
    if params.top_k.replace(TOP_K_OFF).is_some_and(|k| k > 0) {
        dropped.push("top_k");
    }
    if params
        .top_p
        .replace(TOP_P_OFF)
        .is_some_and(|p| p > 0.0 && p < 1.0)
    {
        dropped.push("top_p");
    }
    if params.min_p.replace(MIN_P_OFF).is_some_and(|p| p > 0.0) {
        dropped.push("min_p");
    }
    if !dropped.is_empty() {
        tracing::info!(
            request = req.id,
            ?dropped,
            "HLG is the sampler for this request: turned off {}",
            dropped.join(", ")
        );
    }
    req.logits_processors
        .get_or_insert_with(Vec::new)
        .push(Arc::new(HlgProcessor::with_backend(*curve, backend)));
    Armed::Installed { dropped }
}

/// The value of `top_k` an armed request carries: all tokens (both hosts read `k > 0` as
/// a cut), set explicitly so that no model default fills it in.
///
/// ```
/// assert_eq!(mistralrs_hlg::processor::TOP_K_OFF, 0);
/// ```
pub const TOP_K_OFF: usize = 0;
/// The value of `top_p` an armed request carries: no nucleus cut.
///
/// ```
/// assert_eq!(mistralrs_hlg::processor::TOP_P_OFF, 1.0);
/// ```
pub const TOP_P_OFF: f64 = 1.0;
/// The value of `min_p` an armed request carries: no min-p cut.
///
/// ```
/// assert_eq!(mistralrs_hlg::processor::MIN_P_OFF, 0.0);
/// ```
pub const MIN_P_OFF: f64 = 0.0;

/// HLG for mistral.rs's Rust API: one call on a [`mistralrs::RequestBuilder`].
///
/// ```
/// use mistralrs::{RequestBuilder, TextMessageRole};
/// use mistralrs_hlg::{processor::HlgRequestExt, HlgCurve};
///
/// // Builds the request: temperature 0.8 as the mid gain, top-k / top-p / min-p off, the
/// // processor added (send it with `model.send_chat_request`).
/// let _request = RequestBuilder::new()
///     .add_message(TextMessageRole::User, "Name a colour.")
///     .with_hlg(HlgCurve::default(), 0.8);
/// ```
pub trait HlgRequestExt: Sized {
    /// Samples at `temperature` (the mid gain) through `curve`, with top-k, top-p and
    /// min-p off. A temperature of 0 stays greedy and installs nothing.
    fn with_hlg(self, curve: HlgCurve, temperature: f64) -> Self;
}

impl HlgRequestExt for mistralrs::RequestBuilder {
    fn with_hlg(self, curve: HlgCurve, temperature: f64) -> Self {
        let b = self.set_sampler_temperature(temperature);
        if temperature < 1e-7 {
            return b;
        }
        // The builder starts from a deterministic sampler (top-k 1): these values are the
        // host's "off" for each (k = 0 → all tokens, p = 1 → no nucleus, min-p 0).
        b.set_sampler_topk(TOP_K_OFF)
            .set_sampler_topp(TOP_P_OFF)
            .set_sampler_minp(MIN_P_OFF)
            .add_logits_processor(Arc::new(HlgProcessor::new(curve)))
    }
}

/// Sends `request` as `n` single-choice chat requests, one after another, and merges the
/// answers into one response (choices `0..n`, usage summed): how to ask for several
/// samples of one prompt while the pinned mistral.rs (0.8.1) corrupts the choices of a
/// batched request on the CPU (`set_sampler_n_choices(n)` would batch them; see
/// `docs/NOTES.md`). `n = 0` is treated as 1.
///
/// ```no_run
/// use mistralrs::{GgufModelBuilder, RequestBuilder, TextMessageRole};
/// use mistralrs_hlg::{processor::{send_chat_choices, HlgRequestExt}, HlgCurve};
///
/// # async fn run() -> anyhow::Result<()> {
/// let model = GgufModelBuilder::new("/models", vec!["model.gguf"]).build().await?;
/// let request = RequestBuilder::new()
///     .add_message(TextMessageRole::User, "Name a colour.")
///     .with_hlg(HlgCurve::default(), 0.8);
/// let response = send_chat_choices(&model, request, 4).await?;
/// assert_eq!(response.choices.len(), 4);
/// # Ok(()) }
/// ```
pub async fn send_chat_choices(
    model: &mistralrs::Model,
    request: mistralrs::RequestBuilder,
    n: usize,
) -> mistralrs::error::Result<mistralrs_core::ChatCompletionResponse> {
    let one = request.set_sampler_n_choices(1);
    let mut merged = model.send_chat_request(one.clone()).await?;
    for i in 1..n {
        let next = model.send_chat_request(one.clone()).await?;
        merged.choices.extend(next.choices.into_iter().map(|mut c| {
            c.index = i;
            c
        }));
        let (u, v) = (&mut merged.usage, next.usage);
        u.completion_tokens += v.completion_tokens;
        u.prompt_tokens += v.prompt_tokens;
        u.total_tokens += v.total_tokens;
        u.total_time_sec += v.total_time_sec;
        u.total_prompt_time_sec += v.total_prompt_time_sec;
        u.total_completion_time_sec += v.total_completion_time_sec;
        let rate = |t: usize, s: f32| if s > 0.0 { t as f32 / s } else { 0.0 };
        u.avg_tok_per_sec = rate(u.total_tokens, u.total_time_sec);
        u.avg_prompt_tok_per_sec = rate(u.prompt_tokens, u.total_prompt_time_sec);
        u.avg_compl_tok_per_sec = rate(u.completion_tokens, u.total_completion_time_sec);
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names() {
        assert_eq!(Backend::parse("kernel"), Ok(Backend::Kernel));
        let bad = Backend::parse("gpu").unwrap_err().to_string();
        assert_eq!(bad, r#"expected "kernel" or "mlx", got "gpu""#);
        #[cfg(feature = "mlx")]
        assert_eq!(Backend::parse("mlx"), Ok(Backend::Mlx));
        #[cfg(not(feature = "mlx"))]
        assert_eq!(Backend::parse("mlx"), Err(BackendError::MlxNotBuilt));
    }

    /// The processor on MLX against the processor on the kernel, on logits shaped like a
    /// model's (what the server's `--hlg-backend mlx` installs).
    #[cfg(feature = "mlx")]
    #[test]
    fn mlx_processor_matches_the_kernel_processor() {
        let x: Vec<f32> = (0..4096)
            .map(|i| ((i * 7919 % 4096) as f32) * -0.007 + if i == 5 { 9.0 } else { 0.0 })
            .collect();
        let t = Tensor::from_slice(&x, x.len(), &Device::Cpu).unwrap();
        for curve in [
            HlgCurve::default(),
            HlgCurve::default().with_pivot(crate::Pivot::Entropy),
            HlgCurve::default().with_pivot(crate::Pivot::Median),
        ] {
            let want: Vec<f32> = HlgProcessor::new(curve)
                .apply(&t, &[])
                .unwrap()
                .to_vec1()
                .unwrap();
            let got = HlgProcessor::with_backend(curve, Backend::Mlx)
                .apply(&t, &[])
                .unwrap();
            assert_eq!(got.dtype(), DType::F32);
            let got: Vec<f32> = got.to_vec1().unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-5 * w.abs().max(1.0) + 1e-5,
                    "{g} vs {w} ({curve:?})"
                );
            }
        }
    }
}
