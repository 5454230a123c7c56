//! `POST /tick/regulate` and `POST /tick/reflect`: the routing stability
//! regulator's daily cycle (002 §12) and routing reflection (§10, D-B7),
//! both in the router stage. Reflection asks the strong model about each
//! decision of a batch (`prompts/routing-reflection.md`, temperature 0.3);
//! with no model configured it does not run, and the regulator works from
//! the pressures it can measure without it.

use crate::mneme::llm::llm::{self, CompletionRequest, Tier};
use crate::mneme::router::router;
use crate::parse;
use mneme_background::regulator::{self as rules, parse_reflection};
use mneme_types::StageError;
use serde_json::{Value, json};

/// The batch's claim outlasts five model calls.
pub const LEASE_MS: u64 = 300_000;
const MODEL_TIMEOUT_MS: u32 = 45_000;

pub async fn regulate(now: u64) -> Result<Value, StageError> {
    Ok(parse(&router::regulate(json!({"now_ms": now}).to_string()).await?))
}

pub async fn reflect(now: u64, seed: u64, clock: impl Fn() -> u64) -> Result<Value, StageError> {
    if !llm::status().await.configured {
        return Ok(json!({"due": false, "reason": "no model configured: routing reflection needs the strong model"}));
    }
    let begun =
        parse(&router::reflect_begin(json!({"now_ms": now, "lease_ms": LEASE_MS, "seed": seed}).to_string()).await?);
    let Some(claim) = begun["claim"].as_str().map(String::from) else { return Ok(begun) };
    let mut results = Vec::new();
    let mut report = Vec::new();
    for d in begun["decisions"].as_array().into_iter().flatten() {
        let answer = llm::complete(CompletionRequest {
            tier: Tier::Primary,
            messages: mneme_entry::model::system_user(rules::REFLECTION_PROMPT, d.to_string()),
            max_tokens: Some(600),
            temperature: Some(rules::REFLECTION_TEMPERATURE),
            json: true,
            timeout_ms: MODEL_TIMEOUT_MS,
        })
        .await;
        let (reflection, source, error) = match answer {
            Ok(c) => match parse_reflection(&c.text) {
                Ok(r) => (Some(r), c.model, None),
                Err(e) => (None, c.model, Some(format!("unreadable: {e}"))),
            },
            Err(e) => (None, String::new(), Some(format!("{}: {}", e.code, e.message))),
        };
        report.push(json!({"id": d["id"], "reflection": reflection, "error": error}));
        let empty = d["message"].as_str().is_none_or(|m| m.trim().is_empty());
        results.push(json!({"id": d["id"], "reflection": reflection, "message_empty": empty, "source": source}));
    }
    let finished = parse(
        &router::reflect_finish(json!({"claim": claim, "now_ms": clock(), "results": results}).to_string()).await?,
    );
    Ok(json!({"due": true, "decisions": report, "stored": finished}))
}
