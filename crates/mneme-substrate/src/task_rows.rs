//! A new persistent task's row. The tasks stage (`POST /tasks`), the ACT
//! loop's `persistent_task` skill and the drift engine's `task` action all
//! create tasks, under the same two checks
//! ([`mneme_background::tasks::refusal`]).

use mneme_background::cycle::Progress;
use mneme_background::tasks::{MAX_AGE_MS, Refusal, refusal};
use mneme_store::{Sql, Value};

use crate::{Result, json_text, random_hex};

/// States that count against `MAX_ACTIVE` and for duplicate goals.
pub const OPEN: &str = "('proposed', 'accepted', 'in_progress')";

/// States a task cannot leave.
pub const FINISHED: &str = "('completed', 'cancelled', 'expired')";

/// Cancels a task that is not finished, and takes its claim and lease
/// away, so a cycle holding it finds its claim gone and writes nothing more.
/// The tasks stage (`DELETE /tasks/{id}`) and the ACT loop's
/// `persistent_task` skill both cancel through here. The rows changed: 0
/// when there is no such task or it was finished.
pub async fn cancel(sql: &Sql, id: &str, now: u64) -> Result<u64> {
    Ok(sql
        .execute(
            &format!(
                "UPDATE persistent_tasks SET status = 'cancelled', claim = NULL, lease_until_ms = 0, updated_ms = $2 \
             WHERE id = $1 AND status NOT IN {FINISHED}"
            ),
            &[id.into(), Value::Int(now as i64)],
        )
        .await?)
}

/// What [`insert`] did.
pub enum Inserted {
    Created(String),
    Refused(Refusal),
}

/// Inserts an accepted task unless it is refused; call inside a
/// transaction so two creations cannot both pass the checks.
pub async fn insert(
    sql: &Sql,
    goal: &str,
    priority: i64,
    origin: &str,
    progress: &Progress,
    now: u64,
) -> Result<Inserted> {
    if let Some(refused) = refused(sql, goal).await? {
        return Ok(Inserted::Refused(refused));
    }
    let id = format!("pt-{}", random_hex(6));
    sql.execute(
        "INSERT INTO persistent_tasks (id, goal, status, priority, origin, coverage, progress, created_ms, updated_ms, expires_ms, cycles, lease_until_ms) \
         VALUES ($1, $2, 'accepted', $3, $4, $5, $6, $7, $7, $8, 0, 0)",
        &[
            id.as_str().into(),
            goal.into(),
            Value::Int(priority),
            origin.into(),
            progress.coverage().into(),
            json_text(progress).into(),
            Value::Int(now as i64),
            Value::Int(now as i64 + MAX_AGE_MS),
        ],
    )
    .await?;
    Ok(Inserted::Created(id))
}

/// Whether a new goal would be refused, as the open tasks stand.
pub async fn refused(sql: &Sql, goal: &str) -> Result<Option<Refusal>> {
    let rows = sql.query(&format!("SELECT id, goal FROM persistent_tasks WHERE status IN {OPEN}"), &[]).await?;
    let open: Vec<(String, String)> =
        rows.iter().map(|r| Ok((r.text("id")?, r.text("goal")?))).collect::<Result<_>>()?;
    Ok(refusal(&open, goal))
}

/// Tasks that count against `MAX_ACTIVE`.
pub async fn open_count(sql: &Sql) -> Result<i64> {
    let rows = sql.query(&format!("SELECT count(*) AS n FROM persistent_tasks WHERE status IN {OPEN}"), &[]).await?;
    Ok(rows.first().map(|r| r.i64("n")).transpose()?.unwrap_or(0))
}
