//! The curve's pass over a vector: toe and mid for every entry, the shoulder for the
//! chunks that reach it, one [`Toe`] per [`ToeShape`].

use crate::curve::HlgCurve;
use crate::fastmath::{self, Madd};
use crate::params::ToeShape;

#[cfg(target_arch = "x86_64")]
mod avx2;

/// Chunk for the shoulder check: a chunk is revisited only if it has a shoulder entry.
const CHUNK: usize = 64;

/// The curve's constants for one vector.
pub(crate) struct Knee {
    c: f32,
    w: f32,
    /// `c + w` and `c − w`: where the shoulder and the toe start, in raw logits.
    c_hi: f32,
    c_lo: f32,
    /// `z > thr_hi` selects the shoulder; `+inf` when the shoulder is off.
    thr_hi: f32,
    /// `z < thr_lo` selects the toe; `−inf` when the toe is off.
    thr_lo: f32,
    bh: f32,
    inv_bh: f32,
    bt: f32,
    inv_bt: f32,
    half_inv_bt: f32,
    /// `log₂e/β_t`: the exp toe's `exp(d/β)` is `2^(d·log₂e/β)`.
    log2e_inv_bt: f32,
}

impl Knee {
    /// The constants for pivot `c` and half-width `w` (nats; the curve's width resolved
    /// for this vector), with `curve`'s shoulder and toe.
    pub(crate) fn new(c: f32, w: f32, curve: &HlgCurve) -> Self {
        let bh = curve.p.shoulder.unwrap_or(1.0);
        let bt = curve.p.toe.unwrap_or(1.0);
        Knee {
            c,
            w,
            c_hi: c + w,
            c_lo: c - w,
            thr_hi: if curve.p.shoulder.is_some() {
                w
            } else {
                f32::INFINITY
            },
            thr_lo: if curve.p.toe.is_some() {
                -w
            } else {
                f32::NEG_INFINITY
            },
            bh,
            inv_bh: 1.0 / bh,
            bt,
            inv_bt: 1.0 / bt,
            half_inv_bt: 0.5 / bt,
            log2e_inv_bt: std::f32::consts::LOG2_E / bt,
        }
    }
}

/// The toe below `c − w`: `c − w − T(d)` for `d = −z − w > 0`, `T` the shape's drop,
/// monotone in `d`.
trait Toe {
    fn toe<M: Madd>(d: f32, k: &Knee) -> f32;
}
struct LogToe;
struct QuadraticToe;
struct ExpToe;

impl Toe for LogToe {
    /// With one rounding for `c − w − β·ln(…)` where there is an FMA (as many as
    /// before without): the log toe's subtraction is fused into its scale.
    #[inline(always)]
    fn toe<M: Madd>(d: f32, k: &Knee) -> f32 {
        M::madd(-k.bt, fastmath::log1p_toe::<M>(d * k.inv_bt), k.c_lo)
    }
}
impl Toe for QuadraticToe {
    #[inline(always)]
    fn toe<M: Madd>(d: f32, k: &Knee) -> f32 {
        k.c_lo - M::madd(d * k.half_inv_bt, d, d)
    }
}
impl Toe for ExpToe {
    #[inline(always)]
    fn toe<M: Madd>(d: f32, k: &Knee) -> f32 {
        k.c_lo - k.bt * fastmath::exp2m1_pos::<M>(d * k.log2e_inv_bt)
    }
}

dispatch! {
    /// Applies the curve with pivot `c` (in `knee`) to `x` in place.
    fn transform(x: &mut [f32], knee: &Knee, shape: ToeShape) -> () = avx2::transform | transform_body;
}

#[inline(always)]
fn transform_body<M: Madd>(x: &mut [f32], knee: &Knee, shape: ToeShape) {
    match shape {
        ToeShape::Log => run::<LogToe, M>(x, knee),
        ToeShape::Quadratic => run::<QuadraticToe, M>(x, knee),
        ToeShape::Exp => run::<ExpToe, M>(x, knee),
    }
}

/// Toe and mid for every entry, branch-free; then the shoulder for the few 64-entry
/// chunks that have an entry above the upper knee.
///
/// Each chunk is computed into a local array and written back whole: selecting
/// between the new and the old value in place lets LLVM emit masked stores
/// (`vmaskmovps`), which are microcoded and many times slower on AMD cores. The
/// fixed-size copy back is a few register moves, not a `memcpy` call.
#[inline(always)]
fn run<T: Toe, M: Madd>(x: &mut [f32], k: &Knee) {
    let (chunks, rest) = x.as_chunks_mut::<CHUNK>();
    for xs in chunks {
        let mut out = [0f32; CHUNK];
        chunk::<T, M>(&mut out, xs, k);
        *xs = out;
    }
    let mut out = [0f32; CHUNK];
    let out = &mut out[..rest.len()];
    chunk::<T, M>(out, rest, k);
    rest.copy_from_slice(out);
}

#[inline(always)]
fn chunk<T: Toe, M: Madd>(out: &mut [f32], xs: &[f32], k: &Knee) {
    let mut any_hi = 0u32;
    for (o, &xv) in out.iter_mut().zip(xs) {
        any_hi |= toe_mid::<T, M>(o, xv, k);
    }
    if any_hi != 0 {
        shoulder::<M>(out, xs, k);
    }
}

/// The toe or the identity for one entry; returns 1 when it lies above the upper knee.
#[inline(always)]
fn toe_mid<T: Toe, M: Madd>(o: &mut f32, xv: f32, k: &Knee) -> u32 {
    let z = xv - k.c;
    // z = −inf (an input −inf, or x − c overflowing) takes the toe, whose drop is
    // +inf there for every shape: −inf comes out.
    let lo = z < k.thr_lo;
    // Only a flag for the shoulder pass, which tests each entry itself.
    let hi = z > k.thr_hi;
    let d = -z - k.w;
    let toe = T::toe::<M>(d, k);
    *o = if lo { toe } else { xv };
    hi as u32
}

/// The shoulder over one chunk: `out` holds the toe pass, `x` the input.
#[inline(always)]
fn shoulder<M: Madd>(out: &mut [f32], x: &[f32], k: &Knee) {
    for (o, &xv) in out.iter_mut().zip(x) {
        let z = xv - k.c;
        let hi = (z > k.thr_hi) & (z < f32::INFINITY);
        let u = z - k.w;
        let sh = M::madd(k.bh, fastmath::log1p::<M>(u * k.inv_bh), k.c_hi);
        *o = if hi { sh } else { *o };
    }
}
