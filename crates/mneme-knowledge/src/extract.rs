//! The model's side of extraction: the request built from
//! `prompts/knowledge-extract.md`, and a tolerant reading of its answer.

use serde_json::Value;

pub const PROMPT: &str = include_str!("../../../prompts/knowledge-extract.md");

/// The most candidates one chunk's answer may hold.
pub const MAX_CANDIDATES: usize = 12;

/// The JSON Schema of an extraction answer (D-L2): the prompt's fields,
/// with the closed lists of the 001 seed as enums, so a constrained model
/// cannot write a type, confidence or stability off the list.
pub fn schema() -> String {
    let text = |max: usize| serde_json::json!({"type": "string", "maxLength": max});
    serde_json::json!({
        "type": "object",
        "properties": {
            "candidates": {
                "type": "array",
                "maxItems": MAX_CANDIDATES,
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {"enum": ["framework", "decision", "standard", "philosophy", "reaction"]},
                        "topic": text(120),
                        "position": text(600),
                        "reasoning": text(800),
                        "reasoning_pattern": {"type": ["string", "null"], "maxLength": 80},
                        "communication_style_only": {"type": "boolean"},
                        "confidence": {"enum": ["high", "medium", "low"]},
                        "stability": {"enum": ["evergreen", "stable", "evolving"]},
                        "tags": {"type": "array", "items": text(40), "maxItems": 6},
                    },
                    "required": ["type", "topic", "position", "reasoning", "reasoning_pattern",
                                 "communication_style_only", "confidence", "stability", "tags"],
                    "additionalProperties": false,
                },
            },
        },
        "required": ["candidates"],
        "additionalProperties": false,
    })
    .to_string()
}

/// Longest transcript sent to the model in one request; a longer one is
/// split at line boundaries (see [`chunks`]).
pub const MAX_CHUNK_CHARS: usize = 12_000;
/// The most tokens one chunk's answer may take: a full list of candidates
/// at their schema's bounds is longer, a real one far shorter.
pub const MAX_TOKENS: u32 = 3_000;

/// The user message: the known patterns, then the transcript.
pub fn user_message(transcript: &str, known_patterns: &[(String, String)], principal: Option<&str>) -> String {
    let mut m = match principal {
        Some(p) => format!(
            "The principal is {p}. Extract only what {p} holds or explicitly endorses; \
             what the others say is context.\n\n"
        ),
        None => String::new(),
    };
    m.push_str("Known reasoning patterns (slug: description):\n");
    if known_patterns.is_empty() {
        m.push_str("(none yet)\n");
    }
    for (slug, description) in known_patterns {
        m.push_str(&format!("- {slug}: {description}\n"));
    }
    m.push_str("\nTranscript:\n");
    m.push_str(transcript);
    m
}

/// A transcript cut into pieces of at most [`MAX_CHUNK_CHARS`], at line
/// boundaries where possible.
pub fn chunks(transcript: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in transcript.lines() {
        if !cur.is_empty() && cur.len() + line.len() + 1 > MAX_CHUNK_CHARS {
            out.push(std::mem::take(&mut cur));
        }
        let mut line = line;
        while line.len() > MAX_CHUNK_CHARS {
            let mut cut = MAX_CHUNK_CHARS;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push(line[..cut].to_string());
            line = &line[cut..];
        }
        cur.push_str(line);
        cur.push('\n');
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

/// The candidates in a model's answer: `{"candidates": [...]}` or a bare
/// list. `Err` when the answer has no such list (the job then retries).
pub fn parse(answer: &str) -> Result<Vec<Value>, String> {
    let v = mneme_llm::extract_json(answer).map_err(|e| e.to_string())?;
    match v {
        Value::Array(a) => Ok(a),
        Value::Object(mut o) => match o.remove("candidates") {
            Some(Value::Array(a)) => Ok(a),
            _ => Err("the answer has no `candidates` list".into()),
        },
        _ => Err("the answer is not a JSON object".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_with_or_without_a_wrapper() {
        assert_eq!(parse("```json\n{\"candidates\": [{\"type\": \"decision\"}]}\n```").unwrap().len(), 1);
        assert_eq!(parse("[{}, {}]").unwrap().len(), 2);
        assert!(parse("{\"entries\": []}").is_err());
        assert!(parse("no json here").is_err());
    }

    #[test]
    fn long_transcripts_are_chunked_at_lines() {
        let line = "x".repeat(5_000);
        let t = format!("{line}\n{line}\n{line}\n");
        let c = chunks(&t);
        assert_eq!(c.len(), 2);
        assert!(c.iter().all(|p| p.len() <= MAX_CHUNK_CHARS));
        assert_eq!(chunks(&"y".repeat(30_000)).len(), 3);
    }

    #[test]
    fn the_message_lists_known_patterns() {
        let m = user_message("hello", &[("first-principles".into(), "reason from fundamentals".into())], None);
        assert!(m.contains("- first-principles: reason from fundamentals") && m.ends_with("hello"));
        assert!(m.starts_with("Known reasoning patterns"), "{m}");
        let named = user_message("hello", &[], Some("Ana"));
        assert!(named.starts_with("The principal is Ana. Extract only what Ana holds"), "{named}");
    }
}
