//! The pivot's two passes over the whole vector with AVX2 + FMA intrinsics: the weighted
//! sums (the entropy pivot, the auto mode's spread) and the median's mass profile, plus
//! the median's compaction.
//! They compute the same weights `e = exp(x − m)` as the generic bodies bit for bit, but
//! add them in registers (one vector accumulator per sum, flushed to `f64` every block)
//! where the generic code keeps per-position sums in memory; the sums agree to rounding.
//!
//! # Safety
//! Every function here requires AVX2 and FMA: the public ones are
//! `#[target_feature(enable = "avx2,fma")]` and reached only through `fast_path()`.

use std::arch::x86_64::*;

use super::super::{LANES, WAYS};
use super::{Moments, BLOCK, DEPTHS, MEDIAN_DEPTHS};
use crate::fastmath::v8;
use v8::{each, splat, Vn};

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

/// Walks `x` a group of `WAYS` vectors at a time: `step` on each group, `end` after each
/// block of [`BLOCK`] entries (the caller flushes its f32 sums into f64 there), both on
/// the caller's `state`. The last, short group is padded with NaN, which has no weight and
/// which no floor keeps (−inf would pass a floor of −inf), and it is built after the loop:
/// a padding copy inside the loop (a call to `memcpy`) made LLVM keep the loop's sums on
/// the stack across every iteration, through stores and reloads that took a third of the
/// pass (perf annotate).
#[inline(always)]
unsafe fn walk<S>(x: &[f32], state: &mut S, step: impl Fn(&mut S, Vn), end: impl Fn(&mut S)) {
    const GROUP: usize = WAYS * LANES;
    const _: () = assert!(BLOCK.is_multiple_of(GROUP));
    let (body, tail) = x.split_at(x.len() - x.len() % GROUP);
    for block in body.chunks(BLOCK) {
        for g in block.chunks_exact(GROUP) {
            // SAFETY: `g` holds GROUP entries.
            step(state, each!(|j| _mm256_loadu_ps(g.as_ptr().add(j * LANES))));
        }
        end(state);
    }
    if !tail.is_empty() {
        let mut pad = [f32::NAN; GROUP];
        for (p, &v) in pad.iter_mut().zip(tail) {
            *p = v;
        }
        step(
            state,
            each!(|j| _mm256_loadu_ps(pad.as_ptr().add(j * LANES))),
        );
        end(state);
    }
}

/// Eight entries from `x` at `i`, padded with NaN past its end (see [`walk`]); for the
/// last vector only, outside any loop.
#[inline(always)]
unsafe fn load_padded(x: &[f32], i: usize) -> __m256 {
    if i + LANES <= x.len() {
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

/// `Σ e`, `Σ e·t` and `Σ e·t²` over the finite entries, `e = exp(t)`, `t = x − m`, with
/// the clamped weights where they serve: far and masked entries weigh 1.2e-38 each, which
/// moves the entropy pivot by nothing and σ² by at most [`super::CLAMPED_VARIANCE`] per
/// entry (read as 0 by [`Moments::spread`](super::Moments::spread)). A `+inf` entry,
/// which the clamped weights cannot take, sends the pass round again with the exact ones.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn moments(x: &[f32], m: f32) -> Moments {
    match moments_with::<false>(x, m) {
        Some(sums) => sums,
        None => moments_with::<true>(x, m).expect("the exact weights flag nothing"),
    }
}

/// [`moments`] with the weights of `weight::<EXACT>`; `None` if they flag an entry.
#[inline(always)]
unsafe fn moments_with<const EXACT: bool>(x: &[f32], m: f32) -> Option<Moments> {
    let mv = splat(m);
    // The flag, then per block Σe, Σe·t, Σe·t² in f32 lanes, and over the vector the same
    // in f64.
    let mut st = (
        _mm256_setzero_ps(),
        [_mm256_setzero_ps(); 3],
        [_mm256_setzero_pd(); 3],
    );
    walk(
        x,
        &mut st,
        |(bad, b, _), xv| {
            let (e, t) = weight::<EXACT>(xv, mv, bad);
            b[0] = _mm256_add_ps(b[0], _mm256_add_ps(e[0], e[1]));
            // One add per sum on the chain through the loop (two FMAs would be two).
            let et: Vn = each!(|j| _mm256_mul_ps(e[j], t[j]));
            b[1] = _mm256_add_ps(b[1], _mm256_add_ps(et[0], et[1]));
            let ett = _mm256_fmadd_ps(et[1], t[1], _mm256_mul_ps(et[0], t[0]));
            b[2] = _mm256_add_ps(b[2], ett);
        },
        |(_, b, sums)| {
            for (s, b) in sums.iter_mut().zip(b) {
                *s = widen_add(*s, *b);
                *b = _mm256_setzero_ps();
            }
        },
    );
    let (bad, _, sums) = st;
    (_mm256_movemask_ps(bad) == 0).then(|| Moments {
        e: hsum(sums[0]),
        et: hsum(sums[1]),
        ett: hsum(sums[2]),
    })
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
    // The flag, then per block the total and the masses within each depth in f32 lanes,
    // and over the vector the same in f64.
    let mut st = (
        _mm256_setzero_ps(),
        [_mm256_setzero_ps(); 1 + DEPTHS],
        [_mm256_setzero_pd(); 1 + DEPTHS],
    );
    walk(
        x,
        &mut st,
        |(bad, b, _), xv| {
            let (e, t) = weight::<EXACT>(xv, mv, bad);
            b[0] = _mm256_add_ps(b[0], _mm256_add_ps(e[0], e[1]));
            for (w, th) in b[1..].iter_mut().zip(&thresholds) {
                let lo = _mm256_and_ps(e[0], _mm256_cmp_ps::<_CMP_GE_OQ>(t[0], *th));
                let hi = _mm256_and_ps(e[1], _mm256_cmp_ps::<_CMP_GE_OQ>(t[1], *th));
                *w = _mm256_add_ps(*w, _mm256_add_ps(lo, hi));
            }
        },
        |(_, b, sums)| {
            for (s, b) in sums.iter_mut().zip(b) {
                *s = widen_add(*s, *b);
                *b = _mm256_setzero_ps();
            }
        },
    );
    let (bad, _, sums) = st;
    (_mm256_movemask_ps(bad) == 0)
        .then(|| (hsum(sums[0]), std::array::from_fn(|d| hsum(sums[1 + d]))))
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
    let body = x.len() - x.len() % LANES;
    for i in (0..body).step_by(LANES) {
        // SAFETY: `i + LANES ≤ body ≤ x.len()`.
        n = keep(_mm256_loadu_ps(x.as_ptr().add(i)), fv, dst, n);
    }
    if body < x.len() {
        n = keep(load_padded(x, body), fv, dst, n);
    }
    // SAFETY: `keep` wrote the first `n` (at most `x.len()`) slots; it never stores past
    // `n + 8 ≤ x.len() + 8`, the capacity.
    out.set_len(n);
    out
}

#[cfg(test)]
mod tests {
    use super::super::super::test_support::{assert_same_bits, have_avx2};
    use super::*;
    use crate::fastmath;

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
            let want = super::super::moments_body::<fastmath::Plain>(&x, m);
            let exact = unsafe { moments_with::<true>(&x, m) }.unwrap();
            assert!(
                (exact.ett - want.ett).abs() <= 1e-6 * want.ett,
                "{exact:?} vs {want:?}"
            );
            let got = unsafe { moments(&x, m) };
            assert!(
                (got.e - want.e).abs() <= 1e-6 * want.e,
                "{got:?} vs {want:?}"
            );
            assert!(
                (got.et - want.et).abs() <= 1e-6 * want.et.abs(),
                "{got:?} vs {want:?}"
            );
            assert!(
                (got.ett - want.ett).abs() <= 1e-6 * want.ett,
                "{got:?} vs {want:?}"
            );
            let (tot, within) = unsafe { mass_profile(&x, m) };
            let (gtot, gwithin) = super::super::mass_profile_body::<fastmath::Plain>(&x, m);
            assert!((tot - gtot).abs() <= 1e-6 * gtot);
            for (a, b) in within.iter().zip(gwithin) {
                assert!((a - b).abs() <= 1e-6 * b.max(1e-30), "{a} vs {b}");
            }
            assert_eq!(unsafe { moments_with::<false>(&x, m) }.is_none(), inf);
        }
    }
}
