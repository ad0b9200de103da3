//! `hlg` on `/v1/responses`, on the real engine and the embedded model.
//!
//! The engine's sampling RNG is seeded once per engine, so each comparison runs the same
//! requests, in the same order, on a fresh engine each. A Responses call with text input
//! is the chat turn `[user: input]`: with the same sampling fields it must give the same
//! tokens as the chat route, HLG included.

use std::time::Duration;

use mistralrs_hlg::HlgConfig;
use mistralrs_hlg_integration_tests::{
    call, engine, fresh_plugin, fresh_plugin_with, post_ok, run_prompts, upstream, PROMPTS,
};
use serde_json::{json, Value};

const MAX_TOKENS: u32 = 24;

fn hlg() -> Value {
    json!({"toe_shape": "exp", "toe": 1.5, "pivot_offset": 4.0})
}

fn respond(prompt: &str, extra: &Value) -> Value {
    let mut v = json!({"model": "default", "input": prompt, "max_output_tokens": MAX_TOKENS, "temperature": 1.0});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

async fn run_responses(router: &axum::Router, extra: &Value) -> Vec<String> {
    let mut out = vec![];
    for p in PROMPTS {
        let r = post_ok(router, "/v1/responses", &respond(p, extra)).await;
        assert_eq!(r["status"], "completed", "{r}");
        assert_eq!(r["object"], "response");
        assert!(r["id"].as_str().unwrap().starts_with("resp_"), "{r}");
        assert!(r["usage"]["output_tokens"].as_u64().unwrap() > 0, "{r}");
        out.push(r["output_text"].as_str().unwrap_or_default().to_string());
    }
    out
}

/// The text of a Responses event stream (its `response.output_text.delta` events), and
/// whether it ended with `response.completed`.
fn streamed_text(body: &str) -> (String, bool) {
    let mut text = String::new();
    let mut completed = false;
    for data in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        match v["type"].as_str() {
            Some("response.output_text.delta") => {
                text.push_str(v["delta"].as_str().unwrap_or_default())
            }
            Some("response.completed") => completed = true,
            _ => {}
        }
    }
    (text, completed)
}

/// `hlg` on Responses samples exactly as the same `hlg` on chat; without it the route is
/// upstream's, token for token; `--hlg-sampling on` applies there too.
#[tokio::test(flavor = "multi_thread")]
async fn responses_apply_hlg_as_chat_does() {
    let cfg = json!({"hlg": hlg()});
    let chat = run_prompts(
        &fresh_plugin().await,
        MAX_TOKENS,
        &json!({"temperature": 1.0, "hlg": hlg()}),
    )
    .await;
    let with_hlg = run_responses(&fresh_plugin().await, &cfg).await;
    assert_eq!(
        with_hlg, chat,
        "hlg on /v1/responses differs from the same hlg on chat"
    );

    let upstream_out = run_responses(&upstream(engine().await).await, &json!({})).await;
    let absent = run_responses(&fresh_plugin().await, &json!({})).await;
    assert_eq!(
        absent, upstream_out,
        "hlg absent on /v1/responses differs from upstream's route"
    );
    let off = run_responses(
        &fresh_plugin().await,
        &json!({"hlg": {"enabled": false, "toe": 1}}),
    )
    .await;
    assert_eq!(
        off, upstream_out,
        "hlg.enabled = false on /v1/responses differs from upstream's route"
    );
    assert_ne!(
        with_hlg, upstream_out,
        "HLG did not change the sampled Responses output"
    );

    let server_on = HlgConfig::from_pairs([
        ("enabled", "on"),
        ("toe_shape", "exp"),
        ("toe", "1.5"),
        ("pivot_offset", "4"),
    ])
    .unwrap();
    let by_flag = run_responses(&fresh_plugin_with(server_on).await, &json!({})).await;
    assert_eq!(
        by_flag, with_hlg,
        "--hlg-sampling on does not apply on /v1/responses"
    );
}

/// A streamed Responses call with `hlg` streams the text the non-streamed call returns,
/// ending with `response.completed`; a background one completes with it too.
#[tokio::test(flavor = "multi_thread")]
async fn responses_stream_and_background_with_hlg() {
    let cfg = json!({"hlg": hlg()});
    let plain = run_responses(&fresh_plugin().await, &cfg).await;

    let router = fresh_plugin().await;
    let mut streamed = vec![];
    for p in PROMPTS {
        let mut body = respond(p, &cfg);
        body["stream"] = json!(true);
        let (status, text) = call(&router, "POST", "/v1/responses", Some(&body)).await;
        assert_eq!(status, 200, "{text}");
        let (t, completed) = streamed_text(&text);
        assert!(completed, "no response.completed event: {text}");
        streamed.push(t);
    }
    assert_eq!(
        streamed, plain,
        "streamed Responses text differs from the non-streamed"
    );

    let router = fresh_plugin().await;
    let mut background = vec![];
    for p in PROMPTS {
        let mut body = respond(p, &cfg);
        body["background"] = json!(true);
        let queued = post_ok(&router, "/v1/responses", &body).await;
        assert_eq!(queued["status"], "queued", "{queued}");
        let id = queued["id"].as_str().unwrap().to_string();
        let done = loop {
            let (status, text) = call(&router, "GET", &format!("/v1/responses/{id}"), None).await;
            assert_eq!(status, 200, "{text}");
            let v: Value = serde_json::from_str(&text).unwrap();
            match v["status"].as_str() {
                Some("queued" | "in_progress") => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                _ => break v,
            }
        };
        assert_eq!(done["status"], "completed", "{done}");
        background.push(done["output_text"].as_str().unwrap_or_default().to_string());
    }
    assert_eq!(
        background, plain,
        "background Responses text differs from the foreground"
    );
}

/// A stored HLG response continues: `previous_response_id` sends its history (more
/// prompt tokens than the first turn), and the stored response is retrievable.
#[tokio::test(flavor = "multi_thread")]
async fn responses_continue_a_stored_hlg_response() {
    let router = fresh_plugin().await;
    let first = post_ok(
        &router,
        "/v1/responses",
        &respond("Name three fruits.", &json!({"hlg": hlg()})),
    )
    .await;
    let id = first["id"].as_str().unwrap();
    let (status, text) = call(&router, "GET", &format!("/v1/responses/{id}"), None).await;
    assert_eq!(status, 200, "{text}");
    let stored: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(stored["output_text"], first["output_text"]);
    let second = post_ok(
        &router,
        "/v1/responses",
        &respond(
            "And two more.",
            &json!({"hlg": hlg(), "previous_response_id": id}),
        ),
    )
    .await;
    let (p1, p2) = (
        first["usage"]["input_tokens"].as_u64().unwrap(),
        second["usage"]["input_tokens"].as_u64().unwrap(),
    );
    let first_out = first["usage"]["output_tokens"].as_u64().unwrap();
    assert!(p2 > p1 + first_out, "the second turn did not carry the first's history: {p1} + {first_out} then {p2} prompt tokens");
}
