//! The event log: proactive events (`/events`) appended in id order.
//! Every stage that publishes does it here, inside [`publishing`], so the
//! ordering rule of D-C21 holds in one place.

use mneme_store::sql::SqlKind;
use mneme_store::{Sql, StoreError, Value};
use serde_json::Value as J;

/// The Postgres advisory lock that makes event ids commit in order (D-C21).
const EVENT_ORDER_LOCK: i64 = 0x6d6e_656d_6576_0001;

/// A transaction that may publish events. On Postgres its first statement
/// takes the event-order lock, held until the transaction ends: the next
/// publisher draws its id only once this one has committed, so a reader
/// never sees an id while a smaller one is still uncommitted. A transaction
/// waiting for the lock holds no row lock another one could be waiting for,
/// so publishers queue and never deadlock (D-C21). On SQLite the
/// transaction's write lock already orders them.
pub async fn publishing<T>(
    sql: &Sql,
    body: impl AsyncFnOnce(&Sql) -> std::result::Result<T, StoreError>,
) -> std::result::Result<T, StoreError> {
    sql.transaction(async |sql: &Sql| {
        if sql.kind() == SqlKind::Postgres {
            sql.execute("SELECT pg_advisory_xact_lock($1::bigint)", &[Value::Int(EVENT_ORDER_LOCK)]).await?;
        }
        body(sql).await
    })
    .await
}

/// Appends an event and returns its id. Only inside [`publishing`].
pub async fn publish_with(sql: &Sql, kind: &str, payload: &J, now_ms: u64) -> std::result::Result<i64, StoreError> {
    let rows = sql
        .query(
            "INSERT INTO events (type, payload, created_ms) VALUES ($1, $2, $3) RETURNING id",
            &[kind.into(), payload.to_string().into(), Value::Int(now_ms as i64)],
        )
        .await?;
    rows.first().ok_or_else(|| StoreError::new("decode", "the event insert returned no id"))?.i64("id")
}
