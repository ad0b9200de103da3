//! Every route the host's router registers, walked through the plugin's router: without
//! `--allow-admin-routes` only generation, the model list, health and the documents are
//! served, and every other route (management, state-keeping, and one the host adds later)
//! answers the allowlist's 404; with it, none is refused by the allowlist.
//!
//! The routes are read from each host's router builder (mistralrs-server-core's
//! `mistralrs_server_router_builder.rs`); on 0.9 the host's own route registry is checked
//! against this list, so that a route a bump adds shows up here before it is served.

use axum::http::StatusCode;
use mistralrs_hlg::server::security::Exposure;
use mistralrs_hlg::server::RouterBuilder;
use mistralrs_hlg_integration_tests::{call, engine};

/// The allowlist's refusal, as its 404 says.
const CLOSED: &str = "management routes are off";

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

async fn walk(allow_admin_routes: bool) {
    let mut exposure = Exposure::default();
    exposure.allow_admin_routes = allow_admin_routes;
    let router = RouterBuilder::new(engine().await)
        .exposure(exposure)
        .build()
        .await
        .unwrap();
    for &(method, path, public) in HOST_ROUTES.iter().chain(OTHER_ROUTES) {
        // A body no handler accepts: the walk must not unload the model or run a job.
        let body = (method == "POST").then(|| serde_json::json!({"not": "a request"}));
        let (status, text) = call(&router, method, path, body.as_ref()).await;
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
