//! Properties of the slice kernel over random logits (proptest): monotone, argmax
//! unchanged, no NaN, C¹ at the knees, identity configs bit-exact, and within 1e-5
//! relative of an independent f64 evaluation.

mod common;

use mistralrs_hlg::{params::Span, CurveParts, HlgCurve, Pivot, ToeShape};
use proptest::prelude::*;

/// Every pivot mode, with an offset (which only `top` reads).
fn pivot() -> impl Strategy<Value = (Pivot, f32)> {
    (prop::sample::select(Pivot::ALL.to_vec()), 0.0f32..12.0)
}

fn shape() -> impl Strategy<Value = ToeShape> {
    prop::sample::select(ToeShape::ALL.to_vec())
}

fn beta() -> impl Strategy<Value = Option<f32>> {
    prop_oneof![4 => (0.05f32..50.0).prop_map(Some), 1 => Just(None)]
}

/// A width or offset: fixed nats, or (auto mode) a multiple of the vector's spread σ.
#[derive(Clone, Copy, Debug)]
enum Len {
    Nats(f32),
    Auto(f32),
}

fn len(nats: std::ops::Range<f32>) -> impl Strategy<Value = Len> {
    prop_oneof![3 => nats.prop_map(Len::Nats), 1 => (0.0f32..5.0).prop_map(Len::Auto)]
}

/// Curves with fixed and auto widths and offsets, every pivot, shape and `off`.
fn curve() -> impl Strategy<Value = HlgCurve> {
    (
        pivot(),
        len(0.0..12.0),
        prop_oneof![6 => len(0.0..10.0).prop_map(Some), 1 => Just(None)],
        beta(),
        beta(),
        shape(),
    )
        .prop_map(|((p, _), o, w, bh, bt, s)| {
            let c = HlgCurve::new(CurveParts {
                pivot: p,
                pivot_offset: Span::Nats(0.0),
                width: None,
                shoulder: bh,
                toe: bt,
                toe_shape: s,
            })
            .unwrap();
            let c = match o {
                Len::Nats(v) => c.with_pivot_offset(v),
                Len::Auto(k) => c.with_auto_pivot_offset(k),
            }
            .unwrap();
            match w {
                None => c,
                Some(Len::Nats(v)) => c.with_width(Some(v)).unwrap(),
                Some(Len::Auto(k)) => c.with_auto_width(k).unwrap(),
            }
        })
}

/// Logits: a mix of scales (up to 1e4), with some −inf entries.
fn logits() -> impl Strategy<Value = Vec<f32>> {
    let entry = prop_oneof![
        8 => -30.0f32..10.0,
        2 => -1e4f32..1e4,
        1 => Just(f32::NEG_INFINITY),
    ];
    prop::collection::vec(entry, 1..400)
}

fn applied(c: &HlgCurve, x: &[f32]) -> Vec<f32> {
    let mut y = x.to_vec();
    c.apply(&mut y);
    y
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn non_decreasing_in_x(c in curve(), x in logits()) {
        let y = applied(&c, &x);
        let mut pairs: Vec<(f32, f32)> = x.iter().copied().zip(y).collect();
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in pairs.windows(2) {
            prop_assert!(w[0].1 <= w[1].1, "{:?} -> {:?} not monotone", w[0], w[1]);
        }
    }

    #[test]
    fn argmax_unchanged_and_no_nan(c in curve(), x in logits()) {
        let y = applied(&c, &x);
        prop_assert!(y.iter().all(|v| !v.is_nan()));
        let am = |v: &[f32]| v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0))).unwrap().0;
        prop_assert_eq!(am(&x), am(&y));
        // −inf stays −inf.
        for (a, b) in x.iter().zip(&y) {
            if *a == f32::NEG_INFINITY {
                prop_assert_eq!(*b, f32::NEG_INFINITY);
            }
        }
    }

    #[test]
    fn close_to_f64_reference(c in curve(), x in logits()) {
        let (want, margin) = common::reference(&c, &x);
        // A median crossing within 1e-4 of one half could go either way in f32.
        prop_assume!(margin > 1e-4);
        let y = applied(&c, &x);
        for i in 0..x.len() {
            prop_assert!(common::close(y[i], &want[i]), "entry {}: x {} got {} want {} ± {} ({:?})", i, x[i], y[i], want[i].value, want[i].tol, c);
        }
    }

    #[test]
    fn identity_bit_exact(x in logits(), (p, o) in pivot(), s in shape(), w in 0.0f32..10.0) {
        for c in [
            HlgCurve::new(CurveParts { pivot: p, pivot_offset: Span::Nats(o), width: None, shoulder: Some(1.0), toe: Some(1.0), toe_shape: s }).unwrap(),
            HlgCurve::new(CurveParts { pivot: p, pivot_offset: Span::Nats(o), width: Some(Span::Nats(w)), shoulder: None, toe: None, toe_shape: s }).unwrap(),
            HlgCurve::new(CurveParts { pivot: p, pivot_offset: Span::Nats(o), width: None, shoulder: None, toe: None, toe_shape: s }).unwrap().with_auto_width(w).unwrap(),
            HlgCurve::new(CurveParts { pivot: p, pivot_offset: Span::Nats(0.0), width: None, shoulder: Some(1.0), toe: Some(1.0), toe_shape: s }).unwrap().with_auto_pivot_offset(o).unwrap(),
        ] {
            let y = applied(&c, &x);
            prop_assert_eq!(y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), x.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        }
    }

    /// With the top token at `offset` the pivot is exactly 0, so the knees sit at ±w.
    /// One-sided slopes over h = 1e-3 on each side of each knee agree within 1e-3.
    #[test]
    fn c1_at_the_knees(w in 0.0f32..8.0, bh in 2.0f32..50.0, bt in 2.0f32..50.0, s in shape()) {
        let offset = w + 1.0;
        let c = HlgCurve::new(CurveParts { pivot: Pivot::Top, pivot_offset: Span::Nats(offset), width: Some(Span::Nats(w)), shoulder: Some(bh), toe: Some(bt), toe_shape: s }).unwrap();
        let h = 1e-3f32;
        let probes = [w - h, w, w + h, -w + h, -w, -w - h];
        let mut x = vec![offset];
        x.extend(probes);
        let y = applied(&c, &x);
        let slope = |i: usize, j: usize| ((y[j] - y[i]) / (x[j] - x[i])) as f64;
        prop_assert!((slope(1, 2) - slope(2, 3)).abs() <= 1e-3, "upper knee: {} vs {}", slope(1, 2), slope(2, 3));
        prop_assert!((slope(6, 5) - slope(5, 4)).abs() <= 1e-3, "lower knee: {} vs {}", slope(6, 5), slope(5, 4));
    }
}

proptest! {
    /// Auto mode where σ = 0 (one finite entry among masked ones, or all finite entries
    /// equal): the curve is the identity, bit for bit, whatever the scales and sides.
    #[test]
    fn auto_mode_is_the_identity_where_the_spread_is_zero(
        v in -50.0f32..50.0, n in 1usize..300, masked in 0usize..50, (p, _) in pivot(),
        kw in 0.0f32..10.0, ko in 0.0f32..10.0, bh in beta(), bt in beta(), s in shape(), equal in any::<bool>(),
    ) {
        let mut x = vec![v; if equal { n } else { 1 }];
        x.extend(std::iter::repeat_n(f32::NEG_INFINITY, masked));
        let c = HlgCurve::new(CurveParts { pivot: p, pivot_offset: Span::Nats(0.0), width: None, shoulder: bh, toe: bt, toe_shape: s }).unwrap()
            .with_auto_width(kw).unwrap()
            .with_auto_pivot_offset(ko).unwrap();
        prop_assert_eq!(HlgCurve::spread_of(&x), Some(0.0));
        let y = applied(&c, &x);
        prop_assert_eq!(y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), x.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }

    /// The kernel's σ against the f64 two-pass one, within 1e-5 relative (plus 1e-6).
    #[test]
    fn spread_matches_the_f64_reference(x in logits()) {
        let got = HlgCurve::spread_of(&x);
        let want = common::sigma_f64(&x);
        prop_assert_eq!(got.is_some(), want.is_some());
        if let (Some(g), Some(w)) = (got, want) {
            prop_assert!((g as f64 - w).abs() <= 1e-5 * w + 1e-6, "{} vs {}", g, w);
        }
    }
}

/// A near-greedy distribution (the top token 12 nats above the rest) stays near-greedy
/// under auto mode with the shipped toe: σ is small, the band narrow, and the quadratic
/// toe holds the rest down, so the top's probability does not fall.
#[test]
fn near_greedy_stays_near_greedy_in_auto_mode() {
    let mut x = vec![-12.0f32; 1000];
    x[7] = 0.0;
    let p_top = |v: &[f32]| {
        let s: f64 = v.iter().map(|&u| (u as f64).exp()).sum();
        (v[7] as f64).exp() / s
    };
    let sigma = HlgCurve::spread_of(&x).unwrap();
    assert!(sigma > 0.0 && sigma < 2.0, "σ {sigma}");
    let c = HlgCurve::default()
        .with_auto_width(1.0)
        .unwrap()
        .with_auto_pivot_offset(2.0)
        .unwrap();
    let y = applied(&c, &x);
    assert!(p_top(&x) > 0.99, "{}", p_top(&x));
    assert!(p_top(&y) >= p_top(&x), "{} < {}", p_top(&y), p_top(&x));
}

/// The pivot never depends on where the finite entries sit among masked ones.
#[test]
fn masked_entries_do_not_move_the_pivot() {
    let x = [1.5f32, 0.2, -3.0, -7.5];
    let mut padded = vec![f32::NEG_INFINITY; 10];
    padded.extend(x);
    padded.push(f32::NAN);
    for c in [
        HlgCurve::default(),
        HlgCurve::default().with_pivot(Pivot::Entropy),
        HlgCurve::default().with_pivot(Pivot::Median),
    ] {
        assert_eq!(c.pivot_of(&x), c.pivot_of(&padded));
    }
}

/// The median pivot on a long vector (a flat bulk of 500 000 entries in [−½, ½], with
/// one strong entry raised step by step) in every depth band of the search (within 1, 3,
/// 6, 9, 12 and 18 nats of the top), where the candidates are collected at the coarse
/// depth and narrowed to the fine one, and with the top holding half the mass: it is the
/// f64 reference's entry in every case.
#[test]
fn median_of_long_vectors_in_every_depth_band() {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let x: Vec<f32> = (0..500_000)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    let c = HlgCurve::default().with_pivot(Pivot::Median);
    let mut depths = vec![];
    for top in [0.8f32, 2.5, 5.0, 8.0, 11.0, 12.8, 14.0] {
        // Nudged until the crossing sits clear of one half (neighbouring entries differ by
        // 2e-6 of the mass, so f32 sums could pick either).
        let (x, want) = (0..50)
            .find_map(|k| {
                let mut x = x.clone();
                x[123_457] = top + 0.01 * k as f32;
                let (want, margin) = common::pivot_f64(&c, &x).unwrap();
                (margin > 3e-7).then_some((x, want))
            })
            .expect("a clear crossing");
        let top = x[123_457];
        let got = c.pivot_of(&x).unwrap();
        assert_eq!(got as f64, want, "top {top}");
        depths.push(top - got);
    }
    let band = |lo: f32, hi: f32| depths.iter().any(|&d| d > lo && d <= hi);
    assert!(depths.contains(&0.0), "{depths:?}");
    for (lo, hi) in [
        (0.0, 1.0),
        (1.0, 3.0),
        (3.0, 6.0),
        (6.0, 9.0),
        (9.0, 12.0),
        (12.0, 18.0),
    ] {
        assert!(band(lo, hi), "no case in ({lo}, {hi}]: {depths:?}");
    }
}

/// Every accepted value, the bounds included: the range's ends, values near them, and
/// the middle of the range on a log scale.
fn accepted(min: f32) -> impl Strategy<Value = f32> {
    let max = mistralrs_hlg::params::MAX_NATS;
    prop_oneof![
        Just(min),
        Just(max),
        (min.max(1e-6).ln()..max.ln()).prop_map(f32::exp),
        0.0f32..1.0,
    ]
    .prop_map(move |v| v.clamp(min, max))
}

fn accepted_knob(min: f32) -> impl Strategy<Value = Option<f32>> {
    prop_oneof![5 => accepted(min).prop_map(Some), 1 => Just(None)]
}

/// Any accepted curve, extremes included, auto widths and offsets among them (their
/// scales over the whole accepted range).
fn any_accepted_curve() -> impl Strategy<Value = HlgCurve> {
    let beta = mistralrs_hlg::params::MIN_BETA;
    (
        prop::sample::select(Pivot::ALL.to_vec()),
        accepted(0.0),
        accepted_knob(0.0),
        accepted_knob(beta),
        accepted_knob(beta),
        shape(),
        (any::<bool>(), any::<bool>()),
    )
        .prop_map(|(p, o, w, bh, bt, s, (auto_o, auto_w))| {
            let c = HlgCurve::new(CurveParts {
                pivot: p,
                pivot_offset: Span::Nats(o),
                width: w.map(Span::Nats),
                shoulder: bh,
                toe: bt,
                toe_shape: s,
            })
            .expect("an accepted curve");
            let c = if auto_o {
                c.with_auto_pivot_offset(o).unwrap()
            } else {
                c
            };
            match w {
                Some(w) if auto_w => c.with_auto_width(w).unwrap(),
                _ => c,
            }
        })
}

/// Any finite logits, up to f32's largest magnitudes.
fn any_finite_logits() -> impl Strategy<Value = Vec<f32>> {
    let entry = prop_oneof![
        4 => -40.0f32..20.0,
        2 => -f32::MAX..f32::MAX,
        1 => prop_oneof![Just(f32::MAX), Just(-f32::MAX), Just(f32::MIN_POSITIVE), Just(0.0)],
    ];
    prop::collection::vec(entry, 1..300)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// The bound of every numeric field: for every accepted curve and every finite input,
    /// each output is finite or −inf and the top token's is finite, so the sampler always
    /// has a distribution (issue #18: `pivot_offset` 1e33 with a tiny shoulder sent every
    /// logit to +inf).
    #[test]
    fn accepted_curves_keep_finite_logits_usable(c in any_accepted_curve(), x in any_finite_logits()) {
        let y = applied(&c, &x);
        for (a, b) in x.iter().zip(&y) {
            prop_assert!(b.is_finite() || *b == f32::NEG_INFINITY, "{c:?}: {a} -> {b}");
        }
        let top = x.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
        prop_assert!(y[top].is_finite(), "{c:?}: the top logit {} -> {}", x[top], y[top]);
    }
}

#[test]
fn the_bounds_are_the_accepted_ranges() {
    use mistralrs_hlg::params::{MAX_NATS, MIN_BETA};
    let nats = |v: f32| Some(Span::Nats(v));
    let edge = CurveParts {
        pivot: Pivot::Top,
        pivot_offset: Span::Nats(MAX_NATS),
        width: nats(MAX_NATS),
        shoulder: Some(MAX_NATS),
        toe: Some(MIN_BETA),
        toe_shape: ToeShape::Exp,
    };
    assert!(HlgCurve::new(edge).is_ok());
    let base = CurveParts {
        pivot_offset: Span::Nats(1.0),
        width: None,
        shoulder: None,
        toe: None,
        ..edge
    };
    for (param, bad) in [
        (
            "hlg.pivot_offset",
            CurveParts {
                pivot_offset: Span::Nats(MAX_NATS * 1.001),
                ..base
            },
        ),
        (
            "hlg.width",
            CurveParts {
                width: nats(1001.0),
                ..base
            },
        ),
        (
            "hlg.shoulder",
            CurveParts {
                shoulder: Some(1e6),
                ..base
            },
        ),
        (
            "hlg.toe",
            CurveParts {
                toe: Some(MAX_NATS + 1.0),
                ..base
            },
        ),
    ] {
        assert_eq!(HlgCurve::new(bad).unwrap_err().param(), param, "{bad:?}");
    }
}
