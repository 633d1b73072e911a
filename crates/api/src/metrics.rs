//! `/metrics` (SPEC §2): requests by method and code, latency by method, and work-queue
//! depth by kind, in the OpenMetrics text format Prometheus scrapes.
//!
//! Invariant: label values come from the registry (`pools.create`, `unknown`) and the
//! error codes only, never from request input, so the series stay bounded.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A source of the work queue's depth per kind, read at each scrape (the store's queue
/// status read, once it exists).
pub type QueueDepthSource = Arc<dyn Fn() -> BoxFuture<'static, Vec<(String, i64)>> + Send + Sync>;

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
        Self { registry, requests, latency, queue_depth }
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

    /// Replaces the queue depths with a fresh reading.
    pub fn set_queue_depth(&self, depths: &[(String, i64)]) {
        self.queue_depth.clear();
        for (kind, depth) in depths {
            self.queue_depth.get_or_create(&KindLabels { kind: kind.clone() }).set(*depth);
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
