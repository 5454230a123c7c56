//! Pulling a JSON object out of what a model actually writes.
//!
//! Models asked for JSON still answer with ```json fences, a sentence before
//! ("Here is the classification:"), a remark after, or several objects. The
//! rule here: take the first balanced `{…}` (or `[…]`) that parses, scanning
//! past strings so braces inside them do not count. Anything else is an
//! error the caller turns into its deterministic fallback.

use serde::de::DeserializeOwned;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JsonExtractError {
    #[error("the model's output holds no JSON object")]
    NoJson,
    #[error("the model's JSON does not have the expected shape: {0}")]
    Shape(String),
}

/// `text` without the `<think>…</think>` blocks that reasoning models emit
/// before their answer (an unclosed block runs to the end).
pub fn strip_reasoning(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("<think>") {
        out.push_str(&rest[..open]);
        rest = match rest[open..].find("</think>") {
            Some(close) => &rest[open + close + "</think>".len()..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// The first JSON object or array in `text` that parses, ignoring
/// reasoning blocks.
pub fn extract_json(text: &str) -> Result<serde_json::Value, JsonExtractError> {
    let text = &strip_reasoning(text);
    let b = text.as_bytes();
    let mut start = 0;
    while let Some(off) = b[start..].iter().position(|&c| c == b'{' || c == b'[') {
        let open = start + off;
        if let Some(close) = balanced_end(b, open)
            && let Ok(v) = serde_json::from_str(&text[open..=close])
        {
            return Ok(v);
        }
        start = open + 1;
    }
    Err(JsonExtractError::NoJson)
}

/// [`extract_json`], then deserialised into `T`.
pub fn extract_json_as<T: DeserializeOwned>(text: &str) -> Result<T, JsonExtractError> {
    serde_json::from_value(extract_json(text)?).map_err(|e| JsonExtractError::Shape(e.to_string()))
}

/// Index of the bracket closing the one at `open`, skipping strings.
fn balanced_end(b: &[u8], open: usize) -> Option<usize> {
    let mut stack = Vec::new();
    let mut i = open;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if in_str {
            match c {
                b'\\' => i += 1,
                b'"' => in_str = false,
                _ => {}
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'{' => stack.push(b'}'),
                b'[' => stack.push(b']'),
                b'}' | b']' => {
                    if stack.pop() != Some(c) {
                        return None;
                    }
                    if stack.is_empty() {
                        return Some(i);
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn reasoning_blocks_are_skipped() {
        let t = "<think>maybe {\"mode\":\"ACT\"}</think> {\"mode\":\"RESPOND\"}";
        assert_eq!(super::extract_json(t).unwrap()["mode"], "RESPOND");
        assert_eq!(super::strip_reasoning("a<think>b"), "a");
        assert_eq!(super::strip_reasoning("a<think>b</think>c<think>d</think>e"), "ace");
    }

    use super::*;

    #[test]
    fn extraction_table() {
        let cases: &[(&str, Option<&str>)] = &[
            (r#"{"a":1}"#, Some(r#"{"a":1}"#)),
            ("```json\n{\"a\": 1}\n```", Some(r#"{"a":1}"#)),
            ("Sure! Here it is: {\"a\": {\"b\": [1, 2]}} Hope that helps.", Some(r#"{"a":{"b":[1,2]}}"#)),
            (r#"{"s": "a } inside", "n": 2}"#, Some(r#"{"n":2,"s":"a } inside"}"#)),
            (r#"{"s": "escaped \" quote }"}"#, Some(r#"{"s":"escaped \" quote }"}"#)),
            ("{not json} then {\"ok\": true}", Some(r#"{"ok":true}"#)),
            ("[1, 2, 3]", Some("[1,2,3]")),
            ("no json here", None),
            ("{\"truncated\": ", None),
        ];
        for (input, want) in cases {
            let got = extract_json(input).ok().map(|v| v.to_string());
            let want = want.map(|w| serde_json::from_str::<serde_json::Value>(w).unwrap().to_string());
            assert_eq!(got, want, "input {input:?}");
        }
    }

    #[test]
    fn typed_extraction_reports_shape_errors() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct T {
            mode: String,
        }
        assert_eq!(extract_json_as::<T>("```{\"mode\":\"RESPOND\"}```").unwrap(), T { mode: "RESPOND".into() });
        assert!(matches!(extract_json_as::<T>("{\"other\": 1}"), Err(JsonExtractError::Shape(_))));
        assert_eq!(extract_json_as::<T>("nothing"), Err(JsonExtractError::NoJson));
    }
}
