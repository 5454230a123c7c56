//! `tools/call`: a tool's arguments checked by `mneme_mcp::tools`, then
//! run against the stage that owns the deed, as the HTTP API runs it. A
//! result carries the text a model reads and the structured content a
//! program reads; a refusal is a tool error (`isError`) whose message
//! names the field or the rule, and nothing was written.

use crate::mneme::act::act;
use crate::mneme::knowledge::knowledge;
use crate::mneme::llm::llm;
use crate::mneme::memory::memory;
use crate::mneme::rx::rx;
use crate::mneme::tasks::tasks;
use crate::{Outcome, stage_failure};
use mneme_mcp::tools::{self as catalogue, Call, Decision, Forget, Mode};
use mneme_mcp::{Failure, code};
use mneme_types::conversation::Action;
use mneme_types::knowledge::{NewDocument, SearchMode, SourceType, Transcript};
use mneme_types::memory::{FactKey, ForgetScope, Forgotten, MemoryHit};
use mneme_types::rx::RecStatus;
use mneme_types::tasks::NewTask;
use mneme_types::{ErrorCode, StageError};
use serde_json::{Value, json};

/// How long an action (a reminder's write) may take.
const ACTION_TIMEOUT_MS: u64 = 10_000;

pub async fn call(id: &Value, params: &Value, now: u64) -> Result<Value, Outcome> {
    let Some(name) = params["name"].as_str() else {
        return Err(Outcome::Protocol(Failure::new(
            id.clone(),
            code::INVALID_PARAMS,
            "`params.name` must be a string",
        )));
    };
    let Some(parsed) = catalogue::parse(name, params.get("arguments")) else {
        let known = catalogue::names().join(", ");
        let f = Failure::new(id.clone(), code::INVALID_PARAMS, format!("no tool `{name}` (tools: {known})"));
        return Err(Outcome::Protocol(f));
    };
    let call = match parsed {
        Ok(c) => c,
        Err(e) => return Ok(catalogue::error(format!("{name}: {e}"))),
    };
    match run(call, now).await {
        Ok((structured, text)) => Ok(catalogue::result(structured, text)),
        Err(e) => stage_failure(e).map(|why| catalogue::error(format!("{name} failed: {why}"))),
    }
}

fn mode(m: Mode) -> SearchMode {
    match m {
        Mode::Hybrid => SearchMode::Hybrid,
        Mode::Text => SearchMode::Text,
        Mode::Vector => SearchMode::Vector,
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, StageError> {
    serde_json::to_value(v).map_err(|e| StageError::internal(format!("an answer: {e}")))
}

/// Lines of a list for a model to read: `- ` and each item's summary.
fn lines(items: impl IntoIterator<Item = String>, none: &str) -> String {
    let all: Vec<String> = items.into_iter().map(|s| format!("- {s}")).collect();
    if all.is_empty() { none.to_string() } else { all.join("\n") }
}

fn short(s: &str, n: usize) -> String {
    let t: String = s.chars().take(n).collect();
    if t.chars().count() < s.chars().count() { format!("{t}…") } else { t }
}

/// A memory hit as a program reads it (its kind beside its fields) and as
/// a model reads it.
fn memory_hit(h: MemoryHit) -> Result<(Value, String), StageError> {
    let (kind, mut v) = match &h {
        MemoryHit::Exchange(x) => ("exchange", to_value(x)?),
        MemoryHit::Fact(x) => ("fact", to_value(x)?),
        MemoryHit::Gist(x) => ("gist", to_value(x)?),
        MemoryHit::UserTrait(x) => ("trait", to_value(x)?),
    };
    v["kind"] = json!(kind);
    let said = ["text", "response"]
        .iter()
        .filter_map(|k| v[*k].as_str())
        .map(|s| short(s, 300))
        .collect::<Vec<_>>()
        .join(" / ");
    let about = v["key"].as_str().or(v["topic"].as_str()).map(|k| format!(" [{k}]")).unwrap_or_default();
    Ok((v, format!("{kind}{about}: {said}")))
}

async fn run(call: Call, now: u64) -> Result<(Value, String), StageError> {
    Ok(match call {
        Call::Remember { text, title } => {
            let doc = NewDocument {
                id: None,
                title: title.clone(),
                text,
                context: None,
                source_url: None,
                source_date: None,
            };
            let ids = knowledge::add_documents(vec![doc], now).await?;
            let id = ids.into_iter().next().ok_or_else(|| StageError::internal("no id for the document"))?;
            let text = format!("Stored as document {id}; searches find it from now on.");
            (json!({"id": id, "title": title}), text)
        }
        Call::Search { query, k, mode: m } => {
            let corpora = ["knowledge", "document", "episode"].map(String::from).to_vec();
            let hits = knowledge::search(query, k, mode(m), corpora, false).await?;
            let results = to_value(&hits)?;
            let text = lines(
                results.as_array().into_iter().flatten().map(|h| {
                    let title = h["title"].as_str().filter(|t| !t.is_empty()).unwrap_or("untitled");
                    let snippet = h["snippet"].as_str().unwrap_or_default();
                    format!(
                        "{} {} ({}; score {:.3}): {}",
                        h["corpus"].as_str().unwrap_or("?"),
                        h["id"].as_str().unwrap_or("?"),
                        title,
                        h["score"].as_f64().unwrap_or(0.0),
                        short(snippet, 300)
                    )
                }),
                "Nothing stored matches.",
            );
            (json!({"results": results}), text)
        }
        Call::Recall { topic, limit } => {
            let mut memories = Vec::new();
            let mut said = Vec::new();
            for h in memory::search(topic.clone(), limit, now).await? {
                let (v, line) = memory_hit(h)?;
                memories.push(v);
                said.push(line);
            }
            // Episodes, the consolidated stories of past conversations.
            let episodes =
                knowledge::search(topic, limit.min(10), SearchMode::Hybrid, vec!["episode".into()], false).await?;
            for e in to_value(&episodes)?.as_array().into_iter().flatten() {
                let mut v = e.clone();
                v["kind"] = json!("episode");
                let text = e["snippet"].as_str().unwrap_or_default();
                said.push(format!("episode: {}", short(text, 300)));
                memories.push(v);
            }
            (json!({"memories": memories}), lines(said, "Nothing was said about that."))
        }
        Call::RetrieveKnowledge { query, k, mode: m } => {
            let r = knowledge::retrieve(query, k, mode(m), now).await?;
            let mut entries = Vec::new();
            let mut said = Vec::new();
            for x in r.results {
                let mut v = to_value(&x.entry)?;
                v["relevance_score"] = json!(x.relevance_score);
                v["final_score"] = json!(x.final_score);
                said.push(format!(
                    "{} {} (final score {:.3}, relevance {:.3}): {}",
                    v["kind"].as_str().unwrap_or("entry"),
                    v["id"].as_str().unwrap_or("?"),
                    x.final_score,
                    x.relevance_score,
                    short(&format!("{} — {}", x.entry.position, x.entry.reasoning), 400)
                ));
                entries.push(v);
            }
            (json!({"entries": entries}), lines(said, "No knowledge entry is relevant."))
        }
        Call::Ingest { text, source_type, source_date, principal } => {
            let source = Transcript {
                source_type: if source_type == "chat" { SourceType::Chat } else { SourceType::Meeting },
                source_channel: Some("mcp".into()),
                source_date: source_date.unwrap_or_default(),
                source_url: None,
                principal,
                text,
            };
            let q = knowledge::enqueue(source, now).await?;
            let status = to_value(&q.status)?;
            let text = if q.duplicate {
                format!("This transcript was sent before: job {} ({status}).", q.job_id)
            } else {
                format!("Queued as job {}; check it with ingest_status.", q.job_id)
            };
            (json!({"job_id": q.job_id, "status": status, "duplicate": q.duplicate}), text)
        }
        Call::IngestStatus { job_id } => {
            let job = to_value(&knowledge::job(job_id.clone()).await?)?;
            let status = job["status"].as_str().unwrap_or("?").to_string();
            let mut text = format!("Job {job_id} is {status}.");
            if let Some(e) = job["error"].as_str() {
                text.push_str(&format!(" Error: {e}"));
            }
            if let Some(o) = job["outcome"]["outcomes"].as_array() {
                text.push_str(&format!(" {} candidate(s) were judged.", o.len()));
            }
            let mut v = job;
            v["job_id"] = json!(job_id);
            (v, text)
        }
        Call::ListRecommendations { door, status, limit } => {
            let status = status.as_deref().and_then(mneme_rx::lifecycle::Status::parse).map(RecStatus::from);
            let recs = to_value(&rx::list_recs(door, status, limit, now as i64).await?)?;
            let text = lines(
                recs.as_array().into_iter().flatten().map(|r| {
                    format!(
                        "{} [{}] {}: {}",
                        r["id"].as_str().unwrap_or("?"),
                        r["door"].as_str().unwrap_or("?"),
                        r["status"].as_str().unwrap_or("?"),
                        short(r["tldr"].as_str().unwrap_or_default(), 300)
                    )
                }),
                "No recommendations.",
            );
            (json!({"recommendations": recs}), text)
        }
        Call::ReadRecommendation { id } => {
            let rec = to_value(&rx::get_rec(id.clone(), now as i64).await?)?;
            let md = rx::rec_markdown(id).await?;
            (json!({"recommendation": rec, "markdown": md.markdown}), md.markdown.clone())
        }
        Call::DecideRecommendation { id, decision } => {
            let rec = match decision {
                Decision::Snooze { days } => rx::snooze(id, days, now as i64).await?,
                Decision::Dispose { disposition, fit, note } => {
                    let d = mneme_rx::lifecycle::Disposition::parse(&disposition).ok_or_else(|| {
                        StageError::new(ErrorCode::Invalid, format!("unknown decision `{disposition}`"))
                    })?;
                    rx::dispose(id, d.into(), fit, note, now as i64).await?
                }
            };
            let v = to_value(&rec)?;
            let text = format!(
                "Recommendation {} is now {}.",
                v["id"].as_str().unwrap_or("?"),
                v["status"].as_str().unwrap_or("?")
            );
            (json!({"recommendation": v}), text)
        }
        Call::CreateReminder { message, due_at, recurrence } => {
            let mut p = json!({"action": "create", "message": message, "due_at": due_at});
            if let Some(r) = recurrence {
                p["recurrence"] = json!(r);
            }
            schedule(p, now).await?
        }
        Call::ListReminders => schedule(json!({"action": "list"}), now).await?,
        Call::CreateTask { goal, priority } => {
            // As `POST /tasks`: ask first, so a refused goal costs no model
            // call; then the plan, by the model or the labelled rules.
            tasks::admit(goal.clone(), priority).await?;
            let mut progress = mneme_background::cycle::Progress::default();
            let mut ledger = mneme_entry::model::Ledger::default();
            let status = llm::status(mneme_background::cycle::DECOMPOSE_TIMEOUT_MS).await;
            mneme_entry::tasks::decompose(&goal, &status, &mut progress, &mut ledger, now).await;
            ledger.flush(None, now).await;
            let task = tasks::create(NewTask { goal, priority, progress: progress.into(), now_ms: now }).await?;
            let v = to_value(&task)?;
            let text = format!("Created background task {}: {}", task.id, task.goal);
            (json!({"task": v}), text)
        }
        Call::ListTasks { status, limit } => {
            let state = status.as_deref().and_then(mneme_background::tasks::State::parse).map(Into::into);
            let list = tasks::list(state, limit).await?;
            let text = lines(
                list.iter().map(|t| {
                    format!("{} ({:?}, {:.0}% covered): {}", t.id, t.status, t.coverage * 100.0, short(&t.goal, 200))
                }),
                "No background tasks.",
            );
            (json!({"tasks": to_value(&list)?}), text)
        }
        Call::CancelTask { id } => {
            let task = tasks::cancel(id, now).await?;
            let text = format!("Task {} is {:?}.", task.id, task.status);
            (json!({"task": to_value(&task)?}), text)
        }
        Call::Forget(scope) => {
            let scope = match scope {
                Forget::Exchange(id) => ForgetScope::Exchange(id),
                Forget::Fact { key, topic } => ForgetScope::Fact(FactKey { key, topic }),
                Forget::Topic(t) => ForgetScope::Topic(t),
            };
            let (v, text) = match memory::forget(scope).await? {
                Forgotten::Exchanges(n) => (json!({"exchanges": n}), format!("Forgot {n} exchange(s).")),
                Forgotten::Facts(n) => (json!({"facts": n}), format!("Forgot {n} fact(s).")),
                Forgotten::Topic(t) => (
                    json!({"exchanges": t.exchanges, "memory_keys": t.memory_keys, "topic": t.topic}),
                    format!(
                        "Forgot topic {}: {} exchange(s) and {} memory key(s).",
                        t.topic, t.exchanges, t.memory_keys
                    ),
                ),
            };
            (json!({"forgotten": v}), text)
        }
    })
}

/// A reminder through the act stage's `schedule` skill, the one `/chat`
/// sets reminders with: its checks (a time in the future, a known
/// recurrence) and its answer are the same.
async fn schedule(params: Value, now: u64) -> Result<(Value, String), StageError> {
    let action = Action { kind: "schedule".into(), params: params.to_string() };
    let results = act::dispatch(vec![action], "mcp".into(), "reminders".into(), now, ACTION_TIMEOUT_MS).await?;
    let r = results.into_iter().next().ok_or_else(|| StageError::internal("the act stage answered nothing"))?;
    match r.status.as_str() {
        "success" => {}
        // Not written in time is the store's silence, not the caller's
        // mistake: the API's 503 (D-M3), and no claim that it was set.
        "timeout" => {
            return Err(StageError::new(
                ErrorCode::StoreUnavailable,
                format!("the reminder was not written in time ({})", r.result),
            ));
        }
        _ => return Err(StageError::new(ErrorCode::Invalid, r.result)),
    }
    Ok((json!({"result": r.result}), r.result))
}
