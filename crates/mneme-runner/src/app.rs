//! A loaded application: manifest, services and one pre-instantiated
//! component per HTTP component, ready to serve requests.
//!
//! Requests reach live instances of a pre-instantiated component on the
//! pooling allocator, reused as Spin reuses them (`instance.rs`), each with
//! a memory cap. A trap answers 500 with the request id, and the app keeps
//! serving. Compiled components are cached on disk, keyed by the
//! composed bytes and the engine's configuration, so a restart skips
//! compilation.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, ComponentExportIndex, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};
use wasmtime_wasi_http::p3::bindings::ServicePre;

use crate::budget::{Budget, Need, Shared, Totals};
use crate::host::{self, Capabilities, Services, Spin, SpinView};
use crate::instance::{Data, Instances, Limits, Ticket};
use crate::manifest::{Component as ManifestComponent, FileMount, Manifest};
use crate::outbound::AllowedHosts;
use crate::routes::Router;
use crate::runtime_config::{KvBackend, RuntimeConfig};
use crate::variables::AppVariables;
use wasmtime_wasi_http::handler::{ExpirationError, InstantiationError, ProxyHandler};

pub type Body = UnsyncBoxBody<Bytes, anyhow::Error>;

pub struct App {
    pub manifest: Manifest,
    pub router: Router,
    pub variables: AppVariables,
    pub limits: Limits,
    engine: Engine,
    handlers: HashMap<String, ProxyHandler<Instances>>,
}

/// Options for [`App::load`].
pub struct LoadOptions {
    pub manifest: PathBuf,
    pub runtime_config: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub limits: Limits,
    /// `--variable` values, consulted before every other provider.
    pub variables: HashMap<String, String>,
    /// The working directory's `.env`, behind the process environment.
    pub dotenv: HashMap<String, String>,
    /// `--env` pairs, given to every component.
    pub env: Vec<(String, String)>,
}

/// The engine, with Spin's pooling limits and the environment variables
/// Spin reads to change them (`SPIN_MAX_INSTANCE_COUNT`,
/// `SPIN_WASMTIME_TOTAL_MEMORIES`, …), so a deployment sized for one is
/// sized for the other (docs/DECISIONS.md, D-F17).
fn engine(pool: PoolingAllocationConfig) -> Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model_async(true);
    config.epoch_interruption(true);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    // `MNEME_WASM_PROFILER=perfmap` writes /tmp/perf-<pid>.map, so `perf`
    // names the guests' functions (docs/BENCHMARKS.md profiles with it).
    if std::env::var("MNEME_WASM_PROFILER").is_ok_and(|v| v == "perfmap") {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    Ok(Engine::new(&config)?)
}

/// Spin 4.1's defaults (`crates/core`): 1,000 instances, memories and
/// stacks, 2,000 tables and 4,000 core instances in all; per component at
/// most 32 memories, 64 tables and 200 core instances. Returns the totals
/// admission shares out (`budget.rs`).
pub(crate) fn pool_config(var: &dyn Fn(&str) -> Option<String>) -> (PoolingAllocationConfig, Totals) {
    let n = |name: &str, default: u32| var(name).and_then(|v| v.trim().parse::<u32>().ok()).unwrap_or(default);
    let instances = n("SPIN_MAX_INSTANCE_COUNT", 1_000);
    let totals = Totals {
        memories: i64::from(n("SPIN_WASMTIME_TOTAL_MEMORIES", instances)),
        tables: i64::from(n("SPIN_WASMTIME_TOTAL_TABLES", 2 * instances)),
    };
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(n("SPIN_WASMTIME_INSTANCE_COUNT", instances))
        .total_memories(totals.memories as u32)
        .total_tables(totals.tables as u32)
        .total_stacks(n("SPIN_WASMTIME_TOTAL_STACKS", instances))
        .total_core_instances(n("SPIN_WASMTIME_TOTAL_CORE_INSTANCES", 4 * instances))
        .max_memories_per_component(n("SPIN_WASMTIME_INSTANCE_MEMORIES", 32))
        .max_tables_per_component(n("SPIN_WASMTIME_INSTANCE_TABLES", 64))
        .max_core_instances_per_component(n("SPIN_WASMTIME_CORE_INSTANCE_COUNT", 200))
        .max_memory_size(1 << 30)
        // Return memory to the OS in batches: each decommit is an madvise
        // that interrupts every core running the process (TLB shootdown).
        .decommit_batch_size(64)
        .pagemap_scan(wasmtime::Enabled::Auto)
        // Instances are reused, so a new one is rare: keep no pages of a
        // freed slot resident (Spin keeps 2 MiB), so memory taken by a burst
        // goes back to the OS once it is over.
        .linear_memory_keep_resident(n("SPIN_WASMTIME_LINEAR_MEMORY_KEEP_RESIDENT", 0) as usize)
        .table_keep_resident(n("SPIN_WASMTIME_TABLE_KEEP_RESIDENT", 0) as usize);
    (pool, totals)
}

impl App {
    pub async fn load(opts: LoadOptions) -> Result<Self> {
        let manifest = crate::manifest::load(&opts.manifest)?;
        let state_dir = opts.state_dir.clone().unwrap_or_else(|| manifest.dir.join(".spin"));
        let runtime = RuntimeConfig::load(opts.runtime_config.as_deref(), &state_dir)?;
        // Spin's providers in Spin's order: `--variable`, the environment
        // (with the working directory's `.env` behind it), the defaults.
        let variables = AppVariables::resolve_with(&manifest.variables, &opts.variables, &|k| {
            std::env::var(k).ok().or_else(|| opts.dotenv.get(k).cloned())
        })?;
        let router = Router::new(&manifest.http_base, &manifest.http)?;

        let mut kv = HashMap::new();
        for (label, backend) in &runtime.kv {
            let used = manifest.components.values().any(|c| c.def.key_value_stores.contains(label));
            if !used {
                continue;
            }
            let b = match backend {
                KvBackend::SqliteFile(path) => host::kv::KvBackend::open_sqlite(path)?,
                KvBackend::Redis(url) => {
                    host::kv::KvBackend::open_redis(url).await.with_context(|| format!("key_value_store.{label}"))?
                }
            };
            kv.insert(label.clone(), Arc::new(b));
        }
        let mut sqlite = HashMap::new();
        for (label, path) in &runtime.sqlite {
            if manifest.components.values().any(|c| c.def.sqlite_databases.contains(label)) {
                sqlite.insert(label.clone(), Arc::new(host::sqlite::SqliteDb::new(path)?));
            }
        }
        // Spin's load-time checks and words (`crates/factor-key-value`,
        // `crates/factor-sqlite`).
        let mut undefined_dbs = Vec::new();
        for c in manifest.components.values() {
            for label in &c.def.key_value_stores {
                if !runtime.kv.contains_key(label) {
                    bail!("unknown key_value_stores label {label:?} for component {:?}", c.id);
                }
            }
            for label in c.def.sqlite_databases.iter().filter(|l| !runtime.sqlite.contains_key(*l)) {
                undefined_dbs.push(format!("- Component {} uses database '{label}'", c.id));
            }
        }
        if !undefined_dbs.is_empty() {
            bail!(
                "One or more components use SQLite databases which are not defined.\n\
                 Check the spelling, or pass a runtime configuration file that defines these stores.\n\
                 See https://spinframework.dev/dynamic-configuration#sqlite-storage-runtime-configuration\n\
                 Details:\n{}",
                undefined_dbs.join("\n")
            );
        }
        let services = Arc::new(Services {
            kv,
            sqlite,
            pg: Default::default(),
            redis: Default::default(),
            llm: host::llm::Llm::new(models_dir(&state_dir), runtime.llm.clone()),
        });

        let (pool, totals) = pool_config(&|name| std::env::var(name).ok());
        let engine = engine(pool)?;
        let mut linker = Linker::<Data>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi::p3::add_to_linker(&mut linker)?;
        wasmtime_wasi_http::p3::add_to_linker(&mut linker)?;
        host::SpinHost::add_to_linker::<Data, Spin>(&mut linker, |d: &mut Data| SpinView {
            table: &mut d.table,
            ctx: &d.spin,
        })?;

        // Compiled components are cached beside the state; MNEME_CACHE_DIR
        // lets several state directories (the tests) share one cache.
        let cache = std::env::var_os("MNEME_CACHE_DIR").map_or_else(|| state_dir.join("mneme-cache"), PathBuf::from);
        let mut handlers = HashMap::new();
        let mut prepared = Vec::new();
        let mut denied = std::collections::HashSet::new();
        // With tracing on, stage calls cross the host (`compose_traced`).
        let traced = crate::otel::tracing();
        let mut forwarders = std::collections::HashSet::new();
        let http_components: std::collections::BTreeSet<&String> = manifest.http.iter().map(|t| &t.component).collect();
        for id in http_components {
            let c = &manifest.components[id];
            let started = Instant::now();
            let (bytes, traced_stages) = compose_component(&manifest, c, traced)?;
            let component =
                load_cached(&engine, &cache, &bytes).with_context(|| format!("compiling component `{id}`"))?;
            let mut stages = Vec::new();
            let mut stage_need = Need { memories: 0, tables: 0 };
            for stage in traced_stages {
                let compiled = load_cached(&engine, &cache, &stage.bytes)
                    .with_context(|| format!("compiling stage `{}` for tracing", stage.component))?;
                let exports = forward_stage_calls(&engine, &mut linker, &compiled, &stage.serves, &mut forwarders)
                    .with_context(|| format!("tracing the calls of `{id}` to `{}`", stage.component))?;
                host::deny::add_to_linker(&mut linker, &compiled, &mut denied)?;
                let pre = linker
                    .instantiate_pre(&compiled)
                    .map_err(anyhow::Error::from)
                    .with_context(|| format!("linking stage `{}`", stage.component))?;
                if let Some(r) = compiled.resources_required() {
                    stage_need.memories += i64::from(r.num_memories);
                    stage_need.tables += i64::from(r.num_tables);
                }
                stages.push(crate::instance::TracedStage { pre, exports });
            }
            if std::env::var_os("MNEME_DEBUG_IMPORTS").is_some() {
                for (name, _) in component.component_type().imports(&engine) {
                    eprintln!("component {id} imports {name}");
                }
            }
            host::deny::add_to_linker(&mut linker, &component, &mut denied)?;
            let pre = linker
                .instantiate_pre(&component)
                .map_err(anyhow::Error::from)
                .with_context(|| format!("linking component `{id}`"))?;
            let pre = ServicePre::new(pre)
                .map_err(anyhow::Error::from)
                .with_context(|| format!("component `{id}` must export wasi:http/handler@0.3.0"))?;
            let caps = Arc::new(capabilities(c, &variables)?);
            // `--env` pairs come after the manifest's, as `spin up` appends them.
            let env =
                c.def.environment.iter().map(|(k, v)| (k.clone(), v.clone())).chain(opts.env.iter().cloned()).collect();
            let files = file_mounts(&manifest.dir, &c.def.files)?;
            // Without a static count (a component that instantiates modules
            // at run time), assume the per-component maximum.
            let need = component.resources_required().map_or(Need { memories: 32, tables: 64 }, |r| Need {
                memories: i64::from(r.num_memories) + stage_need.memories,
                tables: i64::from(r.num_tables) + stage_need.tables,
            });
            eprintln!(
                "component {id} ready in {} ms ({} memories, {} tables per instance)",
                started.elapsed().as_millis(),
                need.memories,
                need.tables
            );
            prepared.push((crate::instance::Component { id: id.clone(), pre, caps, env, files, stages }, need));
        }
        let needs: Vec<(&str, Need)> = prepared.iter().map(|(c, n)| (c.id.as_str(), *n)).collect();
        let shared = Shared::new(totals, &needs)?;
        for (component, need) in prepared {
            let instances = Instances {
                engine: engine.clone(),
                services: services.clone(),
                budget: Budget::new(need, shared.clone()),
                component,
                limits: opts.limits.clone(),
            };
            handlers.insert(instances.component.id.clone(), ProxyHandler::new(instances));
        }

        Ok(Self { manifest, router, variables, limits: opts.limits, engine, handlers })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Runs `component` on `req`. The response head arrives when the guest
    /// returns it; its body streams as the guest writes it.
    pub async fn call(
        &self,
        component: &str,
        req: http::Request<http_body_util::Full<Bytes>>,
        id: &str,
        parent: Option<crate::otel::SpanContext>,
    ) -> Result<http::Response<Body>, CallError> {
        let handler = self
            .handlers
            .get(component)
            .ok_or_else(|| CallError::Failed(format!("no HTTP component `{component}`")))?;
        let mut exec = parent.and_then(|p| {
            crate::otel::Span::start(
                format!("execute_wasm_component {component}"),
                crate::otel::Kind::Internal,
                Some(p),
            )
        });
        let ticket = Arc::new(Ticket {
            id: id.to_string(),
            trace: exec.as_ref().map(crate::otel::Span::context),
            ..Default::default()
        });
        let mut req = req.map(|b| b.map_err(|e: std::convert::Infallible| match e {}).boxed_unsync());
        // When no instance can be made (the pool is in use), a live one
        // usually has room a moment later: try again for a while, then 503.
        let give_up = Instant::now() + CAPACITY_WAIT;
        let mut pause = Duration::from_millis(5);
        loop {
            let e = match handler.handle(ticket.clone(), req).await {
                Ok(resp) => {
                    let mut resp = resp.map(|b| b.map_err(anyhow::Error::from).boxed_unsync());
                    if exec.is_some() {
                        // The request's task stays bound to its span until the body ends.
                        let binding = ticket.binding.lock().unwrap_or_else(|p| p.into_inner()).take();
                        let held = (binding, exec.take());
                        resp = resp.map(|b| Holding { inner: b, _held: held }.boxed_unsync());
                    }
                    let inst = ticket.instantiation.lock().unwrap_or_else(|p| p.into_inner()).take();
                    resp.extensions_mut().insert(Instantiation(inst));
                    return Ok(resp);
                }
                Err(e) => e,
            };
            let e = match e.downcast::<InstantiationError<Arc<Ticket>>>() {
                Ok(refused) if at_capacity(&refused.error) => {
                    if Instant::now() + pause > give_up {
                        return Err(CallError::NoCapacity(refused.error.to_string()));
                    }
                    req = refused.request.into_inner().unwrap_or_else(|p| p.into_inner());
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(100));
                    continue;
                }
                Ok(failed) => return Err(CallError::Failed(format!("instantiating: {:?}", failed.error))),
                Err(e) => e,
            };
            crate::otel::fail(&mut exec, format!("{e:?}"));
            return Err(if e.is::<ExpirationError>() {
                CallError::TimedOut
            } else {
                CallError::Failed(format!("{e:?}"))
            });
        }
    }
}

/// A response body that keeps `G` alive (spans, an instance's hold) until
/// hyper or the caller drops it.
pub struct Holding<G> {
    pub inner: Body,
    pub _held: G,
}

impl<G: Unpin> http_body::Body for Holding<G> {
    type Data = Bytes;
    type Error = anyhow::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, anyhow::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// How long a request waits for room in the instance pool before its 503.
const CAPACITY_WAIT: Duration = Duration::from_secs(2);

/// Whether making an instance failed only because the pool is in use.
fn at_capacity(e: &wasmtime::Error) -> bool {
    e.is::<crate::budget::AtCapacity>() || e.is::<wasmtime::PoolConcurrencyLimitError>()
}

/// Why a request got no answer from its component.
#[derive(Debug)]
pub enum CallError {
    /// No instance could be made: the pool is full (or memory ran out).
    NoCapacity(String),
    /// The request ran past `--request-timeout`.
    TimedOut,
    /// The guest trapped, returned an error code, or the component is unknown.
    Failed(String),
}

/// How long making the instance took, carried on the response for the log;
/// `None` when the request reused a live instance.
#[derive(Debug, Clone, Copy)]
pub struct Instantiation(pub Option<Duration>);

/// Where local models live: where Spin reads them, `<state-dir>/ai-models`
/// (`scripts/install.sh` links the weights there), unless
/// `$MNEME_MODELS_DIR` names another directory.
fn models_dir(state_dir: &Path) -> PathBuf {
    match std::env::var_os("MNEME_MODELS_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => state_dir.join("ai-models"),
    }
}

/// The component as `spin.toml` composes it; with tracing, the entry alone
/// and its dependencies as separate stages (`compose::compose_traced`).
fn compose_component(
    manifest: &Manifest,
    c: &ManifestComponent,
    traced: bool,
) -> Result<(Vec<u8>, Vec<crate::compose::TracedStage>)> {
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {} (did the build run?)", p.display()));
    let root = read(&c.source)?;
    let mut deps = Vec::new();
    for d in &c.dependencies {
        deps.push((d.clone(), read(&manifest.components[&d.component].source)?));
    }
    let composed = if traced {
        crate::compose::compose_traced(&root, &deps).map(|stages| (root, stages))
    } else {
        crate::compose::compose(&root, &deps).map(|bytes| (bytes, Vec::new()))
    };
    composed.with_context(|| format!("composing component `{}`", c.id))
}

/// For a stage prepared by `compose_traced`: defines, once per interface,
/// host functions for an entry's imports of `serves` that call the stage
/// instance's export of the same name inside a span, and returns where each
/// export is, for `Instances` to look up per instance. Values cross as
/// `Val`s, unchanged.
fn forward_stage_calls(
    engine: &Engine,
    linker: &mut Linker<Data>,
    stage: &Component,
    serves: &[String],
    defined: &mut std::collections::HashSet<String>,
) -> Result<Vec<(Arc<str>, ComponentExportIndex)>> {
    use wasmtime::component::types::ComponentItem;
    let mut exports = Vec::new();
    let ty = stage.component_type();
    for iface in serves {
        // The stage's export has the whole interface; an entry's import may
        // name only the functions it calls, and another entry others.
        let Some(ComponentItem::ComponentInstance(inst)) =
            ty.exports(engine).find(|(name, _)| name == iface).map(|(_, item)| item.ty)
        else {
            bail!("the stage does not export `{iface}`");
        };
        let export =
            stage.get_export_index(None, iface).with_context(|| format!("the stage does not export `{iface}`"))?;
        let funcs: Vec<String> = inst
            .exports(engine)
            .filter(|(_, item)| matches!(item.ty, ComponentItem::ComponentFunc(_)))
            .map(|(name, _)| name.to_string())
            .collect();
        let mut li = if defined.insert(iface.clone()) { Some(linker.instance(iface)?) } else { None };
        let short = iface.split('@').next().unwrap_or(iface);
        for func in funcs {
            let key: Arc<str> = format!("{iface}#{func}").into();
            let index = stage
                .get_export_index(Some(&export), &func)
                .with_context(|| format!("`{iface}` exports no `{func}`"))?;
            exports.push((key.clone(), index));
            let Some(li) = li.as_mut() else { continue };
            let name: Arc<str> = format!("{short}.{func}").into();
            li.func_new_concurrent(&func, move |accessor, _ty, params, results| {
                let (key, name) = (key.clone(), name.clone());
                Box::pin(async move {
                    let (target, scope, parent) = accessor.with(|mut access| {
                        use wasmtime::AsContextMut;
                        let stack: Vec<_> =
                            access.as_context_mut().async_call_stack().map(Iterator::collect).unwrap_or_default();
                        let d = access.get();
                        (d.loopback.get(&key).copied(), d.spin.scope.clone(), d.spin.scope.parent(&stack))
                    });
                    let target = target.ok_or_else(|| wasmtime::Error::msg(format!("nothing serves `{key}`")))?;
                    let mut span =
                        parent.and_then(|p| crate::otel::Span::start(&*name, crate::otel::Kind::Internal, Some(p)));
                    let call =
                        accessor.with(|mut access| target.start_call_concurrent(&mut access, params, results))?;
                    // The stage's own host calls find this span by its task.
                    let bound =
                        span.as_ref().map(|s| crate::otel::Binding::new(scope.clone(), call.task(), s.context()));
                    let result = target.finish_call_concurrent(accessor, call).await;
                    drop(bound);
                    if let Err(e) = &result {
                        crate::otel::fail(&mut span, e);
                    }
                    result
                })
            })?;
        }
    }
    Ok(exports)
}

fn load_cached(engine: &Engine, dir: &Path, bytes: &[u8]) -> Result<Component> {
    let mut h = Sha256::new();
    h.update(bytes);
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut HashWriter(&mut h));
    let path = dir.join(format!("{}.cwasm", hex::encode(h.finalize())));
    if path.exists() {
        // SAFETY: the file was written by `Component::serialize` of this
        // engine configuration (its hash is part of the file name).
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(c) => return Ok(c),
            Err(e) => eprintln!("ignoring unusable cache entry {}: {e}", path.display()),
        }
    }
    let component = Component::new(engine, bytes)?;
    std::fs::create_dir_all(dir)?;
    // Unique per writer: two runners may compile the same component at once.
    let tmp = path.with_extension(format!("{}.{:x}.tmp", std::process::id(), rand::random::<u32>()));
    std::fs::write(&tmp, component.serialize()?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(component)
}

struct HashWriter<'a>(&'a mut Sha256);

impl std::hash::Hasher for HashWriter<'_> {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// The capabilities of an entry component (its dependencies inherit from it,
/// or get the denied imports the composition routed to `mneme-deny-…`).
fn capabilities(c: &ManifestComponent, vars: &AppVariables) -> Result<Capabilities> {
    let mut variables = BTreeMap::new();
    for (name, template) in &c.def.variables {
        vars.check_template(template).with_context(|| format!("component `{}` variable `{name}`", c.id))?;
        variables.insert(name.clone(), vars.expand(template).ok());
    }
    let hosts: Vec<String> = c
        .def
        .allowed_outbound_hosts
        .iter()
        .map(|h| vars.expand(h))
        .collect::<Result<_>>()
        .with_context(|| format!("component `{}` allowed_outbound_hosts", c.id))?;
    Ok(Capabilities {
        component: c.id.clone(),
        key_value_stores: c.def.key_value_stores.clone(),
        sqlite_databases: c.def.sqlite_databases.clone(),
        ai_models: c.def.ai_models.clone(),
        allowed_hosts: AllowedHosts::parse(&hosts).with_context(|| format!("component `{}`", c.id))?,
        variables,
    })
}

fn file_mounts(dir: &Path, files: &[FileMount]) -> Result<Vec<(PathBuf, String)>> {
    files
        .iter()
        .map(|f| match f {
            FileMount::Mapped { source, destination } => {
                let src = dir.join(source);
                if !src.is_dir() {
                    bail!("files: `{source}` must be a directory for a {{ source, destination }} mount");
                }
                Ok((src, destination.clone()))
            }
            FileMount::Path(p) if dir.join(p).is_dir() => Ok((dir.join(p), format!("/{}", p.trim_start_matches("./")))),
            FileMount::Path(p) => {
                bail!("files: `{p}`: this runner mounts directories; use {{ source = \"dir\", destination = \"/\" }}")
            }
        })
        .collect()
}
