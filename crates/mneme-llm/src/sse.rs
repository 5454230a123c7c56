//! Decoding a streamed chat completion (`text/event-stream`) incrementally.
//!
//! Bytes arrive in arbitrary pieces: an event may be split across reads, and
//! one read may hold several events. [`StreamParser::feed`] keeps the
//! unfinished tail and returns the events completed so far: text deltas,
//! then `Done` on `data: [DONE]` (or an endpoint error).

/// One decoded event of a streamed answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    Delta(String),
    Done,
    Error(String),
}

#[derive(Debug, Default)]
pub struct StreamParser {
    buf: Vec<u8>,
    done: bool,
}

impl StreamParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `[DONE]` has been seen.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Adds `bytes`; returns every event they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<StreamEvent> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\r', '\n']);
            let Some(data) = line.strip_prefix("data:") else { continue };
            let data = data.trim_start();
            if data == "[DONE]" {
                self.done = true;
                out.push(StreamEvent::Done);
                continue;
            }
            let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
                out.push(StreamEvent::Error(format!("undecodable stream event: {data}")));
                continue;
            };
            if let Some(err) = v.get("error") {
                out.push(StreamEvent::Error(
                    err.get("message").and_then(|m| m.as_str()).unwrap_or("error").to_string(),
                ));
                continue;
            }
            if let Some(delta) = v["choices"][0]["delta"]["content"].as_str().filter(|d| !d.is_empty()) {
                out.push(StreamEvent::Delta(delta.to_string()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(text: &str) -> String {
        format!("data: {}\n\n", serde_json::json!({"choices": [{"delta": {"content": text}}]}))
    }

    #[test]
    fn events_split_anywhere_decode_the_same() {
        let whole = format!("{}{}: keepalive\n\n{}data: [DONE]\n\n", event("Hel"), event("lo"), event("!"));
        let want = vec![
            StreamEvent::Delta("Hel".into()),
            StreamEvent::Delta("lo".into()),
            StreamEvent::Delta("!".into()),
            StreamEvent::Done,
        ];
        for chunk in [1, 2, 7, 64, whole.len()] {
            let mut p = StreamParser::new();
            let got: Vec<StreamEvent> = whole.as_bytes().chunks(chunk).flat_map(|c| p.feed(c)).collect();
            assert_eq!(got, want, "chunk size {chunk}");
            assert!(p.is_done());
        }
    }

    #[test]
    fn role_only_and_empty_deltas_are_skipped() {
        let mut p = StreamParser::new();
        let got = p.feed(b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"\"}}]}\n\n");
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn errors_in_the_stream_surface() {
        let mut p = StreamParser::new();
        assert_eq!(
            p.feed(b"data: {\"error\":{\"message\":\"overloaded\"}}\n\n"),
            vec![StreamEvent::Error("overloaded".into())]
        );
        assert!(matches!(p.feed(b"data: {garbage\n")[0], StreamEvent::Error(_)));
    }
}
