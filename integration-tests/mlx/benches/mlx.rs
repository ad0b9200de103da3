//! The mlx backend on MLX's CPU backend beside the slice kernel, for the record (the
//! backend exists for Metal, where the logits already live on the GPU; on a CPU the
//! kernel is the one to use). Each mlx case builds the graph and evaluates it; each kernel
//! case copies the logits and applies the curve in place.
//!
//! Run: `cargo bench --manifest-path integration-tests/mlx/Cargo.toml`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mistralrs_hlg::{backend::mlx::apply, HlgCurve, Pivot, ToeShape};
use mlx_rs::Array;

/// The main bench's logits.
#[path = "../../../benches/common/mod.rs"]
mod common;
use common::logits;

fn bench(c: &mut Criterion) {
    let v = 262_144;
    let x = logits(v);
    let a = Array::from_slice(&x, &[v as i32]);
    let mut g = c.benchmark_group(format!("V={v}"));
    g.throughput(Throughput::Elements(v as u64));
    g.sample_size(30);
    let mut dst = vec![0f32; v];
    g.bench_function("copy", |b| b.iter(|| dst.copy_from_slice(black_box(&x))));
    for pivot in Pivot::ALL {
        let name = pivot.name();
        for shape in [ToeShape::Log, ToeShape::Quadratic] {
            let curve = HlgCurve::default()
                .with_pivot(pivot)
                .with_pivot_offset(6.0)
                .unwrap()
                .with_toe_shape(shape);
            g.bench_function(format!("kernel_{name}_{}", shape.name()), |b| {
                b.iter(|| {
                    dst.copy_from_slice(&x);
                    curve.apply(black_box(&mut dst));
                })
            });
            g.bench_function(format!("mlx_cpu_{name}_{}", shape.name()), |b| {
                b.iter(|| {
                    let y = apply(&curve, black_box(&a)).unwrap();
                    y.eval().unwrap();
                    y
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
