//! The evaluation's own forward pass (`eval::net`, read through `OnePass`) against the
//! engine on tiny random-weight models of the architectures it runs besides Gemma 3:
//! Llama (the embedded SmolLM2's) and Qwen2 (Qwen2.5-Coder's, the larger judge). Each text
//! is judged by the engine (one decode step per token) and in one pass: the same tokens,
//! and log-probabilities equal up to the engine's F16 rounding (measured: Llama max |Δ|
//! 0.081 and mean 0.027 nats a token, Qwen2 0.155 and 0.038). A wrong rotary order or a
//! missing bias moves them by far more on these models (checked by hand once, on Qwen2:
//! Llama's interleaved rotary order, max 4.46 and mean 1.80; no q/k/v biases, 1.40 and
//! 0.40), so the bounds sit between the two.
#![cfg(not(mistralrs_host = "0.9"))]

use std::path::PathBuf;

use mistralrs_hlg_eval::capture;
use mistralrs_hlg_eval::generate::{judge, Judged};
use mistralrs_hlg_eval::onepass::OnePass;
use mistralrs_hlg_integration_tests::tiny::{write_gguf, Arch};

const TEXTS: [&str; 3] = [
    "the sea is blue and the bird is red",
    "Describe a city that does not exist, in one sentence.",
    " three green apple, one banana: water!",
];

/// The largest and the mean absolute difference between the two judgements' log-probs.
async fn differences(arch: Arch) -> (f64, f64) {
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "hlg-onepass-{}-{}",
        std::process::id(),
        arch.name()
    ));
    let path = write_gguf(&dir, arch, 512).expect("writing the tiny model");
    let model = capture::load_model(Some(&path)).await.unwrap();
    let onepass = OnePass::load(Some(&path)).unwrap();
    // The three texts' tokens as one judgement each way.
    let (mut got_all, mut want_all) = (Judged::default(), Judged::default());
    for text in TEXTS {
        let want = judge(&model, "Write about the sea.", text).await.unwrap();
        let got = onepass
            .judge(&model, "Write about the sea.", text)
            .await
            .unwrap();
        assert_eq!(got.tokens(), want.tokens(), "{text:?}");
        assert!(got.tokens() > 5, "{text:?}");
        assert!(got
            .logprobs
            .iter()
            .chain(&want.logprobs)
            .all(|x| x.is_finite()));
        got_all.logprobs.extend(got.logprobs);
        want_all.logprobs.extend(want.logprobs);
    }
    let _ = std::fs::remove_dir_all(&dir);
    got_all.differences(&want_all)
}

#[tokio::test(flavor = "multi_thread")]
async fn one_pass_reads_llama_as_the_engine_does() {
    let (worst, mean) = differences(Arch::Llama).await;
    println!("llama: max |Δ| {worst:.5}, mean |Δ| {mean:.5}");
    assert!(worst < 0.3 && mean < 0.1, "max {worst}, mean {mean}");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_pass_reads_qwen2_as_the_engine_does() {
    let (worst, mean) = differences(Arch::Qwen2).await;
    println!("qwen2: max |Δ| {worst:.5}, mean |Δ| {mean:.5}");
    assert!(worst < 0.3 && mean < 0.1, "max {worst}, mean {mean}");
}
