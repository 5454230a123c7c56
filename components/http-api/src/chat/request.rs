//! The `/chat` request: read and checked before the stream opens, so a bad
//! one gets a 400 JSON error and no stream; then the exchange it starts.

use mneme_http::{ApiError, parse_json_body};
use serde::Deserialize;
use serde_json::Value;
use spin_sdk::http::StatusCode;

/// Longest accepted message, in characters.
pub const MAX_TEXT_CHARS: usize = 32_000;
/// Largest accepted `/chat` body.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    text: Option<Value>,
    thread_id: Option<Value>,
    source: Option<Value>,
    /// Accepted and ignored (clients send it; attachments are not supported yet).
    #[allow(dead_code)]
    attachments: Option<Value>,
}

/// A checked message.
pub struct Message {
    pub text: String,
    pub thread_id: String,
    pub source: String,
}

pub fn bad(code: &str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, code, message)
}

/// The body as a message, or the 400 that says what is wrong with it.
pub fn validate(bytes: &[u8]) -> Result<Message, ApiError> {
    if bytes.len() > MAX_BODY_BYTES {
        return Err(bad("body-too-large", format!("the body is over {MAX_BODY_BYTES} bytes")));
    }
    let b: Body = parse_json_body(bytes)?;
    let text = match b.text {
        Some(Value::String(t)) => t.trim().to_string(),
        Some(_) => return Err(bad("invalid", "`text` must be a string")),
        None => return Err(bad("missing-text", "`text` is required")),
    };
    if text.is_empty() {
        return Err(bad("empty-text", "`text` is empty"));
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(bad("text-too-long", format!("`text` is over {MAX_TEXT_CHARS} characters")));
    }
    let thread_id = match b.thread_id {
        None | Some(Value::Null) => "default".to_string(),
        Some(Value::String(t)) => {
            let ok =
                !t.is_empty() && t.len() <= 128 && t.chars().all(|c| c.is_ascii_alphanumeric() || "._:-".contains(c));
            if !ok {
                return Err(bad(
                    "invalid-thread-id",
                    "`thread_id` is 1–128 characters of letters, digits, `.`, `_`, `:` and `-`",
                ));
            }
            t
        }
        Some(_) => return Err(bad("invalid-thread-id", "`thread_id` must be a string")),
    };
    let source = match b.source {
        None | Some(Value::Null) => "text".to_string(),
        Some(Value::String(s)) if s == "text" || s == "voice" => s,
        Some(_) => return Err(bad("invalid-source", "`source` is `text` or `voice`")),
    };
    Ok(Message { text, thread_id, source })
}

/// One exchange in the making: the message, its ids and its times.
pub struct Exchange<'a> {
    pub msg: &'a Message,
    pub request_id: &'a str,
    /// The exchange's id, which commit keeps.
    pub id: String,
    /// The request's time (the test clock's, when enabled).
    pub now: u64,
    /// When the pipeline began, by the system clock.
    pub started: u64,
}
