//! One storage API for every Mneme stage, written once over both backends.
//!
//! Production runs on PostgreSQL and Redis through Spin's outbound
//! connectors; the embedded default runs on Spin SQLite and Spin key-value.
//! Stage code talks to [`Sql`] and [`Kv`] and never sees which one it got:
//! the choice is made here, from the Spin variables `pg_url` and `redis_url`
//! (empty or unset selects the embedded store).
//!
//! The pure parts (placeholder rewriting, the key-value envelope that
//! emulates TTLs, lists and sorted sets) are plain functions tested natively;
//! the rest is a thin adapter over spin-sdk and only runs inside a component.

mod error;
pub mod kv;
pub mod kvcodec;
pub mod migrate;
pub mod sql;

pub use error::StoreError;
pub use kv::Kv;
pub use sql::{Echo, Piece, Row, Sql, Value};

/// Both stores of a component, opened from its Spin variables.
pub struct Stores {
    pub sql: Sql,
    pub kv: Kv,
}

impl Stores {
    /// Opens the SQL store and the key-value store selected by configuration.
    pub async fn open() -> Result<Self, StoreError> {
        let sql = open_sql().await?;
        let kv = open_kv().await?;
        Ok(Self { sql, kv })
    }
}

/// Opens only the key-value store selected by configuration.
pub async fn open_kv() -> Result<Kv, StoreError> {
    let namespace = variable("store_namespace").await?.unwrap_or_else(|| "mneme".into());
    match variable("redis_url").await? {
        Some(url) => Kv::open_redis(&url, &namespace).await,
        None => Kv::open_key_value("default", &namespace).await,
    }
}

/// Which SQL and key-value backends the configuration selects, without
/// opening either (a variable that cannot be read counts as unset).
pub async fn configured_kinds() -> (sql::SqlKind, kv::KvKind) {
    let set = async |name: &str| matches!(variable(name).await, Ok(Some(_)));
    let sql = if set("pg_url").await { sql::SqlKind::Postgres } else { sql::SqlKind::Sqlite };
    let kv = if set("redis_url").await { kv::KvKind::Redis } else { kv::KvKind::KeyValue };
    (sql, kv)
}

/// Opens the SQL store for a health check: on PostgreSQL under its own
/// `application_name`, which the host pools apart from the app's traffic, so
/// a pool busy with a flood of requests is not mistaken for a server that
/// does not answer.
pub async fn open_sql_for_checks() -> Result<Sql, StoreError> {
    match variable("pg_url").await? {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            let sep = if url.contains('?') { '&' } else { '?' };
            Sql::open_postgres(&format!("{url}{sep}application_name=mneme-health")).await
        }
        Some(url) => Sql::open_postgres(&format!("{url} application_name=mneme-health")).await,
        None => Sql::open_sqlite("default").await,
    }
}

/// Opens only the SQL store selected by configuration, for a stage call
/// that needs nothing else.
pub async fn open_sql() -> Result<Sql, StoreError> {
    match variable("pg_url").await? {
        Some(url) => Sql::open_postgres(&url).await,
        None => Sql::open_sqlite("default").await,
    }
}

/// Reads a Spin variable; an undefined or blank variable is `None`.
pub async fn variable(name: &str) -> Result<Option<String>, StoreError> {
    use spin_sdk::variables::Error as E;
    match spin_sdk::variables::get(name).await {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => Ok(Some(v)),
        Err(E::Undefined(_)) => Ok(None),
        Err(e) => Err(StoreError::new("config", format!("reading variable `{name}`: {e:?}"))),
    }
}
