//! The models the evaluation samples from and judges with, behind one interface: the
//! engine (the embedded model, or any GGUF mistral.rs loads) and Gemma 3 through candle.

#[cfg(feature = "gemma")]
use std::sync::Mutex;

#[cfg(feature = "gemma")]
use super::gemma::Gemma;
use super::generate::{self, Judged, SplitMix, Trace};
use super::sampler::Sampler;
use super::EvalError;

/// A model to sample from or to judge with.
#[derive(Clone, Copy)]
pub enum Lm<'a> {
    /// Through the engine: the chat template, several sequences at once where the engine
    /// batches them correctly.
    Engine(&'a mistralrs::Model),
    /// Gemma 3 through candle, one sequence at a time.
    #[cfg(feature = "gemma")]
    Gemma(&'a Mutex<Gemma>),
}

impl Lm<'_> {
    /// A seeded sample (`generate::generate_seeded`, `Gemma::generate_seeded`).
    pub async fn generate_seeded(
        self,
        prompt: &str,
        sampler: &Sampler,
        max_tokens: usize,
        seed: SplitMix,
    ) -> Result<(String, Trace), EvalError> {
        match self {
            Lm::Engine(m) => generate::generate_seeded(m, prompt, sampler, max_tokens, seed).await,
            #[cfg(feature = "gemma")]
            Lm::Gemma(g) => {
                run_blocking(|| lock(g)?.generate_seeded(prompt, sampler, max_tokens, seed))
            }
        }
    }

    /// The model's judgement of `continuation` after `prompt` (`generate::judge`,
    /// `Gemma::judge`).
    pub async fn judge(self, prompt: &str, continuation: &str) -> Result<Judged, EvalError> {
        match self {
            Lm::Engine(m) => generate::judge(m, prompt, continuation).await,
            #[cfg(feature = "gemma")]
            Lm::Gemma(g) => run_blocking(|| lock(g)?.judge(prompt, continuation)),
        }
    }

    /// Whether several generations may be sent at once (the engine decides with its
    /// probe; candle's Gemma runs one sequence at a time).
    pub fn batches(self) -> bool {
        matches!(self, Lm::Engine(_))
    }
}

#[cfg(feature = "gemma")]
fn lock(g: &Mutex<Gemma>) -> Result<std::sync::MutexGuard<'_, Gemma>, EvalError> {
    g.lock()
        .map_err(|_| EvalError::Invalid("an earlier Gemma call panicked".into()))
}

#[cfg(feature = "gemma")]
/// CPU-bound work on a runtime thread, telling the runtime so (multi-threaded runtimes),
/// or inline on a current-thread runtime.
fn run_blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}
