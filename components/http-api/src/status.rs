//! `GET /status` (#26 item 4): what a principal needs to know to trust the
//! app in their first hour, behind their key. `/health` stays open and
//! minimal for load balancers; this says which model is connected and
//! whether it answers (with its error), whether the embedding model loaded,
//! which stores hold their memory and at which schema version, when each
//! scheduled job last ran and how it ended, and how much work waits.
//!
//! Every part is gathered side by side and each reports its own failure:
//! a status page that fails whole when one store is down would hide the
//! one thing it exists to show. The answer is 200 whenever the caller is
//! authenticated.

use mneme_background::consolidate::{CHUNKER_QUEUE, EPISODIC_QUEUE, SEMANTIC_QUEUE};
use serde_json::{Value, json};

use crate::mneme::knowledge::knowledge;
use crate::mneme::llm::llm;
use crate::mneme::memory::memory;
use crate::mneme::store::store;

/// How long the model and the stores each get to answer.
const DEADLINE_MS: u32 = 1_500;
/// The days (today included) whose model use `/status` sums.
const USAGE_DAYS: u32 = 7;

fn stage_error(e: &mneme_types::StageError) -> Value {
    json!({"code": e.code.name(), "message": e.message})
}

pub async fn status(version: &str, now_ms: u64) -> Value {
    let (model, embeddings, health, app, depths) = futures::join!(
        model(),
        async {
            match knowledge::embedder().await {
                Ok(e) => json!({"loaded": true, "model": e.model, "dimension": e.dimension,
                                "took_ms": e.took_us as f64 / 1000.0, "error": null}),
                Err(e) => json!({"loaded": false, "model": "all-minilm-l6-v2", "dimension": null,
                                 "error": stage_error(&e)}),
            }
        },
        store::health(DEADLINE_MS),
        store::status(mneme_time::calendar::utc_date_before(now_ms, USAGE_DAYS - 1)),
        memory::queue_depths(
            [CHUNKER_QUEUE, EPISODIC_QUEUE, SEMANTIC_QUEUE, mneme_background::TOOL_QUEUE].map(String::from).to_vec()
        ),
    );
    let dep = |d: &store::Dependency| json!({"kind": d.kind, "ok": d.failure.is_none(), "failure": d.failure});
    let mut model = model;
    let (jobs, ingest) = match &app {
        Ok(a) => {
            if let Some(at) = a.last_model_reply_ms {
                model["last_reply_ms"] = json!(at);
            }
            model["usage"] = usage(a, now_ms);
            let jobs: Vec<Value> = mneme_entry::JOBS
                .iter()
                .map(|job| match a.runs.iter().find(|r| r.job == *job) {
                    Some(r) => json!({"job": job, "last_run_ms": r.at_ms, "took_ms": r.took_ms, "ok": r.ok,
                                      "outcome": r.outcome, "last_ok_ms": r.last_ok_ms}),
                    None => json!({"job": job, "last_run_ms": null, "took_ms": null, "ok": null,
                                   "outcome": "never run", "last_ok_ms": null}),
                })
                .collect();
            (json!(jobs), json!(a.ingest_queued))
        }
        Err(_) => (Value::Null, Value::Null),
    };
    let queues = match &depths {
        Ok(d) => {
            let of = |q: &str| d.iter().find(|(n, _)| n == q).map_or(0, |(_, c)| *c);
            json!({
                "ingest": ingest,
                "consolidation": of(CHUNKER_QUEUE) + of(EPISODIC_QUEUE) + of(SEMANTIC_QUEUE),
                "tools": of(mneme_background::TOOL_QUEUE),
            })
        }
        Err(_) => json!({"ingest": ingest, "consolidation": null, "tools": null}),
    };
    let storage_error = app.as_ref().err().or(depths.as_ref().err()).map(stage_error);
    json!({
        "version": version,
        "checked_ms": now_ms,
        "model": model,
        "embeddings": embeddings,
        "storage": {"sql": dep(&health.sql), "kv": dep(&health.kv), "error": storage_error},
        "schema": {"version": health.migration_level, "latest": health.migration_latest,
                   "pending": health.migration_level < health.migration_latest},
        "jobs": jobs,
        "queues": queues,
    })
}

/// What the model cost over the last [`USAGE_DAYS`] days: per path (calls,
/// answers used, retries, fallbacks to the rules, tokens and the share of
/// prompt tokens served from the endpoint's cache), per message mode (the
/// calls and tokens of an average message), the kept fallbacks counted per
/// path and reason, and the newest ones with their details (#49 items 2
/// and 5).
fn usage(a: &store::AppStatus, now_ms: u64) -> Value {
    let row = |t: &store::ModelUseTotal| {
        let share =
            |part: u64, whole: u64| if whole == 0 { Value::Null } else { json!(round3(part as f64 / whole as f64)) };
        json!({
            "calls": t.calls, "answered": t.answered, "retries": t.retries, "fallbacks": t.fallbacks,
            "prompt_tokens": t.prompt_tokens, "cached_tokens": t.cached_tokens,
            "completion_tokens": t.completion_tokens, "wait_ms": t.wait_ms,
            "cached_share": share(t.cached_tokens, t.prompt_tokens),
        })
    };
    let mut paths = serde_json::Map::new();
    let mut messages = serde_json::Map::new();
    for t in &a.model_use {
        match t.key.strip_prefix("message:") {
            Some(mode) => {
                let per = |v: u64| if t.units == 0 { Value::Null } else { json!(round3(v as f64 / t.units as f64)) };
                let mut r = row(t);
                r["messages"] = json!(t.units);
                r["calls_per_message"] = per(t.calls);
                r["prompt_tokens_per_message"] = per(t.prompt_tokens);
                r["completion_tokens_per_message"] = per(t.completion_tokens);
                messages.insert(mode.to_string(), r);
            }
            None => {
                let mut r = row(t);
                let reasons: serde_json::Map<String, Value> = a
                    .fallback_counts
                    .iter()
                    .filter(|c| c.path == t.key)
                    .map(|c| (c.reason.clone(), json!(c.count)))
                    .collect();
                r["fallback_reasons"] = Value::Object(reasons);
                paths.insert(t.key.clone(), r);
            }
        }
    }
    json!({
        "since": mneme_time::calendar::utc_date_before(now_ms, USAGE_DAYS - 1),
        "paths": paths,
        "messages": messages,
        "fallbacks": a.fallbacks.iter().map(|f| json!({"path": f.path, "at_ms": f.at_ms, "reason": f.reason,
            "detail": f.detail})).collect::<Vec<_>>(),
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The model as configured, and whether its endpoint answers now.
async fn model() -> Value {
    // Side by side: with `llm_model` empty both ask a silent endpoint, and
    // the screen waits for it once.
    let (s, probe) = futures::join!(llm::status(DEADLINE_MS), llm::probe(DEADLINE_MS));
    let url = spin_sdk::variables::get("llm_url").await.unwrap_or_default();
    let backend = spin_sdk::variables::get("llm_backend").await.unwrap_or_default();
    let backend = if backend.trim().eq_ignore_ascii_case("spin") { "spin" } else { "openai" };
    // Only the host: a URL may carry credentials, which are never shown.
    let host = url
        .split("://")
        .nth(1)
        .and_then(|r| r.split(['/', '?', '#']).next())
        .and_then(|a| a.rsplit('@').next())
        .unwrap_or("")
        .to_string();
    let mut m = json!({
        "configured": s.configured,
        "backend": backend,
        "endpoint": if host.is_empty() { Value::Null } else { json!(host) },
        "primary": s.primary,
        "light": s.light,
        "reachable": null,
        "probe_ms": null,
        "error": null,
        "last_reply_ms": null,
    });
    if !s.configured {
        m["error"] = json!({
            "code": "model-unavailable",
            "message": if backend == "spin" {
                "llm_backend is spin but llm_model is empty: set llm_model to the name of the platform's model"
            } else {
                "no model is connected: set llm_url to an OpenAI-compatible endpoint"
            },
        });
        return m;
    }
    match probe {
        // The endpoint answers but named no model to use (D-C33).
        Ok(ms) if s.primary.is_empty() => {
            m["reachable"] = json!(true);
            m["probe_ms"] = json!(ms);
            m["error"] = json!({
                "code": "model-error",
                "message": "the endpoint lists no model: load one there, or set llm_model to the model's name",
            });
        }
        Ok(ms) => {
            m["reachable"] = json!(true);
            m["probe_ms"] = json!(ms);
        }
        // The `spin` backend has no endpoint of its own to ask.
        Err(e) if e.code == mneme_types::ErrorCode::ModelUnavailable => {}
        Err(e) => {
            m["reachable"] = json!(false);
            m["error"] = stage_error(&e);
        }
    }
    m
}
