//! Instances and how requests reach them, as Spin 4.1 does for
//! `wasi:http@0.3` components: wasmtime's `ProxyHandler` keeps a set of live
//! instances per component and hands each request to one that has room. An
//! instance takes up to `max_concurrent` requests at once and `max_requests`
//! in its life, and is dropped after `idle_timeout` without work. A request
//! that has no answer after `request_timeout` expires; its instance takes no
//! more requests and is dropped once the others on it are done.
//!
//! A request's response head may come back long before its body ends (an SSE
//! stream): the instance then counts the request as answered and may take
//! others while the body is still being written. This is what keeps a
//! thousand open `/events` streams to a few instances instead of a thousand.
//!
//! A running guest yields to the event loop every epoch tick, so an instance
//! that loops without awaiting is still seen to expire and is dropped.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use wasmtime::StoreLimits;
use wasmtime::component::ResourceTable;
use wasmtime::component::{ComponentExportIndex, Func, GuestTaskId};
use wasmtime::{Engine, Store, StoreContextMut, StoreLimitsBuilder};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::WasiHttpCtx;
use wasmtime_wasi_http::handler::{
    HandlerState, Instance, ProxyPre, ShouldAccept, ViewFn, WorkerExpiration, WorkerState, WorkerStatus,
};
use wasmtime_wasi_http::p3::WasiHttpView;
use wasmtime_wasi_http::p3::bindings::ServicePre;
use wasmtime_wasi_http::p3::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::p3::{WasiHttpCtxView, WasiHttpHooks};

use crate::budget::{Budget, Lease};
use crate::host::{Capabilities, Services, SpinCtx};
use crate::stdio::{Lines, Target};

/// Limits applied to each instance and request.
#[derive(Debug, Clone)]
pub struct Limits {
    pub memory_bytes: usize,
    pub max_body_bytes: usize,
    pub reuse: Reuse,
}

impl Default for Limits {
    fn default() -> Self {
        Self { memory_bytes: 256 << 20, max_body_bytes: 4 << 20, reuse: Reuse::default() }
    }
}

/// How instances are reused across requests: `spin up`'s flags of the same
/// names, with Spin 4.1's defaults for `wasi:http@0.3` components (128
/// requests, 16 at once, 1 s idle). A range draws a value per instance.
#[derive(Debug, Clone, Copy)]
pub struct Reuse {
    pub max_requests: Range<usize>,
    pub max_concurrent: Range<usize>,
    pub idle_timeout: Range<Duration>,
    pub request_timeout: Range<Duration>,
}

impl Default for Reuse {
    fn default() -> Self {
        Self {
            max_requests: Range::Value(128),
            max_concurrent: Range::Value(16),
            idle_timeout: Range::Value(Duration::from_secs(1)),
            request_timeout: Range::Value(Duration::from_secs(420)),
        }
    }
}

/// A value, or a half-open range to draw one from (Spin's `1..8`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Range<T> {
    Value(T),
    Bounds(T, T),
}

impl<T: rand::distr::uniform::SampleUniform + PartialOrd + Copy> Range<T> {
    pub fn draw(self) -> T {
        match self {
            Range::Value(v) => v,
            Range::Bounds(a, b) if a < b => rand::random_range(a..b),
            Range::Bounds(a, _) => a,
        }
    }
}

/// Store data of one instance.
pub struct Data {
    pub(crate) table: ResourceTable,
    pub(crate) wasi: WasiCtx,
    pub(crate) http: WasiHttpCtx,
    pub(crate) hooks: OutboundHttp,
    pub(crate) spin: SpinCtx,
    pub(crate) limits: StoreLimits,
    pub(crate) deny_hooks: DenyAllHttp,
    pub(crate) worker: crate::instance::Worker,
    /// With tracing on, the composed component's stage exports, which the
    /// host's forwarders of the entry's stage imports call (`app.rs`).
    pub(crate) loopback: HashMap<Arc<str>, Func>,
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

/// Refuses every outbound request, as Spin's deny adapter does.
pub(crate) struct DenyAllHttp;

impl WasiHttpHooks for DenyAllHttp {
    fn send_request(
        &mut self,
        _request: http::Request<UnsyncBoxBody<Bytes, ErrorCode>>,
        _options: Option<wasmtime_wasi_http::p3::RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), ErrorCode>> + Send>,
    ) -> SendFuture {
        Box::new(async {
            Err(ErrorCode::InternalError(Some(crate::outbound::not_permitted("wasi:http/client"))).into())
        })
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
pub(crate) struct OutboundHttp {
    pub(crate) caps: Arc<Capabilities>,
    pub(crate) scope: Arc<crate::otel::Scope>,
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
        let mut request = request;
        let mut span = self.scope.host("spin_outbound_http.send_request");
        if let Some(s) = &mut span {
            let uri = request.uri();
            s.set("http.request.method", request.method().as_str());
            // Scheme, authority and path: a query may carry credentials.
            s.set(
                "url.full",
                format!(
                    "{}://{}{}",
                    uri.scheme_str().unwrap_or("http"),
                    uri.authority().map_or("", |a| a.as_str()),
                    uri.path()
                ),
            );
            s.set("server.address", uri.host().unwrap_or_default());
            if let Ok(v) = http::HeaderValue::from_str(&s.context().traceparent()) {
                request.headers_mut().insert("traceparent", v);
            }
        }
        let uri = request.uri();
        let scheme = uri.scheme_str().unwrap_or("https").to_string();
        let host = uri.host().unwrap_or_default().to_string();
        let port = uri.port_u16().or_else(|| crate::outbound::default_port(&scheme)).unwrap_or(0);
        let allowed = self.caps.allowed_hosts.allows(&scheme, &host, port);
        let authority = format!("{scheme}://{}", uri.authority().map_or(host.as_str(), |a| a.as_str()));
        Box::new(async move {
            if !allowed {
                crate::outbound::log_denied(&authority);
                crate::otel::fail(&mut span, "HttpRequestDenied");
                return Err(ErrorCode::HttpRequestDenied.into());
            }
            let (res, io) = match wasmtime_wasi_http::p3::default_send_request(request, options).await {
                Ok(sent) => sent,
                Err(e) => {
                    crate::otel::fail(&mut span, format!("{e:?}"));
                    return Err(e.into());
                }
            };
            let res = match span {
                // The span lasts until the body ends, and reads a model's
                // token counts from it on the way (`otel::usage`).
                Some(mut s) => {
                    s.set("http.response.status_code", res.status().as_u16());
                    res.map(|b| crate::otel::usage::Watched::new(b, s).boxed_unsync())
                }
                None => res.map(BodyExt::boxed_unsync),
            };
            Ok((res, Box::new(io) as Box<dyn Future<Output = _> + Send>))
        })
    }
}

/// One HTTP component, compiled and linked, and what each of its instances
/// is given.
pub struct Component {
    pub id: String,
    pub pre: ServicePre<Data>,
    /// With tracing on, the stages, instantiated beside the entry (`app.rs`).
    pub stages: Vec<TracedStage>,
    pub caps: Arc<Capabilities>,
    pub env: Vec<(String, String)>,
    pub files: Vec<(std::path::PathBuf, String)>,
}

/// A stage instantiated on its own while tracing, and where its exports are.
pub struct TracedStage {
    pub pre: wasmtime::component::InstancePre<Data>,
    pub exports: Vec<(Arc<str>, ComponentExportIndex)>,
}

/// What `ProxyHandler` asks of us: how to make an instance of a component.
pub struct Instances {
    pub engine: Engine,
    pub services: Arc<Services>,
    pub component: Component,
    /// This component's place in the pool (`budget.rs`).
    pub budget: Arc<Budget>,
    pub limits: Limits,
}

/// What one request carries into its instance, and what it learns there.
#[derive(Default)]
pub struct Ticket {
    pub id: String,
    /// The request's `execute_wasm_component` span, when tracing.
    pub trace: Option<crate::otel::SpanContext>,
    /// While tracing, binds the request's guest task to its span; the
    /// caller keeps it with the response body.
    pub binding: Mutex<Option<crate::otel::Binding>>,
    /// How long making its instance took, when the request was the first one
    /// the instance took; `None` when it reused an instance.
    pub instantiation: Mutex<Option<Duration>>,
}

/// Per-instance bookkeeping kept in the store.
#[derive(Default)]
pub struct Worker {
    /// The instance's place in the pool, given back with the store.
    pub lease: Option<Lease>,
    /// How long the instance took to make, until its first request takes it.
    pub fresh: Option<Duration>,
    /// The ids of the requests it took, for the log when it fails.
    pub requests: Vec<String>,
}

impl Instances {
    fn store(&self) -> Result<Store<Data>> {
        let c = &self.component;
        let scope = Arc::new(crate::otel::Scope::default());
        let mut wasi = WasiCtxBuilder::new();
        let trace = crate::otel::tracing().then(|| (scope.clone(), Arc::<str>::from(c.id.as_str())));
        wasi.stdout(Lines::new(Target::Stdout, trace.clone())).stderr(Lines::new(Target::Stderr, trace));
        for (k, v) in &c.env {
            wasi.env(k, v);
        }
        for (host_dir, guest) in &c.files {
            wasi.preopened_dir(host_dir, guest, wasmtime_wasi::DirPerms::READ, wasmtime_wasi::FilePerms::READ)?;
        }
        let data = Data {
            table: wasmtime::component::ResourceTable::new(),
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            hooks: OutboundHttp { caps: c.caps.clone(), scope: scope.clone() },
            spin: SpinCtx { caps: c.caps.clone(), services: self.services.clone(), scope },
            limits: StoreLimitsBuilder::new().memory_size(self.limits.memory_bytes).instances(256).build(),
            deny_hooks: DenyAllHttp,
            worker: Worker::default(),
            loopback: HashMap::new(),
        };
        let mut store = Store::new(&self.engine, data);
        store.limiter(|d| &mut d.limits);
        // Yield every tick instead of trapping: the handler's expiration,
        // polled outside the guest, then sees time pass even if a guest
        // never awaits, and drops the instance.
        store.set_epoch_deadline(1);
        store.epoch_deadline_async_yield_and_update(1);
        Ok(store)
    }
}

impl HandlerState for Instances {
    type StoreData = Data;
    type WorkerExpiration = Expiration;
    type WorkerState = Limit;

    async fn instantiate(&self) -> wasmtime::Result<Instance<Data, Expiration, Limit>> {
        let started = Instant::now();
        let lease = self.budget.lease()?;
        let mut store = self.store().map_err(wasmtime::Error::from_anyhow)?;
        store.data_mut().worker.lease = Some(lease);
        // The stages first: the entry's forwarded imports call into them.
        for stage in &self.component.stages {
            let instance = stage.pre.instantiate_async(&mut store).await?;
            for (key, index) in &stage.exports {
                let func = instance
                    .get_func(&mut store, index)
                    .ok_or_else(|| wasmtime::Error::msg(format!("the stage lost `{key}`")))?;
                store.data_mut().loopback.insert(key.clone(), func);
            }
        }
        let proxy = ProxyPre::P3(self.component.pre.clone()).instantiate_async(&mut store).await?;
        store.data_mut().worker.fresh = Some(started.elapsed());
        let reuse = self.limits.reuse;
        let request_timeout = reuse.request_timeout.draw();
        Ok(Instance {
            store,
            proxy,
            view: ViewFn::P3(|d: &mut Data| d.http()),
            expiration: Expiration {
                idle: reuse.idle_timeout.draw(),
                request: request_timeout,
                sleep: Box::pin(tokio::time::sleep(Duration::MAX / 4)),
            },
            state: Limit {
                component: self.component.id.clone(),
                request_timeout,
                max_requests: reuse.max_requests.draw().max(1),
                max_concurrent: reuse.max_concurrent.draw().max(1),
            },
        })
    }
}

/// When an instance is done: idle too long, or a request (or the work after
/// its answer) over its time.
pub struct Expiration {
    idle: Duration,
    request: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl WorkerExpiration for Expiration {
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>, status: WorkerStatus, since: Instant) -> Poll<()> {
        let limit = match status {
            WorkerStatus::Idle => self.idle,
            WorkerStatus::Requests | WorkerStatus::PostReturn => self.request,
        };
        let Some(deadline) = since.checked_add(limit) else { return Poll::Pending };
        let deadline = tokio::time::Instant::from_std(deadline);
        if self.sleep.deadline() != deadline {
            self.sleep.as_mut().reset(deadline);
        }
        self.sleep.as_mut().poll(cx)
    }
}

/// How many requests an instance takes, and how long each may run.
pub struct Limit {
    component: String,
    request_timeout: Duration,
    max_requests: usize,
    max_concurrent: usize,
}

impl WorkerState for Limit {
    type StoreData = Data;
    type RequestId = Arc<Ticket>;

    fn should_accept_request(&self, concurrent: usize, total: usize) -> ShouldAccept {
        if total >= self.max_requests {
            ShouldAccept::Never
        } else if concurrent >= self.max_concurrent {
            ShouldAccept::No
        } else {
            ShouldAccept::Yes
        }
    }

    fn on_request_start(
        &self,
        mut store: StoreContextMut<'_, Data>,
        ticket: Arc<Ticket>,
        task: GuestTaskId,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + Sync>> {
        if let Some(span) = ticket.trace {
            let scope = store.data().spin.scope.clone();
            *ticket.binding.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(crate::otel::Binding::new(scope, task, span));
        }
        let worker = &mut store.data_mut().worker;
        *ticket.instantiation.lock().unwrap_or_else(|p| p.into_inner()) = worker.fresh.take();
        // Keep the newest ids only: a long-lived instance takes at most
        // `max_requests`, but stay bounded whatever the flag says.
        if worker.requests.len() >= 256 {
            worker.requests.remove(0);
        }
        worker.requests.push(ticket.id.clone());
        Box::pin(tokio::time::sleep(self.request_timeout))
    }

    fn drop(&self, store: Store<Data>, result: wasmtime::Result<()>) {
        if let Err(e) = result {
            let ids = store.data().worker.requests.join(", ");
            eprintln!("component {} instance failed (requests {ids}): {e:?}", self.component);
        }
    }
}
