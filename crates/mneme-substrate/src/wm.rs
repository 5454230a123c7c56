//! Working memory (design 002 §2 step 2): the last 4 turns of a thread,
//! expiring 24 h after its last append. Stored as SQL rows so concurrent
//! requests on one thread never lose a turn on either backend (D-C3): an
//! append inserts, and a trim keeps the newest 8 rows, in one transaction.

use mneme_conversation::context::{Turn, WM_MAX_TURNS, WM_TTL_MS};
use mneme_store::{Sql, StoreError, Value};

use crate::Result;

/// Rows kept per thread: one per message, two per turn.
pub const WM_ROWS: usize = 2 * WM_MAX_TURNS;

/// The thread's working memory at `now_ms`, oldest first; empty once 24 h
/// have passed since the last append.
pub async fn read(sql: &Sql, thread_id: &str, now_ms: u64) -> Result<Vec<Turn>> {
    let rows = sql
        .query(
            "SELECT role, content, at_ms FROM working_memory WHERE thread_id = $1 ORDER BY id DESC LIMIT $2",
            &[thread_id.into(), Value::Int(WM_ROWS as i64)],
        )
        .await?;
    let mut turns = Vec::with_capacity(rows.len());
    for r in rows.iter().rev() {
        turns.push(Turn { role: r.text("role")?, content: r.text("content")?, at_ms: r.i64("at_ms")? as u64 });
    }
    match turns.last() {
        Some(last) if now_ms.saturating_sub(last.at_ms) < WM_TTL_MS => Ok(turns),
        _ => Ok(Vec::new()),
    }
}

/// Appends turns; the caller's transaction (if any) makes it atomic with
/// the rest of the commit, and [`trim`] keeps the window's size.
pub async fn append(sql: &Sql, thread_id: &str, turns: &[Turn]) -> std::result::Result<(), StoreError> {
    if turns.is_empty() {
        return Ok(());
    }
    // One multi-row INSERT: one round trip for the whole exchange.
    let mut statement = String::from("INSERT INTO working_memory (thread_id, role, content, at_ms) VALUES ");
    let mut params: Vec<Value> = vec![thread_id.into()];
    for (i, t) in turns.iter().enumerate() {
        let n = params.len();
        statement.push_str(&format!("{}($1, ${}, ${}, ${})", if i > 0 { ", " } else { "" }, n + 1, n + 2, n + 3));
        params.extend([t.role.as_str().into(), t.content.as_str().into(), Value::Int(t.at_ms as i64)]);
    }
    sql.execute(&statement, &params).await?;
    Ok(())
}

/// Makes room for `adding` rows written at `at_ms`: of the rows written
/// before that instant, only the newest `WM_ROWS - adding` stay. It never
/// touches rows of that instant or later, so it gives the same result
/// whether it runs before or after [`append`], and the two can go out
/// together (`Sql::all`). Rows that concurrent exchanges write at the same
/// millisecond are kept until the next trim; reads take the newest 8 anyway.
pub async fn trim(sql: &Sql, thread_id: &str, adding: usize, at_ms: u64) -> std::result::Result<(), StoreError> {
    sql.execute(
        "DELETE FROM working_memory WHERE thread_id = $1 AND at_ms < $3 AND id NOT IN \
         (SELECT id FROM working_memory WHERE thread_id = $1 AND at_ms < $3 ORDER BY id DESC LIMIT $2)",
        &[thread_id.into(), Value::Int(WM_ROWS.saturating_sub(adding) as i64), Value::Int(at_ms as i64)],
    )
    .await?;
    Ok(())
}

/// Completed turns (user messages) in the window.
pub fn turn_count(turns: &[Turn]) -> usize {
    turns.iter().filter(|t| t.role == "user").count().min(WM_MAX_TURNS)
}
