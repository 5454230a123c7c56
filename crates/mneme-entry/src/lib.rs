//! What Mneme's entry components (`http-api`, `tick`, `mcp`) share.
//!
//! Both import stages and drive them the same way: the ACT loop that
//! `/chat`, the persistent-task worker and the tool worker run, the
//! decomposition of a goal into steps, a model call's messages and its
//! wait. Each lived twice, once per entry, because each entry generated its
//! own bindings and so had its own copy of every stage's Rust types. The
//! bindings of every stage an entry may import are generated here, once
//! (world `mneme:entries/stages`); an entry's own world maps its imports
//! onto them with wit-bindgen's `with`, so code here and code in an entry
//! pass the same types. A component imports only the stages its code
//! calls.

spin_sdk::wit_bindgen::generate!({
    path: [
        "../../wit/types", "../../wit/store", "../../wit/llm", "../../wit/context", "../../wit/triage",
        "../../wit/router", "../../wit/act", "../../wit/commit", "../../wit/memory", "../../wit/knowledge", "../../wit/rx",
        "../../wit/tasks", "../../wit/consolidate", "../../wit/drift", "../../wit/entries",
    ],
    world: "mneme:entries/stages",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/conversation@0.1.0": mneme_types::conversation,
        "mneme:types/tasks@0.1.0": mneme_types::tasks,
        "mneme:types/routing@0.1.0": mneme_types::routing,
        "mneme:types/memory@0.1.0": mneme_types::memory,
        "mneme:types/knowledge@0.1.0": mneme_types::knowledge,
        "mneme:types/rx@0.1.0": mneme_types::rx,
        "mneme:types/consolidation@0.1.0": mneme_types::consolidation,
        "mneme:types/drift@0.1.0": mneme_types::drift,
    },
    generate_all,
    pub_export_macro: false,
});

pub mod act;
pub mod body;
pub mod clock;
pub mod model;
pub mod schema;
pub mod tasks;
pub mod tool_job;

pub use mneme_types::{ErrorCode, StageError};

/// The scheduled jobs `POST /tick/{job}` runs, in the order `GET /status`
/// lists them.
pub const JOBS: &[&str] = &[
    "migrate",
    "heartbeat",
    "reminders",
    "knowledge",
    "index",
    "consolidate",
    "tasks",
    "tools",
    "drift",
    "regulate",
    "reflect",
];

/// An `internal` stage error: a fault in Mneme itself.
pub fn internal(message: impl Into<String>) -> StageError {
    StageError::internal(message)
}

/// A stage's JSON answer, typed; a shape the entry did not expect is an
/// internal error.
pub fn decode<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StageError> {
    serde_json::from_str(s).map_err(|e| internal(format!("stage answer: {e}")))
}
