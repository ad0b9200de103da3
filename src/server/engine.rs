//! What the server does about the engine's batching: a start-up probe of whether the
//! engine decodes the rows of a batch correctly, and the gate that runs one request at a
//! time in the engine when it does not.
//!
//! mistral.rs 0.8.1's CPU decode attention (`flash_attn_cpu_single_q`) keeps one scratch
//! slot per (tile, head) instead of per (batch row, tile, head), so every row of a decode
//! batch gets the attention output of the batch's last row (`docs/NOTES.md`). Any two
//! sequences the scheduler batches are affected: the choices of an `n > 1` request, and
//! independent requests whose lengths line up (the scheduler lets a shorter sequence
//! catch up with a longer one, then batches them). The host has no switch that avoids
//! that path on the CPU (every CPU attention goes through it, whatever the dtype or mask),
//! and its `max_num_seqs` does not help (an idle scheduler admits every waiting sequence
//! at once). So the server probes the engine at start-up ([`probe`]) and, when the rows
//! are wrong, admits one request into the engine at a time ([`Gate`]): the others queue
//! in the server, in arrival order, and are never rejected.
//!
//! The gate must not open before the engine has let go of the request it admitted, or the
//! next request could be batched with a sequence the engine is still running. For the
//! routes this crate serves it watches the request's response channel: the engine holds
//! the channel's sender in every sequence, so the permit goes back when the last sender is
//! dropped ([`Admission::track`]). For upstream's routes it holds the permit until the
//! response body is finished or dropped.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use candle_core::{DType, Tensor};
use mistralrs_core::{
    CustomLogitsProcessor, MistralRs, NormalRequest, Request, RequestMessage, Response,
    SamplingParams,
};
use tokio::sync::mpsc::{Receiver, WeakSender};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::ServerError;

/// How the generation routes serve a request for `n > 1` choices.
///
/// ```
/// use mistralrs_hlg::server::{Choices, HlgServerOptions};
/// let o = HlgServerOptions { n_choices: Some("split".into()), ..Default::default() };
/// assert_eq!(o.choices(), Ok(Some(Choices::Split)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choices {
    /// As `n` single-choice generations, one after another, merged into one response: the
    /// default while the pinned mistral.rs (0.8.1) corrupts the choices of a batched
    /// request on the CPU (see `docs/NOTES.md`).
    Split,
    /// As upstream does: one request with `n` sequences, batched.
    Batched,
}

/// How the server lets the engine batch sequences (`--hlg-batching`).
///
/// ```
/// use mistralrs_hlg::server::{Batching, HlgServerOptions};
/// assert_eq!(HlgServerOptions::default().batching(), Ok(Batching::Auto));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batching {
    /// Probe the engine at start-up: batch when it decodes batched rows as it decodes them
    /// alone, otherwise [`Batching::Serial`]. The default.
    Auto,
    /// One request in the engine at a time, whatever the probe would say.
    Serial,
    /// No limit: the engine batches as upstream does (for a patched engine or a GPU).
    On,
}

impl Batching {
    /// Every value, as the flag spells them.
    ///
    /// ```
    /// use mistralrs_hlg::server::Batching;
    /// assert!(Batching::NAMES.iter().all(|n| Batching::parse(n).is_some()));
    /// ```
    pub const NAMES: [&'static str; 3] = ["auto", "serial", "on"];

    /// The accepted names, in words.
    ///
    /// ```
    /// use mistralrs_hlg::server::HlgServerOptions;
    /// let opts = HlgServerOptions { batching: Some("always".into()), ..Default::default() };
    /// assert_eq!(
    ///     opts.batching().unwrap_err().to_string(),
    ///     r#"--hlg-batching must be "auto", "serial" or "on", got "always""#
    /// );
    /// ```
    pub const EXPECTED: &'static str = r#""auto", "serial" or "on""#;

    /// The value a flag names, `None` for another name.
    ///
    /// ```
    /// use mistralrs_hlg::server::Batching;
    /// assert_eq!(Batching::parse("serial"), Some(Batching::Serial));
    /// assert_eq!(Batching::parse("sometimes"), None);
    /// ```
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(Batching::Auto),
            "serial" => Some(Batching::Serial),
            "on" => Some(Batching::On),
            _ => None,
        }
    }
}

/// How a server's engine takes requests, as
/// [`HlgServerOptions::engine_mode`](super::HlgServerOptions::engine_mode) decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineMode {
    /// One request at a time in the engine (the others queue at the [`Gate`]).
    pub serial: bool,
    /// How a request with `n > 1` is run.
    pub choices: Choices,
}

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
/// Three short text completions, deterministic, no timing involved: the prompt alone with
/// its first token forced to `a`, then to `b` (one sequence each), then one request for
/// two choices (always one batch of two rows: same length, same step) whose first tokens
/// are forced to `a` and `b`. The logits of the second decode step of each row are
/// recorded by a logits processor and compared with the single runs. Two forward passes
/// per request, on the served model (a server's engine, or a `mistralrs::Model`'s
/// `inner()`: `eval confirm` batches its samples only where this passes).
///
/// ```
/// use mistralrs_hlg::server::{engine::probe, load};
///
/// # async fn run() -> Result<(), mistralrs_hlg::server::ServerError> {
/// let source = load::ModelSource::resolve("/models/model.gguf", None)?;
/// let report = probe(&*load::load(&source, true).await?).await?;
/// println!("batched rows within {} nats: {}", report.max_abs_diff, report.rows_independent);
/// # Ok(()) }
/// ```
pub async fn probe(mistralrs: &MistralRs) -> Result<ProbeReport, ServerError> {
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
    // One response ends the request: its completion or its error.
    loop {
        match rx.recv().await {
            Some(Response::CompletionDone(_)) => break,
            Some(Response::CompletionModelError(e, _)) => return Err(failed(e)),
            Some(Response::InternalError(e)) => return Err(failed(e.to_string())),
            Some(Response::ValidationError(e)) => return Err(failed(e.to_string())),
            Some(_) => {}
            None => return Err(failed("the engine dropped it".into())),
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
fn force_tokens(logits: &Tensor, keep: &[u32]) -> candle_core::Result<Tensor> {
    let mut mask = vec![f32::NEG_INFINITY; logits.elem_count()];
    for &k in keep {
        if let Some(m) = mask.get_mut(k as usize) {
            *m = 0.0;
        }
    }
    let mask = Tensor::from_vec(mask, logits.shape(), logits.device())?.to_dtype(logits.dtype())?;
    logits.broadcast_add(&mask)
}

/// A weak handle on a request's response channel (see [`Admission::track`]).
///
/// ```
/// use mistralrs_core::Response;
/// use mistralrs_hlg::server::engine::Senders;
/// let (tx, _rx) = tokio::sync::mpsc::channel::<Response>(1);
/// let weak: Senders = tx.downgrade();
/// assert_eq!(weak.strong_count(), 1);
/// ```
pub type Senders = WeakSender<Response>;

/// Admits requests into the engine: at most one at a time when the engine's batched rows
/// are wrong, any number otherwise.
///
/// ```
/// use std::time::Duration;
/// use mistralrs_hlg::server::Gate;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let gate = Gate::new(true, vec![]);
/// let mut first = gate.admit().await;
/// // A second request waits for the first's turn to pass.
/// assert!(tokio::time::timeout(Duration::from_millis(50), gate.admit()).await.is_err());
/// first.finish();
/// drop(first);
/// let _second = gate.admit().await;
/// assert_eq!(gate.in_engine(), 1);
/// # });
/// ```
#[derive(Clone)]
pub struct Gate {
    permits: Option<Arc<Semaphore>>,
    in_engine: Arc<AtomicUsize>,
    eos: Arc<[u32]>,
}

impl Gate {
    /// A gate that admits one request at a time (`serial`) or every request.
    ///
    /// ```
    /// use mistralrs_hlg::server::Gate;
    /// assert!(Gate::new(true, vec![2]).is_serial());
    /// assert!(!Gate::new(false, vec![2]).is_serial());
    /// ```
    pub fn new(serial: bool, eos: Vec<u32>) -> Self {
        Gate {
            permits: serial.then(|| Arc::new(Semaphore::new(1))),
            in_engine: Arc::default(),
            eos: eos.into(),
        }
    }

    /// Whether requests are admitted one at a time.
    ///
    /// ```
    /// use mistralrs_hlg::server::Gate;
    /// assert!(!Gate::new(false, vec![]).is_serial());
    /// ```
    pub fn is_serial(&self) -> bool {
        self.permits.is_some()
    }

    /// How many admitted requests the engine has not yet let go of (for tests and
    /// monitoring: 0 means the engine holds no request of this server's routes).
    ///
    /// ```
    /// use mistralrs_hlg::server::Gate;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let gate = Gate::new(false, vec![]);
    /// let (a, b) = (gate.admit().await, gate.admit().await);
    /// assert_eq!(gate.in_engine(), 2, "not serial: both admitted");
    /// drop((a, b));
    /// assert_eq!(gate.in_engine(), 0);
    /// # });
    /// ```
    pub fn in_engine(&self) -> usize {
        self.in_engine.load(Ordering::SeqCst)
    }

    /// Waits for the engine's turn (in arrival order) and admits one request.
    ///
    /// ```
    /// use mistralrs_hlg::server::Gate;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let gate = Gate::new(true, vec![]);
    /// let mut a = gate.admit().await;
    /// a.finish();
    /// drop(a);
    /// assert_eq!(gate.in_engine(), 0);
    /// # });
    /// ```
    pub async fn admit(&self) -> Admission {
        let permit = match &self.permits {
            Some(s) => s.clone().acquire_owned().await.ok(),
            None => None,
        };
        self.in_engine.fetch_add(1, Ordering::SeqCst);
        Admission {
            permit,
            in_engine: self.in_engine.clone(),
            senders: None,
            receiver: None,
            cancel: Arc::new(CancelOnDrop {
                cancelled: AtomicBool::new(false),
                eos: self.eos.clone(),
            }),
            finished: false,
        }
    }
}

/// One admitted request. Dropping it before [`Admission::finish`] cancels the request's
/// generation (the client went away); either way the engine's turn passes on only once
/// the engine has dropped every sequence of the request.
///
/// A non-streamed request's receiver lives in the admission ([`Admission::hold`]) and is
/// drained to its end when the admission is dropped: mistral.rs 0.8.1 `unwrap`s the send
/// of an error to a sequence whose final response could not be delivered, so a receiver
/// dropped before the engine's last send panics the engine thread (and fails every
/// sequence of that step, other users' included). A streamed request's receiver goes
/// with its stream: the engine handles a failed chunk send by cancelling the sequence.
///
/// ```
/// use std::time::Duration;
/// use mistralrs_core::Response;
/// use mistralrs_hlg::server::Gate;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let gate = Gate::new(true, vec![]);
/// let mut a = gate.admit().await;
/// let (tx, rx) = tokio::sync::mpsc::channel::<Response>(1);
/// a.track(tx.downgrade());
/// a.finish();
/// drop(a);
/// tokio::time::sleep(Duration::from_millis(20)).await;
/// assert_eq!(gate.in_engine(), 1, "the engine still holds the request's sender");
/// drop((tx, rx));
/// while gate.in_engine() > 0 {
///     tokio::time::sleep(Duration::from_millis(5)).await;
/// }
/// # });
/// ```
pub struct Admission {
    permit: Option<OwnedSemaphorePermit>,
    in_engine: Arc<AtomicUsize>,
    senders: Option<WeakSender<Response>>,
    receiver: Option<Receiver<Response>>,
    cancel: Arc<CancelOnDrop>,
    finished: bool,
}

impl Admission {
    /// Watches a streamed request's response channel (`tx.downgrade()` of the sender
    /// given to the request): the turn passes on when the engine has dropped the last
    /// sender, i.e. every sequence of the request is done.
    ///
    /// ```
    /// use mistralrs_core::Response;
    /// use mistralrs_hlg::server::Gate;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let gate = Gate::new(false, vec![]);
    /// let mut a = gate.admit().await;
    /// let (tx, _rx) = tokio::sync::mpsc::channel::<Response>(1);
    /// a.track(tx.downgrade());
    /// drop(tx); // the engine let go of the request
    /// drop(a);
    /// assert_eq!(gate.in_engine(), 0);
    /// # });
    /// ```
    pub fn track(&mut self, senders: Senders) {
        self.senders = Some(senders);
    }

    /// Keeps a non-streamed request's receiver (see the type's docs); read it through
    /// [`Admission::receiver`].
    ///
    /// ```
    /// use mistralrs_core::Response;
    /// use mistralrs_hlg::server::Gate;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let gate = Gate::new(false, vec![]);
    /// let mut a = gate.admit().await;
    /// let (tx, rx) = tokio::sync::mpsc::channel::<Response>(1);
    /// a.hold(rx);
    /// drop(tx);
    /// assert!(a.receiver().recv().await.is_none());
    /// # });
    /// ```
    pub fn hold(&mut self, rx: Receiver<Response>) {
        self.receiver = Some(rx);
    }

    /// The receiver given to [`Admission::hold`].
    ///
    /// # Panics
    /// When none was given.
    ///
    /// ```
    /// use mistralrs_core::Response;
    /// use mistralrs_hlg::server::Gate;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut a = Gate::new(false, vec![]).admit().await;
    /// let (_tx, rx) = tokio::sync::mpsc::channel::<Response>(1);
    /// a.hold(rx);
    /// assert!(a.receiver().try_recv().is_err(), "nothing sent yet");
    /// # });
    /// ```
    pub fn receiver(&mut self) -> &mut Receiver<Response> {
        self.receiver.as_mut().expect("Admission::hold was called")
    }

    /// The logits processor that ends the request's sequences once the client is gone;
    /// install it on the request (last, after HLG).
    ///
    /// ```
    /// use candle_core::{Device, Tensor};
    /// use mistralrs_core::CustomLogitsProcessor;
    /// use mistralrs_hlg::server::Gate;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let gate = Gate::new(false, vec![1]); // token 1 ends a sequence
    /// let a = gate.admit().await;
    /// let p = a.canceller();
    /// let x = Tensor::new(&[0.5f32, 0.0, 2.0], &Device::Cpu)?;
    /// assert_eq!(p.apply(&x, &[])?.to_vec1::<f32>()?, [0.5, 0.0, 2.0]);
    /// drop(a); // the client went away before the response was delivered
    /// let y = p.apply(&x, &[])?.to_vec1::<f32>()?;
    /// assert!(y[1].is_finite() && y[0] == f32::NEG_INFINITY && y[2] == f32::NEG_INFINITY);
    /// # Ok::<(), candle_core::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn canceller(&self) -> Arc<dyn CustomLogitsProcessor> {
        self.cancel.clone()
    }

    /// The response was delivered: dropping this no longer cancels anything.
    ///
    /// ```
    /// use candle_core::{Device, Tensor};
    /// use mistralrs_core::CustomLogitsProcessor;
    /// use mistralrs_hlg::server::Gate;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut a = Gate::new(false, vec![1]).admit().await;
    /// let p = a.canceller();
    /// a.finish();
    /// drop(a);
    /// let x = Tensor::new(&[0.5f32, 0.0], &Device::Cpu)?;
    /// assert_eq!(p.apply(&x, &[])?.to_vec1::<f32>()?, [0.5, 0.0], "delivered: nothing cancelled");
    /// # Ok::<(), candle_core::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if !self.finished {
            self.cancel.cancelled.store(true, Ordering::SeqCst);
        }
        let permit = self.permit.take();
        let in_engine = self.in_engine.clone();
        let release = move || {
            drop(permit);
            in_engine.fetch_sub(1, Ordering::SeqCst);
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return release();
        };
        if let Some(mut rx) = self.receiver.take() {
            // `None` once the engine has dropped every sender: its sequences are gone.
            rt.spawn(async move {
                while rx.recv().await.is_some() {}
                release();
            });
            return;
        }
        let Some(weak) = self.senders.take().filter(|w| w.strong_count() > 0) else {
            return release();
        };
        // A delivered stream's sequences only wait for the engine's next step to be
        // dropped; a cancelled one ends at its next token. The limits only keep a sender
        // the engine never drops from stopping the server for good.
        let limit = if self.finished {
            Duration::from_secs(5)
        } else {
            Duration::from_secs(120)
        };
        rt.spawn(async move {
            let t0 = std::time::Instant::now();
            while weak.strong_count() > 0 {
                if t0.elapsed() > limit {
                    tracing::warn!("the engine still holds a finished or cancelled request after {limit:?}: admitting the next one");
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            release();
        });
    }
}

/// Installed on every request the server's routes send: a no-op until the client goes
/// away, then it forces the model's end-of-sequence token, so the sequence ends at its
/// next step (a streamed sequence also ends when the engine fails to send it a chunk).
/// With no end-of-sequence token known, a non-streamed sequence runs to its end.
///
/// Failing the step instead would be wrong twice over: mistral.rs 0.8.1 then ends every
/// sequence of the step with an error (other users' too), and `unwrap`s the send of that
/// error to each sequence's channel, which panics the engine thread when the client that
/// left has dropped its end.
struct CancelOnDrop {
    cancelled: AtomicBool,
    eos: Arc<[u32]>,
}

impl CustomLogitsProcessor for CancelOnDrop {
    fn apply(&self, logits: &Tensor, _context: &[u32]) -> candle_core::Result<Tensor> {
        if !self.cancelled.load(Ordering::Relaxed) || self.eos.is_empty() {
            return Ok(logits.clone());
        }
        force_tokens(logits, &self.eos)
    }
}

/// The end-of-sequence token ids a GGUF file declares (`tokenizer.ggml.eos_token_id`,
/// and the end-of-turn id where present); empty when the file has none.
///
/// ```
/// use mistralrs_hlg::server::engine::gguf_eos;
/// assert!(gguf_eos(std::path::Path::new("/no/such/model.gguf")).is_empty());
/// ```
pub fn gguf_eos(path: &std::path::Path) -> Vec<u32> {
    use candle_core::quantized::gguf_file::Content;
    let Ok(mut f) = std::fs::File::open(path) else {
        return vec![];
    };
    let Ok(content) = Content::read(&mut f) else {
        return vec![];
    };
    ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"]
        .iter()
        .filter_map(|k| content.metadata.get(*k).and_then(|v| v.to_u32().ok()))
        .collect()
}

/// A GGUF file's `general.architecture`, `None` when the file cannot be read.
///
/// ```
/// use mistralrs_hlg::server::engine::gguf_architecture;
/// assert_eq!(gguf_architecture(std::path::Path::new("/no/such/model.gguf")), None);
/// ```
pub fn gguf_architecture(path: &std::path::Path) -> Option<String> {
    use candle_core::quantized::gguf_file::Content;
    let mut f = std::fs::File::open(path).ok()?;
    let content = Content::read(&mut f).ok()?;
    let arch = content.metadata.get("general.architecture")?;
    arch.to_string().ok().cloned()
}

/// The end-of-sequence token ids a Hugging Face model directory declares
/// (`eos_token_id`, a number or a list, in `generation_config.json`, else `config.json`);
/// empty when neither has one.
///
/// ```
/// use mistralrs_hlg::server::engine::plain_eos;
/// let dir = std::env::temp_dir().join(format!("hlg-doc-eos-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// std::fs::write(dir.join("config.json"), r#"{"eos_token_id": 2}"#).unwrap();
/// assert_eq!(plain_eos(&dir), vec![2]);
/// std::fs::write(dir.join("generation_config.json"), r#"{"eos_token_id": [2, 7]}"#).unwrap();
/// assert_eq!(plain_eos(&dir), vec![2, 7]);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn plain_eos(dir: &std::path::Path) -> Vec<u32> {
    let ids = |file: &str| -> Option<Vec<u32>> {
        let text = std::fs::read_to_string(dir.join(file)).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        match &v["eos_token_id"] {
            serde_json::Value::Number(n) => n.as_u64().map(|n| vec![n as u32]),
            serde_json::Value::Array(a) => Some(
                a.iter()
                    .filter_map(|x| x.as_u64().map(|n| n as u32))
                    .collect(),
            ),
            _ => None,
        }
    };
    ids("generation_config.json")
        .or_else(|| ids("config.json"))
        .unwrap_or_default()
}

/// `resp` with `admission` held by its body: finished when the body has been read to its
/// end, cancelled when the body is dropped before (the client went away). Error events
/// of a stream come out in OpenAI's shape ([`crate::server::security`]).
///
/// ```
/// use axum::body::Body;
/// use mistralrs_hlg::server::{engine::guard_body, Gate};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let gate = Gate::new(true, vec![]);
/// let resp = axum::response::Response::new(Body::from("{\"ok\": true}"));
/// let resp = guard_body(resp, gate.admit().await);
/// assert_eq!(gate.in_engine(), 1);
/// let body = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
/// assert_eq!(&body[..], b"{\"ok\": true}");
/// assert_eq!(gate.in_engine(), 0, "read to its end: the turn passed on");
/// # });
/// ```
pub fn guard_body(
    resp: axum::response::Response,
    admission: Admission,
) -> axum::response::Response {
    use futures::StreamExt;
    let (parts, body) = resp.into_parts();
    let mut admission = Some(admission);
    let end = futures::stream::poll_fn(move |_| {
        if let Some(mut a) = admission.take() {
            a.finish();
        }
        std::task::Poll::Ready(None)
    });
    let stream = body
        .into_data_stream()
        .map(|f| f.map(crate::server::security::openai_sse_frame))
        .chain(end);
    axum::response::Response::from_parts(parts, axum::body::Body::from_stream(stream))
}

/// Upstream's router behind the gate: every `POST` that can reach the engine waits for
/// its turn, and its turn lasts until its response body is finished or dropped. The
/// inner call runs in its own task, whether the gate is serial or not, so a client that
/// leaves before the response starts neither ends the turn while upstream's handler
/// still waits on the engine nor drops the handler's receiver (which would panic the
/// engine at its last send; see [`Admission`]). A background response (`/v1/responses`
/// with `background: true`) keeps the turn until upstream reports it finished.
pub(crate) fn gated_upstream(upstream: axum::Router, gate: Gate) -> axum::Router {
    let inner = upstream.clone();
    upstream.layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let gate = gate.clone();
            let inner = inner.clone();
            async move {
                let engine_bound = req.method() == axum::http::Method::POST
                    && !req.uri().path().ends_with("/cancel");
                if !engine_bound {
                    return next.run(req).await;
                }
                let responses = req.uri().path() == "/v1/responses";
                let mut admission = gate.admit().await;
                admission.finish();
                let resp = match tokio::spawn(next.run(req)).await {
                    Ok(r) => r,
                    Err(e) => {
                        return super::security::openai_error(
                            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                            format!("the request's handler failed: {e}"),
                            None,
                        )
                    }
                };
                if responses {
                    return hold_while_background(resp, admission, inner).await;
                }
                guard_body(resp, admission)
            }
        },
    ))
}

/// For a `/v1/responses` answer: when it is a queued background response, keeps the
/// turn until upstream's `GET /v1/responses/{id}` reports it ended; otherwise as
/// [`guard_body`].
async fn hold_while_background(
    resp: axum::response::Response,
    admission: Admission,
    inner: axum::Router,
) -> axum::response::Response {
    let is_json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !is_json {
        return guard_body(resp, admission);
    }
    let (parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, 64 << 20).await {
        Ok(b) => b,
        Err(e) => {
            return super::security::openai_error(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("reading the response: {e}"),
                None,
            )
        }
    };
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let queued = v
        .get("status")
        .and_then(|s| s.as_str())
        .is_some_and(|s| s == "queued" || s == "in_progress");
    if let (true, Some(id)) = (
        queued,
        v.get("id").and_then(|i| i.as_str()).map(str::to_owned),
    ) {
        tokio::spawn(async move {
            let _turn = admission;
            while !background_ended(&inner, &id).await {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
    }
    axum::response::Response::from_parts(parts, axum::body::Body::from(bytes))
}

async fn background_ended(inner: &axum::Router, id: &str) -> bool {
    use tower::ServiceExt;
    let req =
        axum::http::Request::get(format!("/v1/responses/{id}")).body(axum::body::Body::empty());
    let Ok(req) = req else { return true };
    let Ok(resp) = inner.clone().oneshot(req).await;
    if !resp.status().is_success() {
        return true;
    }
    let Ok(bytes) = axum::body::to_bytes(resp.into_body(), 64 << 20).await else {
        return true;
    };
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    !matches!(
        v.get("status").and_then(|s| s.as_str()),
        Some("queued" | "in_progress")
    )
}
