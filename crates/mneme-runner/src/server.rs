//! The HTTP trigger: accepts connections, routes each request as Spin does,
//! hands it to a fresh instance of the routed component and streams the
//! response back frame by frame (so SSE reaches the client event by event).
//!
//! Bodies over the limit are refused with 413 before the component runs.
//! A component that traps answers 500 with a request id and the server keeps
//! serving. Every request logs one line: method, path, component, status,
//! duration. Shutdown stops accepting and lets in-flight requests finish.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::app::{App, Body, CallError};

pub fn request_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

fn json_error(status: StatusCode, code: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({ "error": { "code": code, "message": message } }).to_string();
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)).map_err(|never| match never {}).boxed_unsync())
        .expect("static response parts are valid")
}

/// Routes and runs one request whose body is already in memory.
pub async fn dispatch(
    app: &Arc<App>,
    parts: http::request::Parts,
    body: Bytes,
    client: Option<SocketAddr>,
    id: &str,
) -> (Response<Body>, String) {
    let path = parts.uri.path().to_string();
    let Some(m) = app.router.route(&path) else {
        return (json_error(StatusCode::NOT_FOUND, "not-found", &format!("no route matches {path}")), "-".into());
    };
    let metrics = crate::otel::metrics();
    if !crate::otel::tracing() && metrics.is_none() {
        return run(app, parts, body, client, id, m, None).await;
    }
    // Spin's server span: `{METHOD} {route}`, under the caller's
    // `traceparent` when it sends one.
    let started = Instant::now();
    let method = parts.method.to_string();
    let route = m.raw_route.clone();
    let mut root = crate::otel::Span::start(
        format!("{method} {route}"),
        crate::otel::Kind::Server,
        parts
            .headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .and_then(crate::otel::SpanContext::from_traceparent),
    );
    if let Some(s) = &mut root {
        s.set("http.request.method", method.as_str());
        s.set("http.route", route.as_str());
        s.set("url.path", path.as_str());
        s.set("url.scheme", "http");
        s.set("network.protocol.name", "http");
        if let Some(c) = client {
            s.set("network.peer.address", c.ip().to_string());
            s.set("network.peer.port", c.port());
        }
    }
    let parent = root.as_ref().map(crate::otel::Span::context);
    let (resp, component) = run(app, parts, body, client, id, m, parent).await;
    let status = resp.status().as_u16();
    if let Some(s) = &mut root {
        s.set("http.response.status_code", status);
        if status >= 500 {
            s.fail(format!("HTTP {status}"));
        }
    }
    let done = Finished { root, metrics: metrics.map(|m| (m, method, route, status, started)) };
    (resp.map(|b| crate::app::Holding { inner: b, _held: done }.boxed_unsync()), component)
}

/// What a request leaves to be done when its response body ends: its
/// duration recorded, its server span ended.
struct Finished {
    root: Option<crate::otel::Span>,
    metrics: Option<(&'static crate::otel::metrics::Metrics, String, String, u16, Instant)>,
}

impl Drop for Finished {
    fn drop(&mut self) {
        if let Some((m, method, route, status, started)) = self.metrics.take() {
            m.request(&method, &route, status, started.elapsed().as_secs_f64());
        }
        drop(self.root.take());
    }
}

/// Runs a routed request in its component.
async fn run(
    app: &Arc<App>,
    parts: http::request::Parts,
    body: Bytes,
    client: Option<SocketAddr>,
    id: &str,
    m: crate::routes::RouteMatch,
    parent: Option<crate::otel::SpanContext>,
) -> (Response<Body>, String) {
    let host = parts.headers.get(http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost").to_string();
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let full_url = format!("http://{host}{pq}");
    let mut req = Request::from_parts(parts, Full::new(body));
    *req.uri_mut() = match full_url.parse() {
        Ok(u) => u,
        Err(_) => {
            return (
                json_error(StatusCode::BAD_REQUEST, "bad-request", "the request URI or Host header is invalid"),
                m.component,
            );
        }
    };
    let h = req.headers_mut();
    let set = |h: &mut http::HeaderMap, k: &'static str, v: &str| {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(k, v);
        }
    };
    set(h, "spin-full-url", &full_url);
    set(h, "spin-path-info", &m.path_info);
    set(h, "spin-matched-route", &m.raw_route);
    set(h, "spin-raw-component-route", &m.raw_route);
    set(h, "spin-component-route", m.raw_route.trim_end_matches("/..."));
    set(h, "spin-base-path", &app.manifest.http_base);
    if let Some(c) = client {
        set(h, "spin-client-addr", &c.to_string());
    }
    match app.call(&m.component, req, id, parent).await {
        Ok(resp) => (resp, m.component),
        Err(CallError::NoCapacity(e)) => {
            eprintln!("request {id}: no instance of {} could be made: {e}", m.component);
            let msg = format!("the server is at capacity; retry shortly (request id {id})");
            let mut resp = json_error(StatusCode::SERVICE_UNAVAILABLE, "overloaded", &msg);
            resp.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
            (resp, m.component)
        }
        Err(CallError::TimedOut) => {
            eprintln!("request {id}: component {} did not answer within its time limit", m.component);
            let msg = format!(
                "the component `{}` did not answer within its time limit; request id {id} (see the runner log)",
                m.component
            );
            (json_error(StatusCode::INTERNAL_SERVER_ERROR, "internal", &msg), m.component)
        }
        Err(CallError::Failed(e)) => {
            eprintln!("request {id}: component {} failed: {e}", m.component);
            let msg = format!("the component `{}` failed; request id {id} (see the runner log)", m.component);
            (json_error(StatusCode::INTERNAL_SERVER_ERROR, "internal", &msg), m.component)
        }
    }
}

/// How long a request body may pause between two pieces, and how long it
/// may take in all, before the request is answered 408.
const BODY_STALL: Duration = Duration::from_secs(10);
const BODY_TOTAL: Duration = Duration::from_secs(60);

/// Why a request body could not be read.
enum BodyError {
    TooLarge,
    Stalled,
    Broken(String),
}

/// Reads a whole request body, at most `limit` bytes, within the deadlines.
async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, BodyError> {
    let mut body = std::pin::pin!(body);
    let mut buf = bytes::BytesMut::new();
    let deadline = tokio::time::Instant::now() + BODY_TOTAL;
    loop {
        let wait = BODY_STALL.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        match tokio::time::timeout(wait, body.frame()).await {
            Err(_) => return Err(BodyError::Stalled),
            Ok(None) => return Ok(buf.freeze()),
            Ok(Some(Err(e))) => return Err(BodyError::Broken(e.to_string())),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if buf.len() + data.len() > limit {
                        return Err(BodyError::TooLarge);
                    }
                    buf.extend_from_slice(&data);
                }
            }
        }
    }
}

async fn handle(app: Arc<App>, req: Request<Incoming>, client: SocketAddr) -> Response<Body> {
    let started = Instant::now();
    let id = request_id();
    let (parts, body) = req.into_parts();
    let (method, path) = (parts.method.clone(), parts.uri.path().to_string());
    let limit = app.limits.max_body_bytes;
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let (resp, component) = if declared.is_some_and(|n| n > limit as u64) {
        (closing(too_large(limit)), "-".to_string())
    } else {
        match read_body(body, limit).await {
            Ok(b) => dispatch(&app, parts, b, Some(client), &id).await,
            Err(BodyError::TooLarge) => (closing(too_large(limit)), "-".to_string()),
            Err(BodyError::Stalled) => (
                closing(json_error(
                    StatusCode::REQUEST_TIMEOUT,
                    "request-timeout",
                    &format!(
                        "the request body stopped arriving (more than {} s without data, or {} s in all)",
                        BODY_STALL.as_secs(),
                        BODY_TOTAL.as_secs()
                    ),
                )),
                "-".into(),
            ),
            Err(BodyError::Broken(e)) => (
                closing(json_error(StatusCode::BAD_REQUEST, "bad-request", &format!("reading the request body: {e}"))),
                "-".into(),
            ),
        }
    };
    let inst = resp.extensions().get::<crate::app::Instantiation>().map_or(String::new(), |i| match i.0 {
        Some(d) => format!(" inst={}us", d.as_micros()),
        None => " inst=reused".to_string(),
    });
    let ms = started.elapsed().as_secs_f64() * 1e3;
    crate::log::line(format!("{method} {path} {component} {} {ms:.2}ms{inst} id={id}", resp.status().as_u16()));
    resp
}

/// Marks an answer given before the body was read: the connection closes,
/// since the rest of the body would be read as the next request.
fn closing(mut resp: Response<Body>) -> Response<Body> {
    resp.headers_mut().insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

fn too_large(limit: usize) -> Response<Body> {
    json_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload-too-large",
        &format!("the request body is over the {limit}-byte limit"),
    )
}

/// Serves until `shutdown` resolves, then drains in-flight connections.
pub async fn serve(app: Arc<App>, listener: TcpListener, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, client) = match accepted {
                    Ok(a) => a,
                    Err(e) => { eprintln!("accept failed: {e}"); continue; }
                };
                let _ = stream.set_nodelay(true);
                let app = app.clone();
                let watch = Arc::new(crate::conn::Watch::default());
                let io = crate::conn::Guarded::new(stream, watch.clone());
                let service = hyper::service::service_fn(move |req| {
                    let (app, watch) = (app.clone(), watch.clone());
                    async move {
                        let in_flight = watch.start();
                        let resp = handle(app, req, client).await;
                        // The request counts as in the service until hyper drops its body (`conn.rs`).
                        Ok::<_, std::convert::Infallible>(resp.map(|b| crate::app::Holding { inner: b, _held: in_flight }.boxed_unsync()))
                    }
                });
                let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(io), service);
                let conn = graceful.watch(conn);
                tokio::spawn(async move { let _ = conn.await; });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(std::time::Duration::from_secs(10)) => eprintln!("shutdown: gave up waiting for open connections"),
    }
    Ok(())
}
