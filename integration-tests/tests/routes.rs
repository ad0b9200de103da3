//! Every route the host's router registers, walked through the plugin's router: without
//! `--allow-admin-routes` only generation, the model list, health and the documents are
//! served, and every other route (management, state-keeping, and one the host adds later)
//! answers the allowlist's 404; with it, none is refused by the allowlist. With an API
//! key, every route but health answers 401 without it. The walk includes a web UI nested
//! after the router is built, as upstream's `mistralrs serve` nests its `/ui`: the
//! exposure goes around the finished app, so it covers those routes too.
//!
//! The routes are read from each host's router builder (mistralrs-server-core's
//! `mistralrs_server_router_builder.rs`); on 0.9 the host's own route registry is checked
//! against this list, so that a route a bump adds shows up here before it is served.

use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use mistralrs_hlg::server::security::{Exposure, OPEN_ROUTES};
use mistralrs_hlg::server::RouterBuilder;
use mistralrs_hlg_integration_tests::{call, engine};

/// The allowlist's refusal, as its 404 says.
const CLOSED: &str = "web-UI routes are off";

/// (method, path, public) for every route the host registers; `x` fills path parameters.
#[cfg(not(mistralrs_host = "0.9"))]
const HOST_ROUTES: &[(&str, &str, bool)] = &[
    ("POST", "/v1/chat/completions", true),
    ("POST", "/v1/completions", true),
    ("POST", "/v1/embeddings", true),
    ("GET", "/v1/models", true),
    ("POST", "/v1/models/unload", false),
    ("POST", "/v1/models/reload", false),
    ("POST", "/v1/models/status", false),
    ("POST", "/v1/models/tune", false),
    ("GET", "/v1/system/info", false),
    ("POST", "/v1/system/doctor", false),
    ("GET", "/health", true),
    ("GET", "/", true),
    ("POST", "/re_isq", false),
    ("POST", "/v1/images/generations", true),
    ("POST", "/v1/audio/speech", true),
    ("POST", "/v1/responses", true),
    ("GET", "/v1/responses/x", true),
    ("DELETE", "/v1/responses/x", true),
    ("POST", "/v1/responses/x/cancel", true),
];

#[cfg(mistralrs_host = "0.9")]
const HOST_ROUTES: &[(&str, &str, bool)] = &[
    ("POST", "/v1/chat/completions", true),
    ("POST", "/v1/messages", true),
    ("POST", "/v1/messages/count_tokens", true),
    ("POST", "/v1/completions", true),
    ("POST", "/v1/embeddings", true),
    ("GET", "/v1/models", true),
    ("GET", "/v1/lora_adapters", false),
    ("POST", "/v1/models/unload", false),
    ("POST", "/v1/models/reload", false),
    ("POST", "/v1/models/status", false),
    ("POST", "/v1/models/tune", false),
    ("GET", "/v1/system/info", false),
    ("POST", "/v1/system/doctor", false),
    ("GET", "/health", true),
    ("GET", "/metrics", false),
    ("GET", "/", true),
    ("POST", "/re_isq", false),
    ("POST", "/calibration/start", false),
    ("GET", "/calibration/status", false),
    ("POST", "/calibration/apply", false),
    ("POST", "/v1/images/generations", true),
    ("GET", "/v1/files", false),
    ("POST", "/v1/files", false),
    ("GET", "/v1/files/x", false),
    ("DELETE", "/v1/files/x", false),
    ("GET", "/v1/files/x/content", false),
    ("GET", "/v1/containers/x/files", false),
    ("GET", "/v1/containers/x/files/x", false),
    ("GET", "/v1/containers/x/files/x/content", false),
    ("POST", "/v1/audio/speech", true),
    ("POST", "/v1/agent/approvals/x", false),
    ("POST", "/v1/responses", true),
    ("GET", "/v1/skills", false),
    ("POST", "/v1/skills", false),
    ("GET", "/v1/skills/x/versions", false),
    ("POST", "/v1/skills/x/versions", false),
    ("GET", "/v1/responses/x", true),
    ("DELETE", "/v1/responses/x", true),
    ("POST", "/v1/responses/x/cancel", true),
    ("GET", "/v1/sessions/x", false),
    ("PUT", "/v1/sessions/x", false),
    ("DELETE", "/v1/sessions/x", false),
    ("POST", "/v1/load_lora_adapter", false),
    ("POST", "/v1/unload_lora_adapter", false),
];

/// Routes no host registers, and the crate's own.
const OTHER_ROUTES: &[(&str, &str, bool)] = &[
    ("GET", "/v1/hlg", true),
    ("GET", "/api-doc/openapi.json", true),
    ("GET", "/v1/some_route_a_later_host_adds", false),
    ("POST", "/admin/shutdown", false),
];

/// The web UI's routes as upstream's CLI nests them at `/ui` (0.9.2's `ui/mod.rs`; the
/// stand-in below answers 200 on each).
const UI_ROUTES: &[(&str, &str, bool)] = &[
    ("GET", "/ui", false),
    ("GET", "/ui/", false),
    ("GET", "/ui/index.html", false),
    ("GET", "/ui/api/list_models", false),
    ("GET", "/ui/api/settings", false),
    ("GET", "/ui/api/list_chats", false),
    ("GET", "/ui/api/capabilities", false),
    ("POST", "/ui/api/new_chat", false),
];

/// The plugin's router with a stand-in web UI nested after it is built, behind `exposure`
/// applied last: what the patched `mistralrs serve` serves.
async fn app(exposure: Exposure) -> Router {
    let ui = Router::new()
        .route("/", get(|| async { "ui" }))
        .route("/index.html", get(|| async { "ui" }))
        .route("/api/{name}", get(|| async { "{}" }))
        .route("/api/new_chat", post(|| async { "{}" }));
    let app = RouterBuilder::new(engine().await)
        .build_unexposed()
        .await
        .unwrap()
        .nest("/ui", ui);
    exposure.apply(app)
}

fn every_route() -> impl Iterator<Item = &'static (&'static str, &'static str, bool)> {
    HOST_ROUTES.iter().chain(OTHER_ROUTES).chain(UI_ROUTES)
}

/// A body no handler accepts: the walk must not unload the model or run a job.
fn body(method: &str) -> Option<serde_json::Value> {
    (method == "POST").then(|| serde_json::json!({"not": "a request"}))
}

async fn walk(allow_admin_routes: bool) {
    let mut exposure = Exposure::default();
    exposure.allow_admin_routes = allow_admin_routes;
    let router = app(exposure).await;
    for &(method, path, public) in every_route() {
        let (status, text) = call(&router, method, path, body(method).as_ref()).await;
        let closed = status == StatusCode::NOT_FOUND && text.contains(CLOSED);
        let want_closed = !public && !allow_admin_routes;
        assert_eq!(
            closed, want_closed,
            "{method} {path} (admin routes {allow_admin_routes}): {status} {text:.200}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_allowlist_is_served_by_default() {
    walk(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_admin_routes_opens_every_route() {
    walk(true).await;
}

/// With a key, every route but health answers 401 without it, the nested UI's too; with
/// it, the allowlist decides as without a key.
#[tokio::test(flavor = "multi_thread")]
async fn the_api_key_guards_every_route() {
    let mut exposure = Exposure::default().with_api_key(Some("sk-walk"));
    exposure.allow_admin_routes = true;
    let router = app(exposure).await;
    for &(method, path, _) in every_route() {
        let (status, text) = call(&router, method, path, body(method).as_ref()).await;
        let open = OPEN_ROUTES.contains(&path);
        assert_eq!(
            status == StatusCode::UNAUTHORIZED,
            !open,
            "{method} {path} without the key: {status} {text:.200}"
        );
    }
    // With the key (and admin routes open), the UI's stand-in serves.
    for &(method, path, _) in UI_ROUTES {
        let req = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", "Bearer sk-walk")
            .body(axum::body::Body::empty())
            .unwrap();
        let status = tower::ServiceExt::oneshot(router.clone(), req)
            .await
            .unwrap()
            .status();
        // `/ui/` is a path the nest does not match: upstream's router answers it (404).
        let want = if path == "/ui/" { 404 } else { 200 };
        assert_eq!(status.as_u16(), want, "{method} {path} with the key");
    }
}

/// The host's own registry names no route this walk does not: a route a bump adds must be
/// reviewed (and listed above) before the allowlist serves it.
#[cfg(mistralrs_host = "0.9")]
#[test]
fn the_walk_covers_the_hosts_route_registry() {
    use mistralrs_server_core::route_registry::{MISTRALRS_API_ROUTES, RUNTIME_LORA_API_ROUTES};
    let fill = |p: &str| {
        p.split('/')
            .map(|seg| if seg.starts_with('{') { "x" } else { seg })
            .collect::<Vec<_>>()
            .join("/")
    };
    for r in MISTRALRS_API_ROUTES.iter().chain(RUNTIME_LORA_API_ROUTES) {
        let path = fill(r.path);
        for method in r.methods.split(", ") {
            assert!(
                HOST_ROUTES
                    .iter()
                    .any(|&(m, p, _)| m == method && p == path),
                "{method} {path} is registered by the host and not walked"
            );
        }
    }
}
