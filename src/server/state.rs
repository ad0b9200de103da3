//! What the HLG routes share: the state, the checks a request passes before it reaches
//! the engine, the OpenAI-shaped errors, and the engine's admission of a request.

use axum::http::StatusCode;
use axum::response::Response;
use axum::Router;
use mistralrs_server_core::types::SharedMistralRsState;
use serde_json::Value;

use super::engine::{Choices, Gate};
use super::security::openai_error;
use super::{grammar, security};
use crate::config::HlgConfig;
use crate::curve::HlgCurve;
use crate::processor::{arm_request_with, Backend};
use crate::HlgError;

/// The curve a request runs with, if any: an `hlg` object opts in (a missing `enabled`
/// means on) and its fields fall back to the server's defaults; without one, the server's
/// `--hlg-sampling` decides.
///
/// ```
/// use mistralrs_hlg::{server::curve_for_request, HlgConfig};
/// let server = HlgConfig::from_pairs([("enabled", "off"), ("toe", "2")]).unwrap();
/// assert!(curve_for_request(None, &server).is_none());
/// let req = HlgConfig::from_pairs([("width", "1")]).unwrap();
/// let c = curve_for_request(Some(&req), &server).unwrap();
/// assert_eq!((c.width(), c.toe()), (Some(mistralrs_hlg::params::Span::Nats(1.0)), Some(2.0)));
/// ```
pub fn curve_for_request(request: Option<&HlgConfig>, server: &HlgConfig) -> Option<HlgCurve> {
    let (cfg, on) = match request {
        Some(r) => (r.merged_over(server), r.enabled().unwrap_or(true)),
        None => (server.clone(), server.enabled().unwrap_or(false)),
    };
    on.then(|| cfg.curve())
}

/// The largest `n` the generation routes accept.
///
/// ```
/// use mistralrs_hlg::server::MAX_CHOICES;
/// // `n` above this is a 400 naming `n`, before anything reaches the engine.
/// assert!(MAX_CHOICES >= 1);
/// ```
pub const MAX_CHOICES: u64 = 128;

/// The largest `max_tokens` when the model does not state its context length.
///
/// ```
/// use mistralrs_hlg::server::MAX_TOKENS;
/// // `max_tokens` above the model's context length (this, when it states none) is a 400.
/// assert_eq!(MAX_TOKENS, 128 * 1024);
/// ```
pub const MAX_TOKENS: u64 = 131_072;

/// An optional integer field of the body that must lie in `1..=max` (`null` is unset):
/// the value, or a 400 naming the field and the range.
pub(crate) fn bounded_count(v: &Value, field: &str, max: u64) -> Result<Option<u64>, Response> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_u64() {
            Some(n) if (1..=max).contains(&n) => Ok(Some(n)),
            _ => Err(openai_error(
                StatusCode::BAD_REQUEST,
                format!("`{field}` must be an integer between 1 and {max}, got {x}"),
                Some(field),
            )),
        },
    }
}

/// State of the HLG routes.
pub(crate) struct AppState {
    pub(crate) mistralrs: SharedMistralRsState,
    pub(crate) defaults: HlgConfig,
    pub(crate) choices: Choices,
    pub(crate) backend: Backend,
    pub(crate) gate: Gate,
    /// Upstream's routes (gated), for the calls this crate hands back to them.
    pub(crate) upstream: Router,
    /// The tokens that end a constrained request whose grammar is done (see
    /// [`grammar`]).
    pub(crate) grammar_stops: Vec<(u32, String)>,
}

pub(crate) fn hlg_error(e: HlgError) -> Response {
    openai_error(StatusCode::BAD_REQUEST, e.to_string(), Some(e.param()))
}

/// Upstream's request type from the JSON body.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, Response> {
    serde_json::from_value(v).map_err(|e| {
        openai_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("invalid request: {e}"),
            None,
        )
    })
}

/// A request upstream's parser refused (bad content parts, media that cannot be read, a
/// tool schema it cannot use): the client's error, a 400, where upstream answers 500.
pub(crate) fn invalid_request(e: impl std::fmt::Display) -> Response {
    openai_error(
        StatusCode::BAD_REQUEST,
        security::scrub_paths(&format!("invalid request: {e}")),
        None,
    )
}

/// Waits for the engine's turn, then arms `request` with HLG (when `curve` is set) and the
/// admission's cancel-on-disconnect processor, last.
pub(crate) async fn admit(
    s: &AppState,
    request: &mut mistralrs_core::Request,
    curve: Option<HlgCurve>,
) -> super::engine::Admission {
    let admission = s.gate.admit().await;
    if let Some(c) = curve {
        arm_request_with(request, &c, s.backend);
    }
    grammar::stop_when_done(request, &s.grammar_stops);
    if let mistralrs_core::Request::Normal(normal) = request {
        normal
            .logits_processors
            .get_or_insert_with(Vec::new)
            .push(admission.canceller());
    }
    admission
}
