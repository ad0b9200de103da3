//! The samplers the evaluation compares, as one transform each on the logits: what a
//! logits processor hands the host, which then divides by `T` and samples from the whole
//! vocabulary (top-k, top-p and min-p off in the host). The same functions measure the
//! offline entropy that the baselines are matched on, and run the online generations.

use serde::{Deserialize, Serialize};

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
            Sampler::Hlg { hlg, .. } => format!("hlg {}", hlg.curve().toe_shape().name()),
        }
    }

    /// The logits to sample from at this sampler's temperature, in place: the curve for
    /// HLG, `-inf` outside the kept set for top-p and min-p, unchanged for temperature.
    pub fn transform(&self, x: &mut [f32]) {
        match self {
            Sampler::Temperature { .. } => {}
            Sampler::Hlg { hlg, .. } => hlg.curve().apply(x),
            &Sampler::TopP { t, p } => {
                let probs = probs(x, t);
                let mut order: Vec<usize> = (0..x.len()).filter(|&i| probs[i] > 0.0).collect();
                order.sort_unstable_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
                let mut cum = 0.0;
                for i in order {
                    if cum >= p {
                        x[i] = f32::NEG_INFINITY;
                    } else {
                        cum += probs[i];
                    }
                }
            }
            &Sampler::MinP { t, min_p } => {
                let probs = probs(x, t);
                let top = probs.iter().copied().fold(0.0, f64::max);
                for (v, q) in x.iter_mut().zip(&probs) {
                    if *q < min_p * top {
                        *v = f32::NEG_INFINITY;
                    }
                }
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

    /// Entropy (nats) of the distribution this sampler draws from at `x`.
    pub fn entropy(&self, x: &[f32]) -> f64 {
        let mut y = x.to_vec();
        self.transform(&mut y);
        let q = probs(&y, self.temperature());
        -q.iter()
            .filter(|&&v| v > 0.0)
            .map(|v| v * v.ln())
            .sum::<f64>()
    }
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
