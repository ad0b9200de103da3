//! `mistralrs-hlg`: the OpenAI-compatible mistral.rs server with HLG sampling, and tools.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use mistralrs_hlg::server::{self, load::ModelSource, HlgFlags, HlgServerOptions};
use mistralrs_hlg::{HlgConfig, ToeShape};
use serde::Deserialize;

#[derive(Parser)]
#[command(
    name = "mistralrs-hlg",
    version,
    about = "mistral.rs with HLG sampling"
)]
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
    /// The evaluation (docs/RESULTS.md): logit capture, KL characterisation, ...
    Eval(EvalArgs),
}

#[derive(Args)]
struct EvalArgs {
    /// Run the model on its quantized GGUF blocks. By default the evaluation has candle
    /// dequantize the weights to f32 at load (CANDLE_DEQUANTIZE_ALL=1): the same weights,
    /// about 3× faster here, because candle 0.10 has no SIMD kernel for Q4_1 (the embedded
    /// model's type) and uses its Q8_0 one only when AVX2 is enabled at compile time.
    #[arg(long, global = true)]
    quantized: bool,
    #[command(subcommand)]
    cmd: EvalCmd,
}

#[derive(Subcommand)]
enum EvalCmd {
    /// Every step below with its defaults, in order (about an hour on 2 cores).
    All {
        #[command(flatten)]
        out: EvalOut,
    },
    /// Generate from the open-ended prompt set on the model and record the logits the
    /// processor sees (every `--every`-th step) into OUT/capture/.
    Capture {
        #[command(flatten)]
        out: EvalOut,
        /// A GGUF file (the embedded model when omitted).
        #[arg(long)]
        model: Option<PathBuf>,
        /// Tokens generated per prompt.
        #[arg(long, default_value_t = 48)]
        max_tokens: usize,
        /// Keep every N-th position.
        #[arg(long, default_value_t = 4)]
        every: usize,
        /// Sampling temperature of the generations.
        #[arg(long, default_value_t = 1.0)]
        temperature: f64,
    },
    /// KL(temperature ‖ HLG), entropy, top-token mass and tail mass for every knob and
    /// toe shape over the captured logits: OUT/kl.json, OUT/kl.md, OUT/kl-<knob>.svg.
    Kl {
        #[command(flatten)]
        out: EvalOut,
        /// The temperature (mid gain) the measures are taken at.
        #[arg(long, default_value_t = 1.0)]
        temperature: f64,
        /// The entropy level of the matched sweep: each point at the temperature that
        /// gives plain temperature's mean entropy at this T (OUT/kl-matched.svg).
        #[arg(long, default_value_t = 0.8)]
        level: f64,
        /// Worker threads [default: the machine's available parallelism].
        #[arg(long)]
        threads: Option<usize>,
        /// The other knobs' values while one is swept (the built-in defaults otherwise).
        #[command(flatten)]
        hlg: HlgFlags,
    },
    /// Diversity at matched entropy: temperature, top-p 0.9, min-p 0.05 and HLG (each toe
    /// shape), each at the temperature that gives it plain temperature's mean entropy at
    /// --level (matched on the captured logits); open-ended prompts × --samples each.
    /// OUT/diversity.json, OUT/diversity.md, OUT/diversity.svg: a run adds its level to
    /// those already there (same sizes), and the plot joins each method's levels into
    /// its diversity–quality frontier.
    Diversity {
        #[command(flatten)]
        online: Online,
        /// The entropy level: plain temperature's mean entropy at this T.
        #[arg(long, default_value_t = 0.8)]
        level: f64,
        /// Prompts of the open-ended set to use (at most 24).
        #[arg(long, default_value_t = 24)]
        prompts: usize,
        /// Samples per prompt (n = 1 requests, one after another).
        #[arg(long, default_value_t = 8)]
        samples: usize,
        /// Tokens per sample.
        #[arg(long, default_value_t = 16)]
        max_tokens: usize,
    },
    /// Exact-answer accuracy: greedy, and at each --temperatures plain temperature, top-p
    /// 0.9, min-p 0.05 and HLG (each toe shape). OUT/guardrail.json, OUT/guardrail.md.
    Guardrail {
        #[command(flatten)]
        online: Online,
        /// Temperatures, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "0.7,1.0")]
        temperatures: Vec<f64>,
        /// Tokens per answer.
        #[arg(long, default_value_t = 8)]
        max_tokens: usize,
        /// Use only the first N items.
        #[arg(long)]
        items: Option<usize>,
        /// Samples per item for the sampled methods (greedy answers once).
        #[arg(long, default_value_t = 1)]
        samples: usize,
    },
    /// Decode tokens/s and prompt time: HLG on vs off vs the host's top-p 0.9, rounds
    /// alternated. OUT/perf.json, OUT/perf.md.
    Perf {
        #[command(flatten)]
        online: Online,
        /// Rounds.
        #[arg(long, default_value_t = 6)]
        rounds: usize,
        /// Tokens per request.
        #[arg(long, default_value_t = 48)]
        max_tokens: usize,
        /// Sampling temperature.
        #[arg(long, default_value_t = 0.8)]
        temperature: f64,
    },
}

#[derive(Args)]
struct Online {
    #[command(flatten)]
    out: EvalOut,
    /// A GGUF file (the embedded model when omitted).
    #[arg(long)]
    model: Option<PathBuf>,
    /// The HLG knobs other than the toe shape (the built-in defaults otherwise).
    #[command(flatten)]
    hlg: HlgFlags,
}

#[derive(Args)]
struct EvalOut {
    /// The directory every output goes under.
    #[arg(long, default_value = "eval-out")]
    out: PathBuf,
}

#[derive(Args)]
struct ServeArgs {
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
        || server::FLAGS.iter().any(|(flag, _)| *flag == key)
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

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let file = match &args.config {
        Some(p) => read_config(p)?,
        None => FileConfig::default(),
    };
    // Flags over the file; every value is checked before the model loads.
    let hlg = args.hlg.over(&file.hlg);
    hlg.flags.defaults().map_err(anyhow::Error::msg)?;
    hlg.backend().map_err(anyhow::Error::msg)?;
    hlg.choices().map_err(anyhow::Error::msg)?;
    hlg.batching().map_err(anyhow::Error::msg)?;
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

fn curve(args: CurveArgs) -> anyhow::Result<()> {
    let cfg: HlgConfig = args.hlg.defaults().map_err(anyhow::Error::msg)?;
    if args.step <= 0.0 || args.to <= args.from {
        bail!("--step must be > 0 and --to greater than --from");
    }
    let zs: Vec<f64> = (0..)
        .map(|i| args.from + i as f64 * args.step)
        .take_while(|z| *z <= args.to + 1e-9)
        .collect();
    let curves: Vec<(&str, Vec<f64>)> = ToeShape::ALL
        .iter()
        .map(|s| {
            let c = cfg.curve().with_toe_shape(*s);
            (s.name(), zs.iter().map(|&z| c.g1(z)).collect())
        })
        .collect();
    match args.svg {
        None => {
            println!(
                "z\tidentity\t{}",
                curves.iter().map(|c| c.0).collect::<Vec<_>>().join("\t")
            );
            for (i, z) in zs.iter().enumerate() {
                let row: Vec<String> = curves.iter().map(|c| format!("{:.6}", c.1[i])).collect();
                println!("{z}\t{z}\t{}", row.join("\t"));
            }
            Ok(())
        }
        Some(path) => {
            std::fs::write(&path, svg(&zs, &curves))
                .with_context(|| format!("writing {}", path.display()))?;
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
        let pts: Vec<String> = zs
            .iter()
            .zip(ys)
            .map(|(&x, &y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        format!(
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" {dash} points="{}"/>"#,
            pts.join(" ")
        )
    };
    let colors = ["#1f77b4", "#d62728", "#2ca02c"];
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="13"><rect width="100%" height="100%" fill="white"/>"#
    );
    s += &format!(
        r##"<line x1="{pad}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#999"/><line x1="{:.1}" y1="{pad}" x2="{:.1}" y2="{:.1}" stroke="#999"/>"##,
        py(0.0),
        w - pad,
        py(0.0),
        px(0.0),
        px(0.0),
        h - pad
    );
    s += &line(zs, "#888", r#"stroke-dasharray="5,4""#);
    s += &format!(
        r##"<text x="{:.1}" y="{:.1}" fill="#888">identity (temperature)</text>"##,
        pad + 8.0,
        pad + 14.0
    );
    for (i, (name, ys)) in curves.iter().enumerate() {
        s += &line(ys, colors[i % 3], "");
        s += &format!(
            r#"<text x="{:.1}" y="{:.1}" fill="{}">{name} toe</text>"#,
            pad + 8.0,
            pad + 32.0 + 18.0 * i as f64,
            colors[i % 3]
        );
    }
    s += &format!(
        r#"<text x="{:.1}" y="{:.1}">z = x − c (nats)</text><text x="4" y="{:.1}">g₁(z)</text></svg>"#,
        w / 2.0 - 40.0,
        h - 10.0,
        pad - 8.0
    );
    s
}

fn progress(total: usize, what: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    let bar = indicatif::ProgressBar::new(total as u64);
    if !std::io::stderr().is_terminal() {
        // No terminal to draw on (a log file): a line every 10 seconds instead.
        bar.set_draw_target(indicatif::ProgressDrawTarget::term_like_with_hz(
            Box::new(LogLines),
            1,
        ));
    }
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} {elapsed_precise} (eta {eta})",
        )
        .unwrap()
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// A progress bar's target that prints each update as a line to stderr, at most every
/// 10 seconds.
#[derive(Debug)]
struct LogLines;

static LAST_LINE: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

impl indicatif::TermLike for LogLines {
    fn width(&self) -> u16 {
        100
    }
    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.write_str(s)
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        let mut last = LAST_LINE.lock().unwrap();
        let due = last.is_none_or(|t| t.elapsed().as_secs() >= 10);
        if due && !s.trim().is_empty() {
            eprintln!("{}", s.trim_end());
            *last = Some(std::time::Instant::now());
        }
        Ok(())
    }
    fn clear_line(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}

fn eval(cmd: EvalCmd) -> anyhow::Result<()> {
    use mistralrs_hlg::eval::{capture, kl, plot, prompts};
    match cmd {
        EvalCmd::All { out } => {
            // Each step as if typed with only --out, so its defaults are the ones above.
            for step in ["capture", "kl", "diversity", "guardrail", "perf"] {
                eprintln!("=== eval {step}");
                let argv = [
                    "mistralrs-hlg".as_ref(),
                    "eval".as_ref(),
                    step.as_ref(),
                    "--out".as_ref(),
                    out.out.as_os_str(),
                ];
                if let Cmd::Eval(args) = Cli::try_parse_from(argv)?.cmd {
                    eval(args.cmd)?;
                }
            }
            Ok(())
        }
        EvalCmd::Capture {
            out,
            model,
            max_tokens,
            every,
            temperature,
        } => {
            let config = capture::CaptureConfig {
                max_tokens,
                every,
                temperature,
                dequantized: capture::weights_dequantized(),
            };
            let prompts = prompts::OPEN_ENDED;
            let c = tokio::runtime::Runtime::new()?.block_on(async {
                let m = capture::load_model(model.as_deref()).await?;
                let bar = progress(prompts.len(), "capture");
                let c =
                    capture::capture(&m, &prompts, &config, |i| bar.set_position(i as u64)).await;
                bar.finish();
                c
            })?;
            let dir = out.out.join("capture");
            c.save(&dir)?;
            eprintln!(
                "{} positions × {} entries from {} prompts → {}",
                c.rows.len(),
                c.vocab,
                prompts.len(),
                dir.display()
            );
            Ok(())
        }
        EvalCmd::Kl {
            out,
            temperature,
            level,
            threads,
            hlg,
        } => {
            let threads = threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
                .max(1);
            if !(temperature > 0.0 && temperature.is_finite() && level > 0.0 && level.is_finite()) {
                bail!("--temperature and --level must be finite numbers > 0");
            }
            let base = hlg.defaults().map_err(anyhow::Error::msg)?;
            let c = capture::Capture::load(&out.out.join("capture"))?;
            let to = |bar: &indicatif::ProgressBar| {
                let bar = bar.clone();
                move |done: usize, total: usize| {
                    bar.set_length(total as u64);
                    bar.set_position(done as u64);
                }
            };
            let bar = progress(0, "kl");
            let report = kl::characterise(&c, &base, temperature, threads, to(&bar))?;
            bar.finish();
            let bar = progress(0, "kl matched");
            let matched = kl::characterise_matched(&c, &base, level, threads, to(&bar))?;
            bar.finish();
            std::fs::write(
                out.out.join("kl.json"),
                serde_json::to_string_pretty(
                    &serde_json::json!({"fixed_temperature": report, "matched_entropy": matched}),
                )?,
            )?;
            std::fs::write(
                out.out.join("kl.md"),
                kl_table(&report) + "\n" + &matched_table(&matched),
            )?;
            std::fs::write(out.out.join("kl-matched.svg"), matched_plot(&matched))?;
            let colors = ["#1f77b4", "#d62728", "#2ca02c"];
            for (knob, points) in &report.sweeps {
                let xs: Vec<String> = points
                    .iter()
                    .filter(|p| p.toe_shape == "log")
                    .map(|p| p.value.clone())
                    .collect();
                let measure = |title: &str,
                               f: fn(&mistralrs_hlg::eval::metrics::Stats) -> f64,
                               with_ref: bool| plot::Panel {
                    title: title.to_string(),
                    xs: xs.clone(),
                    series: ToeShape::ALL
                        .iter()
                        .enumerate()
                        .map(|(i, s)| plot::Series {
                            name: s.name(),
                            color: colors[i],
                            ys: points
                                .iter()
                                .filter(|p| p.toe_shape == s.name())
                                .map(|p| Some(f(&p.mean)))
                                .collect(),
                        })
                        .collect(),
                    reference: with_ref.then(|| (f(&report.temperature_only), "temperature")),
                    log_y: title.starts_with("tail"),
                };
                let panels = [
                    measure("KL(temperature ‖ HLG), nats", |s| s.kl, false),
                    measure("entropy, nats", |s| s.entropy, true),
                    measure("top-token mass", |s| s.top_mass, true),
                    measure("tail mass (base p < 1e-4)", |s| s.tail_mass, true),
                ];
                let title = format!(
                    "{knob} (others at their defaults), T = {temperature}, {} positions",
                    report.positions
                );
                std::fs::write(
                    out.out.join(format!("kl-{knob}.svg")),
                    plot::grid(&title, &panels, 2),
                )?;
            }
            eprintln!("kl.json, kl.md, kl-<knob>.svg → {}", out.out.display());
            Ok(())
        }
        EvalCmd::Diversity {
            online,
            level,
            prompts,
            samples,
            max_tokens,
        } => {
            use mistralrs_hlg::eval::diversity;
            if !(level > 0.0 && level.is_finite())
                || prompts == 0
                || samples == 0
                || max_tokens == 0
            {
                bail!("--level must be > 0; --prompts, --samples and --max-tokens at least 1");
            }
            let hlg = online.hlg.defaults().map_err(anyhow::Error::msg)?;
            let c = capture::Capture::load(&online.out.out.join("capture"))?;
            if c.config.dequantized != capture::weights_dequantized() {
                eprintln!(
                    "warning: the capture ran with {} weights, this run with {}: the matched temperatures come from the other arithmetic (run `eval capture` again)",
                    if c.config.dequantized { "dequantized" } else { "quantized" },
                    if capture::weights_dequantized() { "dequantized" } else { "quantized" },
                );
            }
            let methods = diversity::matched(&c, level, &hlg)?;
            for (s, h) in &methods {
                eprintln!(
                    "{:<18} T = {:.4}  offline mean entropy {h:.4}",
                    s.name(),
                    s.temperature()
                );
            }
            let ps: Vec<&str> = prompts::OPEN_ENDED.iter().copied().take(prompts).collect();
            let results = tokio::runtime::Runtime::new()?.block_on(async {
                let m = capture::load_model(online.model.as_deref()).await?;
                let bar = progress(methods.len() * ps.len() * samples, "diversity");
                let mut out = vec![];
                for (s, h) in &methods {
                    out.push(
                        diversity::run_method(&m, &ps, s, *h, samples, max_tokens, || bar.inc(1))
                            .await?,
                    );
                }
                bar.finish();
                anyhow::Ok(out)
            })?;
            let dir = &online.out.out;
            std::fs::create_dir_all(dir)?;
            let path = dir.join("diversity.json");
            let previous = std::fs::read_to_string(&path).ok();
            let level = diversity::Level {
                level,
                methods: results,
            };
            let (doc, kept) =
                diversity::Doc::merged(previous.as_deref(), ps.len(), samples, max_tokens, level);
            if previous.is_some() && !kept {
                eprintln!(
                    "note: {} held another run size (or was unreadable): replaced, not merged",
                    path.display()
                );
            }
            std::fs::write(&path, serde_json::to_string_pretty(&doc)?)?;
            std::fs::write(dir.join("diversity.md"), diversity_table(&doc))?;
            std::fs::write(dir.join("diversity.svg"), diversity_plot(&doc))?;
            eprintln!(
                "diversity.json, diversity.md, diversity.svg → {}",
                dir.display()
            );
            Ok(())
        }
        EvalCmd::Guardrail {
            online,
            temperatures,
            max_tokens,
            items,
            samples,
        } => {
            use mistralrs_hlg::eval::{guardrail, sampler::Sampler};
            if temperatures.iter().any(|t| !(*t > 0.0 && t.is_finite()))
                || max_tokens == 0
                || samples == 0
            {
                bail!("--temperatures must be numbers > 0; --max-tokens and --samples at least 1");
            }
            let hlg = online.hlg.defaults().map_err(anyhow::Error::msg)?;
            let mut samplers: Vec<Option<Sampler>> = vec![None];
            for &t in &temperatures {
                samplers.push(Some(Sampler::Temperature { t }));
                samplers.push(Some(Sampler::TopP {
                    t,
                    p: mistralrs_hlg::eval::diversity::TOP_P,
                }));
                samplers.push(Some(Sampler::MinP {
                    t,
                    min_p: mistralrs_hlg::eval::diversity::MIN_P,
                }));
                for shape in ToeShape::ALL {
                    let mut cfg = hlg.clone();
                    cfg.set(
                        "toe_shape",
                        mistralrs_hlg::config::RawValue::Str(shape.name().into()),
                    )?;
                    samplers.push(Some(Sampler::Hlg {
                        t,
                        hlg: cfg.resolved(true),
                    }));
                }
            }
            let n = items
                .unwrap_or(guardrail::TASKS.len())
                .min(guardrail::TASKS.len());
            let results = tokio::runtime::Runtime::new()?.block_on(async {
                let m = capture::load_model(online.model.as_deref()).await?;
                let bar = progress((1 + (samplers.len() - 1) * samples) * n, "guardrail");
                let mut out = vec![];
                for s in &samplers {
                    out.push(
                        guardrail::run(
                            &m,
                            &guardrail::TASKS[..n],
                            s.as_ref(),
                            samples,
                            max_tokens,
                            || bar.inc(1),
                        )
                        .await?,
                    );
                }
                bar.finish();
                anyhow::Ok(out)
            })?;
            let dir = &online.out.out;
            std::fs::create_dir_all(dir)?;
            std::fs::write(
                dir.join("guardrail.json"),
                serde_json::to_string_pretty(&results)?,
            )?;
            let ci = if samples == 1 {
                "Wilson intervals".to_string()
            } else {
                format!("{samples} samples per item (greedy: one), intervals over items")
            };
            let mut md = format!("{n} items, {max_tokens} tokens per answer; 95 % {ci}. The last column: the method's accuracy minus plain temperature's at the same T, item by item (mean and 95 % interval over items).\n\n| method | correct | accuracy | 95 % CI | − temperature, paired |\n| --- | --- | --- | --- | --- |\n");
            for a in &results {
                let t = a.sampler.as_ref().map(|s| s.temperature());
                let plain = results.iter().find(
                    |b| matches!(b.sampler, Some(Sampler::Temperature { t: bt }) if Some(bt) == t),
                );
                let diff = match plain {
                    Some(p) if !std::ptr::eq(p, a) => {
                        let (d, (lo, hi)) = guardrail::paired_difference(a, p);
                        format!("{d:+.3} ({lo:+.3} to {hi:+.3})")
                    }
                    _ => String::new(),
                };
                md += &format!(
                    "| {} | {}/{} | {:.3} | {:.3}–{:.3} | {diff} |\n",
                    a.name,
                    a.correct,
                    a.items * a.samples,
                    a.rate(),
                    a.ci95.0,
                    a.ci95.1
                );
            }
            std::fs::write(dir.join("guardrail.md"), md)?;
            eprintln!("guardrail.json, guardrail.md → {}", dir.display());
            Ok(())
        }
        EvalCmd::Perf {
            online,
            rounds,
            max_tokens,
            temperature,
        } => {
            use mistralrs_hlg::eval::perf;
            if rounds == 0 || max_tokens == 0 || !(temperature > 0.0 && temperature.is_finite()) {
                bail!("--rounds and --max-tokens at least 1; --temperature > 0");
            }
            let curve = online.hlg.defaults().map_err(anyhow::Error::msg)?.curve();
            let ps: Vec<&str> = prompts::OPEN_ENDED.iter().copied().take(3).collect();
            let (samples, summary) = tokio::runtime::Runtime::new()?.block_on(async {
                let m = capture::load_model(online.model.as_deref()).await?;
                let bar = progress(rounds * perf::Arm::ALL.len() * ps.len(), "perf");
                let r = perf::run(&m, &ps, curve, temperature, rounds, max_tokens, || {
                    bar.inc(1)
                })
                .await;
                bar.finish();
                r
            })?;
            let dir = &online.out.out;
            std::fs::create_dir_all(dir)?;
            std::fs::write(
                dir.join("perf.json"),
                serde_json::to_string_pretty(
                    &serde_json::json!({"rounds": samples, "summary": summary}),
                )?,
            )?;
            let mut md = format!("{rounds} rounds × {} prompts × {max_tokens} tokens at T = {temperature}, arms rotated per round; medians over rounds.\n\n| arm | decode tok/s | ratio to off | prompt ms | wall ms/token |\n| --- | --- | --- | --- | --- |\n", ps.len());
            for s in &summary {
                md += &format!(
                    "| {:?} | {:.2} | {:.3} | {:.1} | {:.1} |\n",
                    s.arm, s.decode_tok_s, s.decode_ratio_to_off, s.prompt_ms, s.wall_ms_per_token
                );
            }
            std::fs::write(dir.join("perf.md"), md)?;
            eprintln!("perf.json, perf.md → {}", dir.display());
            Ok(())
        }
    }
}

fn diversity_table(doc: &mistralrs_hlg::eval::diversity::Doc) -> String {
    let mut s = format!(
        "{} prompts × {} samples × {} tokens per method. Each level: every method at the temperature that gives it plain temperature's mean entropy at T = level (on the captured logits). ± is one standard error over prompts.\n",
        doc.prompts, doc.samples, doc.max_tokens
    );
    for l in &doc.levels {
        s += &format!("\n### Level T = {}\n\n", l.level);
        s += "| method | T | entropy offline / online | distinct-1 | distinct-2 | distinct-3 | self-BLEU | pooled word entropy | tail-garbage rate | mean base log-prob | tokens |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
        for r in &l.methods {
            s += &format!(
                "| {} | {:.3} | {:.3} / {:.3} | {:.3} | {:.3} ± {:.3} | {:.3} | {:.3} ± {:.3} | {:.3} | {:.4} ± {:.4} | {:.3} | {} |\n",
                r.name, r.sampler.temperature(), r.offline_entropy, r.online_entropy, r.distinct[0], r.distinct[1], r.stderr[0], r.distinct[2], r.self_bleu, r.stderr[1], r.pooled_entropy, r.tail_garbage_rate, r.stderr[2], r.mean_base_logprob, r.tokens
            );
        }
    }
    s
}

/// The diversity–quality frontier: distinct-2 and 1 − self-BLEU against the tail-garbage
/// rate and the mean base log-probability, one point per method and level, each method's
/// levels joined by a line (one level: points only).
fn diversity_plot(doc: &mistralrs_hlg::eval::diversity::Doc) -> String {
    use mistralrs_hlg::eval::diversity::MethodResult;
    let (w, h, pad) = (760.0, 360.0, 50.0);
    let colors = [
        "#555", "#9467bd", "#8c564b", "#1f77b4", "#d62728", "#2ca02c",
    ];
    let levels: Vec<String> = doc.levels.iter().map(|l| l.level.to_string()).collect();
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/><text x="10" y="16" font-size="13">diversity vs quality at matched entropy (levels T = {}; small labels: the level)</text>"#,
        levels.join(", ")
    );
    // Method names in the order of first appearance.
    let mut names: Vec<&str> = vec![];
    for l in &doc.levels {
        for m in &l.methods {
            if !names.contains(&m.name.as_str()) {
                names.push(&m.name);
            }
        }
    }
    // (x label, y label, the point of a method).
    type Panel<'a> = (&'a str, &'a str, fn(&MethodResult) -> (f64, f64));
    let panels: [Panel; 2] = [
        ("tail-garbage rate (lower: better)", "distinct-2", |r| {
            (r.tail_garbage_rate, r.distinct[1])
        }),
        (
            "mean base log-prob (higher: better)",
            "1 − self-BLEU",
            |r| (r.mean_base_logprob, 1.0 - r.self_bleu),
        ),
    ];
    for (k, (xl, yl, f)) in panels.iter().enumerate() {
        let ox = k as f64 * w / 2.0;
        let (l, r, t, b) = (ox + pad, ox + w / 2.0 - 20.0, 40.0, h - pad);
        let all: Vec<(f64, f64)> = doc
            .levels
            .iter()
            .flat_map(|lv| lv.methods.iter().map(f))
            .collect();
        let span = |v: Vec<f64>| {
            let (lo, hi) = v
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                });
            let m = ((hi - lo) * 0.15).max(1e-9);
            (lo - m, hi + m)
        };
        let (x0, x1) = span(all.iter().map(|p| p.0).collect());
        let (y0, y1) = span(all.iter().map(|p| p.1).collect());
        let px = |x: f64| l + (r - l) * (x - x0) / (x1 - x0);
        let py = |y: f64| b - (b - t) * (y - y0) / (y1 - y0);
        s += &format!(
            r##"<rect x="{l}" y="{t}" width="{:.1}" height="{:.1}" fill="none" stroke="#bbb"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{xl}</text><text x="{:.1}" y="{:.1}" text-anchor="end">{yl}</text>"##,
            r - l,
            b - t,
            (l + r) / 2.0,
            b + 30.0,
            l + 60.0,
            t - 4.0
        );
        s += &format!(
            r#"<text x="{l}" y="{:.1}">{x0:.3}</text><text x="{r}" y="{:.1}" text-anchor="end">{x1:.3}</text><text x="{:.1}" y="{b}" text-anchor="end">{y0:.3}</text><text x="{:.1}" y="{:.1}" text-anchor="end">{y1:.3}</text>"#,
            b + 14.0,
            b + 14.0,
            l - 3.0,
            l - 3.0,
            t + 9.0
        );
        for (i, name) in names.iter().enumerate() {
            let c = colors[i % colors.len()];
            let pts: Vec<(f64, f64, f64)> = doc
                .levels
                .iter()
                .filter_map(|lv| {
                    lv.methods
                        .iter()
                        .find(|m| m.name == *name)
                        .map(|m| (lv.level, f(m).0, f(m).1))
                })
                .collect();
            if pts.len() > 1 {
                let line: Vec<String> = pts
                    .iter()
                    .map(|(_, x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
                    .collect();
                s += &format!(
                    r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="1.5"/>"#,
                    line.join(" ")
                );
            }
            for (j, (lv, x, y)) in pts.iter().enumerate() {
                s += &format!(
                    r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{c}"/>"#,
                    px(*x),
                    py(*y)
                );
                if pts.len() > 1 {
                    s += &format!(
                        r#"<text x="{:.1}" y="{:.1}" fill="{c}" font-size="9">{lv}</text>"#,
                        px(*x) + 5.0,
                        py(*y) - 5.0
                    );
                }
                if j + 1 == pts.len() {
                    s += &format!(
                        r#"<text x="{:.1}" y="{:.1}" fill="{c}">{name}</text>"#,
                        px(*x) + 7.0,
                        py(*y) + 10.0
                    );
                }
            }
        }
    }
    s + "</svg>\n"
}

/// The matched sweep as a Markdown table.
fn matched_table(m: &mistralrs_hlg::eval::kl::Matched) -> String {
    let mut s = format!("At matched entropy: every point at the temperature giving plain temperature's mean entropy at T = {} ({:.3} nats on every third position).\n\n", m.level, m.target_entropy);
    s += "| knob | value | method | T | entropy | top mass | tail mass |\n| --- | --- | --- | --- | --- | --- | --- |\n";
    for p in &m.baselines {
        s += &format!(
            "| baseline | | {} | {:.3} | {:.3} | {:.3} | {:.2e} |\n",
            p.method, p.t, p.mean.entropy, p.mean.top_mass, p.mean.tail_mass
        );
    }
    for (knob, points) in &m.sweeps {
        for p in points {
            s += &format!(
                "| {knob} | {} | {} | {:.3} | {:.3} | {:.3} | {:.2e} |\n",
                p.value, p.method, p.t, p.mean.entropy, p.mean.top_mass, p.mean.tail_mass
            );
        }
    }
    s
}

/// Tail and top mass at matched entropy, per knob: one row of two panels per knob.
fn matched_plot(m: &mistralrs_hlg::eval::kl::Matched) -> String {
    use mistralrs_hlg::eval::plot;
    let colors = ["#1f77b4", "#d62728", "#2ca02c"];
    let base = |name: &str| {
        m.baselines
            .iter()
            .find(|p| p.method.starts_with(name))
            .map(|p| p.mean)
    };
    let temp = base("temperature").unwrap_or_default();
    let mut panels = vec![];
    for (knob, points) in &m.sweeps {
        let xs: Vec<String> = points
            .iter()
            .filter(|p| p.method == "log")
            .map(|p| p.value.clone())
            .collect();
        for (what, f) in [
            (
                "tail mass",
                (|s: &mistralrs_hlg::eval::metrics::Stats| s.tail_mass) as fn(&_) -> f64,
            ),
            ("top-token mass", |s| s.top_mass),
        ] {
            panels.push(plot::Panel {
                title: format!("{knob}: {what}"),
                xs: xs.clone(),
                series: ToeShape::ALL
                    .iter()
                    .enumerate()
                    .map(|(i, sh)| plot::Series {
                        name: sh.name(),
                        color: colors[i],
                        ys: points
                            .iter()
                            .filter(|p| p.method == sh.name())
                            .map(|p| Some(f(&p.mean)))
                            .collect(),
                    })
                    .collect(),
                reference: Some((f(&temp), "temperature")),
                log_y: what == "tail mass",
            });
        }
    }
    let title = format!(
        "at plain temperature's entropy at T = {}; tail mass: top-p 0.9 {:.1e}, min-p 0.05 {:.1e}",
        m.level,
        base("top_p").unwrap_or_default().tail_mass,
        base("min_p").unwrap_or_default().tail_mass
    );
    plot::grid(&title, &panels, 2)
}

/// The characterisation as a Markdown table.
fn kl_table(r: &mistralrs_hlg::eval::kl::Report) -> String {
    let t = &r.temperature_only;
    let mut s = format!("T = {}, {} positions. Temperature only: entropy {:.3}, top mass {:.3}, tail mass {:.2e}.\n\n", r.temperature, r.positions, t.entropy, t.top_mass, t.tail_mass);
    s += "| knob | value | toe shape | KL | entropy | top mass | tail mass |\n| --- | --- | --- | --- | --- | --- | --- |\n";
    for (knob, points) in &r.sweeps {
        for p in points {
            let m = &p.mean;
            s += &format!(
                "| {knob} | {} | {} | {:.4} | {:.3} | {:.3} | {:.2e} |\n",
                p.value, p.toe_shape, m.kl, m.entropy, m.top_mass, m.tail_mass
            );
        }
    }
    s
}

fn main() -> anyhow::Result<()> {
    // Upstream's set-up: info by default, debug with MISTRALRS_DEBUG=1 (which also turns
    // on the engine's own debug output), RUST_LOG directives on top.
    mistralrs_core::initialize_logging();
    match Cli::parse().cmd {
        Cmd::Serve(args) => tokio::runtime::Runtime::new()?.block_on(serve(args)),
        Cmd::FetchModel => {
            println!(
                "{}",
                mistralrs_hlg::model::ensure_default_model()?.display()
            );
            Ok(())
        }
        Cmd::Curve(args) => curve(args),
        Cmd::Eval(args) => {
            // Before any thread exists: candle reads this once per thread, at its first
            // quantized matmul.
            if !args.quantized && std::env::var_os("CANDLE_DEQUANTIZE_ALL").is_none() {
                std::env::set_var("CANDLE_DEQUANTIZE_ALL", "1");
            }
            eval(args.cmd)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(hlg.flags.toe, Some(RawValue::Number(5.0)));
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
            file.hlg.flags.defaults().unwrap_err(),
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
