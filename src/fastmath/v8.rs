//! Eight lanes of [`log1p`](super::log1p), [`exp_neg`](super::exp_neg) and
//! [`exp2m1_pos`](super::exp2m1_pos) with AVX2 and FMA intrinsics: lane for lane the same
//! operations, in the same order and with the same roundings, as the scalar functions
//! instantiated with [`Fused`](super::Fused). The results are therefore bit-identical to
//! them (the kernel's tests check it over walks of every input range), and what is proven
//! and measured of the scalar functions (monotonicity, the exhaustive walks, the error
//! table) holds here unchanged.
//!
//! Why not leave this to the compiler, as the baseline build does: on the generic code
//! LLVM kept reloading constants and spilling the toe's intermediate values (about 100
//! instructions per 8 entries for the log toe, against about 60 here), and turned the
//! finiteness tests of the pivot passes into integer range checks.
//!
//! # Safety
//! Every function here requires AVX2 and FMA; callers are `#[target_feature(enable =
//! "avx2,fma")]` functions reached only after detecting both.

use std::arch::x86_64::*;

use super::{C, EXP_Q, LN2_HI, LN2_LO, LOG2_E, P, R, ROUND_MAGIC, SPLICE, S_MAX};

/// Two vectors of eight lanes, computed together: each step below is written once and
/// applied to both vectors before the next step, so that the CPU has two independent
/// chains in flight (one chain of the log is ~25 dependent operations long, more than the
/// out-of-order window hides on its own; four chains measured no faster than two).
pub(crate) type Vn = [__m256; 2];

/// The same expression for each of the two vectors (index `$i`). Expanded in place, not
/// through a closure: a closure has no target features, so the intrinsics in it could not
/// be inlined into it, and LLVM does not always inline the closure itself.
macro_rules! each {
    (|$i:ident| $e:expr) => {
        [
            {
                let $i = 0usize;
                #[allow(unused_unsafe)]
                // SAFETY: the callers' contract (AVX2 and FMA present).
                unsafe {
                    $e
                }
            },
            {
                let $i = 1usize;
                #[allow(unused_unsafe)]
                // SAFETY: as above.
                unsafe {
                    $e
                }
            },
        ]
    };
}
pub(crate) use each;

#[inline(always)]
pub(crate) unsafe fn splat(x: f32) -> __m256 {
    _mm256_set1_ps(x)
}

#[inline(always)]
unsafe fn fma(a: __m256, b: __m256, c: __m256) -> __m256 {
    _mm256_fmadd_ps(a, b, c)
}

/// `ln(1 + v)`, as [`super::log1p`].
#[inline(always)]
pub(crate) unsafe fn log1p(v: Vn) -> Vn {
    let small = log1p_small(v);
    let large = log1p_large(v);
    each!(|i| _mm256_blendv_ps(
        _mm256_blendv_ps(large[i], small[i], _mm256_cmp_ps::<_CMP_LT_OQ>(v[i], splat(0.125))),
        splat(f32::INFINITY),
        _mm256_cmp_ps::<_CMP_EQ_OQ>(v[i], splat(f32::INFINITY)),
    ))
}

/// [`log1p`] for lanes with `1 ≤ v < +inf`: the large form alone, without its `k = 0`
/// case (`1 + v ≥ 2` here), its clamp at the splice (the value is at least `ln 2`) and the
/// `+inf` select. Bit-identical to [`log1p`] on those lanes; the other lanes are not
/// `ln(1 + v)`. The toe uses it for vectors whose entries all lie at least `β` past its
/// knee (on real logits, nearly all of them).
#[inline(always)]
pub(crate) unsafe fn log1p_from_one(v: Vn) -> Vn {
    let (kf, m) = binade(v);
    let sg = s_of_g(each!(|i| _mm256_sub_ps(splat(2.0), m[i])));
    k_ln2_minus(kf, sg)
}

/// `1 + v = 2^k·m`, `m ∈ [1, 2)`: `(k + 1, m)`, from the bits of the rounded `1 + v`.
#[inline(always)]
unsafe fn binade(v: Vn) -> (Vn, Vn) {
    let bits: [__m256i; 2] = each!(|i| _mm256_castps_si256(_mm256_add_ps(splat(1.0), v[i])));
    let kf: Vn =
        each!(|i| _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32::<23>(bits[i]), _mm256_set1_epi32(0x7e))));
    let m: Vn = each!(|i| _mm256_castsi256_ps(_mm256_or_si256(
        _mm256_and_si256(bits[i], _mm256_set1_epi32(0x007f_ffff)),
        _mm256_set1_epi32(0x3f80_0000),
    )));
    (kf, m)
}

/// `kf·ln 2 − S`, with `ln 2` in two parts, as the large form rounds it.
#[inline(always)]
unsafe fn k_ln2_minus(kf: Vn, sg: Vn) -> Vn {
    each!(|i| fma(kf[i], splat(LN2_HI), _mm256_fmsub_ps(kf[i], splat(LN2_LO), sg[i])))
}

/// `S(g)`, capped just below `ln 2`, as in [`super::log1p`]'s large form.
#[inline(always)]
unsafe fn s_of_g(g: Vn) -> Vn {
    let s = splat;
    let g2: Vn = each!(|i| _mm256_mul_ps(g[i], g[i]));
    let g4: Vn = each!(|i| _mm256_mul_ps(g2[i], g2[i]));
    let r03: Vn = each!(|i| fma(fma(s(R[3]), g[i], s(R[2])), g2[i], fma(s(R[1]), g[i], s(R[0]))));
    let r46: Vn = each!(|i| fma(s(R[6]), g2[i], fma(s(R[5]), g[i], s(R[4]))));
    let r: Vn = each!(|i| fma(_mm256_mul_ps(s(R[9]), g[i]), _mm256_mul_ps(g4[i], g4[i]), fma(r46[i], g4[i], r03[i])));
    each!(|i| _mm256_min_ps(_mm256_mul_ps(g[i], r[i]), s(S_MAX)))
}

/// The small form of [`super::log1p`], clamped at the splice.
#[inline(always)]
unsafe fn log1p_small(v: Vn) -> Vn {
    let s = splat;
    let v2: Vn = each!(|i| _mm256_mul_ps(v[i], v[i]));
    let p: Vn = each!(|i| _mm256_add_ps(
        fma(fma(s(P[3]), v[i], s(P[2])), v2[i], fma(s(P[1]), v[i], s(P[0]))),
        _mm256_mul_ps(s(P[4]), _mm256_mul_ps(v2[i], v2[i])),
    ));
    // `if small < SPLICE { small } else { SPLICE }` is exactly `minps(small, SPLICE)`.
    each!(|i| _mm256_min_ps(_mm256_fnmadd_ps(v2[i], p[i], v[i]), s(SPLICE)))
}

/// The large form of [`super::log1p`], clamped at the splice.
#[inline(always)]
unsafe fn log1p_large(v: Vn) -> Vn {
    let s = splat;
    let (kf, m) = binade(v);
    // `2 − m` is exact; for `k = 0`, `1 − v` is the same value without `1 + v`'s rounding.
    let g: Vn = each!(|i| _mm256_blendv_ps(
        _mm256_sub_ps(s(2.0), m[i]),
        _mm256_sub_ps(s(1.0), v[i]),
        _mm256_cmp_ps::<_CMP_EQ_OQ>(kf[i], s(1.0)),
    ));
    let large = k_ln2_minus(kf, s_of_g(g));
    // `if large > SPLICE { large } else { SPLICE }` is exactly `maxps(large, SPLICE)`.
    each!(|i| _mm256_max_ps(large[i], s(SPLICE)))
}

/// `exp(t)` for `−87.3 ≤ t ≤ 0`: [`super::exp_neg`] without its underflow select, which
/// the caller's own range test replaces (bit-identical on that range).
#[inline(always)]
pub(crate) unsafe fn exp_neg_in_range(t: Vn) -> Vn {
    let km: Vn = each!(|i| fma(t[i], splat(LOG2_E), splat(ROUND_MAGIC)));
    let kf: Vn = each!(|i| _mm256_sub_ps(km[i], splat(ROUND_MAGIC)));
    let r: Vn = each!(|i| _mm256_fnmadd_ps(kf[i], splat(LN2_LO), _mm256_fnmadd_ps(kf[i], splat(LN2_HI), t[i])));
    let s = splat;
    let r2: Vn = each!(|i| _mm256_mul_ps(r[i], r[i]));
    let q: Vn = each!(|i| fma(
        s(EXP_Q[4]),
        _mm256_mul_ps(r2[i], r2[i]),
        fma(fma(s(EXP_Q[3]), r[i], s(EXP_Q[2])), r2[i], fma(s(EXP_Q[1]), r[i], s(EXP_Q[0]))),
    ));
    let p: Vn = each!(|i| _mm256_add_ps(s(1.0), fma(r2[i], q[i], r[i])));
    // p·2^k through the exponent bits, as the scalar code.
    each!(|i| _mm256_castsi256_ps(_mm256_add_epi32(
        _mm256_castps_si256(p[i]),
        _mm256_slli_epi32::<23>(_mm256_castps_si256(km[i]))
    )))
}

/// `exp(t)` for `t ≤ 0`, as [`super::exp_neg`].
#[cfg(test)]
#[inline(always)]
pub(crate) unsafe fn exp_neg(t: __m256) -> __m256 {
    let under = _mm256_cmp_ps::<_CMP_LT_OQ>(t, splat(-87.3));
    let tc = _mm256_andnot_ps(under, t);
    _mm256_andnot_ps(under, exp_neg_in_range([tc, tc])[0])
}

/// `2^u − 1` for `u ≥ 0`, as [`super::exp2m1_pos`]. `⌊u⌋` is one `vroundps` here and a
/// rounding plus a correction in the scalar code: the same exact integer either way.
#[inline(always)]
pub(crate) unsafe fn exp2m1_pos(u: Vn) -> Vn {
    let s = splat;
    let over: Vn = each!(|i| _mm256_cmp_ps::<_CMP_GE_OQ>(u[i], s(128.0)));
    let uc: Vn = each!(|i| _mm256_andnot_ps(over[i], u[i]));
    let k: Vn = each!(|i| _mm256_floor_ps(uc[i]));
    let r: Vn = each!(|i| _mm256_sub_ps(uc[i], k[i]));
    let q = exp2m1_q(r);
    let p: Vn = each!(|i| _mm256_min_ps(
        fma(_mm256_mul_ps(r[i], r[i]), q[i], _mm256_mul_ps(r[i], s(std::f32::consts::LN_2))),
        s(1.0)
    ));
    let scale = pow2(k);
    each!(|i| _mm256_blendv_ps(fma(scale[i], p[i], _mm256_sub_ps(scale[i], s(1.0))), s(f32::INFINITY), over[i]))
}

/// As `super::pow2`: integer operations on the bits of `k + 1.5·2^23`.
#[inline(always)]
unsafe fn pow2(kf: Vn) -> Vn {
    each!(|i| _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
        _mm256_sub_epi32(
            _mm256_castps_si256(_mm256_add_ps(kf[i], splat(ROUND_MAGIC))),
            _mm256_set1_epi32(ROUND_MAGIC.to_bits() as i32),
        ),
        _mm256_set1_epi32(127),
    ))))
}

/// As `super::exp2m1_q`.
#[inline(always)]
unsafe fn exp2m1_q(r: Vn) -> Vn {
    let s = splat;
    let r2: Vn = each!(|i| _mm256_mul_ps(r[i], r[i]));
    let r4: Vn = each!(|i| _mm256_mul_ps(r2[i], r2[i]));
    let lo: Vn = each!(|i| fma(fma(s(C[3]), r[i], s(C[2])), r2[i], fma(s(C[1]), r[i], s(C[0]))));
    let hi: Vn = each!(|i| fma(fma(s(C[7]), r[i], s(C[6])), r2[i], fma(s(C[5]), r[i], s(C[4]))));
    each!(|i| fma(hi[i], r4[i], lo[i]))
}
