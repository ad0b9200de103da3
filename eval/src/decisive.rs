//! The decisive evaluation's runs (docs/EVALUATION.md, "The decisive evaluation"): each
//! searched family's search at an equal budget on the selection prompts, the arms'
//! online entropy calibration, and what the report reads from the main run. The
//! statistics of the calls are [`super::decide`]'s; the sampling and the files are the
//! cross-judged evaluation's ([`super::confirm`]).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use mistralrs_hlg::HlgConfig;

use super::confirm::{PromptMeasures, Sample};
use super::frontier::Family;
use super::sampler::Sampler;
use super::text::{repeated_ngrams, self_bleu, words};

/// Online settings per searched family.
pub const SEARCH_BUDGET: usize = 16;
/// Samples per selection prompt and setting in the search (one: the protocol's second
/// cut, docs/EVALUATION.md "Cost").
pub const SEARCH_SAMPLES: usize = 1;
/// Samples per calibration prompt and variant.
pub const CALIBRATION_SAMPLES: usize = 2;
/// Samples per main prompt and arm.
pub const MAIN_SAMPLES: usize = 4;
/// Tokens per sample, everywhere in this experiment.
pub const MAX_TOKENS: usize = 256;
/// The main prompts the secondary arms run on (the first of the set; 32: the protocol's
/// first cut, docs/EVALUATION.md "Cost").
pub const SECONDARY_PROMPTS: usize = 32;
/// The equivalence margin of the judged log-prob per byte (nats).
pub const MARGIN_PER_BYTE: f64 = 0.05;
/// The equivalence margin of distinct-2, also how far below plain temperature's a
/// searched setting's distinct-2 may fall and stay eligible.
pub const MARGIN_DISTINCT2: f64 = 0.02;
/// The primary comparisons of the experiment: 2 cells × 2 HLG arms × 4 baselines × 2
/// measures.
pub const COMPARISONS: usize = 32;
/// The calibration's steps of the matched knob: T × these (adaptive-p's cut ÷ them²:
/// a lower cut, a higher entropy, in the same order).
pub const CALIBRATION_SCALES: [f64; 3] = [0.9, 1.0, 1.1];

/// A family searched at the equal budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Searched {
    /// Min-p's ratio, golden-section on its log over [0.005, 0.3].
    MinP,
    /// Top-nσ's n, golden-section over [0.5, 4].
    TopNSigma,
    /// HLG's fixed curve (the `top` pivot): a coordinate search over its five knobs.
    Hlg,
    /// HLG's auto mode: a coordinate search over its two scales and three shape knobs.
    HlgAuto,
    /// adaptive-p's target and decay (its min-p cut is what matches its entropy).
    AdaptiveP,
}

/// The toe shapes in the searches' order.
const TOE_SHAPES: [&str; 3] = ["quadratic", "exp", "log"];

impl Searched {
    /// Every searched family, in the order the search runs them.
    pub const ALL: [Searched; 5] = [
        Searched::MinP,
        Searched::TopNSigma,
        Searched::AdaptiveP,
        Searched::Hlg,
        Searched::HlgAuto,
    ];

    /// The family's name in tables and file names.
    pub fn name(self) -> &'static str {
        match self {
            Searched::MinP => "min-p",
            Searched::TopNSigma => "top-nσ",
            Searched::Hlg => "hlg",
            Searched::HlgAuto => "hlg-auto",
            Searched::AdaptiveP => "adaptive-p",
        }
    }

    /// The knobs' grids of a coordinate search, and the start (indices).
    fn grid(self) -> Option<(Vec<Vec<f64>>, Vec<usize>)> {
        let shapes = vec![0.0, 1.0, 2.0];
        let shoulder = vec![0.25, 0.5, 1.0, 2.0, 4.0];
        let toe = vec![0.25, 0.5, 1.0, 2.0, 4.0];
        match self {
            Searched::Hlg => Some((
                vec![
                    vec![1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0],
                    vec![0.5, 1.0, 1.5, 2.0, 3.0, 4.0],
                    shoulder,
                    toe,
                    shapes,
                ],
                // The offline KL frontier's region: offset 3, width 1.5, shoulder and
                // toe 0.5, quadratic.
                vec![3, 2, 1, 1, 0],
            )),
            Searched::HlgAuto => Some((
                vec![
                    vec![0.5, 1.0, 1.5, 2.0, 3.0],
                    vec![1.0, 2.0, 3.0, 4.0, 5.0],
                    shoulder,
                    toe,
                    shapes,
                ],
                // The shipped scales (1.5, 3.0) with the same shape knobs.
                vec![2, 2, 1, 1, 0],
            )),
            Searched::AdaptiveP => Some((
                vec![
                    vec![0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
                    vec![0.5, 0.7, 0.9, 0.95, 0.99],
                ],
                // llama.cpp's documented defaults: target 0.5, decay 0.9.
                vec![3, 2],
            )),
            Searched::MinP | Searched::TopNSigma => None,
        }
    }

    /// A golden-section search's interval, and whether it runs on the log of the knob.
    fn interval(self) -> Option<(f64, f64, bool)> {
        match self {
            Searched::MinP => Some((0.005, 0.3, true)),
            Searched::TopNSigma => Some((0.5, 4.0, false)),
            _ => None,
        }
    }

    /// The sampler at a point of the search (knob values; T is a placeholder that the
    /// offline matching replaces, as is adaptive-p's cut).
    pub fn sampler(self, point: &[f64]) -> Sampler {
        let t = 1.0;
        let hlg = |pairs: Vec<(&str, String)>| {
            let cfg = HlgConfig::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())))
                .expect("the search's grids hold accepted values");
            Sampler::Hlg {
                t,
                hlg: cfg.resolved(true),
            }
        };
        let shape = |i: f64| TOE_SHAPES[i as usize].to_string();
        match self {
            Searched::MinP => Sampler::MinP { t, min_p: point[0] },
            Searched::TopNSigma => Sampler::TopNSigma { t, n: point[0] },
            Searched::AdaptiveP => Sampler::AdaptiveP {
                t,
                target: point[0],
                decay: point[1],
                min_p: 0.05,
            },
            Searched::Hlg => hlg(vec![
                ("pivot", "top".into()),
                ("pivot_offset", point[0].to_string()),
                ("width", point[1].to_string()),
                ("shoulder", point[2].to_string()),
                ("toe", point[3].to_string()),
                ("toe_shape", shape(point[4])),
            ]),
            Searched::HlgAuto => hlg(vec![
                ("pivot", "top".into()),
                ("width", "auto".into()),
                ("pivot_offset", "auto".into()),
                ("width_scale", point[0].to_string()),
                ("pivot_offset_scale", point[1].to_string()),
                ("shoulder", point[2].to_string()),
                ("toe", point[3].to_string()),
                ("toe_shape", shape(point[4])),
            ]),
        }
    }
}

/// What a search needs next: a point to score, or nothing more (the budget is spent).
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Score this point (knob values).
    Score(Vec<f64>),
    /// The search is over.
    Done,
}

/// The search of `family` replayed over the scores known so far (`scores`, by
/// [`point_key`]): the next point it needs, or [`Next::Done`]. Deterministic, so a run
/// stopped anywhere resumes on the same path from the scores on disk. A score of
/// `-inf` marks an ineligible setting.
pub fn next_point(family: Searched, scores: &HashMap<String, f64>) -> Next {
    let mut f = |p: &[f64]| scores.get(&point_key(p)).copied().ok_or_else(|| p.to_vec());
    let need = match (family.grid(), family.interval()) {
        (Some((grid, start)), _) => coordinate(&grid, &start, SEARCH_BUDGET, &mut f).err(),
        (_, Some((lo, hi, log))) => golden(lo, hi, log, SEARCH_BUDGET, &mut f).err(),
        _ => unreachable!("every searched family has a grid or an interval"),
    };
    need.map_or(Next::Done, Next::Score)
}

/// The key of a point in the scores.
pub fn point_key(p: &[f64]) -> String {
    format!("{p:?}")
}

/// `v` to three significant digits (knob values that read the same in a table).
fn sig3(v: f64) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let scale = 10f64.powi(2 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// A golden-section search for the maximum of `f` on `[lo, hi]` (on the log of the knob
/// if `log`), each point rounded to three significant digits, `budget` points scored.
fn golden<E>(
    lo: f64,
    hi: f64,
    log: bool,
    budget: usize,
    f: &mut impl FnMut(&[f64]) -> Result<f64, E>,
) -> Result<(), E> {
    let to = |u: f64| sig3(if log { u.exp() } else { u });
    let (mut a, mut b) = if log { (lo.ln(), hi.ln()) } else { (lo, hi) };
    let g = (5f64.sqrt() - 1.0) / 2.0;
    // Points that round to one already scored cost nothing: the search goes on until
    // `budget` distinct points are scored (or the interval is far below the rounding).
    let seen = std::cell::RefCell::new(Vec::<(f64, f64)>::new());
    let mut f = |x: f64| {
        let v = f(&[x])?;
        if !seen.borrow().iter().any(|(y, _)| *y == x) {
            seen.borrow_mut().push((x, v));
        }
        Ok(v)
    };
    let (mut c, mut d) = (b - g * (b - a), a + g * (b - a));
    let (mut fc, mut fd) = (f(to(c))?, f(to(d))?);
    for _ in 2..budget * 8 {
        if seen.borrow().len() >= budget {
            break;
        }
        if fc >= fd {
            (b, d, fd) = (d, c, fc);
            c = b - g * (b - a);
            fc = f(to(c))?;
        } else {
            (a, c, fc) = (c, d, fd);
            d = a + g * (b - a);
            fd = f(to(d))?;
        }
    }
    // Converged below the rounding with budget left: the rounded values next to the best,
    // outward, alternately above and below.
    let best = seen
        .borrow()
        .iter()
        .fold(
            (f64::NAN, f64::NEG_INFINITY),
            |b, &p| if p.1 > b.1 { p } else { b },
        )
        .0;
    for k in 1..1000 {
        if seen.borrow().len() >= budget || !best.is_finite() {
            break;
        }
        for x in [
            best * (1.0 + 0.01 * k as f64),
            best * (1.0 - 0.01 * k as f64),
        ] {
            let x = sig3(x);
            let fresh = !seen.borrow().iter().any(|(y, _)| *y == x);
            if fresh && (lo..=hi).contains(&x) && seen.borrow().len() < budget {
                f(x)?;
            }
        }
    }
    Ok(())
}

/// A coordinate search for the maximum of `f` over a grid (knob values by index), from
/// `start`: each knob in turn tries its grid neighbours `step` away and moves to the
/// best, a sweep at step 2, then sweeps at step 1 until one moves nothing; what remains
/// of the budget goes to the untried points nearest the best (fewest knobs changed, one
/// grid step each, in knob order). `budget` distinct points scored at most.
fn coordinate<E>(
    grid: &[Vec<f64>],
    start: &[usize],
    budget: usize,
    f: &mut impl FnMut(&[f64]) -> Result<f64, E>,
) -> Result<(), E> {
    let value = |ix: &[usize]| -> Vec<f64> { ix.iter().zip(grid).map(|(&i, g)| g[i]).collect() };
    let mut seen: Vec<(Vec<usize>, f64)> = vec![];
    let mut score = |ix: &[usize], seen: &mut Vec<(Vec<usize>, f64)>| -> Result<Option<f64>, E> {
        if let Some((_, s)) = seen.iter().find(|(p, _)| p == ix) {
            return Ok(Some(*s));
        }
        if seen.len() >= budget {
            return Ok(None);
        }
        let s = f(&value(ix))?;
        seen.push((ix.to_vec(), s));
        Ok(Some(s))
    };
    let mut cur = start.to_vec();
    let mut best = score(&cur, &mut seen)?.unwrap_or(f64::NEG_INFINITY);
    let mut step = 2;
    loop {
        let mut moved = false;
        for k in 0..grid.len() {
            let mut here = cur.clone();
            for cand in [cur[k].checked_sub(step), Some(cur[k] + step)] {
                let Some(i) = cand.filter(|&i| i < grid[k].len()) else {
                    continue;
                };
                let mut p = cur.clone();
                p[k] = i;
                match score(&p, &mut seen)? {
                    Some(s) if s > best => (best, here) = (s, p),
                    Some(_) => {}
                    None => return Ok(()),
                }
            }
            if here != cur {
                cur = here;
                moved = true;
            }
        }
        if step == 1 && !moved {
            break;
        }
        step = 1;
    }
    // The rest of the budget: single-knob steps from the best, then pairs, in order; then
    // the untried grid points nearest the best (fewest steps), so that a small grid spends
    // the budget too.
    for changed in 1..=grid.len() {
        for p in neighbours(grid, &cur, changed) {
            if score(&p, &mut seen)?.is_none() {
                return Ok(());
            }
        }
    }
    for p in by_distance(grid, &cur) {
        if score(&p, &mut seen)?.is_none() {
            return Ok(());
        }
    }
    Ok(())
}

/// Every point of the grid, nearest `at` first (fewest grid steps; ties in grid order).
fn by_distance(grid: &[Vec<f64>], at: &[usize]) -> Vec<Vec<usize>> {
    let mut all: Vec<Vec<usize>> = vec![vec![]];
    for g in grid {
        all = all
            .into_iter()
            .flat_map(|p| (0..g.len()).map(move |i| [p.clone(), vec![i]].concat()))
            .collect();
    }
    let steps = |p: &[usize]| {
        p.iter()
            .zip(at)
            .map(|(&a, &b)| a.abs_diff(b))
            .sum::<usize>()
    };
    all.sort_by_key(|p| steps(p));
    all
}

/// The grid points that differ from `at` in exactly `changed` knobs, each by one step,
/// in a fixed order.
fn neighbours(grid: &[Vec<f64>], at: &[usize], changed: usize) -> Vec<Vec<usize>> {
    let mut out = vec![];
    let n = grid.len();
    for mask in 0u32..(1 << n) {
        if mask.count_ones() as usize != changed {
            continue;
        }
        let knobs: Vec<usize> = (0..n).filter(|k| mask & (1 << k) != 0).collect();
        for signs in 0u32..(1 << changed) {
            let mut p = at.to_vec();
            let ok = knobs.iter().enumerate().all(|(j, &k)| {
                let i = if signs & (1 << j) != 0 {
                    at[k].checked_sub(1)
                } else {
                    Some(at[k] + 1).filter(|&i| i < grid[k].len())
                };
                i.map(|i| p[k] = i).is_some()
            });
            if ok {
                out.push(p);
            }
        }
    }
    out
}

/// The best point of a finished search: the highest score, the first scored on a tie.
pub fn best_point(family: Searched, scores: &HashMap<String, f64>) -> Option<Vec<f64>> {
    let mut order = vec![];
    let mut f = |p: &[f64]| -> Result<f64, ()> {
        let s = scores.get(&point_key(p)).copied().ok_or(())?;
        if !order.iter().any(|(q, _): &(Vec<f64>, f64)| q == p) {
            order.push((p.to_vec(), s));
        }
        Ok(s)
    };
    let _ = match (family.grid(), family.interval()) {
        (Some((grid, start)), _) => coordinate(&grid, &start, SEARCH_BUDGET, &mut f),
        (_, Some((lo, hi, log))) => golden(lo, hi, log, SEARCH_BUDGET, &mut f),
        _ => Ok(()),
    };
    let mut best: Option<(Vec<f64>, f64)> = None;
    for (p, s) in order {
        if s.is_finite() && best.as_ref().is_none_or(|(_, b)| s > *b) {
            best = Some((p, s));
        }
    }
    best.map(|(p, _)| p)
}

/// The best-of-N curve of a family's scored settings (arXiv 2506.13681): for each N from
/// 1 to the number scored, the mean over `draws` random draws of N settings (without
/// replacement) of the best score among them. Ineligible settings score `-inf` and
/// count as drawn; a draw of only those is left out of the mean.
pub fn best_of_n(scores: &[f64], draws: usize, seed: u64) -> Vec<f64> {
    let mut rng = super::generate::SplitMix(seed);
    (1..=scores.len())
        .map(|n| {
            let (mut sum, mut k) = (0.0, 0usize);
            for _ in 0..draws {
                let mut idx: Vec<usize> = (0..scores.len()).collect();
                for i in 0..n {
                    let j = i + (rng.next_u64() % (idx.len() - i) as u64) as usize;
                    idx.swap(i, j);
                }
                let best = idx[..n]
                    .iter()
                    .map(|&i| scores[i])
                    .fold(f64::NEG_INFINITY, f64::max);
                if best.is_finite() {
                    sum += best;
                    k += 1;
                }
            }
            if k == 0 {
                f64::NAN
            } else {
                sum / k as f64
            }
        })
        .collect()
}

/// The selection score of a setting's samples: the mean over prompts of the judged
/// log-prob per byte, and the mean distinct-2 (`None` without a judged prompt).
pub fn selection_score(by_prompt: &[Vec<Sample>]) -> Option<(f64, f64)> {
    let m: Vec<PromptMeasures> = by_prompt
        .iter()
        .filter_map(|s| PromptMeasures::of(&s.iter().collect::<Vec<_>>()))
        .filter(|m| m.judged_logprob_per_byte.is_finite())
        .collect();
    if m.is_empty() {
        return None;
    }
    let n = m.len() as f64;
    Some((
        m.iter().map(|m| m.judged_logprob_per_byte).sum::<f64>() / n,
        m.iter().map(|m| m.distinct[1]).sum::<f64>() / n,
    ))
}

/// The matched knob of `s` scaled by a calibration step `f` (T × f; adaptive-p's cut
/// ÷ f⁸, so that its entropy moves the same way and by about as much as T's does).
pub fn calibration_variant(s: &Sampler, f: f64) -> Sampler {
    let mut v = s.clone();
    match &mut v {
        Sampler::AdaptiveP { min_p, .. } => *min_p /= f.powi(8),
        _ => v = s.at(s.temperature() * f),
    }
    v
}

/// The calibration step at which the online entropy reaches `target`, interpolated
/// linearly in ln(step) between the two steps that bracket it (or extrapolated from the
/// nearest two), and whether it was bracketed. `points`: (step, mean online entropy),
/// in increasing step.
pub fn calibrated_step(points: &[(f64, f64)], target: f64) -> (f64, bool) {
    let bracket = points
        .windows(2)
        .find(|w| (w[0].1 - target) * (w[1].1 - target) <= 0.0);
    let (a, b, bracketed) = match bracket {
        Some(w) => (w[0], w[1], true),
        None => {
            let mut by: Vec<(f64, f64)> = points.to_vec();
            by.sort_by(|x, y| (x.1 - target).abs().total_cmp(&(y.1 - target).abs()));
            let (mut a, mut b) = (by[0], by[1]);
            if a.0 > b.0 {
                std::mem::swap(&mut a, &mut b);
            }
            (a, b, false)
        }
    };
    if (b.1 - a.1).abs() < 1e-12 {
        return (a.0, bracketed);
    }
    let w = (target - a.1) / (b.1 - a.1);
    ((a.0.ln() + w * (b.0.ln() - a.0.ln())).exp(), bracketed)
}

/// The measures of a thesis row.
pub const THESIS_MEASURES: usize = 6;

/// The thesis measures of one prompt's samples: the mean over their steps of the top
/// probability, the tail mass and KL(drawn from ‖ base), the mean share of repeated
/// 4-grams within a sample, self-BLEU across the samples, and the mean online entropy.
pub fn thesis(samples: &[Sample]) -> Option<[f64; THESIS_MEASURES]> {
    let shapes: Vec<&[f64; 3]> = samples.iter().flat_map(|s| &s.trace.shape).collect();
    if shapes.is_empty() {
        return None;
    }
    let n = shapes.len() as f64;
    let mean = |k: usize| shapes.iter().map(|s| s[k]).sum::<f64>() / n;
    let repeats = samples
        .iter()
        .map(|s| repeated_ngrams(&words(&s.text), 4))
        .sum::<f64>()
        / samples.len() as f64;
    let entropy: Vec<f64> = samples
        .iter()
        .flat_map(|s| s.trace.entropy.iter().copied())
        .collect();
    let ws: Vec<Vec<String>> = samples.iter().map(|s| words(&s.text)).collect();
    Some([
        mean(0),
        mean(1),
        mean(2),
        repeats,
        self_bleu(&ws),
        entropy.iter().sum::<f64>() / entropy.len().max(1) as f64,
    ])
}

/// The names of the thesis measures, in [`thesis`]'s order.
pub const THESIS: [&str; THESIS_MEASURES] = [
    "top-1 prob",
    "tail mass",
    "KL to base",
    "repeated 4-grams",
    "self-BLEU",
    "online entropy",
];

/// One arm of the main run: its role, family and calibrated sampler.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Arm {
    /// `hlg`, `hlg-auto`, `hlg-shipped`, `temperature`, `min-p`, `top-nσ`, `adaptive-p`,
    /// or a secondary family's name.
    pub role: String,
    /// Its family.
    pub family: Family,
    /// The knob in words.
    pub knob: String,
    /// Whether it runs on every main prompt (else on the first [`SECONDARY_PROMPTS`]).
    pub primary: bool,
    /// The sampler at its calibrated temperature (adaptive-p: cut).
    pub sampler: Sampler,
    /// The calibration: (step, mean online entropy) per variant, and whether they
    /// bracketed the target.
    pub calibration: Vec<(f64, f64)>,
    /// Whether the calibration's steps bracketed the target.
    pub bracketed: bool,
}

/// The roles of the primary comparisons: each HLG arm against each baseline.
pub const HLG_ROLES: [&str; 2] = ["hlg", "hlg-auto"];
/// See [`HLG_ROLES`].
pub const BASELINE_ROLES: [&str; 4] = ["temperature", "min-p", "top-nσ", "adaptive-p"];

/// The secondary arms' settings, fixed in the protocol (each family's common default,
/// not searched): top-p 0.9, quadratic smoothing 0.25, dynamic temperature 0.5–1.5
/// with exponent 1, p-less, top-H 0.4.
pub fn secondary() -> Vec<(String, Sampler)> {
    let t = 1.0;
    vec![
        ("top-p".into(), Sampler::TopP { t, p: 0.9 }),
        (
            "smoothing".into(),
            Sampler::Smoothing {
                t,
                factor: 0.25,
                curve: 1.0,
            },
        ),
        (
            "dynamic T".into(),
            Sampler::DynamicTemperature {
                t,
                low: 0.5,
                high: 1.5,
                exponent: 1.0,
            },
        ),
        ("p-less".into(), Sampler::PLess { t }),
        ("top-H".into(), Sampler::TopH { t, alpha: 0.4 }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A search against a known function: the points asked for, in order, until done.
    fn run(family: Searched, f: impl Fn(&[f64]) -> f64) -> Vec<Vec<f64>> {
        let mut scores = HashMap::new();
        let mut asked = vec![];
        while let Next::Score(p) = next_point(family, &scores) {
            assert!(!scores.contains_key(&point_key(&p)), "{p:?} asked twice");
            scores.insert(point_key(&p), f(&p));
            asked.push(p);
            assert!(asked.len() <= SEARCH_BUDGET);
        }
        asked
    }

    #[test]
    fn golden_section_finds_the_peak_of_a_smooth_score() {
        // Peak at min-p 0.03 on a log scale.
        let asked = run(Searched::MinP, |p| -(p[0].ln() - 0.03f64.ln()).powi(2));
        assert_eq!(asked.len(), SEARCH_BUDGET);
        let scores: HashMap<String, f64> = asked
            .iter()
            .map(|p| (point_key(p), -(p[0].ln() - 0.03f64.ln()).powi(2)))
            .collect();
        let best = best_point(Searched::MinP, &scores).unwrap();
        assert!((best[0] / 0.03 - 1.0).abs() < 0.02, "{best:?}");
    }

    #[test]
    fn coordinate_search_climbs_to_the_peak_and_spends_the_budget() {
        // HLG: the best is offset 5, width 1, shoulder 0.5, toe 2, exp.
        let peak = [5.0, 1.0, 0.5, 2.0, 1.0];
        let f = |p: &[f64]| -p.iter().zip(peak).map(|(a, b)| (a - b).abs()).sum::<f64>();
        let asked = run(Searched::Hlg, f);
        assert_eq!(asked.len(), SEARCH_BUDGET);
        assert_eq!(
            asked[0],
            vec![3.0, 1.5, 0.5, 0.5, 0.0],
            "the start comes first"
        );
        let scores: HashMap<String, f64> = asked.iter().map(|p| (point_key(p), f(p))).collect();
        let best = best_point(Searched::Hlg, &scores).unwrap();
        // 16 points cannot reach every knob's peak; each move must have gone uphill.
        assert!(f(&best) > f(&asked[0]), "{best:?}");
        // Replayed from its scores, the search asks for nothing more.
        assert_eq!(next_point(Searched::Hlg, &scores), Next::Done);
    }

    #[test]
    fn ineligible_settings_never_win() {
        let asked = run(Searched::AdaptiveP, |p| {
            if p[0] > 0.5 {
                f64::NEG_INFINITY
            } else {
                p[0]
            }
        });
        let scores: HashMap<String, f64> = asked
            .iter()
            .map(|p| {
                (
                    point_key(p),
                    if p[0] > 0.5 { f64::NEG_INFINITY } else { p[0] },
                )
            })
            .collect();
        let best = best_point(Searched::AdaptiveP, &scores).unwrap();
        assert!(best[0] <= 0.5, "{best:?}");
    }

    #[test]
    fn every_search_spends_its_budget_on_distinct_points() {
        for family in Searched::ALL {
            let asked = run(family, |p| -p.iter().map(|v| (v - 0.7).abs()).sum::<f64>());
            assert_eq!(asked.len(), SEARCH_BUDGET, "{family:?}");
        }
    }

    #[test]
    fn every_searched_point_is_an_accepted_setting() {
        for family in Searched::ALL {
            for p in run(family, |p| p.iter().sum()) {
                let s = family.sampler(&p);
                assert!(s.temperature() > 0.0, "{family:?} {p:?}");
            }
        }
    }

    #[test]
    fn best_of_n_rises_to_the_best() {
        let scores = [1.0, 3.0, 2.0, f64::NEG_INFINITY];
        let curve = best_of_n(&scores, 2000, 1);
        assert_eq!(curve.len(), 4);
        assert!(curve.windows(2).all(|w| w[0] <= w[1] + 1e-12), "{curve:?}");
        // N = 1: the mean of the eligible ones (2); N = 4: the best (3).
        assert!((curve[0] - 2.0).abs() < 0.1, "{curve:?}");
        assert_eq!(curve[3], 3.0);
    }

    #[test]
    fn calibration_interpolates_in_the_log_of_the_step() {
        let pts = [(0.9, 2.0), (1.0, 2.5), (1.1, 3.1)];
        let (s, ok) = calibrated_step(&pts, 2.5);
        assert!(ok && (s - 1.0).abs() < 1e-12);
        let (s, ok) = calibrated_step(&pts, 2.25);
        // Halfway between the steps 0.9 and 1 in ln: √0.9.
        assert!(ok && (s - 0.9f64.sqrt()).abs() < 1e-12, "{s}");
        // Beyond the last step: extrapolated from the nearest two, flagged.
        let (s, ok) = calibrated_step(&pts, 3.7);
        assert!(!ok && s > 1.1);
        // adaptive-p's cut falls as the step rises.
        let a = Sampler::AdaptiveP {
            t: 1.0,
            target: 0.5,
            decay: 0.9,
            min_p: 0.01,
        };
        let Sampler::AdaptiveP { min_p, .. } = calibration_variant(&a, 1.1) else {
            unreachable!()
        };
        assert!(min_p < 0.01);
        assert_eq!(
            calibration_variant(&Sampler::Temperature { t: 1.0 }, 1.1).temperature(),
            1.1
        );
    }
}
