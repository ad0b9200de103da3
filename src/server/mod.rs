//! The OpenAI-compatible server: mistralrs-server-core's router with HLG on the
//! generation routes.
//!
//! [`RouterBuilder`] builds the router. It owns `POST /v1/chat/completions`, `POST /v1/completions` and
//! `POST /v1/responses` (each accepts an `hlg` object), adds `GET /v1/hlg` (the server's
//! effective HLG defaults) and `GET /api-doc/openapi.json`, and falls back
//! to the upstream router for every other route, untouched. The `hlg` field is taken off
//! the JSON body before the rest is read as upstream's request type, validated once, and
//! a bad value is a 400 in OpenAI's error shape naming the field in `param`.

// The handlers' helpers return a finished HTTP answer as their error (an axum
// `Response`, 128 bytes, or a response resource): built once, on the error path.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use mistralrs_server_core::handler_core::{
    create_response_channel, send_request, send_request_with_model,
};
use mistralrs_server_core::mistralrs_server_router_builder::MistralRsServerRouterBuilder;
use mistralrs_server_core::openai::{ChatCompletionRequest, CompletionRequest};
use mistralrs_server_core::types::SharedMistralRsState;
use mistralrs_server_core::{chat_completion, completions};
use serde_json::Value;

use crate::config::{HlgConfig, RawValue};
use crate::curve::HlgCurve;
use crate::params::Field;
use crate::processor::{arm_request_with, Backend};
use crate::HlgError;

mod choices;
pub mod engine;
mod error;
pub mod grammar;
mod host;
pub mod load;
mod messages;
pub mod openapi;
mod options;
mod responses;
pub mod security;

pub use engine::{Batching, Gate};
pub use error::{ServerError, UpstreamError};
/// Upstream's logging set-up, as `mistralrs serve` makes it: info by default, debug with
/// `MISTRALRS_DEBUG=1` (the engine's own debug output too), `RUST_LOG` directives on top.
pub use mistralrs_core::initialize_logging;
pub use options::{
    ConfigFileError, HlgFlags, HlgServerOptions, ModelHints, OptionError, ServeOptions,
};

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
) -> Result<HlgConfig, OptionError> {
    let mut flags = HlgFlags::default();
    for (flag, value) in pairs {
        let field = Field::from_flag(flag).ok_or_else(|| OptionError::Unknown(flag.to_string()))?;
        flags = flags.with(field, value);
    }
    flags.defaults()
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
fn bounded_count(v: &Value, field: &str, max: u64) -> Result<Option<u64>, Response> {
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

/// How the generation routes serve a request for `n > 1` choices.
///
/// ```
/// use mistralrs_hlg::server::{Choices, HlgServerOptions};
/// let o = HlgServerOptions { n_choices: Some("split".into()), ..Default::default() };
/// assert_eq!(o.choices(), Ok(Some(Choices::Split)));
/// ```
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
    gate: Gate,
    /// Upstream's routes (gated), for the calls this crate hands back to them.
    upstream: Router,
    /// The tokens that end a constrained request whose grammar is done (0.8.1; see
    /// [`grammar`]).
    grammar_stops: Vec<(u32, String)>,
}

/// Builds the server's router, the one way there is: HLG on the generation routes,
/// `GET /v1/hlg`, the OpenAPI document, and upstream's router for everything else, always
/// behind a [`security::Exposure`] (the default: no key, only
/// [`security::PUBLIC_ROUTES`] served, media from files or remote addresses refused,
/// errors in OpenAI's shape). [`HlgServerOptions::router`] sets it from the flags, with
/// the start-up probe deciding the gate and `n > 1`.
///
/// ```
/// use mistralrs_hlg::{server::{self, load, Choices, RouterBuilder}, HlgConfig};
///
/// # async fn run() -> Result<(), mistralrs_hlg::server::ServerError> {
/// let source = load::ModelSource::resolve("/models/model.gguf", None)?;
/// let defaults: HlgConfig = serde_json::from_str(r#"{"enabled": true, "toe": 2}"#).unwrap();
/// let router = RouterBuilder::new(load::load(&source, true).await?)
///     .defaults(defaults)
///     .choices(Choices::Split)
///     .build()
///     .await?;
/// server::serve(router, "127.0.0.1", 1234).await
/// # }
/// ```
pub struct RouterBuilder {
    mistralrs: SharedMistralRsState,
    defaults: HlgConfig,
    choices: Choices,
    backend: Backend,
    gate: Gate,
    exposure: security::Exposure,
    upstream: MistralRsServerRouterBuilder,
    served_name: Option<(String, String)>,
}

impl RouterBuilder {
    /// A router over `mistralrs` with the built-in HLG defaults, `n > 1` split, the
    /// kernel backend, no gate and the default exposure.
    pub fn new(mistralrs: SharedMistralRsState) -> Self {
        RouterBuilder {
            mistralrs,
            defaults: HlgConfig::default(),
            choices: Choices::Split,
            backend: Backend::Kernel,
            gate: Gate::new(false, vec![]),
            exposure: security::Exposure::default(),
            upstream: MistralRsServerRouterBuilder::new(),
            served_name: None,
        }
    }

    /// The server's HLG defaults (`--hlg-*`).
    pub fn defaults(mut self, defaults: HlgConfig) -> Self {
        self.defaults = defaults;
        self
    }

    /// How `n > 1` runs ([`Choices`]).
    pub fn choices(mut self, choices: Choices) -> Self {
        self.choices = choices;
        self
    }

    /// Where the curve runs (`--hlg-backend`).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// The engine's admission: a serial [`Gate`] runs one request at a time in the
    /// engine, on every route that reaches it (see [`engine`]).
    pub fn gate(mut self, gate: Gate) -> Self {
        self.gate = gate;
        self
    }

    /// What the server exposes: key, admin routes, media ([`security::Exposure`]).
    pub fn exposure(mut self, exposure: security::Exposure) -> Self {
        self.exposure = exposure;
        self
    }

    /// Upstream's router builder as a CLI configures it (mistral.rs 0.9's tool rounds,
    /// observability, agent permissions); the engine is set to this builder's.
    pub fn upstream(mut self, upstream: MistralRsServerRouterBuilder) -> Self {
        self.upstream = upstream;
        self
    }

    /// Answers requests for `served` as the engine's model `internal`
    /// ([`security::serve_under_name`]).
    pub fn served_name(mut self, internal: String, served: String) -> Self {
        self.served_name = Some((internal, served));
        self
    }

    /// The router, behind its exposure.
    pub async fn build(mut self) -> Result<Router, ServerError> {
        let exposure = std::mem::take(&mut self.exposure);
        let served_name = self.served_name.take();
        let router = routes(self).await?;
        let router = match served_name {
            Some((internal, served)) => security::serve_under_name(router, internal, served),
            None => router,
        };
        Ok(exposure.apply(router))
    }
}

/// This crate's routes over upstream's (gated), without the exposure.
async fn routes(b: RouterBuilder) -> Result<Router, ServerError> {
    let RouterBuilder {
        mistralrs,
        defaults,
        choices,
        backend,
        gate,
        upstream,
        ..
    } = b;
    let upstream = upstream
        .with_mistralrs(mistralrs.clone())
        .build()
        .await
        .map_err(ServerError::upstream("building upstream's router"))?;
    let upstream = engine::gated_upstream(upstream, gate.clone());
    // mistral.rs 0.9 ends a finished grammar itself.
    let grammar_stops = if cfg!(mistralrs_host = "0.9") {
        vec![]
    } else {
        grammar::llguidance_eos(&mistralrs).await
    };
    let state = Arc::new(AppState {
        grammar_stops,
        mistralrs,
        defaults,
        choices,
        backend,
        gate,
        upstream: upstream.clone(),
    });
    // Upstream's layers on this crate's routes too: its CORS policy (any origin, GET and
    // POST, the content-type and authorization headers) and its body limit.
    let cors = tower_http::cors::CorsLayer::new()
        .allow_methods([axum::http::Method::GET, axum::http::Method::POST])
        .allow_headers([
            axum::http::header::CONTENT_TYPE,
            axum::http::header::AUTHORIZATION,
        ])
        .allow_origin(tower_http::cors::AllowOrigin::any());
    let own = Router::new();
    // Anthropic's Messages route is 0.9's (0.8.1 has none).
    #[cfg(mistralrs_host = "0.9")]
    let own = own.route("/v1/messages", post(messages::create));
    Ok(own
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(complete))
        .route("/v1/responses", post(respond))
        .route("/v1/hlg", get(hlg_defaults))
        .route(
            "/api-doc/openapi.json",
            get(|| async { Json(openapi::document()) }),
        )
        .route_layer(axum::extract::DefaultBodyLimit::max(
            security::MAX_BODY_BYTES,
        ))
        .route_layer(cors)
        .with_state(state)
        .fallback_service(upstream))
}

/// Binds `host:port` and serves `router` until the process ends.
///
/// ```
/// use mistralrs_hlg::server::{serve, ServerError};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// // An address this machine does not have: the error names it.
/// let e = serve(axum::Router::new(), "192.0.2.1", 1234).await.unwrap_err();
/// assert!(matches!(e, ServerError::Net { what: "binding", .. }), "{e}");
/// assert!(e.to_string().starts_with("binding 192.0.2.1:1234: "), "{e}");
/// # });
/// ```
pub async fn serve(router: Router, host: &str, port: u16) -> Result<(), ServerError> {
    let net = |what| {
        move |source| ServerError::Net {
            what,
            addr: format!("{host}:{port}"),
            source,
        }
    };
    let listener = tokio::net::TcpListener::bind((host, port))
        .await
        .map_err(net("binding"))?;
    let addr = listener.local_addr().map_err(net("binding"))?;
    tracing::info!("mistralrs-hlg listening on http://{addr}");
    axum::serve(listener, router).await.map_err(net("serving"))
}

async fn hlg_defaults(State(s): State<Arc<AppState>>) -> Json<HlgConfig> {
    Json(s.defaults.resolved(false))
}

/// An OpenAI-shaped error response.
pub(crate) fn openai_error(status: StatusCode, message: String, param: Option<&str>) -> Response {
    let kind = if status.is_server_error() {
        "server_error"
    } else {
        "invalid_request_error"
    };
    security::error(status, kind, &message, param, None)
}

fn hlg_error(e: HlgError) -> Response {
    openai_error(StatusCode::BAD_REQUEST, e.to_string(), Some(e.param()))
}

/// Splits the JSON body into the request (without `hlg`) and the `hlg` object.
fn split_body(body: &Bytes) -> Result<(Value, Option<HlgConfig>), Response> {
    let mut v: Value = serde_json::from_slice(body).map_err(|e| {
        openai_error(
            StatusCode::BAD_REQUEST,
            format!("invalid JSON body: {e}"),
            None,
        )
    })?;
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

/// Upstream's request type from the JSON body.
fn parse<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, Response> {
    serde_json::from_value(v).map_err(|e| {
        openai_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("invalid request: {e}"),
            None,
        )
    })
}

/// A generation request's body checked: the request without `hlg`, the curve it runs
/// with, and its `n`. Every bad value is a 4xx naming the field.
fn checked(s: &AppState, body: &Bytes) -> Result<(Value, Option<HlgCurve>, u64), Response> {
    let (v, hlg) = split_body(body)?;
    let curve = curve_for_request(hlg.as_ref(), &s.defaults);
    let n = bounded_count(&v, "n", MAX_CHOICES)?.unwrap_or(1);
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
        bounded_count(&v, field, max_len)?;
    }
    Ok((v, curve, n))
}

/// Routes a generation request: `n > 1` split into single-choice generations when the
/// server does that, otherwise one request as upstream would run it.
async fn generate<F, Fut>(s: Arc<AppState>, body: Bytes, one: F) -> Response
where
    F: Fn(Arc<AppState>, Value, Option<HlgCurve>) -> Fut + Send + Sync + Copy + 'static,
    Fut: std::future::Future<Output = Response> + Send + 'static,
{
    let (v, curve, n) = match checked(&s, &body) {
        Ok(x) => x,
        Err(resp) => return resp,
    };
    if n > 1 && s.choices == Choices::Split {
        let streaming = v.get("stream").and_then(Value::as_bool).unwrap_or(false);
        let mut single = v;
        single["n"] = Value::from(1);
        return choices::merged(n as usize, streaming, move |_| {
            one(s.clone(), single.clone(), curve)
        })
        .await;
    }
    one(s, v, curve).await
}

async fn respond(
    State(s): State<Arc<AppState>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(resp) = not_json(&headers) {
        return resp;
    }
    let (v, curve, _) = match checked(&s, &body) {
        Ok(x) => x,
        Err(resp) => return resp,
    };
    // Upstream goes on without the history of an id it does not hold; a client that names
    // one expects its context, so both paths refuse it.
    // The history found here is the one the HLG path sends (one lookup, so an eviction
    // in between cannot drop it silently).
    let mut prior = None;
    if let Some(prev) = v.get("previous_response_id").and_then(Value::as_str) {
        match mistralrs_server_core::cached_responses::get_response_cache()
            .get_conversation_history(prev)
        {
            Ok(Some(h)) => prior = Some(h),
            _ => {
                let msg = format!("no stored response `{prev}` (responses are kept in this server's memory, when sent with `store` on)");
                return openai_error(
                    StatusCode::NOT_FOUND,
                    security::scrub_paths(&msg),
                    Some("previous_response_id"),
                );
            }
        }
    }
    responses::create(s, v, curve, body, prior).await
}

async fn chat(
    State(s): State<Arc<AppState>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(resp) = not_json(&headers) {
        return resp;
    }
    generate(s, body, chat_one).await
}

async fn complete(
    State(s): State<Arc<AppState>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(resp) = not_json(&headers) {
        return resp;
    }
    generate(s, body, complete_one).await
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

async fn chat_one(s: Arc<AppState>, v: Value, curve: Option<HlgCurve>) -> Response {
    let req: ChatCompletionRequest = match parse(v) {
        Ok(x) => x,
        Err(resp) => return resp,
    };
    let state = s.mistralrs.clone();
    let model_id = (req.model != "default").then(|| req.model.clone());
    let (tx, rx) = create_response_channel(None);
    let senders = tx.downgrade();
    let (mut request, streaming) =
        match host::parse_chat(req, state.clone(), tx, host::Surface::Chat).await {
            Ok(x) => x,
            Err(e) => return invalid_request(e),
        };
    let mut admission = admit(&s, &mut request, curve).await;
    if let Err(e) = send_request_with_model(&state, request, model_id.as_deref()).await {
        return chat_completion::handle_error(state, e.into()).into_response();
    }
    if streaming {
        admission.track(senders);
        engine::guard_body(
            chat_completion::create_streamer(rx, state, None, None).into_response(),
            admission,
        )
    } else {
        admission.hold(rx);
        let resp = chat_completion::process_non_streaming_response(admission.receiver(), state)
            .await
            .into_response();
        admission.finish();
        resp
    }
}

/// A request upstream's parser refused (bad content parts, media that cannot be read, a
/// tool schema it cannot use): the client's error, a 400, where upstream answers 500.
fn invalid_request(e: impl std::fmt::Display) -> Response {
    openai_error(
        StatusCode::BAD_REQUEST,
        security::scrub_paths(&format!("invalid request: {e}")),
        None,
    )
}

/// Waits for the engine's turn, then arms `request` with HLG (when `curve` is set) and the
/// admission's cancel-on-disconnect processor, last.
async fn admit(
    s: &AppState,
    request: &mut mistralrs_core::Request,
    curve: Option<HlgCurve>,
) -> engine::Admission {
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

async fn complete_one(s: Arc<AppState>, v: Value, curve: Option<HlgCurve>) -> Response {
    let req: CompletionRequest = match parse(v) {
        Ok(x) => x,
        Err(resp) => return resp,
    };
    let state = s.mistralrs.clone();
    let (tx, rx) = create_response_channel(None);
    let senders = tx.downgrade();
    let (mut request, streaming) = match completions::parse_request(req, state.clone(), tx) {
        Ok(x) => x,
        Err(e) => return invalid_request(e),
    };
    let mut admission = admit(&s, &mut request, curve).await;
    if let Err(e) = send_request(&state, request).await {
        return completions::handle_error(state, e.into()).into_response();
    }
    if streaming {
        admission.track(senders);
        engine::guard_body(
            completions::create_streamer(rx, state, None, None).into_response(),
            admission,
        )
    } else {
        admission.hold(rx);
        let resp = completions::process_non_streaming_response(admission.receiver(), state)
            .await
            .into_response();
        admission.finish();
        resp
    }
}
