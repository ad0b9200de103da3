//! `n > 1` served as `n` single-choice generations, one after another, merged into one
//! response: the workaround for mistral.rs 0.8.1's batched CPU decode (see
//! `docs/NOTES.md`, "The `n > 1` bug").
//!
//! mistral.rs runs the `n` choices of a request as one batch, and on the CPU its decode
//! attention (`flash_attn_cpu_single_q`) keeps one scratch slot per (tile, head) instead of
//! per (batch row, tile, head): every row gets the attention output of the batch's last
//! row. Identical rows (greedy) do not notice; sampled choices drift apart and all but the
//! last turn to noise. Single-choice requests sent one at a time are never batched with
//! each other, so they come out as `n = 1` requests do. Concurrent requests for the
//! choices would be batched again (they have the same length), hence sequential.
//!
//! The merged response looks like upstream's: choices numbered `0..n`, one `id`, usage
//! token counts and times summed with the rates recomputed; a stream carries every
//! choice's chunks (choice 0 first, then 1, …) with their own `index`, and one final
//! `[DONE]`.

use std::convert::Infallible;
use std::future::Future;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};

/// Events a split stream buffers ahead of its reader.
const EVENT_BUFFER: usize = 16;
use serde_json::Value;

/// Runs `one(i)` for `i` in `0..n`, one after another, and merges the responses. The
/// first failure is returned as it is (for a stream: the first request's failure; a
/// later one ends the stream with its error as an event).
pub(crate) async fn merged<F, Fut>(n: usize, streaming: bool, one: F) -> Response
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    if streaming {
        merged_stream(n, one).await
    } else {
        merged_json(n, one).await
    }
}

async fn merged_json<F, Fut>(n: usize, one: F) -> Response
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Response>,
{
    let mut out: Option<Value> = None;
    for i in 0..n {
        let resp = one(i).await;
        if resp.status() != StatusCode::OK {
            return resp;
        }
        let v = match body_json(resp).await {
            Ok(v) => v,
            Err(e) => return internal(e),
        };
        out = Some(match out {
            None => renumber(v, i),
            Some(acc) => append(acc, renumber(v, i)),
        });
    }
    match out {
        Some(v) => (StatusCode::OK, axum::Json(v)).into_response(),
        None => internal("no choices were requested".into()),
    }
}

async fn merged_stream<F, Fut>(n: usize, one: F) -> Response
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let first = one(0).await;
    if first.status() != StatusCode::OK {
        return first;
    }
    // Bounded: a slow reader holds the generation back instead of growing the buffer.
    let (mut tx, rx) = futures::channel::mpsc::channel::<Bytes>(EVENT_BUFFER);
    tokio::spawn(async move {
        let mut first = Some(first);
        for i in 0..n {
            let resp = match first.take() {
                Some(r) => r,
                None => one(i).await,
            };
            if resp.status() != StatusCode::OK {
                let err = openai_shaped(
                    body_json(resp)
                        .await
                        .unwrap_or_else(|e| serde_json::json!({ "message": e })),
                );
                let _ = tx.send(Bytes::from(format!("data: {err}\n\n"))).await;
                break;
            }
            if forward_events(resp, i, &mut tx).await.is_err() {
                // The client went away: stop generating the remaining choices.
                return;
            }
        }
        let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n")).await;
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(rx.map(Ok::<_, Infallible>)))
        .unwrap_or_else(|e| internal(e.to_string()))
}

/// Copies one choice's server-sent events to `tx` with `index = i`, without its `[DONE]`.
/// `Err` when the receiver is gone.
async fn forward_events(
    resp: Response,
    i: usize,
    tx: &mut futures::channel::mpsc::Sender<Bytes>,
) -> Result<(), ()> {
    let mut body = resp.into_body().into_data_stream();
    let mut buf = String::new();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else { break };
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            if let Some(out) = rewrite_event(&event, i) {
                tx.send(Bytes::from(out)).await.map_err(|_| ())?;
            }
        }
    }
    if !buf.trim().is_empty() {
        if let Some(out) = rewrite_event(&buf, i) {
            tx.send(Bytes::from(out)).await.map_err(|_| ())?;
        }
    }
    Ok(())
}

/// One event (`data: …` lines and comments, ending in a blank line): `None` for
/// `[DONE]`; a JSON payload with its choices renumbered to `i`; anything else unchanged.
pub(crate) fn rewrite_event(event: &str, i: usize) -> Option<String> {
    let data: Vec<&str> = event
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    if data.is_empty() {
        return Some(event.to_string());
    }
    let payload = data.join("\n");
    if payload.trim() == "[DONE]" {
        return None;
    }
    match serde_json::from_str::<Value>(&payload) {
        // Upstream's streamer reports a model error mid-stream as `{"message": …}`.
        Ok(v) if v.get("choices").is_none() && v.get("message").is_some() => {
            Some(format!("data: {}\n\n", openai_shaped(v)))
        }
        Ok(v) => Some(format!("data: {}\n\n", renumber(v, i))),
        Err(_) => Some(event.to_string()),
    }
}

/// An error body in OpenAI's shape: upstream's `{"message": …}` wrapped, one already in
/// the shape unchanged.
pub(crate) fn openai_shaped(v: Value) -> Value {
    if v.get("error").is_some_and(|e| e.get("message").is_some()) {
        return v;
    }
    let message = v
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| v.to_string());
    serde_json::json!({ "error": { "message": crate::server::security::scrub_paths(&message), "type": "server_error", "param": null, "code": null } })
}

/// Sets `index = i` on every choice of a response or chunk.
pub(crate) fn renumber(mut v: Value, i: usize) -> Value {
    if let Some(choices) = v.get_mut("choices").and_then(Value::as_array_mut) {
        for c in choices {
            if let Some(o) = c.as_object_mut() {
                o.insert("index".into(), i.into());
            }
        }
    }
    v
}

/// `acc` with `next`'s choices appended and usage summed.
pub(crate) fn append(mut acc: Value, next: Value) -> Value {
    if let (Some(a), Some(b)) = (
        acc.get_mut("choices").and_then(Value::as_array_mut),
        next.get("choices").and_then(Value::as_array),
    ) {
        a.extend(b.iter().cloned());
    }
    if let (Some(a), Some(b)) = (
        acc.get_mut("usage").and_then(Value::as_object_mut),
        next.get("usage").and_then(Value::as_object),
    ) {
        for (k, bv) in b {
            let summable = k.ends_with("_tokens") || k.ends_with("_sec") && !k.contains("per_sec");
            if !summable {
                continue;
            }
            let sum = match (a.get(k), bv) {
                (Some(Value::Number(x)), Value::Number(y)) if x.is_u64() && y.is_u64() => {
                    Value::from(x.as_u64().unwrap_or(0) + y.as_u64().unwrap_or(0))
                }
                (Some(Value::Number(x)), Value::Number(y)) => {
                    Value::from(x.as_f64().unwrap_or(0.0) + y.as_f64().unwrap_or(0.0))
                }
                _ => continue,
            };
            a.insert(k.clone(), sum);
        }
        // Rates follow from the summed counts and times.
        for (rate, tokens, time) in [
            ("avg_tok_per_sec", "total_tokens", "total_time_sec"),
            (
                "avg_prompt_tok_per_sec",
                "prompt_tokens",
                "total_prompt_time_sec",
            ),
            (
                "avg_compl_tok_per_sec",
                "completion_tokens",
                "total_completion_time_sec",
            ),
        ] {
            let (Some(t), Some(s)) = (
                a.get(tokens).and_then(Value::as_f64),
                a.get(time).and_then(Value::as_f64),
            ) else {
                continue;
            };
            if a.contains_key(rate) && s > 0.0 {
                a.insert(rate.into(), Value::from(t / s));
            }
        }
    }
    acc
}

async fn body_json(resp: Response) -> Result<Value, String> {
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

fn internal(message: String) -> Response {
    let body = serde_json::json!({ "error": { "message": message, "type": "internal_error", "param": null, "code": null } });
    (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn choices_renumbered_and_usage_summed() {
        let a = json!({"id": "a", "choices": [{"index": 0, "text": "x"}], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8, "total_time_sec": 1.0, "avg_tok_per_sec": 8.0}});
        let b = json!({"id": "b", "choices": [{"index": 0, "text": "y"}], "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9, "total_time_sec": 0.5, "avg_tok_per_sec": 18.0}});
        let m = append(renumber(a, 0), renumber(b, 1));
        assert_eq!(m["id"], "a");
        assert_eq!(
            m["choices"],
            json!([{"index": 0, "text": "x"}, {"index": 1, "text": "y"}])
        );
        assert_eq!(m["usage"]["completion_tokens"], 7);
        assert_eq!(m["usage"]["prompt_tokens"], 10);
        assert_eq!(m["usage"]["total_tokens"], 17);
        assert_eq!(m["usage"]["total_time_sec"], 1.5);
        assert!((m["usage"]["avg_tok_per_sec"].as_f64().unwrap() - 17.0 / 1.5).abs() < 1e-9);
    }

    /// The split stream's buffer is bounded: a reader that does not read holds the
    /// generation back (the source is polled only as far as the buffer), and reading it
    /// later still gives every event of every choice.
    #[tokio::test]
    async fn a_slow_reader_holds_the_split_stream_back() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        const EVENTS: usize = 5000;
        let produced = Arc::new(AtomicUsize::new(0));
        let p = produced.clone();
        let resp = merged(2, true, move |_| {
            let p = p.clone();
            async move {
                let events = futures::stream::iter(0..EVENTS).map(move |k| {
                    p.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, Infallible>(Bytes::from(format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{k}\"}}}}]}}\n\n")))
                });
                Response::builder().status(StatusCode::OK).body(Body::from_stream(events)).unwrap()
            }
        })
        .await;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let early = produced.load(Ordering::SeqCst);
        assert!(
            early <= EVENT_BUFFER + 4,
            "{early} events produced for a reader that read none"
        );
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert_eq!(text.matches("data: ").count(), 2 * EVENTS + 1);
        assert!(text.ends_with("data: [DONE]\n\n"));
        assert_eq!(text.matches("\"index\":1").count(), EVENTS);
    }

    #[test]
    fn events_rewritten() {
        assert_eq!(rewrite_event("data: [DONE]\n\n", 2), None);
        let out = rewrite_event("data: {\"choices\":[{\"index\":0,\"delta\":{}}]}\n\n", 2).unwrap();
        let payload: Value =
            serde_json::from_str(out.strip_prefix("data: ").unwrap().trim_end()).unwrap();
        assert_eq!(payload, json!({"choices": [{"index": 2, "delta": {}}]}));
        assert!(out.ends_with("\n\n"));
        assert_eq!(rewrite_event(":\n\n", 1).unwrap(), ":\n\n");
        let err =
            rewrite_event("data: {\"message\":\"model failed at /root/x/y\"}\n\n", 1).unwrap();
        let v: Value =
            serde_json::from_str(err.strip_prefix("data: ").unwrap().trim_end()).unwrap();
        assert_eq!(
            v,
            json!({"error": {"message": "model failed at <path>", "type": "server_error", "param": null, "code": null}})
        );
    }
}
