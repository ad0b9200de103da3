//! A run's results per prompt, small enough to commit: one JSON line per (stage, method,
//! prompt) with the few numbers later stages and the report read. A long evaluation runs
//! in parts over sessions on machines that need not be the same one, and only the
//! repository carries over between them; the samples themselves (megabytes of text and
//! traces) stay in the run's output directory, and a prompt the ledger holds is not
//! drawn again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{journal, EvalError};

/// One prompt's result under one method of one stage. `values: None` records a prompt
/// that was drawn and gave nothing to measure (an unjudged text), so it is not drawn
/// again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The stage (`calibration`, `main`).
    pub stage: String,
    /// The method within the stage (an arm's role, a calibration variant).
    pub method: String,
    /// The prompt's index in the stage's prompt list.
    pub prompt: usize,
    /// What the stage measures of the prompt.
    pub values: Option<Vec<f64>>,
}

type Key = (String, String, usize);

/// The rows of one run, read from and appended to a JSON-lines file whose header names
/// the run (a file of another run is set aside, not mixed in).
pub struct Ledger {
    path: PathBuf,
    rows: HashMap<Key, Option<Vec<f64>>>,
}

impl Ledger {
    /// The ledger at `path` for the run `header` names (one JSON line without newline).
    pub fn open(path: &Path, header: &str) -> Result<Ledger, EvalError> {
        let read: Vec<Row> = journal::open(path, header, |l| l == header)?;
        let rows = read
            .into_iter()
            .map(|r| ((r.stage, r.method, r.prompt), r.values))
            .collect();
        Ok(Ledger {
            path: path.to_path_buf(),
            rows,
        })
    }

    /// Whether the prompt is recorded (measured or not) for this stage and method.
    pub fn has(&self, stage: &str, method: &str, prompt: usize) -> bool {
        self.rows
            .contains_key(&(stage.to_string(), method.to_string(), prompt))
    }

    /// The measured prompts of a stage's method, by prompt index.
    pub fn values(&self, stage: &str, method: &str) -> HashMap<usize, Vec<f64>> {
        self.rows
            .iter()
            .filter(|((s, m, _), _)| s == stage && m == method)
            .filter_map(|((_, _, p), v)| Some((*p, v.clone()?)))
            .collect()
    }

    /// Records a row, on disk first; a row already there is kept as it was (the first
    /// measurement of a prompt is the one the run used).
    pub fn add(&mut self, row: Row) -> Result<(), EvalError> {
        if self.has(&row.stage, &row.method, row.prompt) {
            return Ok(());
        }
        journal::append(&self.path, &row)?;
        self.rows
            .insert((row.stage, row.method, row.prompt), row.values);
        Ok(())
    }

    /// How many rows it holds.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(stage: &str, method: &str, prompt: usize, values: Option<Vec<f64>>) -> Row {
        Row {
            stage: stage.into(),
            method: method.into(),
            prompt,
            values,
        }
    }

    #[test]
    fn rows_survive_a_reopen_keep_their_first_value_and_belong_to_their_run() {
        let dir = std::env::temp_dir().join(format!("hlg-ledger-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("rows.jsonl");
        let head = r#"{"run":"a"}"#;
        let mut l = Ledger::open(&path, head).unwrap();
        assert!(l.is_empty());
        l.add(row("main", "hlg", 3, Some(vec![-1.25, 0.5])))
            .unwrap();
        l.add(row("main", "hlg", 4, None)).unwrap();
        l.add(row("main", "min-p", 3, Some(vec![0.1]))).unwrap();
        // A second measurement of a recorded prompt does not replace the first.
        l.add(row("main", "hlg", 3, Some(vec![9.0]))).unwrap();
        let again = Ledger::open(&path, head).unwrap();
        assert_eq!(again.len(), 3);
        assert!(again.has("main", "hlg", 4) && !again.has("main", "hlg", 5));
        assert!(!again.has("calibration", "hlg", 3));
        let hlg = again.values("main", "hlg");
        // The unmeasured prompt is recorded but has no values.
        assert_eq!(hlg.len(), 1);
        assert_eq!(hlg[&3], vec![-1.25, 0.5]);
        assert_eq!(again.values("main", "min-p")[&3], vec![0.1]);
        // Another run's header starts an empty ledger (the old one set aside, not mixed).
        let other = Ledger::open(&path, r#"{"run":"b"}"#).unwrap();
        assert!(other.is_empty());
        assert!(path.with_extension("jsonl.stale").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
