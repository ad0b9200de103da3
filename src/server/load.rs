//! Loading a GGUF model into the engine the server shares.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use mistralrs_core::{AutoDeviceMapParams, ModelDType, ModelSelected, TokenSource};
use mistralrs_server_core::mistralrs_for_server_builder::MistralRsForServerBuilder;
use mistralrs_server_core::types::SharedMistralRsState;

/// Where the weights come from.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelSource {
    /// A local GGUF file: its directory and file name.
    Local {
        /// The directory holding the file.
        dir: PathBuf,
        /// The file name.
        file: String,
    },
    /// A repository on the Hugging Face hub and a GGUF file in it (needs the network).
    Hub {
        /// `owner/name`.
        repo: String,
        /// The GGUF file name.
        file: String,
    },
}

impl ModelSource {
    /// Resolves `--model`: a GGUF file, a directory holding exactly one GGUF file, or
    /// (with `gguf_file`) a hub repository id.
    pub fn resolve(model: &str, gguf_file: Option<&str>) -> anyhow::Result<Self> {
        let path = Path::new(model);
        if path.is_file() {
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
            let file = path.file_name().context("model path has no file name")?.to_string_lossy().into_owned();
            return Ok(ModelSource::Local { dir: if dir.as_os_str().is_empty() { ".".into() } else { dir }, file });
        }
        if path.is_dir() {
            let file = match gguf_file {
                Some(f) => f.to_string(),
                None => single_gguf(path)?,
            };
            return Ok(ModelSource::Local { dir: path.to_path_buf(), file });
        }
        match gguf_file {
            Some(f) => Ok(ModelSource::Hub { repo: model.to_string(), file: f.to_string() }),
            None => bail!("--model {model}: no such file or directory (for a hub repository, name the file with --gguf-file)"),
        }
    }
}

impl ModelSource {
    /// What the file tells the server beyond the engine: its end-of-sequence tokens
    /// (local files) and the name to serve it under (the file name without `.gguf`).
    pub fn hints(&self) -> super::ModelHints {
        let file = match self {
            ModelSource::Local { file, .. } | ModelSource::Hub { file, .. } => file,
        };
        let eos = match self {
            ModelSource::Local { dir, file } => super::engine::gguf_eos(&dir.join(file)),
            ModelSource::Hub { .. } => vec![],
        };
        super::ModelHints { eos, name: Some(file.strip_suffix(".gguf").unwrap_or(file).to_string()) }
    }
}

fn single_gguf(dir: &Path) -> anyhow::Result<String> {
    let mut found = vec![];
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".gguf") {
            found.push(name);
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => bail!("{}: no .gguf file in this directory", dir.display()),
        _ => bail!("{}: several .gguf files ({}); name one with --gguf-file", dir.display(), found.join(", ")),
    }
}

/// Loads the model on the CPU (or the best device with `cpu = false`), tokenizer and chat
/// template from the GGUF metadata, no hub token.
pub async fn load(source: &ModelSource, cpu: bool) -> anyhow::Result<SharedMistralRsState> {
    load_seeded(source, cpu, None).await
}

/// [`load`] with the engine's device random number generator seeded (upstream's
/// `--seed`). The sampler's generator has a fixed seed of its own in mistral.rs 0.8.1,
/// and candle's CPU device cannot be seeded (upstream's `--seed` fails on the CPU with
/// "cannot seed the CPU rng"), so on the CPU the seed is noted and not applied.
pub async fn load_seeded(source: &ModelSource, cpu: bool, seed: Option<u64>) -> anyhow::Result<SharedMistralRsState> {
    let seed = match seed {
        Some(s) if cpu => {
            tracing::info!(seed = s, "--seed: the CPU device has no random generator to seed, and the sampler's starts from a fixed seed in every fresh engine: runs are reproducible without it");
            None
        }
        other => other,
    };
    let (id, file) = match source {
        ModelSource::Local { dir, file } => (dir.to_string_lossy().into_owned(), file.clone()),
        ModelSource::Hub { repo, file } => (repo.clone(), file.clone()),
    };
    let selected = ModelSelected::GGUF {
        tok_model_id: None,
        quantized_model_id: id,
        quantized_filename: file,
        dtype: ModelDType::Auto,
        topology: None,
        max_seq_len: AutoDeviceMapParams::DEFAULT_MAX_SEQ_LEN,
        max_batch_size: AutoDeviceMapParams::DEFAULT_MAX_BATCH_SIZE,
    };
    let token = match source {
        ModelSource::Local { .. } => TokenSource::None,
        ModelSource::Hub { .. } => TokenSource::CacheToken,
    };
    MistralRsForServerBuilder::new()
        .with_model(selected)
        .with_token_source(token)
        .with_cpu(cpu)
        .with_seed_optional(seed)
        .build()
        .await
        .context("loading the model")
}
