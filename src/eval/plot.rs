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
        let (l, r, t, b) = (ox + 50.0, ox + pw - 12.0, oy + 22.0, oy + ph - 40.0);
        // On a log axis every value is placed by its log10.
        let tf = |v: f64| {
            if p.log_y {
                if v > 0.0 {
                    v.log10()
                } else {
                    f64::NAN
                }
            } else {
                v
            }
        };
        let label = |v: f64| {
            if p.log_y {
                format!("1e{}", (v * 10.0).round() / 10.0)
            } else {
                fmt_num(v)
            }
        };
        let ys = p
            .series
            .iter()
            .flat_map(|s| s.ys.iter().flatten().copied())
            .chain(p.reference.map(|r| r.0))
            .map(tf)
            .filter(|v| v.is_finite());
        let (mut lo, mut hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        if hi - lo < 1e-12 {
            hi = lo + 1.0;
        }
        let n = p.xs.len().max(2) as f64;
        let px = |i: usize| l + (r - l) * i as f64 / (n - 1.0);
        let py = |v: f64| b - (b - t) * (v - lo) / (hi - lo);
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
            label(hi),
            l - 4.0,
            b,
            label(lo)
        );
        for (i, x) in p.xs.iter().enumerate() {
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                px(i),
                b + 14.0,
                escape(x)
            );
        }
        if let Some((v, name)) = p.reference.filter(|r| tf(r.0).is_finite()) {
            let v = tf(v);
            let _ = write!(
                s,
                r##"<line x1="{l:.1}" x2="{r:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#888" stroke-dasharray="5,4"/><text x="{:.1}" y="{:.1}" fill="#888" text-anchor="end">{}</text>"##,
                r - 2.0,
                py(v) - 3.0,
                escape(name),
                y = py(v)
            );
        }
        for (j, se) in p.series.iter().enumerate() {
            let pts: Vec<String> = se
                .ys
                .iter()
                .enumerate()
                .filter_map(|(i, y)| {
                    y.map(tf)
                        .filter(|v| v.is_finite())
                        .map(|v| format!("{:.1},{:.1}", px(i), py(v)))
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
                l + 70.0 * j as f64,
                b + 30.0,
                se.color,
                escape(se.name)
            );
        }
    }
    s.push_str("</svg>\n");
    s
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
