//! `mistralrs-hlg`: the OpenAI-compatible mistral.rs server with HLG sampling, and tools.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use mistralrs_hlg::config::RawValue;
use mistralrs_hlg::processor::Backend;
use mistralrs_hlg::server::{self, load::ModelSource};
use mistralrs_hlg::{HlgConfig, ToeShape};

#[derive(Parser)]
#[command(name = "mistralrs-hlg", version, about = "mistral.rs with HLG sampling")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the OpenAI-compatible server (the embedded SmolLM2-135M when no model is named).
    Serve(ServeArgs),
    /// Fetch the embedded default model into the cache and print its path.
    FetchModel,
    /// Print the curve g₁(z) for each toe shape as a table, or draw it as SVG.
    Curve(CurveArgs),
}

/// The HLG engine flags; the same names are the keys of the config file.
#[derive(Args, Default)]
struct HlgFlags {
    /// Turn HLG on for every sampled request that does not say otherwise.
    #[arg(long = "hlg-sampling", value_name = "on|off")]
    sampling: Option<String>,
    /// Pivot mode.
    #[arg(long = "hlg-pivot", value_name = "top|entropy|median")]
    pivot: Option<String>,
    /// Nats below the top token (pivot `top`), >= 0.
    #[arg(long = "hlg-pivot-offset", value_name = "NATS")]
    pivot_offset: Option<String>,
    /// Half-width of the linear mid band in nats, >= 0, or `off`.
    #[arg(long = "hlg-width", value_name = "NATS|off")]
    width: Option<String>,
    /// Shoulder rolloff in nats, or `off`.
    #[arg(long = "hlg-shoulder", value_name = "NATS|off")]
    shoulder: Option<String>,
    /// Toe rolloff in nats, or `off`.
    #[arg(long = "hlg-toe", value_name = "NATS|off")]
    toe: Option<String>,
    /// Toe shape.
    #[arg(long = "hlg-toe-shape", value_name = "log|quadratic|exp")]
    toe_shape: Option<String>,
}

impl HlgFlags {
    fn pairs(&self) -> Vec<(&'static str, RawValue)> {
        let vals = [&self.sampling, &self.pivot, &self.pivot_offset, &self.width, &self.shoulder, &self.toe, &self.toe_shape];
        server::FLAGS
            .iter()
            .zip(vals)
            .filter_map(|((flag, _), v)| v.as_deref().map(|v| (*flag, RawValue::from_flag(v))))
            .collect()
    }
}

#[derive(Args)]
struct ServeArgs {
    /// A GGUF file, a directory holding one, or a hub repository id (with --gguf-file).
    #[arg(long)]
    model: Option<String>,
    /// The GGUF file name inside --model.
    #[arg(long)]
    gguf_file: Option<String>,
    /// Address to bind [default: 127.0.0.1].
    #[arg(long)]
    host: Option<String>,
    /// Port to bind [default: 1234].
    #[arg(long)]
    port: Option<u16>,
    /// A TOML file with the same keys as these flags (`hlg-toe = 3.0`, `port = 8080`);
    /// flags win over it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Use the best available accelerator instead of the CPU.
    #[arg(long)]
    no_cpu: bool,
    /// How `n > 1` is served: `split` runs n single-choice generations one after another
    /// (the default: mistral.rs 0.8.1 corrupts the choices of a batched request on the
    /// CPU, see docs/NOTES.md); `batched` passes the request through as upstream does.
    #[arg(long, value_name = "split|batched", default_value = "split", value_parser = ["split", "batched"])]
    n_choices: String,
    /// Where the curve runs: `kernel` (the slice kernel, the default) or `mlx` (mlx-rs
    /// ops on MLX's default device; needs a build with `--features mlx`, see the README).
    #[arg(long, value_name = "kernel|mlx")]
    hlg_backend: Option<String>,
    #[command(flatten)]
    hlg: HlgFlags,
}

#[derive(Args)]
struct CurveArgs {
    #[command(flatten)]
    hlg: HlgFlags,
    /// Smallest z (nats from the pivot).
    #[arg(long, default_value_t = -24.0, allow_hyphen_values = true)]
    from: f64,
    /// Largest z.
    #[arg(long, default_value_t = 12.0, allow_hyphen_values = true)]
    to: f64,
    /// Step.
    #[arg(long, default_value_t = 0.5)]
    step: f64,
    /// Write an SVG plot here instead of printing the table.
    #[arg(long)]
    svg: Option<PathBuf>,
}

/// The config file: serve's options and the HLG flags, as TOML.
#[derive(Default)]
struct FileConfig {
    model: Option<String>,
    gguf_file: Option<String>,
    host: Option<String>,
    port: Option<u16>,
    hlg_backend: Option<String>,
    hlg: Vec<(&'static str, RawValue)>,
}

fn read_config(path: &PathBuf) -> anyhow::Result<FileConfig> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let table: toml::Table = text.parse().with_context(|| format!("parsing {}", path.display()))?;
    let mut cfg = FileConfig::default();
    for (key, value) in table {
        let text = || value.as_str().map(str::to_string).with_context(|| format!("{}: `{key}` must be a string", path.display()));
        match key.as_str() {
            "model" => cfg.model = Some(text()?),
            "gguf-file" => cfg.gguf_file = Some(text()?),
            "host" => cfg.host = Some(text()?),
            "hlg-backend" => cfg.hlg_backend = Some(text()?),
            "port" => {
                let p = value.as_integer().and_then(|p| u16::try_from(p).ok());
                cfg.port = Some(p.with_context(|| format!("{}: `port` must be an integer 0..=65535", path.display()))?);
            }
            _ => {
                let Some((flag, _)) = server::FLAGS.iter().find(|(f, _)| *f == key) else {
                    bail!("{}: unknown key `{key}`", path.display());
                };
                // "on"/"off" and numbers as strings read like flags; TOML numbers and
                // booleans as themselves.
                let raw = match &value {
                    toml::Value::String(s) => RawValue::from_flag(s),
                    v => RawValue::deserialize(v.clone()).with_context(|| format!("{}: `{key}`", path.display()))?,
                };
                cfg.hlg.push((flag, raw));
            }
        }
    }
    Ok(cfg)
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let file = match &args.config {
        Some(p) => read_config(p)?,
        None => FileConfig::default(),
    };
    // Flags over the file: the file's pairs first, so a flag's `set` overwrites them.
    let defaults = server::defaults_from_flags(file.hlg.into_iter().chain(args.hlg.pairs())).map_err(anyhow::Error::msg)?;
    let backend = Backend::parse(args.hlg_backend.or(file.hlg_backend).as_deref().unwrap_or("kernel")).map_err(anyhow::Error::msg)?;
    let gguf_file = args.gguf_file.or(file.gguf_file);
    let source = match args.model.or(file.model) {
        Some(m) => ModelSource::resolve(&m, gguf_file.as_deref())?,
        None => {
            let path = mistralrs_hlg::model::ensure_default_model()?;
            ModelSource::resolve(&path.to_string_lossy(), None)?
        }
    };
    tracing::info!(?source, ?backend, hlg = %serde_json::to_string(&defaults.resolved(false))?, "starting");
    let mistralrs = server::load::load(&source, !args.no_cpu).await?;
    let choices = if args.n_choices == "batched" { server::Choices::Batched } else { server::Choices::Split };
    let router = server::router_with_backend(mistralrs, defaults, choices, backend).await?;
    let host = args.host.or(file.host).unwrap_or_else(|| "127.0.0.1".into());
    server::serve(router, &host, args.port.or(file.port).unwrap_or(1234)).await
}

fn curve(args: CurveArgs) -> anyhow::Result<()> {
    let cfg: HlgConfig = server::defaults_from_flags(args.hlg.pairs()).map_err(anyhow::Error::msg)?;
    if args.step <= 0.0 || args.to <= args.from {
        bail!("--step must be > 0 and --to greater than --from");
    }
    let zs: Vec<f64> = (0..).map(|i| args.from + i as f64 * args.step).take_while(|z| *z <= args.to + 1e-9).collect();
    let curves: Vec<(&str, Vec<f64>)> = ToeShape::ALL
        .iter()
        .map(|s| {
            let c = cfg.curve().with_toe_shape(*s);
            (s.name(), zs.iter().map(|&z| c.g1(z)).collect())
        })
        .collect();
    match args.svg {
        None => {
            println!("z\tidentity\t{}", curves.iter().map(|c| c.0).collect::<Vec<_>>().join("\t"));
            for (i, z) in zs.iter().enumerate() {
                let row: Vec<String> = curves.iter().map(|c| format!("{:.6}", c.1[i])).collect();
                println!("{z}\t{z}\t{}", row.join("\t"));
            }
            Ok(())
        }
        Some(path) => {
            std::fs::write(&path, svg(&zs, &curves)).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {}", path.display());
            Ok(())
        }
    }
}

/// A small SVG line plot: the identity (temperature) and one line per toe shape.
fn svg(zs: &[f64], curves: &[(&str, Vec<f64>)]) -> String {
    let (w, h, pad) = (640.0, 420.0, 40.0);
    let (x0, x1) = (zs[0], zs[zs.len() - 1]);
    let (y0, y1) = (x0.min(x1 - (x1 - x0) * 1.2), x1);
    let px = |x: f64| pad + (x - x0) / (x1 - x0) * (w - 2.0 * pad);
    let py = |y: f64| h - pad - (y.clamp(y0, y1) - y0) / (y1 - y0) * (h - 2.0 * pad);
    let line = |ys: &[f64], color: &str, dash: &str| {
        let pts: Vec<String> = zs.iter().zip(ys).map(|(&x, &y)| format!("{:.1},{:.1}", px(x), py(y))).collect();
        format!(r#"<polyline fill="none" stroke="{color}" stroke-width="2" {dash} points="{}"/>"#, pts.join(" "))
    };
    let colors = ["#1f77b4", "#d62728", "#2ca02c"];
    let mut s = format!(r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="13"><rect width="100%" height="100%" fill="white"/>"#);
    s += &format!(r##"<line x1="{pad}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#999"/><line x1="{:.1}" y1="{pad}" x2="{:.1}" y2="{:.1}" stroke="#999"/>"##, py(0.0), w - pad, py(0.0), px(0.0), px(0.0), h - pad);
    s += &line(zs, "#888", r#"stroke-dasharray="5,4""#);
    s += &format!(r##"<text x="{:.1}" y="{:.1}" fill="#888">identity (temperature)</text>"##, pad + 8.0, pad + 14.0);
    for (i, (name, ys)) in curves.iter().enumerate() {
        s += &line(ys, colors[i % 3], "");
        s += &format!(r#"<text x="{:.1}" y="{:.1}" fill="{}">{name} toe</text>"#, pad + 8.0, pad + 32.0 + 18.0 * i as f64, colors[i % 3]);
    }
    s += &format!(r#"<text x="{:.1}" y="{:.1}">z = x − c (nats)</text><text x="4" y="{:.1}">g₁(z)</text></svg>"#, w / 2.0 - 40.0, h - 10.0, pad - 8.0);
    s
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    match Cli::parse().cmd {
        Cmd::Serve(args) => tokio::runtime::Runtime::new()?.block_on(serve(args)),
        Cmd::FetchModel => {
            println!("{}", mistralrs_hlg::model::ensure_default_model()?.display());
            Ok(())
        }
        Cmd::Curve(args) => curve(args),
    }
}
