//! The capability guardrail: short exact-answer questions that the embedded model partly
//! answers, scored by matching an accepted answer in the first line of the reply.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::generate::{generate_seeded, SplitMix};
use super::journal;
use super::lm::Lm;
use super::sampler::Sampler;
use super::text::words;
use super::EvalError;

/// A question and its accepted answers (lower case; a multi-word answer must appear as
/// consecutive words).
pub struct Task {
    /// The prompt.
    pub prompt: &'static str,
    /// Accepted answers.
    pub answers: &'static [&'static str],
}

macro_rules! tasks {
    ($($p:literal => [$($a:literal),+]),+ $(,)?) => { &[$(Task { prompt: $p, answers: &[$($a),+] }),+] };
}

/// The task set, written for this project (60 items).
pub const TASKS: &[Task] = tasks![
    "What is the capital of France? Answer with one word." => ["paris"],
    "What is the capital of Italy? Answer with one word." => ["rome"],
    "What is the capital of Japan? Answer with one word." => ["tokyo"],
    "What is the capital of Germany? Answer with one word." => ["berlin"],
    "What is the capital of Spain? Answer with one word." => ["madrid"],
    "What is the capital of England? Answer with one word." => ["london"],
    "What is the capital of Russia? Answer with one word." => ["moscow"],
    "What is the capital of Egypt? Answer with one word." => ["cairo"],
    "What is the capital of Canada? Answer with one word." => ["ottawa"],
    "What is the capital of China? Answer with one word." => ["beijing"],
    "What is 2 + 2? Answer with a number." => ["4", "four"],
    "What is 3 + 5? Answer with a number." => ["8", "eight"],
    "What is 10 - 3? Answer with a number." => ["7", "seven"],
    "What is 6 + 6? Answer with a number." => ["12", "twelve"],
    "What is 5 times 2? Answer with a number." => ["10", "ten"],
    "What is 9 - 4? Answer with a number." => ["5", "five"],
    "What is 7 + 1? Answer with a number." => ["8", "eight"],
    "What is 3 times 3? Answer with a number." => ["9", "nine"],
    "What is 20 divided by 2? Answer with a number." => ["10", "ten"],
    "What is 100 + 1? Answer with a number." => ["101"],
    "How many legs does a dog have? Answer with a number." => ["4", "four"],
    "How many days are in a week? Answer with a number." => ["7", "seven"],
    "How many months are in a year? Answer with a number." => ["12", "twelve"],
    "How many hours are in a day? Answer with a number." => ["24", "twenty"],
    "How many wheels does a bicycle have? Answer with a number." => ["2", "two"],
    "How many sides does a triangle have? Answer with a number." => ["3", "three"],
    "How many minutes are in an hour? Answer with a number." => ["60", "sixty"],
    "How many legs does a spider have? Answer with a number." => ["8", "eight"],
    "What color is the sky on a clear day? Answer with one word." => ["blue"],
    "What color is grass? Answer with one word." => ["green"],
    "What color is snow? Answer with one word." => ["white"],
    "What color is a ripe banana? Answer with one word." => ["yellow"],
    "What color are most strawberries? Answer with one word." => ["red"],
    "What is the opposite of hot? Answer with one word." => ["cold"],
    "What is the opposite of big? Answer with one word." => ["small", "little"],
    "What is the opposite of up? Answer with one word." => ["down"],
    "What is the opposite of day? Answer with one word." => ["night"],
    "What is the opposite of happy? Answer with one word." => ["sad", "unhappy"],
    "What is the opposite of fast? Answer with one word." => ["slow"],
    "What is the opposite of open? Answer with one word." => ["closed", "close", "shut"],
    "Which day comes after Monday? Answer with one word." => ["tuesday"],
    "Which day comes after Friday? Answer with one word." => ["saturday"],
    "Which month comes after January? Answer with one word." => ["february"],
    "Which month comes before December? Answer with one word." => ["november"],
    "What animal says moo? Answer with one word." => ["cow", "cows"],
    "What animal says meow? Answer with one word." => ["cat", "cats", "kitten"],
    "What animal barks? Answer with one word." => ["dog", "dogs"],
    "What is frozen water called? Answer with one word." => ["ice"],
    "What do bees make? Answer with one word." => ["honey"],
    "What planet do we live on? Answer with one word." => ["earth"],
    "What is the largest ocean on Earth? Answer with one word." => ["pacific"],
    "What gas do humans need to breathe? Answer with one word." => ["oxygen"],
    "What is the plural of mouse? Answer with one word." => ["mice"],
    "What is the plural of child? Answer with one word." => ["children"],
    "Which star is at the centre of our solar system? Answer with one word." => ["sun"],
    "What is the first letter of the English alphabet? Answer with one letter." => ["a"],
    "What is the freezing point of water in degrees Celsius? Answer with a number." => ["0", "zero"],
    "Who wrote Romeo and Juliet? Answer with the author's last name." => ["shakespeare"],
    "In which country are the pyramids of Giza? Answer with one word." => ["egypt"],
    "What is the chemical symbol for water? Answer with one word." => ["h2o"],
];

/// Whether the first line of `reply` (empty lines skipped) holds an accepted answer.
pub fn correct(reply: &str, answers: &[&str]) -> bool {
    let line = reply
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let ws = words(line);
    answers.iter().any(|a| {
        let aw = words(a);
        !aw.is_empty() && ws.windows(aw.len()).any(|w| w == aw.as_slice())
    })
}

/// Wilson score interval (95 %) for `k` successes in `n`.
pub fn wilson(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (z, n, p) = (1.96f64, n as f64, k as f64 / n as f64);
    let c = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let h = z * ((p * (1.0 - p) + z * z / (4.0 * n)) / n).sqrt() / (1.0 + z * z / n);
    ((c - h).max(0.0), (c + h).min(1.0))
}

/// One method's accuracy.
#[derive(Clone, Debug, Serialize)]
pub struct Accuracy {
    /// The method (`greedy` when `sampler` is `None`).
    pub name: String,
    /// The sampler (`None`: greedy).
    pub sampler: Option<Sampler>,
    /// Correct answers, over every sample.
    pub correct: usize,
    /// Items.
    pub items: usize,
    /// Samples per item.
    pub samples: usize,
    /// 95 % interval of the accuracy: Wilson's with one sample per item; with several,
    /// the mean of the items' accuracies ± 1.96 standard errors over items (the samples
    /// of one item are not independent of each other).
    pub ci95: (f64, f64),
    /// Per item, the share of its samples answered correctly.
    pub per_item: Vec<f64>,
    /// Per sample (item by item): correct or not, and the reply.
    pub replies: Vec<(bool, String)>,
}

impl Accuracy {
    /// The accuracy: correct answers over samples.
    pub fn rate(&self) -> f64 {
        self.correct as f64 / (self.items * self.samples).max(1) as f64
    }
}

/// Mean and 95 % interval (± 1.96 standard errors) of `v`.
pub fn mean_ci(v: &[f64]) -> (f64, (f64, f64)) {
    let n = v.len() as f64;
    if v.is_empty() {
        return (0.0, (0.0, 0.0));
    }
    let m = v.iter().sum::<f64>() / n;
    let se = if v.len() > 1 {
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt()
    } else {
        0.0
    };
    (m, (m - 1.96 * se, m + 1.96 * se))
}

/// `a`'s accuracy minus `b`'s, item by item (the same items): the mean difference and
/// its 95 % interval over items. Pairing removes the items' own difficulty, which
/// dominates the spread of either accuracy alone.
pub fn paired_difference(a: &Accuracy, b: &Accuracy) -> (f64, (f64, f64)) {
    let d: Vec<f64> = a
        .per_item
        .iter()
        .zip(&b.per_item)
        .map(|(x, y)| x - y)
        .collect();
    mean_ci(&d)
}

/// The finished items of one guardrail run on disk, so that a stopped run continues where
/// it was: a header line naming what the run draws (its methods, samples per item and
/// length), then one line per finished item with every reply of it. Replies are seeded
/// by method, item and sample (greedy is deterministic), so a run done in parts gives
/// the replies of a run done at once.
pub struct Journal {
    path: PathBuf,
    items: Vec<Item>,
}

/// One finished item: its prompt and its replies in [`run_all`]'s order (method by
/// method, sample by sample).
#[derive(Serialize, Deserialize)]
struct Item {
    prompt: String,
    replies: Vec<String>,
}

impl Journal {
    /// The journal at `path` for a run of `methods` (`samples` each, `max_tokens` long),
    /// with the items it holds. A file written for another run is moved aside (`.stale`);
    /// a torn last line (a run stopped while writing) is dropped.
    pub fn open(
        path: &Path,
        methods: &[Option<Sampler>],
        samples: usize,
        max_tokens: usize,
    ) -> Result<Journal, EvalError> {
        // Compared as text: both sides are serialised from the same values.
        let header =
            serde_json::json!({"methods": methods, "samples": samples, "max_tokens": max_tokens})
                .to_string();
        let items = journal::open(path, &header, |l| l == header)?;
        Ok(Journal {
            path: path.to_path_buf(),
            items,
        })
    }

    /// Items finished.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no item is finished.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn replies(&self, prompt: &str) -> Option<&[String]> {
        let item = self.items.iter().find(|i| i.prompt == prompt)?;
        Some(&item.replies)
    }

    /// Adds a finished item, on disk first.
    fn push(&mut self, prompt: &str, replies: Vec<String>) -> Result<(), EvalError> {
        let item = Item {
            prompt: prompt.to_string(),
            replies,
        };
        journal::append(&self.path, &item)?;
        self.items.push(item);
        Ok(())
    }
}

/// What a guardrail run asks: the tasks, the methods (`None`: greedy), samples per item
/// for a sampled method, the reply length and how many generations go at once.
#[derive(Clone, Copy)]
pub struct Plan<'a> {
    /// The items.
    pub tasks: &'a [Task],
    /// The methods; `None` is greedy, sampled once.
    pub methods: &'a [Option<Sampler>],
    /// Draws per item for a sampled method.
    pub samples: usize,
    /// Tokens per reply.
    pub max_tokens: usize,
    /// At most this many generations at once.
    pub batch: usize,
}

/// Runs every task of the plan with each of its methods, item by item: greedy once for
/// `None`, else `samples` draws, `max_tokens` tokens each. Sample `k` of an item draws
/// from a stream seeded by the method, the item and `k`, so the replies do not depend
/// on what runs beside them: up to `batch` generations are sent at once, which is sound
/// on an engine whose batched rows equal the rows alone (`server::engine::probe`; see
/// [`super::confirm::run_prompt`]). With a `journal` (opened for the same methods,
/// samples and length), items it holds are read from it and each new item is added to it
/// as soon as it is finished.
pub async fn run_all(
    lm: Lm<'_>,
    plan: Plan<'_>,
    mut journal: Option<&mut Journal>,
    mut progress: impl FnMut(),
) -> Result<Vec<Accuracy>, EvalError> {
    let Plan {
        tasks,
        methods,
        samples,
        max_tokens,
        batch,
    } = plan;
    let draws = |m: &Option<Sampler>| if m.is_some() { samples.max(1) } else { 1 };
    let mut replies: Vec<Vec<(bool, String)>> = vec![vec![]; methods.len()];
    let mut per_item: Vec<Vec<f64>> = vec![vec![]; methods.len()];
    for task in tasks {
        let todo: Vec<(usize, usize)> = (0..methods.len())
            .flat_map(|j| (0..draws(&methods[j])).map(move |k| (j, k)))
            .collect();
        let done = journal.as_ref().and_then(|j| j.replies(task.prompt));
        let texts = match done {
            Some(texts) if texts.len() == todo.len() => {
                todo.iter().for_each(|_| progress());
                texts.to_vec()
            }
            _ => {
                let texts = match lm.engine() {
                    Some(model) => {
                        let ask = (methods, max_tokens, batch);
                        replies_engine(model, task, ask, &todo, &mut progress).await?
                    }
                    None => {
                        let texts =
                            replies_pretrained(lm, task, methods, &todo, max_tokens).await?;
                        texts.iter().for_each(|_| progress());
                        texts
                    }
                };
                if let Some(j) = journal.as_deref_mut() {
                    j.push(task.prompt, texts.clone())?;
                }
                texts
            }
        };
        let mut ok = vec![0usize; methods.len()];
        for (&(j, _), text) in todo.iter().zip(texts) {
            let c = correct(&text, task.answers);
            ok[j] += c as usize;
            replies[j].push((c, text));
        }
        for (j, m) in methods.iter().enumerate() {
            per_item[j].push(ok[j] as f64 / draws(m) as f64);
        }
    }
    let out = methods.iter().zip(replies.into_iter().zip(per_item));
    Ok(out
        .map(|(m, (replies, per_item))| accuracy(m.as_ref(), draws(m), replies, per_item))
        .collect())
}

/// What an item is forced with: the context, a reply's opening the answer follows, and
/// the answer (its first accepted one, capitalised, after a space). On the engine the
/// item is the user's message and the reply opens "Answer:"; on a pretrained model
/// (Gemma) the item is followed by a line "Answer:". The probability is the answer's
/// given that opening, so that it does not hang on how a model likes to open a reply.
pub fn framing(task: &Task, chat: bool) -> (String, &'static str, String) {
    let answer = format!(" {}", capitalised(task.answers[0]));
    match chat {
        true => (task.prompt.to_string(), "Answer:", answer),
        false => (format!("{}\n", task.prompt), "Answer:", answer),
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The seed of sample `k` of `sampler`'s draws for `prompt`.
fn seed(sampler: &Sampler, prompt: &str, k: usize) -> SplitMix {
    SplitMix::named(&format!(
        "guardrail|{}|{}|{prompt}|{k}",
        sampler.name(),
        sampler.temperature()
    ))
}

/// An item's replies on the engine, `batch` requests at once, in the order of `todo`
/// (method, sample).
async fn replies_engine(
    model: &mistralrs::Model,
    task: &Task,
    (methods, max_tokens, batch): (&[Option<Sampler>], usize, usize),
    todo: &[(usize, usize)],
    progress: &mut impl FnMut(),
) -> Result<Vec<String>, EvalError> {
    let mut texts = Vec::with_capacity(todo.len());
    for chunk in todo.chunks(batch.max(1)) {
        let runs = chunk
            .iter()
            .map(|&(j, k)| reply(model, task.prompt, methods[j].as_ref(), max_tokens, k));
        for text in futures::future::join_all(runs).await {
            texts.push(text?);
            progress();
        }
    }
    Ok(texts)
}

/// Greedy as a sampler: top-p with p below any token's probability keeps only the most
/// probable token (the lowest index among equals), whatever the seed.
fn greedy() -> Sampler {
    Sampler::TopP { t: 1.0, p: 1e-30 }
}

/// An item's replies on a pretrained model (Gemma), all as one batch: the item, then a
/// line "Answer:" ([`framing`]'s opening, which the reply continues), with
/// the same seeds as on the engine.
async fn replies_pretrained(
    lm: Lm<'_>,
    task: &Task,
    methods: &[Option<Sampler>],
    todo: &[(usize, usize)],
    max_tokens: usize,
) -> Result<Vec<String>, EvalError> {
    let (context, opening, _) = framing(task, false);
    let greedy = greedy();
    let rows: Vec<(&Sampler, usize, SplitMix)> = todo
        .iter()
        .map(|&(j, k)| {
            let s = methods[j].as_ref().unwrap_or(&greedy);
            (s, max_tokens, seed(s, task.prompt, k))
        })
        .collect();
    let out = lm
        .generate_many(&format!("{context}{opening}"), &rows, rows.len())
        .await?;
    Ok(out.into_iter().map(|(text, _)| text).collect())
}

/// One reply: greedy (`None`), or sample `k` of `sampler`'s seeded draws for `prompt`.
async fn reply(
    model: &mistralrs::Model,
    prompt: &str,
    sampler: Option<&Sampler>,
    max_tokens: usize,
    k: usize,
) -> Result<String, EvalError> {
    if let Some(s) = sampler {
        return Ok(
            generate_seeded(model, prompt, s, max_tokens, seed(s, prompt, k))
                .await?
                .0,
        );
    }
    let req = mistralrs::RequestBuilder::new()
        .add_message(mistralrs::TextMessageRole::User, prompt)
        .set_sampler_max_len(max_tokens);
    let resp = model
        .send_chat_request(req)
        .await
        .map_err(EvalError::engine)?;
    Ok(resp
        .choices
        .first()
        .and_then(|c| c.message.content.clone())
        .unwrap_or_default())
}

/// A method's accuracy from its replies (item by item, `samples` each) and per-item rates.
fn accuracy(
    sampler: Option<&Sampler>,
    samples: usize,
    replies: Vec<(bool, String)>,
    per_item: Vec<f64>,
) -> Accuracy {
    let k = replies.iter().filter(|r| r.0).count();
    let ci95 = if samples == 1 {
        wilson(k, replies.len())
    } else {
        mean_ci(&per_item).1
    };
    Accuracy {
        name: sampler.map_or("greedy".into(), |s| {
            format!("{} T={}", s.name(), s.temperature())
        }),
        sampler: sampler.cloned(),
        correct: k,
        items: per_item.len(),
        samples,
        ci95: (ci95.0.max(0.0), ci95.1.min(1.0)),
        per_item,
        replies,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_match_whole_words_in_the_first_line() {
        assert!(correct("Paris.", &["paris"]));
        assert!(correct("\n  The answer is 4\nbecause", &["4", "four"]));
        assert!(!correct("14", &["4"]));
        assert!(!correct("I think\nParis", &["paris"]));
        assert!(correct("It is H2O!", &["h2o"]));
        assert!(TASKS.len() >= 50);
    }

    #[test]
    fn paired_difference_over_items() {
        let acc = |per_item: Vec<f64>| Accuracy {
            name: String::new(),
            sampler: None,
            correct: 0,
            items: per_item.len(),
            samples: 2,
            ci95: (0.0, 1.0),
            per_item,
            replies: vec![],
        };
        // Differences 0.5, 0.5, 0, 0: mean 0.25, sd 0.2887, se 0.1443.
        let (m, (lo, hi)) = paired_difference(
            &acc(vec![1.0, 0.5, 0.0, 1.0]),
            &acc(vec![0.5, 0.0, 0.0, 1.0]),
        );
        assert!((m - 0.25).abs() < 1e-12);
        let se = (1.0f64 / 12.0).sqrt() / 2.0;
        assert!((lo - (0.25 - 1.96 * se)).abs() < 1e-12 && (hi - (0.25 + 1.96 * se)).abs() < 1e-12);
        let (m, _) = mean_ci(&[0.2]);
        assert_eq!(m, 0.2);
    }

    #[test]
    fn a_journal_holds_its_items_for_the_same_run_only() {
        // The file handling (torn lines, setting aside) is journal.rs's; here, what makes
        // a guardrail run the same run: its methods, samples per item and length.
        let dir = std::env::temp_dir().join(format!("hlg-guardrail-{}", std::process::id()));
        let path = dir.join("g.jsonl");
        let _ = std::fs::remove_dir_all(&dir);
        let methods = [None, Some(Sampler::Temperature { t: 0.8 })];
        let mut j = Journal::open(&path, &methods, 2, 8).unwrap();
        assert!(j.is_empty());
        j.push("q1", vec!["a".into(), "b".into(), "c".into()])
            .unwrap();
        j.push("q2", vec!["d".into(), "e".into(), "f".into()])
            .unwrap();
        let j = Journal::open(&path, &methods, 2, 8).unwrap();
        assert_eq!(j.len(), 2);
        assert_eq!(j.replies("q2").unwrap(), ["d", "e", "f"]);
        assert!(j.replies("q3").is_none());
        let other = [None, Some(Sampler::Temperature { t: 0.9 })];
        for (ms, samples, max_tokens) in [(&methods, 4, 8), (&methods, 2, 9), (&other, 2, 8)] {
            assert!(Journal::open(&path, ms, samples, max_tokens)
                .unwrap()
                .is_empty());
            // Back to the first run: its file was set aside, so it starts afresh too.
            assert!(Journal::open(&path, &methods, 2, 8).unwrap().is_empty());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn wilson_interval() {
        // 7 of 10: the textbook interval (0.3968, 0.8922).
        let (lo, hi) = wilson(7, 10);
        assert!(
            (lo - 0.3968).abs() < 1e-4 && (hi - 0.8922).abs() < 1e-4,
            "{lo} {hi}"
        );
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }
}
