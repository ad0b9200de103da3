//! Every route a deployment can serve, declared once: its methods, who may reach it,
//! whether it takes an `hlg` field, which hosts serve it and what answers it.
//!
//! The router ([`super::RouterBuilder`]) mounts the [`Answer::Own`] rows; the security
//! layer's allowlist, its key exemptions and its `hlg` refusal read [`Access`] and
//! [`Route::takes_hlg`]; the OpenAPI document adds `hlg` to the rows that take it. A route
//! upstream registers that is not a row here is refused by the allowlist (404) until it is
//! reviewed and added; `integration-tests/tests/routes.rs` walks every row through the
//! server and fails when a host registers a route this table lacks.

/// Who may reach a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Served without the API key (load balancers' health checks).
    Open,
    /// Served by default, behind the API key when one is set.
    Public,
    /// Management, state-keeping and web-UI routes: 404 unless `--allow-admin-routes`,
    /// and behind the API key when one is set.
    Admin,
}

/// Which host versions serve a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hosts {
    /// mistral.rs 0.8.1 and 0.9.2.
    Every,
    /// mistral.rs 0.9 only.
    Since09,
}

/// This crate's own handlers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Own {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/completions`.
    Completion,
    /// `POST /v1/responses`.
    Responses,
    /// `POST /v1/messages` (Anthropic's Messages API, mistral.rs 0.9).
    Messages,
    /// `GET /v1/hlg`: the server's effective HLG defaults.
    HlgDefaults,
    /// `GET /api-doc/openapi.json`.
    OpenApi,
}

/// What answers a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A handler of this crate.
    Own(Own),
    /// mistralrs-server-core's router (the fallback).
    Upstream,
    /// The web UI that upstream's `mistralrs serve` nests at `/ui` after the router is
    /// built (the patched CLIs; `--ui` on 0.8.1, on by default on 0.9).
    WebUi,
}

/// One route. `{name}` in a path stands for one segment, `{*rest}` for the rest.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    /// The path as axum writes it.
    pub path: &'static str,
    /// The HTTP methods it answers.
    pub methods: &'static [&'static str],
    /// Who may reach it.
    pub access: Access,
    /// Which hosts serve it.
    pub hosts: Hosts,
    /// What answers it.
    pub answer: Answer,
}

/// `POST /v1/chat/completions`.
pub const CHAT: &str = "/v1/chat/completions";
/// `POST /v1/completions`.
pub const COMPLETIONS: &str = "/v1/completions";
/// `POST /v1/responses`.
pub const RESPONSES: &str = "/v1/responses";
/// `GET`/`DELETE /v1/responses/{id}`: a stored response.
pub const RESPONSE: &str = "/v1/responses/{id}";
/// `POST /v1/messages`.
pub const MESSAGES: &str = "/v1/messages";
/// `GET /v1/hlg`.
pub const HLG_DEFAULTS: &str = "/v1/hlg";

const fn route(
    path: &'static str,
    methods: &'static [&'static str],
    access: Access,
    hosts: Hosts,
    answer: Answer,
) -> Route {
    Route {
        path,
        methods,
        access,
        hosts,
        answer,
    }
}

const GET: &[&str] = &["GET"];
const POST: &[&str] = &["POST"];
const GET_POST: &[&str] = &["GET", "POST"];
const GET_DELETE: &[&str] = &["GET", "DELETE"];

use Access::{Admin, Open, Public};
use Answer::{Upstream, WebUi};
use Hosts::{Every, Since09};

/// Every route, on every host. `GET`/`DELETE /v1/responses/{id}` are public by decision
/// (docs/SERVING.md, "Security"): a response id is an unguessable capability, and the
/// Responses API is unusable without them.
#[rustfmt::skip]
pub const ROUTES: &[Route] = &[
    // Health: open without the key.
    route("/", GET, Open, Every, Upstream),
    route("/health", GET, Open, Every, Upstream),
    // Generation, with HLG.
    route(CHAT, POST, Public, Every, Answer::Own(Own::Chat)),
    route(COMPLETIONS, POST, Public, Every, Answer::Own(Own::Completion)),
    route(RESPONSES, POST, Public, Every, Answer::Own(Own::Responses)),
    route(MESSAGES, POST, Public, Since09, Answer::Own(Own::Messages)),
    // This crate's documents.
    route(HLG_DEFAULTS, GET, Public, Every, Answer::Own(Own::HlgDefaults)),
    route("/api-doc/openapi.json", GET, Public, Every, Answer::Own(Own::OpenApi)),
    // Upstream's other public routes.
    route("/v1/models", GET, Public, Every, Upstream),
    route(RESPONSE, GET_DELETE, Public, Every, Upstream),
    route("/v1/responses/{id}/cancel", POST, Public, Every, Upstream),
    route("/v1/messages/count_tokens", POST, Public, Since09, Upstream),
    route("/v1/embeddings", POST, Public, Every, Upstream),
    route("/v1/images/generations", POST, Public, Every, Upstream),
    route("/v1/audio/speech", POST, Public, Every, Upstream),
    route("/docs", GET, Public, Every, Upstream),
    route("/docs/", GET, Public, Every, Upstream),
    route("/docs/{*rest}", GET, Public, Every, Upstream),
    // Management.
    route("/v1/models/unload", POST, Admin, Every, Upstream),
    route("/v1/models/reload", POST, Admin, Every, Upstream),
    route("/v1/models/status", POST, Admin, Every, Upstream),
    route("/v1/models/tune", POST, Admin, Every, Upstream),
    route("/v1/system/info", GET, Admin, Every, Upstream),
    route("/v1/system/doctor", POST, Admin, Every, Upstream),
    route("/re_isq", POST, Admin, Every, Upstream),
    route("/metrics", GET, Admin, Since09, Upstream),
    route("/calibration/start", POST, Admin, Since09, Upstream),
    route("/calibration/status", GET, Admin, Since09, Upstream),
    route("/calibration/apply", POST, Admin, Since09, Upstream),
    route("/v1/lora_adapters", GET, Admin, Since09, Upstream),
    route("/v1/load_lora_adapter", POST, Admin, Since09, Upstream),
    route("/v1/unload_lora_adapter", POST, Admin, Since09, Upstream),
    // State kept on the server.
    route("/v1/files", GET_POST, Admin, Since09, Upstream),
    route("/v1/files/{id}", GET_DELETE, Admin, Since09, Upstream),
    route("/v1/files/{id}/content", GET, Admin, Since09, Upstream),
    route("/v1/containers/{id}/files", GET, Admin, Since09, Upstream),
    route("/v1/containers/{id}/files/{file}", GET, Admin, Since09, Upstream),
    route("/v1/containers/{id}/files/{file}/content", GET, Admin, Since09, Upstream),
    route("/v1/skills", GET_POST, Admin, Since09, Upstream),
    route("/v1/skills/{id}/versions", GET_POST, Admin, Since09, Upstream),
    route("/v1/sessions/{id}", &["GET", "PUT", "DELETE"], Admin, Since09, Upstream),
    route("/v1/agent/approvals/{id}", POST, Admin, Since09, Upstream),
    // The patched CLIs' web UI: chats and settings kept on the server, the model's path.
    route("/ui", GET, Admin, Every, WebUi),
    route("/ui/{*rest}", GET_POST, Admin, Every, WebUi),
];

impl Route {
    /// Whether it applies an `hlg` field: this crate's generation handlers do; every other
    /// route refuses a body carrying one (400) rather than ignore it.
    pub fn takes_hlg(&self) -> bool {
        matches!(
            self.answer,
            Answer::Own(Own::Chat | Own::Completion | Own::Responses | Own::Messages)
        )
    }

    /// Whether the host this crate is built against serves it.
    pub fn on_this_host(&self) -> bool {
        self.hosts == Hosts::Every || cfg!(mistralrs_host = "0.9")
    }

    /// Whether `path` is this route's (`{name}` matches one non-empty segment, `{*rest}`
    /// the rest).
    ///
    /// ```
    /// use mistralrs_hlg::server::routes::{find, ROUTES};
    /// let cancel = ROUTES.iter().find(|r| r.path == "/v1/responses/{id}/cancel").unwrap();
    /// assert!(cancel.matches("/v1/responses/resp_1/cancel"));
    /// assert!(!cancel.matches("/v1/responses//cancel") && !cancel.matches("/v1/responses/a/b"));
    /// assert!(find("/ui/api/list_models").is_some_and(|r| r.path == "/ui/{*rest}"));
    /// ```
    pub fn matches(&self, path: &str) -> bool {
        let mut want = self.path.split('/');
        let mut got = path.split('/');
        loop {
            match (want.next(), got.next()) {
                (None, None) => return true,
                (Some(w), Some(_)) if w.starts_with("{*") => return true,
                (Some(w), Some(g)) if w.starts_with('{') && !g.is_empty() => {}
                (Some(w), Some(g)) if w == g => {}
                _ => return false,
            }
        }
    }
}

/// The routes the host this crate is built against serves.
pub fn served() -> impl Iterator<Item = &'static Route> {
    ROUTES.iter().filter(|r| r.on_this_host())
}

/// The row of this host's table that `path` falls under, if any.
///
/// ```
/// use mistralrs_hlg::server::routes::{find, Access};
/// assert_eq!(find("/v1/chat/completions").map(|r| r.access), Some(Access::Public));
/// assert_eq!(find("/v1/models/unload").map(|r| r.access), Some(Access::Admin));
/// assert_eq!(find("/health").map(|r| r.access), Some(Access::Open));
/// assert!(find("/v1/chat/completions/").is_none() && find("/admin/shutdown").is_none());
/// ```
pub fn find(path: &str) -> Option<&'static Route> {
    served().find(|r| r.matches(path))
}

/// The paths of the routes that apply `hlg` on this host.
///
/// ```
/// use mistralrs_hlg::server::routes::hlg_paths;
/// let paths: Vec<_> = hlg_paths().collect();
/// assert!(paths.contains(&"/v1/chat/completions") && !paths.contains(&"/v1/embeddings"));
/// ```
pub fn hlg_paths() -> impl Iterator<Item = &'static str> {
    served().filter(|r| r.takes_hlg()).map(|r| r.path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_path_is_declared_once() {
        let mut paths: Vec<_> = ROUTES.iter().map(|r| r.path).collect();
        paths.sort_unstable();
        let n = paths.len();
        paths.dedup();
        assert_eq!(paths.len(), n, "a path declared twice");
    }

    /// `hlg` rides in a request body (POST only), and every handler of this crate is
    /// public.
    #[test]
    fn own_rows_are_public_and_hlg_is_posted() {
        for r in ROUTES {
            assert!(
                !r.takes_hlg() || r.methods == POST,
                "{}: hlg on a non-POST route",
                r.path
            );
            if matches!(r.answer, Answer::Own(_)) {
                assert_eq!(r.access, Access::Public, "{}", r.path);
            }
        }
        assert_eq!(ROUTES.iter().filter(|r| r.takes_hlg()).count(), 4);
    }

    /// The web UI is never served without `--allow-admin-routes`, and only health is open.
    #[test]
    fn access_of_the_sensitive_rows() {
        for r in ROUTES {
            if r.answer == Answer::WebUi || r.path.contains("unload") || r.path.contains("files") {
                assert_eq!(r.access, Access::Admin, "{}", r.path);
            }
            assert_eq!(r.access == Access::Open, ["/", "/health"].contains(&r.path));
        }
        assert!(find("/ui").is_some() && find("/ui/").is_some() && find("/uix").is_none());
    }

    #[test]
    fn messages_only_on_0_9() {
        assert_eq!(
            hlg_paths().any(|p| p == MESSAGES),
            cfg!(mistralrs_host = "0.9")
        );
    }
}
