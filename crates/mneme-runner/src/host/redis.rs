//! `spin:redis/redis@3.0.0` (outbound Redis) over the `redis` crate, with
//! one multiplexed, reconnecting connection per address. The address must
//! be allowed by `allowed_outbound_hosts`; otherwise `open` fails with
//! `invalid-address`, as in Spin.

use std::collections::HashMap;
use std::sync::Arc;

use ::redis::aio::ConnectionManager;
use tokio::sync::Mutex;
use wasmtime::component::{Accessor, Resource};

use super::spin::redis::redis::{Error, HostConnection, HostConnectionWithStore, RedisParameter, RedisResult};
use super::{Spin, SpinView, with_view};

#[derive(Default)]
pub struct RedisPools {
    links: Mutex<HashMap<String, Arc<Link>>>,
}

impl RedisPools {
    async fn get(&self, address: &str) -> Result<Arc<Link>, Error> {
        let mut links = self.links.lock().await;
        if let Some(l) = links.get(address) {
            return Ok(l.clone());
        }
        let link = Arc::new(Link::new(address).map_err(|_| Error::InvalidAddress)?);
        link.connection().await.map_err(|e| Error::Other(format!("connecting to Redis: {e}")))?;
        links.insert(address.to_string(), link.clone());
        Ok(link)
    }
}

/// Connecting and each command have deadlines, so a Redis that accepts and
/// never answers fails a command within 2 s (D-F19). A reconnect waits at
/// most 100 ms before its retry: the manager's own backoff starts at 1 s
/// plus jitter, and a command queued behind it waited up to 1.5 s after
/// Redis was back.
pub fn deadlines() -> ::redis::aio::ConnectionManagerConfig {
    ::redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(std::time::Duration::from_secs(2))
        .set_response_timeout(std::time::Duration::from_secs(2))
        .set_number_of_retries(1)
        .set_max_delay(100)
}

/// One multiplexed connection to a Redis address, made anew after a command
/// got no answer in time: the manager reconnects by itself only when the
/// socket closes, and a server that went silent leaves it open, every later
/// command queued behind the silence (D-F19).
pub struct Link {
    client: ::redis::Client,
    current: Mutex<Option<ConnectionManager>>,
}

impl Link {
    pub fn new(url: &str) -> ::redis::RedisResult<Self> {
        Ok(Self { client: ::redis::Client::open(url)?, current: Mutex::new(None) })
    }

    /// The live connection, connecting first if there is none. The lock is
    /// not held while connecting: against a Redis that refuses, a connect
    /// takes its retries (about 1.5 s) to fail, and a request made just
    /// after Redis came back waited that long behind one begun before
    /// (D-F33). The first connect to finish is kept; a racing one is dropped.
    pub async fn connection(&self) -> ::redis::RedisResult<ConnectionManager> {
        if let Some(c) = &*self.current.lock().await {
            return Ok(c.clone());
        }
        let c = ConnectionManager::new_with_config(self.client.clone(), deadlines()).await?;
        Ok(self.current.lock().await.get_or_insert(c).clone())
    }

    /// Runs `cmd`; a command that timed out or lost its connection makes the
    /// next one connect afresh.
    pub async fn query<R: ::redis::FromRedisValue>(&self, cmd: &::redis::Cmd) -> ::redis::RedisResult<R> {
        let mut c = self.connection().await?;
        let out = cmd.query_async(&mut c).await;
        if let Err(e) = &out
            && (e.is_timeout() || e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal())
        {
            *self.current.lock().await = None;
        }
        out
    }
}

#[derive(Clone)]
pub struct RedisHandle {
    link: Arc<Link>,
}

fn other(e: ::redis::RedisError) -> Error {
    if e.kind() == ::redis::ErrorKind::TypeError { Error::TypeError } else { Error::Other(e.to_string()) }
}

fn to_result(v: ::redis::Value) -> Vec<RedisResult> {
    use ::redis::Value as V;
    match v {
        V::Nil => vec![RedisResult::Nil],
        V::Int(i) => vec![RedisResult::Int64(i)],
        V::BulkString(b) => vec![RedisResult::Binary(b)],
        V::SimpleString(s) => vec![RedisResult::Status(s)],
        V::Okay => vec![RedisResult::Status("OK".into())],
        V::Array(items) | V::Set(items) => items.into_iter().flat_map(to_result).collect(),
        V::Double(d) => vec![RedisResult::Binary(d.to_string().into_bytes())],
        V::Boolean(b) => vec![RedisResult::Int64(i64::from(b))],
        V::Map(pairs) => pairs.into_iter().flat_map(|(k, v)| to_result(k).into_iter().chain(to_result(v))).collect(),
        V::VerbatimString { text, .. } => vec![RedisResult::Binary(text.into_bytes())],
        V::BigNumber(n) => vec![RedisResult::Binary(n.to_string().into_bytes())],
        V::Attribute { data, .. } => to_result(*data),
        V::Push { data, .. } => data.into_iter().flat_map(to_result).collect(),
        V::ServerError(e) => vec![RedisResult::Status(format!("{e:?}"))],
    }
}

impl RedisHandle {
    async fn cmd<R: ::redis::FromRedisValue>(&self, cmd: ::redis::Cmd) -> Result<R, Error> {
        self.link.query(&cmd).await.map_err(other)
    }
}

fn handle<T>(accessor: &Accessor<T, Spin>, res: &Resource<RedisHandle>) -> wasmtime::Result<RedisHandle> {
    with_view!(accessor, |v| Ok(v.table.get(res)?.clone()))
}

impl<T> HostConnectionWithStore<T> for Spin {
    async fn open(
        accessor: &Accessor<T, Self>,
        address: String,
    ) -> wasmtime::Result<Result<Resource<RedisHandle>, Error>> {
        let services = with_view!(accessor, |v| {
            if v.ctx.caps.allowed_hosts.allows_url(&address) {
                Some(v.ctx.services.clone())
            } else {
                crate::outbound::log_denied(&crate::outbound::destination_pattern(&address));
                None
            }
        });
        let Some(services) = services else { return Ok(Err(Error::InvalidAddress)) };
        match services.redis.get(&address).await {
            Ok(link) => with_view!(accessor, |v| Ok(Ok(v.table.push(RedisHandle { link })?))),
            Err(e) => Ok(Err(e)),
        }
    }

    async fn publish(
        accessor: &Accessor<T, Self>,
        this: Resource<RedisHandle>,
        channel: String,
        payload: Vec<u8>,
    ) -> wasmtime::Result<Result<(), Error>> {
        Ok(super::finish(
            super::span(accessor, "spin_outbound_redis.publish"),
            handle(accessor, &this)?
                .cmd::<i64>(::redis::cmd("PUBLISH").arg(channel).arg(payload).clone())
                .await
                .map(drop),
        ))
    }

    async fn get(
        accessor: &Accessor<T, Self>,
        this: Resource<RedisHandle>,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        Ok(super::finish(
            super::span(accessor, "spin_outbound_redis.get"),
            handle(accessor, &this)?.cmd(::redis::cmd("GET").arg(key).clone()).await,
        ))
    }

    async fn set(
        accessor: &Accessor<T, Self>,
        this: Resource<RedisHandle>,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), Error>> {
        Ok(super::finish(
            super::span(accessor, "spin_outbound_redis.set"),
            handle(accessor, &this)?.cmd::<()>(::redis::cmd("SET").arg(key).arg(value).clone()).await,
        ))
    }

    async fn incr(
        accessor: &Accessor<T, Self>,
        this: Resource<RedisHandle>,
        key: String,
    ) -> wasmtime::Result<Result<i64, Error>> {
        Ok(super::finish(
            super::span(accessor, "spin_outbound_redis.incr"),
            handle(accessor, &this)?.cmd(::redis::cmd("INCR").arg(key).clone()).await,
        ))
    }

    async fn del(
        accessor: &Accessor<T, Self>,
        this: Resource<RedisHandle>,
        keys: Vec<String>,
    ) -> wasmtime::Result<Result<u32, Error>> {
        Ok(super::finish(
            super::span(accessor, "spin_outbound_redis.del"),
            handle(accessor, &this)?.cmd(::redis::cmd("DEL").arg(keys).clone()).await,
        ))
    }

    async fn sadd(
        accessor: &Accessor<T, Self>,
        this: Resource<RedisHandle>,
        key: String,
        values: Vec<String>,
    ) -> wasmtime::Result<Result<u32, Error>> {
        Ok(super::finish(
            super::span(accessor, "spin_outbound_redis.sadd"),
            handle(accessor, &this)?.cmd(::redis::cmd("SADD").arg(key).arg(values).clone()).await,
        ))
    }

    async fn smembers(
        accessor: &Accessor<T, Self>,
        this: Resource<RedisHandle>,
        key: String,
    ) -> wasmtime::Result<Result<Vec<String>, Error>> {
        Ok(super::finish(
            super::span(accessor, "spin_outbound_redis.smembers"),
            handle(accessor, &this)?.cmd(::redis::cmd("SMEMBERS").arg(key).clone()).await,
        ))
    }

    async fn srem(
        accessor: &Accessor<T, Self>,
        this: Resource<RedisHandle>,
        key: String,
        values: Vec<String>,
    ) -> wasmtime::Result<Result<u32, Error>> {
        Ok(super::finish(
            super::span(accessor, "spin_outbound_redis.srem"),
            handle(accessor, &this)?.cmd(::redis::cmd("SREM").arg(key).arg(values).clone()).await,
        ))
    }

    async fn execute(
        accessor: &Accessor<T, Self>,
        this: Resource<RedisHandle>,
        command: String,
        arguments: Vec<RedisParameter>,
    ) -> wasmtime::Result<Result<Vec<RedisResult>, Error>> {
        let mut cmd = ::redis::cmd(&command);
        for a in arguments {
            match a {
                RedisParameter::Int64(i) => cmd.arg(i),
                RedisParameter::Binary(b) => cmd.arg(b),
            };
        }
        Ok(super::finish(
            super::span(accessor, "spin_outbound_redis.execute"),
            handle(accessor, &this)?.cmd::<::redis::Value>(cmd).await.map(to_result),
        ))
    }
}

impl HostConnection for SpinView<'_> {
    async fn drop(&mut self, rep: Resource<RedisHandle>) -> wasmtime::Result<()> {
        self.table.delete(rep)?;
        Ok(())
    }
}

impl super::spin::redis::redis::Host for SpinView<'_> {}
