//! The one-pass judge of the engine's model against the engine's own judge, which forces
//! the text one decode step per token: the same tokens, and the same log-probabilities
//! up to the engine's rounding (it computes in F16 on the CPU; the one pass in f32), which
//! moves a token's by up to a few tenths of a nat either way and a text's mean by a few
//! hundredths, with no bias.
#![cfg(feature = "gemma")]

use mistralrs_hlg_eval::capture;
use mistralrs_hlg_eval::generate::{generate_seeded, judge, SplitMix, Trace};
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

/// Samples through the one pass ([`OnePass::generate_rows`], what `Lm::EngineNet` runs):
/// rows decoded as one batch are the rows decoded alone; an adaptive-p row's running
/// average moves its draws (the same stream with a different decay draws differently);
/// and every row records its thesis measures.
#[tokio::test(flavor = "multi_thread")]
async fn one_pass_samples_in_batches_as_alone() {
    use mistralrs_hlg::HlgConfig;
    use mistralrs_hlg_eval::decode::Row;
    let model = capture::load_model(None).await.unwrap();
    let onepass = OnePass::load(None).unwrap();
    let p = prompts::OPEN_ENDED_MORE[1];
    let adaptive = |decay| Sampler::AdaptiveP {
        t: 1.0,
        target: 0.5,
        decay,
        min_p: 0.01,
    };
    let samplers = [
        Sampler::Temperature { t: 1.0 },
        Sampler::Hlg {
            t: 1.0,
            hlg: HlgConfig::default().resolved(true),
        },
        adaptive(0.9),
        adaptive(0.0),
    ];
    let rows: Vec<Row<'_>> = samplers
        .iter()
        .enumerate()
        .map(|(i, s)| Row {
            sampler: s,
            // One row stops early: the batch goes on without it.
            max_tokens: if i == 1 { 6 } else { 20 },
            // The two adaptive-p rows share a stream.
            seed: SplitMix(50 + i.min(2) as u64),
        })
        .collect();
    let batched = onepass.generate_rows(&model, p, &rows).await.unwrap();
    for (r, (text, trace)) in rows.iter().zip(&batched) {
        let alone = onepass
            .generate_rows(&model, p, std::slice::from_ref(r))
            .await
            .unwrap()
            .remove(0);
        assert_eq!(*text, alone.0);
        assert_eq!(trace.entropy.len(), alone.1.entropy.len());
        for (a, b) in trace.base_logprob.iter().zip(&alone.1.base_logprob) {
            assert!((a - b).abs() < 1e-4, "{a} {b}");
        }
        assert_eq!(trace.shape.len(), trace.entropy.len());
    }
    assert_eq!(batched[1].1.entropy.len(), 6);
    assert_ne!(
        batched[2].0, batched[3].0,
        "the running average moved nothing"
    );
}

/// A row decoded in a batch against the same row alone: every step's distribution the
/// same up to the rounding of a product over more rows (entropy and the drawn token's
/// log-prob within 1e-4), and the same text, except that the two may part at a draw from
/// the same distribution into its deep tail (both tokens under 1e-4): there tokens are
/// narrower than the rounding of the cumulative sum that places the draw (about 1e-5
/// after 49,152 terms), so another kernel's rounding picks a neighbour (seen on an AMD
/// EPYC: two tokens of probability 1.3e-6 and 6.8e-7 at step 5).
fn same_until_a_tail_draw(p: usize, (text, trace): (&String, &Trace), alone: &(String, Trace)) {
    let (a, b) = (trace, &alone.1);
    let steps = a.entropy.len().min(b.entropy.len());
    for k in 0..steps {
        let dh = (a.entropy[k] - b.entropy[k]).abs();
        assert!(
            dh < 1e-4,
            "prompt {p}, step {k}: entropy {} alone {}",
            a.entropy[k],
            b.entropy[k]
        );
        let (la, lb) = (a.base_logprob[k], b.base_logprob[k]);
        if (la - lb).abs() >= 1e-4 {
            let tail = 1e-4f64.ln();
            assert!(
                la < tail && lb < tail,
                "prompt {p}, step {k}: the draws part outside the tail ({la}, {lb}): {text:?} / {:?}",
                alone.0
            );
            println!("prompt {p}: parted at step {k}, a tail draw ({la:.2} / {lb:.2} nats)");
            return;
        }
    }
    assert_eq!(*text, alone.0, "prompt {p}");
}

/// Rows after different prompts decoded as one batch (the shorter prompts padded on the
/// left, `decode::decode_across`) are the rows of each prompt decoded alone
/// ([`same_until_a_tail_draw`]).
#[tokio::test(flavor = "multi_thread")]
async fn rows_across_prompts_are_the_rows_alone() {
    use mistralrs_hlg_eval::decode::Row;
    let model = capture::load_model(None).await.unwrap();
    let onepass = OnePass::load(None).unwrap();
    // Prompts of different lengths, so that two of the three are padded.
    let ps = [prompts::OPEN_ENDED[0], "Hi.", prompts::OPEN_ENDED_MORE[5]];
    let s = Sampler::Temperature { t: 1.0 };
    let rows: Vec<(usize, Row<'_>)> = (0..6)
        .map(|i| {
            let row = Row {
                sampler: &s,
                max_tokens: 16,
                seed: SplitMix(70 + i as u64),
            };
            (i % 3, row)
        })
        .collect();
    let across = onepass.generate_across(&model, &ps, &rows).await.unwrap();
    for ((p, row), (text, trace)) in rows.iter().zip(&across) {
        let alone = onepass
            .generate_rows(&model, ps[*p], std::slice::from_ref(row))
            .await
            .unwrap()
            .remove(0);
        same_until_a_tail_draw(*p, (text, trace), &alone);
    }
}

/// A near-greedy row through the one pass draws with no entropy, and its text reads
/// back as what the engine's own judge scores.
#[tokio::test(flavor = "multi_thread")]
async fn a_near_greedy_row_reads_back_as_the_engine_reads_it() {
    use mistralrs_hlg_eval::decode::Row;
    let model = capture::load_model(None).await.unwrap();
    let onepass = OnePass::load(None).unwrap();
    let p = prompts::OPEN_ENDED_MORE[1];
    let cold = Sampler::Temperature { t: 0.01 };
    let row = Row {
        sampler: &cold,
        max_tokens: 12,
        seed: SplitMix(9),
    };
    let (text, trace) = onepass
        .generate_rows(&model, p, &[row])
        .await
        .unwrap()
        .remove(0);
    assert!(
        trace.entropy.iter().all(|&h| h < 1e-3),
        "{:?}",
        trace.entropy
    );
    // Read back, the text may tokenize into fewer pieces than were drawn (the engine's
    // tokenizer merges what the draws left apart), as every judged sample does.
    let judged = onepass.judge(&model, p, &text).await.unwrap();
    assert!((1..=12).contains(&judged.tokens()), "{text:?}");
    let engine = judge(&model, p, &text).await.unwrap();
    assert_eq!(engine.tokens(), judged.tokens());
    assert!((engine.mean_logprob() - judged.mean_logprob()).abs() < 0.1);
}
