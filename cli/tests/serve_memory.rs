//! `mistralrs-hlg serve`'s resident memory over many distinct conversations on the CPU,
//! with the prefix cache the build's engine gets by default (issue #53).
//!
//! On `scripts/serve`'s engine (`server::load::engine_bounds_cpu_prefix_cache`) the
//! default keeps 4 finished sequences' caches: after the first few requests memory stays
//! where it is. On the registry's mistral.rs the same run with upstream's
//! `--prefix-cache-n 16` is the control: the host never evicts a cache on the CPU, and
//! memory grows with every request (the reason that engine's default is 0). Both from
//! the same measurement, so the bound is checked by a run that can fail.

mod common;

use common::{rss_mib, Server};
use mistralrs_hlg::server::load::engine_bounds_cpu_prefix_cache;
use serde_json::json;

/// Distinct requests; each prompt about 400 tokens, so each kept cache is ~9 MiB of
/// touched memory (30 layers × 3 KV heads × 64 × 2 (keys, values) × 2 bytes per token).
const REQUESTS: usize = 30;
/// Requests before memory is read as the baseline: past the 4 a bounded cache keeps.
const WARM: usize = 6;

fn prompt(i: usize) -> String {
    const WORDS: [&str; 16] = [
        "river", "lantern", "market", "winter", "garden", "violin", "harbor", "meadow", "engine",
        "clock", "paper", "bridge", "letter", "candle", "forest", "window",
    ];
    let words: Vec<&str> = (0..300)
        .map(|k| WORDS[(i * 31 + k * k + k * i) % 16])
        .collect();
    format!("Request {i}. Summarise: {}", words.join(" "))
}

/// Resident memory of `serve` after each of `REQUESTS` distinct chat requests.
fn rss_over_requests(s: &Server) -> Vec<f64> {
    (0..REQUESTS)
        .map(|i| {
            let body = json!({
                "model": "default",
                "messages": [{"role": "user", "content": prompt(i)}],
                "max_tokens": 4,
                "temperature": 0.0,
            });
            let (status, text) = s.post("/v1/chat/completions", &body);
            assert_eq!(status, 200, "{text}");
            rss_mib(s.child.id())
        })
        .collect()
}

#[test]
fn memory_over_distinct_conversations_follows_the_engines_eviction() {
    let bounded = engine_bounds_cpu_prefix_cache();
    let s = match bounded {
        true => Server::start(),
        false => Server::start_with(&["--prefix-cache-n", "16"]),
    };
    let rss = rss_over_requests(&s);
    let warm = rss[..WARM].iter().cloned().fold(0.0, f64::max);
    let growth = rss[REQUESTS - 1] - warm;
    eprintln!(
        "{}: RSS {warm:.0} MiB after {WARM} requests, {:.0} MiB after {REQUESTS} ({growth:+.0} MiB): {rss:.0?}",
        if bounded { "bounded (the default)" } else { "registry's engine, --prefix-cache-n 16" },
        rss[REQUESTS - 1],
    );
    // Kept without a bound, the 24 requests after the baseline hold ~9 MiB each (~220
    // MiB); bounded, nothing.
    if bounded {
        assert!(growth < 64.0, "grew {growth:.0} MiB: {rss:.0?}");
    } else {
        assert!(
            growth > 128.0,
            "the control grew only {growth:.0} MiB: {rss:.0?}"
        );
    }
}
