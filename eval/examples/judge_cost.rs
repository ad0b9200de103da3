//! What a Gemma judgement of a 256-token text costs, and the share of its normalisers:
//! `Gemma::judge` (the normalisers on every core) against the same pass with each
//! position's full log-softmax taken one after another on one core (what the judge did
//! before; this arm also copies each 1 MB row out, a few milliseconds of the whole),
//! interleaved in each round, medians over rounds.
//!
//!     cargo run --release -p mistralrs-hlg-eval --example judge_cost [ROUNDS]
use std::time::Instant;

use mistralrs_hlg_eval::gemma::{self, Gemma};
use mistralrs_hlg_eval::metrics;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args().nth(1).map_or(Ok(5), |a| a.parse())?;
    let g = Gemma::load(&gemma::fetch()?)?;
    let prompt = "Write a short story about a lighthouse keeper.";
    let text = " The keeper climbed the stairs every evening, counting them aloud. ".repeat(20);
    let (mut now, mut before) = (vec![], vec![]);
    for _ in 0..rounds {
        let t = Instant::now();
        let judged = g.judge(prompt, &text)?;
        now.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let (tokens, rows) = g.forced_rows(prompt, &text)?;
        let lp: Vec<f64> = rows
            .iter()
            .zip(&tokens)
            .map(|(r, &c)| metrics::log_softmax(r, 1.0).map_or(f64::NAN, |l| l[c as usize]))
            .collect();
        before.push(t.elapsed().as_secs_f64());
        assert_eq!(lp, judged.logprobs);
    }
    let tokens = g.judge(prompt, &text)?.logprobs.len();
    let (a, b) = (median(now), median(before));
    println!("{tokens} tokens, {rounds} rounds: judge {a:.3} s, one core's log-softmax {b:.3} s, ratio {:.2}", a / b);
    Ok(())
}
