//! The public HTTP entry component. It authenticates, validates and routes;
//! the conversation pipeline runs across the stage components it imports
//! (a dependency may not have dependencies, so the entry wires the stages
//! together: `chat.rs` is that wiring, in the design's order).

// The entry's world, for its component type; every interface's bindings
// are `mneme-entry`'s, generated once for both entries.
spin_sdk::wit_bindgen::generate!({
    path: [
        "../../wit/types", "../../wit/store", "../../wit/llm", "../../wit/context", "../../wit/triage",
        "../../wit/router", "../../wit/act", "../../wit/commit", "../../wit/memory", "../../wit/knowledge", "../../wit/rx",
        "../../wit/tasks", "../../wit/consolidate", "../../wit/drift", "../../wit/entries",
    ],
    world: "mneme:entries/http-api",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/conversation@0.1.0": mneme_types::conversation,
        "mneme:types/tasks@0.1.0": mneme_types::tasks,
        "mneme:types/routing@0.1.0": mneme_types::routing,
        "mneme:types/memory@0.1.0": mneme_types::memory,
        "mneme:types/knowledge@0.1.0": mneme_types::knowledge,
        "mneme:types/rx@0.1.0": mneme_types::rx,
        "mneme:store/store@0.1.0": mneme_entry::mneme::store::store,
        "mneme:llm/llm@0.1.0": mneme_entry::mneme::llm::llm,
        "mneme:context/context@0.1.0": mneme_entry::mneme::context::context,
        "mneme:triage/triage@0.1.0": mneme_entry::mneme::triage::triage,
        "mneme:router/router@0.1.0": mneme_entry::mneme::router::router,
        "mneme:act/act@0.1.0": mneme_entry::mneme::act::act,
        "mneme:commit/commit@0.1.0": mneme_entry::mneme::commit::commit,
        "mneme:memory/memory@0.1.0": mneme_entry::mneme::memory::memory,
        "mneme:knowledge/knowledge@0.1.0": mneme_entry::mneme::knowledge::knowledge,
        "mneme:rx/rx@0.1.0": mneme_entry::mneme::rx::rx,
        "mneme:tasks/tasks@0.1.0": mneme_entry::mneme::tasks::tasks,
    },
});

use mneme_entry::{clock, mneme};

mod backup;
mod chat;
mod events;
mod knowledge;
mod rx;
mod session;
mod status;
mod tasks;
mod tools;

use mneme::memory::memory;
use mneme::store::store;
use mneme_http::{ApiError, json};
use mneme_types::StageError;
use mneme_types::memory::{FactKey, ForgetScope, Forgotten, Job, MemoryHit};
use serde_json::{Value, json};
use spin_sdk::http::{IntoResponse, Method, Request, StatusCode};
use spin_sdk::http_service;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What every handler returns: a response for the host.
pub type Reply = Result<spin_sdk::wasip3::http::types::Response, spin_sdk::wasip3::http::types::ErrorCode>;

pub fn reply(r: impl IntoResponse) -> Reply {
    r.into_response()
}

/// The head of a `text/event-stream` answer (`/chat`, `/events`): no
/// caching, and no buffering by a proxy in front.
pub fn event_stream() -> http::response::Builder {
    spin_sdk::http::Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .header("x-accel-buffering", "no")
}

pub fn err(e: ApiError) -> Reply {
    reply(e.into_response())
}

#[http_service]
async fn handle(req: Request) -> Reply {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    if let Err(e) = mneme_http::refuse_declared_body(req.headers()) {
        mneme_entry::body::drain_refused(req).await;
        return err(e);
    }
    if path == "/health" {
        // Its own checks first, within its deadline; the schema only once
        // they find the store answering (a silent store must not hold the
        // answer past 2 s, #50).
        return match method {
            Method::GET => reply(health().await),
            _ => err(ApiError::method_not_allowed("GET")),
        };
    }
    if let Err(e) = mneme_entry::schema::ensure().await {
        return reply(stage_error(e));
    }
    // Ingest has its own token, so transcripts can be pushed by a bot that
    // never holds the API key; the principal ingests with their own key or
    // session (#26 item 7). A request that names the ingest token is judged
    // by it alone.
    if path == "/knowledge/ingest" {
        if method != Method::POST {
            return err(ApiError::method_not_allowed("POST"));
        }
        let checked = if req.headers().contains_key("x-ingest-token") {
            let token = spin_sdk::variables::get("ingest_token").await.ok();
            mneme_http::require_header_token(req.headers(), "x-ingest-token", token.as_deref(), "ingest_token")
        } else {
            let key = spin_sdk::variables::get("api_key").await.ok();
            let now_s = clock::request_ms(req.headers()).await / 1000;
            mneme_http::session::authenticate(req.headers(), &method, key.as_deref(), now_s).map(|_| ())
        };
        if let Err(e) = checked {
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
    let now_s = clock::request_ms(req.headers()).await / 1000;
    if path == "/session" {
        return session::route(req, &method, key.as_deref(), now_s).await;
    }
    if let Err(e) = mneme_http::session::authenticate(req.headers(), &method, key.as_deref(), now_s) {
        return err(e);
    }
    let query = match mneme_http::parse_query(req.uri().query().unwrap_or("")) {
        Ok(q) => q,
        Err(e) => return err(e),
    };
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
        "/status" if method == Method::GET => {
            let now = clock::request_ms(req.headers()).await;
            reply(json(StatusCode::OK, &status::status(VERSION, now).await))
        }
        "/status" => allowed("GET"),
        "/chat" if method == Method::POST => chat::handle(req).await,
        "/chat" => allowed("POST"),
        "/events" if method == Method::GET => events::handle(&req, &query).await,
        "/events" => allowed("GET"),
        "/conversation/recent" if method == Method::GET => {
            let limit = match num(&query, "limit", 20, 1, 100) {
                Ok(l) => l,
                Err(e) => return err(e),
            };
            reply(stage_value(memory::recent(query.get("thread_id").cloned(), limit).await))
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
            let now = clock::request_ms(req.headers()).await;
            let found = memory::search(q.clone(), limit, now).await;
            reply(stage_value(
                found.map(|hits| json!({"query": q, "results": hits.into_iter().map(memory_hit).collect::<Vec<_>>()})),
            ))
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
            let scope = match forget_scope(&v) {
                Ok(s) => s,
                Err(e) => return err(e),
            };
            reply(stage_value(memory::forget(scope).await.map(|f| json!({"forgotten": forgotten(f)}))))
        }
        "/memory/forget" => allowed("POST"),
        "/privacy/export" if method == Method::GET => backup::export(&req).await,
        "/privacy/export" => allowed("GET"),
        "/privacy/import" if method == Method::POST => backup::import(req, &query).await,
        "/privacy/import" => allowed("POST"),
        "/privacy/delete-all" if method == Method::DELETE => {
            if query.get("confirm").map(String::as_str) != Some("true") {
                return err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "confirmation-required",
                    "deleting everything cannot be undone; repeat with ?confirm=true",
                ));
            }
            reply(stage_value(memory::delete_all().await.map(|d| json!({"deleted": d}))))
        }
        "/privacy/delete-all" => allowed("DELETE"),
        "/jobs" if method == Method::GET => {
            let limit = match num(&query, "limit", 50, 1, 500) {
                Ok(l) => l,
                Err(e) => return err(e),
            };
            let jobs = memory::jobs(query.get("queue").cloned(), query.get("status").cloned(), limit).await;
            reply(stage_value(jobs.map(|jobs| jobs.into_iter().map(job).collect::<Vec<_>>())))
        }
        "/jobs" => allowed("GET"),
        _ => err(ApiError::not_found(format!("no endpoint at {path}"))),
    }
}

/// What `POST /memory/forget` asks to forget.
fn forget_scope(v: &Value) -> Result<ForgetScope, ApiError> {
    let field = |k: &str| v.get(k).and_then(Value::as_str).map(String::from);
    let needs = |scope: &str, k: &str| {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid", format!("scope `{scope}` needs `{k}`"))
    };
    match v["scope"].as_str().unwrap_or_default() {
        "exchange" => field("id").map(ForgetScope::Exchange).ok_or_else(|| needs("exchange", "id")),
        "fact" => {
            let key = field("key").ok_or_else(|| needs("fact", "key"))?;
            Ok(ForgetScope::Fact(FactKey { key, topic: field("topic") }))
        }
        "topic" => field("topic").map(ForgetScope::Topic).ok_or_else(|| needs("topic", "topic")),
        other => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid",
            format!("unknown scope `{other}` (exchange, fact or topic)"),
        )),
    }
}

/// What was forgotten, as the client reads it: the counts of the scope.
fn forgotten(f: Forgotten) -> Value {
    match f {
        Forgotten::Exchanges(n) => json!({"exchanges": n}),
        Forgotten::Facts(n) => json!({"facts": n}),
        Forgotten::Topic(t) => json!({"exchanges": t.exchanges, "memory_keys": t.memory_keys, "topic": t.topic}),
    }
}

/// A memory search hit as the client reads it: its kind beside its fields.
fn memory_hit(h: MemoryHit) -> Value {
    let (kind, mut v) = match h {
        MemoryHit::Exchange(x) => ("exchange", json!(x)),
        MemoryHit::Fact(x) => ("fact", json!(x)),
        MemoryHit::Gist(x) => ("gist", json!(x)),
        MemoryHit::UserTrait(x) => ("trait", json!(x)),
    };
    v["kind"] = json!(kind);
    v
}

/// A queued job as `GET /jobs` shows it, its payload as the JSON it is.
fn job(j: Job) -> Value {
    json!({
        "id": j.id, "queue": j.queue, "ref": j.reference, "payload": serde_json::from_str::<Value>(&j.payload).unwrap_or(Value::Null),
        "status": j.status, "attempts": j.attempts, "created_ms": j.created_ms, "updated_ms": j.updated_ms,
    })
}

pub fn stage_error(e: StageError) -> spin_sdk::http::Response<String> {
    ApiError::from_stage(e.code.name(), e.message).into_response()
}

/// A typed stage's answer, shaped for the client, as a 200 JSON body, or
/// the stage's error.
pub fn stage_value<T: serde::Serialize>(r: Result<T, StageError>) -> spin_sdk::http::Response<String> {
    stage_json(r.and_then(|v| serde_json::to_string(&v).map_err(|e| StageError::internal(format!("an answer: {e}")))))
}

/// A stage's JSON answer as a 200, or its error.
pub fn stage_json(r: Result<String, StageError>) -> spin_sdk::http::Response<String> {
    match r {
        Ok(body) => spin_sdk::http::Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .header("content-length", body.len())
            .body(body)
            .expect("static parts"),
        Err(e) => stage_error(e),
    }
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

/// How long `/health` waits for each dependency: the whole answer comes
/// within 2 s even when one of them never answers.
const HEALTH_DEADLINE_MS: u32 = 1_500;

/// `GET /health`: open to all. Checks the SQL and key-value stores and, when
/// one is configured, the model endpoint, side by side; answers 503 when a
/// store is down (the model is not required: every path has a labelled
/// fallback, so a silent model makes the app `degraded`, not down; so does
/// a check of an in-process store file that ran out of time under load,
/// `mneme_store::health`). It names
/// each dependency's kind and whether it answered, and no other
/// configuration.
async fn health() -> spin_sdk::http::Response<String> {
    use mneme::llm::llm;
    let model = async {
        // Side by side, so a silent endpoint costs the deadline once (with
        // `llm_model` empty, both ask it).
        let (status, probe) = futures::join!(llm::status(HEALTH_DEADLINE_MS), llm::probe(HEALTH_DEADLINE_MS));
        if !status.configured {
            return json!({"configured": false});
        }
        match probe {
            Ok(ms) => json!({"configured": true, "ok": true, "ms": ms}),
            // The `spin` backend has no endpoint of its own to ask.
            Err(e) if e.code == mneme_types::ErrorCode::ModelUnavailable => json!({"configured": true, "ok": null}),
            Err(e) => json!({"configured": true, "ok": false, "failure": e.code.name()}),
        }
    };
    let (mut h, model) = futures::join!(store::health(HEALTH_DEADLINE_MS), model);
    // A readiness probe is a deployment's first request, which puts the
    // schema in place (D-F28), once the store is known to answer.
    if h.sql.failure.is_none()
        && h.migration_level < h.migration_latest
        && mneme_entry::schema::ensure().await.is_ok()
        && mneme_entry::schema::ready()
    {
        h.migration_level = h.migration_latest;
    }
    let dep = |d: &store::Dependency| json!({"kind": d.kind, "ok": d.failure.is_none(), "failure": d.failure, "ms": d.took_us as f64 / 1000.0});
    // An in-process file cannot go silent as a server can: a check that did
    // not finish in time there means the runner is busy (a flood), not that
    // the store is down.
    let embedded = mneme_http::health::embedded(&h.sql.kind, &h.kv.kind);
    let down = |d: &store::Dependency| mneme_http::health::is_down(&d.kind, d.failure.as_deref(), embedded);
    let stores_up = !down(&h.sql) && !down(&h.kv);
    let busy = h.sql.failure.is_some() || h.kv.failure.is_some();
    let status = if !stores_up {
        "unavailable"
    } else if h.migration_level < h.migration_latest && h.sql.failure.is_none() {
        "migrations-pending"
    } else if model["ok"] == json!(false) || busy {
        "degraded"
    } else {
        "ok"
    };
    let mut body = json!({
        "status": status,
        "version": VERSION,
        "store": { "sql": h.sql.kind, "kv": h.kv.kind },
        "migrations": { "level": h.migration_level, "latest": h.migration_latest },
        "dependencies": { "sql": dep(&h.sql), "kv": dep(&h.kv), "model": model },
    });
    if stores_up {
        return json(StatusCode::OK, &body);
    }
    let down: Vec<&str> =
        [("SQL", &h.sql), ("key-value", &h.kv)].iter().filter(|(_, d)| down(d)).map(|(name, _)| *name).collect();
    body["error"] = json!({
        "code": "store-unavailable",
        "message": format!("the {} store is not answering", down.join(" and the ")),
    });
    json(StatusCode::SERVICE_UNAVAILABLE, &body)
}
