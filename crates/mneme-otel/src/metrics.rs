//! The runner's metrics, aggregated in process and exported cumulatively:
//!
//! - `http.server.request.duration` (histogram, seconds) by
//!   `http.request.method`, `http.route` and `http.response.status_code`,
//!   with OpenTelemetry's default HTTP buckets;
//! - `mneme.tick.runs` (counter) by `mneme.tick.job` and `mneme.tick.outcome`
//!   (`ok`, `skipped`, `failed`), from the scheduler;
//! - `mneme.queue.depth` (gauge) by `mneme.queue`: jobs still waiting after
//!   the last drain, as the tick reports it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint, ResourceMetrics,
    ScopeMetrics, Sum, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use super::{Value, key_value};

/// OpenTelemetry's recommended buckets for `http.server.request.duration`.
pub const BOUNDS: [f64; 14] = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0];

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hist {
    pub counts: [u64; BOUNDS.len() + 1],
    pub count: u64,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
}

impl Hist {
    pub fn record(&mut self, v: f64) {
        let i = BOUNDS.iter().position(|b| v <= *b).unwrap_or(BOUNDS.len());
        self.counts[i] += 1;
        if self.count == 0 || v < self.min {
            self.min = v;
        }
        if self.count == 0 || v > self.max {
            self.max = v;
        }
        self.count += 1;
        self.sum += v;
    }
}

#[derive(Default)]
struct Inner {
    requests: BTreeMap<(String, String, u16), Hist>,
    ticks: BTreeMap<(String, &'static str), u64>,
    queues: BTreeMap<String, i64>,
}

/// Everything recorded since the runner started.
pub struct Metrics {
    inner: Mutex<Inner>,
    start_ns: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self { inner: Mutex::default(), start_ns: super::now_ns() }
    }
}

impl Metrics {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn request(&self, method: &str, route: &str, status: u16, seconds: f64) {
        self.inner().requests.entry((method.to_string(), route.to_string(), status)).or_default().record(seconds);
    }

    pub fn tick(&self, job: &str, outcome: &'static str) {
        *self.inner().ticks.entry((job.to_string(), outcome)).or_default() += 1;
    }

    /// The queues' depths after a drain; a queue it does not list is empty.
    pub fn queue_depths(&self, depths: &[(String, i64)]) {
        let mut inner = self.inner();
        inner.queues.values_mut().for_each(|d| *d = 0);
        for (queue, depth) in depths {
            inner.queues.insert(queue.clone(), *depth);
        }
    }

    /// A cumulative snapshot in OTLP form.
    pub fn collect(&self, resource: &Resource, scope: Option<InstrumentationScope>) -> ResourceMetrics {
        let now = super::now_ns();
        let start = self.start_ns;
        let inner = self.inner();
        let kv = |k: &str, v: Value| key_value(k, &v);
        let mut metrics = Vec::new();
        if !inner.requests.is_empty() {
            let data_points = inner
                .requests
                .iter()
                .map(|((method, route, status), h)| HistogramDataPoint {
                    attributes: vec![
                        kv("http.request.method", Value::Str(method.clone())),
                        kv("http.route", Value::Str(route.clone())),
                        kv("http.response.status_code", Value::Int(i64::from(*status))),
                    ],
                    start_time_unix_nano: start,
                    time_unix_nano: now,
                    count: h.count,
                    sum: Some(h.sum),
                    bucket_counts: h.counts.to_vec(),
                    explicit_bounds: BOUNDS.to_vec(),
                    min: Some(h.min),
                    max: Some(h.max),
                    ..Default::default()
                })
                .collect();
            metrics.push(Metric {
                name: "http.server.request.duration".into(),
                description: "Duration of HTTP server requests.".into(),
                unit: "s".into(),
                data: Some(metric::Data::Histogram(Histogram {
                    data_points,
                    aggregation_temporality: AggregationTemporality::Cumulative as i32,
                })),
                ..Default::default()
            });
        }
        let point = |attributes, value| NumberDataPoint {
            attributes,
            start_time_unix_nano: start,
            time_unix_nano: now,
            value: Some(number_data_point::Value::AsInt(value)),
            ..Default::default()
        };
        if !inner.ticks.is_empty() {
            let data_points = inner
                .ticks
                .iter()
                .map(|((job, outcome), n)| {
                    point(
                        vec![
                            kv("mneme.tick.job", Value::Str(job.clone())),
                            kv("mneme.tick.outcome", Value::Str((*outcome).into())),
                        ],
                        *n as i64,
                    )
                })
                .collect();
            metrics.push(Metric {
                name: "mneme.tick.runs".into(),
                description: "Scheduled job runs by outcome.".into(),
                unit: "{run}".into(),
                data: Some(metric::Data::Sum(Sum {
                    data_points,
                    aggregation_temporality: AggregationTemporality::Cumulative as i32,
                    is_monotonic: true,
                })),
                ..Default::default()
            });
        }
        if !inner.queues.is_empty() {
            let data_points = inner
                .queues
                .iter()
                .map(|(queue, depth)| point(vec![kv("mneme.queue", Value::Str(queue.clone()))], *depth))
                .collect();
            metrics.push(Metric {
                name: "mneme.queue.depth".into(),
                description: "Jobs waiting in a background queue after its last drain.".into(),
                unit: "{job}".into(),
                data: Some(metric::Data::Gauge(Gauge { data_points })),
                ..Default::default()
            });
        }
        ResourceMetrics {
            resource: Some(resource.clone()),
            scope_metrics: vec![ScopeMetrics { scope, metrics, ..Default::default() }],
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_upper_inclusive_with_an_overflow_bucket() {
        let mut h = Hist::default();
        for v in [0.001, 0.005, 0.0051, 10.0, 11.0] {
            h.record(v);
        }
        assert_eq!(h.counts[0], 2);
        assert_eq!(h.counts[1], 1);
        assert_eq!(h.counts[13], 1);
        assert_eq!(h.counts[14], 1);
        assert_eq!(h.count, 5);
        assert_eq!((h.min, h.max), (0.001, 11.0));
        assert!((h.sum - 21.0111).abs() < 1e-9);
    }

    #[test]
    fn a_snapshot_is_cumulative_and_keyed_by_its_attributes() {
        let m = Metrics::default();
        m.request("GET", "/health", 200, 0.002);
        m.request("GET", "/health", 200, 0.3);
        m.request("POST", "/chat", 503, 1.0);
        m.tick("/tick/tools", "ok");
        m.tick("/tick/tools", "ok");
        m.queue_depths(&[("tool-queue".into(), 3)]);
        m.queue_depths(&[("memory-chunker-queue".into(), 1)]);
        let rm = m.collect(&Resource::default(), None);
        let metrics = &rm.scope_metrics[0].metrics;
        let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["http.server.request.duration", "mneme.tick.runs", "mneme.queue.depth"]);
        let Some(metric::Data::Histogram(h)) = &metrics[0].data else { panic!("not a histogram") };
        assert_eq!(h.data_points.len(), 2);
        let health = h.data_points.iter().find(|p| p.count == 2).unwrap();
        assert_eq!(health.bucket_counts.iter().sum::<u64>(), 2);
        let Some(metric::Data::Sum(s)) = &metrics[1].data else { panic!("not a sum") };
        assert_eq!(s.data_points[0].value, Some(number_data_point::Value::AsInt(2)));
        let Some(metric::Data::Gauge(g)) = &metrics[2].data else { panic!("not a gauge") };
        let depths: Vec<_> = g.data_points.iter().map(|p| p.value).collect();
        assert_eq!(depths, [Some(number_data_point::Value::AsInt(1)), Some(number_data_point::Value::AsInt(0))]);
    }
}
