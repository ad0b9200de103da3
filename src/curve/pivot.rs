//! The pivot: where the curve is centred, one value per vector.

use super::{kernel, HlgCurve};
use crate::params::Pivot;

impl HlgCurve {
    /// The pivot `c` in raw-logit space for this vector, over its finite entries;
    /// `None` when it has no finite entry.
    ///
    /// ```
    /// use mistralrs_hlg::{HlgCurve, Pivot};
    /// let x = [0.0, 0.0, -50.0];
    /// assert_eq!(HlgCurve::default().pivot_of(&x), Some(-4.0));       // top − 4
    /// let median = HlgCurve::default().with_pivot(Pivot::Median);
    /// assert_eq!(median.pivot_of(&x), Some(0.0));
    /// assert_eq!(median.pivot_of(&[f32::NAN]), None);
    /// ```
    pub fn pivot_of(&self, logits: &[f32]) -> Option<f32> {
        let m = kernel::pivot::finite_max(logits)?;
        Some(match self.pivot {
            Pivot::Top => m - self.pivot_offset,
            Pivot::Entropy => kernel::pivot::entropy_center(logits, m),
            Pivot::Median => kernel::pivot::mass_median(logits, m),
        })
    }
}
