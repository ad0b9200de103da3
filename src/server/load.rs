//! Loading a GGUF model into the engine the server shares.

use std::path::{Path, PathBuf};

use mistralrs_core::TokenSource;
use mistralrs_server_core::mistralrs_for_server_builder::MistralRsForServerBuilder;
use mistralrs_server_core::types::SharedMistralRsState;

use super::error::ServerError;

/// Where the weights come from.
///
/// ```
/// use mistralrs_hlg::server::load::ModelSource;
/// let hub = ModelSource::resolve("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", Some("q4.gguf"))?;
/// assert_eq!(hub, ModelSource::Hub { repo: "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF".into(), file: "q4.gguf".into() });
/// # Ok::<(), mistralrs_hlg::server::ServerError>(())
/// ```
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
    /// A model in Hugging Face's layout (`config.json`, safetensors, `tokenizer.json`,
    /// optionally `tokenizer_config.json` and `generation_config.json`): a local directory,
    /// or (with `--format plain`) a hub repository id. The architecture comes from
    /// `config.json`, as upstream's `serve` detects it.
    Plain {
        /// The directory, or `owner/name` on the hub.
        model_id: String,
    },
}

impl ModelSource {
    /// Resolves `--model`: a GGUF file, a directory holding exactly one GGUF file, a
    /// model directory in Hugging Face's layout (one with a `config.json`, when no
    /// `gguf_file` is named), or (with `gguf_file`) a hub repository id.
    ///
    /// ```
    /// use mistralrs_hlg::server::load::ModelSource;
    /// let dir = std::env::temp_dir().join(format!("hlg-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// std::fs::write(dir.join("m.gguf"), b"").unwrap();
    /// let got = ModelSource::resolve(dir.to_str().unwrap(), None)?;
    /// assert_eq!(got, ModelSource::Local { dir: dir.clone(), file: "m.gguf".into() });
    /// assert!(ModelSource::resolve("/no/such/model.gguf", None).unwrap_err().to_string().contains("--gguf-file"));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), mistralrs_hlg::server::ServerError>(())
    /// ```
    pub fn resolve(model: &str, gguf_file: Option<&str>) -> Result<Self, ServerError> {
        Self::resolve_format(model, gguf_file, None)
    }

    /// [`ModelSource::resolve`] with upstream's `--format`: `gguf`, `plain` (Hugging Face
    /// layout), or `None` to detect it: a directory with a `config.json` and no
    /// `--gguf-file` is a plain model, anything else GGUF.
    ///
    /// ```
    /// use mistralrs_hlg::server::load::ModelSource;
    /// let dir = std::env::temp_dir().join(format!("hlg-doc-plain-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// std::fs::write(dir.join("config.json"), b"{}").unwrap();
    /// let id = dir.to_str().unwrap();
    /// assert_eq!(ModelSource::resolve(id, None)?, ModelSource::Plain { model_id: id.into() });
    /// let hub = ModelSource::resolve_format("owner/model", None, Some("plain"))?;
    /// assert_eq!(hub, ModelSource::Plain { model_id: "owner/model".into() });
    /// let e = ModelSource::resolve_format(id, None, Some("gguf")).unwrap_err();
    /// assert!(e.to_string().contains("no .gguf file"));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), mistralrs_hlg::server::ServerError>(())
    /// ```
    pub fn resolve_format(
        model: &str,
        gguf_file: Option<&str>,
        format: Option<&str>,
    ) -> Result<Self, ServerError> {
        let path = Path::new(model);
        let plain = match format {
            Some("plain") => true,
            Some(_) => false,
            None => gguf_file.is_none() && path.join("config.json").is_file(),
        };
        if plain {
            return Ok(ModelSource::Plain {
                model_id: model.to_string(),
            });
        }
        if path.is_file() {
            let dir = path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."));
            // A path that is a file has a file name.
            let file = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            return Ok(ModelSource::Local {
                dir: if dir.as_os_str().is_empty() {
                    ".".into()
                } else {
                    dir
                },
                file,
            });
        }
        if path.is_dir() {
            let file = match gguf_file {
                Some(f) => f.to_string(),
                None => single_gguf(path)?,
            };
            return Ok(ModelSource::Local {
                dir: path.to_path_buf(),
                file,
            });
        }
        match gguf_file {
            Some(f) => Ok(ModelSource::Hub { repo: model.to_string(), file: f.to_string() }),
            None => Err(ServerError::Model {
                path: model.into(),
                problem: "no such file or directory (for a hub repository, name the file with --gguf-file)".into(),
            }),
        }
    }
}

impl ModelSource {
    /// What the file tells the server beyond the engine: its end-of-sequence tokens
    /// (local files) and the name to serve it under (the file name without `.gguf`).
    ///
    /// ```
    /// use mistralrs_hlg::server::load::ModelSource;
    /// let local = ModelSource::Local { dir: "/models".into(), file: "smollm2.gguf".into() };
    /// assert_eq!(local.hints().name.as_deref(), Some("smollm2"));
    /// ```
    pub fn hints(&self) -> ModelHints {
        let (eos, name) = match self {
            ModelSource::Local { dir, file } => (super::metadata::gguf_eos(&dir.join(file)), file),
            ModelSource::Hub { file, .. } => (vec![], file),
            ModelSource::Plain { model_id } => {
                let eos = super::metadata::plain_eos(Path::new(model_id));
                let name = model_id.trim_end_matches('/').rsplit('/').next();
                return ModelHints {
                    eos,
                    name: name.filter(|n| !n.is_empty()).map(str::to_string),
                };
            }
        };
        ModelHints {
            eos,
            name: Some(name.strip_suffix(".gguf").unwrap_or(name).to_string()),
        }
    }
}

/// What the server knows of the model from its file, beyond what the engine says.
///
/// ```
/// use mistralrs_hlg::server::load::ModelSource;
/// let source = ModelSource::Hub { repo: "owner/repo".into(), file: "m-q4.gguf".into() };
/// let hints = source.hints();
/// assert_eq!((hints.name.as_deref(), hints.eos.len()), (Some("m-q4"), 0));
/// ```
#[derive(Clone, Debug, Default)]
pub struct ModelHints {
    /// The end-of-sequence token ids ([`super::metadata::gguf_eos`]): used to end a
    /// disconnected client's non-streamed generation at its next token.
    pub eos: Vec<u32>,
    /// The name to serve the model under when `--served-model-name` is not given.
    pub name: Option<String>,
}

fn single_gguf(dir: &Path) -> Result<String, ServerError> {
    let io = |source| ServerError::Io {
        what: "reading",
        path: dir.to_path_buf(),
        source,
    };
    let mut found = vec![];
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let name = entry
            .map_err(io)?
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".gguf") {
            found.push(name);
        }
    }
    let problem = match found.len() {
        1 => return Ok(found.remove(0)),
        0 => "no .gguf file in this directory".to_string(),
        _ => format!(
            "several .gguf files ({}); name one with --gguf-file",
            found.join(", ")
        ),
    };
    Err(ServerError::Model {
        path: dir.to_path_buf(),
        problem,
    })
}

/// How the engine is built around the model.
///
/// ```
/// use mistralrs_hlg::server::load::{EngineOptions, CPU_PREFIX_CACHE_N};
/// let cpu = EngineOptions { cpu: true, ..Default::default() };
/// let bounded = mistralrs_hlg::server::load::engine_bounds_cpu_prefix_cache();
/// assert_eq!((cpu.on_cpu(), cpu.prefix_cache()), (true, if bounded { CPU_PREFIX_CACHE_N } else { 0 }));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineOptions {
    /// Force the CPU (upstream's `--cpu`). Otherwise the best device this build has
    /// (CUDA with the `cuda` feature, Metal with `metal`), else the CPU.
    pub cpu: bool,
    /// Seed of the device's random number generator (upstream's `--seed`).
    pub seed: Option<u64>,
    /// Sequences whose KV cache the engine keeps for prefix reuse (upstream's
    /// `--prefix-cache-n`; 0 turns prefix caching off). Unset: upstream's 16 on an
    /// accelerator. On the CPU, [`CPU_PREFIX_CACHE_N`] where the engine bounds the caches
    /// it keeps there ([`engine_bounds_cpu_prefix_cache`]: `scripts/serve`'s engine), and
    /// 0 on the registry's mistral.rs, which evicts only caches held on an accelerator: on
    /// the CPU every finished request's KV cache would stay, and memory would grow with
    /// every request (docs/NOTES.md, "Prefix reuse on the CPU").
    pub prefix_cache_n: Option<usize>,
    /// In-situ quantization of a plain model's weights at load (upstream's `--isq`:
    /// `q4k`, `q8_0`, `8`, …), parsed by the host.
    pub isq: Option<String>,
}

/// Upstream's number of prefix caches kept on an accelerator.
///
/// ```
/// use mistralrs_hlg::server::load::{EngineOptions, UPSTREAM_PREFIX_CACHE_N};
/// let o = EngineOptions { cpu: true, prefix_cache_n: Some(UPSTREAM_PREFIX_CACHE_N), ..Default::default() };
/// assert_eq!(o.prefix_cache(), 16, "asked for: kept on the CPU too");
/// ```
pub const UPSTREAM_PREFIX_CACHE_N: usize = 16;

/// The prefix caches a CPU engine keeps by default where it bounds them: the KV caches of
/// the four newest finished sequences (the oldest evicted first), so up to four
/// conversations at once continue without recomputing their history. Each holds its
/// sequence's keys and values, allocated in blocks of 512 positions: on the embedded
/// model (30 layers, 3 KV heads of 64, f16) 11.8 MB per block.
pub const CPU_PREFIX_CACHE_N: usize = 4;

/// The `patches/mistralrs-core-<version>` series this build's engine carries, its file
/// names joined by commas: set when the crate is compiled, by `scripts/serve`,
/// `scripts/test-patched-engine` and `scripts/host-workspace --patched-core` (cargo's
/// `--config env.MISTRALRS_HLG_CORE_PATCHES`, beside the patched crate itself). `None` on
/// the registry's engine, which a deployment's own build and `cargo run` link.
pub const CORE_PATCHES: Option<&str> = option_env!("MISTRALRS_HLG_CORE_PATCHES");

/// Whether this build's engine serves a prefix cache on the CPU right and in bounded
/// memory: its core carries the series' patches for both ([`CORE_PATCHES`]). The bound:
/// `prefix-cache-bounded-on-the-cpu` (the host evicts only caches off the CPU). On 0.8.1
/// also `prefix-cache-matches-only-positions-it-holds` (its matching hands the next
/// turn a KV row never computed; mistral.rs 0.9 has the fix).
pub fn engine_bounds_cpu_prefix_cache() -> bool {
    bounds_cpu_prefix_cache(CORE_PATCHES)
}

/// Whether this build's engine resumes the completions its scheduler parked as
/// completions (patch `scheduler-parked-completions-resume-as-completions`, 0.8.1). Without
/// it, batching with a prefix cache corrupts answers: a parked prefix-cache hit is
/// prefilled again on top of its own cache (docs/NOTES.md, on every device).
pub fn engine_resumes_parked_completions() -> bool {
    CORE_PATCHES.is_some_and(|s| s.contains("scheduler-parked-completions-resume-as-completions"))
}

/// The patches (file names after the number) a CPU prefix cache needs on this host.
const CPU_PREFIX_CACHE_PATCHES: &[&str] = if cfg!(mistralrs_host = "0.9") {
    &["prefix-cache-bounded-on-the-cpu.patch"]
} else {
    &[
        "prefix-cache-bounded-on-the-cpu.patch",
        "prefix-cache-matches-only-positions-it-holds.patch",
    ]
};

fn bounds_cpu_prefix_cache(series: Option<&str>) -> bool {
    let Some(series) = series else {
        return false;
    };
    let carried: Vec<&str> = series
        .split(',')
        .filter_map(|p| p.trim().split_once('-').map(|(_, name)| name))
        .collect();
    CPU_PREFIX_CACHE_PATCHES
        .iter()
        .all(|needed| carried.contains(needed))
}

impl EngineOptions {
    /// Whether the engine will run on the CPU: forced, or no accelerator compiled in and
    /// present (the detection upstream's server builder makes).
    ///
    /// ```
    /// use mistralrs_hlg::server::load::EngineOptions;
    /// assert!(EngineOptions { cpu: true, ..Default::default() }.on_cpu());
    /// ```
    pub fn on_cpu(&self) -> bool {
        self.cpu
            || !(candle_core::utils::cuda_is_available()
                || candle_core::utils::metal_is_available())
    }

    /// The prefix-cache size the engine gets (see [`EngineOptions::prefix_cache_n`]).
    ///
    /// ```
    /// use mistralrs_hlg::server::load::EngineOptions;
    /// let o = EngineOptions { prefix_cache_n: Some(4), ..Default::default() };
    /// assert_eq!(o.prefix_cache(), 4);
    /// ```
    pub fn prefix_cache(&self) -> usize {
        default_prefix_cache(self.prefix_cache_n, self.on_cpu(), CORE_PATCHES)
    }
}

/// `--prefix-cache-n` as given, else the default for the device and the engine's series.
fn default_prefix_cache(given: Option<usize>, on_cpu: bool, series: Option<&str>) -> usize {
    match (given, on_cpu) {
        (Some(n), _) => n,
        (None, false) => UPSTREAM_PREFIX_CACHE_N,
        (None, true) if bounds_cpu_prefix_cache(series) => CPU_PREFIX_CACHE_N,
        (None, true) => 0,
    }
}

/// Loads the model on the CPU, tokenizer and chat template from the GGUF metadata, no hub
/// token; [`load_with`] takes the device and the engine's other options.
///
/// ```
/// use mistralrs_hlg::server::load::{load, ModelSource};
///
/// # async fn run() -> Result<(), mistralrs_hlg::server::ServerError> {
/// let engine = load(&ModelSource::resolve("/models/model.gguf", None)?).await?;
/// # Ok(()) }
/// ```
pub async fn load(source: &ModelSource) -> Result<SharedMistralRsState, ServerError> {
    load_with(
        source,
        &EngineOptions {
            cpu: true,
            ..EngineOptions::default()
        },
    )
    .await
}

/// [`load`] with the engine's options. The sampler's generator has a fixed seed of its
/// own in mistral.rs 0.8.1, and candle's CPU device cannot be seeded (upstream's
/// `--seed` fails on the CPU with "cannot seed the CPU rng"), so on the CPU the seed is
/// noted and not applied.
///
/// ```
/// use mistralrs_hlg::server::load::{load_with, EngineOptions, ModelSource};
///
/// # async fn run() -> Result<(), mistralrs_hlg::server::ServerError> {
/// let source = ModelSource::resolve("/models/model.gguf", None)?;
/// let options = EngineOptions { seed: Some(7), prefix_cache_n: Some(0), ..Default::default() };
/// let engine = load_with(&source, &options).await?;
/// # Ok(()) }
/// ```
pub async fn load_with(
    source: &ModelSource,
    options: &EngineOptions,
) -> Result<SharedMistralRsState, ServerError> {
    let on_cpu = options.on_cpu();
    let seed = match options.seed {
        Some(s) if on_cpu => {
            tracing::info!(seed = s, "--seed: the CPU device has no random generator to seed, and the sampler's starts from a fixed seed in every fresh engine: runs are reproducible without it");
            None
        }
        other => other,
    };
    host_can_run(source, on_cpu)?;
    let prefix_cache_n = options.prefix_cache();
    tracing::info!(
        on_cpu,
        prefix_cache_n,
        core_patches = CORE_PATCHES.unwrap_or("none"),
        "engine options"
    );
    if on_cpu && prefix_cache_n > 0 && !engine_bounds_cpu_prefix_cache() {
        tracing::warn!(prefix_cache_n, "--prefix-cache-n on the CPU with the registry's mistral.rs: it never evicts a prefix cache kept on the CPU, so memory grows with every request (scripts/serve builds the engine that bounds them)");
    }
    let (selected, local) = match source {
        ModelSource::Local { dir, file } => (
            super::host_version::gguf(dir.to_string_lossy().into_owned(), file.clone()),
            true,
        ),
        ModelSource::Hub { repo, file } => {
            (super::host_version::gguf(repo.clone(), file.clone()), false)
        }
        ModelSource::Plain { model_id } => (
            super::host_version::plain(model_id.clone()),
            Path::new(model_id).is_dir(),
        ),
    };
    let token = if local {
        TokenSource::None
    } else {
        TokenSource::CacheToken
    };
    MistralRsForServerBuilder::new()
        .with_model(selected)
        .with_token_source(token)
        .with_cpu(options.cpu)
        .with_seed_optional(seed)
        .with_prefix_cache_n(prefix_cache_n)
        .with_in_situ_quant_optional(options.isq.clone())
        .build()
        .await
        .map_err(ServerError::upstream("loading the model"))
}

/// GGUF architectures that mistral.rs 0.9.2 loads and 0.8.1 does not
/// (`gguf/normal_registry.rs` and `pipeline/gguf.rs`'s native Gemma 3 text model).
const ONLY_0_9: [&str; 19] = [
    "gemma",
    "gemma2",
    "gemma3",
    "phimoe",
    "qwen3next",
    "qwen35",
    "qwen35moe",
    "deepseek2",
    "glm4",
    "glm4moe",
    "smollm3",
    "granite",
    "granitemoe",
    "granitehybrid",
    "gpt-oss",
    "hunyuan-dense",
    "hunyuan-moe",
    "lfm2",
    "lfm2moe",
];

/// Refuses, before loading, a model the host cannot run: on 0.8.1 a GGUF architecture
/// only 0.9.2 loads (named, with the host that does), and on the CPU a Qwen3-MoE GGUF
/// model, whose experts run through candle 0.10's `indexed_moe_forward`, a CUDA kernel
/// only (on the CPU the first forward pass panics in the engine's thread and every
/// request fails).
fn host_can_run(source: &ModelSource, on_cpu: bool) -> Result<(), ServerError> {
    let ModelSource::Local { dir, file } = source else {
        return Ok(());
    };
    let path = dir.join(file);
    if cfg!(mistralrs_host = "0.9") {
        return Ok(());
    }
    let arch = super::metadata::gguf_architecture(&path);
    if let Some(arch) = arch.as_deref().filter(|a| ONLY_0_9.contains(a)) {
        return Err(ServerError::Model {
            path,
            problem: format!(
                "mistral.rs 0.8.1, this build's host, has no `{arch}` GGUF architecture; \
                 mistral.rs 0.9.2 loads it (a build on 0.9.2: scripts/host-workspace 0.9.2)"
            ),
        });
    }
    if on_cpu && arch.as_deref() == Some("qwen3moe") {
        return Err(ServerError::Model {
            path,
            problem: "a Qwen3-MoE GGUF model runs only on CUDA with mistral.rs 0.8.1 (candle's \
                      quantized mixture-of-experts kernel has no CPU version)"
                .into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_default_follows_the_engines_eviction() {
        let series = "0001-cpu-decode-attention-scratch-per-batch-row.patch,0003-prefix-cache-bounded-on-the-cpu.patch,0004-prefix-cache-matches-only-positions-it-holds.patch";
        assert!(bounds_cpu_prefix_cache(Some(series)));
        // The bound alone is enough only where the host matches right (0.9).
        let bound_only = "0002-prefix-cache-bounded-on-the-cpu.patch";
        assert_eq!(
            bounds_cpu_prefix_cache(Some(bound_only)),
            cfg!(mistralrs_host = "0.9")
        );
        assert!(!bounds_cpu_prefix_cache(Some(
            "0001-cpu-decode-attention-scratch-per-batch-row.patch"
        )));
        assert!(!bounds_cpu_prefix_cache(None));
        // The repository's own series qualify on their host.
        let own = |v: &str| -> String {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("patches")
                .join(format!("mistralrs-core-{v}"));
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names.join(",")
        };
        let host = if cfg!(mistralrs_host = "0.9") {
            "0.9.2"
        } else {
            "0.8.1"
        };
        assert!(bounds_cpu_prefix_cache(Some(&own(host))), "{}", own(host));
        assert_eq!(
            default_prefix_cache(None, true, Some(series)),
            CPU_PREFIX_CACHE_N
        );
        assert_eq!(default_prefix_cache(None, true, None), 0);
        assert_eq!(default_prefix_cache(Some(0), true, Some(series)), 0);
        assert_eq!(default_prefix_cache(Some(9), true, None), 9);
        assert_eq!(
            default_prefix_cache(None, false, None),
            UPSTREAM_PREFIX_CACHE_N
        );
        // This build's own series, as the scripts set it.
        assert_eq!(
            engine_bounds_cpu_prefix_cache(),
            CORE_PATCHES.is_some_and(|s| s.contains("prefix-cache-bounded-on-the-cpu"))
        );
    }

    #[test]
    fn the_cpu_engine_gets_no_prefix_cache_unless_asked() {
        let cpu = EngineOptions {
            cpu: true,
            ..EngineOptions::default()
        };
        assert!(cpu.on_cpu());
        assert_eq!(
            cpu.prefix_cache(),
            if engine_bounds_cpu_prefix_cache() {
                CPU_PREFIX_CACHE_N
            } else {
                0
            },
            "the registry's mistral.rs never evicts CPU prefix caches"
        );
        assert_eq!(
            EngineOptions {
                prefix_cache_n: Some(16),
                ..cpu.clone()
            }
            .prefix_cache(),
            16
        );
        // Without `cpu` the device is detected: an accelerator compiled in keeps upstream's.
        let detected = EngineOptions::default();
        let accelerator =
            candle_core::utils::cuda_is_available() || candle_core::utils::metal_is_available();
        assert_eq!(detected.on_cpu(), !accelerator);
        assert_eq!(
            detected.prefix_cache(),
            if accelerator {
                UPSTREAM_PREFIX_CACHE_N
            } else {
                cpu.prefix_cache()
            }
        );
    }
}
