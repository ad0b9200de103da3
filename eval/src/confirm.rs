//! Online confirmation of the offline frontier (issue #19): at each entropy level, a
//! handful of settings per family, each at the temperature its screening matched
//! ([`super::frontier`]), sample the open-ended prompts on the model; their diversity
//! (distinct-n, self-BLEU) and quality (tail-garbage rate, mean base log-probability)
//! are measured with standard errors over prompts, and paired, prompt by prompt, against
//! plain temperature at the same level.
//!
//! The run is resumable sample by sample: every finished sample is appended to its
//! method's file (`OUT/confirm/level-<T>/<method>.jsonl`) and a run reads back what is
//! there. Each sample's tokens are drawn by the evaluation from a stream seeded by its
//! level, method, prompt and index ([`super::generate::generate_seeded`]), so a run done
//! in parts holds exactly the samples of a run done at once, and more prompts or samples
//! later extend a finished run instead of replacing it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::frontier::{self, Family, Measure, Screened};
use super::generate::{Judged, SplitMix, Trace};
use super::journal;
use super::lm::Lm;
use super::metrics::Stats;
use super::sampler::Sampler;
pub use super::stats::Estimate;
use super::text::{distinct_n, self_bleu, words, Dictionary};
use super::EvalError;

/// Prompts per method by default: 4× the tokens of `eval diversity` (24 × 8 × 16) with
/// twice the prompts and twice the length.
pub const PROMPTS: usize = 48;
/// Samples sent to the engine at once by default, on an engine whose batches are right:
/// on this project's 2 cores, with the dequantized weights, 16 concurrent requests of 32
/// tokens took 0.75 s each, 8 took 1.0 s, one at a time 2.9 s (`docs/NOTES.md`).
pub const BATCH: usize = 16;
/// Samples per prompt by default.
pub const SAMPLES: usize = 8;
/// Tokens per sample by default.
pub const MAX_TOKENS: usize = 32;

/// One method to confirm at one level: a screened setting at its matched temperature.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Planned {
    /// The family.
    pub family: Family,
    /// The knob in words ([`frontier::knob`]).
    pub knob: String,
    /// The sampler at its matched temperature.
    pub sampler: Sampler,
    /// Its offline measures at that temperature.
    pub offline: Stats,
    /// The sampler's temperature over its matched one: 1, or a step of the online
    /// entropy matching ([`with_temperatures`]).
    #[serde(default = "one")]
    pub t_scale: f64,
    /// The name of the random streams its samples draw from, when not its own
    /// ([`Planned::name`]): settings that share one draw on the same luck (common random
    /// numbers), so that their differences are theirs, not their draws'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
}

fn one() -> f64 {
    1.0
}

impl Planned {
    fn of(p: &Screened) -> Planned {
        Planned {
            family: p.family,
            knob: p.knob.clone(),
            sampler: p.sampler.clone(),
            offline: p.stats,
            t_scale: 1.0,
            stream: None,
        }
    }

    /// `family knob` (`temperature`, `top-p p = 0.9`, `hlg top-4 w3 s2 t1 quadratic`): the
    /// method's name in tables, files and seeds.
    pub fn name(&self) -> String {
        if self.knob.is_empty() {
            self.family.name().to_string()
        } else {
            format!("{} {}", self.family.name(), self.knob)
        }
    }

    /// The file its samples go to under a level's directory.
    pub fn file_name(&self) -> String {
        let slug: String = self
            .name()
            .chars()
            .map(|c| match c {
                'σ' => 's',
                c if c.is_ascii_alphanumeric() || c == '.' || c == '-' => c,
                _ => '_',
            })
            .collect();
        match self.t_scale {
            1.0 => format!("{slug}.jsonl"),
            f => format!("{slug}_x{f}.jsonl"),
        }
    }

    /// The draws of sample `sample` of prompt `prompt` at `level`.
    pub fn seed(&self, level: f64, prompt: &str, sample: usize) -> SplitMix {
        let stream = self.stream.clone().unwrap_or_else(|| self.name());
        SplitMix::named(&format!("{level}|{stream}|{prompt}|{sample}"))
    }
}

/// Each planned method at its matched temperature times each of `scales` (1 included
/// or not, as given), for the online entropy matching: every variant keeps the method's
/// name, so its samples draw from the same streams (common random numbers: the
/// variants differ by temperature, not by luck).
pub fn with_temperatures(plan: &[Planned], scales: &[f64]) -> Vec<Planned> {
    plan.iter()
        .flat_map(|m| {
            scales.iter().map(|&f| Planned {
                sampler: m.sampler.at(m.sampler.temperature() * f),
                t_scale: f,
                ..m.clone()
            })
        })
        .collect()
}

/// The methods to confirm at `level`: plain temperature; for every other family but HLG
/// (top-p, min-p, top-nσ, smoothing, dynamic temperature, p-less, top-H), up to
/// `per_family` settings each (those on the level's frontier first, then those no other
/// setting of the family beats, then by expected base log-probability); for HLG, the
/// shipped knobs and `hlg` settings spread along the HLG part of the frontier (its two
/// ends included), so that the online points cover the range the screening found.
pub fn plan(level: &frontier::Screening, per_family: usize, hlg: usize) -> Vec<Planned> {
    let front = level.frontier();
    let on_front = |p: &Screened| front.iter().any(|q| std::ptr::eq(*q, p));
    let mut out = vec![];
    for family in Family::ALL {
        let mut of: Vec<&Screened> = level
            .points
            .iter()
            .filter(|p| p.family == family && p.matched)
            .collect();
        match family {
            Family::Temperature => out.extend(of.first().map(|p| Planned::of(p))),
            Family::Hlg => {
                let shipped = frontier::knob(&Sampler::Hlg {
                    t: 1.0,
                    hlg: mistralrs_hlg::HlgConfig::default().resolved(true),
                });
                out.extend(
                    of.iter()
                        .find(|p| p.knob == shipped)
                        .map(|p| Planned::of(p)),
                );
                let on: Vec<&Screened> = front
                    .iter()
                    .copied()
                    .filter(|p| p.family == Family::Hlg && p.knob != shipped)
                    .collect();
                out.extend(
                    spread(on.len(), hlg)
                        .into_iter()
                        .map(|i| Planned::of(on[i])),
                );
            }
            _ => {
                let own = family_frontier(&of);
                let rank = |p: &&Screened| {
                    (
                        !on_front(p),
                        !own.iter().any(|q| std::ptr::eq(*q, *p)),
                        -p.stats.base_logprob,
                    )
                };
                of.sort_by(|a, b| {
                    let (x, y) = (rank(a), rank(b));
                    (x.0, x.1).cmp(&(y.0, y.1)).then(x.2.total_cmp(&y.2))
                });
                out.extend(of.iter().take(per_family).map(|p| Planned::of(p)));
            }
        }
    }
    out
}

/// `k` indices out of `0..n`, evenly spread with both ends (all of them when `k ≥ n`).
pub fn spread(n: usize, k: usize) -> Vec<usize> {
    if k >= n {
        return (0..n).collect();
    }
    match k {
        0 => vec![],
        1 => vec![0],
        _ => {
            let mut v: Vec<usize> = (0..k)
                .map(|i| ((i * (n - 1)) as f64 / (k - 1) as f64).round() as usize)
                .collect();
            v.dedup();
            v
        }
    }
}

/// The settings of one family that no other of the same family beats on both offline
/// measures.
fn family_frontier<'a>(of: &[&'a Screened]) -> Vec<&'a Screened> {
    let level = frontier::Screening {
        level: 0.0,
        target_entropy: 0.0,
        positions: 0,
        capture: String::new(),
        points: of.iter().map(|p| (*p).clone()).collect(),
    };
    let kept: Vec<String> = level.frontier().iter().map(|p| p.knob.clone()).collect();
    of.iter()
        .copied()
        .filter(|p| kept.contains(&p.knob))
        .collect()
}

/// The methods of the capability guardrail for a level's plan: every planned method at
/// its matched temperature, then plain temperature at each HLG method's temperature (the
/// same-temperature reference), each temperature once.
pub fn guardrail_samplers(plan: &[Planned]) -> Vec<Sampler> {
    let mut out: Vec<Sampler> = plan.iter().map(|m| m.sampler.clone()).collect();
    for m in plan.iter().filter(|m| m.family == Family::Hlg) {
        let same = Sampler::Temperature {
            t: m.sampler.temperature(),
        };
        if !out.contains(&same) {
            out.push(same);
        }
    }
    out
}

/// One finished sample, as its method's file holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The prompt's index in the prompt list.
    pub prompt: usize,
    /// The prompt's text (a changed prompt list does not mix in other prompts' samples).
    pub prompt_text: String,
    /// The sample's index for this prompt.
    pub sample: usize,
    /// The generated text.
    pub text: String,
    /// What the generation recorded.
    pub trace: Trace,
    /// The other model's judgement of the text (runs with a judge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged: Option<Judged>,
}

/// The first line of a method's file: what its samples were drawn with.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Header {
    method: String,
    temperature: f64,
    max_tokens: usize,
    /// The streams drawn from when not the method's own ([`Planned::stream`]): a file
    /// drawn from other streams is another run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stream: Option<String>,
}

impl Header {
    /// Whether `line` is this header (another run's file is set aside).
    fn reads(&self, line: &str) -> bool {
        serde_json::from_str::<Header>(line).is_ok_and(|h| h.same(self))
    }

    fn same(&self, other: &Header) -> bool {
        self.method == other.method
            && self.max_tokens == other.max_tokens
            && self.stream == other.stream
            // serde_json reads floats back to within an ulp.
            && (self.temperature - other.temperature).abs() <= 1e-12 * other.temperature
    }
}

/// A method's samples on disk: read back on open, appended one by one.
pub struct Store {
    path: PathBuf,
    header: Header,
    /// The samples read back or added.
    pub samples: Vec<Sample>,
}

impl Store {
    /// The file of `method` under `dir` with its samples. A file written for another
    /// temperature or length is moved aside (`.stale`); a torn last line (a run stopped
    /// while writing) is dropped.
    pub fn open(dir: &Path, method: &Planned, max_tokens: usize) -> Result<Store, EvalError> {
        let path = dir.join(method.file_name());
        let header = Header {
            method: method.name(),
            temperature: method.sampler.temperature(),
            max_tokens,
            stream: method.stream.clone(),
        };
        let first = serde_json::to_string(&header).expect("a header serialises");
        let samples = journal::open(&path, &first, |l| header.reads(l))?;
        Ok(Store {
            path,
            header,
            samples,
        })
    }

    /// Whether sample `sample` of `prompt` is there.
    pub fn has(&self, prompt: &str, sample: usize) -> bool {
        self.samples
            .iter()
            .any(|s| s.prompt_text == prompt && s.sample == sample)
    }

    /// Adds a finished sample, on disk first. What is kept is the line read back, as a
    /// later run reads it (serde_json reads some floats back an ulp away), so a run done
    /// in parts measures exactly what a run done at once does.
    pub fn push(&mut self, s: Sample) -> Result<(), EvalError> {
        let text = journal::append(&self.path, &s)?;
        self.samples
            .push(serde_json::from_str(&text).expect("a sample reads back"));
        Ok(())
    }
}

/// The samples of `method` under `dir` as they are, for a report: nothing is written, so
/// a run still adding to the file is not disturbed (a torn last line is left out, and a
/// file of another temperature or length reads as none).
pub fn read_samples(dir: &Path, method: &Planned, max_tokens: usize) -> Vec<Sample> {
    let header = Header {
        method: method.name(),
        temperature: method.sampler.temperature(),
        max_tokens,
        stream: method.stream.clone(),
    };
    std::fs::read_to_string(dir.join(method.file_name()))
        .ok()
        .and_then(|text| journal::parse(&text, |l| header.reads(l)))
        .unwrap_or_default()
}

/// How a level's samples are drawn: on which model, at which level, how many per prompt
/// and how many sent at once.
#[derive(Clone, Copy)]
pub struct Draws<'a> {
    /// The model.
    pub model: Lm<'a>,
    /// The model that judges each new sample, when there is one.
    pub judge: Option<Lm<'a>>,
    /// The level (plain temperature's T), part of every sample's seed.
    pub level: f64,
    /// Samples per prompt.
    pub samples: usize,
    /// At most this many generations at once.
    pub batch: usize,
    /// At most this many judgements at once (the engine as judge, where its batched rows
    /// are right; 1 otherwise).
    pub judge_batch: usize,
}

/// Generates the samples of `method` that `store` does not hold yet: every prompt ×
/// `draws.samples`, prompt by prompt. `progress` after each new sample.
pub async fn run_method(
    draws: Draws<'_>,
    store: &mut Store,
    method: &Planned,
    prompts: &[&str],
    mut progress: impl FnMut(),
) -> Result<(), EvalError> {
    let (methods, stores) = (std::slice::from_ref(method), std::slice::from_mut(store));
    for (p, prompt) in prompts.iter().enumerate() {
        run_prompt(draws, methods, stores, (p, *prompt), &mut progress).await?;
    }
    Ok(())
}

/// The samples of prompt `p` (its index and text) that the stores do not hold yet, for
/// every method of a level (`methods[j]`'s into `stores[j]`). A run goes prompt by prompt
/// over every method, so that a run stopped early has every method on the same prompts,
/// and the paired comparisons hold at any point.
///
/// Up to `draws.batch` samples are sent at once, which the engine decodes as one batch
/// (one prompt: the same length). Only sound on an engine whose batched rows equal each
/// sequence decoded alone (`server::engine::probe`): each sample's tokens are drawn from
/// its own seeded stream, so the samples are then those of a run one at a time. The
/// samples of a batch are stored in order once all of them are done.
pub async fn run_prompt(
    draws: Draws<'_>,
    methods: &[Planned],
    stores: &mut [Store],
    (p, prompt): (usize, &str),
    mut progress: impl FnMut(),
) -> Result<(), EvalError> {
    let Draws {
        model,
        judge,
        level,
        samples,
        batch,
        judge_batch,
    } = draws;
    let todo: Vec<(usize, usize)> = (0..methods.len())
        .flat_map(|j| (0..samples).map(move |k| (j, k)))
        .filter(|&(j, k)| !stores[j].has(prompt, k))
        .collect();
    // In chunks of `batch`, each stored once all of it is done: a stopped run loses at
    // most one chunk.
    for chunk in todo.chunks(batch.max(1)) {
        let seeds: Vec<SplitMix> = chunk
            .iter()
            .map(|&(j, k)| methods[j].seed(level, prompt, k))
            .collect();
        let rows: Vec<(&Sampler, usize, SplitMix)> = chunk
            .iter()
            .zip(&seeds)
            .map(|(&(j, _), seed)| {
                (
                    &methods[j].sampler,
                    stores[j].header.max_tokens,
                    seed.clone(),
                )
            })
            .collect();
        let done = model.generate_many(prompt, &rows, batch).await?;
        let judged = judge_all(judge, judge_batch, prompt, &done).await?;
        for ((&(j, k), (text, trace)), judged) in chunk.iter().zip(done).zip(judged) {
            stores[j].push(Sample {
                prompt: p,
                prompt_text: prompt.to_string(),
                sample: k,
                text,
                trace,
                judged,
            })?;
            progress();
        }
    }
    Ok(())
}

/// [`run_prompt`] over several prompts at once (`(index, text)` each): the samples the
/// stores lack, every method × sample of every prompt, prompt-major, drawn `draws.batch`
/// at a time as the rows of one batched decode across prompts where the model has one
/// ([`Lm::generate_across`]), judged, and stored once each chunk is done (a stopped run
/// loses at most one chunk). The same samples as prompt by prompt: each draws from its
/// own seeded stream.
pub async fn run_prompts(
    draws: Draws<'_>,
    methods: &[Planned],
    stores: &mut [Store],
    prompts: &[(usize, &str)],
    mut progress: impl FnMut(),
) -> Result<(), EvalError> {
    let todo: Vec<(usize, usize, usize)> = (0..prompts.len())
        .flat_map(|q| {
            (0..methods.len()).flat_map(move |j| (0..draws.samples).map(move |k| (q, j, k)))
        })
        .filter(|&(q, j, k)| !stores[j].has(prompts[q].1, k))
        .collect();
    let texts: Vec<&str> = prompts.iter().map(|(_, t)| *t).collect();
    for chunk in todo.chunks(draws.batch.max(1)) {
        let rows: Vec<(usize, &Sampler, usize, SplitMix)> = chunk
            .iter()
            .map(|&(q, j, k)| {
                let seed = methods[j].seed(draws.level, prompts[q].1, k);
                (q, &methods[j].sampler, stores[j].header.max_tokens, seed)
            })
            .collect();
        let done = draws
            .model
            .generate_across(&texts, &rows, draws.batch)
            .await?;
        for (&(q, j, k), (text, trace)) in chunk.iter().zip(done) {
            let one = [(text, trace)];
            let judged = judge_all(draws.judge, 1, prompts[q].1, &one).await?;
            let [(text, trace)] = one;
            stores[j].push(Sample {
                prompt: prompts[q].0,
                prompt_text: prompts[q].1.to_string(),
                sample: k,
                text,
                trace,
                judged: judged.into_iter().next().flatten(),
            })?;
            progress();
        }
    }
    Ok(())
}

/// The judge's reading of each sample (`None` each without a judge), `batch` at once.
async fn judge_all(
    judge: Option<Lm<'_>>,
    batch: usize,
    prompt: &str,
    samples: &[(String, Trace)],
) -> Result<Vec<Option<Judged>>, EvalError> {
    let Some(judge) = judge else {
        return Ok(vec![None; samples.len()]);
    };
    let mut out = Vec::with_capacity(samples.len());
    for chunk in samples.chunks(batch.max(1)) {
        let runs = chunk.iter().map(|(text, _)| judge.judge(prompt, text));
        for j in futures::future::join_all(runs).await {
            out.push(Some(j?));
        }
    }
    Ok(out)
}

/// One prompt's measures over its samples.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PromptMeasures {
    /// Distinct-1/2/3 over the prompt's samples.
    pub distinct: [f64; 3],
    /// Self-BLEU-4 of the samples.
    pub self_bleu: f64,
    /// Share of the drawn tokens whose base probability is below 1e-4.
    pub tail_rate: f64,
    /// Mean base log-probability of the drawn tokens.
    pub base_logprob: f64,
    /// Mean entropy of the distributions sampled from.
    pub entropy: f64,
    /// Tokens scored.
    pub tokens: usize,
    /// Share of the samples' words that the system word list does not hold (NaN without
    /// a list: `text::Dictionary::system`).
    pub non_word_rate: f64,
    /// Mean log-probability per token under the judging model, over the judged samples'
    /// tokens (NaN when none was judged).
    pub judged_logprob: f64,
    /// The judged samples' summed log-probability over their text's UTF-8 bytes (NaN
    /// when none was judged). Unlike the mean per token it does not depend on how the
    /// judge's tokenizer splits the text: other-script garbage splits into many nearly
    /// certain byte tokens, which raises the mean per token (docs/NOTES.md).
    pub judged_logprob_per_byte: f64,
    /// How the judge read the samples: its tokens per judged sample (NaN when none was
    /// judged), the samples' mean UTF-8 bytes, and the share of their characters outside
    /// ASCII (0 without characters). Text in other scripts shows in the last and inflates
    /// the first.
    pub judged_text: JudgedText,
}

/// How long the samples are to the judge and in bytes, and how much of them is outside
/// ASCII ([`PromptMeasures::judged_text`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct JudgedText {
    /// Judge tokens per judged sample.
    pub tokens: f64,
    /// UTF-8 bytes per sample.
    pub bytes: f64,
    /// Non-ASCII characters over all characters.
    pub non_ascii: f64,
}

impl JudgedText {
    fn of(samples: &[&Sample], judged_tokens: usize) -> JudgedText {
        let judged = samples.iter().filter(|s| s.judged.is_some()).count();
        let bytes: usize = samples.iter().map(|s| s.text.len()).sum();
        let (wide, chars) = samples.iter().fold((0, 0), |(w, c), s| {
            (
                w + s.text.chars().filter(|ch| !ch.is_ascii()).count(),
                c + s.text.chars().count(),
            )
        });
        JudgedText {
            tokens: match judged {
                0 => f64::NAN,
                n => judged_tokens as f64 / n as f64,
            },
            bytes: bytes as f64 / samples.len().max(1) as f64,
            non_ascii: match chars {
                0 => 0.0,
                n => wide as f64 / n as f64,
            },
        }
    }
}

impl PromptMeasures {
    /// The measures of one prompt's samples (`None` without any scored token).
    pub fn of(samples: &[&Sample]) -> Option<PromptMeasures> {
        let ws: Vec<Vec<String>> = samples.iter().map(|s| words(&s.text)).collect();
        let lp: Vec<f64> = samples
            .iter()
            .flat_map(|s| s.trace.base_logprob.iter().copied())
            .collect();
        let ent: Vec<f64> = samples
            .iter()
            .flat_map(|s| s.trace.entropy.iter().copied())
            .collect();
        if lp.is_empty() {
            return None;
        }
        let tail: usize = samples.iter().map(|s| s.trace.tail_tokens()).sum();
        let non_word_rate = Dictionary::system().map_or(f64::NAN, |d| {
            let (bad, all) = samples.iter().fold((0, 0), |(b, a), s| {
                let (nb, na) = d.non_words(&s.text);
                (b + nb, a + na)
            });
            if all == 0 {
                0.0
            } else {
                bad as f64 / all as f64
            }
        });
        let (mut judged_sum, mut judged_tokens, mut judged_bytes) = (0.0, 0, 0);
        for (s, j) in samples
            .iter()
            .filter_map(|s| s.judged.as_ref().map(|j| (s, j)))
        {
            // One running sum in token order, as the mean per token always summed.
            judged_sum = j.logprobs.iter().fold(judged_sum, |a, x| a + x);
            judged_tokens += j.logprobs.len();
            judged_bytes += s.text.len();
        }
        let per = |n: usize| match n {
            0 => f64::NAN,
            n => judged_sum / n as f64,
        };
        Some(PromptMeasures {
            non_word_rate,
            judged_logprob: per(judged_tokens),
            judged_logprob_per_byte: per(judged_bytes),
            judged_text: JudgedText::of(samples, judged_tokens),
            distinct: [1, 2, 3].map(|n| distinct_n(&ws, n)),
            self_bleu: self_bleu(&ws),
            tail_rate: tail as f64 / lp.len() as f64,
            base_logprob: lp.iter().sum::<f64>() / lp.len() as f64,
            entropy: Estimate::of(&ent).mean,
            tokens: lp.len(),
        })
    }
}

/// Paired differences, this method minus the reference, prompt by prompt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    /// Prompts in both.
    pub prompts: usize,
    /// Distinct-1 (`serde(default)`: files written before it was measured).
    #[serde(default)]
    pub distinct1: Estimate,
    /// Distinct-2.
    pub distinct2: Estimate,
    /// Self-BLEU.
    pub self_bleu: Estimate,
    /// Tail-garbage rate.
    pub tail_rate: Estimate,
    /// Mean base log-probability.
    pub base_logprob: Estimate,
}

/// One method's online measures at one level.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Confirmed {
    /// What ran.
    pub method: Planned,
    /// Prompts measured (those with every sample done).
    pub prompts: usize,
    /// Samples per prompt.
    pub samples: usize,
    /// Tokens scored.
    pub tokens: usize,
    /// Distinct-1/2/3.
    pub distinct: [Estimate; 3],
    /// Self-BLEU-4 (lower: more diverse).
    pub self_bleu: Estimate,
    /// Tail-garbage rate.
    pub tail_rate: Estimate,
    /// Mean base log-probability.
    pub base_logprob: Estimate,
    /// Mean entropy of the distributions sampled from.
    pub entropy: Estimate,
    /// Share of words not in the system word list (a garbage measure no model decides).
    #[serde(default)]
    pub non_word_rate: Estimate,
    /// Mean log-probability per token under the other model (NaN: not judged).
    #[serde(default)]
    pub judged_logprob: Estimate,
    /// The same per byte of text (`PromptMeasures::judged_logprob_per_byte`).
    #[serde(default)]
    pub judged_logprob_per_byte: Estimate,
    /// Judge tokens per judged sample, bytes per sample, share of non-ASCII characters
    /// (`PromptMeasures::judged_text`).
    #[serde(default)]
    pub judged_text: [Estimate; 3],
    /// Against plain temperature at the level, on the same prompts (`None` for plain
    /// temperature itself, or before it ran).
    pub vs_temperature: Option<Paired>,
    /// On the online frontier of distinct-2 against the tail-garbage rate / against the
    /// mean base log-probability at this level.
    pub on_frontier: [bool; 2],
    /// The same with distinct-1 as the diversity measure: at high entropy every method's
    /// distinct-2 is near 1 over 32-token samples, and distinct-1 still separates them.
    #[serde(default)]
    pub on_frontier_distinct1: [bool; 2],
}

/// Each complete prompt's measures, by prompt index.
pub fn per_prompt(
    samples: &[Sample],
    prompts: &[&str],
    per: usize,
) -> Vec<(usize, PromptMeasures)> {
    prompts
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let mine: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.prompt_text == *p && s.sample < per)
                .collect();
            if mine.len() < per {
                return None;
            }
            PromptMeasures::of(&mine).map(|m| (i, m))
        })
        .collect()
}

fn paired(a: &[(usize, PromptMeasures)], b: &[(usize, PromptMeasures)]) -> Paired {
    let both: Vec<(&PromptMeasures, &PromptMeasures)> = a
        .iter()
        .filter_map(|(i, x)| b.iter().find(|(j, _)| j == i).map(|(_, y)| (x, y)))
        .collect();
    let d = |f: fn(&PromptMeasures) -> f64| {
        Estimate::of(&both.iter().map(|(x, y)| f(x) - f(y)).collect::<Vec<_>>())
    };
    Paired {
        prompts: both.len(),
        distinct1: d(|m| m.distinct[0]),
        distinct2: d(|m| m.distinct[1]),
        self_bleu: d(|m| m.self_bleu),
        tail_rate: d(|m| m.tail_rate),
        base_logprob: d(|m| m.base_logprob),
    }
}

/// The methods' measures at one level from their samples (`runs[i]` for `methods[i]`),
/// paired against plain temperature and marked on the online frontiers.
pub fn measure(
    methods: &[Planned],
    runs: &[Vec<Sample>],
    prompts: &[&str],
    samples: usize,
) -> Vec<Confirmed> {
    let pp: Vec<Vec<(usize, PromptMeasures)>> = runs
        .iter()
        .map(|r| per_prompt(r, prompts, samples))
        .collect();
    let reference = methods
        .iter()
        .position(|m| m.family == Family::Temperature)
        .filter(|&i| !pp[i].is_empty());
    let mut out: Vec<Confirmed> = methods
        .iter()
        .zip(&pp)
        .enumerate()
        .map(|(i, (m, p))| {
            let e = |f: fn(&PromptMeasures) -> f64| {
                Estimate::of(&p.iter().map(|(_, x)| f(x)).collect::<Vec<_>>())
            };
            Confirmed {
                method: m.clone(),
                prompts: p.len(),
                samples,
                tokens: p.iter().map(|(_, x)| x.tokens).sum(),
                distinct: [
                    e(|x| x.distinct[0]),
                    e(|x| x.distinct[1]),
                    e(|x| x.distinct[2]),
                ],
                self_bleu: e(|x| x.self_bleu),
                tail_rate: e(|x| x.tail_rate),
                base_logprob: e(|x| x.base_logprob),
                entropy: e(|x| x.entropy),
                non_word_rate: e(|x| x.non_word_rate),
                judged_logprob: e(|x| x.judged_logprob),
                judged_logprob_per_byte: e(|x| x.judged_logprob_per_byte),
                judged_text: [
                    e(|x| x.judged_text.tokens),
                    e(|x| x.judged_text.bytes),
                    e(|x| x.judged_text.non_ascii),
                ],
                vs_temperature: reference.filter(|&r| r != i).map(|r| paired(p, &pp[r])),
                on_frontier: [false; 2],
                on_frontier_distinct1: [false; 2],
            }
        })
        .collect();
    mark_frontiers(&mut out);
    out
}

/// The online frontiers: a measured method is on one when no other has at least its
/// diversity (distinct-2, and apart distinct-1) and at least its quality (tail-garbage
/// rate or base log-probability), and more of one.
fn mark_frontiers(out: &mut [Confirmed]) {
    for (k, m) in Measure::ALL.into_iter().enumerate() {
        let by_distinct2 = frontier_flags(out, |c| c.distinct[1].mean, m);
        let by_distinct1 = frontier_flags(out, |c| c.distinct[0].mean, m);
        for ((c, d2), d1) in out.iter_mut().zip(by_distinct2).zip(by_distinct1) {
            c.on_frontier[k] = d2;
            c.on_frontier_distinct1[k] = d1;
        }
    }
}

/// Which measured methods no other beats on `diversity` and on quality `m`.
fn frontier_flags(out: &[Confirmed], diversity: fn(&Confirmed) -> f64, m: Measure) -> Vec<bool> {
    let quality = |c: &Confirmed| match m {
        Measure::TailMass => -c.tail_rate.mean,
        Measure::BaseLogprob => c.base_logprob.mean,
    };
    out.iter()
        .map(|a| {
            let (da, qa) = (diversity(a), quality(a));
            a.prompts > 0
                && !out.iter().any(|b| {
                    let (d, q) = (diversity(b), quality(b));
                    b.prompts > 0 && d >= da && q >= qa && (d > da || q > qa)
                })
        })
        .collect()
}

/// Every level measured so far (`confirm.json`).
pub type Doc = super::stats::Doc<ConfirmedLevel>;

/// The methods at one level.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConfirmedLevel {
    /// Plain temperature's T defining the target entropy.
    pub level: f64,
    /// The target (offline, from the screening).
    pub target_entropy: f64,
    /// The methods, in the plan's order.
    pub methods: Vec<Confirmed>,
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::frontier::{point, Screened};

    /// Settings that name one stream draw from it (common random numbers); without one,
    /// each setting draws from its own, named by it.
    #[test]
    fn a_shared_stream_gives_the_same_draws() {
        let with = |min_p: f64, stream: Option<&str>| Planned {
            family: Family::MinP,
            knob: format!("min_p = {min_p}"),
            sampler: Sampler::MinP { t: 1.0, min_p },
            offline: Stats::default(),
            t_scale: 1.0,
            stream: stream.map(String::from),
        };
        let draw = |p: &Planned| p.seed(1.0, "a prompt", 2).next_u64();
        assert_eq!(draw(&with(0.02, Some("s"))), draw(&with(0.05, Some("s"))));
        assert_ne!(draw(&with(0.02, None)), draw(&with(0.05, None)));
        assert_ne!(draw(&with(0.02, Some("s"))), draw(&with(0.02, Some("t"))));
    }

    fn level() -> frontier::Screening {
        let shipped = frontier::knob(&Sampler::Hlg {
            t: 1.0,
            hlg: mistralrs_hlg::HlgConfig::default().resolved(true),
        });
        frontier::Screening {
            level: 1.0,
            target_entropy: 2.0,
            positions: 1,
            capture: String::new(),
            points: vec![
                point(Family::Temperature, "", 0.10, -3.0),
                point(Family::TopP, "p = 0.8", 0.0, -2.9),
                point(Family::TopP, "p = 0.9", 0.0, -2.6),
                point(Family::TopP, "p = 0.95", 0.001, -2.7),
                point(Family::MinP, "min_p = 0.02", 0.02, -2.5),
                point(Family::MinP, "min_p = 0.05", 0.01, -2.8),
                point(Family::MinP, "min_p = 0.1", 0.03, -3.5),
                point(Family::Hlg, &shipped, 0.05, -2.7),
                point(Family::Hlg, "a", 0.001, -2.55),
                point(Family::Hlg, "b", 0.002, -2.5),
                point(Family::Hlg, "c", 0.003, -2.4),
                point(Family::Hlg, "d", 0.004, -2.3),
                point(Family::Hlg, "e", 0.2, -4.0),
                Screened {
                    matched: false,
                    ..point(Family::Hlg, "unmatched", 0.0, 0.0)
                },
            ],
        }
    }

    #[test]
    fn the_plan_takes_a_handful_per_family() {
        let l = level();
        let plan = plan(&l, 2, 3);
        let names: Vec<String> = plan.iter().map(Planned::name).collect();
        assert_eq!(
            names,
            [
                "temperature",
                // On the frontier: p = 0.9; p = 0.95 then has the better base log-prob.
                "top-p p = 0.9",
                "top-p p = 0.95",
                // Neither on the frontier; min_p = 0.02 and 0.05 are the family's own.
                "min-p min_p = 0.02",
                "min-p min_p = 0.05",
                "hlg top-4 w3 s2 t1 quadratic",
                // The HLG frontier a b c d, spread over three: both ends and one between.
                "hlg a",
                "hlg c",
                "hlg d",
            ]
        );
        assert_eq!(spread(4, 3), [0, 2, 3]);
        assert_eq!(spread(5, 3), [0, 2, 4]);
        assert_eq!(spread(2, 5), [0, 1]);
        assert_eq!(spread(7, 1), [0]);
    }

    #[test]
    fn the_guardrail_adds_plain_temperature_at_each_hlg_temperature() {
        let mut l = level();
        for (i, p) in l.points.iter_mut().enumerate() {
            let t = 0.5 + 0.1 * i as f64;
            p.sampler = match p.family {
                Family::Hlg => Sampler::Hlg {
                    t,
                    hlg: mistralrs_hlg::HlgConfig::default().resolved(true),
                },
                _ => Sampler::Temperature { t },
            };
        }
        let plan = plan(&l, 1, 2);
        let s = guardrail_samplers(&plan);
        assert_eq!(
            &s[..plan.len()],
            &plan.iter().map(|m| m.sampler.clone()).collect::<Vec<_>>()[..]
        );
        let hlg_ts: Vec<f64> = plan
            .iter()
            .filter(|m| m.family == Family::Hlg)
            .map(|m| m.sampler.temperature())
            .collect();
        assert_eq!(
            s[plan.len()..],
            hlg_ts
                .iter()
                .map(|&t| Sampler::Temperature { t })
                .collect::<Vec<_>>()[..]
        );
    }

    #[test]
    fn file_names_are_plain_and_distinct() {
        let l = level();
        let names: Vec<String> = plan(&l, 3, 9).iter().map(Planned::file_name).collect();
        for n in &names {
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
                "{n}"
            );
        }
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        let sigma = Planned {
            t_scale: 1.0,
            stream: None,
            family: Family::TopNSigma,
            knob: "n = 1.5".into(),
            sampler: Sampler::TopNSigma { t: 1.0, n: 1.5 },
            offline: Stats::default(),
        };
        assert_eq!(sigma.file_name(), "top-ns_n___1.5.jsonl");
    }

    fn sample(prompt: &str, k: usize, text: &str, lp: &[f64]) -> Sample {
        Sample {
            prompt: 0,
            prompt_text: prompt.into(),
            sample: k,
            text: text.into(),
            trace: Trace {
                entropy: vec![1.0; lp.len()],
                base_logprob: lp.to_vec(),
                shape: vec![],
            },
            judged: None,
        }
    }

    #[test]
    fn a_store_resumes_drops_a_torn_line_and_sets_aside_another_run() {
        let dir = std::env::temp_dir().join(format!("hlg-confirm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let m = Planned::of(&point(Family::Temperature, "", 0.1, -2.0));
        let mut s = Store::open(&dir, &m, 32).unwrap();
        assert!(s.samples.is_empty());
        s.push(sample("p", 0, "a b", &[-1.0])).unwrap();
        s.push(sample("p", 1, "c d", &[-2.0])).unwrap();
        // A run stopped mid-line.
        let path = dir.join(m.file_name());
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"prompt\":0,\"pro").unwrap();
        // A report reads what is there and leaves the file as it is (a run may be adding
        // to it); another length reads as nothing.
        let before = std::fs::read(&path).unwrap();
        let read = read_samples(&dir, &m, 32);
        assert_eq!(read.iter().map(|x| x.sample).collect::<Vec<_>>(), [0, 1]);
        assert!(read_samples(&dir, &m, 16).is_empty());
        assert_eq!(std::fs::read(&path).unwrap(), before);
        let mut s = Store::open(&dir, &m, 32).unwrap();
        assert_eq!(s.samples.len(), 2);
        assert!(s.has("p", 1) && !s.has("p", 2) && !s.has("q", 0));
        s.push(sample("p", 2, "e f", &[-3.0])).unwrap();
        let s = Store::open(&dir, &m, 32).unwrap();
        assert_eq!(
            s.samples.iter().map(|x| x.sample).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        // Another length: set aside, started over.
        let s = Store::open(&dir, &m, 16).unwrap();
        assert!(s.samples.is_empty());
        assert!(path.with_extension("jsonl.stale").is_file());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn measures_pair_prompt_by_prompt_and_mark_the_frontier() {
        let prompts = ["p", "q"];
        let run = |texts: [&str; 4], lps: [f64; 4]| {
            let mut v = vec![];
            for (i, (t, lp)) in texts.iter().zip(lps).enumerate() {
                let mut s = sample(prompts[i / 2], i % 2, t, &[lp, -20.0]);
                s.prompt = i / 2;
                v.push(s);
            }
            v
        };
        let temp = Planned::of(&point(Family::Temperature, "", 0.1, -2.0));
        let other = Planned::of(&point(Family::MinP, "min_p = 0.1", 0.0, -2.0));
        let runs = vec![
            run(["a b", "a b", "c d", "c d"], [-1.0, -1.0, -3.0, -3.0]),
            run(["a b", "c d", "e f", "g h"], [-2.0, -2.0, -2.0, -2.0]),
        ];
        // An incomplete prompt (one sample of two) is left out.
        let mut partial = runs.clone();
        partial[1].pop();
        let c = measure(&[temp.clone(), other.clone()], &partial, &prompts, 2);
        assert_eq!((c[0].prompts, c[1].prompts), (2, 1));
        let c = measure(&[temp, other], &runs, &prompts, 2);
        // Temperature: each prompt's two samples equal: distinct-2 = 1/2 per prompt.
        assert_eq!(c[0].distinct[1], Estimate { mean: 0.5, se: 0.0 });
        assert_eq!(c[1].distinct[1].mean, 1.0);
        // Per prompt: base log-prob (−1 − 20)/2 and (−3 − 20)/2: mean −11, se 0.5.
        assert_eq!(
            c[0].base_logprob,
            Estimate {
                mean: -11.0,
                se: 0.5
            }
        );
        // Half the tokens (the −20s) are tail.
        assert_eq!(c[0].tail_rate.mean, 0.5);
        let d = c[1].vs_temperature.unwrap();
        assert_eq!(d.prompts, 2);
        assert_eq!(d.distinct2, Estimate { mean: 0.5, se: 0.0 });
        // −11 − (−10.5) and −11 − (−11.5): mean 0, differences ±0.5.
        assert_eq!(d.base_logprob, Estimate { mean: 0.0, se: 0.5 });
        assert!(c[0].vs_temperature.is_none());
        // min-p is more diverse at the same tail rate and base log-prob: only it is on
        // both frontiers.
        assert_eq!(c[1].on_frontier, [true, true]);
        assert_eq!(c[0].on_frontier, [false, false]);
        assert_eq!(c[1].on_frontier_distinct1, [true, true]);
        // Distinct-1: 1/2 for temperature's repeated pairs, 1 for min-p's.
        assert_eq!(d.distinct1, Estimate { mean: 0.5, se: 0.0 });
    }

    #[test]
    fn each_diversity_measure_has_its_frontier() {
        // At the same quality, "a b c" / "c b a" repeat words but no word pair (distinct-1
        // 3/6, distinct-2 4/4); "a b c d" / "a b e f" the other way round (6/8, 5/6).
        let prompts = ["p"];
        let run = |texts: [&str; 2]| -> Vec<Sample> {
            (0..2)
                .map(|k| sample("p", k, texts[k], &[-1.0, -20.0]))
                .collect()
        };
        let pairs = Planned::of(&point(Family::Temperature, "", 0.1, -2.0));
        let words = Planned::of(&point(Family::MinP, "min_p = 0.1", 0.0, -2.0));
        let runs = vec![run(["a b c", "c b a"]), run(["a b c d", "a b e f"])];
        let c = measure(&[pairs, words], &runs, &prompts, 2);
        assert_eq!((c[0].distinct[0].mean, c[0].distinct[1].mean), (0.5, 1.0));
        assert_eq!(c[1].distinct[0].mean, 0.75);
        assert!((c[1].distinct[1].mean - 5.0 / 6.0).abs() < 1e-15);
        assert_eq!(
            (c[0].on_frontier, c[1].on_frontier),
            ([true; 2], [false; 2])
        );
        assert_eq!(
            (c[0].on_frontier_distinct1, c[1].on_frontier_distinct1),
            ([false; 2], [true; 2])
        );
        // The table marks both frontiers, every row as wide as the header; the plot has
        // a row of panels per diversity measure.
        let level = ConfirmedLevel {
            level: 1.3,
            target_entropy: 4.4,
            methods: c,
        };
        let table = crate::report::confirm_table(&Doc {
            prompts: 1,
            samples: 2,
            max_tokens: 32,
            levels: vec![level.clone()],
        });
        let (main, judged) = table.split_at(table.find("How the judge read").unwrap());
        let rows: Vec<&str> = main.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), 4, "{table}");
        // Neither run was judged; temperature's samples are 5 bytes each, all ASCII.
        let read: Vec<&str> = judged.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(read.len(), 4, "{table}");
        assert!(
            read[2].ends_with("| NaN ± 0.0 | 5.0 ± 0.0 | 0.00 % ± 0.00 % |"),
            "{table}"
        );
        for r in &rows {
            assert_eq!(r.matches('|').count(), rows[0].matches('|').count(), "{r}");
        }
        assert!(
            rows[2].ends_with("| TL / |") && rows[3].ends_with("| / TL |"),
            "{table}"
        );
        // Δ distinct-1 of min-p against temperature: 0.75 − 0.5.
        assert!(
            rows[3].contains("| 0.250 ± 0.000 | -0.167 ± 0.000 |"),
            "{table}"
        );
        confirm_plot_rows_and_labels(&level);
    }

    /// The plot of [`each_diversity_measure_has_its_frontier`]'s level: a row of panels
    /// per diversity measure, each knob labelled in every panel, a label at a panel's
    /// right end ending at its point.
    fn confirm_plot_rows_and_labels(level: &ConfirmedLevel) {
        let svg = crate::plot::confirm(level);
        let t = crate::plot::read::texts(&svg);
        let count = |want: &str| t.iter().filter(|x| *x == want).count();
        assert_eq!((count("distinct-2"), count("distinct-1")), (2, 2), "{t:?}");
        assert_eq!(count("min_p = 0.1"), 4);
        // Min-p moved right of temperature on both quality axes.
        let mut shifted = level.clone();
        shifted.methods[1].tail_rate.mean = 0.9;
        shifted.methods[1].base_logprob.mean = -1.0;
        let svg = crate::plot::confirm(&shifted);
        let anchored = |label: &str, anchor: &str| {
            let lines: Vec<&str> = svg.lines().collect();
            lines
                .windows(2)
                .filter(|w| w[1] == label && w[0].contains(&format!(r#"text-anchor="{anchor}""#)))
                .count()
        };
        assert_eq!(anchored("min_p = 0.1", "end"), 4);
        assert_eq!(anchored("temperature", "start"), 4);
    }

    #[test]
    fn judged_log_probs_are_pooled_per_token_and_per_byte() {
        let judged = |k: usize, text: &str, lp: &[f64]| Sample {
            judged: Some(crate::generate::Judged {
                logprobs: lp.to_vec(),
            }),
            ..sample("p", k, text, &[-1.0])
        };
        // Two judge tokens over 2 bytes; four over 6 bytes (two 3-byte characters split
        // into byte tokens, the last three nearly certain); a sample the judge has not
        // read counts in neither.
        let a = judged(0, "ab", &[-1.0, -1.0]);
        let b = judged(1, "日本", &[-3.0, -0.5, -0.5, -0.5]);
        let c = sample("p", 2, "unread", &[-1.0]);
        let m = PromptMeasures::of(&[&a, &b, &c]).unwrap();
        assert_eq!(m.judged_logprob, -6.5 / 6.0);
        assert_eq!(m.judged_logprob_per_byte, -6.5 / 8.0);
        // Six judge tokens over two judged samples; 2 + 6 + 6 bytes over three; two of
        // 2 + 2 + 6 characters outside ASCII.
        assert_eq!(
            m.judged_text,
            JudgedText {
                tokens: 3.0,
                bytes: 14.0 / 3.0,
                non_ascii: 0.2
            }
        );
        let m = PromptMeasures::of(&[&c]).unwrap();
        assert!(m.judged_logprob.is_nan() && m.judged_logprob_per_byte.is_nan());
        assert!(m.judged_text.tokens.is_nan());
        assert_eq!((m.judged_text.bytes, m.judged_text.non_ascii), (6.0, 0.0));
    }

    #[test]
    fn estimates_are_the_mean_and_its_standard_error() {
        let e = Estimate::of(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(e.mean, 2.5);
        // Sample variance 5/3, over n = 4: se = sqrt(5/12).
        assert!((e.se - (5.0f64 / 12.0).sqrt()).abs() < 1e-15);
        assert_eq!(Estimate::of(&[]), Estimate::default());
        assert_eq!(Estimate::of(&[7.0]), Estimate { mean: 7.0, se: 0.0 });
    }

    #[test]
    fn seeds_differ_by_level_method_prompt_and_sample() {
        let m = Planned::of(&point(Family::Temperature, "", 0.1, -2.0));
        let first = |l: f64, p: &str, k: usize| m.seed(l, p, k).next_u64();
        let base = first(0.8, "p", 0);
        assert_eq!(base, first(0.8, "p", 0));
        assert_ne!(base, first(1.0, "p", 0));
        assert_ne!(base, first(0.8, "q", 0));
        assert_ne!(base, first(0.8, "p", 1));
    }
}
