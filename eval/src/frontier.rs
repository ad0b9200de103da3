//! Offline screening of every sampler family over its own knob (issue #19): each setting
//! at the temperature that gives plain temperature's mean entropy at a level, measured on
//! the captured logits; per level, each family's best setting per measure, and the HLG
//! settings that are at least as good as every other family's best on the quality
//! measures at that entropy.
//!
//! At matched entropy the methods spread the same uncertainty differently: what differs
//! is where the mass goes. The screening's quality measures are the mass on base-tail
//! tokens (base probability below [`super::metrics::TAIL`]: what the online tail-garbage
//! rate counts) and the expected base log-probability of a drawn token (what the online
//! mean base log-probability averages); the KL from plain temperature and the top-token
//! mass are reported beside them.

use serde::{Deserialize, Serialize};

use super::capture::Capture;
use super::generate::SplitMix;
use super::kl::mean_stats_with;
use super::metrics::Stats;
use super::sampler::{match_setting, mean_entropy, Sampler};
use super::EvalError;
use mistralrs_hlg::config::RawValue;
use mistralrs_hlg::{HlgConfig, Pivot, ToeShape};

/// A family of samplers, each with its own knob.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Plain temperature (no knob: one setting).
    Temperature,
    /// Nucleus sampling; the knob is the nucleus mass.
    TopP,
    /// Min-p; the knob is the ratio to the top token's probability.
    MinP,
    /// Top-nσ; the knob is n.
    TopNSigma,
    /// Quadratic/cubic smoothing; the knobs are the factor and the curve.
    Smoothing,
    /// Dynamic temperature; the knobs are the range and the exponent.
    DynamicTemperature,
    /// p-less (no knob: one setting).
    PLess,
    /// Top-H; the knob is the entropy bound's ratio.
    TopH,
    /// HLG; the knobs are the curve's fields.
    Hlg,
    /// llama.cpp's adaptive-p; the knobs are the target, the decay and the min-p cut.
    AdaptiveP,
}

impl Family {
    /// Every family, in the order of the tables.
    pub const ALL: [Family; 10] = [
        Family::Temperature,
        Family::TopP,
        Family::MinP,
        Family::TopNSigma,
        Family::Smoothing,
        Family::DynamicTemperature,
        Family::PLess,
        Family::TopH,
        Family::Hlg,
        Family::AdaptiveP,
    ];

    /// The family's name in tables and figures.
    pub fn name(self) -> &'static str {
        match self {
            Family::Temperature => "temperature",
            Family::TopP => "top-p",
            Family::MinP => "min-p",
            Family::TopNSigma => "top-nσ",
            Family::Smoothing => "smoothing",
            Family::DynamicTemperature => "dynamic T",
            Family::PLess => "p-less",
            Family::TopH => "top-H",
            Family::Hlg => "hlg",
            Family::AdaptiveP => "adaptive-p",
        }
    }

    /// Its colour in every figure.
    pub fn color(self) -> &'static str {
        match self {
            Family::Temperature => "#7f7f7f",
            Family::TopP => "#ff7f0e",
            Family::MinP => "#9467bd",
            Family::TopNSigma => "#8c564b",
            Family::Smoothing => "#17becf",
            Family::DynamicTemperature => "#bcbd22",
            Family::PLess => "#2ca02c",
            Family::TopH => "#1f77b4",
            Family::Hlg => "#d62728",
            Family::AdaptiveP => "#393b79",
        }
    }

    /// The family of a sampler.
    pub fn of(s: &Sampler) -> Family {
        match s {
            Sampler::Temperature { .. } => Family::Temperature,
            Sampler::TopP { .. } => Family::TopP,
            Sampler::MinP { .. } => Family::MinP,
            Sampler::TopNSigma { .. } => Family::TopNSigma,
            Sampler::Smoothing { .. } => Family::Smoothing,
            Sampler::DynamicTemperature { .. } => Family::DynamicTemperature,
            Sampler::PLess { .. } => Family::PLess,
            Sampler::TopH { .. } => Family::TopH,
            Sampler::Hlg { .. } => Family::Hlg,
            Sampler::AdaptiveP { .. } => Family::AdaptiveP,
        }
    }
}

/// Top-p's nucleus masses swept.
pub const TOP_P: [f64; 3] = [0.8, 0.9, 0.95];
/// Min-p's ratios swept.
pub const MIN_P: [f64; 4] = [0.02, 0.05, 0.1, 0.2];
/// Top-nσ's n swept.
pub const TOP_NSIGMA: [f64; 3] = [1.0, 1.5, 2.0];
/// Smoothing's (factor, curve) swept: webui's usual factors, quadratic, and one cubic mix.
pub const SMOOTHING: [(f64, f64); 4] = [(0.1, 1.0), (0.25, 1.0), (0.5, 1.0), (0.25, 2.0)];
/// Dynamic temperature's (low, high, exponent) swept (T scales the range: only its ratio
/// and the exponent tell settings apart at matched entropy).
pub const DYNAMIC_TEMPERATURE: [(f64, f64, f64); 4] = [
    (0.5, 1.5, 1.0),
    (0.25, 1.75, 1.0),
    (0.5, 1.5, 0.5),
    (0.5, 1.5, 2.0),
];
/// Top-H's entropy ratios swept (its paper's default is 0.4).
pub const TOP_H: [f64; 3] = [0.3, 0.4, 0.6];

/// Every baseline setting (temperatures are placeholders: [`screen`] matches them).
pub fn baselines() -> Vec<Sampler> {
    let t = 1.0;
    let mut out = vec![Sampler::Temperature { t }];
    out.extend(TOP_P.map(|p| Sampler::TopP { t, p }));
    out.extend(MIN_P.map(|min_p| Sampler::MinP { t, min_p }));
    out.extend(TOP_NSIGMA.map(|n| Sampler::TopNSigma { t, n }));
    out.extend(SMOOTHING.map(|(factor, curve)| Sampler::Smoothing { t, factor, curve }));
    out.extend(
        DYNAMIC_TEMPERATURE.map(|(low, high, exponent)| Sampler::DynamicTemperature {
            t,
            low,
            high,
            exponent,
        }),
    );
    out.push(Sampler::PLess { t });
    out.extend(TOP_H.map(|alpha| Sampler::TopH { t, alpha }));
    out
}

/// Every family with the same number of settings (issue #35's equal budget): `n` knob
/// values spread over each family's range (top-p's mass, min-p's ratio and smoothing's
/// factor on a log scale where they span decades), `n` HLG settings of the seeded search
/// (the shipped knobs first), and one setting of each family without a knob (plain
/// temperature, p-less). Temperatures are placeholders: [`screen`] matches them.
pub fn equal_budget(n: usize, seed: u64) -> Vec<Sampler> {
    let t = 1.0;
    let n = n.max(1);
    let mut out = vec![Sampler::Temperature { t }, Sampler::PLess { t }];
    out.extend(
        spread(0.5, 0.98, n, false)
            .into_iter()
            .map(|p| Sampler::TopP { t, p }),
    );
    let min_p = spread(0.005, 0.3, n, true);
    out.extend(min_p.into_iter().map(|min_p| Sampler::MinP { t, min_p }));
    out.extend(
        spread(0.5, 3.0, n, false)
            .into_iter()
            .map(|n| Sampler::TopNSigma { t, n }),
    );
    let curves = [1.0, 3.0, 2.0];
    let factors = spread(0.05, 2.0, n, true).into_iter().enumerate();
    out.extend(factors.map(|(i, factor)| Sampler::Smoothing {
        t,
        factor,
        curve: curves[i % 3],
    }));
    let exponents = [1.0, 0.5, 2.0];
    let widths = spread(0.1, 0.9, n, false).into_iter().enumerate();
    out.extend(widths.map(|(i, k)| Sampler::DynamicTemperature {
        t,
        low: round3(1.0 - k),
        high: round3(1.0 + k),
        exponent: exponents[i % 3],
    }));
    out.extend(
        spread(0.2, 0.95, n, false)
            .into_iter()
            .map(|alpha| Sampler::TopH { t, alpha }),
    );
    let hlg = hlg_search(n - 1, seed).into_iter();
    out.extend(hlg.map(|hlg| Sampler::Hlg { t, hlg }));
    out
}

/// `n` values from `lo` to `hi` (both included; the middle for `n` = 1), evenly or on a
/// log scale, to 3 significant digits.
fn spread(lo: f64, hi: f64, n: usize, log: bool) -> Vec<f64> {
    let at = |f: f64| match log {
        true => (lo.ln() + f * (hi.ln() - lo.ln())).exp(),
        false => lo + f * (hi - lo),
    };
    (0..n)
        .map(|i| match n {
            1 => at(0.5),
            _ => at(i as f64 / (n - 1) as f64),
        })
        .map(round3)
        .collect()
}

/// To 3 significant digits.
fn round3(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(2 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// The grid the HLG search draws from, per field (as the `hlg` object spells values).
const OFFSETS: [f64; 6] = [2.0, 3.0, 4.0, 5.0, 6.0, 8.0];
/// No `off`: a curve without its mid region is the identity, plain temperature.
const WIDTHS: [f64; 6] = [0.5, 1.0, 2.0, 3.0, 4.0, 6.0];
const SHOULDERS: [Option<f64>; 5] = [Some(0.5), Some(1.0), Some(2.0), Some(4.0), None];
const TOES: [Option<f64>; 8] = [
    Some(0.25),
    Some(0.5),
    Some(1.0),
    Some(2.0),
    Some(3.0),
    Some(4.0),
    Some(6.0),
    None,
];

/// The HLG settings of the search: the shipped knobs first, then `n` distinct settings
/// drawn uniformly from the grid of every field (a fixed seed: the same list every run).
/// Settings whose curve is the identity (shoulder and toe both off) are plain
/// temperature, the temperature family's point, and are drawn again: counted as HLG's
/// they tied temperature on the frontier dozens of times and took places in the online
/// plan.
pub fn hlg_search(n: usize, seed: u64) -> Vec<HlgConfig> {
    let mut rng = SplitMix(seed);
    let mut out = vec![HlgConfig::default().resolved(true)];
    // The grid holds 3 × 6 × 6 × 5 × 8 × 3 settings; far more than any n used here.
    while out.len() < n + 1 {
        let knob = |v: Option<f64>| v.map_or(RawValue::Str("off".into()), RawValue::Number);
        let mut cfg = HlgConfig::default();
        let fields = [
            ("pivot", RawValue::Str(rng.pick(&Pivot::ALL).name().into())),
            ("pivot_offset", RawValue::Number(rng.pick(&OFFSETS))),
            ("width", RawValue::Number(rng.pick(&WIDTHS))),
            ("shoulder", knob(rng.pick(&SHOULDERS))),
            ("toe", knob(rng.pick(&TOES))),
            (
                "toe_shape",
                RawValue::Str(rng.pick(&ToeShape::ALL).name().into()),
            ),
        ];
        for (field, v) in fields {
            cfg.set(field, v).expect("the grid holds accepted values");
        }
        let cfg = cfg.resolved(true);
        if !cfg.curve().is_identity() && !out.contains(&cfg) {
            out.push(cfg);
        }
    }
    out
}

/// A setting's knob in words: `0.9`, `n = 1.5`, `top-4 w3 s2 t1 quadratic`.
pub fn knob(s: &Sampler) -> String {
    match s {
        Sampler::Temperature { .. } => String::new(),
        Sampler::TopP { p, .. } => format!("p = {p}"),
        Sampler::MinP { min_p, .. } => format!("min_p = {min_p}"),
        Sampler::TopNSigma { n, .. } => format!("n = {n}"),
        Sampler::Smoothing { factor, curve, .. } => format!("f = {factor} c = {curve}"),
        Sampler::DynamicTemperature {
            low,
            high,
            exponent,
            ..
        } => format!("{low}–{high} e = {exponent}"),
        Sampler::PLess { .. } => String::new(),
        Sampler::TopH { alpha, .. } => format!("α = {alpha}"),
        Sampler::AdaptiveP {
            target,
            decay,
            min_p,
            ..
        } => format!("target = {target} decay = {decay} min_p = {min_p}"),
        Sampler::Hlg { hlg, .. } => {
            let c = hlg.curve();
            let k = |v: Option<f32>| v.map_or("off".to_string(), |v| v.to_string());
            let pivot = match c.pivot() {
                Pivot::Top => format!("top-{}", c.pivot_offset()),
                other => other.name().to_string(),
            };
            format!(
                "{pivot} w{} s{} t{} {}",
                c.width().map_or("off".to_string(), |w| w.to_string()),
                k(c.shoulder()),
                k(c.toe()),
                c.toe_shape()
            )
        }
    }
}

/// Auto mode's grid for the offline sweep that sets its default scales: `width_scale` ×
/// `pivot_offset_scale`, with the shipped shoulder, toe and toe shape.
pub const AUTO_WIDTH_SCALES: [f64; 5] = [0.5, 1.0, 1.5, 2.0, 3.0];
/// See [`AUTO_WIDTH_SCALES`].
pub const AUTO_OFFSET_SCALES: [f64; 4] = [1.0, 2.0, 3.0, 4.0];

/// adaptive-p's targets on the offline screen (beside auto mode's sweep)…
pub const ADAPTIVE_P_TARGETS: [f64; 4] = [0.3, 0.5, 0.7, 0.9];

/// The auto-contrast sweep's settings: plain temperature, the shipped (fixed) HLG knobs,
/// min-p and top-nσ over their knobs, then auto mode over [`AUTO_WIDTH_SCALES`] ×
/// [`AUTO_OFFSET_SCALES`], then adaptive-p at each of [`ADAPTIVE_P_TARGETS`] (its min-p
/// cut is what [`screen`] matches; its decay has no effect offline, where it runs at its
/// fixed point, and stays at llama.cpp's 0.9). Temperatures (adaptive-p's cut) are
/// placeholders: [`screen`] matches them.
pub fn auto_sweep() -> Vec<Sampler> {
    let t = 1.0;
    let mut out = vec![
        Sampler::Temperature { t },
        Sampler::Hlg {
            t,
            hlg: HlgConfig::default(),
        },
    ];
    out.extend(MIN_P.map(|min_p| Sampler::MinP { t, min_p }));
    out.extend(TOP_NSIGMA.map(|n| Sampler::TopNSigma { t, n }));
    for kw in AUTO_WIDTH_SCALES {
        for kc in AUTO_OFFSET_SCALES {
            let hlg = HlgConfig::from_pairs([
                ("width", "auto"),
                ("pivot_offset", "auto"),
                ("width_scale", kw.to_string().as_str()),
                ("pivot_offset_scale", kc.to_string().as_str()),
            ])
            .expect("the grid's scales are accepted");
            out.push(Sampler::Hlg { t, hlg });
        }
    }
    out.extend(ADAPTIVE_P_TARGETS.map(|target| Sampler::AdaptiveP {
        t,
        target,
        decay: 0.9,
        min_p: 0.05,
    }));
    out
}

/// The knob of the shipped HLG settings ([`HlgConfig::default`]).
pub fn shipped_knob() -> String {
    knob(&Sampler::Hlg {
        t: 1.0,
        hlg: HlgConfig::default().resolved(true),
    })
}

/// Whether `points` were screened with `settings`, in order: the same knobs, except
/// adaptive-p's min-p cut, which the screen matches (its knob records the matched cut).
pub fn screened_with(points: &[Screened], settings: &[Sampler]) -> bool {
    let unmatched = |s: &Sampler| match s {
        Sampler::AdaptiveP { target, decay, .. } => format!("target = {target} decay = {decay}"),
        other => knob(other),
    };
    points.len() == settings.len()
        && points
            .iter()
            .zip(settings)
            .all(|(p, s)| unmatched(&p.sampler) == unmatched(s))
}

/// The knob of auto mode at its defaults (`"width": "auto"`, `"pivot_offset": "auto"`,
/// the default scales, the rest shipped).
pub fn auto_default_knob() -> String {
    let hlg = HlgConfig::from_pairs([("width", "auto"), ("pivot_offset", "auto")])
        .expect("auto is accepted");
    knob(&Sampler::Hlg {
        t: 1.0,
        hlg: hlg.resolved(true),
    })
}

/// One setting at one level: at its matched temperature, its means over every position.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Screened {
    /// The family.
    pub family: Family,
    /// The knob in words ([`knob`]).
    pub knob: String,
    /// The sampler at its matched temperature.
    pub sampler: Sampler,
    /// The means over every captured position (`kl` against plain temperature at the
    /// same temperature).
    pub stats: Stats,
    /// The mean entropy reached on the bisection's positions: within [`MATCH_TOLERANCE`]
    /// of the target, or the setting cannot reach it (a kept set too small for the
    /// entropy at any temperature up to 8) and is left out of the comparisons.
    pub entropy_reached: f64,
    /// Whether `entropy_reached` matches the target.
    pub matched: bool,
}

/// How far from the target a setting's mean entropy may be and still count as matched,
/// as a share of the target: top-p's and min-p's entropy jumps where a token enters the
/// kept set, by up to ~1 % on this capture.
pub const MATCH_TOLERANCE: f64 = 0.03;

/// Tail mass below this counts as none: the truncation samplers reach exactly 0, a
/// curve only 1e-100 or so, and no online run of these sizes could tell them apart.
pub const TAIL_FLOOR: f64 = 1e-6;

/// Every setting at one entropy level.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Screening {
    /// Plain temperature's T defining the target.
    pub level: f64,
    /// The target: plain temperature's mean entropy at `level` on the bisection's rows.
    pub target_entropy: f64,
    /// Positions measured.
    pub positions: usize,
    /// The capture's [`Capture::fingerprint`] (empty in levels screened before it was
    /// recorded).
    #[serde(default)]
    pub capture: String,
    /// Every setting.
    pub points: Vec<Screened>,
}

/// Screens `settings` at plain temperature's entropy at `level`: each one's temperature by
/// bisection on every third position, its measures on all of them. The settings are
/// shared out over `threads` threads; `progress(done, total)` after each.
pub fn screen(
    capture: &Capture,
    settings: &[Sampler],
    level: f64,
    threads: usize,
    progress: impl Fn(usize, usize) + Sync,
) -> Result<Screening, EvalError> {
    if capture.rows.is_empty() || !(level.is_finite() && level > 0.0) {
        return Err(EvalError::Invalid(format!(
            "screening needs captured rows and a level > 0 (got {} rows, level {level})",
            capture.rows.len()
        )));
    }
    let sub: Vec<usize> = (0..capture.rows.len()).step_by(3).collect();
    let rows = || sub.iter().map(|&i| capture.row(i));
    let target = mean_entropy(&Sampler::Temperature { t: level }, rows());
    let done = std::sync::atomic::AtomicUsize::new(0);
    let one = |s: &Sampler| {
        let (s, reached) = match s {
            Sampler::Temperature { .. } => (s.at(level), target),
            _ => match_setting(s, target, rows, 0.05, 8.0),
        };
        let t = s.temperature();
        let stats = mean_stats_with(capture, |y| s.transform(y), t, 1);
        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        progress(n, settings.len());
        Screened {
            family: Family::of(&s),
            knob: knob(&s),
            sampler: s,
            stats,
            entropy_reached: reached,
            matched: (reached - target).abs() <= MATCH_TOLERANCE * target,
        }
    };
    let per = settings.len().div_ceil(threads.max(1)).max(1);
    let points = std::thread::scope(|scope| {
        let handles: Vec<_> = settings
            .chunks(per)
            .map(|chunk| scope.spawn(|| chunk.iter().map(one).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a screening thread"))
            .collect()
    });
    Ok(Screening {
        level,
        target_entropy: target,
        positions: capture.rows.len(),
        capture: capture.fingerprint(),
        points,
    })
}

/// A quality measure of the screening.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Mass on base-tail tokens (lower is better).
    TailMass,
    /// Expected base log-probability of a drawn token (higher is better).
    BaseLogprob,
}

impl Measure {
    /// Both, in the order of the tables.
    pub const ALL: [Measure; 2] = [Measure::TailMass, Measure::BaseLogprob];

    /// The measure of a point.
    pub fn of(self, s: &Stats) -> f64 {
        match self {
            Measure::TailMass => s.tail_mass,
            Measure::BaseLogprob => s.base_logprob,
        }
    }

    /// Whether `a` is at least as good as `b` (tail masses below [`TAIL_FLOOR`] are
    /// equal).
    pub fn at_least_as_good(self, a: f64, b: f64) -> bool {
        match self {
            Measure::TailMass => a <= b.max(TAIL_FLOOR),
            Measure::BaseLogprob => a >= b,
        }
    }

    /// Its name in tables and figures.
    pub fn name(self) -> &'static str {
        match self {
            Measure::TailMass => "tail mass",
            Measure::BaseLogprob => "expected base log-prob",
        }
    }
}

impl Screening {
    /// The family's best setting on `m` at this level, among the matched ones.
    pub fn best(&self, family: Family, m: Measure) -> Option<&Screened> {
        self.points
            .iter()
            .filter(|p| p.family == family && p.matched)
            .reduce(|a, b| {
                if m.at_least_as_good(m.of(&a.stats), m.of(&b.stats)) {
                    a
                } else {
                    b
                }
            })
    }

    /// The frontier at this level: every matched setting, of any family, that no other
    /// is at least as good as on both measures and better on one (tail masses below
    /// [`TAIL_FLOOR`] equal), in order of tail mass.
    pub fn frontier(&self) -> Vec<&Screened> {
        pareto(self.points.iter().filter(|p| p.matched).collect())
    }

    /// One family's own frontier at this level: [`Screening::frontier`] among its matched
    /// settings alone (the line a figure draws for the family).
    pub fn family_frontier(&self, family: Family) -> Vec<&Screened> {
        pareto(
            self.points
                .iter()
                .filter(|p| p.matched && p.family == family)
                .collect(),
        )
    }
}

/// The points of `matched` that no other is at least as good as on both measures and
/// better on one, in order of tail mass.
fn pareto(matched: Vec<&Screened>) -> Vec<&Screened> {
    let dominates = |a: &Screened, b: &Screened| {
        let both = Measure::ALL
            .iter()
            .all(|m| m.at_least_as_good(m.of(&a.stats), m.of(&b.stats)));
        let one = Measure::ALL
            .iter()
            .any(|m| !m.at_least_as_good(m.of(&b.stats), m.of(&a.stats)));
        both && one
    };
    let mut out: Vec<&Screened> = matched
        .iter()
        .copied()
        .filter(|p| !matched.iter().any(|q| dominates(q, p)))
        .collect();
    out.sort_by(|a, b| a.stats.tail_mass.total_cmp(&b.stats.tail_mass));
    out
}

/// The HLG settings to confirm online: those on the frontier at the most levels, then
/// with the lowest tail mass summed over the levels; at most `k`.
pub fn candidates(levels: &[Screening], k: usize) -> Vec<String> {
    let mut score: std::collections::BTreeMap<String, (usize, f64)> = Default::default();
    for level in levels {
        for p in level
            .points
            .iter()
            .filter(|p| p.family == Family::Hlg && p.matched)
        {
            score.entry(p.knob.clone()).or_default().1 += p.stats.tail_mass;
        }
        for p in level
            .frontier()
            .into_iter()
            .filter(|p| p.family == Family::Hlg)
        {
            score.entry(p.knob.clone()).or_default().0 += 1;
        }
    }
    let mut ranked: Vec<(String, (usize, f64))> = score.into_iter().collect();
    ranked.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.1 .1.total_cmp(&b.1 .1)));
    ranked.into_iter().take(k).map(|(knob, _)| knob).collect()
}

/// A matched screened point with these two measures (tests).
#[cfg(test)]
pub(crate) fn point(family: Family, knob: &str, tail_mass: f64, base_logprob: f64) -> Screened {
    Screened {
        family,
        knob: knob.into(),
        sampler: Sampler::Temperature { t: 1.0 },
        stats: Stats {
            tail_mass,
            base_logprob,
            ..Stats::default()
        },
        entropy_reached: 2.0,
        matched: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{CaptureConfig, Row};

    /// A capture of `rows` synthetic positions over a vocabulary of 64: a few likely
    /// tokens and a long tail, shifted per row.
    fn synthetic(rows: usize) -> Capture {
        let vocab = 64;
        let mut logits = vec![];
        for r in 0..rows {
            for i in 0..vocab {
                let x = -(i as f32) * 0.35 + ((i * 7 + r * 3) % 5) as f32 * 0.2;
                logits.push(if i < 4 { x + 4.0 } else { x });
            }
        }
        Capture {
            config: CaptureConfig::default(),
            vocab,
            prompts: vec!["p".into()],
            texts: vec![],
            rows: (0..rows).map(|step| Row { prompt: 0, step }).collect(),
            logits,
        }
    }

    /// The baselines and `n` HLG settings of the search.
    fn settings(n: usize, seed: u64) -> Vec<Sampler> {
        let mut out = baselines();
        out.extend(
            hlg_search(n, seed)
                .into_iter()
                .map(|hlg| Sampler::Hlg { t: 1.0, hlg }),
        );
        out
    }

    #[test]
    fn every_family_gets_the_same_budget() {
        let all = equal_budget(7, 19);
        for f in Family::ALL {
            let of: Vec<&Sampler> = all.iter().filter(|s| Family::of(s) == f).collect();
            let want = match f {
                Family::Temperature | Family::PLess => 1,
                // Not a family of the cross-judged evaluation this budget sized.
                Family::AdaptiveP => 0,
                _ => 7,
            };
            assert_eq!(of.len(), want, "{}", f.name());
            // Distinct settings: no knob value repeats.
            let mut knobs: Vec<String> = of.iter().map(|s| knob(s)).collect();
            knobs.dedup();
            assert_eq!(knobs.len(), want, "{}: {knobs:?}", f.name());
        }
        assert_eq!(knob(&all[all.len() - 7]), shipped_knob());
        // The ends of each range, and a log scale: min-p's middle is the geometric mean
        // of 0.005 and 0.3 (0.0387), top-p's the arithmetic one of 0.5 and 0.98.
        assert_eq!(spread(0.5, 0.98, 3, false), [0.5, 0.74, 0.98]);
        assert_eq!(spread(0.005, 0.3, 3, true), [0.005, 0.0387, 0.3]);
        assert_eq!(spread(1.0, 2.0, 1, false), [1.5]);
        assert_eq!(
            (round3(0.123456), round3(1234.5), round3(-0.0098765)),
            (0.123, 1230.0, -0.00988)
        );
    }

    /// A level screened with the sweep's settings is recognised as such, adaptive-p's
    /// matched cut notwithstanding; another list is not.
    #[test]
    fn a_level_knows_its_settings() {
        let settings = auto_sweep();
        let mut points: Vec<Screened> = settings
            .iter()
            .map(|s| Screened {
                sampler: s.clone(),
                ..point(Family::of(s), &knob(s), 0.0, 0.0)
            })
            .collect();
        if let Some(Screened {
            sampler: Sampler::AdaptiveP { min_p, .. },
            ..
        }) = points.last_mut()
        {
            *min_p = 1.3e-5;
        }
        assert!(screened_with(&points, &settings));
        assert!(!screened_with(
            &points[1..],
            &settings[1..settings.len() - 1]
        ));
        points.swap(0, 1);
        assert!(!screened_with(&points, &settings));
    }

    /// The auto default is one of the sweep's settings, under the name RESULTS gives it.
    #[test]
    fn the_auto_default_is_in_the_sweep() {
        let knob_of = auto_default_knob();
        assert_eq!(knob_of, "top-3σ w1.5σ s2 t1 quadratic");
        assert!(auto_sweep().iter().any(|s| knob(s) == knob_of));
    }

    #[test]
    fn the_search_is_seeded_distinct_and_starts_with_the_shipped_knobs() {
        let a = hlg_search(40, 7);
        assert_eq!(a, hlg_search(40, 7));
        assert_ne!(a, hlg_search(40, 8));
        assert_eq!(a.len(), 41);
        assert_eq!(a[0], HlgConfig::default().resolved(true));
        for (i, c) in a.iter().enumerate() {
            assert!(!a[..i].contains(c), "setting {i} repeats");
            assert!(!c.curve().is_identity(), "setting {i} is plain temperature");
        }
        // Every field of the grid is reached.
        let toes: std::collections::BTreeSet<String> =
            a.iter().map(|c| format!("{:?}", c.curve().toe())).collect();
        assert!(toes.len() >= 5, "{toes:?}");
    }

    #[test]
    fn every_setting_is_screened_at_the_target_entropy() {
        let c = synthetic(12);
        let settings = settings(6, 1);
        let level = screen(&c, &settings, 0.8, 2, |_, _| {}).unwrap();
        assert_eq!(level.points.len(), settings.len());
        // The bisection's rows are every third; the entropy there equals the target (top-p
        // and min-p jump where a token enters the kept set: within 5 %).
        let sub: Vec<usize> = (0..12).step_by(3).collect();
        for p in level.points.iter().filter(|p| p.matched) {
            let h = mean_entropy(&p.sampler, sub.iter().map(|&i| c.row(i)));
            assert_eq!(h, p.entropy_reached);
            let tol = match p.family {
                Family::TopP | Family::MinP | Family::TopNSigma | Family::PLess | Family::TopH => {
                    0.05 * level.target_entropy
                }
                _ => 2e-3,
            };
            assert!(
                (h - level.target_entropy).abs() < tol,
                "{} {}: {h} vs {}",
                p.family.name(),
                p.knob,
                level.target_entropy
            );
        }
        let temp = &level.points[0];
        assert_eq!(
            (temp.family, temp.sampler.temperature()),
            (Family::Temperature, 0.8)
        );
        assert!(
            temp.stats.kl.abs() < 1e-12,
            "plain temperature against itself"
        );
    }

    #[test]
    fn best_and_the_frontier_compare_every_family() {
        let level = Screening {
            level: 1.0,
            target_entropy: 2.0,
            positions: 1,
            capture: String::new(),
            points: vec![
                point(Family::Temperature, "", 0.10, -3.0),
                point(Family::MinP, "a", 0.02, -2.5),
                point(Family::MinP, "b", 0.04, -2.0),
                point(Family::TopP, "no tail", 0.0, -2.6),
                point(Family::Hlg, "beats both", 0.01, -1.9),
                point(Family::Hlg, "good tail only", 0.01, -2.2),
                point(Family::Hlg, "loses", 0.2, -4.0),
                Screened {
                    matched: false,
                    ..point(Family::Hlg, "unmatched", 0.0, 0.0)
                },
            ],
        };
        assert_eq!(
            level.best(Family::MinP, Measure::TailMass).unwrap().knob,
            "a"
        );
        assert_eq!(
            level.best(Family::Hlg, Measure::TailMass).unwrap().knob,
            "beats both",
            "the unmatched setting is left out"
        );
        // A tail mass of 0 and one below the floor are equal.
        assert!(Measure::TailMass.at_least_as_good(1e-9, 0.0));
        assert!(!Measure::TailMass.at_least_as_good(1e-5, 0.0));
        assert_eq!(
            level.best(Family::MinP, Measure::BaseLogprob).unwrap().knob,
            "b"
        );
        let frontier: Vec<&str> = level.frontier().iter().map(|p| p.knob.as_str()).collect();
        assert_eq!(frontier, ["no tail", "beats both"]);
        // A family's own frontier holds settings the whole one does not.
        let own = |f| -> Vec<String> {
            level
                .family_frontier(f)
                .iter()
                .map(|p| p.knob.clone())
                .collect()
        };
        assert_eq!(own(Family::MinP), ["a", "b"]);
        assert_eq!(own(Family::Hlg), ["beats both"]);
        assert_eq!(own(Family::Temperature), [""]);
        assert!(own(Family::TopNSigma).is_empty());
        let two = [level.clone(), level];
        assert_eq!(candidates(&two, 2), ["beats both", "good tail only"]);
    }

    #[test]
    fn a_screened_level_reads_back_as_written() {
        let c = synthetic(6);
        let settings = settings(3, 2);
        let level = screen(&c, &settings, 1.0, 1, |_, _| {}).unwrap();
        let text = serde_json::to_string(&level).unwrap();
        let back: Screening = serde_json::from_str(&text).unwrap();
        // serde_json reads floats to within an ulp; the KL of a truncating sampler is
        // infinite, written as null.
        assert_eq!(back.points.len(), level.points.len());
        for (a, b) in back.points.iter().zip(&level.points) {
            assert_eq!(
                (&a.knob, a.family, a.matched),
                (&b.knob, b.family, b.matched)
            );
            let close = |x: f64, y: f64| x == y || (x - y).abs() <= 1e-12 * y.abs().max(1.0);
            assert!(close(a.stats.kl, b.stats.kl) && close(a.stats.tail_mass, b.stats.tail_mass));
            assert!(close(a.stats.base_logprob, b.stats.base_logprob));
        }
        assert!(
            back.points.iter().any(|p| p.stats.kl == f64::INFINITY),
            "top-p's KL"
        );
    }

    #[test]
    fn knobs_read_as_the_settings() {
        assert_eq!(knob(&Sampler::TopP { t: 1.0, p: 0.9 }), "p = 0.9");
        let hlg = HlgConfig::default().resolved(true);
        assert_eq!(
            knob(&Sampler::Hlg { t: 1.0, hlg }),
            "top-4 w3 s2 t1 quadratic"
        );
    }
}
