//! Structured output that stops when its grammar is done.
//!
//! When a constrained request's grammar (`response_format`, `grammar`) has finished,
//! mistral.rs masks every token but llguidance's end-of-sequence token. llguidance takes
//! that token from the tokenizer's special tokens by name (`</s>`, `<|endoftext|>`,
//! `<|end_of_text|>`, `<eos>`, DeepSeek's `<｜end▁of▁sentence｜>`; token 0 when none is
//! there). The engine's own stop tokens are the chat template's end of turn (such as
//! `<|im_end|>`) and the model's EOS, which need not include it. So on 0.8.1 a finished
//! object is followed by that forced token again and again, skipped in the text, until
//! `max_tokens`: `finish_reason` `length`, the whole budget spent (measured on the
//! embedded model: `{"city": "Abuja"}` and 120 completion tokens). mistral.rs 0.9 lets
//! the model's end-of-turn tokens through beside it once the grammar may stop
//! (`pipeline/sampling.rs`), which ends the sequence, but only when one of those is drawn:
//! llguidance's token may be drawn a few times first, each counted as a completion token
//! (measured on tiny models: 5 or 6 tokens for a 3-token answer).
//!
//! The server makes llguidance's end token a stop token of every constrained request, on
//! both hosts: the forced token then ends the sequence at once, with `finish_reason`
//! `stop` and the completion tokens the text holds plus that one. The token ids are found
//! once, at start-up, by asking the engine's tokenizer.

use mistralrs_core::{
    Constraint, DetokenizationRequest, MistralRs, Request, StopTokens, TokenizationRequest,
};

/// The names llguidance (toktrie) reads as the end of sequence among a tokenizer's special
/// tokens.
pub const LLGUIDANCE_EOS_NAMES: [&str; 5] = [
    "</s>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<eos>",
    "<｜end▁of▁sentence｜>",
];

/// The engine tokenizer's special tokens that llguidance may force when a grammar is
/// done, as (id, text): those of [`LLGUIDANCE_EOS_NAMES`] the vocabulary holds as one
/// special token each, else token 0 when it is special (llguidance's fallback). Empty when
/// the engine cannot tokenize.
pub async fn llguidance_eos(mistralrs: &MistralRs) -> Vec<(u32, String)> {
    let mut found = vec![];
    for name in LLGUIDANCE_EOS_NAMES {
        if let Some(id) = special_token(mistralrs, name).await {
            found.push((id, name.to_string()));
        }
    }
    if found.is_empty() && is_special(mistralrs, 0).await {
        if let Some(text) = decode(mistralrs, 0, false).await {
            found.push((0, text));
        }
    }
    found
}

/// `name`'s id when the tokenizer reads it as one special token.
async fn special_token(mistralrs: &MistralRs, name: &str) -> Option<u32> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    let request = Request::Tokenize(TokenizationRequest {
        text: either::Either::Right(name.to_string()),
        tools: None,
        add_generation_prompt: false,
        add_special_tokens: false,
        enable_thinking: None,
        reasoning_effort: None,
        response: tx,
    });
    mistralrs.get_sender(None).ok()?.send(request).await.ok()?;
    let ids = rx.recv().await?.ok()?;
    match ids[..] {
        [id] if is_special(mistralrs, id).await => Some(id),
        _ => None,
    }
}

/// Whether `id` decodes to nothing with special tokens skipped.
async fn is_special(mistralrs: &MistralRs, id: u32) -> bool {
    decode(mistralrs, id, true)
        .await
        .is_some_and(|t| t.is_empty())
}

async fn decode(mistralrs: &MistralRs, id: u32, skip_special_tokens: bool) -> Option<String> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    let request = Request::Detokenize(DetokenizationRequest {
        tokens: vec![id],
        skip_special_tokens,
        response: tx,
    });
    mistralrs.get_sender(None).ok()?.send(request).await.ok()?;
    rx.recv().await?.ok()
}

/// Adds `stops` to a constrained request's stop tokens (by id, or by their text beside the
/// request's own stop strings). Requests without a grammar are left alone.
pub fn stop_when_done(request: &mut Request, stops: &[(u32, String)]) {
    let Request::Normal(normal) = request else {
        return;
    };
    if matches!(normal.constraint, Constraint::None) || stops.is_empty() {
        return;
    }
    let params = &mut normal.sampling_params;
    match params.stop_toks.take() {
        None => params.stop_toks = Some(StopTokens::Ids(stops.iter().map(|s| s.0).collect())),
        Some(StopTokens::Ids(mut ids)) => {
            ids.extend(
                stops
                    .iter()
                    .map(|s| s.0)
                    .filter(|id| !ids.contains(id))
                    .collect::<Vec<_>>(),
            );
            params.stop_toks = Some(StopTokens::Ids(ids));
        }
        Some(StopTokens::Seqs(mut seqs)) => {
            seqs.extend(stops.iter().map(|s| s.1.clone()));
            params.stop_toks = Some(StopTokens::Seqs(seqs));
        }
    }
}
