//! What the server exposes, and to whom: the API key, upstream's management routes,
//! media sources, and one error shape for every route.
//!
//! Defaults are what an operator who changes nothing runs: no key (the server listens on
//! 127.0.0.1 unless told otherwise), management routes closed (404), media only as
//! `data:` URLs inline in the request (no fetch of remote addresses, no read of local
//! files). Every error this router returns is OpenAI-shaped:
//! `{"error": {"message", "type", "param", "code"}}`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::routes::{self, Access};

/// A JSON body this layer has parsed, handed on in the request's extensions to the
/// handler of an HLG route (`server/request.rs`), which then does not parse it again.
#[derive(Clone)]
pub(crate) struct ParsedJson(pub(crate) Value);

/// An OpenAI-shaped error response.
pub(crate) fn openai_error(status: StatusCode, message: String, param: Option<&str>) -> Response {
    let kind = if status.is_server_error() {
        "server_error"
    } else {
        "invalid_request_error"
    };
    error(status, kind, &message, param, None)
}

/// The largest request body, as upstream's router has it (50 MiB).
///
/// ```
/// use mistralrs_hlg::server::security::MAX_BODY_BYTES;
/// assert_eq!(MAX_BODY_BYTES, 50 << 20);
/// ```
pub const MAX_BODY_BYTES: usize =
    mistralrs_server_core::mistralrs_server_router_builder::DEFAULT_MAX_BODY_LIMIT;

/// What the server exposes beyond generation. Which routes are served, open or take
/// `hlg` is [`routes::ROUTES`]'s.
///
/// ```
/// use axum::{body::Body, http::Request, routing::{get, post}, Router};
/// use mistralrs_hlg::server::security::Exposure;
/// use tower::ServiceExt;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let e = Exposure::default();
/// assert!(!e.has_api_key() && !e.allow_admin_routes && !e.allow_remote_media && !e.allow_local_media);
///
/// // A management route is refused (404) until `--allow-admin-routes`.
/// let routes = || Router::new().route("/v1/system/info", get(|| async { "info" }));
/// let get_info = || Request::get("/v1/system/info").body(Body::empty()).unwrap();
/// let closed = Exposure::default().apply(routes());
/// assert_eq!(closed.oneshot(get_info()).await.unwrap().status(), 404);
/// let mut exposure = Exposure::default();
/// exposure.allow_admin_routes = true;
/// assert_eq!(exposure.apply(routes()).oneshot(get_info()).await.unwrap().status(), 200);
///
/// // `hlg` on a route that cannot apply it is refused, not dropped.
/// let app = Exposure::default().apply(Router::new().route("/v1/embeddings", post(|| async { "{}" })));
/// let req = Request::post("/v1/embeddings")
///     .header("content-type", "application/json")
///     .body(Body::from(r#"{"input": "Hi", "hlg": {"toe": 2}}"#))
///     .unwrap();
/// assert_eq!(app.oneshot(req).await.unwrap().status(), 400);
/// # });
/// ```
#[derive(Clone, Debug, Default)]
pub struct Exposure {
    key: Option<Arc<[u8; 32]>>,
    /// Serve every route the host registers, not only the [`Access::Public`] and
    /// [`Access::Open`] rows of [`routes::ROUTES`] (management, state-keeping and web-UI
    /// routes, and any route a later host adds before it is reviewed and declared there).
    pub allow_admin_routes: bool,
    /// Let requests name media at `http(s)://` addresses, which the server then fetches.
    pub allow_remote_media: bool,
    /// Let requests name media by local path or `file://` URL, which the server reads.
    pub allow_local_media: bool,
}

impl Exposure {
    /// Requires `Authorization: Bearer <key>` on every route but the [`Access::Open`]
    /// ones (health). Only
    /// the key's SHA-256 is kept; requests are compared digest to digest in constant time.
    ///
    /// ```
    /// use mistralrs_hlg::server::security::Exposure;
    /// let e = Exposure::default().with_api_key(Some("sk-local"));
    /// assert!(e.has_api_key());
    /// assert!(!Exposure::default().with_api_key(Some("")).has_api_key()); // empty: no key
    /// ```
    pub fn with_api_key(mut self, key: Option<&str>) -> Self {
        self.key = key
            .filter(|k| !k.is_empty())
            .map(|k| Arc::new(Sha256::digest(k.as_bytes()).into()));
        self
    }

    /// Whether a key is required.
    ///
    /// ```
    /// use mistralrs_hlg::server::HlgServerOptions;
    /// let opts = HlgServerOptions { api_key: Some("sk-1".into()), ..Default::default() };
    /// assert!(opts.exposure().has_api_key());
    /// ```
    pub fn has_api_key(&self) -> bool {
        self.key.is_some()
    }

    fn key_matches(&self, presented: &[u8]) -> bool {
        let Some(want) = &self.key else { return true };
        let got: [u8; 32] = Sha256::digest(presented).into();
        // Constant time: every byte is compared whatever the first difference.
        want.iter()
            .zip(got.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }

    /// `router` behind these rules and with every error in OpenAI's shape.
    ///
    /// ```
    /// use axum::{body::Body, http::Request, routing::get, Router};
    /// use mistralrs_hlg::server::security::Exposure;
    /// use tower::ServiceExt;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let routes = Router::new()
    ///     .route("/v1/models", get(|| async { "[]" }))
    ///     .route("/health", get(|| async { "ok" }));
    /// let app = Exposure::default().with_api_key(Some("sk-1")).apply(routes);
    /// let ask = |path: &str, auth: Option<&str>| {
    ///     let mut r = Request::get(path);
    ///     if let Some(a) = auth {
    ///         r = r.header("authorization", a);
    ///     }
    ///     r.body(Body::empty()).unwrap()
    /// };
    /// assert_eq!(app.clone().oneshot(ask("/v1/models", None)).await.unwrap().status(), 401);
    /// assert_eq!(app.clone().oneshot(ask("/v1/models", Some("Bearer sk-2"))).await.unwrap().status(), 401);
    /// assert_eq!(app.clone().oneshot(ask("/v1/models", Some("Bearer sk-1"))).await.unwrap().status(), 200);
    /// assert_eq!(app.oneshot(ask("/health", None)).await.unwrap().status(), 200);
    /// # });
    /// ```
    pub fn apply(self, router: axum::Router) -> axum::Router {
        let exposure = Arc::new(self);
        let guard = axum::middleware::from_fn(move |req: Request, next: Next| {
            let exposure = exposure.clone();
            async move { exposure.check(req, next).await }
        });
        router
            .layer(guard)
            .layer(axum::middleware::from_fn(openai_errors))
    }

    async fn check(&self, req: Request, next: Next) -> Response {
        let path = req.uri().path().to_string();
        let route = routes::find(&path);
        let access = route.map_or(Access::Admin, |r| r.access);
        if req.method() != Method::OPTIONS && access != Access::Open && !self.authorized(&req) {
            return error(
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                "a valid API key is required: send `Authorization: Bearer <key>`",
                None,
                Some("invalid_api_key"),
            );
        }
        if !self.allow_admin_routes && access == Access::Admin {
            return error(StatusCode::NOT_FOUND, "invalid_request_error", &format!("no route {path} (management, state-keeping and web-UI routes are off; start the server with --allow-admin-routes)"), None, None);
        }
        let hlg_route = route.is_some_and(|r| r.takes_hlg());
        // Every POST is read but one to an HLG route with all media allowed.
        let all_allowed = hlg_route && self.allow_remote_media && self.allow_local_media;
        if req.method() == Method::POST && !all_allowed {
            return self.check_body(req, next, hlg_route).await;
        }
        next.run(req).await
    }

    fn authorized(&self, req: &Request) -> bool {
        if self.key.is_none() {
            return true;
        }
        let presented = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes())
            .and_then(|v| v.strip_prefix(b"Bearer "))
            .unwrap_or(b"");
        !presented.is_empty() && self.key_matches(presented)
    }

    /// Reads the body (bounded), refuses media sources that are not allowed and an `hlg`
    /// field on a route that cannot apply it, and passes the request on with the same
    /// body.
    async fn check_body(&self, req: Request, next: Next, hlg_route: bool) -> Response {
        let (mut parts, body) = req.into_parts();
        let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
            Ok(b) => b,
            Err(_) => {
                return error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "invalid_request_error",
                    &format!("the request body is over {} MiB", MAX_BODY_BYTES >> 20),
                    None,
                    None,
                )
            }
        };
        if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
            if !hlg_route && v.get("hlg").is_some() {
                let msg = format!(
                    "`hlg` is not supported on {} (it applies to {}); remove it or use one of those routes",
                    parts.uri.path(),
                    routes::hlg_paths().collect::<Vec<_>>().join(", ")
                );
                return error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    &msg,
                    Some("hlg"),
                    None,
                );
            }
            if let Some((param, kind)) = self.refused_media(&v) {
                let (what, flag) = match kind {
                    Media::Remote => ("media at remote addresses", "--allow-remote-media"),
                    Media::Local => ("media from local files", "--allow-local-media"),
                };
                let msg = format!("`{param}`: {what} are off on this server (send the media inline as a `data:` URL, or start the server with {flag})");
                return error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    &msg,
                    Some(&param),
                    None,
                );
            }
            if hlg_route {
                // This crate's handler takes the value, not the bytes again.
                parts.extensions.insert(ParsedJson(v));
            }
        }
        next.run(Request::from_parts(parts, Body::from(bytes)))
            .await
    }

    /// The first media source in `messages` (chat) or `input` (responses) that these
    /// rules refuse, with its parameter path.
    fn refused_media(&self, body: &Value) -> Option<(String, Media)> {
        let mut found = vec![];
        for field in ["messages", "input"] {
            if let Some(v) = body.get(field) {
                media_sources(v, field.to_string(), false, &mut found);
            }
        }
        found
            .into_iter()
            .find_map(|(param, url)| match classify(&url) {
                Some(Media::Remote) if !self.allow_remote_media => Some((param, Media::Remote)),
                Some(Media::Local) if !self.allow_local_media => Some((param, Media::Local)),
                _ => None,
            })
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Media {
    Remote,
    Local,
}

/// `data:` URLs carry their content: `None`. `http(s)://` is fetched by the server;
/// anything else is read from its file system.
fn classify(url: &str) -> Option<Media> {
    let u = url.trim_start();
    let lower = u.get(..8).unwrap_or(u).to_ascii_lowercase();
    if lower.starts_with("data:") {
        None
    } else if lower.starts_with("http://") || lower.starts_with("https://") {
        Some(Media::Remote)
    } else {
        Some(Media::Local)
    }
}

/// The keys whose string values upstream reads as a media source, inside a content part
/// whose `type` is not text.
const SOURCE_KEYS: [&str; 6] = [
    "url",
    "image_url",
    "audio_url",
    "video_url",
    "file_url",
    "input_image",
];

fn media_sources(v: &Value, path: String, in_media_part: bool, out: &mut Vec<(String, String)>) {
    match v {
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                media_sources(x, format!("{path}[{i}]"), in_media_part, out);
            }
        }
        Value::Object(map) => {
            let media_part = in_media_part
                || map
                    .get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !t.contains("text") && t != "refusal");
            for (k, x) in map {
                let p = format!("{path}.{k}");
                match x {
                    Value::String(s) if media_part && SOURCE_KEYS.contains(&k.as_str()) => {
                        out.push((p, s.clone()))
                    }
                    _ => media_sources(x, p, media_part, out),
                }
            }
        }
        _ => {}
    }
}

/// An OpenAI-shaped error response.
pub(crate) fn error(
    status: StatusCode,
    kind: &str,
    message: &str,
    param: Option<&str>,
    code: Option<&str>,
) -> Response {
    let body =
        json!({ "error": { "message": message, "type": kind, "param": param, "code": code } });
    (status, axum::Json(body)).into_response()
}

/// Every error response in OpenAI's shape: upstream's `{"message": …}` bodies, axum's
/// plain-text rejections (413, 415, 422, 405) and empty 404/405s are rewritten; bodies
/// already in the shape pass untouched. Local paths in messages are replaced by
/// `<path>` (upstream names the model directory in some of them).
async fn openai_errors(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
    if parsed
        .as_ref()
        .is_some_and(|v| v.get("error").is_some_and(|e| e.get("message").is_some()))
    {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let message = match &parsed {
        Some(v) => v
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| v.to_string()),
        None if bytes.is_empty() => status.canonical_reason().unwrap_or("error").to_string(),
        None => String::from_utf8_lossy(&bytes).into_owned(),
    };
    // Upstream answers a request for a model it does not serve with a 500.
    let (status, code) = if status == StatusCode::INTERNAL_SERVER_ERROR
        && message.starts_with("Requested model '")
    {
        (StatusCode::NOT_FOUND, Some("model_not_found"))
    } else {
        (status, None)
    };
    let kind = if status.is_server_error() {
        "server_error"
    } else {
        "invalid_request_error"
    };
    let mut out = error(status, kind, &scrub_paths(&message), None, code);
    for (k, v) in parts
        .headers
        .iter()
        .filter(|(k, _)| *k != header::CONTENT_TYPE && *k != header::CONTENT_LENGTH)
    {
        out.headers_mut().insert(k.clone(), v.clone());
    }
    out
}

/// `message` with absolute paths (`/…/…`) replaced by `<path>`.
pub(crate) fn scrub_paths(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find('/') {
        let prefix_ok = i == 0 || rest[..i].ends_with([' ', '`', '\'', '"', '(', '[', '=', ':']);
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| c.is_whitespace() || "`'\"),]".contains(c))
            .unwrap_or(tail.len());
        let candidate = &tail[..end];
        if prefix_ok
            && candidate.matches('/').count() >= 2
            && !candidate.starts_with("//")
            && !candidate.starts_with("/v1/")
        {
            out.push_str(&rest[..i]);
            out.push_str("<path>");
        } else {
            out.push_str(&rest[..i + end.max(1)]);
        }
        rest = &tail[end.max(1)..];
    }
    out.push_str(rest);
    out
}

/// One server-sent event of a generation stream with an error in OpenAI's shape:
/// upstream's streamers send a model or validation error mid-stream as `data: <text>`;
/// JSON payloads, `[DONE]` and comments pass unchanged.
pub(crate) fn openai_sse_frame(frame: axum::body::Bytes) -> axum::body::Bytes {
    let Some(payload) = frame.strip_prefix(b"data: ".as_slice()) else {
        return frame;
    };
    let text = String::from_utf8_lossy(payload);
    let t = text.trim();
    if t.starts_with('{') || t == "[DONE]" || t.is_empty() {
        return frame;
    }
    let body = json!({ "error": { "message": scrub_paths(t), "type": "server_error", "param": null, "code": null } });
    axum::body::Bytes::from(format!("data: {body}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_sources_are_classified() {
        assert_eq!(classify("data:image/png;base64,AAAA"), None);
        assert_eq!(classify("HTTPS://example.com/a.png"), Some(Media::Remote));
        assert_eq!(classify("http://127.0.0.1:8080/x"), Some(Media::Remote));
        assert_eq!(classify("/etc/passwd"), Some(Media::Local));
        assert_eq!(classify("file:///etc/passwd"), Some(Media::Local));
        assert_eq!(classify("./a.png"), Some(Media::Local));
    }

    #[test]
    fn refused_media_names_the_part() {
        let e = Exposure::default();
        let chat = json!({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "see /etc/passwd"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "audio_url", "audio_url": {"url": "file:///etc/shadow"}},
        ]}]});
        assert_eq!(
            e.refused_media(&chat),
            Some(("messages[0].content[2].audio_url.url".into(), Media::Local))
        );
        let responses = json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://example.com/x.png"}]}]});
        assert_eq!(
            e.refused_media(&responses),
            Some(("input[0].content[0].image_url".into(), Media::Remote))
        );
        let open = Exposure {
            allow_remote_media: true,
            allow_local_media: true,
            ..Default::default()
        };
        assert_eq!(open.refused_media(&chat), None);
        // Text that looks like a path is not a media source.
        assert_eq!(
            e.refused_media(&json!({"messages": [{"role": "user", "content": "/etc/passwd"}]})),
            None
        );
    }

    #[test]
    fn keys_compare_by_digest() {
        let e = Exposure::default().with_api_key(Some("sk-right"));
        assert!(e.key_matches(b"sk-right"));
        assert!(!e.key_matches(b"sk-wrong"));
        assert!(!e.key_matches(b"sk-righ"));
        assert!(!e.key_matches(b""));
        assert!(Exposure::default().key_matches(b"anything"));
    }

    #[test]
    fn stream_errors_are_shaped() {
        use axum::body::Bytes;
        let f =
            |s: &'static str| String::from_utf8(openai_sse_frame(Bytes::from(s)).to_vec()).unwrap();
        assert_eq!(f("data: [DONE]\n\n"), "data: [DONE]\n\n");
        assert_eq!(
            f("data: {\"choices\":[]}\n\n"),
            "data: {\"choices\":[]}\n\n"
        );
        assert_eq!(f(": keep-alive\n\n"), ": keep-alive\n\n");
        let v: Value = serde_json::from_str(
            f("data: Model failed\n\n")
                .strip_prefix("data: ")
                .unwrap()
                .trim_end(),
        )
        .unwrap();
        assert_eq!(v["error"]["message"], "Model failed");
    }

    #[test]
    fn paths_are_scrubbed() {
        assert_eq!(
            scrub_paths("Model `/root/.cache/mistralrs-hlg/models` not found"),
            "Model `<path>` not found"
        );
        assert_eq!(
            scrub_paths("available: /home/u/m, /opt/x/y"),
            "available: <path>, <path>"
        );
        assert_eq!(
            scrub_paths("see /v1/models or a/b/c"),
            "see /v1/models or a/b/c"
        );
        assert_eq!(scrub_paths("no path here"), "no path here");
    }
}
