//! The `hlg` request object: serde, validation, and the precedence merge.
//!
//! One validator serves every edge: the JSON body of a request, the server's flags and
//! its TOML config file. It cannot hold an invalid value.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::curve::{CurveParts, HlgCurve};
use crate::error::HlgError;
use crate::params::{
    render_number, Field, Kind, Pivot, Span, ToeShape, DEFAULT_PIVOT_OFFSET_SCALE,
    DEFAULT_WIDTH_SCALE,
};

/// A length in nats, `"off"` (width, shoulder, toe) or `"auto"` (width, pivot offset).
///
/// ```
/// use mistralrs_hlg::{config::{Knob, Value}, params::Field, HlgConfig};
/// let cfg: HlgConfig = serde_json::from_str(r#"{"width": "off", "toe": 2}"#)?;
/// assert_eq!(cfg.get(Field::Width), Some(Value::Knob(Knob::Off)));
/// assert_eq!(cfg.get(Field::Toe), Some(Value::Knob(Knob::Nats(2.0))));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Knob {
    /// `"off"`: no mid band (width) or a linear continuation (shoulder, toe).
    Off,
    /// `"auto"`: a multiple of each distribution's spread σ (the field's `*_scale`).
    Auto,
    /// A value in nats, already validated for its field.
    Nats(f32),
}

impl Knob {
    /// The value in nats; `None` for off and auto.
    ///
    /// ```
    /// use mistralrs_hlg::config::Knob;
    /// assert_eq!((Knob::Nats(1.5).nats(), Knob::Off.nats(), Knob::Auto.nats()), (Some(1.5), None, None));
    /// ```
    pub fn nats(self) -> Option<f32> {
        match self {
            Knob::Off | Knob::Auto => None,
            Knob::Nats(v) => Some(v),
        }
    }

    /// As a [`Span`]: `None` for off, `scale`·σ for auto.
    fn span(self, scale: f32) -> Option<Span> {
        match self {
            Knob::Off => None,
            Knob::Auto => Some(Span::Auto(scale)),
            Knob::Nats(v) => Some(Span::Nats(v)),
        }
    }

    fn of(span: Option<Span>) -> Knob {
        match span {
            None => Knob::Off,
            Some(Span::Auto(_)) => Knob::Auto,
            Some(Span::Nats(v)) => Knob::Nats(v),
        }
    }
}

/// One value as received, before validation: the types a JSON or TOML value can have.
///
/// ```
/// use mistralrs_hlg::{config::RawValue, HlgConfig};
/// let mut cfg = HlgConfig::default();
/// cfg.set("toe", RawValue::Number(2.0))?;
/// cfg.set("width", RawValue::from_flag("off"))?;
/// assert!(cfg.set("toe", RawValue::Str("big".into())).is_err());
/// assert_eq!((cfg.curve().toe(), cfg.curve().width()), (Some(2.0), None));
/// # Ok::<(), mistralrs_hlg::HlgError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum RawValue {
    /// `true` / `false`.
    Bool(bool),
    /// Any number (JSON integers included).
    Number(f64),
    /// A string.
    Str(String),
    /// `null`.
    Null,
    /// An array or an object, named in words.
    Other(&'static str),
}

impl RawValue {
    /// A value from a command-line flag or a config-file string: a number when it parses
    /// as one, `on`/`off` for a switch left as text, anything else as text.
    ///
    /// ```
    /// use mistralrs_hlg::config::RawValue;
    /// assert_eq!(RawValue::from_flag("4.5"), RawValue::Number(4.5));
    /// assert_eq!(RawValue::from_flag("off"), RawValue::Str("off".into()));
    /// ```
    pub fn from_flag(s: &str) -> RawValue {
        let t = s.trim();
        // Rust parses "inf" and "NaN"; as flags those are text (and rejected).
        match t.parse::<f64>() {
            Ok(v) if v.is_finite() || t.chars().any(|c| c.is_ascii_digit()) => RawValue::Number(v),
            _ => RawValue::Str(t.to_string()),
        }
    }

    fn render(&self) -> String {
        match self {
            RawValue::Bool(b) => b.to_string(),
            RawValue::Number(v) => render_number(*v),
            RawValue::Str(s) => format!("{s:?}"),
            RawValue::Null => "null".to_string(),
            RawValue::Other(what) => what.to_string(),
        }
    }
}

/// The `hlg` object of a request, or the server's HLG defaults.
///
/// Every field is optional; [`HlgConfig::merged_over`] fills the missing ones from a
/// lower layer (request over server defaults), and [`HlgConfig::curve`] from the
/// built-in defaults. Deserialising validates: unknown fields, wrong types, values out
/// of range and numbers beyond `f32` are errors that name the field. `true` and `false`
/// are accepted as shorthand for `{"enabled": true}` and `{"enabled": false}`.
///
/// ```
/// use mistralrs_hlg::{HlgConfig, ToeShape};
///
/// let cfg: HlgConfig = serde_json::from_str(r#"{"toe": 3.5, "toe_shape": "exp"}"#)?;
/// let curve = cfg.curve();
/// assert_eq!(curve.toe(), Some(3.5));
/// assert_eq!(curve.toe_shape(), ToeShape::Exp);
/// assert_eq!(curve.width(), Some(mistralrs_hlg::params::Span::Nats(3.0))); // built-in default
///
/// let off: HlgConfig = serde_json::from_str("false")?;
/// assert_eq!(off.enabled(), Some(false));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HlgConfig {
    enabled: Option<bool>,
    pivot: Option<Pivot>,
    pivot_offset: Option<Knob>,
    width: Option<Knob>,
    shoulder: Option<Knob>,
    toe: Option<Knob>,
    toe_shape: Option<ToeShape>,
    width_scale: Option<f32>,
    pivot_offset_scale: Option<f32>,
}

impl HlgConfig {
    /// Sets one field from a raw value, validating it.
    ///
    /// `enabled` also takes `"on"`/`"off"` (the flag's spelling).
    ///
    /// ```
    /// use mistralrs_hlg::config::{HlgConfig, RawValue};
    /// let mut cfg = HlgConfig::default();
    /// cfg.set("width", RawValue::Str("off".into()))?;
    /// assert_eq!(cfg.curve().width(), None);
    /// let err = cfg.set("shoulder", RawValue::Number(0.0)).unwrap_err();
    /// assert_eq!(err.to_string(), r#"`hlg.shoulder` must be a number in [1e-6, 1000] or "off", got 0"#);
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn set(&mut self, field: &str, value: RawValue) -> Result<(), HlgError> {
        let f = Field::from_name(field).ok_or_else(|| HlgError::UnknownField {
            field: field.to_string(),
        })?;
        self.set_field(f, value)
    }

    /// [`Self::set`] for a field already known.
    ///
    /// ```
    /// use mistralrs_hlg::{config::RawValue, params::Field, HlgConfig, Pivot};
    /// let mut cfg = HlgConfig::default();
    /// cfg.set_field(Field::Pivot, RawValue::Str("entropy".into()))?;
    /// assert_eq!(cfg.curve().pivot(), Pivot::Entropy);
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn set_field(&mut self, field: Field, value: RawValue) -> Result<(), HlgError> {
        match field {
            Field::Enabled => self.enabled = Some(parse_switch(field, &value)?),
            Field::Pivot => self.pivot = Some(parse_name(field, &value)?),
            Field::PivotOffset => self.pivot_offset = Some(parse_knob(field, &value)?),
            Field::Width => self.width = Some(parse_knob(field, &value)?),
            Field::Shoulder => self.shoulder = Some(parse_knob(field, &value)?),
            Field::Toe => self.toe = Some(parse_knob(field, &value)?),
            Field::ToeShape => self.toe_shape = Some(parse_name(field, &value)?),
            Field::WidthScale => self.width_scale = Some(parse_number(field, &value)?),
            Field::PivotOffsetScale => self.pivot_offset_scale = Some(parse_number(field, &value)?),
        }
        Ok(())
    }

    /// One field as set, `None` when missing.
    ///
    /// ```
    /// use mistralrs_hlg::config::{HlgConfig, Knob, Value};
    /// use mistralrs_hlg::params::Field;
    /// let cfg = HlgConfig::from_pairs([("toe", "off")])?;
    /// assert_eq!(cfg.get(Field::Toe), Some(Value::Knob(Knob::Off)));
    /// assert_eq!(cfg.get(Field::Width), None);
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn get(&self, field: Field) -> Option<Value> {
        match field {
            Field::Enabled => self.enabled.map(Value::Switch),
            Field::Pivot => self.pivot.map(Value::Pivot),
            Field::PivotOffset => self.pivot_offset.map(Value::Knob),
            Field::Width => self.width.map(Value::Knob),
            Field::Shoulder => self.shoulder.map(Value::Knob),
            Field::Toe => self.toe.map(Value::Knob),
            Field::ToeShape => self.toe_shape.map(Value::ToeShape),
            Field::WidthScale => self.width_scale.map(Value::Number),
            Field::PivotOffsetScale => self.pivot_offset_scale.map(Value::Number),
        }
    }

    /// A config from `(field, text)` pairs, as flags and config files give them.
    ///
    /// ```
    /// use mistralrs_hlg::HlgConfig;
    /// let cfg = HlgConfig::from_pairs([("enabled", "on"), ("pivot", "median"), ("toe", "3")])?;
    /// assert_eq!(cfg.enabled(), Some(true));
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, HlgError> {
        let mut cfg = HlgConfig::default();
        for (field, text) in pairs {
            cfg.set(field, RawValue::from_flag(text))?;
        }
        cfg.check_scales()?;
        Ok(cfg)
    }

    /// Reads an `hlg` value from any serde deserializer, keeping the structured error:
    /// the outer `Result` fails only when the input itself is malformed, the inner one
    /// says which field is wrong. The server uses this to answer with `param`.
    ///
    /// ```
    /// use mistralrs_hlg::HlgConfig;
    /// let v = serde_json::json!({"width": "wide"});
    /// let err = HlgConfig::deserialize_checked(v)?.unwrap_err();
    /// assert_eq!(err.param(), "hlg.width");
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn deserialize_checked<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Result<Self, HlgError>, D::Error> {
        Ok(HlgConfig::from_raw(RawHlg::deserialize(d)?))
    }

    fn from_raw(raw: RawHlg) -> Result<Self, HlgError> {
        match raw {
            RawHlg::Bool(b) => Ok(HlgConfig {
                enabled: Some(b),
                ..HlgConfig::default()
            }),
            RawHlg::Map(pairs) => {
                let mut cfg = HlgConfig::default();
                for (field, value) in pairs {
                    cfg.set(&field, value)?;
                }
                cfg.check_scales()?;
                Ok(cfg)
            }
            RawHlg::Other(got) => Err(HlgError::NotAnObject { got }),
        }
    }

    /// A `*_scale` sent beside a fixed or off value of its field in the same object is
    /// an error naming the scale: it would have no effect. (A scale from a lower layer,
    /// the server's defaults, under a request's fixed value is simply not used.)
    ///
    /// ```
    /// use mistralrs_hlg::HlgConfig;
    /// let e = serde_json::from_str::<HlgConfig>(r#"{"width": 2, "width_scale": 1.5}"#).unwrap_err();
    /// assert!(e.to_string().starts_with("`hlg.width_scale` applies only with"), "{e}");
    /// assert!(serde_json::from_str::<HlgConfig>(r#"{"width": "auto", "width_scale": 1.5}"#).is_ok());
    /// assert!(serde_json::from_str::<HlgConfig>(r#"{"width_scale": 1.5}"#).is_ok());
    /// ```
    pub fn check_scales(&self) -> Result<(), HlgError> {
        let pairs = [
            (
                self.width,
                self.width_scale,
                Field::WidthScale,
                Field::Width,
            ),
            (
                self.pivot_offset,
                self.pivot_offset_scale,
                Field::PivotOffsetScale,
                Field::PivotOffset,
            ),
        ];
        for (value, scale, field, of) in pairs {
            if scale.is_some() && matches!(value, Some(Knob::Nats(_) | Knob::Off)) {
                return Err(HlgError::Unused { field, of });
            }
        }
        Ok(())
    }

    /// `enabled` as set, `None` when missing.
    ///
    /// ```
    /// use mistralrs_hlg::HlgConfig;
    /// let cfg: HlgConfig = serde_json::from_str(r#"{"toe": 2}"#)?;
    /// assert_eq!(cfg.enabled(), None, "not said: the server's default decides");
    /// assert_eq!(cfg.with_enabled(false).enabled(), Some(false));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn enabled(&self) -> Option<bool> {
        self.enabled
    }

    /// This config with `enabled` set.
    ///
    /// ```
    /// use mistralrs_hlg::HlgConfig;
    /// assert_eq!(HlgConfig::default().with_enabled(true).enabled(), Some(true));
    /// ```
    pub fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = Some(enabled);
        self
    }

    /// The fields of `self`, each falling back to `base`'s where missing.
    ///
    /// ```
    /// use mistralrs_hlg::HlgConfig;
    /// let server = HlgConfig::from_pairs([("width", "2"), ("toe", "5")])?;
    /// let request = HlgConfig::from_pairs([("toe", "3")])?;
    /// let curve = request.merged_over(&server).curve();
    /// assert_eq!((curve.width(), curve.toe()), (Some(mistralrs_hlg::params::Span::Nats(2.0)), Some(3.0)));
    /// # Ok::<(), mistralrs_hlg::HlgError>(())
    /// ```
    pub fn merged_over(&self, base: &HlgConfig) -> HlgConfig {
        HlgConfig {
            enabled: self.enabled.or(base.enabled),
            pivot: self.pivot.or(base.pivot),
            pivot_offset: self.pivot_offset.or(base.pivot_offset),
            width: self.width.or(base.width),
            shoulder: self.shoulder.or(base.shoulder),
            toe: self.toe.or(base.toe),
            toe_shape: self.toe_shape.or(base.toe_shape),
            width_scale: self.width_scale.or(base.width_scale),
            pivot_offset_scale: self.pivot_offset_scale.or(base.pivot_offset_scale),
        }
    }

    /// Every field filled: missing ones from the built-in defaults, `enabled` from
    /// `enabled_default`.
    ///
    /// ```
    /// use mistralrs_hlg::HlgConfig;
    /// let r = HlgConfig::default().resolved(false);
    /// assert_eq!(
    ///     serde_json::to_value(&r)?,
    ///     serde_json::json!({"enabled": false, "pivot": "top", "pivot_offset": 4.0, "width": 3.0,
    ///         "shoulder": 2.0, "toe": 1.0, "toe_shape": "quadratic"})
    /// );
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn resolved(&self, enabled_default: bool) -> HlgConfig {
        let c = self.curve();
        let knob = |v: Option<f32>| Some(v.map_or(Knob::Off, Knob::Nats));
        let scale = |span: Option<Span>| match span {
            Some(Span::Auto(k)) => Some(k),
            _ => None,
        };
        HlgConfig {
            enabled: Some(self.enabled.unwrap_or(enabled_default)),
            pivot: Some(c.pivot()),
            pivot_offset: Some(Knob::of(Some(c.pivot_offset()))),
            width: Some(Knob::of(c.width())),
            shoulder: knob(c.shoulder()),
            toe: knob(c.toe()),
            toe_shape: Some(c.toe_shape()),
            // Shown when in use: a scale only means something beside its "auto".
            width_scale: scale(c.width()),
            pivot_offset_scale: scale(Some(c.pivot_offset())),
        }
    }

    /// The curve: this config's fields over the built-in defaults of
    /// [`HlgCurve::default`]. `pivot_offset` matters only for the `top` pivot.
    ///
    /// ```
    /// use mistralrs_hlg::{HlgConfig, HlgCurve, Pivot};
    /// let cfg: HlgConfig = serde_json::from_str(r#"{"pivot": "median", "shoulder": "off"}"#)?;
    /// let c = cfg.curve();
    /// assert_eq!((c.pivot(), c.shoulder(), c.toe()), (Pivot::Median, None, HlgCurve::default().toe()));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn curve(&self) -> HlgCurve {
        let d = HlgCurve::default();
        let knob = |k: Option<Knob>, default: Option<f32>| k.map_or(default, Knob::nats);
        let width_scale = self.width_scale.unwrap_or(DEFAULT_WIDTH_SCALE);
        let offset_scale = self
            .pivot_offset_scale
            .unwrap_or(DEFAULT_PIVOT_OFFSET_SCALE);
        let width = self.width.map_or(d.width(), |k| k.span(width_scale));
        let offset = self
            .pivot_offset
            .and_then(|k| k.span(offset_scale))
            .unwrap_or(d.pivot_offset());
        // Every field was checked against the curve's ranges when it was set.
        HlgCurve::from_checked(CurveParts {
            pivot: self.pivot.unwrap_or(d.pivot()),
            pivot_offset: offset,
            width,
            shoulder: knob(self.shoulder, d.shoulder()),
            toe: knob(self.toe, d.toe()),
            toe_shape: self.toe_shape.unwrap_or(d.toe_shape()),
        })
    }
}

fn invalid(field: Field, got: &RawValue) -> HlgError {
    HlgError::InvalidValue {
        field,
        got: got.render(),
    }
}

fn parse_switch(field: Field, v: &RawValue) -> Result<bool, HlgError> {
    match v {
        RawValue::Bool(b) => Ok(*b),
        RawValue::Str(s) if s == "on" => Ok(true),
        RawValue::Str(s) if s == "off" => Ok(false),
        _ => Err(invalid(field, v)),
    }
}

fn parse_name<T: std::str::FromStr>(field: Field, v: &RawValue) -> Result<T, HlgError> {
    match v {
        RawValue::Str(s) => s.parse().map_err(|_| invalid(field, v)),
        _ => Err(invalid(field, v)),
    }
}

fn parse_number(field: Field, v: &RawValue) -> Result<f32, HlgError> {
    match v {
        RawValue::Number(n) => HlgError::check(field, *n),
        _ => Err(invalid(field, v)),
    }
}

/// A number, or the words the field's kind takes (`"off"`, `"auto"`).
fn parse_knob(field: Field, v: &RawValue) -> Result<Knob, HlgError> {
    let (off, auto) = match field.kind() {
        Kind::Knob(_) => (true, false),
        Kind::Auto(_) => (false, true),
        Kind::AutoKnob(_) => (true, true),
        Kind::Switch | Kind::Name(..) | Kind::Number(_) => (false, false),
    };
    match v {
        RawValue::Str(s) if off && s == "off" => Ok(Knob::Off),
        RawValue::Str(s) if auto && s == "auto" => Ok(Knob::Auto),
        _ => parse_number(field, v).map(Knob::Nats),
    }
}

/// One field's validated value.
///
/// ```
/// use mistralrs_hlg::{config::Value, params::Field, HlgConfig, ToeShape};
/// let cfg: HlgConfig = serde_json::from_str(r#"{"toe_shape": "exp", "enabled": true}"#)?;
/// assert_eq!(cfg.get(Field::ToeShape), Some(Value::ToeShape(ToeShape::Exp)));
/// assert_eq!(cfg.get(Field::Enabled), Some(Value::Switch(true)));
/// assert_eq!(cfg.get(Field::Pivot), None);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// `enabled`.
    Switch(bool),
    /// `pivot`.
    Pivot(Pivot),
    /// `width_scale`, `pivot_offset_scale`.
    Number(f32),
    /// `pivot_offset`, `width`, `shoulder`, `toe`.
    Knob(Knob),
    /// `toe_shape`.
    ToeShape(ToeShape),
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Value::Switch(b) => s.serialize_bool(b),
            Value::Pivot(p) => s.serialize_str(p.name()),
            Value::Number(v) | Value::Knob(Knob::Nats(v)) => s.serialize_f32(v),
            Value::Knob(Knob::Off) => s.serialize_str("off"),
            Value::Knob(Knob::Auto) => s.serialize_str("auto"),
            Value::ToeShape(t) => s.serialize_str(t.name()),
        }
    }
}

impl<'de> Deserialize<'de> for HlgConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        HlgConfig::deserialize_checked(d)?.map_err(de::Error::custom)
    }
}

impl Serialize for HlgConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for field in Field::ALL {
            if let Some(v) = self.get(field) {
                map.serialize_entry(field.name(), &v)?;
            }
        }
        map.end()
    }
}

/// The `hlg` value before validation.
enum RawHlg {
    Bool(bool),
    Map(Vec<(String, RawValue)>),
    Other(String),
}

impl<'de> Deserialize<'de> for RawHlg {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawHlg;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object or a boolean")
            }
            fn visit_bool<E>(self, b: bool) -> Result<RawHlg, E> {
                Ok(RawHlg::Bool(b))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<RawHlg, A::Error> {
                let mut pairs = Vec::new();
                while let Some((k, v)) = a.next_entry::<String, RawValue>()? {
                    pairs.push((k, v));
                }
                Ok(RawHlg::Map(pairs))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<RawHlg, A::Error> {
                IgnoredAny.visit_seq(a)?;
                Ok(RawHlg::Other("an array".into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<RawHlg, E> {
                Ok(RawHlg::Other(format!("the number {}", render_number(v))))
            }
            fn visit_i64<E>(self, v: i64) -> Result<RawHlg, E> {
                Ok(RawHlg::Other(format!("the number {v}")))
            }
            fn visit_u64<E>(self, v: u64) -> Result<RawHlg, E> {
                Ok(RawHlg::Other(format!("the number {v}")))
            }
            fn visit_str<E>(self, v: &str) -> Result<RawHlg, E> {
                Ok(RawHlg::Other(format!("the string {v:?}")))
            }
            fn visit_unit<E>(self) -> Result<RawHlg, E> {
                Ok(RawHlg::Other("null".into()))
            }
            fn visit_none<E>(self) -> Result<RawHlg, E> {
                Ok(RawHlg::Other("null".into()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for RawValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<RawValue, E> {
                Ok(RawValue::Bool(b))
            }
            fn visit_f64<E>(self, v: f64) -> Result<RawValue, E> {
                Ok(RawValue::Number(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<RawValue, E> {
                Ok(RawValue::Number(v as f64))
            }
            fn visit_u64<E>(self, v: u64) -> Result<RawValue, E> {
                Ok(RawValue::Number(v as f64))
            }
            fn visit_str<E>(self, v: &str) -> Result<RawValue, E> {
                Ok(RawValue::Str(v.to_string()))
            }
            fn visit_unit<E>(self) -> Result<RawValue, E> {
                Ok(RawValue::Null)
            }
            fn visit_none<E>(self) -> Result<RawValue, E> {
                Ok(RawValue::Null)
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<RawValue, D2::Error> {
                RawValue::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<RawValue, A::Error> {
                IgnoredAny.visit_seq(a)?;
                Ok(RawValue::Other("an array"))
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<RawValue, A::Error> {
                IgnoredAny.visit_map(a)?;
                Ok(RawValue::Other("an object"))
            }
        }
        d.deserialize_any(V)
    }
}
