//! OTLP/HTTP protobuf export, on threads of its own: spans are queued
//! (bounded; a full queue drops and counts) and sent in batches every
//! `OTEL_BSP_SCHEDULE_DELAY` or `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` spans;
//! metrics are sent every `OTEL_METRIC_EXPORT_INTERVAL`. A collector that
//! fails or goes silent costs a log line per batch (its headers, which may
//! hold credentials, are never printed) and never slows a request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Status, status::StatusCode};
use prost::Message;

use super::{Config, SpanData, Value, key_value};

/// How long one export may take before it is abandoned.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

enum Msg {
    Span(SpanData),
    Flush(SyncSender<()>),
}

/// Where finished spans go.
pub struct SpanSink {
    tx: SyncSender<Msg>,
    dropped: Arc<AtomicU64>,
}

/// One OTLP/HTTP endpoint with its headers and resource.
#[derive(Clone)]
struct Endpoint {
    url: String,
    headers: Vec<(String, String)>,
    resource: Resource,
    agent: ureq::Agent,
}

impl Endpoint {
    fn new(url: String, config: &Config) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(EXPORT_TIMEOUT))
            .http_status_as_error(false)
            .build()
            .new_agent();
        let resource = Resource {
            attributes: config.resource.iter().map(|(k, v)| key_value(k, &Value::Str(v.clone()))).collect(),
            ..Default::default()
        };
        Self { url, headers: config.headers.clone(), resource, agent }
    }

    /// POSTs one encoded request; logs (without headers) what went wrong.
    fn post(&self, what: &str, body: Vec<u8>) {
        let mut req = self.agent.post(&self.url).header("content-type", "application/x-protobuf");
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        match req.send(&body[..]) {
            Ok(resp) if resp.status().is_success() => {}
            Ok(resp) => eprintln!("OpenTelemetry: {} answered {} to {what}", self.url, resp.status().as_u16()),
            Err(e) => eprintln!("OpenTelemetry: exporting {what} to {} failed: {e}", self.url),
        }
    }
}

fn scope() -> Option<InstrumentationScope> {
    Some(InstrumentationScope {
        name: "mneme-runner".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    })
}

fn encode_spans(resource: &Resource, spans: Vec<SpanData>) -> Vec<u8> {
    let spans = spans
        .into_iter()
        .map(|s| opentelemetry_proto::tonic::trace::v1::Span {
            trace_id: s.context.trace_id.to_vec(),
            span_id: s.context.span_id.to_vec(),
            parent_span_id: s.parent.map_or_else(Vec::new, |p| p.to_vec()),
            flags: u32::from(s.context.sampled) | 0x100,
            name: s.name,
            kind: s.kind as i32,
            start_time_unix_nano: s.start_ns,
            end_time_unix_nano: s.end_ns,
            attributes: s.attributes.iter().map(|(k, v)| key_value(k, v)).collect(),
            events: s
                .events
                .iter()
                .map(|e| opentelemetry_proto::tonic::trace::v1::span::Event {
                    time_unix_nano: e.time_ns,
                    name: e.name.clone(),
                    attributes: e.attributes.iter().map(|(k, v)| key_value(k, v)).collect(),
                    dropped_attributes_count: 0,
                })
                .collect(),
            status: Some(match s.error {
                Some(message) => Status { message, code: StatusCode::Error as i32 },
                None => Status { message: String::new(), code: StatusCode::Unset as i32 },
            }),
            ..Default::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource.clone()),
            scope_spans: vec![ScopeSpans { scope: scope(), spans, ..Default::default() }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

impl SpanSink {
    pub fn start(url: String, config: &Config) -> Self {
        let (tx, rx) = std::sync::mpsc::sync_channel(config.queue_size);
        let dropped = Arc::new(AtomicU64::new(0));
        let endpoint = Endpoint::new(url, config);
        let (delay, size, lost) = (config.batch_delay, config.batch_size, dropped.clone());
        std::thread::Builder::new()
            .name("otel-spans".into())
            .spawn(move || span_loop(rx, endpoint, delay, size, lost))
            .expect("spawning the span exporter");
        Self { tx, dropped }
    }

    pub fn send(&self, span: SpanData) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(Msg::Span(span)) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn flush(&self, within: Duration) {
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        if self.tx.send(Msg::Flush(done)).is_ok() {
            let _ = wait.recv_timeout(within);
        }
    }
}

fn span_loop(rx: Receiver<Msg>, endpoint: Endpoint, delay: Duration, size: usize, dropped: Arc<AtomicU64>) {
    let mut batch: Vec<SpanData> = Vec::new();
    let mut due = Instant::now() + delay;
    loop {
        let msg = rx.recv_timeout(due.saturating_duration_since(Instant::now()));
        let mut flushed = None;
        match msg {
            Ok(Msg::Span(s)) => {
                batch.push(s);
                if batch.len() < size {
                    continue;
                }
            }
            Ok(Msg::Flush(done)) => flushed = Some(done),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            eprintln!("OpenTelemetry: the span queue was full; {lost} spans were dropped");
        }
        if !batch.is_empty() {
            let n = batch.len();
            endpoint.post(&format!("{n} spans"), encode_spans(&endpoint.resource, std::mem::take(&mut batch)));
        }
        if let Some(done) = flushed {
            let _ = done.send(());
        }
        due = Instant::now() + delay;
    }
}

static METRICS: OnceLock<(Endpoint, &'static super::metrics::Metrics)> = OnceLock::new();

fn export_metrics() {
    if let Some((endpoint, metrics)) = METRICS.get() {
        let req = ExportMetricsServiceRequest { resource_metrics: vec![metrics.collect(&endpoint.resource, scope())] };
        endpoint.post("metrics", req.encode_to_vec());
    }
}

pub fn start_metrics(url: String, config: &Config, metrics: &'static super::metrics::Metrics) {
    if METRICS.set((Endpoint::new(url, config), metrics)).is_err() {
        return;
    }
    let every = config.metric_interval;
    std::thread::Builder::new()
        .name("otel-metrics".into())
        .spawn(move || {
            loop {
                std::thread::sleep(every);
                export_metrics();
            }
        })
        .expect("spawning the metric exporter");
}

/// Sends the metrics now (on the way out).
pub fn flush_metrics(within: Duration) {
    let (done, wait) = std::sync::mpsc::sync_channel(1);
    std::thread::spawn(move || {
        export_metrics();
        let _ = done.send(());
    });
    let _ = wait.recv_timeout(within);
}
