//! Phase B (design 002 §3): screening (intent and the social filter) and the
//! decision on the triage model's answer, logged to `triage_calibration`.

use mneme_conversation::intent::{self, Intent};
use mneme_conversation::social::{self, SocialMode};
use mneme_conversation::triage::{self, Input, Source, Triage};
use mneme_store::Value;
use serde::{Deserialize, Serialize};

use crate::{Result, json_text};

#[derive(Debug, Deserialize)]
pub struct ScreenRequest {
    pub text: String,
    #[serde(default)]
    pub warmth: f64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Screen {
    pub intent: Intent,
    pub social: Option<SocialMode>,
}

/// Layer 1 and step 2a: no I/O, no model.
pub fn screen(req: ScreenRequest) -> Screen {
    Screen { intent: intent::classify(&req.text, req.warmth), social: social::filter(&req.text) }
}

#[derive(Debug, Deserialize)]
pub struct DecideRequest {
    pub input: Input,
    /// The model's raw answer, when it answered in time.
    pub answer: Option<String>,
    /// The model's error code (`model-timeout`, `model-unavailable`, …).
    pub error: Option<String>,
    pub took_ms: u64,
    pub exchange_id: String,
    pub thread_id: String,
    pub topic: String,
    pub now_ms: u64,
}

/// Steps 2b–2d: the model's answer or the heuristic, self-evaluation, and
/// the calibration row.
pub async fn decide(req: DecideRequest) -> Result<Triage> {
    let (raw, source, reason) = match (&req.answer, &req.error) {
        (Some(answer), _) => match triage::parse(answer) {
            Ok(raw) => (raw, Source::Model, None),
            Err(e) => (
                triage::heuristic(&req.input.text, &req.input.tools),
                Source::Heuristic,
                Some(format!("malformed: {e}")),
            ),
        },
        (None, err) => (
            triage::heuristic(&req.input.text, &req.input.tools),
            Source::Heuristic,
            Some(err.clone().unwrap_or_else(|| "model-error".into())),
        ),
    };
    let t = triage::self_eval(raw, &req.input, source, reason);
    let sql = mneme_store::open_sql().await?;
    sql.execute(
        "INSERT INTO triage_calibration (exchange_id, thread_id, topic, branch, mode, tools, skills, \
             confidence_internal, confidence_tool_need, freshness_risk, decision_entropy, source, fallback_reason, \
             overrides, took_ms, created_ms) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16)",
        &[
            req.exchange_id.as_str().into(),
            req.thread_id.as_str().into(),
            req.topic.as_str().into(),
            json_text(&t.branch).trim_matches('"').into(),
            t.mode.as_str().into(),
            json_text(&t.tools).into(),
            json_text(&t.skills).into(),
            t.confidence_internal.into(),
            t.confidence_tool_need.into(),
            t.freshness_risk.into(),
            t.decision_entropy.into(),
            json_text(&t.source).trim_matches('"').into(),
            t.fallback_reason.clone().into(),
            json_text(&t.overrides).into(),
            Value::Int(req.took_ms as i64),
            Value::Int(req.now_ms as i64),
        ],
    )
    .await?;
    Ok(t)
}
