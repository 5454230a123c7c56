//! `/mcp`: Mneme over the Model Context Protocol (#51), Streamable HTTP,
//! one JSON-RPC message a POST, answered with one JSON body. No session
//! is kept: the 2026-07-28 revision carries everything on each request, and
//! the handshake revisions' `initialize` is answered without minting one,
//! so any instance of this component serves any request.
//!
//! The protocol's rules (which revision, its headers, its errors) are
//! `mneme-mcp`'s, with no I/O; this component checks the API key and the
//! `Origin`, reads the body within its cap, and runs each tool or resource
//! read against the stages it imports, as the HTTP API's handlers do.

spin_sdk::wit_bindgen::generate!({
    path: [
        "../../wit/types", "../../wit/store", "../../wit/llm", "../../wit/context", "../../wit/triage",
        "../../wit/router", "../../wit/act", "../../wit/commit", "../../wit/memory", "../../wit/knowledge", "../../wit/rx",
        "../../wit/tasks", "../../wit/consolidate", "../../wit/drift", "../../wit/entries",
    ],
    world: "mneme:entries/mcp",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/conversation@0.1.0": mneme_types::conversation,
        "mneme:types/tasks@0.1.0": mneme_types::tasks,
        "mneme:types/memory@0.1.0": mneme_types::memory,
        "mneme:types/knowledge@0.1.0": mneme_types::knowledge,
        "mneme:types/rx@0.1.0": mneme_types::rx,
        "mneme:store/store@0.1.0": mneme_entry::mneme::store::store,
        "mneme:llm/llm@0.1.0": mneme_entry::mneme::llm::llm,
        "mneme:act/act@0.1.0": mneme_entry::mneme::act::act,
        "mneme:memory/memory@0.1.0": mneme_entry::mneme::memory::memory,
        "mneme:knowledge/knowledge@0.1.0": mneme_entry::mneme::knowledge::knowledge,
        "mneme:rx/rx@0.1.0": mneme_entry::mneme::rx::rx,
        "mneme:tasks/tasks@0.1.0": mneme_entry::mneme::tasks::tasks,
    },
});

mod resources;
mod tools;

use mneme_entry::mneme;

use mneme_http::ApiError;
use mneme_mcp::{Era, Failure, Headers, Incoming, Server, code};
use serde_json::{Value, json};
use spin_sdk::http::{Method, Request, StatusCode};
use spin_sdk::http_service;

/// The most one message may be: a transcript of 400,000 characters, most
/// of them more than one byte, in JSON.
const MAX_BODY: usize = 2 * 1024 * 1024;

/// How long a client may cache a list or a read (2026-07-28 `ttlMs`): the
/// principal's data changes as they write, so not long.
const TTL_MS: u64 = 5_000;

const SERVER: Server<'static> = Server {
    name: "mneme",
    version: env!("CARGO_PKG_VERSION"),
    instructions: "Mneme is the principal's personal memory. Use recall for what was said in conversation, \
                   search for stored notes and documents, retrieve_knowledge for the principal's own standards \
                   and decisions before advising them, and remember or ingest_transcript to keep something new. \
                   Recommendations, reminders and background tasks are the principal's: change them only when \
                   the principal asks.",
};

pub type Reply = Result<spin_sdk::wasip3::http::types::Response, spin_sdk::wasip3::http::types::ErrorCode>;

fn reply(r: spin_sdk::http::Response<String>) -> Reply {
    spin_sdk::http::IntoResponse::into_response(r)
}

fn json_reply(status: u16, v: &Value) -> Reply {
    reply(mneme_http::json(StatusCode::from_u16(status).unwrap_or(StatusCode::OK), v))
}

/// A JSON-RPC error answer, with its HTTP status.
fn failure(f: Failure) -> Reply {
    json_reply(f.status, &f.body())
}

/// The 401 the authorization spec asks for: the scheme in
/// `WWW-Authenticate`, and the API's own JSON error.
fn unauthorized(e: ApiError) -> Reply {
    let mut r = e.into_response();
    r.headers_mut().insert("www-authenticate", http::HeaderValue::from_static("Bearer realm=\"mneme\""));
    reply(r)
}

#[http_service]
async fn handle(req: Request) -> Reply {
    if let Err(e) = mneme_http::refuse_declared_body(req.headers()) {
        mneme_entry::body::drain_refused(req).await;
        return reply(e.into_response());
    }
    // DNS rebinding: a browser page on another origin may not reach the
    // principal's memory, whatever else it sends.
    let origin = req.headers().get("origin").map(|o| o.to_str().unwrap_or("\u{0}").to_string());
    let listed = spin_sdk::variables::get("mcp_allowed_origins").await.unwrap_or_default();
    let allowed: Vec<&str> = listed.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if !mneme_mcp::origin_allowed(origin.as_deref(), &allowed) {
        return reply(
            ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden-origin",
                "this Origin may not use /mcp: list it in the Spin variable `mcp_allowed_origins`",
            )
            .into_response(),
        );
    }
    let key = spin_sdk::variables::get("api_key").await.ok();
    if let Err(e) = mneme_http::require_bearer(req.headers(), key.as_deref(), "api_key") {
        return if e.status == StatusCode::UNAUTHORIZED { unauthorized(e) } else { reply(e.into_response()) };
    }
    // Streamable HTTP's GET (a server stream) and DELETE (ending a session)
    // have nothing to serve here: no stream is offered and no session kept.
    if *req.method() != Method::POST {
        return reply(ApiError::method_not_allowed("POST").into_response());
    }
    let now = mneme_entry::clock::request_ms(req.headers()).await;
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let (version, method, name) = (header("mcp-protocol-version"), header("mcp-method"), header("mcp-name"));
    let bytes = match mneme_entry::body::read(req, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => return reply(e.into_response()),
    };
    let headers = Headers { protocol_version: version.as_deref(), method: method.as_deref(), name: name.as_deref() };
    match mneme_mcp::read(headers, &bytes) {
        Err(f) => failure(f),
        Ok(Incoming::Accepted) => {
            reply(spin_sdk::http::Response::builder().status(202).body(String::new()).expect("static parts"))
        }
        Ok(Incoming::Request { id, method, params, era }) => serve(era, id, &method, &params, now).await,
    }
}

/// One request's answer.
async fn serve(era: Era, id: Value, method: &str, params: &Value, now: u64) -> Reply {
    if !mneme_mcp::known(era, method) {
        let f = Failure::new(id, code::METHOD_NOT_FOUND, format!("no method `{method}` under {}", era.version()));
        return failure(f);
    }
    let result = match method {
        "initialize" => Ok(mneme_mcp::initialize(era.version(), SERVER)),
        "ping" => Ok(json!({})),
        "server/discover" => Ok(mneme_mcp::discover(SERVER)),
        "tools/list" => Ok(json!({"tools": mneme_mcp::tools::catalogue()})),
        "tools/call" => tools::call(&id, params, now).await,
        "resources/list" => resources::list(era, &id, params).await,
        "resources/templates/list" => Ok(json!({"resourceTemplates": resources::templates()})),
        "resources/read" => resources::read(era, &id, params).await,
        _ => unreachable!("`known` lists every method served"),
    };
    match result {
        Ok(v) => json_reply(200, &mneme_mcp::respond(era, id, method, v, SERVER, TTL_MS)),
        Err(Outcome::Protocol(f)) => failure(f),
        Err(Outcome::Unavailable(e)) => reply(e.into_response()),
    }
}

/// Why a request got no result.
pub enum Outcome {
    /// A protocol error (an unknown tool or resource, bad params).
    Protocol(Failure),
    /// A service the app depends on is down or not configured: the API's
    /// own 503, so a client retries as it would on any endpoint.
    Unavailable(ApiError),
}

/// A stage's error: the caller's fault or the deed's refusal becomes a
/// tool error the model reads; a service that is down is the API's 503;
/// a fault in Mneme is the API's 500.
pub fn stage_failure(e: mneme_types::StageError) -> Result<String, Outcome> {
    let api = ApiError::from_stage(e.code.name(), e.message.clone());
    if api.status.is_server_error() && api.status != StatusCode::BAD_GATEWAY {
        Err(Outcome::Unavailable(api))
    } else {
        Ok(format!("{} ({})", e.message, e.code.name()))
    }
}
