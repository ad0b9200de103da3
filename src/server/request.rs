//! A request body of this crate's routes, read once: the security layer parses the JSON
//! (to refuse media and a misplaced `hlg`) and hands the value on with the request
//! ([`security::ParsedJson`]); the extractors here take it from there, parse only when the layer did
//! not (every media source allowed), take `hlg` off and check it, and give the handlers
//! the result.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::security::{self, openai_error, ParsedJson};
use super::state::{
    bounded_count, curve_for_request, hlg_error, AppState, MAX_CHOICES, MAX_TOKENS,
};
use crate::config::HlgConfig;
use crate::curve::HlgCurve;

/// A JSON request body: the value without `hlg`, the `hlg` object checked, and the body
/// as it came (for upstream's handler, when HLG does not apply). A body that is not JSON
/// is a 415; JSON that does not parse, or a bad `hlg`, a 400 naming the field.
pub(crate) struct JsonBody {
    pub(crate) v: Value,
    pub(crate) hlg: Option<HlgConfig>,
    pub(crate) raw: Bytes,
}

impl FromRequest<Arc<AppState>> for JsonBody {
    type Rejection = Response;

    async fn from_request(mut req: Request, s: &Arc<AppState>) -> Result<Self, Response> {
        if let Some(resp) = not_json(req.headers()) {
            return Err(resp);
        }
        let parsed = req.extensions_mut().remove::<ParsedJson>();
        let raw = Bytes::from_request(req, s)
            .await
            .map_err(IntoResponse::into_response)?;
        let v = match parsed {
            Some(ParsedJson(v)) => v,
            None => serde_json::from_slice(&raw).map_err(|e| {
                openai_error(
                    StatusCode::BAD_REQUEST,
                    format!("invalid JSON body: {e}"),
                    None,
                )
            })?,
        };
        let (v, hlg) = split_hlg(v)?;
        Ok(JsonBody { v, hlg, raw })
    }
}

/// A generation request checked ([`checked`]): the request without `hlg`, the curve it
/// runs with, its `n`, and the body as it came.
pub(crate) struct Generation {
    pub(crate) v: Value,
    pub(crate) curve: Option<HlgCurve>,
    pub(crate) n: u64,
    pub(crate) raw: Bytes,
}

impl FromRequest<Arc<AppState>> for Generation {
    type Rejection = Response;

    async fn from_request(req: Request, s: &Arc<AppState>) -> Result<Self, Response> {
        let JsonBody { v, hlg, raw } = JsonBody::from_request(req, s).await?;
        let curve = curve_for_request(hlg.as_ref(), &s.defaults);
        let n = checked(s, &v)?;
        Ok(Generation { v, curve, n, raw })
    }
}

/// `v` without its `hlg` field, and that field checked.
fn split_hlg(mut v: Value) -> Result<(Value, Option<HlgConfig>), Response> {
    let hlg = match v.as_object_mut().and_then(|o| o.remove("hlg")) {
        None => None,
        Some(h) => match HlgConfig::deserialize_checked(h) {
            Ok(Ok(cfg)) => Some(cfg),
            Ok(Err(e)) => return Err(hlg_error(e)),
            Err(e) => {
                return Err(openai_error(
                    StatusCode::BAD_REQUEST,
                    e.to_string(),
                    Some("hlg"),
                ))
            }
        },
    };
    Ok((v, hlg))
}

/// A generation request's fields the engine must not see out of range: the model it
/// names exists, `n` and the token bounds lie in range. The request's `n` (1 when unset);
/// every bad value is a 4xx naming the field.
pub(crate) fn checked(s: &AppState, v: &Value) -> Result<u64, Response> {
    let n = bounded_count(v, "n", MAX_CHOICES)?.unwrap_or(1);
    if let Some(model) = v
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| *m != "default")
    {
        if !s.mistralrs.model_exists(model).unwrap_or(false) {
            let msg = format!("the model `{model}` does not exist on this server (see GET /v1/models; `default` names the served model)");
            return Err(security::error(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                &security::scrub_paths(&msg),
                Some("model"),
                Some("model_not_found"),
            ));
        }
    }
    let max_len = s
        .mistralrs
        .max_sequence_length(None)
        .ok()
        .flatten()
        .map_or(MAX_TOKENS, |m| m as u64);
    for field in ["max_tokens", "max_completion_tokens", "max_output_tokens"] {
        bounded_count(v, field, max_len)?;
    }
    Ok(n)
}

/// A 415 unless the request says its body is JSON. Requiring it keeps a page on another
/// origin from starting generations with a form-like `text/plain` POST, which a browser
/// sends without asking the server first (a JSON one it sends only after CORS allows it).
fn not_json(headers: &axum::http::HeaderMap) -> Option<Response> {
    let ct = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if essence == "application/json" || essence.ends_with("+json") {
        return None;
    }
    let got = if ct.is_empty() {
        "none".to_string()
    } else {
        format!("{ct:?}")
    };
    Some(openai_error(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!("the request body must be JSON (`Content-Type: application/json`), got {got}"),
        None,
    ))
}
