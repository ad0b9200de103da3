//! `mistralrs-hlg serve`'s replies do not depend on how many threads the engine has.
//!
//! The server as a user starts it (the embedded model, `--weights auto`: dense F16
//! weights), once with one rayon thread and once with two; the same greedy and seeded
//! requests must give the same text and the same log-probs, to the last bit.
//!
//! What this guards: on `scripts/serve`'s engine the one-row products of a decode step
//! are split across the pool by output rows
//! (`patches/mistralrs-quant-0.8.1/0001-cpu-one-row-products-split-across-the-pool.patch`),
//! and the forward pass runs on a pool worker (mistralrs-core's 0008). With one thread
//! nothing is split (the patch takes one part per thread); with two, every product with
//! at least 514 output rows and 2^18 weights is (SmolLM2's q, o, gate, up, down and
//! output layer). The split is bit-identical only while each output row is reduced
//! whole, in gemm's row-major `gemv` and never in its small-output kernel, which sums in
//! another order: a change there fails here. On the registry's engine the same run
//! checks that its own parallel loops (attention by head, rotary, the prompt's matrix
//! products) write disjoint outputs, the property the patches rely on.

mod common;

use common::Server;
use serde_json::{json, Value};

/// Requests: short and long prompts, greedy, then the shipped HLG with a seed (the
/// processor and the sampler on the same logits).
fn requests() -> Vec<Value> {
    let long = (0..120)
        .map(|i| ["harbor", "lantern", "violin", "meadow", "bridge"][i % 5])
        .collect::<Vec<_>>()
        .join(" ");
    let chat = |content: &str, extra: Value| {
        let mut body = json!({
            "model": "default",
            "messages": [{"role": "user", "content": content}],
            "max_tokens": 40,
            "logprobs": true,
        });
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    vec![
        chat("Name three rivers of Europe.", json!({"temperature": 0.0})),
        chat(
            &format!("Summarise in one sentence: {long}"),
            json!({"temperature": 0.0}),
        ),
        chat(
            "Write the opening line of a story about a lighthouse.",
            json!({"temperature": 1.0, "seed": 7, "hlg": true}),
        ),
    ]
}

/// Each request's reply text and the drawn tokens' log-probs, as the server wrote them.
fn replies(threads: &str) -> Vec<(String, Vec<String>)> {
    let s = Server::start_env(&[], &[("RAYON_NUM_THREADS", threads)]);
    requests()
        .iter()
        .map(|body| {
            let (status, text) = s.post("/v1/chat/completions", body);
            assert_eq!(status, 200, "{text}");
            let v: Value = serde_json::from_str(&text).unwrap();
            let choice = &v["choices"][0];
            let content = choice["message"]["content"].as_str().unwrap().to_string();
            // The log-probs as the JSON wrote them: equal strings are equal bits.
            let logprobs: Vec<String> = choice["logprobs"]["content"]
                .as_array()
                .unwrap_or_else(|| panic!("no log-probs in {text}"))
                .iter()
                .map(|t| t["logprob"].to_string())
                .collect();
            assert!(!logprobs.is_empty(), "no tokens in {text}");
            (content, logprobs)
        })
        .collect()
}

#[test]
fn one_thread_and_two_give_the_same_bits() {
    let one = replies("1");
    let two = replies("2");
    for (i, (a, b)) in one.iter().zip(&two).enumerate() {
        assert_eq!(a.0, b.0, "request {i}: the texts differ");
        let first = a.1.iter().zip(&b.1).position(|(x, y)| x != y);
        assert!(
            first.is_none() && a.1.len() == b.1.len(),
            "request {i}: log-probs differ from token {first:?}: {:?} against {:?}",
            a.1,
            b.1
        );
    }
}
