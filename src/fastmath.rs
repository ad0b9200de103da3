//! Branch-free `ln(1 + v)`, `exp(t)` and `2^u − 1` for the slice kernel.
//!
//! Written as plain scalar `f32`/`u32` arithmetic (adds, multiplies, integer shifts and
//! masks, and `select`s; no division, no `f64`) so that LLVM vectorises the loops that call
//! them on the baseline x86-64 target (SSE2) and, through the kernel's runtime dispatch,
//! with AVX2. Every function is generic over [`Madd`]: separate multiply and add on the
//! baseline, fused (FMA) in the AVX2 instantiation. The two may differ in the last bits;
//! both meet the bounds below and both are monotone, and the tests check both.
//!
//! Accuracy, measured by this module's tests against `f64` (`ln_1p`, `exp`, `exp_m1`):
//!
//! | function | domain | max error |
//! | --- | --- | --- |
//! | [`log1p`] | `0 ≤ v < 1/8` | 0.65 ulp (3 asserted) |
//! | [`log1p`] | `1/8 ≤ v < 2^64` | 2 ulp + 1.4e-7 absolute (2 ulp + 2e-7 asserted) |
//! | [`log1p_toe`] | `0 ≤ v ≤ 2^126` | 1.89 ulp (2 asserted) |
//! | [`exp_neg`] | `−87 ≤ t ≤ 0` | 2.3 ulp (degree-5 minimax); 0 below −87.3 |
//! | [`exp2m1_pos`] | `0 ≤ u < 128` | 1.42 ulp (FMA), 1.70 ulp (SSE2); `+inf` from 128 |
//!
//! `log1p` (the shoulder's), `log1p_toe` (the log toe's) and `exp2m1_pos` (the exp toe's)
//! shape the curve, so they must be monotone: the first and the last by construction (see
//! each), `log1p_toe` by an exhaustive check. The tests walk every 61st `f32` of their
//! domains (`[0, 2^24]`, `[0, +inf]`, `[0, 130]`; every one with `HLG_EXHAUSTIVE=1`, which
//! passed when each was written) and every `f32` around each binade boundary, and check
//! that none ever decreases.

const LN2_HI: f32 = 0.693_145_75; // ln 2 split so that k·LN2_HI is exact for |k| < 2^9
const LN2_LO: f32 = 1.428_606_8e-6;
const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// 1.5·2^23: adding and subtracting it rounds an `f32` in ±2^22 to the nearest integer.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// `a·b + c`: rounded twice on every x86-64 ([`Plain`]), or once by the FMA unit
/// ([`Fused`], which the kernels use where the CPU has it). Every function here is generic
/// over it; the monotonicity arguments hold for both (each step is a rounding of a
/// monotone expression either way), and the tests check both.
pub(crate) trait Madd {
    fn madd(a: f32, b: f32, c: f32) -> f32;
}

/// Separate multiply and add: the baseline x86-64 target (SSE2) and any other.
pub(crate) struct Plain;

/// Fused multiply-add; only for code compiled with the `fma` target feature (elsewhere it
/// would be a slow library call).
pub(crate) struct Fused;

impl Madd for Plain {
    #[inline(always)]
    fn madd(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

impl Madd for Fused {
    #[inline(always)]
    fn madd(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

// The coefficients are written as they were fitted (in f64); each parses to the nearest
// f32, the value the tests measure the error of.
/// [`log1p`]'s large form: `S(g)/g`, degree 9; the coefficients of g⁷ and g⁸ are 0.
#[allow(clippy::excessive_precision)]
const R: [f32; 10] = [
    0.499_999_749_805_641_27,
    0.125_009_326_768_614_45,
    0.041_557_983_515_897_02,
    0.016_153_354_887_324_56,
    0.005_050_779_887_186_901,
    0.003_740_408_560_898_539,
    0.001_119_779_858_154_896_8,
    0.0,
    0.0,
    0.000_515_795_211_508_323_2,
];
/// [`log1p`]'s small form: `(v − ln(1 + v))/v²` on [0, 1/8], degree 4.
#[allow(clippy::excessive_precision)]
const P: [f32; 5] = [
    0.499_999_993_358_989_04,
    -0.333_330_684_603_880_3,
    0.249_829_110_045_310_86,
    -0.196_083_813_940_961_03,
    0.128_869_944_435_351_57,
];
/// ln(1.125) rounded to f32: both forms are clamped to it at the splice.
#[allow(clippy::excessive_precision)]
const SPLICE: f32 = 0.117_783_036;
/// Just below ln 2, so that `(k + 1)·ln 2 − S` at the top of binade `k` stays under
/// `(k + 2)·ln 2 − S_MAX` at the bottom of binade `k + 1` (deliberately not `LN_2`).
#[allow(clippy::approx_constant)]
const S_MAX: f32 = 0.693_147;

/// `ln(1 + v)` for `v ≥ 0` (finite or `+inf`): monotone by construction, all in `f32`,
/// no division.
///
/// Two forms, spliced at `v = 1/8`:
///
/// - `v < 1/8`: `v − v²·P(v)`, `P` a degree-4 fit of `(v − ln(1 + v))/v²` (relative error
///   1.3e-8). Accurate to an ulp or two, so the curve keeps its slope at the knee. It is
///   monotone because the correction is small: between neighbouring `f32`s the computed
///   `v²·P(v)` grows by at most `v/(1+v)` of the step in `v` plus its own rounding, which
///   stays below the step for `v < 1/7`.
/// - `v ≥ 1/8`: `1 + v = 2^k·m`, `m ∈ [1, 2)`, `g = 2 − m` (exact), and
///   `ln(1 + v) = (k + 1)·ln 2 − S(g)` with `S(g) = −ln(1 − g/2)` fitted by a polynomial
///   with **non-negative** coefficients (absolute error 3.3e-8). `S` is then non-decreasing
///   in `g` under rounding (every partial sum and product is), `g` non-increasing in `v`,
///   so the result never decreases within a binade; `S` is capped just below `ln 2` so that
///   the top of one binade never passes the bottom of the next. Error ≤ 2 ulp + 2e-7.
///
/// Each side is clamped at the splice value, so the two meet without a step back. A
/// polynomial in `m − 1` evaluated in `f32` would not be monotone (its alternating terms
/// round either way); this one needs no `f64` and vectorises 8 lanes wide with AVX2.
#[inline(always)]
pub(crate) fn log1p<M: Madd>(v: f32) -> f32 {
    // Small form.
    let v2 = v * v;
    let p = M::madd(M::madd(P[3], v, P[2]), v2, M::madd(P[1], v, P[0])) + P[4] * (v2 * v2);
    let small = M::madd(-v2, p, v);
    let small = if small < SPLICE { small } else { SPLICE };

    // Large form.
    let y = 1.0 + v;
    let bits = y.to_bits();
    let kf = ((bits >> 23) as i32 - 0x7e) as f32; // k + 1
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    // `2 − m` is exact; for `k = 0`, `1 − v` is the same value without `1 + v`'s rounding.
    let g = if kf == 1.0 { 1.0 - v } else { 2.0 - m };
    let (g2, g4) = (g * g, (g * g) * (g * g));
    let r03 = M::madd(M::madd(R[3], g, R[2]), g2, M::madd(R[1], g, R[0]));
    let r46 = M::madd(R[6], g2, M::madd(R[5], g, R[4]));
    let r = M::madd(R[9] * g, g4 * g4, M::madd(r46, g4, r03));
    let s = g * r;
    let s = if s < S_MAX { s } else { S_MAX };
    let large = M::madd(kf, LN2_HI, M::madd(kf, LN2_LO, -s));
    let large = if large > SPLICE { large } else { SPLICE };

    let out = if v < 0.125 { small } else { large };
    // +inf in, +inf out (its exponent would read as k = 128).
    if v == f32::INFINITY {
        f32::INFINITY
    } else {
        out
    }
}

/// [`log1p_toe`]'s polynomial: `(ln(1 + f) − f)/f²` on `[√½ − 1, √2 − 1]`, degree 7,
/// fitted for the least relative error of `ln(1 + f)` (3.0e-8 before rounding to `f32`).
const LN_Q: [f32; 8] = [
    -0.499_999_9,
    0.333_339_5,
    -0.250_017_55,
    0.199_620_72,
    -0.165_705_08,
    0.149_179_74,
    -0.143_075_21,
    0.087_348_41,
];
/// The bits of √½ rounded to `f32`: subtracted from `1 + v`'s bits, they move the binade's
/// split from 2 to √2.
const SQRT_HALF_BITS: u32 = 0x3f35_04f3;
/// 2^126: [`log1p_toe`] clamps `v` here, so that `1 + v < √2·2^126` and `2^-k` is normal.
const TOE_LOG_MAX: f32 = 8.507_059e37;
/// The bits of 1.0.
const ONE_BITS: u32 = 0x3f80_0000;

/// `ln(1 + v)` for `0 ≤ v ≤ 2^126`, in one form for the whole range; `ln(1 + 2^126)` for
/// larger `v` and `+inf` for `+inf`. The log toe's: with the entropy and median pivots,
/// three vectors of eight toe entries in four (in the bench's model-like logits) hold
/// entries on both sides of `v = 1`, and paid for both of [`log1p`]'s forms.
///
/// `1 + v = 2^k·m` with `m ∈ [√½, √2)`: `k` from the bits of the rounded `1 + v` (an
/// integer subtraction of √½'s bits moves the binade's split from 2 to √2), then
/// `f = m − 1 = v·2^-k + (2^-k − 1)` from `v` itself in one FMA, which rounds once
/// where `m − 1` from the rounded `1 + v` would carry its rounding (2.6 ulp of the result,
/// near `v = √2 − 1`): `f = v` exactly for `k = 0`, so the value keeps its relative
/// accuracy as `v → 0` and is exactly 0 at 0 (the toe meets the knee without a step).
/// Then `(f + k·ln2_lo + f²·q(f)) + k·ln2_hi`, `q` of degree 7 in Estrin's form. `v` is
/// clamped at 2^126 so that `2^-k` stays a normal `f32`: beyond it (`d/β` past 8.5e37)
/// the value stays at 87.34, 1.4 short of the largest `ln(1 + v)`.
///
/// `q`'s coefficients alternate in sign, so unlike [`log1p`] this is not monotone by
/// construction: within a binade the correction `f²·q(f)` moves by at most 0.42 of the
/// step in `f` plus a few roundings of a value at most 0.21 of `f`. The tests walk every
/// `f32` (with `HLG_EXHAUSTIVE=1`, which passed when it was written; every 61st
/// otherwise, and every one around each binade edge) and check that it never decreases.
#[inline(always)]
pub(crate) fn log1p_toe<M: Madd>(v: f32) -> f32 {
    let vc = if v < TOE_LOG_MAX { v } else { TOE_LOG_MAX };
    let ix = (1.0 + vc).to_bits().wrapping_sub(SQRT_HALF_BITS);
    // `k`, or `+inf` for `v = +inf` (whose bits would read as k = 128): it carries through
    // every step below to a `+inf` result, off the polynomial's chain.
    let kf = if v == f32::INFINITY {
        f32::INFINITY
    } else {
        ((ix as i32) >> 23) as f32
    };
    // 2^-k (0 ≤ k ≤ 126) from k·2^23, the top bits of `ix` (wrapping: the kernels also
    // evaluate this on lanes they then discard).
    let s = f32::from_bits(ONE_BITS.wrapping_sub(ix & 0xff80_0000));
    let f = M::madd(vc, s, s - 1.0);
    let (f2, f4) = (f * f, (f * f) * (f * f));
    let lo = M::madd(
        M::madd(LN_Q[3], f, LN_Q[2]),
        f2,
        M::madd(LN_Q[1], f, LN_Q[0]),
    );
    let hi = M::madd(
        M::madd(LN_Q[7], f, LN_Q[6]),
        f2,
        M::madd(LN_Q[5], f, LN_Q[4]),
    );
    // `k·ln2_lo` joins `f` beside the polynomial and `k·ln2_hi` (exact) comes last: one FMA
    // and one addition after `q`, where `p = f + f²·q`, then `k·ln2_hi + (k·ln2_lo + p)`
    // took three FMAs. (Adding `f²·q` after `k·ln 2 + f`, or a rounded `k·ln 2` after `p`,
    // fails the monotonicity walk.)
    M::madd(f2, M::madd(hi, f4, lo), M::madd(kf, LN2_LO, f)) + kf * LN2_HI
}

/// `(exp(r) − 1 − r)/r²` on `|r| ≤ ln2/2`, degree 3, fitted (Lawson's reweighted least
/// squares) for the least maximum relative error of `exp` (1.05e-7; 2.3 ulp evaluated in
/// f32). [`exp_neg`] only weighs the pivots' sums, whose f32 block sums round at 6e-8
/// anyway: a degree-4 fit (3.1e-9) cost two more operations per vector in the pass that
/// auto mode adds to the `top` pivot. It needs no monotonicity, so a minimax fit replaces
/// a longer Taylor series like [`exp2m1_pos`]'s.
const EXP_Q: [f32; 4] = [0.499_992_28, 0.166_671_16, 0.041_890_55, 0.008_312_478];

/// `exp(t)` for `t ≤ 0`; exactly 0 for `t < −87.3` (and for `t = −inf`).
#[inline(always)]
pub(crate) fn exp_neg<M: Madd>(t: f32) -> f32 {
    let under = t < -87.3;
    let tc = if under { 0.0 } else { t };
    // `km` = 1.5·2^23 + k: k = round(t·log₂e) in its low mantissa bits.
    let km = M::madd(tc, LOG2_E, ROUND_MAGIC);
    let kf = km - ROUND_MAGIC;
    let r = M::madd(-kf, LN2_LO, M::madd(-kf, LN2_HI, tc));
    let r2 = r * r;
    let q = M::madd(
        M::madd(EXP_Q[3], r, EXP_Q[2]),
        r2,
        M::madd(EXP_Q[1], r, EXP_Q[0]),
    );
    let p = 1.0 + M::madd(r2, q, r);
    // p·2^k by adding k to p's exponent: `km`'s bits shifted by 23 are k·2^23 (the magic
    // constant's own bits shift out). Exact, as the product is, because p ∈ [0.7, 1.5]
    // and k ≥ −126 keep the result normal on [−87.3, 0].
    let e = f32::from_bits(p.to_bits().wrapping_add(km.to_bits() << 23));
    if under {
        0.0
    } else {
        e
    }
}

/// `2^u − 1` for `u ≥ 0`, within 2 ulp, and monotone by construction; `+inf` for
/// `u ≥ 128` (the exp toe calls it with `u = d·log₂e/β`).
///
/// `k = ⌊u⌋` and `r = u − k ∈ [0, 1)`, both exact; `p = 2^r − 1 = Σ (r·ln 2)ⁿ/n!` to
/// `n = 9` (positive coefficients) clamped to `≤ 1`, so that the value at the top of one
/// binade never exceeds the bottom of the next; then `(2^k − 1) + 2^k·p`. Working in base
/// 2 makes the reduction exact: no rounded `k·ln 2` to subtract, hence no step to put
/// `r` back into range (an earlier natural-base version spent six operations of ~35 on
/// it). What limits the toe's accuracy is the rounding of `u` itself, as it was of
/// `d/β` before: ≤ 1 ulp of `u`, i.e. `u·ln2·2⁻²³` relative, at most 1.05e-5 near the
/// overflow.
#[inline(always)]
pub(crate) fn exp2m1_pos<M: Madd>(u: f32) -> f32 {
    let over = u >= 128.0;
    let uc = if over { 0.0 } else { u };
    // ⌊u⌋: u rounded to the nearest integer, one less where that is above u.
    let kn = (uc + ROUND_MAGIC) - ROUND_MAGIC;
    let k = if kn > uc { kn - 1.0 } else { kn };
    let r = uc - k;
    // 2^r − 1 = r·ln2 + r²·q(r), q in Estrin's form: every coefficient is positive and
    // r ≥ 0, so each partial sum and product is non-decreasing in r.
    let p = M::madd(r * r, exp2m1_q::<M>(r), r * std::f32::consts::LN_2);
    let p = if p < 1.0 { p } else { 1.0 };
    let scale = pow2(k);
    let out = M::madd(scale, p, scale - 1.0);
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
    let biased = (kf + ROUND_MAGIC)
        .to_bits()
        .wrapping_sub(ROUND_MAGIC.to_bits())
        .wrapping_add(127);
    f32::from_bits(biased << 23)
}

/// Taylor coefficients of `(2^r − 1 − r·ln2)/r²`: `ln2ⁿ/n!` for `n = 2 … 9`, in f64 digits.
#[allow(clippy::excessive_precision)]
const C: [f32; 8] = [
    0.2402265069591007,
    0.055504108664821576,
    0.009618129107628477,
    0.0013333558146428441,
    0.00015403530393381606,
    1.5252733804059838e-05,
    1.3215486790144305e-06,
    1.0178086009239696e-07,
];

/// `(2^r − 1 − r·ln2)/r²` by its Taylor series to `r⁷` (`2^r − 1` to `r⁹`), in Estrin's
/// form: a shallow tree instead of a chain of dependent steps, which leaves the core
/// waiting on latency.
#[inline(always)]
fn exp2m1_q<M: Madd>(r: f32) -> f32 {
    let (r2, r4) = (r * r, (r * r) * (r * r));
    let lo = M::madd(M::madd(C[3], r, C[2]), r2, M::madd(C[1], r, C[0]));
    let hi = M::madd(M::madd(C[7], r, C[6]), r2, M::madd(C[5], r, C[4]));
    M::madd(hi, r4, lo)
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod v8;

#[cfg(test)]
mod tests {
    use super::*;

    /// The implementations under test: `Plain` always, `Fused` where the CPU has FMA
    /// (the kernels use it there).
    struct Impl {
        name: &'static str,
        log1p: fn(f32) -> f32,
        log1p_toe: fn(f32) -> f32,
        exp_neg: fn(f32) -> f32,
        exp2m1_pos: fn(f32) -> f32,
    }

    fn impls() -> Vec<Impl> {
        let mut v = vec![Impl {
            name: "plain",
            log1p: log1p::<Plain>,
            log1p_toe: log1p_toe::<Plain>,
            exp_neg: exp_neg::<Plain>,
            exp2m1_pos: exp2m1_pos::<Plain>,
        }];
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("fma") {
            v.push(Impl {
                name: "fused",
                log1p: fused::log1p,
                log1p_toe: fused::log1p_toe,
                exp_neg: fused::exp_neg,
                exp2m1_pos: fused::exp2m1_pos,
            });
        } else {
            eprintln!("no FMA on this CPU: only the plain variants are tested");
        }
        v
    }

    #[cfg(target_arch = "x86_64")]
    mod fused {
        use super::super::{exp2m1_pos as em, exp_neg as e, log1p as l, log1p_toe as lt, Fused};

        macro_rules! wrap {
            ($name:ident, $f:ident) => {
                pub fn $name(v: f32) -> f32 {
                    #[target_feature(enable = "fma")]
                    unsafe fn inner(v: f32) -> f32 {
                        $f::<Fused>(v)
                    }
                    // SAFETY: `impls` hands these out only when the CPU has FMA.
                    unsafe { inner(v) }
                }
            };
        }
        wrap!(log1p, l);
        wrap!(log1p_toe, lt);
        wrap!(exp_neg, e);
        wrap!(exp2m1_pos, em);
    }

    #[test]
    fn log1p_small_table() {
        for f in impls() {
            // Values worked out in f64 and rounded to f32.
            for &(v, want) in &[
                (0.0f32, 0.0f64),
                (1.0, std::f64::consts::LN_2),
                (1e-8, 9.99999995e-9),
                (3.0, 1.3862943611198906),
                (1e6, 13.815511557963774),
            ] {
                let got = (f.log1p)(v) as f64;
                // The documented bound: 3 ulp below the splice, 2 ulp + 2e-7 above it.
                let tol = if v < 0.125 {
                    3.0 * want.abs() * f32::EPSILON as f64
                } else {
                    2.0 * want.abs() * f32::EPSILON as f64 + 2e-7
                };
                assert!((got - want).abs() <= tol, "{v}: {got} vs {want}");
            }
            assert_eq!((f.log1p)(f32::INFINITY), f32::INFINITY);
        }
    }

    #[test]
    fn exp_edges() {
        for f in impls() {
            assert_eq!((f.exp_neg)(0.0), 1.0);
            assert_eq!((f.exp_neg)(f32::NEG_INFINITY), 0.0);
            assert_eq!((f.exp_neg)(-100.0), 0.0);
            assert_eq!((f.exp2m1_pos)(0.0), 0.0);
            assert_eq!((f.exp2m1_pos)(1.0), 1.0);
            assert_eq!((f.exp2m1_pos)(10.0), 1023.0);
            assert_eq!((f.exp2m1_pos)(128.0), f32::INFINITY);
            assert!((f.exp2m1_pos)(127.999).is_finite());
            assert_eq!((f.exp2m1_pos)(f32::INFINITY), f32::INFINITY);
        }
    }

    /// Error in units of the f32 spacing at the true value.
    fn ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        let spacing = if w == 0.0 {
            f32::MIN_POSITIVE as f64
        } else {
            (w.abs().next_up() - w.abs()) as f64
        };
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

    /// Walks `f` from `lo` to `hi` (bit stride) and asserts it never decreases.
    fn assert_monotone(name: &str, f: fn(f32) -> f32, lo: f32, hi: f32, stride: u32) {
        let mut prev = f32::NEG_INFINITY;
        walk(lo, hi, stride, |v| {
            let got = f(v);
            assert!(got >= prev, "{name} not monotone at {v}: {got} < {prev}");
            prev = got;
        });
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
        for f in impls() {
            assert_monotone("log1p", f.log1p, 0.0, 1.0, 1);
        }
    }

    #[test]
    fn log1p_monotone_everywhere_below_2_pow_24() {
        for f in impls() {
            assert_monotone("log1p", f.log1p, 0.0, 16_777_216.0, stride());
        }
    }

    /// The two forms' documented bounds: within 3 ulp below the splice (`v < 1/8`);
    /// above it within 2 ulp of the result plus 2e-7 absolute.
    #[test]
    fn log1p_accuracy() {
        for f in impls() {
            let (mut small_ulp, mut small_at) = (0f64, 0f32);
            let (mut large_excess, mut large_at, mut large_abs) = (0f64, 0f32, 0f64);
            let mut track = |v: f32| {
                let want = (v as f64).ln_1p();
                let got = (f.log1p)(v);
                if v < 0.125 {
                    let e = ulps(got, want);
                    if e > small_ulp {
                        (small_ulp, small_at) = (e, v);
                    }
                } else {
                    let abs = (got as f64 - want).abs();
                    let spacing = ((want as f32).next_up() - want as f32) as f64;
                    let excess = abs - 2.0 * spacing;
                    large_abs = large_abs.max(abs.min(abs / (want / 2.0).max(1.0)));
                    if excess > large_excess {
                        (large_excess, large_at) = (excess, v);
                    }
                }
            };
            walk(0.0, 16_777_216.0, 127, &mut track);
            walk(16_777_216.0, 1.8e19, 997, &mut track);
            walk(0.120, 0.130, 1, &mut track);
            println!("log1p ({}): v < 1/8: max {small_ulp:.3} ulp at {small_at:e}; v >= 1/8: max {large_abs:.3e} absolute, {large_excess:.3e} beyond 2 ulp at {large_at:e}", f.name);
            assert!(small_ulp <= 3.0, "log1p {small_ulp} ulp at {small_at}");
            assert!(
                large_excess <= 2e-7,
                "log1p error {large_excess} beyond 2 ulp at {large_at}"
            );
        }
    }

    #[test]
    fn log1p_monotone_across_the_splice() {
        for f in impls() {
            assert_monotone("log1p", f.log1p, 0.12, 0.13, 1);
        }
    }

    #[test]
    fn log1p_monotone_across_binades() {
        for f in impls() {
            // Around every power of two that 1 + v can reach.
            for k in 0..64 {
                let y = (2.0f32).powi(k);
                let lo = f32::from_bits(y.to_bits() - 4096).max(0.0) - 1.0;
                assert_monotone(
                    "log1p",
                    f.log1p,
                    lo.max(0.0),
                    f32::from_bits(y.to_bits() + 4096) - 1.0,
                    1,
                );
            }
        }
    }

    #[test]
    fn log1p_toe_table() {
        for f in impls() {
            for &(v, want) in &[
                (0.0f32, 0.0f64),
                (1e-30, 1e-30),
                (1e-8, 9.99999995e-9),
                (0.25, 0.22314355131420976),
                (1.0, std::f64::consts::LN_2),
                (3.0, 1.3862943611198906),
                (1e6, 13.815511557963774),
                (1e30, 69.07755278982137),
                (8.507059e37, 87.3365447505531),
            ] {
                let got = (f.log1p_toe)(v) as f64;
                assert!(
                    ulps(got as f32, want) <= 2.0,
                    "{}: log1p_toe({v}) = {got}, want {want}",
                    f.name
                );
            }
            assert_eq!((f.log1p_toe)(0.0).to_bits(), 0, "exactly +0 at the knee");
            // Saturated past 2^126.
            let top = (f.log1p_toe)(TOE_LOG_MAX);
            for v in [TOE_LOG_MAX.next_up(), 1e38, f32::MAX] {
                assert_eq!((f.log1p_toe)(v), top);
            }
            assert_eq!((f.log1p_toe)(f32::INFINITY), f32::INFINITY);
        }
    }

    /// Within 2 ulp of `ln(1 + v)` up to the clamp at 2^126.
    #[test]
    fn log1p_toe_accuracy() {
        for f in impls() {
            let (mut worst, mut at) = (0f64, 0f32);
            let mut track = |v: f32| {
                let e = ulps((f.log1p_toe)(v), (v as f64).ln_1p());
                if e > worst {
                    (worst, at) = (e, v);
                }
            };
            walk(0.0, TOE_LOG_MAX, 127, &mut track);
            walk(0.40, 0.43, 1, &mut track);
            walk(1.82, 1.84, 1, &mut track);
            walk(1e-6, 1e-5, 1, &mut track);
            println!("log1p_toe ({}): max {worst:.3} ulp at {at:e}", f.name);
            assert!(worst <= 2.0, "log1p_toe {worst} ulp at {at}");
        }
    }

    /// Every 61st f32 from 0 to +inf (every one with `HLG_EXHAUSTIVE=1`), and every one
    /// around each binade edge `1 + v = √2·2^k` and each power of two.
    #[test]
    fn log1p_toe_monotone() {
        for f in impls() {
            assert_monotone("log1p_toe", f.log1p_toe, 0.0, f32::INFINITY, stride());
            for k in 0..128 {
                for edge in [
                    std::f32::consts::SQRT_2 * (2.0f32).powi(k),
                    (2.0f32).powi(k),
                ] {
                    let lo = (f32::from_bits(edge.to_bits().saturating_sub(4096)) - 1.0).max(0.0);
                    let hi =
                        f32::from_bits(edge.to_bits().saturating_add(4096).min(f32::MAX.to_bits()))
                            - 1.0;
                    assert_monotone("log1p_toe", f.log1p_toe, lo, hi, 1);
                }
            }
        }
    }

    #[test]
    fn exp2m1_monotone() {
        for f in impls() {
            assert_monotone("exp2m1_pos", f.exp2m1_pos, 0.0, 130.0, stride());
            // Every f32 around each binade edge of the result (u an integer).
            for k in 0..128 {
                let u = k as f32;
                assert_monotone(
                    "exp2m1_pos",
                    f.exp2m1_pos,
                    f32::from_bits(u.to_bits().saturating_sub(4096)).max(0.0),
                    f32::from_bits(u.to_bits() + 4096),
                    1,
                );
            }
        }
    }

    #[test]
    fn exp_accuracy() {
        for f in impls() {
            let mut worst = 0f64;
            walk(0.0, 87.0, stride() * 17, |t| {
                worst = worst.max(ulps((f.exp_neg)(-t), (-t as f64).exp()))
            });
            println!("exp_neg ({}): max error {worst:.3} ulp", f.name);
            assert!(worst <= 2.5, "exp_neg {worst} ulp");
            let mut worst = 0f64;
            walk(0.0, 127.99, stride() * 17, |u| {
                worst = worst.max(ulps(
                    (f.exp2m1_pos)(u),
                    (u as f64 * std::f64::consts::LN_2).exp_m1(),
                ))
            });
            println!("exp2m1_pos ({}): max error {worst:.3} ulp", f.name);
            assert!(worst <= 2.0, "exp2m1_pos {worst} ulp");
        }
    }
}
