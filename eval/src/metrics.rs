//! Distribution measures for the evaluation, in `f64`: sampling distributions from
//! logits, KL divergence, entropy, top-token mass and tail mass.

/// The base-probability threshold below which a token counts as tail.
pub const TAIL: f64 = 1e-4;
// The tail rate compares log-probabilities with ln(TAIL).
const _: () = assert!(TAIL > 0.0);

/// `log Σ exp(x / t)` over the finite entries of `x`, in `f64` (`t > 0`): the
/// normaliser of [`log_softmax`], which reads a single entry without building the
/// vector (`log_softmax(x, t)[i] == x[i] as f64 / t - log_sum_exp(x, t)`, bit for bit).
/// `None` when no entry is finite.
pub fn log_sum_exp(x: &[f32], t: f64) -> Option<f64> {
    let m = finite_max(x)? as f64 / t;
    let s: f64 = x
        .iter()
        .filter(|v| v.is_finite())
        .map(|&v| (v as f64 / t - m).exp())
        .sum();
    Some(m + s.ln())
}

/// The largest finite entry of `x` (`None` when none is finite).
pub fn finite_max(x: &[f32]) -> Option<f32> {
    let m = x
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(f32::NEG_INFINITY, f32::max);
    m.is_finite().then_some(m)
}

/// `log softmax(x / t)` in `f64` (`t > 0`); `-inf` entries stay `-inf`. `None` when no
/// entry is finite.
pub fn log_softmax(x: &[f32], t: f64) -> Option<Vec<f64>> {
    let lse = log_sum_exp(x, t)?;
    Some(
        x.iter()
            .map(|&v| {
                if v.is_finite() {
                    v as f64 / t - lse
                } else {
                    f64::NEG_INFINITY
                }
            })
            .collect(),
    )
}

/// What sampling from `shaped / t` does compared with plain temperature (`base / t`) at
/// one position.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// KL(temperature only ‖ shaped), nats: infinite for a sampler that cuts tokens
    /// plain temperature can draw (JSON writes it as `null`, read back as infinity).
    #[serde(deserialize_with = "null_as_infinity")]
    pub kl: f64,
    /// Entropy of the shaped sampling distribution, nats.
    pub entropy: f64,
    /// Probability of the base distribution's top token under the shaped one.
    pub top_mass: f64,
    /// Probability, under the shaped distribution, of the tokens whose base probability
    /// (`softmax(base)`, T = 1) is below [`TAIL`].
    pub tail_mass: f64,
    /// The expected base log-probability (`log softmax(base)`, T = 1) of a token drawn
    /// from the shaped distribution, nats.
    #[serde(default)]
    pub base_logprob: f64,
}

/// `null` (how JSON writes a non-finite number) as `+inf`, the only one a KL takes.
fn null_as_infinity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(<Option<f64> as serde::Deserialize>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

impl Stats {
    /// The measures at one position; `None` when `base` has no finite entry.
    pub fn of(base: &[f32], shaped: &[f32], t: f64) -> Option<Stats> {
        let lb = log_softmax(base, 1.0)?;
        let lp = log_softmax(base, t)?;
        let lq = log_softmax(shaped, t)?;
        let top = (0..base.len()).max_by(|&a, &b| lb[a].total_cmp(&lb[b]))?;
        let tail = TAIL.ln();
        let mut s = Stats {
            top_mass: lq[top].exp(),
            ..Stats::default()
        };
        for i in 0..base.len() {
            let (p, q) = (lp[i].exp(), lq[i].exp());
            if p > 0.0 {
                s.kl += p * (lp[i] - lq[i]);
            }
            if q > 0.0 {
                s.entropy -= q * lq[i];
                s.base_logprob += q * lb[i];
                if lb[i] < tail {
                    s.tail_mass += q;
                }
            }
        }
        Some(s)
    }

    /// The mean of `stats` (each field averaged).
    pub fn mean(stats: &[Stats]) -> Stats {
        let n = stats.len().max(1) as f64;
        let sum = |f: fn(&Stats) -> f64| stats.iter().map(f).sum::<f64>() / n;
        Stats {
            kl: sum(|s| s.kl),
            entropy: sum(|s| s.entropy),
            top_mass: sum(|s| s.top_mass),
            tail_mass: sum(|s| s.tail_mass),
            base_logprob: sum(|s| s.base_logprob),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_entry_from_the_normaliser_is_the_log_softmax_entry() {
        let x = [2.5f32, -1.0, 0.125, -30.0, f32::NEG_INFINITY, 7.75];
        for t in [1.0, 0.7, 1.3] {
            let lse = log_sum_exp(&x, t).unwrap();
            // Independently: the normaliser sums to one.
            let total: f64 = x.iter().map(|&v| (v as f64 / t - lse).exp()).sum();
            assert!((total - 1.0).abs() < 1e-12, "{total}");
            let full = log_softmax(&x, t).unwrap();
            for (i, &v) in x.iter().enumerate() {
                let one = if v.is_finite() {
                    v as f64 / t - lse
                } else {
                    f64::NEG_INFINITY
                };
                assert_eq!(one.to_bits(), full[i].to_bits(), "entry {i} at t = {t}");
            }
        }
        assert_eq!(log_sum_exp(&[f32::NEG_INFINITY, f32::NAN], 1.0), None);
    }

    #[test]
    fn identical_distributions_have_no_divergence() {
        let x = [2.0f32, 1.0, 0.0, -12.0, f32::NEG_INFINITY];
        let s = Stats::of(&x, &x, 0.7).unwrap();
        assert!(s.kl.abs() < 1e-15, "{s:?}");
        // Worked by hand: p ∝ exp(x / 0.7).
        let e: Vec<f64> = [2.0f64, 1.0, 0.0, -12.0]
            .iter()
            .map(|v| (v / 0.7).exp())
            .collect();
        let z: f64 = e.iter().sum();
        let h: f64 = -e.iter().map(|v| v / z * (v / z).ln()).sum::<f64>();
        assert!((s.entropy - h).abs() < 1e-12);
        assert!((s.top_mass - e[0] / z).abs() < 1e-12);
        // Only -12 is below 1e-4 at T = 1 (e^-14 / Σ ≈ 6e-7).
        assert!((s.tail_mass - e[3] / z).abs() < 1e-18);
        // E_q[log softmax(x)] with q = softmax(x / 0.7).
        let z1: f64 = [2.0f64, 1.0, 0.0, -12.0].iter().map(|v| v.exp()).sum();
        let want: f64 = [2.0f64, 1.0, 0.0, -12.0]
            .iter()
            .zip(&e)
            .map(|(v, ev)| ev / z * (v - z1.ln()))
            .sum();
        assert!(
            (s.base_logprob - want).abs() < 1e-12,
            "{} vs {want}",
            s.base_logprob
        );
    }

    #[test]
    fn kl_of_two_known_distributions() {
        // p = softmax(1, 0), q = (3/4, 1/4): KL = Σ p ln(p/q).
        let base = [1.0f32, 0.0];
        let shaped = [(3.0f32).ln(), 0.0];
        let s = Stats::of(&base, &shaped, 1.0).unwrap();
        let p0 = 1f64.exp() / (1.0 + 1f64.exp());
        let want = p0 * (p0 / 0.75).ln() + (1.0 - p0) * ((1.0 - p0) / 0.25).ln();
        assert!((s.kl - want).abs() < 1e-7, "{} vs {want}", s.kl);
        assert!((s.top_mass - 0.75).abs() < 1e-7);
        assert!(Stats::of(&[f32::NEG_INFINITY], &[0.0], 1.0).is_none());
    }
}
