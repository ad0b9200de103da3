//! Online generations through a sampler: a logits processor that applies the sampler's
//! transform (the host then divides by T and samples the whole vocabulary) and records,
//! per step, the entropy of the distribution sampled from and the base log-probability
//! (`softmax(x)`, T = 1) of the token that was drawn.

use std::sync::{Arc, Mutex};

use candle_core::Tensor;
use mistralrs::{RequestBuilder, TextMessageRole};
use serde::Serialize;

use super::metrics::{log_softmax, TAIL};
use super::sampler::{probs, Sampler};
use super::EvalError;

#[derive(Default)]
struct State {
    /// Base log-probabilities of the last step, to score the token drawn from it.
    prev: Option<Vec<f64>>,
    trace: Trace,
}

/// What one generation recorded.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Trace {
    /// Entropy (nats) of the sampling distribution at each step.
    pub entropy: Vec<f64>,
    /// Base log-probability of each drawn token (every token but the last: no processor
    /// call follows it).
    pub base_logprob: Vec<f64>,
}

impl Trace {
    /// Share of drawn tokens whose base probability is below [`TAIL`].
    pub fn tail_tokens(&self) -> usize {
        self.base_logprob.iter().filter(|&&l| l < TAIL.ln()).count()
    }
}

struct Recorder {
    sampler: Sampler,
    state: Mutex<State>,
}

impl mistralrs_core::CustomLogitsProcessor for Recorder {
    fn apply(&self, logits: &Tensor, context: &[u32]) -> candle_core::Result<Tensor> {
        let x: Vec<f32> = logits.to_vec1()?;
        let mut s = self.state.lock().unwrap();
        if let (Some(prev), Some(&tok)) = (s.prev.take(), context.last()) {
            if let Some(&l) = prev.get(tok as usize) {
                s.trace.base_logprob.push(l);
            }
        }
        s.prev = log_softmax(&x, 1.0);
        let mut y = x;
        self.sampler.transform(&mut y);
        let q = probs(&y, self.sampler.temperature());
        s.trace.entropy.push(
            -q.iter()
                .filter(|&&v| v > 0.0)
                .map(|v| v * v.ln())
                .sum::<f64>(),
        );
        Tensor::from_vec(y, logits.dims1()?, logits.device())
    }
}

/// One chat generation of `prompt` with `sampler`, at most `max_tokens` tokens: the text
/// and its trace.
pub async fn generate(
    model: &mistralrs::Model,
    prompt: &str,
    sampler: &Sampler,
    max_tokens: usize,
) -> Result<(String, Trace), EvalError> {
    let rec = Arc::new(Recorder {
        sampler: sampler.clone(),
        state: Mutex::default(),
    });
    let req = RequestBuilder::new()
        .add_message(TextMessageRole::User, prompt)
        .set_sampler_max_len(max_tokens)
        .set_sampler_temperature(sampler.temperature())
        .set_sampler_topk(0)
        .set_sampler_topp(1.0)
        .set_sampler_minp(0.0)
        .add_logits_processor(rec.clone());
    let resp = model
        .send_chat_request(req)
        .await
        .map_err(EvalError::engine)?;
    let text = resp
        .choices
        .first()
        .and_then(|c| c.message.content.clone())
        .unwrap_or_default();
    let trace = std::mem::take(&mut rec.state.lock().unwrap().trace);
    Ok((text, trace))
}
