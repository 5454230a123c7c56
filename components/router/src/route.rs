//! Path C step 4a (design 002 §4a): routing and the `routing_decisions` log.

use mneme_conversation::Mode;
use mneme_conversation::context::Assembled;
use mneme_conversation::intent::Intent;
use mneme_conversation::router::{self, ContextView, Decision, Signals, Weights};
use mneme_store::Value;
use mneme_types::conversation::{Recorded, Routed};

use mneme_substrate::{Result, json_text};

/// One message to route.
#[derive(Debug)]
pub struct RouteRequest {
    pub text: String,
    pub context: Assembled,
    pub intent: Intent,
    /// Overrides the thread's previous mode (the post-ACT re-route passes ACT).
    pub previous_mode: Option<Mode>,
    pub skip_tiebreaker: bool,
    /// Modes triage settled against (D-L5).
    pub excluded: Vec<Mode>,
}

pub async fn route(req: RouteRequest) -> Result<Routed> {
    let c = &req.context;
    let view = ContextView {
        warmth: c.warmth,
        topic_confidence: c.topic_confidence,
        wm_turns: c.wm_turns,
        fok: c.fok,
        gist_count: c.gists.len(),
        fact_count: c.facts.len(),
        is_new_topic: c.is_new_topic,
        world_state_present: !c.world_state.is_empty(),
        memory_confidence: c.memory_confidence,
        session_exchange_count: c.session_exchange_count,
        distracted: c.distracted,
    };
    let signals = router::signals(&req.text, &view, &req.intent);
    let previous_mode = req.previous_mode.or(c.previous_mode);
    let sql = mneme_store::open_sql().await?;
    let weights = crate::regulator::weights(&sql).await?;
    let decision = router::route(
        &signals,
        &weights,
        previous_mode,
        &c.recent_router_confidences,
        req.skip_tiebreaker,
        &req.excluded,
    );
    let tiebreak_message = decision.tiebreak.map(|(a, b)| router::tiebreak_message(&req.text, a, b, &signals));
    Ok(Routed {
        decision: decision.into(),
        signals: signals.into(),
        previous_mode: previous_mode.map(Into::into),
        tiebreak_message,
        weights: weights.into(),
    })
}

/// A routed message, with the tie-breaker's answer, to settle and log.
#[derive(Debug)]
pub struct RecordRequest {
    pub routed: Routed,
    /// The tie-breaker model's raw answer, if it was asked and answered.
    pub tiebreak_answer: Option<String>,
    pub exchange_id: String,
    pub thread_id: String,
    pub topic: String,
    pub routing_time_ms: u64,
    pub now_ms: u64,
}

/// Settles the mode (the tie-breaker's pick, else the higher score) and
/// writes the routing_decisions row.
pub async fn record(req: RecordRequest) -> Result<Recorded> {
    // Logged in the pure types' JSON, which reflection and the regulator read.
    let d: Decision = req.routed.decision.into();
    let (signals, weights): (Signals, Weights) = (req.routed.signals.into(), req.routed.weights.into());
    let previous_mode: Option<Mode> = req.routed.previous_mode.map(Into::into);
    let picked = match (d.tiebreak, req.tiebreak_answer.as_deref().and_then(router::parse_tiebreak)) {
        (Some((a, _)), Some(true)) => Some(a),
        (Some((_, b)), Some(false)) => Some(b),
        _ => None,
    };
    let mode = picked.unwrap_or(d.mode);
    let tiebreaker_used = picked.is_some();
    let router_confidence = d.margin.clamp(0.0, 1.0);
    let sql = mneme_store::open_sql().await?;
    sql
        .execute(
            "INSERT INTO routing_decisions (exchange_id, thread_id, topic, selected_mode, previous_mode, router_confidence, \
             scores, tiebreaker_used, tiebreaker_candidates, margin, effective_margin, signal_snapshot, weight_snapshot, \
             routing_time_ms, created_ms, excluded_modes) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16)",
            &[
                req.exchange_id.as_str().into(),
                req.thread_id.as_str().into(),
                req.topic.as_str().into(),
                mode.as_str().into(),
                previous_mode.map(|m| m.as_str()).into(),
                router_confidence.into(),
                json_text(&d.scores).into(),
                Value::Int(tiebreaker_used as i64),
                d.tiebreak.map(|(a, b)| json_text(&[a, b])).into(),
                d.margin.into(),
                d.effective_margin.into(),
                json_text(&signals).into(),
                json_text(&weights).into(),
                Value::Int(req.routing_time_ms as i64),
                Value::Int(req.now_ms as i64),
                (!d.excluded.is_empty()).then(|| json_text(&d.excluded)).into(),
            ],
        )
        .await?;
    Ok(Recorded { mode: mode.into(), router_confidence, tiebreaker_used })
}
