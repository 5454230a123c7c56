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
use mneme_background::consolidate::{self as rules, EpisodeBrief, Exchange};
use mneme_background::cycle::RULES_LABEL;
use mneme_types::StageError;
use mneme_types::consolidation::{JobInput, JobOutput};
use serde_json::{Value, json};

/// A claimed job is someone else's to take over after this long.
pub const LEASE_MS: u64 = 120_000;
/// No new job starts after this much of one tick.
const BUDGET_MS: u64 = 20_000;
const MODEL_TIMEOUT_MS: u32 = 30_000;

/// Runs jobs until the queues are empty or the budget is spent.
pub async fn drain(clock: impl Fn() -> u64) -> Result<Value, StageError> {
    let started = clock();
    let model = llm::status(MODEL_TIMEOUT_MS).await;
    let mut done = Vec::new();
    while clock().saturating_sub(started) < BUDGET_MS {
        let Some(job) = consolidate::claim(clock(), LEASE_MS).await? else { break };
        let queue = queue(&job.input);
        let outcome = match consolidation(job.input, &model).await {
            Ok((output, source)) => consolidate::apply(job.id, job.claim.clone(), output, source, clock())
                .await
                .map(|s| json!({"job_id": job.id, "queue": queue, "status": "done", "result": s}))
                .map_err(|e| (format!("{}: {}", e.code, e.message), e.code != mneme_types::ErrorCode::LeaseLost)),
            Err(error) => Err((error, true)),
        };
        let entry = match outcome {
            Ok(entry) => entry,
            Err((error, retry)) => {
                let status = if retry {
                    consolidate::fail(job.id, job.claim, error.clone(), true, clock())
                        .await
                        .ok()
                        .flatten()
                        .map_or(Value::Null, |s| json!(s))
                } else {
                    json!("lost")
                };
                json!({"job_id": job.id, "queue": queue, "status": status, "error": error})
            }
        };
        done.push(entry);
    }
    Ok(json!({"jobs": done}))
}

/// The queue a job came from.
fn queue(input: &JobInput) -> &'static str {
    match input {
        JobInput::Chunk(_) => rules::CHUNKER_QUEUE,
        JobInput::Episode(_) => rules::EPISODIC_QUEUE,
        JobInput::Semantic(_) => rules::SEMANTIC_QUEUE,
    }
}

/// The job's output and what produced it; gone when its input is (a
/// forgotten exchange).
async fn consolidation(input: JobInput, model: &llm::ModelStatus) -> Result<(JobOutput, String), String> {
    let gone = || Ok((JobOutput::Gone, "none".to_string()));
    match input {
        JobInput::Chunk(None) | JobInput::Episode(None) | JobInput::Semantic(None) => gone(),
        JobInput::Chunk(Some(c)) => {
            if !model.configured {
                let chunk = rules::rule_chunk(&c.prompt).into();
                return Ok((JobOutput::Chunk((c, chunk)), RULES_LABEL.into()));
            }
            let (answer, name) =
                ask(rules::CHUNKER_PROMPT, rules::chunker_message(&c.topic, &c.prompt, &c.response)).await?;
            let chunk = rules::parse_chunk(&answer).map_err(|e| format!("the chunker's answer: {e}"))?;
            Ok((JobOutput::Chunk((c, chunk.into())), name))
        }
        JobInput::Episode(Some(ep)) => {
            let exchanges: Vec<Exchange> = ep.exchanges.iter().cloned().map(Into::into).collect();
            if !model.configured {
                let draft = rules::rule_episode(&ep.topic, &exchanges).into();
                return Ok((JobOutput::Episode((ep, draft)), RULES_LABEL.into()));
            }
            let (answer, name) = ask(rules::EPISODE_PROMPT, rules::episode_message(&ep.topic, &exchanges)).await?;
            let draft = rules::parse_episode(&answer).map_err(|e| format!("the episode builder's answer: {e}"))?;
            Ok((JobOutput::Episode((ep, draft.into())), name))
        }
        JobInput::Semantic(Some(s)) => {
            let episodes: Vec<EpisodeBrief> = s.episodes.iter().cloned().map(Into::into).collect();
            if !model.configured {
                let extracted = rules::rule_semantic(&episodes).into();
                return Ok((JobOutput::Semantic((s, extracted)), RULES_LABEL.into()));
            }
            let (answer, name) = ask(rules::SEMANTIC_PROMPT, rules::semantic_message(&episodes, &s.known)).await?;
            let extracted =
                rules::parse_semantic(&answer, &episodes).map_err(|e| format!("semantic extraction's answer: {e}"))?;
            Ok((JobOutput::Semantic((s, extracted.into())), name))
        }
    }
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
