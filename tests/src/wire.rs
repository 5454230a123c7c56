//! The HTTP/1.1 request reading shared by the loopback servers the tests
//! start (the scripted model and the JSON server).

use std::io::Read;
use std::time::Duration;

/// Reads one request from `s`: its head (request line and headers) and its
/// body, whole, whether sent with `content-length` or chunked. `None` when
/// the client closed or stalled (5 s) before the request was complete.
pub fn read_request(s: &mut std::net::TcpStream) -> Option<(String, String)> {
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    loop {
        let n = s.read(&mut buf).unwrap_or(0);
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some(end) = text.find("\r\n\r\n") {
            let head = &text[..end];
            if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
                if text.ends_with("0\r\n\r\n") {
                    return Some((head.to_string(), dechunk(&text[end + 4..])));
                }
            } else {
                let len = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase().strip_prefix("content-length:").and_then(|v| v.trim().parse().ok())
                    })
                    .unwrap_or(0usize);
                if text.len() >= end + 4 + len {
                    return Some((head.to_string(), text[end + 4..end + 4 + len].to_string()));
                }
            }
        }
        if n == 0 {
            return None;
        }
    }
}

/// A chunked HTTP/1.1 body, decoded.
pub fn dechunk(mut rest: &str) -> String {
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
