//! The public HTTP entry component. It authenticates, parses and routes;
//! every piece of work happens in the stage components it imports.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/store", "../../wit/entries"],
    world: "mneme:entries/http-api",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    generate_all,
});

use mneme::store::store;
use mneme_http::{ApiError, json};
use serde_json::json;
use spin_sdk::http::{IntoResponse, Method, Request, StatusCode};
use spin_sdk::http_service;

const VERSION: &str = env!("CARGO_PKG_VERSION");

#[http_service]
async fn handle(req: Request) -> impl IntoResponse {
    let path = req.uri().path().to_string();
    match (req.method(), path.as_str()) {
        (&Method::GET, "/health") => health().await,
        (_, "/health") => ApiError::method_not_allowed("GET").into_response(),
        _ => ApiError::not_found(format!("no endpoint at {path}")).into_response(),
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
