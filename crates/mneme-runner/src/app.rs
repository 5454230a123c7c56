//! A loaded application: manifest, services and one pre-instantiated
//! component per HTTP component, ready to serve requests.
//!
//! Every request gets a fresh instance (Spin's model) from a
//! pre-instantiated component on the pooling allocator, with a memory cap and
//! an epoch deadline. A trap answers 500 with the request id, and the app
//! keeps serving. Compiled components are cached on disk, keyed by the
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
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreLimits, StoreLimitsBuilder,
};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::WasiHttpCtx;
use wasmtime_wasi_http::p3::bindings::ServicePre;
use wasmtime_wasi_http::p3::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::p3::{WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use crate::host::{self, Capabilities, Services, Spin, SpinCtx, SpinView};
use crate::manifest::{Component as ManifestComponent, FileMount, Manifest};
use crate::outbound::AllowedHosts;
use crate::routes::Router;
use crate::runtime_config::{KvBackend, RuntimeConfig};
use crate::variables::AppVariables;

pub type Body = UnsyncBoxBody<Bytes, anyhow::Error>;

/// Limits applied to each request's instance.
#[derive(Debug, Clone)]
pub struct Limits {
    pub memory_bytes: usize,
    pub timeout: Duration,
    pub max_body_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { memory_bytes: 256 << 20, timeout: Duration::from_secs(420), max_body_bytes: 4 << 20 }
    }
}

/// Store data of one instance.
pub struct Data {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: OutboundHttp,
    spin: SpinCtx,
    limits: StoreLimits,
    deny_hooks: DenyAllHttp,
}

impl Data {
    pub(crate) fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }

    /// The `wasi:http` view for a dependency denied outbound HTTP.
    pub(crate) fn denied_http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { hooks: &mut self.deny_hooks, table: &mut self.table, ctx: &mut self.http }
    }
}

/// Refuses every outbound request.
struct DenyAllHttp;

impl WasiHttpHooks for DenyAllHttp {
    fn send_request(
        &mut self,
        _request: http::Request<UnsyncBoxBody<Bytes, ErrorCode>>,
        _options: Option<wasmtime_wasi_http::p3::RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), ErrorCode>> + Send>,
    ) -> SendFuture {
        Box::new(async { Err(ErrorCode::HttpRequestDenied.into()) })
    }
}

impl WasiView for Data {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for Data {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { hooks: &mut self.hooks, table: &mut self.table, ctx: &mut self.http }
    }
}

/// `wasi:http` outbound requests, checked against `allowed_outbound_hosts`.
struct OutboundHttp {
    caps: Arc<Capabilities>,
}

type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<UnsyncBoxBody<Bytes, ErrorCode>>,
                    Box<dyn Future<Output = Result<(), ErrorCode>> + Send>,
                ),
                wasmtime_wasi::TrappableError<ErrorCode>,
            >,
        > + Send,
>;

impl WasiHttpHooks for OutboundHttp {
    fn send_request(
        &mut self,
        request: http::Request<UnsyncBoxBody<Bytes, ErrorCode>>,
        options: Option<wasmtime_wasi_http::p3::RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), ErrorCode>> + Send>,
    ) -> SendFuture {
        drop(fut);
        let uri = request.uri();
        let scheme = uri.scheme_str().unwrap_or("https").to_string();
        let host = uri.host().unwrap_or_default().to_string();
        let port = uri.port_u16().or_else(|| crate::outbound::default_port(&scheme)).unwrap_or(0);
        let allowed = self.caps.allowed_hosts.allows(&scheme, &host, port);
        let component = self.caps.component.clone();
        Box::new(async move {
            if !allowed {
                crate::outbound::log_denied(&component, &format!("{scheme}://{host}:{port}"));
                return Err(ErrorCode::HttpRequestDenied.into());
            }
            let (res, io) = wasmtime_wasi_http::p3::default_send_request(request, options).await?;
            Ok((res.map(BodyExt::boxed_unsync), Box::new(io) as Box<dyn Future<Output = _> + Send>))
        })
    }
}

/// One HTTP component, compiled and linked.
struct Prepared {
    pre: ServicePre<Data>,
    caps: Arc<Capabilities>,
    env: Vec<(String, String)>,
    files: Vec<(PathBuf, String)>,
}

pub struct App {
    pub manifest: Manifest,
    pub router: Router,
    pub variables: AppVariables,
    pub limits: Limits,
    engine: Engine,
    services: Arc<Services>,
    components: HashMap<String, Prepared>,
}

/// Options for [`App::load`].
pub struct LoadOptions {
    pub manifest: PathBuf,
    pub runtime_config: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub limits: Limits,
}

fn engine() -> Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model_async(true);
    config.epoch_interruption(true);
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(512)
        .total_core_instances(4096)
        .total_memories(2048)
        .total_tables(2048)
        .max_memories_per_component(32)
        .max_tables_per_component(32)
        .max_core_instances_per_component(64)
        .max_memory_size(1 << 30)
        .total_stacks(512)
        // Return memory to the OS in batches: each decommit is an madvise
        // that interrupts every core running the process (TLB shootdown).
        .decommit_batch_size(64)
        // On Linux 6.7+, reset only the pages a request dirtied and keep them
        // resident, instead of unmapping and faulting them back in.
        .pagemap_scan(wasmtime::Enabled::Auto)
        .linear_memory_keep_resident(4 << 20)
        .table_keep_resident(64 << 10)
        .async_stack_keep_resident(256 << 10);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Ok(Engine::new(&config)?)
}

impl App {
    pub async fn load(opts: LoadOptions) -> Result<Self> {
        let manifest = crate::manifest::load(&opts.manifest)?;
        let state_dir = opts.state_dir.clone().unwrap_or_else(|| manifest.dir.join(".spin"));
        let runtime = RuntimeConfig::load(opts.runtime_config.as_deref(), &state_dir)?;
        let variables = AppVariables::resolve(&manifest.variables, &|k| std::env::var(k).ok())?;
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
        for c in manifest.components.values() {
            for label in &c.def.key_value_stores {
                if !runtime.kv.contains_key(label) {
                    bail!(
                        "component `{}` uses key-value store `{label}`, which the runtime config does not define",
                        c.id
                    );
                }
            }
            for label in &c.def.sqlite_databases {
                if !runtime.sqlite.contains_key(label) {
                    bail!(
                        "component `{}` uses SQLite database `{label}`, which the runtime config does not define",
                        c.id
                    );
                }
            }
        }
        let services = Arc::new(Services {
            kv,
            sqlite,
            pg: Default::default(),
            redis: Default::default(),
            llm: host::llm::Llm::new(models_dir(&state_dir), runtime.llm.clone()),
        });

        let engine = engine()?;
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
        let mut components = HashMap::new();
        let mut denied = std::collections::HashSet::new();
        let http_components: std::collections::BTreeSet<&String> = manifest.http.iter().map(|t| &t.component).collect();
        for id in http_components {
            let c = &manifest.components[id];
            let started = Instant::now();
            let bytes = compose_component(&manifest, c)?;
            let component =
                load_cached(&engine, &cache, &bytes).with_context(|| format!("compiling component `{id}`"))?;
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
            let env = c.def.environment.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            let files = file_mounts(&manifest.dir, &c.def.files)?;
            eprintln!("component {id} ready in {} ms", started.elapsed().as_millis());
            components.insert(id.clone(), Prepared { pre, caps, env, files });
        }

        Ok(Self { manifest, router, variables, limits: opts.limits, engine, services, components })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn new_store(&self, p: &Prepared) -> Result<Store<Data>> {
        let mut wasi = WasiCtxBuilder::new();
        wasi.inherit_stdout().inherit_stderr();
        for (k, v) in &p.env {
            wasi.env(k, v);
        }
        for (host_dir, guest) in &p.files {
            wasi.preopened_dir(host_dir, guest, wasmtime_wasi::DirPerms::READ, wasmtime_wasi::FilePerms::READ)?;
        }
        let data = Data {
            table: ResourceTable::new(),
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            hooks: OutboundHttp { caps: p.caps.clone() },
            spin: SpinCtx { caps: p.caps.clone(), services: self.services.clone() },
            limits: StoreLimitsBuilder::new().memory_size(self.limits.memory_bytes).instances(256).build(),
            deny_hooks: DenyAllHttp,
        };
        let mut store = Store::new(&self.engine, data);
        store.limiter(|d| &mut d.limits);
        store.set_epoch_deadline((self.limits.timeout.as_millis() / crate::EPOCH_TICK.as_millis()).max(1) as u64);
        store.epoch_deadline_trap();
        Ok(store)
    }

    /// Runs `component` on `req`. The response head arrives when the guest
    /// returns it; its body streams as the guest writes it.
    pub async fn call(
        self: &Arc<Self>,
        component: &str,
        req: http::Request<http_body_util::Full<Bytes>>,
    ) -> Result<http::Response<Body>> {
        let p = self.components.get(component).with_context(|| format!("no HTTP component `{component}`"))?;
        let mut store = self.new_store(p)?;
        let pre = p.pre.clone();
        let (head_tx, head_rx) = tokio::sync::oneshot::channel::<Result<http::Response<Body>>>();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let head_tx = std::sync::Mutex::new(Some(head_tx));
            let send = |r: Result<http::Response<Body>>| {
                if let Some(tx) = head_tx.lock().unwrap().take() {
                    let _ = tx.send(r);
                }
            };
            let outcome = async {
                let instantiating = Instant::now();
                let service = pre.instantiate_async(&mut store).await?;
                let instantiated = Instantiation(instantiating.elapsed());
                store
                    .run_concurrent(async |accessor| -> Result<()> {
                        let (request, request_io) = wasmtime_wasi_http::p3::Request::from_http(
                            req.map(|b| b.map_err(|e| -> ErrorCode { match e {} })),
                        );
                        let response = match service.handle(accessor, request).await? {
                            Ok(r) => r,
                            Err(code) => bail!("the component answered with error code {code:?}"),
                        };
                        let response = accessor.with(|access| response.into_http(access, request_io))?;
                        let mut response = response.map(|b| {
                            DoneBody {
                                inner: b.map_err(|e| anyhow::anyhow!("{e:?}")).boxed_unsync(),
                                done: Some(done_tx),
                            }
                            .boxed_unsync()
                        });
                        response.extensions_mut().insert(instantiated);
                        send(Ok(response));
                        let _ = done_rx.await;
                        Ok(())
                    })
                    .await?
            }
            .await;
            if let Err(e) = outcome {
                send(Err(e));
            }
        });
        head_rx.await.unwrap_or_else(|_| Err(anyhow::anyhow!("the instance ended without a response")))
    }
}

/// How long instantiating the component took, carried on the response for the log.
#[derive(Debug, Clone, Copy)]
pub struct Instantiation(pub Duration);

/// A body that signals when it has been read to the end or dropped, so the
/// instance that produces it stays alive exactly as long as needed.
struct DoneBody {
    inner: Body,
    done: Option<tokio::sync::oneshot::Sender<()>>,
}

impl http_body::Body for DoneBody {
    type Data = Bytes;
    type Error = anyhow::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, anyhow::Error>>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if let std::task::Poll::Ready(None | Some(Err(_))) = &r {
            self.done.take().map(|d| d.send(()));
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Where local models live: Spin's `<state-dir>/ai-models` when it holds the
/// model, else `$MNEME_MODELS_DIR`, else `~/.cache/mneme/ai-models` (where
/// `scripts/install.sh` puts the weights).
fn models_dir(state_dir: &Path) -> PathBuf {
    let spin = state_dir.join("ai-models");
    if spin.join(host::llm::EMBEDDING_MODEL).is_dir() {
        return spin;
    }
    if let Some(dir) = std::env::var_os("MNEME_MODELS_DIR") {
        return PathBuf::from(dir);
    }
    std::env::var_os("HOME").map_or(spin, |h| PathBuf::from(h).join(".cache/mneme/ai-models"))
}

fn compose_component(manifest: &Manifest, c: &ManifestComponent) -> Result<Vec<u8>> {
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {} (did the build run?)", p.display()));
    let root = read(&c.source)?;
    let mut deps = Vec::new();
    for d in &c.dependencies {
        deps.push((d.clone(), read(&manifest.components[&d.component].source)?));
    }
    crate::compose::compose(&root, &deps).with_context(|| format!("composing component `{}`", c.id))
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
