//! What the workers count, and the report made from it.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::{Map, Value, json};

/// Latencies are kept in microseconds, up to ten minutes, at 3 significant digits.
const MAX_LATENCY_US: u64 = 600_000_000;
/// How much of the first response body of each error status is kept to show.
const SAMPLE_CHARS: usize = 300;

/// What one request came to.
#[derive(Debug)]
pub enum Outcome {
    /// An HTTP response: its status, whether it carried `Idempotent-Replayed: true`, and its body
    /// (read in full; kept only for the first response of each error status).
    Response {
        status: u16,
        replayed: bool,
        body: String,
    },
    /// No response: connection refused or reset, timeout, unreadable body.
    Transport(String),
}

/// Counts of one worker, merged at the end.
#[derive(Debug, Clone)]
pub struct Stats {
    pub statuses: BTreeMap<u16, u64>,
    pub transport_errors: u64,
    pub replayed: u64,
    /// Latency of the successful responses (200, 201, 202).
    pub latency_ok: Histogram<u64>,
    /// Latency of every response (not of transport errors).
    pub latency_all: Histogram<u64>,
    /// The first body seen for each error status.
    pub error_samples: BTreeMap<u16, String>,
    /// The first transport error seen.
    pub transport_sample: Option<String>,
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

pub fn is_success(status: u16) -> bool {
    (200..=202).contains(&status)
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

impl Stats {
    pub fn new() -> Self {
        Self {
            statuses: BTreeMap::new(),
            transport_errors: 0,
            replayed: 0,
            latency_ok: histogram(),
            latency_all: histogram(),
            error_samples: BTreeMap::new(),
            transport_sample: None,
        }
    }

    pub fn record(&mut self, outcome: Outcome, latency: Duration) {
        let micros = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, MAX_LATENCY_US);
        match outcome {
            Outcome::Response {
                status,
                replayed,
                body,
            } => {
                *self.statuses.entry(status).or_default() += 1;
                if replayed {
                    self.replayed += 1;
                }
                self.latency_all.saturating_record(micros);
                if is_success(status) {
                    self.latency_ok.saturating_record(micros);
                } else {
                    self.error_samples
                        .entry(status)
                        .or_insert_with(|| body.chars().take(SAMPLE_CHARS).collect());
                }
            }
            Outcome::Transport(message) => {
                self.transport_errors += 1;
                self.transport_sample.get_or_insert(message);
            }
        }
    }

    pub fn merge(&mut self, other: Stats) {
        for (status, n) in other.statuses {
            *self.statuses.entry(status).or_default() += n;
        }
        self.transport_errors += other.transport_errors;
        self.replayed += other.replayed;
        self.latency_ok
            .add(&other.latency_ok)
            .expect("histograms share their bounds");
        self.latency_all
            .add(&other.latency_all)
            .expect("histograms share their bounds");
        for (status, body) in other.error_samples {
            self.error_samples.entry(status).or_insert(body);
        }
        if self.transport_sample.is_none() {
            self.transport_sample = other.transport_sample;
        }
    }
}

/// p50/p90/p99/max/mean, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Option<Self> {
        if h.is_empty() {
            return None;
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Some(Self {
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
            mean: h.mean() / 1000.0,
        })
    }

    fn json(&self) -> Value {
        let r = |v: f64| (v * 1000.0).round() / 1000.0;
        json!({"p50": r(self.p50), "p90": r(self.p90), "p99": r(self.p99),
               "max": r(self.max), "mean": r(self.mean)})
    }

    fn line(&self) -> String {
        format!(
            "p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}  (mean {:.2})",
            self.p50, self.p90, self.p99, self.max, self.mean
        )
    }
}

/// The figures of one run.
#[derive(Debug, Clone)]
pub struct Report {
    /// `create` or `replay`.
    pub mode: &'static str,
    pub target: String,
    pub concurrency: usize,
    pub warmup: Duration,
    /// The measured time: from the end of the warm-up until the last worker finished.
    pub elapsed: Duration,
    /// The run was stopped early (Ctrl-C).
    pub interrupted: bool,
    pub stats: Stats,
}

impl Report {
    pub fn requests(&self) -> u64 {
        self.stats.statuses.values().sum::<u64>() + self.stats.transport_errors
    }

    pub fn successes(&self) -> u64 {
        self.by_status(true).values().sum()
    }

    pub fn errors(&self) -> u64 {
        self.by_status(false).values().sum()
    }

    pub fn rate_limited(&self) -> u64 {
        self.stats.statuses.get(&429).copied().unwrap_or(0)
    }

    fn by_status(&self, success: bool) -> BTreeMap<u16, u64> {
        self.stats
            .statuses
            .iter()
            .filter(|(s, _)| is_success(**s) == success)
            .map(|(s, n)| (*s, *n))
            .collect()
    }

    fn per_second(&self, n: u64) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 { n as f64 / secs } else { 0.0 }
    }

    /// Successful responses per second: creations in `create`, replays in `replay`.
    pub fn throughput(&self) -> f64 {
        self.per_second(self.successes())
    }

    pub fn requests_per_second(&self) -> f64 {
        self.per_second(self.requests())
    }

    pub fn latency_ok(&self) -> Option<Percentiles> {
        Percentiles::of(&self.stats.latency_ok)
    }

    pub fn latency_all(&self) -> Option<Percentiles> {
        Percentiles::of(&self.stats.latency_all)
    }

    fn unit(&self) -> &'static str {
        if self.mode == "replay" {
            "replays/s"
        } else {
            "creations/s"
        }
    }

    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        let limited = self.rate_limited();
        if limited > 0 {
            warnings.push(format!(
                "{limited} response(s) were 429 rate_limited: the service caps new accounts per \
                 business per mode per rolling hour (500 by default); for a benchmark start the \
                 api with VAS_LIMITS__ACCOUNTS_PER_HOUR raised (e.g. 100000000)"
            ));
        }
        if self.mode == "replay" {
            let not_replayed = self.successes().saturating_sub(self.stats.replayed);
            if not_replayed > 0 {
                warnings.push(format!(
                    "{not_replayed} successful response(s) lacked Idempotent-Replayed: true"
                ));
            }
        } else if self.stats.replayed > 0 {
            warnings.push(format!(
                "{} response(s) were idempotent replays although every key was fresh",
                self.stats.replayed
            ));
        }
        if self.stats.transport_errors > 0 {
            warnings.push(format!(
                "{} transport error(s); first: {}",
                self.stats.transport_errors,
                self.stats.transport_sample.as_deref().unwrap_or("?")
            ));
        }
        if self.interrupted {
            warnings.push("interrupted: the figures cover the run until Ctrl-C".into());
        }
        warnings
    }

    pub fn to_json(&self) -> Value {
        let statuses = |success: bool| -> Value {
            Value::Object(
                self.by_status(success)
                    .into_iter()
                    .map(|(s, n)| (s.to_string(), Value::from(n)))
                    .collect::<Map<_, _>>(),
            )
        };
        let round = |v: f64| (v * 100.0).round() / 100.0;
        json!({
            "mode": self.mode,
            "target": self.target,
            "concurrency": self.concurrency,
            "warmupSecs": round(self.warmup.as_secs_f64()),
            "elapsedSecs": round(self.elapsed.as_secs_f64()),
            "interrupted": self.interrupted,
            "requests": self.requests(),
            "successes": self.successes(),
            "successesByStatus": statuses(true),
            "errors": self.errors(),
            "errorsByStatus": statuses(false),
            "transportErrors": self.stats.transport_errors,
            "replayed": self.stats.replayed,
            "throughputPerSec": round(self.throughput()),
            "requestsPerSec": round(self.requests_per_second()),
            "latencyMs": self.latency_ok().map(|p| p.json()),
            "latencyAllMs": self.latency_all().map(|p| p.json()),
            "errorSamples": Value::Object(
                self.stats
                    .error_samples
                    .iter()
                    .map(|(s, b)| (s.to_string(), Value::from(b.as_str())))
                    .collect::<Map<_, _>>(),
            ),
            "warnings": self.warnings(),
        })
    }

    pub fn to_text(&self) -> String {
        let list = |m: BTreeMap<u16, u64>| -> String {
            if m.is_empty() {
                String::new()
            } else {
                let parts: Vec<String> = m.iter().map(|(s, n)| format!("{s}: {n}")).collect();
                format!("   ({})", parts.join(", "))
            }
        };
        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        line(format!(
            "bench {}: POST {}   concurrency {}, {:.2} s measured (after {:.1} s warm-up)",
            self.mode,
            self.target,
            self.concurrency,
            self.elapsed.as_secs_f64(),
            self.warmup.as_secs_f64()
        ));
        line(format!("requests          {:>9}", self.requests()));
        line(format!(
            "  successes       {:>9}{}",
            self.successes(),
            list(self.by_status(true))
        ));
        line(format!(
            "  errors          {:>9}{}",
            self.errors(),
            list(self.by_status(false))
        ));
        line(format!(
            "  transport errors{:>9}",
            self.stats.transport_errors
        ));
        if self.mode == "replay" || self.stats.replayed > 0 {
            line(format!("  replayed        {:>9}", self.stats.replayed));
        }
        line(format!(
            "throughput        {:>9.1} {}   ({:.1} requests/s)",
            self.throughput(),
            self.unit(),
            self.requests_per_second()
        ));
        match self.latency_ok() {
            Some(p) => line(format!("latency ms (2xx)  {}", p.line())),
            None => line("latency ms (2xx)  no successful response".into()),
        }
        if self.errors() > 0
            && let Some(p) = self.latency_all()
        {
            line(format!("latency ms (all)  {}", p.line()));
        }
        for (status, body) in &self.stats.error_samples {
            line(format!("first {status}: {body}"));
        }
        for warning in self.warnings() {
            line(format!("warning: {warning}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16) -> Outcome {
        Outcome::Response {
            status,
            replayed: false,
            body: format!("{{\"status\":{status}}}"),
        }
    }

    fn report(stats: Stats) -> Report {
        Report {
            mode: "create",
            target: "http://x/v1/virtual-accounts".into(),
            concurrency: 2,
            warmup: Duration::ZERO,
            elapsed: Duration::from_secs(2),
            interrupted: false,
            stats,
        }
    }

    #[test]
    fn counts_add_up_and_merge() {
        let mut a = Stats::new();
        a.record(response(201), Duration::from_millis(10));
        a.record(response(202), Duration::from_millis(20));
        a.record(response(429), Duration::from_millis(1));
        let mut b = Stats::new();
        b.record(response(201), Duration::from_millis(30));
        b.record(response(422), Duration::from_millis(2));
        b.record(
            Outcome::Transport("refused".into()),
            Duration::from_millis(3),
        );
        a.merge(b);
        let r = report(a);
        assert_eq!(r.requests(), 6);
        assert_eq!(r.successes(), 3);
        assert_eq!(r.errors(), 2);
        assert_eq!(r.stats.transport_errors, 1);
        assert_eq!(
            r.requests(),
            r.successes() + r.errors() + r.stats.transport_errors
        );
        assert!((r.throughput() - 1.5).abs() < 1e-9);
        let p = r.latency_ok().unwrap();
        assert!(p.p50 <= p.p90 && p.p90 <= p.p99 && p.p99 <= p.max);
        assert!((p.max - 30.0).abs() < 0.1, "{p:?}");
        assert_eq!(r.rate_limited(), 1);
        assert!(
            r.warnings()
                .iter()
                .any(|w| w.contains("VAS_LIMITS__ACCOUNTS_PER_HOUR"))
        );
        let text = r.to_text();
        assert!(text.contains("(201: 2, 202: 1)"), "{text}");
        assert!(text.contains("(422: 1, 429: 1)"), "{text}");
        assert!(text.contains("warning: 1 response(s) were 429"), "{text}");
        let json = r.to_json();
        assert_eq!(json["requests"], 6);
        assert_eq!(json["successesByStatus"]["201"], 2);
        assert_eq!(json["errorsByStatus"]["429"], 1);
        assert_eq!(json["transportErrors"], 1);
        assert_eq!(json["throughputPerSec"], 1.5);
    }

    #[test]
    fn no_success_has_no_percentiles() {
        let mut s = Stats::new();
        s.record(response(401), Duration::from_millis(1));
        let r = report(s);
        assert!(r.latency_ok().is_none());
        assert!(r.to_json()["latencyMs"].is_null());
        assert!(r.to_text().contains("no successful response"));
        assert!(r.warnings().is_empty());
    }
}
