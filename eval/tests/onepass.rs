//! The one-pass judge of the engine's model against the engine's own judge, which forces
//! the text one decode step per token: the same tokens, and the same log-probabilities
//! up to the engine's rounding (it computes in F16 on the CPU; the one pass in f32), which
//! moves a token's by up to a few tenths of a nat either way and a text's mean by a few
//! hundredths, with no bias.
#![cfg(feature = "gemma")]

use mistralrs_hlg_eval::capture;
use mistralrs_hlg_eval::generate::{generate_seeded, judge, SplitMix};
use mistralrs_hlg_eval::onepass::OnePass;
use mistralrs_hlg_eval::prompts;
use mistralrs_hlg_eval::sampler::Sampler;

#[tokio::test(flavor = "multi_thread")]
async fn one_pass_reads_what_the_engine_reads() {
    let model = capture::load_model(None).await.unwrap();
    let onepass = OnePass::load(None).unwrap();
    let p = prompts::OPEN_ENDED_MORE[0];
    let hot = Sampler::Temperature { t: 1.2 };
    let (sampled, _) = generate_seeded(&model, p, &hot, 40, SplitMix(3))
        .await
        .unwrap();
    let texts = [
        sampled.as_str(),
        "Purple elephants compute the moon's tax returns.",
        " A reply that opens with a space, then numbers: 1, 2, 3.",
    ];
    let (mut worst, mut signed, mut n) = (0f64, 0f64, 0usize);
    for text in texts {
        let want = judge(&model, p, text).await.unwrap();
        let got = onepass.judge(&model, p, text).await.unwrap();
        assert_eq!(got.tokens(), want.tokens(), "{text:?}");
        for (a, b) in got.logprobs.iter().zip(&want.logprobs) {
            worst = worst.max((a - b).abs());
        }
        let d = (got.mean_logprob() - want.mean_logprob()).abs();
        assert!(
            d < 0.1,
            "{text:?}: mean {} vs {}",
            got.mean_logprob(),
            want.mean_logprob()
        );
        for (a, b) in got.logprobs.iter().zip(&want.logprobs) {
            signed += a - b;
            n += 1;
        }
    }
    let bias = signed / n as f64;
    println!("one pass against the engine over {n} tokens: max |Δ| {worst:.3}, mean Δ {bias:+.4}");
    assert!(worst < 0.75, "{worst}");
    assert!(bias.abs() < 0.05, "{bias}");
}
