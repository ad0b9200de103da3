//! The HLG routes' handlers: chat, text completions and responses, and `GET /v1/hlg`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use mistralrs_server_core::handler_core::{create_response_channel, send_request_with_model};
use mistralrs_server_core::openai::{ChatCompletionRequest, CompletionRequest};
use mistralrs_server_core::types::SharedMistralRsState;
use mistralrs_server_core::{chat_completion, completions};
use serde_json::Value;
use std::future::Future;
use tokio::sync::mpsc::{Receiver, Sender};

use super::engine;
use super::request::Generation;
use super::security::{self, openai_error};
use super::state::{admit, invalid_request, parse, AppState};
use super::{choices, host_version, responses};
use crate::config::HlgConfig;
use crate::curve::HlgCurve;

pub(crate) async fn hlg_defaults(State(s): State<Arc<AppState>>) -> Json<HlgConfig> {
    Json(s.defaults.resolved(false))
}

/// Routes a generation request: `n > 1` split into single-choice generations when the
/// server does that, otherwise one request as upstream would run it.
async fn generate<F, Fut>(s: Arc<AppState>, g: Generation, one: F) -> Response
where
    F: Fn(Arc<AppState>, Value, Option<HlgCurve>) -> Fut + Send + Sync + Copy + 'static,
    Fut: std::future::Future<Output = Response> + Send + 'static,
{
    let Generation { v, curve, n, .. } = g;
    let streaming = v.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if n > 1 && s.choices.splits(streaming) {
        let mut single = v;
        single["n"] = Value::from(1);
        return choices::merged(n as usize, streaming, move |_| {
            one(s.clone(), single.clone(), curve)
        })
        .await;
    }
    one(s, v, curve).await
}

/// `POST /v1/responses`.
pub(crate) async fn respond(State(s): State<Arc<AppState>>, g: Generation) -> Response {
    let Generation { v, curve, raw, .. } = g;
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
    responses::create(s, v, curve, raw, prior).await
}

/// `POST /v1/chat/completions` (`S` = [`Chat`]) and `POST /v1/completions`
/// ([`Completion`]).
pub(crate) async fn generation<S: Surface>(
    State(s): State<Arc<AppState>>,
    g: Generation,
) -> Response {
    generate(s, g, one::<S>).await
}

/// An error of the engine's, as upstream's error writers take it.
type EngineError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What tells the chat route from the text-completion route: upstream's request type,
/// parser and response writers. The handler body ([`one`]) is the same for both.
pub(crate) trait Surface: Send + Sync + 'static {
    /// Upstream's request type.
    type Request: serde::de::DeserializeOwned + Send;
    /// The model the request names, when it is sent to a named model (chat), `None` for
    /// the default model (text completions, as upstream's handler sends them).
    fn model_id(req: &Self::Request) -> Option<String>;
    /// Upstream's parsing into the engine's request, and whether it streams.
    fn parse(
        req: Self::Request,
        state: SharedMistralRsState,
        tx: Sender<mistralrs_core::Response>,
    ) -> impl Future<Output = Result<(mistralrs_core::Request, bool), String>> + Send;
    /// Upstream's answer to a request the engine would not take.
    fn error(state: SharedMistralRsState, e: EngineError) -> Response;
    /// Upstream's event stream.
    fn stream(rx: Receiver<mistralrs_core::Response>, state: SharedMistralRsState) -> Response;
    /// Upstream's whole answer.
    fn whole(
        rx: &mut Receiver<mistralrs_core::Response>,
        state: SharedMistralRsState,
    ) -> impl Future<Output = Response> + Send;
}

/// A surface's three writers, from upstream's module of that name: its error, stream and
/// whole-answer functions have the same signatures in `chat_completion` and `completions`.
macro_rules! upstream_writers {
    ($module:ident) => {
        fn error(state: SharedMistralRsState, e: EngineError) -> Response {
            $module::handle_error(state, e).into_response()
        }
        fn stream(rx: Receiver<mistralrs_core::Response>, state: SharedMistralRsState) -> Response {
            $module::create_streamer(rx, state, None, None).into_response()
        }
        async fn whole(
            rx: &mut Receiver<mistralrs_core::Response>,
            state: SharedMistralRsState,
        ) -> Response {
            $module::process_non_streaming_response(rx, state)
                .await
                .into_response()
        }
    };
}

/// `POST /v1/chat/completions`.
pub(crate) struct Chat;

impl Surface for Chat {
    type Request = ChatCompletionRequest;
    fn model_id(req: &Self::Request) -> Option<String> {
        (req.model != "default").then(|| req.model.clone())
    }
    async fn parse(
        req: Self::Request,
        state: SharedMistralRsState,
        tx: Sender<mistralrs_core::Response>,
    ) -> Result<(mistralrs_core::Request, bool), String> {
        host_version::parse_chat(req, state, tx, host_version::Surface::Chat)
            .await
            .map_err(|e| e.to_string())
    }
    upstream_writers!(chat_completion);
}

/// `POST /v1/completions`.
pub(crate) struct Completion;

impl Surface for Completion {
    type Request = CompletionRequest;
    fn model_id(_: &Self::Request) -> Option<String> {
        None
    }
    async fn parse(
        req: Self::Request,
        state: SharedMistralRsState,
        tx: Sender<mistralrs_core::Response>,
    ) -> Result<(mistralrs_core::Request, bool), String> {
        completions::parse_request(req, state, tx).map_err(|e| e.to_string())
    }
    upstream_writers!(completions);
}

/// One generation (one choice, or `n` batched) on route `S`: parsed by upstream, admitted
/// and armed here, answered by upstream's writers; the admission is held until the
/// engine lets go of the request (streamed) or the answer is complete.
pub(crate) async fn one<S: Surface>(
    s: Arc<AppState>,
    v: Value,
    curve: Option<HlgCurve>,
) -> Response {
    let req: S::Request = match parse(v) {
        Ok(x) => x,
        Err(resp) => return resp,
    };
    let state = s.mistralrs.clone();
    let model_id = S::model_id(&req);
    let (tx, rx) = create_response_channel(None);
    let senders = tx.downgrade();
    let (mut request, streaming) = match S::parse(req, state.clone(), tx).await {
        Ok(x) => x,
        Err(e) => return invalid_request(e),
    };
    let mut admission = admit(&s, &mut request, curve).await;
    if let Err(e) = send_request_with_model(&state, request, model_id.as_deref()).await {
        return S::error(state, e.into());
    }
    if streaming {
        admission.track(senders);
        engine::guard_body(S::stream(rx, state), admission)
    } else {
        admission.hold(rx);
        let resp = S::whole(admission.receiver(), state).await;
        admission.finish();
        resp
    }
}
