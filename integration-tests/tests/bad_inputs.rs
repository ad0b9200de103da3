//! Hostile input over a real socket: a catalogue of distinct bad requests, each of which
//! must get a 4xx in OpenAI's error shape naming what is wrong, with good requests in
//! between that must still succeed: no 5xx, no dropped connection, the server alive
//! after every case. The server is the one `mistralrs-hlg serve` builds
//! (`HlgServerOptions::router`), once without a key and once with one.

use mistralrs_hlg::server::HlgServerOptions;
use mistralrs_hlg_integration_tests::{chat, engine, model, Server};
use serde_json::{json, Value};

/// One request: method, path, content type, raw body, headers, what the error must name.
struct Case {
    what: String,
    method: &'static str,
    path: String,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    auth: Option<String>,
    /// A text the error's `param` or message must contain.
    names: Option<String>,
}

fn case(
    what: impl Into<String>,
    path: &str,
    body: impl Into<Vec<u8>>,
    names: Option<&str>,
) -> Case {
    Case {
        what: what.into(),
        method: "POST",
        path: path.into(),
        content_type: Some("application/json"),
        body: body.into(),
        auth: None,
        names: names.map(str::to_owned),
    }
}

const CHAT: &str = "/v1/chat/completions";
const COMPLETE: &str = "/v1/completions";
const RESPONSES: &str = "/v1/responses";

fn with(base: &Value, key: &str, v: Value) -> Vec<u8> {
    let mut b = base.clone();
    b[key] = v;
    b.to_string().into_bytes()
}

/// Every case, section by section.
fn catalogue() -> Vec<Case> {
    let chat_base = chat("Hi", 4, json!({}));
    let comp_base = json!({"model": "default", "prompt": "Hi", "max_tokens": 4});
    let mut out = vec![];
    malformed(&mut out, &chat_base);
    hlg_fields(&mut out, &chat_base, &comp_base);
    extremes(&mut out, &chat_base, &comp_base);
    upstream_fields(&mut out, &chat_base, &comp_base);
    media(&mut out, &chat_base);
    content_types(&mut out, &chat_base);
    routes(&mut out, &chat_base);
    huge_bodies(&mut out);
    out
}

/// Malformed JSON and bodies that are not objects.
fn malformed(out: &mut Vec<Case>, chat_base: &Value) {
    let deep = "[".repeat(100_000);
    let malformed: Vec<(&str, Vec<u8>)> = vec![
        ("empty body", vec![]),
        ("truncated object", b"{\"model\": \"default\", \"messages\": [".to_vec()),
        ("trailing garbage", format!("{chat_base} x").into_bytes()),
        ("single quotes", b"{'model': 'default'}".to_vec()),
        ("NaN literal", b"{\"model\": \"default\", \"temperature\": NaN}".to_vec()),
        ("bare word", b"hello".to_vec()),
        ("deeply nested arrays", deep.clone().into_bytes()),
        ("deeply nested objects", "{\"a\":".repeat(50_000).into_bytes()),
        ("invalid UTF-8", b"{\"model\": \"\xff\xfe\", \"messages\": []}".to_vec()),
        ("lone surrogate escape", b"{\"model\": \"\\ud800\", \"messages\": []}".to_vec()),
        ("null", b"null".to_vec()),
        ("array", b"[]".to_vec()),
        ("number", b"42".to_vec()),
        ("string", b"\"chat\"".to_vec()),
        ("BOM then JSON", [b"\xef\xbb\xbf".as_slice(), chat_base.to_string().as_bytes()].concat()),
        ("NUL bytes", b"\0\0\0\0".to_vec()),
        ("duplicate hlg keys, second bad", b"{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"hlg\":{\"toe\":1},\"hlg\":{\"toe\":-1}}".to_vec()),
    ];
    for (what, body) in malformed {
        for path in [CHAT, COMPLETE] {
            out.push(case(format!("{what} ({path})"), path, body.clone(), None));
        }
    }
}

/// Every `hlg` field: numbers of the wrong type or out of range on both routes, then the
/// other fields and shapes.
fn hlg_fields(out: &mut Vec<Case>, chat_base: &Value, comp_base: &Value) {
    let numeric_bad = [
        json!(-1),
        json!(1001),
        json!(1e33),
        json!(1e39),
        json!(-1e-9),
        json!("abc"),
        json!(true),
        json!([1]),
        json!({"v": 1}),
        json!("NaN"),
        json!("inf"),
        json!("1e400"),
    ];
    for field in ["pivot_offset", "width", "shoulder", "toe"] {
        for (i, bad) in numeric_bad.iter().enumerate() {
            let (path, base) = if i % 2 == 0 {
                (CHAT, &chat_base)
            } else {
                (COMPLETE, &comp_base)
            };
            out.push(case(
                format!("hlg.{field} = {bad}"),
                path,
                with(base, "hlg", json!({ field: bad })),
                Some(&format!("hlg.{field}")),
            ));
        }
    }
    hlg_names(out, chat_base);
    hlg_shapes(out, chat_base, comp_base);
}

/// Names and lower bounds of the other `hlg` fields.
fn hlg_names(out: &mut Vec<Case>, chat_base: &Value) {
    for (field, bads) in [
        ("shoulder", vec![json!(0), json!(1e-7)]),
        ("toe", vec![json!(0), json!(5e-7)]),
        (
            "pivot",
            vec![
                json!("mean"),
                json!("TOP"),
                json!(1),
                json!(null),
                json!(["top"]),
            ],
        ),
        (
            "toe_shape",
            vec![
                json!("cubic"),
                json!("Log"),
                json!(2),
                json!(false),
                json!({}),
            ],
        ),
        (
            "enabled",
            vec![json!("yes"), json!(1), json!("maybe"), json!([])],
        ),
    ] {
        for bad in bads {
            out.push(case(
                format!("hlg.{field} = {bad}"),
                CHAT,
                with(chat_base, "hlg", json!({ field: bad })),
                Some(&format!("hlg.{field}")),
            ));
        }
    }
}

/// An `hlg` that is not an object of known fields, streamed or not.
fn hlg_shapes(out: &mut Vec<Case>, chat_base: &Value, comp_base: &Value) {
    for (what, h) in [
        ("unknown hlg field", json!({"gain": 2})),
        ("misspelt hlg field", json!({"Width": 2})),
        ("hlg as a string", json!("on")),
        ("hlg as a number", json!(3)),
        ("hlg as an array", json!([1, 2])),
        ("hlg as null", json!(null)),
    ] {
        for path in [CHAT, COMPLETE] {
            let base = if path == CHAT { &chat_base } else { &comp_base };
            out.push(case(
                format!("{what} ({path})"),
                path,
                with(base, "hlg", h.clone()),
                Some("hlg"),
            ));
        }
    }
    for stream in [true, false] {
        out.push(case(
            format!("bad hlg, stream {stream}"),
            CHAT,
            with(
                &with_value(chat_base, "stream", json!(stream)),
                "hlg",
                json!({"toe": -3}),
            ),
            Some("hlg.toe"),
        ));
    }
}

/// `n` and `max_tokens` extremes, on both routes.
fn extremes(out: &mut Vec<Case>, chat_base: &Value, comp_base: &Value) {
    for (field, bads) in [
        (
            "n",
            vec![
                json!(0),
                json!(-1),
                json!(129),
                json!(1_000_000_000u64),
                json!(1.5),
                json!("2"),
                json!(true),
            ],
        ),
        (
            "max_tokens",
            vec![
                json!(0),
                json!(-5),
                json!(1e12),
                json!(10_000_000),
                json!(2.5),
                json!("ten"),
                json!([4]),
            ],
        ),
    ] {
        for bad in bads {
            for path in [CHAT, COMPLETE] {
                let base = if path == CHAT { &chat_base } else { &comp_base };
                out.push(case(
                    format!("{field} = {bad} ({path})"),
                    path,
                    with(base, field, bad.clone()),
                    Some(field),
                ));
            }
        }
    }
    out.push(case(
        "max_completion_tokens = 0",
        CHAT,
        with(chat_base, "max_completion_tokens", json!(0)),
        Some("max_completion_tokens"),
    ));
}

/// Upstream's common fields with the wrong types.
fn upstream_fields(out: &mut Vec<Case>, chat_base: &Value, comp_base: &Value) {
    for (field, bad) in [
        ("temperature", json!("hot")),
        ("top_p", json!("most")),
        ("top_k", json!("five")),
        ("min_p", json!([0.1])),
        ("presence_penalty", json!("x")),
        ("frequency_penalty", json!({})),
        ("repetition_penalty", json!("x")),
        ("stream", json!("yes")),
        ("stop", json!(5)),
        ("logit_bias", json!("x")),
        ("logprobs", json!("x")),
        ("model", json!(5)),
        ("messages", json!(42)),
        ("messages", json!([{"role": 5, "content": "Hi"}])),
        ("messages", json!([{"content": "Hi"}])),
        ("messages", json!([{"role": "user", "content": 5}])),
        (
            "messages",
            json!([{"role": "user", "content": [{"type": "nonsense"}]}]),
        ),
        ("messages", json!(null)),
        ("tools", json!("calculator")),
        ("tool_choice", json!(7)),
        ("response_format", json!("json")),
        ("grammar", json!(5)),
    ] {
        out.push(case(
            format!("{field} = {bad}"),
            CHAT,
            with(chat_base, field, bad),
            None,
        ));
    }
    for (field, bad) in [
        ("prompt", json!(5)),
        ("prompt", json!(null)),
        ("temperature", json!("hot")),
        ("echo", json!("yes")),
        ("best_of", json!("x")),
        ("suffix", json!(3)),
    ] {
        out.push(case(
            format!("completion {field} = {bad}"),
            COMPLETE,
            with(comp_base, field, bad),
            None,
        ));
    }
    missing_or_unknown(out, chat_base, comp_base);
}

/// Required fields missing; models that are not served.
fn missing_or_unknown(out: &mut Vec<Case>, chat_base: &Value, comp_base: &Value) {
    let mut missing = chat_base.clone();
    missing.as_object_mut().unwrap().remove("messages");
    out.push(case(
        "chat without messages",
        CHAT,
        missing.to_string(),
        None,
    ));
    let mut missing = comp_base.clone();
    missing.as_object_mut().unwrap().remove("prompt");
    out.push(case(
        "completion without prompt",
        COMPLETE,
        missing.to_string(),
        None,
    ));
    out.push(case(
        "unknown model",
        CHAT,
        with(chat_base, "model", json!("no-such-model")),
        Some("model"),
    ));
    out.push(case(
        "unknown model (completions)",
        COMPLETE,
        with(comp_base, "model", json!("/root/.cache")),
        Some("model"),
    ));
    out.push(case(
        "unknown model (responses)",
        RESPONSES,
        json!({"model": "nope", "input": "Hi"}).to_string(),
        None,
    ));
}

/// Media at remote addresses and in local files (off by default).
fn media(out: &mut Vec<Case>, chat_base: &Value) {
    for (what, url) in [
        ("remote image", "http://127.0.0.1:9/x.png"),
        ("local image", "/etc/passwd"),
        ("file URL", "file:///etc/hostname"),
        ("relative path", "../../etc/passwd"),
        ("https image", "https://example.com/a.png"),
    ] {
        let msg = json!([{"role": "user", "content": [{"type": "text", "text": "Look"}, {"type": "image_url", "image_url": {"url": url}}]}]);
        out.push(case(
            what,
            CHAT,
            with(chat_base, "messages", msg),
            Some("image_url"),
        ));
    }
    responses_fields(out);
}

/// The Responses route's own fields, and `hlg` on a route that does not generate.
fn responses_fields(out: &mut Vec<Case>) {
    out.push(case(
        "responses: hlg.toe = -2",
        RESPONSES,
        json!({"model": "default", "input": "Hi", "hlg": {"toe": -2}}).to_string(),
        Some("hlg.toe"),
    ));
    out.push(case(
        "responses: hlg = 3",
        RESPONSES,
        json!({"model": "default", "input": "Hi", "hlg": 3}).to_string(),
        Some("hlg"),
    ));
    out.push(case(
        "responses: n = 2 with hlg (split engine)",
        RESPONSES,
        json!({"model": "default", "input": "Hi", "n": 2, "hlg": true}).to_string(),
        Some("n"),
    ));
    out.push(case(
        "responses: n = 0",
        RESPONSES,
        json!({"model": "default", "input": "Hi", "n": 0}).to_string(),
        Some("n"),
    ));
    out.push(case(
        "responses: max_output_tokens = 0",
        RESPONSES,
        json!({"model": "default", "input": "Hi", "max_output_tokens": 0}).to_string(),
        Some("max_output_tokens"),
    ));
    out.push(case(
        "responses: unknown previous_response_id",
        RESPONSES,
        json!({"model": "default", "input": "Hi", "previous_response_id": "resp_nope"}).to_string(),
        Some("previous_response_id"),
    ));
    out.push(case(
        "responses: parallel_tool_calls = false with hlg",
        RESPONSES,
        json!({"model": "default", "input": "Hi", "parallel_tool_calls": false, "hlg": true})
            .to_string(),
        Some("parallel_tool_calls"),
    ));
    out.push(case(
        "responses: input = 5 with hlg",
        RESPONSES,
        json!({"model": "default", "input": 5, "hlg": true}).to_string(),
        None,
    ));
    out.push(case(
        "hlg on /v1/embeddings",
        "/v1/embeddings",
        json!({"model": "default", "input": "Hi", "hlg": true}).to_string(),
        Some("hlg"),
    ));
    #[cfg(mistralrs_host = "0.9")]
    messages_fields(out);
    responses_media(out);
}

/// 0.9's Anthropic route with `hlg` takes text messages only: the rest is refused.
#[cfg(mistralrs_host = "0.9")]
fn messages_fields(out: &mut Vec<Case>) {
    let m = json!([{"role": "user", "content": "Hi"}]);
    out.push(case(
        "messages: tools with hlg",
        "/v1/messages",
        json!({"max_tokens": 8, "messages": m, "tools": [], "hlg": true}).to_string(),
        Some("tools"),
    ));
    let image = json!([{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]);
    out.push(case(
        "messages: an image with hlg",
        "/v1/messages",
        json!({"max_tokens": 8, "messages": image, "hlg": true}).to_string(),
        Some("messages[0].content[0].type"),
    ));
}

/// A local image in a Responses input.
fn responses_media(out: &mut Vec<Case>) {
    let input =
        json!([{"role": "user", "content": [{"type": "input_image", "image_url": "/etc/passwd"}]}]);
    out.push(case(
        "responses: local image",
        RESPONSES,
        json!({"model": "default", "input": input}).to_string(),
        Some("image_url"),
    ));
}

/// Wrong content types, on every generation route.
fn content_types(out: &mut Vec<Case>, chat_base: &Value) {
    for ct in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/xml"),
        Some("application/jsonp"),
    ] {
        for path in [CHAT, COMPLETE, RESPONSES] {
            let mut c = case(
                format!("content type {ct:?} ({path})"),
                path,
                chat_base.to_string(),
                None,
            );
            c.content_type = ct;
            out.push(c);
        }
    }
}

/// Wrong methods, unknown routes, upstream's management routes.
fn routes(out: &mut Vec<Case>, chat_base: &Value) {
    for method in ["GET", "PUT", "DELETE", "PATCH"] {
        for path in [CHAT, COMPLETE] {
            let mut c = case(format!("{method} {path}"), path, vec![], None);
            c.method = method;
            out.push(c);
        }
    }
    for path in [
        "/v1/chat",
        "/v1/completion",
        "/v2/chat/completions",
        "/v1/chat/completions/extra",
        "/etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
    ] {
        out.push(case(
            format!("unknown route {path}"),
            path,
            chat_base.to_string(),
            None,
        ));
    }
    for path in [
        "/v1/models/unload",
        "/v1/models/reload",
        "/v1/models/tune",
        "/v1/system/doctor",
        "/re_isq",
    ] {
        out.push(case(
            format!("management route {path}"),
            path,
            json!({"model_id": "default"}).to_string(),
            None,
        ));
    }
    let mut c = case("GET /v1/system/info", "/v1/system/info", vec![], None);
    c.method = "GET";
    out.push(c);
}

/// A body over the 50 MiB limit, on each generation route.
fn huge_bodies(out: &mut Vec<Case>) {
    for path in [CHAT, COMPLETE] {
        let huge = format!(
            "{{\"model\":\"default\",\"prompt\":\"{}\"}}",
            "a".repeat(51 << 20)
        );
        out.push(case(format!("51 MiB body ({path})"), path, huge, None));
    }
}

fn with_value(base: &Value, key: &str, v: Value) -> Value {
    let mut b = base.clone();
    b[key] = v;
    b
}

/// Sends one case: status and body, or the transport error (a dropped connection).
async fn send(client: &reqwest::Client, base: &str, c: &Case) -> Result<(u16, String), String> {
    let method = reqwest::Method::from_bytes(c.method.as_bytes()).unwrap();
    let mut req = client
        .request(method, format!("{base}{}", c.path))
        .body(c.body.clone());
    if let Some(ct) = c.content_type {
        req = req.header("content-type", ct);
    }
    if let Some(a) = &c.auth {
        req = req.header("authorization", a);
    }
    let resp = req.send().await.map_err(|e| format!("{e:?}"))?;
    let status = resp.status().as_u16();
    Ok((status, resp.text().await.map_err(|e| format!("{e:?}"))?))
}

/// What is wrong with the answer to a bad request, if anything: not a 4xx, not in
/// OpenAI's error shape, not naming what the case says, or showing a local path.
fn check(c: &Case, status: u16, body: &str) -> Option<String> {
    let head = || body.chars().take(300).collect::<String>();
    if !(400..500).contains(&status) {
        return Some(format!("{}: status {status}: {}", c.what, head()));
    }
    let v: Value = serde_json::from_str(body).unwrap_or_default();
    let Some(msg) = v["error"]["message"].as_str().filter(|m| !m.is_empty()) else {
        return Some(format!(
            "{}: status {status} not in OpenAI's error shape: {}",
            c.what,
            head()
        ));
    };
    let param = v["error"]["param"].as_str().unwrap_or("");
    if let Some(n) = &c.names {
        if !param.contains(n.as_str()) && !msg.contains(n.as_str()) {
            return Some(format!("{}: the error does not name `{n}`: {body}", c.what));
        }
    }
    if msg.contains("/root/") || msg.contains("/home/") || msg.contains(".cache/mistralrs-hlg") {
        return Some(format!("{}: the error shows a local path: {msg}", c.what));
    }
    None
}

/// Runs `cases` against `s`, a good request after every 10th case; returns the number run.
async fn run(s: &Server, cases: &[Case], good_auth: Option<&str>) -> usize {
    let client = reqwest::Client::new();
    let good = Case {
        auth: good_auth.map(str::to_owned),
        ..case(
            "good",
            CHAT,
            chat("Say hi.", 3, json!({"temperature": 0.0})).to_string(),
            None,
        )
    };
    let mut failures = vec![];
    for (i, c) in cases.iter().enumerate() {
        match send(&client, &s.base, c).await {
            Err(e) => failures.push(format!("{}: dropped connection: {e}", c.what)),
            Ok((status, body)) => failures.extend(check(c, status, &body)),
        }
        if i % 10 == 9 {
            match send(&client, &s.base, &good).await {
                Ok((200, _)) => {}
                other => failures.push(format!("good request after {}: {other:?}", c.what)),
            }
        }
    }
    let health = client
        .get(format!("{}/health", s.base))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .ok();
    assert_eq!(
        health,
        Some(200),
        "the server is not alive after the catalogue"
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    cases.len()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_bad_request_is_a_named_4xx_and_the_server_keeps_serving() {
    // `n > 1` split whatever the engine and device (the default on the CPU), so that the
    // catalogue's `n = 2` case on /v1/responses means the same everywhere.
    let opts = HlgServerOptions {
        n_choices: Some("split".into()),
        ..Default::default()
    };
    let s = Server::start(
        opts.router_for(engine().await, model().hints())
            .await
            .expect("router"),
    )
    .await;
    let cases = catalogue();
    let n = run(&s, &cases, None).await;
    println!("{n} bad requests, each a 4xx in OpenAI's shape; good requests in between all served");
    assert!(n >= 200, "only {n} cases");
    s.stop().await;
}

/// Every route with every wrong or missing `Authorization` header.
fn keyless_cases(body: &str) -> Vec<Case> {
    let mut cases = vec![];
    for (method, path) in [
        ("POST", CHAT),
        ("POST", COMPLETE),
        ("POST", RESPONSES),
        ("GET", "/v1/models"),
        ("GET", "/v1/hlg"),
        ("POST", "/v1/embeddings"),
        ("GET", "/v1/responses/x"),
        ("POST", "/v1/models/status"),
        ("GET", "/no/such/route"),
    ] {
        for auth in [
            None,
            Some("Bearer sk-wrong"),
            Some("Bearer "),
            Some("bearer sk-test-key"),
            Some("Basic c2stdGVzdC1rZXk="),
            Some("Bearer sk-test-keyX"),
            Some("sk-test-key"),
        ] {
            let mut c = case(
                format!("{method} {path} with {auth:?}"),
                path,
                body,
                Some("API key"),
            );
            c.method = method;
            c.auth = auth.map(str::to_owned);
            cases.push(c);
        }
    }
    cases
}

#[tokio::test(flavor = "multi_thread")]
async fn with_a_key_every_route_but_health_wants_it() {
    let opts = HlgServerOptions {
        api_key: Some("sk-test-key".into()),
        ..Default::default()
    };
    let s = Server::start(opts.router(engine().await).await.expect("router")).await;
    let client = reqwest::Client::new();
    let body = chat("Say hi.", 3, json!({"temperature": 0.0})).to_string();
    let cases = keyless_cases(&body);
    run(&s, &cases, Some("Bearer sk-test-key")).await;
    for c in &cases {
        let (status, _) = send(&client, &s.base, c).await.unwrap();
        assert_eq!(status, 401, "{}", c.what);
    }
    let (status, _) = send(
        &client,
        &s.base,
        &Case {
            auth: None,
            method: "GET",
            ..case("health", "/health", vec![], None)
        },
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "health stays open");
    let (status, text) = send(
        &client,
        &s.base,
        &Case {
            auth: Some("Bearer sk-test-key".into()),
            ..case("good", CHAT, body.clone(), None)
        },
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{text}");
    s.stop().await;
}
