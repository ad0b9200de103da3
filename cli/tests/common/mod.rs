//! `mistralrs-hlg serve` started as a user starts it, and HTTP/1.1 over a plain socket
//! (this package needs no client library). Shared by the tests that start the binary.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `serve` process on a free port of 127.0.0.1, stopped (by its handle) when dropped.
pub struct Server {
    /// The child process, `serve`.
    pub child: Child,
    port: u16,
    log: std::path::PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        // Only the process this test started, by its handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

impl Server {
    /// `serve` on the embedded model.
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// `serve` with these arguments beside the address.
    pub fn start_with(args: &[&str]) -> Server {
        Server::start_env(args, &[])
    }

    /// `serve` with these arguments and these variables in its environment.
    pub fn start_env(args: &[&str], envs: &[(&str, &str)]) -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::env::temp_dir().join(format!(
            "mistralrs-hlg-serve-{}-{port}.log",
            std::process::id()
        ));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_mistralrs-hlg"))
            .args(["serve", "--host", "127.0.0.1", "--port", &port.to_string()])
            .args(args)
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("starting mistralrs-hlg serve");
        let mut s = Server { child, port, log };
        let start = Instant::now();
        loop {
            if let Some(status) = s.child.try_wait().unwrap() {
                panic!(
                    "serve exited ({status}) before it was ready:\n{}",
                    s.log_text()
                );
            }
            if matches!(s.request("GET", "/health", None), Ok((200, _))) {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(300),
                "serve was not ready in 300 s:\n{}",
                s.log_text()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What the server printed.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// One request on its own connection: the status and the body.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> std::io::Result<(u16, String)> {
        self.request_with_key(method, path, body, None)
    }

    /// As [`Server::request`], with `Authorization: Bearer KEY` when a key is given.
    pub fn request_with_key(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        key: Option<&str>,
    ) -> std::io::Result<(u16, String)> {
        let mut c = TcpStream::connect(("127.0.0.1", self.port))?;
        c.set_read_timeout(Some(Duration::from_secs(300)))?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
        write!(
            c,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             {auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        let mut raw = Vec::new();
        c.read_to_end(&mut raw)?;
        let raw = String::from_utf8_lossy(&raw);
        let (head, rest) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        Ok((
            status,
            if chunked {
                dechunk(rest)
            } else {
                rest.to_string()
            },
        ))
    }

    /// POST JSON; panics with the server's log when the connection fails.
    pub fn post(&self, path: &str, body: &Value) -> (u16, String) {
        self.request("POST", path, Some(body))
            .unwrap_or_else(|e| panic!("POST {path}: {e}\n{}", self.log_text()))
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Resident memory of a process in MiB (`VmRSS`), 0 where /proc is missing.
pub fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}
