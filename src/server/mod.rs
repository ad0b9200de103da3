//! The OpenAI-compatible server: mistralrs-server-core's router with HLG on the
//! generation routes.
//!
//! [`RouterBuilder`] builds the router from [`routes::ROUTES`], the one declaration of
//! every route. It owns `POST /v1/chat/completions`, `POST /v1/completions`,
//! `POST /v1/responses` and, on mistral.rs 0.9, `POST /v1/messages` (each accepts an `hlg`
//! object), adds `GET /v1/hlg` (the server's effective HLG defaults) and
//! `GET /api-doc/openapi.json`, and hands every other route to upstream's router as
//! upstream serves it, behind the security layer's key and allowlist (only the table's
//! public rows are served by default). The `hlg` field is taken off
//! the JSON body before the rest is read as upstream's request type, validated once, and
//! a bad value is a 400 in OpenAI's error shape naming the field in `param`.

// The handlers' helpers return a finished HTTP answer as their error (an axum
// `Response`, 128 bytes, or a response resource): built once, on the error path.
#![allow(clippy::result_large_err)]

use crate::config::RawValue;
use crate::params::Field;

mod choices;
pub mod engine;
mod error;
pub mod grammar;
mod handlers;
mod host_version;
pub mod load;
mod messages;
pub mod metadata;
pub mod openapi;
mod options;
mod request;
mod responses;
mod router;
pub mod routes;
pub mod security;
pub mod served_name;
mod state;

pub use engine::{Batching, Choices, Concurrency, Gate};
pub use error::{OptionError, ServerError, UpstreamError};
pub use load::ModelHints;
/// Upstream's logging set-up, as `mistralrs serve` makes it: info by default, debug with
/// `MISTRALRS_DEBUG=1` (the engine's own debug output too), `RUST_LOG` directives on top.
pub use mistralrs_core::initialize_logging;
pub use options::{CurveTable, HlgFlags, HlgServerOptions, ShapeCurves};
pub use router::{serve, RouterBuilder};
pub use state::{curve_for_request, MAX_CHOICES, MAX_TOKENS};

/// The server's HLG defaults from `(flag, value)` pairs (flag names without `--`, or
/// config-file keys), with the flag named in the error.
///
/// ```
/// use mistralrs_hlg::server::defaults_from_flags;
/// use mistralrs_hlg::config::RawValue;
/// let cfg = defaults_from_flags([("hlg-sampling", RawValue::from_flag("on")), ("hlg-toe", RawValue::Number(3.0))])?;
/// assert_eq!(cfg.enabled(), Some(true));
/// assert!(defaults_from_flags([("hlg-toe", RawValue::Number(-3.0))]).is_err());
/// # Ok::<(), mistralrs_hlg::server::OptionError>(())
/// ```
pub fn defaults_from_flags<'a>(
    pairs: impl IntoIterator<Item = (&'a str, RawValue)>,
) -> Result<crate::HlgConfig, OptionError> {
    let mut flags = HlgFlags::default();
    for (flag, value) in pairs {
        let field = Field::from_flag(flag).ok_or_else(|| OptionError::Unknown(flag.to_string()))?;
        flags = flags.with(field, value);
    }
    flags.defaults()
}
