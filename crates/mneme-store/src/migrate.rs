//! Applies the embedded migrations of `mneme-migrations` to the open SQL
//! store.
//!
//! Each migration runs in its own transaction together with the row that
//! records it, so a crash leaves either all of a migration or none of it.
//! Concurrent migrators are serialised: Postgres by a transaction-scoped
//! advisory lock, SQLite by `BEGIN IMMEDIATE`. Each one re-reads the
//! applied set under the lock, so a migration is never applied twice.

use mneme_migrations::{self as m, Applied, Backend};

use crate::sql::{Sql, SqlKind};
use crate::{StoreError, Value};

/// Arbitrary constant that names Mneme's migration lock in Postgres.
const PG_LOCK_KEY: i64 = 0x6d6e_656d_6500;

fn backend(sql: &Sql) -> Backend {
    match sql.kind() {
        SqlKind::Sqlite => Backend::Sqlite,
        SqlKind::Postgres => Backend::Postgres,
    }
}

fn migration_error(e: m::MigrationError) -> StoreError {
    StoreError::new("migration", e.to_string())
}

async fn applied(sql: &Sql) -> Result<Vec<Applied>, StoreError> {
    let rows = sql.query("SELECT version, checksum FROM schema_migrations ORDER BY version", &[]).await?;
    rows.iter().map(|r| Ok(Applied { version: r.i64("version")? as u32, checksum: r.text("checksum")? })).collect()
}

/// Highest applied version, 0 for a fresh database. Reads only: it never
/// creates the bookkeeping table (creating it races with a migrator).
pub async fn level(sql: &Sql) -> Result<u32, StoreError> {
    let exists = match sql.kind() {
        SqlKind::Postgres => {
            "SELECT COUNT(*) AS n FROM pg_catalog.pg_tables WHERE tablename = 'schema_migrations' AND schemaname = current_schema()"
        }
        SqlKind::Sqlite => {
            "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
        }
    };
    if sql.query(exists, &[]).await?.first().map(|r| r.i64("n")).transpose()?.unwrap_or(0) == 0 {
        return Ok(0);
    }
    let rows = sql.query("SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations", &[]).await?;
    Ok(rows.first().map(|r| r.i64("v")).transpose()?.unwrap_or(0) as u32)
}

/// Highest version this build ships for the open backend.
pub fn latest(sql: &Sql) -> u32 {
    m::latest(backend(sql))
}

/// Highest version this build ships for `kind`, with no connection open.
pub fn shipped_latest(kind: SqlKind) -> u32 {
    m::latest(match kind {
        SqlKind::Sqlite => Backend::Sqlite,
        SqlKind::Postgres => Backend::Postgres,
    })
}

/// How long one migration statement may take.
const MIGRATION_DEADLINE: std::time::Duration = std::time::Duration::from_secs(600);

/// Applies every pending migration; returns `(version, name)` of each one
/// this call applied.
pub async fn migrate(sql: &Sql, now_ms: u64) -> Result<Vec<(u32, String)>, StoreError> {
    let shipped = m::shipped(backend(sql)).map_err(migration_error)?;
    // A migration may rewrite a large table, and a second runner waits on
    // the first one's lock: neither is bound by the statement deadline.
    sql.set_deadline(MIGRATION_DEADLINE);
    let mut done = Vec::new();
    loop {
        let step = sql
            .transaction(async |tx| {
                if tx.kind() == SqlKind::Postgres {
                    // The session's bounds (D-F19) are lifted for this
                    // transaction: a second migrator waits on the lock.
                    tx.query(
                        "SELECT set_config('statement_timeout', '0', true), set_config('lock_timeout', '0', true), \
                         set_config('idle_in_transaction_session_timeout', '0', true)",
                        &[],
                    )
                    .await?;
                    tx.execute("SELECT pg_advisory_xact_lock($1)", &[Value::Int(PG_LOCK_KEY)]).await?;
                }
                // Under the lock: concurrent `CREATE TABLE IF NOT EXISTS`
                // statements collide in Postgres' catalog.
                tx.execute(m::CREATE_TABLE, &[]).await?;
                let applied = applied(tx).await?;
                let Some(next) = m::plan(&shipped, &applied).map_err(migration_error)?.into_iter().next() else {
                    return Ok(None);
                };
                for stmt in m::split_statements(next.sql) {
                    tx.execute(&stmt, &[]).await.map_err(|e| {
                        StoreError::new(
                            "migration",
                            format!("migration {} ({}): {}", next.version, next.name, e.message),
                        )
                    })?;
                }
                tx.execute(
                    "INSERT INTO schema_migrations (version, name, checksum, applied_at_ms) VALUES ($1, $2, $3, $4)",
                    &[
                        Value::Int(i64::from(next.version)),
                        next.name.clone().into(),
                        next.checksum.clone().into(),
                        Value::Int(now_ms as i64),
                    ],
                )
                .await?;
                Ok(Some((next.version, next.name.clone())))
            })
            .await?;
        match step {
            Some(applied) => done.push(applied),
            None => return Ok(done),
        }
    }
}
