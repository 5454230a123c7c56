//! A Markdown file's YAML frontmatter, read the way editors write it: with
//! or without a byte-order mark, with LF or CRLF line endings, with plain,
//! quoted, flow or block values (`serde_yaml_ng` parses the YAML). Pull
//! writes frontmatter as JSON-compatible flow values; a principal's editor
//! (Obsidian on Windows, a sync tool) may save it back in any of these
//! forms, and push must read what they wrote.

use serde_json::{Map, Value};

/// Why a file's frontmatter could not be read, with the 1-based line of
/// the file it was found on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// The frontmatter's fields: `Ok(None)` when the file has none (it does not
/// start with a `---` line), an empty map for an empty block.
pub fn parse(markdown: &str) -> Result<Option<Map<String, Value>>, Error> {
    let text = markdown.strip_prefix('\u{feff}').unwrap_or(markdown);
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    if lines.next() != Some("---") {
        return Ok(None);
    }
    let mut block = Vec::new();
    let mut closed = false;
    for line in lines {
        if line == "---" || line == "..." {
            closed = true;
            break;
        }
        block.push(line);
    }
    if !closed {
        return Err(Error { line: 1, message: "the frontmatter opened here has no closing `---` line".into() });
    }
    let yaml = block.join("\n") + "\n";
    if yaml.trim().is_empty() {
        return Ok(Some(Map::new()));
    }
    match serde_yaml_ng::from_str::<Value>(&yaml) {
        Ok(Value::Object(fields)) => Ok(Some(fields)),
        Ok(Value::Null) => Ok(Some(Map::new())),
        Ok(_) => Err(Error { line: 2, message: "the frontmatter must be `key: value` lines".into() }),
        // The block starts on the file's second line.
        Err(e) => Err(Error {
            line: e.location().map_or(2, |l| l.line() + 1),
            message: e.to_string().split(" at line ").next().unwrap_or_default().to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(md: &str) -> Map<String, Value> {
        parse(md).unwrap().unwrap()
    }

    #[test]
    fn reads_what_pull_writes() {
        let f = fields("---\nid: \"rec-1\"\nstatus: \"open\"\ndrift_score: 0.57\nflags: [\"a\"]\n---\n\n# Body\n");
        assert_eq!(Value::Object(f), json!({"id": "rec-1", "status": "open", "drift_score": 0.57, "flags": ["a"]}));
    }

    #[test]
    fn reads_crlf_and_a_byte_order_mark_as_obsidian_on_windows_saves_them() {
        let md = "\u{feff}---\r\nid: \"rec-1\"\r\nstatus: snoozed\r\nsnooze_days: 3\r\n---\r\n\r\n# Body\r\n";
        assert_eq!(Value::Object(fields(md)), json!({"id": "rec-1", "status": "snoozed", "snooze_days": 3}));
    }

    #[test]
    fn reads_plain_quoted_and_block_values() {
        let md = "---\nstatus: 'acted'\ndisposition: acted_modified\noutcome_note: |\n  Two sessions, not three.\n  Knee held up.\nfolded: >\n  one\n  line\ntags:\n  - a\n  - b\n...\nbody";
        let f = fields(md);
        assert_eq!(f["status"], "acted");
        assert_eq!(f["disposition"], "acted_modified");
        assert_eq!(f["outcome_note"], "Two sessions, not three.\nKnee held up.\n");
        assert_eq!(f["folded"], "one line\n");
        assert_eq!(f["tags"], json!(["a", "b"]));
    }

    #[test]
    fn no_frontmatter_and_empty_frontmatter() {
        assert_eq!(parse("# Just a note\n---\n"), Ok(None));
        assert_eq!(parse("---\n---\nbody"), Ok(Some(Map::new())));
        assert_eq!(parse("---\r\n\r\n---\r\n"), Ok(Some(Map::new())));
    }

    #[test]
    fn errors_name_the_line() {
        let unclosed = parse("---\nstatus: open\n").unwrap_err();
        assert_eq!(unclosed.line, 1);
        assert!(unclosed.message.contains("closing"), "{unclosed}");
        // Line 4 of the file holds the broken value (an unclosed quote).
        let broken = parse("---\nid: \"rec-1\"\nstatus: open\nnote: \"unclosed\nnext: 1\n---\n").unwrap_err();
        assert!((4..=6).contains(&broken.line), "{broken}");
        let nested = parse("\u{feff}---\r\nstatus: open\r\nnote: a: b\r\n---\r\n").unwrap_err();
        assert_eq!(nested.line, 3, "{nested}");
        assert_eq!(parse("---\n- a\n- b\n---\n").unwrap_err().line, 2);
    }
}
