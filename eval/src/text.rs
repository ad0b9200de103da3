//! Diversity measures over a set of samples of one prompt: distinct-n, self-BLEU and the
//! entropy of the pooled word distribution. Words are lower-cased runs of letters and
//! digits.

use std::collections::HashMap;

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
