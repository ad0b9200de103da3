//! KL characterisation: one knob at a time from the defaults, every toe shape, the
//! distribution measures of [`Stats`] averaged over captured positions.

use serde::Serialize;

use super::capture::Capture;
use super::metrics::Stats;
use super::sampler::{match_entropy, Sampler};
use super::sampler::{BASELINE_MIN_P, BASELINE_TOP_P};
use super::EvalError;
use mistralrs_hlg::config::RawValue;
use mistralrs_hlg::{HlgConfig, HlgCurve, ToeShape};

/// One knob's sweep: the values tried (as the `hlg` object would carry them).
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The `hlg` field.
    pub knob: &'static str,
    /// The values, in order.
    pub values: Vec<RawValue>,
}

/// The sweeps of the characterisation: every knob over its useful range.
pub fn sweeps() -> Vec<Sweep> {
    let n = |v: &[f64]| v.iter().map(|&x| RawValue::Number(x)).collect::<Vec<_>>();
    let with_off = |v: &[f64]| {
        let mut out = n(v);
        out.push(RawValue::Str("off".into()));
        out
    };
    let s = |names: &[&str]| names.iter().map(|x| RawValue::Str(x.to_string())).collect();
    vec![
        Sweep {
            knob: "pivot",
            values: s(&["top", "entropy", "median"]),
        },
        Sweep {
            knob: "pivot_offset",
            values: n(&[0.0, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0]),
        },
        Sweep {
            knob: "width",
            values: with_off(&[0.0, 1.0, 2.0, 4.0, 6.0, 8.0]),
        },
        Sweep {
            knob: "shoulder",
            values: with_off(&[0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]),
        },
        Sweep {
            knob: "toe",
            values: with_off(&[0.25, 0.5, 1.0, 2.0, 4.0, 6.0, 8.0, 16.0]),
        },
    ]
}

/// One knob's sweep: its name, and `(value as text, toe shape, the curve's settings)` per
/// point.
pub type SweepPoints = (&'static str, Vec<(String, ToeShape, HlgConfig)>);

/// Every point of every sweep: per knob, `(value as text, toe shape, the curve's settings)`
/// for each value × toe shape, from `base`.
pub fn sweep_configs(base: &HlgConfig) -> Result<Vec<SweepPoints>, EvalError> {
    sweeps()
        .into_iter()
        .map(|sweep| {
            let mut points = vec![];
            for v in &sweep.values {
                for shape in ToeShape::ALL {
                    let mut cfg = base.clone();
                    cfg.set(sweep.knob, v.clone())?;
                    cfg.set("toe_shape", RawValue::Str(shape.name().into()))?;
                    points.push((text(v), shape, cfg.resolved(true)));
                }
            }
            Ok((sweep.knob, points))
        })
        .collect()
}

/// One point of a sweep: the knob's value, the toe shape, the mean measures.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    /// The knob's value, as text (`"4"`, `"off"`, `"median"`).
    pub value: String,
    /// The toe shape.
    pub toe_shape: &'static str,
    /// The curve's settings.
    pub curve: HlgConfig,
    /// Means over the captured positions.
    pub mean: Stats,
}

/// The whole characterisation.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The sampling temperature (the mid gain) every measure is taken at.
    pub temperature: f64,
    /// Positions averaged over.
    pub positions: usize,
    /// Plain temperature at the same T (KL 0 by definition).
    pub temperature_only: Stats,
    /// Per knob: its points, every value × every toe shape.
    pub sweeps: Vec<(String, Vec<Point>)>,
}

fn text(v: &RawValue) -> String {
    match v {
        RawValue::Number(x) => format!("{x}"),
        RawValue::Str(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// Mean [`Stats`] of `curve` over every row of `capture` at temperature `t`, on up to
/// `threads` threads.
pub fn mean_stats(capture: &Capture, curve: Option<&HlgCurve>, t: f64, threads: usize) -> Stats {
    mean_stats_with(
        capture,
        |y| {
            if let Some(c) = curve {
                c.apply(y)
            }
        },
        t,
        threads,
    )
}

/// Mean [`Stats`] of the logits `transform` gives, over every row of `capture`, at `t`.
pub fn mean_stats_with(
    capture: &Capture,
    transform: impl Fn(&mut [f32]) + Sync,
    t: f64,
    threads: usize,
) -> Stats {
    let transform = &transform;
    let n = capture.rows.len();
    let per = n.div_ceil(threads.max(1)).max(1);
    let parts: Vec<Vec<Stats>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(per)
            .map(|start| {
                s.spawn(move || {
                    let mut y = vec![0f32; capture.vocab];
                    (start..(start + per).min(n))
                        .filter_map(|i| {
                            let x = capture.row(i);
                            y.copy_from_slice(x);
                            transform(&mut y);
                            Stats::of(x, &y, t)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker"))
            .collect()
    });
    Stats::mean(&parts.concat())
}

/// Runs every sweep over `capture` at temperature `t`, from `base` (the other knobs'
/// values). `progress(done, total)` after each point.
pub fn characterise(
    capture: &Capture,
    base: &HlgConfig,
    t: f64,
    threads: usize,
    mut progress: impl FnMut(usize, usize),
) -> Result<Report, EvalError> {
    let configs = sweep_configs(base)?;
    let total: usize = configs.iter().map(|(_, p)| p.len()).sum();
    let mut done = 0;
    let mut report = Report {
        temperature: t,
        positions: capture.rows.len(),
        temperature_only: mean_stats(capture, None, t, threads),
        sweeps: vec![],
    };
    for (knob, configs) in configs {
        let mut points = vec![];
        for (value, shape, cfg) in configs {
            let curve = cfg.curve();
            points.push(Point {
                value,
                toe_shape: shape.name(),
                curve: cfg,
                mean: mean_stats(capture, Some(&curve), t, threads),
            });
            done += 1;
            progress(done, total);
        }
        report.sweeps.push((knob.to_string(), points));
    }
    Ok(report)
}

/// One point at matched entropy: the temperature that gives the sampler the target mean
/// entropy, and the measures there.
#[derive(Clone, Debug, Serialize)]
pub struct MatchedPoint {
    /// The knob's value (empty for a baseline).
    pub value: String,
    /// The method: a toe shape, or a baseline's name.
    pub method: String,
    /// The matched temperature.
    pub t: f64,
    /// Means over every captured position at `t` (`kl` is against plain temperature at
    /// the same `t`).
    pub mean: Stats,
}

/// Every sweep again, each point at the temperature that matches plain temperature's
/// mean entropy at `level`: what each knob does to the tail and the top at equal entropy.
#[derive(Clone, Debug, Serialize)]
pub struct Matched {
    /// Plain temperature's temperature defining the target.
    pub level: f64,
    /// The target mean entropy.
    pub target_entropy: f64,
    /// Plain temperature, top-p and min-p at the target.
    pub baselines: Vec<MatchedPoint>,
    /// Per knob, every value × toe shape.
    pub sweeps: Vec<(String, Vec<MatchedPoint>)>,
}

/// The temperatures are found by bisection on every third position (speed), the measures
/// taken on all of them.
pub fn characterise_matched(
    capture: &Capture,
    base: &HlgConfig,
    level: f64,
    threads: usize,
    mut progress: impl FnMut(usize, usize),
) -> Result<Matched, EvalError> {
    let sub: Vec<usize> = (0..capture.rows.len()).step_by(3).collect();
    let rows = || sub.iter().map(|&i| capture.row(i));
    // The target on the same subsample the bisection measures.
    let target_entropy = super::sampler::mean_entropy(&Sampler::Temperature { t: level }, rows());
    let at = |s: &Sampler, value: String| {
        let t = match s {
            Sampler::Temperature { .. } => level,
            _ => match_entropy(s, target_entropy, rows, 0.05, 8.0).0,
        };
        let s = s.at(t);
        MatchedPoint {
            value,
            method: s.name(),
            t,
            mean: mean_stats_with(capture, |y| s.transform(y), t, threads),
        }
    };
    let baselines = vec![
        at(&Sampler::Temperature { t: level }, String::new()),
        at(
            &Sampler::TopP {
                t: level,
                p: BASELINE_TOP_P,
            },
            String::new(),
        ),
        at(
            &Sampler::MinP {
                t: level,
                min_p: BASELINE_MIN_P,
            },
            String::new(),
        ),
    ];
    let configs = sweep_configs(base)?;
    let total: usize = configs.iter().map(|(_, p)| p.len()).sum();
    let mut done = 0;
    let mut out = Matched {
        level,
        target_entropy,
        baselines,
        sweeps: vec![],
    };
    for (knob, configs) in configs {
        let mut points = vec![];
        for (value, shape, hlg) in configs {
            let mut p = at(&Sampler::Hlg { t: level, hlg }, value);
            p.method = shape.name().to_string();
            points.push(p);
            done += 1;
            progress(done, total);
        }
        out.sweeps.push((knob.to_string(), points));
    }
    Ok(out)
}
