//! A model whose `generation_config.json` sets its own sampling defaults, on every
//! generation route (chat, completions, responses, and messages on 0.9).
//!
//! mistral.rs 0.9 fills every sampling field a request left unset from that file when
//! the request reaches the engine (0.8.1 reads it and does not apply it). HLG must stay
//! the only sampler whatever the file says; plain requests must keep upstream's
//! behaviour, defaults included. Each comparison runs the same requests on fresh
//! engines (the engine's sampling RNG starts from one seed), one over the embedded GGUF
//! alone in its directory, one over the same file beside a `generation_config.json`.

use std::path::{Path, PathBuf};

use mistralrs_hlg::server::load::{load, ModelSource};
use mistralrs_hlg::HlgConfig;
use mistralrs_hlg_integration_tests::{chat, plugin, post_ok, run_prompts, texts, upstream};
use mistralrs_server_core::types::SharedMistralRsState;
use serde_json::{json, Value};

const MAX_TOKENS: u32 = 16;

/// A truncation the test could not miss: top-k 1 is greedy whatever the rest says.
fn truncating() -> Value {
    json!({"do_sample": true, "top_k": 1, "top_p": 0.5, "min_p": 0.2})
}

/// A directory of its own holding a link to the embedded GGUF and, when given, a
/// `generation_config.json`; removed on drop.
struct ModelDir(PathBuf);

impl ModelDir {
    fn new(name: &str, generation_config: Option<&Value>) -> ModelDir {
        let gguf = mistralrs_hlg::model::ensure_default_model().expect("the embedded model");
        let dir =
            std::env::temp_dir().join(format!("hlg-model-defaults-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&gguf, dir.join(gguf.file_name().unwrap())).unwrap();
        if let Some(g) = generation_config {
            std::fs::write(dir.join("generation_config.json"), g.to_string()).unwrap();
        }
        ModelDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    /// A fresh engine on this directory.
    async fn engine(&self) -> SharedMistralRsState {
        let source = ModelSource::resolve(self.0.to_str().unwrap(), None).unwrap();
        load(&source).await.expect("loading the model")
    }
}

impl Drop for ModelDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn hlg_router(dir: &ModelDir) -> axum::Router {
    plugin(dir.engine().await, HlgConfig::default()).await
}

/// HLG requests sample exactly what they sample from the bare directory: the model's
/// top-k 1 / top-p 0.5 / min-p 0.2 do not come back under HLG, on chat, on completions
/// and in the server's split `n > 1`.
#[tokio::test(flavor = "multi_thread")]
async fn hlg_is_the_only_sampler_under_the_models_defaults() {
    let bare = ModelDir::new("bare-hlg", None);
    let configured = ModelDir::new("truncating-hlg", Some(&truncating()));
    let fields = json!({"temperature": 1.0, "hlg": {"toe": 1.0}});

    assert_hlg_alone(&bare, &configured, "/v1/chat/completions", &fields).await;

    let completion = |router: axum::Router| async move {
        let body = json!({"model": "default", "prompt": "The sea is", "max_tokens": MAX_TOKENS,
            "temperature": 1.0, "hlg": {"toe": 1.0}, "n": 3});
        texts(&post_ok(&router, "/v1/completions", &body).await)
    };
    let want = completion(hlg_router(&bare).await).await;
    let got = completion(hlg_router(&configured).await).await;
    assert_eq!(got.len(), 3);
    assert_eq!(
        got, want,
        "HLG completions (n = 3, split) under the model's defaults"
    );
}

/// On `route`, HLG requests with `fields` give under `configured`'s defaults what they give
/// from the `bare` directory, and not the bare model's greedy text.
async fn assert_hlg_alone(bare: &ModelDir, configured: &ModelDir, route: &str, fields: &Value) {
    let want = route_texts(&hlg_router(bare).await, route, fields).await;
    let got = route_texts(&hlg_router(configured).await, route, fields).await;
    assert_eq!(got, want, "HLG on {route} under the model's defaults");
    let greedy = route_texts(
        &upstream(bare.engine().await).await,
        route,
        &json!({"temperature": 0.0}),
    )
    .await;
    assert_ne!(got, greedy, "HLG on {route} came back greedy (top-k 1)");
}

/// The text of each of [`PROMPTS`](mistralrs_hlg_integration_tests::PROMPTS) on `route`:
/// chat, `/v1/responses` (its `output_text`) or, on 0.9, `/v1/messages` (its text
/// blocks), with `fields` in each request.
async fn route_texts(router: &axum::Router, route: &str, fields: &Value) -> Vec<String> {
    if route == "/v1/chat/completions" {
        return run_prompts(router, MAX_TOKENS, fields).await;
    }
    let mut out = vec![];
    for p in mistralrs_hlg_integration_tests::PROMPTS {
        let mut body = if route == "/v1/responses" {
            json!({"model": "default", "input": p, "max_output_tokens": MAX_TOKENS})
        } else {
            json!({"model": "default", "max_tokens": MAX_TOKENS,
                "messages": [{"role": "user", "content": p}]})
        };
        for (k, v) in fields.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = post_ok(router, route, &body).await;
        out.push(if route == "/v1/responses" {
            r["output_text"].as_str().expect("output_text").to_string()
        } else {
            r["content"]
                .as_array()
                .expect("content")
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect()
        });
    }
    out
}

/// The same on the other generation routes: `/v1/responses` on both hosts and Anthropic's
/// `/v1/messages` on 0.9 sample HLG requests by HLG alone under the model's top-k 1 /
/// top-p 0.5 / min-p 0.2, and do not come back greedy.
#[tokio::test(flavor = "multi_thread")]
async fn hlg_is_the_only_sampler_on_responses_and_messages() {
    let bare = ModelDir::new("bare-routes", None);
    let configured = ModelDir::new("truncating-routes", Some(&truncating()));
    let fields = json!({"temperature": 1.0, "hlg": {"toe": 1.0}});
    let mut routes = vec!["/v1/responses"];
    if cfg!(mistralrs_host = "0.9") {
        routes.push("/v1/messages");
    }
    for route in routes {
        assert_hlg_alone(&bare, &configured, route, &fields).await;
    }
}

/// The Rust API's `with_hlg` under the same defaults.
#[tokio::test(flavor = "multi_thread")]
async fn the_request_builder_extension_ignores_the_models_defaults() {
    use mistralrs_hlg::processor::HlgRequestExt;
    let bare = ModelDir::new("bare-api", None);
    let configured = ModelDir::new("truncating-api", Some(&truncating()));
    let run = |dir: PathBuf| async move {
        let gguf = mistralrs_hlg::model::ensure_default_model().unwrap();
        let file = gguf.file_name().unwrap().to_string_lossy().into_owned();
        let model = mistralrs::GgufModelBuilder::new(dir.to_string_lossy(), vec![file])
            .with_token_source(mistralrs::TokenSource::None)
            .with_force_cpu()
            .build()
            .await
            .expect("loading the model");
        let mut out = vec![];
        for p in mistralrs_hlg_integration_tests::PROMPTS {
            let req = mistralrs::RequestBuilder::new()
                .add_message(mistralrs::TextMessageRole::User, p)
                .set_sampler_max_len(MAX_TOKENS as usize)
                .with_hlg(mistralrs_hlg::HlgCurve::default(), 1.0);
            let r = model.send_chat_request(req).await.expect("chat");
            out.push(r.choices[0].message.content.clone().unwrap_or_default());
        }
        out
    };
    let want = run(bare.path().to_path_buf()).await;
    let got = run(configured.path().to_path_buf()).await;
    assert_eq!(got, want, "with_hlg under the model's defaults");
}

/// Plain requests keep upstream's behaviour: the plugin's router answers what upstream's
/// answers on the same directory. On 0.9 that is the model's top-k 1 (greedy output at
/// T = 1); 0.8.1 does not apply the file, so it samples as from the bare directory.
#[tokio::test(flavor = "multi_thread")]
async fn plain_requests_keep_the_models_defaults() {
    let bare = ModelDir::new("bare-plain", None);
    let configured = ModelDir::new("truncating-plain", Some(&truncating()));
    let t1 = json!({"temperature": 1.0});
    let upstream_out =
        run_prompts(&upstream(configured.engine().await).await, MAX_TOKENS, &t1).await;
    let plugin_out = run_prompts(&hlg_router(&configured).await, MAX_TOKENS, &t1).await;
    assert_eq!(
        plugin_out, upstream_out,
        "the disabled path under the model's defaults"
    );

    let want = if cfg!(mistralrs_host = "0.9") {
        run_prompts(
            &upstream(bare.engine().await).await,
            MAX_TOKENS,
            &json!({"temperature": 0.0}),
        )
        .await
    } else {
        run_prompts(&upstream(bare.engine().await).await, MAX_TOKENS, &t1).await
    };
    assert_eq!(
        plugin_out, want,
        "what the host makes of the model's defaults"
    );
}

/// `do_sample: false` decides plain requests (greedy on 0.9) but not HLG requests, which
/// sample at their temperature; the model's default temperature is the mid gain of an HLG
/// request that names none (on 0.9; 0.8.1 samples such requests at 1.0).
#[tokio::test(flavor = "multi_thread")]
async fn do_sample_false_and_the_default_temperature() {
    let bare = ModelDir::new("bare-t", None);
    let greedy_model = ModelDir::new("greedy", Some(&json!({"do_sample": false})));
    let hlg = json!({"temperature": 0.8, "hlg": true});
    let want = run_prompts(&hlg_router(&bare).await, MAX_TOKENS, &hlg).await;
    let got = run_prompts(&hlg_router(&greedy_model).await, MAX_TOKENS, &hlg).await;
    assert_eq!(got, want, "HLG under do_sample: false");

    let warm = ModelDir::new("warm", Some(&json!({"temperature": 0.6, "top_p": 0.3})));
    let no_t = run_prompts(&hlg_router(&warm).await, MAX_TOKENS, &json!({"hlg": true})).await;
    let mid_gain = if cfg!(mistralrs_host = "0.9") {
        0.6
    } else {
        1.0
    };
    let want = run_prompts(
        &hlg_router(&bare).await,
        MAX_TOKENS,
        &json!({"temperature": mid_gain, "hlg": true}),
    )
    .await;
    assert_eq!(
        no_t, want,
        "the mid gain of an HLG request without temperature"
    );
    // A single request's choices through the same route, to show the split keeps it.
    let body = chat(
        mistralrs_hlg_integration_tests::N_PROMPT,
        MAX_TOKENS,
        json!({"hlg": true, "n": 2}),
    );
    let two = texts(&post_ok(&hlg_router(&warm).await, "/v1/chat/completions", &body).await);
    let body = chat(
        mistralrs_hlg_integration_tests::N_PROMPT,
        MAX_TOKENS,
        json!({"hlg": true, "n": 2, "temperature": mid_gain}),
    );
    let want = texts(&post_ok(&hlg_router(&bare).await, "/v1/chat/completions", &body).await);
    assert_eq!(two, want, "n = 2 without temperature");
}
