//! `POST /v1/responses` with HLG.
//!
//! mistral.rs 0.8.1 builds the engine request of a Responses call inside one private
//! function, with no place to add a logits processor. So a call that HLG applies to (an
//! `hlg` object that is on, or the server's `--hlg-sampling on`) is served here: the
//! Responses body becomes a chat request (instructions as the system message, the stored
//! history of `previous_response_id`, the input), which upstream's chat parser turns into
//! the engine request, armed as on chat. Upstream's own types carry the result: its
//! Responses streamer for `stream: true`, its response resource, cache and background
//! task manager otherwise. A call HLG does not apply to goes to upstream's handler
//! unchanged, so the disabled path stays the engine's own.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use either::Either;
use mistralrs_core::{ChatCompletionResponse, Response as EngineResponse};
use mistralrs_server_core::background_tasks::get_background_task_manager;
use mistralrs_server_core::cached_responses::get_response_cache;
use mistralrs_server_core::chat_completion;
use mistralrs_server_core::handler_core::{create_response_channel, send_request_with_model};
use mistralrs_server_core::openai::{
    ChatCompletionRequest, JsonSchemaResponseFormat, Message, MessageContent, ResponseFormat,
};
use mistralrs_server_core::responses::{
    OpenResponsesCreateRequest, OpenResponsesStreamer, RequestContext, TextFormat,
};
use mistralrs_server_core::responses_types::content::OutputContent;
use mistralrs_server_core::responses_types::enums::{
    ItemStatus, ResponseStatus, TruncationStrategy,
};
use mistralrs_server_core::responses_types::items::OutputItem;
use mistralrs_server_core::responses_types::resource::{
    ResponseError, ResponseResource, ResponseUsage,
};
use serde_json::Value;
use tokio::sync::mpsc::Receiver;
use tower::ServiceExt;

use super::engine;
use super::host_version::{self, Surface};
use super::security::openai_error;
use super::state::{admit, invalid_request, parse, AppState};
use crate::curve::HlgCurve;

/// The route's handler: `v` is the body without `hlg`, `curve` what HLG the call runs
/// with, `body` the request as it came (for upstream when `curve` is `None`).
pub(super) async fn create(
    s: Arc<AppState>,
    v: Value,
    curve: Option<HlgCurve>,
    body: Bytes,
    prior: Option<Vec<Message>>,
) -> Response {
    let Some(curve) = curve else {
        return upstream(&s, super::routes::RESPONSES, body).await;
    };
    let req: OpenResponsesCreateRequest = match parse(v) {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    if req.n_choices > 1 && s.choices.splits(req.stream.unwrap_or(false)) {
        return openai_error(StatusCode::BAD_REQUEST, format!("`n` = {} with HLG on /v1/responses: this server splits `n > 1` into single generations (--hlg-n-choices split: the default on the CPU, and for streams on mistral.rs 0.8.1), which a response cannot hold; send one request per choice, or use /v1/chat/completions, which splits them", req.n_choices), Some("n"));
    }
    let call = match Call::new(req, prior) {
        Ok(c) => c,
        Err(resp) => return resp,
    };
    if call.background {
        return background(s, call, curve).await;
    }
    let (tx, rx) = create_response_channel(None);
    let senders = tx.downgrade();
    let streaming = call.stream;
    let mut request = match call.engine_request(&s, tx).await {
        Ok(x) => x,
        Err(e) => return invalid_request(e),
    };
    let mut admission = admit(&s, &mut request, Some(curve)).await;
    if let Err(e) = send_request_with_model(&s.mistralrs, request, call.model_id()).await {
        return chat_completion::handle_error(s.mistralrs.clone(), e.into()).into_response();
    }
    if streaming {
        admission.track(senders);
        return stream(&s, call, rx, admission);
    }
    admission.hold(rx);
    let answer = admission.receiver().recv().await;
    admission.finish();
    match call.finish(answer) {
        Ok(resource) => axum::Json(resource).into_response(),
        Err((status, resource)) => (status, axum::Json(resource)).into_response(),
    }
}

/// The call's events through upstream's Responses streamer, the turn held until the
/// engine lets go.
fn stream(
    s: &AppState,
    call: Call,
    rx: Receiver<EngineResponse>,
    admission: engine::Admission,
) -> Response {
    let history = call.store.then_some(call.history);
    let streamer = OpenResponsesStreamer::new(
        rx,
        s.mistralrs.clone(),
        call.id,
        call.model,
        call.metadata,
        call.store,
        history,
        call.context,
        #[cfg(mistralrs_host = "0.9")]
        None,
    );
    let interval = std::time::Duration::from_millis(
        mistralrs_server_core::streaming::get_keep_alive_interval(),
    );
    let sse = Sse::new(streamer).keep_alive(KeepAlive::new().interval(interval));
    engine::guard_body(sse.into_response(), admission)
}

/// Upstream's handler of `path`, for a call HLG does not apply to.
pub(super) async fn upstream(s: &AppState, path: &str, body: Bytes) -> Response {
    let req = axum::http::Request::post(path)
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(body));
    let Ok(req) = req else {
        return openai_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "building the upstream request".into(),
            None,
        );
    };
    match s.upstream.clone().oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

/// Runs the call in the background as upstream does: a queued resource now, the result
/// through upstream's task manager (`GET /v1/responses/{id}`).
async fn background(s: Arc<AppState>, call: Call, curve: HlgCurve) -> Response {
    let tasks = get_background_task_manager();
    let id = tasks.create_task(call.model.clone());
    let mut queued = ResponseResource::new(id.clone(), call.model.clone(), now())
        .with_status(ResponseStatus::Queued);
    queued.metadata = call.metadata.clone();
    let call = Call {
        id: id.clone(),
        ..call
    };
    tokio::spawn(async move {
        let (tx, rx) = create_response_channel(None);
        let mut request = match call.engine_request(&s, tx).await {
            Ok(x) => x,
            Err(e) => {
                tasks.mark_failed(&id, ResponseError::new("parse_error", e));
                return;
            }
        };
        let mut admission = admit(&s, &mut request, Some(curve)).await;
        tasks.mark_in_progress(&id);
        if let Err(e) = send_request_with_model(&s.mistralrs, request, call.model_id()).await {
            tasks.mark_failed(&id, ResponseError::new("send_error", e.to_string()));
            return;
        }
        admission.hold(rx);
        let answer = admission.receiver().recv().await;
        admission.finish();
        match call.finish(answer) {
            Ok(resource) => tasks.mark_completed(&id, resource),
            Err((_, resource)) => tasks.mark_failed(
                &id,
                resource
                    .error
                    .unwrap_or_else(|| ResponseError::new("unknown_error", "no result")),
            ),
        };
    });
    axum::Json(queued).into_response()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A fresh id in upstream's shape (`resp_` and 32 hex digits).
fn fresh_id(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    // An id that repeats after a failed draw would only collide in the response cache.
    let _ = getrandom::fill(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}_{hex}")
}

/// What upstream refuses, refused as the client's error naming the field.
fn refuse_unsupported(r: &OpenResponsesCreateRequest) -> Result<(), Response> {
    if r.parallel_tool_calls == Some(false) {
        let msg = "`parallel_tool_calls` = false is not supported by mistral.rs";
        return Err(openai_error(
            StatusCode::BAD_REQUEST,
            msg.into(),
            Some("parallel_tool_calls"),
        ));
    }
    if r.max_tool_calls.is_some() {
        let msg = "`max_tool_calls` is not supported by mistral.rs";
        return Err(openai_error(
            StatusCode::BAD_REQUEST,
            msg.into(),
            Some("max_tool_calls"),
        ));
    }
    Ok(())
}

/// The request parameters a response resource echoes back.
fn context(r: &OpenResponsesCreateRequest) -> RequestContext {
    RequestContext {
        tools: r.tools.clone(),
        tool_choice: r.tool_choice.clone(),
        parallel_tool_calls: r.parallel_tool_calls,
        text: r.text.clone(),
        temperature: r.temperature,
        top_p: r.top_p,
        presence_penalty: r.presence_penalty,
        frequency_penalty: r.frequency_penalty,
        top_logprobs: r.top_logprobs,
        max_output_tokens: r.max_output_tokens,
        max_tool_calls: r.max_tool_calls,
        store: r.store,
        background: r.background,
    }
}

/// The conversation the call sends: the instructions as the system message, the stored
/// history of `previous_response_id` (`prior`, looked up by the route), then the input.
fn history(r: &OpenResponsesCreateRequest, prior: Option<Vec<Message>>) -> Vec<Message> {
    let mut history = vec![];
    if let Some(i) = &r.instructions {
        history.push(text_message("system", i.clone()));
    }
    history.extend(prior.unwrap_or_default());
    match r.input.clone().into_either() {
        Either::Left(messages) => history.extend(messages),
        Either::Right(text) => history.push(text_message("user", text)),
    }
    history
}

/// The output format: the Responses `text.format`, else the chat-style `response_format`.
fn response_format(
    text: Option<TextFormat>,
    fallback: Option<ResponseFormat>,
) -> Option<ResponseFormat> {
    let schema = |name, schema| {
        Some(ResponseFormat::JsonSchema {
            json_schema: JsonSchemaResponseFormat { name, schema },
        })
    };
    match text {
        Some(TextFormat::Text) => Some(ResponseFormat::Text),
        Some(TextFormat::JsonSchema {
            name, schema: s, ..
        }) => schema(name, s.unwrap_or_else(|| Value::Object(Default::default()))),
        Some(TextFormat::JsonObject) => {
            schema("json_object".into(), serde_json::json!({"type": "object"}))
        }
        None => fallback,
    }
}

/// `reasoning.effort` as upstream's chat fields: thinking on for any effort but `none`.
fn reasoning(r: &OpenResponsesCreateRequest) -> (Option<bool>, Option<String>) {
    let effort = r.reasoning.as_ref().and_then(|c| c.effort);
    let name = effort
        .and_then(|e| serde_json::to_value(e).ok())
        .and_then(|v| v.as_str().map(str::to_owned));
    (effort.map(|_| name.as_deref() != Some("none")), name)
}

/// The chat request the call runs as.
fn chat_request(r: OpenResponsesCreateRequest, messages: Vec<Message>) -> ChatCompletionRequest {
    let (enable_thinking, reasoning_effort) = reasoning(&r);
    ChatCompletionRequest {
        messages: Either::Left(messages),
        model: r.model,
        logit_bias: r.logit_bias,
        logprobs: r.logprobs,
        top_logprobs: r.top_logprobs,
        max_tokens: r.max_output_tokens,
        n_choices: r.n_choices,
        presence_penalty: r.presence_penalty,
        frequency_penalty: r.frequency_penalty,
        repetition_penalty: r.repetition_penalty,
        stop_seqs: r.stop_seqs,
        temperature: r.temperature,
        top_p: r.top_p,
        stream: r.stream,
        tools: r.tools,
        tool_choice: r.tool_choice,
        response_format: response_format(r.text.and_then(|t| t.format), r.response_format),
        #[cfg(not(mistralrs_host = "0.9"))]
        web_search_options: r.web_search_options,
        #[cfg(mistralrs_host = "0.9")]
        web_search_options: None,
        top_k: r.top_k,
        grammar: r.grammar,
        min_p: r.min_p,
        dry_multiplier: r.dry_multiplier,
        dry_base: r.dry_base,
        dry_allowed_length: r.dry_allowed_length,
        dry_sequence_breakers: r.dry_sequence_breakers,
        enable_thinking,
        reasoning_effort,
        truncate_sequence: r.truncation.map(|t| matches!(t, TruncationStrategy::Auto)),
        #[cfg(mistralrs_host = "0.9")]
        adapter: r.adapter,
        #[cfg(mistralrs_host = "0.9")]
        ignore_eos: false,
        #[cfg(mistralrs_host = "0.9")]
        agent_permission: None,
        #[cfg(mistralrs_host = "0.9")]
        code_execution_permission: None,
        #[cfg(mistralrs_host = "0.9")]
        enable_shell: false,
        #[cfg(mistralrs_host = "0.9")]
        shell_skill_references: vec![],
        #[cfg(mistralrs_host = "0.9")]
        session_id: None,
        #[cfg(mistralrs_host = "0.9")]
        files: None,
        #[cfg(mistralrs_host = "0.9")]
        chat_template_kwargs: None,
        #[cfg(mistralrs_host = "0.9")]
        max_tool_rounds: None,
    }
}

/// A Responses call as a chat request, with what its answer echoes back.
struct Call {
    chat: ChatCompletionRequest,
    /// The conversation sent (stored for a later `previous_response_id`).
    history: Vec<Message>,
    context: RequestContext,
    id: String,
    model: String,
    metadata: Option<Value>,
    store: bool,
    stream: bool,
    background: bool,
}

fn text_message(role: &str, text: String) -> Message {
    Message {
        content: Some(MessageContent::from_text(text)),
        role: role.into(),
        name: None,
        tool_calls: None,
        tool_call_id: None,
        #[cfg(mistralrs_host = "0.9")]
        reasoning_content: None,
    }
}

impl Call {
    /// The engine's request for this call (upstream's chat parsing), answering on `tx`.
    async fn engine_request(
        &self,
        s: &AppState,
        tx: tokio::sync::mpsc::Sender<EngineResponse>,
    ) -> Result<mistralrs_core::Request, String> {
        host_version::parse_chat(
            self.chat.clone(),
            s.mistralrs.clone(),
            tx,
            Surface::Responses,
        )
        .await
        .map(|(request, _)| request)
        .map_err(|e| e.to_string())
    }

    fn new(r: OpenResponsesCreateRequest, prior: Option<Vec<Message>>) -> Result<Self, Response> {
        refuse_unsupported(&r)?;
        let context = context(&r);
        let history = history(&r, prior);
        let (id, model, metadata) = (fresh_id("resp"), r.model.clone(), r.metadata.clone());
        let (store, stream, background) = (
            r.store.unwrap_or(true),
            r.stream.unwrap_or(false),
            r.background.unwrap_or(false),
        );
        let chat = chat_request(r, history.clone());
        Ok(Call {
            chat,
            history,
            context,
            id,
            model,
            metadata,
            store,
            stream,
            background,
        })
    }

    fn model_id(&self) -> Option<&str> {
        (self.model != "default").then_some(self.model.as_str())
    }

    /// The engine's answer as a response resource (stored when the call asked), or the
    /// status and failed resource of an error.
    fn finish(
        mut self,
        answer: Option<EngineResponse>,
    ) -> Result<ResponseResource, (StatusCode, ResponseResource)> {
        let failed = |this: &Self, status: StatusCode, kind: &str, msg: String| {
            let mut r = this.resource(None);
            r.status = ResponseStatus::Failed;
            r.error = Some(ResponseError::new(kind, super::security::scrub_paths(&msg)));
            (status, r)
        };
        match answer {
            Some(EngineResponse::Done(done)) => {
                let resource = self.resource(Some(&done));
                if self.store {
                    let cache = get_response_cache();
                    let _ = cache.store_response(self.id.clone(), resource.clone());
                    for choice in &done.choices {
                        if let Some(text) = &choice.message.content {
                            self.history
                                .push(text_message(&choice.message.role, text.clone()));
                        }
                    }
                    let _ = cache.store_conversation_history(
                        self.id.clone(),
                        std::mem::take(&mut self.history),
                    );
                }
                Ok(resource)
            }
            Some(EngineResponse::ModelError(msg, partial)) => {
                let (status, mut r) = failed(
                    &self,
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "model_error",
                    msg.clone(),
                );
                r.output = self.resource(Some(&partial)).output;
                Err((status, r))
            }
            Some(EngineResponse::ValidationError(e)) => Err(failed(
                &self,
                StatusCode::BAD_REQUEST,
                "validation_error",
                e.to_string(),
            )),
            Some(EngineResponse::InternalError(e)) => Err(failed(
                &self,
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                e.to_string(),
            )),
            _ => Err(failed(
                &self,
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "the engine ended the request without an answer".into(),
            )),
        }
    }

    /// The response resource: the request's echoed parameters, and the output of `done`.
    fn resource(&self, done: Option<&ChatCompletionResponse>) -> ResponseResource {
        let mut r = ResponseResource::new(
            self.id.clone(),
            done.map_or_else(|| self.model.clone(), |d| d.model.clone()),
            done.map_or_else(now, |d| d.created),
        );
        let c = &self.context;
        r.metadata = self.metadata.clone();
        r.tools = c.tools.clone();
        r.tool_choice = c.tool_choice.clone();
        r.parallel_tool_calls = c.parallel_tool_calls;
        r.text = c.text.clone();
        r.temperature = c.temperature;
        r.top_p = c.top_p;
        r.presence_penalty = c.presence_penalty;
        r.frequency_penalty = c.frequency_penalty;
        r.top_logprobs = c.top_logprobs;
        r.max_output_tokens = c.max_output_tokens;
        r.max_tool_calls = c.max_tool_calls;
        r.store = c.store;
        r.background = c.background;
        let Some(done) = done else { return r };
        let mut texts = vec![];
        let mut reasoning = vec![];
        for choice in &done.choices {
            let m = &choice.message;
            for call in m.tool_calls.iter().flatten() {
                r.output.push(OutputItem::function_call(
                    fresh_id("fc"),
                    call.id.clone(),
                    call.function.name.clone(),
                    #[cfg(mistralrs_host = "0.9")]
                    None,
                    call.function.arguments.clone(),
                    ItemStatus::Completed,
                ));
            }
            if let Some(text) = &m.content {
                texts.push(text.clone());
                r.output.push(OutputItem::message(
                    fresh_id("msg"),
                    vec![OutputContent::text(text.clone())],
                    ItemStatus::Completed,
                ));
            }
            reasoning.extend(m.reasoning_content.clone());
        }
        r.status = ResponseStatus::Completed;
        r.output_text = (!texts.is_empty()).then(|| texts.concat());
        r.reasoning = (!reasoning.is_empty()).then(|| reasoning.concat());
        r.usage = Some(ResponseUsage::new(
            done.usage.prompt_tokens,
            done.usage.completion_tokens,
        ));
        r.completed_at = Some(now());
        r
    }
}
