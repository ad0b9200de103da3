//! The evaluation's tables (Markdown) and figures (SVG, through [`super::plot`]), from
//! the results the other modules compute: what `mistralrs-hlg-eval …` writes.

use super::diversity::Doc;
use super::frontier::{self, Family};
use super::guardrail::{self, Accuracy};
use super::kl::{Matched, Report};
use super::metrics::Stats;
use super::perf::Summary;
use super::plot;
use super::sampler::Sampler;
use mistralrs_hlg::ToeShape;

/// The diversity run as Markdown: one table per entropy level.
pub fn diversity_table(doc: &Doc) -> String {
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

/// The matched sweep as a Markdown table.
pub fn matched_table(m: &Matched) -> String {
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
pub fn matched_plot(m: &Matched) -> String {
    let base = |name: &str| {
        m.baselines
            .iter()
            .find(|p| p.method.starts_with(name))
            .map(|p| p.mean)
    };
    let temp = base("temperature").unwrap_or_default();
    let mut panels = vec![];
    for (knob, points) in &m.sweeps {
        let xs = distinct(points.iter().map(|p| p.value.as_str()));
        for (what, f) in [
            ("tail mass", (|s: &Stats| s.tail_mass) as fn(&_) -> f64),
            ("top-token mass", |s| s.top_mass),
        ] {
            panels.push(plot::Panel {
                title: format!("{knob}: {what}"),
                xs: xs.clone(),
                series: by_shape(points, |p| &p.method, |p| f(&p.mean)),
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
pub fn kl_table(r: &Report) -> String {
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

/// One knob's sweep at a fixed temperature: KL, entropy, top-token mass and tail mass
/// against the knob's value, a line per toe shape.
pub fn kl_knob_plot(report: &Report, knob: &str, points: &[super::kl::Point]) -> String {
    let xs = distinct(points.iter().map(|p| p.value.as_str()));
    let measure = |title: &str, f: fn(&Stats) -> f64, with_ref: bool| plot::Panel {
        title: title.to_string(),
        xs: xs.clone(),
        series: by_shape(points, |p| p.toe_shape, |p| f(&p.mean)),
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
        "{knob} (others at their defaults), T = {}, {} positions",
        report.temperature, report.positions
    );
    plot::grid(&title, &panels, 2)
}

/// The guardrail run as Markdown: accuracy, interval and the paired difference to plain
/// temperature at the same T.
pub fn guardrail_table(results: &[Accuracy], max_tokens: usize, samples: usize) -> String {
    let n = results.first().map_or(0, |a| a.items);
    let ci = if samples == 1 {
        "Wilson intervals".to_string()
    } else {
        format!("{samples} samples per item (greedy: one), intervals over items")
    };
    let mut md = format!("{n} items, {max_tokens} tokens per answer; 95 % {ci}. The last column: the method's accuracy minus plain temperature's at the same T, item by item (mean and 95 % interval over items).\n\n| method | correct | accuracy | 95 % CI | − temperature, paired |\n| --- | --- | --- | --- | --- |\n");
    for a in results {
        let t = a.sampler.as_ref().map(|s| s.temperature());
        let plain = results
            .iter()
            .find(|b| matches!(b.sampler, Some(Sampler::Temperature { t: bt }) if Some(bt) == t));
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
    md
}

/// The capability guardrail of a level's frontier candidates as Markdown: each method's
/// accuracy, and, item by item, minus plain temperature at the same temperature and minus
/// `min_p` (the planned min-p setting, at its own matched temperature).
pub fn capability_table(
    level: f64,
    results: &[Accuracy],
    min_p: Option<&Accuracy>,
    max_tokens: usize,
    samples: usize,
) -> String {
    let n = results.first().map_or(0, |a| a.items);
    let mut md = format!("Level T = {level}: every method at its matched temperature (from the screening), plain temperature also at each HLG setting's. {n} items × {samples} samples (greedy: one), {max_tokens} tokens per answer; 95 % intervals over items. Differences are paired item by item; the level's temperature is plain temperature at the level's own T.\n\n| method | T | correct | accuracy | 95 % CI | − the level's temperature | − temperature at the same T | − {} |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n", min_p.and_then(|m| m.sampler.as_ref()).map_or("min-p".to_string(), |s| format!("{} at T = {:.3}", s.name(), s.temperature())));
    let diff = |a: &Accuracy, b: Option<&Accuracy>| match b {
        Some(b) if !std::ptr::eq(a, b) => {
            let (d, (lo, hi)) = guardrail::paired_difference(a, b);
            format!("{d:+.3} ({lo:+.3} to {hi:+.3})")
        }
        _ => String::new(),
    };
    // The plan lists plain temperature at the level's own T first.
    let level_t = results
        .iter()
        .find(|b| matches!(b.sampler, Some(Sampler::Temperature { .. })));
    for a in results {
        let t = a.sampler.as_ref().map(|s| s.temperature());
        let plain = results
            .iter()
            .find(|b| matches!(b.sampler, Some(Sampler::Temperature { t: bt }) if Some(bt) == t));
        md += &format!(
            "| {} | {} | {}/{} | {:.3} | {:.3}–{:.3} | {} | {} | {} |\n",
            a.sampler.as_ref().map_or("greedy".into(), |s| format!(
                "{} {}",
                Family::of(s).name(),
                frontier::knob(s)
            )),
            t.map_or(String::new(), |t| format!("{t:.3}")),
            a.correct,
            a.items * a.samples,
            a.rate(),
            a.ci95.0,
            a.ci95.1,
            match a.sampler {
                Some(_) => diff(a, level_t),
                None => String::new(),
            },
            diff(a, plain),
            if a.sampler.is_some() {
                diff(a, min_p)
            } else {
                String::new()
            },
        );
    }
    md
}

/// The perf run as Markdown: medians over rounds per arm.
pub fn perf_table(
    summary: &[Summary],
    rounds: usize,
    prompts: usize,
    max_tokens: usize,
    temperature: f64,
) -> String {
    let mut md = format!("{rounds} rounds × {prompts} prompts × {max_tokens} tokens at T = {temperature}, arms rotated per round; medians over rounds.\n\n| arm | decode tok/s | ratio to off | prompt ms | wall ms/token |\n| --- | --- | --- | --- | --- |\n");
    for s in summary {
        md += &format!(
            "| {:?} | {:.2} | {:.3} | {:.1} | {:.1} |\n",
            s.arm, s.decode_tok_s, s.decode_ratio_to_off, s.prompt_ms, s.wall_ms_per_token
        );
    }
    md
}

/// The curve `g₁(z)` of each toe shape beside the identity (plain temperature), at `zs`
/// (`server::CurveTable::tabulate`): `mistralrs-hlg-eval curve`.
pub fn curve_plot(zs: &[f64], curves: &[(ToeShape, Vec<f64>)]) -> String {
    let mut series = vec![plot::Series {
        name: "identity (temperature)",
        color: "#888",
        ys: zs.iter().map(|&z| Some(z)).collect(),
    }];
    series.extend(curves.iter().map(|(s, ys)| plot::Series {
        name: s.name(),
        color: plot::shape_color(*s),
        ys: ys.iter().map(|&y| Some(y)).collect(),
    }));
    let panel = plot::Panel {
        title: "g₁(z) against z = x − c (nats)".to_string(),
        xs: zs.iter().map(|z| format!("{z}")).collect(),
        series,
        reference: None,
        log_y: false,
    };
    plot::grid("the HLG curve by toe shape", &[panel], 1)
}

/// A screened setting's measures as the last cells of a table row.
fn screened_cells(p: &frontier::Screened) -> String {
    format!(
        "{:.3} | {:.2e} | {:.3} | {:.3} | {:.4} |",
        p.sampler.temperature(),
        p.stats.tail_mass,
        p.stats.base_logprob,
        p.stats.top_mass,
        p.stats.kl
    )
}

const SCREENED_HEAD: &str = "T | tail mass | exp. base log-prob | top mass | KL from temperature |";

/// Auto mode's offline sweep as Markdown: per level, every setting at the matched
/// entropy (unmatched ones marked), and the auto setting with the highest expected base
/// log-probability averaged over the levels where it matched.
pub fn auto_sweep_table(levels: &[frontier::Screening]) -> String {
    let mut s = String::new();
    for l in levels {
        s += &format!(
            "### T = {}: {:.3} nats, {} positions\n\n| family | setting | matched | {SCREENED_HEAD}\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
            l.level, l.target_entropy, l.positions
        );
        for p in &l.points {
            let matched = if p.matched { "yes" } else { "no" };
            s += &format!(
                "| {} | {} | {matched} | {}\n",
                p.family.name(),
                p.knob,
                screened_cells(p)
            );
        }
        s += "\n";
    }
    let auto: Vec<&str> = levels
        .first()
        .map(|l| {
            l.points
                .iter()
                .filter(|p| p.knob.contains('σ'))
                .map(|p| p.knob.as_str())
                .collect()
        })
        .unwrap_or_default();
    let mean = |knob: &str| -> Option<f64> {
        let vals: Vec<f64> = levels
            .iter()
            .filter_map(|l| l.points.iter().find(|p| p.knob == knob && p.matched))
            .map(|p| p.stats.base_logprob)
            .collect();
        (vals.len() == levels.len()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
    };
    if let Some((knob, v)) = auto
        .iter()
        .filter_map(|k| mean(k).map(|v| (k, v)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
    {
        s += &format!(
            "Best auto setting on the mean expected base log-prob over the levels: `{knob}` ({v:.4} nats).\n"
        );
    }
    s
}

/// The offline screening as Markdown: per level, each family's best setting on each
/// quality measure and the frontier, then the HLG candidates' measures at every level.
pub fn frontier_table(levels: &[frontier::Screening], candidates: &[String]) -> String {
    let mut s = String::new();
    for l in levels {
        s += &format!(
            "### T = {}: {:.3} nats, {} positions\n\n| family | best on | setting | {SCREENED_HEAD}\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
            l.level, l.target_entropy, l.positions
        );
        for f in Family::ALL {
            let [tail, logprob] = frontier::Measure::ALL.map(|m| l.best(f, m));
            let rows: Vec<(&str, &frontier::Screened)> = match (tail, logprob) {
                (Some(a), Some(b)) if a.knob == b.knob => vec![("both", a)],
                _ => frontier::Measure::ALL
                    .into_iter()
                    .zip([tail, logprob])
                    .filter_map(|(m, p)| p.map(|p| (m.name(), p)))
                    .collect(),
            };
            for (what, p) in rows {
                s += &format!(
                    "| {} | {what} | {} | {}\n",
                    f.name(),
                    p.knob,
                    screened_cells(p)
                );
            }
        }
        s += &frontier_rows(l);
    }
    if !candidates.is_empty() {
        s += &format!("### HLG candidates\n\n| setting | level | {SCREENED_HEAD}\n| --- | --- | --- | --- | --- | --- | --- |\n");
        for c in candidates {
            for l in levels {
                if let Some(p) = l
                    .points
                    .iter()
                    .find(|p| p.family == Family::Hlg && &p.knob == c)
                {
                    s += &format!("| {c} | {} | {}\n", l.level, screened_cells(p));
                }
            }
        }
    }
    s
}

/// One level's frontier as a table, and the settings that could not be matched.
fn frontier_rows(l: &frontier::Screening) -> String {
    let front = l.frontier();
    let mut s = format!(
        "\nThe frontier (no setting better on one measure and as good on the other; tail mass below 1e-6 counts as none), {} settings, {} of them HLG's:\n\n| family | setting | {SCREENED_HEAD}\n| --- | --- | --- | --- | --- | --- | --- |\n",
        front.len(),
        front.iter().filter(|p| p.family == Family::Hlg).count()
    );
    for p in front {
        s += &format!(
            "| {} | {} | {}\n",
            p.family.name(),
            p.knob,
            screened_cells(p)
        );
    }
    let unmatched: Vec<&str> = l
        .points
        .iter()
        .filter(|p| !p.matched)
        .map(|p| p.knob.as_str())
        .collect();
    s += &format!(
        "\nCannot reach the target entropy (left out): {}.\n\n",
        if unmatched.is_empty() {
            "none".to_string()
        } else {
            unmatched.join(", ")
        }
    );
    s
}

/// Each family's offline frontier: its best value of each quality measure per level, one
/// line per family, and the shipped HLG knobs beside the best HLG setting.
pub fn frontier_plot(levels: &[frontier::Screening]) -> String {
    let xs: Vec<String> = levels.iter().map(|l| format!("T={}", l.level)).collect();
    let shipped = frontier::shipped_knob();
    let panels = frontier::Measure::ALL
        .into_iter()
        .map(|m| {
            let mut series: Vec<plot::Series<'static>> = Family::ALL
                .into_iter()
                .map(|f| plot::Series {
                    name: f.name(),
                    color: f.color(),
                    ys: levels
                        .iter()
                        .map(|l| l.best(f, m).map(|p| m.of(&p.stats)))
                        .collect(),
                })
                .collect();
            series.push(plot::Series {
                name: "hlg shipped",
                color: "#e377c2",
                ys: levels
                    .iter()
                    .map(|l| {
                        l.points
                            .iter()
                            .find(|p| p.family == Family::Hlg && p.knob == shipped)
                            .map(|p| m.of(&p.stats))
                    })
                    .collect(),
            });
            plot::Panel {
                title: format!("{} (best setting per family)", m.name()),
                xs: xs.clone(),
                series,
                reference: None,
                log_y: m == frontier::Measure::TailMass,
            }
        })
        .collect::<Vec<_>>();
    plot::grid(
        "offline screening at matched entropy (levels: plain temperature's T)",
        &panels,
        2,
    )
}

/// `mean ± se` with `d` decimals.
fn est(e: &super::confirm::Estimate, d: usize) -> String {
    format!("{:.d$} ± {:.d$}", e.mean, e.se)
}

/// The online confirmation as Markdown: per level, every method's diversity and quality
/// with standard errors over prompts, and its paired difference from plain temperature.
pub fn confirm_table(doc: &super::confirm::Doc) -> String {
    let mut s = format!(
        "{} prompts × {} samples × {} tokens per method (prompts with every sample done are measured). Every method at the temperature its offline screening matched to plain temperature's mean entropy at T = level. ± is one standard error over prompts; Δ is the method minus plain temperature, paired prompt by prompt. Judged log-prob: the mean log-probability per token of the samples under the other model (teacher-forced; NaN: not judged); per byte: their summed log-probability over their text's UTF-8 bytes, which does not depend on how the judge splits the text into tokens. Non-word rate: the share of the samples' words that the system word list (/usr/share/dict/words, Debian's wamerican) does not hold, a garbage measure no model decides (NaN without the list). Frontier: T = on the online frontier of distinct-2 against the tail-garbage rate, L = against the mean base log-prob; after the slash, the same with distinct-1 (at high entropy distinct-2 is near 1 for every method).\n",
        doc.prompts, doc.samples, doc.max_tokens
    );
    for l in &doc.levels {
        s += &format!(
            "\n### Level T = {} ({:.3} nats offline)\n\n| family | setting | T | prompts | entropy online | distinct-1 | distinct-2 | distinct-3 | self-BLEU | tail-garbage rate | mean base log-prob | judged log-prob | judged log-prob per byte | non-word rate | Δ distinct-1 | Δ distinct-2 | Δ tail-garbage | Δ base log-prob | offline tail mass / base log-prob | frontier (distinct-2 / distinct-1) |\n|{}\n",
            l.level,
            l.target_entropy,
            " --- |".repeat(20)
        );
        for c in &l.methods {
            let m = &c.method;
            if c.prompts == 0 {
                s += &format!(
                    "| {} | {} | {:.3} | 0 | not sampled yet |{}\n",
                    m.family.name(),
                    m.knob,
                    m.sampler.temperature(),
                    " |".repeat(15)
                );
                continue;
            }
            let (d1, dd, dt, dl) = match &c.vs_temperature {
                Some(p) => (
                    est(&p.distinct1, 3),
                    est(&p.distinct2, 3),
                    est(&p.tail_rate, 4),
                    est(&p.base_logprob, 3),
                ),
                None => Default::default(),
            };
            let front = frontier_marks(c);
            s += &format!(
                "| {} | {} | {:.3} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {d1} | {dd} | {dt} | {dl} | {:.2e} / {:.3} | {front} |\n",
                m.family.name(),
                m.knob,
                m.sampler.temperature(),
                c.prompts,
                est(&c.entropy, 3),
                est(&c.distinct[0], 3),
                est(&c.distinct[1], 3),
                est(&c.distinct[2], 3),
                est(&c.self_bleu, 3),
                est(&c.tail_rate, 4),
                est(&c.base_logprob, 3),
                est(&c.judged_logprob, 3),
                est(&c.judged_logprob_per_byte, 3),
                est(&c.non_word_rate, 4),
                m.offline.tail_mass,
                m.offline.base_logprob,
            );
        }
        s += &judged_text_table(&l.methods);
    }
    s
}

/// How the judge read one level's samples: its tokens per sample against the samples'
/// bytes and their share of characters outside ASCII. The judged log-prob per token can
/// only be compared between methods whose samples split alike.
fn judged_text_table(methods: &[super::confirm::Confirmed]) -> String {
    let mut s = String::from("\nHow the judge read the samples (judge tokens per judged sample; UTF-8 bytes per sample; share of the characters outside ASCII, which a byte-level tokenizer splits into several tokens each):\n\n| family | setting | T | entropy online | judge tokens per sample | bytes per sample | non-ASCII characters |\n| --- | --- | --- | --- | --- | --- | --- |\n");
    for c in methods.iter().filter(|c| c.prompts > 0) {
        let [tokens, bytes, wide] = &c.judged_text;
        s += &format!(
            "| {} | {} | {:.3} | {} | {} | {} | {:.2} % ± {:.2} % |\n",
            c.method.family.name(),
            c.method.knob,
            c.method.sampler.temperature(),
            est(&c.entropy, 3),
            est(tokens, 1),
            est(bytes, 1),
            100.0 * wide.mean,
            100.0 * wide.se,
        );
    }
    s
}

/// The cross-judged verdict of each level (`verdict::compare`) as Markdown: per level,
/// the target entropy, each method's online entropies by temperature scale, and every
/// comparison of an HLG setting with another method at that entropy.
pub fn verdict_table(
    levels: &[(
        f64,
        f64,
        Vec<super::verdict::Matched>,
        Vec<super::verdict::Comparison>,
    )],
) -> String {
    use super::verdict::{
        ALPHA, DISTINCT2_GUARD, LEVELS, MEASURES_WITH_PER_BYTE, MIN_PROMPTS, NON_WORD_GUARD,
    };
    let mut s = format!(
        "HLG minus each other method at plain temperature's online entropy (each method interpolated between its runs at several temperatures), paired prompt by prompt. Intervals: percentile bootstrap over prompts at {ALPHA} family-wise (Bonferroni over the model's comparisons: HLG settings × other methods × {LEVELS} levels × 3 measures, whether or not every level has run); p: the judged log-prob's, adjusted the same way. Win: judged log-prob interval above 0, distinct-2 not lower by {DISTINCT2_GUARD}, non-word rate not higher by {NON_WORD_GUARD}; lose: the log-prob interval below 0 or a guard failed; else tie; TooFew: under {MIN_PROMPTS} paired prompts, no verdict. Per byte (a sensitivity measure added after the runs, when the per-token mean was found to reward text that the judge splits into many byte tokens: docs/NOTES.md): the judged log-prob summed over each sample's UTF-8 bytes, its interval and p corrected over {MEASURES_WITH_PER_BYTE} measures, and the same rule with it in place of the per-token log-prob.\n"
    );
    for (level, target, matched, comps) in levels {
        s += &format!("\n### Level T = {level} (online entropy {target:.3} nats)\n\n| method | entropy by T scale | bracketed |\n| --- | --- | --- |\n");
        for m in matched {
            let e: Vec<String> = m
                .entropies
                .iter()
                .map(|(f, e)| format!("×{f}: {e:.3}"))
                .collect();
            s += &format!(
                "| {} | {} | {} |\n",
                m.name,
                e.join(", "),
                if m.bracketed { "yes" } else { "no" }
            );
        }
        s += "\n| HLG | against | prompts | Δ judged log-prob | Δ distinct-2 | Δ non-word rate | p (adjusted) | verdict | Δ judged log-prob per byte | p per byte (adjusted) | verdict per byte |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
        for c in comps {
            let ci = |(m, lo, hi): (f64, f64, f64), dp: usize| {
                format!("{m:.dp$} [{lo:.dp$}, {hi:.dp$}]")
            };
            s += &format!(
                "| {} | {} | {} | {} | {} | {} | {:.4} | {:?} | {} | {:.4} | {:?} |\n",
                c.hlg,
                c.other,
                c.prompts,
                ci(c.diffs[0], 3),
                ci(c.diffs[1], 3),
                ci(c.diffs[2], 4),
                c.p_adjusted,
                c.verdict,
                ci(c.per_byte, 3),
                c.p_adjusted_per_byte,
                c.verdict_per_byte
            );
        }
    }
    s
}

/// Where a confirmed method is on the online frontiers: `T` (against the tail-garbage
/// rate) and `L` (against the base log-prob), for distinct-2, then for distinct-1.
fn frontier_marks(c: &super::confirm::Confirmed) -> String {
    let marks = |on: [bool; 2]| -> String {
        ["T", "L"]
            .iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|(n, _)| *n)
            .collect()
    };
    match (marks(c.on_frontier), marks(c.on_frontier_distinct1)) {
        (a, b) if a.is_empty() && b.is_empty() => String::new(),
        (a, b) => format!("{a} / {b}").trim().to_string(),
    }
}

/// One line per toe shape, in its colour, through the points of that shape.
fn by_shape<P>(
    points: &[P],
    shape: impl Fn(&P) -> &str,
    y: impl Fn(&P) -> f64,
) -> Vec<plot::Series<'static>> {
    ToeShape::ALL
        .into_iter()
        .map(|s| plot::Series {
            name: s.name(),
            color: plot::shape_color(s),
            ys: points
                .iter()
                .filter(|p| shape(p) == s.name())
                .map(|p| Some(y(p)))
                .collect(),
        })
        .collect()
}

/// The distinct values in order of first appearance, as x labels.
fn distinct<'a>(values: impl Iterator<Item = &'a str>) -> Vec<String> {
    plot::first_appearance(values)
        .into_iter()
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kl::{MatchedPoint, Point};
    use crate::perf::Arm;
    use crate::plot::read::{polylines, texts};
    use mistralrs_hlg::HlgConfig;

    #[test]
    fn the_capability_table_pairs_against_temperature_and_min_p() {
        let acc = |sampler: Option<Sampler>, per_item: Vec<f64>| Accuracy {
            name: sampler.as_ref().map_or("greedy".into(), |s| s.name()),
            correct: per_item.iter().filter(|&&x| x == 1.0).count(),
            items: per_item.len(),
            samples: 1,
            ci95: (0.0, 1.0),
            sampler,
            per_item,
            replies: vec![],
        };
        let hlg = Sampler::Hlg {
            t: 0.7,
            hlg: HlgConfig::default().resolved(true),
        };
        let results = vec![
            acc(None, vec![1.0, 1.0]),
            acc(Some(Sampler::Temperature { t: 0.6 }), vec![0.0, 1.0]),
            acc(Some(hlg), vec![1.0, 0.0]),
            acc(
                Some(Sampler::MinP {
                    t: 1.2,
                    min_p: 0.05,
                }),
                vec![1.0, 1.0],
            ),
            acc(Some(Sampler::Temperature { t: 0.7 }), vec![0.0, 0.0]),
        ];
        let md = capability_table(0.8, &results, Some(&results[3]), 8, 1);
        let row = md.lines().find(|l| l.starts_with("| hlg ")).unwrap();
        // HLG − the level's temperature (0.6): differences 1, −1; − temperature at 0.7:
        // 1, 0; − min-p: 0, −1.
        assert!(
            row.contains("| 1/2 | 0.500 | 0.000–1.000 | +0.000 (")
                && row.contains(") | +0.500 (")
                && row.contains(") | -0.500 ("),
            "{row}"
        );
        assert!(
            row.contains("top-4 w3 s2 t1 quadratic | 0.700 | 1/2"),
            "{row}"
        );
        let greedy = md.lines().find(|l| l.starts_with("| greedy ")).unwrap();
        assert!(greedy.ends_with("|  |  |  |"), "{greedy}");
        // The min-p column is named by its setting and temperature, rounded.
        let mut other = results.clone();
        other[3].sampler = Some(Sampler::MinP {
            t: 2.092664527893067,
            min_p: 0.02,
        });
        let md = capability_table(1.3, &other, Some(&other[3]), 8, 4);
        let head = md.lines().find(|l| l.starts_with("| method ")).unwrap();
        assert!(head.ends_with("| − min_p 0.02 at T = 2.093 |"), "{head}");
    }

    fn stats(k: f64) -> Stats {
        Stats {
            kl: 0.01 * k,
            entropy: 1.0 + 0.1 * k,
            top_mass: 0.5 - 0.01 * k,
            tail_mass: 1e-3 * k,
            base_logprob: -2.0 - 0.1 * k,
        }
    }

    fn report() -> Report {
        let points = ToeShape::ALL
            .iter()
            .enumerate()
            .flat_map(|(i, s)| {
                ["1", "4", "off"]
                    .into_iter()
                    .enumerate()
                    .map(move |(j, v)| Point {
                        value: v.to_string(),
                        toe_shape: s.name(),
                        curve: HlgConfig::default(),
                        mean: stats((i * 3 + j) as f64),
                    })
            })
            .collect();
        Report {
            temperature: 1.0,
            positions: 120,
            temperature_only: stats(0.0),
            sweeps: vec![("toe".to_string(), points)],
        }
    }

    #[test]
    fn kl_table_and_plot() {
        let r = report();
        insta::assert_snapshot!("kl_table", kl_table(&r));
        let svg = kl_knob_plot(&r, "toe", &r.sweeps[0].1);
        // Every toe shape is drawn in its own colour, every value labelled once per panel.
        for s in ToeShape::ALL {
            assert!(!polylines(&svg, plot::shape_color(s)).is_empty(), "{s}");
        }
        assert_eq!(texts(&svg).iter().filter(|t| *t == "off").count(), 4);
        insta::assert_snapshot!("kl_knob_plot", svg);
    }

    #[test]
    fn matched_table_lists_baselines_then_sweeps() {
        let point = |value: &str, method: &str, k: f64| MatchedPoint {
            value: value.into(),
            method: method.into(),
            t: 0.8 + 0.01 * k,
            mean: stats(k),
        };
        let m = Matched {
            level: 0.8,
            target_entropy: 1.5,
            baselines: vec![point("", "temperature", 0.0), point("", "top_p 0.9", 1.0)],
            sweeps: vec![(
                "width".into(),
                ToeShape::ALL
                    .iter()
                    .map(|s| point("2", s.name(), 2.0))
                    .collect(),
            )],
        };
        let table = matched_table(&m);
        assert_eq!(
            table.lines().filter(|l| l.starts_with("| ")).count(),
            2 + 2 + 3
        );
        insta::assert_snapshot!("matched_table", table);
    }

    #[test]
    fn perf_table_rows() {
        let summary: Vec<Summary> = Arm::ALL
            .iter()
            .enumerate()
            .map(|(i, &arm)| Summary {
                arm,
                decode_tok_s: 10.0 - i as f64,
                prompt_ms: 50.0,
                wall_ms_per_token: 100.0 + i as f64,
                decode_ratio_to_off: 1.0 - 0.1 * i as f64,
            })
            .collect();
        insta::assert_snapshot!("perf_table", perf_table(&summary, 6, 3, 48, 1.0));
    }

    #[test]
    fn diversity_table_and_frontier() {
        use crate::diversity::{DiversityLevel, MethodResult};
        let method = |name: &str, k: f64| MethodResult {
            sampler: Sampler::Temperature { t: 0.8 + 0.1 * k },
            name: name.into(),
            offline_entropy: 1.0 + k,
            online_entropy: 1.1 + k,
            distinct: [0.5 + 0.1 * k, 0.6 + 0.1 * k, 0.7],
            self_bleu: 0.3 - 0.05 * k,
            pooled_entropy: 5.0,
            tail_garbage_rate: 0.01 * k,
            mean_base_logprob: -1.0 - k,
            stderr: [0.01, 0.02, 0.001],
            tokens: 100,
            samples: vec![],
        };
        let doc = Doc {
            prompts: 4,
            samples: 2,
            max_tokens: 16,
            levels: [0.8, 1.0]
                .into_iter()
                .enumerate()
                .map(|(i, level)| DiversityLevel {
                    level,
                    methods: vec![
                        method("temperature", i as f64),
                        method("hlg exp", 0.5 + i as f64),
                    ],
                })
                .collect(),
        };
        let table = diversity_table(&doc);
        assert_eq!(table.matches("### Level").count(), 2);
        insta::assert_snapshot!("diversity_table", table);
        let svg = plot::frontier(&doc);
        // Each method's two levels joined by a line in each of the two panels.
        let joined: usize = doc.levels[0]
            .methods
            .iter()
            .enumerate()
            .map(|(i, _)| polylines(&svg, plot::FRONTIER_COLORS[i]).len())
            .sum();
        assert_eq!(joined, 2 * doc.levels[0].methods.len());
        insta::assert_snapshot!("frontier", svg);
    }

    #[test]
    fn curve_plot_draws_identity_and_every_shape() {
        let zs: Vec<f64> = (0..49).map(|i| -12.0 + 0.5 * i as f64).collect();
        let curve = mistralrs_hlg::HlgCurve::default();
        let curves = ToeShape::ALL.map(|s| {
            let c = curve.with_toe_shape(s);
            (s, zs.iter().map(|&z| c.g1(z)).collect())
        });
        let svg = curve_plot(&zs, &curves);
        // The identity and each shape: one line of 49 points each.
        for c in ["#888"]
            .into_iter()
            .chain(ToeShape::ALL.map(plot::shape_color))
        {
            let lines = polylines(&svg, c);
            assert_eq!(lines.len(), 1, "{c}");
            assert_eq!(lines[0].len(), zs.len(), "{c}");
        }
        insta::assert_snapshot!("curve_plot", svg);
    }

    fn screened_level(level: f64) -> frontier::Screening {
        let mut points = vec![];
        for (k, s) in frontier::baselines().into_iter().enumerate() {
            points.push(frontier::Screened {
                family: Family::of(&s),
                knob: frontier::knob(&s),
                sampler: s.at(level + 0.01 * k as f64),
                stats: stats(k as f64 + level),
                entropy_reached: 2.0 * level,
                matched: true,
            });
        }
        for (k, hlg) in frontier::hlg_search(3, 5).into_iter().enumerate() {
            let s = Sampler::Hlg { t: level, hlg };
            points.push(frontier::Screened {
                family: Family::Hlg,
                knob: frontier::knob(&s),
                sampler: s,
                stats: stats(0.5 * k as f64),
                entropy_reached: 2.0 * level,
                matched: k != 1,
            });
        }
        frontier::Screening {
            level,
            target_entropy: 2.0 * level,
            positions: 9,
            capture: String::new(),
            points,
        }
    }

    #[test]
    fn frontier_table_and_plot() {
        let levels = [screened_level(0.8), screened_level(1.3)];
        let cands = frontier::candidates(&levels, 2);
        insta::assert_snapshot!("frontier_table", frontier_table(&levels, &cands));
        let svg = frontier_plot(&levels);
        let t = texts(&svg);
        assert!(t.iter().any(|x| x == "hlg shipped") && t.iter().any(|x| x == "top-nσ"));
        // Each family's best and the shipped knobs, joined across the two levels, in
        // both panels; a tail mass of 0 has no place on the log axis of the tail panel
        // (HLG's best and the shipped knobs here), so that line is not drawn.
        let tail = frontier::Measure::TailMass;
        let shipped = frontier::shipped_knob();
        let on_log_axis = |f: Family| {
            levels[0]
                .best(f, tail)
                .is_some_and(|p| p.stats.tail_mass > 0.0)
        };
        let shipped_on = levels[0]
            .points
            .iter()
            .any(|p| p.knob == shipped && p.stats.tail_mass > 0.0);
        // The families the fixture screens (adaptive-p is not among them: no line).
        let present = |f: &Family| levels[0].points.iter().any(|p| p.family == *f);
        let lines = Family::ALL
            .into_iter()
            .filter(present)
            .map(|f| (f.color(), on_log_axis(f)));
        assert!(polylines(&svg, Family::AdaptiveP.color()).is_empty());
        for (c, on_log) in lines.chain([("#e377c2", shipped_on)]) {
            let drawn = polylines(&svg, c);
            assert_eq!(drawn.len(), 1 + usize::from(on_log), "{c}");
            assert!(drawn.iter().all(|l| l.len() == 2), "{c}");
        }
        assert!(!on_log_axis(Family::Hlg) && on_log_axis(Family::TopP));
    }
}
