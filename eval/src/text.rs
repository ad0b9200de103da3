//! Diversity measures over a set of samples of one prompt: distinct-n, self-BLEU and the
//! entropy of the pooled word distribution. Words are lower-cased runs of letters and
//! digits. And a garbage measure no model decides: the share of words a system word list
//! does not hold.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::OnceLock;

use super::EvalError;

/// A word list (one word per line, as `/usr/share/dict/words`), compared lower-cased.
pub struct Dictionary {
    words: HashSet<String>,
}

/// Where the system's word list is looked for when `MISTRALRS_HLG_WORDS` is not set:
/// Debian's `wamerican` package installs it there.
pub const SYSTEM_WORDS: &str = "/usr/share/dict/words";

impl Dictionary {
    /// The words of a list's text.
    pub fn from_lines(text: &str) -> Dictionary {
        let words = text
            .lines()
            .map(|l| l.trim().to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        Dictionary { words }
    }

    /// The list in `path`.
    pub fn load(path: &Path) -> Result<Dictionary, EvalError> {
        let text = std::fs::read_to_string(path).map_err(EvalError::io("reading", path))?;
        Ok(Dictionary::from_lines(&text))
    }

    /// The system's list, read once: `$MISTRALRS_HLG_WORDS`, else [`SYSTEM_WORDS`];
    /// `None` when it cannot be read.
    pub fn system() -> Option<&'static Dictionary> {
        static SYSTEM: OnceLock<Option<Dictionary>> = OnceLock::new();
        SYSTEM
            .get_or_init(|| {
                let path = std::env::var_os("MISTRALRS_HLG_WORDS")
                    .map_or_else(|| SYSTEM_WORDS.into(), std::path::PathBuf::from);
                Dictionary::load(&path).ok()
            })
            .as_ref()
    }

    /// The words of `text` not in the list, and all its words. A word is a run of
    /// letters with apostrophes inside it (don't, cat's); a possessive `'s` counts when
    /// its stem is listed. Numbers are not words here.
    pub fn non_words(&self, text: &str) -> (usize, usize) {
        let is_part = |c: char| c.is_alphabetic() || c == '\'' || c == '’';
        let mut counts = (0, 0);
        for w in text.split(|c: char| !is_part(c)) {
            let w = w
                .trim_matches(|c| c == '\'' || c == '’')
                .replace('’', "'")
                .to_lowercase();
            if w.is_empty() {
                continue;
            }
            counts.1 += 1;
            let stem = w.strip_suffix("'s").unwrap_or(&w);
            if !self.words.contains(&w) && !self.words.contains(stem) {
                counts.0 += 1;
            }
        }
        counts
    }
}

/// The words of `text`.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn ngrams(ws: &[String], n: usize) -> HashMap<&[String], usize> {
    let mut m = HashMap::new();
    if ws.len() >= n {
        for g in ws.windows(n) {
            *m.entry(g).or_insert(0) += 1;
        }
    }
    m
}

/// Distinct n-grams over all n-grams of all samples (0 when there are none).
pub fn distinct_n(samples: &[Vec<String>], n: usize) -> f64 {
    let mut all: HashMap<&[String], usize> = HashMap::new();
    let mut total = 0;
    for s in samples {
        for (g, c) in ngrams(s, n) {
            *all.entry(g).or_insert(0) += c;
            total += c;
        }
    }
    if total == 0 {
        0.0
    } else {
        all.len() as f64 / total as f64
    }
}

/// The share of a sample's n-grams that repeat an n-gram earlier in the same sample (0
/// when it has none): 0 for text that never repeats itself, near 1 for a loop.
pub fn repeated_ngrams(words: &[String], n: usize) -> f64 {
    let total = words.len().saturating_sub(n - 1);
    if n == 0 || total == 0 {
        return 0.0;
    }
    total.saturating_sub(ngrams(words, n).len()) as f64 / total as f64
}

/// BLEU-4 of `candidate` against `refs`: clipped n-gram precisions (an n with no match
/// counts 0.1 matches, NLTK's "method 1"), geometric mean, brevity penalty against the
/// closest reference length. 0 for an empty candidate.
pub fn bleu(candidate: &[String], refs: &[&Vec<String>]) -> f64 {
    if candidate.is_empty() || refs.is_empty() {
        return 0.0;
    }
    let mut log_sum = 0.0;
    for n in 1..=4 {
        let cand = ngrams(candidate, n);
        let total: usize = cand.values().sum();
        if total == 0 {
            // Shorter than n: the precision is undefined; count it as the smoothed floor.
            log_sum += (0.1f64 / 1.0).ln();
            continue;
        }
        let ref_counts: Vec<_> = refs.iter().map(|r| ngrams(r, n)).collect();
        let matched: usize = cand
            .iter()
            .map(|(g, &c)| {
                c.min(
                    ref_counts
                        .iter()
                        .map(|r| r.get(g).copied().unwrap_or(0))
                        .max()
                        .unwrap_or(0),
                )
            })
            .sum();
        let p = if matched == 0 {
            0.1 / total as f64
        } else {
            matched as f64 / total as f64
        };
        log_sum += p.ln();
    }
    let c = candidate.len() as f64;
    let r = refs
        .iter()
        .map(|r| r.len() as f64)
        .min_by(|a, b| (a - c).abs().total_cmp(&(b - c).abs()).then(a.total_cmp(b)))
        .unwrap();
    let bp = if c > r { 1.0 } else { (1.0 - r / c).exp() };
    bp * (log_sum / 4.0).exp()
}

/// Mean BLEU-4 of each sample against the others (lower: more diverse).
pub fn self_bleu(samples: &[Vec<String>]) -> f64 {
    if samples.len() < 2 {
        return 0.0;
    }
    let scores: Vec<f64> = (0..samples.len())
        .map(|i| {
            let refs: Vec<&Vec<String>> = samples
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, s)| s)
                .collect();
            bleu(&samples[i], &refs)
        })
        .collect();
    scores.iter().sum::<f64>() / scores.len() as f64
}

/// Entropy (nats) of the word distribution pooled over the samples.
pub fn pooled_entropy(samples: &[Vec<String>]) -> f64 {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for s in samples {
        for w in s {
            *counts.entry(w).or_insert(0) += 1;
        }
    }
    let total: usize = counts.values().sum();
    if total == 0 {
        return 0.0;
    }
    -counts
        .values()
        .map(|&c| c as f64 / total as f64)
        .map(|p| p * p.ln())
        .sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_ngrams_count_repeats_within_a_sample() {
        let w = |t: &str| words(t);
        assert_eq!(repeated_ngrams(&w("a b c d e f"), 4), 0.0);
        // "a b c d a b c d": 5 four-grams, of which "a b c d" comes again (1 repeat).
        assert_eq!(repeated_ngrams(&w("a b c d a b c d"), 4), 1.0 / 5.0);
        // A loop: 9 four-grams, 3 distinct.
        assert_eq!(repeated_ngrams(&w("x y z x y z x y z x y z"), 4), 6.0 / 9.0);
        assert_eq!(repeated_ngrams(&w("a b c"), 4), 0.0);
        assert_eq!(repeated_ngrams(&[], 4), 0.0);
    }

    #[test]
    fn non_words_are_counted_against_the_list() {
        let d = Dictionary::from_lines("the\ncat\ncat's\ndon't\nsat\nMat\n");
        // 7 words: the, cat, sat, on (not listed), the, mat, "xqzv" (not listed).
        assert_eq!(d.non_words("The cat sat on the Mat, xqzv!"), (2, 7));
        // Apostrophes inside a word stay; quotes around one go; a possessive of a listed
        // stem counts; numbers are no words.
        assert_eq!(d.non_words("'don't' the cats' 42 sat’s"), (1, 4));
        assert_eq!(d.non_words(""), (0, 0));
    }

    fn w(s: &str) -> Vec<String> {
        words(s)
    }

    #[test]
    fn words_and_distinct_n() {
        assert_eq!(w("The cat, the HAT!"), ["the", "cat", "the", "hat"]);
        let s = [w("a b a b"), w("a b c")];
        // unigrams: a b a b a b c → 3 distinct of 7; bigrams: ab ba ab ab bc → 3 of 5.
        assert!((distinct_n(&s, 1) - 3.0 / 7.0).abs() < 1e-12);
        assert!((distinct_n(&s, 2) - 3.0 / 5.0).abs() < 1e-12);
        assert_eq!(distinct_n(&[w("a")], 2), 0.0);
    }

    #[test]
    fn bleu_of_identical_and_disjoint_texts() {
        let a = w("the quick brown fox jumps over the lazy dog");
        assert!((bleu(&a, &[&a]) - 1.0).abs() < 1e-12);
        let b = w("one two three four five six seven eight nine");
        // No match at any n: every precision is 0.1/total (9, 8, 7, 6 n-grams), no brevity penalty.
        let want =
            ((0.1f64 / 9.0).ln() + (0.1f64 / 8.0).ln() + (0.1f64 / 7.0).ln() + (0.1f64 / 6.0).ln())
                / 4.0;
        assert!((bleu(&a, &[&b]) - want.exp()).abs() < 1e-12);
        // Identical samples: self-BLEU 1; the pooled entropy of "x y" twice is ln 2.
        assert!((self_bleu(&[a.clone(), a.clone(), a]) - 1.0).abs() < 1e-12);
        assert!((pooled_entropy(&[w("x y"), w("x y")]) - 2f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn brevity_penalty_uses_the_closest_reference() {
        let cand = w("a b c d");
        let long = w("a b c d e f g h");
        // Precisions are all 1; c = 4, r = 8: BP = exp(1 - 2).
        assert!((bleu(&cand, &[&long]) - (-1f64).exp()).abs() < 1e-12);
    }
}
