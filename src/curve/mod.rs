//! The HLG curve: pure math on `&mut [f32]`, no tensor type.
//!
//! For logits `x`, a pivot `c` in raw-logit space and `z = x − c`, the unit-gain curve is
//!
//! ```text
//!          ⎧ −w − T(d),  d = −z − w             z < −w    (toe)
//! g₁(z) =  ⎨  z                                 |z| ≤ w   (mid)
//!          ⎩  w + β_h·ln(1 + (z − w)/β_h)       z >  w    (shoulder)
//!
//! T(d) = β_t·ln(1 + d/β_t)        log        (the design's toe: lifts the tail)
//!        d + d²/(2β_t)            quadratic  (steepens: holds the tail down)
//!        β_t·(exp(d/β_t) − 1)     exp        (steepens hardest)
//! ```
//!
//! and the output is `x` itself in the mid band (bit for bit) and `c + g₁(z)` outside it,
//! evaluated as `(c ± w) ± β·…`: every step is a rounded operation monotone in `x`, so
//! the kernel is non-decreasing within each branch by construction, and at the knees
//! `c ± w` lies on the right side of every mid-band `x`.

use crate::error::HlgError;
use crate::params::{
    Field, Pivot, Span, ToeShape, DEFAULT_PIVOT, DEFAULT_PIVOT_OFFSET, DEFAULT_SHOULDER,
    DEFAULT_TOE, DEFAULT_TOE_SHAPE, DEFAULT_WIDTH,
};

mod kernel;

/// A validated HLG curve: pivot (mode and offset), mid width, shoulder, toe and its shape:
/// the fields of the `hlg` object, resolved.
///
/// `None` for `width` means "off" (the identity); `None` for `shoulder` or `toe` means
/// that side continues linearly (its entries are returned untouched). The width and the
/// pivot offset are [`Span`]s: fixed nats, or a multiple of each vector's spread σ (the
/// auto mode; [`HlgCurve::with_auto_width`]).
///
/// ```
/// use mistralrs_hlg::{HlgCurve, ToeShape};
///
/// let curve = HlgCurve::default()
///     .with_pivot_offset(6.0)?
///     .with_width(Some(4.0))?
///     .with_shoulder(Some(4.0))?
///     .with_toe(Some(6.0))?
///     .with_toe_shape(ToeShape::Log);
/// // c = 10 − 6 = 4: z = 6 (shoulder), 3 and 1 (mid), −24 (toe)
/// let mut logits = vec![10.0, 7.0, 5.0, -20.0, f32::NEG_INFINITY];
/// curve.apply(&mut logits);
/// assert_eq!(logits[1..3], [7.0, 5.0]);           // mid band (|z| ≤ 4): untouched
/// assert!(logits[0] < 10.0);                      // shoulder: the top is pulled down
/// assert!(logits[3] > -20.0);                     // log toe: the tail is lifted
/// assert_eq!(logits[4], f32::NEG_INFINITY);       // masked stays masked
/// # Ok::<(), mistralrs_hlg::HlgError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HlgCurve {
    p: CurveParts,
}

/// The six parameters of a curve, as given ([`HlgCurve::new`] checks them): what the
/// `hlg` object's fields resolve to. The default is the built-in curve, chosen by the
/// evaluation (docs/RESULTS.md): `top` pivot 4 nats below the top token, width 3,
/// shoulder 2, toe 1, quadratic toe. At a fixed temperature it holds the tail down (less
/// tail mass and entropy than plain temperature) and spreads the top a little; the design
/// note's point (offset 6, width 4, shoulder 4, toe 6, log toe) adds tail mass instead and
/// stays reachable through the knobs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CurveParts {
    /// Where the pivot sits.
    pub pivot: Pivot,
    /// Nats (or a multiple of σ) below the top token, for [`Pivot::Top`].
    pub pivot_offset: Span,
    /// The mid band's half-width; `None`: off (the identity).
    pub width: Option<Span>,
    /// The shoulder's β (nats); `None`: the top side continues linearly.
    pub shoulder: Option<f32>,
    /// The toe's β (nats); `None`: the tail continues linearly.
    pub toe: Option<f32>,
    /// The toe's shape.
    pub toe_shape: ToeShape,
}

impl Default for CurveParts {
    fn default() -> Self {
        CurveParts {
            pivot: DEFAULT_PIVOT,
            pivot_offset: Span::Nats(DEFAULT_PIVOT_OFFSET),
            width: DEFAULT_WIDTH.map(Span::Nats),
            shoulder: DEFAULT_SHOULDER,
            toe: DEFAULT_TOE,
            toe_shape: DEFAULT_TOE_SHAPE,
        }
    }
}

impl HlgCurve {
    /// A curve from its parameters, validated: `pivot_offset, width ∈ [0, MAX_NATS]` nats
    /// (or scales of σ in the same range), `shoulder, toe ∈ [MIN_BETA, MAX_NATS]`. The
    /// offset matters only for [`Pivot::Top`].
    ///
    /// ```
    /// use mistralrs_hlg::{params::Span, CurveParts, HlgCurve, Pivot, ToeShape};
    /// let parts = CurveParts { pivot: Pivot::Median, width: Some(Span::Nats(2.0)), shoulder: Some(0.0), ..CurveParts::default() };
    /// assert_eq!(HlgCurve::new(parts).unwrap_err().param(), "hlg.shoulder");
    /// let c = HlgCurve::new(CurveParts { toe_shape: ToeShape::Exp, ..CurveParts::default() })?;
    /// assert_eq!(c.parts(), CurveParts { toe_shape: ToeShape::Exp, ..HlgCurve::default().parts() });
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn new(parts: CurveParts) -> Result<Self, HlgError> {
        HlgCurve { p: parts }.checked()
    }

    /// The curve's parameters.
    pub fn parts(&self) -> CurveParts {
        self.p
    }

    /// A curve from parts that were checked against [`HlgCurve::new`]'s ranges when they
    /// were read (an [`HlgConfig`](crate::HlgConfig) holds only such values): the request
    /// path validates once, at the edge.
    pub(crate) fn from_checked(parts: CurveParts) -> Self {
        let curve = HlgCurve { p: parts };
        debug_assert!(curve.checked().is_ok(), "unchecked parts: {parts:?}");
        curve
    }

    /// Every part against its field's range.
    fn checked(self) -> Result<Self, HlgError> {
        let span = |field: Field, v: Span| match v {
            Span::Nats(n) => HlgError::check(field, n.into()).map(Span::Nats),
            Span::Auto(k) => {
                let scale = match field {
                    Field::Width => Field::WidthScale,
                    _ => Field::PivotOffsetScale,
                };
                HlgError::check(scale, k.into()).map(Span::Auto)
            }
        };
        Ok(HlgCurve {
            p: CurveParts {
                pivot_offset: span(Field::PivotOffset, self.p.pivot_offset)?,
                width: self.p.width.map(|w| span(Field::Width, w)).transpose()?,
                shoulder: checked(Field::Shoulder, self.p.shoulder)?,
                toe: checked(Field::Toe, self.p.toe)?,
                ..self.p
            },
        })
    }

    /// The curve that returns every input bit for bit (width off).
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// let mut x = [3.0, -40.0];
    /// HlgCurve::identity().apply(&mut x);
    /// assert_eq!(x, [3.0, -40.0]);
    /// ```
    pub fn identity() -> Self {
        HlgCurve {
            p: CurveParts {
                width: None,
                ..CurveParts::default()
            },
        }
    }

    /// This curve with another pivot mode.
    ///
    /// ```
    /// use mistralrs_hlg::{HlgCurve, Pivot};
    /// let c = HlgCurve::default().with_pivot(Pivot::Median);
    /// assert_eq!(c.pivot(), Pivot::Median);
    /// assert_eq!(c.pivot_of(&[2.0, 2.0]), Some(2.0)); // the mass median of equal logits
    /// ```
    pub fn with_pivot(mut self, pivot: Pivot) -> Self {
        self.p.pivot = pivot;
        self
    }

    /// This curve with another pivot offset (nats below the top token, for
    /// [`Pivot::Top`]; finite, `≥ 0`).
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// let c = HlgCurve::default().with_pivot_offset(6.0)?;
    /// assert_eq!(c.pivot_of(&[2.0, 0.0]), Some(-4.0));
    /// assert!(HlgCurve::default().with_pivot_offset(-1.0).is_err());
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn with_pivot_offset(mut self, offset: f32) -> Result<Self, HlgError> {
        self.p.pivot_offset = Span::Nats(HlgError::check(Field::PivotOffset, offset.into())?);
        Ok(self)
    }

    /// This curve with the pivot offset `scale·σ` per vector (`"pivot_offset": "auto"`),
    /// σ the spread of its log-probabilities; `scale ∈ [0, MAX_NATS]`.
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// let c = HlgCurve::default().with_auto_pivot_offset(2.0)?;
    /// // Two tokens 2 nats apart with p ∝ (e², 1): σ = 2·√(p(1−p)).
    /// let p = 1.0 / (1.0 + (-2.0f64).exp());
    /// let sigma = 2.0 * (p * (1.0 - p)).sqrt();
    /// assert!((c.pivot_of(&[2.0, 0.0]).unwrap() as f64 - (2.0 - 2.0 * sigma)).abs() < 1e-5);
    /// assert_eq!(c.pivot_of(&[2.0, f32::NEG_INFINITY]), Some(2.0)); // σ = 0: the top
    /// assert_eq!(HlgCurve::default().with_auto_pivot_offset(-1.0).unwrap_err().param(), "hlg.pivot_offset_scale");
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn with_auto_pivot_offset(mut self, scale: f32) -> Result<Self, HlgError> {
        self.p.pivot_offset = Span::Auto(HlgError::check(Field::PivotOffsetScale, scale.into())?);
        Ok(self)
    }

    /// This curve with another mid width (nats, finite, `≥ 0`), or `None` for off.
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// assert_eq!(HlgCurve::default().with_width(Some(1.5))?.width(), Some(mistralrs_hlg::params::Span::Nats(1.5)));
    /// assert!(HlgCurve::default().with_width(None)?.is_identity());
    /// assert_eq!(HlgCurve::default().with_width(Some(-1.0)).unwrap_err().param(), "hlg.width");
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn with_width(mut self, width: Option<f32>) -> Result<Self, HlgError> {
        self.p.width = checked(Field::Width, width)?.map(Span::Nats);
        Ok(self)
    }

    /// This curve with the mid band's half-width `scale·σ` per vector (`"width":
    /// "auto"`), σ the spread of its log-probabilities; `scale ∈ [0, MAX_NATS]`. A vector
    /// with σ = 0 (one finite entry, or all equal) keeps its distribution; it comes back
    /// bit for bit when the pivot sits on it too (an auto offset, or the `entropy` or
    /// `median` pivot).
    ///
    /// ```
    /// use mistralrs_hlg::{params::Span, HlgCurve};
    /// let c = HlgCurve::default().with_auto_width(1.5)?.with_auto_pivot_offset(3.0)?;
    /// assert_eq!(c.width(), Some(Span::Auto(1.5)));
    /// let mut flat = [0.5f32; 4];
    /// c.apply(&mut flat);
    /// assert_eq!(flat, [0.5; 4]);
    /// assert_eq!(HlgCurve::default().with_auto_width(1e4).unwrap_err().param(), "hlg.width_scale");
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn with_auto_width(mut self, scale: f32) -> Result<Self, HlgError> {
        self.p.width = Some(Span::Auto(HlgError::check(
            Field::WidthScale,
            scale.into(),
        )?));
        Ok(self)
    }

    /// This curve with another shoulder (nats, finite, `≥ MIN_BETA`), or `None` for off.
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// assert_eq!(HlgCurve::default().with_shoulder(None)?.shoulder(), None);
    /// assert!(HlgCurve::default().with_shoulder(Some(0.0)).is_err(), "below MIN_BETA");
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn with_shoulder(mut self, shoulder: Option<f32>) -> Result<Self, HlgError> {
        self.p.shoulder = checked(Field::Shoulder, shoulder)?;
        Ok(self)
    }

    /// This curve with another toe (nats, finite, `≥ MIN_BETA`), or `None` for off.
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// assert_eq!(HlgCurve::default().with_toe(Some(3.5))?.toe(), Some(3.5));
    /// assert!(HlgCurve::default().with_toe(Some(f32::NAN)).is_err());
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn with_toe(mut self, toe: Option<f32>) -> Result<Self, HlgError> {
        self.p.toe = checked(Field::Toe, toe)?;
        Ok(self)
    }

    /// This curve with another toe shape.
    ///
    /// ```
    /// use mistralrs_hlg::{HlgCurve, ToeShape};
    /// let c = HlgCurve::default().with_toe_shape(ToeShape::Log);
    /// assert_eq!(c.toe_shape(), ToeShape::Log);
    /// ```
    pub fn with_toe_shape(mut self, toe_shape: ToeShape) -> Self {
        self.p.toe_shape = toe_shape;
        self
    }

    /// The pivot mode.
    ///
    /// ```
    /// use mistralrs_hlg::{HlgCurve, Pivot};
    /// assert_eq!(HlgCurve::default().pivot(), Pivot::Top);
    /// ```
    pub fn pivot(&self) -> Pivot {
        self.p.pivot
    }
    /// The pivot offset (used by [`Pivot::Top`] only).
    ///
    /// ```
    /// use mistralrs_hlg::{params::{Span, DEFAULT_PIVOT_OFFSET}, HlgCurve};
    /// assert_eq!(HlgCurve::default().pivot_offset(), Span::Nats(DEFAULT_PIVOT_OFFSET));
    /// ```
    pub fn pivot_offset(&self) -> Span {
        self.p.pivot_offset
    }
    /// The mid band's half-width, `None` when off.
    ///
    /// ```
    /// use mistralrs_hlg::{params::Span, HlgCurve};
    /// assert_eq!((HlgCurve::default().width(), HlgCurve::identity().width()), (Some(Span::Nats(3.0)), None));
    /// ```
    pub fn width(&self) -> Option<Span> {
        self.p.width
    }

    /// Whether the curve depends on each vector's spread σ (a width or pivot offset in
    /// auto mode; the offset only with the `top` pivot, the one that reads it).
    ///
    /// ```
    /// use mistralrs_hlg::{HlgCurve, Pivot};
    /// assert!(!HlgCurve::default().is_auto());
    /// assert!(HlgCurve::default().with_auto_width(1.0)?.is_auto());
    /// let entropy = HlgCurve::default().with_pivot(Pivot::Entropy).with_auto_pivot_offset(1.0)?;
    /// assert!(!entropy.is_auto(), "the entropy pivot reads no offset");
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn is_auto(&self) -> bool {
        self.p.width.is_some_and(Span::is_auto)
            || (self.p.pivot == Pivot::Top && self.p.pivot_offset.is_auto())
    }

    /// This curve with its auto spans fixed at the spread `sigma`: what [`Self::apply`]
    /// runs on a vector whose σ is `sigma` ([`Self::spread_of`]).
    ///
    /// ```
    /// use mistralrs_hlg::{params::Span, HlgCurve};
    /// let c = HlgCurve::default().with_auto_width(1.5)?.at_spread(2.0);
    /// assert_eq!(c.width(), Some(Span::Nats(3.0)));
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn at_spread(&self, sigma: f32) -> HlgCurve {
        HlgCurve {
            p: CurveParts {
                pivot_offset: Span::Nats(self.p.pivot_offset.at(sigma)),
                width: self.p.width.map(|w| Span::Nats(w.at(sigma))),
                ..self.p
            },
        }
    }

    /// σ of this vector: the standard deviation of its log-probabilities under its own
    /// distribution `p = softmax(x)`, over the finite entries; `None` when it has none.
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// assert_eq!(HlgCurve::spread_of(&[1.0, 1.0, 1.0]), Some(0.0));
    /// assert_eq!(HlgCurve::spread_of(&[1.0, f32::NEG_INFINITY]), Some(0.0));
    /// let s = HlgCurve::spread_of(&[0.0, 0.0, -2.0]).unwrap();
    /// assert!(s > 0.0 && s < 2.0);
    /// assert_eq!(HlgCurve::spread_of(&[f32::NAN]), None);
    /// ```
    pub fn spread_of(logits: &[f32]) -> Option<f32> {
        let m = kernel::pivot::finite_max(logits)?;
        Some(kernel::pivot::moments(logits, m).spread(logits.len()))
    }
    /// The shoulder in nats, `None` when off.
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// assert_eq!(HlgCurve::default().shoulder(), Some(2.0));
    /// ```
    pub fn shoulder(&self) -> Option<f32> {
        self.p.shoulder
    }
    /// The toe in nats, `None` when off.
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// assert_eq!(HlgCurve::default().toe(), Some(1.0));
    /// ```
    pub fn toe(&self) -> Option<f32> {
        self.p.toe
    }
    /// The toe shape.
    ///
    /// ```
    /// use mistralrs_hlg::{HlgCurve, ToeShape};
    /// assert_eq!(HlgCurve::default().toe_shape(), ToeShape::Quadratic);
    /// ```
    pub fn toe_shape(&self) -> ToeShape {
        self.p.toe_shape
    }

    /// True when the curve returns every input unchanged: width off, or both the
    /// shoulder and the toe off.
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// assert!(HlgCurve::identity().is_identity());
    /// assert!(!HlgCurve::default().is_identity());
    /// ```
    pub fn is_identity(&self) -> bool {
        self.p.width.is_none() || (self.p.shoulder.is_none() && self.p.toe.is_none())
    }

    /// The unit-gain curve `g₁(z)` at one point, in `f64` with the standard library's
    /// `ln_1p`/`exp_m1`: the reference formula, for plots and tables (not the kernel). An
    /// auto width is taken at σ = 1 (fix it first with [`Self::at_spread`]).
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// let c = HlgCurve::default();             // width 3, shoulder 2
    /// assert_eq!(c.g1(1.5), 1.5);               // mid: identity
    /// assert!((c.g1(5.0) - (3.0 + 2.0 * 2f64.ln())).abs() < 1e-12);
    /// ```
    pub fn g1(&self, z: f64) -> f64 {
        let Some(w) = self.p.width.map(|w| f64::from(w.at(1.0))) else {
            return z;
        };
        if z > w {
            let Some(b) = self.p.shoulder.map(f64::from) else {
                return z;
            };
            w + b * ((z - w) / b).ln_1p()
        } else if z < -w {
            let Some(b) = self.p.toe.map(f64::from) else {
                return z;
            };
            -w - toe_drop_f64(self.p.toe_shape, -z - w, b)
        } else {
            z
        }
    }

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
        Some(self.knees_of(logits, m).0)
    }

    /// The pivot `c` and the half-width `w` (nats) for a vector whose finite max is `m`:
    /// one pass of weighted sums serves both the entropy pivot and σ.
    fn knees_of(&self, logits: &[f32], m: f32) -> (f32, f32) {
        let moments = (self.is_auto() || self.p.pivot == Pivot::Entropy)
            .then(|| kernel::pivot::moments(logits, m));
        let sigma = moments
            .filter(|_| self.is_auto())
            .map_or(0.0, |mo| mo.spread(logits.len()));
        let w = self.p.width.map_or(f32::INFINITY, |w| w.at(sigma));
        let c = match self.p.pivot {
            Pivot::Top => m - self.p.pivot_offset.at(sigma),
            Pivot::Entropy => moments.expect("computed for the entropy pivot").center(m),
            Pivot::Median => kernel::pivot::mass_median(logits, m),
        };
        (c, w)
    }

    /// Applies the curve in place, at unit gain (the host divides by the temperature
    /// afterwards). Single-threaded; never panics; never introduces a NaN; `-inf`, `+inf`
    /// and NaN entries come back unchanged, and so does a vector without finite entries.
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// let mut x = [0.0, -1.0, f32::NAN, -30.0];
    /// HlgCurve::default().apply(&mut x);
    /// assert_eq!(x[1], -1.0);   // mid band: untouched
    /// assert!(x[2].is_nan());   // non-finite: passed through
    /// assert!(x[3] < -30.0);    // quadratic toe: held down
    /// ```
    pub fn apply(&self, logits: &mut [f32]) {
        if self.is_identity() {
            return;
        }
        let Some(m) = kernel::pivot::finite_max(logits) else {
            return;
        };
        let (c, w) = self.knees_of(logits, m);
        let knee = kernel::toe::Knee::new(c, w, self);
        kernel::toe::transform(logits, &knee, self.p.toe_shape);
    }

    /// Applies the curve to each row of a row-major `[B, V]` buffer, with a pivot per
    /// row. `data.len()` must be a multiple of `row_len`; a ragged end is left as is.
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// let mut batch = vec![0.0, -30.0, 100.0, 70.0];   // two rows of two
    /// HlgCurve::default().apply_rows(&mut batch, 2);
    /// // The second row is the first shifted by 100: same shape, shifted by 100.
    /// assert!(((batch[0] - batch[1]) - (batch[2] - batch[3])).abs() < 1e-4);
    /// ```
    pub fn apply_rows(&self, data: &mut [f32], row_len: usize) {
        if row_len == 0 {
            return;
        }
        for row in data.chunks_exact_mut(row_len) {
            self.apply(row);
        }
    }
}

/// A knob's value checked against its field's range; `None` (off) passes.
fn checked(field: Field, v: Option<f32>) -> Result<Option<f32>, HlgError> {
    v.map(|v| HlgError::check(field, v.into())).transpose()
}

/// The toe's drop `T(d)` below the lower knee in `f64` with the standard library's
/// functions: the reference formula ([`HlgCurve::g1`]), not the kernel's.
fn toe_drop_f64(shape: ToeShape, d: f64, b: f64) -> f64 {
    match shape {
        ToeShape::Log => b * (d / b).ln_1p(),
        ToeShape::Quadratic => d + d * d / (2.0 * b),
        ToeShape::Exp => b * (d / b).exp_m1(),
    }
}
