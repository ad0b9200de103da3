//! The models the evaluation samples from and judges with, behind one interface: the
//! engine (the embedded model, or any GGUF mistral.rs loads) and Gemma 3 through candle.

#[cfg(feature = "gemma")]
use super::gemma::{Gemma, Row};
use super::generate::{self, Judged, SplitMix, Trace};
#[cfg(feature = "gemma")]
use super::onepass::OnePass;
#[cfg(feature = "gemma")]
use super::run_blocking;
use super::sampler::Sampler;
use super::EvalError;

/// A model to sample from or to judge with.
#[derive(Clone, Copy)]
pub enum Lm<'a> {
    /// Through the engine: the chat template, several sequences at once where the engine
    /// batches them correctly.
    Engine(&'a mistralrs::Model),
    /// Gemma 3 through this crate's forward pass on candle, many rows at once.
    #[cfg(feature = "gemma")]
    Gemma(&'a Gemma),
    /// The engine, judging in one pass through this crate's forward pass over the same
    /// weights ([`OnePass`]); everything else as [`Lm::Engine`].
    #[cfg(feature = "gemma")]
    EngineOnePass(&'a mistralrs::Model, &'a OnePass),
    /// The engine's model through this crate's forward pass for samples (many rows as
    /// one batch, [`OnePass::generate_rows`]) and judgements alike; the engine only for
    /// its tokenizer and whatever else [`Lm::Engine`] does.
    #[cfg(feature = "gemma")]
    EngineNet(&'a mistralrs::Model, &'a OnePass),
}

impl<'a> Lm<'a> {
    /// The model for everything but judging: the engine of an [`Lm::EngineOnePass`].
    fn plain(self) -> Self {
        match self {
            #[cfg(feature = "gemma")]
            Lm::EngineOnePass(m, _) | Lm::EngineNet(m, _) => Lm::Engine(m),
            other => other,
        }
    }

    /// The engine model, when this is one (with or without a one-pass judge).
    pub fn engine(self) -> Option<&'a mistralrs::Model> {
        match self {
            Lm::Engine(m) => Some(m),
            #[cfg(feature = "gemma")]
            Lm::EngineOnePass(m, _) | Lm::EngineNet(m, _) => Some(m),
            #[cfg(feature = "gemma")]
            Lm::Gemma(_) => None,
        }
    }

    /// A seeded sample (`generate::generate_seeded`, `Gemma::generate_seeded`).
    pub async fn generate_seeded(
        self,
        prompt: &str,
        sampler: &Sampler,
        max_tokens: usize,
        seed: SplitMix,
    ) -> Result<(String, Trace), EvalError> {
        #[cfg(feature = "gemma")]
        if let Lm::EngineNet(..) = self {
            let one = [(sampler, max_tokens, seed)];
            return Ok(self.generate_many(prompt, &one, 1).await?.remove(0));
        }
        match self.plain() {
            Lm::Engine(m) => generate::generate_seeded(m, prompt, sampler, max_tokens, seed).await,
            #[cfg(feature = "gemma")]
            Lm::Gemma(g) => run_blocking(|| g.generate_seeded(prompt, sampler, max_tokens, seed)),
            #[cfg(feature = "gemma")]
            Lm::EngineOnePass(..) | Lm::EngineNet(..) => unreachable!("plain() maps it to Engine"),
        }
    }

    /// The model's judgement of `continuation` after `prompt` (`generate::judge`,
    /// `Gemma::judge`).
    pub async fn judge(self, prompt: &str, continuation: &str) -> Result<Judged, EvalError> {
        match self {
            Lm::Engine(m) => generate::judge(m, prompt, continuation).await,
            #[cfg(feature = "gemma")]
            Lm::Gemma(g) => run_blocking(|| g.judge(prompt, continuation)),
            #[cfg(feature = "gemma")]
            Lm::EngineOnePass(m, o) | Lm::EngineNet(m, o) => o.judge(m, prompt, continuation).await,
        }
    }

    /// The base logits before each token of `continuation` read as the reply to
    /// `prompt` (teacher-forced), with those tokens.
    pub async fn forced_rows(
        self,
        prompt: &str,
        continuation: &str,
    ) -> Result<(Vec<u32>, Vec<Vec<f32>>), EvalError> {
        match self.plain() {
            Lm::Engine(m) => generate::forced_rows(m, prompt, continuation).await,
            #[cfg(feature = "gemma")]
            Lm::Gemma(g) => run_blocking(|| g.forced_rows(prompt, continuation)),
            #[cfg(feature = "gemma")]
            Lm::EngineOnePass(..) | Lm::EngineNet(..) => unreachable!("plain() maps it to Engine"),
        }
    }

    /// Seeded samples after one prompt, one per `(sampler, max tokens, seed)`, in order:
    /// on the engine, `batch` requests at once (sound only where the engine's batched
    /// rows equal single ones: the caller checks with the engine's probe); on Gemma, all
    /// as the rows of one batched decode.
    pub async fn generate_many(
        self,
        prompt: &str,
        rows: &[(&Sampler, usize, SplitMix)],
        batch: usize,
    ) -> Result<Vec<(String, Trace)>, EvalError> {
        #[cfg(feature = "gemma")]
        if let Lm::EngineNet(m, o) = self {
            // All of a prompt's rows as one batch, as Gemma's: `batch` bounds the engine.
            return o.generate_rows(m, prompt, &rows_of(rows)).await;
        }
        match self.plain() {
            Lm::Engine(_) => {
                let mut out = Vec::with_capacity(rows.len());
                for chunk in rows.chunks(batch.max(1)) {
                    let runs = chunk
                        .iter()
                        .map(|(s, n, seed)| self.generate_seeded(prompt, s, *n, seed.clone()));
                    for r in futures::future::join_all(runs).await {
                        out.push(r?);
                    }
                }
                Ok(out)
            }
            #[cfg(feature = "gemma")]
            Lm::Gemma(g) => run_blocking(|| g.generate_rows(prompt, &rows_of(rows))),
            #[cfg(feature = "gemma")]
            Lm::EngineOnePass(..) | Lm::EngineNet(..) => unreachable!("plain() maps it to Engine"),
        }
    }

    /// Seeded samples after several prompts, one per `(prompt index, sampler, max
    /// tokens, seed)`, in order: on Gemma and through the one pass ([`Lm::EngineNet`]),
    /// as the rows of one batched decode over all the prompts; on the engine, prompt by
    /// prompt through [`Lm::generate_many`].
    pub async fn generate_across(
        self,
        prompts: &[&str],
        rows: &[(usize, &Sampler, usize, SplitMix)],
        batch: usize,
    ) -> Result<Vec<(String, Trace)>, EvalError> {
        #[cfg(feature = "gemma")]
        {
            let batched: Vec<(usize, Row<'_>)> = rows
                .iter()
                .map(|&(p, sampler, max_tokens, ref seed)| {
                    let seed = seed.clone();
                    (
                        p,
                        Row {
                            sampler,
                            max_tokens,
                            seed,
                        },
                    )
                })
                .collect();
            match self {
                Lm::EngineNet(m, o) => return o.generate_across(m, prompts, &batched).await,
                Lm::Gemma(g) => return run_blocking(|| g.generate_across(prompts, &batched)),
                _ => {}
            }
        }
        let mut out = Vec::with_capacity(rows.len());
        for &(p, sampler, max_tokens, ref seed) in rows {
            let one = [(sampler, max_tokens, seed.clone())];
            out.extend(self.generate_many(prompts[p], &one, batch).await?);
        }
        Ok(out)
    }
}

/// The rows of a batched decode ([`Row`]) for `(sampler, max tokens, seed)` triples.
#[cfg(feature = "gemma")]
fn rows_of<'s>(rows: &[(&'s Sampler, usize, SplitMix)]) -> Vec<Row<'s>> {
    rows.iter()
        .map(|&(sampler, max_tokens, ref seed)| Row {
            sampler,
            max_tokens,
            seed: seed.clone(),
        })
        .collect()
}
