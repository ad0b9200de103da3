//! Structured output stops when its grammar is done: a JSON-schema (or regex) request
//! ends with `finish_reason` `stop` once its object is complete, and the completion-token
//! count is what the text holds, with and without HLG (`server::grammar` makes it so on
//! both hosts).

use mistralrs_hlg_integration_tests::{chat, engine, fresh_plugin, post_ok, texts, upstream};
use serde_json::{json, Value};

const BUDGET: u32 = 120;

fn city_schema() -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {
            "name": "city",
            "schema": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 24}},
                "required": ["city"],
                "additionalProperties": false
            }
        }
    })
}

/// The answer's text, finish reason and completion tokens.
fn answer(resp: &Value) -> (String, String, u64) {
    (
        texts(resp)[0].clone(),
        resp["choices"][0]["finish_reason"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        resp["usage"]["completion_tokens"].as_u64().unwrap(),
    )
}

/// The answer ends where the object does, and spends only its own tokens.
fn assert_finished(what: &str, (text, finish, tokens): &(String, String, u64)) {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: {text:?}: {e}"));
    assert!(v["city"].is_string(), "{what}: {text}");
    assert_eq!(finish, "stop", "{what}: {text:?} after {tokens} tokens");
    assert!(
        *tokens < 40,
        "{what}: {tokens} completion tokens for {text:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_json_schema_request_stops_when_its_object_is_complete() {
    let router = fresh_plugin().await;
    for (what, extra) in [
        ("greedy", json!({"temperature": 0.0})),
        ("sampled", json!({"temperature": 0.7})),
        ("hlg", json!({"temperature": 0.7, "hlg": true})),
        (
            "hlg, n = 2",
            json!({"temperature": 0.7, "hlg": true, "n": 2}),
        ),
    ] {
        let mut e = extra;
        e["response_format"] = city_schema();
        let body = chat("What is the capital of Nigeria? Answer in JSON.", BUDGET, e);
        let resp = post_ok(&router, "/v1/chat/completions", &body).await;
        let choices = resp["choices"].as_array().unwrap();
        // Usage is the request's: each choice gets its share.
        let tokens = resp["usage"]["completion_tokens"].as_u64().unwrap() / choices.len() as u64;
        for c in choices {
            let one = json!({"choices": [c], "usage": {"completion_tokens": tokens}});
            assert_finished(what, &answer(&one));
        }
    }
}

/// A regex grammar on the completions route: the text is the match and nothing after.
#[tokio::test(flavor = "multi_thread")]
async fn a_regex_completion_stops_at_its_match() {
    let router = fresh_plugin().await;
    for hlg in [false, true] {
        let body = json!({"model": "default", "prompt": "Is the sea wet? Answer yes or no:",
            "max_tokens": BUDGET, "temperature": 0.7, "hlg": hlg,
            "grammar": {"type": "regex", "value": "(yes|no)"}});
        let resp = post_ok(&router, "/v1/completions", &body).await;
        let (text, finish, tokens) = answer(&resp);
        assert!(text == "yes" || text == "no", "hlg {hlg}: {text:?}");
        assert_eq!(finish, "stop", "hlg {hlg}: {text:?} after {tokens} tokens");
        assert!(
            tokens <= 3,
            "hlg {hlg}: {tokens} completion tokens for {text:?}"
        );
    }
}

/// Requests without a grammar are the engine's own, stop tokens and all.
#[tokio::test(flavor = "multi_thread")]
async fn requests_without_a_grammar_are_untouched() {
    let body = chat("Name three fruits.", 24, json!({"temperature": 0.0}));
    let want = post_ok(
        &upstream(engine().await).await,
        "/v1/chat/completions",
        &body,
    )
    .await;
    let got = post_ok(&fresh_plugin().await, "/v1/chat/completions", &body).await;
    assert_eq!(answer(&got), answer(&want));
}
