//! `POST /tick/regulate` and `POST /tick/reflect`: the routing stability
//! regulator's daily cycle (002 §12) and routing reflection (§10, D-B7),
//! both in the router stage. Reflection asks the strong model about each
//! decision of a batch (`prompts/routing-reflection.md`, temperature 0.3);
//! with no model configured it does not run, and the regulator works from
//! the pressures it can measure without it.

use crate::mneme::llm::llm::{self, Tier};
use crate::mneme::router::router;
use mneme_background::regulator::{self as rules, parse_reflection};
use mneme_entry::model::{JsonAsk, Ledger, ModelPath, ask_json};
use mneme_types::StageError;
use mneme_types::routing::{ReflectionBusy, ReflectionStart, Regulation, Review};
use serde_json::{Value, json};

/// The batch's claim outlasts five model calls.
pub const LEASE_MS: u64 = 300_000;
const MODEL_TIMEOUT_MS: u32 = 45_000;

pub async fn regulate(now: u64) -> Result<Value, StageError> {
    Ok(match router::regulate(now).await? {
        Regulation::NotDue(next_ms) => json!({"due": false, "next_ms": next_ms}),
        Regulation::Ran(d) => json!({
            "due": true, "metrics": d.metrics, "dimension": d.dimension, "judged": d.judged, "change": d.change,
            "no_change": d.no_change, "next_ms": d.next_ms,
        }),
    })
}

pub async fn reflect(now: u64, seed: u64, clock: impl Fn() -> u64) -> Result<Value, StageError> {
    if !llm::status(MODEL_TIMEOUT_MS).await.configured {
        return Ok(json!({"due": false, "reason": "no model configured: routing reflection needs the strong model"}));
    }
    let batch = match router::reflect_begin(now, LEASE_MS, seed).await? {
        ReflectionStart::Busy(ReflectionBusy::QueuesBusy) => return Ok(json!({"due": false, "reason": "queues busy"})),
        ReflectionStart::Busy(ReflectionBusy::InConversation) => {
            return Ok(json!({"due": false, "reason": "in conversation"}));
        }
        ReflectionStart::NotDue(n) => {
            let why = if n.held { "another batch is under review" } else { "not due yet" };
            return Ok(json!({"due": false, "reason": why, "next_ms": n.at_ms}));
        }
        ReflectionStart::NothingToReview => return Ok(json!({"due": true, "decisions": []})),
        ReflectionStart::Batch(b) => b,
    };
    let mut reviews = Vec::new();
    let mut report = Vec::new();
    let mut ledger = Ledger::default();
    for d in &batch.decisions {
        // The model reads the decision as JSON (prompts/routing-reflection.md).
        let input =
            serde_json::to_string(d).map_err(|e| mneme_types::StageError::internal(format!("a decision: {e}")))?;
        let ask = JsonAsk {
            path: ModelPath::Reflection,
            tier: Tier::Primary,
            messages: mneme_entry::model::system_user(rules::REFLECTION_PROMPT, input),
            schema: rules::reflection_schema(),
            max_tokens: 600,
            temperature: rules::REFLECTION_TEMPERATURE,
            timeout_ms: MODEL_TIMEOUT_MS,
        };
        let (reflection, source, error) = match ask_json(&mut ledger, ask, clock(), parse_reflection).await {
            Ok((r, c)) => (Some(r), c.model, None),
            Err(why) => (None, String::new(), Some(why.to_string())),
        };
        report.push(json!({"id": d.id, "reflection": reflection, "error": error}));
        reviews.push(Review {
            id: d.id,
            reflection: reflection.map(Into::into),
            message_empty: d.message.trim().is_empty(),
            source,
        });
    }
    ledger.flush(None, clock()).await;
    let stored = router::reflect_finish(batch.claim, clock(), reviews).await?;
    Ok(json!({"due": true, "decisions": report, "stored": {"reflected": stored.reflected, "counted": stored.counted}}))
}
