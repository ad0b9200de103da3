//! Every route of the route table (`mistralrs_hlg::server::routes::ROUTES`) walked through
//! the plugin's router: without `--allow-admin-routes` only its public rows are served,
//! and every other route (management, state-keeping, web UI, and one the host adds later)
//! answers the allowlist's 404; with it, none is refused by the allowlist. With an API
//! key, every route but health answers 401 without it. The walk includes a web UI nested
//! after the router is built, as upstream's `mistralrs serve` nests its `/ui`: the
//! exposure goes around the finished app, so it covers those routes too.
//!
//! The table is checked against the host: every route its router builder registers
//! (mistralrs-server-core's `mistralrs_server_router_builder.rs`, read from the source
//! cargo resolved) and, on 0.9, every route of its own registry, is a row; a route a bump
//! adds fails here before it is served.

use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use mistralrs_hlg::server::routes::{self, Access, Answer};
use mistralrs_hlg::server::security::Exposure;
use mistralrs_hlg::server::RouterBuilder;
use mistralrs_hlg_integration_tests::{call, engine};

/// The allowlist's refusal, as its 404 says.
const CLOSED: &str = "web-UI routes are off";

/// `path` with its parameters filled (`x`).
fn fill(path: &str) -> String {
    path.split('/')
        .map(|seg| if seg.starts_with('{') { "x" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

/// (method, path, public) for every row of the table this host serves, but the web UI's
/// (walked through [`UI_ROUTES`]).
fn table_routes() -> Vec<(&'static str, String, bool)> {
    routes::served()
        .filter(|r| r.answer != Answer::WebUi)
        .flat_map(|r| {
            let public = r.access != Access::Admin;
            r.methods.iter().map(move |&m| (m, fill(r.path), public))
        })
        .collect()
}

/// Routes no host registers.
const OTHER_ROUTES: &[(&str, &str, bool)] = &[
    ("GET", "/v1/some_route_a_later_host_adds", false),
    ("POST", "/admin/shutdown", false),
    ("GET", "/v1/chat/completions/x", false),
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

fn every_route() -> Vec<(&'static str, String, bool)> {
    let listed = OTHER_ROUTES.iter().chain(UI_ROUTES);
    table_routes()
        .into_iter()
        .chain(listed.map(|&(m, p, public)| (m, p.to_string(), public)))
        .collect()
}

/// A body no handler accepts: the walk must not unload the model or run a job.
fn body(method: &str) -> Option<serde_json::Value> {
    (method == "POST").then(|| serde_json::json!({"not": "a request"}))
}

async fn walk(allow_admin_routes: bool) {
    let mut exposure = Exposure::default();
    exposure.allow_admin_routes = allow_admin_routes;
    let router = app(exposure).await;
    for (method, path, public) in every_route() {
        let (status, text) = call(&router, method, &path, body(method).as_ref()).await;
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
    for (method, path, _) in every_route() {
        let (status, text) = call(&router, method, &path, body(method).as_ref()).await;
        let open = routes::find(&path).is_some_and(|r| r.access == Access::Open);
        assert_eq!(open, path == "/" || path == "/health", "{path}");
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

/// Every row walked is a declared route, and each sample of the UI falls under a web-UI
/// row.
#[test]
fn the_walk_is_the_table() {
    for (method, path, _) in table_routes() {
        let row = routes::find(&path).unwrap_or_else(|| panic!("{path} is not in the table"));
        assert!(row.methods.contains(&method), "{method} {path}");
    }
    for &(_, path, _) in UI_ROUTES {
        assert_eq!(
            routes::find(path).map(|r| r.answer),
            Some(Answer::WebUi),
            "{path}"
        );
    }
    for &(_, path, _) in OTHER_ROUTES {
        assert!(routes::find(path).is_none(), "{path} is declared");
    }
}

/// The table is `method path` complete for `(method, path)` pairs a host registers.
fn assert_declared(method: &str, path: &str, source: &str) {
    let row = routes::served().find(|r| {
        r.matches(&fill(path)) && r.path.matches('{').count() == path.matches('{').count()
    });
    let row =
        row.unwrap_or_else(|| panic!("{path} is registered by {source} and not in routes::ROUTES"));
    assert!(
        method == "*" || row.methods.contains(&method),
        "{method} {path} is registered by {source}; the table has {:?}",
        row.methods
    );
}

/// The paths the host's router builder passes to `.route(`, read from the source cargo
/// resolved for mistralrs-server-core: string literals (0.8.1 has only those), and on 0.9
/// constants (`X_ROUTE.path`) looked up in its `route_registry.rs`, the ones its registry
/// list leaves out (containers) included.
fn router_builder_paths() -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--manifest-path",
            manifest,
        ])
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let core = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "mistralrs-server-core")
        .expect("mistralrs-server-core is a dependency");
    let src = std::path::Path::new(core["manifest_path"].as_str().unwrap())
        .parent()
        .unwrap()
        .join("src");
    let read = |f: &str| std::fs::read_to_string(src.join(f)).unwrap_or_default();
    let (builder, registry) = (
        read("mistralrs_server_router_builder.rs"),
        read("route_registry.rs"),
    );
    let first_string = |text: &str| text.split('"').nth(1).map(str::to_owned);
    builder
        .split(".route(")
        .skip(1)
        .map(str::trim_start)
        .filter_map(|arg| {
            if arg.starts_with('"') {
                return first_string(arg);
            }
            let name = arg.split(".path").next()?;
            let decl = registry.split_once(&format!("pub const {name}: RouteInfo"));
            Some(
                first_string(
                    decl.unwrap_or_else(|| panic!("{name}: not in route_registry.rs"))
                        .1,
                )
                .unwrap(),
            )
        })
        .collect()
}

#[test]
fn the_table_covers_the_hosts_router_builder() {
    let paths = router_builder_paths();
    // 0.8.1 registers 18 routes, 0.9.2 over 40.
    assert!(paths.len() >= 18, "{paths:?}");
    for path in &paths {
        assert_declared("*", path, "the host's router builder");
    }
}

/// The host's own registry names no route the table does not.
#[cfg(mistralrs_host = "0.9")]
#[test]
fn the_table_covers_the_hosts_route_registry() {
    use mistralrs_server_core::route_registry::{MISTRALRS_API_ROUTES, RUNTIME_LORA_API_ROUTES};
    for r in MISTRALRS_API_ROUTES.iter().chain(RUNTIME_LORA_API_ROUTES) {
        for method in r.methods.split(", ") {
            assert_declared(method, r.path, "the host's route registry");
        }
    }
}
