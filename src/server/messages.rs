//! Anthropic's `POST /v1/messages`, which mistral.rs 0.9 serves, with `hlg`.
//!
//! Upstream turns the request into a chat request and its answer back into Anthropic's
//! shapes in private code, so an HLG call is translated here: a text-only Messages
//! request becomes the chat route's request, runs through this crate's chat path (the
//! same gate, curve and cancel-on-disconnect as `/v1/chat/completions`), and its answer,
//! whole or streamed, is translated into a Messages response. A call HLG does not apply to
//! goes to upstream's handler untouched. What the translation cannot carry (tools,
//! thinking, code execution, images, files) is refused with a 400 naming the field,
//! never dropped: `"hlg": false` sends such a request to upstream's handler.
//!
//! The translations are plain functions of JSON and compile on every host (tested on
//! 0.8.1); only the route is 0.9's.

#![cfg_attr(not(mistralrs_host = "0.9"), allow(dead_code))]

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{json, Map, Value};

use super::handlers::{one, Chat};
use super::request::{checked, JsonBody};
use super::state::{curve_for_request, AppState};

/// The route's handler: upstream's for a call without HLG, the translation otherwise.
pub(super) async fn create(
    State(s): State<Arc<AppState>>,
    body: Result<JsonBody, Response>,
) -> Response {
    let JsonBody { v, hlg, raw } = match body {
        Ok(b) => b,
        Err(resp) => return anthropic_error(resp).await,
    };
    let Some(curve) = curve_for_request(hlg.as_ref(), &s.defaults) else {
        return super::responses::upstream(&s, super::routes::MESSAGES, raw).await;
    };
    let chat = match chat_body(&v) {
        Ok(c) => c,
        Err(e) => {
            let body = json!({"type": "error", "error": {"type": "invalid_request_error", "message": e.message}});
            return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
        }
    };
    // The chat route's checks (the model, the token bounds) on the translated request.
    if let Err(resp) = checked(&s, &chat) {
        return anthropic_error(resp).await;
    }
    let streaming = chat.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let resp = one::<Chat>(s, chat, Some(curve)).await;
    if !resp.status().is_success() {
        return anthropic_error(resp).await;
    }
    if streaming {
        return translated_stream(resp);
    }
    match axum::body::to_bytes(resp.into_body(), super::security::MAX_BODY_BYTES).await {
        Ok(b) => {
            let chat: Value = serde_json::from_slice(&b).unwrap_or_default();
            axum::Json(message_response(&chat)).into_response()
        }
        Err(_) => internal("the generation's answer could not be read"),
    }
}

/// A 500 in Anthropic's error shape.
fn internal(message: &str) -> Response {
    let body = json!({"type": "error", "error": {"type": "api_error", "message": message}});
    (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response()
}

/// An error answer of this crate's chat path, with its status, in Anthropic's shape.
async fn anthropic_error(resp: Response) -> Response {
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    let chat: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    (status, axum::Json(error_body(status.as_u16(), &chat))).into_response()
}

/// The chat route's event stream as Anthropic's, event by event as it arrives; dropping
/// it (the client left) drops the chat stream and so its generation.
fn translated_stream(resp: Response) -> Response {
    let (parts, body) = resp.into_parts();
    let start = Some((body.into_data_stream(), StreamTranslator::default()));
    let out = futures::stream::unfold(start, |st| async move {
        let (mut inner, mut t) = st?;
        loop {
            match inner.next().await {
                Some(Ok(bytes)) => {
                    let s = t.feed(&bytes);
                    if !s.is_empty() {
                        return Some((Ok::<_, axum::Error>(Bytes::from(s)), Some((inner, t))));
                    }
                }
                Some(Err(e)) => return Some((Err(e), None)),
                None => {
                    let s = t.finish();
                    return (!s.is_empty()).then(|| (Ok(Bytes::from(s)), None));
                }
            }
        }
    });
    Response::from_parts(parts, Body::from_stream(out))
}

/// The Messages fields an HLG call carries into the chat request, with the chat field
/// each becomes.
const CARRIED: [(&str, &str); 20] = [
    ("model", "model"),
    ("max_tokens", "max_tokens"),
    ("stop_sequences", "stop"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("top_k", "top_k"),
    ("min_p", "min_p"),
    ("presence_penalty", "presence_penalty"),
    ("frequency_penalty", "frequency_penalty"),
    ("repetition_penalty", "repetition_penalty"),
    ("stream", "stream"),
    ("logit_bias", "logit_bias"),
    ("logprobs", "logprobs"),
    ("top_logprobs", "top_logprobs"),
    ("response_format", "response_format"),
    ("grammar", "grammar"),
    ("dry_multiplier", "dry_multiplier"),
    ("dry_base", "dry_base"),
    ("dry_allowed_length", "dry_allowed_length"),
    ("dry_sequence_breakers", "dry_sequence_breakers"),
];

/// Fields read here (`messages`, `system`) or without effect on sampling (`metadata`).
const READ: [&str; 3] = ["messages", "system", "metadata"];

/// A refused request: the message and the field it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) field: String,
    pub(crate) message: String,
}

fn refused(field: impl Into<String>, why: &str) -> Refused {
    let field = field.into();
    Refused {
        message: format!("`{field}`: {why}"),
        field,
    }
}

const TEXT_ONLY: &str = "HLG on /v1/messages takes text messages only (no tools, thinking, code execution, images or files); send `\"hlg\": false` to use upstream's handler for this request";

/// The chat request of a text-only Messages request `v` (without `hlg`).
pub(crate) fn chat_body(v: &Value) -> Result<Value, Refused> {
    let obj = v
        .as_object()
        .ok_or_else(|| refused("body", "must be a JSON object"))?;
    let mut chat = Map::new();
    for (key, value) in obj {
        if let Some((_, to)) = CARRIED.iter().find(|(from, _)| from == key) {
            if !value.is_null() {
                chat.insert((*to).into(), value.clone());
            }
        } else if !READ.contains(&key.as_str()) {
            return Err(refused(key.clone(), TEXT_ONLY));
        }
    }
    chat.entry("model").or_insert_with(|| "default".into());
    let mut messages = vec![];
    if let Some(system) = obj.get("system").filter(|s| !s.is_null()) {
        messages.push(json!({"role": "system", "content": system_text(system)?}));
    }
    let given = obj
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| refused("messages", "must be an array of messages"))?;
    for (i, m) in given.iter().enumerate() {
        messages.push(message(i, m)?);
    }
    chat.insert("messages".into(), Value::Array(messages));
    Ok(Value::Object(chat))
}

/// `system`: a text, or text blocks joined by newlines.
fn system_text(system: &Value) -> Result<String, Refused> {
    match system {
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let mut parts = vec![];
            for (j, b) in blocks.iter().enumerate() {
                parts.push(block_text(b, &format!("system[{j}]"))?);
            }
            Ok(parts.join("\n"))
        }
        _ => Err(refused(
            "system",
            "must be a text or an array of text blocks",
        )),
    }
}

/// A text block's text.
fn block_text(b: &Value, at: &str) -> Result<String, Refused> {
    match b.get("type").and_then(Value::as_str) {
        Some("text") => b
            .get("text")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| refused(format!("{at}.text"), "must be a text")),
        Some(_) => Err(refused(format!("{at}.type"), TEXT_ONLY)),
        None => Err(refused(
            format!("{at}.type"),
            "a content block needs a type",
        )),
    }
}

/// Message `i`: a role of `user` or `assistant`, and a text or text blocks (as the chat
/// route's text parts).
fn message(i: usize, m: &Value) -> Result<Value, Refused> {
    let role = m.get("role").and_then(Value::as_str);
    let role = match role {
        Some(r @ ("user" | "assistant")) => r,
        _ => {
            return Err(refused(
                format!("messages[{i}].role"),
                "must be \"user\" or \"assistant\"",
            ))
        }
    };
    let content = match m.get("content") {
        Some(Value::String(s)) => Value::String(s.clone()),
        Some(Value::Array(blocks)) => {
            let mut texts = vec![];
            for (j, b) in blocks.iter().enumerate() {
                texts.push(block_text(b, &format!("messages[{i}].content[{j}]"))?);
            }
            Value::String(texts.join("\n"))
        }
        _ => {
            return Err(refused(
                format!("messages[{i}].content"),
                "must be a text or an array of text blocks",
            ))
        }
    };
    Ok(json!({"role": role, "content": content}))
}

/// Anthropic's stop reason for the chat route's finish reason.
fn stop_reason(finish: Option<&str>) -> &'static str {
    match finish {
        Some("length") => "max_tokens",
        Some("stop_sequence") => "stop_sequence",
        _ => "end_turn",
    }
}

/// The Messages response of a chat completion response.
pub(crate) fn message_response(chat: &Value) -> Value {
    let choice = &chat["choices"][0];
    let text = choice["message"]["content"].as_str().unwrap_or("");
    let content: Vec<Value> = if text.is_empty() {
        vec![]
    } else {
        vec![json!({"type": "text", "text": text})]
    };
    json!({
        "id": chat["id"],
        "type": "message",
        "role": "assistant",
        "model": chat["model"],
        "content": content,
        "stop_reason": stop_reason(choice["finish_reason"].as_str()),
        "stop_sequence": null,
        "usage": {
            "input_tokens": chat["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
            "output_tokens": chat["usage"]["completion_tokens"].as_u64().unwrap_or(0),
        },
    })
}

/// Anthropic's error body for an error answer of the chat route (`{"error": {"message"}}`
/// or anything else).
pub(crate) fn error_body(status: u16, chat: &Value) -> Value {
    let message = chat["error"]["message"]
        .as_str()
        .or_else(|| chat["message"].as_str())
        .unwrap_or("the request failed");
    let kind = match status {
        400 | 413 | 415 | 422 => "invalid_request_error",
        401 => "authentication_error",
        404 => "not_found_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// The chat route's event stream (`data: {chunk}` events, then `data: [DONE]`) as
/// Anthropic's (`message_start`, one text block's start, deltas and stop,
/// `message_delta` with the stop reason and usage, `message_stop`), fed as it arrives.
#[derive(Default)]
pub(crate) struct StreamTranslator {
    buf: Vec<u8>,
    started: bool,
    block_open: bool,
    finished: bool,
    deltas: u64,
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

impl StreamTranslator {
    /// The Anthropic events of the complete chat events in `bytes` (an event cut between
    /// two reads waits for the rest).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> String {
        self.buf.extend_from_slice(bytes);
        let mut out = String::new();
        while let Some(end) = find_event_end(&self.buf) {
            let raw: Vec<u8> = self.buf.drain(..end.1).collect();
            let text = String::from_utf8_lossy(&raw[..end.0]).into_owned();
            for line in text.lines() {
                if let Some(data) = line.strip_prefix("data:") {
                    out += &self.data(data.trim());
                }
            }
        }
        out
    }

    /// What closes the message when the chat stream ended without a finish reason.
    pub(crate) fn finish(&mut self) -> String {
        if self.finished {
            return String::new();
        }
        self.close(None, None)
    }

    fn data(&mut self, data: &str) -> String {
        if self.finished || data == "[DONE]" {
            return String::new();
        }
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            return String::new();
        };
        if chunk.get("choices").is_none() {
            self.finished = true;
            let msg = chunk["error"]["message"]
                .as_str()
                .or_else(|| chunk["message"].as_str())
                .unwrap_or("the generation failed");
            return event(
                "error",
                &json!({"type": "error", "error": {"type": "api_error", "message": msg}}),
            );
        }
        let mut out = String::new();
        if !self.started {
            self.started = true;
            out += &event(
                "message_start",
                &json!({"type": "message_start", "message": {
                    "id": chunk["id"], "type": "message", "role": "assistant", "content": [],
                    "model": chunk["model"], "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": chunk["usage"]["prompt_tokens"].as_u64().unwrap_or(0), "output_tokens": 0},
                }}),
            );
        }
        let choice = &chunk["choices"][0];
        if let Some(text) = choice["delta"]["content"]
            .as_str()
            .filter(|t| !t.is_empty())
        {
            if !self.block_open {
                self.block_open = true;
                out += &event(
                    "content_block_start",
                    &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                );
            }
            self.deltas += 1;
            out += &event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            );
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            let usage = chunk["usage"]["completion_tokens"].as_u64();
            out += &self.close(Some(reason), usage);
        }
        out
    }

    fn close(&mut self, reason: Option<&str>, output_tokens: Option<u64>) -> String {
        self.finished = true;
        let mut out = String::new();
        if self.block_open {
            out += &event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": 0}),
            );
        }
        out += &event(
            "message_delta",
            &json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason(reason), "stop_sequence": null},
                "usage": {"output_tokens": output_tokens.unwrap_or(self.deltas)}}),
        );
        out + &event("message_stop", &json!({"type": "message_stop"}))
    }
}

/// Where the first complete event in `buf` ends: (its text's end, past its blank line).
fn find_event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| (i, i + 2));
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_request_becomes_the_chat_request() {
        let v = json!({
            "model": "default", "max_tokens": 16, "temperature": 0.7, "stop_sequences": ["\n"],
            "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
            "messages": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
                {"role": "user", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]},
            ],
            "metadata": {"user_id": "u"},
            "stream": true,
        });
        assert_eq!(
            chat_body(&v).unwrap(),
            json!({
                "model": "default", "max_tokens": 16, "temperature": 0.7, "stop": ["\n"], "stream": true,
                "messages": [
                    {"role": "system", "content": "Be brief.\nBe kind."},
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello"},
                    {"role": "user", "content": "A\nB"},
                ],
            })
        );
        // No model: the default one.
        let v = json!({"messages": [{"role": "user", "content": "Hi"}]});
        assert_eq!(chat_body(&v).unwrap()["model"], "default");
    }

    #[test]
    fn what_cannot_be_carried_is_refused_naming_the_field() {
        let field = |v: Value| chat_body(&v).unwrap_err().field;
        let m = json!([{"role": "user", "content": "Hi"}]);
        assert_eq!(field(json!({"messages": m, "tools": []})), "tools");
        assert_eq!(
            field(json!({"messages": m, "thinking": {"type": "enabled"}})),
            "thinking"
        );
        assert_eq!(
            field(
                json!({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})
            ),
            "messages[0].content[0].type"
        );
        assert_eq!(
            field(json!({"messages": [{"role": "system", "content": "x"}]})),
            "messages[0].role"
        );
        assert_eq!(
            field(json!({"messages": [{"role": "user", "content": 5}]})),
            "messages[0].content"
        );
        assert_eq!(field(json!({"messages": "Hi"})), "messages");
        assert_eq!(field(json!({"system": 3, "messages": m})), "system");
        assert_eq!(field(json!([1])), "body");
        let e = chat_body(&json!({"messages": m, "tools": []})).unwrap_err();
        assert!(e.message.contains("\"hlg\": false"), "{}", e.message);
    }

    #[test]
    fn a_chat_answer_becomes_a_message() {
        let chat = json!({"id": "chatcmpl-1", "model": "m", "choices": [{"message": {"role": "assistant", "content": "Hi there"}, "finish_reason": "length"}], "usage": {"prompt_tokens": 7, "completion_tokens": 3}});
        assert_eq!(
            message_response(&chat),
            json!({"id": "chatcmpl-1", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "text", "text": "Hi there"}], "stop_reason": "max_tokens", "stop_sequence": null,
                "usage": {"input_tokens": 7, "output_tokens": 3}})
        );
        let e = error_body(400, &json!({"error": {"message": "bad `n`"}}));
        assert_eq!(
            e,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad `n`"}})
        );
    }

    /// The events of a translated stream: (name, data).
    fn events(s: &str) -> Vec<(String, Value)> {
        s.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let mut lines = e.lines();
                let name = lines.next().unwrap().strip_prefix("event: ").unwrap();
                let data = lines.next().unwrap().strip_prefix("data: ").unwrap();
                (name.to_string(), serde_json::from_str(data).unwrap())
            })
            .collect()
    }

    #[test]
    fn a_chat_stream_becomes_message_events_whatever_the_reads() {
        let chunk = |content: &str, finish: Value| {
            format!(
                "data: {}\n\n",
                json!({"id": "c1", "model": "m", "choices": [{"delta": {"content": content}, "finish_reason": finish}]})
            )
        };
        let stream = chunk("Hel", Value::Null)
            + ": keep-alive\n\n"
            + &chunk("lo", Value::Null)
            + &chunk("", json!("stop"))
            + "data: [DONE]\n\n";
        // Fed whole, and fed one byte at a time: the same events.
        let mut t = StreamTranslator::default();
        let whole = t.feed(stream.as_bytes()) + &t.finish();
        let mut t = StreamTranslator::default();
        let mut bytewise = String::new();
        for b in stream.as_bytes() {
            bytewise += &t.feed(std::slice::from_ref(b));
        }
        bytewise += &t.finish();
        assert_eq!(whole, bytewise);
        let ev = events(&whole);
        let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(ev[0].1["message"]["id"], "c1");
        assert_eq!(ev[2].1["delta"]["text"], "Hel");
        assert_eq!(ev[3].1["delta"]["text"], "lo");
        assert_eq!(ev[5].1["delta"]["stop_reason"], "end_turn");
        // Without usage in the stream, the output tokens are the deltas counted.
        assert_eq!(ev[5].1["usage"]["output_tokens"], 2);
    }

    #[test]
    fn a_stream_cut_short_or_failing_still_ends_the_message() {
        let mut t = StreamTranslator::default();
        let s = t.feed(
            format!(
                "data: {}\r\n\r\n",
                json!({"id": "c", "model": "m", "choices": [{"delta": {"content": "a"}, "finish_reason": null}]})
            )
            .as_bytes(),
        ) + &t.finish();
        let names: Vec<String> = events(&s).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names.last().unwrap(), "message_stop");
        assert!(names.contains(&"content_block_stop".to_string()));
        let mut t = StreamTranslator::default();
        let s = t.feed(b"data: {\"error\": {\"message\": \"engine stopped\"}}\n\n") + &t.finish();
        let ev = events(&s);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].0, "error");
        assert_eq!(ev[0].1["error"]["message"], "engine stopped");
    }
}
