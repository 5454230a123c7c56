//! `POST /tick/drift`: one cycle of the cognitive drift engine (002 §8,
//! D-B5). The `drift` stage checks the schedule and the idle gate, picks a
//! seed and spreads activation; this module asks the light model for the
//! thought (`prompts/cognitive-drift.md` with soul as the system prompt,
//! temperature 0.8, up to three tries at a readable answer), or takes the
//! labelled rules' question; the stage's `finish` routes it to an action.

use crate::mneme::drift::drift;
use crate::mneme::llm::llm::{self, Tier};
use mneme_background::cycle::RULES_LABEL;
use mneme_background::drift::{self as rules, Activated, Thought};
use mneme_entry::model::{JsonAsk, Ledger, ModelPath, ask_json_tries};
use mneme_types::StageError;
use mneme_types::drift::{Applied, DriftDone, DriftStart, DriftThought};
use serde_json::{Value, json};

/// The engine's claim outlasts a cycle's model calls.
pub const LEASE_MS: u64 = 120_000;
const MODEL_TIMEOUT_MS: u32 = 20_000;
/// Tries at a readable thought (the reference's).
const ATTEMPTS: usize = 3;

/// Runs a cycle if one is due. `clock` gives the time of each step.
pub async fn cycle(now: u64, seed: u64, clock: impl Fn() -> u64) -> Result<Value, StageError> {
    let begun = drift::begin(now, LEASE_MS, seed).await?;
    let flushed = &begun.flushed;
    let ready = match begun.start {
        DriftStart::NotDue(n) => {
            let why = if n.held { "another cycle holds the engine" } else { "not due yet" };
            return Ok(json!({"due": false, "reason": why, "next_ms": n.at_ms, "flushed": flushed}));
        }
        DriftStart::Skipped(s) => {
            let mut out = json!({"due": true, "ran": false, "skip": s.why, "conditions": s.conditions,
                                 "next_ms": s.next_ms, "flushed": flushed});
            if !s.tried.is_empty() {
                out["tried"] = json!(s.tried);
            }
            if let Some(w) = s.weak_seed {
                out["seed"] = json!({"name": w.name, "kind": w.kind});
                out["energy"] = json!(w.energy);
            }
            return Ok(out);
        }
        DriftStart::Ready(r) => r,
    };
    let concepts: Vec<Activated> = ready.concepts.iter().cloned().map(Into::into).collect();
    let grounding = ready.grounding.as_ref().map(|g| g.gist.as_str());
    let mut ledger = Ledger::default();
    let (thought, source, tries) = thought(&ready.seed.name, &concepts, grounding, &mut ledger, clock()).await;
    ledger.flush(None, clock()).await;
    let done = drift::finish(
        DriftThought {
            claim: ready.claim.clone(),
            next_ms: ready.next_ms,
            seed: ready.seed.clone(),
            concepts: ready.concepts.clone(),
            energy: ready.energy,
            grounding: ready.grounding.clone(),
            thought: thought.clone().into(),
            source: source.clone(),
        },
        clock(),
    )
    .await?;
    Ok(json!({
        "due": true,
        "ran": true,
        "flushed": flushed,
        "tried": ready.tried,
        "seed": ready.seed,
        "concepts": concepts,
        "energy": ready.energy,
        "grounding": ready.grounding,
        "thought": thought,
        "source": source,
        "model_tries": tries,
        "next_ms": ready.next_ms,
        "drift": done_report(done),
    }))
}

/// A finished drift as the tick reports it.
fn done_report(d: DriftDone) -> Value {
    let applied = match d.applied {
        Applied::None => json!({}),
        Applied::Deferred(dropped) => json!({"deferred": true, "dropped": dropped}),
        Applied::Sent(id) => json!({"event_id": id}),
        Applied::Task(t) => json!({"task_id": t.task_id, "event_id": t.event_id}),
        Applied::DuplicateTask(id) => json!({"duplicate_of": id}),
        Applied::NoRoom => json!({"refused": "the open tasks are at their limit"}),
        Applied::Thread(id) => json!({"thread_id": id}),
    };
    json!({
        "drift_id": d.drift_id,
        "action": d.action,
        "delivery": d.delivery.unwrap_or_default(),
        "applied": applied,
        "verdicts": d.verdicts,
        "fatigue": d.fatigue,
        "gist": d.gist,
        "situation": d.situation,
    })
}

/// The model's thought, or the rules' when no model is configured or it
/// gave nothing readable: the thought, what produced it, and the model
/// calls made (with why each failed).
async fn thought(
    seed: &str,
    concepts: &[Activated],
    episode: Option<&str>,
    ledger: &mut Ledger,
    now_ms: u64,
) -> (Thought, String, Vec<String>) {
    let names: Vec<String> = concepts.iter().map(|c| c.name.clone()).collect();
    let fallback = || rules::rule_thought(seed, &names);
    if !llm::status(MODEL_TIMEOUT_MS).await.configured {
        return (fallback(), RULES_LABEL.into(), Vec::new());
    }
    let ask = JsonAsk {
        path: ModelPath::DriftThought,
        tier: Tier::Light,
        messages: mneme_entry::model::system_user(
            mneme_conversation::generate::SOUL,
            rules::thought_message(seed, concepts, episode),
        ),
        schema: rules::schema(),
        max_tokens: rules::MAX_TOKENS,
        temperature: rules::TEMPERATURE,
        timeout_ms: MODEL_TIMEOUT_MS,
    };
    match ask_json_tries(ledger, ask, now_ms, ATTEMPTS, rules::parse_thought).await {
        Ok((t, c)) => (t, c.model, vec!["ok".into()]),
        Err(why) => (fallback(), RULES_LABEL.into(), vec![why.to_string()]),
    }
}
