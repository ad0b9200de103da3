//! `hlg` on Anthropic's `/v1/messages`, which mistral.rs 0.9 serves (this file is empty
//! on 0.8.1): on the real engine and the embedded model, each comparison on fresh
//! engines (the sampling RNG is seeded once per engine).
#![cfg(mistralrs_host = "0.9")]

use mistralrs_hlg_integration_tests::{
    call, engine, fresh_plugin, post_ok, run_prompts, upstream, PROMPTS,
};
use serde_json::{json, Value};

const MAX_TOKENS: u32 = 24;

fn hlg() -> Value {
    json!({"toe_shape": "exp", "toe": 1.5, "pivot_offset": 4.0})
}

fn message(prompt: &str, extra: &Value) -> Value {
    let mut v = json!({"model": "default", "max_tokens": MAX_TOKENS, "temperature": 1.0,
        "messages": [{"role": "user", "content": prompt}]});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// The text of a Messages response.
fn text(r: &Value) -> String {
    assert_eq!(r["type"], "message", "{r}");
    r["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect()
}

async fn run_messages(router: &axum::Router, extra: &Value) -> Vec<String> {
    let mut out = vec![];
    for p in PROMPTS {
        let r = post_ok(router, "/v1/messages", &message(p, extra)).await;
        assert!(r["usage"]["output_tokens"].as_u64().unwrap() > 0, "{r}");
        out.push(text(&r));
    }
    out
}

/// The text of a Messages event stream, and whether it ended with `message_stop`.
fn streamed(body: &str) -> (String, bool) {
    let mut text = String::new();
    let mut stopped = false;
    for data in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let v: Value = serde_json::from_str(data).unwrap();
        match v["type"].as_str() {
            Some("content_block_delta") => text.push_str(v["delta"]["text"].as_str().unwrap()),
            Some("message_stop") => stopped = true,
            _ => {}
        }
    }
    (text, stopped)
}

/// `hlg` on Messages samples exactly as the same `hlg` on chat, streamed or not; without
/// it the route is upstream's, token for token.
#[tokio::test(flavor = "multi_thread")]
async fn messages_apply_hlg_as_chat_does() {
    let chat = run_prompts(
        &fresh_plugin().await,
        MAX_TOKENS,
        &json!({"temperature": 1.0, "hlg": hlg()}),
    )
    .await;
    let with_hlg = run_messages(&fresh_plugin().await, &json!({"hlg": hlg()})).await;
    assert_eq!(with_hlg, chat, "hlg on /v1/messages differs from chat");

    let router = fresh_plugin().await;
    let mut streamed_texts = vec![];
    for p in PROMPTS {
        let (status, body) = call(
            &router,
            "POST",
            "/v1/messages",
            Some(&message(p, &json!({"hlg": hlg(), "stream": true}))),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let (t, stopped) = streamed(&body);
        assert!(stopped, "{body}");
        streamed_texts.push(t);
    }
    assert_eq!(streamed_texts, chat, "streamed differs from whole");

    let ours = run_messages(&fresh_plugin().await, &json!({})).await;
    let theirs = run_messages(&upstream(engine().await).await, &json!({})).await;
    assert_eq!(ours, theirs, "without hlg the route is upstream's");
    assert_ne!(ours, chat, "hlg changed nothing");
}

/// What the translation cannot carry is a 400 naming the field, in Anthropic's error
/// shape; with `"hlg": false` the same request is upstream's.
#[tokio::test(flavor = "multi_thread")]
async fn what_hlg_cannot_carry_is_refused() {
    let router = fresh_plugin().await;
    let tools = json!({"hlg": hlg(), "tools": [{"name": "t", "input_schema": {"type": "object"}}]});
    let (status, body) = call(
        &router,
        "POST",
        "/v1/messages",
        Some(&message("Hi", &tools)),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["type"], "error");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("`tools`"),
        "{body}"
    );
    let (status, body) = call(
        &router,
        "POST",
        "/v1/messages",
        Some(&message("Hi", &json!({"hlg": {"toe": -1}}))),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("toe"), "{body}");
    let (status, body) = call(
        &router,
        "POST",
        "/v1/messages",
        Some(&message("Hi", &json!({"hlg": false, "max_tokens": 4}))),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}
