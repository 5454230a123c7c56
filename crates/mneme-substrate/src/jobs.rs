//! The `jobs` table, a durable lease queue: the commit puts the chunker
//! and episode jobs on it, consolidation its semantic jobs, and `/chat`
//! Path B's tool jobs; each worker claims the oldest under a lease. Giving a
//! claimed job back is [`crate::schedule::give_back`].

use mneme_store::{Sql, Value};

use crate::{Fail, Result, in_list, random_hex};

pub use mneme_background::consolidate::{CHUNKER_QUEUE, EPISODIC_QUEUE, SEMANTIC_QUEUE};

/// Puts a job on a durable queue; its id.
pub async fn enqueue(sql: &Sql, queue: &str, reference: Option<&str>, payload: &str, now_ms: u64) -> Result<i64> {
    let rows = sql
        .query(
            "INSERT INTO jobs (queue, ref, payload, status, attempts, lease_until_ms, created_ms, updated_ms)
             VALUES ($1, $2, $3, 'queued', 0, 0, $4, $4) RETURNING id",
            &[queue.into(), reference.into(), payload.into(), Value::Int(now_ms as i64)],
        )
        .await?;
    Ok(rows.first().ok_or_else(|| Fail::new("internal", "no job id returned"))?.i64("id")?)
}

/// Claim attempts when another worker wins the race for a row.
const CLAIM_TRIES: usize = 3;

/// Claims the oldest job of `queues` in the `jobs` table that is queued, or
/// running with its lease out, under a fresh claim token and lease; first
/// fails the jobs whose lease ran out `max_attempts` times, with
/// `give_up_sql` (an SQL expression) as their result. The row has `id`,
/// `queue`, `payload`, `attempts` and `claim`.
pub async fn claim_job(
    sql: &Sql,
    queues: &[&str],
    now_ms: u64,
    lease_ms: u64,
    max_attempts: i64,
    give_up_sql: &str,
) -> Result<Option<mneme_store::Row>> {
    let now = now_ms as i64;
    let n = queues.len();
    let mut params: Vec<Value> = vec![now.into(), max_attempts.into()];
    params.extend(queues.iter().map(|q| Value::from(*q)));
    sql.execute(
        &format!(
            "UPDATE jobs SET status = 'failed', claim = NULL, updated_ms = $1, result = {give_up_sql}
             WHERE queue IN ({}) AND status = 'running' AND lease_until_ms < $1 AND attempts >= $2",
            in_list(3, n)
        ),
        &params,
    )
    .await?;
    let token = random_hex(8);
    let mut params: Vec<Value> = vec![token.as_str().into(), (now + lease_ms as i64).into(), now.into()];
    params.extend(queues.iter().map(|q| Value::from(*q)));
    // On PostgreSQL a worker that loses the race for a row gets nothing
    // back though other jobs wait: it tries again, a few times.
    for _ in 0..CLAIM_TRIES {
        let rows = sql
            .query(
                &format!(
                    "UPDATE jobs SET status = 'running', claim = $1, lease_until_ms = $2, attempts = attempts + 1, updated_ms = $3
                     WHERE id = (SELECT id FROM jobs WHERE queue IN ({0}) AND status IN ('queued', 'running')
                                 AND lease_until_ms < $3 ORDER BY id LIMIT 1)
                       AND status IN ('queued', 'running') AND lease_until_ms < $3
                     RETURNING id, queue, payload, attempts, claim",
                    in_list(4, n)
                ),
                &params,
            )
            .await?;
        if let Some(row) = rows.into_iter().next() {
            return Ok(Some(row));
        }
        let mut count: Vec<Value> = vec![now.into()];
        count.extend(queues.iter().map(|q| Value::from(*q)));
        let waiting = sql
            .query(
                &format!(
                    "SELECT count(*) AS n FROM jobs WHERE queue IN ({}) AND status IN ('queued', 'running')
                     AND lease_until_ms < $1",
                    in_list(2, n)
                ),
                &count,
            )
            .await?;
        if waiting.first().map(|r| r.i64("n")).transpose()?.unwrap_or(0) == 0 {
            break;
        }
    }
    Ok(None)
}

/// Jobs still waiting or running on the consolidation queues.
pub async fn pending(sql: &Sql) -> Result<i64> {
    let rows = sql
        .query(
            "SELECT count(*) AS n FROM jobs WHERE queue IN ($1, $2, $3) AND status IN ('queued', 'running')",
            &[CHUNKER_QUEUE.into(), EPISODIC_QUEUE.into(), SEMANTIC_QUEUE.into()],
        )
        .await?;
    Ok(rows.first().map(|r| r.i64("n")).transpose()?.unwrap_or(0))
}
