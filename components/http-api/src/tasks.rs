//! Persistent tasks for the principal: `GET /tasks`, `POST /tasks`,
//! `GET /tasks/{id}` and `DELETE /tasks/{id}`. Creation decomposes the
//! goal into a plan first (the model through `llm`, checked by the
//! design's gates, or the labelled rule-based plan when no model is
//! configured); the worker behind `POST /tick/tasks` carries it out.

use crate::knowledge::{bad, body_json, known_fields};
use crate::mneme::llm::llm;
use crate::mneme::tasks::tasks;
use crate::{Reply, err, num, reply, stage_error, stage_value};
use mneme_background::cycle::Progress;
use mneme_background::tasks::State;
use mneme_entry::clock;
use mneme_http::{ApiError, json};
use mneme_types::tasks::{NewTask, TaskState};
use serde_json::{Value, json};
use spin_sdk::http::{Method, Request, StatusCode};
use std::collections::HashMap;

const MAX_BODY: usize = 64 * 1024;

pub fn handles(path: &str) -> bool {
    path == "/tasks" || path.starts_with("/tasks/")
}

pub async fn route(req: Request, path: &str, query: &HashMap<String, String>) -> Reply {
    let method = req.method().clone();
    let now = clock::request_ms(req.headers()).await;
    if path == "/tasks" {
        return match method {
            Method::GET => {
                let limit = match num(query, "limit", 50, 1, 200) {
                    Ok(l) => l,
                    Err(e) => return err(e),
                };
                let status = match query.get("status").map(|s| state(s)).transpose() {
                    Ok(s) => s,
                    Err(e) => return err(e),
                };
                reply(stage_value(tasks::list(status, limit).await.map(|tasks| json!({"tasks": tasks}))))
            }
            Method::POST => create(req, now).await,
            _ => err(ApiError::method_not_allowed("GET, POST")),
        };
    }
    let id = path.trim_start_matches("/tasks/");
    if id.is_empty() || id.len() > 64 || id.contains('/') {
        return err(ApiError::not_found(format!("no endpoint at {path}")));
    }
    match method {
        Method::GET => reply(stage_value(tasks::get(id.to_string()).await)),
        Method::DELETE => reply(stage_value(tasks::cancel(id.to_string(), now).await)),
        _ => err(ApiError::method_not_allowed("GET, DELETE")),
    }
}

async fn create(req: Request, now: u64) -> Reply {
    let v = match body_json(req, MAX_BODY).await {
        Ok(v) => v,
        Err(e) => return err(e),
    };
    let checked = (|| {
        known_fields(&v, &["goal", "priority"])?;
        let raw = v.get("goal").and_then(Value::as_str).unwrap_or_default();
        let goal = raw.trim();
        if goal.is_empty() {
            return Err(bad("invalid", "`goal` is required and must be a non-empty string"));
        }
        // The whole string counts toward the limit, as the description's
        // maxLength says; the stage checks the trimmed goal's length.
        if raw.chars().count() > *mneme_background::tasks::GOAL_CHARS.end() {
            return Err(bad("invalid", "`goal` is at most 2,000 characters"));
        }
        if v.get("priority").is_some_and(|p| !p.is_null() && p.as_i64().is_none()) {
            return Err(bad("invalid", "`priority` is an integer from 1 (most urgent) to 10"));
        }
        Ok((goal.to_string(), v.get("priority").and_then(Value::as_i64)))
    })();
    let (goal, priority) = match checked {
        Ok(g) => g,
        Err(e) => return err(e),
    };
    // The stage checks the goal's length, the priority's range and whether
    // the goal is taken on; ask first, so a refused goal never costs a
    // model call.
    if let Err(e) = tasks::admit(goal.clone(), priority).await {
        return reply(stage_error(e));
    }
    let mut progress = Progress::default();
    let mut ledger = mneme_entry::model::Ledger::default();
    mneme_entry::tasks::decompose(
        &goal,
        &llm::status(mneme_background::cycle::DECOMPOSE_TIMEOUT_MS).await,
        &mut progress,
        &mut ledger,
        now,
    )
    .await;
    ledger.flush(None, now).await;
    match tasks::create(NewTask { goal, priority, progress: progress.into(), now_ms: now }).await {
        Ok(task) => reply(json(StatusCode::CREATED, &task)),
        Err(e) => reply(stage_error(e)),
    }
}

/// A `status` filter's task state.
fn state(name: &str) -> Result<TaskState, ApiError> {
    State::parse(name).map(Into::into).ok_or_else(|| {
        let names: Vec<&str> = State::ALL.iter().map(|s| s.as_str()).collect();
        bad("invalid", format!("`status` is one of {}", names.join(", ")))
    })
}
