//! `POST /tick/consolidate`: drains the memory consolidation queues (002
//! §6, D-B4). For each job it claims: the light model with the queue's
//! prompt (`prompts/memory-chunker.md`, `episodic-memory.md`,
//! `semantic-extract.md`), or the labelled rules when no model is
//! configured; then the stage's `apply`, which writes the result and marks
//! the job done under the claim in one transaction. A failed model call or
//! an unreadable answer gives the job back to retry; the third failure
//! fails it.

use crate::mneme::consolidate::consolidate;
use crate::mneme::llm::llm::{self, Tier};
use mneme_background::consolidate::{self as rules, EpisodeBrief, Exchange};
use mneme_background::cycle::RULES_LABEL;
// A fallback's label names why; with no model it is RULES_LABEL.
use mneme_entry::model::{Fallback, JsonAsk, Ledger, ModelPath, ask_json};
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
    let mut ledger = Ledger::default();
    while clock().saturating_sub(started) < BUDGET_MS {
        let Some(job) = consolidate::claim(clock(), LEASE_MS).await? else { break };
        let queue = queue(&job.input);
        let outcome = match consolidation(job.input, &model, &mut ledger, clock()).await {
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
    ledger.flush(None, clock()).await;
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
/// forgotten exchange). A malformed or empty answer, asked for twice,
/// leaves the job to the labelled rules, with the reason in the source; a
/// model that failed or timed out gives the job back to retry (`Err`).
async fn consolidation(
    input: JobInput,
    model: &llm::ModelStatus,
    ledger: &mut Ledger,
    now_ms: u64,
) -> Result<(JobOutput, String), String> {
    let gone = || Ok((JobOutput::Gone, "none".to_string()));
    match input {
        JobInput::Chunk(None) | JobInput::Episode(None) | JobInput::Semantic(None) => gone(),
        JobInput::Chunk(Some(c)) => {
            if !model.configured {
                let chunk = rules::rule_chunk(&c.prompt).into();
                return Ok((JobOutput::Chunk((c, chunk)), RULES_LABEL.into()));
            }
            let user = rules::chunker_message(&c.topic, &c.prompt, &c.response);
            let ask = json_ask(ModelPath::ConsolidateChunk, rules::CHUNKER_PROMPT, user, rules::chunk_schema());
            match ask_json(ledger, ask, now_ms, rules::parse_chunk).await {
                Ok((chunk, done)) => Ok((JobOutput::Chunk((c, chunk.into())), done.model)),
                Err(why) => {
                    let label = rules_instead(&why)?;
                    let chunk = rules::rule_chunk(&c.prompt).into();
                    Ok((JobOutput::Chunk((c, chunk)), label))
                }
            }
        }
        JobInput::Episode(Some(ep)) => {
            let exchanges: Vec<Exchange> = ep.exchanges.iter().cloned().map(Into::into).collect();
            if !model.configured {
                let draft = rules::rule_episode(&ep.topic, &exchanges).into();
                return Ok((JobOutput::Episode((ep, draft)), RULES_LABEL.into()));
            }
            let user = rules::episode_message(&ep.topic, &exchanges);
            let ask = json_ask(ModelPath::ConsolidateEpisode, rules::EPISODE_PROMPT, user, rules::episode_schema());
            match ask_json(ledger, ask, now_ms, rules::parse_episode).await {
                Ok((draft, done)) => Ok((JobOutput::Episode((ep, draft.into())), done.model)),
                Err(why) => {
                    let label = rules_instead(&why)?;
                    let draft = rules::rule_episode(&ep.topic, &exchanges).into();
                    Ok((JobOutput::Episode((ep, draft)), label))
                }
            }
        }
        JobInput::Semantic(Some(s)) => {
            let episodes: Vec<EpisodeBrief> = s.episodes.iter().cloned().map(Into::into).collect();
            if !model.configured {
                let extracted = rules::rule_semantic(&episodes).into();
                return Ok((JobOutput::Semantic((s, extracted)), RULES_LABEL.into()));
            }
            let user = rules::semantic_message(&episodes, &s.known);
            let ask = json_ask(ModelPath::ConsolidateSemantic, rules::SEMANTIC_PROMPT, user, rules::semantic_schema());
            match ask_json(ledger, ask, now_ms, |t| rules::parse_semantic(t, &episodes)).await {
                Ok((extracted, done)) => Ok((JobOutput::Semantic((s, extracted.into())), done.model)),
                Err(why) => {
                    let label = rules_instead(&why)?;
                    let extracted = rules::rule_semantic(&episodes).into();
                    Ok((JobOutput::Semantic((s, extracted)), label))
                }
            }
        }
    }
}

/// One light-model call in JSON mode under `schema`.
fn json_ask(path: ModelPath, system: &str, user: String, schema: String) -> JsonAsk {
    JsonAsk {
        path,
        tier: Tier::Light,
        messages: mneme_entry::model::system_user(system, user),
        schema,
        max_tokens: 1_200,
        temperature: rules::TEMPERATURE,
        timeout_ms: MODEL_TIMEOUT_MS,
    }
}

/// After a fallback: the rules' label with its reason when the model
/// answered but not usably; `Err` (the job is given back to retry) when it
/// failed or took too long.
fn rules_instead(why: &Fallback) -> Result<String, String> {
    if why.reason == "malformed" || why.reason == "empty" {
        Ok(format!("rules (the model's answer, asked for twice, was {why})"))
    } else {
        Err(format!("the model: {why}"))
    }
}
