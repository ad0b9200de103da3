//! The gate: at most one request in the engine when its batched rows are wrong, and
//! the end of a request whose client left.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use candle_core::Tensor;
use mistralrs_core::{CustomLogitsProcessor, Response};
use tokio::sync::mpsc::{Receiver, WeakSender};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::probe::force_tokens;

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
/// use mistralrs_hlg::server::{Concurrency, Gate};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let gate = Gate::new(Concurrency::Serial, vec![]);
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

/// How many requests a [`Gate`] admits into the engine at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Concurrency {
    /// One request in the engine at a time.
    Serial,
    /// Every request at once: the engine batches them.
    Concurrent,
}

impl Gate {
    /// A gate that admits requests as `concurrency` says; `eos` are the tokens that end a
    /// sequence (a request's last step).
    ///
    /// ```
    /// use mistralrs_hlg::server::{Concurrency, Gate};
    /// assert!(Gate::new(Concurrency::Serial, vec![2]).is_serial());
    /// assert!(!Gate::new(Concurrency::Concurrent, vec![2]).is_serial());
    /// ```
    pub fn new(concurrency: Concurrency, eos: Vec<u32>) -> Self {
        Gate {
            permits: (concurrency == Concurrency::Serial).then(|| Arc::new(Semaphore::new(1))),
            in_engine: Arc::default(),
            eos: eos.into(),
        }
    }

    /// Whether requests are admitted one at a time.
    ///
    /// ```
    /// use mistralrs_hlg::server::{Concurrency, Gate};
    /// assert!(!Gate::new(Concurrency::Concurrent, vec![]).is_serial());
    /// ```
    pub fn is_serial(&self) -> bool {
        self.permits.is_some()
    }

    /// How many admitted requests the engine has not yet let go of (for tests and
    /// monitoring: 0 means the engine holds no request of this server's routes).
    ///
    /// ```
    /// use mistralrs_hlg::server::{Concurrency, Gate};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let gate = Gate::new(Concurrency::Concurrent, vec![]);
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
    /// use mistralrs_hlg::server::{Concurrency, Gate};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let gate = Gate::new(Concurrency::Serial, vec![]);
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
/// use mistralrs_hlg::server::{Concurrency, Gate};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let gate = Gate::new(Concurrency::Serial, vec![]);
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
    /// use mistralrs_hlg::server::{Concurrency, Gate};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let gate = Gate::new(Concurrency::Concurrent, vec![]);
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
    /// use mistralrs_hlg::server::{Concurrency, Gate};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let gate = Gate::new(Concurrency::Concurrent, vec![]);
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
    /// use mistralrs_hlg::server::{Concurrency, Gate};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut a = Gate::new(Concurrency::Concurrent, vec![]).admit().await;
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
    /// use mistralrs_hlg::server::{Concurrency, Gate};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let gate = Gate::new(Concurrency::Concurrent, vec![1]); // token 1 ends a sequence
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
    /// use mistralrs_hlg::server::{Concurrency, Gate};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut a = Gate::new(Concurrency::Concurrent, vec![1]).admit().await;
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
