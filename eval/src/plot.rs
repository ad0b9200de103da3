//! The evaluation's figures, drawn with plotters' SVG backend. The tables (Markdown and
//! JSON) are the record; a figure that cannot be drawn says so in its place instead of
//! stopping a run of hours.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One line of a panel: a name, a colour and a y value per x label (`None` leaves a gap).
pub struct Series<'a> {
    /// Legend text.
    pub name: &'a str,
    /// Colour, `#rgb` or `#rrggbb`.
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

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;
type Drawn = Result<(), Box<dyn std::error::Error>>;

const FONT: &str = "sans-serif";

/// A `w` × `h` SVG drawn by `draw` on a white ground.
fn svg(w: u32, h: u32, draw: impl FnOnce(&Area<'_>) -> Drawn) -> String {
    let mut s = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut s, (w, h)).into_drawing_area();
        root.fill(&WHITE)
            .map_err(Into::into)
            .and_then(|()| draw(&root))
            .and_then(|()| root.present().map_err(Into::into))
    };
    match drawn {
        Ok(()) => s,
        Err(e) => format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}"><text x="10" y="20">the figure could not be drawn: {}</text></svg>"#,
            escape(&e.to_string())
        ),
    }
}

/// A CSS hex colour (`#rgb`, `#rrggbb`); black for anything else.
fn rgb(css: &str) -> RGBColor {
    let hex = css.trim_start_matches('#');
    let digit = |i: usize, n: usize| u8::from_str_radix(hex.get(i..i + n)?, 16).ok();
    let c = match hex.len() {
        3 => (0..3)
            .map(|i| digit(i, 1).map(|d| d * 17))
            .collect::<Option<Vec<u8>>>(),
        6 => (0..3).map(|i| digit(2 * i, 2)).collect(),
        _ => None,
    };
    c.map_or(BLACK, |c| RGBColor(c[0], c[1], c[2]))
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

/// The range of the values with 15 % of its width added on each side.
fn padded_span(v: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = v.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let m = ((hi - lo) * 0.15).max(1e-9);
    (lo - m, hi + m)
}

/// Text of `size` in `color`, anchored at its `h`/`v` side.
fn label(size: u32, color: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    (FONT, size).into_font().color(&color).pos(Pos::new(h, v))
}

/// Panels in a grid of `cols` columns, with a title over the whole figure.
pub fn grid(title: &str, panels: &[Panel<'_>], cols: usize) -> String {
    let cols = cols.max(1);
    let rows = panels.len().div_ceil(cols).max(1);
    let (w, h) = (340 * cols as u32, 240 * rows as u32 + 30);
    svg(w, h, |root| {
        let body = root.titled(title, (FONT, 16))?;
        for (p, cell) in panels.iter().zip(body.split_evenly((rows, cols))) {
            grid_panel(&cell, p)?;
        }
        Ok(())
    })
}

/// Where a panel value sits on its y axis: its log10 on a log axis, `None` off it.
fn placed(log: bool, v: f64) -> Option<f64> {
    let y = if log { v.log10() } else { v };
    (y.is_finite() && !(log && v <= 0.0)).then_some(y)
}

/// A panel's y range: every value and the reference level, as placed on its axis.
fn y_range(p: &Panel<'_>) -> (f64, f64) {
    let ys = p
        .series
        .iter()
        .flat_map(|s| s.ys.iter().flatten().copied())
        .chain(p.reference.map(|r| r.0))
        .filter_map(|v| placed(p.log_y, v));
    let (mut lo, mut hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    if hi - lo < 1e-12 {
        hi = lo + 1.0;
    }
    (lo, hi)
}

fn grid_panel(cell: &Area<'_>, p: &Panel<'_>) -> Drawn {
    let (lo, hi) = y_range(p);
    let last = p.xs.len().max(2) as f64 - 1.0;
    let mut chart = ChartBuilder::on(cell)
        .caption(&p.title, (FONT, 14))
        .margin(6)
        .x_label_area_size(20)
        .y_label_area_size(48)
        .build_cartesian_2d(0.0..last, lo..hi)?;
    let xs = &p.xs;
    let x_label = |x: &f64| {
        let i = x.round();
        let at = (x - i).abs() < 1e-6 && i >= 0.0;
        at.then(|| xs.get(i as usize).cloned())
            .flatten()
            .unwrap_or_default()
    };
    let log = p.log_y;
    let y_label = |y: &f64| {
        if log {
            format!("1e{}", (y * 10.0).round() / 10.0)
        } else {
            fmt_num(*y)
        }
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(xs.len().min(10))
        .x_label_formatter(&x_label)
        .y_labels(5)
        .y_label_formatter(&y_label)
        .draw()?;
    if let Some((v, name)) = p.reference {
        if let Some(y) = placed(log, v) {
            let grey = RGBColor(0x88, 0x88, 0x88);
            chart.draw_series(DashedLineSeries::new(
                [(0.0, y), (last, y)],
                5,
                4,
                grey.into(),
            ))?;
            let style = label(11, grey, HPos::Right, VPos::Bottom);
            chart.draw_series([Text::new(name.to_string(), (last, y), style)])?;
        }
    }
    for s in &p.series {
        panel_series(&mut chart, s, log)?;
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 11))
        .background_style(WHITE.mix(0.8))
        .border_style(RGBColor(0xbb, 0xbb, 0xbb))
        .draw()?;
    Ok(())
}

/// A series as lines between its gaps (and values off a log axis), with a legend entry.
fn panel_series(chart: &mut Chart<'_, '_>, s: &Series<'_>, log: bool) -> Drawn {
    let c = rgb(s.color);
    let mut runs: Vec<Vec<(f64, f64)>> = vec![vec![]];
    for (i, y) in s.ys.iter().enumerate() {
        match y.and_then(|v| placed(log, v)) {
            Some(y) => {
                if let Some(run) = runs.last_mut() {
                    run.push((i as f64, y));
                }
            }
            None => runs.push(vec![]),
        }
    }
    runs.retain(|r| !r.is_empty());
    if runs.is_empty() {
        // No point to draw: the legend still names the series.
        runs.push(vec![]);
    }
    let mut first = true;
    for run in &runs {
        let drawn = chart.draw_series(LineSeries::new(run.iter().copied(), c.stroke_width(2)))?;
        if std::mem::take(&mut first) {
            drawn
                .label(s.name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 2), (x + 14, y + 2)], c.filled()));
        }
    }
    Ok(())
}

/// A scatter panel on `area`: ranges, axis titles and tick labels.
fn scatter<'a, 'b>(
    area: &'a Area<'b>,
    x: (f64, f64),
    y: (f64, f64),
    (xl, yl): (&str, &str),
) -> Result<Chart<'a, 'b>, Box<dyn std::error::Error>> {
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(38)
        .y_label_area_size(60)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(0xee, 0xee, 0xee))
        .x_desc(xl)
        .y_desc(yl)
        .x_labels(6)
        .y_labels(6)
        .draw()?;
    Ok(chart)
}

/// A line through `pts` when there are several.
fn join(chart: &mut Chart<'_, '_>, pts: &[(f64, f64)], c: RGBColor) -> Drawn {
    if pts.len() > 1 {
        chart.draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?;
    }
    Ok(())
}

/// The diversity–quality frontier: distinct-2 and 1 − self-BLEU against the tail-garbage
/// rate and the mean base log-probability, one point per method and level, each method's
/// levels joined by a line (one level: points only).
pub fn frontier(doc: &super::diversity::Doc) -> String {
    let levels: Vec<String> = doc.levels.iter().map(|l| l.level.to_string()).collect();
    let title = format!(
        "diversity vs quality at matched entropy (levels T = {}; small labels: the level)",
        levels.join(", ")
    );
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
    svg(960, 420, |root| {
        let body = root.titled(&title, (FONT, 15))?;
        for (area, panel) in body.split_evenly((1, 2)).iter().zip(panels) {
            frontier_panel(area, doc, panel)?;
        }
        Ok(())
    })
}

fn frontier_panel(area: &Area<'_>, doc: &super::diversity::Doc, panel: FrontierPanel) -> Drawn {
    let (xl, yl, f) = panel;
    let all: Vec<(f64, f64)> = doc
        .levels
        .iter()
        .flat_map(|lv| lv.methods.iter().map(f))
        .collect();
    let x = padded_span(all.iter().map(|p| p.0));
    let y = padded_span(all.iter().map(|p| p.1));
    let mut chart = scatter(area, x, y, (xl, yl))?;
    for (i, name) in method_names(doc).into_iter().enumerate() {
        let c = rgb(FRONTIER_COLORS[i % FRONTIER_COLORS.len()]);
        let pts: Vec<(f64, (f64, f64))> = doc
            .levels
            .iter()
            .filter_map(|lv| {
                let m = lv.methods.iter().find(|m| m.name == name)?;
                Some((lv.level, f(m)))
            })
            .collect();
        let xy: Vec<(f64, f64)> = pts.iter().map(|p| p.1).collect();
        join(&mut chart, &xy, c)?;
        for (j, (lv, at)) in pts.iter().enumerate() {
            let mut text = if pts.len() > 1 {
                lv.to_string()
            } else {
                String::new()
            };
            if j + 1 == pts.len() {
                text = if text.is_empty() {
                    name.to_string()
                } else {
                    format!("{text} {name}")
                };
            }
            chart.draw_series([EmptyElement::at(*at)
                + Circle::new((0, 0), 4, c.filled())
                + Text::new(text, (6, -6), label(10, c, HPos::Left, VPos::Bottom))])?;
        }
    }
    Ok(())
}

/// One online measure of a confirmed method, as a plot's axis.
type MeasureOf = fn(&super::confirm::Confirmed) -> super::confirm::Estimate;

/// One level of the online confirmation: distinct-2 (top row) and distinct-1 (bottom
/// row: at high entropy distinct-2 is near 1 for every method) against the tail-garbage
/// rate and against the mean base log-probability, one line per family through its
/// settings (in order of the quality measure), each point labelled with its knob and
/// drawn with its standard errors on both axes.
pub fn confirm(level: &super::confirm::ConfirmedLevel) -> String {
    let title = format!(
        "online, at matched entropy (plain temperature's at T = {}): diversity against quality, ±1 standard error",
        level.level
    );
    let xs: [(&str, MeasureOf); 2] = [
        ("tail-garbage rate (lower: better)", |c| c.tail_rate),
        ("mean base log-prob (higher: better)", |c| c.base_logprob),
    ];
    let ys: [(&str, MeasureOf); 2] = [
        ("distinct-2", |c| c.distinct[1]),
        ("distinct-1", |c| c.distinct[0]),
    ];
    svg(960, 840, |root| {
        let body = root.titled(&title, (FONT, 15))?;
        let cells = body.split_evenly((2, 2));
        for (k, cell) in cells.iter().enumerate() {
            confirm_panel(cell, level, xs[k % 2], ys[k / 2])?;
        }
        Ok(())
    })
}

fn confirm_panel(
    cell: &Area<'_>,
    level: &super::confirm::ConfirmedLevel,
    (xl, fx): (&str, MeasureOf),
    (yl, fy): (&str, MeasureOf),
) -> Drawn {
    use super::confirm::Confirmed;
    use super::frontier::Family;
    let measured: Vec<&Confirmed> = level.methods.iter().filter(|c| c.prompts > 0).collect();
    // An axis spans every measured point with its error bar.
    let span = |f: MeasureOf| {
        padded_span(measured.iter().flat_map(|c| {
            let e = f(c);
            [e.mean - e.se, e.mean + e.se]
        }))
    };
    let (x, y) = (span(fx), span(fy));
    let mut chart = scatter(cell, x, y, (xl, yl))?;
    for f in Family::ALL {
        let mut pts: Vec<&Confirmed> = measured
            .iter()
            .copied()
            .filter(|c| c.method.family == f)
            .collect();
        pts.sort_by(|a, b| fx(a).mean.total_cmp(&fx(b).mean));
        let c = rgb(f.color());
        let xy: Vec<(f64, f64)> = pts.iter().map(|p| (fx(p).mean, fy(p).mean)).collect();
        join(&mut chart, &xy, c)?;
        for (p, &(px, py)) in pts.iter().zip(&xy) {
            let (ex, ey) = (fx(p), fy(p));
            chart.draw_series([ErrorBar::new_horizontal(
                py,
                ex.mean - ex.se,
                px,
                ex.mean + ex.se,
                c,
                6,
            )])?;
            chart.draw_series([ErrorBar::new_vertical(
                px,
                ey.mean - ey.se,
                py,
                ey.mean + ey.se,
                c,
                6,
            )])?;
            let knob = if p.method.knob.is_empty() {
                f.name()
            } else {
                &p.method.knob
            };
            // A label in the panel's right third ends at its point, so that it stays
            // inside the figure (knobs run to 25 characters).
            let right = px > x.1 - (x.1 - x.0) / 3.0;
            let (dx, h) = if right {
                (-5, HPos::Right)
            } else {
                (5, HPos::Left)
            };
            chart.draw_series([EmptyElement::at((px, py))
                + Circle::new((0, 0), 3, c.filled())
                + Text::new(knob.to_string(), (dx, -5), label(10, c, h, VPos::Bottom))])?;
        }
    }
    Ok(())
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

pub(crate) const FRONTIER_COLORS: [&str; 6] = [
    "#555", "#9467bd", "#8c564b", "#1f77b4", "#d62728", "#2ca02c",
];

/// One screened level: every family's own offline frontier, tail mass (log, values
/// below [`TAIL_FLOOR`](super::frontier::TAIL_FLOOR) on the floor) against expected base
/// log-prob. Each family's frontier is a line through its points, labelled with their
/// knobs; its other matched settings are faint dots; each HLG setting named in `rings`
/// (its knob, a label) is ringed and labelled.
pub fn frontier_level(level: &super::frontier::Screening, rings: &[(&str, &str)]) -> String {
    let matched = level.points.iter().filter(|p| p.matched).count();
    let title = format!(
        "offline, at plain temperature's entropy at T = {} ({:.3} nats, {} positions): each family's frontier ({} of {} settings matched)",
        level.level,
        level.target_entropy,
        level.positions,
        matched,
        level.points.len()
    );
    svg(960, 600, |root| {
        let body = root.titled(&title, (FONT, 14))?;
        if matched > 0 {
            frontier_level_panel(&body, level, rings)?;
        }
        Ok(())
    })
}

/// Where a screened setting sits: log10 of its tail mass (on the floor below it), its
/// expected base log-prob.
fn screened_at(p: &super::frontier::Screened) -> (f64, f64) {
    let x = p.stats.tail_mass.max(super::frontier::TAIL_FLOOR).log10();
    (x, p.stats.base_logprob)
}

/// An axis of whole decades (log10 values) around `xs`, a quarter decade beyond each end.
fn decades(xs: impl Iterator<Item = f64>) -> (f64, f64) {
    let (x0, x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    (x0.floor() - 0.25, x1.ceil().max(x0.floor() + 1.0) + 0.25)
}

/// The axes of a screened level: decades of tail mass (the floor marked ≤) against the
/// expected base log-prob.
fn tail_mesh(chart: &mut Chart<'_, '_>) -> Drawn {
    let floor = super::frontier::TAIL_FLOOR.log10();
    let decade = |d: &f64| match d.round() {
        r if (d - r).abs() > 1e-6 => String::new(),
        r if r <= floor => format!("≤1e{floor}"),
        r => format!("1e{r}"),
    };
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(0xee, 0xee, 0xee))
        .x_desc("tail mass (base probability < 1e-4; lower: better)")
        .y_desc("expected base log-prob (higher: better)")
        .x_label_formatter(&decade)
        .draw()?;
    Ok(())
}

fn frontier_level_panel(
    area: &Area<'_>,
    level: &super::frontier::Screening,
    rings: &[(&str, &str)],
) -> Drawn {
    use super::frontier::{Family, Screened};
    let own: Vec<Vec<&Screened>> = Family::ALL
        .into_iter()
        .map(|f| level.family_frontier(f))
        .collect();
    // The range is the frontiers': settings far below them (the search's worst) would
    // squeeze every frontier into a band; they are counted instead of drawn.
    let y = padded_span(own.iter().flatten().map(|p| p.stats.base_logprob));
    let (drawn, below): (Vec<&Screened>, Vec<&Screened>) = level
        .points
        .iter()
        .filter(|p| p.matched)
        .partition(|p| p.stats.base_logprob >= y.0);
    let x = decades(drawn.iter().map(|p| screened_at(p).0));
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .margin_right(24)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)?;
    tail_mesh(&mut chart)?;
    if !below.is_empty() {
        let grey = label(11, RGBColor(0x88, 0x88, 0x88), HPos::Left, VPos::Bottom);
        let text = format!(
            "{} settings below the frontiers' range, not drawn",
            below.len()
        );
        chart.draw_series([Text::new(text, (x.0, y.0), grey)])?;
    }
    let mut taken: Vec<(i32, i32)> = vec![];
    for (f, own) in Family::ALL.into_iter().zip(&own) {
        family_frontier(&mut chart, f, &drawn, own, &mut taken)?;
    }
    chart
        .configure_series_labels()
        // The lower right: high tail mass and low log-prob, where no frontier runs.
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(0xbb, 0xbb, 0xbb))
        .label_font((FONT, 11))
        .draw()?;
    for (knob, name) in rings {
        let ring = drawn
            .iter()
            .find(|p| p.family == Family::Hlg && p.knob == *knob);
        if let Some(p) = ring {
            let below = label(10, BLACK, HPos::Center, VPos::Top);
            chart.draw_series([EmptyElement::at(screened_at(p))
                + Circle::new((0, 0), 7, BLACK.stroke_width(2))
                + Text::new(name.to_string(), (0, 10), below)])?;
        }
    }
    Ok(())
}

/// One family on a screened level: its matched settings as faint dots, its frontier as a
/// line through labelled points (a knob is written only where no other label is: ties
/// and near-ties crowd one end of a frontier), and its legend entry.
fn family_frontier(
    chart: &mut Chart<'_, '_>,
    f: super::frontier::Family,
    drawn: &[&super::frontier::Screened],
    own: &[&super::frontier::Screened],
    taken: &mut Vec<(i32, i32)>,
) -> Drawn {
    let c = rgb(f.color());
    let faint = drawn.iter().filter(|p| p.family == f);
    chart.draw_series(faint.map(|p| Circle::new(screened_at(p), 2, c.mix(0.3).filled())))?;
    let line: Vec<(f64, f64)> = own.iter().map(|p| screened_at(p)).collect();
    join(chart, &line, c)?;
    let entry = chart.draw_series(line.iter().map(|&at| Circle::new(at, 4, c.filled())))?;
    entry
        .label(format!("{} ({} on its frontier)", f.name(), own.len()))
        .legend(move |(x, y)| Circle::new((x + 6, y), 4, c.filled()));
    for (p, &at) in own.iter().zip(&line) {
        let (px, py) = chart.backend_coord(&at);
        if taken
            .iter()
            .any(|&(lx, ly)| (lx - px).abs() < 70 && (ly - py).abs() < 9)
        {
            continue;
        }
        taken.push((px, py));
        let knob = if p.knob.is_empty() { f.name() } else { &p.knob };
        let style = label(9, c, HPos::Left, VPos::Bottom);
        chart.draw_series([EmptyElement::at(at) + Text::new(knob.to_string(), (5, -4), style)])?;
    }
    Ok(())
}

/// The colour of a toe shape in every figure.
pub fn shape_color(shape: mistralrs_hlg::ToeShape) -> &'static str {
    match shape {
        mistralrs_hlg::ToeShape::Log => "#1f77b4",
        mistralrs_hlg::ToeShape::Quadratic => "#d62728",
        mistralrs_hlg::ToeShape::Exp => "#2ca02c",
    }
}

fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Reading the figures back in tests: plotters writes one element per line.
#[cfg(test)]
pub(crate) mod read {
    /// The points of every polyline stroked in `color` (any CSS hex form).
    pub(crate) fn polylines(svg: &str, color: &str) -> Vec<Vec<(f64, f64)>> {
        let stroke = stroke(color);
        svg.lines()
            .filter(|l| l.starts_with("<polyline") && l.contains(&stroke))
            .map(|l| {
                let pts = l.split(r#"points=""#).nth(1).unwrap_or("");
                let pts = pts.split('"').next().unwrap_or("");
                pts.split_whitespace()
                    .filter_map(|p| {
                        let (x, y) = p.split_once(',')?;
                        Some((x.parse().ok()?, y.parse().ok()?))
                    })
                    .collect()
            })
            .collect()
    }

    /// `color` as plotters writes it: `stroke="#RRGGBB"`.
    pub(crate) fn stroke(color: &str) -> String {
        let c = super::rgb(color);
        format!(r##"stroke="#{:02X}{:02X}{:02X}""##, c.0, c.1, c.2)
    }

    /// Every text element's content.
    pub(crate) fn texts(svg: &str) -> Vec<String> {
        let lines: Vec<&str> = svg.lines().collect();
        lines
            .windows(2)
            .filter(|w| w[0].starts_with("<text"))
            .map(|w| w[1].to_string())
            .collect()
    }

    /// `(cx, cy, r)` of every circle.
    pub(crate) fn circles(svg: &str) -> Vec<(f64, f64, f64)> {
        let attr = |l: &str, a: &str| -> f64 {
            let v = l.split(&format!(r#" {a}=""#)).nth(1).unwrap_or("");
            v.split('"')
                .next()
                .unwrap_or("")
                .parse()
                .unwrap_or(f64::NAN)
        };
        svg.lines()
            .filter(|l| l.starts_with("<circle"))
            .map(|l| (attr(l, "cx"), attr(l, "cy"), attr(l, "r")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::read::{circles, polylines, texts};
    use super::*;

    #[test]
    fn colours_parse_from_css_hex() {
        assert_eq!(rgb("#d62728"), RGBColor(0xd6, 0x27, 0x28));
        assert_eq!(rgb("#555"), RGBColor(0x55, 0x55, 0x55));
        assert_eq!(rgb("red"), BLACK);
        assert_eq!(rgb("#12345z"), BLACK);
    }

    #[test]
    fn a_grid_draws_each_run_between_gaps_on_a_linear_axis() {
        let p = Panel {
            title: "KL <nats>".into(),
            xs: ["0", "1", "2", "3", "off"].map(String::from).to_vec(),
            series: vec![Series {
                name: "log",
                color: "#d62728",
                ys: vec![Some(0.0), Some(1.0), None, Some(3.0), Some(4.0)],
            }],
            reference: Some((0.5, "temperature")),
            log_y: false,
        };
        let svg = grid("t", &[p], 2);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let t = texts(&svg);
        for want in ["KL &lt;nats&gt;", "off", "temperature", "log"] {
            assert!(t.iter().any(|x| x == want), "{want} in {t:?}");
        }
        // Two runs (the gap splits the line), two points each; the x labels evenly
        // spaced and y linear: the four points lie on one line, x steps of 1, 2, 1 (each
        // pixel coordinate rounded: ±2 on a difference of two).
        let runs = polylines(&svg, "#d62728");
        let runs: Vec<_> = runs.into_iter().filter(|r| r.len() == 2).collect();
        assert_eq!(runs.len(), 2, "{svg}");
        let [a, b] = [runs[0][0], runs[0][1]];
        let [c, d] = [runs[1][0], runs[1][1]];
        let step = b.0 - a.0;
        assert!(step > 10.0);
        assert!(
            (c.0 - b.0 - 2.0 * step).abs() <= 2.0 && (d.0 - c.0 - step).abs() <= 2.0,
            "{runs:?}"
        );
        let rise = b.1 - a.1;
        assert!(rise < -10.0, "y grows upward: {rise}");
        assert!(
            (c.1 - b.1 - 2.0 * rise).abs() <= 2.0 && (d.1 - c.1 - rise).abs() <= 2.0,
            "{runs:?}"
        );
    }

    #[test]
    fn a_log_axis_places_decades_evenly_and_drops_zeros() {
        let p = Panel {
            title: "tail".into(),
            xs: ["a", "b", "c"].map(String::from).to_vec(),
            series: vec![Series {
                name: "s",
                color: "#1f77b4",
                ys: vec![Some(1e-4), Some(1e-2), Some(0.0)],
            }],
            reference: Some((1e-3, "ref")),
            log_y: true,
        };
        let svg = grid("t", &[p], 1);
        let runs = polylines(&svg, "#1f77b4");
        let line = runs
            .iter()
            .find(|r| r.len() == 2)
            .expect("the line of two points");
        // The reference at 1e-3 is dashed (several short grey segments) half way
        // between 1e-4 and 1e-2.
        let dashes = polylines(&svg, "#888888");
        assert!(dashes.len() > 3, "{svg}");
        let mid = (line[0].1 + line[1].1) / 2.0;
        assert!(
            dashes.iter().all(|d| (d[0].1 - mid).abs() <= 1.0),
            "{mid} {dashes:?}"
        );
        let t = texts(&svg);
        assert!(
            t.iter().any(|x| x == "1e-4") && t.iter().any(|x| x == "1e-2"),
            "{t:?}"
        );
    }

    #[test]
    fn many_x_labels_are_thinned_not_overlapped() {
        let p = Panel {
            title: "many".into(),
            xs: (0..100).map(|i| format!("x{i}")).collect(),
            series: vec![Series {
                name: "s",
                color: "#d62728",
                ys: (0..100).map(|i| Some(f64::from(i))).collect(),
            }],
            reference: None,
            log_y: false,
        };
        let svg = grid("t", &[p], 1);
        let t = texts(&svg);
        let shown = t.iter().filter(|x| x.starts_with('x')).count();
        assert!((3..=12).contains(&shown), "{shown} labels");
        assert!(t.iter().any(|x| x == "x0"));
        // Every point is still drawn.
        let pts: usize = polylines(&svg, "#d62728")
            .iter()
            .map(Vec::len)
            .max()
            .unwrap_or(0);
        assert_eq!(pts, 100);
    }

    /// A screened level whose frontiers are known by hand.
    fn screened_level() -> crate::frontier::Screening {
        use crate::frontier::{point, Family, Screened, Screening};
        Screening {
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
                // Far below every frontier: counted, not drawn.
                point(Family::Hlg, "far", 0.9, -9.0),
                Screened {
                    matched: false,
                    ..point(Family::Hlg, "unmatched", 0.5, -9.0)
                },
            ],
        }
    }

    #[test]
    fn a_level_draws_each_family_frontier_on_a_log_tail_axis() {
        use crate::frontier::Family;
        let level = screened_level();
        let svg = frontier_level(&level, &[("a & b", "shipped"), ("c", "auto")]);
        let t = texts(&svg);
        assert!(
            t.iter().any(|x| x.ends_with("(8 of 9 settings matched)")),
            "{t:?}"
        );
        assert!(
            t.iter()
                .any(|x| x == "1 settings below the frontiers&apos; range, not drawn"),
            "{t:?}"
        );
        // Min-p's own frontier: 0.05 (no tail: on the 1e-6 floor, left) and 0.02 (right
        // and higher); 0.1 is beaten by 0.02, so not labelled.
        let min_p = polylines(&svg, Family::MinP.color());
        let min_p = min_p
            .iter()
            .find(|l| l.len() == 2)
            .expect("min-p's frontier");
        assert!(
            min_p[0].0 < min_p[1].0 && min_p[0].1 > min_p[1].1,
            "{min_p:?}"
        );
        assert!(t.iter().any(|x| x == "0.05") && t.iter().any(|x| x == "0.02"));
        assert!(!t.iter().any(|x| x == "0.1"));
        // HLG's: "a & b" and "near" (c is beaten); "near" is drawn but not labelled; the
        // shipped knobs ringed at "a & b"'s point.
        let hlg = polylines(&svg, Family::Hlg.color());
        let hlg = hlg.iter().find(|l| l.len() == 2).expect("HLG's frontier");
        assert!(t.iter().any(|x| x == "a &amp; b"));
        assert!(!t
            .iter()
            .any(|x| x == "c" || x == "near" || x == "far" || x == "unmatched"));
        let c = circles(&svg);
        let rings: Vec<_> = c.iter().filter(|c| c.2 == 7.0).collect();
        assert_eq!(rings.len(), 2, "{rings:?}");
        assert!(
            hlg.iter()
                .any(|p| (p.0 - rings[0].0).abs() <= 1.0 && (p.1 - rings[0].1).abs() <= 1.0),
            "{rings:?} on {hlg:?}"
        );
        // "c", off the frontier, ringed where its faint dot is.
        assert!(
            c.iter().any(|d| d.2 == 2.0
                && (d.0 - rings[1].0).abs() <= 1.0
                && (d.1 - rings[1].1).abs() <= 1.0),
            "{rings:?}"
        );
        assert!(t.iter().any(|x| x == "shipped") && t.iter().any(|x| x == "auto"));
        // Faint dots: the 7 drawn settings (not the unmatched one, nor the far one).
        assert_eq!(c.iter().filter(|c| c.2 == 2.0).count(), 7);
        for tick in ["≤1e-6", "1e-5", "1e-3", "1e-1"] {
            assert!(t.iter().any(|x| x == tick), "tick {tick} in {t:?}");
        }
        assert!(t.iter().any(|x| x == "min-p (2 on its frontier)"));
        assert!(t.iter().any(|x| x == "top-nσ (0 on its frontier)"));
    }
}
