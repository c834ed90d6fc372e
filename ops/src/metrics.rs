//! Prometheus metrics: one recorder per process, rendered at `/metrics`.
//!
//! Names: `http_requests_total{method,route,status}`, `http_request_duration_seconds{method,route}`,
//! `jobs_published_total{queue}`, `jobs_consumed_total{queue,outcome}`,
//! `job_duration_seconds{queue}`, `outbox_backlog`, `webhook_deliveries_total{outcome}`,
//! `webhook_delivery_duration_seconds`, `webhook_dead_letters`,
//! `provider_calls_total{bank,operation,outcome}`, `provider_call_duration_seconds{bank,operation}`,
//! `deposit_conflicts_total{bank}`, `provider_invalid_transactions_total{bank}`,
//! `deposit_rounds_total{outcome}`,
//! `deposit_round_deposits_total{outcome}`, `activation_rounds_total{outcome}`,
//! `activation_round_accounts_total{outcome}`;
//! the provider sandbox's own `sandbox_requests_total{method,route,status}` and
//! `sandbox_request_duration_seconds{method,route}`; `http_connection_timeouts_total{phase}`
//! (`header`, `body`, `idle`: connections a listener closed, see [`crate::http`]);
//! `rabbitmq_node{node}` (1 for the `host:port` of the RabbitMQ node the process is connected
//! to, 0 for the other nodes `VAS_AMQP__URL` lists); with a multi-host `VAS_DATABASE__URL`,
//! `database_primary{host}` (1 for the host written to) and `database_failovers_total`; with
//! `VAS_DATABASE__READ_URL`, `database_read_fallbacks_total{reason}` (`replica_down`,
//! `replica_lagging`: lists that read the primary instead).
//!
//! For alerting (`deploy/prometheus/`): `process_ready` (1 while `/readyz` would answer 200,
//! refreshed at each scrape), `outbox_oldest_job_age_seconds` (the oldest job due and unfinished),
//! `deposit_webhook_latency_seconds` (a credited deposit's receipt to its webhook's first 2xx),
//! `webhook_endpoint_failing_seconds{business}` (the few endpoints failing longest, see
//! worker-webhooks) and `payouts_processing_oldest_seconds{bank}` (per provider bank).
//!
//! Every label takes its values from a fixed set (a series lives as long as the process, so a
//! label a client could choose would grow memory without bound).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// How often the recorder folds histogram samples into their buckets. Until it does, it keeps
/// every sample: with no one scraping `/metrics`, a process serving 1,000 requests a second
/// would grow by about 700 MB a day from the request-duration histogram alone.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Upkeeps run so far (what a test waits on).
static UPKEEPS: AtomicU64 = AtomicU64::new(0);

const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A deposit's webhook waits on retries that are minutes to hours apart
/// (docs/api/events-and-webhooks.md).
const DEPOSIT_WEBHOOK_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0,
];

/// Installs the process-wide recorder (once; later calls return the same handle).
pub fn install() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("duration_seconds".into()), DURATION_BUCKETS)
            .expect("buckets are not empty")
            .set_buckets_for_metric(
                Matcher::Full("deposit_webhook_latency_seconds".into()),
                DEPOSIT_WEBHOOK_BUCKETS,
            )
            .expect("buckets are not empty")
            .build_recorder();
        let handle = recorder.handle();
        // Another recorder may be installed already (a test harness): ours still renders.
        let _ = metrics::set_global_recorder(recorder);
        // A thread, not a task: installed from sync code too, and whatever runtime is running.
        let upkeep = handle.clone();
        std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(UPKEEP_EVERY);
                    upkeep.run_upkeep();
                    UPKEEPS.fetch_add(1, Ordering::Relaxed);
                }
            })
            .expect("a thread can be started");
        handle
    })
}

/// The Prometheus text exposition of everything recorded so far.
pub fn render() -> String {
    let handle = install();
    handle.run_upkeep();
    handle.render()
}

/// The names one HTTP server's request metrics are recorded under.
pub struct HttpMetricNames {
    pub requests: &'static str,
    pub duration: &'static str,
}

/// The api's: `http_requests_total{method,route,status}`, `http_request_duration_seconds{method,route}`.
pub const API_HTTP: HttpMetricNames = HttpMetricNames {
    requests: "http_requests_total",
    duration: "http_request_duration_seconds",
};

/// The provider sandbox's, kept apart because `api dev` serves it from the api's process.
pub const SANDBOX_HTTP: HttpMetricNames = HttpMetricNames {
    requests: "sandbox_requests_total",
    duration: "sandbox_request_duration_seconds",
};

/// One request being timed. Its labels come from fixed sets only, so no request can add a
/// series (each lives as long as the process): the method as [`method_label`] names it, the
/// route is the template (`/v1/virtual-accounts/{id}`, never the raw path, so ids do not become
/// labels) or `unmatched` when no route matched.
pub struct HttpObservation {
    method: &'static str,
    route: String,
    started: std::time::Instant,
}

/// A request method as a label: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, else `other`.
pub fn method_label(method: &axum::http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    }
}

impl HttpObservation {
    pub fn start(request: &axum::extract::Request) -> Self {
        let route = request
            .extensions()
            .get::<axum::extract::MatchedPath>()
            .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
        Self {
            method: method_label(request.method()),
            route,
            started: std::time::Instant::now(),
        }
    }

    /// Records the request; returns how long it took.
    pub fn finish(
        self,
        names: HttpMetricNames,
        status: axum::http::StatusCode,
    ) -> std::time::Duration {
        let elapsed = self.started.elapsed();
        metrics::counter!(names.requests, "method" => self.method, "route" => self.route.clone(), "status" => status.as_u16().to_string())
            .increment(1);
        metrics::histogram!(names.duration, "method" => self.method, "route" => self.route)
            .record(elapsed.as_secs_f64());
        elapsed
    }
}

/// The axum handler for `GET /metrics`.
pub async fn endpoint() -> ([(axum::http::HeaderName, &'static str); 1], String) {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        render(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples are folded into buckets by the recorder's own thread, scraped or not (else an
    /// unscraped process keeps every request's duration in memory).
    #[test]
    fn histograms_are_kept_up_without_a_scrape() {
        install();
        let before = UPKEEPS.load(Ordering::Relaxed);
        for i in 0..1_000 {
            metrics::histogram!("upkeep_test_duration_seconds").record(f64::from(i) / 1e4);
        }
        let deadline = std::time::Instant::now() + UPKEEP_EVERY * 3;
        while UPKEEPS.load(Ordering::Relaxed) == before {
            assert!(
                std::time::Instant::now() < deadline,
                "no upkeep within {:?}",
                UPKEEP_EVERY * 3
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // What was folded is what a scrape then shows.
        assert!(
            render().contains("upkeep_test_duration_seconds_count 1000"),
            "the samples are in the histogram"
        );
    }

    #[test]
    fn methods_outside_the_known_set_share_one_label() {
        for known in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
            let method = axum::http::Method::from_bytes(known.as_bytes()).unwrap();
            assert_eq!(method_label(&method), known);
        }
        for made_up in ["XMETHOD0001", "get", "CONNECT", "TRACE", "PROPFIND"] {
            let method = axum::http::Method::from_bytes(made_up.as_bytes()).unwrap();
            assert_eq!(method_label(&method), "other", "{made_up}");
        }
    }
}
