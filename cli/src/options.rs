//! `mistralrs-hlg serve`'s options: upstream's `serve` flags under upstream's names, the
//! weight format, and the HLG options the library shares with the patched upstream CLIs
//! (`server::HlgServerOptions`); one type for the command line (clap) and the config file
//! (serde).

use std::path::{Path, PathBuf};

use clap::{Args, Command};
use mistralrs_hlg::server::{HlgServerOptions, OptionError};
use serde::Deserialize;

/// A config file that could not be used; the message names the file or the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigFileError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A key that is not one of the long flags.
    #[error("unknown key `{0}`")]
    UnknownKey(String),
    /// Not TOML, or a value of the wrong type (`port = 70000`).
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    /// One of the above, in the named file.
    #[error("in {path}: {error}")]
    In {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        error: Box<ConfigFileError>,
    },
}

/// Every option of `mistralrs-hlg serve`, for its command line (clap) and its config file
/// (serde, `ServeOptions::from_toml`): upstream's `serve` options under upstream's
/// names (`-m/--model-id`, `-f/--quantized-file`, `-p/--port`, `--seed`, `--cpu`,
/// `--prefix-cache-n`), and the HLG options. The file's keys are the long flags
/// (`port = 8080`, `hlg-toe = 3.0`; `_` for `-` accepted).
#[derive(Args, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct ServeOptions {
    /// A GGUF file, a directory holding one, a model directory in Hugging Face's layout
    /// (`config.json`, safetensors, `tokenizer.json`), or a hub repository id (with
    /// --quantized-file, or --format plain). Upstream's name; `--model` is the same.
    #[arg(short = 'm', long = "model-id", alias = "model")]
    #[serde(default, rename = "model-id", alias = "model")]
    pub model: Option<String>,
    /// The GGUF file name inside --model-id. Upstream's name; `--gguf-file` is the same.
    #[arg(short = 'f', long = "quantized-file", alias = "gguf-file")]
    #[serde(default, rename = "quantized-file", alias = "gguf-file")]
    pub gguf_file: Option<String>,
    /// The model's format, as upstream's `--format`: `plain` (Hugging Face layout) or
    /// `gguf`. Detected when not given: a directory with a `config.json` is plain.
    #[arg(long, value_parser = ["plain", "gguf"])]
    #[serde(default)]
    pub format: Option<String>,
    /// Quantize a plain model's weights in place at load (upstream's `--isq`: `q4k`,
    /// `q8_0`, `8`, …; the host parses the level).
    #[arg(long)]
    #[serde(default)]
    pub isq: Option<String>,
    /// Address to bind [default: 127.0.0.1].
    #[arg(long)]
    #[serde(default)]
    pub host: Option<String>,
    /// Port to bind [default: 1234].
    #[arg(short = 'p', long)]
    #[serde(default)]
    pub port: Option<u16>,
    /// Seed of the engine's device random number generator (as upstream's `--seed`; on a
    /// GPU). The sampler's own generator starts from a fixed seed in every fresh engine
    /// (mistral.rs 0.8.1), so a fresh server answers the same sequence of requests with
    /// the same samples with or without this; no per-request seed exists. The CPU device
    /// has no generator to seed: there the seed is noted and has no effect.
    #[arg(long)]
    #[serde(default)]
    pub seed: Option<u64>,
    /// A TOML file with the same keys as these flags (`hlg-toe = 3.0`, `port = 8080`);
    /// flags win over it. (Not a key of the file itself.)
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Run on the CPU even when this build has an accelerator (upstream's `--cpu`). Without
    /// it the engine takes CUDA (the `cuda` feature) or Metal (`metal`) when present, else
    /// the CPU.
    #[arg(long)]
    #[serde(default)]
    pub cpu: bool,
    /// Finished sequences whose KV cache the engine keeps for prefix reuse (upstream's
    /// flag; 0 turns it off). Default: 16 on an accelerator, 0 on the CPU, where
    /// mistral.rs 0.8.1 never evicts them and memory would grow with every request.
    #[arg(long)]
    #[serde(default)]
    pub prefix_cache_n: Option<usize>,
    /// The format a local GGUF model's weights are served in: `auto` (`f16` for a
    /// quantized model of at most 1 GiB of weights at F16, as the embedded Q4_1 model;
    /// otherwise as the file has them), `as-is`, `f16` or `f32` (dequantized at load: on
    /// the CPU faster prompts, slower decoding than quantized blocks), or `q8_0` (a copy
    /// converted once into the model cache directory) [default: auto].
    #[arg(long, value_parser = ["auto", "as-is", "f16", "f32", "q8_0"])]
    #[serde(default)]
    pub weights: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    #[allow(missing_docs)]
    pub hlg: HlgServerOptions,
}

impl ServeOptions {
    /// The options a config file sets; every key must be a long flag of these options.
    pub fn from_toml(text: &str) -> Result<ServeOptions, ConfigFileError> {
        let table: toml::Table = text.parse()?;
        let known = Self::file_keys();
        let mut normal = toml::Table::new();
        for (key, value) in table {
            let key = key.replace('_', "-");
            if !known.contains(&key) {
                return Err(ConfigFileError::UnknownKey(key));
            }
            normal.insert(key, value);
        }
        Ok(ServeOptions::deserialize(toml::Value::Table(normal))?)
    }

    /// `Self::from_toml` of a file; the error names it.
    pub fn read(path: &Path) -> Result<ServeOptions, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
            path: path.into(),
            source,
        })?;
        Self::from_toml(&text).map_err(|e| ConfigFileError::In {
            path: path.into(),
            error: Box::new(e),
        })
    }

    /// The keys a config file may hold: every long flag and its aliases but `--config`,
    /// from the command line's own declaration.
    pub fn file_keys() -> Vec<String> {
        let cmd = Self::augment_args(Command::new("serve"));
        cmd.get_arguments()
            .filter(|a| a.get_long() != Some("config"))
            .flat_map(|a| {
                let aliases = a.get_all_aliases().unwrap_or_default();
                a.get_long().into_iter().chain(aliases).map(String::from)
            })
            .collect()
    }

    /// These options over `base` (each one that is set wins), e.g. a command line over its
    /// config file.
    pub fn over(&self, base: &ServeOptions) -> ServeOptions {
        ServeOptions {
            model: self.model.clone().or_else(|| base.model.clone()),
            gguf_file: self.gguf_file.clone().or_else(|| base.gguf_file.clone()),
            format: self.format.clone().or_else(|| base.format.clone()),
            isq: self.isq.clone().or_else(|| base.isq.clone()),
            host: self.host.clone().or_else(|| base.host.clone()),
            port: self.port.or(base.port),
            seed: self.seed.or(base.seed),
            config: self.config.clone().or_else(|| base.config.clone()),
            cpu: self.cpu || base.cpu,
            prefix_cache_n: self.prefix_cache_n.or(base.prefix_cache_n),
            weights: self.weights.clone().or_else(|| base.weights.clone()),
            hlg: self.hlg.over(&base.hlg),
        }
    }

    /// Every HLG value checked, before a model loads: the error names the flag.
    pub fn check(&self) -> Result<(), OptionError> {
        self.hlg.flags.defaults()?;
        self.hlg.backend()?;
        self.hlg.choices()?;
        self.hlg.batching()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mistralrs_hlg::config::RawValue;
    use mistralrs_hlg::params::Field;

    #[test]
    fn config_file_sets_serve_options_and_flags_win() {
        let file = ServeOptions::from_toml("model = \"m.gguf\"\nport = 8080\nhlg-sampling = \"on\"\nhlg-toe = 2\nhlg-n-choices = \"batched\"").unwrap();
        assert_eq!(
            (file.model.as_deref(), file.port),
            (Some("m.gguf"), Some(8080))
        );
        let args = parse(["serve", "--hlg-toe", "5", "--hlg-width", "off"]).unwrap();
        let hlg = args.hlg.over(&file.hlg);
        let cfg = hlg.flags.defaults().unwrap();
        assert_eq!(cfg.enabled(), Some(true));
        assert_eq!((cfg.curve().toe(), cfg.curve().width()), (Some(5.0), None));
        assert_eq!(
            hlg.choices(),
            Ok(Some(mistralrs_hlg::server::Choices::Batched))
        );
        assert_eq!(hlg.flags.get(Field::Toe), Some(&RawValue::Number(5.0)));
    }

    #[test]
    fn upstream_flag_names() {
        let args = parse([
            "serve",
            "-p",
            "8080",
            "--seed",
            "1",
            "-m",
            "/m",
            "-f",
            "x.gguf",
            "--format",
            "gguf",
            "--cpu",
            "--prefix-cache-n",
            "4",
        ])
        .unwrap();
        assert_eq!((args.port, args.seed), (Some(8080), Some(1)));
        assert_eq!(
            (args.cpu, args.prefix_cache_n, args.format.as_deref()),
            (true, Some(4), Some("gguf"))
        );
        assert!(
            parse(["serve", "--format", "safetensors"]).is_err(),
            "only gguf is served"
        );
        assert_eq!(
            (args.model.as_deref(), args.gguf_file.as_deref()),
            (Some("/m"), Some("x.gguf"))
        );
        let old = parse([
            "serve",
            "--port",
            "9",
            "--model",
            "/m",
            "--gguf-file",
            "y.gguf",
        ])
        .unwrap();
        assert_eq!(
            (old.port, old.model.as_deref(), old.gguf_file.as_deref()),
            (Some(9), Some("/m"), Some("y.gguf"))
        );
        let file = ServeOptions::from_toml("model-id = \"/m\"\nquantized-file = \"z.gguf\"\nseed = 3\ncpu = true\nprefix-cache-n = 0").unwrap();
        assert_eq!(
            (file.model.as_deref(), file.gguf_file.as_deref(), file.seed),
            (Some("/m"), Some("z.gguf"), Some(3))
        );
        assert_eq!((file.cpu, file.prefix_cache_n), (true, Some(0)));
    }

    #[test]
    fn config_file_errors_name_the_key() {
        let e = ServeOptions::from_toml("hlg-tow = 2").unwrap_err();
        assert_eq!(e.to_string(), "unknown key `hlg-tow`");
        let e = ServeOptions::from_toml("port = 70000").unwrap_err();
        assert!(e.to_string().contains("port"), "{e}");
        let file = ServeOptions::from_toml("hlg-width = -1").unwrap();
        assert_eq!(
            file.hlg.flags.defaults().unwrap_err().to_string(),
            r#"--hlg-width: `hlg.width` must be a number in [0, 1000], "auto" or "off", got -1"#
        );
    }

    /// The flags parse on the subcommand as a user types them.
    #[derive(clap::Parser)]
    struct ServeOnly {
        #[command(flatten)]
        serve: ServeOptions,
    }

    fn parse<const N: usize>(argv: [&str; N]) -> Result<ServeOptions, clap::Error> {
        <ServeOnly as clap::Parser>::try_parse_from(argv).map(|s| s.serve)
    }
    #[test]
    fn a_file_and_flags_merge_key_by_key() {
        let file =
            ServeOptions::from_toml("port = 8080\nhost = \"0.0.0.0\"\ncpu = true\nhlg-toe = 2")
                .unwrap();
        let cli = parse(["serve", "-p", "9000", "--hlg-toe", "5"]).unwrap();
        let both = cli.over(&file);
        assert_eq!(
            (both.port, both.host.as_deref(), both.cpu),
            (Some(9000), Some("0.0.0.0"), true)
        );
        assert_eq!(both.hlg.flags.defaults().unwrap().curve().toe(), Some(5.0));
        let o =
            ServeOptions::from_toml("model-id = \"/m\"\nprefix_cache_n = 0\nhlg-width = \"off\"")
                .unwrap();
        assert_eq!(
            (o.model.as_deref(), o.prefix_cache_n),
            (Some("/m"), Some(0))
        );
        assert_eq!(o.hlg.flags.defaults().unwrap().curve().width(), None);
    }

    #[test]
    fn the_file_keys_are_the_long_flags_and_their_aliases() {
        let keys = ServeOptions::file_keys();
        for k in [
            "model-id",
            "model",
            "quantized-file",
            "gguf-file",
            "port",
            "prefix-cache-n",
            "weights",
            "hlg-toe",
            "hlg-batching",
            "api-key",
        ] {
            assert!(keys.iter().any(|x| x == k), "{k}");
        }
        assert!(!keys.iter().any(|x| x == "config"));
    }

    #[test]
    fn reading_errors_name_the_file() {
        let e = ServeOptions::read(Path::new("/no/such/hlg.toml")).unwrap_err();
        assert!(
            e.to_string().starts_with("reading /no/such/hlg.toml: "),
            "{e}"
        );
        let dir = std::env::temp_dir().join(format!("hlg-serve-options-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.toml");
        std::fs::write(&path, "prot = 1").unwrap();
        let e = ServeOptions::read(&path).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("in {}: unknown key `prot`", path.display())
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(
            ServeOptions::from_toml("port = 70000"),
            Err(ConfigFileError::Toml(_))
        ));
    }

    #[test]
    fn check_names_the_flag() {
        assert!(ServeOptions::from_toml("hlg-toe = 2")
            .unwrap()
            .check()
            .is_ok());
        let e = ServeOptions::from_toml("hlg-backend = \"gpu\"")
            .unwrap()
            .check()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"--hlg-backend must be "kernel" or "mlx", got "gpu""#
        );
    }
}
