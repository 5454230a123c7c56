//! `POST /tick/consolidate`: drains the memory consolidation queues (002
//! §6, D-B4). For each job it claims: the light model with the queue's
//! prompt (`prompts/memory-chunker.md`, `episodic-memory.md`,
//! `semantic-extract.md`), or the labelled rules when no model is
//! configured; then the stage's `apply`, which writes the result and marks
//! the job done under the claim in one transaction. A failed model call or
//! an unreadable answer gives the job back to retry; the third failure
//! fails it.

use crate::mneme::consolidate::consolidate;
use crate::mneme::llm::llm::{self, CompletionRequest, Tier};
use crate::parse;
use mneme_background::consolidate::{self as rules, EpisodeBrief, Exchange};
use mneme_background::cycle::RULES_LABEL;
use mneme_types::StageError;
use serde_json::{Value, json};

/// A claimed job is someone else's to take over after this long.
pub const LEASE_MS: u64 = 120_000;
/// No new job starts after this much of one tick.
const BUDGET_MS: u64 = 20_000;
const MODEL_TIMEOUT_MS: u32 = 30_000;

/// Runs jobs until the queues are empty or the budget is spent.
pub async fn drain(clock: impl Fn() -> u64) -> Result<Value, StageError> {
    let started = clock();
    let model = llm::status().await;
    let mut done = Vec::new();
    while clock().saturating_sub(started) < BUDGET_MS {
        let claimed = parse(&consolidate::claim(json!({"now_ms": clock(), "lease_ms": LEASE_MS}).to_string()).await?);
        let Some(job) = claimed.get("job").filter(|j| !j.is_null()).cloned() else { break };
        let (id, queue) = (job["id"].clone(), job["queue"].as_str().unwrap_or_default().to_string());
        let claim = job["claim"].as_str().unwrap_or_default().to_string();
        let input = claimed["input"].clone();
        let outcome = match consolidation(&queue, &input, &model).await {
            Ok((output, source)) => consolidate::apply(
                json!({"job_id": id, "claim": claim, "queue": queue, "source": source, "input": input,
                       "output": output, "now_ms": clock()})
                .to_string(),
            )
            .await
            .map(|s| json!({"job_id": id, "queue": queue, "status": "done", "result": parse(&s)}))
            .map_err(|e| (format!("{}: {}", e.code, e.message), e.code != mneme_types::ErrorCode::LeaseLost)),
            Err(error) => Err((error, true)),
        };
        let entry = match outcome {
            Ok(entry) => entry,
            Err((error, retry)) => {
                let status = if retry {
                    consolidate::fail(
                        json!({"job_id": id, "claim": claim, "error": error, "retry": true, "now_ms": clock()})
                            .to_string(),
                    )
                    .await
                    .map(|s| parse(&s)["status"].clone())
                    .unwrap_or(Value::Null)
                } else {
                    json!("lost")
                };
                json!({"job_id": id, "queue": queue, "status": status, "error": error})
            }
        };
        done.push(entry);
    }
    Ok(json!({"jobs": done}))
}

/// The job's output and what produced it; null output when its input is
/// gone (a forgotten exchange).
async fn consolidation(queue: &str, input: &Value, model: &llm::ModelStatus) -> Result<(Value, String), String> {
    if input.is_null() {
        return Ok((Value::Null, "none".into()));
    }
    let text = |k: &str| input[k].as_str().unwrap_or_default().to_string();
    match queue {
        rules::CHUNKER_QUEUE => {
            let (topic, prompt, response) = (text("topic"), text("prompt"), text("response"));
            if !model.configured {
                return Ok((json!(rules::rule_chunk(&prompt)), RULES_LABEL.into()));
            }
            let (answer, name) = ask(rules::CHUNKER_PROMPT, rules::chunker_message(&topic, &prompt, &response)).await?;
            let chunk = rules::parse_chunk(&answer).map_err(|e| format!("the chunker's answer: {e}"))?;
            Ok((json!(chunk), name))
        }
        rules::EPISODIC_QUEUE => {
            let topic = text("topic");
            let exchanges: Vec<Exchange> = decode(input, "exchanges")?;
            if !model.configured {
                return Ok((json!(rules::rule_episode(&topic, &exchanges)), RULES_LABEL.into()));
            }
            let (answer, name) = ask(rules::EPISODE_PROMPT, rules::episode_message(&topic, &exchanges)).await?;
            let episode = rules::parse_episode(&answer).map_err(|e| format!("the episode builder's answer: {e}"))?;
            Ok((json!(episode), name))
        }
        _ => {
            let episodes: Vec<EpisodeBrief> = decode(input, "episodes")?;
            if !model.configured {
                return Ok((json!(rules::rule_semantic(&episodes)), RULES_LABEL.into()));
            }
            let known: Vec<String> = decode(input, "known")?;
            let (answer, name) = ask(rules::SEMANTIC_PROMPT, rules::semantic_message(&episodes, &known)).await?;
            let s =
                rules::parse_semantic(&answer, &episodes).map_err(|e| format!("semantic extraction's answer: {e}"))?;
            Ok((json!(s), name))
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(input: &Value, key: &str) -> Result<T, String> {
    serde_json::from_value(input[key].clone()).map_err(|e| format!("the job's input `{key}`: {e}"))
}

/// One light-model call in JSON mode; the answer and the model's name.
async fn ask(system: &str, user: String) -> Result<(String, String), String> {
    let c = llm::complete(CompletionRequest {
        tier: Tier::Light,
        messages: mneme_entry::model::system_user(system, user),
        max_tokens: Some(1_200),
        temperature: Some(rules::TEMPERATURE),
        json: true,
        timeout_ms: MODEL_TIMEOUT_MS,
    })
    .await
    .map_err(|e| format!("the model: {}: {}", e.code, e.message))?;
    Ok((c.text, c.model))
}
