//! Capability without sampling noise: each method's probability of the gold answer on
//! the guardrail items, teacher-forced.
//!
//! The sampled guardrail (`guardrail`) counts right answers among a few draws per item,
//! which at 60 items cannot tell a small loss from noise. Here each item's reply is
//! forced to begin with its first accepted answer (capitalised as a reply's first word);
//! the model's base logits before each answer token are read once, and each method's
//! probability of the whole answer is the product of its sampling distribution's
//! probabilities of those tokens: what a draw from that method would give, exactly.

use serde::Serialize;

pub use super::guardrail::framing;
use super::guardrail::Task;
use super::lm::Lm;
use super::sampler::{probs, Sampler};
use super::EvalError;

/// One item's answer as the model was forced to give it.
#[derive(Clone, Debug)]
pub struct Forced {
    /// The answer's tokens.
    pub tokens: Vec<u32>,
    /// The base logits before each of them.
    pub rows: Vec<Vec<f32>>,
}

/// Every task's forced answer on `lm`: the rows and tokens of the answer alone, after the
/// opening (whose tokens must be the same read alone and before the answer).
pub async fn force_all(lm: Lm<'_>, tasks: &[Task]) -> Result<Vec<Forced>, EvalError> {
    let chat = matches!(lm, Lm::Engine(_));
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        let (context, opening, answer) = framing(t, chat);
        let (open_tokens, _) = lm.forced_rows(&context, opening).await?;
        let (tokens, rows) = lm
            .forced_rows(&context, &format!("{opening}{answer}"))
            .await?;
        let k = open_tokens.len();
        if tokens.len() <= k || tokens[..k] != open_tokens[..] {
            return Err(EvalError::Invalid(format!(
                "the answer of {:?} does not tokenize apart from its opening",
                t.prompt
            )));
        }
        out.push(Forced {
            tokens: tokens[k..].to_vec(),
            rows: rows[k..].to_vec(),
        });
    }
    Ok(out)
}

/// The probability that `s` draws the answer's tokens one after another.
pub fn probability(s: &Sampler, f: &Forced) -> f64 {
    f.tokens
        .iter()
        .zip(&f.rows)
        .map(|(&t, row)| {
            let mut l = row.clone();
            s.transform(&mut l);
            let q = probs(&l, s.temperature());
            let z: f64 = q.iter().sum();
            q[t as usize] / z
        })
        .product()
}

/// One method's gold-answer probabilities, item by item.
#[derive(Clone, Debug, Serialize)]
pub struct GoldMethod {
    /// The method's name.
    pub name: String,
    /// Its sampler.
    pub sampler: Sampler,
    /// Per item.
    pub per_item: Vec<f64>,
    /// The mean over items.
    pub mean: f64,
}

/// Every method's probabilities on the forced answers.
pub fn measure(methods: &[(String, Sampler)], forced: &[Forced]) -> Vec<GoldMethod> {
    methods
        .iter()
        .map(|(name, s)| {
            let per_item: Vec<f64> = forced.iter().map(|f| probability(s, f)).collect();
            let mean = per_item.iter().sum::<f64>() / per_item.len().max(1) as f64;
            GoldMethod {
                name: name.clone(),
                sampler: s.clone(),
                per_item,
                mean,
            }
        })
        .collect()
}

/// The Markdown table of one level: each method's mean probability and its paired
/// difference from `reference` (item by item, mean ± 1.96 standard errors).
pub fn table(level: f64, methods: &[GoldMethod], reference: usize) -> String {
    let mut out = vec![
        format!("### T = {level}"),
        String::new(),
        format!(
            "| method | mean P(gold) | minus {} (95 % CI, paired by item) |",
            methods[reference].name
        ),
        "|---|---|---|".to_string(),
    ];
    for m in methods {
        let d: Vec<f64> = m
            .per_item
            .iter()
            .zip(&methods[reference].per_item)
            .map(|(a, b)| a - b)
            .collect();
        let (mean, (lo, hi)) = super::guardrail::mean_ci(&d);
        out.push(format!(
            "| {} | {:.4} | {mean:+.4} ({lo:+.4}, {hi:+.4}) |",
            m.name, m.mean
        ));
    }
    out.push(String::new());
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task {
            prompt: "What is the capital of France? Answer with one word.",
            answers: &["paris"],
        }
    }

    #[test]
    fn the_answer_is_framed_after_an_opening() {
        let (ctx, open, ans) = framing(&task(), true);
        assert_eq!(
            (ctx.as_str(), open, ans.as_str()),
            (task().prompt, "Answer:", " Paris")
        );
        let (ctx, open, ans) = framing(&task(), false);
        assert!(ctx.ends_with("one word.\n"));
        assert_eq!((open, ans.as_str()), ("Answer:", " Paris"));
    }

    #[test]
    fn the_probability_is_the_product_of_the_methods_token_probabilities() {
        let f = Forced {
            tokens: vec![0, 2],
            rows: vec![vec![2.0, 1.0, 0.0], vec![0.0, 0.0, 3.0f32.ln()]],
        };
        // Temperature 1: softmax by hand.
        let z1 = 1.0 + (-1f64).exp() + (-2f64).exp();
        let want = (1.0 / z1) * (3.0 / 5.0);
        let t = Sampler::Temperature { t: 1.0 };
        assert!((probability(&t, &f) - want).abs() < 1e-6);
        // Min-p 0.5 keeps tokens with at least half the top probability: the first row
        // keeps token 0 alone (e^-1 < 0.5), so its token is certain; the second row keeps
        // token 2 alone (1/3 < 0.5).
        let m = Sampler::MinP { t: 1.0, min_p: 0.5 };
        assert!((probability(&m, &f) - 1.0).abs() < 1e-9);
        // A truncation that cuts the answer's token gives 0.
        let cut = Forced {
            tokens: vec![1],
            rows: vec![vec![2.0, 1.0, 0.0]],
        };
        assert_eq!(probability(&m, &cut), 0.0);
    }
}
