//! The start-up probe: does the engine decode the rows of a batch as it decodes them
//! alone?

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use candle_core::{DType, Tensor};
use mistralrs_core::{
    CustomLogitsProcessor, MistralRs, NormalRequest, Request, RequestMessage, Response,
    SamplingParams,
};

use crate::server::error::ServerError;

/// What the start-up probe saw.
///
/// ```
/// use mistralrs_hlg::server::engine::{ProbeReport, PROBE_TOLERANCE};
/// let r = ProbeReport { max_abs_diff: 8.6, rows_independent: false };
/// assert!(r.max_abs_diff > PROBE_TOLERANCE && !r.rows_independent);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeReport {
    /// The largest difference, in nats, between a row's logits decoded in a batch of two
    /// and the same sequence's logits decoded alone.
    pub max_abs_diff: f32,
    /// Whether that is within [`PROBE_TOLERANCE`].
    pub rows_independent: bool,
}

/// The largest logit difference (nats) the probe accepts between a batched row and the
/// same sequence alone. Batched and single matmuls round differently (measured: 0 on the
/// patched CPU engine); the 0.8.1 bug moves logits by whole nats.
///
/// ```
/// use mistralrs_hlg::server::engine::PROBE_TOLERANCE;
/// assert!(PROBE_TOLERANCE < 1.0, "the 0.8.1 bug moves logits by whole nats");
/// ```
pub const PROBE_TOLERANCE: f32 = 0.05;

/// Whether the engine decodes the rows of a batch as it decodes each sequence alone.
///
/// Three short text completions, deterministic, no timing involved, after a fourth that
/// only leaves the prompt in the prefix cache: the prompt alone with its first token
/// forced to `a`, then to `b` (one sequence each), then one request for two choices
/// (always one batch of two rows: same length, same step) whose first tokens are forced
/// to `a` and `b`. The logits of the second decode step of each row are recorded by a
/// logits processor and compared with the single runs. Two forward passes per request,
/// on the served model (a server's engine, or a `mistralrs::Model`'s `inner()`: `eval
/// confirm` batches its samples only where this passes).
///
/// ```
/// use mistralrs_hlg::server::{engine::probe, load};
///
/// # async fn run() -> Result<(), mistralrs_hlg::server::ServerError> {
/// let source = load::ModelSource::resolve("/models/model.gguf", None)?;
/// let report = probe(&*load::load(&source).await?).await?;
/// println!("batched rows within {} nats: {}", report.max_abs_diff, report.rows_independent);
/// # Ok(()) }
/// ```
pub async fn probe(mistralrs: &MistralRs) -> Result<ProbeReport, ServerError> {
    // A first run puts the prompt in the engine's prefix cache, where it keeps one, so the
    // three compared runs start from the same state. On an engine that reuses a prompt
    // held whole (docs/NOTES.md, "Prefix reuse on the CPU") a later run computes only
    // its last tokens, which can round otherwise than a whole prefill and would read as
    // wrong rows (0.64 nats apart on the embedded model when the last token ran alone).
    probe_run(mistralrs, 1, [0, 0]).await?;
    let alone_a = probe_run(mistralrs, 1, [0, 0]).await?;
    let alone_b = probe_run(mistralrs, 1, [1, 1]).await?;
    let batched = probe_run(mistralrs, 2, [0, 1]).await?;
    let find = |runs: &[(u32, Vec<f32>)], tok: u32| {
        runs.iter().find(|(t, _)| *t == tok).map(|(_, l)| l.clone())
    };
    let (Some((ta, la)), Some((tb, lb))) = (alone_a.first().cloned(), alone_b.first().cloned())
    else {
        return Err(ServerError::Probe(
            "the single runs recorded no second step".into(),
        ));
    };
    let (Some(ba), Some(bb)) = (find(&batched, ta), find(&batched, tb)) else {
        return Err(ServerError::Probe(format!(
            "the batched run recorded {} rows, not the two forced ones",
            batched.len()
        )));
    };
    let diff = |x: &[f32], y: &[f32]| {
        x.iter()
            .zip(y)
            .map(|(p, q)| if p == q { 0.0 } else { (p - q).abs() })
            .fold(
                0.0f32,
                |m, d| if d.is_nan() { f32::INFINITY } else { m.max(d) },
            )
    };
    let max_abs_diff = diff(&la, &ba).max(diff(&lb, &bb));
    Ok(ProbeReport {
        max_abs_diff,
        rows_independent: max_abs_diff <= PROBE_TOLERANCE,
    })
}

/// One probe request: `n` choices of a fixed prompt, 2 tokens each, the first forced to
/// the token picked by `force[row]`; returns (first token, second-step logits) per row.
async fn probe_run(
    mistralrs: &MistralRs,
    n: usize,
    force: [usize; 2],
) -> Result<Vec<(u32, Vec<f32>)>, ServerError> {
    let recorder = Arc::new(ProbeProcessor {
        force,
        first_len: Mutex::new(None),
        firsts: AtomicUsize::new(0),
        seen: Mutex::new(vec![]),
    });
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    // Greedy as the engine reads it: mistral.rs 0.8.1 turns a missing temperature into
    // 1.0 (`add_request`), and sampling at 1.0, even with top-k 1, draws from the
    // engine's one shared RNG, which would shift every later sampled request of a fresh
    // server away from upstream's. A temperature of 0 takes the argmax, no draw.
    let params = SamplingParams {
        max_len: Some(2),
        n_choices: n,
        temperature: Some(0.0),
        ..SamplingParams::deterministic()
    };
    let message = RequestMessage::Completion {
        text: "The three primary colours are".into(),
        echo_prompt: false,
        best_of: None,
    };
    let mut request =
        NormalRequest::new_simple(message, params, tx, mistralrs.next_request_id(), None, None);
    request.logits_processors = Some(vec![recorder.clone()]);
    let failed = |why: String| ServerError::Probe(format!("the request failed: {why}"));
    mistralrs
        .get_sender(None)
        .map_err(|e| failed(e.to_string()))?
        .send(Request::Normal(Box::new(request)))
        .await
        .map_err(|_| failed("the engine is not running".into()))?;
    // The completion ends the request. An error is sent once per row, and the receiver
    // must outlive every send: mistral.rs 0.8.1 unwraps each, so dropping it after the
    // first of two would kill the engine's thread (upstream reboots it on the next
    // request), in the server's own engine.
    let mut error = None;
    loop {
        match rx.recv().await {
            Some(Response::CompletionDone(_)) => break,
            Some(Response::CompletionModelError(e, _)) => error = error.or(Some(e)),
            Some(Response::InternalError(e)) => error = error.or(Some(e.to_string())),
            Some(Response::ValidationError(e)) => error = error.or(Some(e.to_string())),
            Some(_) => {}
            None => {
                return Err(failed(
                    error.unwrap_or_else(|| "the engine dropped it".into()),
                ))
            }
        }
    }
    let seen = recorder
        .seen
        .lock()
        .map_err(|_| ServerError::Probe("its state was poisoned".into()))?
        .clone();
    Ok(seen)
}

/// Forces the first token of each row (row `i` gets token `(force[i] + 1)·V/3`), records
/// the logits of every later step with the row's first token, and forces a token there too.
struct ProbeProcessor {
    force: [usize; 2],
    first_len: Mutex<Option<usize>>,
    firsts: AtomicUsize,
    seen: Mutex<Vec<(u32, Vec<f32>)>>,
}

fn poisoned<T>(_: std::sync::PoisonError<T>) -> candle_core::Error {
    candle_core::Error::Msg("probe state poisoned".into())
}

impl ProbeProcessor {
    fn token(&self, which: usize, vocab: usize) -> u32 {
        ((which + 1) * vocab / 3) as u32
    }
}

impl CustomLogitsProcessor for ProbeProcessor {
    fn apply(&self, logits: &Tensor, context: &[u32]) -> candle_core::Result<Tensor> {
        let vocab = logits.elem_count();
        let first = {
            let mut len = self.first_len.lock().map_err(poisoned)?;
            *len.get_or_insert(context.len()) == context.len()
        };
        let tok = if first {
            let row = self.firsts.fetch_add(1, Ordering::SeqCst).min(1);
            self.token(self.force[row], vocab)
        } else {
            let start = self.first_len.lock().map_err(poisoned)?.unwrap_or(0);
            let row_first = context.get(start).copied().unwrap_or(u32::MAX);
            let values: Vec<f32> = logits.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
            self.seen
                .lock()
                .map_err(poisoned)?
                .push((row_first, values));
            row_first
        };
        force_tokens(logits, &[tok])
    }
}

/// `logits` with every entry but `keep` set to −inf.
pub(super) fn force_tokens(logits: &Tensor, keep: &[u32]) -> candle_core::Result<Tensor> {
    let mut mask = vec![f32::NEG_INFINITY; logits.elem_count()];
    for &k in keep {
        if let Some(m) = mask.get_mut(k as usize) {
            *m = 0.0;
        }
    }
    let mask = Tensor::from_vec(mask, logits.shape(), logits.device())?.to_dtype(logits.dtype())?;
    logits.broadcast_add(&mask)
}
