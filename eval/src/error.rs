//! The evaluation's one error type.

use std::path::PathBuf;

/// Why an evaluation step failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A file could not be read or written.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file read but does not hold what it should.
    #[error("{path}: {problem}")]
    Data {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        problem: String,
    },
    /// An argument outside what the step accepts.
    #[error("{0}")]
    Invalid(String),
    /// The engine failed a request or could not load the model.
    #[error("the engine: {0}")]
    Engine(Box<dyn std::error::Error + Send + Sync>),
    /// A curve setting of a sweep was refused.
    #[error(transparent)]
    Curve(#[from] mistralrs_hlg::HlgError),
    /// The embedded model could not be fetched.
    #[error(transparent)]
    Model(#[from] mistralrs_hlg::model::ModelError),
}

impl EvalError {
    /// An engine error (mistral.rs returns `anyhow` errors; candle its own).
    pub(crate) fn engine<E: Into<Box<dyn std::error::Error + Send + Sync>>>(e: E) -> Self {
        EvalError::Engine(e.into())
    }

    /// An I/O error while doing `what` on `path`.
    pub(crate) fn io(
        what: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| EvalError::Io { what, path, source }
    }
}
