//! What can go wrong while building or running the server, before any request: every
//! public server function that can fail returns [`ServerError`].

use std::path::PathBuf;

use crate::HlgError;

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

/// A server option with a value it does not accept: the message names the flag (which is
/// also the config-file key) and what it accepts.
///
/// ```
/// use mistralrs_hlg::server::{HlgServerOptions, OptionError};
/// let opts = HlgServerOptions { n_choices: Some("many".into()), ..Default::default() };
/// let e = opts.choices().unwrap_err();
/// assert!(matches!(e, OptionError::Value { flag: "hlg-n-choices", .. }));
/// assert_eq!(e.to_string(), r#"--hlg-n-choices must be "split" or "batched", got "many""#);
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionError {
    /// One of the seven `--hlg-*` curve flags, with the field's own error.
    #[error("--{flag}: {error}")]
    Curve {
        /// The flag without `--`.
        flag: &'static str,
        /// What the field accepts and what it got.
        error: HlgError,
    },
    /// Another option, with a value outside its names.
    #[error("--{flag} must be {expected}, got {got:?}")]
    Value {
        /// The flag without `--`.
        flag: &'static str,
        /// The accepted values, in words.
        expected: &'static str,
        /// What was given.
        got: String,
    },
    /// `--hlg-backend mlx` in a build without the `mlx` feature.
    #[error("--hlg-backend mlx: this binary was built without the `mlx` feature (see the README's mlx section)")]
    MlxNotBuilt,
    /// A name that is not one of the curve flags.
    #[error("unknown option `{0}`")]
    Unknown(String),
    /// A second listener (upstream's `--mcp-port`) while an API key is set: the key
    /// would not cover it.
    #[error("{flag} {port}: that port would serve without the API key (it is a listener of its own, outside the router the key guards); drop {flag} or --api-key")]
    Unguarded {
        /// The option that opens the listener, with its dashes.
        flag: String,
        /// Its port.
        port: u16,
    },
}
