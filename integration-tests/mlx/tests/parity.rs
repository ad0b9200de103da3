//! The mlx backend (MLX's CPU backend here; the same ops run on Metal on Apple silicon)
//! against the slice kernel: every pivot mode, toe shape and `off` combination; rows of a
//! batch independent; −inf preserved; identity configs exact; f16 and bf16 in, same out.

#[path = "../../../tests/common/mod.rs"]
mod common;

use common::{every_curve, kernel, worst};
use mistralrs_hlg::{backend::mlx::apply, params::Span, CurveParts, HlgCurve, Pivot};
use mlx_rs::{Array, Dtype};
use proptest::prelude::*;

fn run(c: &HlgCurve, x: &Array) -> Vec<f32> {
    let y = apply(c, x).unwrap();
    assert_eq!(y.shape(), x.shape());
    assert_eq!(y.dtype(), x.dtype());
    y.as_dtype(Dtype::Float32)
        .unwrap()
        .as_slice::<f32>()
        .to_vec()
}

/// `rows` rows of `x` as an f32 array (`[V]` for one row) through the backend.
fn run_rows(c: &HlgCurve, x: &[f32], rows: usize) -> Vec<f32> {
    let shape = match rows {
        1 => vec![x.len() as i32],
        _ => vec![rows as i32, (x.len() / rows) as i32],
    };
    run(c, &Array::from_slice(x, &shape))
}

/// A median whose crossing lies within 1e-4 of one half could go either way in f32 (the
/// backend adds the weights in another order than the kernel): those cases are skipped.
fn comparable(c: &HlgCurve, x: &[f32]) -> bool {
    c.pivot() != Pivot::Median || common::pivot_f64(c, x).is_none_or(|(_, margin)| margin > 1e-4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn rank1_matches_kernel(x in common::backend_logits()) {
        let r = common::rank1_parity(&run_rows, &x, comparable);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    #[test]
    fn batch_rows_are_independent(a in common::backend_logits(), shift in -50.0f32..50.0, scale in 0.2f32..3.0) {
        let r = common::batch_parity(&run_rows, &a, (shift, scale), comparable);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

/// A vocabulary-sized row: the same tolerance at V = 49152, where the sums are long.
#[test]
fn vocabulary_sized_rows_match_kernel() {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let x: Vec<f32> = (0..49_152)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 30.0 - 22.0
        })
        .collect();
    let a = Array::from_slice(&x, &[x.len() as i32]);
    for c in every_curve().into_iter().filter(|c| comparable(c, &x)) {
        let d = worst(&c, &x, &run(&c, &a));
        assert!(d <= 1.0, "{d} of the tolerance for {c:?}");
    }
}

#[test]
fn identity_and_non_finite_rows() {
    let x = [1.0f32, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -3.0];
    let a = Array::from_slice(&x, &[5]);
    for c in [
        HlgCurve::identity(),
        HlgCurve::new(CurveParts {
            pivot: Pivot::Entropy,
            pivot_offset: Span::Nats(0.0),
            width: Some(Span::Nats(2.0)),
            shoulder: None,
            toe: None,
            toe_shape: Default::default(),
        })
        .unwrap(),
    ] {
        let same = run(&c, &a);
        assert_eq!(
            same.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            x.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
    // A row without finite entries comes back unchanged, next to a normal row.
    let rows = Array::from_slice(&[f32::NEG_INFINITY, f32::NAN, 0.0, -20.0], &[2, 2]);
    for c in every_curve() {
        let out = run(&c, &rows);
        assert_eq!(out[0], f32::NEG_INFINITY);
        assert!(out[1].is_nan());
        assert!(worst(&c, &[0.0, -20.0], &out[2..]) <= 1.0, "{c:?}");
        assert_eq!(
            kernel(&c, &[f32::NEG_INFINITY, f32::NAN])[0],
            f32::NEG_INFINITY
        );
    }
}

#[test]
fn half_precision_in_same_dtype_out() {
    let x: Vec<f32> = (0..64).map(|i| 4.0 - i as f32 * 0.37).collect();
    for dtype in [Dtype::Float16, Dtype::Bfloat16] {
        let a = Array::from_slice(&x, &[64]).as_dtype(dtype).unwrap();
        let rounded = a
            .as_dtype(Dtype::Float32)
            .unwrap()
            .as_slice::<f32>()
            .to_vec();
        for c in every_curve() {
            let got = run(&c, &a);
            // The kernel on the rounded input, rounded to the same dtype.
            let want = Array::from_slice(&kernel(&c, &rounded), &[64])
                .as_dtype(dtype)
                .unwrap()
                .as_dtype(Dtype::Float32)
                .unwrap();
            common::assert_within_half_ulp(
                dtype == Dtype::Float16,
                &got,
                want.as_slice::<f32>(),
                &format!("{dtype:?} {c:?}"),
            );
        }
    }
}

#[test]
fn rank_three_is_an_error_not_a_panic() {
    let a = Array::from_slice(&[0f32; 8], &[2, 2, 2]);
    let err = apply(&HlgCurve::default(), &a).unwrap_err();
    assert!(err.what().contains("rank 3"), "{}", err.what());
}
