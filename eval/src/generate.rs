//! Online generations through a sampler: a logits processor that applies the sampler's
//! transform (the host then divides by T and samples the whole vocabulary) and records,
//! per step, the entropy of the distribution sampled from and the base log-probability
//! (`softmax(x)`, T = 1) of the token that was drawn.

use std::sync::{Arc, Mutex};

use candle_core::Tensor;
use mistralrs::{RequestBuilder, TextMessageRole};
use serde::{Deserialize, Serialize};

use super::metrics::{log_softmax, TAIL};
use super::sampler::{entropy_of, probs, Memory, Sampler};
use super::EvalError;

#[derive(Default)]
struct State {
    /// Base log-probabilities of the last step, to score the token drawn from it.
    prev: Option<Vec<f64>>,
    trace: Trace,
    /// The sampler's memory within the sequence (adaptive-p's running average).
    memory: Memory,
}

/// What one generation recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// Entropy (nats) of the sampling distribution at each step.
    pub entropy: Vec<f64>,
    /// Base log-probability of each drawn token (every token but the last: no processor
    /// call follows it).
    pub base_logprob: Vec<f64>,
    /// Per step, the distribution drawn from against the base model's (T = 1): its top
    /// probability, its mass on tokens whose base probability is below [`TAIL`], and
    /// KL(drawn from ‖ base) in nats ([`shape_of`]). Empty in runs recorded before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape: Vec<[f64; 3]>,
}

impl Trace {
    /// Share of drawn tokens whose base probability is below [`TAIL`].
    pub fn tail_tokens(&self) -> usize {
        self.base_logprob.iter().filter(|&&l| l < TAIL.ln()).count()
    }
}

struct Recorder {
    sampler: Sampler,
    /// The sample's own stream when the draw is made here (see [`generate_seeded`]).
    draws: Option<Mutex<SplitMix>>,
    state: Mutex<State>,
}

impl mistralrs_core::CustomLogitsProcessor for Recorder {
    fn apply(&self, logits: &Tensor, context: &[u32]) -> candle_core::Result<Tensor> {
        let x: Vec<f32> = logits.to_vec1()?;
        let mut s = self.state.lock().unwrap();
        if let (Some(prev), Some(&tok)) = (s.prev.take(), context.last()) {
            if let Some(&l) = prev.get(tok as usize) {
                s.trace.base_logprob.push(l);
            }
            // The token the host drew from the last step (or this processor, seeded).
            self.sampler.accept(&mut s.memory, tok as usize);
        }
        // log_softmax(x, 1) from its normaliser, bit for bit, which `shape_of` reads too.
        let lse = super::metrics::log_sum_exp(&x, 1.0);
        s.prev = lse.map(|lse| {
            x.iter()
                .map(|&v| match v.is_finite() {
                    true => f64::from(v) - lse,
                    false => f64::NEG_INFINITY,
                })
                .collect()
        });
        let mut y = x.clone();
        self.sampler.transform_in(&mut y, &mut s.memory);
        let q = probs(&y, self.sampler.temperature());
        let h = entropy_of(&q);
        s.trace.entropy.push(h);
        if let Some(lse) = lse {
            s.trace.shape.push(shape_of(&x, lse, &q, h));
        }
        if let Some(draws) = &self.draws {
            // The host can then only draw this token: every other logit is -inf.
            let u = draws.lock().unwrap().unit();
            pin(&mut y, draw(&q, u));
        }
        Tensor::from_vec(y, logits.dims1()?, logits.device())
    }
}

/// The thesis measures of one step ([`Trace::shape`]): for the distribution `q` drawn
/// from, its entropy `entropy` (nats, as [`entropy_of`] gives it) and the base logits
/// `base` with their log-sum-exp `lse` (T = 1), the top probability of `q`, the mass `q`
/// puts on tokens whose base probability is below [`TAIL`], and KL(q ‖ base) =
/// Σ q ln q − Σ q ln p_base = −entropy − Σ q ln p_base: the entropy already computed
/// saves a logarithm per token of the vocabulary.
pub fn shape_of(base: &[f32], lse: f64, q: &[f64], entropy: f64) -> [f64; 3] {
    let tail = TAIL.ln();
    let (mut top, mut mass, mut cross) = (0.0f64, 0.0, 0.0);
    for (&x, &p) in base.iter().zip(q) {
        if p > 0.0 {
            let lp = f64::from(x) - lse;
            top = top.max(p);
            if lp < tail {
                mass += p;
            }
            cross += p * lp;
        }
    }
    [top, mass, -entropy - cross]
}

/// A text judged by a model: the log-probability of each token of a continuation given
/// its prompt, teacher-forced, in the judge's own tokens.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    /// Per token (nats).
    pub logprobs: Vec<f64>,
}

impl Judged {
    /// The continuation's length in the judge's tokens.
    pub fn tokens(&self) -> usize {
        self.logprobs.len()
    }

    /// The largest and the mean absolute difference per token from `other`, a
    /// judgement of the same tokens (0 and 0 without tokens).
    pub fn differences(&self, other: &Judged) -> (f64, f64) {
        let d: Vec<f64> = (self.logprobs.iter().zip(&other.logprobs))
            .map(|(a, b)| (a - b).abs())
            .collect();
        let mean = d.iter().sum::<f64>() / d.len().max(1) as f64;
        (d.iter().copied().fold(0.0, f64::max), mean)
    }

    /// The mean log-probability per token (0 without tokens).
    pub fn mean_logprob(&self) -> f64 {
        if self.logprobs.is_empty() {
            0.0
        } else {
            self.logprobs.iter().sum::<f64>() / self.logprobs.len() as f64
        }
    }
}

/// Forces a known continuation, token by token, and records each one's base
/// log-probability (and, when asked, the base logits it was forced from): a
/// teacher-forced judge through the engine.
struct Forcer {
    tokens: Vec<u32>,
    logprobs: Mutex<Vec<f64>>,
    rows: Option<Mutex<Vec<Vec<f32>>>>,
}

impl mistralrs_core::CustomLogitsProcessor for Forcer {
    fn apply(&self, logits: &Tensor, _: &[u32]) -> candle_core::Result<Tensor> {
        let mut y: Vec<f32> = logits.to_vec1()?;
        let mut seen = self.logprobs.lock().unwrap();
        if let Some(&tok) = self.tokens.get(seen.len()) {
            let lp = log_softmax(&y, 1.0).and_then(|l| l.get(tok as usize).copied());
            seen.push(lp.unwrap_or(f64::NEG_INFINITY));
            if let Some(rows) = &self.rows {
                rows.lock().unwrap().push(y.clone());
            }
            pin(&mut y, tok as usize);
        }
        Tensor::from_vec(y, logits.dims1()?, logits.device())
    }
}

/// The engine model's judgement of `continuation` as its reply to `prompt` (the chat
/// template, as the engine's own samples are drawn): its tokens as the engine's
/// tokenizer reads the text alone, forced one by one, each one's log-probability
/// recorded. A forced end-of-sequence token ends it early.
pub async fn judge(
    model: &mistralrs::Model,
    prompt: &str,
    continuation: &str,
) -> Result<Judged, EvalError> {
    let forcer = force(model, prompt, continuation, false).await?;
    let logprobs = std::mem::take(&mut *forcer.logprobs.lock().unwrap());
    Ok(Judged { logprobs })
}

/// The base logits before each token of `continuation` as the engine model's reply to
/// `prompt` (teacher-forced, as [`judge`] reads it), with those tokens.
pub async fn forced_rows(
    model: &mistralrs::Model,
    prompt: &str,
    continuation: &str,
) -> Result<(Vec<u32>, Vec<Vec<f32>>), EvalError> {
    let forcer = force(model, prompt, continuation, true).await?;
    let rows = std::mem::take(&mut *forcer.rows.as_ref().unwrap().lock().unwrap());
    Ok((forcer.tokens[..rows.len()].to_vec(), rows))
}

async fn force(
    model: &mistralrs::Model,
    prompt: &str,
    continuation: &str,
    keep_rows: bool,
) -> Result<Arc<Forcer>, EvalError> {
    let text = either::Either::Right(continuation.to_string());
    let tokens = model
        .tokenize(text, None, false, false, None)
        .await
        .map_err(EvalError::engine)?;
    let forcer = Arc::new(Forcer {
        tokens,
        logprobs: Mutex::default(),
        rows: keep_rows.then(Mutex::default),
    });
    if forcer.tokens.is_empty() {
        return Ok(forcer);
    }
    let req = RequestBuilder::new()
        .add_message(TextMessageRole::User, prompt)
        .set_sampler_max_len(forcer.tokens.len())
        .set_sampler_temperature(1.0)
        .set_sampler_topk(0)
        .set_sampler_topp(1.0)
        .set_sampler_minp(0.0)
        .add_logits_processor(forcer.clone());
    model
        .send_chat_request(req)
        .await
        .map_err(EvalError::engine)?;
    Ok(forcer)
}

/// The index `u` (in `[0, 1)`) falls on in the cumulative distribution `q`: the draw of
/// inverse transform sampling. `q` may sum to a little under 1 (rounding): `u` is scaled
/// to its sum. Never an entry of zero probability.
pub fn draw(q: &[f64], u: f64) -> usize {
    let total: f64 = q.iter().sum();
    let target = u * total;
    let mut cum = 0.0;
    let mut last = 0;
    for (i, &p) in q.iter().enumerate() {
        if p > 0.0 {
            cum += p;
            last = i;
            if target < cum {
                return i;
            }
        }
    }
    last
}

/// Logits that leave the host one token to draw: `pick` at 0, every other `-inf`.
pub fn pin(y: &mut [f32], pick: usize) {
    y.fill(f32::NEG_INFINITY);
    y[pick] = 0.0;
}

/// The FNV-1a hash of `bytes`: stable seeds and fingerprints.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A small deterministic generator (SplitMix64): the search's draws and each seeded
/// sample's.
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)` (53 bits).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform pick from `from` (not empty).
    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[(self.next_u64() % from.len() as u64) as usize]
    }

    /// The generator seeded by a text's FNV-1a hash: a stable seed for a named sample.
    pub fn named(name: &str) -> SplitMix {
        SplitMix(fnv1a(name.bytes()))
    }
}

/// One chat generation of `prompt` with `sampler`, at most `max_tokens` tokens: the text
/// and its trace. The host draws each token with its own generator.
pub async fn generate(
    model: &mistralrs::Model,
    prompt: &str,
    sampler: &Sampler,
    max_tokens: usize,
) -> Result<(String, Trace), EvalError> {
    run(model, prompt, sampler, max_tokens, None).await
}

/// [`generate`] with every token drawn here, from the sampler's distribution (computed in
/// `f64`, the same one the host would draw from), by a generator seeded with `seed`: the
/// same seed gives the same sample whatever ran before it on the engine, so a resumed run
/// equals an uninterrupted one.
pub async fn generate_seeded(
    model: &mistralrs::Model,
    prompt: &str,
    sampler: &Sampler,
    max_tokens: usize,
    seed: SplitMix,
) -> Result<(String, Trace), EvalError> {
    run(model, prompt, sampler, max_tokens, Some(seed)).await
}

async fn run(
    model: &mistralrs::Model,
    prompt: &str,
    sampler: &Sampler,
    max_tokens: usize,
    seed: Option<SplitMix>,
) -> Result<(String, Trace), EvalError> {
    let rec = Arc::new(Recorder {
        sampler: sampler.clone(),
        draws: seed.map(Mutex::new),
        state: Mutex::new(State {
            memory: sampler.memory(),
            ..State::default()
        }),
    });
    let req = RequestBuilder::new()
        .add_message(TextMessageRole::User, prompt)
        .set_sampler_max_len(max_tokens)
        .set_sampler_temperature(sampler.temperature())
        .set_sampler_topk(0)
        .set_sampler_topp(1.0)
        .set_sampler_minp(0.0)
        .add_logits_processor(rec.clone());
    let resp = model
        .send_chat_request(req)
        .await
        .map_err(EvalError::engine)?;
    let text = resp
        .choices
        .first()
        .and_then(|c| c.message.content.clone())
        .unwrap_or_default();
    let trace = std::mem::take(&mut rec.state.lock().unwrap().trace);
    Ok((text, trace))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thesis measures of a step by hand: base logits [0, −10] (p = [0.99995,
    /// 4.54e-5]: the second token is tail), drawn from q = [0.7, 0.3]; KL by Python's
    /// math module: 0.7·ln(0.7/0.99995) + 0.3·ln(0.3/4.54e-5) = 2.389181.
    #[test]
    fn a_steps_shape_by_hand() {
        let base = [0.0f32, -10.0, f32::NEG_INFINITY];
        let lse = crate::metrics::log_sum_exp(&base, 1.0).unwrap();
        let q = [0.7, 0.3, 0.0];
        let [top, tail, kl] = shape_of(&base, lse, &q, entropy_of(&q));
        assert_eq!(top, 0.7);
        assert!((tail - 0.3).abs() < 1e-15);
        assert!((kl - 2.389_181_096_844).abs() < 1e-9, "{kl}");
        // Drawn from the base itself: no KL, and the base's own tail mass.
        let p: Vec<f64> = base.iter().map(|&x| (f64::from(x) - lse).exp()).collect();
        let [_, tail, kl] = shape_of(&base, lse, &p, entropy_of(&p));
        assert!(kl.abs() < 1e-12 && (tail - 4.539_786_87e-5).abs() < 1e-12);
    }

    /// The engine's processor carries adaptive-p's running average from step to step:
    /// the host's draw, read from the context at the next call, enters it, so the second
    /// step aims where the sampler's own memory says it should.
    #[test]
    fn the_recorder_carries_adaptive_p_memory_across_steps() {
        use mistralrs_core::CustomLogitsProcessor;
        let sampler = Sampler::AdaptiveP {
            t: 1.0,
            target: 0.5,
            decay: 0.9,
            min_p: 0.0,
        };
        let rec = Recorder {
            sampler: sampler.clone(),
            draws: None,
            state: Mutex::new(State {
                memory: sampler.memory(),
                ..State::default()
            }),
        };
        let x = [2.0f32, 1.0, 0.0, -1.0];
        let logits = Tensor::new(&x[..], &candle_core::Device::Cpu).unwrap();
        let step = |context: &[u32]| -> Vec<f32> {
            rec.apply(&logits, context).unwrap().to_vec1().unwrap()
        };
        // The prompt's last token is not a draw: the first step aims at the target.
        let first = step(&[7]);
        let mut memory = sampler.memory();
        let mut want = x.to_vec();
        sampler.transform_in(&mut want, &mut memory);
        assert_eq!(first, want);
        // The host drew token 2; the next step aims by the average that includes it.
        let second = step(&[7, 2]);
        sampler.accept(&mut memory, 2);
        let mut want = x.to_vec();
        sampler.transform_in(&mut want, &mut memory);
        assert_eq!(second, want);
        assert_ne!(second, first);
        assert_eq!(rec.state.lock().unwrap().memory, memory);
    }

    #[test]
    fn a_draw_inverts_the_cumulative_distribution() {
        let q = [0.0, 0.25, 0.0, 0.5, 0.25];
        assert_eq!(draw(&q, 0.0), 1);
        assert_eq!(draw(&q, 0.2499), 1);
        assert_eq!(draw(&q, 0.25), 3);
        assert_eq!(draw(&q, 0.7499), 3);
        assert_eq!(draw(&q, 0.75), 4);
        // A sum under 1 (rounding) is scaled to, so the last kept entry is still reached
        // and a zero entry after it never is.
        assert_eq!(draw(&[0.3, 0.3, 0.0], 0.999), 1);
    }

    #[test]
    fn seeded_draws_follow_the_distribution() {
        // 20000 draws of a known distribution: each frequency within 4 standard errors.
        let q = [0.5, 0.3, 0.15, 0.05, 0.0];
        let mut rng = SplitMix::named("test");
        let mut counts = [0usize; 5];
        let n = 20_000;
        for _ in 0..n {
            counts[draw(&q, rng.unit())] += 1;
        }
        for (c, p) in counts.iter().zip(q) {
            let f = *c as f64 / n as f64;
            let se = (p * (1.0 - p) / n as f64).sqrt();
            assert!((f - p).abs() <= 4.0 * se, "{counts:?}");
        }
        assert_eq!(counts[4], 0);
    }

    #[test]
    fn named_streams_are_stable_and_distinct() {
        let stream = |name: &str| {
            let mut r = SplitMix::named(name);
            [r.next_u64(), r.next_u64(), r.next_u64()]
        };
        let (a, b) = (stream("0.8|temperature|3|1"), stream("0.8|temperature|3|1"));
        let c = stream("0.8|temperature|3|2")[0];
        assert_eq!(a, b);
        assert_ne!(a[0], c);
        // FNV-1a of the empty text is its offset basis; SplitMix64's first output from 0
        // is a published constant.
        assert_eq!(SplitMix::named("").0, 0xcbf2_9ce4_8422_2325);
        assert_eq!(SplitMix(0).next_u64(), 0xe220_a839_7b1d_cdaf);
        let u = SplitMix(0).unit();
        assert!((0.0..1.0).contains(&u));
    }
}
