//! The HLG transform as mlx-rs ops, for engines that hold their logits as an
//! [`mlx_rs::Array`] (Metal on Apple silicon; MLX's CPU backend elsewhere).
//!
//! Same math as [`HlgCurve::apply`](crate::HlgCurve::apply): a pivot per row, the mid band
//! passed through bit for bit, `c ± w ± β·…` outside it, non-finite entries untouched.
//! Input `[V]` or `[B, V]` in f32, f16 or bf16; the math runs in f32 and the result comes
//! back in the input's dtype. Everything is lazy mlx ops on the default device and
//! stream (never a hard-coded GPU): nothing is copied to the host, and the caller
//! evaluates the result when it needs it.
//!
//! The `median` pivot sorts each row on the device and takes a reverse cumulative sum of
//! the weights: `O(V log V)` where the slice kernel selects in `O(V)`, but one fused graph
//! with no round trip to the host.
//!
//! ```no_run
//! use mlx_rs::Array;
//! use mistralrs_hlg::{backend::mlx::apply, HlgCurve};
//!
//! let x = Array::from_slice(&[0.0f32, -1.0, -5.0, -16.0, 3.0, 2.0, -2.0, -13.0], &[2, 4]);
//! let y = apply(&HlgCurve::default(), &x)?;
//! y.eval()?;
//! assert_eq!(y.as_slice::<f32>()[2], -5.0); // mid band: untouched
//! # Ok::<(), mlx_rs::error::Exception>(())
//! ```

use mlx_rs::{error::Exception, ops, Array, Dtype};

use crate::curve::HlgCurve;
use crate::params::{Pivot, Span, ToeShape, MAX_NATS};

type Result<T> = std::result::Result<T, Exception>;

/// Applies `curve` to `logits` (`[V]` or `[B, V]`, a pivot per row) and returns a new
/// array of the same shape and dtype, as lazy ops on the default device.
///
/// ```
/// use mlx_rs::Array;
/// use mistralrs_hlg::{backend::mlx::apply, HlgCurve};
/// let y = apply(&HlgCurve::identity(), &Array::from_slice(&[1.0f32, -2.0], &[2]))?;
/// y.eval()?;
/// assert_eq!(y.as_slice::<f32>(), &[1.0, -2.0]);
/// # Ok::<(), mlx_rs::error::Exception>(())
/// ```
pub fn apply(curve: &HlgCurve, logits: &Array) -> Result<Array> {
    if curve.is_identity() {
        return Ok(logits.clone());
    }
    let squeeze = match logits.ndim() {
        1 => true,
        2 => false,
        r => {
            return Err(Exception::custom(format!(
                "hlg: logits must be [V] or [B, V], got rank {r}"
            )))
        }
    };
    let x = if squeeze {
        logits.expand_dims(0)?
    } else {
        logits.clone()
    };
    let dtype = x.dtype();
    let y = apply_f32(curve, &x.as_dtype(Dtype::Float32)?)?;
    let y = if dtype == Dtype::Float32 {
        y
    } else {
        y.as_dtype(dtype)?
    };
    if squeeze {
        y.squeeze_axes(&[0])
    } else {
        Ok(y)
    }
}

fn s(v: f32) -> Array {
    Array::from_f32(v)
}

fn apply_f32(curve: &HlgCurve, x: &Array) -> Result<Array> {
    let inf = f32::INFINITY;
    let finite = ops::lt(ops::abs(x)?, s(inf))?;
    let m = ops::max_axis(ops::select(&finite, x, s(-inf))?, -1, true)?; // [B, 1]
    let moments = (curve.is_auto() || curve.pivot() == Pivot::Entropy)
        .then(|| Moments::of(x, &finite, &m))
        .transpose()?;
    let sigma = moments.as_ref().map(Moments::spread).transpose()?;
    // A span per row, `[B, 1]` (a fixed one broadcasts as a scalar).
    let span = |sp: Span| -> Result<Array> {
        match (sp, &sigma) {
            (Span::Auto(k), Some(sigma)) => ops::minimum(ops::multiply(sigma, s(k))?, s(MAX_NATS)),
            (sp, _) => Ok(s(sp.at(0.0))),
        }
    };
    let c = match (curve.pivot(), &moments) {
        (Pivot::Top, _) => ops::subtract(&m, span(curve.pivot_offset())?)?,
        (Pivot::Entropy, Some(mo)) => ops::add(&m, mo.mean()?)?,
        (Pivot::Entropy, None) => unreachable!("the entropy pivot computes its moments"),
        (Pivot::Median, _) => median(x, &finite, &m)?,
    };
    let z = ops::subtract(x, &c)?;
    // Rows without a finite entry have c = −inf or NaN: every comparison below is false.
    let w = match curve.width() {
        Some(w) => span(w)?,
        None => s(inf),
    };
    let mut out = x.clone();
    if let Some(bt) = curve.toe() {
        // The kernel's roundings: d = (−z) − w, drop = β·f(d·(1/β)), toe = (c − w) − drop.
        let d = ops::subtract(ops::negative(&z)?, &w)?;
        let drop = match curve.toe_shape() {
            ToeShape::Log => ops::multiply(s(bt), ops::log1p(ops::multiply(&d, s(1.0 / bt))?)?)?,
            ToeShape::Quadratic => {
                ops::add(ops::multiply(ops::multiply(&d, s(0.5 / bt))?, &d)?, &d)?
            }
            ToeShape::Exp => ops::multiply(s(bt), ops::expm1(ops::multiply(&d, s(1.0 / bt))?)?)?,
        };
        let toe = ops::subtract(ops::subtract(&c, &w)?, &drop)?;
        let lo = ops::logical_and(ops::lt(&z, ops::negative(&w)?)?, ops::gt(&z, s(-inf))?)?;
        out = ops::select(&lo, &toe, &out)?;
    }
    if let Some(bh) = curve.shoulder() {
        let u = ops::subtract(&z, &w)?;
        let rise = ops::multiply(s(bh), ops::log1p(ops::multiply(&u, s(1.0 / bh))?)?)?;
        let sh = ops::add(ops::add(&c, &w)?, &rise)?;
        let hi = ops::logical_and(ops::gt(&z, &w)?, ops::lt(&z, s(inf))?)?;
        out = ops::select(&hi, &sh, &out)?;
    }
    Ok(out)
}

/// Per row, `[B, 1]`: `Σ e`, `Σ e·t`, `Σ e·t²` (see [`weights`]).
struct Moments {
    e: Array,
    et: Array,
    ett: Array,
}

impl Moments {
    fn of(x: &Array, finite: &Array, m: &Array) -> Result<Moments> {
        let (t, e) = weights(x, finite, m)?;
        let et = ops::multiply(&e, &t)?;
        Ok(Moments {
            e: ops::sum_axis(&e, -1, true)?,
            ett: ops::sum_axis(ops::multiply(&et, &t)?, -1, true)?,
            et: ops::sum_axis(&et, -1, true)?,
        })
    }

    /// `Σ p·t`: the entropy pivot is `m` plus this.
    fn mean(&self) -> Result<Array> {
        ops::divide(&self.et, &self.e)
    }

    /// σ, `Var_p(t)`'s root; 0 where rounding leaves a negative variance.
    fn spread(&self) -> Result<Array> {
        let mean = self.mean()?;
        let var = ops::subtract(
            ops::divide(&self.ett, &self.e)?,
            ops::multiply(&mean, &mean)?,
        )?;
        ops::sqrt(ops::maximum(&var, s(0.0))?)
    }
}

/// `t = x − m` and `e = exp(t)` over the finite entries (0 elsewhere).
fn weights(x: &Array, finite: &Array, m: &Array) -> Result<(Array, Array)> {
    let t = ops::select(finite, ops::subtract(x, m)?, s(0.0))?;
    let e = ops::select(finite, ops::exp(&t)?, s(0.0))?;
    Ok((t, e))
}

fn median(x: &Array, finite: &Array, m: &Array) -> Result<Array> {
    let total = ops::sum_axis(weights(x, finite, m)?.1, -1, true)?;
    // Median: the largest v with mass(x ≥ v) ≥ ½ Σ e. Sorted ascending (non-finite
    // entries as −inf, weightless, first), the mass from index i to the end is
    // mass(x ≥ sorted[i]) and does not increase with i: the answer is sorted[n − 1],
    // n the number of indices where it still reaches half.
    let sorted = ops::sort_axis(ops::select(finite, x, s(-f32::INFINITY))?, -1)?;
    let w = ops::exp(ops::subtract(&sorted, m)?)?;
    let w = ops::select(ops::gt(&sorted, s(-f32::INFINITY))?, &w, s(0.0))?;
    let tail = ops::cumsum(&w, -1, true, true)?;
    let half = ops::multiply(&total, s(0.5))?;
    let n = ops::sum_axis(ops::ge(&tail, &half)?.as_dtype(Dtype::Int32)?, -1, true)?;
    let idx = ops::maximum(ops::subtract(&n, Array::from_int(1))?, Array::from_int(0))?;
    sorted.take_along_axis(&idx, -1)
}
