//! The host side of Spin's deny-all adapter.
//!
//! A dependency that does not inherit a capability has its import of that
//! interface renamed to `mneme-deny-…` by the composition
//! ([`crate::compose`]). Here those names are served by implementations that
//! refuse every call with the error Spin's adapter gives: key-value and
//! SQLite `access-denied`, variables `undefined(name)`, Postgres and Redis
//! `other("\"<interface>\" is not permitted")`, the model
//! `model-not-supported`, and outbound HTTP `internal-error` with the same
//! text.

use std::collections::HashSet;

use anyhow::Result;
use wasmtime::component::{Accessor, Component, FutureReader, HasData, Linker, Resource, ResourceTable, StreamReader};

use super::fermyon::spin::llm;
use super::spin::{
    key_value::key_value as kv, postgres::postgres as pg, redis::redis, sqlite::sqlite, variables::variables,
};
use crate::compose::denied_interface;
use crate::instance::Data;
use crate::outbound::not_permitted;

/// Marker for the refusing implementations.
pub struct Denied;

pub struct DeniedView<'a> {
    table: &'a mut ResourceTable,
}

impl HasData for Denied {
    type Data<'a> = DeniedView<'a>;
}

fn unreachable_call() -> wasmtime::Error {
    wasmtime::Error::msg("a denied capability has no resources to call")
}

fn denied_view(d: &mut Data) -> DeniedView<'_> {
    DeniedView { table: d.table() }
}

/// The interfaces this runner can serve denied.
const DENIABLE: [&str; 7] = [
    "spin:key-value/key-value@3.0.0",
    "spin:sqlite/sqlite@3.1.0",
    "spin:postgres/postgres@4.2.0",
    "spin:redis/redis@3.0.0",
    "spin:variables/variables@3.0.0",
    "fermyon:spin/llm@2.0.0",
    "wasi:http/client@0.3.0",
];

/// Registers deny implementations for every `mneme-deny-…` import of `component`.
pub fn add_to_linker(linker: &mut Linker<Data>, component: &Component, done: &mut HashSet<String>) -> Result<()> {
    let engine = linker.engine().clone();
    let names: Vec<String> = component
        .component_type()
        .imports(&engine)
        .map(|(n, _)| n.to_string())
        .filter(|n| n.starts_with("mneme-deny-"))
        .collect();
    for name in names {
        if !done.insert(name.clone()) {
            continue;
        }
        let getter = denied_view;
        let mut inst = linker.instance(&name)?;
        match denied_interface(&name, &DENIABLE) {
            Some("spin:key-value/key-value@3.0.0") => kv::add_to_linker_instance::<Data, Denied>(&mut inst, getter)?,
            Some("spin:sqlite/sqlite@3.1.0") => sqlite::add_to_linker_instance::<Data, Denied>(&mut inst, getter)?,
            Some("spin:postgres/postgres@4.2.0") => pg::add_to_linker_instance::<Data, Denied>(&mut inst, getter)?,
            Some("spin:redis/redis@3.0.0") => redis::add_to_linker_instance::<Data, Denied>(&mut inst, getter)?,
            Some("spin:variables/variables@3.0.0") => {
                variables::add_to_linker_instance::<Data, Denied>(&mut inst, getter)?
            }
            Some("fermyon:spin/llm@2.0.0") => llm::add_to_linker_instance::<Data, Denied>(&mut inst, getter)?,
            Some("wasi:http/client@0.3.0") => wasmtime_wasi_http::p3::bindings::http::client::add_to_linker_instance::<
                Data,
                wasmtime_wasi_http::p3::WasiHttp,
            >(&mut inst, Data::denied_http)?,
            _ => anyhow::bail!("the composed component imports `{name}`, a capability this runner cannot deny"),
        }
    }
    Ok(())
}

// key-value: `open` is refused, so no store resource ever exists.
impl<T> kv::HostStoreWithStore<T> for Denied {
    async fn open(
        _: &Accessor<T, Self>,
        _label: String,
    ) -> wasmtime::Result<Result<Resource<super::kv::StoreHandle>, kv::Error>> {
        Ok(Err(kv::Error::AccessDenied))
    }
    async fn get(
        _: &Accessor<T, Self>,
        _: Resource<super::kv::StoreHandle>,
        _: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, kv::Error>> {
        Err(unreachable_call())
    }
    async fn set(
        _: &Accessor<T, Self>,
        _: Resource<super::kv::StoreHandle>,
        _: String,
        _: Vec<u8>,
    ) -> wasmtime::Result<Result<(), kv::Error>> {
        Err(unreachable_call())
    }
    async fn delete(
        _: &Accessor<T, Self>,
        _: Resource<super::kv::StoreHandle>,
        _: String,
    ) -> wasmtime::Result<Result<(), kv::Error>> {
        Err(unreachable_call())
    }
    async fn exists(
        _: &Accessor<T, Self>,
        _: Resource<super::kv::StoreHandle>,
        _: String,
    ) -> wasmtime::Result<Result<bool, kv::Error>> {
        Err(unreachable_call())
    }
    async fn get_keys(
        _: &Accessor<T, Self>,
        _: Resource<super::kv::StoreHandle>,
    ) -> wasmtime::Result<(StreamReader<String>, FutureReader<Result<(), kv::Error>>)> {
        Err(unreachable_call())
    }
}
impl kv::HostStore for DeniedView<'_> {
    async fn drop(&mut self, rep: Resource<super::kv::StoreHandle>) -> wasmtime::Result<()> {
        self.table.delete(rep).map(drop).map_err(Into::into)
    }
}
impl kv::Host for DeniedView<'_> {}

// sqlite
type SqliteRes = Resource<super::sqlite::SqliteHandle>;
impl<T> sqlite::HostConnectionWithStore<T> for Denied {
    async fn open_async(_: &Accessor<T, Self>, _: String) -> wasmtime::Result<Result<SqliteRes, sqlite::Error>> {
        Ok(Err(sqlite::Error::AccessDenied))
    }
    #[allow(clippy::type_complexity)]
    async fn execute_async(
        _: &Accessor<T, Self>,
        _: SqliteRes,
        _: String,
        _: Vec<sqlite::Value>,
    ) -> wasmtime::Result<
        Result<(Vec<String>, StreamReader<sqlite::RowResult>, FutureReader<Result<(), sqlite::Error>>), sqlite::Error>,
    > {
        Err(unreachable_call())
    }
    async fn last_insert_rowid_async(_: &Accessor<T, Self>, _: SqliteRes) -> wasmtime::Result<i64> {
        Err(unreachable_call())
    }
    async fn changes_async(_: &Accessor<T, Self>, _: SqliteRes) -> wasmtime::Result<u64> {
        Err(unreachable_call())
    }
}
impl sqlite::HostConnection for DeniedView<'_> {
    async fn open(&mut self, _: String) -> wasmtime::Result<Result<SqliteRes, sqlite::Error>> {
        Ok(Err(sqlite::Error::AccessDenied))
    }
    async fn execute(
        &mut self,
        _: SqliteRes,
        _: String,
        _: Vec<sqlite::Value>,
    ) -> wasmtime::Result<Result<sqlite::QueryResult, sqlite::Error>> {
        Err(unreachable_call())
    }
    async fn last_insert_rowid(&mut self, _: SqliteRes) -> wasmtime::Result<i64> {
        Err(unreachable_call())
    }
    async fn changes(&mut self, _: SqliteRes) -> wasmtime::Result<u64> {
        Err(unreachable_call())
    }
    async fn drop(&mut self, rep: SqliteRes) -> wasmtime::Result<()> {
        self.table.delete(rep).map(drop).map_err(Into::into)
    }
}
impl sqlite::Host for DeniedView<'_> {}

// postgres
type PgRes = Resource<super::postgres::PgHandle>;
type PgBuilderRes = Resource<super::postgres::PgBuilder>;
fn pg_denied() -> pg::Error {
    pg::Error::Other(not_permitted("spin:postgres/postgres"))
}
impl<T> pg::HostConnectionWithStore<T> for Denied {
    async fn open_async(_: &Accessor<T, Self>, _: String) -> wasmtime::Result<Result<PgRes, pg::Error>> {
        Ok(Err(pg_denied()))
    }
    #[allow(clippy::type_complexity)]
    async fn query_async(
        _: &Accessor<T, Self>,
        _: PgRes,
        _: String,
        _: Vec<pg::ParameterValue>,
    ) -> wasmtime::Result<
        Result<(Vec<pg::Column>, StreamReader<Vec<pg::DbValue>>, FutureReader<Result<(), pg::Error>>), pg::Error>,
    > {
        Err(unreachable_call())
    }
    async fn execute_async(
        _: &Accessor<T, Self>,
        _: PgRes,
        _: String,
        _: Vec<pg::ParameterValue>,
    ) -> wasmtime::Result<Result<u64, pg::Error>> {
        Err(unreachable_call())
    }
}
impl<T> pg::HostConnectionBuilderWithStore<T> for Denied {
    async fn build_async(_: &Accessor<T, Self>, _: PgBuilderRes) -> wasmtime::Result<Result<PgRes, pg::Error>> {
        Ok(Err(pg_denied()))
    }
}
impl pg::HostConnectionBuilder for DeniedView<'_> {
    async fn new(&mut self, address: String) -> wasmtime::Result<PgBuilderRes> {
        Ok(self.table.push(super::postgres::PgBuilder::new(address))?)
    }
    async fn set_ca_root(&mut self, _: PgBuilderRes, _: String) -> wasmtime::Result<Result<(), pg::Error>> {
        Ok(Err(pg_denied()))
    }
    async fn build(&mut self, _: PgBuilderRes) -> wasmtime::Result<Result<PgRes, pg::Error>> {
        Ok(Err(pg_denied()))
    }
    async fn drop(&mut self, rep: PgBuilderRes) -> wasmtime::Result<()> {
        self.table.delete(rep).map(drop).map_err(Into::into)
    }
}
impl pg::HostConnection for DeniedView<'_> {
    async fn open(&mut self, _: String) -> wasmtime::Result<Result<PgRes, pg::Error>> {
        Ok(Err(pg_denied()))
    }
    async fn query(
        &mut self,
        _: PgRes,
        _: String,
        _: Vec<pg::ParameterValue>,
    ) -> wasmtime::Result<Result<pg::RowSet, pg::Error>> {
        Err(unreachable_call())
    }
    async fn execute(
        &mut self,
        _: PgRes,
        _: String,
        _: Vec<pg::ParameterValue>,
    ) -> wasmtime::Result<Result<u64, pg::Error>> {
        Err(unreachable_call())
    }
    async fn drop(&mut self, rep: PgRes) -> wasmtime::Result<()> {
        self.table.delete(rep).map(drop).map_err(Into::into)
    }
}
impl pg::Host for DeniedView<'_> {}

// redis
type RedisRes = Resource<super::redis::RedisHandle>;
impl<T> redis::HostConnectionWithStore<T> for Denied {
    async fn open(_: &Accessor<T, Self>, _: String) -> wasmtime::Result<Result<RedisRes, redis::Error>> {
        Ok(Err(redis::Error::Other(not_permitted("spin:redis/redis"))))
    }
    async fn publish(
        _: &Accessor<T, Self>,
        _: RedisRes,
        _: String,
        _: Vec<u8>,
    ) -> wasmtime::Result<Result<(), redis::Error>> {
        Err(unreachable_call())
    }
    async fn get(
        _: &Accessor<T, Self>,
        _: RedisRes,
        _: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, redis::Error>> {
        Err(unreachable_call())
    }
    async fn set(
        _: &Accessor<T, Self>,
        _: RedisRes,
        _: String,
        _: Vec<u8>,
    ) -> wasmtime::Result<Result<(), redis::Error>> {
        Err(unreachable_call())
    }
    async fn incr(_: &Accessor<T, Self>, _: RedisRes, _: String) -> wasmtime::Result<Result<i64, redis::Error>> {
        Err(unreachable_call())
    }
    async fn del(_: &Accessor<T, Self>, _: RedisRes, _: Vec<String>) -> wasmtime::Result<Result<u32, redis::Error>> {
        Err(unreachable_call())
    }
    async fn sadd(
        _: &Accessor<T, Self>,
        _: RedisRes,
        _: String,
        _: Vec<String>,
    ) -> wasmtime::Result<Result<u32, redis::Error>> {
        Err(unreachable_call())
    }
    async fn smembers(
        _: &Accessor<T, Self>,
        _: RedisRes,
        _: String,
    ) -> wasmtime::Result<Result<Vec<String>, redis::Error>> {
        Err(unreachable_call())
    }
    async fn srem(
        _: &Accessor<T, Self>,
        _: RedisRes,
        _: String,
        _: Vec<String>,
    ) -> wasmtime::Result<Result<u32, redis::Error>> {
        Err(unreachable_call())
    }
    async fn execute(
        _: &Accessor<T, Self>,
        _: RedisRes,
        _: String,
        _: Vec<redis::RedisParameter>,
    ) -> wasmtime::Result<Result<Vec<redis::RedisResult>, redis::Error>> {
        Err(unreachable_call())
    }
}
impl redis::HostConnection for DeniedView<'_> {
    async fn drop(&mut self, rep: RedisRes) -> wasmtime::Result<()> {
        self.table.delete(rep).map(drop).map_err(Into::into)
    }
}
impl redis::Host for DeniedView<'_> {}

// variables
impl<T> variables::HostWithStore<T> for Denied {
    async fn get(_: &Accessor<T, Self>, name: String) -> wasmtime::Result<Result<String, variables::Error>> {
        Ok(Err(variables::Error::Undefined(name)))
    }
}
impl variables::Host for DeniedView<'_> {}

// llm
impl llm::Host for DeniedView<'_> {
    async fn infer(
        &mut self,
        _: String,
        _: String,
        _: Option<llm::InferencingParams>,
    ) -> wasmtime::Result<Result<llm::InferencingResult, llm::Error>> {
        Ok(Err(llm::Error::ModelNotSupported))
    }
    async fn generate_embeddings(
        &mut self,
        _: String,
        _: Vec<String>,
    ) -> wasmtime::Result<Result<llm::EmbeddingsResult, llm::Error>> {
        Ok(Err(llm::Error::ModelNotSupported))
    }
}
