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

/// As the main bench: a Gaussian bulk (σ = 2.5) with five strong candidates.
fn logits(v: usize) -> Vec<f32> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut uniform = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let mut x: Vec<f32> = (0..v)
        .map(|_| {
            let (a, b) = (uniform(), uniform());
            ((-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos() * 2.5) as f32
        })
        .collect();
    for (i, bump) in [14.0f32, 13.2, 12.5, 11.0, 10.4].iter().enumerate() {
        x[(i * 7919) % v] = *bump;
    }
    x
}

fn bench(c: &mut Criterion) {
    let v = 262_144;
    let x = logits(v);
    let a = Array::from_slice(&x, &[v as i32]);
    let mut g = c.benchmark_group(format!("V={v}"));
    g.throughput(Throughput::Elements(v as u64));
    g.sample_size(30);
    let mut dst = vec![0f32; v];
    g.bench_function("copy", |b| b.iter(|| dst.copy_from_slice(black_box(&x))));
    for (name, pivot) in [("top", Pivot::Top { offset: 6.0 }), ("entropy", Pivot::Entropy), ("median", Pivot::Median)] {
        for shape in [ToeShape::Log, ToeShape::Quadratic] {
            let curve = HlgCurve::default().with_pivot(pivot).unwrap().with_toe_shape(shape);
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
