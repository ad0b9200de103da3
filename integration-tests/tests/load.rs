//! Load on the real engine, over real sockets (ignored: minutes long; `scripts/load`).
//!
//! `load_run`: a fresh server as `mistralrs-hlg serve` runs it (`--hlg-batching auto`),
//! 32 clients for `MISTRALRS_HLG_LOAD_SECS` (600 by default), a mix of HLG on and off,
//! chat, completions and responses, streamed and not, `n = 1` and `n = 3`, and bad requests in
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

/// Every kind of the mix, or those whose name contains one of the comma-separated
/// `MISTRALRS_HLG_LOAD_KINDS` (`scripts/load --kinds`: narrowing a failure down).
fn kinds() -> Vec<Kind> {
    let all = [greedy_kinds(), sampled_kinds(), bad_kinds()].concat();
    let Ok(only) = std::env::var("MISTRALRS_HLG_LOAD_KINDS") else {
        return all;
    };
    let kept: Vec<Kind> = all
        .into_iter()
        .filter(|k| only.split(',').any(|o| k.name.contains(o.trim())))
        .collect();
    assert!(
        !kept.is_empty(),
        "MISTRALRS_HLG_LOAD_KINDS={only} names no kind"
    );
    kept
}

fn k(name: &'static str, path: &'static str, body: Value, greedy: bool, bad: bool) -> Kind {
    Kind {
        name,
        path,
        body,
        greedy,
        bad,
    }
}

/// A completion of one prompt with `extra` fields.
fn completion(extra: Value) -> Value {
    let mut v = json!({"model": "default", "prompt": "The three largest cities of Europe are", "max_tokens": 12});
    for (key, x) in extra.as_object().unwrap() {
        v[key] = x.clone();
    }
    v
}

/// Greedy requests, each compared with its solo response.
fn greedy_kinds() -> Vec<Kind> {
    vec![
        k(
            "greedy responses",
            "/v1/responses",
            json!({"model": "default", "input": "Describe a grey bird in one sentence.", "max_output_tokens": 12, "temperature": 0.0}),
            true,
            false,
        ),
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
    ]
}

/// Sampled requests, HLG or not, `n = 3` among them.
fn sampled_kinds() -> Vec<Kind> {
    vec![
        k(
            "HLG responses",
            "/v1/responses",
            json!({"model": "default", "input": "Name a bird.", "max_output_tokens": 12, "temperature": 0.9, "hlg": {"toe": 2}}),
            false,
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
    ]
}

/// Bad requests, each a 4xx.
fn bad_kinds() -> Vec<Kind> {
    vec![
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
    if kind.path == "/v1/responses" {
        return match v["output_text"].as_str() {
            Some(t) => Ok((status, vec![t.to_string()])),
            None => Err(format!("a response without output_text: {text}")),
        };
    }
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

/// A number from the environment, or `default`.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The greedy kinds alone, one after another: the reference their loaded runs must equal.
async fn solo_runs(
    client: &reqwest::Client,
    base: &str,
    kinds: &[Kind],
) -> Vec<Option<Vec<String>>> {
    let mut solo = vec![None; kinds.len()];
    for (i, k) in kinds.iter().enumerate().filter(|(_, k)| k.greedy) {
        let (status, t) = send(client, base, k).await.expect("solo request");
        assert_eq!(status, 200, "{}", k.name);
        solo[i] = Some(t);
    }
    solo
}

/// One answer counted: its status and shape against the kind's, greedy ones against
/// their solo run.
fn record(
    tally: &Tally,
    c: usize,
    k: &Kind,
    (status, got): (u16, Vec<String>),
    solo: Option<&Vec<String>>,
) {
    if status >= 500 {
        tally.server_errors.fetch_add(1, Ordering::Relaxed);
        eprintln!("client {c}, {}: {status}", k.name);
    } else if k.bad != (400..500).contains(&status) || !k.bad && status != 200 {
        tally.wrong_status.fetch_add(1, Ordering::Relaxed);
        eprintln!("client {c}, {}: unexpected {status}", k.name);
    } else if k.bad {
        tally.rejected.fetch_add(1, Ordering::Relaxed);
    } else {
        tally.ok.fetch_add(1, Ordering::Relaxed);
        let want = k.body.get("n").and_then(Value::as_u64).unwrap_or(1) as usize;
        if got.len() != want || got.iter().any(String::is_empty) {
            tally.wrong_status.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "client {c}, {}: {} choice(s), want {want}: {got:?}",
                k.name,
                got.len()
            );
        }
    }
    if let (Some(want), true) = (solo, status == 200) {
        tally.greedy_checked.fetch_add(1, Ordering::Relaxed);
        if &got != want {
            tally.greedy_wrong.fetch_add(1, Ordering::Relaxed);
            eprintln!("client {c}, {}: {got:?}, alone {want:?}", k.name);
        }
    }
}

/// The shared state of the clients of a run.
struct Run {
    kinds: Vec<Kind>,
    solo: Vec<Option<Vec<String>>>,
    tally: Tally,
    base: String,
    client: reqwest::Client,
    deadline: Instant,
}

/// Client `c`: every kind in turn until the deadline, each answer recorded.
async fn one_client(run: Arc<Run>, c: usize) {
    let mut j = c;
    while Instant::now() < run.deadline {
        let i = j % run.kinds.len();
        j += 7; // coprime with the number of kinds: every client walks every kind
        let k = &run.kinds[i];
        run.tally.sent.fetch_add(1, Ordering::Relaxed);
        match send(&run.client, &run.base, k).await {
            Err(e) => {
                run.tally.dropped.fetch_add(1, Ordering::Relaxed);
                eprintln!("client {c}, {}: {e}", k.name);
            }
            Ok(answer) => record(&run.tally, c, k, answer, run.solo[i].as_ref()),
        }
    }
}

/// Resident memory every 10 s until the deadline: (seconds since `t0`, KiB).
fn sample_rss(deadline: Instant, t0: Instant) -> tokio::task::JoinHandle<Vec<(u64, u64)>> {
    tokio::spawn(async move {
        let mut samples = vec![];
        while Instant::now() < deadline {
            samples.push((t0.elapsed().as_secs(), rss_kib()));
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        samples
    })
}

/// The load run's server, with the engine's batching and prefix cache as the control
/// runs set them (`scripts/load --batching serial`, `--prefix-cache-n 0`: which of the
/// two a symptom comes from); by default as `serve` picks them.
async fn control_server() -> Server {
    let batching: String = env_or("MISTRALRS_HLG_LOAD_BATCHING", "auto".to_string());
    let cache: Option<usize> = std::env::var("MISTRALRS_HLG_LOAD_PREFIX_CACHE_N")
        .ok()
        .map(|v| {
            v.parse()
                .expect("MISTRALRS_HLG_LOAD_PREFIX_CACHE_N is a count")
        });
    println!("load: --hlg-batching {batching}, --prefix-cache-n {cache:?} (None: the default)");
    server_with(&batching, cache).await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "minutes long: scripts/load"]
async fn load_run() {
    let secs: u64 = env_or("MISTRALRS_HLG_LOAD_SECS", 600);
    let clients: usize = env_or("MISTRALRS_HLG_LOAD_CLIENTS", 32);
    let s = control_server().await;
    let client = reqwest::Client::new();
    let kinds = kinds();
    // Clients step through the kinds 7 at a time: each walks every kind when 7 is prime
    // to their number.
    assert_ne!(kinds.len() % 7, 0);
    let solo = solo_runs(&client, &s.base, &kinds).await;
    let rss_start = rss_kib();
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(secs);
    let run = Arc::new(Run {
        kinds,
        solo,
        tally: Tally::default(),
        base: s.base.clone(),
        client,
        deadline,
    });
    let tasks: Vec<_> = (0..clients)
        .map(|c| tokio::spawn(one_client(run.clone(), c)))
        .collect();
    // Resident memory through the run: the allocator and the engine's caches grow while
    // the run warms up; what must not happen is growth in its second half (a leak).
    let sampler = sample_rss(deadline, t0);
    for t in tasks {
        t.await.expect("client task");
    }
    let samples = sampler.await.expect("sampler");
    let wall = t0.elapsed().as_secs_f64();
    // A last request after the load: the server still serves.
    let (status, _) = send(&run.client, &s.base, &run.kinds[0])
        .await
        .expect("request after the load");
    assert_eq!(status, 200);
    let rss_end = rss_kib();
    s.stop().await;
    println!(
        "RSS (s, MiB): {:?}",
        samples
            .iter()
            .map(|(t, r)| (*t, r / 1024))
            .collect::<Vec<_>>()
    );
    println!(
        "load: {clients} clients, {wall:.0} s: {}, RSS {} -> {} MiB",
        run.tally,
        rss_start / 1024,
        rss_end / 1024
    );
    run.tally.assert_clean();
    let half = samples
        .iter()
        .filter(|(t, _)| *t <= secs / 2)
        .map(|(_, r)| *r)
        .max()
        .unwrap_or(rss_start);
    assert!(rss_end <= half + 256 * 1024, "resident memory grew in the second half of the run: {} MiB at most in the first, {} MiB at the end", half / 1024, rss_end / 1024);
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        write!(
            f,
            "{} requests ({} ok, {} bad rejected), {} 5xx, {} dropped, {} wrong status or shape, greedy {}/{} identical to solo",
            g(&self.sent),
            g(&self.ok),
            g(&self.rejected),
            g(&self.server_errors),
            g(&self.dropped),
            g(&self.wrong_status),
            g(&self.greedy_checked) - g(&self.greedy_wrong),
            g(&self.greedy_checked),
        )
    }
}

impl Tally {
    /// No 5xx, no dropped connection, no wrong status or shape, every greedy answer as
    /// its solo run, and the mix ran.
    fn assert_clean(&self) {
        let g = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        assert_eq!(g(&self.server_errors), 0, "5xx responses");
        assert_eq!(g(&self.dropped), 0, "dropped connections");
        assert_eq!(g(&self.wrong_status), 0, "wrong statuses or shapes");
        // A run narrowed to some kinds (`--kinds`) may hold no bad or no greedy ones.
        if std::env::var_os("MISTRALRS_HLG_LOAD_KINDS").is_none() {
            assert!(
                g(&self.greedy_checked) > 0 && g(&self.rejected) > 0,
                "the mix ran"
            );
        }
        assert_eq!(
            g(&self.greedy_wrong),
            0,
            "greedy responses that differ from their solo runs"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "minutes long: scripts/load --throughput"]
async fn throughput() {
    let per_level: usize = env_or("MISTRALRS_HLG_LOAD_REQUESTS", 16);
    println!("| batching | prefix cache | clients | requests | completion tokens/s (aggregate) | latency p50 | latency p95 |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    // Interleaved: each level runs every mode back to back, so the machine's drift hits all.
    for clients in [1usize, 4, 8] {
        for (batching, prefix) in [("serial", 0), ("serial", 16), ("on", 0)] {
            let s = server_with(batching, Some(prefix)).await;
            let client = reqwest::Client::new();
            // Warm the prefix cache and the allocator the same way for both modes.
            for p in THROUGHPUT_PROMPTS {
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
                    tokio::spawn(greedy_client(
                        Server::at(s.base.clone()),
                        client.clone(),
                        next.clone(),
                        per_level,
                    ))
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

/// The value at quantile `p` of `sorted` (nearest rank).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

const THROUGHPUT_PROMPTS: [&str; 4] = [
    "Describe a red bird in one sentence.",
    "Describe a blue bird in one sentence.",
    "Describe a green bird in one sentence.",
    "Describe a yellow bird in one sentence.",
];

/// Greedy 32-token chats until `next` reaches `total`: (latency s, completion tokens) each.
async fn greedy_client(
    s: Server,
    client: reqwest::Client,
    next: Arc<AtomicUsize>,
    total: usize,
) -> Vec<(f64, u64)> {
    let mut out = vec![];
    loop {
        let i = next.fetch_add(1, Ordering::SeqCst);
        if i >= total {
            return out;
        }
        let t = Instant::now();
        let body = chat(THROUGHPUT_PROMPTS[i % 4], 32, json!({"temperature": 0.0}));
        let (status, text) = s.post(&client, "/v1/chat/completions", &body).await;
        assert_eq!(status, 200, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        out.push((
            t.elapsed().as_secs_f64(),
            v["usage"]["completion_tokens"].as_u64().unwrap_or(0),
        ));
    }
}
