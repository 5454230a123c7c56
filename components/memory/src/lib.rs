//! The `memory` stage (`mneme:memory`): what the principal sees and controls
//! of their memory. A thin adapter over `mneme_pipeline::memory`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/memory"],
    world: "mneme:memory/stage-memory",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
    },
    generate_all,
});

use exports::mneme::memory::memory::Guest;
use mneme_pipeline::{Fail, run};
use mneme_types::StageError;

struct Stage;

fn err(f: Fail) -> StageError {
    f.into()
}

use mneme_pipeline::memory as m;

#[derive(serde::Deserialize)]
struct Now {
    now_ms: u64,
}

impl Guest for Stage {
    async fn recent(request: String) -> Result<String, StageError> {
        run(&request, m::recent).await.map_err(err)
    }

    async fn search(request: String) -> Result<String, StageError> {
        run(&request, m::search).await.map_err(err)
    }

    async fn forget(request: String) -> Result<String, StageError> {
        run(&request, m::forget).await.map_err(err)
    }

    async fn export_all(request: String) -> Result<String, StageError> {
        run(&request, async |n: Now| m::export(n.now_ms).await).await.map_err(err)
    }

    async fn delete_all(request: String) -> Result<String, StageError> {
        run(&request, async |_: serde_json::Value| m::delete_all().await).await.map_err(err)
    }

    async fn latest_event_id() -> Result<i64, StageError> {
        m::latest_event_id().await.map_err(err)
    }

    async fn events_after(request: String) -> Result<String, StageError> {
        run(&request, m::events_after).await.map_err(err)
    }

    async fn publish(request: String) -> Result<String, StageError> {
        run(&request, m::publish).await.map_err(err)
    }

    async fn fire_reminders(request: String) -> Result<String, StageError> {
        run(&request, async |n: Now| m::fire_reminders(n.now_ms).await).await.map_err(err)
    }

    async fn jobs(request: String) -> Result<String, StageError> {
        run(&request, m::jobs).await.map_err(err)
    }
}

export!(Stage);
