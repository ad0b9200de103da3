//! Logit capture: real generations on the model, recording the logits the processor sees
//! (subsampled), so that knob sweeps run offline without the model.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use candle_core::Tensor;
use mistralrs::{RequestBuilder, TextMessageRole};
use serde::{Deserialize, Serialize};

use super::generate::{draw, fnv1a, pin, SplitMix};
use super::sampler::probs;
use super::EvalError;

/// The model every online run of the evaluation takes ([`load_model`]).
pub use mistralrs::Model;

/// How the capture runs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CaptureConfig {
    /// Tokens generated per prompt.
    pub max_tokens: usize,
    /// Keep every `every`-th position (the first included).
    pub every: usize,
    /// Sampling temperature of the generations (plain temperature, no other filter).
    pub temperature: f64,
    /// The GGUF weights were dequantized to f32 at load ([`weights_dequantized`]).
    #[serde(default)]
    pub dequantized: bool,
    /// Each token drawn by the evaluation from a stream seeded by the prompt's text (the host
    /// then sees one finite logit), so that a capture is the same run after run; the
    /// host's own generator (false: captures made before this field) is seeded afresh
    /// by every engine.
    #[serde(default)]
    pub seeded: bool,
}

/// True when candle dequantizes GGUF weights at load (`CANDLE_DEQUANTIZE_ALL` set and not
/// `0`/`false`, as candle reads it): the model's matmuls then run in f32 on the same
/// weights instead of on the quantized blocks.
pub fn weights_dequantized() -> bool {
    std::env::var("CANDLE_DEQUANTIZE_ALL").is_ok_and(|v| !matches!(v.as_str(), "0" | "false"))
}

impl Default for CaptureConfig {
    fn default() -> Self {
        CaptureConfig {
            max_tokens: 48,
            every: 4,
            temperature: 1.0,
            dequantized: false,
            seeded: true,
        }
    }
}

/// Where a captured row came from.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// Index of the prompt in [`Capture::prompts`].
    pub prompt: usize,
    /// Generation step (0 = the first generated token).
    pub step: usize,
}

/// Captured logits: `rows.len()` vectors of `vocab` entries, flat.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Capture {
    /// The settings the capture ran with.
    pub config: CaptureConfig,
    /// Vocabulary size (entries per row).
    pub vocab: usize,
    /// The prompts, in order.
    pub prompts: Vec<String>,
    /// The generated texts, one per prompt.
    pub texts: Vec<String>,
    /// Where each row came from.
    pub rows: Vec<Row>,
    /// The logits, `rows.len() × vocab`, row-major (not in the JSON).
    #[serde(skip)]
    pub logits: Vec<f32>,
}

impl Capture {
    /// Row `i`'s logits.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.logits[i * self.vocab..(i + 1) * self.vocab]
    }

    /// An FNV-1a hash of the captured logits' bits and their positions, in hex: what a
    /// result computed from this capture records, so that a result of another capture
    /// (with as many rows) is not taken for it.
    ///
    /// ```
    /// use mistralrs_hlg_eval::capture::{Capture, CaptureConfig, Row};
    /// let c = |x: f32| Capture {
    ///     config: CaptureConfig::default(),
    ///     vocab: 2,
    ///     prompts: vec!["p".into()],
    ///     texts: vec!["t".into()],
    ///     rows: vec![Row { prompt: 0, step: 0 }],
    ///     logits: vec![1.0, x],
    /// };
    /// assert_eq!(c(2.0).fingerprint(), c(2.0).fingerprint());
    /// assert_ne!(c(2.0).fingerprint(), c(2.0000002).fingerprint());
    /// ```
    pub fn fingerprint(&self) -> String {
        let words = self
            .rows
            .iter()
            .flat_map(|r| [r.prompt as u32, r.step as u32]);
        let bits = self.logits.iter().map(|x| x.to_bits());
        let h = fnv1a(words.chain(bits).flat_map(u32::to_le_bytes));
        format!("{h:016x}")
    }

    /// Writes `capture.json` and `logits.f32` (little-endian) into `dir`.
    pub fn save(&self, dir: &Path) -> Result<(), EvalError> {
        std::fs::create_dir_all(dir).map_err(EvalError::io("creating", dir))?;
        let meta = dir.join("capture.json");
        let text = serde_json::to_string_pretty(self).expect("a capture serializes");
        std::fs::write(&meta, text).map_err(EvalError::io("writing", &meta))?;
        let path = dir.join("logits.f32");
        let write = || -> std::io::Result<()> {
            let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
            for v in &self.logits {
                f.write_all(&v.to_le_bytes())?;
            }
            f.flush()
        };
        write().map_err(EvalError::io("writing", &path))
    }

    /// Reads what [`Capture::save`] wrote.
    pub fn load(dir: &Path) -> Result<Capture, EvalError> {
        let meta = dir.join("capture.json");
        let text = std::fs::read_to_string(&meta).map_err(EvalError::io(
            "reading (run `mistralrs-hlg-eval capture` first)",
            &meta,
        ))?;
        let mut c: Capture = serde_json::from_str(&text).map_err(|e| EvalError::Data {
            path: meta.clone(),
            problem: e.to_string(),
        })?;
        let path = dir.join("logits.f32");
        let mut bytes = vec![];
        std::fs::File::open(&path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(EvalError::io("reading", &path))?;
        if bytes.len() != c.rows.len() * c.vocab * 4 {
            return Err(EvalError::Data {
                problem: format!(
                    "{} bytes, expected {} rows × {} × 4",
                    bytes.len(),
                    c.rows.len(),
                    c.vocab
                ),
                path,
            });
        }
        c.logits = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok(c)
    }
}

impl Capture {
    /// Appends one prompt's recorded `(step, logits)` rows; every row must have the
    /// vocabulary's length.
    /// A capture of `prompts` under `config` with no row yet; the settings checked.
    pub(crate) fn empty(config: &CaptureConfig, prompts: &[&str]) -> Result<Capture, EvalError> {
        if !(config.every >= 1 && config.max_tokens >= 1 && config.temperature > 0.0) {
            return Err(EvalError::Invalid(
                "capture: every >= 1, max_tokens >= 1, temperature > 0".into(),
            ));
        }
        Ok(Capture {
            config: config.clone(),
            vocab: 0,
            prompts: prompts.iter().map(|p| p.to_string()).collect(),
            texts: vec![],
            rows: vec![],
            logits: vec![],
        })
    }

    /// Prompt `prompt`'s generated text and its kept `(step, logits)` rows, whichever
    /// model made them (the engine's [`capture`], Gemma's own loop).
    pub(crate) fn push_prompt(
        &mut self,
        prompt: usize,
        text: String,
        rows: Vec<(usize, Vec<f32>)>,
    ) -> Result<(), EvalError> {
        self.texts.push(text);
        for (step, x) in rows {
            if self.vocab == 0 {
                self.vocab = x.len();
            }
            if x.len() != self.vocab {
                return Err(EvalError::Invalid(format!(
                    "a row of {} logits, expected {}",
                    x.len(),
                    self.vocab
                )));
            }
            self.rows.push(Row { prompt, step });
            self.logits.extend(x);
        }
        Ok(())
    }
}

/// The step count and the recorded (step, logits) rows of one prompt's generation.
type Seen = Arc<Mutex<(usize, Vec<(usize, Vec<f32>)>)>>;

/// The logits processor of a capture: counts the steps into `sink`, keeps every
/// `every`-th step's logits there and, when seeded, draws plain temperature's token
/// itself from a stream named by the prompt (the host can then only pick that token).
fn recorder(
    config: &CaptureConfig,
    prompt: &str,
    sink: Seen,
) -> impl Fn(&Tensor, &[u32]) -> candle_core::Result<Tensor> + Send + Sync + 'static {
    let every = config.every;
    let temperature = config.temperature;
    let draws = config
        .seeded
        .then(|| Mutex::new(SplitMix::named(&format!("capture|{prompt}"))));
    move |logits: &Tensor, _: &[u32]| {
        let mut s = sink.lock().unwrap();
        let step = s.0;
        s.0 += 1;
        let keep = step.is_multiple_of(every);
        // Copied out only when recorded or drawn from.
        let x = if keep || draws.is_some() {
            logits.to_vec1::<f32>()?
        } else {
            vec![]
        };
        let out = match &draws {
            // Plain temperature's draw, made here; the host can only pick this token.
            Some(draws) => {
                let pick = draw(&probs(&x, temperature), draws.lock().unwrap().unit());
                let mut y = vec![0.0; x.len()];
                pin(&mut y, pick);
                Tensor::from_vec(y, x.len(), logits.device())?
            }
            None => logits.clone(),
        };
        if keep {
            s.1.push((step, x));
        }
        Ok(out)
    }
}

/// Generates from each prompt, one request after another, and records the logits at
/// every `every`-th step. `progress` is called after each prompt.
pub async fn capture(
    model: &mistralrs::Model,
    prompts: &[&str],
    config: &CaptureConfig,
    mut progress: impl FnMut(usize),
) -> Result<Capture, EvalError> {
    let mut out = Capture::empty(config, prompts)?;
    for (pi, p) in prompts.iter().enumerate() {
        let seen: Seen = Arc::default();
        let record = recorder(config, p, seen.clone());
        let req = RequestBuilder::new()
            .add_message(TextMessageRole::User, *p)
            .set_sampler_max_len(config.max_tokens)
            .set_sampler_temperature(config.temperature)
            .set_sampler_topk(0)
            .set_sampler_topp(1.0)
            .set_sampler_minp(0.0)
            .add_logits_processor(Arc::new(record));
        let resp = model
            .send_chat_request(req)
            .await
            .map_err(EvalError::engine)?;
        let text = resp.choices.first().and_then(|c| c.message.content.clone());
        let rows = std::mem::take(&mut seen.lock().unwrap().1);
        out.push_prompt(pi, text.unwrap_or_default(), rows)?;
        progress(pi + 1);
    }
    Ok(out)
}

/// The embedded model (or the GGUF at `path`) through mistral.rs's Rust API, on the CPU.
pub async fn load_model(path: Option<&Path>) -> Result<mistralrs::Model, EvalError> {
    let gguf = match path {
        Some(p) => p.to_path_buf(),
        None => mistralrs_hlg::model::ensure_default_model()?,
    };
    let (Some(dir), Some(file)) = (gguf.parent(), gguf.file_name()) else {
        return Err(EvalError::Invalid(format!(
            "{}: not a path to a file",
            gguf.display()
        )));
    };
    let dir = dir.to_string_lossy().into_owned();
    mistralrs::GgufModelBuilder::new(dir, vec![file.to_string_lossy().into_owned()])
        .with_token_source(mistralrs::TokenSource::None)
        .with_force_cpu()
        // Off, as in the server on the CPU: mistral.rs keeps every finished sequence's KV
        // cache there, and a long run grew past the machine's memory (23 GB, 845 samples).
        .with_prefix_cache_n(None)
        .build()
        .await
        .map_err(EvalError::engine)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_and_load_round_trip() {
        let c = Capture {
            config: CaptureConfig::default(),
            vocab: 3,
            prompts: vec!["a".into()],
            texts: vec!["b".into()],
            rows: vec![Row { prompt: 0, step: 0 }, Row { prompt: 0, step: 4 }],
            logits: vec![1.0, -2.5, f32::NEG_INFINITY, 0.0, 3.25, -1e30],
        };
        let dir = std::env::temp_dir().join(format!("hlg-capture-test-{}", std::process::id()));
        c.save(&dir).unwrap();
        let back = Capture::load(&dir).unwrap();
        assert_eq!(back.logits, c.logits);
        assert_eq!(
            (&back.rows, back.vocab, &back.config),
            (&c.rows, 3, &c.config)
        );
        assert_eq!(back.row(1), &[0.0, 3.25, -1e30]);
        std::fs::write(dir.join("logits.f32"), [0u8; 8]).unwrap();
        assert!(Capture::load(&dir)
            .unwrap_err()
            .to_string()
            .contains("expected 2 rows"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
