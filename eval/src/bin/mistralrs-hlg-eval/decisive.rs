//! `mistralrs-hlg-eval decisive`: one cell of the decisive evaluation (docs/EVALUATION.md,
//! "The decisive evaluation"), in stages that each resume from what is on disk: the
//! equal-budget search on the selection prompts, the arms' online entropy calibration,
//! the main run, and the report with the protocol's calls.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use mistralrs_hlg::HlgConfig;
use mistralrs_hlg_eval::capture::{self, Capture};
use mistralrs_hlg_eval::confirm::{self, Draws, Planned, Sample, Store};
use mistralrs_hlg_eval::decide::{self, Call};
use mistralrs_hlg_eval::decisive::{self as d, Arm, Next, Searched};
use mistralrs_hlg_eval::frontier::{self, Family};
use mistralrs_hlg_eval::gemma::{self, Gemma};
use mistralrs_hlg_eval::ledger::{Ledger, Row};
use mistralrs_hlg_eval::lm::Lm;
use mistralrs_hlg_eval::onepass::OnePass;
use mistralrs_hlg_eval::prompts;
use mistralrs_hlg_eval::sampler::Sampler;

use crate::progress::progress;

#[derive(Args)]
pub struct DecisiveArgs {
    /// The cell's directory (its capture in OUT/capture; everything else under
    /// OUT/decisive/).
    #[arg(long)]
    out: PathBuf,
    /// The Gemma 3 cell (judged by the embedded model); without it the embedded model's
    /// (judged by Gemma).
    #[arg(long)]
    gemma: bool,
    /// Plain temperature's T whose online entropy every arm is matched to.
    #[arg(long, default_value_t = 1.0)]
    level: f64,
    /// The stage to run; `all` runs each in turn, skipping what is done.
    #[arg(long, value_enum, default_value_t = Stage::All)]
    stage: Stage,
    /// Stop at the next boundary (a setting, a prompt) after this many hours; a later run
    /// continues.
    #[arg(long)]
    hours: Option<f64>,
    /// Where the results small enough to commit go: each search's scores, the arms, one
    /// row per prompt of the calibration and the main run, the report (default
    /// OUT/decisive). `scripts/eval-decisive` keeps them under docs/results/decisive/, so
    /// that a run continues from the repository on another machine; the samples stay
    /// under OUT/decisive.
    #[arg(long)]
    ledger: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Stage {
    All,
    Search,
    Calibrate,
    Main,
    Report,
}

/// One scored setting of a search, as `search-<family>.json` lists them.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Scored {
    point: Vec<f64>,
    knob: String,
    /// The judged log-prob per byte on the selection prompts (`None`: ineligible).
    score: Option<f64>,
    distinct2: Option<f64>,
    /// Whether the offline matching reached plain temperature's entropy.
    matched: bool,
}

/// Plain temperature's scores on the selection prompts (`search-temperature.json`).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Reference {
    judged_logprob_per_byte: f64,
    distinct2: f64,
}

/// The models of a cell: the one sampled and the one judging.
struct Cell {
    engine: mistralrs::Model,
    onepass: OnePass,
    gemma: Gemma,
    on_gemma: bool,
}

impl Cell {
    async fn load(on_gemma: bool) -> anyhow::Result<Cell> {
        Ok(Cell {
            engine: capture::load_model(None).await?,
            onepass: OnePass::load(None)?,
            gemma: Gemma::load(&gemma::fetch()?)?,
            on_gemma,
        })
    }

    fn draws(&self, level: f64, samples: usize) -> Draws<'_> {
        let (model, judge) = match self.on_gemma {
            true => (
                Lm::Gemma(&self.gemma),
                Lm::EngineOnePass(&self.engine, &self.onepass),
            ),
            false => (
                Lm::EngineNet(&self.engine, &self.onepass),
                Lm::Gemma(&self.gemma),
            ),
        };
        Draws {
            model,
            judge: Some(judge),
            level,
            samples,
            // Rows decoded as one batch (across prompts where they are few per prompt).
            batch: 48,
            judge_batch: 1,
        }
    }
}

/// A clock for `--hours`, and the rate of samples drawn.
struct Budget {
    start: Instant,
    hours: Option<f64>,
    samples: usize,
}

impl Budget {
    fn over(&self) -> bool {
        self.hours
            .is_some_and(|h| self.start.elapsed().as_secs_f64() > h * 3600.0)
    }

    fn rate(&self) -> f64 {
        self.samples as f64 / (self.start.elapsed().as_secs_f64() / 3600.0).max(1e-9)
    }
}

pub fn decisive(args: DecisiveArgs) -> anyhow::Result<()> {
    let dir = args.out.join("decisive");
    std::fs::create_dir_all(&dir)?;
    let kept = args.ledger.clone().unwrap_or_else(|| dir.clone());
    let mut ledger = open_ledger(&kept, args.gemma, args.level)?;
    let c = Capture::load(&args.out.join("capture"))?;
    let mut budget = Budget {
        start: Instant::now(),
        hours: args.hours,
        samples: 0,
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let cell = runtime.block_on(Cell::load(args.gemma))?;
    let stages: &[Stage] = match args.stage {
        Stage::All => &[Stage::Search, Stage::Calibrate, Stage::Main, Stage::Report],
        ref s => std::slice::from_ref(s),
    };
    let run = Run {
        cell: &cell,
        capture: &c,
        level: args.level,
        dir: &dir,
        kept: &kept,
    };
    for stage in stages {
        let done = runtime.block_on(async {
            match stage {
                Stage::Search => run.search(&mut budget).await,
                Stage::Calibrate => calibrate(&run, &mut ledger, &mut budget).await,
                Stage::Main => main_run(&run, &mut ledger, &mut budget).await,
                Stage::Report => report(&kept, &ledger).map(|()| true),
                Stage::All => unreachable!(),
            }
        })?;
        eprintln!(
            "{} samples drawn and judged, {:.0} an hour",
            budget.samples,
            budget.rate()
        );
        if !done {
            eprintln!("stopped after --hours; run the same command again to continue");
            return Ok(());
        }
    }
    Ok(())
}

/// The cell's ledger (`rows.jsonl` under `kept`), named by the cell and what its rows
/// depend on.
fn open_ledger(kept: &Path, on_gemma: bool, level: f64) -> anyhow::Result<Ledger> {
    let header = serde_json::json!({
        "run": "decisive",
        "cell": if on_gemma { "gemma" } else { "smollm" },
        "level": level,
        "max_tokens": d::MAX_TOKENS,
        "calibration_samples": d::CALIBRATION_SAMPLES,
        "main_samples": d::MAIN_SAMPLES,
    });
    Ok(Ledger::open(&kept.join("rows.jsonl"), &header.to_string())?)
}

/// What every stage of a cell reads: its models, its capture, its level, its directory
/// (samples) and where its results are kept (`kept`: scores, arms, rows, report).
struct Run<'a> {
    cell: &'a Cell,
    capture: &'a Capture,
    level: f64,
    dir: &'a Path,
    kept: &'a Path,
}

/// Samples to draw: `methods` × `samples` on `prompts`, into the stores under `sub` (for
/// the calibration and the main run also the stage of their rows in the ledger, under
/// `keys`, one per method).
struct Job<'a> {
    sub: &'a str,
    keys: &'a [String],
    samples: usize,
    methods: &'a [Planned],
    prompts: &'a [(usize, &'a str)],
    label: &'a str,
}

/// The samples of a store grouped by prompt index, the first `n` of each prompt (a store
/// may hold more: a run stopped mid-batch, or an earlier size).
fn by_prompt(samples: &[Sample], n: usize) -> Vec<Vec<Sample>> {
    let mut m: HashMap<usize, Vec<Sample>> = HashMap::new();
    for s in samples.iter().filter(|s| s.sample < n) {
        m.entry(s.prompt).or_default().push(s.clone());
    }
    let mut v: Vec<(usize, Vec<Sample>)> = m.into_iter().collect();
    v.sort_by_key(|(p, _)| *p);
    v.into_iter().map(|(_, s)| s).collect()
}

fn planned(s: Sampler) -> Planned {
    Planned {
        family: Family::of(&s),
        knob: frontier::knob(&s),
        sampler: s,
        offline: Default::default(),
        t_scale: 1.0,
        stream: None,
    }
}

/// The selection prompts with their indices.
fn selection() -> Vec<(usize, &'static str)> {
    prompts::OPEN_ENDED.iter().copied().enumerate().collect()
}

impl Run<'_> {
    /// The draws of a job on this cell's models.
    async fn sample(
        &self,
        job: &Job<'_>,
        budget: &mut Budget,
    ) -> anyhow::Result<(Vec<Store>, bool)> {
        self.draw_groups(job, job.prompts, budget, |_, _| Ok(()))
            .await
    }

    /// A job drawn group by group of prompts, skipping the prompts the ledger holds for
    /// every method, and each drawn prompt's row recorded per method (`row_of` its
    /// samples); `false` when `--hours` stopped it.
    async fn sample_kept(
        &self,
        job: &Job<'_>,
        ledger: &mut Ledger,
        budget: &mut Budget,
    ) -> anyhow::Result<bool> {
        let todo: Vec<(usize, &str)> = job
            .prompts
            .iter()
            .copied()
            .filter(|(p, _)| job.keys.iter().any(|k| !ledger.has(job.sub, k, *p)))
            .collect();
        let record = |some: &[(usize, &str)], stores: &[Store]| {
            for &(p, text) in some {
                for (key, st) in job.keys.iter().zip(stores) {
                    let mine: Vec<Sample> = st
                        .samples
                        .iter()
                        .filter(|s| s.prompt_text == text && s.sample < job.samples)
                        .cloned()
                        .collect();
                    if mine.len() == job.samples {
                        ledger.add(Row {
                            stage: job.sub.into(),
                            method: key.clone(),
                            prompt: p,
                            values: row_of(job.sub, &mine),
                        })?;
                    }
                }
            }
            Ok(())
        };
        let (_, done) = self.draw_groups(job, &todo, budget, record).await?;
        Ok(done)
    }

    /// `prompts` of a job drawn group by group into its stores (what they hold is not drawn
    /// again), `after` called with each drawn group; `false` when `--hours` stopped it.
    async fn draw_groups(
        &self,
        job: &Job<'_>,
        prompts: &[(usize, &str)],
        budget: &mut Budget,
        mut after: impl FnMut(&[(usize, &str)], &[Store]) -> anyhow::Result<()>,
    ) -> anyhow::Result<(Vec<Store>, bool)> {
        let draws = self.cell.draws(self.level, job.samples);
        let dir = self.dir.join(job.sub);
        std::fs::create_dir_all(&dir)?;
        let mut stores: Vec<Store> = job
            .methods
            .iter()
            .map(|m| Store::open(&dir, m, d::MAX_TOKENS))
            .collect::<Result<_, _>>()?;
        // As many prompts at once as fill a batch: their rows decode together.
        let per_prompt = job.methods.len() * draws.samples;
        let group = (draws.batch / per_prompt.max(1)).max(1);
        let bar = progress(prompts.len(), job.label);
        for (g, some) in prompts.chunks(group).enumerate() {
            if budget.over() {
                bar.abandon();
                return Ok((stores, false));
            }
            let mut n = 0;
            confirm::run_prompts(draws, job.methods, &mut stores, some, || n += 1).await?;
            budget.samples += n;
            after(some, &stores)?;
            bar.set_position(((g + 1) * group).min(prompts.len()) as u64);
        }
        bar.finish();
        Ok((stores, true))
    }

    /// Plain temperature's (judged log-prob per byte, distinct-2) on the selection
    /// prompts, which the search's eligibility reads: kept once measured, so that a
    /// search continued on another machine holds every setting to the same reference.
    async fn search_reference(&self, budget: &mut Budget) -> anyhow::Result<Option<Reference>> {
        let path = self.kept.join("search-temperature.json");
        if let Some(r) = read_json::<Reference>(&path) {
            return Ok(Some(r));
        }
        let temp = [planned(Sampler::Temperature { t: self.level })];
        let job = Job {
            sub: "search",
            samples: d::SEARCH_SAMPLES,
            keys: &[],
            methods: &temp,
            prompts: &selection(),
            label: "search: temperature",
        };
        let (stores, done) = self.sample(&job, budget).await?;
        if !done {
            return Ok(None);
        }
        let Some((lp, d2)) = d::selection_score(&by_prompt(&stores[0].samples, d::SEARCH_SAMPLES))
        else {
            anyhow::bail!("plain temperature's selection samples have no judged prompt");
        };
        let r = Reference {
            judged_logprob_per_byte: lp,
            distinct2: d2,
        };
        write_json(&path, &r)?;
        Ok(Some(r))
    }

    /// Stage 1: every searched family's search, then `search.md`.
    async fn search(&self, budget: &mut Budget) -> anyhow::Result<bool> {
        let Some(Reference {
            distinct2: temp_d2, ..
        }) = self.search_reference(budget).await?
        else {
            return Ok(false);
        };
        for family in Searched::ALL {
            let path = self
                .kept
                .join(format!("search-{}.json", slug(family.name())));
            let mut scored: Vec<Scored> = read_json(&path).unwrap_or_default();
            while let Next::Score(point) = d::next_point(family, &scores_of(&scored)) {
                if budget.over() {
                    return Ok(false);
                }
                let Some(x) = self.score_point(family, point, temp_d2, budget).await? else {
                    return Ok(false);
                };
                scored.push(x);
                write_json(&path, &scored)?;
            }
        }
        std::fs::write(
            self.kept.join("search.md"),
            search_table(self.kept, temp_d2)?,
        )?;
        Ok(true)
    }

    /// One point of a search: matched offline, sampled on the selection prompts, scored
    /// (`None`: stopped by `--hours` before its samples were all in).
    async fn score_point(
        &self,
        family: Searched,
        point: Vec<f64>,
        temp_d2: f64,
        budget: &mut Budget,
    ) -> anyhow::Result<Option<Scored>> {
        let s = family.sampler(&point);
        let screened = frontier::screen(self.capture, &[s], self.level, 2, |_, _| {})?
            .points
            .remove(0);
        let knob = screened.knob.clone();
        let (mut score, mut distinct2) = (None, None);
        if screened.matched {
            // Every setting of a family draws from the family's streams (common random
            // numbers): two settings differ by their sampler, not by their luck.
            let m = [Planned {
                stream: Some(format!("search|{}", family.name())),
                ..planned(screened.sampler.clone())
            }];
            let label = format!("search: {} {knob}", family.name());
            let job = Job {
                sub: "search",
                samples: d::SEARCH_SAMPLES,
                keys: &[],
                methods: &m,
                prompts: &selection(),
                label: &label,
            };
            let (stores, done) = self.sample(&job, budget).await?;
            if !done {
                return Ok(None);
            }
            if let Some((lp, d2)) =
                d::selection_score(&by_prompt(&stores[0].samples, d::SEARCH_SAMPLES))
            {
                distinct2 = Some(d2);
                score = (d2 >= temp_d2 - d::MARGIN_DISTINCT2).then_some(lp);
            }
        }
        Ok(Some(Scored {
            point,
            knob,
            score,
            distinct2,
            matched: screened.matched,
        }))
    }
}

/// A search's scores by point, `-inf` for the ineligible.
fn scores_of(scored: &[Scored]) -> HashMap<String, f64> {
    scored
        .iter()
        .map(|x| (d::point_key(&x.point), x.score.unwrap_or(f64::NEG_INFINITY)))
        .collect()
}

fn slug(name: &str) -> String {
    name.replace('σ', "s")
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn write_json<T: Serialize>(path: &Path, v: &T) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(v)? + "\n")?;
    Ok(())
}

/// The search's table: each family's settings in the order scored, its best, and its
/// best-of-N curve.
fn search_table(dir: &Path, temp_d2: f64) -> anyhow::Result<String> {
    let mut s = format!(
        "# The search (selection prompts, {} × {} samples × {} tokens)\n\nPlain temperature's distinct-2: {temp_d2:.4}; a setting more than {} below it is ineligible.\n\n",
        prompts::OPEN_ENDED.len(),
        d::SEARCH_SAMPLES,
        d::MAX_TOKENS,
        d::MARGIN_DISTINCT2
    );
    for family in Searched::ALL {
        let path = dir.join(format!("search-{}.json", slug(family.name())));
        let scored: Vec<Scored> = read_json(&path).unwrap_or_default();
        let best = d::best_point(family, &scores_of(&scored));
        s += &format!(
            "## {}\n\n| # | setting | judged log-prob per byte | distinct-2 |\n| --- | --- | --- | --- |\n",
            family.name()
        );
        for (i, x) in scored.iter().enumerate() {
            let mark = if best.as_ref() == Some(&x.point) {
                " **best**"
            } else {
                ""
            };
            let f = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.4}"));
            let knob = if x.matched {
                x.knob.clone()
            } else {
                format!("{} (unmatched)", x.knob)
            };
            s += &format!(
                "| {} | {knob}{mark} | {} | {} |\n",
                i + 1,
                f(x.score),
                f(x.distinct2)
            );
        }
        let curve = best_of_n_curve(&scored);
        s += &format!(
            "\nBest of N (mean over 1,000 draws): {}\n\n",
            curve
                .iter()
                .enumerate()
                .map(|(n, v)| format!("N={}: {v:.4}", n + 1))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(s)
}

/// A family's best-of-N curve over its scored settings (ineligible ones scoring −∞), as
/// `search.md` and the report print it.
fn best_of_n_curve(scored: &[Scored]) -> Vec<f64> {
    let scores: Vec<f64> = scored
        .iter()
        .map(|x| x.score.unwrap_or(f64::NEG_INFINITY))
        .collect();
    d::best_of_n(&scores, 1000, 7)
}

/// The best setting of a family's finished search, matched offline.
fn searched_best(dir: &Path, family: Searched) -> anyhow::Result<Sampler> {
    let path = dir.join(format!("search-{}.json", slug(family.name())));
    let scored: Vec<Scored> =
        read_json(&path).ok_or_else(|| anyhow::anyhow!("{} has no search yet", family.name()))?;
    let scores: HashMap<String, f64> = scored
        .iter()
        .map(|x| (d::point_key(&x.point), x.score.unwrap_or(f64::NEG_INFINITY)))
        .collect();
    if d::next_point(family, &scores) != Next::Done {
        anyhow::bail!("the search of {} is not finished", family.name());
    }
    let best = d::best_point(family, &scores)
        .ok_or_else(|| anyhow::anyhow!("no eligible setting of {}", family.name()))?;
    Ok(family.sampler(&best))
}

/// Stage 2: every arm's calibration on the calibration prompts, then `arms.json`.
async fn calibrate(
    run: &Run<'_>,
    ledger: &mut Ledger,
    budget: &mut Budget,
) -> anyhow::Result<bool> {
    let arms_path = run.kept.join("arms.json");
    if read_json::<Vec<Arm>>(&arms_path).is_some() {
        return Ok(true);
    }
    let matched = arms_matched(run.capture, run.level, run.kept)?;
    let calib: Vec<String> = prompts::decisive_calibration();
    let calib: Vec<(usize, &str)> = calib.iter().map(|p| p.as_str()).enumerate().collect();
    // Each arm at each step of its matched knob (plain temperature at its one).
    let steps = |s: &Sampler| -> Vec<f64> {
        match s {
            Sampler::Temperature { .. } => vec![1.0],
            _ => d::CALIBRATION_SCALES.to_vec(),
        }
    };
    let (keys, methods): (Vec<String>, Vec<Planned>) = matched
        .iter()
        .flat_map(|(role, _, s)| {
            // An arm's steps draw from the same streams, so its entropies differ by step.
            let variant = move |f: f64| {
                let m = Planned {
                    t_scale: f,
                    stream: Some(format!("calibration|{role}")),
                    ..planned(d::calibration_variant(s, f))
                };
                (format!("{role}|{f}"), m)
            };
            steps(s).into_iter().map(variant)
        })
        .unzip();
    let job = Job {
        sub: "calibration",
        keys: &keys,
        samples: d::CALIBRATION_SAMPLES,
        methods: &methods,
        prompts: &calib,
        label: "calibration",
    };
    if !run.sample_kept(&job, ledger, budget).await? {
        return Ok(false);
    }
    let entropies: Vec<f64> = keys
        .iter()
        .map(|k| online_entropy(&ledger.values("calibration", k)))
        .collect();
    let arms = fitted(matched, &methods, &entropies);
    write_json(&arms_path, &arms)?;
    eprintln!(
        "calibrated {} arms to {:.3} nats → {}",
        arms.len(),
        entropies[0],
        arms_path.display()
    );
    Ok(true)
}

/// A prompt's row in the ledger: the calibration's (sum of the entropies of the
/// distributions its samples were drawn from, their count), the main run's
/// [`PromptRow`] flattened (`None`: nothing judged to measure).
fn row_of(stage: &str, samples: &[Sample]) -> Option<Vec<f64>> {
    match stage {
        "calibration" => {
            let h: Vec<f64> = samples
                .iter()
                .flat_map(|s| s.trace.entropy.iter().copied())
                .collect();
            Some(vec![h.iter().sum(), h.len() as f64])
        }
        _ => {
            let (lp, d2, thesis) = prompt_row(samples)?;
            Some([&[lp, d2][..], &thesis[..]].concat())
        }
    }
}

/// The mean online entropy over a variant's calibration rows (entropy sums and counts).
fn online_entropy(rows: &HashMap<usize, Vec<f64>>) -> f64 {
    let (sum, n) = rows
        .values()
        .fold((0.0, 0.0), |(s, n), r| (s + r[0], n + r[1]));
    sum / f64::max(n, 1.0)
}

/// The arms at their calibrated steps: `methods` hold each arm's variants in `matched`'s
/// order (plain temperature first, one variant: its entropy is the target), `entropies`
/// their mean online entropies.
fn fitted(
    matched: Vec<(String, bool, Sampler)>,
    methods: &[Planned],
    entropies: &[f64],
) -> Vec<Arm> {
    let target = entropies[0];
    let mut arms = vec![];
    let mut k = 0;
    for (role, primary, s) in matched {
        let n = match s {
            Sampler::Temperature { .. } => 1,
            _ => d::CALIBRATION_SCALES.len(),
        };
        let points: Vec<(f64, f64)> = (k..k + n)
            .map(|j| (methods[j].t_scale, entropies[j]))
            .collect();
        k += n;
        let (step, bracketed) = match n {
            1 => (1.0, true),
            _ => d::calibrated_step(&points, target),
        };
        let sampler = d::calibration_variant(&s, step);
        arms.push(Arm {
            role,
            family: Family::of(&sampler),
            knob: frontier::knob(&sampler),
            primary,
            sampler,
            calibration: points,
            bracketed,
        });
    }
    arms
}

/// Every arm of the cell (role, primary, sampler), the primary ones first, each matched
/// offline (plain temperature at the level itself).
fn arms_matched(
    c: &Capture,
    level: f64,
    dir: &Path,
) -> anyhow::Result<Vec<(String, bool, Sampler)>> {
    let shipped = Sampler::Hlg {
        t: 1.0,
        hlg: HlgConfig::default().resolved(true),
    };
    let mut roles: Vec<(String, bool, Sampler)> = vec![
        (
            "temperature".into(),
            true,
            Sampler::Temperature { t: level },
        ),
        ("hlg".into(), true, searched_best(dir, Searched::Hlg)?),
        (
            "hlg-auto".into(),
            true,
            searched_best(dir, Searched::HlgAuto)?,
        ),
        ("hlg-shipped".into(), true, shipped),
        ("min-p".into(), true, searched_best(dir, Searched::MinP)?),
        (
            "top-nσ".into(),
            true,
            searched_best(dir, Searched::TopNSigma)?,
        ),
        (
            "adaptive-p".into(),
            true,
            searched_best(dir, Searched::AdaptiveP)?,
        ),
    ];
    roles.extend(d::secondary().into_iter().map(|(r, s)| (r, false, s)));
    roles
        .into_iter()
        .map(|(role, primary, s)| {
            let s = match s {
                Sampler::Temperature { .. } => s,
                _ => {
                    frontier::screen(c, &[s], level, 2, |_, _| {})?
                        .points
                        .remove(0)
                        .sampler
                }
            };
            Ok((role, primary, s))
        })
        .collect()
}

/// The arm's method as the main run's files name it: its role, so that its seed is its
/// own whatever its knob.
fn arm_method(a: &Arm) -> Planned {
    Planned {
        family: a.family,
        knob: format!("{} [{}]", a.knob, a.role),
        sampler: a.sampler.clone(),
        offline: Default::default(),
        t_scale: 1.0,
        // Every arm draws sample k of a prompt from the same stream (common random
        // numbers): the paired differences are the arms', not their draws'.
        stream: Some("main".into()),
    }
}

/// Stage 3: the main run, prompt by prompt over every arm.
async fn main_run(run: &Run<'_>, ledger: &mut Ledger, budget: &mut Budget) -> anyhow::Result<bool> {
    let arms: Vec<Arm> = read_json(&run.kept.join("arms.json"))
        .ok_or_else(|| anyhow::anyhow!("no arms.json: run the calibration first"))?;
    let main: Vec<String> = prompts::decisive_main();
    let main: Vec<(usize, &str)> = main.iter().map(|p| p.as_str()).enumerate().collect();
    let methods: Vec<Planned> = arms.iter().map(arm_method).collect();
    let keys: Vec<String> = arms.iter().map(|a| a.role.clone()).collect();
    // The primary arms come first (the calibration writes them so): a prompt past the
    // secondary arms' share runs the leading slice.
    let primaries = arms.iter().take_while(|a| a.primary).count();
    if arms[primaries..].iter().any(|a| a.primary) {
        anyhow::bail!("arms.json lists a primary arm after a secondary one");
    }
    // Every arm on the first prompts, the primary ones on the rest.
    let (first, rest) = main.split_at(d::SECONDARY_PROMPTS.min(main.len()));
    for (prompts, k, label) in [
        (first, arms.len(), "main: every arm"),
        (rest, primaries, "main: primary arms"),
    ] {
        let job = Job {
            sub: "main",
            keys: &keys[..k],
            samples: d::MAIN_SAMPLES,
            methods: &methods[..k],
            prompts,
            label,
        };
        if !run.sample_kept(&job, ledger, budget).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// One comparison of the report.
#[derive(Clone, Debug, Serialize)]
struct Comparison {
    hlg: String,
    other: String,
    primary: bool,
    prompts: usize,
    /// Per measure (judged log-prob per byte, distinct-2): mean, interval, call, and the
    /// power of the equivalence call at the observed spread.
    measures: Vec<(f64, f64, f64, Call, f64)>,
    summary: Call,
    /// The paired mean difference of the two arms' online entropies (nats); the protocol
    /// flags a comparison whose arms differ by more than [`ENTROPY_FLAG`].
    entropy_gap: f64,
}

/// The protocol's flag: arms whose mean online entropies differ by more than this (nats)
/// were not matched well enough for their comparison to be read as at the same entropy.
const ENTROPY_FLAG: f64 = 0.1;

/// One HLG arm against another on the thesis measures: per measure, the paired mean
/// difference (HLG minus the other, by prompt) and its 95 % bootstrap interval,
/// uncorrected (descriptive, as the protocol says).
#[derive(Clone, Debug, Serialize)]
struct ThesisDiff {
    hlg: String,
    other: String,
    prompts: usize,
    diffs: Vec<(f64, f64, f64)>,
}

/// What `report.json` holds: the calls, the thesis' paired differences and each searched
/// family's best-of-N curve on the selection prompts.
#[derive(Serialize)]
struct ReportJson {
    comparisons: Vec<Comparison>,
    thesis: Vec<ThesisDiff>,
    best_of_n: Vec<(String, Vec<f64>)>,
}

/// One prompt of one arm: judged log-prob per byte, distinct-2, the thesis measures.
type PromptRow = (f64, f64, [f64; d::THESIS_MEASURES]);

/// Stage 4: the calls, the thesis measures and the arms' entropies.
fn report(dir: &Path, ledger: &Ledger) -> anyhow::Result<()> {
    let arms: Vec<Arm> = read_json(&dir.join("arms.json"))
        .ok_or_else(|| anyhow::anyhow!("no arms.json: run the calibration first"))?;
    let per: Vec<HashMap<usize, PromptRow>> = arms
        .iter()
        .map(|a| {
            let rows = ledger.values("main", &a.role);
            rows.into_iter()
                .filter_map(|(p, v)| Some((p, row_from(&v)?)))
                .collect()
        })
        .collect();
    let role = |r: &str| arms.iter().position(|a| a.role == r);
    let pairs = d::HLG_ROLES
        .iter()
        .flat_map(|h| d::BASELINE_ROLES.iter().map(move |o| (*h, *o, true)))
        .chain(d::BASELINE_ROLES.iter().map(|o| ("hlg-shipped", *o, false)));
    let comparisons: Vec<Comparison> = pairs
        .filter_map(|(h, o, primary)| {
            let (i, j) = (role(h)?, role(o)?);
            compare(&per[i], &per[j], (h, o), primary)
        })
        .collect();
    // The thesis is read against the two references the design note names.
    let thesis: Vec<ThesisDiff> = ["hlg", "hlg-auto", "hlg-shipped"]
        .iter()
        .flat_map(|h| ["temperature", "min-p"].map(move |o| (*h, o)))
        .filter_map(|(h, o)| thesis_paired(&per[role(h)?], &per[role(o)?], (h, o)))
        .collect();
    let best_of_n: Vec<(String, Vec<f64>)> = Searched::ALL
        .iter()
        .filter_map(|f| {
            let path = dir.join(format!("search-{}.json", slug(f.name())));
            let scored: Vec<Scored> = read_json(&path)?;
            Some((f.name().to_string(), best_of_n_curve(&scored)))
        })
        .collect();
    let mut md = report_markdown(&arms, &per, &comparisons);
    md += &thesis_markdown(&thesis);
    md += &best_of_n_markdown(&best_of_n);
    std::fs::write(dir.join("report.md"), &md)?;
    std::fs::write(dir.join("best-of-n.svg"), best_of_n_figure(&best_of_n))?;
    write_json(
        &dir.join("report.json"),
        &ReportJson {
            comparisons,
            thesis,
            best_of_n,
        },
    )?;
    eprintln!("wrote {}", dir.join("report.md").display());
    Ok(())
}

/// The thesis measures of HLG arm `a` minus arm `b`, paired by prompt; `None` under 10
/// paired prompts.
fn thesis_paired(
    a: &HashMap<usize, PromptRow>,
    b: &HashMap<usize, PromptRow>,
    (h, o): (&str, &str),
) -> Option<ThesisDiff> {
    let both = paired(a, b)?;
    let diffs = (0..d::THESIS_MEASURES)
        .map(|k| {
            let x: Vec<f64> = both.iter().map(|p| a[p].2[k] - b[p].2[k]).collect();
            let seed = mistralrs_hlg_eval::generate::fnv1a(format!("{h}|{o}|thesis|{k}").bytes());
            let (mean, lo, hi, _) = mistralrs_hlg_eval::verdict::bootstrap_interval(&x, 0.05, seed);
            (mean, lo, hi)
        })
        .collect();
    Some(ThesisDiff {
        hlg: h.into(),
        other: o.into(),
        prompts: both.len(),
        diffs,
    })
}

/// The prompts both arms ran, in order; `None` under 10.
fn paired(a: &HashMap<usize, PromptRow>, b: &HashMap<usize, PromptRow>) -> Option<Vec<usize>> {
    let mut both: Vec<usize> = a.keys().filter(|p| b.contains_key(p)).copied().collect();
    both.sort_unstable();
    (both.len() >= 10).then_some(both)
}

/// A number at four decimals, never "-0.0000" (a value that rounds to zero prints as +0).
fn dec4(v: f64) -> String {
    format!("{:.4}", if v.abs() < 5e-5 { 0.0 } else { v })
}

/// As [`dec4`] with a sign.
fn signed4(v: f64) -> String {
    format!("{:+.4}", if v.abs() < 5e-5 { 0.0 } else { v })
}

fn thesis_markdown(thesis: &[ThesisDiff]) -> String {
    let mut md = format!(
        "\n## The thesis, paired (HLG arm minus the other, by prompt; mean [95 % bootstrap interval], uncorrected and descriptive)\n\n| HLG | other | prompts | {} |\n| --- | --- | --- | {} |\n",
        d::THESIS.join(" | "),
        d::THESIS.map(|_| "---").join(" | ")
    );
    for t in thesis {
        let cells: Vec<String> = t
            .diffs
            .iter()
            .map(|(m, lo, hi)| format!("{} [{}, {}]", signed4(*m), signed4(*lo), signed4(*hi)))
            .collect();
        md += &format!(
            "| {} | {} | {} | {} |\n",
            t.hlg,
            t.other,
            t.prompts,
            cells.join(" | ")
        );
    }
    md
}

fn best_of_n_markdown(curves: &[(String, Vec<f64>)]) -> String {
    let n = curves.iter().map(|c| c.1.len()).max().unwrap_or(0);
    let names: Vec<&str> = curves.iter().map(|c| c.0.as_str()).collect();
    let mut md = format!(
        "\n## Best of N on the selection prompts (judged log-prob per byte; mean over 1,000 draws of N of a family's {} searched settings, the best kept; figure: best-of-n.svg)\n\n| N | {} |\n| --- | {} |\n",
        d::SEARCH_BUDGET,
        names.join(" | "),
        names.iter().map(|_| "---").collect::<Vec<_>>().join(" | ")
    );
    for k in 0..n {
        let cells: Vec<String> = curves
            .iter()
            .map(|c| {
                c.1.get(k)
                    .filter(|v| v.is_finite())
                    .map_or("–".into(), |v| dec4(*v))
            })
            .collect();
        md += &format!("| {} | {} |\n", k + 1, cells.join(" | "));
    }
    md
}

fn best_of_n_figure(curves: &[(String, Vec<f64>)]) -> String {
    use mistralrs_hlg_eval::plot::{grid, Panel, Series};
    const COLORS: [&str; 5] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"];
    let n = curves.iter().map(|c| c.1.len()).max().unwrap_or(0);
    let series = curves
        .iter()
        .zip(COLORS.iter().cycle())
        .map(|(c, color)| Series {
            name: c.0.as_str(),
            color,
            ys: (0..n)
                .map(|k| c.1.get(k).copied().filter(|v| v.is_finite()))
                .collect(),
        })
        .collect();
    let panel = Panel {
        title: "judged log-prob per byte, best of N settings".into(),
        xs: (1..=n).map(|k| k.to_string()).collect(),
        series,
        reference: None,
        log_y: false,
    };
    grid("Best of N on the selection prompts", &[panel], 1)
}

/// One prompt's measures from its samples (`None` unless they were judged).
fn prompt_row(samples: &[Sample]) -> Option<PromptRow> {
    let refs: Vec<&Sample> = samples.iter().collect();
    let pm = confirm::PromptMeasures::of(&refs)?;
    let th = d::thesis(samples)?;
    pm.judged_logprob_per_byte.is_finite().then_some((
        pm.judged_logprob_per_byte,
        pm.distinct[1],
        th,
    ))
}

/// A main-run row of the ledger read back as a [`PromptRow`].
fn row_from(v: &[f64]) -> Option<PromptRow> {
    let thesis: [f64; d::THESIS_MEASURES] = v.get(2..)?.try_into().ok()?;
    Some((*v.first()?, *v.get(1)?, thesis))
}

/// One comparison (HLG arm `a` minus arm `b`, paired by prompt) with the protocol's calls;
/// `None` under 10 paired prompts.
fn compare(
    a: &HashMap<usize, PromptRow>,
    b: &HashMap<usize, PromptRow>,
    (h, o): (&str, &str),
    primary: bool,
) -> Option<Comparison> {
    let both = paired(a, b)?;
    let z = decide::critical_z(d::COMPARISONS);
    let alpha = 2.0 * decide::ALPHA / d::COMPARISONS as f64;
    let measures: Vec<(f64, f64, f64, Call, f64)> =
        [(0usize, d::MARGIN_PER_BYTE), (1, d::MARGIN_DISTINCT2)]
            .into_iter()
            .map(|(k, margin)| {
                let pick = |r: &PromptRow| if k == 0 { r.0 } else { r.1 };
                let diffs: Vec<f64> = both.iter().map(|p| pick(&a[p]) - pick(&b[p])).collect();
                let seed = mistralrs_hlg_eval::generate::fnv1a(format!("{h}|{o}|{k}").bytes());
                let (mean, lo, hi, _) =
                    mistralrs_hlg_eval::verdict::bootstrap_interval(&diffs, alpha, seed);
                let n = diffs.len() as f64;
                let sd = (diffs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
                let power = decide::equivalence_power(sd / n.sqrt(), margin, z);
                (mean, lo, hi, decide::call(lo, hi, margin), power)
            })
            .collect();
    let calls = [measures[0].3, measures[1].3];
    let summary = if calls.contains(&Call::Worse) {
        Call::Worse
    } else if calls.contains(&Call::Better) && !calls.contains(&Call::Inconclusive) {
        Call::Better
    } else if calls.iter().all(|c| *c == Call::Equivalent) {
        Call::Equivalent
    } else {
        Call::Inconclusive
    };
    let gap = both.iter().map(|p| a[p].2[5] - b[p].2[5]).sum::<f64>() / both.len() as f64;
    Some(Comparison {
        hlg: h.into(),
        other: o.into(),
        primary,
        prompts: both.len(),
        measures,
        summary,
        entropy_gap: gap,
    })
}

/// The report's tables: the calls, then every arm's measures.
fn report_markdown(
    arms: &[Arm],
    per: &[HashMap<usize, PromptRow>],
    comparisons: &[Comparison],
) -> String {
    let mut md = format!(
        "# The decisive evaluation: one cell\n\nCalls at two-sided level 1 − 2·{}/{} (Bonferroni), margins ±{} nats/byte and ±{} distinct-2 (docs/EVALUATION.md). Power: of the equivalence call at the observed spread, were the true difference 0. Δ entropy: the HLG arm's mean online entropy minus the other's (nats); ⚠ past ±{ENTROPY_FLAG}, where the arms were not matched well enough to be read as at the same entropy.\n\n| HLG | other | prompts | per byte: mean [interval] | call | power | distinct-2: mean [interval] | call | power | summary | Δ entropy |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
        decide::ALPHA,
        d::COMPARISONS,
        d::MARGIN_PER_BYTE,
        d::MARGIN_DISTINCT2
    );
    for c in comparisons {
        let m = |x: &(f64, f64, f64, Call, f64)| {
            format!(
                "{:+.4} [{:+.4}, {:+.4}] | {:?} | {:.2}",
                x.0, x.1, x.2, x.3, x.4
            )
        };
        let label = if c.primary { "" } else { " (secondary)" };
        let flag = if c.entropy_gap.abs() > ENTROPY_FLAG {
            " ⚠"
        } else {
            ""
        };
        md += &format!(
            "| {}{label} | {} | {} | {} | {} | {:?} | {}{flag} |\n",
            c.hlg,
            c.other,
            c.prompts,
            m(&c.measures[0]),
            m(&c.measures[1]),
            c.summary,
            signed4(c.entropy_gap)
        );
    }
    md += &format!(
        "\n## Arms (means over prompts with 95 % intervals, uncorrected and descriptive)\n\n| arm | setting | prompts | per byte | distinct-2 | {} |\n| --- | --- | --- | --- | --- | {} |\n",
        d::THESIS.join(" | "),
        d::THESIS.map(|_| "---").join(" | ")
    );
    for (a, m) in arms.iter().zip(per) {
        let col = |f: &dyn Fn(&PromptRow) -> f64| {
            let v: Vec<f64> = m.values().map(f).collect();
            let e = mistralrs_hlg_eval::stats::Estimate::of(&v);
            format!("{} ± {:.4}", dec4(e.mean), 1.96 * e.se)
        };
        let thesis: Vec<String> = (0..d::THESIS_MEASURES).map(|k| col(&|x| x.2[k])).collect();
        let flag = if a.bracketed {
            ""
        } else {
            " (calibration extrapolated)"
        };
        md += &format!(
            "| {}{flag} | {} | {} | {} | {} | {} |\n",
            a.role,
            a.knob,
            m.len(),
            col(&|x| x.0),
            col(&|x| x.1),
            thesis.join(" | ")
        );
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use mistralrs_hlg_eval::generate::{Judged, SplitMix, Trace};

    /// One arm's samples: per prompt, `MAIN_SAMPLES` texts of 40 bytes whose judged
    /// log-probs sum to `lp(prompt) × 40` (so `lp` nats per byte), words drawn from
    /// `vocab` words (distinct-2 grows with it).
    fn arm(prompts: usize, lp: impl Fn(usize) -> f64, vocab: usize, seed: u64) -> Vec<Sample> {
        let mut rng = SplitMix(seed);
        let mut out = vec![];
        for p in 0..prompts {
            for k in 0..d::MAIN_SAMPLES {
                let words: Vec<String> = (0..10)
                    .map(|_| format!("w{}", rng.next_u64() % vocab as u64))
                    .collect();
                let mut text = words.join(" ");
                text.truncate(40);
                while text.len() < 40 {
                    text.push('.');
                }
                out.push(Sample {
                    prompt: p,
                    prompt_text: format!("p{p}"),
                    sample: k,
                    text,
                    trace: Trace {
                        entropy: vec![2.0; 8],
                        base_logprob: vec![-1.0; 7],
                        shape: vec![[0.4, 0.01, 0.2]; 8],
                    },
                    judged: Some(Judged {
                        logprobs: vec![lp(p) * 40.0 / 10.0; 10],
                    }),
                });
            }
        }
        out
    }

    /// Each arm's calibration variants in `matched`'s order, and their online entropies
    /// as the ledger's rows give them (one prompt per variant, `entropies` per arm).
    fn calibration_variants(
        matched: &[(String, bool, Sampler)],
        entropies: &[Vec<f64>],
    ) -> (Vec<Planned>, Vec<f64>) {
        let mut methods = vec![];
        let mut means = vec![];
        for ((_, _, s), hs) in matched.iter().zip(entropies) {
            let steps: Vec<f64> = match hs.len() {
                1 => vec![1.0],
                _ => d::CALIBRATION_SCALES.to_vec(),
            };
            for (f, &h) in steps.iter().zip(hs) {
                methods.push(Planned {
                    t_scale: *f,
                    ..planned(d::calibration_variant(s, *f))
                });
                let sample = Sample {
                    prompt: 0,
                    prompt_text: "p".into(),
                    sample: 0,
                    text: "t".into(),
                    trace: Trace {
                        entropy: vec![h; 4],
                        base_logprob: vec![-1.0; 3],
                        shape: vec![],
                    },
                    judged: None,
                };
                let row = row_of("calibration", &[sample]).unwrap();
                means.push(online_entropy(&HashMap::from([(0, row)])));
            }
        }
        (methods, means)
    }

    /// The calibration's fit: each arm's steps and their online entropies on disk, the
    /// step that reaches plain temperature's entropy interpolated, the arm's sampler at
    /// it (adaptive-p: its cut), and a target no step brackets flagged.
    #[test]
    fn the_calibration_fits_each_arm_to_the_target() {
        let temperature = Sampler::Temperature { t: 1.0 };
        let min_p = Sampler::MinP {
            t: 1.2,
            min_p: 0.05,
        };
        let adaptive = Sampler::AdaptiveP {
            t: 1.0,
            target: 0.5,
            decay: 0.9,
            min_p: 0.01,
        };
        let matched = vec![
            ("temperature".to_string(), true, temperature.clone()),
            ("min-p".to_string(), true, min_p.clone()),
            ("adaptive-p".to_string(), false, adaptive.clone()),
        ];
        // Online entropies: temperature 2.0 (the target); min-p 1.8, 2.2, 2.6 over its
        // three steps (bracketed between the first two); adaptive-p all above (not).
        let entropies = [vec![2.0], vec![1.8, 2.2, 2.6], vec![2.5, 2.7, 2.9]];
        let (methods, means) = calibration_variants(&matched, &entropies);
        let arms = fitted(matched, &methods, &means);
        assert_eq!(arms.len(), 3);
        assert_eq!(
            (arms[0].role.as_str(), arms[0].sampler.temperature()),
            ("temperature", 1.0)
        );
        // min-p: halfway from step 0.9 to 1 in ln → T = 1.2 × √0.9.
        assert!(arms[1].bracketed);
        assert!(
            (arms[1].sampler.temperature() - 1.2 * 0.9f64.sqrt()).abs() < 1e-9,
            "{:?}",
            arms[1]
        );
        // adaptive-p: extrapolated below its first step (a higher cut), flagged.
        assert!(!arms[2].bracketed && !arms[2].primary);
        let Sampler::AdaptiveP { min_p, t, .. } = arms[2].sampler else {
            panic!("{:?}", arms[2].sampler)
        };
        assert!(min_p > 0.01 / 0.9f64.powi(8) && t == 1.0, "{min_p}");
    }

    /// An arm's rows by prompt as the report reads them: each prompt's samples measured
    /// into its ledger row and read back.
    fn per_prompt(samples: &[Sample]) -> HashMap<usize, PromptRow> {
        by_prompt(samples, d::MAIN_SAMPLES)
            .into_iter()
            .filter_map(|s| Some((s[0].prompt, row_from(&row_of("main", &s)?)?)))
            .collect()
    }

    /// The calibration's rows add up over prompts: the mean is over every token drawn,
    /// not a mean of the prompts' means.
    #[test]
    fn calibration_rows_average_over_tokens() {
        let rows = HashMap::from([(0, vec![8.0, 4.0]), (1, vec![1.0, 1.0])]);
        assert!((online_entropy(&rows) - 9.0 / 5.0).abs() < 1e-12);
        assert_eq!(online_entropy(&HashMap::new()), 0.0);
        // A row of the wrong length is no prompt row.
        assert!(row_from(&[1.0, 2.0]).is_none());
    }

    /// The thesis' differences and the entropy gap are paired by prompt (prompts one
    /// arm lacks are left out), and the report flags a gap past the protocol's 0.1.
    #[test]
    fn the_thesis_and_the_entropy_gap_are_paired_by_prompt() {
        let row = |p: usize, shift: f64| -> PromptRow {
            // A per-prompt wobble both arms share: the paired difference cancels it.
            let w = 0.01 * (p % 5) as f64;
            (
                -1.0 - w,
                0.9,
                [
                    0.4 + w - shift,
                    0.05 - shift / 10.0,
                    0.1 + w,
                    0.01,
                    0.02,
                    3.0 + w + shift,
                ],
            )
        };
        let a: HashMap<usize, PromptRow> = (0..50).map(|p| (p, row(p, 0.2))).collect();
        let b: HashMap<usize, PromptRow> = (0..60).map(|p| (p, row(p, 0.0))).collect();
        let t = thesis_paired(&a, &b, ("hlg", "temperature")).unwrap();
        assert_eq!(t.prompts, 50);
        let expected = [-0.2, -0.02, 0.0, 0.0, 0.0, 0.2];
        for (k, (m, lo, hi)) in t.diffs.iter().enumerate() {
            assert!((m - expected[k]).abs() < 1e-12, "measure {k}: {m}");
            assert!(
                lo <= m && m <= hi && hi - lo < 1e-9,
                "measure {k}: [{lo}, {hi}]"
            );
        }
        let c = compare(&a, &b, ("hlg", "temperature"), true).unwrap();
        assert!((c.entropy_gap - 0.2).abs() < 1e-12, "{}", c.entropy_gap);
        let md = report_markdown(&[], &[], &[c]);
        assert!(md.contains("| +0.2000 ⚠ |"), "{md}");
        let near = compare(&b, &b, ("hlg", "temperature"), true).unwrap();
        let md = report_markdown(&[], &[], &[near]);
        assert!(md.contains("| Equivalent | +0.0000 |\n"), "{md}");
        assert_eq!(dec4(-1e-9), "0.0000");
        assert_eq!(signed4(-1e-9), "+0.0000");
        // Under 10 paired prompts: no thesis row.
        let few: HashMap<usize, PromptRow> = (0..9).map(|p| (p, row(p, 0.0))).collect();
        assert!(thesis_paired(&few, &b, ("hlg", "min-p")).is_none());
    }

    /// The best-of-N table has a row per N and a column per family; an all-ineligible
    /// N is a dash, and the figure is an SVG with every family in its legend.
    #[test]
    fn best_of_n_table_and_figure() {
        let curves = vec![
            ("min-p".to_string(), vec![-1.2, -1.1, -1.05]),
            ("hlg".to_string(), vec![f64::NAN, -1.0, -0.95]),
        ];
        let md = best_of_n_markdown(&curves);
        assert!(md.contains("| N | min-p | hlg |"), "{md}");
        assert!(md.contains("| 1 | -1.2000 | – |"), "{md}");
        assert!(md.contains("| 3 | -1.0500 | -0.9500 |"), "{md}");
        let svg = best_of_n_figure(&curves);
        assert!(svg.starts_with("<svg") && svg.contains("min-p") && svg.contains("hlg"));
        assert!(!svg.contains("could not be drawn"), "{svg}");
    }

    #[test]
    fn the_report_calls_what_the_samples_show() {
        let base = per_prompt(&arm(200, |p| -1.0 - 0.01 * (p % 7) as f64, 40, 1));
        // Far better per byte (+0.2, beyond the margin), same vocabulary.
        let better = per_prompt(&arm(200, |p| -0.8 - 0.01 * (p % 7) as f64, 40, 2));
        // The same per byte but for a small noise, same vocabulary: equivalent.
        let same = per_prompt(&arm(
            200,
            |p| -1.0 - 0.01 * (p % 7) as f64 + 0.001 * (p % 3) as f64,
            40,
            3,
        ));
        let c = compare(&better, &base, ("hlg", "temperature"), true).unwrap();
        assert_eq!(c.prompts, 200);
        assert!((c.measures[0].0 - 0.2).abs() < 1e-9, "{:?}", c.measures[0]);
        assert_eq!(c.measures[0].3, Call::Better);
        let c = compare(&same, &base, ("hlg", "temperature"), true).unwrap();
        assert_eq!(c.measures[0].3, Call::Equivalent, "{:?}", c.measures[0]);
        // A much smaller vocabulary repeats bigrams: distinct-2 worse, so the summary is.
        let narrow = per_prompt(&arm(200, |p| -0.8 - 0.01 * (p % 7) as f64, 3, 4));
        let c = compare(&narrow, &base, ("hlg", "temperature"), true).unwrap();
        assert_eq!((c.measures[1].3, c.summary), (Call::Worse, Call::Worse));
        // Under 10 paired prompts: no comparison.
        let few = per_prompt(&arm(8, |_| -1.0, 40, 5));
        assert!(compare(&few, &base, ("hlg", "temperature"), true).is_none());
        // The thesis columns read the traces.
        let row = base[&0];
        assert!((row.2[0] - 0.4).abs() < 1e-12);
        assert!((row.2[5] - 2.0).abs() < 1e-12);
        assert!((0.0..=1.0).contains(&row.2[4]), "self-BLEU {}", row.2[4]);
    }
}
