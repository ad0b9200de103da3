//! The candle backend (CPU device) against the slice kernel.
#![cfg(feature = "candle")]

mod common;

use candle_core::{DType, Device, Tensor};
use common::{every_curve, kernel, worst};
use mistralrs_hlg::{backend::candle::apply, HlgCurve};
use proptest::prelude::*;

/// `rows` rows of `x` through the candle backend on the CPU device (`[V]` for one row).
fn run(c: &HlgCurve, x: &[f32], rows: usize) -> Vec<f32> {
    let dims = match rows {
        1 => vec![x.len()],
        _ => vec![rows, x.len() / rows],
    };
    let t = Tensor::from_slice(x, dims.as_slice(), &Device::Cpu).unwrap();
    let y = apply(c, &t).unwrap();
    assert_eq!(y.dims(), dims.as_slice());
    y.flatten_all().unwrap().to_vec1().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn rank1_matches_kernel(x in common::backend_logits()) {
        let r = common::rank1_parity(&run, &x, |_, _| true);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    #[test]
    fn batch_rows_are_independent(a in common::backend_logits(), shift in -50.0f32..50.0, scale in 0.2f32..3.0) {
        let r = common::batch_parity(&run, &a, (shift, scale), |_, _| true);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

#[test]
fn identity_and_non_finite_rows() {
    let x = [1.0f32, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -3.0];
    let t = Tensor::from_slice(&x, 5, &Device::Cpu).unwrap();
    let same: Vec<f32> = apply(&HlgCurve::identity(), &t).unwrap().to_vec1().unwrap();
    assert_eq!(
        same.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        x.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    // A row without finite entries comes back unchanged, next to a normal row.
    let rows = Tensor::from_slice(
        &[f32::NEG_INFINITY, f32::NAN, 0.0, -20.0],
        (2, 2),
        &Device::Cpu,
    )
    .unwrap();
    for c in every_curve() {
        let out = apply(&c, &rows).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(out[0][0], f32::NEG_INFINITY);
        assert!(out[0][1].is_nan());
        assert!(worst(&c, &[0.0, -20.0], &out[1]) <= 1.0, "{c:?}");
    }
}

#[test]
fn half_precision_in_same_dtype_out() {
    let x: Vec<f32> = (0..64).map(|i| 4.0 - i as f32 * 0.37).collect();
    for dtype in [DType::F16, DType::BF16] {
        let t = Tensor::from_slice(&x, 64, &Device::Cpu)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let rounded: Vec<f32> = t.to_dtype(DType::F32).unwrap().to_vec1().unwrap();
        for c in every_curve() {
            let y = apply(&c, &t).unwrap();
            assert_eq!(y.dtype(), dtype);
            let got: Vec<f32> = y.to_dtype(DType::F32).unwrap().to_vec1().unwrap();
            // The kernel on the rounded input, rounded to the same dtype.
            let want: Vec<f32> = Tensor::from_slice(&kernel(&c, &rounded), 64, &Device::Cpu)
                .unwrap()
                .to_dtype(dtype)
                .unwrap()
                .to_dtype(DType::F32)
                .unwrap()
                .to_vec1()
                .unwrap();
            common::assert_within_half_ulp(
                dtype == DType::F16,
                &got,
                &want,
                &format!("{dtype:?} {c:?}"),
            );
        }
    }
}

#[test]
fn rank_three_is_an_error_not_a_panic() {
    let t = Tensor::zeros((2, 2, 2), DType::F32, &Device::Cpu).unwrap();
    let err = apply(&HlgCurve::default(), &t).unwrap_err();
    assert!(err.to_string().contains("rank 3"), "{err}");
}
