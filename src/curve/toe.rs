//! The toe: the curve below the mid band, one shape per [`ToeShape`].

use super::{kernel, HlgCurve};
use crate::params::ToeShape;

/// The toe's drop `T(d)` below the lower knee in `f64` with the standard library's
/// functions: the reference formula ([`HlgCurve::g1`]), not the kernel's.
pub(super) fn drop_f64(shape: ToeShape, d: f64, b: f64) -> f64 {
    match shape {
        ToeShape::Log => b * (d / b).ln_1p(),
        ToeShape::Quadratic => d + d * d / (2.0 * b),
        ToeShape::Exp => b * (d / b).exp_m1(),
    }
}

/// The whole curve around pivot `c`, in place, through the kernel.
pub(super) fn transform(logits: &mut [f32], c: f32, curve: &HlgCurve) {
    let knee = kernel::toe::Knee::new(c, curve);
    kernel::toe::transform(logits, &knee, curve.toe_shape);
}
