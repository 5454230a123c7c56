//! Phase B (design 002 §3): screening (intent and the social filter) and the
//! decision on the triage model's answer, logged to `triage_calibration`.

use mneme_conversation::triage::{self, Input, Source, Triage};
use mneme_conversation::{intent, social};
use mneme_store::Value;
use mneme_types::conversation::{Screening, TriageCall};

use mneme_substrate::{Result, json_text};

/// Layer 1 and step 2a: no I/O, no model.
pub fn screen(text: &str, warmth: f64) -> Screening {
    Screening { intent: intent::classify(text, warmth).into(), social: social::filter(text).map(Into::into) }
}

/// Steps 2b–2d: the model's answer or the heuristic, self-evaluation, and
/// the calibration row.
pub async fn decide(req: TriageCall) -> Result<Triage> {
    let input: Input = req.input.into();
    let (raw, source, reason) = match (&req.answer, &req.error) {
        (Some(answer), _) => match triage::parse(answer) {
            Ok(raw) => (raw, Source::Model, None),
            Err(e) => {
                (triage::heuristic(&input.text, &input.tools), Source::Heuristic, Some(format!("malformed: {e}")))
            }
        },
        (None, err) => (
            triage::heuristic(&input.text, &input.tools),
            Source::Heuristic,
            Some(err.clone().unwrap_or_else(|| "model-error".into())),
        ),
    };
    let t = triage::self_eval(raw, &input, source, reason);
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
