//! Eight lanes of [`log1p_toe`](super::log1p_toe), [`exp_neg`](super::exp_neg) and
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

use super::{
    C, EXP_Q, LN2_HI, LN2_LO, LN_Q, LOG2_E, ONE_BITS, ROUND_MAGIC, SQRT_HALF_BITS, TOE_LOG_MAX,
};

/// Two vectors of eight lanes, computed together: each step below is written once and
/// applied to both vectors before the next step, so that the CPU has two independent
/// chains in flight (one chain of the log toe is ~20 dependent operations long, more than
/// the out-of-order window hides on its own; four chains measured no faster than two).
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

/// `ln(1 + v)`, as [`super::log1p_toe`].
#[inline(always)]
pub(crate) unsafe fn log1p_toe(v: Vn) -> Vn {
    let s = splat;
    // `minps` returns its second operand for a NaN, as the scalar `if v < MAX`.
    let vc: Vn = each!(|i| _mm256_min_ps(v[i], s(TOE_LOG_MAX)));
    let ix: [__m256i; 2] = each!(|i| _mm256_sub_epi32(
        _mm256_castps_si256(_mm256_add_ps(s(1.0), vc[i])),
        _mm256_set1_epi32(SQRT_HALF_BITS as i32)
    ));
    // k, or +inf for v = +inf.
    let kf: Vn = each!(|i| _mm256_blendv_ps(
        _mm256_cvtepi32_ps(_mm256_srai_epi32::<23>(ix[i])),
        s(f32::INFINITY),
        _mm256_cmp_ps::<_CMP_EQ_OQ>(v[i], s(f32::INFINITY)),
    ));
    // 2^-k from k·2^23.
    let sc: Vn = each!(|i| _mm256_castsi256_ps(_mm256_sub_epi32(
        _mm256_set1_epi32(ONE_BITS as i32),
        _mm256_and_si256(ix[i], _mm256_set1_epi32(0xff80_0000u32 as i32))
    )));
    let f: Vn = each!(|i| fma(vc[i], sc[i], _mm256_sub_ps(sc[i], s(1.0))));
    let f2: Vn = each!(|i| _mm256_mul_ps(f[i], f[i]));
    let f4: Vn = each!(|i| _mm256_mul_ps(f2[i], f2[i]));
    let lo: Vn = each!(|i| fma(
        fma(s(LN_Q[3]), f[i], s(LN_Q[2])),
        f2[i],
        fma(s(LN_Q[1]), f[i], s(LN_Q[0]))
    ));
    let hi: Vn = each!(|i| fma(
        fma(s(LN_Q[7]), f[i], s(LN_Q[6])),
        f2[i],
        fma(s(LN_Q[5]), f[i], s(LN_Q[4]))
    ));
    let c: Vn = each!(|i| fma(kf[i], s(LN2_LO), f[i]));
    each!(|i| _mm256_add_ps(
        fma(f2[i], fma(hi[i], f4[i], lo[i]), c[i]),
        _mm256_mul_ps(kf[i], s(LN2_HI))
    ))
}

/// `exp(t)` for `−87.3 ≤ t ≤ 0`: [`super::exp_neg`] without its underflow select, which
/// the caller's own range test replaces (bit-identical on that range).
#[inline(always)]
pub(crate) unsafe fn exp_neg_in_range(t: Vn) -> Vn {
    let km: Vn = each!(|i| fma(t[i], splat(LOG2_E), splat(ROUND_MAGIC)));
    let kf: Vn = each!(|i| _mm256_sub_ps(km[i], splat(ROUND_MAGIC)));
    let r: Vn = each!(|i| _mm256_fnmadd_ps(
        kf[i],
        splat(LN2_LO),
        _mm256_fnmadd_ps(kf[i], splat(LN2_HI), t[i])
    ));
    let s = splat;
    let r2: Vn = each!(|i| _mm256_mul_ps(r[i], r[i]));
    let q: Vn = each!(|i| fma(
        fma(s(EXP_Q[3]), r[i], s(EXP_Q[2])),
        r2[i],
        fma(s(EXP_Q[1]), r[i], s(EXP_Q[0]))
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
        fma(
            _mm256_mul_ps(r[i], r[i]),
            q[i],
            _mm256_mul_ps(r[i], s(std::f32::consts::LN_2))
        ),
        s(1.0)
    ));
    let scale = pow2(k);
    each!(|i| _mm256_blendv_ps(
        fma(scale[i], p[i], _mm256_sub_ps(scale[i], s(1.0))),
        s(f32::INFINITY),
        over[i]
    ))
}

/// As `super::pow2`: integer operations on the bits of `k + 1.5·2^23`.
#[inline(always)]
unsafe fn pow2(kf: Vn) -> Vn {
    each!(
        |i| _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
            _mm256_sub_epi32(
                _mm256_castps_si256(_mm256_add_ps(kf[i], splat(ROUND_MAGIC))),
                _mm256_set1_epi32(ROUND_MAGIC.to_bits() as i32),
            ),
            _mm256_set1_epi32(127),
        )))
    )
}

/// As `super::exp2m1_q`.
#[inline(always)]
unsafe fn exp2m1_q(r: Vn) -> Vn {
    let s = splat;
    let r2: Vn = each!(|i| _mm256_mul_ps(r[i], r[i]));
    let r4: Vn = each!(|i| _mm256_mul_ps(r2[i], r2[i]));
    let lo: Vn = each!(|i| fma(
        fma(s(C[3]), r[i], s(C[2])),
        r2[i],
        fma(s(C[1]), r[i], s(C[0]))
    ));
    let hi: Vn = each!(|i| fma(
        fma(s(C[7]), r[i], s(C[6])),
        r2[i],
        fma(s(C[5]), r[i], s(C[4]))
    ));
    each!(|i| fma(hi[i], r4[i], lo[i]))
}
