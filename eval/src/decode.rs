//! Seeded samples from a model with this crate's forward pass ([`Net`]), many rows at
//! once: one pass over the prompt, its keys and values copied to every row, then one
//! batched step per token, each row drawing from its own stream through its own sampler.
//! Gemma 3 samples this way ([`super::gemma`]), and so can the engine's own GGUF
//! ([`super::onepass`]), which frees the embedded model's runs from the engine's pace.

use candle_core::IndexOp;
use rayon::prelude::*;

use super::generate::{draw, shape_of, SplitMix, Trace};
use super::metrics::log_sum_exp;
use super::net::{Cache, Net};
use super::sampler::{entropy_of, probs, Memory, Sampler};
use super::EvalError;

/// One sequence of a batched generation: its sampler, length bound and random stream.
#[derive(Clone)]
pub struct Row<'a> {
    /// The sampler.
    pub sampler: &'a Sampler,
    /// At most this many tokens.
    pub max_tokens: usize,
    /// The stream each token is drawn from.
    pub seed: SplitMix,
}

/// A row being generated.
struct Live {
    logits: Vec<f32>,
    seed: SplitMix,
    out: Vec<u32>,
    trace: Trace,
    /// The sampler's memory within the sequence (adaptive-p's running average).
    memory: Memory,
    done: bool,
}

/// Every row's tokens after `prompt` (not including a stop token) and trace, decoded as
/// one batch (one matrix product per weight per step): each row's sample is the one it
/// draws alone, up to the rounding of a product over more rows. A row ends at any of
/// `stops` or at its length bound, and leaves the batch.
pub fn decode_rows(
    net: &Net,
    prompt: &[u32],
    stops: &[u32],
    rows: &[Row<'_>],
) -> Result<Vec<(Vec<u32>, Trace)>, EvalError> {
    let rows: Vec<(usize, Row<'_>)> = rows.iter().map(|r| (0, r.clone())).collect();
    decode_across(net, &[prompt], stops, &rows)
}

/// [`decode_rows`] for rows after several prompts at once (`(prompt index, row)`): the
/// prompts read as one batch padded on the left ([`Net::forward_padded`]), each row then
/// continuing its prompt. A search scores a setting on many short prompts with a few
/// samples each; one batch over all of them reads the weights once per step instead of
/// once per prompt.
pub fn decode_across(
    net: &Net,
    prompts: &[&[u32]],
    stops: &[u32],
    rows: &[(usize, Row<'_>)],
) -> Result<Vec<(Vec<u32>, Trace)>, EvalError> {
    if prompts.iter().any(|p| p.is_empty()) || rows.iter().any(|(p, _)| *p >= prompts.len()) {
        return Err(EvalError::Invalid(
            "every sample needs a prompt of at least one token".into(),
        ));
    }
    let mut cache = Cache::default();
    let firsts = first_logits(net, prompts, &mut cache)?;
    let of: Vec<usize> = rows.iter().map(|(p, _)| *p).collect();
    cache.keep(&of).map_err(EvalError::engine)?;
    let rows: Vec<Row<'_>> = rows.iter().map(|(_, r)| r.clone()).collect();
    let mut live: Vec<Live> = rows
        .iter()
        .zip(&of)
        .map(|(r, &p)| Live {
            logits: firsts[p].clone(),
            seed: r.seed.clone(),
            out: vec![],
            trace: Trace::default(),
            memory: r.sampler.memory(),
            done: r.max_tokens == 0,
        })
        .collect();
    let rows = &rows[..];
    // The rows still in the batch, in the cache's order.
    let mut active: Vec<usize> = (0..rows.len()).filter(|&r| !live[r].done).collect();
    while !active.is_empty() {
        draw_rows(rows, stops, &mut live)?;
        let next: Vec<usize> = active.iter().copied().filter(|&r| !live[r].done).collect();
        if next.is_empty() {
            break;
        }
        if next.len() < active.len() {
            let kept: Vec<usize> = (0..active.len())
                .filter(|&i| !live[active[i]].done)
                .collect();
            cache.keep(&kept).map_err(EvalError::engine)?;
        }
        let tokens: Vec<u32> = next
            .iter()
            .map(|&r| *live[r].out.last().unwrap_or(&0))
            .collect();
        let stepped = net
            .forward(&tokens, tokens.len(), &mut cache)
            .and_then(|h| net.logits(&h))
            .and_then(|l| l.to_vec2::<f32>())
            .map_err(EvalError::engine)?;
        for (&r, logits) in next.iter().zip(stepped) {
            live[r].logits = logits;
        }
        active = next;
    }
    Ok(live.into_iter().map(|l| (l.out, l.trace)).collect())
}

/// The logits after each prompt, its keys and values into `cache` (one row each).
fn first_logits(
    net: &Net,
    prompts: &[&[u32]],
    cache: &mut Cache,
) -> Result<Vec<Vec<f32>>, EvalError> {
    match prompts {
        // One prompt: no padding, as every batch of one prompt's rows has always read.
        [one] => Ok(vec![net
            .forward(one, 1, cache)
            .and_then(|h| h.i(one.len() - 1..))
            .and_then(|h| net.logits(&h))
            .and_then(|l| l.squeeze(0)?.to_vec1())
            .map_err(EvalError::engine)?]),
        _ => net
            .forward_padded(prompts, 0, cache)
            .and_then(|h| net.logits(&h))
            .and_then(|l| l.to_vec2())
            .map_err(EvalError::engine),
    }
}

/// One token for each row not done (in parallel: each is a few passes over the
/// vocabulary), marking the rows that end.
fn draw_rows(rows: &[Row<'_>], stops: &[u32], live: &mut [Live]) -> Result<(), EvalError> {
    live.par_iter_mut()
        .enumerate()
        .filter(|(_, l)| !l.done)
        .try_for_each(|(r, l)| {
            let row = &rows[r];
            // Only the drawn token's base log-prob is kept: the normaliser and a copy of
            // the logits, not a vocabulary-wide log-softmax per row and step.
            let lse = log_sum_exp(&l.logits, 1.0).ok_or_else(|| {
                EvalError::Invalid("the model's logits have no finite value".into())
            })?;
            let base = l.logits.clone();
            row.sampler.transform_in(&mut l.logits, &mut l.memory);
            let q = probs(&l.logits, row.sampler.temperature());
            let h = entropy_of(&q);
            l.trace.entropy.push(h);
            l.trace.shape.push(shape_of(&base, lse, &q, h));
            let pick = draw(&q, l.seed.unit());
            row.sampler.accept(&mut l.memory, pick);
            // As log_softmax(base, 1)[pick], bit for bit (a drawn token is finite).
            l.trace.base_logprob.push(base[pick] as f64 - lse);
            if stops.contains(&(pick as u32)) {
                l.done = true;
            } else {
                l.out.push(pick as u32);
                l.done = l.out.len() >= row.max_tokens;
            }
            Ok(())
        })
}
