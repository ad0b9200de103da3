//! Small vectors with expected outputs worked out by hand (in f64), for every pivot
//! mode, every toe shape and every `off` combination (DESIGN.md §2).

mod common;

use common::nats_curve as curve;
use mistralrs_hlg::{HlgCurve, Pivot, ToeShape};

const NEG: f32 = f32::NEG_INFINITY;
const NEG64: f64 = f64::NEG_INFINITY;

fn check(name: &str, c: &HlgCurve, x: &[f32], want: &[f64]) {
    let mut y = x.to_vec();
    c.apply(&mut y);
    for (i, (&got, &w)) in y.iter().zip(want).enumerate() {
        if w.is_infinite() {
            assert_eq!(got as f64, w, "{name}: entry {i} of {x:?}");
        } else {
            assert!(
                (got as f64 - w).abs() <= 1e-5 * w.abs().max(1.0),
                "{name}: entry {i}: {got} vs {w} ({c:?})"
            );
        }
    }
}

// Top pivot: m = 0, offset 6 → c = −6; z = [6, 5, 1, −4, −10, −inf]; w = 4, β_h = 4, β_t = 6.
// shoulder: −6 + 4 + 4·ln(1 + (z − 4)/4); toe, d = 6: log −10 − 6·ln 2, quadratic −10 − 6 − 3,
// exp −10 − 6·(e − 1).
const TOP_X: [f32; 6] = [0.0, -1.0, -5.0, -10.0, -16.0, NEG];
/// The shoulder's outputs for the top two entries of [`TOP_X`].
const TOP_SHOULDER: [f64; 2] = [-0.378_139_567_567_342_5, -1.107_425_794_743_161];

// Entropy pivot: x = [ln 3, 0, −3]; c = Σ p·x = 0.7769484192088211. With w = 0.5 the top
// (z = 0.32) stays in the band; 0 and −3 fall in the toe (β_t = 1).
const ENTROPY_X: [f32; 3] = [1.098_612_3, 0.0, -3.0];

// Median pivot: masses e^x = [1, .9048, .8187, .7408, .0067], total 3.4711; half 1.7356 is
// first reached at the second token, so c = −0.1. w = 0.05, β_h = 0.5, β_t = 2.
const MEDIAN_X: [f32; 6] = [0.0, -0.1, -0.2, -0.3, -5.0, NEG];

/// Every hand-worked case: a name, the curve, the input and the expected output. One row
/// a case, as a table reads (rustfmt would spread each over a dozen lines).
#[rustfmt::skip]
fn cases() -> Vec<(&'static str, HlgCurve, &'static [f32], Vec<f64>)> {
    use ToeShape::{Exp, Log, Quadratic};
    let top = |w, bh, bt, shape| curve((Pivot::Top, 6.0), w, bh, bt, shape);
    let entropy = |shape| curve((Pivot::Entropy, 0.0), Some(0.5), Some(1.0), Some(1.0), shape);
    let median = |shape| curve((Pivot::Median, 0.0), Some(0.05), Some(0.5), Some(2.0), shape);
    let [s0, s1] = TOP_SHOULDER;
    vec![
        ("top log", top(Some(4.0), Some(4.0), Some(6.0), Log), &TOP_X, vec![s0, s1, -5.0, -10.0, -14.158_883_083_359_672, NEG64]),
        ("top quadratic", top(Some(4.0), Some(4.0), Some(6.0), Quadratic), &TOP_X, vec![s0, s1, -5.0, -10.0, -19.0, NEG64]),
        ("top exp", top(Some(4.0), Some(4.0), Some(6.0), Exp), &TOP_X, vec![s0, s1, -5.0, -10.0, -20.309_690_970_754_27, NEG64]),
        // Shoulder off: the top side continues linearly (untouched); the toe still acts.
        ("top, shoulder off", top(Some(4.0), None, Some(6.0), Quadratic), &TOP_X, vec![0.0, -1.0, -5.0, -10.0, -19.0, NEG64]),
        // Toe off: only the shoulder acts.
        ("top, toe off", top(Some(4.0), Some(4.0), None, Exp), &TOP_X, vec![s0, s1, -5.0, -10.0, -16.0, NEG64]),
        // Width 0: every finite entry but the pivot itself is outside the band. z = 6 →
        // −6 + 4·ln 2.5; z = 5 → −6 + 4·ln 2.25; z = 1 → −6 + 4·ln 1.25; z = −4 → −6 − 4 −
        // 16/12; z = −10 → −6 − 10 − 100/12.
        ("top, width 0", top(Some(0.0), Some(4.0), Some(6.0), Quadratic), &TOP_X[..5], vec![-2.334_836_981_350_527, -2.756_279_135_134_685, -5.107_425_794_743_161, -11.333_333_333_333_334, -24.333_333_333_333_332]),
        ("entropy log", entropy(Log), &ENTROPY_X, vec![1.098_612_288_668_109_8, 0.032_475_235_136_442_9, -1.176_291_349_923_204_6]),
        ("entropy quadratic", entropy(Quadratic), &ENTROPY_X, vec![1.098_612_288_668_109_8, -0.038_350_213_451_132_43, -8.369_195_471_077_594]),
        ("entropy exp", entropy(Exp), &ENTROPY_X, vec![1.098_612_288_668_109_8, -0.042_149_909_935_865_54, -25.217_849_776_141_94]),
        ("median log", median(Log), &MEDIAN_X, vec![-0.002_344_910_097_837_577, -0.1, -0.199_385_225_180_743, -0.294_641_323_159_252_2, -2.612_202_943_428_377, NEG64]),
        ("median quadratic", median(Quadratic), &MEDIAN_X, vec![-0.002_344_910_097_837_577, -0.1, -0.200_625, -0.305_625, -10.880_625, NEG64]),
    ]
}

#[test]
fn hand_worked_tables() {
    for (name, c, x, want) in cases() {
        check(name, &c, x, &want);
    }
}

#[test]
fn the_pivots_of_the_tables() {
    let e = curve(
        (Pivot::Entropy, 0.0),
        Some(0.5),
        Some(1.0),
        Some(1.0),
        ToeShape::Log,
    );
    assert!((e.pivot_of(&ENTROPY_X).unwrap() as f64 - 0.776_948_419_208_821_1).abs() < 1e-6);
    let m = curve(
        (Pivot::Median, 0.0),
        Some(0.05),
        Some(0.5),
        Some(2.0),
        ToeShape::Log,
    );
    assert_eq!(m.pivot_of(&MEDIAN_X), Some(-0.1));
}

#[test]
fn identity_configs_are_bit_exact() {
    let x = [
        3.5f32,
        1e-3,
        -2.25,
        -40.0,
        NEG,
        f32::NAN,
        f32::INFINITY,
        1e4,
        -1e4,
    ];
    for c in [
        HlgCurve::identity(),
        curve((Pivot::Entropy, 0.0), Some(0.0), None, None, ToeShape::Exp),
        curve(
            (Pivot::Median, 0.0),
            None,
            Some(0.1),
            Some(0.1),
            ToeShape::Log,
        ),
    ] {
        assert!(c.is_identity());
        let mut y = x;
        c.apply(&mut y);
        assert_eq!(y.map(f32::to_bits), x.map(f32::to_bits), "{c:?}");
    }
}

#[test]
fn median_cases() {
    let c = curve(
        (Pivot::Median, 0.0),
        Some(1.0),
        Some(1.0),
        Some(1.0),
        ToeShape::Log,
    );
    // The top token holds more than half: the median is the top.
    assert_eq!(c.pivot_of(&[2.0, 1.0, 0.0, -1.0]), Some(2.0));
    // Ties: three equal tokens; half the mass is reached inside the tie.
    assert_eq!(c.pivot_of(&[0.0, -10.0, 0.0, 0.0]), Some(0.0));
    // A flat vector of 10 000 tokens, far below the collection depths: exact middle.
    let flat: Vec<f32> = (0..10_000).map(|i| -(i as f32) * 1e-2).collect();
    let (want, _) = {
        let w: Vec<f64> = flat.iter().map(|&v| (v as f64).exp()).collect();
        let s: f64 = w.iter().sum();
        let mut cum = 0.0;
        let i = w.iter().position(|e| {
            cum += e;
            cum >= 0.5 * s
        });
        (flat[i.unwrap()], s)
    };
    assert_eq!(c.pivot_of(&flat), Some(want));
    // Order does not matter.
    let mut rev = flat.clone();
    rev.reverse();
    assert_eq!(c.pivot_of(&rev), Some(want));
}

#[test]
fn non_finite_entries() {
    let c = HlgCurve::default();
    // No finite entry: unchanged.
    let mut y = [NEG, f32::NAN, f32::INFINITY];
    c.apply(&mut y);
    assert_eq!(y[0], NEG);
    assert!(y[1].is_nan());
    assert_eq!(y[2], f32::INFINITY);
    // NaN and +inf are ignored by the pivot and passed through.
    let mut a = [0.0f32, -16.0, f32::NAN, f32::INFINITY, NEG];
    let mut b = [0.0f32, -16.0];
    c.apply(&mut a);
    c.apply(&mut b);
    assert_eq!(&a[..2], &b);
    assert!(a[2].is_nan());
    assert_eq!(a[3], f32::INFINITY);
    assert_eq!(a[4], NEG);
    // Empty input.
    c.apply(&mut []);
}

#[test]
fn exp_toe_far_tail_is_negative_not_nan() {
    let c = curve(
        (Pivot::Top, 0.0),
        Some(0.0),
        Some(1.0),
        Some(0.01),
        ToeShape::Exp,
    );
    let mut y = [0.0f32, -1.0, -1e4, -3e38];
    c.apply(&mut y);
    assert!(y.iter().all(|v| !v.is_nan()));
    assert_eq!(y[2], NEG);
    assert!(y[1] < -1e30 || y[1] == NEG);
}

#[test]
fn rows_have_their_own_pivot() {
    let c = HlgCurve::default();
    let rows = [[0.0f32, -3.0, -16.0], [100.0, 97.0, 84.0]];
    let mut batch: Vec<f32> = rows.concat();
    c.apply_rows(&mut batch, 3);
    for (r, row) in rows.iter().enumerate() {
        let mut one = *row;
        c.apply(&mut one);
        assert_eq!(&batch[r * 3..r * 3 + 3], &one);
    }
}

// Auto mode on x = [0, −1, −10]: p = softmax(x), σ² = Σ p (x − Σ p x)², σ = 0.446 931 848 7;
// width 1.5σ = 0.670 397 773, β_h = 2, β_t = 1, quadratic toe.
// top, offset 2σ: c = −0.893 863 697; z = [0.894, −0.106, −9.106]: shoulder, mid, toe
// (d = 8.436: c − w − d − d²/2). entropy: c = Σ p x = −0.269 264 385; z = [0.269, −0.731,
// −9.731]: mid, toe (d = 0.0603), toe.
#[test]
fn auto_width_and_offset() {
    let x = [0.0f32, -1.0, -10.0, NEG];
    let sigma = HlgCurve::spread_of(&x).unwrap() as f64;
    assert!((sigma - 0.446_931_848_676_951_5).abs() < 1e-6, "σ {sigma}");
    let base = curve(
        (Pivot::Top, 0.0),
        None,
        Some(2.0),
        Some(1.0),
        ToeShape::Quadratic,
    )
    .with_auto_width(1.5)
    .unwrap();
    let top = base.with_auto_pivot_offset(2.0).unwrap();
    let want = [
        -0.011_625_874_227_354_255,
        -1.0,
        -45.580_842_270_147_71,
        NEG64,
    ];
    check("auto, top", &top, &x, &want);
    let entropy = base.with_pivot(Pivot::Entropy);
    let want = [0.0, -1.001_820_327_613_978_5, -51.044_860_909_398_19, NEG64];
    check("auto, entropy", &entropy, &x, &want);
}
