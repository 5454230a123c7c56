//! `spin:sqlite/sqlite@3.1.0` over in-process SQLite files (rusqlite).
//!
//! Each `open` gets a connection of its own for as long as it holds it, so
//! one instance's transaction never leaks into another's. Connections are
//! pooled per file: a released one goes back (rolled back first if its
//! holder left a transaction open), keeping its parsed schema and prepared
//! statements for the next request. Statements run on tokio's blocking pool
//! and stream their rows back as Spin's `execute-async` does.
//!
//! SQLite takes one writer at a time (WAL mode lets readers proceed). Left
//! to SQLite, waiting writers poll with growing sleeps and give up after
//! 5 s: under a thousand concurrent commits, half failed with "database is
//! locked" although the work behind them took two seconds in all. So writers
//! queue here instead, first come first served, on the file's writer gate:
//! a `BEGIN IMMEDIATE` (or `EXCLUSIVE`) takes it until its transaction ends,
//! a write outside a transaction for that statement, a write inside a
//! deferred transaction until it ends. A writer still waiting after 30 s
//! gets the same "database is locked" error SQLite would give (D-F20).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use wasmtime::component::{Accessor, FutureReader, Resource, StreamReader};

use super::spin::sqlite::sqlite::{Error, HostConnection, HostConnectionWithStore, QueryResult, RowResult, Value};
use super::{Spin, SpinView, with_view};

/// Idle connections kept per database file.
const POOL_MAX: usize = 16;

/// How long a writer waits for its turn: as long as the app waits for a
/// SQLite statement (`mneme_store::sql::SQLITE_DEADLINE`).
const WRITER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A configured database file.
pub struct SqliteDb {
    path: PathBuf,
    idle: Arc<Mutex<Vec<rusqlite::Connection>>>,
    writer: Arc<tokio::sync::Semaphore>,
}

impl SqliteDb {
    pub fn new(path: &Path) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let conn =
            rusqlite::Connection::open(path).with_context(|| format!("opening SQLite database {}", path.display()))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        Ok(Self {
            path: path.to_path_buf(),
            idle: Arc::new(Mutex::new(Vec::new())),
            writer: Arc::new(tokio::sync::Semaphore::new(1)),
        })
    }

    fn connect(&self) -> Result<Pooled, Error> {
        let reused = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let c = match reused {
            Some(c) => c,
            None => {
                let c = rusqlite::Connection::open(&self.path).map_err(|e| Error::Io(e.to_string()))?;
                c.busy_timeout(std::time::Duration::from_secs(5)).map_err(|e| Error::Io(e.to_string()))?;
                c.set_prepared_statement_cache_capacity(64);
                c
            }
        };
        Ok(Pooled { conn: Some(c), idle: self.idle.clone(), writing: None })
    }
}

/// What a statement does to the writer gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `BEGIN IMMEDIATE` or `BEGIN EXCLUSIVE`: takes the gate for the transaction.
    BeginWrite,
    /// `COMMIT`, `END` or `ROLLBACK`: gives it back once the transaction is over.
    End,
    Read,
    Write,
}

fn kind(sql: &str) -> Kind {
    let upper = sql.trim_start().to_ascii_uppercase();
    let mut words = upper.split(|c: char| !c.is_ascii_alphabetic()).filter(|w| !w.is_empty());
    match words.next().unwrap_or("") {
        "BEGIN" => match words.next() {
            Some("IMMEDIATE" | "EXCLUSIVE") => Kind::BeginWrite,
            _ => Kind::Read,
        },
        "COMMIT" | "END" | "ROLLBACK" => Kind::End,
        "SELECT" | "EXPLAIN" | "VALUES" | "PRAGMA" => Kind::Read,
        "WITH" if !["INSERT", "UPDATE", "DELETE", "REPLACE"].iter().any(|w| upper.contains(w)) => Kind::Read,
        _ => Kind::Write,
    }
}

/// A connection on loan from its file's pool; dropping it gives it back.
pub struct Pooled {
    conn: Option<rusqlite::Connection>,
    idle: Arc<Mutex<Vec<rusqlite::Connection>>>,
    /// The writer gate, while this connection's transaction holds it; let go
    /// after the rollback in `drop`.
    writing: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl std::ops::Deref for Pooled {
    type Target = rusqlite::Connection;
    fn deref(&self) -> &rusqlite::Connection {
        self.conn.as_ref().expect("present until dropped")
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let Some(c) = self.conn.take() else { return };
        // A holder that trapped or forgot to commit must not hand its open
        // transaction to the next request.
        if !c.is_autocommit() && c.execute_batch("ROLLBACK").is_err() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < POOL_MAX {
            idle.push(c);
        }
    }
}

/// An open connection.
#[derive(Clone)]
pub struct SqliteHandle {
    conn: Arc<Mutex<Pooled>>,
    writer: Arc<tokio::sync::Semaphore>,
    /// Whether this connection holds the writer gate.
    holds: Arc<std::sync::atomic::AtomicBool>,
}

impl SqliteHandle {
    async fn run(&self, sql: String, params: Vec<Value>) -> Result<QueryResult, Error> {
        use std::sync::atomic::Ordering::SeqCst;
        let kind = kind(&sql);
        let gate = matches!(kind, Kind::BeginWrite | Kind::Write) && !self.holds.load(SeqCst);
        let permit = if gate {
            match tokio::time::timeout(WRITER_WAIT, self.writer.clone().acquire_owned()).await {
                Ok(Ok(p)) => Some(p),
                Ok(Err(_)) | Err(_) => return Err(Error::Io("database is locked".into())),
            }
        } else {
            None
        };
        let (conn, holds) = (self.conn.clone(), self.holds.clone());
        tokio::task::spawn_blocking(move || {
            let mut pooled = conn.lock().unwrap_or_else(|p| p.into_inner());
            let result = execute(&pooled, &sql, params);
            let in_transaction = !pooled.is_autocommit();
            match kind {
                // Held until the transaction ends; a statement outside one
                // lets go of it here, with `permit`.
                Kind::BeginWrite | Kind::Write if in_transaction && permit.is_some() => {
                    pooled.writing = permit;
                    holds.store(true, SeqCst);
                }
                Kind::End if !in_transaction => {
                    pooled.writing = None;
                    holds.store(false, SeqCst);
                }
                _ => {}
            }
            result
        })
        .await
        .map_err(|e| Error::Io(e.to_string()))?
    }

    async fn with<R: Send + 'static>(&self, f: impl FnOnce(&rusqlite::Connection) -> R + Send + 'static) -> R {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || f(&conn.lock().unwrap_or_else(|p| p.into_inner())))
            .await
            .expect("sqlite task panicked")
    }
}

fn to_sql(v: Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match v {
        Value::Integer(i) => V::Integer(i),
        Value::Real(f) => V::Real(f),
        Value::Text(s) => V::Text(s),
        Value::Blob(b) => V::Blob(b),
        Value::Null => V::Null,
    }
}

fn from_sql(v: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef as V;
    match v {
        V::Null => Value::Null,
        V::Integer(i) => Value::Integer(i),
        V::Real(f) => Value::Real(f),
        V::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        V::Blob(b) => Value::Blob(b.to_vec()),
    }
}

fn sql_error(e: rusqlite::Error) -> Error {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DiskFull) => Error::DatabaseFull,
        _ => Error::Io(e.to_string()),
    }
}

fn execute(conn: &rusqlite::Connection, sql: &str, params: Vec<Value>) -> Result<QueryResult, Error> {
    let mut stmt = conn.prepare_cached(sql).map_err(sql_error)?;
    let columns: Vec<String> = stmt.column_names().into_iter().map(str::to_string).collect();
    let params: Vec<rusqlite::types::Value> = params.into_iter().map(to_sql).collect();
    let mut rows = stmt.query(rusqlite::params_from_iter(params)).map_err(sql_error)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sql_error)? {
        let values = (0..columns.len())
            .map(|i| row.get_ref(i).map(from_sql))
            .collect::<Result<Vec<_>, _>>()
            .map_err(sql_error)?;
        out.push(RowResult { values });
    }
    Ok(QueryResult { columns, rows: out })
}

fn open_handle(v: &mut SpinView<'_>, database: &str) -> wasmtime::Result<Result<Resource<SqliteHandle>, Error>> {
    if !v.ctx.caps.sqlite_databases.iter().any(|d| d == database) {
        return Ok(Err(Error::AccessDenied));
    }
    let Some(db) = v.ctx.services.sqlite.get(database) else { return Ok(Err(Error::NoSuchDatabase)) };
    let conn = match db.connect() {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    Ok(Ok(v.table.push(SqliteHandle {
        conn: Arc::new(Mutex::new(conn)),
        writer: db.writer.clone(),
        holds: Default::default(),
    })?))
}

fn handle<T>(accessor: &Accessor<T, Spin>, res: &Resource<SqliteHandle>) -> wasmtime::Result<SqliteHandle> {
    with_view!(accessor, |v| Ok(v.table.get(res)?.clone()))
}

impl<T> HostConnectionWithStore<T> for Spin {
    async fn open_async(
        accessor: &Accessor<T, Self>,
        database: String,
    ) -> wasmtime::Result<Result<Resource<SqliteHandle>, Error>> {
        with_view!(accessor, |v| open_handle(&mut { v }, &database))
    }

    async fn execute_async(
        accessor: &Accessor<T, Self>,
        this: Resource<SqliteHandle>,
        statement: String,
        parameters: Vec<Value>,
    ) -> wasmtime::Result<Result<(Vec<String>, StreamReader<RowResult>, FutureReader<Result<(), Error>>), Error>> {
        let span = super::db_span(accessor, "spin_sqlite.execute", "sqlite", &statement);
        let result = super::finish(span, handle(accessor, &this)?.run(statement, parameters).await);
        let QueryResult { columns, rows } = match result {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        accessor.with(|mut access| {
            let stream = StreamReader::new(&mut access, rows)?;
            let done = FutureReader::new(&mut access, async { wasmtime::error::Ok(Ok(())) })?;
            Ok(Ok((columns, stream, done)))
        })
    }

    async fn last_insert_rowid_async(
        accessor: &Accessor<T, Self>,
        this: Resource<SqliteHandle>,
    ) -> wasmtime::Result<i64> {
        Ok(handle(accessor, &this)?.with(|c| c.last_insert_rowid()).await)
    }

    async fn changes_async(accessor: &Accessor<T, Self>, this: Resource<SqliteHandle>) -> wasmtime::Result<u64> {
        Ok(handle(accessor, &this)?.with(|c| c.changes()).await)
    }
}

impl HostConnection for SpinView<'_> {
    async fn open(&mut self, database: String) -> wasmtime::Result<Result<Resource<SqliteHandle>, Error>> {
        open_handle(self, &database)
    }

    async fn execute(
        &mut self,
        this: Resource<SqliteHandle>,
        statement: String,
        parameters: Vec<Value>,
    ) -> wasmtime::Result<Result<QueryResult, Error>> {
        let h = self.table.get(&this)?.clone();
        let span = self.ctx.db_span("spin_sqlite.execute", "sqlite", &statement);
        Ok(super::finish(span, h.run(statement, parameters).await))
    }

    async fn last_insert_rowid(&mut self, this: Resource<SqliteHandle>) -> wasmtime::Result<i64> {
        let h = self.table.get(&this)?.clone();
        Ok(h.with(|c| c.last_insert_rowid()).await)
    }

    async fn changes(&mut self, this: Resource<SqliteHandle>) -> wasmtime::Result<u64> {
        let h = self.table.get(&this)?.clone();
        Ok(h.with(|c| c.changes()).await)
    }

    async fn drop(&mut self, rep: Resource<SqliteHandle>) -> wasmtime::Result<()> {
        self.table.delete(rep)?;
        Ok(())
    }
}

impl super::spin::sqlite::sqlite::Host for SpinView<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_sorted_by_what_they_do_to_the_writer_gate() {
        for (sql, want) in [
            ("BEGIN IMMEDIATE", Kind::BeginWrite),
            ("  begin exclusive transaction", Kind::BeginWrite),
            ("BEGIN", Kind::Read),
            ("BEGIN DEFERRED", Kind::Read),
            ("COMMIT", Kind::End),
            ("rollback", Kind::End),
            ("ROLLBACK TO sp", Kind::End),
            ("SELECT 1", Kind::Read),
            ("WITH t AS (SELECT 1) SELECT * FROM t", Kind::Read),
            ("WITH t AS (SELECT 1) INSERT INTO x SELECT * FROM t", Kind::Write),
            ("INSERT INTO x VALUES (1)", Kind::Write),
            ("UPDATE x SET a = 1", Kind::Write),
            ("CREATE TABLE y (a)", Kind::Write),
        ] {
            assert_eq!(kind(sql), want, "{sql}");
        }
    }
}
