//! What can go wrong while building or running the server, before any request: every
//! public server function that can fail returns [`ServerError`].

use std::path::PathBuf;

use super::OptionError;

/// An error of upstream's, kept as its source (mistral.rs returns `anyhow` errors).
///
/// ```
/// use mistralrs_hlg::server::UpstreamError;
/// let e: UpstreamError = "the engine stopped".into();
/// assert_eq!(e.to_string(), "the engine stopped");
/// ```
pub type UpstreamError = Box<dyn std::error::Error + Send + Sync>;

/// Why the server could not be built or run.
///
/// ```
/// use mistralrs_hlg::server::{load::ModelSource, ServerError};
/// let e = ModelSource::resolve("/no/such/model.gguf", None).unwrap_err();
/// assert!(matches!(e, ServerError::Model { .. }));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A server option with a value it does not accept (names the flag).
    #[error(transparent)]
    Option(#[from] OptionError),
    /// The config file could not be read, parsed, or holds an unknown key.
    #[error(transparent)]
    ConfigFile(#[from] super::options::ConfigFileError),
    /// `--model-id` names no GGUF file this server can load.
    #[error("{path}: {problem}")]
    Model {
        /// The path given.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
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
    /// Upstream failed to load the model or build its router.
    #[error("{what}: {source}")]
    Upstream {
        /// What upstream was asked to do.
        what: &'static str,
        /// Upstream's error.
        source: UpstreamError,
    },
    /// The start-up batching probe could not run ([`super::engine::probe`]).
    #[error("the batching probe: {0}")]
    Probe(String),
    /// The address could not be bound, or serving failed.
    #[error("{what} {addr}: {source}")]
    Net {
        /// Binding or serving.
        what: &'static str,
        /// `host:port`.
        addr: String,
        /// The socket error.
        source: std::io::Error,
    },
}

impl ServerError {
    /// Upstream's error from `what`.
    pub(crate) fn upstream<E: Into<UpstreamError>>(what: &'static str) -> impl FnOnce(E) -> Self {
        move |e| ServerError::Upstream {
            what,
            source: e.into(),
        }
    }
}
