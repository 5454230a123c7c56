//! The `rx` stage (`mneme:rx`): recommendations (000 seed). [`doors`] holds
//! the doors and observations, [`run`] the store-side halves of a run
//! (steps 0.5–5 and 8–10), [`recs`] the rec store and the vault's
//! artifacts. The rules are `mneme-rx`'s.
//!
//! A run of `POST /rx/{door}` is `begin` (the door's lock, then steps
//! 0.5–5; a dedup writes its confirmation and ends the run here), then the
//! entry's steps 6–7 (the vault search and the composing model), then
//! `finish` (steps 8–10, then the lock is released).

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/rx"],
    world: "mneme:rx/stage-rx",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/rx@0.1.0": mneme_types::rx,
    },
    generate_all,
});

mod doors;
mod recs;
mod run;

use exports::mneme::rx::rx::Guest;
use mneme_types::rx::{
    ArtifactView, Disposition, DoorHistory, PushedRec, RecArtifact, RecStatus, RecView, RunDraft, RunResult, RunStart,
};
use mneme_types::{StageError, VaultFile};

struct Stage;

impl Guest for Stage {
    async fn doors() -> Result<Vec<String>, StageError> {
        Ok(doors::doors().await?)
    }
    async fn put_door(name: String, config: String, now_ms: i64) -> Result<String, StageError> {
        Ok(doors::put_door(&name, &config, now_ms).await?)
    }
    async fn observe(door: String, items: Vec<String>, now_ms: i64) -> Result<Vec<String>, StageError> {
        Ok(doors::observe(&door, &items, now_ms).await?)
    }
    async fn begin(door: String, now_ms: i64) -> Result<RunStart, StageError> {
        Ok(run::begin(&door, now_ms).await?)
    }
    async fn finish(draft: RunDraft) -> Result<RunResult, StageError> {
        Ok(run::finish(draft).await?)
    }
    async fn release(door: String, claim: String) -> Result<(), StageError> {
        Ok(run::release(&door, &claim).await?)
    }
    async fn list_recs(
        door: Option<String>,
        status: Option<RecStatus>,
        limit: u32,
        now_ms: i64,
    ) -> Result<Vec<RecView>, StageError> {
        Ok(recs::list_recs(door, status.map(Into::into), limit, now_ms).await?)
    }
    async fn get_rec(id: String, now_ms: i64) -> Result<RecView, StageError> {
        Ok(recs::get_rec(&id, now_ms).await?)
    }
    async fn rec_markdown(id: String) -> Result<RecArtifact, StageError> {
        Ok(recs::rec_markdown(&id).await?)
    }
    async fn ingest_rec(rec: PushedRec) -> Result<String, StageError> {
        Ok(recs::ingest_rec(rec).await?)
    }
    async fn dispose(
        id: String,
        disposition: Disposition,
        subjective_fit: Option<i64>,
        outcome_note: Option<String>,
        now_ms: i64,
    ) -> Result<RecView, StageError> {
        let d = recs::Disposed {
            disposition: disposition.into(),
            subjective_fit_1_5: subjective_fit,
            outcome_note,
            now_ms,
        };
        Ok(recs::dispose(&id, d).await?)
    }
    async fn snooze(id: String, days: i64, now_ms: i64) -> Result<RecView, StageError> {
        Ok(recs::snooze(&id, days, now_ms).await?)
    }
    async fn vault() -> Result<Vec<VaultFile>, StageError> {
        Ok(recs::vault().await?)
    }
    async fn history(door: String, days: u32, now_ms: i64) -> Result<DoorHistory, StageError> {
        Ok(run::history(&door, days, now_ms).await?)
    }
    async fn artifacts(door: String) -> Result<Vec<ArtifactView>, StageError> {
        Ok(recs::artifacts(&door).await?)
    }
}

export!(Stage);
