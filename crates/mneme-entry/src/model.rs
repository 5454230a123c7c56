//! A model call as the entries make it: messages in the `llm` stage's
//! shape, and the time the call spent waiting on the model (D-C24).

use crate::StageError;
use crate::mneme::llm::llm::{ChatMessage, Completion, CompletionRequest, Tier};
use mneme_conversation::generate;
use std::time::Instant;

/// Prompt messages in the `llm` stage's shape.
pub fn messages(v: Vec<mneme_llm::Message>) -> Vec<ChatMessage> {
    v.into_iter()
        .map(|m| ChatMessage {
            role: match m.role {
                mneme_llm::Role::System => "system",
                mneme_llm::Role::User => "user",
                mneme_llm::Role::Assistant => "assistant",
            }
            .into(),
            content: m.content,
        })
        .collect()
}

/// A system prompt and one user message.
pub fn system_user(system: &str, user: String) -> Vec<ChatMessage> {
    vec![
        ChatMessage { role: "system".into(), content: system.trim().into() },
        ChatMessage { role: "user".into(), content: user },
    ]
}

/// The time one model call spent waiting on the model, in µs: what the
/// llm stage measured around the wire, or, for a call that failed, the
/// whole call (it failed waiting, or at once).
pub fn wait_us(answer: &Result<Completion, StageError>, call: Instant) -> u64 {
    match answer {
        Ok(c) => c.wait_us,
        Err(_) => call.elapsed().as_micros() as u64,
    }
}

/// The call that writes a reply (002 §4c): the primary model, plain text,
/// at generation's temperature and timeout.
pub fn reply_request(messages: Vec<ChatMessage>) -> CompletionRequest {
    CompletionRequest {
        tier: Tier::Primary,
        messages,
        max_tokens: Some(800),
        temperature: Some(generate::TEMPERATURE),
        json: false,
        timeout_ms: generate::TIMEOUT_MS,
    }
}
