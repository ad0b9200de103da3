//! A client request to `mistralrs-hlg serve` (start it first: `cargo run --release -- serve`).
//!
//! `cargo run --release --example client [http://127.0.0.1:1234]`. Plain HTTP/1.1 over a
//! TCP socket, to show the wire format; any OpenAI client works the same way (the Python
//! client passes the field as `extra_body={"hlg": {...}}`).

use std::io::{Read, Write};
use std::net::TcpStream;

fn main() -> anyhow::Result<()> {
    let base = std::env::args().nth(1).unwrap_or_else(|| "http://127.0.0.1:1234".into());
    let host = base.trim_start_matches("http://").trim_end_matches('/');
    let body = serde_json::json!({
        "model": "default",
        "messages": [{"role": "user", "content": "Name three fruits."}],
        "max_tokens": 32,
        "temperature": 0.8,
        "hlg": {"toe_shape": "quadratic", "toe": 3.0, "pivot_offset": 5.0}
    })
    .to_string();
    let mut stream = TcpStream::connect(host)?;
    write!(
        stream,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let json = response.split("\r\n\r\n").nth(1).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(json)?;
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}
