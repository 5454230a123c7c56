//! Reading an export a piece at a time: the document is fed in chunks as
//! they arrive and comes out as its items (a header field, one table row,
//! one search item, one memory key), each parsed on its own, so a store of a
//! million items is read in the memory of one item and one chunk.

use serde_json::{Map, Value as J};

/// The largest single value (a row, a search item, a memory key) the reader
/// holds: past it the export is refused rather than read into memory.
pub const MAX_VALUE_BYTES: usize = 16 << 20;

/// One item of an export, in the order the document holds them.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A top-level field outside the sections: `format`, `version`,
    /// `export_id`, `exported_at_ms`, a part's `part` and `last`, and any
    /// field this version does not know (kept for the caller to judge).
    Field(String, J),
    /// One row of `tables.<table>`.
    Row { table: String, row: Map<String, J> },
    /// One item of the search index (`search`).
    Search(Map<String, J>),
    /// One memory key and its stored value (`kv`).
    Kv { key: String, value: J },
    /// The readable `memory` view (facts, gists and focus by topic): the
    /// only copy of memory in a version-1 export, a view in later ones.
    Memory(J),
}

/// Why the document cannot be read, with the byte it was found at.
#[derive(Debug, Clone, PartialEq)]
pub struct FormatError {
    pub at: u64,
    pub message: String,
}

impl std::error::Error for FormatError {}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the export is not readable at byte {}: {}", self.at, self.message)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    Top,
    Tables,
    Rows,
    Search,
    Kv,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Slot {
    /// Just opened: an entry or the close.
    Open,
    /// After an entry: a comma or the close.
    Entry,
    /// After a comma: an entry.
    Comma,
}

#[derive(Debug)]
struct Frame {
    role: Role,
    slot: Slot,
    /// The table a `Rows` frame reads.
    table: String,
}

/// The reader: [`Reader::feed`] bytes, take [`Reader::next_item`] until it gives
/// none, and [`Reader::finish`] once the input has ended.
#[derive(Debug, Default)]
pub struct Reader {
    buf: Vec<u8>,
    pos: usize,
    /// Bytes dropped from the front of `buf` so far.
    dropped: u64,
    stack: Vec<Frame>,
    started: bool,
    ended: bool,
}

enum Step {
    Item(Item),
    Moved,
    More,
}

impl Reader {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        if self.pos > 0 && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            self.dropped += self.pos as u64;
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole item, or none until more is fed.
    pub fn next_item(&mut self) -> Result<Option<Item>, FormatError> {
        loop {
            match self.step()? {
                Step::Item(i) => return Ok(Some(i)),
                Step::Moved => continue,
                Step::More => {
                    if self.buf.len() - self.pos > MAX_VALUE_BYTES {
                        return Err(self.error(self.pos, format!("a value over {MAX_VALUE_BYTES} bytes")));
                    }
                    return Ok(None);
                }
            }
        }
    }

    /// Checks that the input ended with the whole document.
    pub fn finish(&mut self) -> Result<(), FormatError> {
        if let Some(i) = self.next_item()? {
            return Err(self.error(self.pos, format!("an item was left unread: {i:?}")));
        }
        let rest = skip_ws(&self.buf, self.pos);
        if !self.ended || rest < self.buf.len() {
            let what = if self.started { "the export ends before its document does (cut short?)" } else { "empty" };
            return Err(self.error(rest, what.into()));
        }
        Ok(())
    }

    fn error(&self, at: usize, message: String) -> FormatError {
        FormatError { at: self.dropped + at as u64, message }
    }

    fn step(&mut self) -> Result<Step, FormatError> {
        let b = &self.buf;
        let i = skip_ws(b, self.pos);
        if i >= b.len() {
            return Ok(Step::More);
        }
        if self.ended {
            return Err(self.error(i, "text after the end of the document".into()));
        }
        let Some(frame) = self.stack.last() else {
            if b[i] != b'{' {
                return Err(self.error(i, "an export is a JSON object".into()));
            }
            self.stack.push(Frame { role: Role::Top, slot: Slot::Open, table: String::new() });
            self.started = true;
            self.pos = i + 1;
            return Ok(Step::Moved);
        };
        let (role, slot) = (frame.role, frame.slot);
        let object = !matches!(role, Role::Rows | Role::Search);
        let close = if object { b'}' } else { b']' };
        if b[i] == close && slot != Slot::Comma {
            self.stack.pop();
            self.pos = i + 1;
            match self.stack.last_mut() {
                Some(parent) => parent.slot = Slot::Entry,
                None => self.ended = true,
            }
            return Ok(Step::Moved);
        }
        if slot == Slot::Entry {
            if b[i] != b',' {
                let want = if object { "`,` or `}`" } else { "`,` or `]`" };
                return Err(self.error(i, format!("expected {want}")));
            }
            self.stack.last_mut().expect("a frame").slot = Slot::Comma;
            self.pos = i + 1;
            return Ok(Step::Moved);
        }
        // An entry: `"key": value` in an object, a value in an array.
        let (key, v) = if object {
            let Some((key, end)) = string_at(b, i).map_err(|m| self.error(i, m))? else { return Ok(Step::More) };
            let c = skip_ws(b, end);
            if c >= b.len() {
                return Ok(Step::More);
            }
            if b[c] != b':' {
                return Err(self.error(c, "expected `:`".into()));
            }
            (Some(key), skip_ws(b, c + 1))
        } else {
            (None, i)
        };
        if v >= b.len() {
            return Ok(Step::More);
        }
        // A section opens: its entries are read one by one.
        let opens = match (role, key.as_deref()) {
            (Role::Top, Some("tables")) => Some((Role::Tables, b'{')),
            (Role::Top, Some("search")) => Some((Role::Search, b'[')),
            (Role::Top, Some("kv")) => Some((Role::Kv, b'{')),
            (Role::Tables, Some(_)) => Some((Role::Rows, b'[')),
            _ => None,
        };
        if let Some((inner, open)) = opens {
            if b[v] != open {
                let what = if open == b'{' { "an object" } else { "an array" };
                return Err(self.error(v, format!("`{}` must be {what}", key.unwrap_or_default())));
            }
            self.stack.last_mut().expect("a frame").slot = Slot::Entry;
            self.stack.push(Frame { role: inner, slot: Slot::Open, table: key.unwrap_or_default() });
            self.pos = v + 1;
            return Ok(Step::Moved);
        }
        let Some(end) = value_end(b, v).map_err(|m| self.error(v, m))? else { return Ok(Step::More) };
        let value: J = serde_json::from_slice(&b[v..end]).map_err(|e| self.error(v, e.to_string()))?;
        let item = match (role, key) {
            (Role::Top, Some(k)) if k == "memory" => Item::Memory(value),
            (Role::Top, Some(k)) => Item::Field(k, value),
            (Role::Kv, Some(key)) => Item::Kv { key, value },
            (Role::Rows | Role::Search, None) => {
                let J::Object(row) = value else {
                    return Err(self.error(v, "a row must be a JSON object".into()));
                };
                match role {
                    Role::Rows => Item::Row { table: self.stack.last().expect("a frame").table.clone(), row },
                    _ => Item::Search(row),
                }
            }
            _ => unreachable!("every role and key is matched above"),
        };
        self.stack.last_mut().expect("a frame").slot = Slot::Entry;
        self.pos = end;
        Ok(Step::Item(item))
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// The string starting at `i` and the index past it; none when it has not
/// all arrived.
fn string_at(b: &[u8], i: usize) -> Result<Option<(String, usize)>, String> {
    if b[i] != b'"' {
        return Err("expected a key in quotes".into());
    }
    let Some(end) = value_end(b, i)? else { return Ok(None) };
    let s: String = serde_json::from_slice(&b[i..end]).map_err(|e| e.to_string())?;
    Ok(Some((s, end)))
}

/// The index past the JSON value starting at `i`; none when it has not all
/// arrived. Only finds the end: the value is parsed by `serde_json`.
fn value_end(b: &[u8], i: usize) -> Result<Option<usize>, String> {
    let mut depth = 0usize;
    let mut j = i;
    let mut in_string = false;
    while j < b.len() {
        let c = b[j];
        if in_string {
            match c {
                b'\\' => j += 1,
                b'"' => {
                    in_string = false;
                    if depth == 0 {
                        return Ok(Some(j + 1));
                    }
                }
                _ => {}
            }
        } else {
            match c {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' if depth == 0 => return Ok(Some(j)),
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(Some(j + 1));
                    }
                }
                b',' | b' ' | b'\t' | b'\n' | b'\r' if depth == 0 => return Ok(Some(j)),
                _ => {}
            }
        }
        j += 1;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_in(doc: &str, chunk: usize) -> Result<Vec<Item>, FormatError> {
        let mut r = Reader::new();
        let mut out = Vec::new();
        for c in doc.as_bytes().chunks(chunk.max(1)) {
            r.feed(c);
            while let Some(i) = r.next_item()? {
                out.push(i);
            }
        }
        r.finish()?;
        Ok(out)
    }

    const DOC: &str = r#"{"format":"mneme-export", "version": 2,
        "tables": {"threads": [{"id":"t1","n":1}, {"id":"t\"2}","n":2.5}], "events": []},
        "search": [{"corpus":"document","ref_id":"d1"}],
        "kv": {"gist:a:1": "{\"x\":[1,2]}", "fact_index:a": ["k1"]},
        "memory": {"facts": {}}
    }"#;

    #[test]
    fn every_chunking_reads_the_same_items_in_order() {
        let whole = read_in(DOC, DOC.len()).unwrap();
        assert_eq!(
            whole,
            vec![
                Item::Field("format".into(), json!("mneme-export")),
                Item::Field("version".into(), json!(2)),
                Item::Row { table: "threads".into(), row: json!({"id":"t1","n":1}).as_object().unwrap().clone() },
                Item::Row { table: "threads".into(), row: json!({"id":"t\"2}","n":2.5}).as_object().unwrap().clone() },
                Item::Search(json!({"corpus":"document","ref_id":"d1"}).as_object().unwrap().clone()),
                Item::Kv { key: "gist:a:1".into(), value: json!("{\"x\":[1,2]}") },
                Item::Kv { key: "fact_index:a".into(), value: json!(["k1"]) },
                Item::Memory(json!({"facts": {}})),
            ]
        );
        for chunk in 1..40 {
            assert_eq!(read_in(DOC, chunk).unwrap(), whole, "chunks of {chunk} bytes");
        }
    }

    #[test]
    fn a_document_cut_short_or_followed_by_text_is_refused_where_it_breaks() {
        let cut = &DOC[..DOC.len() - 10];
        let e = read_in(cut, 7).unwrap_err();
        assert!(e.message.contains("cut short"), "{e}");
        let e = read_in(&format!("{DOC} x"), 5).unwrap_err();
        assert!(e.message.contains("after the end"), "{e}");
        assert!(read_in("", 4).unwrap_err().message.contains("empty"));
        let e = read_in(r#"{"tables": {"threads": [1]}}"#, 3).unwrap_err();
        assert_eq!((e.at, e.message.as_str()), (24, "a row must be a JSON object"));
        let e = read_in(r#"{"tables": []}"#, 3).unwrap_err();
        assert!(e.message.contains("`tables` must be an object"), "{e}");
        let e = read_in(r#"{"a": 1 "b": 2}"#, 3).unwrap_err();
        assert!(e.message.contains("expected `,` or `}`"), "{e}");
        assert!(read_in("[1]", 1).unwrap_err().message.contains("JSON object"));
        assert!(read_in(r#"{"a": tru}"#, 2).is_err());
    }

    #[test]
    fn a_value_over_the_limit_is_refused_not_held() {
        let mut r = Reader::new();
        r.feed(br#"{"tables": {"t": [{"x": ""#);
        let big = vec![b'a'; MAX_VALUE_BYTES + 1];
        r.feed(&big);
        assert!(r.next_item().unwrap_err().message.contains("a value over"));
    }

    #[test]
    fn the_buffer_keeps_only_what_is_unread() {
        let mut r = Reader::new();
        r.feed(br#"{"tables": {"t": ["#);
        let row = br#"{"id": "0123456789012345678901234567890123456789"},"#;
        for _ in 0..10_000 {
            r.feed(row);
            while r.next_item().unwrap().is_some() {}
        }
        assert!(r.buf.len() < 4 * row.len(), "{} bytes held", r.buf.len());
        assert!(r.dropped > 400_000);
    }
}
