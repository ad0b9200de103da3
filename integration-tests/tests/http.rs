//! The HTTP surface: through the router without a socket, and over a real socket.

use axum::http::StatusCode;
use axum::Router;
use mistralrs_hlg::server::HlgServerOptions;
use mistralrs_hlg::HlgConfig;
use mistralrs_hlg_integration_tests::{
    call, chat, engine, fresh_plugin, plugin, post_ok, texts, upstream,
};
use mistralrs_server_core::mistralrs_server_router_builder::MistralRsServerRouterBuilder;
use mistralrs_server_core::types::SharedMistralRsState;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread")]
async fn http_surface() {
    let state = engine().await;
    let defaults = HlgConfig::from_pairs([("toe", "5"), ("pivot", "entropy")]).unwrap();
    let app = plugin(state.clone(), defaults).await;
    let up = upstream(state.clone()).await;

    bad_hlg_is_a_400_naming_the_field(&app).await;
    accepted_on_both_routes(&app).await;
    n_choices(&app).await;
    streaming(&app).await;
    effective_defaults(&app).await;
    other_routes_as_upstreams(&app, &up).await;
    upstream_as_a_cli_configures_it(state).await;
}

/// `HlgServerOptions::router_with_upstream`: upstream's routes behind the HLG ones are
/// built by the builder given (here with a 64-byte body limit, which a CLI's option
/// would set), and the HLG routes are this crate's either way.
async fn upstream_as_a_cli_configures_it(state: SharedMistralRsState) {
    let opts = HlgServerOptions::default();
    let limited = MistralRsServerRouterBuilder::new().with_max_body_limit(64);
    let hints = Default::default();
    let app = opts
        .router_with_upstream(state.clone(), hints, limited)
        .await
        .unwrap();
    let plain = opts.router(state).await.unwrap();
    // An upstream route the allowlist serves.
    let big = json!({"model": "default", "input": "x".repeat(1000)});
    let (status, text) = call(&app, "POST", "/v1/embeddings", Some(&big)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
    let (status, text) = call(&plain, "POST", "/v1/embeddings", Some(&big)).await;
    assert_ne!(status, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
    // The chat route is this crate's: `hlg` is read, whatever upstream's limit.
    let bad = chat("Say hi.", 2, json!({"hlg": {"toe": 0}}));
    let (status, text) = call(&app, "POST", "/v1/chat/completions", Some(&bad)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("toe"), "{text}");
}

/// Each kind of bad `hlg` is a 400 naming the field; the server keeps serving.
async fn bad_hlg_is_a_400_naming_the_field(app: &Router) {
    let bad = [
        json!({"width": -1}),
        json!({"toe": 0}),
        json!({"shoulder": "soft"}),
        json!({"toe": 1e39}),
        json!({"pivot": "mean"}),
        json!({"toe_shape": "cubic"}),
        json!({"pivot_offset": -3}),
        json!({"enabled": "yes"}),
        json!({"gain": 2}),
        json!("on"),
        json!(3),
    ];
    let mut seen = vec![];
    for (i, h) in bad.iter().enumerate() {
        let path = if i % 2 == 0 {
            "/v1/chat/completions"
        } else {
            "/v1/completions"
        };
        let body = if i % 2 == 0 {
            chat("Hi", 4, json!({"hlg": h}))
        } else {
            json!({"model": "default", "prompt": "Hi", "max_tokens": 4, "hlg": h})
        };
        let (status, text) = call(app, "POST", path, Some(&body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{h}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        seen.push(json!({"hlg": h, "route": path, "error": v["error"]}));
    }
    insta::assert_json_snapshot!("bad_hlg", seen);
}

/// `hlg` accepted on both routes, after the rejections.
/// Accepted on both routes, after the rejections.
async fn accepted_on_both_routes(app: &Router) {
    let r = post_ok(
        app,
        "/v1/chat/completions",
        &chat(
            "Name a colour.",
            8,
            json!({"temperature": 0.8, "hlg": {"toe_shape": "quadratic"}}),
        ),
    )
    .await;
    assert_eq!(texts(&r).len(), 1);
    let r = post_ok(app, "/v1/completions", &json!({"model": "default", "prompt": "The sky is", "max_tokens": 6, "temperature": 0.8, "hlg": true})).await;
    assert!(!texts(&r)[0].is_empty());
}

/// `n = 2` with `hlg`: two choices, numbered; `n` beyond the limit a 400 naming it.
/// n = 2 with hlg: two choices, numbered.
async fn n_choices(app: &Router) {
    let r = post_ok(
        app,
        "/v1/chat/completions",
        &chat(
            "Say hello.",
            6,
            json!({"temperature": 0.9, "n": 2, "hlg": {}}),
        ),
    )
    .await;
    assert_eq!(texts(&r).len(), 2, "{r}");
    assert_eq!(r["choices"][1]["index"], 1, "{r}");
    // n beyond the limit: a 400 naming `n`, on both routes.
    for (path, body) in [
        ("/v1/chat/completions", chat("Hi", 4, json!({"n": 129}))),
        (
            "/v1/completions",
            json!({"model": "default", "prompt": "Hi", "max_tokens": 4, "n": 1000000000u64}),
        ),
    ] {
        let (status, text) = call(app, "POST", path, Some(&body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["param"], "n", "{text}");
    }
}

/// Streaming with `hlg`: SSE chunks, then `[DONE]`.
async fn streaming(app: &Router) {
    let (status, body) = call(
        app,
        "POST",
        "/v1/chat/completions",
        Some(&chat(
            "Count to three.",
            8,
            json!({"temperature": 0.7, "stream": true, "hlg": {"width": 2}}),
        )),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let events: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert!(events.len() >= 2, "{body}");
    assert_eq!(events.last().copied(), Some("[DONE]"));
    let first: Value = serde_json::from_str(events[0]).unwrap();
    assert_eq!(first["object"], "chat.completion.chunk");
}

/// The server's effective defaults.
async fn effective_defaults(app: &Router) {
    let (status, text) = call(app, "GET", "/v1/hlg", None).await;
    assert_eq!(status, StatusCode::OK);
    insta::assert_snapshot!("effective_defaults", text);
}

/// Routes the plugin does not own answer as upstream's: the same body when they succeed,
/// the same status in OpenAI's error shape when they fail; a malformed body is a 400.
/// Routes the plugin does not own answer as upstream's: the same body when they
/// succeed, the same status in OpenAI's error shape when they fail.
async fn other_routes_as_upstreams(app: &Router, up: &Router) {
    for (method, path) in [
        ("GET", "/v1/models"),
        ("GET", "/health"),
        ("GET", "/no/such/route"),
        ("GET", "/v1/chat/completions"),
    ] {
        let a = call(app, method, path, None).await;
        let b = call(up, method, path, None).await;
        assert_eq!(a.0, b.0, "{method} {path}");
        if a.0.is_success() {
            assert_eq!(a.1, b.1, "{method} {path}");
        } else {
            let v: Value = serde_json::from_str(&a.1)
                .unwrap_or_else(|e| panic!("{method} {path}: {e}: {}", a.1));
            assert!(
                v["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty()),
                "{method} {path}: {}",
                a.1
            );
        }
    }
    // A malformed body is a 400, not a panic.
    let (status, _) = call(app, "POST", "/v1/chat/completions", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread")]
async fn real_socket() {
    let app = fresh_plugin().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                stopped.await.ok();
            })
            .await
            .unwrap();
    });
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/v1/chat/completions");
    let send = |body: Value| {
        client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let ok = send(chat(
        "Name an animal.",
        6,
        json!({"temperature": 0.8, "hlg": {"pivot": "median"}}),
    ))
    .await
    .unwrap();
    assert_eq!(ok.status(), 200);
    let v: Value = serde_json::from_str(&ok.text().await.unwrap()).unwrap();
    assert_eq!(v["choices"].as_array().unwrap().len(), 1);
    let bad = send(chat("Hi", 4, json!({"hlg": {"width": "wide"}})))
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let v: Value = serde_json::from_str(&bad.text().await.unwrap()).unwrap();
    assert_eq!(v["error"]["param"], "hlg.width");
    let models = client
        .get(format!("http://{addr}/v1/models"))
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 200);
    stop.send(()).unwrap();
    server.await.unwrap();
}
