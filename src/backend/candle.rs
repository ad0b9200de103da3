//! The HLG transform as candle tensor ops, on any candle device.
//!
//! Same math as [`HlgCurve::apply`](crate::HlgCurve::apply): a pivot per row, the mid band
//! passed through bit for bit, `c ± w ± β·…` outside it, non-finite entries untouched.
//! Input `[V]` or `[B, V]` in f32, f16 or bf16; the math runs in f32 and the result comes
//! back in the input's dtype. On the CPU the slice kernel is faster (it is what the
//! mistral.rs processor uses); this backend is for logits that live on a GPU.
//!
//! An auto width or pivot offset takes a σ per row (the spread of its log-probabilities,
//! from the same weighted sums as the entropy pivot).
//!
//! The `median` pivot is found by bisection over the order of `f32` values (at most 32
//! masked sums per row, each synchronised to the host), which is exact: candle's `cumsum`
//! materialises a `V × V` matrix and is no option at vocabulary sizes.
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use mistralrs_hlg::{backend::candle::apply, HlgCurve};
//!
//! let x = Tensor::new(&[[0.0f32, -1.0, -5.0, -16.0], [3.0, 2.0, -2.0, -13.0]], &Device::Cpu)?;
//! let y = apply(&HlgCurve::default(), &x)?;
//! let rows = y.to_vec2::<f32>()?;
//! assert_eq!(rows[0][2], -5.0); // mid band: untouched
//! // The second row is the first shifted by 3: its own pivot, so the output shifts by 3.
//! assert!((rows[1][3] - rows[0][3] - 3.0).abs() < 1e-4);
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{DType, Tensor, D};

use crate::curve::HlgCurve;
use crate::params::{Pivot, Span, ToeShape, MAX_NATS};

/// Applies `curve` to `logits` (`[V]` or `[B, V]`, a pivot per row) and returns a new
/// tensor of the same shape, dtype and device.
///
/// ```
/// use candle_core::{Device, Tensor};
/// use mistralrs_hlg::{backend::candle::apply, HlgCurve};
/// let x = Tensor::new(&[0.0f32, -1.0, -30.0], &Device::Cpu)?;
/// let y: Vec<f32> = apply(&HlgCurve::default(), &x)?.to_vec1()?;
/// let mut z = [0.0f32, -1.0, -30.0];
/// HlgCurve::default().apply(&mut z);
/// assert!(y.iter().zip(&z).all(|(a, b)| (a - b).abs() < 1e-4), "{y:?} vs the kernel's {z:?}");
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn apply(curve: &HlgCurve, logits: &Tensor) -> candle_core::Result<Tensor> {
    if curve.is_identity() {
        return Ok(logits.clone());
    }
    let (x, squeeze) = match logits.rank() {
        1 => (logits.unsqueeze(0)?, true),
        2 => (logits.clone(), false),
        r => candle_core::bail!("hlg: logits must be [V] or [B, V], got rank {r}"),
    };
    let dtype = x.dtype();
    let x = x.to_dtype(DType::F32)?.contiguous()?;
    let y = apply_f32(curve, &x)?.to_dtype(dtype)?;
    if squeeze {
        y.squeeze(0)
    } else {
        Ok(y)
    }
}

fn apply_f32(curve: &HlgCurve, x: &Tensor) -> candle_core::Result<Tensor> {
    let inf = f32::INFINITY;
    let finite = x.abs()?.lt(inf)?;
    let neg_inf = Tensor::full(f32::NEG_INFINITY, x.shape(), x.device())?;
    let m = finite.where_cond(x, &neg_inf)?.max_keepdim(D::Minus1)?; // [B, 1]
    let moments = (curve.is_auto() || curve.pivot() == Pivot::Entropy)
        .then(|| moments(x, &finite, &m))
        .transpose()?;
    let sigma = moments.as_ref().map(Moments::spread).transpose()?;
    let span = |s: Span| -> candle_core::Result<Tensor> {
        match (s, &sigma) {
            (Span::Auto(k), Some(sigma)) => sigma.affine(k as f64, 0.0)?.clamp(0f32, MAX_NATS),
            (s, _) => Tensor::full(s.at(0.0), m.shape(), m.device()),
        }
    };
    let c = match (curve.pivot(), &moments) {
        (Pivot::Top, _) => (&m - span(curve.pivot_offset())?)?,
        (Pivot::Entropy, Some(mo)) => (&m + mo.mean()?)?,
        (Pivot::Entropy, None) => unreachable!("the entropy pivot computes its moments"),
        (Pivot::Median, _) => median(x, &finite, &m, &weights(x, &finite, &m)?.1)?,
    };
    let z = x.broadcast_sub(&c)?;
    // Rows without a finite entry have c = −inf or NaN: every comparison below is false.
    let w = match curve.width() {
        Some(w) => span(w)?,
        None => Tensor::full(inf, m.shape(), m.device())?,
    };
    let mut out = x.clone();
    if let Some(bt) = curve.toe() {
        let d = z.neg()?.broadcast_sub(&w)?;
        let drop = match curve.toe_shape() {
            ToeShape::Log => log1p(&d.affine(1.0 / bt as f64, 0.0)?)?.affine(bt as f64, 0.0)?,
            ToeShape::Quadratic => (&d + (d.affine(0.5 / bt as f64, 0.0)? * &d)?)?,
            ToeShape::Exp => expm1(&d.affine(1.0 / bt as f64, 0.0)?)?.affine(bt as f64, 0.0)?,
        };
        let toe = (&c - &w)?.broadcast_sub(&drop)?;
        let lo = (z.broadcast_lt(&w.neg()?)? * z.gt(f32::NEG_INFINITY)?)?;
        out = lo.where_cond(&toe, &out)?;
    }
    if let Some(bh) = curve.shoulder() {
        let u = z.broadcast_sub(&w)?;
        let rise = log1p(&u.affine(1.0 / bh as f64, 0.0)?)?.affine(bh as f64, 0.0)?;
        let sh = (&c + &w)?.broadcast_add(&rise)?;
        let hi = (z.broadcast_gt(&w)? * z.lt(inf)?)?;
        out = hi.where_cond(&sh, &out)?;
    }
    Ok(out)
}

/// `t = x − m` and `e = exp(t)` over the finite entries (0 elsewhere).
fn weights(x: &Tensor, finite: &Tensor, m: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
    let zeros = x.zeros_like()?;
    let t = finite.where_cond(&x.broadcast_sub(m)?, &zeros)?;
    let e = finite.where_cond(&t.exp()?, &zeros)?;
    Ok((t, e))
}

/// Per row, `[B, 1]`: `Σ e`, `Σ e·t`, `Σ e·t²` (see [`weights`]).
struct Moments {
    e: Tensor,
    et: Tensor,
    ett: Tensor,
}

fn moments(x: &Tensor, finite: &Tensor, m: &Tensor) -> candle_core::Result<Moments> {
    let (t, e) = weights(x, finite, m)?;
    let et = (&e * &t)?;
    Ok(Moments {
        e: e.sum_keepdim(D::Minus1)?,
        ett: (&et * &t)?.sum_keepdim(D::Minus1)?,
        et: et.sum_keepdim(D::Minus1)?,
    })
}

impl Moments {
    /// `Σ p·t`: the entropy pivot is `m` plus this.
    fn mean(&self) -> candle_core::Result<Tensor> {
        &self.et / &self.e
    }

    /// σ, `Var_p(t)`'s root; 0 where rounding leaves a negative variance.
    fn spread(&self) -> candle_core::Result<Tensor> {
        let mean = self.mean()?;
        let var = ((&self.ett / &self.e)? - (&mean * &mean)?)?;
        var.relu()?.sqrt()
    }
}

/// The mass median per row by bisection on the `f32` order: the largest `v` with
/// `mass(x ≥ v) ≥ ½ Σ e`.
fn median(x: &Tensor, finite: &Tensor, m: &Tensor, e: &Tensor) -> candle_core::Result<Tensor> {
    let dev = x.device();
    let rows = x.dim(0)?;
    let zeros = e.zeros_like()?;
    let half: Vec<f32> = e
        .sum_keepdim(D::Minus1)?
        .affine(0.5, 0.0)?
        .flatten_all()?
        .to_vec1()?;
    let plus_inf = Tensor::full(f32::INFINITY, x.shape(), dev)?;
    let lo_v: Vec<f32> = finite
        .where_cond(x, &plus_inf)?
        .min_keepdim(D::Minus1)?
        .flatten_all()?
        .to_vec1()?;
    let top: Vec<f32> = m.flatten_all()?.to_vec1()?;
    let mass_at = |t: &[f32]| -> candle_core::Result<Vec<f32>> {
        let t = Tensor::from_slice(t, (rows, 1), dev)?;
        x.broadcast_ge(&t)?
            .where_cond(e, &zeros)?
            .sum_keepdim(D::Minus1)?
            .flatten_all()?
            .to_vec1()
    };
    // Bisection state per row, as order keys; rows whose top holds half are done.
    let mut lo: Vec<u32> = lo_v.iter().map(|&v| key(v)).collect();
    let mut hi: Vec<u32> = top.iter().map(|&v| key(v)).collect();
    let at_top = mass_at(&top)?;
    for r in 0..rows {
        if at_top[r] >= half[r] || !top[r].is_finite() {
            lo[r] = hi[r];
        }
    }
    while (0..rows).any(|r| hi[r] > lo[r] + 1) {
        let mid: Vec<u32> = (0..rows)
            .map(|r| {
                if hi[r] > lo[r] + 1 {
                    lo[r] + (hi[r] - lo[r]) / 2
                } else {
                    lo[r]
                }
            })
            .collect();
        let mass = mass_at(&mid.iter().map(|&k| unkey(k)).collect::<Vec<_>>())?;
        for r in 0..rows {
            if hi[r] > lo[r] + 1 {
                if mass[r] >= half[r] {
                    lo[r] = mid[r];
                } else {
                    hi[r] = mid[r];
                }
            }
        }
    }
    Tensor::from_vec(
        lo.into_iter().map(unkey).collect::<Vec<_>>(),
        (rows, 1),
        dev,
    )
}

/// A key whose unsigned order is the order of the (non-NaN) floats.
fn key(v: f32) -> u32 {
    let b = v.to_bits();
    if b >> 31 == 1 {
        !b
    } else {
        b | 0x8000_0000
    }
}

fn unkey(k: u32) -> f32 {
    f32::from_bits(if k >> 31 == 1 { k & 0x7fff_ffff } else { !k })
}

/// `ln(1 + v)` with the rounding error of `1 + v` added back: `ln y + (v − (y − 1))/y`.
fn log1p(v: &Tensor) -> candle_core::Result<Tensor> {
    let y = v.affine(1.0, 1.0)?;
    let err = (v - y.affine(1.0, -1.0)?)?;
    y.log()? + (err / &y)?
}

/// `exp(t) − 1` by Kahan's `(u − 1)·t / ln u`, `u = exp(t)`; `t` where `u = 1`, `u − 1`
/// for `t > 20` (exact there in f32, and Kahan's product `(u − 1)·t` would overflow
/// from `t ≈ 83` on, where `u` itself is still finite), `+inf` where `u` overflows.
fn expm1(t: &Tensor) -> candle_core::Result<Tensor> {
    let u = t.exp()?;
    let um1 = u.affine(1.0, -1.0)?;
    let kahan = ((&um1 * t)? / u.log()?)?;
    let inf = Tensor::full(f32::INFINITY, t.shape(), t.device())?;
    let out = u.eq(1.0)?.where_cond(t, &kahan)?;
    let out = t.gt(20.0)?.where_cond(&um1, &out)?;
    u.eq(f32::INFINITY)?.where_cond(&inf, &out)
}
