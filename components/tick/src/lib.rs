//! `POST /tick/{job}`: runs one scheduled job as async code.
//!
//! Scheduled work cannot run inside a cron export: the cron plugin's export
//! is a sync `func`, and a sync export that waits on Postgres traps under
//! WASI 0.3. So every job is an authenticated HTTP tick. The `mneme` runner's
//! cron trigger calls it on schedule; on another platform any scheduler can
//! (`curl -X POST -H "Authorization: Bearer $CRON_TOKEN" …/tick/heartbeat`).

spin_sdk::wit_bindgen::generate!({
    path: [
        "../../wit/types", "../../wit/store", "../../wit/llm", "../../wit/context", "../../wit/triage",
        "../../wit/router", "../../wit/act", "../../wit/commit", "../../wit/memory", "../../wit/knowledge", "../../wit/rx",
        "../../wit/tasks", "../../wit/consolidate", "../../wit/drift", "../../wit/entries",
    ],
    world: "mneme:entries/tick",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    generate_all,
});

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
use spin_sdk::http::{IntoResponse, Method, Request, StatusCode};
use spin_sdk::http_service;

#[http_service]
async fn handle(req: Request) -> impl IntoResponse {
    let token = spin_sdk::variables::get("cron_token").await.ok();
    if let Err(e) = require_bearer(req.headers(), token.as_deref(), "cron_token") {
        return e.into_response();
    }
    if req.method() != Method::POST {
        return ApiError::method_not_allowed("POST").into_response();
    }
    let job = req.uri().path().strip_prefix("/tick/").unwrap_or("").to_string();
    let started = now_ms();
    let outcome = match job.as_str() {
        "migrate" => store::migrate().await.map(|applied| {
            json!({ "applied": applied.iter().map(|m| json!({"version": m.version, "name": m.name})).collect::<Vec<_>>() })
        }),
        "heartbeat" => store::heartbeat("heartbeat".into(), started).await.map(|n| json!({ "beats": n })),
        "reminders" => {
            let now = clock(&req, started).await;
            memory::fire_reminders(json!({ "now_ms": now }).to_string())
                .await
                .map(|r| serde_json::from_str(&r).unwrap_or(serde_json::Value::Null))
        }
        "knowledge" => {
            // Under the test clock every step of the drain sees the
            // request's time; otherwise the system clock runs.
            let fixed = clock(&req, started).await;
            let offset = fixed as i64 - started as i64;
            knowledge::drain(move || (now_ms() as i64 + offset) as u64).await
        }
        "consolidate" => {
            let fixed = clock(&req, started).await;
            let offset = fixed as i64 - started as i64;
            consolidate::drain(move || (now_ms() as i64 + offset) as u64).await
        }
        "tasks" => {
            let fixed = clock(&req, started).await;
            let offset = fixed as i64 - started as i64;
            let draw = mneme_background::Draws::new(seed(&req).await).draw();
            tasks::cycle(fixed, move || (now_ms() as i64 + offset) as u64, draw).await
        }
        "drift" => {
            let fixed = clock(&req, started).await;
            let offset = fixed as i64 - started as i64;
            match utc_offset().await {
                Ok(utc) => drift::cycle(fixed, seed(&req).await, utc, move || (now_ms() as i64 + offset) as u64).await,
                Err(e) => return e.into_response(),
            }
        }
        "tools" => tools::drain(now_ms).await,
        "regulate" => reflect::regulate(clock(&req, started).await).await,
        "reflect" => {
            let fixed = clock(&req, started).await;
            let offset = fixed as i64 - started as i64;
            reflect::reflect(fixed, seed(&req).await, move || (now_ms() as i64 + offset) as u64).await
        }
        _ => {
            return ApiError::not_found(format!(
                "no scheduled job named `{job}`; jobs: migrate, heartbeat, reminders, knowledge, consolidate, tasks, tools, drift, regulate, reflect"
            ))
                .into_response();
        }
    };
    match outcome {
        Ok(result) => {
            json(StatusCode::OK, &json!({ "job": job, "took_ms": now_ms().saturating_sub(started), "result": result }))
        }
        // A cycle whose claim another tick took over (it outlived its
        // lease) wrote nothing under the claim: the scheduler's call did
        // not fail, the work is the other tick's (D-CL5).
        Err(e) if e.code == "lease-lost" => json(
            StatusCode::OK,
            &json!({ "job": job, "took_ms": now_ms().saturating_sub(started),
                     "result": { "due": true, "ran": false, "abandoned": e.message } }),
        ),
        Err(e) => ApiError::from_stage(&e.code, e.message).into_response(),
    }
}

/// The job's clock: `X-Mneme-Clock` when the `test_clock` variable is
/// `true` (tests only), else the system clock.
async fn clock(req: &Request, system: u64) -> u64 {
    let enabled = spin_sdk::variables::get("test_clock").await.is_ok_and(|v| v.trim() == "true");
    mneme_http::request_clock(req.headers(), enabled, system)
}

/// The seed of the job's random choices: the host's random source, or,
/// when `test_clock` is `true`, `X-Mneme-Seed` (so a test knows the draws
/// it will get).
async fn seed(req: &Request) -> u64 {
    let enabled = spin_sdk::variables::get("test_clock").await.is_ok_and(|v| v.trim() == "true");
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

/// The principal's offset from UTC in minutes (variable
/// `utc_offset_minutes`), for quiet hours.
async fn utc_offset() -> Result<i64, ApiError> {
    let raw = spin_sdk::variables::get("utc_offset_minutes").await.unwrap_or_default();
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(0);
    }
    raw.parse::<i64>().ok().filter(|m| (-14 * 60..=14 * 60).contains(m)).ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "misconfigured",
            format!("the variable utc_offset_minutes must be whole minutes from -840 to 840, not `{raw}`"),
        )
    })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A stage's JSON answer (`null` when it is not JSON).
pub(crate) fn parse(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or(serde_json::Value::Null)
}

/// An `internal` stage error.
pub(crate) fn internal(message: String) -> mneme::types::types::StageError {
    mneme::types::types::StageError { code: "internal".into(), message }
}
