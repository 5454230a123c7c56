//! The `store` stage component (`mneme:store/store`): applies migrations,
//! reports what `GET /health` shows about persistence, records the
//! heartbeat of scheduled jobs and each job's last run, and reads what
//! `GET /status` shows from the stores. A thin adapter: the logic is in
//! `mneme-store` and `mneme-migrations`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/store"],
    world: "mneme:store/stage-store",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
    },
    generate_all,
});

use exports::mneme::store::store::{
    AppStatus, AppliedMigration, Dependency, FallbackCount, Guest, JobRun, KeptFallback, ModelFallback, ModelUse,
    ModelUseKey, ModelUseTotal, StoreHealth,
};
use mneme_store::{StoreError, Stores, Value, migrate};
use mneme_types::StageError;

struct Stage;

/// `future`'s outcome and how long it took, in microseconds.
async fn timed<T>(future: impl std::future::Future<Output = T>) -> (T, u64) {
    let started = std::time::Instant::now();
    let out = future.await;
    (out, started.elapsed().as_micros() as u64)
}

/// What a health check says of a failure on an open endpoint: `timeout`, or
/// the store's error code; the detail goes to the log, not the answer.
fn failure(e: StoreError) -> String {
    eprintln!("health: {}: {}", e.code, e.message);
    if e.code == "store-unavailable" && e.message.contains("did not answer within") {
        "timeout".into()
    } else {
        e.code.into()
    }
}

fn stage_error(e: StoreError) -> StageError {
    StageError::new(mneme_types::ErrorCode::from_name(e.code), e.message)
}

impl Guest for Stage {
    async fn health(deadline_ms: u32) -> StoreHealth {
        let limit = std::time::Duration::from_millis(u64::from(deadline_ms.max(1)));
        let sql_check = timed(mneme_store::sql::within(limit, "the SQL store", async {
            let sql = mneme_store::open_sql_for_checks().await?;
            let level = migrate::level(&sql).await?;
            Ok((level, migrate::latest(&sql)))
        }));
        let kv_check = timed(mneme_store::sql::within(limit, "the key-value store", async {
            let kv = mneme_store::open_kv().await?;
            kv.get("health:probe").await?;
            Ok(())
        }));
        let ((sql, sql_us), (kv, kv_us)) = futures::join!(sql_check, kv_check);
        let kinds = mneme_store::configured_kinds().await;
        let (migration_level, migration_latest) = match &sql {
            Ok(levels) => *levels,
            Err(_) => (0, migrate::shipped_latest(kinds.0)),
        };
        StoreHealth {
            sql: Dependency { kind: kinds.0.as_str().into(), failure: sql.err().map(failure), took_us: sql_us },
            kv: Dependency { kind: kinds.1.as_str().into(), failure: kv.err().map(failure), took_us: kv_us },
            migration_level,
            migration_latest,
        }
    }

    async fn migrate() -> Result<Vec<AppliedMigration>, StageError> {
        let stores = Stores::open().await.map_err(stage_error)?;
        let applied = migrate::migrate(&stores.sql, mneme_time::clock::system_ms()).await.map_err(stage_error)?;
        Ok(applied.into_iter().map(|(version, name)| AppliedMigration { version, name }).collect())
    }

    async fn ensure_migrated() -> Result<Vec<AppliedMigration>, StageError> {
        let sql = mneme_store::open_sql().await.map_err(stage_error)?;
        if migrate::level(&sql).await.map_err(stage_error)? >= migrate::latest(&sql) {
            return Ok(Vec::new());
        }
        Self::migrate().await
    }

    async fn count_failures(key: String, add: u32, window_ms: u64, now_ms: u64) -> Result<(u32, u64), StageError> {
        let sql = mneme_store::open_sql().await.map_err(stage_error)?;
        let now = Value::Int(now_ms as i64);
        let rows = if add == 0 {
            sql.query(
                "SELECT failures, window_end_ms FROM auth_failures WHERE client = $1 AND window_end_ms > $2",
                &[key.as_str().into(), now],
            )
            .await
        } else {
            // One statement, so concurrent failures are all counted; a row
            // whose window ended starts a new one.
            sql.query(
                "INSERT INTO auth_failures (client, failures, window_end_ms) VALUES ($1, $2, $3) \
                 ON CONFLICT (client) DO UPDATE SET \
                 failures = CASE WHEN auth_failures.window_end_ms <= $4 THEN excluded.failures \
                                 ELSE auth_failures.failures + excluded.failures END, \
                 window_end_ms = CASE WHEN auth_failures.window_end_ms <= $4 THEN excluded.window_end_ms \
                                      ELSE auth_failures.window_end_ms END \
                 RETURNING failures, window_end_ms",
                &[key.as_str().into(), Value::Int(i64::from(add)), Value::Int((now_ms + window_ms) as i64), now],
            )
            .await
        }
        .map_err(stage_error)?;
        let Some(row) = rows.first() else { return Ok((0, 0)) };
        let count = row.i64("failures").map_err(stage_error)?;
        let end = row.i64("window_end_ms").map_err(stage_error)?;
        Ok((count.clamp(0, i64::from(u32::MAX)) as u32, end.max(0) as u64))
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

    async fn record_run(run: JobRun) -> Result<(), StageError> {
        let sql = mneme_store::open_sql().await.map_err(stage_error)?;
        let outcome: String = run.outcome.chars().take(300).collect();
        let at = Value::Int(run.at_ms as i64);
        let last_ok = if run.ok { at.clone() } else { Value::Null };
        // A run older than the one kept (a slow tick that ended late) writes
        // nothing; nor does a run that ends as the last one did, within a
        // minute of it: most jobs poll every 2–15 s with nothing to do, and a
        // write (with its sync) on every idle tick cost 16% of an idle
        // app's CPU (BENCHMARKS, "Job runs for the status screen").
        sql.execute(
            "INSERT INTO job_runs (job, at_ms, took_ms, ok, outcome, last_ok_ms) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (job) DO UPDATE SET at_ms = excluded.at_ms, took_ms = excluded.took_ms, ok = excluded.ok, \
             outcome = excluded.outcome, last_ok_ms = COALESCE(excluded.last_ok_ms, job_runs.last_ok_ms) \
             WHERE excluded.at_ms >= job_runs.at_ms AND (job_runs.ok <> excluded.ok \
                OR job_runs.outcome <> excluded.outcome OR excluded.at_ms >= job_runs.at_ms + 60000)",
            &[
                run.job.as_str().into(),
                at,
                Value::Int(run.took_ms as i64),
                Value::Int(i64::from(run.ok)),
                outcome.as_str().into(),
                last_ok,
            ],
        )
        .await
        .map_err(stage_error)?;
        Ok(())
    }

    async fn record_model_use(
        uses: Vec<ModelUse>,
        fallbacks: Vec<ModelFallback>,
        now_ms: u64,
    ) -> Result<(), StageError> {
        if uses.is_empty() && fallbacks.is_empty() {
            return Ok(());
        }
        let sql = mneme_store::open_sql().await.map_err(stage_error)?;
        let day = mneme_time::calendar::utc_date_before(now_ms, 0);
        sql.transaction(async |tx| {
            for u in &uses {
                let key = match &u.key {
                    ModelUseKey::Path(p) => p.as_str().to_string(),
                    ModelUseKey::Message(mode) => format!("message:{mode}"),
                };
                let n = |v: u64| Value::Int(v.min(i64::MAX as u64) as i64);
                tx.execute(
                    "INSERT INTO model_use (day, path, units, calls, answered, retries, fallbacks, prompt_tokens, \
                     cached_tokens, completion_tokens, wait_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                     ON CONFLICT (day, path) DO UPDATE SET units = model_use.units + excluded.units, \
                     calls = model_use.calls + excluded.calls, answered = model_use.answered + excluded.answered, \
                     retries = model_use.retries + excluded.retries, \
                     fallbacks = model_use.fallbacks + excluded.fallbacks, \
                     prompt_tokens = model_use.prompt_tokens + excluded.prompt_tokens, \
                     cached_tokens = model_use.cached_tokens + excluded.cached_tokens, \
                     completion_tokens = model_use.completion_tokens + excluded.completion_tokens, \
                     wait_ms = model_use.wait_ms + excluded.wait_ms",
                    &[
                        day.as_str().into(),
                        key.as_str().into(),
                        n(u64::from(u.units)),
                        n(u64::from(u.calls)),
                        n(u64::from(u.answered)),
                        n(u64::from(u.retries)),
                        n(u64::from(u.fallbacks)),
                        n(u.prompt_tokens),
                        n(u.cached_tokens),
                        n(u.completion_tokens),
                        n(u.wait_ms),
                    ],
                )
                .await?;
            }
            for f in &fallbacks {
                let detail: String = f.detail.chars().take(300).collect();
                let reason: String = f.reason.chars().take(60).collect();
                tx.execute(
                    "INSERT INTO model_fallbacks (at_ms, path, reason, detail) VALUES ($1, $2, $3, $4)",
                    &[
                        Value::Int(f.at_ms.min(i64::MAX as u64) as i64),
                        f.path.as_str().into(),
                        reason.as_str().into(),
                        detail.as_str().into(),
                    ],
                )
                .await?;
            }
            if !fallbacks.is_empty() {
                tx.execute(
                    "DELETE FROM model_fallbacks WHERE id <= (SELECT MAX(id) FROM model_fallbacks) - $1",
                    &[Value::Int(KEPT_FALLBACKS)],
                )
                .await?;
            }
            Ok(())
        })
        .await
        .map_err(stage_error)
    }

    async fn status(model_since: String) -> Result<AppStatus, StageError> {
        let sql = mneme_store::open_sql().await.map_err(stage_error)?;
        let runs = sql
            .query("SELECT job, at_ms, took_ms, ok, outcome, last_ok_ms FROM job_runs ORDER BY job", &[])
            .await
            .map_err(stage_error)?
            .iter()
            .map(|r| {
                Ok(JobRun {
                    job: r.text("job")?,
                    at_ms: r.i64("at_ms")?.max(0) as u64,
                    took_ms: r.i64("took_ms")?.max(0) as u64,
                    ok: r.i64("ok")? != 0,
                    outcome: r.text("outcome")?,
                    last_ok_ms: r.opt_i64("last_ok_ms")?.map(|v| v.max(0) as u64),
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()
            .map_err(stage_error)?;
        let queued = sql
            .query("SELECT COUNT(*) AS n FROM knowledge_jobs WHERE status = 'queued'", &[])
            .await
            .map_err(stage_error)?;
        let ingest_queued = queued.first().map(|r| r.i64("n")).transpose().map_err(stage_error)?.unwrap_or(0);
        let last = sql
            .query(
                "SELECT created_ms FROM exchanges WHERE reply_source = 'model' ORDER BY created_ms DESC LIMIT 1",
                &[],
            )
            .await
            .map_err(stage_error)?;
        let last_model_reply_ms =
            last.first().map(|r| r.i64("created_ms")).transpose().map_err(stage_error)?.map(|v| v.max(0) as u64);
        let model_use = sql
            .query(
                // PostgreSQL sums BIGINT as NUMERIC: cast back.
                "SELECT path, CAST(SUM(units) AS BIGINT) AS units, CAST(SUM(calls) AS BIGINT) AS calls, \
                 CAST(SUM(answered) AS BIGINT) AS answered, \
                 CAST(SUM(retries) AS BIGINT) AS retries, \
                 CAST(SUM(fallbacks) AS BIGINT) AS fallbacks, \
                 CAST(SUM(prompt_tokens) AS BIGINT) AS prompt_tokens, \
                 CAST(SUM(cached_tokens) AS BIGINT) AS cached_tokens, \
                 CAST(SUM(completion_tokens) AS BIGINT) AS completion_tokens, \
                 CAST(SUM(wait_ms) AS BIGINT) AS wait_ms \
                 FROM model_use WHERE day >= $1 GROUP BY path ORDER BY path",
                &[model_since.as_str().into()],
            )
            .await
            .map_err(stage_error)?
            .iter()
            .map(|r| {
                let n = |c: &str| r.i64(c).map(|v| v.max(0) as u64);
                Ok(ModelUseTotal {
                    key: r.text("path")?,
                    units: n("units")?,
                    calls: n("calls")?,
                    answered: n("answered")?,
                    retries: n("retries")?,
                    fallbacks: n("fallbacks")?,
                    prompt_tokens: n("prompt_tokens")?,
                    cached_tokens: n("cached_tokens")?,
                    completion_tokens: n("completion_tokens")?,
                    wait_ms: n("wait_ms")?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()
            .map_err(stage_error)?;
        let fallbacks = sql
            .query("SELECT path, at_ms, reason, detail FROM model_fallbacks ORDER BY id DESC LIMIT 10", &[])
            .await
            .map_err(stage_error)?
            .iter()
            .map(|r| {
                Ok(KeptFallback {
                    path: r.text("path")?,
                    at_ms: r.i64("at_ms")?.max(0) as u64,
                    reason: r.text("reason")?,
                    detail: r.text("detail")?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()
            .map_err(stage_error)?;
        let since_ms = mneme_time::calendar::parse_date(&model_since).map_or(0, |days| days * 86_400_000);
        let fallback_counts = sql
            .query(
                "SELECT path, reason, COUNT(*) AS n FROM model_fallbacks WHERE at_ms >= $1 \
                 GROUP BY path, reason ORDER BY path, reason",
                &[since_ms.into()],
            )
            .await
            .map_err(stage_error)?
            .iter()
            .map(|r| {
                Ok(FallbackCount { path: r.text("path")?, reason: r.text("reason")?, count: r.i64("n")?.max(0) as u64 })
            })
            .collect::<Result<Vec<_>, StoreError>>()
            .map_err(stage_error)?;
        Ok(AppStatus {
            runs,
            ingest_queued: ingest_queued.max(0) as u64,
            last_model_reply_ms,
            model_use,
            fallbacks,
            fallback_counts,
        })
    }
}

/// How many fallbacks `model_fallbacks` keeps.
const KEPT_FALLBACKS: i64 = 500;

export!(Stage);
