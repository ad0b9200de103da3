//! The diversity lens: at matched mean per-token entropy, what each sampler's samples look
//! like. Every method's temperature is tuned on the captured logits (offline, by
//! bisection) so that its mean entropy equals plain temperature's at the target level;
//! then each samples the open-ended prompts, one `n = 1` request after another.

use serde::{Deserialize, Serialize};

use super::capture::Capture;
use super::generate::{generate, Trace};
use super::sampler::{match_entropy, mean_entropy, Sampler};
use super::text::{distinct_n, pooled_entropy, self_bleu, words};
use super::{EvalError, PerPrompt};
use mistralrs_hlg::config::RawValue;
use mistralrs_hlg::{HlgConfig, ToeShape};

use super::sampler::{BASELINE_MIN_P, BASELINE_TOP_P};

/// The methods at one entropy level: plain temperature at `t`, and top-p, min-p and HLG
/// (each toe shape, the other knobs from `hlg`) at the temperature that gives them the
/// same mean entropy over `capture`. Returns each with its offline mean entropy.
pub fn matched(
    capture: &Capture,
    t: f64,
    hlg: &HlgConfig,
) -> Result<Vec<(Sampler, f64)>, EvalError> {
    let rows = || (0..capture.rows.len()).map(|i| capture.row(i));
    let plain = Sampler::Temperature { t };
    let target = mean_entropy(&plain, rows());
    let mut out = vec![(plain, target)];
    let mut others = vec![
        Sampler::TopP {
            t,
            p: BASELINE_TOP_P,
        },
        Sampler::MinP {
            t,
            min_p: BASELINE_MIN_P,
        },
    ];
    for shape in ToeShape::ALL {
        let mut cfg = hlg.clone();
        cfg.set("toe_shape", RawValue::Str(shape.name().into()))?;
        others.push(Sampler::Hlg {
            t,
            hlg: cfg.resolved(true),
        });
    }
    for s in others {
        let (tm, h) = match_entropy(&s, target, rows, 0.05, 8.0);
        out.push((s.at(tm), h));
    }
    Ok(out)
}

/// One method's samples and measures.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    let e = super::stats::Estimate::of(v);
    (e.mean, e.se)
}

/// The measures of one method from its texts and traces (`texts[p][s]`).
pub fn measure(
    sampler: Sampler,
    offline_entropy: f64,
    texts: Vec<Vec<String>>,
    traces: &[Vec<Trace>],
) -> MethodResult {
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
    MethodResult {
        name: sampler.name(),
        sampler,
        offline_entropy,
        online_entropy: mean(&ent),
        distinct: [mean(&d[0]), mean(&d[1]), mean(&d[2])],
        self_bleu: mean(&sb),
        pooled_entropy: mean(&pe),
        tail_garbage_rate: if tokens > 0 {
            garbage as f64 / tokens as f64
        } else {
            0.0
        },
        mean_base_logprob: mean(&lp),
        stderr: [mean_se(&d[1]).1, mean_se(&sb).1, mean_se(&tail).1],
        tokens,
        samples: texts,
    }
}

/// Samples every prompt `per.samples` times with `sampler` (one request after another)
/// and measures the result, `offline_entropy` being the entropy it was matched at.
/// `progress` after each generation.
pub async fn run_method(
    model: &mistralrs::Model,
    prompts: &[&str],
    (sampler, offline_entropy): (&Sampler, f64),
    PerPrompt {
        samples,
        max_tokens,
    }: PerPrompt,
    mut progress: impl FnMut(),
) -> Result<MethodResult, EvalError> {
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

/// Every entropy level measured into one output directory (`diversity.json`), by
/// increasing temperature: a run at one level adds itself to the levels already there,
/// so the frontier grows run by run.
pub type Doc = super::stats::Doc<DiversityLevel>;

/// The methods at one entropy level (plain temperature's mean entropy at `level`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DiversityLevel {
    /// The temperature whose plain-temperature entropy every method matches.
    pub level: f64,
    /// The methods' results.
    pub methods: Vec<MethodResult>,
}

#[derive(Deserialize)]
struct OneLevel {
    level: f64,
    prompts: usize,
    samples: usize,
    max_tokens: usize,
    methods: Vec<MethodResult>,
}

impl Doc {
    /// `previous` (a `diversity.json`, if any) with `level` added or replaced. A previous
    /// document of another size (prompts, samples, tokens) is not mixed in: the result
    /// then holds `level` alone, and `false` says so.
    pub fn merged(
        previous: Option<&str>,
        prompts: usize,
        samples: usize,
        max_tokens: usize,
        level: DiversityLevel,
    ) -> (Doc, bool) {
        let fresh = Doc {
            prompts,
            samples,
            max_tokens,
            levels: vec![],
        };
        let mut kept = true;
        let parse = |text: &str| {
            serde_json::from_str::<Doc>(text).or_else(|e| {
                // The one-level layout of earlier versions.
                serde_json::from_str::<OneLevel>(text)
                    .map_err(|_| e)
                    .map(|o| Doc {
                        prompts: o.prompts,
                        samples: o.samples,
                        max_tokens: o.max_tokens,
                        levels: vec![DiversityLevel {
                            level: o.level,
                            methods: o.methods,
                        }],
                    })
            })
        };
        let mut doc = match previous.map(parse) {
            Some(Ok(d))
                if (d.prompts, d.samples, d.max_tokens) == (prompts, samples, max_tokens) =>
            {
                d
            }
            Some(_) => {
                kept = false;
                fresh
            }
            None => fresh,
        };
        doc.levels.retain(|l| (l.level - level.level).abs() > 1e-9);
        doc.levels.push(level);
        doc.levels.sort_by(|a, b| a.level.total_cmp(&b.level));
        (doc, kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_accumulate_and_replace() {
        let r = measure(
            Sampler::Temperature { t: 0.8 },
            2.0,
            vec![vec!["a b".into()]],
            &[vec![Trace {
                entropy: vec![1.0],
                base_logprob: vec![-1.0],
                shape: vec![],
            }]],
        );
        let level = |l: f64| DiversityLevel {
            level: l,
            methods: vec![r.clone()],
        };
        let (d, kept) = Doc::merged(None, 24, 8, 16, level(1.0));
        assert!(kept);
        let json = serde_json::to_string(&d).unwrap();
        let (d, kept) = Doc::merged(Some(&json), 24, 8, 16, level(0.8));
        assert!(kept);
        assert_eq!(
            d.levels.iter().map(|l| l.level).collect::<Vec<_>>(),
            [0.8, 1.0]
        );
        let json = serde_json::to_string(&d).unwrap();
        let (d, _) = Doc::merged(Some(&json), 24, 8, 16, level(1.0));
        assert_eq!(d.levels.len(), 2, "the same level is replaced, not added");
        // Another size, or something unreadable: start over.
        let (d, kept) = Doc::merged(Some(&json), 8, 4, 16, level(0.6));
        assert!(!kept);
        assert_eq!(d.levels.len(), 1);
        let (d, kept) = Doc::merged(Some("{}"), 24, 8, 16, level(0.6));
        assert!(!kept && d.levels.len() == 1);
        // The one-level layout of earlier versions is read as one level.
        let old = serde_json::json!({"level": 0.8, "prompts": 24, "samples": 8, "max_tokens": 16, "methods": [r]}).to_string();
        let (d, kept) = Doc::merged(Some(&old), 24, 8, 16, level(1.0));
        assert!(kept);
        assert_eq!(
            d.levels.iter().map(|l| l.level).collect::<Vec<_>>(),
            [0.8, 1.0]
        );
    }

    #[test]
    fn measures_from_known_samples() {
        let texts = vec![vec!["a b c".to_string(), "a b d".to_string()]];
        let traces = vec![vec![
            Trace {
                entropy: vec![1.0, 2.0],
                base_logprob: vec![-1.0, -20.0],
                shape: vec![],
            },
            Trace {
                entropy: vec![3.0],
                base_logprob: vec![-3.0],
                shape: vec![],
            },
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
