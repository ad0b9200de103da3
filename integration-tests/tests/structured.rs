//! Structured output stops when its grammar is done: a JSON-schema (or regex) request
//! ends with `finish_reason` `stop` once its object is complete, and the completion-token
//! count is exactly the answer's tokens plus the one end token, with and without HLG
//! (`server::grammar` makes it so on both hosts). A stop string under HLG cuts the answer
//! where it begins.

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

/// The text of each token a choice drew, from its log-probs.
fn drawn(choice: &Value) -> Vec<String> {
    choice["logprobs"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no log-probs in {choice}"))
        .iter()
        .map(|t| t["token"].as_str().expect("a token's text").to_string())
        .collect()
}

/// The end tokens a finished grammar may end on: llguidance's (the embedded model's
/// `<|endoftext|>`), which `server::grammar` makes a stop token; on mistral.rs 0.9 also
/// the model's end of turn (`<|im_end|>`), which 0.9 lets through beside it once the
/// grammar may stop, and which the engine may draw first (it did on the greedy JSON and
/// the regex requests here).
fn end_tokens() -> &'static [&'static str] {
    if cfg!(mistralrs_host = "0.9") {
        &["<|endoftext|>", "<|im_end|>"]
    } else {
        &["<|endoftext|>"]
    }
}

/// Each choice ends where its object does, and the request's completion tokens are
/// exactly the tokens its choices drew, as their log-probs list them: the answer's own,
/// whose texts make up the answer, then one end token (`end_tokens`): the engine counts
/// it and lists it, and leaves it out of the text.
fn assert_finished(what: &str, resp: &Value) {
    let choices = resp["choices"].as_array().unwrap();
    let mut drawn_total = 0;
    for c in choices {
        let text = c["message"]["content"]
            .as_str()
            .or(c["text"].as_str())
            .unwrap();
        let tokens = drawn(c);
        let (end, own) = tokens.split_last().expect("tokens drawn");
        assert!(
            end_tokens().contains(&end.as_str()),
            "{what}: the last token drawn: {tokens:?}"
        );
        assert_eq!(
            own.concat(),
            text,
            "{what}: the drawn tokens make up the text"
        );
        drawn_total += tokens.len() as u64;
        assert_eq!(c["finish_reason"], "stop", "{what}: {text:?}");
    }
    let usage = resp["usage"]["completion_tokens"].as_u64().unwrap();
    assert_eq!(
        usage, drawn_total,
        "{what}: completion tokens against the tokens drawn: {resp}"
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
        e["logprobs"] = json!(true);
        let body = chat("What is the capital of Nigeria? Answer in JSON.", BUDGET, e);
        let resp = post_ok(&router, "/v1/chat/completions", &body).await;
        for text in texts(&resp) {
            let v: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: {text:?}: {e}"));
            assert!(v["city"].is_string(), "{what}: {text}");
        }
        assert_finished(what, &resp);
    }
}

/// A regex grammar on the completions route: the text is the match and nothing after.
#[tokio::test(flavor = "multi_thread")]
async fn a_regex_completion_stops_at_its_match() {
    let router = fresh_plugin().await;
    for hlg in [false, true] {
        let body = json!({"model": "default", "prompt": "Is the sea wet? Answer yes or no:",
            "max_tokens": BUDGET, "temperature": 0.7, "hlg": hlg, "logprobs": 1,
            "grammar": {"type": "regex", "value": "(yes|no)"}});
        let resp = post_ok(&router, "/v1/completions", &body).await;
        let text = &texts(&resp)[0];
        assert!(text == "yes" || text == "no", "hlg {hlg}: {text:?}");
        assert_finished(&format!("regex, hlg {hlg}"), &resp);
    }
}

/// A stop string under HLG: the answer is the same sampled answer without the stop string
/// cut where the string begins, `finish_reason` `stop`. Each from a fresh engine, whose
/// generator starts from the same state: neither host reads a request's `seed`.
#[tokio::test(flavor = "multi_thread")]
async fn a_stop_string_cuts_an_hlg_answer_where_it_begins() {
    let base = json!({"model": "default", "prompt": "Count from one to ten in words: one, two,",
        "max_tokens": 24, "temperature": 0.7, "hlg": true});
    let whole = post_ok(&fresh_plugin().await, "/v1/completions", &base).await;
    let whole = &texts(&whole)[0];
    let stop = ",";
    let at = whole
        .find(stop)
        .unwrap_or_else(|| panic!("the seeded answer holds no {stop:?}: {whole:?}"));
    assert!(at > 0, "{whole:?}");
    let mut body = base.clone();
    body["stop"] = json!([stop]);
    let cut = post_ok(&fresh_plugin().await, "/v1/completions", &body).await;
    assert_eq!(texts(&cut)[0], whole[..at], "whole answer: {whole:?}");
    assert_eq!(cut["choices"][0]["finish_reason"], "stop");
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
    let answer = |r: &Value| {
        (
            texts(r),
            r["choices"][0]["finish_reason"].clone(),
            r["usage"]["completion_tokens"].clone(),
        )
    };
    assert_eq!(answer(&got), answer(&want));
}
