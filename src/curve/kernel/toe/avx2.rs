//! The toe/mid pass with AVX2 + FMA intrinsics, replacing the generic body's `Fused`
//! instantiation. It computes, lane for lane, the same operations as `chunk::<T, Fused>`
//! (through [`fastmath::v8`](crate::fastmath::v8)), so its output is bit-identical to
//! the generic code's (tested below, over walks of every input range and every shape).
//!
//! # Safety
//! Every function here requires AVX2 and FMA: the public ones are
//! `#[target_feature(enable = "avx2,fma")]` and reached only through `fast_path()`.

use std::arch::x86_64::*;

use super::super::{LANES, WAYS};
use super::{chunk, shoulder, ExpToe, Knee, LogToe, QuadraticToe, CHUNK};
use crate::fastmath::{v8, Fused};
use crate::params::ToeShape;
use v8::{each, splat, Vn};

/// The knee's constants, one per lane.
struct KneeV {
    c: __m256,
    w: __m256,
    c_lo: __m256,
    thr_lo: __m256,
    thr_hi: __m256,
    bt: __m256,
    inv_bt: __m256,
    half_inv_bt: __m256,
    log2e_inv_bt: __m256,
}

impl KneeV {
    #[inline(always)]
    unsafe fn new(k: &Knee) -> Self {
        KneeV {
            c: splat(k.c),
            w: splat(k.w),
            c_lo: splat(k.c_lo),
            thr_lo: splat(k.thr_lo),
            thr_hi: splat(k.thr_hi),
            bt: splat(k.bt),
            inv_bt: splat(k.inv_bt),
            half_inv_bt: splat(k.half_inv_bt),
            log2e_inv_bt: splat(k.log2e_inv_bt),
        }
    }
}

/// The toe for two vectors of entries, as `Toe::toe::<Fused>` lane by lane (the caller
/// keeps it on the lanes below the lower knee).
trait ToeV: super::Toe {
    unsafe fn toe_v(d: Vn, k: &KneeV) -> Vn;
}

impl ToeV for LogToe {
    #[inline(always)]
    unsafe fn toe_v(d: Vn, k: &KneeV) -> Vn {
        let l = v8::log1p_toe(each!(|i| _mm256_mul_ps(d[i], k.inv_bt)));
        each!(|i| _mm256_fnmadd_ps(k.bt, l[i], k.c_lo))
    }
}

impl ToeV for QuadraticToe {
    #[inline(always)]
    unsafe fn toe_v(d: Vn, k: &KneeV) -> Vn {
        each!(|i| _mm256_sub_ps(
            k.c_lo,
            _mm256_fmadd_ps(_mm256_mul_ps(d[i], k.half_inv_bt), d[i], d[i])
        ))
    }
}

impl ToeV for ExpToe {
    #[inline(always)]
    unsafe fn toe_v(d: Vn, k: &KneeV) -> Vn {
        let e = v8::exp2m1_pos(each!(|i| _mm256_mul_ps(d[i], k.log2e_inv_bt)));
        each!(|i| _mm256_sub_ps(k.c_lo, _mm256_mul_ps(k.bt, e[i])))
    }
}

/// Applies the curve with pivot `c` (in `knee`) to `x` in place.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn transform(x: &mut [f32], knee: &Knee, shape: ToeShape) {
    match shape {
        ToeShape::Log => run::<LogToe>(x, knee),
        ToeShape::Quadratic => run::<QuadraticToe>(x, knee),
        ToeShape::Exp => run::<ExpToe>(x, knee),
    }
}

/// Toe and mid for every entry, sixteen at a time; then, for a 64-entry chunk with an entry
/// above the upper knee, the generic shoulder pass.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn run<T: ToeV>(x: &mut [f32], k: &Knee) {
    let kv = KneeV::new(k);
    let (chunks, rest) = x.as_chunks_mut::<CHUNK>();
    for xs in chunks {
        // In place: the toe/mid pass leaves the entries above the upper knee as they were,
        // so the shoulder pass finds its inputs there.
        let p = xs.as_mut_ptr();
        // The chunk's largest entry, NaN aside (`max(x, top)` keeps `top` for a NaN `x`):
        // `x − c` rounds monotonically, so it is above the upper knee exactly when some
        // entry's is.
        let mut top = splat(f32::NEG_INFINITY);
        for i in (0..CHUNK).step_by(WAYS * LANES) {
            // SAFETY: i + WAYS·8 ≤ CHUNK, the length of the chunk.
            let (o, xv) = toe_mid::<T>(p.add(i), &kv);
            for j in 0..WAYS {
                top = _mm256_max_ps(xv[j], top);
                _mm256_storeu_ps(p.add(i + j * LANES), o[j]);
            }
        }
        let hi = _mm256_cmp_ps::<_CMP_GT_OQ>(_mm256_sub_ps(top, kv.c), kv.thr_hi);
        if _mm256_movemask_ps(hi) != 0 {
            let orig = *xs;
            shoulder::<Fused>(xs, &orig, k);
        }
    }
    // The last partial chunk: the generic code, which computes the same per entry.
    let mut out = [0f32; CHUNK];
    let out = &mut out[..rest.len()];
    chunk::<T, Fused>(out, rest, k);
    rest.copy_from_slice(out);
}

/// As `toe_mid::<T, Fused>` for the two vectors at `p`: the new values, and the inputs.
#[inline(always)]
unsafe fn toe_mid<T: ToeV>(p: *const f32, k: &KneeV) -> (Vn, Vn) {
    let xv: Vn = each!(|i| load_opaque(p.add(i * LANES)));
    let z: Vn = each!(|i| _mm256_sub_ps(xv[i], k.c));
    // −z − w, as the scalar code rounds it.
    let d: Vn = each!(|i| _mm256_sub_ps(_mm256_xor_ps(z[i], splat(-0.0)), k.w));
    let toe = T::toe_v(d, k);
    // The input and its toe mask again, from memory, rather than kept through the toe in
    // registers (LLVM would spill them to the stack).
    let xv: Vn = each!(|i| load_again(p.add(i * LANES)));
    let lo: Vn = each!(|i| _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_sub_ps(xv[i], k.c), k.thr_lo));
    (each!(|i| _mm256_blendv_ps(xv[i], toe[i], lo[i])), xv)
}

/// As [`load_opaque`], but never merged with another load of the same address.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn load_again(p: *const f32) -> __m256 {
    let v: __m256;
    // SAFETY: the caller's pointer has eight readable f32s.
    std::arch::asm!("vmovups {v}, ymmword ptr [{p}]", v = out(ymm_reg) v, p = in(reg) p, options(readonly, nostack, preserves_flags));
    v
}

/// Eight entries at `p`, loaded by an `asm!` the compiler cannot see through. A blend of
/// a plain load with new values, stored back to the same address, is turned by LLVM into
/// a masked store (`vmaskmovps`), which is microcoded and many times slower on AMD cores.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn load_opaque(p: *const f32) -> __m256 {
    let v: __m256;
    // SAFETY: the caller's pointer has eight readable f32s.
    std::arch::asm!("vmovups {v}, ymmword ptr [{p}]", v = out(ymm_reg) v, p = in(reg) p, options(pure, readonly, nostack, preserves_flags));
    v
}

#[cfg(test)]
mod tests {
    use super::super::super::test_support::{assert_same_bits, have_avx2};
    use super::*;
    use crate::curve::{CurveParts, HlgCurve};
    use crate::fastmath;
    use crate::params::Span;

    #[target_feature(enable = "avx2,fma")]
    unsafe fn generic_fused(x: &mut [f32], k: &Knee, shape: ToeShape) {
        super::super::transform_body::<Fused>(x, k, shape)
    }

    /// Every `stride`-th f32 from `lo` up to `hi` (both positive).
    fn walk(lo: f32, hi: f32, stride: u32) -> Vec<f32> {
        (lo.to_bits()..=hi.to_bits())
            .step_by(stride as usize)
            .map(f32::from_bits)
            .collect()
    }

    /// `f8` (two vectors at a time, as the kernel runs it) against `f` on every
    /// `stride`-th f32 from `lo` to `hi` (same sign), bit for bit.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn compare(
        name: &str,
        (lo, hi, stride): (f32, f32, u32),
        f8: unsafe fn(Vn) -> Vn,
        f: fn(f32) -> f32,
    ) {
        let (a, b) = if lo.to_bits() <= hi.to_bits() {
            (lo.to_bits(), hi.to_bits())
        } else {
            (hi.to_bits(), lo.to_bits())
        };
        let mut bits = a;
        let mut xs = [0f32; 2 * LANES];
        loop {
            for x in xs.iter_mut() {
                *x = f32::from_bits(bits.min(b));
                bits = bits.saturating_add(stride);
            }
            let mut got = [0f32; 2 * LANES];
            let out = f8([
                _mm256_loadu_ps(xs.as_ptr()),
                _mm256_loadu_ps(xs.as_ptr().add(LANES)),
            ]);
            _mm256_storeu_ps(got.as_mut_ptr(), out[0]);
            _mm256_storeu_ps(got.as_mut_ptr().add(LANES), out[1]);
            for (x, g) in xs.iter().zip(got) {
                let w = f(*x);
                assert!(
                    g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                    "{name}({x}): {g} vs {w}"
                );
            }
            if bits > b {
                return;
            }
        }
    }

    /// The scalar `Fused` functions the vector ones must match.
    mod scalar {
        use super::*;
        #[target_feature(enable = "fma")]
        fn log1p_toe_fma(v: f32) -> f32 {
            fastmath::log1p_toe::<Fused>(v)
        }
        #[target_feature(enable = "fma")]
        fn exp2m1_pos_fma(v: f32) -> f32 {
            fastmath::exp2m1_pos::<Fused>(v)
        }
        #[target_feature(enable = "fma")]
        fn exp_neg_fma(v: f32) -> f32 {
            fastmath::exp_neg::<Fused>(v)
        }
        // SAFETY (all three): called only after `have_avx2()` (AVX2 and FMA) held.
        pub(super) fn log1p_toe(v: f32) -> f32 {
            unsafe { log1p_toe_fma(v) }
        }
        pub(super) fn exp2m1_pos(v: f32) -> f32 {
            unsafe { exp2m1_pos_fma(v) }
        }
        pub(super) fn exp_neg(v: f32) -> f32 {
            unsafe { exp_neg_fma(v) }
        }
    }

    /// Every 127th f32 of a domain, every one with `HLG_EXHAUSTIVE=1`.
    fn stride() -> u32 {
        if std::env::var_os("HLG_EXHAUSTIVE").is_some() {
            1
        } else {
            127
        }
    }

    /// The vector functions against the scalar `Fused` ones, bit for bit: every 127th
    /// f32 of their domains (see [`stride`]), every one near the log's binade edges
    /// (`1 + v = √2·2^k`) and clamp, negative inputs (lanes the kernel discards), and the
    /// special values.
    #[test]
    fn v8_log1p_toe_matches_the_scalar_one_bit_for_bit() {
        if !have_avx2() {
            eprintln!("no AVX2 + FMA on this CPU: nothing to compare");
            return;
        }
        let stride = stride();
        unsafe {
            // Every sign: the kernel evaluates the log on lanes it then discards, and the
            // scalar code must not differ there either (it would only in a NaN's payload).
            for (lo, hi, st) in [
                (0.0, f32::INFINITY, stride),
                (0.41, 0.42, 1),
                (0.99, 1.01, 1),
                (1.82, 1.84, 1),
                (0.0, 1e-30, 4099),
                (8.5e37, f32::MAX, 1),
                (-0.0, f32::NEG_INFINITY, stride * 7),
            ] {
                compare(
                    "log1p_toe",
                    (lo, hi, st),
                    |v| v8::log1p_toe(v),
                    scalar::log1p_toe,
                );
            }
            compare(
                "log1p_toe",
                (f32::NAN, f32::NAN, 1),
                |v| v8::log1p_toe(v),
                scalar::log1p_toe,
            );
        }
    }

    /// As above for the two exponentials, with every f32 near `exp2m1`'s overflow and
    /// `exp`'s underflow.
    #[test]
    fn v8_exponentials_match_the_scalar_ones_bit_for_bit() {
        if !have_avx2() {
            eprintln!("no AVX2 + FMA on this CPU: nothing to compare");
            return;
        }
        let stride = stride();
        unsafe {
            for (lo, hi, st) in [
                (0.0, f32::INFINITY, stride),
                (127.9, 128.1, 1),
                (0.99, 1.01, 1),
                (63.99, 64.01, 1),
            ] {
                compare(
                    "exp2m1_pos",
                    (lo, hi, st),
                    |v| v8::exp2m1_pos(v),
                    scalar::exp2m1_pos,
                );
            }
            for (lo, hi, st) in [(-0.0, f32::NEG_INFINITY, stride), (-87.2, -87.4, 1)] {
                compare(
                    "exp_neg",
                    (lo, hi, st),
                    |v| [v8::exp_neg(v[0]), v8::exp_neg(v[1])],
                    scalar::exp_neg,
                );
            }
        }
    }

    /// The whole toe/mid/shoulder pass against the generic `Fused` code, bit for bit:
    /// every shape, knees on and off, entries walked across the knees and far into the
    /// tail, with non-finite entries and a length that leaves a partial chunk.
    #[test]
    fn transform_matches_the_generic_code_bit_for_bit() {
        if !have_avx2() {
            eprintln!("no AVX2 + FMA on this CPU: nothing to compare");
            return;
        }
        let mut x: Vec<f32> = walk(1e-6, 3e38, 4099)
            .iter()
            .flat_map(|&v| [v, -v])
            .collect();
        x.extend([f32::NEG_INFINITY, f32::INFINITY, f32::NAN, 0.0, -0.0]);
        x.extend((0..2000).map(|i| (i as f32 - 1000.0) * 0.0137));
        x.push(0.5);
        for shape in ToeShape::ALL {
            for (w, bh, bt) in [
                (Some(4.0), Some(4.0), Some(6.0)),
                (Some(0.0), Some(0.05), Some(0.05)),
                (Some(2.5), None, Some(40.0)),
                (Some(1.0), Some(3.0), None),
                (None, Some(1.0), Some(1.0)),
            ] {
                for c in [0.0f32, 3.7, -12.5] {
                    let curve = HlgCurve::new(CurveParts {
                        pivot: crate::params::Pivot::Top,
                        pivot_offset: Span::Nats(0.0),
                        width: w.map(Span::Nats),
                        shoulder: bh,
                        toe: bt,
                        toe_shape: shape,
                    })
                    .unwrap();
                    let knee = Knee::new(c, w.unwrap_or(f32::INFINITY), &curve);
                    let (mut got, mut want) = (x.clone(), x.clone());
                    unsafe {
                        transform(&mut got, &knee, shape);
                        generic_fused(&mut want, &knee, shape);
                    }
                    assert_same_bits(
                        &format!("{shape:?} w={w:?} bh={bh:?} bt={bt:?} c={c}"),
                        &x,
                        &got,
                        &want,
                    );
                }
            }
        }
    }
}
