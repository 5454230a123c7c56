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

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::Result;
use wasmtime::component::GuestTaskId;
use wasmtime::{Engine, Store, StoreContextMut, StoreLimitsBuilder};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi_http::WasiHttpCtx;
use wasmtime_wasi_http::handler::{
    HandlerState, Instance, ProxyPre, ShouldAccept, ViewFn, WorkerExpiration, WorkerState, WorkerStatus,
};
use wasmtime_wasi_http::p3::WasiHttpView;
use wasmtime_wasi_http::p3::bindings::ServicePre;

use crate::app::{Data, DenyAllHttp, Limits, OutboundHttp};
use crate::budget::{Budget, Lease};
use crate::host::{Capabilities, Services, SpinCtx};

/// One HTTP component, compiled and linked, and what each of its instances
/// is given.
pub struct Component {
    pub id: String,
    pub pre: ServicePre<Data>,
    pub caps: Arc<Capabilities>,
    pub env: Vec<(String, String)>,
    pub files: Vec<(std::path::PathBuf, String)>,
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
        let mut wasi = WasiCtxBuilder::new();
        wasi.inherit_stdout().inherit_stderr();
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
            hooks: OutboundHttp { caps: c.caps.clone() },
            spin: SpinCtx { caps: c.caps.clone(), services: self.services.clone() },
            limits: StoreLimitsBuilder::new().memory_size(self.limits.memory_bytes).instances(256).build(),
            deny_hooks: DenyAllHttp,
            worker: Worker::default(),
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
        _task: GuestTaskId,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + Sync>> {
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
