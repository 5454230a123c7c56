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
    /// What the answer cost, from the chunk that carries `usage`.
    Usage(crate::Usage),
    Done,
    Error(String),
}

/// The longest line the parser holds while waiting for its end.
pub const MAX_LINE: usize = 1 << 20;

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

    /// Adds `bytes`; returns every event they complete. A line longer than
    /// [`MAX_LINE`] bytes is dropped with an error event.
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
            if let Some(delta) =
                v["choices"][0]["delta"]["content"].as_str().map(crate::storable).filter(|d| !d.is_empty())
            {
                out.push(StreamEvent::Delta(delta));
            }
            if let Some(usage) = crate::Usage::from_response(&v) {
                out.push(StreamEvent::Usage(usage));
            }
        }
        if self.buf.len() > MAX_LINE {
            // A line this long is not an event stream; its bytes are dropped
            // so a misbehaving endpoint cannot grow the buffer without end.
            self.buf.clear();
            out.push(StreamEvent::Error(format!("a stream line ran past {MAX_LINE} bytes")));
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
    fn nul_is_dropped_and_endless_lines_are_cut() {
        let mut p = StreamParser::new();
        assert_eq!(p.feed(event("a\0b").as_bytes()), vec![StreamEvent::Delta("ab".into())]);
        assert_eq!(p.feed(event("\0").as_bytes()), vec![], "a delta of NUL alone is no delta");
        let out = p.feed(&vec![b'x'; MAX_LINE + 1]);
        assert!(matches!(out.as_slice(), [StreamEvent::Error(_)]), "{out:?}");
        assert_eq!(p.feed(event("ok").as_bytes()), vec![StreamEvent::Delta("ok".into())], "the parser recovers");
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
    fn the_last_chunk_carries_the_usage() {
        let mut p = StreamParser::new();
        let last = r#"data: {"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":32}}}"#;
        let got = p.feed(
            format!("{}data: {{\"choices\":[],\"usage\":null}}\n\n{last}\n\ndata: [DONE]\n\n", event("a")).as_bytes(),
        );
        assert_eq!(
            got,
            vec![
                StreamEvent::Delta("a".into()),
                StreamEvent::Usage(crate::Usage { prompt_tokens: 40, cached_tokens: 32, completion_tokens: 5 }),
                StreamEvent::Done
            ]
        );
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
