//! The `memory` stage (`mneme:memory`): what the principal sees and controls
//! of their memory. [`read`] answers recent exchanges, search, the event log
//! and the job queue; [`privacy`] forgets and deletes; [`backup`] exports
//! and restores;
//! [`reminders`] fires the reminders that are due.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/memory"],
    world: "mneme:memory/stage-memory",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/memory@0.1.0": mneme_types::memory,
    },
    generate_all,
});

mod backup;
mod privacy;
mod read;
mod reminders;

use exports::mneme::memory::memory::Guest;
use mneme_types::StageError;
use mneme_types::memory::{
    Deleted, Event, ExportCursor, ExportPage, ForgetScope, Forgotten, ImportReport, Job, MemoryHit, RecentExchanges,
    RestoreMode,
};

struct Stage;

impl Guest for Stage {
    async fn recent(thread_id: Option<String>, limit: u32) -> Result<RecentExchanges, StageError> {
        Ok(read::recent(thread_id, limit).await?)
    }
    async fn search(query: String, limit: u32, now_ms: u64) -> Result<Vec<MemoryHit>, StageError> {
        Ok(read::search(&query, limit, now_ms).await?)
    }
    async fn forget(scope: ForgetScope) -> Result<Forgotten, StageError> {
        Ok(privacy::forget(scope).await?)
    }
    async fn export_from(cursor: ExportCursor, now_ms: u64) -> Result<ExportPage, StageError> {
        Ok(backup::export_page(cursor, now_ms).await?)
    }
    async fn import_part(document: String, mode: RestoreMode, now_ms: u64) -> Result<ImportReport, StageError> {
        Ok(backup::import_part(document, mode, now_ms).await?)
    }
    async fn delete_all() -> Result<Deleted, StageError> {
        Ok(privacy::delete_all().await?)
    }
    async fn events_after(after_id: Option<i64>, since_ms: u64, limit: u32) -> Result<Vec<Event>, StageError> {
        Ok(read::events_after(after_id, since_ms, limit).await?)
    }
    async fn latest_event_id() -> Result<i64, StageError> {
        Ok(read::latest_event_id().await?)
    }
    async fn fire_reminders(now_ms: u64) -> Result<u32, StageError> {
        Ok(reminders::fire(now_ms).await?)
    }
    async fn jobs(queue: Option<String>, status: Option<String>, limit: u32) -> Result<Vec<Job>, StageError> {
        Ok(read::jobs(queue, status, limit).await?)
    }

    async fn queue_depths(queues: Vec<String>) -> Result<Vec<(String, u64)>, StageError> {
        Ok(read::queue_depths(&queues).await?)
    }
}

export!(Stage);
