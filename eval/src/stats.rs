//! Summary statistics shared by the evaluation's steps.

use serde::{Deserialize, Serialize};

/// A mean over prompts and its standard error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The mean.
    pub mean: f64,
    /// Its standard error (0 with fewer than two values).
    pub se: f64,
}

impl Estimate {
    /// The mean of `v` and its standard error.
    pub fn of(v: &[f64]) -> Estimate {
        let n = v.len() as f64;
        if v.is_empty() {
            return Estimate::default();
        }
        let mean = v.iter().sum::<f64>() / n;
        let se = if v.len() > 1 {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt()
        } else {
            0.0
        };
        Estimate { mean, se }
    }
}

/// Every level a step measured into one output directory (`confirm.json`,
/// `diversity.json`): the size of its runs and the levels, by the step's own level type.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Doc<L> {
    /// Prompts per method.
    pub prompts: usize,
    /// Samples per prompt.
    pub samples: usize,
    /// Tokens per sample.
    pub max_tokens: usize,
    /// The levels.
    pub levels: Vec<L>,
}
