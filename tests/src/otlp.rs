//! An OTLP/HTTP receiver on loopback, decoding with the OpenTelemetry
//! protobuf definitions (`opentelemetry-proto`): what `mneme up` exports
//! when `OTEL_EXPORTER_OTLP_ENDPOINT` points at it, and the log records
//! Spin exports besides.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::metrics::v1::Metric;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

#[derive(Default)]
struct Received {
    spans: Vec<Span>,
    metrics: Vec<Metric>,
    resources: Vec<Vec<KeyValue>>,
    logs: Vec<LogRecord>,
    /// Requests that were not OTLP protobuf (path, content type).
    rejected: Vec<String>,
}

pub struct Receiver {
    pub addr: String,
    got: Arc<Mutex<Received>>,
}

impl Receiver {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let got = Arc::new(Mutex::new(Received::default()));
        let g = got.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(100_000) {
                let Ok(stream) = stream else { continue };
                let g = g.clone();
                std::thread::spawn(move || serve(stream, &g));
            }
        });
        Self { addr, got }
    }

    /// The `OTEL_EXPORTER_OTLP_ENDPOINT` for it.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn spans(&self) -> Vec<Span> {
        self.got.lock().unwrap().spans.clone()
    }

    pub fn metrics(&self) -> Vec<Metric> {
        self.got.lock().unwrap().metrics.clone()
    }

    /// Log records, in the order they arrived.
    pub fn logs(&self) -> Vec<LogRecord> {
        self.got.lock().unwrap().logs.clone()
    }

    /// The string bodies of the log records of `component`, in the order
    /// they arrived, joined: Spin exports each write to a guest's stdio as
    /// a record of its own, so a line may span several.
    pub fn logged_text(&self, component: &str) -> String {
        self.logs()
            .iter()
            .filter(|r| attr(&r.attributes, "component_id").as_deref() == Some(component))
            .filter_map(|r| match r.body.as_ref().and_then(|b| b.value.as_ref()) {
                Some(any_value::Value::StringValue(s)) => Some(s.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn resources(&self) -> Vec<Vec<KeyValue>> {
        self.got.lock().unwrap().resources.clone()
    }

    pub fn rejected(&self) -> Vec<String> {
        self.got.lock().unwrap().rejected.clone()
    }

    /// Waits (at most `limit`) until `done` holds of what arrived.
    pub fn wait_for(&self, limit: Duration, done: impl Fn(&[Span], &[Metric]) -> bool) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            {
                let g = self.got.lock().unwrap();
                if done(&g.spans, &g.metrics) {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

/// A string or integer attribute of `attrs`, as text.
pub fn attr(attrs: &[KeyValue], key: &str) -> Option<String> {
    let v = attrs.iter().find(|kv| kv.key == key)?.value.as_ref()?.value.as_ref()?;
    Some(match v {
        any_value::Value::StringValue(s) => s.clone(),
        any_value::Value::IntValue(n) => n.to_string(),
        any_value::Value::BoolValue(b) => b.to_string(),
        other => format!("{other:?}"),
    })
}

fn serve(mut s: TcpStream, got: &Mutex<Received>) {
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    loop {
        let Some((head, body)) = read(&mut s) else { return };
        let first = head.lines().next().unwrap_or_default().to_string();
        let lower = head.to_ascii_lowercase();
        let protobuf = lower.contains("content-type: application/x-protobuf");
        {
            let mut g = got.lock().unwrap();
            if first.starts_with("POST /v1/traces ") && protobuf {
                match ExportTraceServiceRequest::decode(&body[..]) {
                    Ok(req) => {
                        for rs in req.resource_spans {
                            g.resources.push(rs.resource.map(|r| r.attributes).unwrap_or_default());
                            for ss in rs.scope_spans {
                                g.spans.extend(ss.spans);
                            }
                        }
                    }
                    Err(e) => g.rejected.push(format!("{first}: undecodable: {e}")),
                }
            } else if first.starts_with("POST /v1/metrics ") && protobuf {
                match ExportMetricsServiceRequest::decode(&body[..]) {
                    Ok(req) => {
                        for rm in req.resource_metrics {
                            for sm in rm.scope_metrics {
                                g.metrics.extend(sm.metrics);
                            }
                        }
                    }
                    Err(e) => g.rejected.push(format!("{first}: undecodable: {e}")),
                }
            } else if first.starts_with("POST /v1/logs ") && protobuf {
                match ExportLogsServiceRequest::decode(&body[..]) {
                    Ok(req) => {
                        for rl in req.resource_logs {
                            for sl in rl.scope_logs {
                                g.logs.extend(sl.log_records);
                            }
                        }
                    }
                    Err(e) => g.rejected.push(format!("{first}: undecodable: {e}")),
                }
            } else {
                g.rejected.push(first.clone());
            }
        }
        // An empty Export*ServiceResponse.
        if s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n").is_err()
        {
            return;
        }
    }
}

/// One request with a `content-length` body, bytes kept as they are.
fn read(s: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    let end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = s.read(&mut buf).ok().filter(|n| *n > 0)?;
        got.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&got[..end]).to_string();
    let len = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0usize);
    let mut body = got[end + 4..].to_vec();
    while body.len() < len {
        let n = s.read(&mut buf).ok().filter(|n| *n > 0)?;
        body.extend_from_slice(&buf[..n]);
    }
    body.truncate(len);
    Some((head, body))
}
