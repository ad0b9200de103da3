//! Helpers for the end-to-end tests: a fresh engine on the embedded model, the plugin's
//! router and upstream's, and requests through a router without a socket.

pub mod tiny;

use std::sync::OnceLock;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use mistralrs_hlg::server::{self, load::ModelSource};
use mistralrs_hlg::HlgConfig;
use mistralrs_server_core::mistralrs_server_router_builder::MistralRsServerRouterBuilder;
use mistralrs_server_core::types::SharedMistralRsState;
use serde_json::Value;
use tower::ServiceExt;

/// The embedded model, fetched once per test process.
pub fn model() -> ModelSource {
    static PATH: OnceLock<String> = OnceLock::new();
    let p = PATH.get_or_init(|| {
        mistralrs_hlg::model::ensure_default_model()
            .expect("fetching the embedded model")
            .to_string_lossy()
            .into_owned()
    });
    ModelSource::resolve(p, None).expect("model path")
}

/// A fresh engine (its sampling RNG starts from the same seed each time).
pub async fn engine() -> SharedMistralRsState {
    server::load::load(&model())
        .await
        .expect("loading the model")
}

/// [`engine`] with the engine's options (on the CPU).
pub async fn engine_with(options: server::load::EngineOptions) -> SharedMistralRsState {
    let options = server::load::EngineOptions {
        cpu: true,
        ..options
    };
    server::load::load_with(&model(), &options)
        .await
        .expect("loading the model")
}

/// The plugin's router over `state`, with these server defaults.
pub async fn plugin(state: SharedMistralRsState, defaults: HlgConfig) -> Router {
    server::RouterBuilder::new(state)
        .defaults(defaults)
        .build()
        .await
        .expect("router")
}

/// The plugin's router with built-in defaults on a fresh engine: the fixture of every
/// comparison that must start from the engine's first draw.
pub async fn fresh_plugin() -> Router {
    fresh_plugin_with(HlgConfig::default()).await
}

/// [`fresh_plugin`] with the server's HLG defaults.
pub async fn fresh_plugin_with(defaults: HlgConfig) -> Router {
    plugin(engine().await, defaults).await
}

/// Upstream's own router over `state`: the engine without the plugin.
pub async fn upstream(state: SharedMistralRsState) -> Router {
    MistralRsServerRouterBuilder::new()
        .with_mistralrs(state)
        .build()
        .await
        .expect("upstream router")
}

/// A request through the router, no socket: status and body text.
pub async fn call(
    router: &Router,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (StatusCode, String) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    let req = match body {
        Some(b) => req.body(Body::from(b.to_string())),
        None => req.body(Body::empty()),
    }
    .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// POST JSON, expect 200, return the JSON body.
pub async fn post_ok(router: &Router, path: &str, body: &Value) -> Value {
    let (status, text) = call(router, "POST", path, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{path}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// The first token's `top_logprobs` of a response's first choice, as (token as the host
/// names it, an id or a text, in JSON; log-prob).
pub fn first_top_logprobs(resp: &Value) -> Vec<(String, f64)> {
    resp["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        .as_array()
        .unwrap_or_else(|| panic!("no top_logprobs in {resp}"))
        .iter()
        .map(|t| {
            let logprob = t["logprob"].as_f64().unwrap_or_else(|| panic!("{resp}"));
            (t["token"].to_string(), logprob)
        })
        .collect()
}

/// The text of every choice of a chat or text completion.
pub fn texts(resp: &Value) -> Vec<String> {
    resp["choices"]
        .as_array()
        .expect("choices")
        .iter()
        .map(|c| {
            c["message"]["content"]
                .as_str()
                .or(c["text"].as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// A chat request for `prompt` with extra fields merged in.
pub fn chat(prompt: &str, max_tokens: u32, extra: Value) -> Value {
    let mut v = serde_json::json!({
        "model": "default",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
    });
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in e {
            o.insert(k.clone(), x.clone());
        }
    }
    v
}

/// The fixed prompt set of the generation tests.
pub const PROMPTS: [&str; 3] = [
    "Write one sentence about the sea.",
    "Name three fruits.",
    "Describe a market in a city that does not exist.",
];

/// Runs the prompt set through `router`, one request after another, with `extra` fields.
pub async fn run_prompts(router: &Router, max_tokens: u32, extra: &Value) -> Vec<String> {
    let mut out = vec![];
    for p in PROMPTS {
        let resp = post_ok(
            router,
            "/v1/chat/completions",
            &chat(p, max_tokens, extra.clone()),
        )
        .await;
        out.extend(texts(&resp));
    }
    out
}

/// The prompt of the `n > 1` tests (the one the bug was reported with).
pub const N_PROMPT: &str = "Describe a market in a city that does not exist.";

/// A second engine on the embedded model through mistralrs's Rust API, to judge texts.
pub async fn judge_model() -> mistralrs::Model {
    let gguf = mistralrs_hlg::model::ensure_default_model().expect("fetching the embedded model");
    let dir = gguf.parent().unwrap().to_string_lossy().into_owned();
    let file = gguf.file_name().unwrap().to_string_lossy().into_owned();
    mistralrs::GgufModelBuilder::new(dir, vec![file])
        .with_token_source(mistralrs::TokenSource::None)
        .with_force_cpu()
        .build()
        .await
        .expect("loading the judge")
}

/// Forces `tokens` as the continuation of a chat turn and records, at each step, the
/// log-probability the model gives the forced token.
struct Forced {
    tokens: Vec<u32>,
    start: std::sync::Mutex<Option<usize>>,
    logprobs: std::sync::Mutex<Vec<f64>>,
}

impl mistralrs_core::CustomLogitsProcessor for Forced {
    fn apply(
        &self,
        logits: &candle_core::Tensor,
        context: &[u32],
    ) -> candle_core::Result<candle_core::Tensor> {
        let start = *self.start.lock().unwrap().get_or_insert(context.len());
        let step = context.len() - start;
        let x: Vec<f32> = logits.to_vec1()?;
        let Some(&want) = self.tokens.get(step) else {
            return Ok(logits.clone());
        };
        let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let lse = m + x.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln();
        self.logprobs
            .lock()
            .unwrap()
            .push(x[want as usize] as f64 - lse);
        let mut forced = vec![f32::NEG_INFINITY; x.len()];
        forced[want as usize] = 0.0;
        candle_core::Tensor::new(forced, logits.device())
    }
}

/// The judge's mean log-probability per token of `texts` as answers to `prompt`: each
/// text is tokenized and forced through a single-sequence request on `judge`, so the
/// score is the model's own, computed without any batching.
pub async fn mean_logprob(judge: &mistralrs::Model, prompt: &str, texts: &[String]) -> f64 {
    let (mut sum, mut count) = (0.0, 0usize);
    for t in texts {
        let tokens = judge
            .tokenize(either::Either::Right(t.clone()), None, false, false, None)
            .await
            .expect("tokenize");
        if tokens.is_empty() {
            continue;
        }
        let forced = std::sync::Arc::new(Forced {
            tokens: tokens.clone(),
            start: Default::default(),
            logprobs: Default::default(),
        });
        let req = mistralrs::RequestBuilder::new()
            .add_message(mistralrs::TextMessageRole::User, prompt)
            .set_sampler_max_len(tokens.len())
            .add_logits_processor(forced.clone());
        judge.send_chat_request(req).await.expect("forced decoding");
        let lp = forced.logprobs.lock().unwrap();
        sum += lp.iter().sum::<f64>();
        count += lp.len();
    }
    sum / count.max(1) as f64
}

/// A server on a free port of 127.0.0.1, serving `router` until [`Server::stop`] (or
/// drop) through its own shutdown handle.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Server {
    /// Binds 127.0.0.1:0 and serves `router` in a task.
    pub async fn start(router: Router) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding 127.0.0.1:0");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
                .expect("serving");
        });
        Server {
            base,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// A handle on a server started elsewhere (does not stop it).
    pub fn at(base: String) -> Server {
        Server {
            base,
            stop: None,
            task: None,
        }
    }

    /// Stops accepting, lets open requests finish, and waits for the server task.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }

    /// POSTs JSON: status and body text.
    pub async fn post(&self, client: &reqwest::Client, path: &str, body: &Value) -> (u16, String) {
        let resp = client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let status = resp.status().as_u16();
        (
            status,
            resp.text()
                .await
                .unwrap_or_else(|e| panic!("POST {path}: reading the body: {e}")),
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// The text of a server-sent-event stream of chat or completion chunks, per choice index.
pub fn stream_texts(body: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for data in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        for c in v["choices"].as_array().into_iter().flatten() {
            let i = c["index"].as_u64().unwrap_or(0) as usize;
            if out.len() <= i {
                out.resize(i + 1, String::new());
            }
            out[i].push_str(
                c["delta"]["content"]
                    .as_str()
                    .or(c["text"].as_str())
                    .unwrap_or_default(),
            );
        }
    }
    out
}

/// Resident memory of this process in KiB (`VmRSS`), 0 where /proc is missing.
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Four prompts of the same token count (checked by [`mismatches`]), as in the report of
/// the concurrency bug.
pub const BIRDS: [&str; 4] = [
    "Describe a red bird in one sentence.",
    "Describe a blue bird in one sentence.",
    "Describe a green bird in one sentence.",
    "Describe a yellow bird in one sentence.",
];

/// One greedy request for `BIRDS[i]`, chat or streamed chat: (text, prompt tokens).
pub async fn bird(s: &Server, client: &reqwest::Client, i: usize, stream: bool) -> (String, u64) {
    let r = try_bird(s, client, i, stream).await;
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// [`bird`], with a failed request (a status other than 200, or a stream that reports an
/// error) as its error text.
pub async fn try_bird(
    s: &Server,
    client: &reqwest::Client,
    i: usize,
    stream: bool,
) -> Result<(String, u64), String> {
    let body = chat(
        BIRDS[i],
        20,
        serde_json::json!({"temperature": 0.0, "stream": stream}),
    );
    let (status, text) = s.post(client, "/v1/chat/completions", &body).await;
    if status != 200 || (stream && text.contains("\"error\"")) {
        return Err(format!("status {status}: {text}"));
    }
    Ok(if stream {
        (stream_texts(&text).concat(), 0)
    } else {
        let v: Value = serde_json::from_str(&text).unwrap();
        (
            texts(&v).concat(),
            v["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
        )
    })
}

/// Each bird alone, then `rounds` rounds of all four at once (odd rounds streamed), on
/// the server at `s`: the number of concurrent responses that differ from their solo
/// run, of `4 · rounds` (a failed request counts; [`mismatches_and_failures`] tells them
/// apart).
pub async fn mismatches(s: &Server, rounds: usize) -> usize {
    let (wrong, failed) = mismatches_and_failures(s, rounds).await;
    wrong + failed
}

/// [`mismatches`] as (responses with another text, failed requests).
pub async fn mismatches_and_failures(s: &Server, rounds: usize) -> (usize, usize) {
    let client = reqwest::Client::new();
    let mut solo = vec![];
    for i in 0..BIRDS.len() {
        solo.push(bird(s, &client, i, false).await);
    }
    let lens: Vec<u64> = solo.iter().map(|(_, n)| *n).collect();
    assert!(
        lens.iter().all(|&n| n == lens[0] && n > 0),
        "the prompts must have one token count to line up: {lens:?}"
    );
    for (i, (t, _)) in solo.iter().enumerate() {
        assert!(
            t.contains(["red", "blue", "green", "yellow"][i]),
            "solo run {i}: {t:?}"
        );
    }
    let (mut wrong, mut failed) = (0, 0);
    for round in 0..rounds {
        let tasks: Vec<_> = (0..BIRDS.len())
            .map(|i| {
                let (base, client) = (s.base.clone(), client.clone());
                tokio::spawn(async move {
                    let s = Server::at(base);
                    try_bird(&s, &client, i, round % 2 == 1).await
                })
            })
            .collect();
        for (i, t) in tasks.into_iter().enumerate() {
            match t.await.unwrap() {
                Ok((got, _)) if got == solo[i].0 => {}
                Ok((got, _)) => {
                    wrong += 1;
                    println!(
                        "round {round}, bird {i}: alone {:?}, together {got:?}",
                        solo[i].0
                    );
                }
                Err(e) => {
                    failed += 1;
                    println!("round {round}, bird {i}: failed: {}", head(&e));
                }
            }
        }
    }
    (wrong, failed)
}

fn head(s: &str) -> String {
    s.chars().take(200).collect()
}

/// Whether this build's engine carries the core patch whose file name contains `name`
/// (`server::load::CORE_PATCHES`, the series compiled in by the patched builds).
pub fn core_patched(name: &str) -> bool {
    mistralrs_hlg::server::load::CORE_PATCHES.is_some_and(|s| s.contains(name))
}

/// The host whose output a snapshot pins: `None` for the registry's mistral.rs 0.8.1 (the
/// default build), `0.8.1-patched` on that engine with `patches/mistralrs-core-0.8.1`
/// (`scripts/test-patched-engine`: 0005 and 0007 sum the CPU attention in other orders,
/// so the logits move by rounding and text parts at near-ties), `0.9.2` under
/// `--cfg mistralrs_host="0.9"` (`scripts/test-upstream 0.9.2`), and `0.9.2-patched` where
/// that engine carries `patches/mistralrs-core-0.9.2/0003` (its SentencePiece vocabularies,
/// the tiny models' among them, tokenize otherwise: other prompt tokens, other text).
pub fn host_snapshot_suffix() -> Option<&'static str> {
    if !cfg!(mistralrs_host = "0.9") {
        return mistralrs_hlg::server::load::CORE_PATCHES.map(|_| "0.8.1-patched");
    }
    Some(if core_patched("sentencepiece-vocabularies-bpe-by-score") {
        "0.9.2-patched"
    } else {
        "0.9.2"
    })
}

/// Runs `f` (an insta assertion of the engine's own output) with the host version as the
/// snapshot's suffix, so each host's snapshot sits beside the others (`name@0.9.2.snap`)
/// and an upstream bump shows as a reviewed file, not a changed one.
///
/// mistral.rs 0.9.2 and its candle choose CPU kernels at run time (AVX512 attention and
/// AVX512-VNNI quantized matmuls where the CPU has them), whose sums round differently
/// from the AVX2 ones; greedy output then parts at near-ties. Its snapshots are recorded
/// on the AVX2 tier, which every x86_64 machine here has and upstream's own switch
/// `MISTRALRS_FORCE_AVX2=1` selects (scripts/test-upstream sets it). On any other kernels
/// (an AVX512 CPU without the switch, or not x86_64) this panics rather than report a
/// difference of the machine as one of the host.
pub fn on_host<R>(f: impl FnOnce() -> R) -> R {
    let mut settings = insta::Settings::clone_current();
    if let Some(suffix) = host_snapshot_suffix() {
        assert!(
            !cfg!(mistralrs_host = "0.9") || snapshot_tier_pinned(),
            "the {suffix} snapshots are recorded on x86_64's AVX2 kernels, which this CPU does \
             not run by default: run with MISTRALRS_FORCE_AVX2=1 on x86_64 \
             (scripts/test-upstream {suffix} sets it)"
        );
        settings.set_snapshot_suffix(suffix);
    }
    settings.bind(f)
}

/// Whether the engine runs the kernels the 0.9 snapshots were recorded on (see `on_host`):
/// x86_64 on the AVX2 tier, forced or for want of AVX512 and AVX-VNNI (candle's other two
/// quantized tiers).
fn snapshot_tier_pinned() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::env::var("MISTRALRS_FORCE_AVX2").as_deref() == Ok("1")
            || !(std::is_x86_feature_detected!("avx512f")
                || std::is_x86_feature_detected!("avxvnni"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// What the engine under test does with the rows of a decode batch, on the CPU with the
/// embedded (Q4_1 GGUF) model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchedRows {
    /// Every row gets the attention of the batch's last row: upstream's mistral.rs 0.8.1.
    Wrong,
    /// Each row as alone: the patched engines, 0.8.1 (`scripts/test-patched-engine`) and
    /// 0.9.2 (`scripts/test-upstream 0.9.2 --patched`); both set
    /// `MISTRALRS_HLG_PATCHED_ENGINE`.
    Right,
    /// The step fails ("input tensor is not contiguous" in candle's quantized matmul):
    /// mistral.rs 0.9.2, whose CPU attention keeps a row apart but whose GGUF forward
    /// hands the quantized matmul a strided view when the batch has several rows
    /// (docs/NOTES.md).
    Fail,
}

/// The behaviour of the engine these tests run against.
pub fn batched_rows() -> BatchedRows {
    if std::env::var_os("MISTRALRS_HLG_PATCHED_ENGINE").is_some() {
        BatchedRows::Right
    } else if cfg!(mistralrs_host = "0.9") {
        BatchedRows::Fail
    } else {
        BatchedRows::Wrong
    }
}
