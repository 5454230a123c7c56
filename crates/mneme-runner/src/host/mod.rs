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

use wasmtime::component::{HasData, ResourceTable};

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
