//! The engine model's judgement in one pass: the same GGUF file the engine serves, run
//! through the evaluation's own forward pass ([`Net`]), over the tokens the engine itself
//! reads (its chat template for the prompt, its tokenizer for the text). The engine's own
//! judge ([`super::generate::judge`]) forces a text one decode step per token; this reads
//! it in one pass, which makes judging another model's samples a small part of a run.
//! `tests/eval_smoke.rs` checks the two agree.

use std::path::Path;

use candle_core::quantized::gguf_file::Content;
use either::Either;
use mistralrs::{TextMessageRole, TextMessages};

use super::decode::{decode_across, Row};
use super::generate::{Judged, Trace};
use super::net::Net;
use super::EvalError;

/// The engine model's weights for one-pass judgements and batched samples.
pub struct OnePass {
    net: Net,
    /// The tokens a reply ends at (the GGUF's end-of-sequence token, as the engine ends).
    stops: Vec<u32>,
    /// The GGUF's beginning-of-sequence token: the context of [`OnePass::judge_plain`].
    bos: Option<u32>,
}

impl OnePass {
    /// Loads the GGUF file at `path` (the engine's model; `None`: the embedded one).
    pub fn load(path: Option<&Path>) -> Result<OnePass, EvalError> {
        let path = match path {
            Some(p) => p.to_path_buf(),
            None => mistralrs_hlg::model::ensure_default_model()?,
        };
        let mut file = std::fs::File::open(&path).map_err(EvalError::io("opening", &path))?;
        let ct = Content::read(&mut file).map_err(EvalError::engine)?;
        let net = Net::load(&ct, &mut file, None).map_err(EvalError::engine)?;
        let stops = match ct.metadata.get("tokenizer.ggml.eos_token_id") {
            Some(v) => vec![v.to_u32().map_err(EvalError::engine)?],
            None => vec![],
        };
        let bos = match ct.metadata.get("tokenizer.ggml.bos_token_id") {
            Some(v) => Some(v.to_u32().map_err(EvalError::engine)?),
            None => None,
        };
        Ok(OnePass { net, stops, bos })
    }

    /// The log-probability of each token of `text` as the start of a document: after the
    /// GGUF's beginning-of-sequence token, with no chat template, in one pass. How well a
    /// model predicts plain text, which compares judges across vocabularies (per byte).
    pub async fn judge_plain(
        &self,
        model: &mistralrs::Model,
        text: &str,
    ) -> Result<Judged, EvalError> {
        let bos = self.bos.ok_or_else(|| {
            EvalError::Invalid("the GGUF file names no beginning-of-sequence token".into())
        })?;
        self.forced_text(model, &[bos], text).await
    }

    /// `text` in the engine's tokens, each token's log-probability after `context` and
    /// the tokens before it, in one pass.
    async fn forced_text(
        &self,
        model: &mistralrs::Model,
        context: &[u32],
        text: &str,
    ) -> Result<Judged, EvalError> {
        let cont = model
            .tokenize(Either::Right(text.to_string()), None, false, false, None)
            .await
            .map_err(EvalError::engine)?;
        let logprobs = super::run_blocking(|| self.net.forced_logprobs(context, &cont))
            .map_err(EvalError::engine)?;
        Ok(Judged { logprobs })
    }

    /// The log-probability of each token of `continuation` as `model`'s reply to
    /// `prompt`, as [`super::generate::judge`] reads it, in one pass.
    pub async fn judge(
        &self,
        model: &mistralrs::Model,
        prompt: &str,
        continuation: &str,
    ) -> Result<Judged, EvalError> {
        let messages = TextMessages::new().add_message(TextMessageRole::User, prompt);
        let context = model
            .tokenize(Either::Left(messages), None, true, true, None)
            .await
            .map_err(EvalError::engine)?;
        self.forced_text(model, &context, continuation).await
    }

    /// Seeded samples of `model`'s reply to `prompt`, one per row, decoded as one batch
    /// through this crate's forward pass over the tokens the engine reads (its chat
    /// template), and read back into text by the engine's tokenizer ([`Self::generate_across`]).
    pub async fn generate_rows(
        &self,
        model: &mistralrs::Model,
        prompt: &str,
        rows: &[Row<'_>],
    ) -> Result<Vec<(String, Trace)>, EvalError> {
        let rows: Vec<(usize, Row<'_>)> = rows.iter().map(|r| (0, r.clone())).collect();
        self.generate_across(model, &[prompt], &rows).await
    }

    /// Seeded samples after several prompts at once (`(prompt index, row)`), decoded as
    /// one batch ([`decode_across`]) over the tokens the engine reads (its chat template),
    /// and read back into text by the engine's tokenizer. What the engine would draw from
    /// the same streams, up to the engine computing in F16 where this computes in f32.
    pub async fn generate_across(
        &self,
        model: &mistralrs::Model,
        prompts: &[&str],
        rows: &[(usize, Row<'_>)],
    ) -> Result<Vec<(String, Trace)>, EvalError> {
        let mut contexts = Vec::with_capacity(prompts.len());
        for prompt in prompts {
            let messages = TextMessages::new().add_message(TextMessageRole::User, *prompt);
            contexts.push(
                model
                    .tokenize(Either::Left(messages), None, true, true, None)
                    .await
                    .map_err(EvalError::engine)?,
            );
        }
        let contexts: Vec<&[u32]> = contexts.iter().map(|c| c.as_slice()).collect();
        let done = super::run_blocking(|| decode_across(&self.net, &contexts, &self.stops, rows))?;
        let mut out = Vec::with_capacity(done.len());
        for (ids, trace) in done {
            let text = model
                .detokenize(ids, true)
                .await
                .map_err(EvalError::engine)?;
            out.push((text, trace));
        }
        Ok(out)
    }
}
