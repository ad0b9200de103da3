//! Small SVG plots for the evaluation's outputs (no plotting dependency).

use std::fmt::Write;

/// One line of a panel: a name, a colour and a y value per x label (`None` leaves a gap).
pub struct Series<'a> {
    /// Legend text.
    pub name: &'a str,
    /// CSS colour.
    pub color: &'a str,
    /// One value per x label.
    pub ys: Vec<Option<f64>>,
}

/// A panel: a title, the x labels (categorical, evenly spaced), the lines and an optional
/// dashed reference level.
pub struct Panel<'a> {
    /// Title above the panel.
    pub title: String,
    /// The x axis' labels.
    pub xs: Vec<String>,
    /// The lines.
    pub series: Vec<Series<'a>>,
    /// A dashed horizontal line (e.g. plain temperature) and its label.
    pub reference: Option<(f64, &'a str)>,
    /// A logarithmic y axis (values ≤ 0 are left out).
    pub log_y: bool,
}

fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 || v.abs() < 0.01 {
        format!("{v:.1e}")
    } else {
        format!("{v:.3}")
    }
}

/// Panels in a grid of `cols` columns, with a title over the whole figure.
pub fn grid(title: &str, panels: &[Panel<'_>], cols: usize) -> String {
    let (pw, ph) = (340.0, 240.0);
    let rows = panels.len().div_ceil(cols);
    let (w, h) = (pw * cols as f64, ph * rows as f64 + 30.0);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>"#
    );
    let _ = write!(
        s,
        r#"<text x="10" y="18" font-size="14">{}</text>"#,
        escape(title)
    );
    for (k, p) in panels.iter().enumerate() {
        let (ox, oy) = (pw * (k % cols) as f64, 30.0 + ph * (k / cols) as f64);
        let frame = Frame {
            l: ox + 50.0,
            r: ox + pw - 12.0,
            t: oy + 22.0,
            b: oy + ph - 40.0,
        };
        let axis = Axis::of(p);
        panel_frame(&mut s, p, &frame, &axis, oy);
        panel_lines(&mut s, p, &frame, &axis);
    }
    s.push_str("</svg>\n");
    s
}

/// A panel's plotting area, in pixels.
#[derive(Clone, Copy)]
struct Frame {
    l: f64,
    r: f64,
    t: f64,
    b: f64,
}

/// A panel's y axis: its range, in log10 on a log axis.
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
}

impl Frame {
    /// Panel `k` (0: left, 1: right) of a figure `w` × `h` split in two, `pad` inside.
    fn half(k: usize, w: f64, h: f64, pad: f64) -> Frame {
        let ox = k as f64 * w / 2.0;
        Frame {
            l: ox + pad,
            r: ox + w / 2.0 - 20.0,
            t: 40.0,
            b: h - pad,
        }
    }
}

impl Axis {
    fn of(p: &Panel<'_>) -> Axis {
        let mut axis = Axis {
            log: p.log_y,
            lo: 0.0,
            hi: 1.0,
        };
        let ys = p
            .series
            .iter()
            .flat_map(|s| s.ys.iter().flatten().copied())
            .chain(p.reference.map(|r| r.0))
            .map(|v| axis.place(v))
            .filter(|v| v.is_finite());
        let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        if lo.is_finite() {
            (axis.lo, axis.hi) = (lo, hi);
        }
        if axis.hi - axis.lo < 1e-12 {
            axis.hi = axis.lo + 1.0;
        }
        axis
    }

    /// Where a value sits on the axis: its log10 on a log axis (NaN for `v ≤ 0`).
    fn place(&self, v: f64) -> f64 {
        match (self.log, v > 0.0) {
            (false, _) => v,
            (true, true) => v.log10(),
            (true, false) => f64::NAN,
        }
    }

    fn label(&self, placed: f64) -> String {
        if self.log {
            format!("1e{}", (placed * 10.0).round() / 10.0)
        } else {
            fmt_num(placed)
        }
    }

    fn y(&self, f: &Frame, placed: f64) -> f64 {
        f.b - (f.b - f.t) * (placed - self.lo) / (self.hi - self.lo)
    }
}

fn x_at(p: &Panel<'_>, f: &Frame, i: usize) -> f64 {
    let n = p.xs.len().max(2) as f64;
    f.l + (f.r - f.l) * i as f64 / (n - 1.0)
}

/// Title, box, y range, x labels and the reference line.
fn panel_frame(s: &mut String, p: &Panel<'_>, f: &Frame, axis: &Axis, oy: f64) {
    let Frame { l, r, t, b } = *f;
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" font-size="12">{}</text>"#,
        l,
        oy + 14.0,
        escape(&p.title)
    );
    let _ = write!(
        s,
        r##"<rect x="{l:.1}" y="{t:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#bbb"/>"##,
        r - l,
        b - t
    );
    let _ = write!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
        l - 4.0,
        t + 8.0,
        axis.label(axis.hi),
        l - 4.0,
        b,
        axis.label(axis.lo)
    );
    // Labels at least ~28 px apart: every `step`-th one when there are many.
    let step = ((p.xs.len() as f64 * 28.0) / (r - l)).ceil().max(1.0) as usize;
    for (i, x) in p.xs.iter().enumerate().step_by(step) {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x_at(p, f, i),
            b + 14.0,
            escape(x)
        );
    }
    if let Some((v, name)) = p.reference.filter(|r| axis.place(r.0).is_finite()) {
        let y = axis.y(f, axis.place(v));
        let _ = write!(
            s,
            r##"<line x1="{l:.1}" x2="{r:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#888" stroke-dasharray="5,4"/><text x="{:.1}" y="{:.1}" fill="#888" text-anchor="end">{}</text>"##,
            r - 2.0,
            y - 3.0,
            escape(name),
        );
    }
}

/// Each series as a line (gaps and values off a log axis left out) and its legend entry.
fn panel_lines(s: &mut String, p: &Panel<'_>, f: &Frame, axis: &Axis) {
    for (j, se) in p.series.iter().enumerate() {
        let pts: Vec<String> = se
            .ys
            .iter()
            .enumerate()
            .filter_map(|(i, y)| {
                y.map(|v| axis.place(v))
                    .filter(|v| v.is_finite())
                    .map(|v| format!("{:.1},{:.1}", x_at(p, f, i), axis.y(f, v)))
            })
            .collect();
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
            se.color,
            pts.join(" ")
        );
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" fill="{}">{}</text>"#,
            f.l + 70.0 * j as f64,
            f.b + 30.0,
            se.color,
            escape(se.name)
        );
    }
}

/// The diversity–quality frontier: distinct-2 and 1 − self-BLEU against the tail-garbage
/// rate and the mean base log-probability, one point per method and level, each method's
/// levels joined by a line (one level: points only).
pub fn frontier(doc: &super::diversity::Doc) -> String {
    let (w, h, pad) = (760.0, 360.0, 50.0);
    let levels: Vec<String> = doc.levels.iter().map(|l| l.level.to_string()).collect();
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/><text x="10" y="16" font-size="13">diversity vs quality at matched entropy (levels T = {}; small labels: the level)</text>"#,
        levels.join(", ")
    );
    let names = method_names(doc);
    let panels: [FrontierPanel; 2] = [
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
        let frame = Frame::half(k, w, h, pad);
        let all: Vec<(f64, f64)> = doc
            .levels
            .iter()
            .flat_map(|lv| lv.methods.iter().map(f))
            .collect();
        let scale = Scatter {
            x: padded_span(all.iter().map(|p| p.0)),
            y: padded_span(all.iter().map(|p| p.1)),
            frame,
        };
        scatter_axes(&mut s, &scale, xl, yl);
        for (i, name) in names.iter().enumerate() {
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
            let c = FRONTIER_COLORS[i % FRONTIER_COLORS.len()];
            scatter_method(&mut s, &scale, name, c, &pts);
        }
    }
    s + "</svg>\n"
}

/// One online measure of a confirmed method, as a plot's axis.
type MeasureOf = fn(&super::confirm::Confirmed) -> super::confirm::Estimate;

/// One level of the online confirmation: distinct-2 (top row) and distinct-1 (bottom
/// row: at high entropy distinct-2 is near 1 for every method) against the tail-garbage
/// rate and against the mean base log-probability, one line per family through its
/// settings (in order of the quality measure), each point labelled with its knob and
/// drawn with its standard errors on both axes.
pub fn confirm(level: &super::confirm::Level) -> String {
    use super::confirm::Confirmed;
    use super::frontier::Family;
    let (w, row, pad) = (960.0, 400.0, 50.0);
    let h = 2.0 * row + 40.0;
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/><text x="10" y="16" font-size="13">online, at matched entropy (plain temperature's at T = {}): diversity against quality, ±1 standard error</text>"#,
        level.level
    );
    let measured: Vec<&Confirmed> = level.methods.iter().filter(|c| c.prompts > 0).collect();
    let panels: [(&str, MeasureOf); 2] = [
        ("tail-garbage rate (lower: better)", |c| c.tail_rate),
        ("mean base log-prob (higher: better)", |c| c.base_logprob),
    ];
    let rows: [(&str, MeasureOf); 2] = [
        ("distinct-2", |c| c.distinct[1]),
        ("distinct-1", |c| c.distinct[0]),
    ];
    // An axis spans every measured point with its error bar.
    let span = |f: &MeasureOf| {
        padded_span(measured.iter().flat_map(|c| {
            let e = f(c);
            [e.mean - e.se, e.mean + e.se]
        }))
    };
    for (r, (yl, fy)) in rows.iter().enumerate() {
        for (k, (xl, fx)) in panels.iter().enumerate() {
            let mut frame = Frame::half(k, w, row, pad);
            frame.t += r as f64 * row;
            frame.b += r as f64 * row;
            let sc = Scatter {
                x: span(fx),
                y: span(fy),
                frame,
            };
            scatter_axes(&mut s, &sc, xl, yl);
            for f in Family::ALL {
                let mut pts: Vec<&&Confirmed> =
                    measured.iter().filter(|c| c.method.family == f).collect();
                pts.sort_by(|a, b| fx(a).mean.total_cmp(&fx(b).mean));
                confirm_family(&mut s, &sc, f, &pts, (*fx, *fy));
            }
        }
    }
    s + "</svg>\n"
}

/// One family's points of a confirmation panel: joined, with error bars and knobs.
fn confirm_family(
    s: &mut String,
    sc: &Scatter,
    f: super::frontier::Family,
    pts: &[&&super::confirm::Confirmed],
    (fx, fy): (MeasureOf, MeasureOf),
) {
    let c = f.color();
    let at = |p: &super::confirm::Confirmed| (sc.px(fx(p).mean), sc.py(fy(p).mean));
    if pts.len() > 1 {
        let line: Vec<String> = pts
            .iter()
            .map(|p| {
                let (x, y) = at(p);
                format!("{x:.1},{y:.1}")
            })
            .collect();
        *s += &format!(
            r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="1.5"/>"#,
            line.join(" ")
        );
    }
    for p in pts {
        let (x, y) = at(p);
        let (ex, ey) = (fx(p), fy(p));
        *s += &format!(
            r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{c}"/><line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{c}"/><circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{c}"/>"#,
            sc.px(ex.mean - ex.se),
            sc.px(ex.mean + ex.se),
            sc.py(ey.mean - ey.se),
            sc.py(ey.mean + ey.se),
        );
        let label = if p.method.knob.is_empty() {
            f.name().to_string()
        } else {
            p.method.knob.clone()
        };
        // A label in the panel's right third ends at its point, so that it stays inside
        // the figure (knobs run to 25 characters).
        let (lx, anchor) = if x > sc.frame.r - (sc.frame.r - sc.frame.l) / 3.0 {
            (x - 5.0, "end")
        } else {
            (x + 5.0, "start")
        };
        *s += &format!(
            r#"<text x="{lx:.1}" y="{:.1}" fill="{c}" font-size="9" text-anchor="{anchor}">{}</text>"#,
            y - 5.0,
            escape(&label)
        );
    }
}

/// Method names in the order of first appearance.
fn method_names(doc: &super::diversity::Doc) -> Vec<&str> {
    first_appearance(
        doc.levels
            .iter()
            .flat_map(|l| l.methods.iter().map(|m| m.name.as_str())),
    )
}

/// The distinct values in the order of their first appearance.
pub(crate) fn first_appearance<'a>(values: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = vec![];
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// (x label, y label, the point of a method).
type FrontierPanel<'a> = (
    &'a str,
    &'a str,
    fn(&super::diversity::MethodResult) -> (f64, f64),
);

const FRONTIER_COLORS: [&str; 6] = [
    "#555", "#9467bd", "#8c564b", "#1f77b4", "#d62728", "#2ca02c",
];

/// A scatter panel's data ranges and its frame.
struct Scatter {
    x: (f64, f64),
    y: (f64, f64),
    frame: Frame,
}

impl Scatter {
    fn px(&self, x: f64) -> f64 {
        let f = &self.frame;
        f.l + (f.r - f.l) * (x - self.x.0) / (self.x.1 - self.x.0)
    }
    fn py(&self, y: f64) -> f64 {
        let f = &self.frame;
        f.b - (f.b - f.t) * (y - self.y.0) / (self.y.1 - self.y.0)
    }
}

/// The range of the values with 15 % of its width added on each side.
fn padded_span(v: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = v.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    let m = ((hi - lo) * 0.15).max(1e-9);
    (lo - m, hi + m)
}

/// A scatter panel's box, axis titles and the ends of both ranges.
fn scatter_axes(s: &mut String, sc: &Scatter, xl: &str, yl: &str) {
    let Frame { l, r, t, b } = sc.frame;
    let ((x0, x1), (y0, y1)) = (sc.x, sc.y);
    *s += &format!(
        r##"<rect x="{l}" y="{t}" width="{:.1}" height="{:.1}" fill="none" stroke="#bbb"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{xl}</text><text x="{:.1}" y="{:.1}" text-anchor="end">{yl}</text>"##,
        r - l,
        b - t,
        (l + r) / 2.0,
        b + 30.0,
        l + 60.0,
        t - 4.0
    );
    *s += &format!(
        r#"<text x="{l}" y="{:.1}">{x0:.3}</text><text x="{r}" y="{:.1}" text-anchor="end">{x1:.3}</text><text x="{:.1}" y="{b}" text-anchor="end">{y0:.3}</text><text x="{:.1}" y="{:.1}" text-anchor="end">{y1:.3}</text>"#,
        b + 14.0,
        b + 14.0,
        l - 3.0,
        l - 3.0,
        t + 9.0
    );
}

/// One method's points `(level, x, y)`: joined when there are several, each labelled
/// with its level, the last with the method's name.
fn scatter_method(s: &mut String, sc: &Scatter, name: &str, c: &str, pts: &[(f64, f64, f64)]) {
    if pts.len() > 1 {
        let line: Vec<String> = pts
            .iter()
            .map(|(_, x, y)| format!("{:.1},{:.1}", sc.px(*x), sc.py(*y)))
            .collect();
        *s += &format!(
            r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="1.5"/>"#,
            line.join(" ")
        );
    }
    for (j, (lv, x, y)) in pts.iter().enumerate() {
        let (px, py) = (sc.px(*x), sc.py(*y));
        *s += &format!(r#"<circle cx="{px:.1}" cy="{py:.1}" r="4" fill="{c}"/>"#);
        if pts.len() > 1 {
            *s += &format!(
                r#"<text x="{:.1}" y="{:.1}" fill="{c}" font-size="9">{lv}</text>"#,
                px + 5.0,
                py - 5.0
            );
        }
        if j + 1 == pts.len() {
            *s += &format!(
                r#"<text x="{:.1}" y="{:.1}" fill="{c}">{name}</text>"#,
                px + 7.0,
                py + 10.0
            );
        }
    }
}

/// One screened level: every family's own offline frontier, tail mass (log, values
/// below [`TAIL_FLOOR`](super::frontier::TAIL_FLOOR) on the floor) against expected base
/// log-prob. Each family's frontier is a line through its points, labelled with their
/// knobs; its other matched settings are faint dots; the setting whose knob is `shipped`
/// is ringed.
pub fn frontier_level(level: &super::frontier::Level, shipped: &str) -> String {
    use super::frontier::{Family, TAIL_FLOOR};
    let (w, h) = (960.0, 600.0);
    let matched: Vec<_> = level.points.iter().filter(|p| p.matched).collect();
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/><text x="10" y="16" font-size="13">offline, at plain temperature's entropy at T = {} ({:.3} nats, {} positions): each family's frontier ({} of {} settings matched)</text>"#,
        level.level,
        level.target_entropy,
        level.positions,
        matched.len(),
        level.points.len()
    );
    if matched.is_empty() {
        return s + "</svg>\n";
    }
    let x_of = |t: f64| t.max(TAIL_FLOOR).log10();
    let own: Vec<_> = Family::ALL
        .into_iter()
        .map(|f| level.family_frontier(f))
        .collect();
    // The range is the frontiers': settings far below them (the search's worst) would
    // squeeze every frontier into a band; they are counted instead of drawn.
    let y = padded_span(own.iter().flatten().map(|p| p.stats.base_logprob));
    let (drawn, below): (Vec<&super::frontier::Screened>, Vec<_>) = matched
        .iter()
        .copied()
        .partition(|p| p.stats.base_logprob >= y.0);
    let (x0, x1) = drawn
        .iter()
        .map(|p| x_of(p.stats.tail_mass))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
    let sc = Scatter {
        x: (x0.floor() - 0.25, x1.ceil().max(x0.floor() + 1.0) + 0.25),
        y,
        frame: Frame {
            l: 60.0,
            r: w - 210.0,
            t: 40.0,
            b: h - 50.0,
        },
    };
    let Frame { l, r, t, b } = sc.frame;
    let _ = write!(
        s,
        r##"<rect x="{l}" y="{t}" width="{:.1}" height="{:.1}" fill="none" stroke="#bbb"/><text x="{:.1}" y="{:.1}" text-anchor="middle">tail mass (base probability &lt; 1e-4; lower: better)</text><text x="{:.1}" y="{:.1}">expected base log-prob (higher: better)</text><text x="{:.1}" y="{b}" text-anchor="end">{:.3}</text><text x="{:.1}" y="{:.1}" text-anchor="end">{:.3}</text>"##,
        r - l,
        b - t,
        (l + r) / 2.0,
        b + 34.0,
        l,
        t - 6.0,
        l - 3.0,
        sc.y.0,
        l - 3.0,
        t + 9.0,
        sc.y.1
    );
    let floor = TAIL_FLOOR.log10();
    for d in (sc.x.0.ceil() as i32)..=(sc.x.1.floor() as i32) {
        let x = sc.px(d as f64);
        let label = if (d as f64) <= floor {
            "≤1e-6".to_string()
        } else {
            format!("1e{d}")
        };
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{b}" x2="{x:.1}" y2="{:.1}" stroke="#bbb"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            b + 4.0,
            b + 16.0
        );
    }
    if !below.is_empty() {
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" fill="#888">{} settings below the frontiers' range, not drawn</text>"##,
            l + 6.0,
            b - 6.0,
            below.len()
        );
    }
    let at = |p: &super::frontier::Screened| {
        (sc.px(x_of(p.stats.tail_mass)), sc.py(p.stats.base_logprob))
    };
    // Label positions taken, so that a knob is written only where no other is (ties
    // and near-ties crowd one end of a frontier).
    let mut labels: Vec<(f64, f64)> = vec![];
    for (k, (f, own)) in Family::ALL.into_iter().zip(own).enumerate() {
        let c = f.color();
        for p in drawn.iter().filter(|p| p.family == f) {
            let (x, y) = at(p);
            let _ = write!(
                s,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="2" fill="{c}" fill-opacity="0.3"/>"#
            );
        }
        if own.len() > 1 {
            let line: Vec<String> = own
                .iter()
                .map(|p| {
                    let (x, y) = at(p);
                    format!("{x:.1},{y:.1}")
                })
                .collect();
            let _ = write!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="1.5"/>"#,
                line.join(" ")
            );
        }
        for p in &own {
            let (x, y) = at(p);
            let _ = write!(s, r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{c}"/>"#);
            if labels
                .iter()
                .any(|&(lx, ly)| (lx - x).abs() < 70.0 && (ly - y).abs() < 9.0)
            {
                continue;
            }
            labels.push((x, y));
            let label: &str = if p.knob.is_empty() { f.name() } else { &p.knob };
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{:.1}" fill="{c}" font-size="8">{}</text>"#,
                x + 5.0,
                y - 4.0,
                escape(label)
            );
        }
        let ly = t + 14.0 * k as f64 + 8.0;
        let _ = write!(
            s,
            r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{c}"/><text x="{:.1}" y="{:.1}">{} ({} on its frontier)</text>"#,
            r + 14.0,
            ly - 4.0,
            r + 22.0,
            ly,
            f.name(),
            own.len()
        );
    }
    if let Some(p) = matched
        .iter()
        .find(|p| p.family == Family::Hlg && p.knob == shipped)
    {
        let (x, y) = at(p);
        let _ = write!(
            s,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="7" fill="none" stroke="black" stroke-width="1.5"/><text x="{:.1}" y="{:.1}" font-size="9">shipped</text>"#,
            x - 8.0,
            y + 18.0
        );
    }
    s + "</svg>\n"
}

/// The colour of a toe shape in every figure.
pub fn shape_color(shape: crate::ToeShape) -> &'static str {
    match shape {
        crate::ToeShape::Log => "#1f77b4",
        crate::ToeShape::Quadratic => "#d62728",
        crate::ToeShape::Exp => "#2ca02c",
    }
}

fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_draws_each_family_frontier_on_a_log_tail_axis() {
        use crate::eval::frontier::{point, Family, Level, Screened};
        let level = Level {
            level: 1.3,
            target_entropy: 4.43,
            positions: 284,
            capture: String::new(),
            points: vec![
                point(Family::Temperature, "", 0.1, -3.0),
                point(Family::MinP, "0.05", 0.0, -2.5),
                point(Family::MinP, "0.02", 0.01, -2.0),
                point(Family::MinP, "0.1", 0.02, -2.6),
                point(Family::Hlg, "a & b", 1e-3, -1.9),
                point(Family::Hlg, "c", 1e-2, -2.2),
                // On HLG's frontier beside "a & b": drawn, its label left out.
                point(Family::Hlg, "near", 1.02e-3, -1.89),
                // Far below every frontier: counted, not drawn (nor does it widen x).
                point(Family::Hlg, "far", 0.9, -9.0),
                Screened {
                    matched: false,
                    ..point(Family::Hlg, "unmatched", 0.5, -9.0)
                },
            ],
        };
        let svg = frontier_level(&level, "a & b");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("(8 of 9 settings matched)"), "{svg}");
        assert!(svg.contains(">1 settings below the frontiers' range, not drawn<"));
        // The axes by hand: x is log10 of the tail (0 on the 1e-6 floor) over
        // [-6.25, -0.75] into [60, 750]; y the frontiers' log-prob over [-3.0, -1.89]
        // padded by 15 % of its width each side into [550, 40].
        let px = |t: f64| 60.0 + 690.0 * (t.max(1e-6).log10() + 6.25) / 5.5;
        let (y0, y1) = (-3.0 - 0.1665, -1.89 + 0.1665);
        let py = |v: f64| 550.0 - 510.0 * (v - y0) / (y1 - y0);
        let xy = |t: f64, v: f64| format!("{:.1},{:.1}", px(t), py(v));
        // Min-p's own frontier: 0.05 (no tail) and 0.02; 0.1 is beaten by 0.02.
        let min_p = format!(r#"<polyline points="{} {}""#, xy(0.0, -2.5), xy(0.01, -2.0));
        assert!(svg.contains(&min_p), "{min_p} in {svg}");
        assert!(svg.contains(">0.05<") && svg.contains(">0.02<") && !svg.contains(">0.1<"));
        // HLG's: "a & b" and "near" (c is beaten), the shipped knobs ringed; "near" is
        // drawn but not labelled, a label's width from "a & b".
        let hlg = format!(
            r#"<polyline points="{} {}""#,
            xy(1e-3, -1.9),
            xy(1.02e-3, -1.89)
        );
        assert!(svg.contains(&hlg), "{hlg} in {svg}");
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains(">a &amp; b<") && !svg.contains(">c<") && !svg.contains(">near<"));
        let near = format!(
            r#"<circle cx="{:.1}" cy="{:.1}" r="3.5""#,
            px(1.02e-3),
            py(-1.89)
        );
        assert!(svg.contains(&near), "{near} in {svg}");
        let ring = format!(r#"<circle cx="{:.1}" cy="{:.1}" r="7""#, px(1e-3), py(-1.9));
        assert!(svg.contains(&ring), "{ring} in {svg}");
        // The unmatched setting is not drawn, nor the far one: 7 faint dots.
        assert_eq!(svg.matches(r#"fill-opacity="0.3""#).count(), 7);
        assert!(!svg.contains("unmatched") && !svg.contains(">far<"));
        for tick in ["≤1e-6", "1e-5", "1e-3", "1e-1"] {
            assert!(svg.contains(&format!(">{tick}<")), "tick {tick}");
        }
        assert!(
            svg.contains(">min-p (2 on its frontier)<")
                && svg.contains(">top-nσ (0 on its frontier)<")
        );
    }

    #[test]
    fn a_grid_places_every_point_and_label() {
        let p = Panel {
            title: "KL <nats>".into(),
            xs: vec!["0".into(), "1".into(), "off".into()],
            series: vec![Series {
                name: "log",
                color: "red",
                ys: vec![Some(0.0), Some(1.0), None],
            }],
            reference: Some((0.5, "temperature")),
            log_y: false,
        };
        let svg = grid("t", &[p], 2);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(
            svg.contains("KL &lt;nats&gt;")
                && svg.contains(">off<")
                && svg.contains(">temperature<")
        );
        // Two points (the gap is left out): x at the panel's left and middle, y at its
        // bottom and top.
        assert!(svg.contains(r#"points="50.0,230.0 189.0,52.0""#), "{svg}");
    }

    #[test]
    fn many_x_labels_are_thinned_not_overlapped() {
        let xs: Vec<String> = (0..100).map(|i| format!("x{i}")).collect();
        let p = Panel {
            title: "many".into(),
            xs,
            series: vec![Series {
                name: "s",
                color: "red",
                ys: (0..100).map(|i| Some(i as f64)).collect(),
            }],
            reference: None,
            log_y: false,
        };
        let svg = grid("t", &[p], 1);
        // The panel is 278 px wide: at most one label per 28 px, the first always.
        let shown = (0..100)
            .filter(|i| svg.contains(&format!(">x{i}<")))
            .count();
        assert!((5..=10).contains(&shown), "{shown} labels");
        assert!(svg.contains(">x0<"));
        // Every point is still drawn.
        assert_eq!(svg.matches(',').count(), 100);
    }

    #[test]
    fn a_log_axis_places_decades_evenly_and_drops_zeros() {
        let p = Panel {
            title: "tail".into(),
            xs: vec!["a".into(), "b".into(), "c".into()],
            series: vec![Series {
                name: "s",
                color: "red",
                ys: vec![Some(1e-4), Some(1e-2), Some(0.0)],
            }],
            reference: Some((1e-3, "ref")),
            log_y: true,
        };
        let svg = grid("t", &[p], 1);
        // 1e-4 at the bottom, 1e-2 at the top, 1e-3 (the reference) half way: y = 141.
        assert!(svg.contains(r#"points="50.0,230.0 189.0,52.0""#), "{svg}");
        assert!(
            svg.contains(r#"y1="141.0""#) && svg.contains(">1e-4<") && svg.contains(">1e-2<"),
            "{svg}"
        );
    }
}
