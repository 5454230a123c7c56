//! The background engines' rows in `engine_schedule`: when each may run
//! next, and the claim (with a lease) of the cycle running now. The task
//! worker, the drift engine and routing reflection share them; a crashed
//! cycle's lease ends and the next tick takes the engine over.

use mneme_store::{Sql, StoreError, Value};
use mneme_types::GivenBack;

/// Why a claim was refused: another cycle holds the engine, or it is not
/// due yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotDue {
    pub held: bool,
    pub next_ms: i64,
    pub lease_until_ms: i64,
}

impl NotDue {
    /// When the engine may run at the earliest.
    pub fn at_ms(&self) -> i64 {
        if self.held { self.lease_until_ms } else { self.next_ms }
    }
}

/// Claims `engine` for `lease_ms` if it is due at `now` and nobody holds it.
pub async fn claim(
    sql: &Sql,
    engine: &str,
    claim: &str,
    now: i64,
    lease_ms: i64,
) -> Result<Result<(), NotDue>, StoreError> {
    sql.execute(
        "INSERT INTO engine_schedule (engine, next_ms, lease_until_ms) VALUES ($1, 0, 0) ON CONFLICT (engine) DO NOTHING",
        &[engine.into()],
    )
    .await?;
    let held = sql
        .execute(
            "UPDATE engine_schedule SET claim = $2, lease_until_ms = $3 \
             WHERE engine = $1 AND next_ms <= $4 AND lease_until_ms < $4",
            &[engine.into(), claim.into(), Value::Int(now + lease_ms), Value::Int(now)],
        )
        .await?;
    if held == 1 {
        return Ok(Ok(()));
    }
    let rows =
        sql.query("SELECT next_ms, lease_until_ms FROM engine_schedule WHERE engine = $1", &[engine.into()]).await?;
    let (next_ms, lease_until_ms) = match rows.first() {
        Some(r) => (r.i64("next_ms")?, r.i64("lease_until_ms")?),
        None => (0, 0),
    };
    Ok(Err(NotDue { held: lease_until_ms >= now, next_ms, lease_until_ms }))
}

/// Renews the claim's lease; 0 when the claim is gone.
pub async fn renew(sql: &Sql, engine: &str, claim: &str, lease_until_ms: i64) -> Result<u64, StoreError> {
    sql.execute(
        "UPDATE engine_schedule SET lease_until_ms = $3 WHERE engine = $1 AND claim = $2",
        &[engine.into(), claim.into(), Value::Int(lease_until_ms)],
    )
    .await
}

/// Gives the engine back: due again at `next_ms` (or when it already was),
/// and, with `ran`, the time and outcome of the cycle recorded. 0 when the
/// claim is gone.
pub async fn release(
    sql: &Sql,
    engine: &str,
    claim: &str,
    next_ms: Option<i64>,
    ran: Option<(i64, &str)>,
) -> Result<u64, StoreError> {
    sql.execute(
        "UPDATE engine_schedule SET next_ms = COALESCE($3, next_ms), claim = NULL, lease_until_ms = 0, \
         last_ms = COALESCE($4, last_ms), last_outcome = COALESCE($5, last_outcome) WHERE engine = $1 AND claim = $2",
        &[engine.into(), claim.into(), next_ms.into(), ran.map(|r| r.0).into(), ran.map(|r| r.1).into()],
    )
    .await
}

/// A lease queue's table: where a job's error goes, and how long a retry
/// waits per attempt made.
pub struct Queue {
    pub table: &'static str,
    pub error_column: &'static str,
    pub backoff_ms: i64,
}

/// Gives a claimed queue job back (`jobs` or `knowledge_jobs`): queued
/// again after the queue's backoff × attempts while fewer than
/// `attempts_allowed` were made, else failed with the error. What became
/// of it, or `None` when the claim is gone.
pub async fn give_back(
    sql: &Sql,
    queue: &Queue,
    (id, claim): (Value, &str),
    error: Value,
    attempts_allowed: i64,
    now: i64,
) -> Result<Option<GivenBack>, StoreError> {
    let Queue { table, error_column, backoff_ms } = queue;
    let rows = sql
        .query(
            &format!(
                "UPDATE {table} SET status = CASE WHEN attempts < $4 THEN 'queued' ELSE 'failed' END, \
                 {error_column} = $3, claim = NULL, lease_until_ms = $5 + $6 * attempts, updated_ms = $5 \
                 WHERE id = $1 AND claim = $2 RETURNING status"
            ),
            &[id, claim.into(), error, Value::Int(attempts_allowed), Value::Int(now), Value::Int(*backoff_ms)],
        )
        .await?;
    let status = rows.first().map(|row| row.text("status")).transpose()?;
    Ok(status.map(|s| if s == "queued" { GivenBack::Queued } else { GivenBack::Failed }))
}
