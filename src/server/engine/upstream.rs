//! Upstream's routes behind the gate: the turn held until the response body is done.

use std::time::Duration;

use super::gate::{Admission, Gate};

/// `resp` with `admission` held by its body: finished when the body has been read to its
/// end, cancelled when the body is dropped before (the client went away). Error events
/// of a stream come out in OpenAI's shape ([`crate::server::security`]).
///
/// ```
/// use axum::body::Body;
/// use mistralrs_hlg::server::{engine::guard_body, Concurrency, Gate};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let gate = Gate::new(Concurrency::Serial, vec![]);
/// let resp = axum::response::Response::new(Body::from("{\"ok\": true}"));
/// let resp = guard_body(resp, gate.admit().await);
/// assert_eq!(gate.in_engine(), 1);
/// let body = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
/// assert_eq!(&body[..], b"{\"ok\": true}");
/// assert_eq!(gate.in_engine(), 0, "read to its end: the turn passed on");
/// # });
/// ```
pub fn guard_body(
    resp: axum::response::Response,
    admission: Admission,
) -> axum::response::Response {
    use futures::StreamExt;
    let (parts, body) = resp.into_parts();
    let mut admission = Some(admission);
    let end = futures::stream::poll_fn(move |_| {
        if let Some(mut a) = admission.take() {
            a.finish();
        }
        std::task::Poll::Ready(None)
    });
    let stream = body
        .into_data_stream()
        .map(|f| f.map(crate::server::security::openai_sse_frame))
        .chain(end);
    axum::response::Response::from_parts(parts, axum::body::Body::from_stream(stream))
}

/// Upstream's router behind the gate: every `POST` that can reach the engine waits for
/// its turn, and its turn lasts until its response body is finished or dropped. The
/// inner call runs in its own task, whether the gate is serial or not, so a client that
/// leaves before the response starts neither ends the turn while upstream's handler
/// still waits on the engine nor drops the handler's receiver (which would panic the
/// engine at its last send; see [`Admission`]). A background response (`/v1/responses`
/// with `background: true`) keeps the turn until upstream reports it finished.
pub(crate) fn gated_upstream(upstream: axum::Router, gate: Gate) -> axum::Router {
    let inner = upstream.clone();
    upstream.layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let gate = gate.clone();
            let inner = inner.clone();
            async move {
                let engine_bound = req.method() == axum::http::Method::POST
                    && !req.uri().path().ends_with("/cancel");
                if !engine_bound {
                    return next.run(req).await;
                }
                let responses = req.uri().path() == crate::server::routes::RESPONSES;
                let mut admission = gate.admit().await;
                admission.finish();
                let resp = match tokio::spawn(next.run(req)).await {
                    Ok(r) => r,
                    Err(e) => {
                        return crate::server::security::openai_error(
                            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                            format!("the request's handler failed: {e}"),
                            None,
                        )
                    }
                };
                if responses {
                    return hold_while_background(resp, admission, inner).await;
                }
                guard_body(resp, admission)
            }
        },
    ))
}

/// For a `/v1/responses` answer: when it is a queued background response, keeps the
/// turn until upstream's `GET /v1/responses/{id}` reports it ended; otherwise as
/// [`guard_body`].
async fn hold_while_background(
    resp: axum::response::Response,
    admission: Admission,
    inner: axum::Router,
) -> axum::response::Response {
    let is_json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !is_json {
        return guard_body(resp, admission);
    }
    let (parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, 64 << 20).await {
        Ok(b) => b,
        Err(e) => {
            return crate::server::security::openai_error(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("reading the response: {e}"),
                None,
            )
        }
    };
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let queued = v
        .get("status")
        .and_then(|s| s.as_str())
        .is_some_and(|s| s == "queued" || s == "in_progress");
    if let (true, Some(id)) = (
        queued,
        v.get("id").and_then(|i| i.as_str()).map(str::to_owned),
    ) {
        tokio::spawn(async move {
            let _turn = admission;
            while !background_ended(&inner, &id).await {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
    }
    axum::response::Response::from_parts(parts, axum::body::Body::from(bytes))
}

async fn background_ended(inner: &axum::Router, id: &str) -> bool {
    use tower::ServiceExt;
    let req = axum::http::Request::get(crate::server::routes::RESPONSE.replace("{id}", id))
        .body(axum::body::Body::empty());
    let Ok(req) = req else { return true };
    let Ok(resp) = inner.clone().oneshot(req).await;
    if !resp.status().is_success() {
        return true;
    }
    let Ok(bytes) = axum::body::to_bytes(resp.into_body(), 64 << 20).await else {
        return true;
    };
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    !matches!(
        v.get("status").and_then(|s| s.as_str()),
        Some("queued" | "in_progress")
    )
}
