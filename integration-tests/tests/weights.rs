//! `--weights`: a GGUF's weights prepared for serving (`mistralrs_hlg::weights`): the
//! Q8_0 copy written with candle's reader and writer, the choice of `auto`, the cache, on
//! tiny random-weight models the test writes, then served by the real engine.

use std::path::{Path, PathBuf};

use candle_core::quantized::{gguf_file, GgmlDType};
use candle_core::Device;
use mistralrs_hlg::weights::{self, Load, Weights};
use mistralrs_hlg_integration_tests::tiny::{write_gguf, Arch};

/// A cache directory of this test binary's own (every test here sets the same one).
fn cache() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mistralrs-hlg-weights-{}", std::process::id()));
    std::env::set_var("MISTRALRS_HLG_MODEL_DIR", &dir);
    dir
}

fn tiny(name: &str) -> PathBuf {
    let dir = cache().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    write_gguf(&dir, Arch::Llama, 300).unwrap()
}

/// Every tensor of a GGUF: (name, dtype, values as f32).
fn tensors(path: &Path) -> Vec<(String, GgmlDType, Vec<f32>)> {
    let mut f = std::fs::File::open(path).unwrap();
    let content = gguf_file::Content::read(&mut f).unwrap();
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let t = content.tensor(&mut f, n, &Device::Cpu).unwrap();
            let v = t.dequantize(&Device::Cpu).unwrap();
            let v = v.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            (n.clone(), t.dtype(), v)
        })
        .collect()
}

/// The Q8_0 copy holds each tensor of the source within Q8_0's rounding (half a step of
/// its block's scale, `max |v| / 127`, per block of 32); the norms (F32 in the source) stay
/// F32 and bit-identical; names and shapes are kept.
#[test]
fn the_q8_0_copy_holds_the_source_within_its_rounding() {
    let src = tiny("values");
    let source = tensors(&src);
    let served = weights::prepare(Weights::Q8_0, &src).unwrap();
    assert_ne!(served.path, src);
    assert_eq!(served.load, Load::AsIs);
    let got = tensors(&served.path);
    assert_eq!(got.len(), source.len());
    for ((name, sd, sv), (gname, gd, gv)) in source.iter().zip(&got) {
        assert_eq!(name, gname);
        if *sd == GgmlDType::F32 {
            assert_eq!((gd, gv), (&GgmlDType::F32, sv), "{name}");
            continue;
        }
        assert_eq!(*gd, GgmlDType::Q8_0, "{name}");
        for (a, b) in sv.chunks(32).zip(gv.chunks(32)) {
            let step = a.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
            for (x, y) in a.iter().zip(b) {
                assert!(
                    (x - y).abs() <= 0.5 * step * (1.0 + 1e-3) + 1e-7,
                    "{name}: {x} vs {y}"
                );
            }
        }
    }
}

/// The host this binary is built on: 0.9 builds its GGUF matrices from the blocks, so
/// `f16` and `f32` are converted files there; 0.8.1 densifies at load.
const ON_0_9: bool = cfg!(mistralrs_host = "0.9");

/// The dense copies (written on every host, served on 0.9): each quantized tensor of a
/// Q4_1 source as its dequantized values rounded to F16 (`f16`: the values candle's
/// dequantize-at-load gives on 0.8.1) or exactly (`f32`); the F32 norms unchanged.
#[test]
fn the_dense_copies_hold_the_dequantized_values() {
    let src = tiny("dense");
    let q41 = cache().join("dense").join("tiny-q4_1.gguf");
    requantize(&src, &q41, GgmlDType::Q4_1);
    let source = tensors(&q41);
    for (w, dtype) in [
        (Weights::F16, GgmlDType::F16),
        (Weights::F32, GgmlDType::F32),
    ] {
        let path = weights::converted_copy(&q41, w).unwrap();
        assert_ne!(path, q41);
        let got = tensors(&path);
        assert_eq!(got.len(), source.len());
        for ((name, sd, sv), (gname, gd, gv)) in source.iter().zip(&got) {
            assert_eq!(name, gname);
            let want_dtype = if *sd == GgmlDType::F32 {
                GgmlDType::F32
            } else {
                dtype
            };
            assert_eq!(*gd, want_dtype, "{name}");
            for (x, y) in sv.iter().zip(gv) {
                let want = match want_dtype {
                    GgmlDType::F16 => half::f16::from_f32(*x).to_f32(),
                    _ => *x,
                };
                assert_eq!(y.to_bits(), want.to_bits(), "{w:?} {name}: {x} -> {y}");
            }
        }
    }
}

/// A conversion is written once and reused while its source is unchanged; a changed
/// source is converted again. On 0.8.1 `f16` and `f32` serve the file itself, dequantized
/// at load; on 0.9 a converted copy.
#[test]
fn the_cache_follows_the_source() {
    let src = tiny("cache");
    assert_eq!(weights::DENSE_AT_LOAD, !ON_0_9);
    for (w, load) in [
        (Weights::F16, Load::DequantizeF16),
        (Weights::F32, Load::DequantizeF32),
    ] {
        let served = weights::prepare(w, &src).unwrap();
        if ON_0_9 {
            assert_eq!(served.load, Load::AsIs);
            assert_ne!(served.path, src);
        } else {
            assert_eq!((served.path.as_path(), served.load), (src.as_path(), load));
        }
    }
    let first = weights::prepare(Weights::Q8_0, &src).unwrap().path;
    let written = std::fs::metadata(&first).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(weights::prepare(Weights::Q8_0, &src).unwrap().path, first);
    assert_eq!(
        std::fs::metadata(&first).unwrap().modified().unwrap(),
        written,
        "reused"
    );
    // A new source under the same path: converted again, under another name.
    let other = write_gguf(&cache().join("cache-other"), Arch::Llama, 301).unwrap();
    std::fs::copy(&other, &src).unwrap();
    let again = weights::prepare(Weights::Q8_0, &src).unwrap().path;
    assert_ne!(again, first);
    assert_eq!(tensors(&again).len(), tensors(&src).len());
}

/// `auto`: dense F16 at load for a small quantized model (Q8_0 or Q4_1 alike); a file
/// with no quantized tensor (the tiny model dequantized to F32) as it is.
#[test]
fn auto_dequantizes_a_small_quantized_model() {
    let src = tiny("auto");
    let q41 = cache().join("auto").join("tiny-q4_1.gguf");
    requantize(&src, &q41, GgmlDType::Q4_1);
    let f32 = cache().join("auto").join("tiny-f32.gguf");
    requantize(&src, &f32, GgmlDType::F32);
    for path in [&src, &q41] {
        let served = weights::prepare(Weights::Auto, path).unwrap();
        assert_eq!(served.weights, Weights::F16);
        if ON_0_9 {
            assert_eq!(served.load, Load::AsIs);
            assert!(tensors(&served.path)
                .iter()
                .all(|(_, d, _)| matches!(d, GgmlDType::F16 | GgmlDType::F32)));
        } else {
            assert_eq!(served.load, Load::DequantizeF16);
            assert_eq!(&served.path, path);
        }
    }
    let served = weights::prepare(Weights::Auto, &f32).unwrap();
    assert_eq!((served.weights, served.load), (Weights::AsIs, Load::AsIs));
}

/// A copy of `src` with its Q8_0 tensors in `dtype`, through candle's writer.
fn requantize(src: &Path, dst: &Path, dtype: GgmlDType) {
    let mut f = std::fs::File::open(src).unwrap();
    let content = gguf_file::Content::read(&mut f).unwrap();
    let mut tensors = vec![];
    for name in content.tensor_infos.keys() {
        let t = content.tensor(&mut f, name, &Device::Cpu).unwrap();
        let t = if t.dtype() == GgmlDType::Q8_0 {
            let dense = t.dequantize(&Device::Cpu).unwrap();
            candle_core::quantized::QTensor::quantize(&dense, dtype).unwrap()
        } else {
            t
        };
        tensors.push((name.clone(), t));
    }
    let md: Vec<(&str, &gguf_file::Value)> = content
        .metadata
        .iter()
        .filter(|(k, _)| k.as_str() != "general.alignment")
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let ts: Vec<(&str, &candle_core::quantized::QTensor)> =
        tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    let mut w = std::io::BufWriter::new(std::fs::File::create(dst).unwrap());
    gguf_file::write(&mut w, &md, &ts).unwrap();
}

/// The engine serves the converted files: greedy text from the Q8_0 and F16 copies of a
/// Q4_1 tiny model, and from the file itself, all non-empty.
#[tokio::test(flavor = "multi_thread")]
async fn the_engine_serves_the_converted_file() {
    use mistralrs_hlg::server::load::{load, ModelSource};
    let src = tiny("engine");
    let q41 = cache().join("engine").join("tiny-q4_1.gguf");
    requantize(&src, &q41, GgmlDType::Q4_1);
    for weights in [Weights::AsIs, Weights::Q8_0, Weights::F16] {
        let path = weights::converted_copy(&q41, weights).unwrap();
        let source = ModelSource::resolve(&path.to_string_lossy(), None).unwrap();
        let engine = load(&source).await.unwrap();
        let router = mistralrs_hlg::server::RouterBuilder::new(engine)
            .build()
            .await
            .unwrap();
        let body = serde_json::json!({"model": "default", "prompt": "a b c", "max_tokens": 8, "temperature": 0.0});
        let out = mistralrs_hlg_integration_tests::post_ok(&router, "/v1/completions", &body).await;
        let usage = out["usage"]["completion_tokens"].as_u64().unwrap();
        assert!(usage > 0, "{weights:?}: {out}");
    }
}
