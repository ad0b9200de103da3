//! Performance A/B: end-to-end decode speed and time to first token with HLG on, off, and
//! the host's own top-p and min-p, on the same prompts, the methods alternated within each round so
//! that drifts of a shared machine fall on all of them alike.

use std::time::Instant;

use mistralrs::{RequestBuilder, TextMessageRole};
use serde::Serialize;

use super::{EvalError, PerPrompt};
use mistralrs_hlg::processor::HlgRequestExt;
use mistralrs_hlg::HlgCurve;

/// The methods of the A/B.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    /// Plain temperature (top-k, top-p, min-p off): HLG off.
    Off,
    /// HLG through the production processor (`HlgRequestExt::with_hlg`).
    Hlg,
    /// The host's top-p 0.9.
    TopP,
    /// The host's min-p 0.05.
    MinP,
}

impl Arm {
    /// Every arm.
    pub const ALL: [Arm; 4] = [Arm::Off, Arm::Hlg, Arm::TopP, Arm::MinP];
}

/// One request's timings.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    /// The arm.
    pub arm: Arm,
    /// Tokens generated.
    pub tokens: usize,
    /// Wall time of the whole request, seconds.
    pub wall_s: f64,
    /// The engine's prompt (prefill) time, seconds: the time to first token but for one
    /// decode step.
    pub prompt_s: f64,
    /// The engine's decode rate, tokens/s.
    pub decode_tok_s: f64,
}

/// Per arm: the median over rounds of the decode rate and the prompt time, and each
/// arm's decode rate over `Off`'s, as medians of the per-round ratios.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The arm.
    pub arm: Arm,
    /// Median decode tokens/s.
    pub decode_tok_s: f64,
    /// Median prompt time, ms.
    pub prompt_ms: f64,
    /// Median wall time per token, ms.
    pub wall_ms_per_token: f64,
    /// Median of per-round (this arm's decode rate / Off's).
    pub decode_ratio_to_off: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        0.5 * (v[v.len() / 2 - 1] + v[v.len() / 2])
    }
}

/// Per arm, the medians over rounds (each round's value the mean over its prompts).
pub fn summarise(all: &[Vec<Timing>]) -> Vec<Summary> {
    let per_round = |round: &[Timing], arm: Arm, f: fn(&Timing) -> f64| {
        let v: Vec<f64> = round.iter().filter(|s| s.arm == arm).map(f).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    Arm::ALL
        .iter()
        .map(|&arm| Summary {
            arm,
            decode_tok_s: median(
                all.iter()
                    .map(|r| per_round(r, arm, |s| s.decode_tok_s))
                    .collect(),
            ),
            prompt_ms: median(
                all.iter()
                    .map(|r| per_round(r, arm, |s| s.prompt_s * 1e3))
                    .collect(),
            ),
            wall_ms_per_token: median(
                all.iter()
                    .map(|r| per_round(r, arm, |s| s.wall_s * 1e3 / s.tokens.max(1) as f64))
                    .collect(),
            ),
            decode_ratio_to_off: median(
                all.iter()
                    .map(|r| {
                        per_round(r, arm, |s| s.decode_tok_s)
                            / per_round(r, Arm::Off, |s| s.decode_tok_s)
                    })
                    .collect(),
            ),
        })
        .collect()
}

/// The request one arm sends.
fn request(arm: Arm, prompt: &str, curve: HlgCurve, t: f64, max_tokens: usize) -> RequestBuilder {
    let base = RequestBuilder::new()
        .add_message(TextMessageRole::User, prompt)
        .set_sampler_max_len(max_tokens);
    match arm {
        Arm::Off => base
            .set_sampler_temperature(t)
            .set_sampler_topk(0)
            .set_sampler_topp(1.0)
            .set_sampler_minp(0.0),
        Arm::Hlg => base.with_hlg(curve, t),
        Arm::TopP => base
            .set_sampler_temperature(t)
            .set_sampler_topk(0)
            .set_sampler_topp(0.9)
            .set_sampler_minp(0.0),
        Arm::MinP => base
            .set_sampler_temperature(t)
            .set_sampler_topk(0)
            .set_sampler_topp(1.0)
            .set_sampler_minp(0.05),
    }
}

/// `per.samples` rounds over `prompts`; in each round every arm runs every prompt, in an
/// order rotated by the round. Sampling with `curve` at temperature `t`, `per.max_tokens`
/// tokens.
pub async fn run(
    model: &mistralrs::Model,
    prompts: &[&str],
    (curve, t): (HlgCurve, f64),
    PerPrompt {
        samples: rounds,
        max_tokens,
    }: PerPrompt,
    mut progress: impl FnMut(),
) -> Result<(Vec<Vec<Timing>>, Vec<Summary>), EvalError> {
    let mut all = vec![];
    for r in 0..rounds {
        let mut round = vec![];
        for k in 0..Arm::ALL.len() {
            let arm = Arm::ALL[(k + r) % Arm::ALL.len()];
            for p in prompts {
                let req = request(arm, p, curve, t, max_tokens);
                let start = Instant::now();
                let resp = model
                    .send_chat_request(req)
                    .await
                    .map_err(EvalError::engine)?;
                let wall_s = start.elapsed().as_secs_f64();
                let u = &resp.usage;
                round.push(Timing {
                    arm,
                    tokens: u.completion_tokens,
                    wall_s,
                    prompt_s: u.total_prompt_time_sec as f64,
                    decode_tok_s: u.avg_compl_tok_per_sec as f64,
                });
                progress();
            }
        }
        all.push(round);
    }
    let summary = summarise(&all);
    Ok((all, summary))
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(super::median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
