//! Persistent tasks for the principal: `GET /tasks`, `POST /tasks`,
//! `GET /tasks/{id}` and `DELETE /tasks/{id}`. Creation decomposes the
//! goal into a plan first (the model through `llm`, checked by the
//! design's gates, or the labelled rule-based plan when no model is
//! configured); the worker behind `POST /tick/tasks` carries it out.

use crate::knowledge::{bad, body_json, known_fields};
use crate::mneme::llm::llm;
use crate::mneme::tasks::tasks;
use crate::{Reply, err, num, reply, stage_error, stage_json};
use mneme_background::cycle::Progress;
use mneme_entry::clock;
use mneme_http::{ApiError, json};
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
                reply(stage_json(tasks::list(json!({"status": query.get("status"), "limit": limit}).to_string()).await))
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
        Method::GET => reply(stage_json(tasks::get(json!({"id": id}).to_string()).await)),
        Method::DELETE => reply(stage_json(tasks::cancel(json!({"id": id, "now_ms": now}).to_string()).await)),
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
        Ok(goal.to_string())
    })();
    let goal = match checked {
        Ok(g) => g,
        Err(e) => return err(e),
    };
    // The stage checks the goal's length and the priority's range; check
    // them first here too, so a bad request never costs a model call.
    let probe = tasks::create(
        json!({"goal": goal, "priority": v.get("priority"), "progress": Progress::default(), "now_ms": now,
               "dry_run": true})
        .to_string(),
    )
    .await;
    if let Err(e) = probe {
        return reply(stage_error(e));
    }
    let mut progress = Progress::default();
    mneme_entry::tasks::decompose(&goal, &llm::status().await, &mut progress).await;
    match tasks::create(
        json!({"goal": goal, "priority": v.get("priority"), "progress": progress, "now_ms": now}).to_string(),
    )
    .await
    {
        Ok(body) => reply(json(StatusCode::CREATED, &serde_json::from_str::<Value>(&body).unwrap_or(Value::Null))),
        Err(e) => reply(stage_error(e)),
    }
}
