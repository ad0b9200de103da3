//! What the server does about the engine's batching: a start-up probe of whether the
//! engine decodes the rows of a batch correctly, and the gate that runs one request at a
//! time in the engine when it does not.
//!
//! mistral.rs 0.8.1's CPU decode attention (`flash_attn_cpu_single_q`) keeps one scratch
//! slot per (tile, head) instead of per (batch row, tile, head), so every row of a decode
//! batch gets the attention output of the batch's last row (`docs/NOTES.md`). Any two
//! sequences the scheduler batches are affected: the choices of an `n > 1` request, and
//! independent requests whose lengths line up (the scheduler lets a shorter sequence
//! catch up with a longer one, then batches them). The host has no switch that avoids
//! that path on the CPU (every CPU attention goes through it, whatever the dtype or mask),
//! and its `max_num_seqs` does not help (an idle scheduler admits every waiting sequence
//! at once). So the server probes the engine at start-up ([`probe`]) and, when the rows
//! are wrong, admits one request into the engine at a time ([`Gate`]): the others queue
//! in the server, in arrival order, and are never rejected.
//!
//! The gate must not open before the engine has let go of the request it admitted, or the
//! next request could be batched with a sequence the engine is still running. For the
//! routes this crate serves it watches the request's response channel: the engine holds
//! the channel's sender in every sequence, so the permit goes back when the last sender is
//! dropped ([`Admission::track`]). For upstream's routes it holds the permit until the
//! response body is finished or dropped.

mod gate;
mod modes;
mod probe;
mod upstream;

pub use gate::{Admission, Concurrency, Gate, Senders};
pub use modes::{Batching, Choices, EngineMode};
pub use probe::{probe, ProbeReport, PROBE_TOLERANCE};
pub(crate) use upstream::gated_upstream;
pub use upstream::guard_body;
