//! The decisive evaluation's statistics (docs/EVALUATION.md, "The decisive evaluation"):
//! each paired comparison is called better, equivalent within a margin, worse or
//! inconclusive from one corrected interval, and the run is sized by the power of the
//! equivalence test (two one-sided tests) at that correction.
//!
//! The normal approximation is used throughout: the runs pair at least 200 prompts, where
//! Student's t and the normal differ by under 1 % at these quantiles.

use serde::{Deserialize, Serialize};

use super::frontier::Family;

/// The family-wise error rate over every primary comparison of the experiment.
pub const ALPHA: f64 = 0.05;
/// The power the run is sized for: of an equivalence call when the true difference is 0.
pub const POWER: f64 = 0.8;

/// What a comparison shows, in the only words the protocol allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    /// The interval lies inside (−margin, +margin): any difference is smaller than the
    /// margin, whether or not the interval also excludes 0.
    Equivalent,
    /// The interval is above 0 and not inside the margin.
    Better,
    /// The interval is below 0 and not inside the margin.
    Worse,
    /// None of those: the run cannot tell.
    Inconclusive,
}

/// The call for a difference (higher is better) whose corrected interval is `[lo, hi]`.
/// Equivalence is checked first: an interval such as [+0.01, +0.03] with a margin of 0.05
/// is a difference too small to matter by the margin fixed before the runs, so it is
/// "equivalent", not "better".
pub fn call(lo: f64, hi: f64, margin: f64) -> Call {
    if lo > -margin && hi < margin {
        Call::Equivalent
    } else if lo > 0.0 {
        Call::Better
    } else if hi < 0.0 {
        Call::Worse
    } else {
        Call::Inconclusive
    }
}

/// The one-sided critical value of each test at the family-wise rate [`ALPHA`] over
/// `comparisons` tests (Bonferroni): each interval is the two-sided `1 − 2α/k` interval,
/// whose ends are the two one-sided tests of the equivalence call and the one-sided test
/// of superiority or inferiority.
pub fn critical_z(comparisons: usize) -> f64 {
    normal_quantile(1.0 - ALPHA / comparisons.max(1) as f64)
}

/// The power of the equivalence call when the true difference is 0, with standard error
/// `se`: the estimate must land within `margin − z·se` of 0, so
/// `2Φ(margin/se − z) − 1` (0 when the margin is narrower than the interval).
pub fn equivalence_power(se: f64, margin: f64, z: f64) -> f64 {
    (2.0 * normal_cdf(margin / se - z) - 1.0).max(0.0)
}

/// The prompts needed for power [`POWER`] of the equivalence call, with per-prompt paired
/// differences of standard deviation `sd`.
pub fn prompts_needed(sd: f64, margin: f64, z: f64) -> usize {
    let k = z + normal_quantile(0.5 + POWER / 2.0);
    ((k * sd / margin).powi(2)).ceil() as usize
}

/// The smallest margin that `prompts` paired prompts call equivalent with power
/// [`POWER`], for paired differences of standard deviation `sd`.
pub fn detectable_margin(sd: f64, prompts: usize, z: f64) -> f64 {
    (z + normal_quantile(0.5 + POWER / 2.0)) * sd / (prompts as f64).sqrt()
}

/// The standard normal distribution function, from the complementary error function.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// erfc to about 1e-15 relative (Numerical Recipes' Chebyshev fit, `erfccheb`), for the
/// distribution function above and as the check on [`normal_quantile`].
fn erfc(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    const COF: [f64; 28] = [
        -1.3026537197817094,
        6.419_697_923_564_902e-1,
        1.9476473204185836e-2,
        -9.561_514_786_808_63e-3,
        -9.46595344482036e-4,
        3.66839497852761e-4,
        4.2523324806907e-5,
        -2.0278578112534e-5,
        -1.624290004647e-6,
        1.303655835580e-6,
        1.5626441722e-8,
        -8.5238095915e-8,
        6.529054439e-9,
        5.059343495e-9,
        -9.91364156e-10,
        -2.27365122e-10,
        9.6467911e-11,
        2.394038e-12,
        -6.886027e-12,
        8.94487e-13,
        3.13092e-13,
        -1.12708e-13,
        3.81e-16,
        7.106e-15,
        -1.523e-15,
        -9.4e-17,
        1.21e-16,
        -2.8e-17,
    ];
    let t = 2.0 / (2.0 + x);
    let ty = 4.0 * t - 2.0;
    let (mut d, mut dd) = (0.0, 0.0);
    for &c in COF[1..].iter().rev() {
        let tmp = d;
        d = ty * d - dd + c;
        dd = tmp;
    }
    t * (-x * x + 0.5 * (COF[0] + ty * d) - dd).exp()
}

/// The standard normal quantile: Acklam's rational approximation (relative error
/// 1.15e-9), refined by one Halley step against [`normal_cdf`].
pub fn normal_quantile(p: f64) -> f64 {
    assert!(p > 0.0 && p < 1.0, "a quantile needs 0 < p < 1, got {p}");
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.383_577_518_672_69e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let x = if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    };
    let e = normal_cdf(x) - p;
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (x * x / 2.0).exp();
    x - u / (1.0 + x * u / 2.0)
}

/// One level of a committed `verdict.json` (the cross-judged evaluation's), as far as
/// the sizing reads it: each method's per-prompt measures at the target entropy.
#[derive(Clone, Debug, Deserialize)]
pub struct PastLevel {
    /// The level (plain temperature's T).
    pub level: f64,
    /// The methods.
    pub matched: Vec<PastMethod>,
}

/// One method of a [`PastLevel`].
#[derive(Clone, Debug, Deserialize)]
pub struct PastMethod {
    /// `family knob`.
    pub name: String,
    /// Its family.
    pub family: Family,
    /// Per prompt: (judged log-prob per token, distinct-2, non-word rate, judged log-prob
    /// per byte).
    pub prompts: Vec<(usize, [f64; 4])>,
}

/// The spread of one paired comparison in past data: the standard deviation over prompts
/// of the per-prompt differences, per byte and in distinct-2.
#[derive(Clone, Debug, Serialize)]
pub struct PairSpread {
    /// The HLG setting.
    pub hlg: String,
    /// The other method.
    pub other: String,
    /// Paired prompts.
    pub prompts: usize,
    /// Standard deviation of the judged log-prob per byte's differences.
    pub sd_per_byte: f64,
    /// Standard deviation of distinct-2's differences.
    pub sd_distinct2: f64,
}

/// Every HLG setting of `level` against every other method, paired by prompt.
pub fn spreads(level: &PastLevel) -> Vec<PairSpread> {
    let sd = |v: &[f64]| {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    };
    let mut out = vec![];
    for h in level.matched.iter().filter(|m| m.family == Family::Hlg) {
        for o in level.matched.iter().filter(|m| m.family != Family::Hlg) {
            let (mut pb, mut d2) = (vec![], vec![]);
            for (i, a) in &h.prompts {
                if let Some((_, b)) = o.prompts.iter().find(|(j, _)| j == i) {
                    pb.push(a[3] - b[3]);
                    d2.push(a[1] - b[1]);
                }
            }
            if pb.len() > 2 {
                out.push(PairSpread {
                    hlg: h.name.clone(),
                    other: o.name.clone(),
                    prompts: pb.len(),
                    sd_per_byte: sd(&pb),
                    sd_distinct2: sd(&d2),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::SplitMix;

    #[test]
    fn the_normal_quantiles_match_published_values() {
        // Abramowitz & Stegun, table 26.5; the 0.05/32 tail from Python's
        // statistics.NormalDist (Wichura's AS 241), to 10 digits.
        for (p, z) in [
            (0.5, 0.0),
            (0.8, 0.841_621_233_6),
            (0.9, 1.281_551_565_5),
            (0.975, 1.959_963_984_5),
            (0.99, 2.326_347_874_0),
            (0.999, 3.090_232_306_2),
            (1.0 - 0.05 / 32.0, 2.955_166_847_5),
            (0.01, -2.326_347_874_0),
        ] {
            assert!(
                (normal_quantile(p) - z).abs() < 1e-9,
                "q({p}) = {}",
                normal_quantile(p)
            );
            // The tabled z has 10 digits: Φ moves by at most 0.4 × 5e-11 within them.
            assert!(
                (normal_cdf(z) - p).abs() < 1e-10,
                "Φ({z}) = {}",
                normal_cdf(z)
            );
        }
    }

    #[test]
    fn calls_follow_the_interval_and_the_margin() {
        let m = 0.05;
        assert_eq!(call(-0.02, 0.03, m), Call::Equivalent);
        // Inside the margin though above 0: a difference too small to matter.
        assert_eq!(call(0.01, 0.03, m), Call::Equivalent);
        assert_eq!(call(0.01, 0.09, m), Call::Better);
        assert_eq!(call(-0.09, -0.01, m), Call::Worse);
        assert_eq!(call(-0.06, 0.02, m), Call::Inconclusive);
        assert_eq!(call(-0.02, 0.07, m), Call::Inconclusive);
        // The margin's ends are outside it.
        assert_eq!(call(-0.05, 0.0, m), Call::Inconclusive);
    }

    #[test]
    fn the_sizing_formulas_agree_with_each_other_and_by_hand() {
        let z = critical_z(32);
        // By hand: (2.9551 + 1.2816)² × (0.2 / 0.05)² = 287.3 → 288.
        assert_eq!(prompts_needed(0.2, 0.05, z), 288);
        let n = prompts_needed(0.2, 0.05, z);
        assert!(detectable_margin(0.2, n, z) <= 0.05);
        assert!(detectable_margin(0.2, n - 1, z) > 0.05);
        let p = equivalence_power(0.2 / (n as f64).sqrt(), 0.05, z);
        assert!((0.8..0.81).contains(&p), "{p}");
        assert_eq!(equivalence_power(0.1, 0.05, z), 0.0);
    }

    /// The power formula against a simulation of the calls it predicts: paired
    /// differences with no true effect, called from a known-σ interval.
    #[test]
    fn the_equivalence_power_matches_a_simulation() {
        let (sd, n, margin, z) = (1.0, 400, 0.2, normal_quantile(0.975));
        let se = sd / (n as f64).sqrt();
        let predicted = equivalence_power(se, margin, z);
        let mut rng = SplitMix(0x5eed);
        let mut normal = || {
            // Box–Muller.
            let (u, v) = (rng.unit().max(1e-300), rng.unit());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        };
        let runs = 4000;
        let equivalent = (0..runs)
            .filter(|_| {
                let mean = (0..n).map(|_| sd * normal()).sum::<f64>() / n as f64;
                call(mean - z * se, mean + z * se, margin) == Call::Equivalent
            })
            .count() as f64
            / runs as f64;
        // 4,000 runs: a binomial standard error of 0.003 at p ≈ 0.96.
        assert!(
            (equivalent - predicted).abs() < 0.015,
            "{equivalent} vs {predicted}"
        );
    }
}
