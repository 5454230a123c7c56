//! Server-sent events framing (`text/event-stream`).
//!
//! A stream starts with a `retry:` line (how long a client waits before
//! reconnecting), carries named events whose `data:` is one JSON document,
//! numbered with `id:` when the stream is replayable, and comment lines
//! (`: keepalive`) that keep proxies from closing an idle connection.

/// `retry: <ms>`, sent first.
pub fn retry(ms: u32) -> String {
    format!("retry: {ms}\n\n")
}

/// A named event whose data is `json` (a serialised JSON value, one line).
pub fn event(name: &str, json: &str) -> String {
    frame(None, name, json)
}

/// A named event with an `id:`, for streams a client can resume with
/// `Last-Event-ID`.
pub fn event_with_id(id: u64, name: &str, json: &str) -> String {
    frame(Some(id), name, json)
}

fn frame(id: Option<u64>, name: &str, json: &str) -> String {
    let mut out = String::with_capacity(json.len() + name.len() + 24);
    if let Some(id) = id {
        out.push_str(&format!("id: {id}\n"));
    }
    out.push_str("event: ");
    out.push_str(name);
    out.push('\n');
    // A JSON document has no raw newlines except inside pretty-printing;
    // split defensively so every line stays a `data:` line.
    for line in json.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

/// A comment line; clients ignore it.
pub fn comment(text: &str) -> String {
    format!(": {}\n\n", text.replace('\n', " "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_exact() {
        assert_eq!(retry(3000), "retry: 3000\n\n");
        assert_eq!(event("token", "{\"text\":\"hi\"}"), "event: token\ndata: {\"text\":\"hi\"}\n\n");
        assert_eq!(event_with_id(7, "message", "{}"), "id: 7\nevent: message\ndata: {}\n\n");
        assert_eq!(comment("keep\nalive"), ": keep alive\n\n");
    }

    #[test]
    fn multi_line_data_stays_data() {
        assert_eq!(event("x", "{\n\"a\":1\n}"), "event: x\ndata: {\ndata: \"a\":1\ndata: }\n\n");
    }
}
