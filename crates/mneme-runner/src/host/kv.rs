//! `spin:key-value/key-value@3.0.0` over a SQLite file (Spin's default
//! store, same table layout) or Redis (keys written raw, as Spin does).
//!
//! `open` refuses a label the component does not list (`access-denied`);
//! labels are checked against the runtime config when the app loads.

use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use wasmtime::component::{Accessor, FutureReader, Resource, StreamReader};

use super::spin::key_value::key_value::{Error, HostStore, HostStoreWithStore};
use super::{Spin, SpinView, with_view};

pub enum KvBackend {
    Sqlite(Mutex<rusqlite::Connection>),
    Redis(super::redis::Link),
}

impl KvBackend {
    pub fn open_sqlite(path: &Path) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let conn =
            rusqlite::Connection::open(path).with_context(|| format!("opening key-value file {}", path.display()))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.execute(
            "CREATE TABLE IF NOT EXISTS spin_key_value (store TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (store, key))",
            [],
        )?;
        Ok(KvBackend::Sqlite(Mutex::new(conn)))
    }

    pub async fn open_redis(url: &str) -> anyhow::Result<Self> {
        let link =
            super::redis::Link::new(url).with_context(|| "invalid Redis URL for a key-value store".to_string())?;
        link.connection()
            .await
            .with_context(|| "connecting the Redis key-value store (is redis-server running?)".to_string())?;
        Ok(KvBackend::Redis(link))
    }
}

/// An open store: the backend and the label it was opened under.
#[derive(Clone)]
pub struct StoreHandle {
    label: Arc<str>,
    backend: Arc<KvBackend>,
}

fn other(e: impl std::fmt::Display) -> Error {
    Error::Other(e.to_string())
}

impl StoreHandle {
    async fn blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Connection, &str) -> rusqlite::Result<R> + Send + 'static,
    ) -> Result<R, Error> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let KvBackend::Sqlite(conn) = &*this.backend else { unreachable!() };
            let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&conn, &this.label).map_err(other)
        })
        .await
        .map_err(other)?
    }

    fn redis(&self) -> Option<&super::redis::Link> {
        match &*self.backend {
            KvBackend::Redis(l) => Some(l),
            KvBackend::Sqlite(_) => None,
        }
    }

    async fn get(&self, key: String) -> Result<Option<Vec<u8>>, Error> {
        if let Some(r) = self.redis() {
            return r.query(::redis::cmd("GET").arg(&key)).await.map_err(other);
        }
        self.blocking(move |c, store| {
            use rusqlite::OptionalExtension;
            c.query_row("SELECT value FROM spin_key_value WHERE store = ?1 AND key = ?2", (store, &key), |r| r.get(0))
                .optional()
        })
        .await
    }

    async fn set(&self, key: String, value: Vec<u8>) -> Result<(), Error> {
        if let Some(r) = self.redis() {
            return r.query(::redis::cmd("SET").arg(&key).arg(value)).await.map_err(other);
        }
        self.blocking(move |c, store| {
            c.execute(
                "INSERT INTO spin_key_value (store, key, value) VALUES (?1, ?2, ?3) ON CONFLICT (store, key) DO UPDATE SET value = excluded.value",
                (store, &key, &value),
            )
            .map(drop)
        })
        .await
    }

    async fn delete(&self, key: String) -> Result<(), Error> {
        if let Some(r) = self.redis() {
            return r.query::<i64>(::redis::cmd("DEL").arg(&key)).await.map(drop).map_err(other);
        }
        self.blocking(move |c, store| {
            c.execute("DELETE FROM spin_key_value WHERE store = ?1 AND key = ?2", (store, &key)).map(drop)
        })
        .await
    }

    async fn exists(&self, key: String) -> Result<bool, Error> {
        if let Some(r) = self.redis() {
            return r.query::<i64>(::redis::cmd("EXISTS").arg(&key)).await.map(|n| n > 0).map_err(other);
        }
        self.blocking(move |c, store| {
            c.query_row(
                "SELECT EXISTS(SELECT 1 FROM spin_key_value WHERE store = ?1 AND key = ?2)",
                (store, &key),
                |r| r.get(0),
            )
        })
        .await
    }

    async fn keys(&self) -> Result<Vec<String>, Error> {
        if let Some(r) = self.redis() {
            return r.query(::redis::cmd("KEYS").arg("*")).await.map_err(other);
        }
        self.blocking(|c, store| {
            let mut stmt = c.prepare_cached("SELECT key FROM spin_key_value WHERE store = ?1")?;
            let rows = stmt.query_map([store], |r| r.get(0))?;
            rows.collect()
        })
        .await
    }
}

fn handle<T>(accessor: &Accessor<T, Spin>, res: &Resource<StoreHandle>) -> wasmtime::Result<StoreHandle> {
    with_view!(accessor, |v| Ok(v.table.get(res)?.clone()))
}

impl<T> HostStoreWithStore<T> for Spin {
    async fn open(
        accessor: &Accessor<T, Self>,
        label: String,
    ) -> wasmtime::Result<Result<Resource<StoreHandle>, Error>> {
        let found = with_view!(accessor, |v| {
            if !v.ctx.caps.key_value_stores.contains(&label) {
                return Ok::<_, wasmtime::Error>(Err(Error::AccessDenied));
            }
            match v.ctx.services.kv.get(&label) {
                None => Ok(Err(Error::NoSuchStore)),
                Some(b) => {
                    let h = StoreHandle { label: label.as_str().into(), backend: b.clone() };
                    Ok(Ok(v.table.push(h)?))
                }
            }
        })?;
        Ok(found)
    }

    async fn get(
        accessor: &Accessor<T, Self>,
        this: Resource<StoreHandle>,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        Ok(super::finish(super::span(accessor, "spin_key_value.get"), handle(accessor, &this)?.get(key).await))
    }

    async fn set(
        accessor: &Accessor<T, Self>,
        this: Resource<StoreHandle>,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), Error>> {
        Ok(super::finish(super::span(accessor, "spin_key_value.set"), handle(accessor, &this)?.set(key, value).await))
    }

    async fn delete(
        accessor: &Accessor<T, Self>,
        this: Resource<StoreHandle>,
        key: String,
    ) -> wasmtime::Result<Result<(), Error>> {
        Ok(super::finish(super::span(accessor, "spin_key_value.delete"), handle(accessor, &this)?.delete(key).await))
    }

    async fn exists(
        accessor: &Accessor<T, Self>,
        this: Resource<StoreHandle>,
        key: String,
    ) -> wasmtime::Result<Result<bool, Error>> {
        Ok(super::finish(super::span(accessor, "spin_key_value.exists"), handle(accessor, &this)?.exists(key).await))
    }

    async fn get_keys(
        accessor: &Accessor<T, Self>,
        this: Resource<StoreHandle>,
    ) -> wasmtime::Result<(StreamReader<String>, FutureReader<Result<(), Error>>)> {
        let span = super::span(accessor, "spin_key_value.get_keys");
        let result = super::finish(span, handle(accessor, &this)?.keys().await);
        accessor.with(|mut access| {
            let (keys, outcome) = match result {
                Ok(k) => (k, Ok(())),
                Err(e) => (Vec::new(), Err(e)),
            };
            let stream = StreamReader::new(&mut access, keys)?;
            let future = FutureReader::new(&mut access, async move { wasmtime::error::Ok(outcome) })?;
            Ok((stream, future))
        })
    }
}

impl HostStore for SpinView<'_> {
    async fn drop(&mut self, rep: Resource<StoreHandle>) -> wasmtime::Result<()> {
        self.table.delete(rep)?;
        Ok(())
    }
}

impl super::spin::key_value::key_value::Host for SpinView<'_> {}
