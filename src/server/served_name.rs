//! The name the model is served under: the engine's internal id (for a local GGUF, its
//! directory) rewritten to the served name in every response.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::security::error;

/// `router` with the model's internal id (for a local GGUF, its directory) shown as
/// `served` in every response: the `model` field of completions and chunks, and the list
/// of `GET /v1/models`. Requests may name either (an alias is registered).
///
/// ```
/// use axum::{body::Body, http::Request, routing::get, Router};
/// use mistralrs_hlg::server::served_name::serve_under_name;
/// use tower::ServiceExt;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let routes = Router::new().route("/v1/models", get(|| async { r#"{"data":[{"id":"/srv/models"}]}"# }));
/// let app = serve_under_name(routes, "/srv/models".into(), "smollm2".into());
/// let resp = app.oneshot(Request::get("/v1/models").body(Body::empty()).unwrap()).await.unwrap();
/// let body = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
/// assert_eq!(&body[..], br#"{"data":[{"id":"smollm2"}]}"#);
/// # });
/// ```
pub fn serve_under_name(router: axum::Router, internal: String, served: String) -> axum::Router {
    if internal == served {
        return router;
    }
    let from: Arc<str> = serde_json::to_string(&internal).unwrap_or_default().into();
    let to: Arc<str> = serde_json::to_string(&served).unwrap_or_default().into();
    router.layer(axum::middleware::from_fn(
        move |req: Request, next: Next| {
            let (from, to) = (from.clone(), to.clone());
            async move {
                let resp = next.run(req).await;
                let (parts, body) = resp.into_parts();
                let stream = parts
                    .headers
                    .get(header::CONTENT_TYPE)
                    .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
                if stream {
                    use futures::StreamExt;
                    // Server-sent events arrive one event per frame.
                    let frames = body.into_data_stream().map(move |frame| {
                        frame.map(|b| match std::str::from_utf8(&b) {
                            Ok(text) if text.contains(&*from) => {
                                axum::body::Bytes::from(text.replace(&*from, &to))
                            }
                            _ => b,
                        })
                    });
                    return Response::from_parts(parts, Body::from_stream(frames));
                }
                let mut parts = parts;
                let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
                    return error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "server_error",
                        "reading the response failed",
                        None,
                        None,
                    );
                };
                match std::str::from_utf8(&bytes) {
                    Ok(text) if text.contains(&*from) => {
                        parts.headers.remove(header::CONTENT_LENGTH);
                        Response::from_parts(parts, Body::from(text.replace(&*from, &to)))
                    }
                    _ => Response::from_parts(parts, Body::from(bytes)),
                }
            }
        },
    ))
}

/// The name a model is served under by default: the last component of its id (a GGUF
/// directory's name, a hub repository's name).
///
/// ```
/// use mistralrs_hlg::server::served_name::default_served_name;
/// assert_eq!(default_served_name("/root/.cache/models/"), "models");
/// assert_eq!(default_served_name("HuggingFaceTB/SmolLM2-135M"), "SmolLM2-135M");
/// ```
pub fn default_served_name(internal: &str) -> String {
    internal
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or(internal)
        .to_string()
}
