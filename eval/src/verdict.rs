//! The cross-judged evaluation's verdict (docs/EVALUATION.md, the protocol written before
//! its runs): at a level, each method's measures interpolated to plain temperature's
//! online entropy from its runs at several temperatures, HLG against every other family
//! paired prompt by prompt, with bootstrap intervals corrected for the number of
//! comparisons, and the win / tie / lose rule.

use super::confirm::{per_prompt, Planned, PromptMeasures, Sample};
use super::frontier::Family;
use super::generate::SplitMix;
use serde::Serialize;

/// The guards of the rule: HLG's distinct-2 may be lower by at most this much…
pub const DISTINCT2_GUARD: f64 = 0.01;
/// …and its non-word rate higher by at most this much.
pub const NON_WORD_GUARD: f64 = 0.005;
/// The family-wise error rate of the intervals.
pub const ALPHA: f64 = 0.05;
/// The levels one model's verdict spans (T = 0.8, 1.0, 1.3): the protocol corrects over
/// every comparison of a model, families × levels × measures, so a level's intervals are
/// as wide before the other levels have run as after.
pub const LEVELS: usize = 3;
/// Measures the pre-registered rule corrects over (judged log-prob per token, distinct-2,
/// non-word rate).
pub const MEASURES: usize = 3;
/// The judged log-prob per byte is a fourth measure, added after the runs (the per-token
/// mean fails at high entropy: docs/NOTES.md); its intervals are corrected as if the
/// protocol had had four measures from the start.
pub const MEASURES_WITH_PER_BYTE: usize = MEASURES + 1;
/// What the seed of the per-byte measure's resamples differs from the rule's by.
const PER_BYTE_STREAM: u64 = 0x9e37_79b9_7f4a_7c15;
/// Bootstrap resamples per comparison.
pub const RESAMPLES: usize = 20_000;
/// Fewer paired prompts than this get no verdict: a bootstrap over a handful of prompts
/// has too few distinct resamples for its tails.
pub const MIN_PROMPTS: usize = 10;

/// A method's per-prompt measures at the target online entropy.
#[derive(Clone, Debug, Serialize)]
pub struct Matched {
    /// `family knob`.
    pub name: String,
    /// Its family.
    pub family: Family,
    /// Its variants' mean online entropies, by temperature scale.
    pub entropies: Vec<(f64, f64)>,
    /// Whether its variants' entropies bracket the target (else the two nearest are
    /// extrapolated from).
    pub bracketed: bool,
    /// Per prompt index: (judged log-prob per token, distinct-2, non-word rate, judged
    /// log-prob per byte), interpolated.
    pub prompts: Vec<(usize, [f64; 4])>,
}

/// One paired comparison: HLG's setting minus another family's, on one measure.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The HLG setting.
    pub hlg: String,
    /// The other method.
    pub other: String,
    /// Prompts both have.
    pub prompts: usize,
    /// Per measure (judged log-prob, distinct-2, non-word rate): the mean paired
    /// difference and its corrected interval.
    pub diffs: [(f64, f64, f64); 3],
    /// The judged log-prob difference's two-sided bootstrap p-value, Bonferroni-adjusted
    /// like the intervals (× the model's comparisons × 3 measures, at most 1).
    pub p_adjusted: f64,
    /// The rule's verdict.
    pub verdict: Verdict,
    /// The judged log-prob per byte: the mean paired difference and its interval,
    /// corrected over [`MEASURES_WITH_PER_BYTE`] measures (a sensitivity measure added
    /// after the runs; the pre-registered `diffs` and `verdict` are unchanged by it).
    pub per_byte: (f64, f64, f64),
    /// Its p-value, adjusted the same way.
    pub p_adjusted_per_byte: f64,
    /// The rule with the judged log-prob per byte in place of the one per token.
    pub verdict_per_byte: Verdict,
}

/// The rule's outcome for one comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Higher judged log-prob, both guards held.
    Win,
    /// Neither.
    Tie,
    /// Lower judged log-prob, or a guard failed.
    Lose,
    /// Fewer than [`MIN_PROMPTS`] prompts: no verdict.
    TooFew,
}

/// The measures a verdict reads from one prompt.
fn measures(m: &PromptMeasures) -> [f64; 4] {
    [
        m.judged_logprob,
        m.distinct[1],
        m.non_word_rate,
        m.judged_logprob_per_byte,
    ]
}

/// Every method of `plan` (with its temperature variants) at the target online entropy:
/// plain temperature's at scale 1. `runs[i]` are `plan[i]`'s samples.
pub fn match_entropy(
    plan: &[Planned],
    runs: &[Vec<Sample>],
    prompts: &[&str],
    samples: usize,
) -> Option<(f64, Vec<Matched>)> {
    let pp: Vec<Vec<(usize, PromptMeasures)>> = runs
        .iter()
        .map(|r| per_prompt(r, prompts, samples))
        .collect();
    let mean_entropy = |i: usize| {
        let p = &pp[i];
        (!p.is_empty()).then(|| p.iter().map(|(_, m)| m.entropy).sum::<f64>() / p.len() as f64)
    };
    let reference = plan
        .iter()
        .position(|m| m.family == Family::Temperature && m.t_scale == 1.0)?;
    let target = mean_entropy(reference)?;
    let mut names: Vec<String> = plan.iter().map(Planned::name).collect();
    names.dedup();
    let matched = names
        .into_iter()
        .filter_map(|name| {
            let idx: Vec<usize> = (0..plan.len())
                .filter(|&i| plan[i].name() == name)
                .collect();
            let family = plan[idx[0]].family;
            let mut pts: Vec<(f64, f64, usize)> = idx
                .iter()
                .filter_map(|&i| Some((plan[i].t_scale, mean_entropy(i)?, i)))
                .collect();
            pts.sort_by(|a, b| a.1.total_cmp(&b.1));
            interpolate(name, family, &pts, target, &pp)
        })
        .collect();
    Some((target, matched))
}

/// The measures at `target` entropy from the variants `pts` (scale, entropy, index),
/// sorted by entropy: linear between the two that bracket it, else from the two nearest.
fn interpolate(
    name: String,
    family: Family,
    pts: &[(f64, f64, usize)],
    target: f64,
    pp: &[Vec<(usize, PromptMeasures)>],
) -> Option<Matched> {
    let entropies = pts.iter().map(|p| (p.0, p.1)).collect();
    let (a, b, bracketed) = match pts.len() {
        0 => return None,
        // One run: its own values, bracketed only when it sits on the target.
        1 => (pts[0], pts[0], (pts[0].1 - target).abs() < 1e-12),
        _ => {
            let k = pts
                .iter()
                .position(|p| p.1 >= target)
                .unwrap_or(pts.len() - 1)
                .max(1);
            let bracketed = pts[0].1 <= target && target <= pts[pts.len() - 1].1;
            (pts[k - 1], pts[k], bracketed)
        }
    };
    let w = if b.1 > a.1 {
        (target - a.1) / (b.1 - a.1)
    } else {
        0.0
    };
    let prompts = pp[a.2]
        .iter()
        .filter_map(|(p, ma)| {
            let (_, mb) = pp[b.2].iter().find(|(q, _)| q == p)?;
            let (va, vb) = (measures(ma), measures(mb));
            Some((*p, [0, 1, 2, 3].map(|i| va[i] + w * (vb[i] - va[i]))))
        })
        .collect();
    Some(Matched {
        name,
        family,
        entropies,
        bracketed,
        prompts,
    })
}

/// Mean of the paired differences and its percentile bootstrap interval at
/// `1 − alpha`, resampling prompts; and the two-sided bootstrap p-value of "no
/// difference".
pub(crate) fn bootstrap(d: &[f64], alpha: f64, rng: &mut SplitMix) -> (f64, f64, f64, f64) {
    let n = d.len();
    let mean = d.iter().sum::<f64>() / n as f64;
    let mut means: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            (0..n)
                .map(|_| d[(rng.next_u64() % n as u64) as usize])
                .sum::<f64>()
                / n as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let q = |f: f64| means[((f * RESAMPLES as f64) as usize).min(RESAMPLES - 1)];
    let below = means.iter().filter(|&&m| m <= 0.0).count() as f64 / RESAMPLES as f64;
    let above = means.iter().filter(|&&m| m >= 0.0).count() as f64 / RESAMPLES as f64;
    let p = (2.0 * below.min(above)).min(1.0);
    (mean, q(alpha / 2.0), q(1.0 - alpha / 2.0), p)
}

/// [`bootstrap`] from its own stream, seeded by `seed`: the decisive evaluation's
/// intervals (`eval::decide`), the same resampling as this verdict's.
pub fn bootstrap_interval(d: &[f64], alpha: f64, seed: u64) -> (f64, f64, f64, f64) {
    bootstrap(d, alpha, &mut SplitMix(seed))
}

/// The rule on one comparison's corrected intervals.
pub fn rule(diffs: &[(f64, f64, f64); 3]) -> Verdict {
    let [(_, lp_lo, lp_hi), (_, d2_lo, d2_hi), (_, nw_lo, nw_hi)] = *diffs;
    if lp_hi < 0.0 || d2_hi < -DISTINCT2_GUARD || nw_lo > NON_WORD_GUARD {
        Verdict::Lose
    } else if lp_lo > 0.0 && d2_lo > -DISTINCT2_GUARD && nw_hi < NON_WORD_GUARD {
        Verdict::Win
    } else {
        Verdict::Tie
    }
}

/// Every HLG setting against every method of another family, at one level of a verdict
/// spanning `levels` levels: intervals at `ALPHA` over the model's comparisons (HLG
/// settings × other methods × `levels`) × 3 measures, Bonferroni (simultaneous; at least
/// as wide as Holm's step-down, whose first step it is), and the judged log-prob's p-value
/// adjusted the same way. The judged log-prob per byte is corrected over 4 measures and
/// resampled from its own stream, so that the pre-registered intervals are the ones the
/// protocol computed before it existed.
pub fn compare(matched: &[Matched], levels: usize, seed: u64) -> Vec<Comparison> {
    let hlg: Vec<&Matched> = matched.iter().filter(|m| m.family == Family::Hlg).collect();
    let others: Vec<&Matched> = matched.iter().filter(|m| m.family != Family::Hlg).collect();
    let comparisons = hlg.len() * others.len() * levels.max(1);
    let m = (comparisons * MEASURES).max(1);
    let m_per_byte = (comparisons * MEASURES_WITH_PER_BYTE).max(1);
    let alpha = ALPHA / m as f64;
    let mut rng = SplitMix(seed);
    let mut rng_per_byte = SplitMix(seed ^ PER_BYTE_STREAM);
    let mut out: Vec<Comparison> = vec![];
    for h in &hlg {
        for o in &others {
            let paired: Vec<([f64; 4], [f64; 4])> = h
                .prompts
                .iter()
                .filter_map(|(p, a)| {
                    o.prompts
                        .iter()
                        .find(|(q, _)| q == p)
                        .map(|(_, b)| (*a, *b))
                })
                .collect();
            if paired.len() < 2 {
                continue;
            }
            let mut diffs = [(0.0, 0.0, 0.0); 3];
            let mut p_lp = 1.0;
            for (k, d) in diffs.iter_mut().enumerate() {
                let v: Vec<f64> = paired.iter().map(|(a, b)| a[k] - b[k]).collect();
                let (mean, lo, hi, p) = bootstrap(&v, alpha, &mut rng);
                *d = (mean, lo, hi);
                if k == 0 {
                    p_lp = p;
                }
            }
            let v: Vec<f64> = paired.iter().map(|(a, b)| a[3] - b[3]).collect();
            let (mean, lo, hi, p) = bootstrap(&v, ALPHA / m_per_byte as f64, &mut rng_per_byte);
            let per_byte = (mean, lo, hi);
            let judge = |d: &[(f64, f64, f64); 3]| match paired.len() {
                n if n < MIN_PROMPTS => Verdict::TooFew,
                _ => rule(d),
            };
            out.push(Comparison {
                hlg: h.name.clone(),
                other: o.name.clone(),
                prompts: paired.len(),
                verdict: judge(&diffs),
                verdict_per_byte: judge(&[per_byte, diffs[1], diffs[2]]),
                diffs,
                p_adjusted: (p_lp * m as f64).min(1.0),
                per_byte,
                p_adjusted_per_byte: (p * m_per_byte as f64).min(1.0),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_reads_the_intervals() {
        let ok = (0.0, -0.005, 0.005);
        let quiet = (0.0, -0.001, 0.001);
        assert_eq!(rule(&[(0.2, 0.1, 0.3), ok, quiet]), Verdict::Win);
        assert_eq!(rule(&[(0.2, -0.1, 0.3), ok, quiet]), Verdict::Tie);
        assert_eq!(rule(&[(-0.2, -0.3, -0.1), ok, quiet]), Verdict::Lose);
        // Better log-prob, but distinct-2 surely lower by more than the guard: a loss.
        assert_eq!(
            rule(&[(0.2, 0.1, 0.3), (-0.05, -0.06, -0.02), quiet]),
            Verdict::Lose
        );
        // Better log-prob, distinct-2 possibly too low: a tie.
        assert_eq!(
            rule(&[(0.2, 0.1, 0.3), (-0.01, -0.02, 0.0), quiet]),
            Verdict::Tie
        );
        // Non-word rate surely higher by more than the guard: a loss.
        assert_eq!(
            rule(&[(0.2, 0.1, 0.3), ok, (0.02, 0.01, 0.03)]),
            Verdict::Lose
        );
    }

    #[test]
    fn bootstrap_intervals_cover_the_mean_and_shrink_with_alpha() {
        let d: Vec<f64> = (0..24)
            .map(|i| 0.1 + 0.01 * f64::from(i % 5) - 0.02)
            .collect();
        let (mean, lo, hi, p) = bootstrap(&d, 0.05, &mut SplitMix(1));
        assert!(lo < mean && mean < hi && lo > 0.0, "{lo} {mean} {hi}");
        assert_eq!(p, 0.0);
        let (_, lo2, hi2, _) = bootstrap(&d, 0.001, &mut SplitMix(1));
        assert!(lo2 <= lo && hi2 >= hi);
        // Centred on zero: p large.
        let z: Vec<f64> = (0..24).map(|i| f64::from(i % 2) * 2.0 - 1.0).collect();
        assert!(bootstrap(&z, 0.05, &mut SplitMix(2)).3 > 0.5);
    }

    /// Two samples of prompt "p" whose steps have entropy `h` and judged log-prob `lp`.
    fn run(h: f64, lp: f64) -> Vec<Sample> {
        (0..2)
            .map(|k| Sample {
                prompt: 0,
                prompt_text: "p".into(),
                sample: k,
                text: ["a b", "c d"][k].into(),
                trace: crate::generate::Trace {
                    entropy: vec![h; 3],
                    base_logprob: vec![-1.0; 3],
                    shape: vec![],
                },
                judged: Some(crate::generate::Judged {
                    logprobs: vec![lp; 4],
                }),
            })
            .collect()
    }

    fn planned(family: Family, knob: &str, t_scale: f64) -> Planned {
        Planned {
            family,
            knob: knob.into(),
            sampler: crate::sampler::Sampler::Temperature { t: t_scale },
            offline: Default::default(),
            t_scale,
            stream: None,
        }
    }

    #[test]
    fn measures_are_interpolated_to_the_target_entropy() {
        let plan = [
            planned(Family::Temperature, "", 1.0),
            planned(Family::Hlg, "k", 0.9),
            planned(Family::Hlg, "k", 1.1),
            planned(Family::MinP, "m", 1.2),
            planned(Family::MinP, "m", 1.4),
        ];
        // Target 1.0; HLG's runs at 0.8 and 1.3 (a fifth of the way: 0.2 / 0.5 = 0.4),
        // min-p's both above it (extrapolated from them, not bracketed).
        let runs = [
            run(1.0, -3.0),
            run(0.8, -2.0),
            run(1.3, -4.5),
            run(1.2, -1.0),
            run(1.4, -2.0),
        ];
        let (target, m) = match_entropy(&plan, &runs, &["p"], 2).unwrap();
        assert!((target - 1.0).abs() < 1e-12);
        assert_eq!(m.len(), 3);
        let hlg = &m[1];
        assert_eq!((hlg.name.as_str(), hlg.bracketed), ("hlg k", true));
        // −2 + 0.4 × (−4.5 + 2) = −3.
        assert!(
            (hlg.prompts[0].1[0] + 3.0).abs() < 1e-12,
            "{:?}",
            hlg.prompts
        );
        // Per byte: each sample's 4 judged tokens over its 3 bytes, 4/3 of the per-token
        // value, interpolated the same way: −4.
        assert!(
            (hlg.prompts[0].1[3] + 4.0).abs() < 1e-12,
            "{:?}",
            hlg.prompts
        );
        let min_p = &m[2];
        assert!(!min_p.bracketed);
        // From (1.2, −1) and (1.4, −2) back to 1.0: −1 + (−1) × (−0.2 / 0.2) = 0.
        assert!(min_p.prompts[0].1[0].abs() < 1e-12, "{:?}", min_p.prompts);
    }

    fn matched(name: &str, family: Family, v: &[[f64; 4]]) -> Matched {
        Matched {
            name: name.into(),
            family,
            entropies: vec![],
            bracketed: true,
            prompts: v.iter().copied().enumerate().collect(),
        }
    }

    /// `base` with 0.5 nats more judged log-prob per token and 0.2 per byte, each with
    /// the same noise of ±0.2 over prompts.
    fn shifted_with_noise(base: &[[f64; 4]]) -> Vec<[f64; 4]> {
        base.iter()
            .enumerate()
            .map(|(i, v)| {
                let d = 0.1 * ((i * 7 % 5) as f64 - 2.0);
                [v[0] + 0.5 + d, v[1], v[2], v[3] + 0.2 + d]
            })
            .collect()
    }

    #[test]
    fn hlg_is_compared_with_every_other_method() {
        // HLG 0.5 nats better than temperature on every prompt (a little noise), equal
        // diversity and non-words: a win; against min-p, identical: a tie.
        let base: Vec<[f64; 4]> = (0..24)
            .map(|i| [-3.0 + 0.01 * f64::from(i % 3), 0.9, 0.01, -1.0])
            .collect();
        let better: Vec<[f64; 4]> = base
            .iter()
            .map(|v| [v[0] + 0.5, v[1], v[2], v[3] + 0.1])
            .collect();
        let all = [
            matched("hlg a", Family::Hlg, &better),
            matched("temperature", Family::Temperature, &base),
            matched("min-p x", Family::MinP, &better),
        ];
        let few = compare(
            &[
                all[0].clone(),
                matched("t", Family::Temperature, &base[..9]),
            ],
            1,
            7,
        );
        assert_eq!(few[0].verdict, Verdict::TooFew);
        let c = compare(&all, 1, 7);
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].other.as_str(), c[0].verdict),
            ("temperature", Verdict::Win)
        );
        assert!((c[0].diffs[0].0 - 0.5).abs() < 1e-12);
        assert_eq!(
            (c[1].other.as_str(), c[1].verdict),
            ("min-p x", Verdict::Tie)
        );
        assert!(c[0].p_adjusted < 0.01 && c[1].p_adjusted == 1.0);
        // Correcting over three levels' comparisons widens every interval (the same
        // resamples: the same seed) and raises every adjusted p.
        let noisy = shifted_with_noise(&base);
        let pair = [
            matched("hlg n", Family::Hlg, &noisy),
            matched("temperature", Family::Temperature, &base),
        ];
        let (one, three) = (compare(&pair, 1, 7), compare(&pair, LEVELS, 7));
        let width = |c: &Comparison| c.diffs[0].2 - c.diffs[0].1;
        assert!(
            width(&three[0]) > width(&one[0]),
            "{:?} {:?}",
            three[0],
            one[0]
        );
        assert!(three[0].p_adjusted >= one[0].p_adjusted);
    }

    #[test]
    fn the_measure_per_byte_is_corrected_over_four_measures() {
        // One comparison × LEVELS levels × 4 measures, from its own stream of resamples.
        let base: Vec<[f64; 4]> = (0..24).map(|_| [-3.0, 0.9, 0.01, -1.0]).collect();
        let noisy = shifted_with_noise(&base);
        let three = compare(
            &[
                matched("hlg n", Family::Hlg, &noisy),
                matched("temperature", Family::Temperature, &base),
            ],
            LEVELS,
            7,
        );
        let d: Vec<f64> = noisy.iter().zip(&base).map(|(a, b)| a[3] - b[3]).collect();
        let (mean, lo, hi, p) = bootstrap(
            &d,
            ALPHA / (LEVELS * MEASURES_WITH_PER_BYTE) as f64,
            &mut SplitMix(7 ^ PER_BYTE_STREAM),
        );
        assert_eq!(three[0].per_byte, (mean, lo, hi));
        // (Corrected over three measures, the interval would be narrower.)
        let (_, lo3, hi3, _) = bootstrap(
            &d,
            ALPHA / (LEVELS * MEASURES) as f64,
            &mut SplitMix(7 ^ PER_BYTE_STREAM),
        );
        assert!(hi3 - lo3 < hi - lo, "{lo3} {hi3} {lo} {hi}");
        let p = (p * (LEVELS * MEASURES_WITH_PER_BYTE) as f64).min(1.0);
        assert_eq!(three[0].p_adjusted_per_byte, p);
    }

    #[test]
    fn the_measure_per_byte_has_its_own_verdict_and_leaves_the_rules_alone() {
        // The flaw it is for: the other method's text re-tokenizes into many nearly certain
        // tokens, so it scores better per token (HLG 0.5 nats lower) and worse per byte
        // (HLG 0.2 nats higher).
        let other: Vec<[f64; 4]> = (0..24)
            .map(|i| [-2.0 + 0.05 * f64::from(i % 4), 0.9, 0.01, -1.5])
            .collect();
        let hlg: Vec<[f64; 4]> = other
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let d = 0.02 * f64::from(i as u8 % 3);
                [v[0] - 0.5 + d, v[1], v[2], v[3] + 0.2 + d]
            })
            .collect();
        let pair = |h: &[[f64; 4]]| {
            compare(
                &[
                    matched("hlg a", Family::Hlg, h),
                    matched("temperature", Family::Temperature, &other),
                ],
                LEVELS,
                11,
            )
            .remove(0)
        };
        let c = pair(&hlg);
        assert_eq!(
            (c.verdict, c.verdict_per_byte),
            (Verdict::Lose, Verdict::Win)
        );
        assert!((c.per_byte.0 - 0.22).abs() < 1e-12, "{:?}", c.per_byte);
        assert!(c.p_adjusted_per_byte < 0.01);
        // Guards still bind the verdict per byte: distinct-2 surely lower by 0.05.
        let duller: Vec<[f64; 4]> = hlg
            .iter()
            .map(|v| [v[0], v[1] - 0.05, v[2], v[3]])
            .collect();
        assert_eq!(pair(&duller).verdict_per_byte, Verdict::Lose);
        // The table gives both verdicts, every comparison row as wide as its header.
        let table = crate::report::verdict_table(&[(1.3, 6.9, vec![], vec![c.clone()])]);
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with('|')).collect();
        let cells = |r: &str| r.split(" | ").map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(rows.len(), 5, "{table}");
        let pipes: Vec<usize> = rows.iter().map(|r| r.matches('|').count()).collect();
        assert_eq!(pipes, [4, 4, 12, 12, 12], "{table}");
        let (head, row) = (cells(rows[2]), cells(rows[4]));
        assert_eq!((head[7].as_str(), row[7].as_str()), ("verdict", "Lose"));
        assert_eq!(head[10], "verdict per byte |");
        assert_eq!(row[10], "Win |");
        assert!(row[8].starts_with("0.220 ["), "{table}");
        // Any per-byte values: the same pre-registered intervals, p-value and verdict.
        let moved: Vec<[f64; 4]> = hlg.iter().map(|v| [v[0], v[1], v[2], -9.0]).collect();
        let m = pair(&moved);
        assert_eq!(
            (m.diffs, m.p_adjusted, m.verdict),
            (c.diffs, c.p_adjusted, c.verdict)
        );
    }
}
