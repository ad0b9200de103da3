//! The matrix products of one decode step of the embedded model (SmolLM2-135M: 30 layers
//! of q, k, v, o, gate, up, down, then the 49,152-row output layer; one row of
//! activations each), as candle 0.10.2 runs them on the CPU, in one run:
//!
//! - `f16 whole`: what the engine does with `--weights f16` (`auto`'s choice for the
//!   embedded model): the weights dequantized to f16 at load (`QMatMul::TensorF16`), the
//!   activations cast to f16, and gemm running a one-row product on the calling thread
//!   alone;
//! - `f32 whole`: the same for an F16 or F32 file served as it is, which candle's
//!   `QMatMul` holds as f32 (twice the bytes);
//! - `… split`: the output rows split across rayon's pool, as
//!   patches/mistralrs-quant-0.8.1/0001 does (products under 2^18 weights left whole).
//!
//! Each step runs on a rayon worker, as the engine's forward pass does (patch 0008 of
//! mistralrs-core). The weights are random: only their sizes matter. Before timing, the
//! split products are checked against the whole ones, bit for bit.
//!
//! Run: `cargo bench --workspace --bench decode_products`.

use std::hint::black_box;

use candle_core::{DType, Device, Result, Tensor};
use criterion::{criterion_group, criterion_main, Criterion};
use rayon::prelude::*;

/// The products of one step: (output rows, inputs), in the model's order.
fn shapes() -> Vec<(usize, usize)> {
    let layer = [
        (576, 576),
        (192, 576),
        (192, 576),
        (576, 576),
        (1536, 576),
        (1536, 576),
        (576, 1536),
    ];
    let mut s: Vec<_> = (0..30).flat_map(|_| layer).collect();
    s.push((49_152, 576));
    s
}

/// The patch's rule: the parts to split a weight of `n` x `k` in, on `threads` threads
/// (at least 2^18 weights, more than 256 rows in every part), or `None` to keep it whole.
fn split_parts(n: usize, k: usize, threads: usize) -> Option<usize> {
    let parts = threads.min(n / 257);
    (parts >= 2 && n * k >= 1 << 18).then_some(parts)
}

/// `x` times `w` transposed, with `x` cast to `w`'s dtype and the product back, as
/// candle's `QMatMul::forward` runs a dense weight.
fn whole(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    x.to_dtype(w.dtype())?.matmul(&w.t()?)?.to_dtype(x.dtype())
}

/// The same with `w`'s rows split in `parts` across rayon's pool.
fn split(x: &Tensor, w: &Tensor, parts: usize) -> Result<Tensor> {
    let n = w.dim(0)?;
    let x = &x.to_dtype(w.dtype())?;
    let outs = (0..parts)
        .into_par_iter()
        .map(|i| {
            let (s, e) = (i * n / parts, (i + 1) * n / parts);
            x.matmul(&w.narrow(0, s, e - s)?.t()?)
        })
        .collect::<Result<Vec<_>>>()?;
    Tensor::cat(&outs, 1)?.to_dtype(DType::F32)
}

fn bench(c: &mut Criterion) {
    let dev = Device::Cpu;
    let shapes = shapes();
    let w32: Vec<Tensor> = shapes
        .iter()
        .map(|&(n, k)| Tensor::randn(0f32, 0.05, (n, k), &dev).unwrap())
        .collect();
    let w16: Vec<Tensor> = w32
        .iter()
        .map(|w| w.to_dtype(DType::F16).unwrap())
        .collect();
    let x576 = Tensor::randn(0f32, 1.0, (1, 576), &dev).unwrap();
    let x1536 = Tensor::randn(0f32, 1.0, (1, 1536), &dev).unwrap();
    let x = |k: usize| if k == 576 { &x576 } else { &x1536 };
    let threads = rayon::current_num_threads();

    // The split must give the unsplit product to the bit (gemm reduces each row alone).
    for weights in [&w32, &w16] {
        for (w, &(n, k)) in weights.iter().zip(&shapes).take(7) {
            if let Some(parts) = split_parts(n, k, threads) {
                let a = whole(x(k), w).unwrap().flatten_all().unwrap();
                let b = split(x(k), w, parts).unwrap().flatten_all().unwrap();
                let (a, b) = (a.to_vec1::<f32>().unwrap(), b.to_vec1::<f32>().unwrap());
                assert!(
                    a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()),
                    "the split product differs from the whole one at {n} x {k}, {:?}",
                    w.dtype()
                );
            }
        }
    }

    let mut g = c.benchmark_group("decode step products");
    g.sample_size(30);
    for (name, weights) in [("f16", &w16), ("f32", &w32)] {
        g.bench_function(format!("{name} whole"), |b| {
            b.iter(|| {
                rayon::scope(|_| {
                    for (w, &(_, k)) in weights.iter().zip(&shapes) {
                        black_box(whole(x(k), w).unwrap());
                    }
                })
            })
        });
        g.bench_function(format!("{name} split"), |b| {
            b.iter(|| {
                rayon::scope(|_| {
                    for (w, &(n, k)) in weights.iter().zip(&shapes) {
                        let y = match split_parts(n, k, threads) {
                            Some(parts) => split(x(k), w, parts),
                            None => whole(x(k), w),
                        };
                        black_box(y.unwrap());
                    }
                })
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
