//! The diversity lens: at matched mean per-token entropy, what each sampler's samples look
//! like. Every method's temperature is tuned on the captured logits (offline, by
//! bisection) so that its mean entropy equals plain temperature's at the target level;
//! then each samples the open-ended prompts, one `n = 1` request after another.

use serde::Serialize;

use super::capture::Capture;
use super::generate::{generate, Trace};
use super::metrics::TAIL;
use super::sampler::{match_entropy, mean_entropy, Sampler};
use super::text::{distinct_n, pooled_entropy, self_bleu, words};
use crate::config::RawValue;
use crate::{HlgConfig, ToeShape};

/// The baselines' fixed parameters: top-p's nucleus and min-p's ratio.
pub const TOP_P: f64 = 0.9;
/// See [`TOP_P`].
pub const MIN_P: f64 = 0.05;

/// The methods at one entropy level: plain temperature at `t`, and top-p, min-p and HLG
/// (each toe shape, the other knobs from `hlg`) at the temperature that gives them the
/// same mean entropy over `capture`. Returns each with its offline mean entropy.
pub fn matched(capture: &Capture, t: f64, hlg: &HlgConfig) -> anyhow::Result<Vec<(Sampler, f64)>> {
    let rows = || (0..capture.rows.len()).map(|i| capture.row(i));
    let plain = Sampler::Temperature { t };
    let target = mean_entropy(&plain, rows());
    let mut out = vec![(plain, target)];
    let mut others = vec![Sampler::TopP { t, p: TOP_P }, Sampler::MinP { t, min_p: MIN_P }];
    for shape in ToeShape::ALL {
        let mut cfg = hlg.clone();
        cfg.set("toe_shape", RawValue::Str(shape.name().into()))?;
        others.push(Sampler::Hlg { t, hlg: cfg.resolved(true) });
    }
    for s in others {
        let (tm, h) = match_entropy(&s, target, rows, 0.05, 8.0);
        out.push((s.at(tm), h));
    }
    Ok(out)
}

/// One method's samples and measures.
#[derive(Clone, Debug, Serialize)]
pub struct MethodResult {
    /// The sampler, at its matched temperature.
    pub sampler: Sampler,
    /// Its name.
    pub name: String,
    /// Mean entropy over the captured logits (what was matched).
    pub offline_entropy: f64,
    /// Mean entropy of the distributions actually sampled from.
    pub online_entropy: f64,
    /// Distinct-1/2/3 (per prompt over its samples, then the mean over prompts).
    pub distinct: [f64; 3],
    /// Mean self-BLEU-4 (lower: more diverse).
    pub self_bleu: f64,
    /// Entropy of the pooled word distribution per prompt, mean (nats).
    pub pooled_entropy: f64,
    /// Share of drawn tokens whose base probability is below 1e-4.
    pub tail_garbage_rate: f64,
    /// Mean base log-probability of the drawn tokens.
    pub mean_base_logprob: f64,
    /// Standard errors over prompts of distinct-2, self-BLEU and the tail-garbage rate.
    pub stderr: [f64; 3],
    /// Tokens scored.
    pub tokens: usize,
    /// The samples, per prompt.
    pub samples: Vec<Vec<String>>,
}

fn mean_se(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n.max(1.0);
    if v.len() < 2 {
        return (m, 0.0);
    }
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
    (m, (var / n).sqrt())
}

/// The measures of one method from its texts and traces (`texts[p][s]`).
pub fn measure(sampler: Sampler, offline_entropy: f64, texts: Vec<Vec<String>>, traces: &[Vec<Trace>]) -> MethodResult {
    let (mut d, mut sb, mut pe, mut tail) = ([vec![], vec![], vec![]], vec![], vec![], vec![]);
    let (mut ent, mut lp, mut tokens, mut garbage) = (vec![], vec![], 0usize, 0usize);
    for (p, samples) in texts.iter().enumerate() {
        let ws: Vec<Vec<String>> = samples.iter().map(|t| words(t)).collect();
        for (n, dn) in d.iter_mut().enumerate() {
            dn.push(distinct_n(&ws, n + 1));
        }
        sb.push(self_bleu(&ws));
        pe.push(pooled_entropy(&ws));
        let (mut pt, mut pg) = (0usize, 0usize);
        for tr in &traces[p] {
            ent.extend(&tr.entropy);
            lp.extend(&tr.base_logprob);
            pt += tr.base_logprob.len();
            pg += tr.tail_tokens();
        }
        tokens += pt;
        garbage += pg;
        tail.push(if pt > 0 { pg as f64 / pt as f64 } else { 0.0 });
    }
    let mean = |v: &[f64]| mean_se(v).0;
    debug_assert!(TAIL > 0.0);
    MethodResult {
        name: sampler.name(),
        sampler,
        offline_entropy,
        online_entropy: mean(&ent),
        distinct: [mean(&d[0]), mean(&d[1]), mean(&d[2])],
        self_bleu: mean(&sb),
        pooled_entropy: mean(&pe),
        tail_garbage_rate: if tokens > 0 { garbage as f64 / tokens as f64 } else { 0.0 },
        mean_base_logprob: mean(&lp),
        stderr: [mean_se(&d[1]).1, mean_se(&sb).1, mean_se(&tail).1],
        tokens,
        samples: texts,
    }
}

/// Samples every prompt `samples` times with `sampler` (one request after another) and
/// measures the result. `progress` after each generation.
pub async fn run_method(
    model: &mistralrs::Model,
    prompts: &[&str],
    sampler: &Sampler,
    offline_entropy: f64,
    samples: usize,
    max_tokens: usize,
    mut progress: impl FnMut(),
) -> anyhow::Result<MethodResult> {
    let (mut texts, mut traces) = (vec![], vec![]);
    for p in prompts {
        let (mut pt, mut ptr) = (vec![], vec![]);
        for _ in 0..samples {
            let (t, tr) = generate(model, p, sampler, max_tokens).await?;
            pt.push(t);
            ptr.push(tr);
            progress();
        }
        texts.push(pt);
        traces.push(ptr);
    }
    Ok(measure(sampler.clone(), offline_entropy, texts, &traces))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_from_known_samples() {
        let texts = vec![vec!["a b c".to_string(), "a b d".to_string()]];
        let traces = vec![vec![
            Trace { entropy: vec![1.0, 2.0], base_logprob: vec![-1.0, -20.0] },
            Trace { entropy: vec![3.0], base_logprob: vec![-3.0] },
        ]];
        let r = measure(Sampler::Temperature { t: 1.0 }, 2.0, texts, &traces);
        assert_eq!(r.tokens, 3);
        // One of three drawn tokens is below ln 1e-4 ≈ −9.2.
        assert!((r.tail_garbage_rate - 1.0 / 3.0).abs() < 1e-12);
        assert!((r.mean_base_logprob + 8.0).abs() < 1e-12);
        assert!((r.online_entropy - 2.0).abs() < 1e-12);
        // unigrams a b c a b d: 4 distinct of 6; bigrams ab bc ab bd: 3 of 4.
        assert!((r.distinct[0] - 4.0 / 6.0).abs() < 1e-12 && (r.distinct[1] - 0.75).abs() < 1e-12);
    }
}
