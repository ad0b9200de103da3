//! How the engine takes requests: `n > 1` choices, the batching setting and the mode
//! the start-up probe decides.

use super::gate::Concurrency;

/// How the generation routes serve a request for `n > 1` choices.
///
/// ```
/// use mistralrs_hlg::server::{Choices, HlgServerOptions};
/// let o = HlgServerOptions { n_choices: Some("split".into()), ..Default::default() };
/// assert_eq!(o.choices(), Ok(Some(Choices::Split)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choices {
    /// As `n` single-choice generations, one after another, merged into one response: the
    /// default on the CPU, and wherever the engine decodes a batch's rows wrongly (see
    /// `docs/SERVING.md`).
    Split,
    /// As upstream does: one request with `n` sequences, batched.
    Batched,
    /// Batched for a whole answer, split for a stream: the default off the CPU on an
    /// engine that batches correctly. mistral.rs 0.8.1 streams the `n` sequences of
    /// a request as one group and, under concurrent load, ends some of those streams
    /// without `[DONE]` (`docs/NOTES.md`, "Prefix reuse on the CPU").
    SplitStreams,
}

impl Choices {
    /// Whether a request for `n > 1` choices runs as `n` single-choice generations.
    ///
    /// ```
    /// use mistralrs_hlg::server::Choices;
    /// assert!(Choices::Split.splits(false) && !Choices::Batched.splits(true));
    /// assert!(Choices::SplitStreams.splits(true) && !Choices::SplitStreams.splits(false));
    /// ```
    pub fn splits(self, streaming: bool) -> bool {
        match self {
            Choices::Split => true,
            Choices::Batched => false,
            Choices::SplitStreams => streaming,
        }
    }
}

/// How the server lets the engine batch sequences (`--hlg-batching`).
///
/// ```
/// use mistralrs_hlg::server::{Batching, HlgServerOptions};
/// assert_eq!(HlgServerOptions::default().batching(), Ok(Batching::Auto));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batching {
    /// [`Batching::Serial`] on the CPU; elsewhere probe the engine at start-up and batch
    /// when it decodes batched rows as it decodes them alone. The default.
    Auto,
    /// One request in the engine at a time, whatever the probe would say.
    Serial,
    /// No limit: the engine batches as upstream does (for a patched engine or a GPU).
    On,
}

impl Batching {
    /// Every value, as the flag spells them.
    ///
    /// ```
    /// use mistralrs_hlg::server::Batching;
    /// assert!(Batching::NAMES.iter().all(|n| Batching::parse(n).is_some()));
    /// ```
    pub const NAMES: [&'static str; 3] = ["auto", "serial", "on"];

    /// The accepted names, in words.
    ///
    /// ```
    /// use mistralrs_hlg::server::HlgServerOptions;
    /// let opts = HlgServerOptions { batching: Some("always".into()), ..Default::default() };
    /// assert_eq!(
    ///     opts.batching().unwrap_err().to_string(),
    ///     r#"--hlg-batching must be "auto", "serial" or "on", got "always""#
    /// );
    /// ```
    pub const EXPECTED: &'static str = r#""auto", "serial" or "on""#;

    /// The value a flag names, `None` for another name.
    ///
    /// ```
    /// use mistralrs_hlg::server::Batching;
    /// assert_eq!(Batching::parse("serial"), Some(Batching::Serial));
    /// assert_eq!(Batching::parse("sometimes"), None);
    /// ```
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(Batching::Auto),
            "serial" => Some(Batching::Serial),
            "on" => Some(Batching::On),
            _ => None,
        }
    }
}

/// How a server's engine takes requests, as
/// [`HlgServerOptions::engine_mode`](crate::server::HlgServerOptions::engine_mode) decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineMode {
    /// How the [`Gate`] admits requests: one at a time when the engine's batched rows are
    /// wrong (the others queue), all at once otherwise.
    pub concurrency: Concurrency,
    /// How a request with `n > 1` is run.
    pub choices: Choices,
}
