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
use crate::fastmath;

/// The built-in `pivot_offset` of the `top` pivot, in nats.
pub const DEFAULT_PIVOT_OFFSET: f32 = 4.0;

/// The smallest accepted shoulder or toe, in nats. Smaller values make `d/β` overflow
/// for ordinary logits and mean nothing as a rolloff.
pub const MIN_BETA: f32 = 1e-6;

/// Where the curve is centred, computed per vector from the untempered distribution
/// `p = softmax(x)` over its finite entries.
///
/// ```
/// use mistralrs_hlg::{HlgCurve, Pivot};
///
/// let curve = HlgCurve::default().with_pivot(Pivot::Entropy).unwrap();
/// // Two equally likely tokens: the centre of mass is their common logit.
/// assert_eq!(curve.pivot_of(&[1.0, 1.0]), Some(1.0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pivot {
    /// `c = max(x) − offset`; `offset ≥ 0` nats. One max; the default.
    Top {
        /// Nats below the top token.
        offset: f32,
    },
    /// `c = Σ pᵢ·xᵢ`, the distribution's centre of mass (`lse − H`).
    Entropy,
    /// The `x` at which the cumulative mass, tokens taken in descending order, first
    /// reaches ½. Found by selection (expected O(V)), not by sorting.
    Median,
}

impl Pivot {
    /// The pivot mode's name as it is spelled in the `hlg` object.
    pub fn name(&self) -> &'static str {
        match self {
            Pivot::Top { .. } => "top",
            Pivot::Entropy => "entropy",
            Pivot::Median => "median",
        }
    }
}

/// The shape of the toe (the low-probability side of the curve).
///
/// ```
/// use mistralrs_hlg::ToeShape;
///
/// assert_eq!("quadratic".parse::<ToeShape>(), Ok(ToeShape::Quadratic));
/// assert_eq!(ToeShape::Exp.name(), "exp");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ToeShape {
    /// `−w − β·ln(1 + d/β)`: the design's toe. Its slope falls toward 0, so it *raises*
    /// far-tail logits toward the pivot and adds tail mass.
    Log,
    /// `−w − d − d²/(2β)`: slope `1 + d/β`, holds the tail down. The shipped default.
    #[default]
    Quadratic,
    /// `−w − β·(exp(d/β) − 1)`: slope `exp(d/β)`, holds the tail down hardest.
    Exp,
}

impl ToeShape {
    /// Every shape, in the order of the docs.
    pub const ALL: [ToeShape; 3] = [ToeShape::Log, ToeShape::Quadratic, ToeShape::Exp];

    /// The name as it is spelled in the `hlg` object.
    pub fn name(&self) -> &'static str {
        match self {
            ToeShape::Log => "log",
            ToeShape::Quadratic => "quadratic",
            ToeShape::Exp => "exp",
        }
    }
}

impl std::str::FromStr for ToeShape {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        ToeShape::ALL.into_iter().find(|t| t.name() == s).ok_or(())
    }
}

/// A validated HLG curve: pivot, mid width, shoulder and toe.
///
/// `None` for `width` means "off" (the identity); `None` for `shoulder` or `toe` means
/// that side continues linearly (its entries are returned untouched).
///
/// ```
/// use mistralrs_hlg::{HlgCurve, Pivot, ToeShape};
///
/// let curve = HlgCurve::new(Pivot::Top { offset: 6.0 }, Some(4.0), Some(4.0), Some(6.0), ToeShape::Log)?;
/// // c = 10 − 6 = 4: z = 6 (shoulder), 3 and 1 (mid), −24 (toe)
/// let mut logits = vec![10.0, 7.0, 5.0, -20.0, f32::NEG_INFINITY];
/// curve.apply(&mut logits);
/// assert_eq!(logits[1..3], [7.0, 5.0]);           // mid band (|z| ≤ 4): untouched
/// assert!(logits[0] < 10.0);                      // shoulder: the top is pulled down
/// assert!(logits[3] > -20.0);                     // log toe: the tail is lifted
/// assert_eq!(logits[4], f32::NEG_INFINITY);       // masked stays masked
/// # Ok::<(), mistralrs_hlg::HlgError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HlgCurve {
    pub(crate) pivot: Pivot,
    pub(crate) width: Option<f32>,
    pub(crate) shoulder: Option<f32>,
    pub(crate) toe: Option<f32>,
    pub(crate) toe_shape: ToeShape,
}

/// The built-in defaults, chosen by the evaluation (docs/RESULTS.md): `top` pivot 4 nats
/// below the top token, width 3, shoulder 2, toe 1, quadratic toe. At a fixed temperature
/// they hold the tail down (less tail mass and entropy than plain temperature) and spread
/// the top a little; the design note's point (offset 6, width 4, shoulder 4, toe 6, log
/// toe) adds tail mass instead and stays reachable through the knobs.
impl Default for HlgCurve {
    fn default() -> Self {
        HlgCurve {
            pivot: Pivot::Top {
                offset: DEFAULT_PIVOT_OFFSET,
            },
            width: Some(3.0),
            shoulder: Some(2.0),
            toe: Some(1.0),
            toe_shape: ToeShape::Quadratic,
        }
    }
}

impl HlgCurve {
    /// A curve from its parameters, validated: `offset, width ∈ [0, MAX_NATS]`,
    /// `shoulder, toe ∈ [MIN_BETA, MAX_NATS]`.
    pub fn new(
        pivot: Pivot,
        width: Option<f32>,
        shoulder: Option<f32>,
        toe: Option<f32>,
        toe_shape: ToeShape,
    ) -> Result<Self, HlgError> {
        HlgCurve::default()
            .with_pivot(pivot)?
            .with_width(width)?
            .with_shoulder(shoulder)?
            .with_toe(toe)
            .map(|c| c.with_toe_shape(toe_shape))
    }

    /// The curve that returns every input bit for bit (width off).
    pub fn identity() -> Self {
        HlgCurve {
            width: None,
            ..HlgCurve::default()
        }
    }

    /// This curve with another pivot; `offset` must be finite and `≥ 0`.
    pub fn with_pivot(mut self, pivot: Pivot) -> Result<Self, HlgError> {
        if let Pivot::Top { offset } = pivot {
            PIVOT_OFFSET.check(offset.into())?;
        }
        self.pivot = pivot;
        Ok(self)
    }

    /// This curve with another mid width (nats, finite, `≥ 0`), or `None` for off.
    pub fn with_width(mut self, width: Option<f32>) -> Result<Self, HlgError> {
        self.width = width.map(|v| WIDTH.check(v.into())).transpose()?;
        Ok(self)
    }

    /// This curve with another shoulder (nats, finite, `≥ MIN_BETA`), or `None` for off.
    pub fn with_shoulder(mut self, shoulder: Option<f32>) -> Result<Self, HlgError> {
        self.shoulder = shoulder.map(|v| SHOULDER.check(v.into())).transpose()?;
        Ok(self)
    }

    /// This curve with another toe (nats, finite, `≥ MIN_BETA`), or `None` for off.
    pub fn with_toe(mut self, toe: Option<f32>) -> Result<Self, HlgError> {
        self.toe = toe.map(|v| TOE.check(v.into())).transpose()?;
        Ok(self)
    }

    /// This curve with another toe shape.
    pub fn with_toe_shape(mut self, toe_shape: ToeShape) -> Self {
        self.toe_shape = toe_shape;
        self
    }

    /// The pivot mode.
    pub fn pivot(&self) -> Pivot {
        self.pivot
    }
    /// The mid width in nats, `None` when off.
    pub fn width(&self) -> Option<f32> {
        self.width
    }
    /// The shoulder in nats, `None` when off.
    pub fn shoulder(&self) -> Option<f32> {
        self.shoulder
    }
    /// The toe in nats, `None` when off.
    pub fn toe(&self) -> Option<f32> {
        self.toe
    }
    /// The toe shape.
    pub fn toe_shape(&self) -> ToeShape {
        self.toe_shape
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
        self.width.is_none() || (self.shoulder.is_none() && self.toe.is_none())
    }

    /// The unit-gain curve `g₁(z)` at one point, in `f64` with the standard library's
    /// `ln_1p`/`exp_m1`: the reference formula, for plots and tables (not the kernel).
    ///
    /// ```
    /// use mistralrs_hlg::HlgCurve;
    /// let c = HlgCurve::default();             // width 3, shoulder 2
    /// assert_eq!(c.g1(1.5), 1.5);               // mid: identity
    /// assert!((c.g1(5.0) - (3.0 + 2.0 * 2f64.ln())).abs() < 1e-12);
    /// ```
    pub fn g1(&self, z: f64) -> f64 {
        let Some(w) = self.width.map(f64::from) else {
            return z;
        };
        if z > w {
            let Some(b) = self.shoulder.map(f64::from) else {
                return z;
            };
            w + b * ((z - w) / b).ln_1p()
        } else if z < -w {
            let Some(b) = self.toe.map(f64::from) else {
                return z;
            };
            let d = -z - w;
            -w - match self.toe_shape {
                ToeShape::Log => b * (d / b).ln_1p(),
                ToeShape::Quadratic => d + d * d / (2.0 * b),
                ToeShape::Exp => b * (d / b).exp_m1(),
            }
        } else {
            z
        }
    }

    /// The pivot `c` in raw-logit space for this vector, over its finite entries;
    /// `None` when it has no finite entry.
    pub fn pivot_of(&self, logits: &[f32]) -> Option<f32> {
        let m = kernel::finite_max(logits)?;
        Some(match self.pivot {
            Pivot::Top { offset } => m - offset,
            Pivot::Entropy => kernel::entropy_center(logits, m),
            Pivot::Median => kernel::mass_median(logits, m),
        })
    }

    /// Applies the curve in place, at unit gain (the host divides by the temperature
    /// afterwards). Single-threaded; never panics; never introduces a NaN; `-inf`, `+inf`
    /// and NaN entries come back unchanged, and so does a vector without finite entries.
    pub fn apply(&self, logits: &mut [f32]) {
        if self.is_identity() {
            return;
        }
        let Some(c) = self.pivot_of(logits) else {
            return;
        };
        let knee = kernel::Knee::new(c, self);
        kernel::transform(logits, &knee, self.toe_shape);
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

/// The largest value of every numeric parameter, in nats. Logits span tens of nats, so
/// nothing useful lies beyond; the bound keeps the curve finite: the shoulder's
/// `(z − w)/β` stays below 1e9 for the top token, and `max − offset` keeps the logits'
/// precision (an offset of 1e8 rounds every logit to a multiple of 8, and 1e33 with a
/// tiny shoulder sent every finite logit to +inf).
pub const MAX_NATS: f32 = 1000.0;

/// The accepted range of one numeric parameter: finite, `min ≤ v ≤ MAX_NATS`.
pub(crate) struct Range {
    pub(crate) param: &'static str,
    min: f64,
    pub(crate) expected: &'static str,
}

pub(crate) const PIVOT_OFFSET: Range = Range {
    param: "hlg.pivot_offset",
    min: 0.0,
    expected: "a number in [0, 1000]",
};
pub(crate) const WIDTH: Range = Range {
    param: "hlg.width",
    min: 0.0,
    expected: "a number in [0, 1000] or \"off\"",
};
pub(crate) const SHOULDER: Range = Range {
    param: "hlg.shoulder",
    min: MIN_BETA as f64,
    expected: "a number in [1e-6, 1000] or \"off\"",
};
pub(crate) const TOE: Range = Range {
    param: "hlg.toe",
    min: MIN_BETA as f64,
    expected: "a number in [1e-6, 1000] or \"off\"",
};

impl Range {
    /// The smallest accepted value.
    pub(crate) fn min(&self) -> f64 {
        self.min
    }

    /// The value as an `f32`, or the error naming the parameter and its range. A value
    /// beyond `f32`'s range is rejected, never rounded to infinity.
    pub(crate) fn check(&self, v: f64) -> Result<f32, HlgError> {
        if v.is_finite() && v >= self.min() && v <= MAX_NATS as f64 {
            Ok(v as f32)
        } else {
            Err(self.error(crate::config::render_number(v)))
        }
    }

    pub(crate) fn error(&self, got: String) -> HlgError {
        HlgError::InvalidValue {
            param: self.param.to_string(),
            expected: self.expected,
            got,
        }
    }
}

/// The slice kernels. Each hot loop is written once as an `#[inline(always)]` body,
/// generic over the multiply-add ([`fastmath::Madd`]), and instantiated twice: for the
/// baseline target with separate multiplies and adds, and, picked at run time, for AVX2
/// with FMA. The two agree within the documented error of `fastmath` (last bits may
/// differ); both are monotone and both are tested.
pub(crate) mod kernel {
    use super::{fastmath, HlgCurve, ToeShape};
    use fastmath::{Fused, Madd, Plain};

    #[cfg(target_arch = "x86_64")]
    mod avx2;

    const LANES: usize = 8;
    const BLOCK: usize = 512;
    /// Chunk for the shoulder check: a chunk is revisited only if it has a shoulder entry.
    const CHUNK: usize = 64;

    /// Whether the AVX2 + FMA instantiation runs: the CPU has both, and the environment
    /// does not ask for the baseline (`MISTRALRS_HLG_KERNEL=baseline`, which the test
    /// script uses to run the property tests through both). Decided once per process.
    #[cfg(target_arch = "x86_64")]
    fn fast_path() -> bool {
        static FAST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *FAST.get_or_init(|| {
            std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("fma")
                && std::env::var("MISTRALRS_HLG_KERNEL").map_or(true, |v| v != "baseline")
        })
    }

    macro_rules! dispatch {
        ($(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $body:ident;) => {
            $(#[$m])*
            pub(crate) fn $name($($arg: $ty),*) -> $ret {
                #[cfg(target_arch = "x86_64")]
                {
                    if fast_path() {
                        #[target_feature(enable = "avx2,fma")]
                        unsafe fn avx2($($arg: $ty),*) -> $ret {
                            $body::<Fused>($($arg),*)
                        }
                        // SAFETY: AVX2 and FMA are present, checked just above.
                        return unsafe { avx2($($arg),*) };
                    }
                }
                $body::<Plain>($($arg),*)
            }
        };
        // With a hand-written AVX2 + FMA function (`avx2` module) for the fast path.
        ($(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $fast:path | $body:ident;) => {
            $(#[$m])*
            pub(crate) fn $name($($arg: $ty),*) -> $ret {
                #[cfg(target_arch = "x86_64")]
                if fast_path() {
                    // SAFETY: AVX2 and FMA are present, checked just above.
                    return unsafe { $fast($($arg),*) };
                }
                $body::<Plain>($($arg),*)
            }
        };
    }

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

    dispatch! {
        /// `(Σ e, Σ e·t)` with `e = exp(t)`, `t = x − m`, over finite entries; blocks of
        /// f32 lanes summed into f64.
        fn weighted_sums(x: &[f32], m: f32) -> (f64, f64) = avx2::weighted_sums | weighted_sums_body;
    }

    #[inline(always)]
    fn weighted_sums_body<M: Madd>(x: &[f32], m: f32) -> (f64, f64) {
        // One running sum per position in a block (a vector of them in each register):
        // an element-wise update that vectorises, where one ordered running sum would not
        // (float addition is not associative). The 512 sums are added pairwise at the end.
        let (mut ae, mut aet) = ([0f32; BLOCK], [0f32; BLOCK]);
        for block in x.chunks(BLOCK) {
            for ((&v, se), set) in block.iter().zip(ae.iter_mut()).zip(aet.iter_mut()) {
                let t = shifted(v, m);
                let e = fastmath::exp_neg::<M>(t);
                *se += e;
                *set = M::madd(e, t, *set);
            }
        }
        (tree_sum(&mut ae), tree_sum(&mut aet))
    }

    /// The entropy pivot `Σ p·x = m + Σ e·(x − m) / Σ e`.
    pub(crate) fn entropy_center(x: &[f32], m: f32) -> f32 {
        let (se, set) = weighted_sums(x, m);
        m + (set / se) as f32
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
        pub(crate) fn new(c: f32, curve: &HlgCurve) -> Self {
            let w = curve.width.unwrap_or(f32::INFINITY);
            let bh = curve.shoulder.unwrap_or(1.0);
            let bt = curve.toe.unwrap_or(1.0);
            Knee {
                c,
                w,
                c_hi: c + w,
                c_lo: c - w,
                thr_hi: if curve.shoulder.is_some() {
                    w
                } else {
                    f32::INFINITY
                },
                thr_lo: if curve.toe.is_some() {
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
}
