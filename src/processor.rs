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
}

impl HlgProcessor {
    /// A processor for this curve.
    pub fn new(curve: HlgCurve) -> Self {
        HlgProcessor { curve }
    }

    /// The curve it applies.
    pub fn curve(&self) -> &HlgCurve {
        &self.curve
    }
}

impl CustomLogitsProcessor for HlgProcessor {
    fn apply(&self, logits: &Tensor, _context: &[u32]) -> candle_core::Result<Tensor> {
        if logits.rank() == 1 && logits.dtype() == DType::F32 && matches!(logits.device(), Device::Cpu) {
            let mut v: Vec<f32> = logits.to_vec1()?;
            self.curve.apply(&mut v);
            Tensor::from_vec(v, logits.shape(), logits.device())
        } else {
            crate::backend::candle::apply(&self.curve, logits)
        }
    }
}

/// What arming did to a request.
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

/// The temperature mistral.rs 0.8.1 samples at when a request names none.
pub const HOST_DEFAULT_TEMPERATURE: f64 = 1.0;

/// Installs the HLG processor on a request and turns off top-k / top-p / min-p, unless
/// it is greedy (temperature 0, or below the host's 1e-7 cut-off).
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
    match request {
        Request::Normal(normal) => arm_normal(normal, curve),
        _ => Armed::NotApplicable,
    }
}

fn arm_normal(req: &mut NormalRequest, curve: &HlgCurve) -> Armed {
    let params = &mut req.sampling_params;
    let t = params.temperature.unwrap_or(HOST_DEFAULT_TEMPERATURE);
    if t < 1e-7 {
        return Armed::Greedy;
    }
    let mut dropped = Vec::new();
    if params.top_k.take().is_some_and(|k| k > 0) {
        dropped.push("top_k");
    }
    if params.top_p.take().is_some_and(|p| p > 0.0 && p < 1.0) {
        dropped.push("top_p");
    }
    if params.min_p.take().is_some_and(|p| p > 0.0) {
        dropped.push("min_p");
    }
    if !dropped.is_empty() {
        tracing::info!(request = req.id, ?dropped, "HLG is the sampler for this request: turned off {}", dropped.join(", "));
    }
    req.logits_processors.get_or_insert_with(Vec::new).push(Arc::new(HlgProcessor::new(*curve)));
    Armed::Installed { dropped }
}

/// HLG for mistral.rs's Rust API: one call on a [`mistralrs::RequestBuilder`].
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
        b.set_sampler_topk(0)
            .set_sampler_topp(1.0)
            .set_sampler_minp(0.0)
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
