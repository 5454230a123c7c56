//! Talking to OpenAI-compatible models, minus the talking.
//!
//! Ollama, llama.cpp's server, vLLM and the hosted APIs all speak the same
//! chat-completions format. This crate builds requests in it, decodes
//! answers and the `text/event-stream` of a streamed answer (incrementally,
//! as bytes arrive), and pulls a JSON object out of text that models wrap in
//! code fences, preambles and trailing remarks. It does no I/O: the `llm`
//! stage component sends the bytes.

mod json;
mod sse;

pub use json::{JsonExtractError, extract_json, extract_json_as, strip_reasoning};
pub use sse::{StreamEvent, StreamParser};

use serde::{Deserialize, Serialize};

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self { role, content: content.into() }
    }
}

/// What to ask the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    /// Ask for a JSON object (`response_format: json_object`).
    pub json: bool,
    /// With `json`, the JSON Schema the object must follow
    /// (`response_format: json_schema`, strict).
    pub schema: Option<serde_json::Value>,
    pub stream: bool,
}

impl ChatRequest {
    /// The request body for `POST {base}/chat/completions`.
    pub fn body(&self) -> String {
        let mut v = serde_json::json!({
            "model": self.model,
            "messages": self.messages,
            "stream": self.stream,
        });
        if let Some(m) = self.max_tokens {
            v["max_tokens"] = m.into();
        }
        if let Some(t) = self.temperature {
            v["temperature"] = serde_json::json!((f64::from(t) * 1000.0).round() / 1000.0);
        }
        if self.json {
            v["response_format"] = match &self.schema {
                Some(schema) => serde_json::json!({
                    "type": "json_schema",
                    "json_schema": { "name": "answer", "strict": strict_capable(schema), "schema": schema },
                }),
                None => serde_json::json!({ "type": "json_object" }),
            };
        }
        if self.stream {
            // The usage of a streamed answer comes in its last chunk.
            v["stream_options"] = serde_json::json!({ "include_usage": true });
        }
        v.to_string()
    }
}

/// Whether a schema meets strict mode's rules (OpenAI's): every object
/// closed (`additionalProperties: false`) with every property required.
/// A schema with an open object (an action's free parameters) is sent as
/// not strict: the endpoint still guides the answer by it.
pub fn strict_capable(schema: &serde_json::Value) -> bool {
    match schema {
        serde_json::Value::Object(o) => {
            if let Some(props) = o.get("properties").and_then(|p| p.as_object()) {
                let required: Vec<&str> = o
                    .get("required")
                    .and_then(|r| r.as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r.as_str())
                    .collect();
                if o.get("additionalProperties") != Some(&serde_json::Value::Bool(false))
                    || !props.keys().all(|k| required.contains(&k.as_str()))
                {
                    return false;
                }
            } else if o.get("type").and_then(|t| t.as_str()) == Some("object") {
                return false;
            }
            o.values().all(strict_capable)
        }
        serde_json::Value::Array(a) => a.iter().all(strict_capable),
        _ => true,
    }
}

/// A complete (non-streamed) answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChatAnswer {
    pub text: String,
    pub model: String,
    pub usage: Usage,
}

/// What an answer cost, as the endpoint reports it (0 where it does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub prompt_tokens: u32,
    /// Prompt tokens served from the endpoint's cache of an earlier
    /// prompt's prefix.
    pub cached_tokens: u32,
    pub completion_tokens: u32,
}

impl Usage {
    /// Reads `usage` off a response or a stream chunk: OpenAI's
    /// `prompt_tokens_details.cached_tokens`, or llama.cpp's
    /// `timings.cache_n`.
    pub fn from_response(v: &serde_json::Value) -> Option<Usage> {
        let u = v.get("usage").filter(|u| u.is_object())?;
        let n = |x: &serde_json::Value| x.as_u64().map_or(0, |n| n.min(u64::from(u32::MAX)) as u32);
        let cached = u["prompt_tokens_details"]["cached_tokens"].as_u64().or_else(|| v["timings"]["cache_n"].as_u64());
        Some(Usage {
            prompt_tokens: n(&u["prompt_tokens"]),
            cached_tokens: cached.map_or(0, |c| c.min(u64::from(u32::MAX)) as u32),
            completion_tokens: n(&u["completion_tokens"]),
        })
    }
}

/// Whether an endpoint's refusal (a 4xx body) is about the JSON Schema
/// response format, so the same request may be sent again asking only for
/// a JSON object: an endpoint that predates schemas, or whose schema
/// subset this schema leaves.
pub fn refuses_schema(status: u16, body: &[u8]) -> bool {
    if !(400..500).contains(&status) || status == 401 || status == 403 || status == 429 {
        return false;
    }
    let text = String::from_utf8_lossy(body).to_ascii_lowercase();
    text.contains("json_schema") || text.contains("response_format") || text.contains("schema")
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("the model endpoint sent invalid JSON: {0}")]
    BadJson(String),
    #[error("the model endpoint sent no choices")]
    NoChoices,
    #[error("the model endpoint reported an error: {0}")]
    Endpoint(String),
    #[error("the model endpoint lists no model")]
    NoModels,
}

/// A model's text as Mneme keeps it: without U+0000, which the stores
/// cannot hold (D-F21). A request carrying one is refused; a model's answer
/// is not the principal's fault, so the character is dropped instead.
pub fn storable(text: &str) -> String {
    text.replace('\0', "")
}

/// Decodes a chat-completions response body.
pub fn parse_answer(body: &[u8]) -> Result<ChatAnswer, WireError> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| WireError::BadJson(e.to_string()))?;
    if let Some(err) = v.get("error") {
        let msg = err.get("message").and_then(|m| m.as_str()).map_or_else(|| err.to_string(), str::to_string);
        return Err(WireError::Endpoint(msg));
    }
    let choice = v.get("choices").and_then(|c| c.get(0)).ok_or(WireError::NoChoices)?;
    let text = storable(choice["message"]["content"].as_str().or_else(|| choice["text"].as_str()).unwrap_or_default());
    Ok(ChatAnswer {
        text,
        model: v["model"].as_str().unwrap_or_default().to_string(),
        usage: Usage::from_response(&v).unwrap_or_default(),
    })
}

/// The model to use when none is named: the first model an
/// OpenAI-compatible `GET …/models` lists (`{"data": [{"id": …}, …]}`), as
/// Ollama, llama.cpp's server and vLLM answer. An empty list is an error:
/// such an endpoint has nothing to answer with (D-C33).
pub fn first_listed_model(body: &[u8]) -> Result<String, WireError> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| WireError::BadJson(e.to_string()))?;
    if let Some(err) = v.get("error") {
        let msg = err.get("message").and_then(|m| m.as_str()).map_or_else(|| err.to_string(), str::to_string);
        return Err(WireError::Endpoint(msg));
    }
    v.get("data")
        .and_then(|d| d.as_array())
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("id").and_then(|id| id.as_str()))
        .map(str::trim)
        .find(|id| !id.is_empty() && !id.contains('\0'))
        .map(str::to_string)
        .ok_or(WireError::NoModels)
}

/// Joins a base URL (ending in `/v1`) and `models`.
pub fn models_url(base: &str) -> String {
    format!("{}/models", base.trim_end_matches('/'))
}

/// Joins a base URL (ending in `/v1`) and `chat/completions`.
pub fn completions_url(base: &str) -> String {
    format!("{}/chat/completions", base.trim_end_matches('/'))
}

/// A chat as one prompt, for a backend that takes a prompt rather than
/// messages (Spin's `llm` interface): each message under its role's
/// heading, then the assistant's heading for the answer. A JSON answer is
/// asked for in words, since such a backend has no response format.
pub fn flatten_prompt(messages: &[Message], json: bool) -> String {
    let mut out = String::new();
    for m in messages {
        let heading = match m.role {
            Role::System => "### System",
            Role::User => "### User",
            Role::Assistant => "### Assistant",
        };
        out.push_str(heading);
        out.push('\n');
        out.push_str(m.content.trim());
        out.push_str("\n\n");
    }
    if json {
        out.push_str("### System\nAnswer with one JSON object and nothing else.\n\n");
    }
    out.push_str("### Assistant\n");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_first_listed_model_is_taken_and_an_empty_list_is_an_error() {
        let ollama = br#"{"object":"list","data":[{"id":"llama3.2:latest","object":"model","created":1,"owned_by":"library"},{"id":"qwen2.5:7b","object":"model"}]}"#;
        assert_eq!(super::first_listed_model(ollama).unwrap(), "llama3.2:latest");
        let blank_first = br#"{"data":[{"id":"  "},{"object":"model"},{"id":"phi3"}]}"#;
        assert_eq!(super::first_listed_model(blank_first).unwrap(), "phi3");
        for empty in [&br#"{"object":"list","data":[]}"#[..], br#"{"models":["x"]}"#, br#"{"data":"x"}"#] {
            assert_eq!(
                super::first_listed_model(empty),
                Err(super::WireError::NoModels),
                "{}",
                String::from_utf8_lossy(empty)
            );
        }
        assert_eq!(
            super::first_listed_model(br#"{"error":{"message":"invalid api key"}}"#),
            Err(super::WireError::Endpoint("invalid api key".into()))
        );
        assert!(matches!(super::first_listed_model(b"<html>"), Err(super::WireError::BadJson(_))));
        assert_eq!(super::models_url("http://h:11434/v1/"), "http://h:11434/v1/models");
    }

    #[test]
    fn a_chat_flattens_to_one_prompt_under_role_headings() {
        use super::{Message, Role, flatten_prompt};
        let m = [Message::new(Role::System, "Be brief. "), Message::new(Role::User, "Hi")];
        assert_eq!(flatten_prompt(&m, false), "### System\nBe brief.\n\n### User\nHi\n\n### Assistant\n");
        assert!(flatten_prompt(&m, true).ends_with("JSON object and nothing else.\n\n### Assistant\n"));
    }

    use super::*;

    #[test]
    fn body_carries_only_what_was_asked() {
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![Message::new(Role::System, "s"), Message::new(Role::User, "u")],
            max_tokens: Some(10),
            temperature: Some(0.2),
            json: true,
            schema: None,
            stream: false,
        };
        let v: serde_json::Value = serde_json::from_str(&req.body()).unwrap();
        assert_eq!(v["messages"][1]["role"], "user");
        assert_eq!(v["max_tokens"], 10);
        assert_eq!(v["temperature"], 0.2);
        assert_eq!(v["response_format"]["type"], "json_object");
        assert!(v.get("stream_options").is_none());
        let schema = serde_json::json!({"type": "object", "properties": {"mode": {"enum": ["A", "B"]}}});
        let shaped = ChatRequest { schema: Some(schema.clone()), stream: true, ..req.clone() };
        let v: serde_json::Value = serde_json::from_str(&shaped.body()).unwrap();
        assert_eq!(v["response_format"]["type"], "json_schema");
        assert_eq!(v["response_format"]["json_schema"]["schema"], schema);
        assert_eq!(v["response_format"]["json_schema"]["strict"], false, "an object with optional properties");
        assert_eq!(v["stream_options"]["include_usage"], true);
        let plain = ChatRequest { max_tokens: None, temperature: None, json: false, schema: Some(schema), ..req };
        let v: serde_json::Value = serde_json::from_str(&plain.body()).unwrap();
        assert!(v.get("max_tokens").is_none() && v.get("response_format").is_none());
    }

    #[test]
    fn answers_decode_with_usage() {
        let a = parse_answer(br#"{"model":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#)
            .unwrap();
        assert_eq!(
            a,
            ChatAnswer {
                text: "hi".into(),
                model: "x".into(),
                usage: Usage { prompt_tokens: 3, cached_tokens: 0, completion_tokens: 1 }
            }
        );
        let cached = parse_answer(
            br#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":30,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":24}}}"#,
        )
        .unwrap();
        assert_eq!(cached.usage, Usage { prompt_tokens: 30, cached_tokens: 24, completion_tokens: 2 });
        let llama = parse_answer(
            br#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":30,"completion_tokens":2},"timings":{"cache_n":20}}"#,
        )
        .unwrap();
        assert_eq!(llama.usage.cached_tokens, 20);
    }

    #[test]
    fn strict_mode_only_for_closed_schemas() {
        let closed = serde_json::json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object",
            "properties": {"b": {"enum": [1]}}, "required": ["b"], "additionalProperties": false}}},
            "required": ["a"], "additionalProperties": false});
        assert!(strict_capable(&closed));
        let mut open = closed.clone();
        open["properties"]["a"]["items"]["additionalProperties"] = true.into();
        assert!(!strict_capable(&open));
        let mut optional = closed.clone();
        optional["required"] = serde_json::json!([]);
        assert!(!strict_capable(&optional));
        assert!(!strict_capable(&serde_json::json!({"type": "object"})), "a free object");
    }

    #[test]
    fn only_a_refusal_about_the_schema_asks_again_without_it() {
        assert!(refuses_schema(400, br#"{"error":{"message":"response_format json_schema is not supported"}}"#));
        assert!(refuses_schema(422, b"unsupported schema keyword minItems"));
        assert!(!refuses_schema(400, b"max_tokens too large"));
        assert!(!refuses_schema(401, b"bad key for json_schema"));
        assert!(!refuses_schema(500, b"json_schema crashed"));
    }

    #[test]
    fn endpoint_errors_and_garbage_are_errors() {
        assert_eq!(
            parse_answer(br#"{"error":{"message":"no such model"}}"#),
            Err(WireError::Endpoint("no such model".into()))
        );
        assert_eq!(parse_answer(br#"{"choices":[]}"#), Err(WireError::NoChoices));
        assert!(matches!(parse_answer(b"<html>"), Err(WireError::BadJson(_))));
    }

    #[test]
    fn urls_join_with_one_slash() {
        assert_eq!(completions_url("http://h/v1/"), "http://h/v1/chat/completions");
        assert_eq!(completions_url("http://h/v1"), "http://h/v1/chat/completions");
    }
}
