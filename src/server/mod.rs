//! The OpenAI-compatible server: mistralrs-server-core's router with HLG on the two
//! generation routes.
//!
//! [`router`] owns `POST /v1/chat/completions` and `POST /v1/completions` (both accept an
//! `hlg` object), adds `GET /v1/hlg` (the server's effective HLG defaults), and falls back
//! to the upstream router for every other route, untouched. The `hlg` field is taken off
//! the JSON body before the rest is read as upstream's request type, validated once, and
//! a bad value is a 400 in OpenAI's error shape naming the field in `param`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use mistralrs_server_core::handler_core::{create_response_channel, send_request, send_request_with_model};
use mistralrs_server_core::mistralrs_server_router_builder::MistralRsServerRouterBuilder;
use mistralrs_server_core::openai::{ChatCompletionRequest, CompletionRequest};
use mistralrs_server_core::types::SharedMistralRsState;
use mistralrs_server_core::{chat_completion, completions};
use serde_json::{json, Value};

use crate::config::{HlgConfig, RawValue};
use crate::curve::HlgCurve;
use crate::processor::{arm_request_with, Backend};
use crate::HlgError;

mod choices;
pub mod load;
mod options;

pub use options::{HlgFlags, HlgServerOptions};

/// The engine flags and config-file keys, with the `hlg` field each one sets.
pub const FLAGS: [(&str, &str); 7] = [
    ("hlg-sampling", "enabled"),
    ("hlg-pivot", "pivot"),
    ("hlg-pivot-offset", "pivot_offset"),
    ("hlg-width", "width"),
    ("hlg-shoulder", "shoulder"),
    ("hlg-toe", "toe"),
    ("hlg-toe-shape", "toe_shape"),
];

/// The server's HLG defaults from `(flag, value)` pairs (flag names without `--`), with
/// the flag named in the error.
///
/// ```
/// use mistralrs_hlg::server::defaults_from_flags;
/// use mistralrs_hlg::config::RawValue;
/// let cfg = defaults_from_flags([("hlg-sampling", RawValue::from_flag("on")), ("hlg-toe", RawValue::Number(3.0))])?;
/// assert_eq!(cfg.enabled(), Some(true));
/// assert!(defaults_from_flags([("hlg-toe", RawValue::Number(-3.0))]).is_err());
/// # Ok::<(), String>(())
/// ```
pub fn defaults_from_flags<'a>(pairs: impl IntoIterator<Item = (&'a str, RawValue)>) -> Result<HlgConfig, String> {
    let mut cfg = HlgConfig::default();
    for (flag, value) in pairs {
        let field = FLAGS.iter().find(|(f, _)| *f == flag).map(|(_, field)| *field).ok_or_else(|| format!("unknown option `{flag}`"))?;
        cfg.set(field, value).map_err(|e| format!("--{flag}: {e}"))?;
    }
    Ok(cfg)
}

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
/// assert_eq!((c.width(), c.toe()), (Some(1.0), Some(2.0)));
/// ```
pub fn curve_for_request(request: Option<&HlgConfig>, server: &HlgConfig) -> Option<HlgCurve> {
    let (cfg, on) = match request {
        Some(r) => (r.merged_over(server), r.enabled().unwrap_or(true)),
        None => (server.clone(), server.enabled().unwrap_or(false)),
    };
    on.then(|| cfg.curve())
}

/// The largest `n` the generation routes accept.
pub const MAX_CHOICES: u64 = 128;

/// How the generation routes serve a request for `n > 1` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choices {
    /// As `n` single-choice generations, one after another, merged into one response: the
    /// default while the pinned mistral.rs (0.8.1) corrupts the choices of a batched
    /// request on the CPU (see `docs/NOTES.md`).
    Split,
    /// As upstream does: one request with `n` sequences, batched.
    Batched,
}

/// State of the HLG routes.
struct AppState {
    mistralrs: SharedMistralRsState,
    defaults: HlgConfig,
    choices: Choices,
    backend: Backend,
}

/// The whole router: HLG on the two generation routes, `GET /v1/hlg`, and upstream's
/// router for everything else. `n > 1` is split (see [`Choices`]).
pub async fn router(mistralrs: SharedMistralRsState, defaults: HlgConfig) -> anyhow::Result<Router> {
    router_with(mistralrs, defaults, Choices::Split).await
}

/// [`router`] with the `n > 1` handling chosen.
pub async fn router_with(mistralrs: SharedMistralRsState, defaults: HlgConfig, choices: Choices) -> anyhow::Result<Router> {
    router_with_backend(mistralrs, defaults, choices, Backend::Kernel).await
}

/// [`router_with`] with the curve's backend chosen (`--hlg-backend`).
pub async fn router_with_backend(
    mistralrs: SharedMistralRsState,
    defaults: HlgConfig,
    choices: Choices,
    backend: Backend,
) -> anyhow::Result<Router> {
    let upstream = MistralRsServerRouterBuilder::new().with_mistralrs(mistralrs.clone()).build().await?;
    let state = Arc::new(AppState { mistralrs, defaults, choices, backend });
    Ok(Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(complete))
        .route("/v1/hlg", get(hlg_defaults))
        .with_state(state)
        .fallback_service(upstream))
}

/// Binds `host:port` and serves `router` until the process ends.
pub async fn serve(router: Router, host: &str, port: u16) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind((host, port)).await?;
    tracing::info!("mistralrs-hlg listening on http://{}", listener.local_addr()?);
    axum::serve(listener, router).await?;
    Ok(())
}

async fn hlg_defaults(State(s): State<Arc<AppState>>) -> Json<HlgConfig> {
    Json(s.defaults.resolved(false))
}

/// An OpenAI-shaped error response.
fn openai_error(status: StatusCode, message: String, param: Option<&str>) -> Response {
    let body = json!({
        "error": { "message": message, "type": "invalid_request_error", "param": param, "code": Value::Null }
    });
    (status, Json(body)).into_response()
}

fn hlg_error(e: HlgError) -> Response {
    openai_error(StatusCode::BAD_REQUEST, e.to_string(), Some(e.param()))
}

/// Splits the JSON body into the request (without `hlg`) and the `hlg` object.
fn split_body(body: &Bytes) -> Result<(Value, Option<HlgConfig>), Response> {
    let mut v: Value = serde_json::from_slice(body)
        .map_err(|e| openai_error(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}"), None))?;
    let hlg = match v.as_object_mut().and_then(|o| o.remove("hlg")) {
        None => None,
        Some(h) => match HlgConfig::deserialize_checked(h) {
            Ok(Ok(cfg)) => Some(cfg),
            Ok(Err(e)) => return Err(hlg_error(e)),
            Err(e) => return Err(openai_error(StatusCode::BAD_REQUEST, e.to_string(), Some("hlg"))),
        },
    };
    Ok((v, hlg))
}

/// Upstream's request type from the JSON body.
fn parse<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, Response> {
    serde_json::from_value(v).map_err(|e| openai_error(StatusCode::UNPROCESSABLE_ENTITY, format!("invalid request: {e}"), None))
}

/// Routes a generation request: `n > 1` split into single-choice generations when the
/// server does that, otherwise one request as upstream would run it.
async fn generate<F, Fut>(s: Arc<AppState>, body: Bytes, one: F) -> Response
where
    F: Fn(Arc<AppState>, Value, Option<HlgCurve>) -> Fut + Send + Sync + Copy + 'static,
    Fut: std::future::Future<Output = Response> + Send + 'static,
{
    let (v, hlg) = match split_body(&body) {
        Ok(x) => x,
        Err(resp) => return resp,
    };
    let curve = curve_for_request(hlg.as_ref(), &s.defaults);
    let n = v.get("n").and_then(Value::as_u64).unwrap_or(1);
    if n > MAX_CHOICES {
        return openai_error(StatusCode::BAD_REQUEST, format!("n must be between 1 and {MAX_CHOICES}, got {n}"), Some("n"));
    }
    if n > 1 && s.choices == Choices::Split {
        let streaming = v.get("stream").and_then(Value::as_bool).unwrap_or(false);
        let mut single = v;
        single["n"] = Value::from(1);
        return choices::merged(n as usize, streaming, move |_| one(s.clone(), single.clone(), curve)).await;
    }
    one(s, v, curve).await
}

async fn chat(State(s): State<Arc<AppState>>, body: Bytes) -> Response {
    generate(s, body, chat_one).await
}

async fn complete(State(s): State<Arc<AppState>>, body: Bytes) -> Response {
    generate(s, body, complete_one).await
}

async fn chat_one(s: Arc<AppState>, v: Value, curve: Option<HlgCurve>) -> Response {
    let req: ChatCompletionRequest = match parse(v) {
        Ok(x) => x,
        Err(resp) => return resp,
    };
    let state = s.mistralrs.clone();
    let model_id = (req.model != "default").then(|| req.model.clone());
    let (tx, mut rx) = create_response_channel(None);
    let (mut request, streaming) = match chat_completion::parse_request(req, state.clone(), tx).await {
        Ok(x) => x,
        Err(e) => return chat_completion::handle_error(state, e.into()).into_response(),
    };
    if let Some(c) = curve {
        arm_request_with(&mut request, &c, s.backend);
    }
    if let Err(e) = send_request_with_model(&state, request, model_id.as_deref()).await {
        return chat_completion::handle_error(state, e.into()).into_response();
    }
    if streaming {
        chat_completion::create_streamer(rx, state, None, None).into_response()
    } else {
        chat_completion::process_non_streaming_response(&mut rx, state).await.into_response()
    }
}

async fn complete_one(s: Arc<AppState>, v: Value, curve: Option<HlgCurve>) -> Response {
    let req: CompletionRequest = match parse(v) {
        Ok(x) => x,
        Err(resp) => return resp,
    };
    let state = s.mistralrs.clone();
    let (tx, mut rx) = create_response_channel(None);
    let (mut request, streaming) = match completions::parse_request(req, state.clone(), tx) {
        Ok(x) => x,
        Err(e) => return completions::handle_error(state, e.into()).into_response(),
    };
    if let Some(c) = curve {
        arm_request_with(&mut request, &c, s.backend);
    }
    if let Err(e) = send_request(&state, request).await {
        return completions::handle_error(state, e.into()).into_response();
    }
    if streaming {
        completions::create_streamer(rx, state, None, None).into_response()
    } else {
        completions::process_non_streaming_response(&mut rx, state).await.into_response()
    }
}
