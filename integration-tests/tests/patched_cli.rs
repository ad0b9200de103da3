//! Upstream's own `mistralrs serve` with the series of `patches/mistralrs-cli-<version>`
//! against the same crate unpatched, on the embedded model, over real sockets (0.8.1
//! from the registry; 0.9.2 from the shared sources with `scripts/test-cli 0.9.2`).
//!
//! Needs the two binaries of `patches/apply.sh` and `patches/apply.sh --upstream` in
//! `MISTRALRS_HLG_PATCHED_CLI` and `MISTRALRS_HLG_UPSTREAM_CLI`: `scripts/test-cli` builds
//! them and runs these tests (ignored otherwise: the binaries are a separate build of
//! mistral.rs, ~40 min the first time on 2 cores, which does not fit in CI beside ours).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mistralrs_hlg_integration_tests::{chat, texts, Server, PROMPTS};
use serde_json::{json, Value};

/// A `mistralrs` server process (not the in-process [`Server`]) on a free port of 127.0.0.1, stopped (by its own handle)
/// when dropped.
struct CliServer {
    child: Child,
    base: String,
    log: PathBuf,
}

fn binary(var: &str) -> PathBuf {
    let p =
        std::env::var_os(var).unwrap_or_else(|| panic!("{var} is not set: run scripts/test-cli"));
    let p = PathBuf::from(p);
    assert!(p.is_file(), "{var}={} is not a file", p.display());
    p
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The embedded model as the CLI names it: its directory and file.
fn model() -> (String, String) {
    let gguf = mistralrs_hlg::model::ensure_default_model().expect("fetching the embedded model");
    (
        gguf.parent().unwrap().to_string_lossy().into_owned(),
        gguf.file_name().unwrap().to_string_lossy().into_owned(),
    )
}

impl CliServer {
    /// `bin serve` on the embedded model with `extra` server options.
    async fn serve(bin: &Path, extra: &[&str]) -> CliServer {
        let port = free_port().to_string();
        let args = serve_args(&port, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        CliServer::spawn(bin, &args, port.clone()).await
    }

    /// `bin serve` on the embedded model linked alone into `dir` (beside whatever else
    /// `dir` holds, such as a `generation_config.json`).
    async fn serve_in(bin: &Path, dir: &Path) -> CliServer {
        let (models, file) = model();
        let link = dir.join(&file);
        if !link.exists() {
            std::os::unix::fs::symlink(Path::new(&models).join(&file), &link).unwrap();
        }
        let port = free_port().to_string();
        let mut args = serve_args(&port, &[]);
        let at = args.iter().position(|a| a == "-m").unwrap() + 1;
        args[at] = dir.to_string_lossy().into_owned();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        CliServer::spawn(bin, &args, port.clone()).await
    }

    /// `bin from-config FILE` where FILE holds `toml`.
    async fn from_config(bin: &Path, toml: impl Fn(&str, &str, &str) -> String) -> CliServer {
        let port = free_port().to_string();
        let (dir, file) = model();
        let path = std::env::temp_dir().join(format!(
            "mistralrs-hlg-cli-{}-{port}.toml",
            std::process::id()
        ));
        std::fs::write(&path, toml(&port, &dir, &file)).unwrap();
        CliServer::spawn(bin, &["from-config", "-f", path.to_str().unwrap()], port).await
    }

    async fn spawn(bin: &Path, args: &[&str], port: String) -> CliServer {
        let log = std::env::temp_dir().join(format!(
            "mistralrs-hlg-cli-{}-{port}.log",
            std::process::id()
        ));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(bin)
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let mut server = CliServer {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        server.wait_ready().await;
        server
    }

    async fn wait_ready(&mut self) {
        let start = Instant::now();
        let client = reqwest::Client::new();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "the server exited ({status}) before it was ready:\n{}",
                    self.log_text()
                );
            }
            // `/health` stays open with an API key (`/v1/models` would be 401).
            if let Ok(r) = client.get(format!("{}/health", self.base)).send().await {
                if r.status() == 200 {
                    return;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(180),
                "the server was not ready in 180 s:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let http = Server::at(self.base.clone());
        let (status, text) = http.post(&reqwest::Client::new(), path, body).await;
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, v)
    }

    async fn post_ok(&self, path: &str, body: &Value) -> Value {
        let (status, v) = self.post(path, body).await;
        assert_eq!(status, 200, "{path}: {v}");
        v
    }
}

impl Drop for CliServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The same requests, one after another, on a fresh server: greedy and sampled chat,
/// sampled text completion, greedy `n = 2` (not on 0.9 hosts: upstream 0.9.2's own binary
/// answers it with a 500, [`upstream_0_9_fails_n_2_and_the_patched_binary_splits_it`]).
/// Returns every choice's text and finish reason.
async fn transcript(s: &CliServer) -> Vec<(String, String)> {
    let mut bodies: Vec<(&str, Value)> = vec![];
    for p in PROMPTS {
        bodies.push((
            "/v1/chat/completions",
            chat(p, 24, json!({"temperature": 0.0})),
        ));
        bodies.push((
            "/v1/chat/completions",
            chat(p, 24, json!({"temperature": 0.9})),
        ));
    }
    bodies.push(("/v1/completions", json!({"model": "default", "prompt": "Once upon a time", "max_tokens": 24, "temperature": 1.0})));
    if !cfg!(mistralrs_host = "0.9") {
        bodies.push((
            "/v1/chat/completions",
            chat(PROMPTS[0], 12, json!({"temperature": 0.0, "n": 2})),
        ));
    }
    let mut out = vec![];
    for (path, body) in bodies {
        let v = s.post_ok(path, &body).await;
        let reasons = v["choices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["finish_reason"].to_string());
        out.extend(texts(&v).into_iter().zip(reasons));
    }
    out
}

/// An HLG setting far from plain temperature: the exp toe from the top token down with
/// β = 1e-3 (nearly greedy decoding).
fn hard_toe() -> Value {
    json!({"pivot": "top", "pivot_offset": 0.0, "width": 0.0, "shoulder": "off", "toe": 0.001, "toe_shape": "exp"})
}

/// The same flags for the command line.
const HARD_TOE_FLAGS: [&str; 12] = [
    "--hlg-sampling",
    "on",
    "--hlg-pivot-offset",
    "0",
    "--hlg-width",
    "0",
    "--hlg-shoulder",
    "off",
    "--hlg-toe",
    "0.001",
    "--hlg-toe-shape",
    "exp",
];

/// Sampled requests at T = 1, one after another: a chat per prompt and a text completion,
/// with `hlg` set to `hlg` when it is not null. Every choice's text.
async fn sampled(s: &CliServer, hlg: &Value) -> Vec<String> {
    let with = |mut body: Value| {
        if !hlg.is_null() {
            body["hlg"] = hlg.clone();
        }
        body
    };
    let mut out = vec![];
    for p in PROMPTS {
        out.extend(texts(
            &s.post_ok(
                "/v1/chat/completions",
                &with(chat(p, 24, json!({"temperature": 1.0}))),
            )
            .await,
        ));
    }
    let completion = json!({"model": "default", "prompt": "Once upon a time", "max_tokens": 24, "temperature": 1.0});
    out.extend(texts(
        &s.post_ok("/v1/completions", &with(completion)).await,
    ));
    out
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the binaries of patches/apply.sh: run scripts/test-cli"]
async fn flag_off_serves_what_upstream_serves() {
    let upstream = {
        let s = CliServer::serve(&binary("MISTRALRS_HLG_UPSTREAM_CLI"), &[]).await;
        transcript(&s).await
    };
    let patched_default = {
        let s = CliServer::serve(&binary("MISTRALRS_HLG_PATCHED_CLI"), &[]).await;
        transcript(&s).await
    };
    let patched_off = {
        let s = CliServer::serve(
            &binary("MISTRALRS_HLG_PATCHED_CLI"),
            &["--hlg-sampling", "off", "--hlg-toe", "2"],
        )
        .await;
        transcript(&s).await
    };
    // 3 greedy + 3 sampled chats, 1 completion, 2 greedy choices (not on 0.9 hosts).
    let n_2 = if cfg!(mistralrs_host = "0.9") { 0 } else { 2 };
    assert_eq!(upstream.len(), 7 + n_2);
    assert!(upstream.iter().all(|(t, _)| !t.is_empty()), "{upstream:?}");
    assert_eq!(patched_default, upstream);
    assert_eq!(patched_off, upstream);
}

/// The any-model contract in the patched binary: under a `generation_config.json` with
/// top-k 1, top-p 0.5, min-p 0.2 and `do_sample: false`, HLG requests (chat and text
/// completion) sample what they sample from the bare model, by HLG alone, and do not come
/// back greedy. Fresh servers each (the engine's sampling RNG starts from one seed).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the binaries of patches/apply.sh: run scripts/test-cli"]
async fn hlg_is_the_only_sampler_under_the_models_defaults_in_the_patched_binary() {
    let bin = binary("MISTRALRS_HLG_PATCHED_CLI");
    let dir = |name: &str, config: Option<Value>| {
        let d = std::env::temp_dir().join(format!(
            "mistralrs-hlg-cli-defaults-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        if let Some(c) = config {
            std::fs::write(d.join("generation_config.json"), c.to_string()).unwrap();
        }
        d
    };
    let bare = dir("bare", None);
    let configured = dir(
        "truncating",
        Some(json!({"do_sample": false, "top_k": 1, "top_p": 0.5, "min_p": 0.2})),
    );
    let hlg = json!({"toe": 1.0});
    let want = sampled(&CliServer::serve_in(&bin, &bare).await, &hlg).await;
    let got = sampled(&CliServer::serve_in(&bin, &configured).await, &hlg).await;
    let greedy = {
        let s = CliServer::serve_in(&bin, &bare).await;
        let mut out = vec![];
        for p in PROMPTS {
            let r = s
                .post_ok(
                    "/v1/chat/completions",
                    &chat(p, 24, json!({"temperature": 0.0})),
                )
                .await;
            out.extend(texts(&r));
        }
        out
    };
    for d in [&bare, &configured] {
        let _ = std::fs::remove_dir_all(d);
    }
    assert_eq!(got, want, "HLG under the model's defaults");
    assert_ne!(
        got[..greedy.len()],
        greedy[..],
        "HLG chats came back greedy (top-k 1)"
    );
}

/// Upstream 0.9.2's CPU decode of two sequences that share a prompt fails on the GGUF
/// model (a non-contiguous tensor reaches QMatMul: docs/NOTES.md), so its own binary
/// answers greedy `n = 2` with a 500. The patched binary splits `n > 1` into single
/// sequences on this host, so both choices are the request's greedy text alone.
#[cfg(mistralrs_host = "0.9")]
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the binaries of patches/apply.sh: run scripts/test-cli"]
async fn upstream_0_9_fails_n_2_and_the_patched_binary_splits_it() {
    let two = chat(PROMPTS[0], 12, json!({"temperature": 0.0, "n": 2}));
    let one = chat(PROMPTS[0], 12, json!({"temperature": 0.0}));
    {
        let s = CliServer::serve(&binary("MISTRALRS_HLG_UPSTREAM_CLI"), &[]).await;
        let (status, v) = s.post("/v1/chat/completions", &two).await;
        assert_eq!(status, 500, "upstream 0.9.2 answered n = 2: {v}");
        assert!(v.to_string().contains("not contiguous"), "{v}");
        // The server lives on: the request alone still works.
        assert_eq!(
            texts(&s.post_ok("/v1/chat/completions", &one).await).len(),
            1
        );
    }
    let s = CliServer::serve(&binary("MISTRALRS_HLG_PATCHED_CLI"), &[]).await;
    let alone = texts(&s.post_ok("/v1/chat/completions", &one).await);
    let both = texts(&s.post_ok("/v1/chat/completions", &two).await);
    assert_eq!(alone.len(), 1);
    assert!(!alone[0].is_empty());
    assert_eq!(both, vec![alone[0].clone(), alone[0].clone()]);
}

/// Each server is fresh (its sampling RNG starts from the same seed), so the same requests
/// give the same texts exactly when the same distributions are sampled: HLG through the
/// request field, the flags and the from-config keys must agree with each other and differ
/// from plain temperature; `"hlg": false` on a server with HLG on gives plain temperature.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the binaries of patches/apply.sh: run scripts/test-cli"]
async fn hlg_from_the_request_the_flags_and_from_config() {
    let bin = binary("MISTRALRS_HLG_PATCHED_CLI");
    let plain = sampled(&CliServer::serve(&bin, &[]).await, &Value::Null).await;
    let request = sampled(&CliServer::serve(&bin, &[]).await, &hard_toe()).await;
    let flags = sampled(&CliServer::serve(&bin, &HARD_TOE_FLAGS).await, &Value::Null).await;
    let opted_out = sampled(
        &CliServer::serve(&bin, &HARD_TOE_FLAGS).await,
        &json!(false),
    )
    .await;
    let config = CliServer::from_config(&bin, |port, dir, file| {
        format!(
            r#"command = "serve"

[global]
token_source = "none"

[server]
host = "127.0.0.1"
port = {port}
hlg-sampling = "on"
hlg-pivot-offset = 0
hlg-width = 0
hlg-shoulder = "off"
hlg_toe = 0.001
hlg-toe-shape = "exp"

[[models]]
kind = "text"
model_id = "{dir}"

[models.format]
format = "gguf"
quantized_file = "{file}"

[models.device]
cpu = true
"#
        )
    })
    .await;
    let config = sampled(&config, &Value::Null).await;
    assert_eq!(plain.len(), 4);
    assert_ne!(request, plain, "the `hlg` field changes what is sampled");
    assert_eq!(
        flags, request,
        "--hlg-sampling on and the --hlg-* knobs apply to requests without `hlg`"
    );
    assert_eq!(
        config, request,
        "the [server] keys of a from-config file do the same"
    );
    assert_eq!(
        opted_out, plain,
        "`hlg: false` turns it off for one request"
    );
}

/// The patched binary gives upstream's CLI the same guarantee as `mistralrs-hlg serve`:
/// four concurrent greedy requests whose prompts line up get what each gets alone (the
/// start-up probe finds the engine's batched rows wrong and the server admits one request
/// at a time). Upstream's own binary is run the same way and its count printed, not
/// asserted (whether its requests line up depends on timing).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the binaries of patches/apply.sh: run scripts/test-cli"]
async fn concurrent_requests_match_their_solo_runs_in_the_patched_binary() {
    let patched = CliServer::serve(&binary("MISTRALRS_HLG_PATCHED_CLI"), &[]).await;
    let wrong =
        mistralrs_hlg_integration_tests::mismatches(&Server::at(patched.base.clone()), 3).await;
    drop(patched);
    let upstream = CliServer::serve(&binary("MISTRALRS_HLG_UPSTREAM_CLI"), &[]).await;
    let upstream_wrong =
        mistralrs_hlg_integration_tests::mismatches(&Server::at(upstream.base.clone()), 3).await;
    println!("upstream's binary: {upstream_wrong} of 12 concurrent responses differ from their solo runs");
    assert_eq!(
        wrong, 0,
        "the patched binary: {wrong} of 12 concurrent responses differ from their solo runs"
    );
}

/// `/v1/responses` in the patched binary: without `hlg` it is upstream's route (the same
/// texts as the unpatched binary), with it (or with `--hlg-sampling on`) it samples as the
/// chat route does with the same `hlg`: a Responses call with text input is the chat turn
/// `[user: input]`.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the binaries of patches/apply.sh: run scripts/test-cli"]
async fn responses_take_hlg_in_the_patched_binary() {
    async fn responses(s: &CliServer, hlg: &Value) -> Vec<String> {
        let mut out = vec![];
        for p in PROMPTS {
            let mut body = json!({"model": "default", "input": p, "max_output_tokens": 24, "temperature": 1.0});
            if !hlg.is_null() {
                body["hlg"] = hlg.clone();
            }
            let v = s.post_ok("/v1/responses", &body).await;
            out.push(v["output_text"].as_str().unwrap_or_default().to_string());
        }
        out
    }
    async fn chats(s: &CliServer, hlg: &Value) -> Vec<String> {
        let mut out = vec![];
        for p in PROMPTS {
            out.extend(texts(
                &s.post_ok(
                    "/v1/chat/completions",
                    &chat(p, 24, json!({"temperature": 1.0, "hlg": hlg})),
                )
                .await,
            ));
        }
        out
    }
    let bin = binary("MISTRALRS_HLG_PATCHED_CLI");
    let upstream = responses(
        &CliServer::serve(&binary("MISTRALRS_HLG_UPSTREAM_CLI"), &[]).await,
        &Value::Null,
    )
    .await;
    let off = responses(&CliServer::serve(&bin, &[]).await, &Value::Null).await;
    let with_hlg = responses(&CliServer::serve(&bin, &[]).await, &hard_toe()).await;
    let by_flag = responses(&CliServer::serve(&bin, &HARD_TOE_FLAGS).await, &Value::Null).await;
    let chat_hlg = chats(&CliServer::serve(&bin, &[]).await, &hard_toe()).await;
    assert!(upstream.iter().all(|t| !t.is_empty()), "{upstream:?}");
    assert_eq!(
        off, upstream,
        "/v1/responses without hlg differs from upstream's"
    );
    assert_ne!(
        with_hlg, upstream,
        "hlg did not change what /v1/responses samples"
    );
    assert_eq!(
        with_hlg, chat_hlg,
        "hlg on /v1/responses differs from the same hlg on chat"
    );
    assert_eq!(
        by_flag, with_hlg,
        "--hlg-sampling on does not reach /v1/responses"
    );
}

/// `/v1/messages` (Anthropic's route, served from mistral.rs 0.9) in the patched binary:
/// without `hlg` it is upstream's route (the same texts as the unpatched binary at T = 1);
/// with the near-greedy toe (or the same flags) at T = 1 it samples upstream's greedy
/// texts; a bad `hlg` is a 400 naming the field.
#[cfg(mistralrs_host = "0.9")]
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the binaries of patches/apply.sh: run scripts/test-cli 0.9.2"]
async fn messages_take_hlg_in_the_patched_binary() {
    fn body(p: &str, t: f64, hlg: &Value) -> Value {
        let mut body = json!({"model": "default", "max_tokens": 24, "temperature": t,
                              "messages": [{"role": "user", "content": p}]});
        if !hlg.is_null() {
            body["hlg"] = hlg.clone();
        }
        body
    }
    async fn messages(s: &CliServer, t: f64, hlg: &Value) -> Vec<String> {
        let mut out = vec![];
        for p in PROMPTS {
            let v = s.post_ok("/v1/messages", &body(p, t, hlg)).await;
            let text: String = v["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|b| b["text"].as_str())
                .collect();
            out.push(text);
        }
        out
    }
    let bin = binary("MISTRALRS_HLG_PATCHED_CLI");
    let (upstream, upstream_greedy) = {
        let s = CliServer::serve(&binary("MISTRALRS_HLG_UPSTREAM_CLI"), &[]).await;
        (
            messages(&s, 1.0, &Value::Null).await,
            messages(&s, 0.0, &Value::Null).await,
        )
    };
    let off = messages(&CliServer::serve(&bin, &[]).await, 1.0, &Value::Null).await;
    let s = CliServer::serve(&bin, &[]).await;
    let with_hlg = messages(&s, 1.0, &hard_toe()).await;
    let (status, v) = s
        .post("/v1/messages", &body("Hi", 1.0, &json!({"toe": -2})))
        .await;
    assert_eq!(status, 400, "a bad hlg on /v1/messages: {v}");
    assert!(
        v.to_string().contains("toe"),
        "the 400 names the field: {v}"
    );
    drop(s);
    let by_flag = messages(
        &CliServer::serve(&bin, &HARD_TOE_FLAGS).await,
        1.0,
        &Value::Null,
    )
    .await;
    assert!(
        upstream_greedy.iter().all(|t| !t.is_empty()),
        "{upstream_greedy:?}"
    );
    assert_eq!(
        off, upstream,
        "/v1/messages without hlg differs from upstream's"
    );
    assert_ne!(
        upstream, upstream_greedy,
        "the comparison has no power: T = 1 gave the greedy texts"
    );
    assert_eq!(
        with_hlg, upstream_greedy,
        "the near-greedy toe on /v1/messages at T = 1 should give the greedy texts"
    );
    assert_eq!(
        by_flag, with_hlg,
        "--hlg-sampling on does not reach /v1/messages"
    );
}

/// Upstream's web UI, as its `ui/mod.rs` serves it under `/ui`.
const UI_PATHS: &[&str] = &[
    "/ui",
    "/ui/index.html",
    "/ui/api/list_models",
    "/ui/api/settings",
    "/ui/api/list_chats",
];

/// The web UI is on by default on 0.9.2 and behind `--ui` on 0.8.1.
const UI_FLAG: &[&str] = if cfg!(mistralrs_host = "0.9") {
    &[]
} else {
    &["--ui"]
};

impl CliServer {
    async fn get_status(&self, path: &str, key: Option<&str>) -> (u16, String) {
        let mut r = reqwest::Client::new().get(format!("{}{path}", self.base));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        let r = r.send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap_or_default())
    }
}

/// Upstream's CLI nests its web UI at `/ui` after the router is built; the patched CLI
/// applies the key, the allowlist and the media policy around the finished app, so the
/// UI is closed without the key, closed by the allowlist with it, and served with the key
/// and `--allow-admin-routes`. `--mcp-port` (0.9.2) is refused while a key is set.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the binaries of patches/apply.sh: run scripts/test-cli"]
async fn the_web_ui_is_behind_the_key_and_the_allowlist() {
    let bin = binary("MISTRALRS_HLG_PATCHED_CLI");
    let keyed: Vec<&str> = [UI_FLAG, &["--api-key", "sk-ui"]].concat();
    {
        let s = CliServer::serve(&bin, &keyed).await;
        for path in UI_PATHS.iter().chain(&["/v1/models"]) {
            let (status, text) = s.get_status(path, None).await;
            assert_eq!(status, 401, "{path} without the key: {text:.200}");
            let (status, text) = s.get_status(path, Some("sk-wrong")).await;
            assert_eq!(status, 401, "{path} with a wrong key: {text:.200}");
        }
        for path in UI_PATHS {
            let (status, text) = s.get_status(path, Some("sk-ui")).await;
            assert_eq!(status, 404, "{path} with the key: {text:.200}");
            assert!(text.contains("--allow-admin-routes"), "{path}: {text:.200}");
        }
        assert_eq!(s.get_status("/v1/models", Some("sk-ui")).await.0, 200);
        assert_eq!(s.get_status("/health", None).await.0, 200);
    }
    {
        let opened: Vec<&str> = [&keyed[..], &["--allow-admin-routes"]].concat();
        let s = CliServer::serve(&bin, &opened).await;
        for path in UI_PATHS {
            assert_eq!(
                s.get_status(path, None).await.0,
                401,
                "{path} without the key"
            );
            let (status, text) = s.get_status(path, Some("sk-ui")).await;
            assert_eq!(status, 200, "{path} with the key: {text:.200}");
        }
    }
    {
        // No key: the allowlist alone.
        let s = CliServer::serve(&bin, UI_FLAG).await;
        for path in UI_PATHS {
            let (status, text) = s.get_status(path, None).await;
            assert_eq!(status, 404, "{path}: {text:.200}");
        }
    }
    if cfg!(mistralrs_host = "0.9") {
        mcp_port_is_refused_with_a_key(&bin).await;
    }
}

/// `bin serve` on a free port of 127.0.0.1 with `extra` server options, on the embedded
/// model, as a command to run to its end (a start-up that must fail).
fn serve_command(bin: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(serve_args(&free_port().to_string(), extra));
    cmd
}

/// `serve` on 127.0.0.1:`port` with `extra` server options, on the embedded model.
fn serve_args(port: &str, extra: &[&str]) -> Vec<String> {
    let (dir, file) = model();
    let head = [
        "--token-source",
        "none",
        "serve",
        "--host",
        "127.0.0.1",
        "-p",
        port,
    ];
    let tail = ["text", "-m", &dir, "--format", "gguf", "-f", &file, "--cpu"];
    head.iter()
        .chain(extra)
        .chain(tail.iter())
        .map(|a| a.to_string())
        .collect()
}

/// `serve --api-key K --mcp-port P` stops start-up, naming `--mcp-port`: the MCP
/// listener would be a port of its own outside the key.
async fn mcp_port_is_refused_with_a_key(bin: &Path) {
    let port = free_port().to_string();
    let log = std::env::temp_dir().join(format!("mistralrs-hlg-cli-mcp-{port}.log"));
    let out = std::fs::File::create(&log).unwrap();
    let mut child = serve_command(bin, &["--api-key", "sk-ui", "--mcp-port", &port])
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        status.is_some_and(|s| !s.success()),
        "--mcp-port with a key did not stop start-up: {text}"
    );
    assert!(text.contains("--mcp-port"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the binaries of patches/apply.sh: run scripts/test-cli"]
async fn bad_values_are_400s_and_a_bad_flag_stops_start_up() {
    let bin = binary("MISTRALRS_HLG_PATCHED_CLI");
    let s = CliServer::serve(&bin, &[]).await;
    for (hlg, param) in [
        (json!({"toe": -2}), "hlg.toe"),
        (json!({"width": "wide"}), "hlg.width"),
        (json!({"toe_shape": "cubic"}), "hlg.toe_shape"),
        (json!({"tow": 1}), "hlg"),
    ] {
        let (status, v) = s
            .post("/v1/chat/completions", &chat("Hi", 4, json!({"hlg": hlg})))
            .await;
        assert_eq!(status, 400, "{hlg}: {v}");
        assert_eq!(v["error"]["param"], param, "{v}");
        let (status, v) = s
            .post(
                "/v1/completions",
                &json!({"model": "default", "prompt": "Hi", "max_tokens": 4, "hlg": hlg}),
            )
            .await;
        assert_eq!(status, 400, "{hlg}: {v}");
        assert_eq!(v["error"]["param"], param, "{v}");
    }
    // The server keeps serving.
    let v = s
        .post_ok(
            "/v1/chat/completions",
            &chat("Name a colour.", 4, json!({})),
        )
        .await;
    assert_eq!(texts(&v).len(), 1);
    drop(s);

    // A bad flag stops the server before it serves, naming the flag and the range.
    let out = serve_command(&bin, &["--hlg-toe", "-2"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"--hlg-toe: `hlg.toe` must be a number in [1e-6, 1000] or "off", got -2"#),
        "{err}"
    );
}
