//! A scripted OpenAI-compatible endpoint on loopback, for tests: answers
//! `POST …/chat/completions` with a chosen reply, after a chosen delay, with
//! a chosen status, and records every request body it received.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone)]
pub struct Script {
    pub reply: String,
    pub delay: Duration,
    pub status: u16,
}

impl Default for Script {
    fn default() -> Self {
        Self { reply: "scripted answer".into(), delay: Duration::ZERO, status: 200 }
    }
}

pub struct FakeModel {
    /// `host:port` it listens on.
    pub addr: String,
    pub script: Arc<Mutex<Script>>,
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl FakeModel {
    pub fn start(script: Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let script = Arc::new(Mutex::new(script));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (script.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().take(10_000) {
                let Ok(stream) = stream else { continue };
                let (s, r) = (s.clone(), r.clone());
                std::thread::spawn(move || serve(stream, &s, &r));
            }
        });
        Self { addr, script, requests }
    }

    /// Base URL ending in `/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn set(&self, script: Script) {
        *self.script.lock().unwrap() = script;
    }

    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(mut s: std::net::TcpStream, script: &Mutex<Script>, log: &Mutex<Vec<String>>) {
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    let body = loop {
        let n = s.read(&mut buf).unwrap_or(0);
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(head) = text.find("\r\n\r\n") {
            if text[..head].to_ascii_lowercase().contains("transfer-encoding: chunked") {
                if text.ends_with("0\r\n\r\n") {
                    break dechunk(&text[head + 4..]);
                }
                if n == 0 {
                    return;
                }
                continue;
            }
            let len = text[..head]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase().strip_prefix("content-length:").and_then(|v| v.trim().parse::<usize>().ok())
                })
                .unwrap_or(0);
            if got.len() >= head + 4 + len {
                break text[head + 4..].to_string();
            }
        }
        if n == 0 {
            return;
        }
    };
    log.lock().unwrap().push(body);
    let Script { reply, delay, status } = script.lock().unwrap().clone();
    std::thread::sleep(delay);
    let payload = if status == 200 {
        serde_json::json!({
            "id": "cmpl-test", "object": "chat.completion", "model": "scripted-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
        })
    } else {
        serde_json::json!({"error": {"message": reply}})
    };
    let payload = payload.to_string();
    let _ = write!(
        s,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
        payload.len()
    );
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}
