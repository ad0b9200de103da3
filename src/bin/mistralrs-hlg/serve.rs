//! `mistralrs-hlg serve`: the flags, the config file, and the server.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use mistralrs_hlg::server::{self, load::ModelSource, HlgServerOptions};
use serde::Deserialize;

#[derive(Args)]
pub struct ServeArgs {
    /// A GGUF file, a directory holding one, or a hub repository id (with
    /// --quantized-file). Upstream's name; `--model` is the same.
    #[arg(short = 'm', long = "model-id", alias = "model")]
    model: Option<String>,
    /// The GGUF file name inside --model-id. Upstream's name; `--gguf-file` is the same.
    #[arg(short = 'f', long = "quantized-file", alias = "gguf-file")]
    gguf_file: Option<String>,
    /// The model's format, as upstream's `--format`: this server serves GGUF files only.
    #[arg(long, value_parser = ["gguf"])]
    format: Option<String>,
    /// Address to bind [default: 127.0.0.1].
    #[arg(long)]
    host: Option<String>,
    /// Port to bind [default: 1234].
    #[arg(short = 'p', long)]
    port: Option<u16>,
    /// Seed of the engine's device random number generator (as upstream's `--seed`; on a
    /// GPU). The sampler's own generator starts from a fixed seed in every fresh engine
    /// (mistral.rs 0.8.1), so a fresh server answers the same sequence of requests with
    /// the same samples with or without this; no per-request seed exists. The CPU device
    /// has no generator to seed: there the seed is noted and has no effect.
    #[arg(long)]
    seed: Option<u64>,
    /// A TOML file with the same keys as these flags (`hlg-toe = 3.0`, `port = 8080`);
    /// flags win over it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Run on the CPU even when this build has an accelerator (upstream's `--cpu`). Without
    /// it the engine takes CUDA (the `cuda` feature) or Metal (`metal`) when present, else
    /// the CPU.
    #[arg(long)]
    cpu: bool,
    /// Finished sequences whose KV cache the engine keeps for prefix reuse (upstream's
    /// flag; 0 turns it off). Default: 16 on an accelerator, 0 on the CPU, where
    /// mistral.rs 0.8.1 never evicts them and memory would grow with every request.
    #[arg(long)]
    prefix_cache_n: Option<usize>,
    #[command(flatten)]
    hlg: HlgServerOptions,
}

/// The config file: serve's options and the HLG options, as TOML, keys as the flags
/// (`port = 8080`, `hlg-toe = 3.0`).
#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "kebab-case")]
struct FileConfig {
    #[serde(alias = "model-id")]
    model: Option<String>,
    #[serde(alias = "quantized-file")]
    gguf_file: Option<String>,
    host: Option<String>,
    port: Option<u16>,
    seed: Option<u64>,
    cpu: Option<bool>,
    prefix_cache_n: Option<usize>,
    #[serde(flatten)]
    hlg: HlgServerOptions,
}

/// The keys [`FileConfig`] reads (serde cannot reject unknown keys next to a flatten).
fn known_key(key: &str) -> bool {
    let key = key.replace('_', "-");
    [
        "model",
        "model-id",
        "gguf-file",
        "quantized-file",
        "host",
        "port",
        "seed",
        "cpu",
        "prefix-cache-n",
        "hlg-backend",
        "hlg-n-choices",
        "hlg-batching",
        "api-key",
        "allow-admin-routes",
        "allow-remote-media",
        "allow-local-media",
        "served-model-name",
    ]
    .contains(&key.as_str())
        || mistralrs_hlg::params::Field::from_flag(key.as_str()).is_some()
}

fn parse_config(text: &str) -> anyhow::Result<FileConfig> {
    let table: toml::Table = text.parse()?;
    if let Some(key) = table.keys().find(|k| !known_key(k)) {
        bail!("unknown key `{key}`");
    }
    Ok(FileConfig::deserialize(toml::Value::Table(table))?)
}

fn read_config(path: &PathBuf) -> anyhow::Result<FileConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_config(&text).with_context(|| format!("in {}", path.display()))
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let file = match &args.config {
        Some(p) => read_config(p)?,
        None => FileConfig::default(),
    };
    // Flags over the file; every value is checked before the model loads.
    let hlg = args.hlg.over(&file.hlg);
    hlg.flags.defaults()?;
    hlg.backend()?;
    hlg.choices()?;
    hlg.batching()?;
    let gguf_file = args.gguf_file.or(file.gguf_file);
    let source = match args.model.or(file.model) {
        Some(m) => ModelSource::resolve(&m, gguf_file.as_deref())?,
        None => {
            let path = mistralrs_hlg::model::ensure_default_model()?;
            ModelSource::resolve(&path.to_string_lossy(), None)?
        }
    };
    tracing::info!(
        ?source,
        format = args.format.as_deref().unwrap_or("gguf"),
        "starting"
    );
    let engine = server::load::EngineOptions {
        cpu: args.cpu || file.cpu.unwrap_or(false),
        seed: args.seed.or(file.seed),
        prefix_cache_n: args.prefix_cache_n.or(file.prefix_cache_n),
    };
    let mistralrs = server::load::load_with(&source, &engine).await?;
    let router = hlg.router_for(mistralrs, source.hints()).await?;
    let host = args
        .host
        .or(file.host)
        .unwrap_or_else(|| "127.0.0.1".into());
    server::serve(router, &host, args.port.or(file.port).unwrap_or(1234)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use mistralrs_hlg::config::RawValue;

    #[test]
    fn config_file_sets_serve_options_and_flags_win() {
        let file = parse_config("model = \"m.gguf\"\nport = 8080\nhlg-sampling = \"on\"\nhlg-toe = 2\nhlg-n-choices = \"batched\"").unwrap();
        assert_eq!(
            (file.model.as_deref(), file.port),
            (Some("m.gguf"), Some(8080))
        );
        let args =
            ServeArgs::try_parse_from(["serve", "--hlg-toe", "5", "--hlg-width", "off"]).unwrap();
        let hlg = args.hlg.over(&file.hlg);
        let cfg = hlg.flags.defaults().unwrap();
        assert_eq!(cfg.enabled(), Some(true));
        assert_eq!((cfg.curve().toe(), cfg.curve().width()), (Some(5.0), None));
        assert_eq!(hlg.choices(), Ok(Some(server::Choices::Batched)));
        assert_eq!(
            hlg.flags.get(mistralrs_hlg::params::Field::Toe),
            Some(&RawValue::Number(5.0))
        );
    }

    #[test]
    fn upstream_flag_names() {
        let args = ServeArgs::try_parse_from([
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
            ServeArgs::try_parse_from(["serve", "--format", "safetensors"]).is_err(),
            "only gguf is served"
        );
        assert_eq!(
            (args.model.as_deref(), args.gguf_file.as_deref()),
            (Some("/m"), Some("x.gguf"))
        );
        let old = ServeArgs::try_parse_from([
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
        let file = parse_config("model-id = \"/m\"\nquantized-file = \"z.gguf\"\nseed = 3\ncpu = true\nprefix-cache-n = 0").unwrap();
        assert_eq!(
            (file.model.as_deref(), file.gguf_file.as_deref(), file.seed),
            (Some("/m"), Some("z.gguf"), Some(3))
        );
        assert_eq!((file.cpu, file.prefix_cache_n), (Some(true), Some(0)));
    }

    #[test]
    fn config_file_errors_name_the_key() {
        let e = parse_config("hlg-tow = 2").unwrap_err();
        assert_eq!(e.to_string(), "unknown key `hlg-tow`");
        let e = parse_config("port = 70000").unwrap_err();
        assert!(e.to_string().contains("port"), "{e}");
        let file = parse_config("hlg-width = -1").unwrap();
        assert_eq!(
            file.hlg.flags.defaults().unwrap_err().to_string(),
            r#"--hlg-width: `hlg.width` must be a number in [0, 1000] or "off", got -1"#
        );
    }

    /// The flags parse on the subcommand as a user types them.
    #[derive(Parser)]
    struct ServeOnly {
        #[command(flatten)]
        serve: ServeArgs,
    }

    impl ServeArgs {
        fn try_parse_from<const N: usize>(argv: [&str; N]) -> Result<ServeArgs, clap::Error> {
            ServeOnly::try_parse_from(argv).map(|s| s.serve)
        }
    }
}
