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

use super::generate::Judged;
use super::net::Net;
use super::EvalError;

/// The engine model's weights for one-pass judgements.
pub struct OnePass {
    net: Net,
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
        Ok(OnePass { net })
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
        let text = Either::Right(continuation.to_string());
        let cont = model
            .tokenize(text, None, false, false, None)
            .await
            .map_err(EvalError::engine)?;
        let logprobs = super::run_blocking(|| self.net.forced_logprobs(&context, &cont))
            .map_err(EvalError::engine)?;
        Ok(Judged { logprobs })
    }
}
