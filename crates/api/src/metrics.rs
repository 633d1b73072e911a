//! `/metrics` (SPEC §2): requests by method and code, latency by method, and work-queue
//! depth by kind, in the OpenMetrics text format Prometheus scrapes.
//!
//! Invariant: label values come from the registry (`pools.create`, `unknown`), the error
//! codes and the work kinds only, never from request input, so the series stay bounded.

use std::time::Duration;

use bc_domain::ports::QueueStatus;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The method a response answered, as its metrics label (`resource`, `method`): put in
/// the response's extensions by whoever answered, read by the request layer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MethodLabel(pub(crate) &'static str, pub(crate) &'static str);

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    code: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    method: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

/// The API's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<MethodLabels, Histogram, fn() -> Histogram>,
    queue_depth: Family<KindLabels, Gauge>,
    queue_due: Family<KindLabels, Gauge>,
    queue_failing: Family<KindLabels, Gauge>,
}

fn latency_histogram() -> Histogram {
    // 0.5 ms to about 16 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<MethodLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        let queue_depth = Family::<KindLabels, Gauge>::default();
        let queue_due = Family::<KindLabels, Gauge>::default();
        let queue_failing = Family::<KindLabels, Gauge>::default();
        registry.register("bc_api_requests", "API requests by method and code", requests.clone());
        registry.register(
            "bc_api_request_duration_seconds",
            "API request latency by method",
            latency.clone(),
        );
        registry.register(
            "bc_work_queue_depth",
            "Work-queue entries by reconciler kind",
            queue_depth.clone(),
        );
        registry.register(
            "bc_work_queue_due",
            "Work-queue entries claimable now, by reconciler kind",
            queue_due.clone(),
        );
        registry.register(
            "bc_work_queue_failing",
            "Work-queue entries whose last attempt failed, by reconciler kind",
            queue_failing.clone(),
        );
        Self { registry, requests, latency, queue_depth, queue_due, queue_failing }
    }
}

impl Metrics {
    /// Counts one request of `method` answered with `code`, taking `elapsed`.
    pub fn observe(&self, method: &str, code: &str, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels { method: method.to_owned(), code: code.to_owned() })
            .inc();
        self.latency
            .get_or_create(&MethodLabels { method: method.to_owned() })
            .observe(elapsed.as_secs_f64());
    }

    /// Sets the queue gauges from a fresh reading of every kind.
    pub fn set_queue_depth(&self, status: &[QueueStatus]) {
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        for s in status {
            let kind = KindLabels { kind: s.kind.as_str().to_owned() };
            self.queue_depth.get_or_create(&kind).set(gauge(s.depth));
            self.queue_due.get_or_create(&kind).set(gauge(s.due));
            self.queue_failing.get_or_create(&kind).set(gauge(s.failing));
        }
    }

    /// The exposition text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
