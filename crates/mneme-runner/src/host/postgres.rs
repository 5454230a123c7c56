//! `spin:postgres/postgres@4.2.0` over tokio-postgres, with one connection
//! pool per address (as Spin pools them). The address must be allowed by
//! `allowed_outbound_hosts` as `postgres://host:port`. A connection that goes
//! back to the pool is rolled back first, so a guest that dropped its
//! connection mid-transaction cannot leave a transaction open for the next.
//!
//! Nothing waits on the server without a deadline: checking a connection
//! out of the pool (4 s), connecting (3 s), rolling back (2 s). A statement
//! takes as long as the guest waits for it; one the guest stopped waiting for
//! marks its connection broken, and a broken connection is closed rather
//! than pooled, so a server that went silent cannot hand its silence to the
//! next request.
//!
//! TLS is not offered: `sslmode=disable` or `prefer` (the default) connect
//! in plain text; `sslmode=require` fails with a clear error.

// The error type is the WIT `error` variant, handed to the guest as it is.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::types::{ToSql, Type};
use wasmtime::component::{Accessor, FutureReader, Resource, StreamReader};

use super::spin::postgres::postgres::{
    Column, DbDataType, DbError, DbValue, Error, HostConnection, HostConnectionBuilder, HostConnectionBuilderWithStore,
    HostConnectionWithStore, ParameterValue, QueryError, RowSet,
};
use super::{Spin, SpinView, with_view};

/// Connections per address (Spin keeps 64; 32 leaves room on a default
/// PostgreSQL's 100 for a second runner and the health checks' own pool).
const POOL_SIZE: usize = 32;
/// How long a request waits for a pooled connection to be free.
const POOL_WAIT: std::time::Duration = std::time::Duration::from_secs(4);
/// How long connecting (TCP, startup and authentication) may take.
const CONNECT_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Pools keyed by connection address.
#[derive(Default)]
pub struct PgPools {
    pools: Mutex<HashMap<String, Pool>>,
}

impl PgPools {
    fn pool(&self, address: &str) -> Result<Pool, Error> {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = pools.get(address) {
            return Ok(p.clone());
        }
        let config = tokio_postgres::Config::from_str(address).map_err(|e| Error::ConnectionFailed(e.to_string()))?;
        if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            return Err(Error::ConnectionFailed(
                "sslmode=require is not supported by the mneme runner; use sslmode=disable on a trusted network".into(),
            ));
        }
        let mut config = config;
        // Deadlines a dead or silent server cannot outwait (D-F19); an
        // address that sets its own keeps it.
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_WAIT);
        }
        config.keepalives(true).keepalives_idle(std::time::Duration::from_secs(30));
        #[cfg(target_os = "linux")]
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(std::time::Duration::from_secs(10));
        }
        let mgr = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            // No query on checkout: a connection a guest left inside a
            // transaction is rolled back when its handle drops (below), and a
            // closed one is noticed without a round trip.
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(mgr)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(CONNECT_WAIT))
            .recycle_timeout(Some(std::time::Duration::from_secs(1)))
            .build()
            .map_err(|e| Error::ConnectionFailed(e.to_string()))?;
        pools.insert(address.to_string(), pool.clone());
        Ok(pool)
    }
}

/// Checks the address against `allowed_outbound_hosts`, refusing in Spin's
/// words (`crates/factor-outbound-pg`, `ensure_address_allowed`): a host is
/// named with the port at its index, or the only port given, or none.
fn allowed(v: &SpinView<'_>, address: &str) -> Result<(), Error> {
    let config = tokio_postgres::Config::from_str(address).map_err(|e| Error::ConnectionFailed(e.to_string()))?;
    let ports = config.get_ports();
    for (i, host) in config.get_hosts().iter().enumerate() {
        let name = match host {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            #[cfg(unix)]
            tokio_postgres::config::Host::Unix(_) => {
                return Err(Error::ConnectionFailed("Unix sockets are not supported on WebAssembly".into()));
            }
        };
        let given = ports.get(i).or(if ports.len() == 1 { ports.first() } else { None });
        let url = format!("{name}{}", given.map(|p| format!(":{p}")).unwrap_or_default());
        if !v.ctx.caps.allowed_hosts.allows("postgres", &name, given.copied().unwrap_or(5432)) {
            crate::outbound::log_denied(&format!("postgres://{url}"));
            return Err(Error::ConnectionFailed(format!("address postgres://{url} is not permitted")));
        }
    }
    Ok(())
}

/// A pooled connection, shared by the guest's handle and its statements in
/// flight, with what the host knows about its state.
pub struct Client {
    obj: Option<deadpool_postgres::Object>,
    /// The guest has a transaction open (set by `BEGIN`, cleared by `COMMIT`
    /// or `ROLLBACK`).
    in_transaction: std::sync::atomic::AtomicBool,
    /// A statement was abandoned before its answer came (the guest gave up
    /// on it): the connection may still owe that answer, or the server may
    /// not be answering at all, so it never goes back to the pool.
    broken: std::sync::atomic::AtomicBool,
}

impl std::ops::Deref for Client {
    type Target = deadpool_postgres::ClientWrapper;
    fn deref(&self) -> &Self::Target {
        self.obj.as_ref().expect("present until dropped")
    }
}

impl Drop for Client {
    /// The last holder of a connection decides where it goes: a broken one
    /// is closed; one left inside a transaction (a guest that trapped or
    /// returned mid-transaction) is rolled back first, and closed if the
    /// rollback does not answer within [`ROLLBACK_WAIT`]; any other goes
    /// back to the pool.
    fn drop(&mut self) {
        use std::sync::atomic::Ordering::SeqCst;
        let Some(obj) = self.obj.take() else { return };
        if self.broken.load(SeqCst) {
            // The server went silent on this connection: the idle ones
            // beside it are likely as dead and would each cost the next
            // requests a full deadline, so they are closed too, and the pool
            // connects afresh (recovery is at once when the server is back).
            if let Some(pool) = deadpool_postgres::Object::pool(&obj) {
                pool.retain(|_, _| false);
            }
            drop(deadpool_postgres::Object::take(obj));
            return;
        }
        if self.in_transaction.load(SeqCst)
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move {
                if !matches!(tokio::time::timeout(ROLLBACK_WAIT, obj.batch_execute("ROLLBACK")).await, Ok(Ok(()))) {
                    drop(deadpool_postgres::Object::take(obj));
                }
            });
        }
    }
}

/// How long a connection may take to roll back before it is closed instead.
const ROLLBACK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Marks the connection broken unless [`Unanswered::answered`] is called:
/// held across a statement, so a statement the guest stops waiting for (its
/// future dropped) leaves the mark.
struct Unanswered<'a>(&'a std::sync::atomic::AtomicBool);

impl Unanswered<'_> {
    fn answered(self) {
        std::mem::forget(self);
    }
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// An open pooled connection.
///
/// A guest may have several statements in flight on one connection (its
/// `query` and `execute` imports are async); tokio-postgres pipelines them.
/// `send` makes them reach the server in the order the guest issued them:
/// each call holds it, first come first served, until its statement is
/// prepared and sent, so a statement that needs a prepare round trip is not
/// overtaken by a later one that is already prepared.
#[derive(Clone)]
pub struct PgHandle {
    client: Arc<Client>,
    send: Arc<tokio::sync::Mutex<()>>,
}

fn note_transaction(flag: &std::sync::atomic::AtomicBool, sql: &str) {
    let head: String = sql.trim_start().chars().take(8).collect::<String>().to_ascii_uppercase();
    if head.starts_with("BEGIN") || head.starts_with("START") {
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    } else if head.starts_with("COMMIT")
        || head.starts_with("ROLLBACK")
        || head.starts_with("END")
        || head.starts_with("ABORT")
    {
        flag.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A connection builder (`connection-builder` resource).
pub struct PgBuilder {
    address: String,
}

impl PgBuilder {
    pub fn new(address: String) -> Self {
        Self { address }
    }
}

async fn connect(pools: &PgPools, address: &str) -> Result<PgHandle, Error> {
    let pool = pools.pool(address)?;
    let client = pool.get().await.map_err(|e| Error::ConnectionFailed(checkout_error(&e)))?;
    Ok(PgHandle {
        client: Arc::new(Client { obj: Some(client), in_transaction: false.into(), broken: false.into() }),
        send: Arc::new(tokio::sync::Mutex::new(())),
    })
}

/// What a failed checkout says: which deadline passed, or why connecting failed.
fn checkout_error(e: &deadpool_postgres::PoolError) -> String {
    use deadpool_postgres::{PoolError, TimeoutType};
    match e {
        PoolError::Timeout(TimeoutType::Wait) => {
            format!("no connection was free within {} s (all {POOL_SIZE} in use)", POOL_WAIT.as_secs())
        }
        PoolError::Timeout(TimeoutType::Create) => {
            format!("the server did not complete a connection within {} s", CONNECT_WAIT.as_secs())
        }
        PoolError::Timeout(TimeoutType::Recycle) => "a pooled connection did not answer its check".into(),
        other => other.to_string(),
    }
}

/// SQL NULL for a parameter of any type (a typed `None` would fix the type).
#[derive(Debug)]
struct Null;

impl ToSql for Null {
    fn to_sql(
        &self,
        _: &Type,
        _: &mut bytes::BytesMut,
    ) -> Result<tokio_postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        Ok(tokio_postgres::types::IsNull::Yes)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

fn params(values: &[ParameterValue]) -> Result<Vec<Box<dyn ToSql + Sync + Send>>, Error> {
    values
        .iter()
        .map(|p| -> Result<Box<dyn ToSql + Sync + Send>, Error> {
            Ok(match p {
                ParameterValue::Boolean(v) => Box::new(*v),
                ParameterValue::Int8(v) => Box::new(*v),
                ParameterValue::Int16(v) => Box::new(*v),
                ParameterValue::Int32(v) => Box::new(*v),
                ParameterValue::Int64(v) => Box::new(*v),
                ParameterValue::Floating32(v) => Box::new(*v),
                ParameterValue::Floating64(v) => Box::new(*v),
                ParameterValue::Str(v) => Box::new(v.clone()),
                ParameterValue::Binary(v) => Box::new(v.clone()),
                ParameterValue::Jsonb(v) => Box::new(
                    serde_json::from_slice::<serde_json::Value>(v)
                        .map_err(|e| Error::BadParameter(format!("jsonb: {e}")))?,
                ),
                ParameterValue::Timestamp(v) => Box::new(
                    chrono::DateTime::from_timestamp(*v, 0)
                        .ok_or_else(|| Error::BadParameter("timestamp out of range".into()))?
                        .naive_utc(),
                ),
                ParameterValue::DbNull => Box::new(Null),
                other => {
                    return Err(Error::BadParameter(format!(
                        "parameter type not supported by the mneme runner: {other:?}"
                    )));
                }
            })
        })
        .collect()
}

fn data_type(t: &Type) -> DbDataType {
    match *t {
        Type::BOOL => DbDataType::Boolean,
        Type::CHAR => DbDataType::Int8,
        Type::INT2 => DbDataType::Int16,
        Type::INT4 => DbDataType::Int32,
        Type::INT8 => DbDataType::Int64,
        Type::FLOAT4 => DbDataType::Floating32,
        Type::FLOAT8 => DbDataType::Floating64,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => DbDataType::Str,
        Type::BYTEA => DbDataType::Binary,
        Type::JSONB | Type::JSON => DbDataType::Jsonb,
        Type::TIMESTAMP | Type::TIMESTAMPTZ => DbDataType::Datetime,
        Type::DATE => DbDataType::Date,
        _ => DbDataType::Other(t.name().to_string()),
    }
}

fn value(row: &tokio_postgres::Row, i: usize) -> Result<DbValue, Error> {
    use chrono::Datelike;
    let t = row.columns()[i].type_().clone();
    let conv = |e: tokio_postgres::Error| Error::ValueConversionFailed(format!("column {i}: {e}"));
    macro_rules! get {
        ($ty:ty, $variant:expr) => {
            row.try_get::<_, Option<$ty>>(i).map_err(conv)?.map_or(DbValue::DbNull, $variant)
        };
    }
    Ok(match t {
        Type::BOOL => get!(bool, DbValue::Boolean),
        Type::CHAR => get!(i8, DbValue::Int8),
        Type::INT2 => get!(i16, DbValue::Int16),
        Type::INT4 => get!(i32, DbValue::Int32),
        Type::INT8 => get!(i64, DbValue::Int64),
        Type::FLOAT4 => get!(f32, DbValue::Floating32),
        Type::FLOAT8 => get!(f64, DbValue::Floating64),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => get!(String, DbValue::Str),
        Type::BYTEA => get!(Vec<u8>, DbValue::Binary),
        Type::JSONB | Type::JSON => {
            get!(serde_json::Value, |j: serde_json::Value| DbValue::Jsonb(j.to_string().into_bytes()))
        }
        Type::TIMESTAMP => get!(chrono::NaiveDateTime, |d: chrono::NaiveDateTime| datetime(&d)),
        Type::TIMESTAMPTZ => get!(chrono::DateTime<chrono::Utc>, |d: chrono::DateTime<chrono::Utc>| datetime(&d)),
        Type::DATE => {
            get!(chrono::NaiveDate, |d: chrono::NaiveDate| DbValue::Date((d.year(), d.month() as u8, d.day() as u8)))
        }
        Type::VOID => DbValue::DbNull,
        _ => DbValue::Unsupported(Vec::new()),
    })
}

fn datetime(d: &(impl chrono::Datelike + chrono::Timelike)) -> DbValue {
    DbValue::Datetime((
        d.year(),
        d.month() as u8,
        d.day() as u8,
        d.hour() as u8,
        d.minute() as u8,
        d.second() as u8,
        d.nanosecond(),
    ))
}

fn query_error(e: tokio_postgres::Error) -> Error {
    if let Some(db) = e.as_db_error() {
        return Error::QueryFailed(QueryError::DbError(DbError {
            as_text: db.to_string(),
            severity: db.severity().to_string(),
            code: db.code().code().to_string(),
            message: db.message().to_string(),
            detail: db.detail().map(str::to_string),
            extras: Vec::new(),
        }));
    }
    if e.is_closed() {
        return Error::ConnectionFailed(e.to_string());
    }
    Error::QueryFailed(QueryError::Text(e.to_string()))
}

impl PgHandle {
    async fn query(&self, sql: &str, values: &[ParameterValue]) -> Result<RowSet, Error> {
        let unanswered = Unanswered(&self.client.broken);
        let result = async {
            let boxed = params(values)?;
            let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|b| b.as_ref() as &(dyn ToSql + Sync)).collect();
            let turn = self.send.lock().await;
            // Prepared once per pooled connection: a repeated query is then
            // one round trip instead of two (prepare + execute).
            let stmt = self.client.prepare_cached(sql).await.map_err(query_error)?;
            note_transaction(&self.client.in_transaction, sql);
            let columns = stmt
                .columns()
                .iter()
                .map(|c| Column { name: c.name().to_string(), data_type: data_type(c.type_()) })
                .collect();
            let rows = sent_in_turn(turn, self.client.query(&stmt, &refs)).await.map_err(query_error)?;
            let rows =
                rows.iter().map(|r| (0..r.len()).map(|i| value(r, i)).collect()).collect::<Result<Vec<_>, _>>()?;
            Ok(RowSet { columns, rows })
        }
        .await;
        unanswered.answered();
        result
    }

    async fn execute(&self, sql: &str, values: &[ParameterValue]) -> Result<u64, Error> {
        let unanswered = Unanswered(&self.client.broken);
        let result = async {
            let boxed = params(values)?;
            let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|b| b.as_ref() as &(dyn ToSql + Sync)).collect();
            let turn = self.send.lock().await;
            let stmt = self.client.prepare_cached(sql).await.map_err(query_error)?;
            let n = sent_in_turn(turn, self.client.execute(&stmt, &refs)).await.map_err(query_error)?;
            note_transaction(&self.client.in_transaction, sql);
            Ok(n)
        }
        .await;
        unanswered.answered();
        result
    }
}

/// Polls a tokio-postgres request once, which puts it on the connection's
/// queue, then lets the next statement take its turn while this one waits
/// for its answer.
async fn sent_in_turn<T>(turn: tokio::sync::MutexGuard<'_, ()>, request: impl std::future::Future<Output = T>) -> T {
    let mut request = std::pin::pin!(request);
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(request.as_mut().poll(cx))).await;
    drop(turn);
    match first {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => request.await,
    }
}

fn handle<T>(accessor: &Accessor<T, Spin>, res: &Resource<PgHandle>) -> wasmtime::Result<PgHandle> {
    with_view!(accessor, |v| Ok(v.table.get(res)?.clone()))
}

async fn open_with<T>(
    accessor: &Accessor<T, Spin>,
    address: String,
) -> wasmtime::Result<Result<Resource<PgHandle>, Error>> {
    let services = with_view!(accessor, |v| allowed(&v, &address).map(|_| v.ctx.services.clone()));
    let services = match services {
        Ok(s) => s,
        Err(e) => return Ok(Err(e)),
    };
    match connect(&services.pg, &address).await {
        Ok(h) => with_view!(accessor, |v| Ok(Ok(v.table.push(h)?))),
        Err(e) => Ok(Err(e)),
    }
}

impl<T> HostConnectionWithStore<T> for Spin {
    async fn open_async(
        accessor: &Accessor<T, Self>,
        address: String,
    ) -> wasmtime::Result<Result<Resource<PgHandle>, Error>> {
        open_with(accessor, address).await
    }

    async fn query_async(
        accessor: &Accessor<T, Self>,
        this: Resource<PgHandle>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> wasmtime::Result<Result<(Vec<Column>, StreamReader<Vec<DbValue>>, FutureReader<Result<(), Error>>), Error>>
    {
        let span = super::db_span(accessor, "spin_outbound_pg.query", "postgresql", &statement);
        let result = super::finish(span, handle(accessor, &this)?.query(&statement, &params).await);
        let RowSet { columns, rows } = match result {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        accessor.with(|mut access| {
            let stream = StreamReader::new(&mut access, rows)?;
            let done = FutureReader::new(&mut access, async { wasmtime::error::Ok(Ok(())) })?;
            Ok(Ok((columns, stream, done)))
        })
    }

    async fn execute_async(
        accessor: &Accessor<T, Self>,
        this: Resource<PgHandle>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> wasmtime::Result<Result<u64, Error>> {
        let span = super::db_span(accessor, "spin_outbound_pg.execute", "postgresql", &statement);
        Ok(super::finish(span, handle(accessor, &this)?.execute(&statement, &params).await))
    }
}

impl<T> HostConnectionBuilderWithStore<T> for Spin {
    async fn build_async(
        accessor: &Accessor<T, Self>,
        this: Resource<PgBuilder>,
    ) -> wasmtime::Result<Result<Resource<PgHandle>, Error>> {
        let address = with_view!(accessor, |v| Ok::<_, wasmtime::Error>(v.table.get(&this)?.address.clone()))?;
        open_with(accessor, address).await
    }
}

impl HostConnectionBuilder for SpinView<'_> {
    async fn new(&mut self, address: String) -> wasmtime::Result<Resource<PgBuilder>> {
        Ok(self.table.push(PgBuilder { address })?)
    }

    async fn set_ca_root(
        &mut self,
        _this: Resource<PgBuilder>,
        _certificate: String,
    ) -> wasmtime::Result<Result<(), Error>> {
        Ok(Err(Error::Other("custom CA roots need TLS, which the mneme runner does not offer".into())))
    }

    async fn build(&mut self, this: Resource<PgBuilder>) -> wasmtime::Result<Result<Resource<PgHandle>, Error>> {
        let address = self.table.get(&this)?.address.clone();
        self.open(address).await
    }

    async fn drop(&mut self, rep: Resource<PgBuilder>) -> wasmtime::Result<()> {
        self.table.delete(rep)?;
        Ok(())
    }
}

impl HostConnection for SpinView<'_> {
    async fn open(&mut self, address: String) -> wasmtime::Result<Result<Resource<PgHandle>, Error>> {
        if let Err(e) = allowed(self, &address) {
            return Ok(Err(e));
        }
        match connect(&self.ctx.services.pg, &address).await {
            Ok(h) => Ok(Ok(self.table.push(h)?)),
            Err(e) => Ok(Err(e)),
        }
    }

    async fn query(
        &mut self,
        this: Resource<PgHandle>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> wasmtime::Result<Result<RowSet, Error>> {
        let h = self.table.get(&this)?.clone();
        let span = self.ctx.db_span("spin_outbound_pg.query", "postgresql", &statement);
        Ok(super::finish(span, h.query(&statement, &params).await))
    }

    async fn execute(
        &mut self,
        this: Resource<PgHandle>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> wasmtime::Result<Result<u64, Error>> {
        let h = self.table.get(&this)?.clone();
        let span = self.ctx.db_span("spin_outbound_pg.execute", "postgresql", &statement);
        Ok(super::finish(span, h.execute(&statement, &params).await))
    }

    async fn drop(&mut self, rep: Resource<PgHandle>) -> wasmtime::Result<()> {
        self.table.delete(rep)?;
        Ok(())
    }
}

impl super::spin::postgres::postgres::Host for SpinView<'_> {}
