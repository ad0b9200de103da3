//! The pivot's passes: the finite max, the entropy pivot's weighted sums, and the mass
//! median (a profile pass, then a weighted selection over the few candidates).

use super::{LANES, WAYS};
use crate::fastmath::{self, Madd, Plain};

#[cfg(target_arch = "x86_64")]
mod avx2;

/// Entries per block of the weighted sums (per-position running sums in memory).
const BLOCK: usize = 512;

dispatch! {
    /// The largest finite entry, `None` when there is none.
    fn finite_max(x: &[f32]) -> Option<f32> = finite_max_body;
}

#[inline(always)]
fn finite_max_body<M: Madd>(x: &[f32]) -> Option<f32> {
    // Four independent vectors of lanes: one accumulator would chain every compare
    // and select through a single register.
    const N: usize = 4 * LANES;
    let mut acc = [f32::NEG_INFINITY; N];
    let (chunks, rest) = x.as_chunks::<N>();
    for ch in chunks {
        for j in 0..N {
            let v = ch[j];
            // NaN fails both tests; +inf fails the second.
            acc[j] = if (v > acc[j]) & (v < f32::INFINITY) {
                v
            } else {
                acc[j]
            };
        }
    }
    let mut m = f32::NEG_INFINITY;
    for &v in acc.iter().chain(rest) {
        if v > m && v < f32::INFINITY {
            m = v;
        }
    }
    (m > f32::NEG_INFINITY).then_some(m)
}

/// `t = x − m` for a finite entry (`t ≤ 0`), and a sentinel that weighs 0 otherwise.
#[inline(always)]
fn shifted(v: f32, m: f32) -> f32 {
    let t = v - m;
    if (t > f32::NEG_INFINITY) & (t <= 0.0) {
        t
    } else {
        -100.0
    }
}

/// `t = x − m` and `e = exp(t)` for one block, as an element-wise map (which LLVM
/// vectorises; the sums over the buffers below are simple lane-wise adds).
#[inline(always)]
fn weights<M: Madd>(block: &[f32], m: f32, e: &mut [f32; BLOCK], t: &mut [f32; BLOCK]) {
    for ((&v, e), t) in block.iter().zip(e.iter_mut()).zip(t.iter_mut()) {
        *t = shifted(v, m);
        *e = fastmath::exp_neg::<M>(*t);
    }
    // A short last block: the rest weighs nothing.
    e[block.len()..].fill(0.0);
    t[block.len()..].fill(0.0);
}

/// `e` where `t ≥ −depth`, else +0.0, as a bit mask (a select here is not vectorised).
#[inline(always)]
fn masked(e: f32, t: f32, neg_depth: f32) -> f32 {
    f32::from_bits(e.to_bits() & 0u32.wrapping_sub((t >= neg_depth) as u32))
}

/// The sum of a block by pairwise halving: each level is an element-wise add of one
/// half onto the other, which vectorises with no chain of dependent adds (an ordered
/// running sum would not vectorise at all, float addition not being associative).
/// Consumes the buffer.
#[inline(always)]
fn tree_sum(buf: &mut [f32; BLOCK]) -> f64 {
    let mut len = BLOCK;
    while len > LANES {
        len /= 2;
        let (a, b) = buf.split_at_mut(len);
        for (x, &y) in a.iter_mut().zip(&b[..len]) {
            *x += y;
        }
    }
    buf[..LANES].iter().map(|&v| v as f64).sum()
}

/// The weighted sums of one vector: `Σ e`, `Σ e·t` and `Σ e·t²`, with `e = exp(t)` and
/// `t = x − m` over the finite entries. Under `p = e / Σ e`, `Σ p·x = m + Σe·t / Σe` (the
/// entropy pivot) and `Var_p(x) = Σe·t²/Σe − (Σe·t/Σe)²` (the spread of the auto mode).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Moments {
    pub(crate) e: f64,
    pub(crate) et: f64,
    pub(crate) ett: f64,
}

impl Moments {
    /// The centre of mass `Σ p·x`, for the vector's max `m`.
    pub(crate) fn center(&self, m: f32) -> f32 {
        m + (self.et / self.e) as f32
    }

    /// σ, the standard deviation of the logits (equally, of the log-probabilities) under
    /// the distribution itself, from the sums over a vector of `len` entries; 0 for one
    /// finite entry or equal ones, never NaN.
    ///
    /// The fast path's clamped weights leave far and masked entries 1.2e-38 each, which
    /// adds up to [`CLAMPED_VARIANCE`] per entry (relative to `Σe ≥ 1`) to σ² where the
    /// exact σ is 0: a variance at or below that resolution reads as 0, so σ = 0 (and the
    /// identity curve it gives) is exact on either path. Above it, a spread of at least
    /// ~1e-14 nats at V = 262,144, the two agree to rounding.
    pub(crate) fn spread(&self, len: usize) -> f32 {
        let mean = self.et / self.e;
        let var = self.ett / self.e - mean * mean;
        // Rounding can leave a tiny negative variance; a NaN (no finite entry) is 0 too.
        // The fast path also weighs the NaN padding of its last group of vectors.
        let weighed = len.next_multiple_of(WAYS * LANES);
        if var > CLAMPED_VARIANCE * weighed as f64 / self.e {
            var.sqrt() as f32
        } else {
            0.0
        }
    }
}

/// What a clamped weight (`exp(−87.3) ≈ 1.2e-38`, at `t = −87.3`) can add to `Σe·t²`:
/// `1.2e-38 · 87.3² ≈ 9.2e-35`, rounded up.
pub(crate) const CLAMPED_VARIANCE: f64 = 1e-34;

dispatch! {
    /// [`Moments`] over the finite entries, non-finite and far (below −87.3) ones weighing
    /// nothing; blocks of f32 lanes summed into f64. The fast path gives far and masked
    /// entries a weight of 1.2e-38 instead (three operations fewer per vector):
    /// [`Moments::spread`] reads what that adds to σ as 0.
    fn moments(x: &[f32], m: f32) -> Moments = avx2::moments | moments_body;
}

#[inline(always)]
fn moments_body<M: Madd>(x: &[f32], m: f32) -> Moments {
    // One running sum per position in a block (a vector of them in each register):
    // an element-wise update that vectorises, where one ordered running sum would not
    // (float addition is not associative). The 512 sums are added pairwise at the end.
    let (mut ae, mut aet, mut aett) = ([0f32; BLOCK], [0f32; BLOCK], [0f32; BLOCK]);
    for block in x.chunks(BLOCK) {
        for (((&v, se), set), sett) in block
            .iter()
            .zip(ae.iter_mut())
            .zip(aet.iter_mut())
            .zip(aett.iter_mut())
        {
            let t = shifted(v, m);
            let e = fastmath::exp_neg::<M>(t);
            *se += e;
            let et = e * t;
            *set += et;
            *sett = M::madd(et, t, *sett);
        }
    }
    Moments {
        e: tree_sum(&mut ae),
        et: tree_sum(&mut aet),
        ett: tree_sum(&mut aett),
    }
}

/// Thresholds (nats below the top) at which the median search collects candidates;
/// the last catches everything finite. The profile pass sums the mass within each;
/// among the candidates, the finer depth beside each (`MEDIAN_FINE`) may narrow them.
const MEDIAN_DEPTHS: [f32; DEPTHS] = [3.0, 9.0, 18.0];
const MEDIAN_FINE: [f32; DEPTHS] = [1.0, 6.0, 12.0];
const DEPTHS: usize = 3;

dispatch! {
    /// `Σ e` and, for each of `MEDIAN_DEPTHS`, the mass of the entries within it.
    fn mass_profile(x: &[f32], m: f32) -> (f64, [f64; DEPTHS]) = avx2::mass_profile | mass_profile_body;
}

#[inline(always)]
fn mass_profile_body<M: Madd>(x: &[f32], m: f32) -> (f64, [f64; DEPTHS]) {
    let mut total = 0f64;
    let mut within = [0f64; DEPTHS];
    let (mut e, mut t, mut tmp) = ([0f32; BLOCK], [0f32; BLOCK], [0f32; BLOCK]);
    let neg_depths = MEDIAN_DEPTHS.map(|d| -d);
    for block in x.chunks(BLOCK) {
        weights::<M>(block, m, &mut e, &mut t);
        // Each masked sum pairwise (the compiler does not keep seven running vector
        // sums on its own: it would have to reorder float additions).
        for (w, &nd) in within.iter_mut().zip(&neg_depths) {
            for ((p, &e), &t) in tmp.iter_mut().zip(&e).zip(&t) {
                *p = masked(e, t, nd);
            }
            *w += tree_sum(&mut tmp);
        }
        total += tree_sum(&mut e);
    }
    (total, within)
}

/// The mass median: the largest finite `v` with `mass(x ≥ v) ≥ ½`.
///
/// One pass finds the total mass and how much of it lies within 3, 9 and 18 nats of
/// the top; the shallowest depth holding half the mass bounds the candidates, which are
/// collected, narrowed to the finer depth beside it (1, 6 or 12 nats) when that holds
/// half the mass too, and searched by a weighted quickselect (expected linear time).
/// Three masses in the pass over the whole vector, not six: each costs as much as the
/// exponential; the finer ones are summed over the few candidates.
pub(crate) fn mass_median(x: &[f32], m: f32) -> f32 {
    let (total, within) = mass_profile(x, m);
    let half = 0.5 * total;
    let depth = within.iter().position(|&mass| mass >= half);
    let floor = depth.map_or(f32::NEG_INFINITY, |j| m - MEDIAN_DEPTHS[j]);
    let mut cand = compact(x, floor);
    if cand.is_empty() {
        // Only when `m − depth` rounds above `m`'s neighbours; the top itself holds.
        return m;
    }
    let mut wts: Vec<f32> = cand
        .iter()
        .map(|&v| fastmath::exp_neg::<Plain>(v - m))
        .collect();
    if let Some(j) = depth {
        let fine = m - MEDIAN_FINE[j];
        let fine_mass: f64 = cand
            .iter()
            .zip(&wts)
            .filter(|(&v, _)| v >= fine)
            .map(|(_, &w)| w as f64)
            .sum();
        if fine_mass >= half {
            // In place, in order: both vectors keep the entries at or above `fine`.
            let mut n = 0;
            for i in 0..cand.len() {
                if cand[i] >= fine {
                    (cand[n], wts[n]) = (cand[i], wts[i]);
                    n += 1;
                }
            }
            cand.truncate(n);
            wts.truncate(n);
        }
    }
    weighted_select(&mut cand, &mut wts, half)
}

dispatch! {
    /// The finite entries `≥ floor`, in order.
    fn compact(x: &[f32], floor: f32) -> Vec<f32> = avx2::compact | compact_body;
}

#[inline(always)]
fn compact_body<M: Madd>(x: &[f32], floor: f32) -> Vec<f32> {
    let keep = |v: f32| (v >= floor) & (v < f32::INFINITY);
    // Room for every entry; only the pages actually written are touched.
    let mut out: Vec<f32> = Vec::with_capacity(x.len());
    let spare = out.spare_capacity_mut();
    let mut n = 0usize;
    let (chunks, rest) = x.as_chunks::<LANES>();
    for ch in chunks {
        let mut any = false;
        for &v in ch {
            any |= keep(v);
        }
        if any {
            // Branch-free within the group: write every entry at the end, advance
            // past the ones kept.
            for &v in ch {
                spare[n].write(v);
                n += keep(v) as usize;
            }
        }
    }
    for &v in rest {
        spare[n].write(v);
        n += keep(v) as usize;
    }
    // SAFETY: the first `n` slots were written above. A slot is written only while
    // `n` counts the entries kept before it, so `n < x.len()` at every write.
    unsafe { out.set_len(n) };
    out
}

/// Largest `v` in `cand` with `Σ{w : cand ≥ v} ≥ target` (weights alongside).
fn weighted_select(cand: &mut [f32], wts: &mut [f32], mut target: f64) -> f32 {
    let (mut lo, mut hi) = (0usize, cand.len());
    // A fixed xorshift stream: pivots independent of the data's order.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    loop {
        let (part, pw) = (&mut cand[lo..hi], &mut wts[lo..hi]);
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let p = part[(state % part.len() as u64) as usize];
        // Three-way partition: [greater | equal | less].
        let (mut gt, mut i, mut lt) = (0usize, 0usize, part.len());
        let (mut mg, mut me) = (0f64, 0f64);
        while i < lt {
            let v = part[i];
            if v > p {
                mg += pw[i] as f64;
                part.swap(gt, i);
                pw.swap(gt, i);
                gt += 1;
                i += 1;
            } else if v < p {
                lt -= 1;
                part.swap(i, lt);
                pw.swap(i, lt);
            } else {
                me += pw[i] as f64;
                i += 1;
            }
        }
        if mg >= target && gt > 0 {
            hi = lo + gt;
        } else if mg + me >= target || lt == part.len() {
            // Found, or nothing below `p` is left (rounding in the masses).
            return p;
        } else {
            target -= mg + me;
            lo += lt;
        }
    }
}
