//! The curve's parameters, declared once: the pivot modes, the toe shapes, the nine
//! fields of the `hlg` object with their flags and accepted values, and the bounds.
//!
//! This is the bottom layer of the crate: it depends on nothing else in it. The error
//! type, the curve, the request object, the flags, the OpenAPI schema and the clap value
//! lists all read their names and ranges from here, so a new pivot mode or toe shape is
//! one variant below plus its math in each backend (the compiler lists the matches).
//!
//! ```
//! use mistralrs_hlg::params::{Field, Pivot, ToeShape};
//!
//! assert_eq!("median".parse::<Pivot>(), Ok(Pivot::Median));
//! assert_eq!(ToeShape::Exp.name(), "exp");
//! assert_eq!(Field::Toe.flag(), "hlg-toe");
//! assert_eq!(Field::Toe.expected(), r#"a number in [1e-6, 1000] or "off""#);
//! ```

use std::fmt;

/// The largest value of every numeric parameter, in nats. Logits span tens of nats, so
/// nothing useful lies beyond; the bound keeps the curve finite: the shoulder's
/// `(z − w)/β` stays below 1e9 for the top token, and `max − offset` keeps the logits'
/// precision (an offset of 1e8 rounds every logit to a multiple of 8, and 1e33 with a
/// tiny shoulder sent every finite logit to +inf).
///
/// ```
/// use mistralrs_hlg::params::{Range, MAX_NATS};
/// assert_eq!(Range::NATS.accepts(MAX_NATS.into()), Some(1000.0));
/// assert_eq!(Range::NATS.accepts(1000.5), None);
/// ```
pub const MAX_NATS: f32 = 1000.0;

/// The smallest accepted shoulder or toe, in nats. Smaller values make `d/β` overflow
/// for ordinary logits and mean nothing as a rolloff.
///
/// ```
/// use mistralrs_hlg::{params::MIN_BETA, HlgCurve};
/// assert!(HlgCurve::default().with_toe(Some(MIN_BETA)).is_ok());
/// assert!(HlgCurve::default().with_toe(Some(MIN_BETA / 2.0)).is_err());
/// ```
pub const MIN_BETA: f32 = 1e-6;

/// The built-in `pivot_offset` of the `top` pivot, in nats.
///
/// ```
/// use mistralrs_hlg::{params::DEFAULT_PIVOT_OFFSET, HlgCurve};
/// assert_eq!(HlgCurve::default().pivot_of(&[10.0, 0.0]), Some(10.0 - DEFAULT_PIVOT_OFFSET));
/// ```
pub const DEFAULT_PIVOT_OFFSET: f32 = 4.0;

/// The built-in pivot mode.
///
/// ```
/// use mistralrs_hlg::{params::DEFAULT_PIVOT, HlgCurve, Pivot};
/// assert_eq!((DEFAULT_PIVOT, HlgCurve::default().pivot()), (Pivot::Top, Pivot::Top));
/// ```
pub const DEFAULT_PIVOT: Pivot = Pivot::Top;

/// The built-in half-width of the linear mid band, in nats (`None` would be "off").
///
/// ```
/// use mistralrs_hlg::{params::{Span, DEFAULT_WIDTH}, HlgCurve};
/// assert_eq!(HlgCurve::default().width(), DEFAULT_WIDTH.map(Span::Nats));
/// ```
pub const DEFAULT_WIDTH: Option<f32> = Some(3.0);

/// The built-in shoulder β_h, in nats.
///
/// ```
/// use mistralrs_hlg::{params::DEFAULT_SHOULDER, HlgCurve};
/// assert_eq!(HlgCurve::default().shoulder(), DEFAULT_SHOULDER);
/// ```
pub const DEFAULT_SHOULDER: Option<f32> = Some(2.0);

/// The built-in toe β_t, in nats.
///
/// ```
/// use mistralrs_hlg::{params::DEFAULT_TOE, HlgCurve};
/// assert_eq!(HlgCurve::default().toe(), DEFAULT_TOE);
/// ```
pub const DEFAULT_TOE: Option<f32> = Some(1.0);

/// The built-in toe shape.
///
/// ```
/// use mistralrs_hlg::{params::DEFAULT_TOE_SHAPE, HlgCurve, ToeShape};
/// assert_eq!(HlgCurve::default().toe_shape(), DEFAULT_TOE_SHAPE);
/// assert_eq!(DEFAULT_TOE_SHAPE, ToeShape::Quadratic);
/// ```
pub const DEFAULT_TOE_SHAPE: ToeShape = ToeShape::Quadratic;

/// `"a|b|c"` from `"a", "b", "c"`.
macro_rules! joined {
    ($first:literal $(, $rest:literal)*) => {
        concat!($first $(, "|", $rest)*)
    };
}

/// An enumeration whose variants are spelled in the `hlg` object: the variants, their
/// names, `ALL` in the order of the docs, `NAMES`, `FromStr` and `Display`, from one list.
macro_rules! spelled_enum {
    (
        $(#[$m:meta])*
        pub enum $ty:ident {
            $( $(#[$vm:meta])* $variant:ident = $name:literal, )+
        }
    ) => {
        $(#[$m])*
        pub enum $ty {
            $( $(#[$vm])* $variant, )+
        }

        impl $ty {
            /// Every variant, in the order of the docs.
            #[doc = concat!("\n```\nuse mistralrs_hlg::params::", stringify!($ty), ";\nlet all = ",
                stringify!($ty), "::ALL;\nassert!(all.iter().enumerate().all(|(i, v)| all[..i].iter().all(|u| u != v)));\n```")]
            pub const ALL: [$ty; [$($name),+].len()] = [$($ty::$variant),+];
            /// Every variant's name, in the order of [`Self::ALL`].
            #[doc = concat!("\n```\nuse mistralrs_hlg::params::", stringify!($ty), ";\nlet names: Vec<_> = ",
                stringify!($ty), "::ALL.iter().map(|v| v.name()).collect();\nassert_eq!(names, ", stringify!($ty), "::NAMES);\n```")]
            pub const NAMES: &'static [&'static str] = &[$($name),+];
            /// The names as a command line shows them (`a|b|c`).
            #[doc = concat!("\n```\nuse mistralrs_hlg::params::", stringify!($ty), ";\nassert_eq!(",
                stringify!($ty), "::VALUE_NAME, ", stringify!($ty), "::NAMES.join(\"|\"));\n```")]
            pub const VALUE_NAME: &'static str = joined!($($name),+);

            /// The name as it is spelled in the `hlg` object and on the command line.
            #[doc = concat!("\n```\nuse mistralrs_hlg::params::", stringify!($ty), ";\nfor v in ",
                stringify!($ty), "::ALL {\n    assert_eq!(v.name().parse::<", stringify!($ty), ">(), Ok(v));\n    assert_eq!(v.to_string(), v.name());\n}\n```")]
            pub const fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }

            /// `one of "a", "b", "c"`: the accepted names, for error messages.
            #[doc = concat!("\n```\nuse mistralrs_hlg::params::", stringify!($ty), ";\nlet e = \"nope\".parse::<",
                stringify!($ty), ">().unwrap_err();\nassert_eq!(e.expected, ", stringify!($ty),
                "::expected());\nassert!(e.expected.starts_with(\"one of \\\"\"));\n```")]
            pub fn expected() -> String {
                one_of(Self::NAMES)
            }
        }

        impl std::str::FromStr for $ty {
            type Err = UnknownName;

            fn from_str(s: &str) -> Result<Self, UnknownName> {
                Self::ALL
                    .into_iter()
                    .find(|v| v.name() == s)
                    .ok_or_else(|| UnknownName { got: s.to_string(), expected: Self::expected() })
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

/// A name that none of an enumeration's variants has.
///
/// ```
/// use mistralrs_hlg::ToeShape;
/// let e = "cubic".parse::<ToeShape>().unwrap_err();
/// assert_eq!(e.to_string(), r#"expected one of "log", "quadratic", "exp", got "cubic""#);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected {expected}, got {got:?}")]
pub struct UnknownName {
    /// What was given.
    pub got: String,
    /// The accepted names, in words (`one of "log", "quadratic", "exp"`).
    pub expected: String,
}

spelled_enum! {
    /// Where the curve is centred, computed per vector from the untempered distribution
    /// `p = softmax(x)` over its finite entries.
    ///
    /// ```
    /// use mistralrs_hlg::{HlgCurve, Pivot};
    ///
    /// let curve = HlgCurve::default().with_pivot(Pivot::Entropy);
    /// // Two equally likely tokens: the centre of mass is their common logit.
    /// assert_eq!(curve.pivot_of(&[1.0, 1.0]), Some(1.0));
    /// ```
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub enum Pivot {
        /// `c = max(x) − pivot_offset`: one max; the default.
        #[default]
        Top = "top",
        /// `c = Σ pᵢ·xᵢ`, the distribution's centre of mass (`lse − H`).
        Entropy = "entropy",
        /// The `x` at which the cumulative mass, tokens taken in descending order, first
        /// reaches ½. Found by selection (expected O(V)), not by sorting.
        Median = "median",
    }
}

spelled_enum! {
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
        Log = "log",
        /// `−w − d − d²/(2β)`: slope `1 + d/β`, holds the tail down. The shipped default.
        #[default]
        Quadratic = "quadratic",
        /// `−w − β·(exp(d/β) − 1)`: slope `exp(d/β)`, holds the tail down hardest.
        Exp = "exp",
    }
}

/// The accepted range of a numeric parameter: finite, `min ≤ v ≤ MAX_NATS`.
///
/// ```
/// use mistralrs_hlg::params::{Field, Kind, Range};
/// assert_eq!(Field::Width.kind(), Kind::AutoKnob(Range::NATS));
/// assert_eq!((Range::NATS.min(), Range::NATS.max()), (0.0, 1000.0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    min: f32,
}

impl Range {
    /// Offsets and widths: `[0, MAX_NATS]`.
    ///
    /// ```
    /// use mistralrs_hlg::params::Range;
    /// assert_eq!(Range::NATS.accepts(0.0), Some(0.0));
    /// ```
    pub const NATS: Range = Range { min: 0.0 };
    /// Shoulders and toes: `[MIN_BETA, MAX_NATS]`.
    ///
    /// ```
    /// use mistralrs_hlg::params::{Range, MIN_BETA};
    /// assert_eq!(Range::BETA.min(), f64::from(MIN_BETA));
    /// ```
    pub const BETA: Range = Range { min: MIN_BETA };

    /// The smallest accepted value.
    ///
    /// ```
    /// use mistralrs_hlg::params::Range;
    /// assert_eq!(Range::NATS.min(), 0.0);
    /// ```
    pub fn min(&self) -> f64 {
        self.min.into()
    }

    /// The largest accepted value ([`MAX_NATS`]).
    ///
    /// ```
    /// use mistralrs_hlg::params::{Range, MAX_NATS};
    /// assert_eq!(Range::BETA.max(), f64::from(MAX_NATS));
    /// ```
    pub fn max(&self) -> f64 {
        MAX_NATS.into()
    }

    /// The value as an `f32` when it is accepted. A value beyond `f32`'s range is
    /// rejected, never rounded to infinity.
    ///
    /// ```
    /// use mistralrs_hlg::params::Range;
    /// assert_eq!(Range::BETA.accepts(2.5), Some(2.5));
    /// assert_eq!(Range::BETA.accepts(0.0), None);
    /// assert_eq!(Range::NATS.accepts(f64::NAN), None);
    /// ```
    pub fn accepts(&self, v: f64) -> Option<f32> {
        (v.is_finite() && v >= self.min() && v <= self.max()).then_some(v as f32)
    }

    /// `[1e-6, 1000]`.
    ///
    /// ```
    /// use mistralrs_hlg::params::Range;
    /// assert_eq!((Range::BETA.interval(), Range::NATS.interval()), ("[1e-6, 1000]".into(), "[0, 1000]".into()));
    /// ```
    pub fn interval(&self) -> String {
        format!("[{}, {}]", render_bound(self.min), render_bound(MAX_NATS))
    }
}

/// What a field accepts.
///
/// ```
/// use mistralrs_hlg::params::{Field, Kind, Range};
/// assert_eq!(Field::Enabled.kind(), Kind::Switch);
/// assert_eq!(Field::PivotOffset.kind(), Kind::Auto(Range::NATS));
/// assert!(matches!(Field::Pivot.kind(), Kind::Name(_, "top|entropy|median")));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// A boolean, or `"on"`/`"off"` (the flag's spelling).
    Switch,
    /// One of the names of an enumeration ([`Pivot::NAMES`], [`ToeShape::NAMES`]), with
    /// their `a|b|c` form.
    Name(&'static [&'static str], &'static str),
    /// A number in the range.
    Number(Range),
    /// A number in the range, or `"off"`.
    Knob(Range),
    /// A number in the range, or `"auto"` (a multiple of each distribution's spread).
    Auto(Range),
    /// A number in the range, `"auto"` or `"off"`.
    AutoKnob(Range),
}

/// A length of the curve: fixed in nats, or a multiple of each distribution's spread σ,
/// the standard deviation of the log-probabilities under the distribution itself
/// (σ² = Σ pᵢ (ℓᵢ + H)², H the entropy; computed per vector, over its finite entries).
///
/// ```
/// use mistralrs_hlg::params::{Span, MAX_NATS};
/// assert_eq!(Span::Nats(3.0).at(2.0), 3.0);
/// assert_eq!(Span::Auto(1.5).at(2.0), 3.0);
/// assert_eq!(Span::Auto(1.5).at(0.0), 0.0);           // one finite token, or all equal
/// assert_eq!(Span::Auto(2.0).at(1e30), MAX_NATS);      // bounded like a fixed value
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Span {
    /// This many nats, whatever the distribution.
    Nats(f32),
    /// `scale · σ` nats, bounded by [`MAX_NATS`].
    Auto(f32),
}

impl Span {
    /// The length in nats for a distribution of spread `sigma` (`≥ 0`).
    pub fn at(self, sigma: f32) -> f32 {
        match self {
            Span::Nats(v) => v,
            // `min` also maps a NaN product (none arises: σ ≥ 0, finite) to the bound.
            Span::Auto(scale) => (scale * sigma).min(MAX_NATS),
        }
    }

    /// Whether it depends on the distribution.
    ///
    /// ```
    /// use mistralrs_hlg::params::Span;
    /// assert!(Span::Auto(1.0).is_auto() && !Span::Nats(1.0).is_auto());
    /// ```
    pub fn is_auto(self) -> bool {
        matches!(self, Span::Auto(_))
    }
}

/// `3` for 3 nats, `1.5σ` for an auto span.
///
/// ```
/// use mistralrs_hlg::params::Span;
/// assert_eq!((Span::Nats(3.0).to_string(), Span::Auto(1.5).to_string()), ("3".into(), "1.5σ".into()));
/// ```
impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Span::Nats(v) => write!(f, "{v}"),
            Span::Auto(k) => write!(f, "{k}σ"),
        }
    }
}

/// The built-in multiple of σ for `"width": "auto"` (`width_scale`), with
/// [`DEFAULT_PIVOT_OFFSET_SCALE`] the pair chosen by the offline sweep on both models'
/// captured logits (docs/RESULTS.md, "Auto mode"): of the 20 pairs, the one with the best
/// mean expected base log-probability among those whose tail mass, as a share of plain
/// temperature's, is at most the shipped fixed curve's.
///
/// ```
/// use mistralrs_hlg::{params::{Span, DEFAULT_WIDTH_SCALE}, HlgConfig};
/// let cfg: HlgConfig = serde_json::from_str(r#"{"width": "auto"}"#)?;
/// assert_eq!(cfg.curve().width(), Some(Span::Auto(DEFAULT_WIDTH_SCALE)));
/// # Ok::<(), serde_json::Error>(())
/// ```
pub const DEFAULT_WIDTH_SCALE: f32 = 1.5;

/// The built-in multiple of σ for `"pivot_offset": "auto"` (`pivot_offset_scale`).
///
/// ```
/// use mistralrs_hlg::{params::{Span, DEFAULT_PIVOT_OFFSET_SCALE}, HlgConfig};
/// let cfg: HlgConfig = serde_json::from_str(r#"{"pivot_offset": "auto"}"#)?;
/// assert_eq!(cfg.curve().pivot_offset(), Span::Auto(DEFAULT_PIVOT_OFFSET_SCALE));
/// # Ok::<(), serde_json::Error>(())
/// ```
pub const DEFAULT_PIVOT_OFFSET_SCALE: f32 = 3.0;

macro_rules! fields {
    ($( $variant:ident = $name:literal, $flag:literal, $kind:expr, $what:literal; )+) => {
        /// A field of the `hlg` object.
        ///
        /// ```
        /// use mistralrs_hlg::params::Field;
        /// let f = Field::PivotOffset;
        /// assert_eq!((f.name(), f.param(), f.flag()), ("pivot_offset", "hlg.pivot_offset", "hlg-pivot-offset"));
        /// ```
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Field {
            $( #[doc = $what] $variant, )+
        }

        impl Field {
            /// Every field, in the order of the docs.
            ///
            /// ```
            /// use mistralrs_hlg::params::Field;
            /// assert_eq!(Field::ALL.len(), 9);
            /// assert_eq!(Field::ALL[0], Field::Enabled);
            /// ```
            pub const ALL: [Field; [$($name),+].len()] = [$(Field::$variant),+];

            /// The name in the `hlg` object (`pivot_offset`).
            ///
            /// ```
            /// use mistralrs_hlg::params::Field;
            /// assert_eq!(Field::ToeShape.name(), "toe_shape");
            /// ```
            pub const fn name(self) -> &'static str {
                match self {
                    $(Field::$variant => $name,)+
                }
            }

            /// The request parameter, as OpenAI's error `param` (`hlg.pivot_offset`).
            ///
            /// ```
            /// use mistralrs_hlg::params::Field;
            /// assert!(Field::ALL.iter().all(|f| f.param() == format!("hlg.{}", f.name())));
            /// ```
            pub const fn param(self) -> &'static str {
                match self {
                    $(Field::$variant => concat!("hlg.", $name),)+
                }
            }

            /// The engine flag without `--`, also the config-file key (`hlg-pivot-offset`).
            ///
            /// ```
            /// use mistralrs_hlg::params::Field;
            /// assert_eq!(Field::Enabled.flag(), "hlg-sampling");
            /// assert!(Field::ALL.iter().all(|f| Field::from_flag(f.flag()) == Some(*f)));
            /// ```
            pub const fn flag(self) -> &'static str {
                match self {
                    $(Field::$variant => $flag,)+
                }
            }

            /// What the field accepts.
            ///
            /// ```
            /// use mistralrs_hlg::params::{Field, Kind, Range};
            /// assert_eq!(Field::Toe.kind(), Kind::Knob(Range::BETA));
            /// ```
            pub const fn kind(self) -> Kind {
                match self {
                    $(Field::$variant => $kind,)+
                }
            }

            /// What the field is, in a few words (the flags' help, the OpenAPI schema).
            ///
            /// ```
            /// use mistralrs_hlg::params::Field;
            /// assert_eq!(Field::Toe.description(), "Toe rolloff, in nats");
            /// ```
            pub const fn description(self) -> &'static str {
                match self {
                    $(Field::$variant => $what,)+
                }
            }
        }
    };
}

fields! {
    Enabled = "enabled", "hlg-sampling", Kind::Switch,
        "HLG on or off (as a flag: for every sampled request that does not say otherwise)";
    Pivot = "pivot", "hlg-pivot", Kind::Name(Pivot::NAMES, Pivot::VALUE_NAME),
        "Where the curve is centred";
    PivotOffset = "pivot_offset", "hlg-pivot-offset", Kind::Auto(Range::NATS),
        "Nats below the top token (pivot `top`); `auto`: `pivot_offset_scale`·σ";
    Width = "width", "hlg-width", Kind::AutoKnob(Range::NATS),
        "Half-width of the linear mid band, in nats; `auto`: `width_scale`·σ";
    Shoulder = "shoulder", "hlg-shoulder", Kind::Knob(Range::BETA), "Shoulder rolloff, in nats";
    Toe = "toe", "hlg-toe", Kind::Knob(Range::BETA), "Toe rolloff, in nats";
    ToeShape = "toe_shape", "hlg-toe-shape", Kind::Name(ToeShape::NAMES, ToeShape::VALUE_NAME),
        "The toe's shape";
    WidthScale = "width_scale", "hlg-width-scale", Kind::Number(Range::NATS),
        "With width `auto`: the width as a multiple of σ, the spread of the log-probabilities";
    PivotOffsetScale = "pivot_offset_scale", "hlg-pivot-offset-scale", Kind::Number(Range::NATS),
        "With pivot_offset `auto`: the offset as a multiple of σ, the spread of the log-probabilities";
}

impl Field {
    /// The field named so in the `hlg` object.
    ///
    /// ```
    /// use mistralrs_hlg::params::Field;
    /// assert_eq!(Field::from_name("width"), Some(Field::Width));
    /// assert_eq!(Field::from_name("Width"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The field a flag (without `--`) or config-file key sets; a config file may spell
    /// the key with underscores (`hlg_toe`).
    ///
    /// ```
    /// use mistralrs_hlg::params::Field;
    /// assert_eq!(Field::from_flag("hlg-sampling"), Some(Field::Enabled));
    /// assert_eq!(Field::from_flag("hlg_toe_shape"), Some(Field::ToeShape));
    /// assert_eq!(Field::from_flag("hlg-gain"), None);
    /// ```
    pub fn from_flag(flag: &str) -> Option<Field> {
        let dashed = flag.replace('_', "-");
        Field::ALL.into_iter().find(|f| f.flag() == dashed)
    }

    /// The accepted values in words, as error messages give them.
    ///
    /// ```
    /// use mistralrs_hlg::params::Field;
    /// assert_eq!(Field::Width.expected(), r#"a number in [0, 1000], "auto" or "off""#);
    /// assert_eq!(Field::Enabled.expected(), r#"a boolean (or "on"/"off")"#);
    /// ```
    pub fn expected(self) -> String {
        match self.kind() {
            Kind::Switch => r#"a boolean (or "on"/"off")"#.to_string(),
            Kind::Name(names, _) => one_of(names),
            Kind::Number(r) => format!("a number in {}", r.interval()),
            Kind::Knob(r) => format!("a number in {} or \"off\"", r.interval()),
            Kind::Auto(r) => format!("a number in {} or \"auto\"", r.interval()),
            Kind::AutoKnob(r) => format!("a number in {}, \"auto\" or \"off\"", r.interval()),
        }
    }

    /// The flag's help: what it is and what it accepts.
    ///
    /// ```
    /// use mistralrs_hlg::params::Field;
    /// assert_eq!(Field::Toe.help(), r#"HLG: Toe rolloff, in nats: a number in [1e-6, 1000] or "off"."#);
    /// ```
    pub fn help(self) -> String {
        format!("HLG: {}: {}.", self.description(), self.expected())
    }

    /// The value a command line shows for the flag (`NATS|off`, `top|entropy|median`).
    ///
    /// ```
    /// use mistralrs_hlg::params::Field;
    /// assert_eq!((Field::Width.value_name(), Field::Pivot.value_name()), ("NATS|auto|off", "top|entropy|median"));
    /// ```
    pub const fn value_name(self) -> &'static str {
        match self.kind() {
            Kind::Switch => "on|off",
            Kind::Name(_, joined) => joined,
            Kind::Number(_) => "NATS",
            Kind::Knob(_) => "NATS|off",
            Kind::Auto(_) => "NATS|auto",
            Kind::AutoKnob(_) => "NATS|auto|off",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `one of "a", "b"`.
fn one_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!("one of {}", quoted.join(", "))
}

/// A bound as the messages print it: `0`, `1000`, `1e-6`.
fn render_bound(v: f32) -> String {
    if v != 0.0 && v.abs() < 1e-3 {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// A number as it reads in an error message: `-2`, `0.5`, `1e40`.
///
/// ```
/// use mistralrs_hlg::params::render_number;
/// assert_eq!(render_number(-2.0), "-2");
/// assert_eq!(render_number(1e40), "1e40");
/// ```
pub fn render_number(v: f64) -> String {
    if v.is_finite() && (v == 0.0 || (1e-6..1e16).contains(&v.abs())) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_messages_read_as_before() {
        // The texts the validation snapshot and the docs carry, derived here.
        let want = [
            (Field::Enabled, r#"a boolean (or "on"/"off")"#),
            (Field::Pivot, r#"one of "top", "entropy", "median""#),
            (Field::PivotOffset, r#"a number in [0, 1000] or "auto""#),
            (Field::Width, r#"a number in [0, 1000], "auto" or "off""#),
            (Field::Shoulder, r#"a number in [1e-6, 1000] or "off""#),
            (Field::Toe, r#"a number in [1e-6, 1000] or "off""#),
            (Field::ToeShape, r#"one of "log", "quadratic", "exp""#),
            (Field::WidthScale, "a number in [0, 1000]"),
            (Field::PivotOffsetScale, "a number in [0, 1000]"),
        ];
        assert_eq!(want.len(), Field::ALL.len());
        for (field, text) in want {
            assert_eq!(field.expected(), text, "{field}");
        }
    }

    #[test]
    fn names_flags_and_params_round_trip() {
        for f in Field::ALL {
            assert_eq!(Field::from_name(f.name()), Some(f));
            assert_eq!(Field::from_flag(f.flag()), Some(f));
            assert_eq!(f.param(), format!("hlg.{}", f.name()));
            assert!(f.flag().starts_with("hlg-"));
        }
        for p in Pivot::ALL {
            assert_eq!(p.name().parse::<Pivot>(), Ok(p));
        }
        for s in ToeShape::ALL {
            assert_eq!(s.name().parse::<ToeShape>(), Ok(s));
        }
        assert_eq!(Field::Pivot.value_name(), "top|entropy|median");
        assert_eq!(Field::ToeShape.value_name(), "log|quadratic|exp");
        assert_eq!(
            "cubic".parse::<ToeShape>().unwrap_err().to_string(),
            r#"expected one of "log", "quadratic", "exp", got "cubic""#
        );
    }

    #[test]
    fn ranges_accept_their_bounds_and_nothing_beyond() {
        assert_eq!(Range::BETA.accepts(MIN_BETA.into()), Some(MIN_BETA));
        assert_eq!(Range::BETA.accepts(1e-7), None);
        assert_eq!(Range::NATS.accepts(0.0), Some(0.0));
        assert_eq!(Range::NATS.accepts(-0.0), Some(-0.0));
        assert_eq!(Range::NATS.accepts(1000.0), Some(1000.0));
        assert_eq!(Range::NATS.accepts(1000.0001), None);
        assert_eq!(Range::NATS.accepts(f64::INFINITY), None);
        assert_eq!(Range::NATS.accepts(1e300), None);
    }
}
