//! The weight format a GGUF model is served in (`mistralrs-hlg serve --weights`).
//!
//! On the CPU, candle runs a GGUF's matrix products three ways: on the quantized blocks
//! (SIMD kernels for Q8_0 and the k-quants under AVX2; a scalar loop for Q4_1), or on
//! dense F16 or F32 copies made at load (`CANDLE_DEQUANTIZE_ALL_F16`,
//! `CANDLE_DEQUANTIZE_ALL`; an F16 or F32 tensor in the file always becomes F32). Dense
//! weights process a prompt several times faster; quantized ones decode faster, reading
//! fewer bytes a token (docs/PERFORMANCE.md, "Weight format"). So:
//!
//! - `f16`, `f32`: on mistral.rs 0.8.1 the file as it is, dequantized at load
//!   ([`Load`]); on 0.9, whose GGUF loader never densifies (see [`DENSE_AT_LOAD`]), a
//!   converted copy holding the dense tensors, written as `q8_0`'s is;
//! - `q8_0`: the file converted once, with candle's GGUF reader and writer, into the
//!   model cache directory ([`crate::model::cache_dir`]), reused while the source is
//!   unchanged;
//! - `auto`: dense F16 for a small quantized model, the file as it is otherwise (see
//!   [`resolve`]).

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::Device;

/// The most memory `auto`'s dense F16 copy may take: 1 GiB of weights, a model of about
/// 500M parameters. Past it the file's own format is kept: a large model's decode
/// is bound by memory bandwidth, where fewer bytes a weight win, and its dense copy may
/// not fit in memory.
pub const AUTO_LIMIT_BYTES: u64 = 1 << 30;

/// Whether this build's host densifies a GGUF's quantized matrices at load when candle's
/// variables ask (`Load::env`). mistral.rs 0.8.1 builds them with candle's
/// `QMatMul::from_arc`, which reads the variables. 0.9's GGUF loader builds them from the
/// blocks directly (mistralrs-quant's `GgufMatMul::from_qtensor`, which skips
/// `from_arc` to keep its expert kernels), so the variables change nothing there and
/// dense weights have to be in the file: `f16` and `f32` are converted copies, as
/// `q8_0` is. (Before this was known, `--weights f16` on 0.9.2 logged F16 and served the
/// file's Q4_1 blocks.)
pub const DENSE_AT_LOAD: bool = !cfg!(mistralrs_host = "0.9");

/// How the engine turns the served file's tensors into matrices at load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// As candle loads each tensor by default (quantized blocks stay quantized).
    AsIs,
    /// Quantized tensors dequantized to dense F16.
    DequantizeF16,
    /// Quantized tensors dequantized to dense F32.
    DequantizeF32,
}

impl Load {
    /// The environment variable candle reads for this (once per thread, when a matrix is
    /// first made): set it before the engine starts any thread.
    ///
    /// ```
    /// use mistralrs_hlg::weights::Load;
    /// assert_eq!(Load::DequantizeF16.env(), Some(("CANDLE_DEQUANTIZE_ALL_F16", "1")));
    /// assert_eq!(Load::AsIs.env(), None);
    /// ```
    pub fn env(self) -> Option<(&'static str, &'static str)> {
        match self {
            Load::AsIs => None,
            Load::DequantizeF16 => Some(("CANDLE_DEQUANTIZE_ALL_F16", "1")),
            Load::DequantizeF32 => Some(("CANDLE_DEQUANTIZE_ALL", "1")),
        }
    }
}

/// What to serve: the GGUF file, and how the engine loads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The file (the source, or its converted copy).
    pub path: PathBuf,
    /// How its tensors are loaded.
    pub load: Load,
    /// The format `auto` chose, or the one asked for.
    pub weights: Weights,
}

/// The format to serve a GGUF model's weights in.
///
/// ```
/// use mistralrs_hlg::weights::Weights;
/// assert_eq!("f16".parse::<Weights>(), Ok(Weights::F16));
/// assert_eq!("as-is".parse::<Weights>(), Ok(Weights::AsIs));
/// assert!("q4k".parse::<Weights>().unwrap_err().contains("auto, as-is, f16, f32, q8_0"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Weights {
    /// See [`resolve`].
    #[default]
    Auto,
    /// As the file has them.
    AsIs,
    /// Every quantized tensor dequantized to F16 (at load, or in a converted file where
    /// the host cannot: [`DENSE_AT_LOAD`]).
    F16,
    /// Every quantized tensor dequantized to F32 (as `F16`).
    F32,
    /// Every tensor but the F32 ones (norms) with rows of whole 32-blocks re-quantized to
    /// Q8_0, in a converted file.
    Q8_0,
}

impl Weights {
    /// The names `--weights` takes, in order.
    pub const NAMES: [&'static str; 5] = ["auto", "as-is", "f16", "f32", "q8_0"];

    /// Its name as `--weights` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Weights::Auto => "auto",
            Weights::AsIs => "as-is",
            Weights::F16 => "f16",
            Weights::F32 => "f32",
            Weights::Q8_0 => "q8_0",
        }
    }
}

impl FromStr for Weights {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Weights::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| {
                [
                    Weights::Auto,
                    Weights::AsIs,
                    Weights::F16,
                    Weights::F32,
                    Weights::Q8_0,
                ][i]
            })
            .ok_or_else(|| {
                format!(
                    "--weights must be one of {}, got {s:?}",
                    Weights::NAMES.join(", ")
                )
            })
    }
}

/// A conversion that failed; the message names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WeightsError {
    /// Reading, writing or renaming a file.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// candle could not read, convert or write the GGUF.
    #[error("{path}: {source}")]
    Gguf {
        /// The file.
        path: PathBuf,
        /// candle's error.
        source: candle_core::Error,
    },
    /// The written file does not read back as the source's tensors.
    #[error("{path}: the converted file does not match its source ({problem})")]
    Check {
        /// The converted file.
        path: PathBuf,
        /// What differs.
        problem: String,
    },
    /// No cache directory for the converted file.
    #[error(transparent)]
    Cache(#[from] crate::model::ModelError),
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> WeightsError + 'a {
    move |source| WeightsError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

fn gguf<'a>(path: &'a Path) -> impl FnOnce(candle_core::Error) -> WeightsError + 'a {
    move |source| WeightsError::Gguf {
        path: path.to_path_buf(),
        source,
    }
}

fn read_header(path: &Path) -> Result<(Content, BufReader<File>), WeightsError> {
    let mut reader = BufReader::new(File::open(path).map_err(io("opening", path))?);
    let content = Content::read(&mut reader).map_err(gguf(path))?;
    Ok((content, reader))
}

fn is_float(d: GgmlDType) -> bool {
    matches!(d, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16)
}

/// The format `auto` picks for the GGUF at `path`: `f16` for a file with quantized
/// tensors whose dense F16 copy takes at most [`AUTO_LIMIT_BYTES`] (a small model, as the
/// embedded one), the file as it is otherwise. Measured on the embedded model
/// (docs/PERFORMANCE.md, "Weight format"): dense F16 computes what the weights say (its
/// greedy text equals dense F32's, where the quantized paths, which also round the
/// activations to 8 bits, part from it within a sentence on most prompts) and processes
/// a prompt 3.5× faster than the Q4_1 blocks, at 0.65× their decoding speed.
///
/// ```no_run
/// use mistralrs_hlg::weights::{resolve, Weights};
/// let gguf = mistralrs_hlg::model::ensure_default_model()?;
/// assert_eq!(resolve(Weights::Auto, &gguf)?, Weights::F16); // Q4_1, 135M parameters
/// assert_eq!(resolve(Weights::Q8_0, &gguf)?, Weights::Q8_0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn resolve(weights: Weights, path: &Path) -> Result<Weights, WeightsError> {
    if weights != Weights::Auto {
        return Ok(weights);
    }
    let (content, _) = read_header(path)?;
    let infos = || content.tensor_infos.values();
    let quantized = infos().any(|t| !is_float(t.ggml_dtype));
    let f16_bytes: u64 = infos().map(|t| t.shape.elem_count() as u64 * 2).sum();
    Ok(if quantized && f16_bytes <= AUTO_LIMIT_BYTES {
        Weights::F16
    } else {
        Weights::AsIs
    })
}

/// What to serve for the GGUF at `path` in `weights`: for `q8_0`, the converted file,
/// written now if the cache does not already hold it for this very source (same path,
/// length and modification time); for `f16` and `f32`, the file itself, dequantized at
/// load, or where the host cannot ([`DENSE_AT_LOAD`]) a converted file as for `q8_0`;
/// otherwise the file as it is.
///
/// The converted file keeps the source's metadata (its `general.file_type` set to the
/// new format) and tensor names and shapes; it is written under a temporary name, read
/// back and checked against the source's tensor list, then renamed into place, so that a
/// file in place is whole.
pub fn prepare(weights: Weights, path: &Path) -> Result<Served, WeightsError> {
    let weights = resolve(weights, path)?;
    let served = |path: PathBuf, load| Served {
        path,
        load,
        weights,
    };
    Ok(match weights {
        Weights::Auto | Weights::AsIs => served(path.to_path_buf(), Load::AsIs),
        Weights::F16 if DENSE_AT_LOAD => served(path.to_path_buf(), Load::DequantizeF16),
        Weights::F32 if DENSE_AT_LOAD => served(path.to_path_buf(), Load::DequantizeF32),
        Weights::F16 | Weights::F32 | Weights::Q8_0 => {
            served(converted_copy(path, weights)?, Load::AsIs)
        }
    })
}

/// The copy of `path` in `weights` (`f16`, `f32` or `q8_0`), from the cache or written
/// (whatever the host: [`prepare`] serves the `f16` and `f32` copies only where the host
/// cannot densify at load); `path` itself for `auto` and `as-is`.
pub fn converted_copy(path: &Path, weights: Weights) -> Result<PathBuf, WeightsError> {
    if matches!(weights, Weights::Auto | Weights::AsIs) {
        return Ok(path.to_path_buf());
    }
    let dir = crate::model::cache_dir()?.join("converted");
    std::fs::create_dir_all(&dir).map_err(io("creating", &dir))?;
    let identity = source_identity(path)?;
    let out = dir.join(converted_name(path, &identity, weights));
    let stamp = out.with_extension("gguf.source");
    if out.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == identity) {
        return Ok(out);
    }
    tracing_info(path, &out, weights);
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        out.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    convert(path, &tmp, weights)?;
    check(path, &tmp, weights)?;
    std::fs::rename(&tmp, &out).map_err(io("renaming into place", &out))?;
    std::fs::write(&stamp, &identity).map_err(io("writing", &stamp))?;
    Ok(out)
}

#[cfg(feature = "mistralrs")]
fn tracing_info(path: &Path, out: &Path, weights: Weights) {
    tracing::info!(source = %path.display(), converted = %out.display(), format = weights.name(), "converting the model's weights (once; cached)");
}

#[cfg(not(feature = "mistralrs"))]
fn tracing_info(_: &Path, _: &Path, _: Weights) {}

/// The source's canonical path, length and modification time, as one line.
fn source_identity(path: &Path) -> Result<String, WeightsError> {
    let canonical = path.canonicalize().map_err(io("resolving", path))?;
    let meta = std::fs::metadata(&canonical).map_err(io("reading", path))?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok(format!(
        "{} {} {}\n",
        meta.len(),
        mtime,
        canonical.display()
    ))
}

/// `<stem>-<hash of the identity>.<format>.gguf`: two sources with one file name do not
/// share a cache entry.
fn converted_name(path: &Path, identity: &str, weights: Weights) -> String {
    use sha2::Digest;
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let digest = sha2::Sha256::digest(identity.as_bytes());
    let tag: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{stem}-{tag}.{}.gguf", weights.name())
}

/// The dtype a tensor of `dtype` and row length `row` takes in the copy in `weights`:
/// - `q8_0`: norms and biases (F32 in every GGUF) stay F32, and Q8_0 needs rows of whole
///   32-blocks;
/// - `f16`: every quantized tensor F16, the float ones as they are (as candle's
///   dequantize-at-load does);
/// - `f32`: every tensor F32.
fn converted_dtype(weights: Weights, dtype: GgmlDType, row: usize) -> GgmlDType {
    match weights {
        Weights::Q8_0 if dtype != GgmlDType::F32 && row.is_multiple_of(32) => GgmlDType::Q8_0,
        Weights::F16 if !is_float(dtype) => GgmlDType::F16,
        Weights::F32 => GgmlDType::F32,
        _ => dtype,
    }
}

/// llama.cpp's `general.file_type` for a copy in `weights` (LLAMA_FTYPE_ALL_F32,
/// LLAMA_FTYPE_MOSTLY_F16, LLAMA_FTYPE_MOSTLY_Q8_0).
fn file_type(weights: Weights) -> u32 {
    match weights {
        Weights::F32 => 0,
        Weights::F16 => 1,
        _ => 7,
    }
}

fn convert(src: &Path, dst: &Path, weights: Weights) -> Result<(), WeightsError> {
    let (content, mut reader) = read_header(src)?;
    let cpu = Device::Cpu;
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    // The source's order on disk, so the copy reads like its source.
    names.sort_by_key(|n| content.tensor_infos[*n].offset);
    let mut tensors: Vec<(String, QTensor)> = Vec::with_capacity(names.len());
    for name in names {
        let t = content.tensor(&mut reader, name, &cpu).map_err(gguf(src))?;
        let row = t.shape().dims().last().copied().unwrap_or(1);
        let want = converted_dtype(weights, t.dtype(), row);
        let t = if want == t.dtype() {
            t
        } else {
            let dense = t.dequantize(&cpu).map_err(gguf(src))?;
            QTensor::quantize(&dense, want).map_err(gguf(src))?
        };
        tensors.push((name.clone(), t));
    }
    let mut metadata: Vec<(&str, Value)> = content
        .metadata
        .iter()
        // candle's writer aligns to 32 bytes: a source's other alignment would misplace
        // every tensor on reading.
        .filter(|(k, _)| k.as_str() != "general.alignment")
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    metadata.sort_by(|a, b| a.0.cmp(b.0));
    match metadata.iter_mut().find(|(k, _)| *k == "general.file_type") {
        Some((_, v)) => *v = Value::U32(file_type(weights)),
        None => metadata.push(("general.file_type", Value::U32(file_type(weights)))),
    }
    let meta_refs: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let tensor_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    let mut w = BufWriter::new(File::create(dst).map_err(io("creating", dst))?);
    gguf_file::write(&mut w, &meta_refs, &tensor_refs).map_err(gguf(dst))?;
    w.flush().map_err(io("writing", dst))?;
    w.into_inner()
        .map_err(|e| WeightsError::Io {
            what: "writing",
            path: dst.to_path_buf(),
            source: e.into_error(),
        })?
        .sync_all()
        .map_err(io("writing", dst))
}

/// The converted file reads back with the source's tensors (names, shapes) in the formats
/// the conversion gives, and the source's metadata keys.
fn check(src: &Path, dst: &Path, weights: Weights) -> Result<(), WeightsError> {
    let (a, _) = read_header(src)?;
    let (b, _) = read_header(dst)?;
    let problem = |p: String| WeightsError::Check {
        path: dst.to_path_buf(),
        problem: p,
    };
    if a.tensor_infos.len() != b.tensor_infos.len() {
        return Err(problem(format!(
            "{} tensors, the source has {}",
            b.tensor_infos.len(),
            a.tensor_infos.len()
        )));
    }
    for (name, ta) in &a.tensor_infos {
        let tb = b
            .tensor_infos
            .get(name)
            .ok_or_else(|| problem(format!("no tensor {name}")))?;
        let row = ta.shape.dims().last().copied().unwrap_or(1);
        let want = converted_dtype(weights, ta.ggml_dtype, row);
        if ta.shape != tb.shape || tb.ggml_dtype != want {
            return Err(problem(format!(
                "{name}: {:?} {:?}, want {:?} {want:?}",
                tb.shape, tb.ggml_dtype, ta.shape
            )));
        }
    }
    let keys = |c: &Content| -> HashSet<String> {
        c.metadata
            .keys()
            .filter(|k| *k != "general.alignment")
            .cloned()
            .collect()
    };
    if !keys(&a).is_subset(&keys(&b)) {
        return Err(problem("metadata keys missing".into()));
    }
    Ok(())
}
