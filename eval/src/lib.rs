//! The evaluation (docs/RESULTS.md), as library code behind `mistralrs-hlg-eval …`: logit
//! capture on the embedded model, the KL characterisation of every knob, and the plots.
//! Outputs go under one directory (`eval-out/` by default). Results and the commands
//! that reproduce them: `docs/RESULTS.md`.

pub mod capture;
pub mod confirm;
pub mod decide;
pub mod decisive;
#[cfg(feature = "gemma")]
pub mod decode;
pub mod diversity;
mod error;
pub mod frontier;
#[cfg(feature = "gemma")]
pub mod gemma;
pub mod generate;
pub mod gold;
pub mod guardrail;
mod journal;
pub mod kl;
pub mod ledger;
pub mod lm;
pub mod metrics;
#[cfg(feature = "gemma")]
pub mod net;
#[cfg(feature = "gemma")]
pub mod onepass;
pub mod perf;
pub mod plot;
pub mod prompts;
#[cfg(feature = "gemma")]
pub mod qwen;
pub mod report;
pub mod sampler;
pub mod stats;
pub mod text;
pub mod verdict;

pub use error::EvalError;

/// What each prompt gets: how many samples, and how many tokens each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerPrompt {
    /// Samples per prompt.
    pub samples: usize,
    /// Tokens per sample, at most.
    pub max_tokens: usize,
}

#[cfg(feature = "gemma")]
/// CPU-bound work on a runtime thread, telling the runtime so (multi-threaded runtimes),
/// or inline on a current-thread runtime (the forward passes of `net`).
pub(crate) fn run_blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}
