//! The samplers the evaluation compares, as one transform each on the logits: what a
//! logits processor hands the host, which then divides by `T` and samples from the whole
//! vocabulary (top-k, top-p and min-p off in the host). The same functions measure the
//! offline entropy that the baselines are matched on, and run the online generations.

use serde::{Deserialize, Serialize};

use super::metrics::finite_max;

use mistralrs_hlg::HlgConfig;

/// The fixed-knob baselines' parameters (the diversity and KL steps, the guardrail):
/// top-p's nucleus mass. The frontier sweeps its own ranges (`frontier::TOP_P`).
pub const BASELINE_TOP_P: f64 = 0.9;
/// See [`BASELINE_TOP_P`]: min-p's ratio.
pub const BASELINE_MIN_P: f64 = 0.05;

/// A sampling method at a temperature.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Sampler {
    /// Plain temperature.
    Temperature {
        /// T.
        t: f64,
    },
    /// Nucleus sampling: the smallest top set whose tempered mass reaches `p`.
    TopP {
        /// T.
        t: f64,
        /// The nucleus mass.
        p: f64,
    },
    /// Min-p: the tokens whose tempered probability is at least `min_p` × the top one's.
    MinP {
        /// T.
        t: f64,
        /// The ratio to the top token's probability.
        min_p: f64,
    },
    /// Top-nσ (Tang et al. 2024, "Top-nσ: Not All Logits Are You Need"): the tokens whose
    /// logit is within `n` standard deviations (of the finite logits) of the largest. The
    /// kept set does not depend on T (max and σ scale alike), only the draw within it.
    TopNSigma {
        /// T.
        t: f64,
        /// The number of standard deviations.
        n: f64,
    },
    /// Quadratic/cubic smoothing (text-generation-webui's `smoothing_factor` f and
    /// `smoothing_curve` c), the closest prior art: a curve on the logits as HLG is. With
    /// d = ℓ − ℓmax, k = (3 − c)/2 and s = (c − 1)/2: ℓ′ = ℓmax − k·f·d² + s·f·d³.
    Smoothing {
        /// T.
        t: f64,
        /// f.
        factor: f64,
        /// c (1: quadratic, 3: cubic).
        curve: f64,
    },
    /// Dynamic temperature: ℓ / T_d with T_d = low + (high − low)·(H / ln N)^exponent,
    /// H the entropy of softmax(ℓ) and N the number of finite logits; then T on top.
    DynamicTemperature {
        /// T.
        t: f64,
        /// T_d at zero entropy.
        low: f64,
        /// T_d at the uniform distribution's entropy.
        high: f64,
        /// The exponent on the normalised entropy.
        exponent: f64,
    },
    /// p-less: keeps the tokens whose tempered probability is at least Σ p² (the chance
    /// that two draws agree); no knob.
    PLess {
        /// T.
        t: f64,
    },
    /// Top-H: the top tokens, in order of probability, as long as the renormalised set's
    /// entropy stays within `alpha` × the tempered distribution's entropy.
    TopH {
        /// T.
        t: f64,
        /// The entropy bound's ratio.
        alpha: f64,
    },
    /// llama.cpp's adaptive-p (pull request 17927) in its chain: a min-p cut on the raw
    /// logits, temperature, then the transform around an adapted target probability
    /// (see [`adaptive_p`]), which keeps a running average of the drawn tokens'
    /// probabilities ([`Memory`]). Offline, without a history, it runs at its fixed
    /// point: the running average equal to `target`.
    AdaptiveP {
        /// T, applied before the transform as llama.cpp's chain applies it.
        t: f64,
        /// The target probability.
        target: f64,
        /// The running average's decay (clamped to [0, 0.99] as llama.cpp does).
        decay: f64,
        /// The min-p ratio cut before it (0: no cut).
        min_p: f64,
    },
    /// HLG: the curve, then temperature.
    Hlg {
        /// T (the mid gain).
        t: f64,
        /// The curve's settings (every field filled).
        hlg: HlgConfig,
    },
}

impl Sampler {
    /// The temperature.
    pub fn temperature(&self) -> f64 {
        match *self {
            Sampler::Temperature { t }
            | Sampler::TopP { t, .. }
            | Sampler::MinP { t, .. }
            | Sampler::TopNSigma { t, .. }
            | Sampler::Smoothing { t, .. }
            | Sampler::DynamicTemperature { t, .. }
            | Sampler::PLess { t }
            | Sampler::TopH { t, .. }
            | Sampler::AdaptiveP { t, .. }
            | Sampler::Hlg { t, .. } => t,
        }
    }

    /// The same method at temperature `t`.
    pub fn at(&self, t: f64) -> Sampler {
        match self {
            Sampler::Temperature { .. } => Sampler::Temperature { t },
            Sampler::TopP { p, .. } => Sampler::TopP { t, p: *p },
            Sampler::MinP { min_p, .. } => Sampler::MinP { t, min_p: *min_p },
            Sampler::TopNSigma { n, .. } => Sampler::TopNSigma { t, n: *n },
            &Sampler::Smoothing { factor, curve, .. } => Sampler::Smoothing { t, factor, curve },
            &Sampler::DynamicTemperature {
                low,
                high,
                exponent,
                ..
            } => Sampler::DynamicTemperature {
                t,
                low,
                high,
                exponent,
            },
            Sampler::PLess { .. } => Sampler::PLess { t },
            &Sampler::TopH { alpha, .. } => Sampler::TopH { t, alpha },
            &Sampler::AdaptiveP {
                target,
                decay,
                min_p,
                ..
            } => Sampler::AdaptiveP {
                t,
                target,
                decay,
                min_p,
            },
            Sampler::Hlg { hlg, .. } => Sampler::Hlg {
                t,
                hlg: hlg.clone(),
            },
        }
    }

    /// A short name: `temperature`, `top_p 0.9`, `min_p 0.05`, `top_nsigma 1`, `hlg quadratic`.
    pub fn name(&self) -> String {
        match self {
            Sampler::Temperature { .. } => "temperature".into(),
            Sampler::TopP { p, .. } => format!("top_p {p}"),
            Sampler::MinP { min_p, .. } => format!("min_p {min_p}"),
            Sampler::TopNSigma { n, .. } => format!("top_nsigma {n}"),
            Sampler::Smoothing { factor, curve, .. } => format!("smoothing {factor} {curve}"),
            Sampler::DynamicTemperature {
                low,
                high,
                exponent,
                ..
            } => format!("dynamic_temperature {low} {high} {exponent}"),
            Sampler::PLess { .. } => "p_less".into(),
            Sampler::TopH { alpha, .. } => format!("top_h {alpha}"),
            Sampler::AdaptiveP {
                target,
                decay,
                min_p,
                ..
            } => format!("adaptive_p {target} {decay} {min_p}"),
            Sampler::Hlg { hlg, .. } => format!("hlg {}", hlg.curve().toe_shape().name()),
        }
    }

    /// The logits to sample from at this sampler's temperature, in place: the curve for
    /// HLG, `-inf` outside the kept set for top-p and min-p, unchanged for temperature.
    pub fn transform(&self, x: &mut [f32]) {
        match self {
            Sampler::Temperature { .. } => {}
            Sampler::Hlg { hlg, .. } => hlg.curve().apply(x),
            &Sampler::TopP { t, p } => top_p(x, t, p),
            &Sampler::MinP { t, min_p } => {
                let probs = probs(x, t);
                let top = probs.iter().copied().fold(0.0, f64::max);
                for (v, q) in x.iter_mut().zip(&probs) {
                    if *q < min_p * top {
                        *v = f32::NEG_INFINITY;
                    }
                }
            }
            &Sampler::Smoothing { factor, curve, .. } => smoothing(x, factor, curve),
            &Sampler::DynamicTemperature {
                low,
                high,
                exponent,
                ..
            } => dynamic_temperature(x, low, high, exponent),
            &Sampler::PLess { t } => {
                let q = probs(x, t);
                let floor: f64 = q.iter().map(|p| p * p).sum();
                drop_where(x, &q, |p| p < floor);
            }
            &Sampler::TopH { t, alpha } => top_h(x, t, alpha),
            &Sampler::AdaptiveP {
                t, target, min_p, ..
            } => {
                adaptive_p(x, t, min_p, target.clamp(0.0, 1.0));
            }
            &Sampler::TopNSigma { n, .. } => {
                // The population standard deviation of the finite logits, in f64.
                let finite = || x.iter().filter(|v| v.is_finite()).map(|&v| f64::from(v));
                let count = finite().count();
                if count == 0 {
                    return;
                }
                let mean = finite().sum::<f64>() / count as f64;
                let sigma =
                    (finite().map(|v| (v - mean) * (v - mean)).sum::<f64>() / count as f64).sqrt();
                let top = finite().fold(f64::NEG_INFINITY, f64::max);
                let floor = top - n * sigma;
                for v in x.iter_mut() {
                    // Below the floor, or NaN: dropped.
                    let kept = matches!(
                        f64::from(*v).partial_cmp(&floor),
                        Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
                    );
                    if !kept {
                        *v = f32::NEG_INFINITY;
                    }
                }
            }
        }
    }

    /// A sequence's memory for this sampler, at its start: adaptive-p's running average
    /// primed at its target (as llama.cpp primes it); nothing for the others.
    pub fn memory(&self) -> Memory {
        match *self {
            Sampler::AdaptiveP { target, decay, .. } => {
                let d = decay.clamp(0.0, ADAPTIVE_P_MAX_DECAY);
                Memory {
                    sums: Some((target / (1.0 - d), 1.0 / (1.0 - d))),
                    original: vec![],
                }
            }
            _ => Memory::default(),
        }
    }

    /// [`Sampler::transform`] within a sequence: adaptive-p aims at the target adapted
    /// to `memory`'s running average and keeps the probabilities it reshaped, for
    /// [`Sampler::accept`].
    pub fn transform_in(&self, x: &mut [f32], memory: &mut Memory) {
        match (self, memory.sums) {
            (
                &Sampler::AdaptiveP {
                    t, target, min_p, ..
                },
                Some((sum, weight)),
            ) => {
                let target = target.clamp(0.0, 1.0);
                let adapted = (2.0 * target - sum / weight).clamp(0.0, 1.0);
                memory.original = adaptive_p(x, t, min_p, adapted);
            }
            _ => self.transform(x),
        }
    }

    /// The token the sequence drew after [`Sampler::transform_in`]: adaptive-p's running
    /// average takes its probability before the reshaping (llama.cpp's `accept`).
    pub fn accept(&self, memory: &mut Memory, token: usize) {
        if let (&Sampler::AdaptiveP { decay, .. }, Some((sum, weight))) = (self, memory.sums) {
            if let Some(&p) = memory.original.get(token) {
                let d = decay.clamp(0.0, ADAPTIVE_P_MAX_DECAY);
                memory.sums = Some((p + d * sum, 1.0 + d * weight));
            }
            memory.original.clear();
        }
    }

    /// Entropy (nats) of the distribution this sampler draws from at `x`.
    pub fn entropy(&self, x: &[f32]) -> f64 {
        let mut y = x.to_vec();
        self.transform(&mut y);
        entropy_of(&probs(&y, self.temperature()))
    }
}

/// What a sampler carries from one token of a sequence to the next (adaptive-p's
/// running sums and the probabilities of its last step); empty for the others.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Memory {
    /// adaptive-p's Σ decayᶦ·pᵢ and Σ decayᶦ over the drawn tokens.
    sums: Option<(f64, f64)>,
    /// The last step's probabilities before the reshaping, by token.
    original: Vec<f64>,
}

impl Memory {
    /// adaptive-p's running average of the drawn tokens' probabilities.
    pub fn average(&self) -> Option<f64> {
        self.sums.map(|(s, w)| s / w)
    }
}

/// adaptive-p's largest decay (llama.cpp clamps it there).
pub const ADAPTIVE_P_MAX_DECAY: f64 = 0.99;
/// adaptive-p's constants in llama.cpp: the width of the favoured band of probability,
/// the logit at the target, and the steepness.
const ADAPTIVE_P_WIDTH: f64 = 0.3;
const ADAPTIVE_P_PEAK: f64 = 5.0;
const ADAPTIVE_P_SHARPNESS: f64 = 10.0;

/// adaptive-p in place, as llama.cpp chains it: tokens whose logit is below the largest
/// plus ln `min_p` are dropped (min-p on the raw logits), the rest tempered by `t` and
/// softmaxed into p, and each kept token's logit becomes
/// `t · (5 − 10·d²/(1 + d))` with d = |p − `aim`| / 0.3 (the host's division by `t`
/// then leaves adaptive-p's own logits, which llama.cpp samples without a temperature).
/// Returns p by token (0 for the dropped).
pub fn adaptive_p(x: &mut [f32], t: f64, min_p: f64, aim: f64) -> Vec<f64> {
    let Some(top) = finite_max(x) else {
        return vec![0.0; x.len()];
    };
    if min_p > 0.0 {
        let floor = f64::from(top) + min_p.ln();
        for v in x.iter_mut() {
            // Below the floor, or NaN: dropped.
            let kept = f64::from(*v) >= floor;
            if !kept {
                *v = f32::NEG_INFINITY;
            }
        }
    }
    let p = probs(x, t);
    for (v, &q) in x.iter_mut().zip(&p) {
        if v.is_finite() {
            let d = (q - aim).abs() / ADAPTIVE_P_WIDTH;
            *v = (t * (ADAPTIVE_P_PEAK - ADAPTIVE_P_SHARPNESS * d * d / (1.0 + d))) as f32;
        }
    }
    p
}

/// Sets `x[i]` to `-inf` where `drop(q[i])`.
fn drop_where(x: &mut [f32], q: &[f64], drop: impl Fn(f64) -> bool) {
    for (v, &p) in x.iter_mut().zip(q) {
        if drop(p) {
            *v = f32::NEG_INFINITY;
        }
    }
}

/// Quadratic/cubic smoothing in place (see [`Sampler::Smoothing`]); `-inf` stays.
fn smoothing(x: &mut [f32], factor: f64, curve: f64) {
    let Some(top) = finite_max(x) else {
        return;
    };
    let (k, s) = ((3.0 - curve) / 2.0, (curve - 1.0) / 2.0);
    for v in x.iter_mut().filter(|v| v.is_finite()) {
        let d = f64::from(*v - top);
        *v = (f64::from(top) - k * factor * d * d + s * factor * d * d * d) as f32;
    }
}

/// Dynamic temperature in place (see [`Sampler::DynamicTemperature`]).
fn dynamic_temperature(x: &mut [f32], low: f64, high: f64, exponent: f64) {
    let q = probs(x, 1.0);
    let n = x.iter().filter(|v| v.is_finite()).count();
    let h = entropy_of(&q);
    // One token (or none): no spread to normalise, the lowest temperature.
    let spread = if n > 1 {
        (h / (n as f64).ln()).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let td = low + (high - low) * spread.powf(exponent);
    if td > 0.0 {
        for v in x.iter_mut() {
            *v = (f64::from(*v) / td) as f32;
        }
    }
}

/// Top-p in place: the most probable tokens kept while the mass before each is below p.
fn top_p(x: &mut [f32], t: f64, p: f64) {
    let q = probs(x, t);
    let cut = |sorted: &[usize]| {
        let mut cum = 0.0;
        for (j, &i) in sorted.iter().enumerate() {
            if cum >= p {
                return Some(j);
            }
            cum += q[i];
        }
        (cum >= p).then_some(sorted.len())
    };
    let (order, kept) = most_probable_until(&q, cut);
    for &i in &order[kept..] {
        x[i] = f32::NEG_INFINITY;
    }
}

/// Top-H in place (see [`Sampler::TopH`]): the entropy of the renormalised top set from
/// running sums, S = Σ q and A = Σ q ln q: H = ln S − A / S.
fn top_h(x: &mut [f32], t: f64, alpha: f64) {
    let q = probs(x, t);
    let bound = alpha * entropy_of(&q);
    let cut = |sorted: &[usize]| {
        let (mut sum, mut plogp) = (0.0, 0.0);
        for (kept, &i) in sorted.iter().enumerate() {
            let (s, a) = (sum + q[i], plogp + q[i] * q[i].ln());
            if kept > 0 && s.ln() - a / s > bound {
                return Some(kept);
            }
            (sum, plogp) = (s, a);
        }
        None
    };
    let (order, kept) = most_probable_until(&q, cut);
    for &i in &order[kept..] {
        x[i] = f32::NEG_INFINITY;
    }
}

/// The tokens with `q > 0`, most probable first (ties: lower index first), sorted only as
/// far as `cut` needs: `cut` reads a sorted prefix and returns how many of the order to
/// keep, or `None` when it must see more. Returns the order (its prefix of `kept` sorted,
/// the rest in no order) and `kept`. The same as sorting everything and cutting once (a
/// prefix of the full sort is the top of a selection, sorted), without sorting 262k
/// entries per token for a cut that lands in the first few hundred.
fn most_probable_until(q: &[f64], cut: impl Fn(&[usize]) -> Option<usize>) -> (Vec<usize>, usize) {
    let by = |a: &usize, b: &usize| q[*b].total_cmp(&q[*a]).then(a.cmp(b));
    let mut order: Vec<usize> = (0..q.len()).filter(|&i| q[i] > 0.0).collect();
    let mut k = 1024;
    loop {
        if k >= order.len() {
            order.sort_unstable_by(by);
            let kept = cut(&order).unwrap_or(order.len());
            return (order, kept);
        }
        order.select_nth_unstable_by(k, by);
        order[..k].sort_unstable_by(by);
        if let Some(kept) = cut(&order[..k]) {
            return (order, kept);
        }
        k *= 8;
    }
}

/// Entropy (nats) of a distribution.
pub fn entropy_of(q: &[f64]) -> f64 {
    -q.iter()
        .filter(|&&v| v > 0.0)
        .map(|v| v * v.ln())
        .sum::<f64>()
}

/// `softmax(x / t)` in `f64`; non-finite entries get 0.
pub fn probs(x: &[f32], t: f64) -> Vec<f64> {
    match super::metrics::log_softmax(x, t) {
        Some(l) => l.into_iter().map(f64::exp).collect(),
        None => vec![0.0; x.len()],
    }
}

/// Mean entropy of `s` over `rows`.
pub fn mean_entropy<'a>(s: &Sampler, rows: impl Iterator<Item = &'a [f32]>) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for r in rows {
        sum += s.entropy(r);
        n += 1;
    }
    sum / n.max(1) as f64
}

/// The setting of `s` whose mean entropy over `rows` is `target`, and the entropy
/// reached. Every sampler but adaptive-p is matched by its temperature ([`match_entropy`]
/// on `[lo, hi]`). adaptive-p keeps its T and is matched by its min-p cut, on a log scale
/// over [1e-6, 1]: the cut bounds its entropy by the log of the number of tokens kept,
/// whatever T (on the embedded model no T up to 8 reaches plain temperature's entropy at
/// T = 0.8 with a cut of 0.05), and T moves it both ways (at T → 0 and T → ∞ alike the
/// kept tokens' probabilities sit equally far from the target). A lower cut lets in more
/// of the tail, so its entropy falls as the cut rises.
pub fn match_setting<'a, I: Iterator<Item = &'a [f32]>>(
    s: &Sampler,
    target: f64,
    rows: impl Fn() -> I,
    lo: f64,
    hi: f64,
) -> (Sampler, f64) {
    match *s {
        Sampler::AdaptiveP {
            t,
            target: aim,
            decay,
            ..
        } => {
            let at = |ln_cut: f64| Sampler::AdaptiveP {
                t,
                target: aim,
                decay,
                min_p: round_sig(ln_cut.exp()),
            };
            let (mut lo, mut hi) = (1e-6f64.ln(), 0.0f64);
            for _ in 0..40 {
                let mid = 0.5 * (lo + hi);
                if mean_entropy(&at(mid), rows()) > target {
                    lo = mid;
                } else {
                    hi = mid;
                }
                if hi - lo < 1e-4 {
                    break;
                }
            }
            let s = at(0.5 * (lo + hi));
            let h = mean_entropy(&s, rows());
            (s, h)
        }
        _ => {
            let (t, h) = match_entropy(s, target, rows, lo, hi);
            (s.at(t), h)
        }
    }
}

/// `v` to 6 significant digits (a matched cut reads back from JSON as written).
fn round_sig(v: f64) -> f64 {
    let scale = 10f64.powi(5 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// The temperature at which `s` has mean entropy `target` over `rows` (`rows` is called
/// once per trial), found by bisection on `[lo, hi]`; mean entropy grows with T for every
/// method here. Returns the temperature and the entropy reached.
pub fn match_entropy<'a, I: Iterator<Item = &'a [f32]>>(
    s: &Sampler,
    target: f64,
    rows: impl Fn() -> I,
    lo: f64,
    hi: f64,
) -> (f64, f64) {
    let (mut lo, mut hi) = (lo, hi);
    for _ in 0..30 {
        let mid = 0.5 * (lo + hi);
        if mean_entropy(&s.at(mid), rows()) < target {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-4 {
            break;
        }
    }
    let t = 0.5 * (lo + hi);
    (t, mean_entropy(&s.at(t), rows()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// adaptive-p against a hand computation (Python's math module, from the formulas of
    /// llama.cpp's description): logits [2, 1, 0, −3], min-p 0.1 (floor 2 + ln 0.1 =
    /// −0.303: the last token goes), p = softmax([2, 1, 0]) = [0.66524, 0.24473,
    /// 0.09003], and at the fixed point (aim 0.5) d = |p − 0.5| / 0.3 and 5 − 10·d²/(1 + d).
    #[test]
    fn adaptive_p_matches_a_hand_computation() {
        let close = |a: f64, b: f64| (a - b).abs() < 2e-6;
        for t in [1.0, 2.0] {
            let s = Sampler::AdaptiveP {
                t,
                target: 0.5,
                decay: 0.9,
                min_p: 0.1,
            };
            let mut y = vec![2.0f32, 1.0, 0.0, -3.0];
            s.transform(&mut y);
            // The host divides by T: what is left is adaptive-p's own logits.
            let got: Vec<f64> = y[..3].iter().map(|&v| f64::from(v) / t).collect();
            let want = match t {
                1.0 => [3.043_696_63, 1.088_186_88, -2.891_181_63],
                // p = softmax([1, 0.5, 0]) = [0.50648, 0.30720, 0.18632].
                _ => [4.995_432_50, 2.485_584_68, -0.344_446_81],
            };
            assert!(
                got.iter().zip(want).all(|(&g, w)| close(g, w)),
                "T = {t}: {got:?}"
            );
            assert_eq!(y[3], f32::NEG_INFINITY);
        }
    }

    /// The running average across two steps: primed at the target (sums 5 and 10 at
    /// decay 0.9), then the drawn token's probability before the reshaping (0.24473)
    /// enters it: (0.24473 + 0.9·5) / (1 + 0.9·10) = 0.474473, so the next step aims at
    /// 2·0.5 − 0.474473 = 0.525527.
    #[test]
    fn adaptive_p_aims_by_its_running_average() {
        let s = Sampler::AdaptiveP {
            t: 1.0,
            target: 0.5,
            decay: 0.9,
            min_p: 0.1,
        };
        let mut memory = s.memory();
        assert_eq!(memory.average(), Some(0.5));
        let x = vec![2.0f32, 1.0, 0.0, -3.0];
        let (mut first, mut fixed) = (x.clone(), x.clone());
        s.transform_in(&mut first, &mut memory);
        s.transform(&mut fixed);
        assert_eq!(first, fixed, "a primed memory aims at the target");
        s.accept(&mut memory, 1);
        assert!((memory.average().unwrap() - 0.474_472_847).abs() < 1e-8);
        let mut second = x.clone();
        s.transform_in(&mut second, &mut memory);
        let want = [3.520_253_66, 0.474_742_96, -3.595_429_55];
        for (g, w) in second[..3].iter().zip(want) {
            assert!((f64::from(*g) - w).abs() < 2e-6, "{second:?}");
        }
        // A token accepted twice, or with no step before it, changes nothing.
        let before = memory.clone();
        s.accept(&mut memory, 0);
        s.accept(&mut memory, 0);
        assert_ne!(memory, before);
        let once = memory.clone();
        s.accept(&mut memory, 0);
        assert_eq!(memory, once);
        // Other samplers carry nothing.
        let mut none = Sampler::Temperature { t: 1.0 }.memory();
        assert_eq!(none, Memory::default());
        Sampler::Temperature { t: 1.0 }.accept(&mut none, 0);
        assert_eq!(none, Memory::default());
    }

    /// adaptive-p is matched by its cut: over rows of a Zipf-like vocabulary its mean
    /// entropy falls as the cut rises, and the matched setting reaches the target.
    #[test]
    fn adaptive_p_is_matched_by_its_cut() {
        let rows: Vec<Vec<f32>> = (0..6)
            .map(|r| {
                (0..2000)
                    .map(|i| -(1.0 + r as f32 * 0.2) * ((i + 1) as f32).ln())
                    .collect()
            })
            .collect();
        let at = |min_p| Sampler::AdaptiveP {
            t: 1.0,
            target: 0.5,
            decay: 0.9,
            min_p,
        };
        let h = |min_p| mean_entropy(&at(min_p), rows.iter().map(|r| r.as_slice()));
        let cuts = [1e-5, 1e-4, 1e-3, 1e-2, 0.1, 0.5];
        for w in cuts.windows(2) {
            assert!(h(w[0]) > h(w[1]), "{:?}: {} vs {}", w, h(w[0]), h(w[1]));
        }
        let target = h(3e-3);
        let (s, reached) = match_setting(
            &at(0.05),
            target,
            || rows.iter().map(|r| r.as_slice()),
            0.05,
            8.0,
        );
        assert!(
            (reached - target).abs() < 1e-3 * target,
            "{reached} vs {target}"
        );
        let Sampler::AdaptiveP { min_p, t, .. } = s else {
            panic!("{s:?}")
        };
        assert_eq!(t, 1.0);
        assert!((min_p / 3e-3 - 1.0).abs() < 0.01, "{min_p}");
    }

    /// The decay is clamped as llama.cpp clamps it, and a target outside [0, 1] aims at
    /// its nearest end; no logit that was -inf or NaN comes back finite.
    #[test]
    fn adaptive_p_keeps_to_its_ranges() {
        let s = Sampler::AdaptiveP {
            t: 1.0,
            target: 0.5,
            decay: 5.0,
            min_p: 0.0,
        };
        let m = s.memory();
        assert_eq!(m.average(), Some(0.5));
        assert!((m.sums.unwrap().1 - 100.0).abs() < 1e-9);
        let mut y = vec![1.0f32, f32::NEG_INFINITY, f32::NAN, 0.5];
        s.transform(&mut y);
        assert!(y[0].is_finite() && y[3].is_finite());
        assert_eq!(y[1], f32::NEG_INFINITY);
        assert!(!y[2].is_finite());
        let (mut hi, mut one) = (vec![2.0f32, 1.0], vec![2.0f32, 1.0]);
        Sampler::AdaptiveP {
            t: 1.0,
            target: 1.7,
            decay: 0.9,
            min_p: 0.0,
        }
        .transform(&mut hi);
        Sampler::AdaptiveP {
            t: 1.0,
            target: 1.0,
            decay: 0.9,
            min_p: 0.0,
        }
        .transform(&mut one);
        assert_eq!(hi, one);
    }

    /// Top-p and top-H as they were first written: one full sort, one cut.
    fn full_sort_reference(x: &mut [f32], s: &Sampler) {
        let q = probs(x, s.temperature());
        let mut order: Vec<usize> = (0..x.len()).filter(|&i| q[i] > 0.0).collect();
        order.sort_unstable_by(|&a, &b| q[b].total_cmp(&q[a]).then(a.cmp(&b)));
        let kept = match *s {
            Sampler::TopP { p, .. } => {
                let mut cum = 0.0;
                order
                    .iter()
                    .take_while(|&&i| {
                        let keep = cum < p;
                        cum += q[i];
                        keep
                    })
                    .count()
            }
            Sampler::TopH { alpha, .. } => {
                let bound = alpha * entropy_of(&q);
                let (mut sum, mut plogp, mut kept) = (0.0, 0.0, 0);
                for &i in &order {
                    let (s, a) = (sum + q[i], plogp + q[i] * q[i].ln());
                    if kept > 0 && s.ln() - a / s > bound {
                        break;
                    }
                    (sum, plogp, kept) = (s, a, kept + 1);
                }
                kept
            }
            _ => unreachable!(),
        };
        for &i in &order[kept..] {
            x[i] = f32::NEG_INFINITY;
        }
    }

    #[test]
    fn partial_sorting_cuts_exactly_where_a_full_sort_does() {
        // Vocabularies past the first selection (1024) and past a second (8192), peaked
        // and flat, with tied logits, against the full sort, bit for bit.
        let mut rng = crate::generate::SplitMix(11);
        for (n, spread) in [
            (300usize, 4.0f32),
            (5_000, 0.5),
            (40_000, 0.05),
            (40_000, 6.0),
        ] {
            let x: Vec<f32> = (0..n)
                .map(|i| {
                    let u = (rng.next_u64() >> 11) as f32 / (1u64 << 53) as f32;
                    // Every seventh logit a copy of a round value: ties.
                    if i % 7 == 0 {
                        1.0
                    } else {
                        spread * 8.0 * (u - 0.5)
                    }
                })
                .collect();
            for s in [
                Sampler::TopP { t: 1.0, p: 0.5 },
                Sampler::TopP { t: 1.2, p: 0.98 },
                Sampler::TopP { t: 1.0, p: 1.0 },
                Sampler::TopH {
                    t: 1.0,
                    alpha: 0.95,
                },
                Sampler::TopH { t: 0.8, alpha: 0.5 },
            ] {
                let (mut fast, mut slow) = (x.clone(), x.clone());
                s.transform(&mut fast);
                full_sort_reference(&mut slow, &s);
                let kept = fast.iter().filter(|v| v.is_finite()).count();
                assert!(kept >= 1, "{s:?} n = {n}");
                assert_eq!(
                    fast.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    slow.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{s:?} n = {n}, kept {kept}"
                );
            }
        }
    }

    #[test]
    fn top_p_keeps_the_smallest_set_reaching_p() {
        // probs at T = 1: 0.5, 0.3, 0.15, 0.05.
        let base: Vec<f32> = [0.5f64, 0.3, 0.15, 0.05]
            .iter()
            .map(|p| p.ln() as f32)
            .collect();
        let mut x = base.clone();
        Sampler::TopP { t: 1.0, p: 0.75 }.transform(&mut x);
        assert_eq!(&x[..2], &base[..2]);
        assert_eq!(&x[2..], &[f32::NEG_INFINITY; 2]);
        let mut x = base.clone();
        Sampler::TopP { t: 1.0, p: 0.81 }.transform(&mut x);
        assert_eq!(x[2], base[2]);
        assert_eq!(x[3], f32::NEG_INFINITY);
    }

    #[test]
    fn min_p_keeps_what_is_at_least_min_p_of_the_top() {
        let base: Vec<f32> = [0.5f64, 0.3, 0.15, 0.05]
            .iter()
            .map(|p| p.ln() as f32)
            .collect();
        let mut x = base.clone();
        Sampler::MinP { t: 1.0, min_p: 0.2 }.transform(&mut x);
        // 0.2 × 0.5 = 0.1: 0.15 stays, 0.05 goes.
        assert_eq!(&x[..3], &base[..3]);
        assert_eq!(x[3], f32::NEG_INFINITY);
    }

    /// A hand-computed table. Logits 4, 2, 1, 0, −1 (finite) and one −inf: mean 1.2,
    /// squared deviations 7.84 + 0.64 + 0.04 + 1.44 + 4.84 = 14.8, σ² = 2.96,
    /// σ = 1.72047 (population). Threshold 4 − n·σ.
    #[test]
    fn top_nsigma_keeps_what_is_within_n_sigma_of_the_top() {
        let base = [4.0f32, 2.0, 1.0, 0.0, -1.0, f32::NEG_INFINITY];
        let ninf = f32::NEG_INFINITY;
        for (n, kept) in [
            // 4 − 1.72 = 2.28: only 4.
            (1.0, [4.0, ninf, ninf, ninf, ninf, ninf]),
            // 4 − 2.58 = 1.42: 4 and 2.
            (1.5, [4.0, 2.0, ninf, ninf, ninf, ninf]),
            // 4 − 3.44 = 0.56: 4, 2, 1.
            (2.0, [4.0, 2.0, 1.0, ninf, ninf, ninf]),
            // 4 − 5.16 = −1.16: every finite one.
            (3.0, [4.0, 2.0, 1.0, 0.0, -1.0, ninf]),
            // n = 0 keeps the top only.
            (0.0, [4.0, ninf, ninf, ninf, ninf, ninf]),
        ] {
            for t in [0.5, 1.0, 2.0] {
                let mut x = base;
                Sampler::TopNSigma { t, n }.transform(&mut x);
                assert_eq!(x, kept, "n = {n}, T = {t}");
            }
        }
        // A boundary exactly at σ: logits 1 and −1 have σ = 1; n = 2 puts the floor at −1.
        let mut x = [1.0f32, -1.0];
        Sampler::TopNSigma { t: 1.0, n: 2.0 }.transform(&mut x);
        assert_eq!(x, [1.0, -1.0]);
        let mut x = [1.0f32, -1.0];
        Sampler::TopNSigma { t: 1.0, n: 1.999 }.transform(&mut x);
        assert_eq!(x, [1.0, f32::NEG_INFINITY]);
    }

    /// Hand-computed tables for the closest prior art on the logits: logits 0, −1, −2
    /// (d = 0, −1, −2) and one −inf.
    #[test]
    fn smoothing_is_webui_quadratic_and_cubic_curve() {
        let ninf = f32::NEG_INFINITY;
        for (curve, want) in [
            // c = 1: k = 1, s = 0: −0.5·d².
            (1.0, [0.0, -0.5, -2.0, ninf]),
            // c = 2: k = s = 0.5: −0.25·d² + 0.25·d³ = −0.5, −3.
            (2.0, [0.0, -0.5, -3.0, ninf]),
            // c = 3: k = 0, s = 1: 0.5·d³ = −0.5, −4.
            (3.0, [0.0, -0.5, -4.0, ninf]),
        ] {
            // The top at 5: the curve is relative to it.
            let mut x = [5.0f32, 4.0, 3.0, ninf];
            Sampler::Smoothing {
                t: 1.0,
                factor: 0.5,
                curve,
            }
            .transform(&mut x);
            let want = want.map(|v| v + 5.0);
            assert_eq!(x, want, "c = {curve}");
        }
    }

    #[test]
    fn dynamic_temperature_follows_the_normalised_entropy() {
        let dyn_t = |low, high, exponent| Sampler::DynamicTemperature {
            t: 1.0,
            low,
            high,
            exponent,
        };
        // Uniform over 2: H / ln N = 1, T_d = high = 2.
        let mut x = [1.0f32, 1.0];
        dyn_t(0.5, 2.0, 1.0).transform(&mut x);
        assert_eq!(x, [0.5, 0.5]);
        // One finite token: T_d = low.
        let mut x = [1.0f32, f32::NEG_INFINITY];
        dyn_t(0.5, 2.0, 1.0).transform(&mut x);
        assert_eq!(x, [2.0, f32::NEG_INFINITY]);
        // Probabilities 1/2, 1/4, 1/4: H = 1.5 ln 2 = 1.03972, ln 3 = 1.09861, ratio
        // 0.946395; squared 0.895664; T_d = 0.5 + 0.895664 = 1.395664.
        let base: Vec<f32> = [0.5f64, 0.25, 0.25].iter().map(|p| p.ln() as f32).collect();
        let mut x = base.clone();
        dyn_t(0.5, 1.5, 2.0).transform(&mut x);
        for (a, b) in x.iter().zip(&base) {
            assert!(
                (f64::from(*a) - f64::from(*b) / 1.395664).abs() < 1e-5,
                "{a} {b}"
            );
        }
    }

    #[test]
    fn p_less_keeps_what_is_at_least_the_collision_probability() {
        let ln = |ps: &[f64]| -> Vec<f32> { ps.iter().map(|p| p.ln() as f32).collect() };
        let ninf = f32::NEG_INFINITY;
        // Σ p² = 0.25 + 0.09 + 0.0225 + 0.0025 = 0.365: only 0.5 stays.
        let base = ln(&[0.5, 0.3, 0.15, 0.05]);
        let mut x = base.clone();
        Sampler::PLess { t: 1.0 }.transform(&mut x);
        assert_eq!(x, [base[0], ninf, ninf, ninf]);
        // Uniform over 4: Σ p² = 0.25, every token at the floor stays.
        let mut x = [0f32; 4];
        Sampler::PLess { t: 1.0 }.transform(&mut x);
        assert_eq!(x, [0.0; 4]);
        // 0.45, 0.45, 0.1: Σ p² = 0.415; the two tops stay.
        let base = ln(&[0.45, 0.45, 0.1]);
        let mut x = base.clone();
        Sampler::PLess { t: 1.0 }.transform(&mut x);
        assert_eq!(x, [base[0], base[1], ninf]);
    }

    /// Probabilities 0.5, 0.3, 0.15, 0.05: H = 1.142120. The top two renormalised (0.625,
    /// 0.375) have entropy 0.661563 (0.5792 H), the top three 0.993268 (0.8697 H).
    #[test]
    fn top_h_keeps_the_top_set_within_the_entropy_bound() {
        let base: Vec<f32> = [0.5f64, 0.3, 0.15, 0.05]
            .iter()
            .map(|p| p.ln() as f32)
            .collect();
        let ninf = f32::NEG_INFINITY;
        for (alpha, kept) in [
            (0.5, 1),
            (0.6, 2),
            (0.86, 2),
            (0.87, 3),
            (1.01, 4),
            (0.0, 1),
        ] {
            let mut x = base.clone();
            Sampler::TopH { t: 1.0, alpha }.transform(&mut x);
            let mut want = base.clone();
            want[kept..].fill(ninf);
            assert_eq!(x, want, "alpha = {alpha}");
        }
    }

    #[test]
    fn entropy_matching_finds_the_temperature() {
        let rows: Vec<Vec<f32>> = (0..5)
            .map(|k| (0..50).map(|i| -((i * (k + 1)) as f32) * 0.1).collect())
            .collect();
        let target = mean_entropy(
            &Sampler::Temperature { t: 1.3 },
            rows.iter().map(|r| r.as_slice()),
        );
        let (t, h) = match_entropy(
            &Sampler::Temperature { t: 1.0 },
            target,
            || rows.iter().map(|r| r.as_slice()),
            0.05,
            5.0,
        );
        assert!((t - 1.3).abs() < 1e-3, "{t}");
        assert!((h - target).abs() < 1e-4);
        // Uniform over 50: entropy ln 50.
        let flat = vec![0f32; 50];
        assert!((Sampler::Temperature { t: 0.7 }.entropy(&flat) - 50f64.ln()).abs() < 1e-12);
    }
}
