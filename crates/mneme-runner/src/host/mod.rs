//! Spin's host interfaces, one module per capability in the shape of Spin's
//! factors: the WIT bindings (generated from the spin-sdk crate's WIT by
//! `build.rs`), per-app services built once from manifest and runtime
//! config ([`Services`]), and per-instance state ([`SpinCtx`]) that carries
//! the calling component's capabilities.

pub mod deny;
pub mod kv;
pub mod llm;
pub mod postgres;
pub mod redis;
pub mod sqlite;
pub mod variables;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use wasmtime::component::{Accessor, HasData, ResourceTable};

use crate::outbound::AllowedHosts;

include!(concat!(env!("OUT_DIR"), "/spin_bindings.rs"));

/// What one component may use, after templates and inheritance are applied.
#[derive(Debug, Default)]
pub struct Capabilities {
    pub component: String,
    pub key_value_stores: Vec<String>,
    pub sqlite_databases: Vec<String>,
    pub ai_models: Vec<String>,
    pub allowed_hosts: AllowedHosts,
    /// Component variables, already expanded from application variables;
    /// `None` when the application variable has no value.
    pub variables: BTreeMap<String, Option<String>>,
}

/// Backends shared by every instance of the app.
pub struct Services {
    pub kv: HashMap<String, Arc<kv::KvBackend>>,
    pub sqlite: HashMap<String, Arc<sqlite::SqliteDb>>,
    pub pg: postgres::PgPools,
    pub redis: redis::RedisPools,
    pub llm: llm::Llm,
}

/// Per-instance Spin state.
pub struct SpinCtx {
    pub caps: Arc<Capabilities>,
    pub services: Arc<Services>,
    /// The spans open in this instance, for host-call spans (`otel`).
    pub scope: Arc<crate::otel::Scope>,
}

impl SpinCtx {
    /// The span of a database call: Spin's name, the system and the
    /// statement (never its parameters).
    pub fn db_span(&self, name: &'static str, system: &'static str, statement: &str) -> Option<crate::otel::Span> {
        let mut span = self.scope.host(name)?;
        span.set("db.system.name", system);
        span.set("db.query.text", statement.chars().take(1024).collect::<String>());
        Some(span)
    }
}

/// What the host implementations see of the store: the resource table and
/// the Spin state.
pub struct SpinView<'a> {
    pub table: &'a mut ResourceTable,
    pub ctx: &'a SpinCtx,
}

/// Marker for the real implementations.
pub struct Spin;

impl HasData for Spin {
    type Data<'a> = SpinView<'a>;
}

/// Reads `f` of the view through an accessor without holding the store.
macro_rules! with_view {
    ($accessor:expr, |$v:ident| $body:expr) => {
        $accessor.with(|mut access| {
            let $v = access.get();
            $body
        })
    };
}
pub(crate) use with_view;

/// The span of a host call named `name` (Spin's names), under the innermost
/// span open in the calling instance; `None` when tracing is off.
pub(crate) fn span<T>(accessor: &Accessor<T, Spin>, name: &'static str) -> Option<crate::otel::Span> {
    if !crate::otel::tracing() {
        return None;
    }
    let parent = accessor.with(|mut access| {
        use wasmtime::AsContextMut;
        let stack: Vec<_> = access.as_context_mut().async_call_stack().map(Iterator::collect).unwrap_or_default();
        access.get().ctx.scope.parent(&stack)
    })?;
    crate::otel::Span::start(name, crate::otel::Kind::Client, Some(parent))
}

/// [`SpinCtx::db_span`] through an accessor.
pub(crate) fn db_span<T>(
    accessor: &Accessor<T, Spin>,
    name: &'static str,
    system: &'static str,
    statement: &str,
) -> Option<crate::otel::Span> {
    if !crate::otel::tracing() {
        return None;
    }
    let mut span = span(accessor, name)?;
    span.set("db.system.name", system);
    span.set("db.query.text", statement.chars().take(1024).collect::<String>());
    Some(span)
}

/// Ends `span` with `result`'s outcome and hands the result on.
pub(crate) fn finish<R, E: std::fmt::Debug>(mut span: Option<crate::otel::Span>, result: Result<R, E>) -> Result<R, E> {
    if let Err(e) = &result {
        crate::otel::fail(&mut span, format!("{e:?}"));
    }
    drop(span);
    result
}
