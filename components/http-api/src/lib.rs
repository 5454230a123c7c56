//! The public HTTP entry component. It authenticates, validates and routes;
//! the conversation pipeline runs across the stage components it imports
//! (a dependency may not have dependencies, so the entry wires the stages
//! together: `chat.rs` is that wiring, in the design's order).

spin_sdk::wit_bindgen::generate!({
    path: [
        "../../wit/types", "../../wit/store", "../../wit/llm", "../../wit/context", "../../wit/triage",
        "../../wit/router", "../../wit/act", "../../wit/commit", "../../wit/memory", "../../wit/knowledge", "../../wit/rx",
        "../../wit/tasks", "../../wit/consolidate", "../../wit/drift", "../../wit/entries",
    ],
    world: "mneme:entries/http-api",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    generate_all,
});

mod chat;
mod clock;
mod events;
mod knowledge;
mod rx;
mod session;
mod tasks;
mod tools;

use mneme::memory::memory;
use mneme::store::store;
use mneme::types::types::StageError;
use mneme_http::{ApiError, json};
use serde_json::{Value, json};
use spin_sdk::http::{IntoResponse, Method, Request, StatusCode};
use spin_sdk::http_service;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What every handler returns: a response for the host.
pub type Reply = Result<spin_sdk::wasip3::http::types::Response, spin_sdk::wasip3::http::types::ErrorCode>;

pub fn reply(r: impl IntoResponse) -> Reply {
    r.into_response()
}

pub fn err(e: ApiError) -> Reply {
    reply(e.into_response())
}

#[http_service]
async fn handle(req: Request) -> Reply {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    if path == "/health" {
        return match method {
            Method::GET => reply(health().await),
            _ => err(ApiError::method_not_allowed("GET")),
        };
    }
    // Ingest has its own token, so transcripts can be pushed by a bot that
    // never holds the API key.
    if path == "/knowledge/ingest" {
        if method != Method::POST {
            return err(ApiError::method_not_allowed("POST"));
        }
        let token = spin_sdk::variables::get("ingest_token").await.ok();
        if let Err(e) =
            mneme_http::require_header_token(req.headers(), "x-ingest-token", token.as_deref(), "ingest_token")
        {
            return err(e);
        }
        return knowledge::ingest(req).await;
    }
    // Recs pushed by an external generator carry the rx ingest token, which
    // can neither read nor change recs.
    if path == "/v1/rx/recs" && method == Method::POST {
        let token = spin_sdk::variables::get("rx_ingest_token").await.ok();
        if let Err(e) =
            mneme_http::require_header_token(req.headers(), "x-rx-ingest-token", token.as_deref(), "rx_ingest_token")
        {
            return err(e);
        }
        return rx::ingest(req).await;
    }
    let key = spin_sdk::variables::get("api_key").await.ok();
    let now_s = clock::now_ms(req.headers()).await / 1000;
    if path == "/session" {
        return session::route(req, &method, key.as_deref(), now_s).await;
    }
    if let Err(e) = mneme_http::session::authenticate(req.headers(), &method, key.as_deref(), now_s) {
        return err(e);
    }
    let query = query_map(req.uri().query().unwrap_or(""));
    if knowledge::handles(&path) {
        return match knowledge::route(req, &path, &query).await {
            Some(r) => r,
            None => err(ApiError::not_found(format!("no endpoint at {path}"))),
        };
    }
    if rx::handles(&path) {
        return rx::route(req, &path, &query).await;
    }
    if tasks::handles(&path) {
        return tasks::route(req, &path, &query).await;
    }
    if tools::handles(&path) {
        return tools::route(req, &path).await;
    }
    let allowed = |m: &str| err(ApiError::method_not_allowed(m));
    match path.as_str() {
        "/chat" if method == Method::POST => chat::handle(req).await,
        "/chat" => allowed("POST"),
        "/events" if method == Method::GET => events::handle(&req, &query).await,
        "/events" => allowed("GET"),
        "/conversation/recent" if method == Method::GET => {
            let limit = match num(&query, "limit", 20, 1, 100) {
                Ok(l) => l,
                Err(e) => return err(e),
            };
            reply(stage_json(
                memory::recent(json!({"thread_id": query.get("thread_id"), "limit": limit}).to_string()).await,
            ))
        }
        "/conversation/recent" => allowed("GET"),
        "/memory/search" if method == Method::GET => {
            let Some(q) = query.get("q").filter(|q| !q.trim().is_empty()) else {
                return err(ApiError::new(StatusCode::BAD_REQUEST, "invalid", "the query parameter `q` is required"));
            };
            if q.chars().count() > 500 {
                return err(ApiError::new(StatusCode::BAD_REQUEST, "invalid", "`q` is at most 500 characters"));
            }
            let limit = match num(&query, "limit", 20, 1, 100) {
                Ok(l) => l,
                Err(e) => return err(e),
            };
            let now = clock::now_ms(req.headers()).await;
            reply(stage_json(memory::search(json!({"q": q, "limit": limit, "now_ms": now}).to_string()).await))
        }
        "/memory/search" => allowed("GET"),
        "/memory/forget" if method == Method::POST => {
            let v = match knowledge::body_json(req, 64 * 1024).await {
                Ok(v) => v,
                Err(e) => return err(e),
            };
            if !v.get("scope").is_some_and(Value::is_string) {
                return err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid",
                    "send {\"scope\": \"exchange\"|\"fact\"|\"topic\", …}",
                ));
            }
            for k in ["topic", "key", "id"] {
                if v.get(k).is_some_and(|x| !x.is_string() && !x.is_null()) {
                    return err(ApiError::new(StatusCode::BAD_REQUEST, "invalid", format!("`{k}` must be a string")));
                }
            }
            reply(stage_json(memory::forget(v.to_string()).await))
        }
        "/memory/forget" => allowed("POST"),
        "/privacy/export" if method == Method::GET => {
            let now = clock::now_ms(req.headers()).await;
            match memory::export_all(json!({"now_ms": now}).to_string()).await {
                Ok(body) => spin_sdk::http::Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .header("content-disposition", "attachment; filename=\"mneme-export.json\"")
                    .body(body)
                    .expect("static parts")
                    .into_response(),
                Err(e) => reply(stage_error(e)),
            }
        }
        "/privacy/export" => allowed("GET"),
        "/privacy/delete-all" if method == Method::DELETE => {
            if query.get("confirm").map(String::as_str) != Some("true") {
                return err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "confirmation-required",
                    "deleting everything cannot be undone; repeat with ?confirm=true",
                ));
            }
            reply(stage_json(memory::delete_all("{}".into()).await))
        }
        "/privacy/delete-all" => allowed("DELETE"),
        "/jobs" if method == Method::GET => {
            let limit = match num(&query, "limit", 50, 1, 500) {
                Ok(l) => l,
                Err(e) => return err(e),
            };
            reply(stage_json(
                memory::jobs(
                    json!({"queue": query.get("queue"), "status": query.get("status"), "limit": limit}).to_string(),
                )
                .await,
            ))
        }
        "/jobs" => allowed("GET"),
        _ => err(ApiError::not_found(format!("no endpoint at {path}"))),
    }
}

pub fn stage_error(e: StageError) -> spin_sdk::http::Response<String> {
    ApiError::from_stage(&e.code, e.message).into_response()
}

/// A stage's JSON answer as a 200, or its error.
pub fn stage_json(r: Result<String, StageError>) -> spin_sdk::http::Response<String> {
    match r {
        Ok(body) => spin_sdk::http::Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(body)
            .expect("static parts"),
        Err(e) => stage_error(e),
    }
}

/// Decoded query parameters (the last value of a repeated name wins).
pub fn query_map(q: &str) -> std::collections::HashMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An integer query parameter within bounds, else 400.
pub fn num(
    q: &std::collections::HashMap<String, String>,
    name: &str,
    default: u32,
    min: u32,
    max: u32,
) -> Result<u32, ApiError> {
    match q.get(name) {
        None => Ok(default),
        Some(v) => v.parse::<u32>().ok().filter(|n| (min..=max).contains(n)).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid",
                format!("`{name}` must be an integer from {min} to {max}"),
            )
        }),
    }
}

/// `GET /health`: liveness plus what the `store` stage reports. Open to all,
/// and it never reveals configuration beyond the store kinds.
async fn health() -> spin_sdk::http::Response<String> {
    match store::health().await {
        Ok(h) => json(
            StatusCode::OK,
            &json!({
                "status": if h.migration_level == h.migration_latest { "ok" } else { "migrations-pending" },
                "version": VERSION,
                "store": { "sql": h.sql_kind, "kv": h.kv_kind },
                "migrations": { "level": h.migration_level, "latest": h.migration_latest },
            }),
        ),
        Err(e) => ApiError::from_stage(&e.code, e.message).into_response(),
    }
}
