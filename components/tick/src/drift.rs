//! `POST /tick/drift`: one cycle of the cognitive drift engine (002 §8,
//! D-B5). The `drift` stage checks the schedule and the idle gate, picks a
//! seed and spreads activation; this module asks the light model for the
//! thought (`prompts/cognitive-drift.md` with soul as the system prompt,
//! temperature 0.8, up to three tries at a readable answer), or takes the
//! labelled rules' question; the stage's `finish` routes it to an action.

use crate::mneme::drift::drift;
use crate::mneme::llm::llm::{self, CompletionRequest, Tier};
use crate::parse;
use mneme_background::cycle::RULES_LABEL;
use mneme_background::drift::{self as rules, Activated, Thought};
use mneme_types::StageError;
use serde_json::{Value, json};

/// The engine's claim outlasts a cycle's model calls.
pub const LEASE_MS: u64 = 120_000;
const MODEL_TIMEOUT_MS: u32 = 20_000;
/// Tries at a readable thought (the reference's).
const ATTEMPTS: usize = 3;

/// Runs a cycle if one is due. `clock` gives the time of each step.
pub async fn cycle(now: u64, seed: u64, clock: impl Fn() -> u64) -> Result<Value, StageError> {
    let begun = parse(&drift::begin(json!({"now_ms": now, "lease_ms": LEASE_MS, "seed": seed}).to_string()).await?);
    if begun["ran"] != json!(true) {
        return Ok(begun);
    }
    let concepts: Vec<Activated> = serde_json::from_value(begun["concepts"].clone()).unwrap_or_default();
    let seed_name = begun["seed"]["name"].as_str().unwrap_or_default().to_string();
    let grounding = begun["grounding"]["gist"].as_str().map(String::from);
    let (thought, source, tries) = thought(&seed_name, &concepts, grounding.as_deref()).await;
    let finished = parse(
        &drift::finish(
            json!({"claim": begun["claim"], "now_ms": clock(), "next_ms": begun["next_ms"],
                   "seed": begun["seed"], "concepts": concepts,
                   "energy": begun["energy"], "grounding": begun["grounding"], "thought": thought, "source": source})
            .to_string(),
        )
        .await?,
    );
    Ok(json!({
        "due": true,
        "ran": true,
        "flushed": begun["flushed"],
        "tried": begun["tried"],
        "seed": begun["seed"],
        "concepts": concepts,
        "energy": begun["energy"],
        "grounding": begun["grounding"],
        "thought": thought,
        "source": source,
        "model_tries": tries,
        "next_ms": begun["next_ms"],
        "drift": finished,
    }))
}

/// The model's thought, or the rules' when no model is configured or it
/// gave nothing readable: the thought, what produced it, and the model
/// calls made (with why each failed).
async fn thought(seed: &str, concepts: &[Activated], episode: Option<&str>) -> (Thought, String, Vec<String>) {
    let names: Vec<String> = concepts.iter().map(|c| c.name.clone()).collect();
    let fallback = || rules::rule_thought(seed, &names);
    if !llm::status().await.configured {
        return (fallback(), RULES_LABEL.into(), Vec::new());
    }
    let mut tries = Vec::new();
    for _ in 0..ATTEMPTS {
        let answer = llm::complete(CompletionRequest {
            tier: Tier::Light,
            messages: mneme_entry::model::system_user(
                mneme_conversation::generate::SOUL,
                rules::thought_message(seed, concepts, episode),
            ),
            max_tokens: Some(rules::MAX_TOKENS),
            temperature: Some(rules::TEMPERATURE),
            json: true,
            timeout_ms: MODEL_TIMEOUT_MS,
        })
        .await;
        match answer {
            Ok(c) => match rules::parse_thought(&c.text) {
                Ok(t) => {
                    tries.push("ok".into());
                    return (t, c.model, tries);
                }
                Err(e) => tries.push(format!("unreadable: {e}")),
            },
            Err(e) => {
                // The model is down or slow: another try would only wait.
                tries.push(format!("{}: {}", e.code, e.message));
                break;
            }
        }
    }
    (fallback(), RULES_LABEL.into(), tries)
}
