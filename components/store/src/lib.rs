//! The `store` stage component (`mneme:store/store`): applies migrations,
//! reports what `GET /health` shows about persistence, and records the
//! heartbeat of scheduled jobs. A thin adapter: the logic is in
//! `mneme-store` and `mneme-migrations`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/store"],
    world: "mneme:store/stage-store",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    generate_all,
});

use exports::mneme::store::store::{AppliedMigration, Guest, StoreHealth};
use mneme::types::types::StageError;
use mneme_store::{StoreError, Stores, Value, migrate};

struct Stage;

fn stage_error(e: StoreError) -> StageError {
    StageError { code: e.code.to_string(), message: e.message }
}

impl Guest for Stage {
    async fn health() -> Result<StoreHealth, StageError> {
        let stores = Stores::open().await.map_err(stage_error)?;
        let level = migrate::level(&stores.sql).await.map_err(stage_error)?;
        Ok(StoreHealth {
            sql_kind: stores.sql.kind().as_str().into(),
            kv_kind: stores.kv.kind().as_str().into(),
            migration_level: level,
            migration_latest: migrate::latest(&stores.sql),
        })
    }

    async fn migrate() -> Result<Vec<AppliedMigration>, StageError> {
        let stores = Stores::open().await.map_err(stage_error)?;
        let applied = migrate::migrate(&stores.sql, mneme_store::kv::now_ms()).await.map_err(stage_error)?;
        Ok(applied.into_iter().map(|(version, name)| AppliedMigration { version, name }).collect())
    }

    async fn heartbeat(job: String, at_ms: u64) -> Result<u64, StageError> {
        let stores = Stores::open().await.map_err(stage_error)?;
        let sql = &stores.sql;
        sql.execute(
            "INSERT INTO job_heartbeats (job, at_ms) VALUES ($1, $2)",
            &[job.as_str().into(), Value::Int(at_ms as i64)],
        )
        .await
        .map_err(stage_error)?;
        let rows = sql
            .query("SELECT COUNT(*) AS n FROM job_heartbeats WHERE job = $1", &[job.into()])
            .await
            .map_err(stage_error)?;
        let n = rows.first().map(|r| r.i64("n")).transpose().map_err(stage_error)?.unwrap_or(0);
        stores.kv.set("heartbeat:last", at_ms.to_string().as_bytes(), None).await.map_err(stage_error)?;
        Ok(n as u64)
    }
}

export!(Stage);
