//! The crate's error type.

use std::fmt;

use crate::params::{render_number, Field, Kind};

/// An invalid HLG parameter: which field, what it accepts, and what it got.
///
/// The `Display` form reads like mlx-lm's messages and names the field as it is spelled
/// in the `hlg` request object:
///
/// ```
/// use mistralrs_hlg::HlgConfig;
///
/// let err = serde_json::from_str::<HlgConfig>(r#"{"toe": -2}"#).unwrap_err();
/// assert_eq!(err.to_string(), r#"`hlg.toe` must be a number in [1e-6, 1000] or "off", got -2"#);
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HlgError {
    /// A known field with a value of the right kind outside its accepted range, or a
    /// value of the wrong kind.
    #[error("`{}` must be {}, got {got}", field.param(), field.expected())]
    InvalidValue {
        /// The field.
        field: Field,
        /// What was received, rendered as JSON-like text.
        got: String,
    },
    /// A field that the `hlg` object does not have.
    #[error("`hlg` has no field `{field}`; expected one of {}", FieldList)]
    UnknownField {
        /// The unknown field's name.
        field: String,
    },
    /// A field that has no effect beside the value of another in the same object
    /// (`width_scale` with a fixed `width`).
    #[error("`{}` applies only with `\"{}\": \"auto\"`; remove it or set `{}` to \"auto\"", field.param(), of.name(), of.param())]
    Unused {
        /// The field without effect.
        field: Field,
        /// The field whose value makes it so.
        of: Field,
    },
    /// `hlg` itself was neither an object nor a boolean.
    #[error("`hlg` must be an object or a boolean, got {got}")]
    NotAnObject {
        /// What was received, in words.
        got: String,
    },
}

impl HlgError {
    /// The request parameter the error is about, as OpenAI's error `param`:
    /// `"hlg.width"` for a bad value, `"hlg"` for an unknown field or a wrong type of
    /// the object itself.
    ///
    /// ```
    /// use mistralrs_hlg::{HlgConfig, HlgError};
    ///
    /// let err: HlgError = HlgConfig::from_pairs([("width", "-1")]).unwrap_err();
    /// assert_eq!(err.param(), "hlg.width");
    /// ```
    pub fn param(&self) -> &'static str {
        match self {
            HlgError::InvalidValue { field, .. } | HlgError::Unused { field, .. } => field.param(),
            HlgError::UnknownField { .. } | HlgError::NotAnObject { .. } => "hlg",
        }
    }

    /// The field's number as an `f32`, or the error naming the field and its range.
    pub(crate) fn check(field: Field, v: f64) -> Result<f32, HlgError> {
        let accepted = match field.kind() {
            Kind::Number(r) | Kind::Knob(r) | Kind::Auto(r) | Kind::AutoKnob(r) => r.accepts(v),
            Kind::Switch | Kind::Name(..) => None,
        };
        accepted.ok_or_else(|| HlgError::InvalidValue {
            field,
            got: render_number(v),
        })
    }
}

struct FieldList;

impl fmt::Display for FieldList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, field) in Field::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "`{field}`")?;
        }
        Ok(())
    }
}
