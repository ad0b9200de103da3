//! An independent f64 evaluation of DESIGN.md §2, for the kernel and backend tests.
#![allow(dead_code)]

use mistralrs_hlg::params::Span;
use mistralrs_hlg::{CurveParts, HlgCurve, Pivot, ToeShape};

/// A curve with every length in nats: `pivot` is the mode and its offset (which only
/// `top` reads), then the width, the shoulder and the toe (`None`: off), and the toe shape.
pub fn nats_curve(
    (pivot, offset): (Pivot, f32),
    w: Option<f32>,
    bh: Option<f32>,
    bt: Option<f32>,
    shape: ToeShape,
) -> HlgCurve {
    HlgCurve::new(CurveParts {
        pivot,
        pivot_offset: Span::Nats(offset),
        width: w.map(Span::Nats),
        shoulder: bh,
        toe: bt,
        toe_shape: shape,
    })
    .unwrap()
}

/// The finite entries in f64, their max, and their weights `exp(x − max)`.
fn weights_f64(x: &[f32]) -> Option<(Vec<f64>, f64, Vec<f64>)> {
    let fin: Vec<f64> = x
        .iter()
        .filter(|v| v.is_finite())
        .map(|&v| v as f64)
        .collect();
    let m = fin.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if fin.is_empty() {
        return None;
    }
    let w: Vec<f64> = fin.iter().map(|v| (v - m).exp()).collect();
    Some((fin, m, w))
}

/// σ in f64: the standard deviation of the finite logits under `p = softmax(x)`, by two
/// passes (the mean, then the squared deviations), with exact exponentials.
pub fn sigma_f64(x: &[f32]) -> Option<f64> {
    let (fin, _, w) = weights_f64(x)?;
    let s: f64 = w.iter().sum();
    let mean = fin.iter().zip(&w).map(|(v, e)| v * e).sum::<f64>() / s;
    let var = fin
        .iter()
        .zip(&w)
        .map(|(v, e)| e * (v - mean) * (v - mean))
        .sum::<f64>()
        / s;
    Some(var.sqrt())
}

/// A span in nats at spread `sigma`, in f64 (auto: `scale·σ`, at most 1000).
pub fn span_f64(span: Span, sigma: f64) -> f64 {
    match span {
        Span::Nats(v) => v as f64,
        Span::Auto(k) => (k as f64 * sigma).min(1000.0),
    }
}

/// The half-width in f64 for this vector (`+inf` when off).
pub fn width_f64(curve: &HlgCurve, x: &[f32]) -> f64 {
    let sigma = sigma_f64(x).unwrap_or(0.0);
    curve.width().map_or(f64::INFINITY, |w| span_f64(w, sigma))
}

/// The pivot in f64 with exact exponentials and a full sort, plus, for the median, how
/// far (as a share of the total mass) the cumulative mass before the crossing sits from
/// one half: a tiny margin means a rounding could pick the neighbour.
pub fn pivot_f64(curve: &HlgCurve, x: &[f32]) -> Option<(f64, f64)> {
    let (fin, m, w) = weights_f64(x)?;
    let s: f64 = w.iter().sum();
    Some(match curve.pivot() {
        Pivot::Top => {
            let sigma = sigma_f64(x).unwrap_or(0.0);
            (m - span_f64(curve.pivot_offset(), sigma), 1.0)
        }
        Pivot::Entropy => (fin.iter().zip(&w).map(|(v, e)| v * e).sum::<f64>() / s, 1.0),
        Pivot::Median => {
            let mut idx: Vec<usize> = (0..fin.len()).collect();
            idx.sort_by(|&a, &b| fin[b].total_cmp(&fin[a]));
            let mut cum = 0.0;
            let mut margin = 1.0f64;
            let mut out = fin[idx[0]];
            for &i in &idx {
                margin = margin.min(((cum - 0.5 * s) / s).abs());
                cum += w[i];
                margin = margin.min(((cum - 0.5 * s) / s).abs());
                if cum >= 0.5 * s {
                    out = fin[i];
                    break;
                }
            }
            (out, margin)
        }
    })
}

/// The unit-gain curve with half-width `w`, written out from the contract (not the
/// crate's `g1`); `None` in the band.
pub fn g1_f64(curve: &HlgCurve, w: f64, z: f64) -> Option<f64> {
    if w == f64::INFINITY {
        return None;
    }
    if z > w {
        let b = curve.shoulder()? as f64;
        Some(w + b * ((z - w) / b).ln_1p())
    } else if z < -w {
        let b = curve.toe()? as f64;
        let d = -z - w;
        Some(match curve.toe_shape() {
            ToeShape::Log => -w - b * (d / b).ln_1p(),
            ToeShape::Quadratic => -w - d - d * d / (2.0 * b),
            ToeShape::Exp => -w - b * (d / b).exp_m1(),
        })
    } else {
        None
    }
}

/// The slope `g₁'(z)` (1 in the band and on a side that is off).
pub fn slope_f64(curve: &HlgCurve, w: f64, z: f64) -> f64 {
    let h = 1e-6 * z.abs().max(1.0);
    if z.abs() <= w {
        return 1.0;
    }
    let g = |z: f64| g1_f64(curve, w, z).unwrap_or(z);
    ((g(z + h) - g(z - h)) / (2.0 * h)).abs()
}

/// How far the f32 pipeline's pivot and knees may sit from the f64 ones, in nats: 4 ulp
/// of the pivot (times the slope), plus, for an auto span, 1e-5 of it (σ's f32 sums and
/// rounding; times one plus the slope: it moves the knee and the pivot).
struct Slack {
    ulp_c: f64,
    spans: f64,
}

impl Slack {
    fn new(curve: &HlgCurve, c: f32, x: &[f32]) -> Slack {
        let sigma = sigma_f64(x).unwrap_or(0.0);
        let auto = |s: Option<Span>| match s {
            Some(a @ Span::Auto(_)) => 1e-5 * span_f64(a, sigma) + 1e-6,
            _ => 0.0,
        };
        Slack {
            ulp_c: (c.abs().next_up() - c.abs()) as f64,
            spans: auto(curve.width()) + auto(Some(curve.pivot_offset())),
        }
    }

    fn at(&self, slope: f64) -> f64 {
        4.0 * self.ulp_c * slope + self.spans * (1.0 + slope)
    }
}

/// One expected output: the value and the tolerance that goes with it.
pub struct Expected {
    pub value: f64,
    pub tol: f64,
}

/// The whole transform: `x` where untouched, `c + g₁(z)` elsewhere, with `c` and `z`
/// rounded to f32 as the contract's inputs are (the kernel's `z` is an f32) and the rest
/// in f64. The tolerance is 1e-5 relative (of `max(1, |out|, |x|)`) plus the curve's slope
/// plus one times the knees' slack (4 ulp of `c` for the f32 pivot of entropy and median,
/// and the f32 rounding of σ for an auto span).
pub fn reference(curve: &HlgCurve, x: &[f32]) -> (Vec<Expected>, f64) {
    let Some((c, margin)) = pivot_f64(curve, x) else {
        return (
            x.iter()
                .map(|&v| Expected {
                    value: v as f64,
                    tol: 0.0,
                })
                .collect(),
            1.0,
        );
    };
    let c32 = c as f32;
    let w = width_f64(curve, x);
    let slack = Slack::new(curve, c32, x);
    let out = x
        .iter()
        .map(|&v| {
            let xv = v as f64;
            if !v.is_finite() {
                return Expected {
                    value: xv,
                    tol: 0.0,
                };
            }
            let z = (v - c32) as f64;
            let value = match g1_f64(curve, w, z) {
                Some(g) => c32 as f64 + g,
                None => xv,
            };
            let slope = slope_f64(curve, w, z);
            let tol = 1e-5 * 1f64.max(value.abs()).max(xv.abs()) + slack.at(slope);
            Expected { value, tol }
        })
        .collect();
    (out, margin)
}

/// Within tolerance, with values beyond f32 on the same side counting as equal.
pub fn close(got: f32, want: &Expected) -> bool {
    if want.value.is_nan() {
        return got.is_nan();
    }
    if want.value.abs() > 1e37 || got.abs() > 1e37 {
        return got.is_sign_negative() == want.value.is_sign_negative()
            && got.abs() > 1e37
            && want.value.abs() > 1e37;
    }
    if want.tol == 0.0 {
        return got as f64 == want.value;
    }
    (got as f64 - want.value).abs() <= want.tol
}

/// The curves the tensor backends are checked on: every pivot mode and toe shape, with
/// every `off` combination of width, shoulder and toe, and auto widths and offsets.
pub fn every_curve() -> Vec<HlgCurve> {
    let mut out = vec![];
    for (pivot, offset) in [
        (Pivot::Top, 6.0),
        (Pivot::Top, 0.5),
        (Pivot::Entropy, 0.0),
        (Pivot::Median, 0.0),
    ] {
        for shape in ToeShape::ALL {
            for (w, bh, bt) in [
                (Some(4.0), Some(4.0), Some(6.0)),
                (Some(1.0), Some(0.5), Some(2.0)),
                (Some(0.0), Some(3.0), Some(3.0)),
                (Some(2.0), None, Some(3.0)),
                (Some(2.0), Some(3.0), None),
                (Some(2.0), None, None),
                (None, Some(3.0), Some(3.0)),
            ] {
                out.push(nats_curve((pivot, offset), w, bh, bt, shape));
            }
            // Auto mode: a σ per row for the width, and for the offset (`top`).
            let auto = nats_curve((pivot, offset), None, Some(2.0), Some(1.0), shape);
            out.push(auto.with_auto_width(1.5).unwrap());
            out.push(
                auto.with_auto_width(0.5)
                    .and_then(|c| c.with_auto_pivot_offset(2.0))
                    .unwrap(),
            );
        }
    }
    out
}

pub fn kernel(c: &HlgCurve, x: &[f32]) -> Vec<f32> {
    let mut y = x.to_vec();
    c.apply(&mut y);
    y
}

/// The largest difference between a tensor backend and the kernel, in units of the allowed
/// error: 1e-5 × max(1, |kernel value|) (absolute within ±1, relative beyond: the exp toe
/// reaches 1e6 and more, where an f32 ulp exceeds 1e-5), plus the curve's slope times 4 ulp
/// of the pivot, since the two compute the entropy and median pivots with different
/// (equally valid) roundings and a steep toe amplifies that.
pub fn worst(c: &HlgCurve, x: &[f32], got: &[f32]) -> f32 {
    let want = kernel(c, x);
    let pivot = c.pivot_of(x).unwrap_or(0.0);
    let w = width_f64(c, x);
    let slack = Slack::new(c, pivot, x);
    got.iter()
        .zip(&want)
        .zip(x)
        .map(|((&p, &q), &xv)| {
            if p == q || (p.is_nan() && q.is_nan()) {
                return 0.0;
            }
            // Beyond 1e37 on the same side counts as equal (as in `close`): where the exp
            // toe overflows to −inf depends on the last bit of the knee, and an auto
            // width's σ is summed in another order by each backend.
            if p.abs() > 1e37 && q.abs() > 1e37 && p.is_sign_negative() == q.is_sign_negative() {
                return 0.0;
            }
            let slope = slope_f64(c, w, (xv - pivot) as f64);
            (p - q).abs() / (1e-5 * q.abs().max(1.0) + slack.at(slope) as f32)
        })
        .fold(0.0, f32::max)
}

/// A half-precision backend's output against the kernel's output rounded to the same
/// type (both read back as f32): equal, or one unit in the last place of the half type
/// apart (`f16`: 10 mantissa bits, else bf16: 7).
pub fn assert_within_half_ulp(f16: bool, got: &[f32], want: &[f32], what: &str) {
    for (g, w) in got.iter().zip(want) {
        if g == w {
            continue;
        }
        let ulp = if f16 { 2f32.powi(-10) } else { 2f32.powi(-7) } * w.abs().max(1.0);
        assert!((g - w).abs() <= ulp, "{what}: {g} vs {w}");
    }
}

/// What is wrong with a tensor backend's output `got` for the input `x`, if anything: a
/// difference beyond [`worst`]'s tolerance, or a −inf input that did not stay −inf.
pub fn mismatch(c: &HlgCurve, x: &[f32], got: &[f32]) -> Option<String> {
    let d = worst(c, x, got);
    if d > 1.0 {
        return Some(format!("difference {d} of the tolerance for {c:?}"));
    }
    x.iter()
        .zip(got)
        .position(|(a, b)| *a == f32::NEG_INFINITY && *b != f32::NEG_INFINITY)
        .map(|i| format!("−inf at {i} came out {} for {c:?}", got[i]))
}

/// Rows for the tensor backends' property tests: up to 300 logits in [−25, 8), some −inf.
pub fn backend_logits() -> impl proptest::strategy::Strategy<Value = Vec<f32>> {
    use proptest::prelude::*;
    prop::collection::vec(
        prop_oneof![10 => -25.0f32..8.0, 1 => Just(f32::NEG_INFINITY)],
        2..300,
    )
}

/// A tensor backend as the parity tests drive it: `rows` rows of `x` (row-major) through
/// the curve, out as row-major f32.
pub type Run<'a> = &'a dyn Fn(&HlgCurve, &[f32], usize) -> Vec<f32>;

/// Every curve of [`every_curve`] that `keep` takes on `x`, through `run` as one row,
/// against the kernel: the first mismatch, if any.
pub fn rank1_parity(
    run: Run,
    x: &[f32],
    keep: impl Fn(&HlgCurve, &[f32]) -> bool,
) -> Result<(), String> {
    for c in every_curve().into_iter().filter(|c| keep(c, x)) {
        if let Some(bad) = mismatch(&c, x, &run(&c, x, 1)) {
            return Err(bad);
        }
    }
    Ok(())
}

/// Rows `a` and `a·scale + shift` as one batch of two through `run`: each row within the
/// kernel's tolerance on its own (a pivot per row, nothing shared between rows).
pub fn batch_parity(
    run: Run,
    a: &[f32],
    (shift, scale): (f32, f32),
    keep: impl Fn(&HlgCurve, &[f32]) -> bool,
) -> Result<(), String> {
    let b: Vec<f32> = a.iter().map(|v| v * scale + shift).collect();
    let n = a.len();
    let batch = [a, &b[..]].concat();
    for c in every_curve()
        .into_iter()
        .filter(|c| keep(c, a) && keep(c, &b))
    {
        let out = run(&c, &batch, 2);
        for (row, got) in [a, &b[..]].into_iter().zip(out.chunks(n)) {
            let d = worst(&c, row, got);
            if d > 1.0 {
                return Err(format!("{d} of the tolerance for {c:?}"));
            }
        }
    }
    Ok(())
}
