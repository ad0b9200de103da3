//! Branch-free `ln(1 + v)`, `exp(t)` and `exp(t) − 1` for the slice kernel.
//!
//! Written as plain scalar `f32`/`u32` arithmetic (adds, multiplies, one division,
//! integer shifts and masks, and `select`s) so that LLVM vectorises the loops that call
//! them on the baseline x86-64 target (SSE2) and, through the kernel's runtime dispatch,
//! with AVX2. No fused multiply-add is used, so every instruction set gives the same bits.
//!
//! Accuracy, measured by this module's tests against `f64` (`ln_1p`, `exp`, `exp_m1`):
//!
//! | function | domain | max error |
//! | --- | --- | --- |
//! | [`log1p`] | `0 ≤ v < 2^64` | see `log1p_accuracy` |
//! | [`exp_neg`] | `−87 ≤ t ≤ 0` | 0.95 ulp; 0 below −87.3 |
//! | [`expm1_pos`] | `0 ≤ t ≤ 88` | 1.80 ulp; `+inf` above 88 |
//!
//! `log1p` and `expm1_pos` shape the curve, so they are monotone by construction (see
//! each); the tests walk every 61st `f32` in `[0, 2^24]` and `[0, 90]` (every one with
//! `HLG_EXHAUSTIVE=1`, which passed when this was written) and every `f32` around each
//! binade boundary, and check that neither ever decreases.

const LN2_HI: f32 = 0.693_145_75; // ln 2 split so that k·LN2_HI is exact for |k| < 2^9
const LN2_LO: f32 = 1.428_606_8e-6;
const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// 1.5·2^23: adding and subtracting it rounds an `f32` in ±2^22 to the nearest integer.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// `ln(1 + v)` for `v ≥ 0` (finite or `+inf`), within 2 ulp, monotone, no division.
///
/// `1 + v = 2^k·m` with `m ∈ [1, 2)` and `f = m − 1` (exact; `f = v` itself when `k = 0`,
/// which keeps small arguments exact); then `ln m = f·Q(f)` with `Q` a degree-8
/// polynomial fitted here to `ln(1 + f)/f` on `[0, 1]` (relative error 3e-8), evaluated
/// in `f64` and rounded to `f32` once. The fitted polynomial is increasing on `[0, 1]`
/// and `f64` rounding is far below the gap between neighbouring `f32` inputs, so the
/// result never decreases; the tests walk every `f32` in `[0, 1)` and around every `2^k`
/// to confirm it. (In `f32` the same polynomial is not monotone: its alternating terms
/// round either way.)
#[inline(always)]
pub(crate) fn log1p(v: f32) -> f32 {
    const Q: [f64; 9] = [
        1.0,
        -0.499_994_963_407_516_5,
        0.333_191_245_794_296_26,
        -0.248_431_801_795_959_47,
        0.191_067_278_385_162_35,
        -0.136_647_284_031_391_14,
        0.078_243_255_615_234_38,
        -0.029_515_899_717_807_77,
        0.005_235_385_149_717_331,
    ];
    let y = 1.0 + v;
    let bits = y.to_bits();
    let k = (bits >> 23) as i32 - 0x7f;
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    let f = (if k == 0 { v } else { m - 1.0 }) as f64;
    // Estrin's scheme: a shallow tree instead of Horner's chain of nine dependent steps.
    let (f2, f4) = (f * f, (f * f) * (f * f));
    let p03 = (Q[0] + Q[1] * f) + (Q[2] + Q[3] * f) * f2;
    let p47 = (Q[4] + Q[5] * f) + (Q[6] + Q[7] * f) * f2;
    let q = (p03 + p47 * f4) + Q[8] * (f4 * f4);
    let out = (k as f64 * std::f64::consts::LN_2 + f * q) as f32;
    // +inf in, +inf out (the exponent of inf would read as k = 128).
    if v == f32::INFINITY {
        f32::INFINITY
    } else {
        out
    }
}

/// `exp(t)` for `t ≤ 0`; exactly 0 for `t < −87.3` (and for `t = −inf`).
#[inline(always)]
pub(crate) fn exp_neg(t: f32) -> f32 {
    let under = t < -87.3;
    let tc = if under { 0.0 } else { t };
    let kf = (tc * LOG2_E + ROUND_MAGIC) - ROUND_MAGIC;
    let r = (tc - kf * LN2_HI) - kf * LN2_LO;
    let p = 1.0 + expm1_poly(r);
    if under {
        0.0
    } else {
        p * pow2(kf)
    }
}

/// `exp(t) − 1` for `t ≥ 0`, within 2 ulp, and monotone by construction; `+inf` for
/// `t > 88`.
///
/// `t = k·ln2 + r` with `k = ⌊t/ln2⌋` and `r` clamped to `[0, ln2]`; `p = exp(r) − 1` by
/// its Taylor series (positive coefficients) clamped to `≤ 1`, so that the value at the
/// top of one binade never exceeds the bottom of the next; then `(2^k − 1) + 2^k·p`.
#[inline(always)]
pub(crate) fn expm1_pos(t: f32) -> f32 {
    const LN2: f32 = std::f32::consts::LN_2;
    let over = t > 88.0;
    let tc = if over { 0.0 } else { t };
    // k ≈ t/ln2 rounded; then the one k whose reduced argument lies in [0, ln2), since
    // the rounding of t·log2(e) can be off by one for large t.
    let kn = (tc * LOG2_E + ROUND_MAGIC) - ROUND_MAGIC;
    let r0 = (tc - kn * LN2_HI) - kn * LN2_LO;
    let kf = if r0 < 0.0 {
        kn - 1.0
    } else if r0 >= LN2 {
        kn + 1.0
    } else {
        kn
    };
    let r = ((tc - kf * LN2_HI) - kf * LN2_LO).clamp(0.0, LN2);
    let p = (r
        * (1.0
            + r * (1.0 / 2.0
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0
                            + r * (1.0 / 720.0
                                + r * (1.0 / 5040.0 + r * (1.0 / 40320.0 + r * (1.0 / 362880.0))))))))))
        .min(1.0);
    let scale = pow2(kf);
    let out = (scale - 1.0) + scale * p;
    if over {
        f32::INFINITY
    } else {
        out
    }
}

/// `2^k` for an integer-valued `k` in `[−126, 127]`, by integer operations only:
/// `k + 1.5·2^23` holds `k` in its low mantissa bits (a float-to-int conversion would be
/// Rust's saturating `as`, which keeps these loops from vectorising).
#[inline(always)]
fn pow2(kf: f32) -> f32 {
    let biased = (kf + ROUND_MAGIC).to_bits().wrapping_sub(ROUND_MAGIC.to_bits()).wrapping_add(127);
    f32::from_bits(biased << 23)
}

/// `exp(r) − 1` on `|r| ≤ 0.3466`: Taylor series to `r⁸` (truncation below 2e-10).
#[inline(always)]
fn expm1_poly(r: f32) -> f32 {
    const C2: f32 = 1.0 / 2.0;
    const C3: f32 = 1.0 / 6.0;
    const C4: f32 = 1.0 / 24.0;
    const C5: f32 = 1.0 / 120.0;
    const C6: f32 = 1.0 / 720.0;
    const C7: f32 = 1.0 / 5040.0;
    const C8: f32 = 1.0 / 40320.0;
    let q = C2 + r * (C3 + r * (C4 + r * (C5 + r * (C6 + r * (C7 + r * C8)))));
    r + (r * r) * q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log1p_small_table() {
        // Values worked out in f64 and rounded to f32.
        for &(v, want) in &[
            (0.0f32, 0.0f64),
            (1.0, std::f64::consts::LN_2),
            (1e-8, 9.99999995e-9),
            (3.0, 1.3862943611198906),
            (1e6, 13.815511557963774),
        ] {
            let got = log1p(v) as f64;
            assert!((got - want).abs() <= 2.0 * (want.abs() * f32::EPSILON as f64), "{v}: {got} vs {want}");
        }
        assert_eq!(log1p(f32::INFINITY), f32::INFINITY);
    }

    #[test]
    fn exp_edges() {
        assert_eq!(exp_neg(0.0), 1.0);
        assert_eq!(exp_neg(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_neg(-100.0), 0.0);
        assert_eq!(expm1_pos(0.0), 0.0);
        assert_eq!(expm1_pos(100.0), f32::INFINITY);
        assert_eq!(expm1_pos(f32::INFINITY), f32::INFINITY);
    }

    /// Error in units of the f32 spacing at the true value.
    fn ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        let spacing = if w == 0.0 { f32::MIN_POSITIVE as f64 } else { (w.abs().next_up() - w.abs()) as f64 };
        (got as f64 - want).abs() / spacing
    }

    /// Walks f32 values from `lo` to `hi` with a bit stride (1 = every value).
    fn walk(lo: f32, hi: f32, stride: u32, mut f: impl FnMut(f32)) {
        let mut b = lo.to_bits();
        while b <= hi.to_bits() {
            f(f32::from_bits(b));
            b += stride;
        }
    }

    /// Every 61st f32 (every one with `HLG_EXHAUSTIVE=1`, about a minute in release).
    fn stride() -> u32 {
        if std::env::var_os("HLG_EXHAUSTIVE").is_some() {
            1
        } else {
            61
        }
    }

    /// Every f32 in [0, 1): the k = 0 branch, and the mantissa polynomial of every binade.
    #[test]
    fn log1p_monotone_on_every_mantissa() {
        let mut prev = -1.0f32;
        walk(0.0, 1.0, 1, |v| {
            let got = log1p(v);
            assert!(got >= prev, "log1p not monotone at {v}: {got} < {prev}");
            prev = got;
        });
    }

    #[test]
    fn log1p_monotone_everywhere_below_2_pow_24() {
        let mut prev = -1.0f32;
        walk(0.0, 16_777_216.0, stride(), |v| {
            let got = log1p(v);
            assert!(got >= prev, "log1p not monotone at {v}: {got} < {prev}");
            prev = got;
        });
    }

    #[test]
    fn log1p_accuracy() {
        let (mut worst, mut at) = (0f64, 0f32);
        let mut track = |v: f32| {
            let e = ulps(log1p(v), (v as f64).ln_1p());
            if e > worst {
                (worst, at) = (e, v);
            }
        };
        walk(0.0, 16_777_216.0, 127, &mut track);
        walk(16_777_216.0, 1.8e19, 997, &mut track);
        println!("log1p: max error {worst:.3} ulp at {at:e}");
        assert!(worst <= 2.0, "log1p max error {worst} ulp at {at}");
    }

    #[test]
    fn log1p_monotone_across_binades() {
        // Around every power of two that 1 + v can reach.
        for k in 0..64 {
            let y = (2.0f32).powi(k);
            let mut prev = f32::NEG_INFINITY;
            let lo = f32::from_bits(y.to_bits() - 4096).max(0.0) - 1.0;
            walk(lo.max(0.0), f32::from_bits(y.to_bits() + 4096) - 1.0, 1, |v| {
                let got = log1p(v);
                assert!(got >= prev, "log1p not monotone at {v}");
                prev = got;
            });
        }
    }

    #[test]
    fn expm1_monotone() {
        let mut prev = -1.0f32;
        walk(0.0, 90.0, stride(), |t| {
            let got = expm1_pos(t);
            assert!(got >= prev, "expm1 not monotone at {t}: {got} < {prev}");
            prev = got;
        });
    }

    #[test]
    fn exp_accuracy() {
        let mut worst = 0f64;
        walk(0.0, 87.0, stride() * 17, |t| worst = worst.max(ulps(exp_neg(-t), (-t as f64).exp())));
        println!("exp_neg: max error {worst:.3} ulp");
        assert!(worst <= 2.0, "exp_neg {worst} ulp");
        let mut worst = 0f64;
        walk(0.0, 88.0, stride() * 17, |t| worst = worst.max(ulps(expm1_pos(t), (t as f64).exp_m1())));
        println!("expm1_pos: max error {worst:.3} ulp");
        assert!(worst <= 2.0, "expm1_pos {worst} ulp");
    }
}
