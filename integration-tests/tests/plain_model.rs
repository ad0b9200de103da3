//! A model in Hugging Face's layout (config.json, safetensors, tokenizer.json), the format
//! most mistral.rs deployments serve: a tiny random-weight Llama the test writes itself,
//! loaded as `mistralrs-hlg serve -m DIR` loads it (architecture detected from
//! config.json), with and without upstream's in-situ quantization.

use std::path::PathBuf;

use mistralrs_hlg::server::load::{load_with, EngineOptions, ModelSource};
use mistralrs_hlg::HlgConfig;
use mistralrs_hlg_integration_tests::tiny::write_plain_llama;
use mistralrs_hlg_integration_tests::{plugin, post_ok, run_prompts, texts, upstream};
use mistralrs_server_core::types::SharedMistralRsState;
use serde_json::json;

const MAX_TOKENS: u32 = 12;
const VOCAB: usize = 32_000;

/// The model, written once per test process.
fn model_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("hlg-plain-llama-{}", std::process::id()));
        write_plain_llama(&dir, VOCAB).expect("writing the tiny model")
    })
    .clone()
}

async fn engine(isq: Option<&str>) -> SharedMistralRsState {
    let dir = model_dir();
    let source = ModelSource::resolve(dir.to_str().unwrap(), None).unwrap();
    assert!(matches!(source, ModelSource::Plain { .. }), "{source:?}");
    let options = EngineOptions {
        cpu: true,
        isq: isq.map(str::to_string),
        ..Default::default()
    };
    load_with(&source, &options)
        .await
        .expect("loading the plain model")
}

/// The disabled path is the engine's own output, the identity curve plain temperature,
/// HLG changes sampling reproducibly, greedy is untouched.
#[tokio::test(flavor = "multi_thread")]
async fn a_hugging_face_directory_serves_with_and_without_hlg() {
    let t = json!({"temperature": 0.8});
    let plain = run_prompts(&upstream(engine(None).await).await, MAX_TOKENS, &t).await;
    let fresh = || async { plugin(engine(None).await, HlgConfig::default()).await };
    assert_eq!(
        run_prompts(&fresh().await, MAX_TOKENS, &t).await,
        plain,
        "the disabled path"
    );
    let identity = json!({"temperature": 0.8, "hlg": {"width": "off"}});
    assert_eq!(
        run_prompts(&fresh().await, MAX_TOKENS, &identity).await,
        plain,
        "identity"
    );
    let hlg =
        json!({"temperature": 0.8, "hlg": {"toe_shape": "exp", "toe": 1.5, "pivot_offset": 4.0}});
    let a = run_prompts(&fresh().await, MAX_TOKENS, &hlg).await;
    assert_eq!(
        a,
        run_prompts(&fresh().await, MAX_TOKENS, &hlg).await,
        "reproducible"
    );
    assert_ne!(a, plain, "HLG did not change the sampled output");
    let greedy = json!({"temperature": 0.0});
    let want = run_prompts(&upstream(engine(None).await).await, MAX_TOKENS, &greedy).await;
    let got = run_prompts(
        &fresh().await,
        MAX_TOKENS,
        &json!({"temperature": 0.0, "hlg": true}),
    )
    .await;
    assert_eq!(got, want, "HLG changed a greedy generation");
    assert!(plain.iter().all(|t| !t.is_empty()), "{plain:?}");
}

/// `--isq` quantizes the weights at load, as upstream's flag does: the model serves, and
/// its greedy output is its own (the weights changed), HLG requests included.
#[tokio::test(flavor = "multi_thread")]
async fn isq_quantizes_a_plain_model() {
    let body = |hlg: bool| {
        json!({"model": "default", "prompt": "The sea is", "max_tokens": MAX_TOKENS,
            "temperature": 0.0, "hlg": hlg})
    };
    let full = texts(
        &post_ok(
            &upstream(engine(None).await).await,
            "/v1/completions",
            &body(false),
        )
        .await,
    );
    let router = plugin(engine(Some("q8_0")).await, HlgConfig::default()).await;
    let quantized = texts(&post_ok(&router, "/v1/completions", &body(false)).await);
    let with_hlg = texts(&post_ok(&router, "/v1/completions", &body(true)).await);
    assert_eq!(
        with_hlg, quantized,
        "greedy under HLG on the quantized model"
    );
    assert!(!quantized[0].is_empty());
    // On 0.8.1 the quantized weights part from the F32 ones after five tokens. On 0.9.2
    // the greedy text stays the F32 one on this model, so this cannot tell there that the
    // weights were quantized (docs/NOTES.md): only that the model serves.
    if !cfg!(mistralrs_host = "0.9") {
        assert_ne!(quantized, full, "--isq q8_0 left the weights as they were");
    }
}
