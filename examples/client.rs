//! Client requests to `mistralrs-hlg serve` (start it first: `scripts/serve`).
//!
//! `cargo run --release --example client [http://127.0.0.1:1234]`. A chat completion with
//! `hlg`, the same streamed (server-sent events read as they arrive), and a Responses call.
//! The key of a server started with `--api-key` is read from `MISTRALRS_HLG_API_KEY`.
//! Any OpenAI client works the same way (the Python client passes the field as
//! `extra_body={"hlg": {...}}`).

use serde_json::{json, Value};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let base = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:1234".into());
    let base = base.trim_end_matches('/');
    let client = reqwest::Client::new();
    let key = std::env::var("MISTRALRS_HLG_API_KEY").ok();
    let post = |path: &str, body: &Value| {
        let req = client.post(format!("{base}{path}")).json(body);
        match &key {
            Some(k) => req.bearer_auth(k),
            None => req,
        }
    };
    let hlg = json!({"toe_shape": "quadratic", "toe": 3.0, "pivot_offset": 5.0});
    let chat = json!({
        "model": "default",
        "messages": [{"role": "user", "content": "Name three fruits."}],
        "max_tokens": 32,
        "temperature": 0.8,
        "hlg": hlg,
    });

    let resp = post("/v1/chat/completions", &chat).send().await?;
    let status = resp.status();
    let v: Value = resp.json().await?;
    anyhow::ensure!(status.is_success(), "chat: {status}: {v}");
    println!("chat: {}", v["choices"][0]["message"]["content"]);

    // The same, streamed.
    let mut streamed = chat.clone();
    streamed["stream"] = json!(true);
    let resp = post("/v1/chat/completions", &streamed).send().await?;
    anyhow::ensure!(resp.status().is_success(), "stream: {}", resp.status());
    print_stream(resp).await?;

    let responses = json!({"model": "default", "input": "Name three fruits.", "max_output_tokens": 32, "temperature": 0.8, "hlg": hlg});
    let resp = post("/v1/responses", &responses).send().await?;
    let status = resp.status();
    let v: Value = resp.json().await?;
    anyhow::ensure!(status.is_success(), "responses: {status}: {v}");
    println!("responses: {}", v["output_text"]);
    Ok(())
}

/// Prints a chat stream's text as it arrives. Each `data:` line is one chunk; a chunk of
/// the body may hold several lines or end inside one, so lines are cut from a buffer.
async fn print_stream(mut resp: reqwest::Response) -> anyhow::Result<()> {
    let mut buf = String::new();
    print!("stream: ");
    while let Some(bytes) = resp.chunk().await? {
        buf.push_str(&String::from_utf8_lossy(&bytes));
        while let Some(end) = buf.find('\n') {
            let line: String = buf.drain(..=end).collect();
            let Some(data) = line.trim_end().strip_prefix("data: ") else {
                continue;
            };
            if data == "[DONE]" {
                break;
            }
            let chunk: Value = serde_json::from_str(data)?;
            if let Some(err) = chunk.get("error") {
                anyhow::bail!("stream error: {err}");
            }
            print!(
                "{}",
                chunk["choices"][0]["delta"]["content"]
                    .as_str()
                    .unwrap_or_default()
            );
        }
    }
    println!();
    Ok(())
}
