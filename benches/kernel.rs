//! The slice kernel per pivot mode and toe shape, beside the per-token work mistral.rs
//! 0.8.1 already does, at three vocabulary sizes, in one run:
//!
//! - `copy`: copying the logits vector (the floor for any pass over it);
//! - `softmax`: candle's `softmax_last_dim`, which the host runs every sampled token;
//! - `sort`: a full descending sort of (index, prob) pairs, what the host's sampler does
//!   every token when top-k is off;
//! - `select_nth_k40`: a partial selection for top-k = 40.
//!
//! Run: `cargo bench -p mistralrs-hlg --bench kernel --features candle`.

use std::hint::black_box;

use candle_core::{Device, Tensor};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use mistralrs_hlg::{HlgCurve, Pivot, ToeShape};

mod common;
use common::logits;

fn bench(c: &mut Criterion) {
    for v in [49_152usize, 151_936, 262_144] {
        let x = logits(v);
        let mut g = c.benchmark_group(format!("V={v}"));
        g.throughput(Throughput::Elements(v as u64));
        g.sample_size(60);
        let t = Tensor::from_slice(&x, v, &Device::Cpu).unwrap();
        host_work(&mut g, &x, &t);
        // Every case works on buffers allocated once and kept warm, and includes the
        // copy of the input into its buffer: `copy` alone is the floor, and the cost of a
        // transform is its time minus `copy`.
        let mut dst = vec![0f32; v];
        for (name, curve) in curves(v == 262_144) {
            g.bench_function(name, |b| {
                b.iter(|| {
                    dst.copy_from_slice(&x);
                    curve.apply(black_box(&mut dst));
                })
            });
        }
        if v == 262_144 {
            let top = HlgCurve::default().with_toe_shape(ToeShape::Log);
            g.bench_function("candle_backend_top_log", |b| {
                b.iter(|| mistralrs_hlg::backend::candle::apply(&top, black_box(&t)).unwrap())
            });
        }
        g.finish();
    }
}

/// What the host already does per token: copy, softmax, sort, select.
fn host_work(g: &mut BenchmarkGroup<'_, WallTime>, x: &[f32], t: &Tensor) {
    let mut dst = vec![0f32; x.len()];
    g.bench_function("copy", |b| b.iter(|| dst.copy_from_slice(black_box(x))));
    g.bench_function("softmax", |b| {
        b.iter(|| candle_nn::ops::softmax_last_dim(black_box(t)).unwrap())
    });
    let mut pairs: Vec<(u32, f32)> = vec![(0, 0.0); x.len()];
    let refill = |pairs: &mut Vec<(u32, f32)>| {
        for (i, (p, &xv)) in pairs.iter_mut().zip(x).enumerate() {
            *p = (i as u32, xv);
        }
    };
    g.bench_function("sort", |b| {
        b.iter(|| {
            refill(&mut pairs);
            pairs.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
        })
    });
    g.bench_function("select_nth_k40", |b| {
        b.iter(|| {
            refill(&mut pairs);
            pairs.select_nth_unstable_by(39, |a, b| b.1.total_cmp(&a.1));
        })
    });
}

/// The shipped knobs per pivot mode and toe shape (`hlg_<pivot>_<shape>`): every pair
/// when `all`, else the `top` pivot with each shape and each pivot with the `log` toe.
fn curves(all: bool) -> Vec<(String, HlgCurve)> {
    let mut out = vec![];
    for pivot in Pivot::ALL {
        for shape in ToeShape::ALL {
            if all || pivot == Pivot::Top || shape == ToeShape::Log {
                let curve = HlgCurve::default().with_pivot(pivot).with_toe_shape(shape);
                out.push((format!("hlg_{pivot}_{shape}"), curve));
            }
        }
    }
    // Auto mode (width and offset from each vector's σ): against `hlg_top_<shape>` and
    // `hlg_entropy_<shape>`, whose weighted sums it shares.
    for (pivot, shape) in [
        (Pivot::Top, ToeShape::Quadratic),
        (Pivot::Top, ToeShape::Log),
        (Pivot::Entropy, ToeShape::Quadratic),
    ] {
        let curve = HlgCurve::default()
            .with_pivot(pivot)
            .with_toe_shape(shape)
            .with_auto_width(1.0)
            .and_then(|c| c.with_auto_pivot_offset(2.0))
            .expect("accepted scales");
        out.push((format!("hlg_{pivot}_auto_{shape}"), curve));
    }
    out
}

criterion_group!(benches, bench);
criterion_main!(benches);
