//! `POST /tick/{job}`: runs one scheduled job as async code.
//!
//! Scheduled work cannot run inside a cron export: the cron plugin's export
//! is a sync `func`, and a sync export that waits on Postgres traps under
//! WASI 0.3. So every job is an authenticated HTTP tick. The `mneme` runner's
//! cron trigger calls it on schedule; on another platform any scheduler can
//! (`curl -X POST -H "Authorization: Bearer $CRON_TOKEN" …/tick/heartbeat`).

// The entry's world, for its component type; every interface's bindings
// are `mneme-entry`'s, generated once for both entries.
spin_sdk::wit_bindgen::generate!({
    path: [
        "../../wit/types", "../../wit/store", "../../wit/llm", "../../wit/context", "../../wit/triage",
        "../../wit/router", "../../wit/act", "../../wit/commit", "../../wit/memory", "../../wit/knowledge", "../../wit/rx",
        "../../wit/tasks", "../../wit/consolidate", "../../wit/drift", "../../wit/entries",
    ],
    world: "mneme:entries/tick",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/conversation@0.1.0": mneme_types::conversation,
        "mneme:types/tasks@0.1.0": mneme_types::tasks,
        "mneme:types/routing@0.1.0": mneme_types::routing,
        "mneme:types/memory@0.1.0": mneme_types::memory,
        "mneme:types/knowledge@0.1.0": mneme_types::knowledge,
        "mneme:types/consolidation@0.1.0": mneme_types::consolidation,
        "mneme:types/drift@0.1.0": mneme_types::drift,
        "mneme:store/store@0.1.0": mneme_entry::mneme::store::store,
        "mneme:llm/llm@0.1.0": mneme_entry::mneme::llm::llm,
        "mneme:memory/memory@0.1.0": mneme_entry::mneme::memory::memory,
        "mneme:knowledge/knowledge@0.1.0": mneme_entry::mneme::knowledge::knowledge,
        "mneme:act/act@0.1.0": mneme_entry::mneme::act::act,
        "mneme:tasks/tasks@0.1.0": mneme_entry::mneme::tasks::tasks,
        "mneme:consolidate/consolidate@0.1.0": mneme_entry::mneme::consolidate::consolidate,
        "mneme:drift/drift@0.1.0": mneme_entry::mneme::drift::drift,
        "mneme:router/router@0.1.0": mneme_entry::mneme::router::router,
        "mneme:commit/commit@0.1.0": mneme_entry::mneme::commit::commit,
    },
});

use mneme_entry::mneme;

mod consolidate;
mod drift;
mod knowledge;
mod reflect;
mod tasks;
mod tools;

use mneme::memory::memory;
use mneme::store::store;
use mneme_http::{ApiError, json, require_bearer};
use serde_json::json;
use spin_sdk::http::body::IncomingBodyExt;
use spin_sdk::http::{IntoResponse, Method, Request, StatusCode};
use spin_sdk::http_service;

#[http_service]
async fn handle(req: Request) -> impl IntoResponse {
    // The app's body limit holds whoever runs it (#24); a tick reads no body.
    if let Err(e) = mneme_http::refuse_declared_body(req.headers()) {
        // Read and dropped first, so the client can read the 413 (D-F35).
        if mneme_http::drains(mneme_http::declared_length(req.headers())) {
            mneme_http::drain(req.into_body().stream(), 0, spin_sdk::time::sleep).await;
        }
        return e.into_response();
    }
    let token = spin_sdk::variables::get("cron_token").await.ok();
    if let Err(e) = require_bearer(req.headers(), token.as_deref(), "cron_token") {
        return e.into_response();
    }
    if req.method() != Method::POST {
        return ApiError::method_not_allowed("POST").into_response();
    }
    let job = req.uri().path().strip_prefix("/tick/").unwrap_or("").to_string();
    if job != "migrate"
        && let Err(e) = mneme_entry::schema::ensure().await
    {
        return ApiError::from_stage(e.code.name(), e.message).into_response();
    }
    let started = now_ms();
    let outcome = match job.as_str() {
        "migrate" => store::migrate().await.map(|applied| {
            json!({ "applied": applied.iter().map(|m| json!({"version": m.version, "name": m.name})).collect::<Vec<_>>() })
        }),
        "heartbeat" => store::heartbeat("heartbeat".into(), started).await.map(|n| json!({ "beats": n })),
        "reminders" => {
            let now = clock(&req).await;
            memory::fire_reminders(now).await.map(|fired| json!({ "fired": fired }))
        }
        "knowledge" => {
            // Under the test clock every step of the drain sees the
            // request's time; otherwise the system clock runs.
            let fixed = clock(&req).await;
            let offset = fixed as i64 - started as i64;
            knowledge::drain(move || (now_ms() as i64 + offset) as u64).await
        }
        "consolidate" => {
            let fixed = clock(&req).await;
            let offset = fixed as i64 - started as i64;
            consolidate::drain(move || (now_ms() as i64 + offset) as u64).await
        }
        "tasks" => {
            let fixed = clock(&req).await;
            let offset = fixed as i64 - started as i64;
            let draw = mneme_background::Draws::new(seed(&req).await).draw();
            tasks::cycle(fixed, move || (now_ms() as i64 + offset) as u64, draw).await
        }
        "drift" => {
            let fixed = clock(&req).await;
            let offset = fixed as i64 - started as i64;
            drift::cycle(fixed, seed(&req).await, move || (now_ms() as i64 + offset) as u64).await
        }
        "tools" => tools::drain(now_ms).await,
        "index" => mneme::knowledge::knowledge::index_vectors(now_ms()).await.and_then(index_outcome),
        "regulate" => reflect::regulate(clock(&req).await).await,
        "reflect" => {
            let fixed = clock(&req).await;
            let offset = fixed as i64 - started as i64;
            reflect::reflect(fixed, seed(&req).await, move || (now_ms() as i64 + offset) as u64).await
        }
        _ => {
            return ApiError::not_found(format!("no scheduled job named `{job}`; jobs: {}", mneme_entry::JOBS.join(", ")))
                .into_response();
        }
    };
    let outcome = match outcome {
        Ok(mut result) if matches!(job.as_str(), "consolidate" | "tools") && result.is_object() => {
            use mneme_background::consolidate::{CHUNKER_QUEUE, EPISODIC_QUEUE, SEMANTIC_QUEUE};
            let drained: &[&str] = if job == "consolidate" {
                &[CHUNKER_QUEUE, EPISODIC_QUEUE, SEMANTIC_QUEUE]
            } else {
                &[mneme_background::TOOL_QUEUE]
            };
            result["queued"] = queued(drained).await;
            Ok(result)
        }
        other => other,
    };
    let took_ms = now_ms().saturating_sub(started);
    // A cycle whose claim another tick took over (it outlived its lease)
    // wrote nothing under the claim: the scheduler's call did not fail, the
    // work is the other tick's (D-CL5).
    let outcome = match outcome {
        Err(e) if e.code == mneme_types::ErrorCode::LeaseLost => {
            Ok(json!({ "due": true, "ran": false, "abandoned": e.message }))
        }
        other => other,
    };
    let said = match &outcome {
        Ok(result) => result.to_string(),
        Err(e) => format!("{}: {}", e.code.name(), e.message),
    };
    // The job's last run, for GET /status. A store that cannot take it
    // does not change the tick's own answer (the log line says so).
    let run = store::JobRun {
        job: job.clone(),
        at_ms: started,
        took_ms,
        ok: outcome.is_ok(),
        outcome: said,
        last_ok_ms: None,
    };
    if let Err(e) = store::record_run(run).await {
        eprintln!("tick {job}: its run was not recorded: {}: {}", e.code.name(), e.message);
    }
    match outcome {
        Ok(result) => json(StatusCode::OK, &json!({ "job": job, "took_ms": took_ms, "result": result })),
        Err(e) => ApiError::from_stage(e.code.name(), e.message).into_response(),
    }
}

/// The vector index's upkeep, corpus by corpus. A corpus that failed makes
/// the run fail (the scheduler logs it and `GET /status` shows it) with a
/// message naming it and what the others did; their work is kept. The
/// status is the first retryable failure's (`store-unavailable`,
/// `store-busy`) when any corpus met one, else the first failure's.
fn index_outcome(
    steps: Vec<mneme::knowledge::knowledge::VectorIndexStep>,
) -> Result<serde_json::Value, mneme_types::StageError> {
    let failed: Vec<String> = steps
        .iter()
        .filter_map(|s| s.error.as_ref().map(|e| format!("{}: {}: {}", s.corpus, e.code.name(), e.message)))
        .collect();
    // A store that did not answer or was busy (503: try again) over any
    // other failure.
    let codes = || steps.iter().filter_map(|s| s.error.as_ref().map(|e| e.code));
    let first = codes().find(|c| c.is_unavailable()).or_else(|| codes().next());
    let report = steps.iter().map(|s| match &s.error {
        None => json!({
            "corpus": s.corpus, "trained": s.trained, "lists": s.lists, "moved": s.moved, "flat": s.flat,
        }),
        Some(e) => json!({ "corpus": s.corpus, "error": { "code": e.code.name(), "message": e.message } }),
    });
    let report = json!({ "corpora": report.collect::<Vec<_>>() });
    match first {
        None => Ok(report),
        Some(code) => Err(mneme_types::StageError {
            code,
            message: format!("the vector index's upkeep failed for {}; every corpus: {report}", failed.join("; ")),
        }),
    }
}

/// Jobs still queued after a drain, in each queue the tick drains: what
/// an operator watches to see the drains keep up, and the runner exports as
/// `mneme.queue.depth`. `null` if the store could not say.
async fn queued(drained: &[&str]) -> serde_json::Value {
    match memory::queue_depths(drained.iter().map(ToString::to_string).collect::<Vec<_>>()).await {
        Ok(depths) => json!(depths.into_iter().collect::<std::collections::BTreeMap<String, u64>>()),
        Err(_) => serde_json::Value::Null,
    }
}

/// The job's clock: `X-Mneme-Clock` when the `test_clock` variable is
/// `true` (tests only), else the system clock.
async fn clock(req: &Request) -> u64 {
    mneme_entry::clock::request_ms(req.headers()).await
}

/// The seed of the job's random choices: the host's random source, or,
/// when `test_clock` is `true`, `X-Mneme-Seed` (so a test knows the draws
/// it will get).
async fn seed(req: &Request) -> u64 {
    let enabled = mneme_entry::clock::test_clock_enabled().await;
    let seeded =
        req.headers().get("x-mneme-seed").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    match seeded {
        Some(s) if enabled => s,
        _ => {
            let mut b = [0u8; 8];
            getrandom::fill(&mut b).expect("the host provides randomness");
            u64::from_le_bytes(b)
        }
    }
}

use mneme_time::clock::system_ms as now_ms;

/// An `internal` stage error.
pub(crate) fn internal(message: String) -> mneme_types::StageError {
    mneme_types::StageError::internal(message)
}
