//! The `mistralrs-hlg serve` binary, as a user starts it, on the embedded model: `hlg` is
//! honoured on every generation route the host serves (chat, text completions,
//! responses; Anthropic's messages on mistral.rs 0.9), and a bad `hlg` there is a 400
//! naming the field. Talks HTTP/1.1 over a plain socket, so that this package needs no
//! client library.
//!
//! "Honoured" is measured, not read off a field: at T = 1 a curve whose toe is a cliff
//! just under the top token (exp toe, β = 1e-3) samples the greedy text, where plain
//! T = 1 on the same fresh server does not.

mod common;

use common::Server;
use serde_json::{json, Value};
use std::process::{Command, Stdio};

const TOKENS: u64 = 16;
const PROMPT: &str = "Describe the sea in one sentence.";

/// A generation route: its path, its request's own fields (`TOKENS` tokens of
/// `PROMPT`), and the text of a reply.
struct Route {
    path: &'static str,
    fields: Value,
    text: fn(&Value) -> String,
}

impl Route {
    /// The request at `temperature`, with `hlg` when it is not null.
    fn body(&self, temperature: f64, hlg: &Value) -> Value {
        let mut v = self.fields.clone();
        v["model"] = json!("default");
        v["temperature"] = json!(temperature);
        if !hlg.is_null() {
            v["hlg"] = hlg.clone();
        }
        v
    }
}

fn routes() -> Vec<Route> {
    let choice = |v: &Value| -> String {
        let c = &v["choices"][0];
        c["message"]["content"]
            .as_str()
            .or(c["text"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    // Chat completions and Anthropic's messages take the same fields.
    let chat = json!({"max_tokens": TOKENS, "messages": [{"role": "user", "content": PROMPT}]});
    let mut r = vec![
        Route {
            path: "/v1/chat/completions",
            fields: chat.clone(),
            text: choice,
        },
        Route {
            path: "/v1/completions",
            fields: json!({"max_tokens": TOKENS, "prompt": "The sea is"}),
            text: choice,
        },
        Route {
            path: "/v1/responses",
            fields: json!({"max_output_tokens": TOKENS, "input": PROMPT}),
            text: |v| v["output_text"].as_str().unwrap_or_default().to_string(),
        },
    ];
    if cfg!(mistralrs_host = "0.9") {
        r.push(Route {
            path: "/v1/messages",
            fields: chat,
            text: |v| {
                v["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|b| b["text"].as_str())
                    .collect()
            },
        });
    }
    r
}

/// The toe a cliff just under the top token: near-greedy sampling at any temperature.
fn cliff() -> Value {
    json!({"pivot": "top", "pivot_offset": 0.0, "width": 0.0, "shoulder": "off",
           "toe": 0.001, "toe_shape": "exp"})
}

fn ok_text(s: &Server, r: &Route, t: f64, hlg: &Value) -> String {
    let (status, body) = s.post(r.path, &r.body(t, hlg));
    assert_eq!(status, 200, "{} answered {status}: {body}", r.path);
    let v: Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{}: {e}: {body}", r.path));
    let text = (r.text)(&v);
    assert!(!text.is_empty(), "{}: no text in {body}", r.path);
    text
}

#[test]
fn serve_honours_hlg_on_every_generation_route() {
    let s = Server::start();
    let mut plain_differs = 0;
    for r in routes() {
        let greedy = ok_text(&s, &r, 0.0, &Value::Null);
        let cliff_t1 = ok_text(&s, &r, 1.0, &cliff());
        assert_eq!(
            cliff_t1, greedy,
            "{}: `hlg` with a cliff toe at T = 1 should sample the greedy text",
            r.path
        );
        if ok_text(&s, &r, 1.0, &Value::Null) != greedy {
            plain_differs += 1;
        }
        // Parsed on this route, not dropped: a bad value is a 400 that names the field.
        let (status, body) = s.post(r.path, &r.body(1.0, &json!({"toe": -1})));
        assert_eq!(
            status, 400,
            "{}: a bad `hlg` answered {status}: {body}",
            r.path
        );
        assert!(
            body.contains("toe"),
            "{}: the 400 does not name the field: {body}",
            r.path
        );
    }
    // The comparison has power: without the curve, T = 1 leaves the greedy path.
    assert!(
        plain_differs > 0,
        "plain T = 1 gave the greedy text on every route"
    );
    if !cfg!(mistralrs_host = "0.9") {
        // mistral.rs 0.8.1 has no Messages route: refused (unknown, or `hlg` on a route
        // this crate does not own), never generated.
        let (status, body) = s.post(
            "/v1/messages",
            &json!({"model": "default", "max_tokens": 4,
            "messages": [{"role": "user", "content": "Hi"}], "hlg": cliff()}),
        );
        assert!(
            (400..500).contains(&status),
            "/v1/messages on 0.8.1: {status} {body}"
        );
    }
    let (status, _) = s.request("GET", "/v1/models", None).unwrap();
    assert_eq!(
        status, 200,
        "the server still serves after the bad requests"
    );
}

/// `serve -m DIR` on a model in Hugging Face's layout (a tiny random-weight Llama the test
/// writes), with upstream's `--isq`: served under the directory's name, and `hlg` taken.
#[test]
fn serve_loads_a_hugging_face_directory_with_isq() {
    let dir = std::env::temp_dir().join(format!("hlg-serve-plain-{}", std::process::id()));
    mistralrs_hlg_integration_tests::tiny::write_plain_llama(&dir, 32_000).unwrap();
    let s = Server::start_with(&["-m", dir.to_str().unwrap(), "--isq", "q8_0"]);
    let (status, models) = s.request("GET", "/v1/models", None).unwrap();
    let name = dir.file_name().unwrap().to_str().unwrap();
    assert!(status == 200 && models.contains(name), "{status} {models}");
    assert!(
        s.log_text().contains("q8_0") || s.log_text().to_lowercase().contains("isq"),
        "{}",
        s.log_text()
    );
    for r in &routes()[..2] {
        let greedy = ok_text(&s, r, 0.0, &Value::Null);
        assert_eq!(ok_text(&s, r, 1.0, &cliff()), greedy, "{}", r.path);
    }
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first token's five likeliest answers to a fixed chat prompt, with their log-probs
/// (at T = 1: the host's greedy path reports other numbers), tokens named as the host
/// names them (an id or a string).
fn first_top_logprobs(s: &Server) -> Vec<(String, f64)> {
    let body = json!({
        "model": "default",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 1,
        "temperature": 1.0,
        "logprobs": true,
        "top_logprobs": 5,
    });
    let (status, text) = s.post("/v1/chat/completions", &body);
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    mistralrs_hlg_integration_tests::first_top_logprobs(&v)
}

/// The largest log-prob difference over the tokens both lists hold (at least three).
fn max_diff(a: &[(String, f64)], b: &[(String, f64)]) -> f64 {
    let common: Vec<f64> = a
        .iter()
        .filter_map(|(t, x)| b.iter().find(|(u, _)| u == t).map(|(_, y)| (x - y).abs()))
        .collect();
    assert!(common.len() >= 3, "{a:?} vs {b:?}");
    common.into_iter().fold(0.0, f64::max)
}

/// `--weights`: by default the embedded Q4_1 model is served as dense F16 (`auto`),
/// `as-is` keeps its blocks, `f32` is dense F32, and each is what the engine computes
/// on, not only what it logs: the first token's log-probs from dense F16 lie within F16's
/// rounding of dense F32's, and the blocks' (whose products also round the activations
/// to 8 bits) lie further off. (On mistral.rs 0.9.2 `f16` once logged F16 and served the
/// blocks: its GGUF loader ignores candle's dequantize-at-load, `weights::DENSE_AT_LOAD`.)
/// A format that needs a GGUF file on a Hugging Face directory stops start-up with the
/// option named.
#[test]
fn serve_weights_formats() {
    let mut top = vec![];
    for (args, logged) in [
        // The `weights` field's value (the log is coloured between a field and its value).
        (&[][..], "\"f16\""),
        (&["--weights", "as-is"][..], "\"as-is\""),
        (&["--weights", "f32"][..], "\"f32\""),
    ] {
        let s = Server::start_with(args);
        assert!(s.log_text().contains(logged), "{args:?}: {}", s.log_text());
        top.push(first_top_logprobs(&s));
    }
    let (f16, as_is, f32) = (&top[0], &top[1], &top[2]);
    let (dense, blocks) = (max_diff(f16, f32), max_diff(as_is, f32));
    eprintln!("first token's top log-probs, largest difference from dense F32: F16 {dense:.2e}, the Q4_1 blocks {blocks:.2e}");
    assert!(
        dense < 0.05 && blocks > 2.0 * dense && blocks > 1e-3,
        "F16 {f16:?}, as-is {as_is:?}, F32 {f32:?}"
    );
    let dir = std::env::temp_dir().join(format!("hlg-serve-weights-{}", std::process::id()));
    mistralrs_hlg_integration_tests::tiny::write_plain_llama(&dir, 32_000).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mistralrs-hlg"))
        .args([
            "serve",
            "--port",
            "0",
            "-m",
            dir.to_str().unwrap(),
            "--weights",
            "f16",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success() && text.contains("--weights f16"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every route of the route table, on `serve --api-key`: without the key each answers
/// 401 but health; with it, the public rows are served (whatever their handler then says
/// to a body that is not a request) and every other row, the web UI's included, is the
/// allowlist's 404 naming `--allow-admin-routes`.
#[test]
fn serve_puts_every_route_of_the_table_behind_the_key() {
    use mistralrs_hlg::server::routes::{self, Access};
    const KEY: &str = "sk-serve-routes";
    let s = Server::start_with(&["--api-key", KEY]);
    let fill = |p: &str| {
        p.split('/')
            .map(|seg| match seg {
                "{*rest}" => "api/list_models",
                s if s.starts_with('{') => "x",
                s => s,
            })
            .collect::<Vec<_>>()
            .join("/")
    };
    let not_a_request = json!({"not": "a request"});
    let mut walked = 0;
    for r in routes::ROUTES {
        for &method in r.methods {
            let path = fill(r.path);
            let body = (method == "POST").then_some(&not_a_request);
            let ask = |key| {
                s.request_with_key(method, &path, body, key)
                    .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
            };
            let (status, text) = ask(None);
            let open = r.access == Access::Open;
            assert_eq!(
                status == 401,
                !open,
                "{method} {path} without the key: {status} {text:.200}"
            );
            let (status, text) = ask(Some(KEY));
            let closed = status == 404 && text.contains("--allow-admin-routes");
            // A row of the other host is unknown here: refused as an unreviewed route.
            let want_closed = r.access == Access::Admin || !r.on_this_host();
            assert_eq!(
                closed, want_closed,
                "{method} {path} with the key: {status} {text:.200}"
            );
            assert!(
                status != 401 && status < 500,
                "{method} {path} with the key: {status} {text:.200}"
            );
            walked += 1;
        }
    }
    assert!(walked > 40, "{walked} routes walked");
    let (status, _) = s
        .request_with_key("GET", "/v1/models", None, Some(KEY))
        .unwrap();
    assert_eq!(status, 200, "the server still serves after the walk");
}
