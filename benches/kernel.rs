//! The slice kernel per pivot mode and toe shape, beside the per-token work mistral.rs
//! 0.8.1 already does, at three vocabulary sizes, in one run:
//!
//! - `copy`: copying the logits vector (the floor for any pass over it);
//! - `softmax`: candle's `softmax_last_dim`, which the host runs every sampled token;
//! - `sort`: a full descending sort of (index, prob) pairs, what the host's sampler does
//!   every token when top-k is off;
//! - `select_nth_k40`: a partial selection for top-k = 40.
//!
//! Run: `cargo bench --bench kernel --features candle`.

use std::hint::black_box;

use candle_core::{Device, Tensor};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mistralrs_hlg::{HlgCurve, Pivot, ToeShape};

mod common;
use common::logits;

fn bench(c: &mut Criterion) {
    for v in [49_152usize, 151_936, 262_144] {
        let x = logits(v);
        let mut g = c.benchmark_group(format!("V={v}"));
        g.throughput(Throughput::Elements(v as u64));
        g.sample_size(60);

        // Every case works on buffers allocated once and kept warm, and includes the
        // copy of the input into its buffer: `copy` alone is the floor, and the cost of a
        // transform is its time minus `copy`.
        let mut dst = vec![0f32; v];
        g.bench_function("copy", |b| b.iter(|| dst.copy_from_slice(black_box(&x))));

        let t = Tensor::from_slice(&x, v, &Device::Cpu).unwrap();
        g.bench_function("softmax", |b| {
            b.iter(|| candle_nn::ops::softmax_last_dim(black_box(&t)).unwrap())
        });

        let mut pairs: Vec<(u32, f32)> = vec![(0, 0.0); v];
        let refill = |pairs: &mut Vec<(u32, f32)>| {
            for (i, (p, &xv)) in pairs.iter_mut().zip(&x).enumerate() {
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

        // The shipped knobs, each toe shape named explicitly.
        let top = HlgCurve::default().with_toe_shape(ToeShape::Log);
        let mut curves = vec![
            ("hlg_top_log", top),
            ("hlg_top_quadratic", top.with_toe_shape(ToeShape::Quadratic)),
            ("hlg_top_exp", top.with_toe_shape(ToeShape::Exp)),
            ("hlg_entropy_log", top.with_pivot(Pivot::Entropy)),
            ("hlg_median_log", top.with_pivot(Pivot::Median)),
        ];
        if v == 262_144 {
            for s in [ToeShape::Quadratic, ToeShape::Exp] {
                curves.push((
                    if s == ToeShape::Exp {
                        "hlg_entropy_exp"
                    } else {
                        "hlg_entropy_quadratic"
                    },
                    top.with_pivot(Pivot::Entropy).with_toe_shape(s),
                ));
                curves.push((
                    if s == ToeShape::Exp {
                        "hlg_median_exp"
                    } else {
                        "hlg_median_quadratic"
                    },
                    top.with_pivot(Pivot::Median).with_toe_shape(s),
                ));
            }
        }
        for (name, curve) in curves {
            g.bench_function(name, |b| {
                b.iter(|| {
                    dst.copy_from_slice(&x);
                    curve.apply(black_box(&mut dst));
                })
            });
        }
        if v == 262_144 {
            g.bench_function("candle_backend_top_log", |b| {
                b.iter(|| mistralrs_hlg::backend::candle::apply(&top, black_box(&t)).unwrap())
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
