//! SQL over Postgres (`spin:postgres@4.2.0`) or Spin SQLite (`spin:sqlite@3.1.0`).
//!
//! Stage code writes `$1, $2 …` placeholders (the Postgres form) and sticks
//! to the subset both dialects share: BIGINT, DOUBLE PRECISION, TEXT and
//! blobs, timestamps as Unix milliseconds computed in code. The SQLite side
//! rewrites placeholders to `?1, ?2 …`, since SQLite would treat `$1` as a
//! *named* parameter numbered by first appearance.

use std::sync::Arc;
use std::time::Duration;

use spin_sdk::{pg, sqlite};

use crate::StoreError;

/// The most one call to a store across the network (a statement, a
/// connect, a key-value command) waits for its answer before it fails with
/// `store-unavailable`: below 5 s, so a request whose store went silent
/// gets its 503 within 5 s (D-F19).
pub const DEADLINE: Duration = Duration::from_secs(4);

/// The same for the in-process SQLite file, which cannot go silent the way
/// a server can: a wait there is the queue of writers ahead (D-F20), and a
/// write that waits its turn is better than one refused.
pub const SQLITE_DEADLINE: Duration = Duration::from_secs(30);

/// The longest one `BEGIN IMMEDIATE` may wait inside SQLite for a writer
/// outside the app before SQLite says "locked" (the busy timeout `mneme up`
/// sets on its connections), so a last try starts no later than this
/// before the deadline.
const BUSY_TRY: Duration = Duration::from_secs(5);

/// How long a request may queue for one of the app's PostgreSQL
/// connections while every one is in use.
const POOL_QUEUE: Duration = Duration::from_secs(30);

/// Whether a failed open only found every pooled connection in use (the
/// `mneme` runner says so; a server that does not answer fails otherwise).
fn pool_busy(e: &StoreError) -> bool {
    e.code == "store-unavailable" && e.message.contains("no connection was free")
}

/// Whether `e` is the app giving up on a store that did not answer in time
/// ([`within`]), as opposed to one that answered with an error.
fn did_not_answer(e: &StoreError) -> bool {
    e.code == "store-unavailable" && e.message.contains("did not answer within")
}

/// How long a rollback after a failure may take.
const ROLLBACK_WAIT: Duration = Duration::from_secs(1);

/// The server-side limits on each PostgreSQL session the app opens, just
/// under the guest's [`DEADLINE`], so the server usually gives up first and
/// the connection comes back clean: a statement the app would stop waiting
/// for is cancelled (3.9 s), a lock wait ends with an error naming the lock
/// (3.8 s), and a transaction left open and idle, such as one whose request
/// was dropped mid-way, is ended (10 s) rather than holding its locks and
/// handing its writes to the pool's next user. A queue of writers on a
/// corpus lock keeps the 4 s it had under the guest's deadline alone.
/// Migrations lift all three for their own transaction.
pub const STATEMENT_TIMEOUT_MS: u64 = 3_900;
pub const LOCK_TIMEOUT_MS: u64 = 3_800;
pub const IDLE_IN_TRANSACTION_MS: u64 = 10_000;

/// The `options` the app's sessions start with: [`STATEMENT_TIMEOUT_MS`],
/// [`LOCK_TIMEOUT_MS`], [`IDLE_IN_TRANSACTION_MS`]. As startup options they
/// are the session's reset values, so they survive the `RESET ALL` Spin's
/// pool runs each time it hands a connection out.
pub fn session_options() -> String {
    format!(
        "-c statement_timeout={STATEMENT_TIMEOUT_MS} -c lock_timeout={LOCK_TIMEOUT_MS} \
         -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
    )
}

/// Runs `call` for at most `limit`; past it, `store-unavailable` naming `what`.
pub async fn within<T>(
    limit: Duration,
    what: &str,
    call: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    use futures::future::{Either, select};
    match select(std::pin::pin!(call), std::pin::pin!(spin_sdk::time::sleep(limit))).await {
        Either::Left((out, _)) => out,
        Either::Right(_) => Err(StoreError::new(
            "store-unavailable",
            format!("{what} did not answer within {:.1} s", limit.as_secs_f64()),
        )),
    }
}

/// The one rule for characters a store cannot keep (D-F21): PostgreSQL
/// refuses U+0000 in text, SQLite would keep it, so both refuse it here.
/// Requests are refused earlier, with the field named (`mneme-http`); this
/// catches anything else on its way to a store.
pub fn storable(params: &[Value]) -> Result<(), StoreError> {
    if params.iter().any(|p| matches!(p, Value::Text(t) if t.contains('\0'))) {
        return Err(StoreError::new("invalid", "a text value contains U+0000 (NUL), which cannot be stored"));
    }
    Ok(())
}

/// A PostgreSQL address, in either form libpq takes, with the app's bounds
/// added (D-F19): `connect_timeout` unless it sets its own, and
/// [`session_options`] before any `options` of its own, so a `-c` it gives
/// still wins. An address that does not parse is left as it is (the
/// connect then reports it).
pub fn with_deadlines(url: &str) -> String {
    let connect = DEADLINE.as_secs().saturating_sub(1).max(1);
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut params: Vec<(String, String)> = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (k.to_string(), v.to_string())
            })
            .collect();
        if !params.iter().any(|(k, _)| k == "connect_timeout") {
            params.push(("connect_timeout".into(), connect.to_string()));
        }
        let ours = percent_encode(&session_options());
        match params.iter_mut().find(|(k, _)| k == "options") {
            Some((_, theirs)) => *theirs = format!("{ours}%20{theirs}"),
            None => params.push(("options".into(), ours)),
        }
        let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        return format!("{base}?{}", query.join("&"));
    }
    let Some(mut pairs) = conninfo_pairs(url) else { return url.to_string() };
    if !pairs.iter().any(|(k, _)| k == "connect_timeout") {
        pairs.push(("connect_timeout".into(), connect.to_string()));
    }
    match pairs.iter_mut().find(|(k, _)| k == "options") {
        Some((_, theirs)) => *theirs = format!("{} {theirs}", session_options()),
        None => pairs.push(("options".into(), session_options())),
    }
    let out: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={}", conninfo_quote(v))).collect();
    out.join(" ")
}

/// Percent-encodes what a URL query value cannot hold as it is.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The `keyword = value` pairs of a libpq key/value address: a value is a
/// bare word (with `\` escaping the next character) or single-quoted (with
/// `\'` and `\\`); `None` when it does not parse.
pub fn conninfo_pairs(s: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Some(out);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if key.is_empty() || chars.next() != Some('=') {
            return None;
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next()? {
                    '\\' => value.push(chars.next()?),
                    '\'' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                value.push(if c == '\\' { chars.next()? } else { c });
            }
        }
        out.push((key, value));
    }
}

/// A key/value address's value, quoted as libpq reads it back.
fn conninfo_quote(v: &str) -> String {
    if !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:@,+".contains(c)) {
        return v.to_string();
    }
    format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A SQL value as both backends exchange it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Blob(v)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// One result row with its column names.
#[derive(Debug, Clone)]
pub struct Row {
    columns: Arc<[String]>,
    values: Vec<Value>,
}

impl Row {
    pub fn new(columns: Arc<[String]>, values: Vec<Value>) -> Self {
        Self { columns, values }
    }

    /// Column names and values, in select order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.columns.iter().map(String::as_str).zip(self.values.iter())
    }

    pub fn value(&self, column: &str) -> Result<&Value, StoreError> {
        self.columns
            .iter()
            .position(|c| c == column)
            .and_then(|i| self.values.get(i))
            .ok_or_else(|| StoreError::new("decode", format!("no column `{column}` in result")))
    }

    pub fn i64(&self, column: &str) -> Result<i64, StoreError> {
        match self.value(column)? {
            Value::Int(v) => Ok(*v),
            Value::Real(v) if v.fract() == 0.0 => Ok(*v as i64),
            Value::Text(s) => s.parse().map_err(|_| decode(column, "integer", s)),
            other => Err(decode(column, "integer", other)),
        }
    }

    pub fn opt_i64(&self, column: &str) -> Result<Option<i64>, StoreError> {
        match self.value(column)? {
            Value::Null => Ok(None),
            _ => self.i64(column).map(Some),
        }
    }

    pub fn f64(&self, column: &str) -> Result<f64, StoreError> {
        match self.value(column)? {
            Value::Real(v) => Ok(*v),
            Value::Int(v) => Ok(*v as f64),
            Value::Text(s) => s.parse().map_err(|_| decode(column, "number", s)),
            other => Err(decode(column, "number", other)),
        }
    }

    pub fn opt_f64(&self, column: &str) -> Result<Option<f64>, StoreError> {
        match self.value(column)? {
            Value::Null => Ok(None),
            _ => self.f64(column).map(Some),
        }
    }

    pub fn text(&self, column: &str) -> Result<String, StoreError> {
        match self.value(column)? {
            Value::Text(s) => Ok(s.clone()),
            Value::Int(v) => Ok(v.to_string()),
            Value::Real(v) => Ok(v.to_string()),
            Value::Blob(b) => String::from_utf8(b.clone()).map_err(|_| decode(column, "text", "non-UTF-8 blob")),
            Value::Null => Err(decode(column, "text", "NULL")),
        }
    }

    pub fn opt_text(&self, column: &str) -> Result<Option<String>, StoreError> {
        match self.value(column)? {
            Value::Null => Ok(None),
            _ => self.text(column).map(Some),
        }
    }

    pub fn blob(&self, column: &str) -> Result<Vec<u8>, StoreError> {
        match self.value(column)? {
            Value::Blob(b) => Ok(b.clone()),
            Value::Text(s) => Ok(s.clone().into_bytes()),
            other => Err(decode(column, "blob", other)),
        }
    }
}

fn decode(column: &str, want: &str, got: impl std::fmt::Debug) -> StoreError {
    StoreError::new("decode", format!("column `{column}`: expected {want}, got {got:?}"))
}

/// Which SQL backend a [`Sql`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlKind {
    Sqlite,
    Postgres,
}

impl SqlKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SqlKind::Sqlite => "sqlite",
            SqlKind::Postgres => "postgres",
        }
    }
}

/// A failure that may only echo an earlier one in the same transaction
/// (Postgres: `current transaction is aborted`, SQLSTATE 25P02).
pub trait Echo {
    fn echoes_earlier_failure(&self) -> bool;
}

/// Whether a failure's message is Postgres refusing a statement because an
/// earlier one failed.
pub fn echoes(message: &str) -> bool {
    message.contains("(25P02)")
}

impl Echo for StoreError {
    fn echoes_earlier_failure(&self) -> bool {
        echoes(&self.message)
    }
}

/// The failure to report of those a transaction's concurrent pieces met:
/// the first that is not an echo, else the first.
pub fn cause<E: Echo>(mut failed: Vec<E>) -> Option<E> {
    match failed.iter().position(|e| !e.echoes_earlier_failure()) {
        Some(i) => Some(failed.swap_remove(i)),
        None => failed.into_iter().next(),
    }
}

/// One piece of work for [`Sql::all`].
pub type Piece<'a, E = StoreError> = futures::future::LocalBoxFuture<'a, Result<(), E>>;

/// An open SQL connection, and how long each of its statements may take.
pub struct Sql {
    conn: Conn,
    deadline: std::cell::Cell<Duration>,
}

enum Conn {
    Sqlite(sqlite::Connection),
    Postgres(pg::Connection),
}

impl Sql {
    pub async fn open_sqlite(label: &str) -> Result<Self, StoreError> {
        let conn = within(SQLITE_DEADLINE, "opening the SQLite database", async {
            sqlite::Connection::open(label).await.map_err(sqlite_error)
        })
        .await?;
        let sql = Self { conn: Conn::Sqlite(conn), deadline: SQLITE_DEADLINE.into() };
        // Readers beside the writer, under any runner: `mneme up` opens the
        // file in WAL mode; Spin does not, and there readers and writers
        // locked each other out under concurrent writes (#50). The mode is
        // kept in the file, so one instance's switch serves every later
        // one; a switch refused while another connection holds the file is
        // tried again by the next instance.
        static WAL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !WAL.load(std::sync::atomic::Ordering::Relaxed)
            && sql.query("PRAGMA journal_mode = WAL", &[]).await.is_ok_and(|r| {
                r.first().and_then(|r| r.text("journal_mode").ok()).is_some_and(|m| m.eq_ignore_ascii_case("wal"))
            })
        {
            WAL.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(sql)
    }

    pub async fn open_postgres(url: &str) -> Result<Self, StoreError> {
        let url = with_deadlines(url);
        let started = std::time::Instant::now();
        loop {
            let opened = within(DEADLINE, "connecting to PostgreSQL", async {
                pg::Connection::open(&url).await.map_err(pg_sdk_error)
            })
            .await;
            match opened {
                Ok(conn) => return Ok(Self { conn: Conn::Postgres(conn), deadline: DEADLINE.into() }),
                // The server answers; the app's connections are all in use by
                // other requests (a flood). Waiting in that queue is not
                // waiting on a silent server, so wait longer (D-F19).
                Err(e) if pool_busy(&e) && started.elapsed() < POOL_QUEUE => continue,
                Err(e) => return Err(e),
            }
        }
    }

    pub fn kind(&self) -> SqlKind {
        match self.conn {
            Conn::Sqlite(_) => SqlKind::Sqlite,
            Conn::Postgres(_) => SqlKind::Postgres,
        }
    }

    /// Sets how long each later statement may take (migrations take longer
    /// than the [`DEADLINE`] every other statement gets).
    pub fn set_deadline(&self, d: Duration) {
        self.deadline.set(d);
    }

    /// Runs a statement that returns rows.
    pub async fn query(&self, statement: &str, params: &[Value]) -> Result<Vec<Row>, StoreError> {
        storable(params)?;
        within(self.deadline.get(), "the database", self.query_now(statement, params)).await
    }

    async fn query_now(&self, statement: &str, params: &[Value]) -> Result<Vec<Row>, StoreError> {
        match &self.conn {
            Conn::Sqlite(c) => {
                let res = c
                    .execute(sqlite_placeholders(statement), params.iter().map(to_sqlite))
                    .await
                    .map_err(sqlite_error)?;
                let columns: Arc<[String]> = res.columns().to_vec().into();
                let rows = res.collect().await.map_err(sqlite_error)?;
                Ok(rows
                    .into_iter()
                    .map(|r| Row::new(columns.clone(), r.values.into_iter().map(from_sqlite).collect()))
                    .collect())
            }
            Conn::Postgres(c) => {
                let params: Vec<pg::ParameterValue> = params.iter().map(to_pg).collect();
                let res = c.query(statement, params).await.map_err(pg_sdk_error)?;
                let columns: Arc<[String]> = res.columns().iter().map(|c| c.name.clone()).collect();
                let rows = res.collect().await.map_err(pg_sdk_error)?;
                Ok(rows
                    .into_iter()
                    .map(|r| {
                        let values = (0..columns.len()).map(|i| from_pg(&r[i])).collect();
                        Row::new(columns.clone(), values)
                    })
                    .collect())
            }
        }
    }

    /// Runs a statement that returns no rows; returns the number of rows changed.
    pub async fn execute(&self, statement: &str, params: &[Value]) -> Result<u64, StoreError> {
        storable(params)?;
        within(self.deadline.get(), "the database", self.execute_now(statement, params)).await
    }

    async fn execute_now(&self, statement: &str, params: &[Value]) -> Result<u64, StoreError> {
        match &self.conn {
            Conn::Sqlite(c) => {
                let res = c
                    .execute(sqlite_placeholders(statement), params.iter().map(to_sqlite))
                    .await
                    .map_err(sqlite_error)?;
                res.collect().await.map_err(sqlite_error)?;
                Ok(c.changes().await)
            }
            Conn::Postgres(c) => {
                let params: Vec<pg::ParameterValue> = params.iter().map(to_pg).collect();
                c.execute(statement, params).await.map_err(pg_sdk_error)
            }
        }
    }

    /// Runs independent pieces of work on this connection and reports the
    /// first failure, once every piece has finished. On
    /// Postgres the pieces run concurrently: the connection pipelines their
    /// statements, so the pieces wait about as long as the slowest one rather
    /// than their sum. On SQLite, whose connection runs one statement at a
    /// time and counts changed rows per connection, they run one after
    /// another in the order given. A piece may be several statements in
    /// sequence, but no piece may depend on another's writes.
    pub async fn all<'a, E: Echo>(&self, pieces: Vec<Piece<'a, E>>) -> Result<(), E> {
        match self.kind() {
            SqlKind::Postgres => {
                // After a failure Postgres refuses every later statement of the
                // transaction; the failure that caused it is the one to report,
                // whichever piece it came from.
                let failed = futures::future::join_all(pieces).await.into_iter().filter_map(Result::err).collect();
                cause(failed).map_or(Ok(()), Err)
            }
            SqlKind::Sqlite => {
                for p in pieces {
                    p.await?;
                }
                Ok(())
            }
        }
    }

    /// `BEGIN IMMEDIATE`, waiting its turn: a runner's SQLite may answer
    /// "database is locked" at once or after its own busy timeout (Spin's is
    /// rusqlite's 5 s, with growing sleeps) while other writers hold the
    /// file. Nothing has been done yet, so it is tried again, with a short
    /// pause, until the SQLite deadline.
    async fn begin_immediate(&self) -> Result<(), StoreError> {
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(5);
        loop {
            match self.execute("BEGIN IMMEDIATE", &[]).await {
                // Another try only if it can end within the deadline: one
                // may wait out SQLite's own busy timeout first.
                Err(e) if busy(&e) && started.elapsed() + pause + BUSY_TRY <= SQLITE_DEADLINE => {
                    spin_sdk::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                // A local file answers at once unless a writer holds it: a
                // `BEGIN IMMEDIATE` that outwaits the deadline (a runner that
                // queues writers itself, as `mneme up` does) waited for the
                // lock, and says so as SQLite would (D-F38).
                Err(e) if did_not_answer(&e) => {
                    return Err(StoreError::new(
                        "store-busy",
                        format!("database is locked: another writer held it past the {SQLITE_DEADLINE:?} wait"),
                    ));
                }
                other => return other.map(|_| ()),
            }
        }
    }

    /// Runs `body` inside a transaction: committed when it returns `Ok`,
    /// rolled back otherwise. On SQLite the transaction takes the write lock
    /// up front (`BEGIN IMMEDIATE`) so two writers never deadlock on upgrade.
    ///
    /// On Postgres `BEGIN` is pipelined with the body's first statements
    /// instead of costing a round trip of its own: it is issued first, and
    /// the body starts at once. The `mneme` runner sends a connection's
    /// statements in the order they were issued; Spin sends their Parse in
    /// that order, and `BEGIN` has no parameter types to look up that could
    /// hold its execution back behind a later statement (D-F16). `BEGIN`
    /// cannot fail on a connection where the body's statements succeed, but
    /// if it ever did, the failure is returned.
    pub async fn transaction<T>(&self, body: impl AsyncFnOnce(&Sql) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let out = match self.kind() {
            SqlKind::Sqlite => {
                self.begin_immediate().await?;
                body(self).await
            }
            SqlKind::Postgres => match futures::join!(self.execute("BEGIN", &[]), body(self)) {
                (Ok(_), out) => out,
                (Err(e), _) => Err(e),
            },
        };
        match out {
            Ok(v) => {
                self.execute("COMMIT", &[]).await?;
                Ok(v)
            }
            Err(e) => {
                // The original error is what the caller needs; a failed
                // rollback leaves the connection closed with the request. A
                // store that did not answer gets no rollback to wait for: the
                // host closes the connection, which ends the transaction.
                // One that answered with a bound of its own (a lock wait, a
                // cancelled statement) still answers, and goes back clean.
                if !did_not_answer(&e) {
                    let _ = within(ROLLBACK_WAIT, "rolling back", self.execute_now("ROLLBACK", &[])).await;
                }
                Err(e)
            }
        }
    }
}

/// Rewrites `$N` placeholders to SQLite's positional `?N`, leaving string
/// literals, quoted identifiers and comments untouched.
pub fn sqlite_placeholders(sql: &str) -> String {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    i += 1;
                }
                i += 1;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'$' if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                out.push_str(&sql[copied..i]);
                out.push('?');
                i += 1;
                copied = i;
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied.min(sql.len())..]);
    out
}

fn to_sqlite(v: &Value) -> sqlite::Value {
    match v {
        Value::Null => sqlite::Value::Null,
        Value::Int(i) => sqlite::Value::Integer(*i),
        Value::Real(f) => sqlite::Value::Real(*f),
        Value::Text(s) => sqlite::Value::Text(s.clone()),
        Value::Blob(b) => sqlite::Value::Blob(b.clone()),
    }
}

fn from_sqlite(v: sqlite::Value) -> Value {
    match v {
        sqlite::Value::Null => Value::Null,
        sqlite::Value::Integer(i) => Value::Int(i),
        sqlite::Value::Real(f) => Value::Real(f),
        sqlite::Value::Text(s) => Value::Text(s),
        sqlite::Value::Blob(b) => Value::Blob(b),
    }
}

fn to_pg(v: &Value) -> pg::ParameterValue {
    match v {
        Value::Null => pg::ParameterValue::DbNull,
        Value::Int(i) => pg::ParameterValue::Int64(*i),
        Value::Real(f) => pg::ParameterValue::Floating64(*f),
        Value::Text(s) => pg::ParameterValue::Str(s.clone()),
        Value::Blob(b) => pg::ParameterValue::Binary(b.clone()),
    }
}

fn from_pg(v: &pg::DbValue) -> Value {
    use pg::DbValue as D;
    match v {
        D::DbNull => Value::Null,
        D::Boolean(b) => Value::Int(i64::from(*b)),
        D::Int8(i) => Value::Int(i64::from(*i)),
        D::Int16(i) => Value::Int(i64::from(*i)),
        D::Int32(i) => Value::Int(i64::from(*i)),
        D::Int64(i) => Value::Int(*i),
        D::Floating32(f) => Value::Real(f64::from(*f)),
        D::Floating64(f) => Value::Real(*f),
        D::Str(s) | D::Uuid(s) | D::Decimal(s) => Value::Text(s.clone()),
        D::Binary(b) => Value::Blob(b.clone()),
        D::Jsonb(b) => Value::Text(String::from_utf8_lossy(b).into_owned()),
        D::Timestamp(t) => Value::Int(*t),
        other => Value::Text(format!("{other:?}")),
    }
}

/// Whether SQLite refused because another connection holds the file.
fn busy(e: &StoreError) -> bool {
    e.code == "store-busy"
}

fn sqlite_error(e: sqlite::Error) -> StoreError {
    use sqlite::Error as E;
    match e {
        E::NoSuchDatabase => StoreError::new("config", "no such SQLite database label"),
        E::AccessDenied => StoreError::new("access-denied", "this component may not open that SQLite database"),
        E::InvalidConnection => StoreError::new("store-unavailable", "invalid SQLite connection"),
        E::DatabaseFull => StoreError::new("store-unavailable", "the SQLite database is full"),
        E::Io(msg) if msg.contains("constraint") => StoreError::new("conflict", msg),
        // SQLite's SQLITE_BUSY and SQLITE_LOCKED, which reach a guest only
        // as their text: "database is locked", "database table is locked",
        // "database is busy".
        E::Io(msg) if msg.contains("locked") || msg.contains("busy") => StoreError::new("store-busy", msg),
        E::Io(msg) => StoreError::new("bad-sql", msg),
    }
}

fn pg_sdk_error(e: pg::Error) -> StoreError {
    match e {
        pg::Error::PgError(e) => pg_error(e),
        pg::Error::Decode(m) => StoreError::new("decode", m),
    }
}

/// Why PostgreSQL ended a statement that was not at fault (a bound of the
/// session's, D-F19, or the server going away), by SQLSTATE; none for an
/// error of the statement's own.
pub fn server_gave_up(code: &str) -> Option<&'static str> {
    Some(match code {
        "55P03" => "waited 3.8 s (lock_timeout) for a lock another writer holds",
        "40P01" => "ended the transaction to break a deadlock with another writer",
        "57014" => "cancelled the statement (its time limit, or an operator)",
        "25P03" => "ended a transaction left idle",
        "57P01" | "57P02" | "57P03" => "is shutting down or not yet accepting connections",
        "53300" => "has no connection slot free",
        c if c.starts_with("08") => "lost the connection",
        _ => return None,
    })
}

/// The code of a statement the server ended ([`server_gave_up`]): a lock
/// another writer held past `lock_timeout`, or a deadlock with another
/// writer whose victim this transaction was (rolled back whole), is
/// `store-busy`, as SQLite's held file is (D-F38); the rest,
/// `store-unavailable`.
fn gave_up_code(sqlstate: &str) -> &'static str {
    if sqlstate == "55P03" || sqlstate == "40P01" { "store-busy" } else { "store-unavailable" }
}

fn pg_error(e: pg::PgError) -> StoreError {
    use pg::PgError as E;
    match e {
        E::ConnectionFailed(m) => StoreError::new("store-unavailable", format!("Postgres: {m}")),
        E::BadParameter(m) | E::ValueConversionFailed(m) => StoreError::new("bad-sql", m),
        E::QueryFailed(pg::QueryError::DbError(d)) if d.code.starts_with("23") => {
            StoreError::new("conflict", format!("{} ({})", d.message, d.code))
        }
        E::QueryFailed(pg::QueryError::DbError(d)) if server_gave_up(&d.code).is_some() => StoreError::new(
            gave_up_code(&d.code),
            format!("PostgreSQL {}: {} ({})", server_gave_up(&d.code).unwrap_or_default(), d.message, d.code),
        ),
        E::QueryFailed(pg::QueryError::DbError(d)) => StoreError::new("bad-sql", format!("{} ({})", d.message, d.code)),
        E::QueryFailed(pg::QueryError::Text(m)) => StoreError::new("bad-sql", m),
        E::Other(m) if m.contains("not permitted") || m.contains("not allowed") => StoreError::new("access-denied", m),
        E::Other(m) => StoreError::new("store-unavailable", m),
    }
}

#[cfg(test)]
mod tests {
    use super::sqlite_placeholders as rw;

    #[test]
    fn postgres_addresses_get_the_bounds_they_do_not_set_in_either_form() {
        use super::{conninfo_pairs, with_deadlines as w};
        const O: &str = "-c%20statement_timeout%3D3900%20-c%20lock_timeout%3D3800%20-c%20idle_in_transaction_session_timeout%3D10000";
        const KV: &str = "'-c statement_timeout=3900 -c lock_timeout=3800 -c idle_in_transaction_session_timeout=10000";
        let cases = [
            ("postgres://u@h:5432/db", format!("postgres://u@h:5432/db?connect_timeout=3&options={O}")),
            (
                "postgresql://h/db?sslmode=disable",
                format!("postgresql://h/db?sslmode=disable&connect_timeout=3&options={O}"),
            ),
            ("postgres://h/db?connect_timeout=9", format!("postgres://h/db?connect_timeout=9&options={O}")),
            (
                "postgres://h/db?options=-c%20statement_timeout%3D1000",
                format!("postgres://h/db?options={O}%20-c%20statement_timeout%3D1000&connect_timeout=3"),
            ),
            ("host=h dbname=db", format!("host=h dbname=db connect_timeout=3 options={KV}'")),
            ("host = h  connect_timeout=9", format!("host=h connect_timeout=9 options={KV}'")),
            (
                r"host=h options='-c search_path=it\'s' password=a\ b",
                format!(r"host=h options={KV} -c search_path=it\'s' password='a b' connect_timeout=3"),
            ),
            (
                "host=127.0.0.1 user=postgres dbname=t_1 application_name=mneme-health",
                format!(
                    "host=127.0.0.1 user=postgres dbname=t_1 application_name=mneme-health connect_timeout=3 options={KV}'"
                ),
            ),
        ];
        for (given, want) in cases {
            let got = w(given);
            assert_eq!(got, want, "{given}");
            if !given.starts_with("postgres") {
                // What libpq reads back: every key the address gave, and ours.
                let back = conninfo_pairs(&got).unwrap();
                for (k, v) in conninfo_pairs(given).unwrap() {
                    let now = &back.iter().find(|(b, _)| *b == k).unwrap().1;
                    assert!(if k == "options" { now.ends_with(&v) } else { *now == v }, "{k}: {now}");
                }
                assert!(back.iter().any(|(k, v)| k == "options" && v.starts_with("-c statement_timeout=3900")));
            }
        }
        assert_eq!(w("host='unterminated"), "host='unterminated", "an address that does not parse is kept");
    }

    #[test]
    fn text_with_nul_is_refused_on_both_backends_alike() {
        use super::{Value, storable};
        assert!(storable(&[Value::Text("a b".into()), Value::Blob(vec![0, 1]), Value::Int(0)]).is_ok());
        let e = storable(&[Value::Int(1), Value::Text("a\0b".into())]).unwrap_err();
        assert_eq!(e.code, "invalid");
    }

    #[test]
    fn the_servers_own_bounds_are_unavailability_not_bad_sql() {
        use super::server_gave_up as g;
        for code in ["55P03", "40P01", "57014", "25P03", "57P01", "57P03", "53300", "08006", "08003"] {
            assert!(g(code).is_some(), "{code}");
        }
        assert!(g("55P03").unwrap().contains("lock"));
        assert!(g("40P01").unwrap().contains("deadlock"));
        assert_eq!((super::gave_up_code("40P01"), super::gave_up_code("57014")), ("store-busy", "store-unavailable"));
        for code in ["42601", "23505", "22P02", "40001", "XX000"] {
            assert_eq!(g(code), None, "{code} is the statement's own error");
        }
    }

    #[test]
    fn a_store_another_writer_holds_is_busy_on_both_backends() {
        use spin_sdk::sqlite::Error as E;
        for msg in ["database is locked", "database table is locked", "database is busy"] {
            assert_eq!(super::sqlite_error(E::Io(msg.into())).code, "store-busy", "{msg}");
        }
        assert_eq!(super::sqlite_error(E::Io("no such table: x".into())).code, "bad-sql");
        assert_eq!(super::sqlite_error(E::DatabaseFull).code, "store-unavailable");
        assert_eq!(super::gave_up_code("55P03"), "store-busy");
        for code in ["57014", "25P03", "57P01", "53300", "08006"] {
            assert_eq!(super::gave_up_code(code), "store-unavailable", "{code}");
        }
    }

    #[test]
    fn the_cause_of_a_failed_transaction_is_not_an_echo() {
        use super::{StoreError, cause};
        let echo = || StoreError::new("bad-sql", "current transaction is aborted (25P02)");
        let real = StoreError::new("conflict", "duplicate key value (23505)");
        assert_eq!(cause(vec![echo(), real.clone(), echo()]).unwrap().code, "conflict");
        assert_eq!(cause(vec![echo(), echo()]).unwrap().code, "bad-sql");
        assert!(cause(Vec::<StoreError>::new()).is_none());
    }

    #[test]
    fn rewrites_numbered_placeholders() {
        assert_eq!(rw("SELECT * FROM t WHERE a = $1 AND b = $12"), "SELECT * FROM t WHERE a = ?1 AND b = ?12");
    }

    #[test]
    fn leaves_literals_and_comments_alone() {
        assert_eq!(rw("SELECT '$1', \"$2\" -- $3\n, $4"), "SELECT '$1', \"$2\" -- $3\n, ?4");
    }

    #[test]
    fn leaves_non_numeric_dollars_alone() {
        assert_eq!(rw("SELECT $a, $"), "SELECT $a, $");
    }
}
