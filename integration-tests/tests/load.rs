//! Load on the real engine, over real sockets (ignored: minutes long; `scripts/load`).
//!
//! `load_run`: a fresh server as `mistralrs-hlg serve` runs it (`--hlg-batching auto`),
//! 32 clients for `MISTRALRS_HLG_LOAD_SECS` (600 by default), a mix of HLG on and off,
//! chat and completions, streamed and not, `n = 1` and `n = 3`, and bad requests in
//! between. Asserts: no 5xx, no dropped connection, every bad request a 4xx, every greedy
//! response identical to the same request's solo response, and resident memory at the
//! end within 256 MiB of its largest value in the first half of the run (the engine's
//! caches and the allocator's arenas fill while the run warms up; growth after that is
//! a leak).
//!
//! `throughput`: 1, 4 and 8 concurrent clients of greedy chat requests, with the engine
//! serialised (the default on this engine), serialised with upstream's prefix cache of
//! 16 (off by default on the CPU, where it never evicts), and with batching on (the
//! engine as upstream runs it, whose concurrent outputs are wrong): aggregate decode
//! tokens/s and request latency p50/p95, side by side in one run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mistralrs_hlg::server::load::EngineOptions;
use mistralrs_hlg::server::HlgServerOptions;
use mistralrs_hlg_integration_tests::{
    chat, engine_with, model, rss_kib, stream_texts, texts, Server,
};
use serde_json::{json, Value};

async fn server(batching: &str) -> Server {
    server_with(batching, None).await
}

async fn server_with(batching: &str, prefix_cache_n: Option<usize>) -> Server {
    let opts = HlgServerOptions {
        batching: Some(batching.into()),
        ..Default::default()
    };
    let engine = engine_with(EngineOptions {
        prefix_cache_n,
        ..Default::default()
    })
    .await;
    Server::start(
        opts.router_for(engine, model().hints())
            .await
            .expect("router"),
    )
    .await
}

/// One kind of request of the mix.
#[derive(Clone)]
struct Kind {
    name: &'static str,
    path: &'static str,
    body: Value,
    /// Greedy: compared with its solo response.
    greedy: bool,
    /// A bad request: must get a 4xx.
    bad: bool,
}

fn kinds() -> Vec<Kind> {
    let k = |name, path, body, greedy, bad| Kind {
        name,
        path,
        body,
        greedy,
        bad,
    };
    let completion = |extra: Value| {
        let mut v = json!({"model": "default", "prompt": "The three largest cities of Europe are", "max_tokens": 12});
        for (key, x) in extra.as_object().unwrap() {
            v[key] = x.clone();
        }
        v
    };
    vec![
        k(
            "greedy chat",
            "/v1/chat/completions",
            chat(
                "Describe a red bird in one sentence.",
                12,
                json!({"temperature": 0.0}),
            ),
            true,
            false,
        ),
        k(
            "greedy chat, streamed",
            "/v1/chat/completions",
            chat(
                "Describe a blue bird in one sentence.",
                12,
                json!({"temperature": 0.0, "stream": true}),
            ),
            true,
            false,
        ),
        k(
            "greedy completion",
            "/v1/completions",
            completion(json!({"temperature": 0.0})),
            true,
            false,
        ),
        k(
            "greedy completion, streamed",
            "/v1/completions",
            completion(json!({"temperature": 0.0, "stream": true})),
            true,
            false,
        ),
        k(
            "HLG chat",
            "/v1/chat/completions",
            chat(
                "Name a colour.",
                12,
                json!({"temperature": 0.9, "hlg": {"toe_shape": "quadratic"}}),
            ),
            false,
            false,
        ),
        k(
            "plain chat n = 3",
            "/v1/chat/completions",
            chat("Name a fruit.", 8, json!({"temperature": 0.9, "n": 3})),
            false,
            false,
        ),
        k(
            "HLG chat n = 3, streamed",
            "/v1/chat/completions",
            chat(
                "Name an animal.",
                8,
                json!({"temperature": 0.9, "n": 3, "stream": true, "hlg": {}}),
            ),
            false,
            false,
        ),
        k(
            "HLG completion, streamed",
            "/v1/completions",
            completion(json!({"temperature": 1.0, "stream": true, "hlg": {"pivot": "entropy"}})),
            false,
            false,
        ),
        k(
            "bad hlg",
            "/v1/chat/completions",
            chat("Hi", 4, json!({"hlg": {"width": -1}})),
            false,
            true,
        ),
        k(
            "bad n",
            "/v1/completions",
            completion(json!({"n": 100000})),
            false,
            true,
        ),
        k(
            "bad JSON",
            "/v1/chat/completions",
            Value::String("{\"model\": ".into()),
            false,
            true,
        ),
    ]
}

/// Sends `kind`: status and the texts of its choices (streamed or not).
async fn send(
    client: &reqwest::Client,
    base: &str,
    kind: &Kind,
) -> Result<(u16, Vec<String>), String> {
    let body = match &kind.body {
        Value::String(raw) => raw.clone(),
        v => v.to_string(),
    };
    let resp = client
        .post(format!("{base}{}", kind.path))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let text = resp.text().await.map_err(|e| e.to_string())?;
    if status != 200 {
        return Ok((status, vec![]));
    }
    if kind.body.get("stream").and_then(Value::as_bool) == Some(true) {
        if !text.trim_end().ends_with("data: [DONE]") {
            return Err(format!("stream without [DONE]: {text:?}"));
        }
        return Ok((status, stream_texts(&text)));
    }
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
    Ok((status, texts(&v)))
}

#[derive(Default)]
struct Tally {
    sent: AtomicUsize,
    ok: AtomicUsize,
    rejected: AtomicUsize,
    server_errors: AtomicUsize,
    dropped: AtomicUsize,
    greedy_checked: AtomicUsize,
    greedy_wrong: AtomicUsize,
    wrong_status: AtomicUsize,
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "minutes long: scripts/load"]
async fn load_run() {
    let secs: u64 = std::env::var("MISTRALRS_HLG_LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let clients: usize = std::env::var("MISTRALRS_HLG_LOAD_CLIENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32);
    let s = server("auto").await;
    let kinds = Arc::new(kinds());
    let client = reqwest::Client::new();
    // The greedy kinds alone, one after another: the reference.
    let mut solo = vec![None; kinds.len()];
    for (i, k) in kinds.iter().enumerate().filter(|(_, k)| k.greedy) {
        let (status, t) = send(&client, &s.base, k).await.expect("solo request");
        assert_eq!(status, 200, "{}", k.name);
        solo[i] = Some(t);
    }
    let solo = Arc::new(solo);
    let rss_start = rss_kib();
    let tally = Arc::new(Tally::default());
    let deadline = Instant::now() + Duration::from_secs(secs);
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (kinds, solo, tally, base, client) = (
                kinds.clone(),
                solo.clone(),
                tally.clone(),
                s.base.clone(),
                client.clone(),
            );
            tokio::spawn(async move {
                let mut j = c;
                while Instant::now() < deadline {
                    let i = j % kinds.len();
                    j += 7; // coprime with the number of kinds: every client walks every kind
                    let k = &kinds[i];
                    tally.sent.fetch_add(1, Ordering::Relaxed);
                    match send(&client, &base, k).await {
                        Err(e) => {
                            tally.dropped.fetch_add(1, Ordering::Relaxed);
                            eprintln!("client {c}, {}: {e}", k.name);
                        }
                        Ok((status, got)) => {
                            if status >= 500 {
                                tally.server_errors.fetch_add(1, Ordering::Relaxed);
                                eprintln!("client {c}, {}: {status}", k.name);
                            } else if k.bad != (400..500).contains(&status)
                                || !k.bad && status != 200
                            {
                                tally.wrong_status.fetch_add(1, Ordering::Relaxed);
                                eprintln!("client {c}, {}: unexpected {status}", k.name);
                            } else if k.bad {
                                tally.rejected.fetch_add(1, Ordering::Relaxed);
                            } else {
                                tally.ok.fetch_add(1, Ordering::Relaxed);
                                let want =
                                    k.body.get("n").and_then(Value::as_u64).unwrap_or(1) as usize;
                                if got.len() != want || got.iter().any(String::is_empty) {
                                    tally.wrong_status.fetch_add(1, Ordering::Relaxed);
                                    eprintln!(
                                        "client {c}, {}: {} choice(s), want {want}: {got:?}",
                                        k.name,
                                        got.len()
                                    );
                                }
                            }
                            if let (Some(want), true) = (&solo[i], status == 200) {
                                tally.greedy_checked.fetch_add(1, Ordering::Relaxed);
                                if &got != want {
                                    tally.greedy_wrong.fetch_add(1, Ordering::Relaxed);
                                    eprintln!("client {c}, {}: {got:?}, alone {want:?}", k.name);
                                }
                            }
                        }
                    }
                }
            })
        })
        .collect();
    // Resident memory through the run: the allocator and the engine's caches grow while
    // the run warms up; what must not happen is growth in its second half (a leak).
    let sampler = tokio::spawn(async move {
        let mut samples = vec![];
        while Instant::now() < deadline {
            samples.push((t0.elapsed().as_secs(), rss_kib()));
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        samples
    });
    for t in tasks {
        t.await.expect("client task");
    }
    let samples = sampler.await.expect("sampler");
    let wall = t0.elapsed().as_secs_f64();
    // A last request after the load: the server still serves.
    let (status, _) = send(&client, &s.base, &kinds[0])
        .await
        .expect("request after the load");
    let rss_end = rss_kib();
    s.stop().await;
    let half = samples
        .iter()
        .filter(|(t, _)| *t <= secs / 2)
        .map(|(_, r)| *r)
        .max()
        .unwrap_or(rss_start);
    println!(
        "RSS (s, MiB): {:?}",
        samples
            .iter()
            .map(|(t, r)| (*t, r / 1024))
            .collect::<Vec<_>>()
    );
    let g = |a: &AtomicUsize| a.load(Ordering::Relaxed);
    println!(
        "load: {clients} clients, {wall:.0} s: {} requests ({} ok, {} bad rejected), {} 5xx, {} dropped, {} wrong status or shape, greedy {}/{} identical to solo, RSS {} -> {} MiB",
        g(&tally.sent),
        g(&tally.ok),
        g(&tally.rejected),
        g(&tally.server_errors),
        g(&tally.dropped),
        g(&tally.wrong_status),
        g(&tally.greedy_checked) - g(&tally.greedy_wrong),
        g(&tally.greedy_checked),
        rss_start / 1024,
        rss_end / 1024
    );
    assert_eq!(status, 200);
    assert_eq!(g(&tally.server_errors), 0, "5xx responses");
    assert_eq!(g(&tally.dropped), 0, "dropped connections");
    assert_eq!(g(&tally.wrong_status), 0, "wrong statuses or shapes");
    assert!(
        g(&tally.greedy_checked) > 0 && g(&tally.rejected) > 0,
        "the mix ran"
    );
    assert_eq!(
        g(&tally.greedy_wrong),
        0,
        "greedy responses that differ from their solo runs"
    );
    assert!(rss_end <= half + 256 * 1024, "resident memory grew in the second half of the run: {} MiB at most in the first, {} MiB at the end", half / 1024, rss_end / 1024);
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "minutes long: scripts/load --throughput"]
async fn throughput() {
    let per_level: usize = std::env::var("MISTRALRS_HLG_LOAD_REQUESTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    const PROMPTS: [&str; 4] = [
        "Describe a red bird in one sentence.",
        "Describe a blue bird in one sentence.",
        "Describe a green bird in one sentence.",
        "Describe a yellow bird in one sentence.",
    ];
    println!("| batching | prefix cache | clients | requests | completion tokens/s (aggregate) | latency p50 | latency p95 |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    // Interleaved: each level runs every mode back to back, so the machine's drift hits all.
    for clients in [1usize, 4, 8] {
        for (batching, prefix) in [("serial", 0), ("serial", 16), ("on", 0)] {
            let s = server_with(batching, Some(prefix)).await;
            let client = reqwest::Client::new();
            // Warm the prefix cache and the allocator the same way for both modes.
            for p in PROMPTS {
                s.post(
                    &client,
                    "/v1/chat/completions",
                    &chat(p, 4, json!({"temperature": 0.0})),
                )
                .await;
            }
            let next = Arc::new(AtomicUsize::new(0));
            let t0 = Instant::now();
            let tasks: Vec<_> = (0..clients)
                .map(|_| {
                    let (next, base, client) = (next.clone(), s.base.clone(), client.clone());
                    tokio::spawn(async move {
                        let s = Server::at(base);
                        let mut out = vec![];
                        loop {
                            let i = next.fetch_add(1, Ordering::SeqCst);
                            if i >= per_level {
                                break;
                            }
                            let t = Instant::now();
                            let (status, text) = s
                                .post(
                                    &client,
                                    "/v1/chat/completions",
                                    &chat(PROMPTS[i % 4], 32, json!({"temperature": 0.0})),
                                )
                                .await;
                            assert_eq!(status, 200, "{text}");
                            let v: Value = serde_json::from_str(&text).unwrap();
                            out.push((
                                t.elapsed().as_secs_f64(),
                                v["usage"]["completion_tokens"].as_u64().unwrap_or(0),
                            ));
                        }
                        out
                    })
                })
                .collect();
            let mut lat = vec![];
            let mut tokens = 0;
            for t in tasks {
                for (l, n) in t.await.unwrap() {
                    lat.push(l);
                    tokens += n;
                }
            }
            let wall = t0.elapsed().as_secs_f64();
            s.stop().await;
            lat.sort_by(f64::total_cmp);
            println!(
                "| {batching} | {prefix} | {clients} | {} | {:.1} | {:.1} s | {:.1} s |",
                lat.len(),
                tokens as f64 / wall,
                percentile(&lat, 0.5),
                percentile(&lat, 0.95)
            );
        }
    }
}
