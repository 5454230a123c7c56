//! OpenTelemetry for `mneme up` (`crates/mneme-runner`), switched on by the environment variables
//! Spin reads (`OTEL_EXPORTER_OTLP_ENDPOINT`, or the per-signal
//! `…_TRACES_ENDPOINT` / `…_METRICS_ENDPOINT`; `OTEL_SDK_DISABLED` turns it
//! off). Traces and metrics leave over OTLP/HTTP in protobuf, Spin's default
//! protocol (D-F30).
//!
//! A request's trace: the server span `{METHOD} {route}` (Spin's name and
//! attributes), under it `execute_wasm_component {component}`, under that a
//! span per call across a stage's WIT seam (`mneme:context/context.assemble`),
//! and under those a span per host call, named as Spin names them
//! (`spin_sqlite.execute`, `spin_outbound_pg.query`, `spin_key_value.get`,
//! `spin_outbound_redis.execute`, `spin_outbound_http.send_request`, …). A
//! model call carries its token counts; outbound requests carry
//! `traceparent`.
//!
//! Off, each would-be span is one load of a `OnceLock` and a `None`. The
//! runner's `otel` module finds each span's parent (by guest task); this
//! crate records, aggregates and exports.

pub mod export;
pub mod metrics;
pub mod usage;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};

static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();

/// What is exported, once configured.
pub struct Telemetry {
    spans: Option<export::SpanSink>,
    metrics: Option<&'static metrics::Metrics>,
}

/// Where and how to export, from the environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub traces: Option<String>,
    pub metrics: Option<String>,
    /// `OTEL_EXPORTER_OTLP_HEADERS`: sent with every export, never logged.
    pub headers: Vec<(String, String)>,
    pub resource: Vec<(String, String)>,
    pub batch_delay: Duration,
    pub batch_size: usize,
    pub queue_size: usize,
    pub metric_interval: Duration,
}

/// Reads the configuration the way Spin's telemetry does; `Ok(None)` when
/// nothing is to be exported.
pub fn config_from(var: &dyn Fn(&str) -> Option<String>) -> Result<Option<Config>, String> {
    let set = |k: &str| var(k).filter(|v| !v.is_empty());
    if set("OTEL_SDK_DISABLED").is_some() {
        return Ok(None);
    }
    let base = set("OTEL_EXPORTER_OTLP_ENDPOINT");
    // The signal endpoint is used as given; the base gets the signal's path.
    let signal = |specific: &str, path: &str| {
        set(specific).or_else(|| base.as_ref().map(|b| format!("{}/{path}", b.trim_end_matches('/'))))
    };
    let traces = signal("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "v1/traces");
    let metrics = signal("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "v1/metrics");
    if traces.is_none() && metrics.is_none() {
        return Ok(None);
    }
    for (key, on) in [("TRACES", traces.is_some()), ("METRICS", metrics.is_some())] {
        let protocol = set(&format!("OTEL_EXPORTER_OTLP_{key}_PROTOCOL"))
            .or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .unwrap_or_else(|| "http/protobuf".into());
        if on && protocol != "http/protobuf" {
            return Err(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: mneme up exports OTLP over http/protobuf only (Spin's default); unset it or set http/protobuf"
            ));
        }
    }
    let ms = |k: &str, default: u64| set(k).and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(default);
    let pairs = |k: &str| -> Vec<(String, String)> {
        set(k)
            .map(|v| {
                v.split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    .filter(|(k, _)| !k.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut resource = pairs("OTEL_RESOURCE_ATTRIBUTES");
    // service.name: OTEL_SERVICE_NAME, else the resource attributes, else
    // "spin", as Spin names itself, so one dashboard serves both.
    let service = set("OTEL_SERVICE_NAME")
        .or_else(|| resource.iter().find(|(k, _)| k == "service.name").map(|(_, v)| v.clone()))
        .unwrap_or_else(|| "spin".into());
    resource.retain(|(k, _)| k != "service.name");
    resource.insert(0, ("service.name".into(), service));
    resource.push(("service.version".into(), env!("CARGO_PKG_VERSION").into()));
    resource.push(("telemetry.sdk.name".into(), "mneme-runner".into()));
    resource.push(("telemetry.sdk.language".into(), "rust".into()));
    let mut headers = pairs("OTEL_EXPORTER_OTLP_HEADERS");
    headers.retain(|(k, _)| http::HeaderName::from_bytes(k.as_bytes()).is_ok());
    Ok(Some(Config {
        traces,
        metrics,
        headers,
        resource,
        batch_delay: Duration::from_millis(ms("OTEL_BSP_SCHEDULE_DELAY", 5000).max(1)),
        batch_size: ms("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512).max(1) as usize,
        queue_size: ms("OTEL_BSP_MAX_QUEUE_SIZE", 2048).max(1) as usize,
        metric_interval: Duration::from_millis(ms("OTEL_METRIC_EXPORT_INTERVAL", 60_000).max(10)),
    }))
}

/// Starts the exporters the environment asks for. Call once, before serving.
pub fn init_from_env() -> anyhow::Result<()> {
    let Some(config) = config_from(&|k| std::env::var(k).ok()).map_err(anyhow::Error::msg)? else {
        return Ok(());
    };
    let spans = config.traces.as_ref().map(|url| export::SpanSink::start(url.clone(), &config));
    let metrics = config.metrics.as_ref().map(|url| {
        let m: &'static metrics::Metrics = Box::leak(Box::default());
        export::start_metrics(url.clone(), &config, m);
        m
    });
    eprintln!(
        "OpenTelemetry: traces {}, metrics {} (OTLP/HTTP protobuf)",
        config.traces.as_deref().unwrap_or("off"),
        config.metrics.as_deref().unwrap_or("off")
    );
    let _ = TELEMETRY.set(Telemetry { spans, metrics });
    Ok(())
}

/// Whether spans are recorded.
#[inline]
pub fn tracing() -> bool {
    TELEMETRY.get().is_some_and(|t| t.spans.is_some())
}

/// The metrics, when exported.
#[inline]
pub fn metrics() -> Option<&'static metrics::Metrics> {
    TELEMETRY.get().and_then(|t| t.metrics)
}

/// Sends what is queued and waits (at most `within`) for it to leave.
pub fn flush(within: Duration) {
    if let Some(t) = TELEMETRY.get() {
        if let Some(s) = &t.spans {
            s.flush(within);
        }
        if t.metrics.is_some() {
            export::flush_metrics(within);
        }
    }
}

/// A span's identity, as W3C trace context carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanContext {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub sampled: bool,
}

impl SpanContext {
    /// Parses a `traceparent` header (version 00); `None` if malformed or
    /// all-zero, which the W3C spec says to ignore.
    pub fn from_traceparent(value: &str) -> Option<Self> {
        let mut parts = value.trim().split('-');
        let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version.len() != 2 || version == "ff" || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
            return None;
        }
        if version == "00" && parts.next().is_some() {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        hex::decode_to_slice(trace, &mut trace_id).ok()?;
        hex::decode_to_slice(span, &mut span_id).ok()?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self { trace_id, span_id, sampled: flags & 1 == 1 })
    }

    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-{:02x}", hex::encode(self.trace_id), hex::encode(self.span_id), u8::from(self.sampled))
    }
}

fn nonzero<const N: usize>() -> [u8; N] {
    loop {
        let id: [u8; N] = rand::random();
        if id != [0; N] {
            return id;
        }
    }
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// OTLP span kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Internal = 1,
    Server = 2,
    Client = 3,
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}
impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Value::Int(n)
    }
}
impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Int(n as i64)
    }
}
impl From<u32> for Value {
    fn from(n: u32) -> Self {
        Value::Int(i64::from(n))
    }
}
impl From<u16> for Value {
    fn from(n: u16) -> Self {
        Value::Int(i64::from(n))
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// A finished span, on its way to the exporter.
#[derive(Debug, Clone)]
pub struct SpanData {
    pub context: SpanContext,
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub kind: Kind,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: Vec<(&'static str, Value)>,
    pub events: Vec<Event>,
    pub error: Option<String>,
}

/// Something that happened during a span: OTLP's span event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub name: String,
    pub time_ns: u64,
    pub attributes: Vec<(&'static str, Value)>,
}

/// The most events one span keeps; later ones are counted, not kept.
pub const EVENTS_PER_SPAN: usize = 128;

/// Events added to open spans by whoever found them (the runner's guest
/// output), keyed by span id, taken by the span when it ends. A span has
/// an entry from its start, so an event for a span that has ended finds
/// none and is dropped rather than kept for ever.
#[derive(Default)]
struct Pending {
    by_span: HashMap<[u8; 8], (Vec<Event>, u32)>,
}

fn pending() -> std::sync::MutexGuard<'static, Pending> {
    static PENDING: OnceLock<Mutex<Pending>> = OnceLock::new();
    PENDING.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

/// Adds an event, timed now, to the open span `to`; `false` when that span
/// is not open (tracing off, or it has ended).
pub fn add_event(to: SpanContext, name: impl Into<String>, attributes: Vec<(&'static str, Value)>) -> bool {
    let mut p = pending();
    let Some((events, dropped)) = p.by_span.get_mut(&to.span_id) else { return false };
    if events.len() >= EVENTS_PER_SPAN {
        *dropped += 1;
    } else {
        events.push(Event { name: name.into(), time_ns: now_ns(), attributes });
    }
    true
}

/// A span being recorded; it ends (and is queued for export) when dropped.
pub struct Span(Option<SpanData>);

impl Span {
    /// Starts a span under `parent` (a new trace without one); `None` when
    /// tracing is off.
    pub fn start(name: impl Into<String>, kind: Kind, parent: Option<SpanContext>) -> Option<Span> {
        if !tracing() {
            return None;
        }
        let context =
            SpanContext { trace_id: parent.map_or_else(nonzero, |p| p.trace_id), span_id: nonzero(), sampled: true };
        pending().by_span.insert(context.span_id, (Vec::new(), 0));
        Some(Span(Some(SpanData {
            context,
            parent: parent.map(|p| p.span_id),
            name: name.into(),
            kind,
            start_ns: now_ns(),
            end_ns: 0,
            attributes: Vec::new(),
            events: Vec::new(),
            error: None,
        })))
    }

    pub fn context(&self) -> SpanContext {
        self.0.as_ref().map(|d| d.context).expect("a live span has its data")
    }

    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        if let Some(d) = &mut self.0 {
            d.attributes.push((key, value.into()));
        }
    }

    /// Marks the span failed (OTLP status ERROR) with `message`.
    pub fn fail(&mut self, message: impl Into<String>) {
        if let Some(d) = &mut self.0 {
            d.error = Some(message.into());
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(mut d) = self.0.take() {
            d.end_ns = now_ns().max(d.start_ns);
            if let Some((events, dropped)) = pending().by_span.remove(&d.context.span_id) {
                d.events = events;
                if dropped > 0 {
                    d.attributes.push(("mneme.events_dropped", Value::from(dropped)));
                }
            }
            if let Some(sink) = TELEMETRY.get().and_then(|t| t.spans.as_ref()) {
                sink.send(d);
            }
        }
    }
}

/// An attribute in OTLP form.
pub(crate) fn key_value(key: &str, value: &Value) -> KeyValue {
    let value = match value {
        Value::Str(s) => any_value::Value::StringValue(s.clone()),
        Value::Int(n) => any_value::Value::IntValue(*n),
        Value::Bool(b) => any_value::Value::BoolValue(*b),
    };
    KeyValue { key: key.to_string(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}

/// Sets `key` on an optional span.
pub fn set(span: &mut Option<Span>, key: &'static str, value: impl Into<Value>) {
    if let Some(s) = span {
        s.set(key, value);
    }
}

/// Marks an optional span failed.
pub fn fail(span: &mut Option<Span>, message: impl std::fmt::Display) {
    if let Some(s) = span {
        s.fail(message.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_what_w3c_says_to_ignore() {
        let v = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let c = SpanContext::from_traceparent(v).unwrap();
        assert!(c.sampled);
        assert_eq!(c.traceparent(), v);
        assert!(
            !SpanContext::from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap().sampled
        );
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-xyz92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(SpanContext::from_traceparent(bad), None, "{bad}");
        }
        // A later version may append fields.
        assert!(SpanContext::from_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x").is_some());
    }

    #[test]
    fn config_follows_the_otel_environment_as_spin_reads_it() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(config_from(&env(&[])).unwrap(), None);
        assert_eq!(config_from(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "")])).unwrap(), None);
        let c = config_from(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")])).unwrap().unwrap();
        assert_eq!(c.traces.as_deref(), Some("http://127.0.0.1:4318/v1/traces"));
        assert_eq!(c.metrics.as_deref(), Some("http://127.0.0.1:4318/v1/metrics"));
        assert_eq!(c.resource[0], ("service.name".to_string(), "spin".to_string()));
        let c = config_from(&env(&[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:1/t"),
            ("OTEL_SERVICE_NAME", "mneme"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer x, bad key=1"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.traces.as_deref(), Some("http://c:1/t"));
        assert_eq!(c.metrics, None);
        assert_eq!(c.resource[0].1, "mneme");
        assert_eq!(c.headers, vec![("authorization".to_string(), "Bearer x".to_string())]);
        assert_eq!(c.batch_delay, Duration::from_millis(100));
        let off = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:1"), ("OTEL_SDK_DISABLED", "true")]);
        assert_eq!(config_from(&off).unwrap(), None);
        let grpc = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:1"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert!(config_from(&grpc).unwrap_err().contains("http/protobuf only"));
    }
}
