//! The kernel's three hot loops with AVX2 + FMA intrinsics: the toe/mid pass, the entropy
//! pivot's weighted sums and the median's mass profile. The baseline build runs the
//! generic bodies in the parent module; these replace their `Fused` instantiations.
//!
//! - The toe/mid pass computes, lane for lane, the same operations as
//!   `chunk::<T, Fused>` (through [`fastmath::v8`]), so its output is bit-identical to the
//!   generic code's (tested below, over walks of every input range and every shape).
//! - The two pivot passes compute the same weights `e = exp(x − m)` bit for bit, but add
//!   them in registers (one vector accumulator per sum, flushed to `f64` every block) where
//!   the generic code keeps per-position sums in memory; the sums agree to rounding.
//!
//! # Safety
//! Every function here requires AVX2 and FMA: the public ones are
//! `#[target_feature(enable = "avx2,fma")]` and reached only through `fast_path()`.

use std::arch::x86_64::*;

use super::{
    chunk, shoulder, ExpToe, Knee, LogToe, QuadraticToe, BLOCK, CHUNK, DEPTHS, LANES, MEDIAN_DEPTHS,
};
use crate::curve::ToeShape;
use crate::fastmath::{v8, Fused};
use v8::{each, splat, Vn};

/// Vectors computed together (the length of [`Vn`]).
const WAYS: usize = std::mem::size_of::<Vn>() / std::mem::size_of::<__m256>();

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

/// `t = x − m` and `e = exp(t)` for the pivot sums, two ways:
///
/// - `EXACT`: `t` where it lies in `[−87.3, 0]` (else 0), and `e` there (else 0): the same
///   weights as the generic `shifted` + `exp_neg`, whose `exp` is exactly 0 below −87.3
///   and which give non-finite entries no weight;
/// - otherwise `t` clamped below at −87.3 (a NaN becomes −87.3: `max` returns its second
///   operand when one is NaN), which leaves a far or −inf entry a weight of 1.2e-38
///   instead of 0, nothing beside the top's 1, with three operations fewer. `+inf` would
///   weigh `NaN`: `bad` flags it, and the caller redoes its pass the exact way.
#[inline(always)]
unsafe fn weight<const EXACT: bool>(xv: Vn, m: __m256, bad: &mut __m256) -> (Vn, Vn) {
    let t: Vn = each!(|i| _mm256_sub_ps(xv[i], m));
    if EXACT {
        let valid: Vn = each!(|i| _mm256_and_ps(
            _mm256_cmp_ps::<_CMP_LE_OQ>(t[i], splat(0.0)),
            _mm256_cmp_ps::<_CMP_GE_OQ>(t[i], splat(-87.3)),
        ));
        let t: Vn = each!(|i| _mm256_and_ps(t[i], valid[i]));
        let e = v8::exp_neg_in_range(t);
        (each!(|i| _mm256_and_ps(e[i], valid[i])), t)
    } else {
        let t: Vn = each!(|i| _mm256_max_ps(t[i], splat(-87.3)));
        *bad = _mm256_or_ps(
            *bad,
            _mm256_or_ps(
                _mm256_cmp_ps::<_CMP_GT_OQ>(t[0], splat(0.0)),
                _mm256_cmp_ps::<_CMP_GT_OQ>(t[1], splat(0.0)),
            ),
        );
        (v8::exp_neg_in_range(t), t)
    }
}

/// Eight entries from `x` at `i`, padded with NaN past its end: NaN has no weight, and no
/// floor keeps it (−inf would pass a floor of −inf).
#[inline(always)]
unsafe fn load_padded(x: &[f32], i: usize) -> __m256 {
    if i >= x.len() {
        splat(f32::NAN)
    } else if i + LANES <= x.len() {
        // SAFETY: in bounds, checked just above.
        _mm256_loadu_ps(x.as_ptr().add(i))
    } else {
        let mut pad = [f32::NAN; LANES];
        pad[..x.len() - i].copy_from_slice(&x[i..]);
        _mm256_loadu_ps(pad.as_ptr())
    }
}

/// The eight lanes of `v`, widened to `f64`, added onto `acc`.
#[inline(always)]
unsafe fn widen_add(acc: __m256d, v: __m256) -> __m256d {
    let lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    let hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v));
    _mm256_add_pd(acc, _mm256_add_pd(lo, hi))
}

#[inline(always)]
unsafe fn hsum(v: __m256d) -> f64 {
    let mut a = [0f64; 4];
    _mm256_storeu_pd(a.as_mut_ptr(), v);
    (a[0] + a[1]) + (a[2] + a[3])
}

/// `(Σ e, Σ e·t)` over the finite entries, `e = exp(t)`, `t = x − m`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn weighted_sums(x: &[f32], m: f32) -> (f64, f64) {
    match weighted_sums_with::<false>(x, m) {
        Some(sums) => sums,
        None => weighted_sums_with::<true>(x, m).expect("the exact weights flag nothing"),
    }
}

/// [`weighted_sums`] with the weights of `weight::<EXACT>`; `None` if they flag an entry.
#[inline(always)]
unsafe fn weighted_sums_with<const EXACT: bool>(x: &[f32], m: f32) -> Option<(f64, f64)> {
    let mv = splat(m);
    let mut bad = _mm256_setzero_ps();
    let (mut se, mut set) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    for block in x.chunks(BLOCK) {
        let (mut ae, mut aet) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for i in (0..block.len()).step_by(WAYS * LANES) {
            let (e, t) =
                weight::<EXACT>(each!(|j| load_padded(block, i + j * LANES)), mv, &mut bad);
            ae = _mm256_add_ps(ae, _mm256_add_ps(e[0], e[1]));
            aet = _mm256_fmadd_ps(e[1], t[1], _mm256_fmadd_ps(e[0], t[0], aet));
        }
        se = widen_add(se, ae);
        set = widen_add(set, aet);
    }
    (_mm256_movemask_ps(bad) == 0).then(|| (hsum(se), hsum(set)))
}

/// `Σ e` and, for each of `MEDIAN_DEPTHS`, `Σ e` over the entries with `t ≥ −depth`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn mass_profile(x: &[f32], m: f32) -> (f64, [f64; DEPTHS]) {
    match mass_profile_with::<false>(x, m) {
        Some(profile) => profile,
        None => mass_profile_with::<true>(x, m).expect("the exact weights flag nothing"),
    }
}

/// [`mass_profile`] with the weights of `weight::<EXACT>`; `None` if they flag an entry.
#[inline(always)]
unsafe fn mass_profile_with<const EXACT: bool>(x: &[f32], m: f32) -> Option<(f64, [f64; DEPTHS])> {
    let mv = splat(m);
    let thresholds = MEDIAN_DEPTHS.map(|d| splat(-d));
    let mut bad = _mm256_setzero_ps();
    let mut total = _mm256_setzero_pd();
    let mut within = [_mm256_setzero_pd(); DEPTHS];
    for block in x.chunks(BLOCK) {
        let mut bt = _mm256_setzero_ps();
        let mut bw = [_mm256_setzero_ps(); DEPTHS];
        for i in (0..block.len()).step_by(WAYS * LANES) {
            let (e, t) =
                weight::<EXACT>(each!(|j| load_padded(block, i + j * LANES)), mv, &mut bad);
            bt = _mm256_add_ps(bt, _mm256_add_ps(e[0], e[1]));
            for (w, th) in bw.iter_mut().zip(&thresholds) {
                let a = _mm256_and_ps(e[0], _mm256_cmp_ps::<_CMP_GE_OQ>(t[0], *th));
                let b = _mm256_and_ps(e[1], _mm256_cmp_ps::<_CMP_GE_OQ>(t[1], *th));
                *w = _mm256_add_ps(*w, _mm256_add_ps(a, b));
            }
        }
        total = widen_add(total, bt);
        for (w, b) in within.iter_mut().zip(bw) {
            *w = widen_add(*w, b);
        }
    }
    (_mm256_movemask_ps(bad) == 0).then(|| (hsum(total), within.map(|w| hsum(w))))
}

/// For each mask of eight lanes, the indices of its set lanes in order (then zeros).
static KEEP_INDEX: [[u32; LANES]; 256] = {
    let mut t = [[0u32; LANES]; 256];
    let mut mask = 0;
    while mask < 256 {
        let (mut i, mut n) = (0, 0);
        while i < LANES {
            if mask >> i & 1 == 1 {
                t[mask][n] = i as u32;
                n += 1;
            }
            i += 1;
        }
        mask += 1;
    }
    t
};

/// For each mask of eight lanes, how many are set (`popcnt` is not among the features
/// this module may assume).
static KEEP_COUNT: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut mask = 0;
    while mask < 256 {
        t[mask] = (mask as u32).count_ones() as u8;
        mask += 1;
    }
    t
};

/// Writes the lanes of `xv` in `[floor, +inf)` to `dst + n` onwards, in order (eight
/// lanes are stored: `dst` needs room for eight past the last kept entry); returns the
/// new count. Branch-free: one permutation by a table of lane indices.
#[inline(always)]
unsafe fn keep(xv: __m256, floor: __m256, dst: *mut f32, n: usize) -> usize {
    let keep = _mm256_and_ps(
        _mm256_cmp_ps::<_CMP_GE_OQ>(xv, floor),
        _mm256_cmp_ps::<_CMP_LT_OQ>(xv, splat(f32::INFINITY)),
    );
    let mask = _mm256_movemask_ps(keep) as usize & 0xff;
    let idx = _mm256_loadu_si256(KEEP_INDEX[mask].as_ptr().cast());
    _mm256_storeu_ps(dst.add(n), _mm256_permutevar8x32_ps(xv, idx));
    n + KEEP_COUNT[mask] as usize
}

/// The finite entries `≥ floor`, in order.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn compact(x: &[f32], floor: f32) -> Vec<f32> {
    let fv = splat(floor);
    let mut out: Vec<f32> = Vec::with_capacity(x.len() + LANES);
    let dst = out.as_mut_ptr();
    let mut n = 0;
    for i in (0..x.len()).step_by(LANES) {
        n = keep(load_padded(x, i), fv, dst, n);
    }
    // SAFETY: `keep` wrote the first `n` (at most `x.len()`) slots; it never stores past
    // `n + 8 ≤ x.len() + 8`, the capacity.
    out.set_len(n);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curve::HlgCurve;
    use crate::fastmath;

    fn have_avx2() -> bool {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }

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
        lo: f32,
        hi: f32,
        stride: u32,
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

    /// `n` logits uniform in [−30, 10), from a xorshift stream seeded with `seed`.
    fn uniform_logits(n: usize, mut seed: u64) -> Vec<f32> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                ((seed >> 40) as f32 / (1u64 << 24) as f32) * 40.0 - 30.0
            })
            .collect()
    }

    fn assert_same_bits(name: &str, xs: &[f32], got: &[f32], want: &[f32]) {
        for ((x, g), w) in xs.iter().zip(got).zip(want) {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "{name}({x}): {g} vs {w}"
            );
        }
    }

    /// The vector functions against the scalar `Fused` ones, bit for bit: every 127th
    /// f32 of their domains (every one with `HLG_EXHAUSTIVE=1`), every one near the
    /// log's binade edges (`1 + v = √2·2^k`) and clamp and the exp's overflow, negative
    /// inputs (lanes the kernel discards), and the special values.
    #[test]
    fn v8_functions_match_the_scalar_ones_bit_for_bit() {
        if !have_avx2() {
            eprintln!("no AVX2 + FMA on this CPU: nothing to compare");
            return;
        }
        #[target_feature(enable = "fma")]
        fn log1p_toe(v: f32) -> f32 {
            fastmath::log1p_toe::<Fused>(v)
        }
        #[target_feature(enable = "fma")]
        fn exp2m1_pos(v: f32) -> f32 {
            fastmath::exp2m1_pos::<Fused>(v)
        }
        #[target_feature(enable = "fma")]
        fn exp_neg(v: f32) -> f32 {
            fastmath::exp_neg::<Fused>(v)
        }
        // SAFETY (all three): the CPU has FMA, checked above.
        type Scalar = fn(f32) -> f32;
        let (l, em, en): (Scalar, Scalar, Scalar) = (
            |v| unsafe { log1p_toe(v) },
            |v| unsafe { exp2m1_pos(v) },
            |v| unsafe { exp_neg(v) },
        );
        let stride = if std::env::var_os("HLG_EXHAUSTIVE").is_some() {
            1
        } else {
            127
        };
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
                compare("log1p_toe", lo, hi, st, |v| v8::log1p_toe(v), l);
            }
            compare("log1p_toe", f32::NAN, f32::NAN, 1, |v| v8::log1p_toe(v), l);
            for (lo, hi, st) in [
                (0.0, f32::INFINITY, stride),
                (127.9, 128.1, 1),
                (0.99, 1.01, 1),
                (63.99, 64.01, 1),
            ] {
                compare("exp2m1_pos", lo, hi, st, |v| v8::exp2m1_pos(v), em);
            }
            for (lo, hi, st) in [(-0.0, f32::NEG_INFINITY, stride), (-87.2, -87.4, 1)] {
                compare(
                    "exp_neg",
                    lo,
                    hi,
                    st,
                    |v| [v8::exp_neg(v[0]), v8::exp_neg(v[1])],
                    en,
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
                    let curve =
                        HlgCurve::new(crate::curve::Pivot::Top { offset: 0.0 }, w, bh, bt, shape)
                            .unwrap();
                    let knee = Knee::new(c, &curve);
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

    /// The table-driven compaction against the generic one: the same entries in the same
    /// order, for floors that keep none, some and all, with non-finite entries and
    /// lengths that end in a partial group.
    #[test]
    fn compact_matches_the_generic_code() {
        if !have_avx2() {
            eprintln!("no AVX2 + FMA on this CPU: nothing to compare");
            return;
        }
        let mut x = uniform_logits(10_007, 0x0bad_cafe_1234_5678);
        for (i, v) in [
            (3, f32::NEG_INFINITY),
            (4, f32::NAN),
            (5, f32::INFINITY),
            (9_999, f32::INFINITY),
            (10_006, 9.5),
        ] {
            x[i] = v;
        }
        for len in [0, 1, 7, 8, 9, 63, 1000, 10_007] {
            for floor in [
                f32::NEG_INFINITY,
                -30.0,
                -3.0,
                9.0,
                9.5,
                10.0,
                f32::INFINITY,
            ] {
                let got = unsafe { compact(&x[..len], floor) };
                let want = super::super::compact_body::<fastmath::Plain>(&x[..len], floor);
                assert_eq!(got.len(), want.len(), "len {len} floor {floor}");
                assert_same_bits(&format!("len {len} floor {floor}"), &want, &got, &want);
            }
        }
    }

    /// The register sums against the generic per-position sums (same weights, another
    /// order of addition): equal to rounding.
    #[test]
    fn pivot_sums_match_the_generic_code() {
        if !have_avx2() {
            eprintln!("no AVX2 + FMA on this CPU: nothing to compare");
            return;
        }
        let mut x = uniform_logits(100_003, 0x1234_5678_9abc_def1);
        x[17] = f32::NEG_INFINITY;
        x[18] = f32::NAN;
        x[20] = -200.0;
        // Without +inf the clamped weights serve; with it, the exact ones.
        for inf in [false, true] {
            if inf {
                x[19] = f32::INFINITY;
            }
            let m = super::super::finite_max(&x).unwrap();
            let (se, set) = unsafe { weighted_sums(&x, m) };
            let (ge, get) = super::super::weighted_sums_body::<fastmath::Plain>(&x, m);
            assert!((se - ge).abs() <= 1e-6 * ge, "{se} vs {ge}");
            assert!((set - get).abs() <= 1e-6 * get.abs(), "{set} vs {get}");
            let (tot, within) = unsafe { mass_profile(&x, m) };
            let (gtot, gwithin) = super::super::mass_profile_body::<fastmath::Plain>(&x, m);
            assert!((tot - gtot).abs() <= 1e-6 * gtot);
            for (a, b) in within.iter().zip(gwithin) {
                assert!((a - b).abs() <= 1e-6 * b.max(1e-30), "{a} vs {b}");
            }
            assert_eq!(unsafe { weighted_sums_with::<false>(&x, m) }.is_none(), inf);
        }
    }
}
