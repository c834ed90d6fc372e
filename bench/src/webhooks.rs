//! `bench webhooks`: webhook delivery measured as a receiver sees it, against
//! this project (`api serve` + `worker-webhooks` on PostgreSQL and RabbitMQ) or against
//! svix-server, with the same local receiver answering 200 at once.
//!
//! Three scenarios, each with a delivery worker the bench starts itself (so that it starts when
//! the drain says, and its CPU time is known):
//! - **drain**: `--events` events are written while no worker runs (ours: straight into the
//!   database, the api's relay queues them; svix: `POST …/msg/` to an api-only svix-server); then
//!   the worker starts, and the clock runs until the last one arrives.
//! - **saturate**: the worker runs; `--events` events are sent by `--concurrency` callers as fast
//!   as they answer (ours: `simulate-deposit`, which the sandbox turns into a deposit
//!   notification and the api into a `deposit.received` event; or with `--bank-secret` that
//!   notification itself, signed as the bank signs it; svix: one `POST …/msg/`). Each
//!   event is timed from its send to its arrival.
//! - **steady**: `--rate` sends a second for `--steady-for`, timed the same way.
//!
//! CPU per delivery: utime + stime from `/proc/<pid>/stat` of every process that takes part (the
//! worker, the `--pid` ones such as the api and the sandbox, the PostgreSQL backends of
//! `--pg-database` and the server's own background processes, and every process named by
//! `--proc`, e.g. `beam.smp` or `redis-server`), before and after, divided by the deliveries.
//! The bench's own time (receiver and callers) is shown apart and not counted. The broker and
//! PostgreSQL serve whatever else runs on the machine too: run on a quiet one.
//!
//! Each event carries a marker `bench-seq-N` (in a deposit's narration, a test event's message,
//! a svix payload); the receiver finds it in the body to know which event arrived.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use hdrhistogram::Histogram;
use reqwest::Client;
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, TransactionTrait};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::stats::Percentiles;

/// What the receiver looks for in a body, followed by the event's number.
pub const MARKER: &str = "bench-seq-";
/// Events written per transaction when preparing a drain of ours.
const WRITE_BATCH: u64 = 250;
/// Events sent and awaited before a timed scenario, so connections and caches are warm.
const WARMUP_EVENTS: u64 = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    Drain,
    Saturate,
    Steady,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Drain => "drain",
            Scenario::Saturate => "saturate",
            Scenario::Steady => "steady",
        }
    }
}

/// Whose delivery is measured.
#[derive(Debug, Clone)]
pub enum Target {
    /// This project: the api (for sends), its database (for the drain's events and the webhook
    /// URLs) and test secret keys, one per business.
    Ours {
        api: String,
        keys: Vec<String>,
        database_url: String,
        /// Sends each deposit as its bank does (the signed notification, straight to the api)
        /// instead of through `simulate-deposit`: the secret the api checks test-mode banks'
        /// signatures with (`VAS_SANDBOX__SECRET`).
        bank_secret: Option<String>,
    },
    /// svix-server's API (an api-only instance: the bench starts the worker) and a token
    /// (`svix-server jwt generate`).
    Svix { url: String, token: String },
}

#[derive(Debug, Clone)]
pub struct WebhooksSettings {
    pub target: Target,
    pub scenarios: Vec<Scenario>,
    /// Events per drain and per saturation run.
    pub events: u64,
    /// Callers in flight during saturation.
    pub concurrency: usize,
    /// Ours: accounts the simulated deposits are spread over (deposits to one account are
    /// recorded one at a time, under its lock).
    pub accounts: usize,
    /// Sends a second in the steady run, and for how long.
    pub rate: u64,
    pub steady_for: Duration,
    /// Where the receiver listens (its URL is given to the endpoint).
    pub receiver: SocketAddr,
    /// The command line (run by `sh -c 'exec …'`) that starts one delivery worker.
    pub worker: String,
    /// Where the worker's output goes.
    pub worker_log: String,
    /// Other processes counted, with a label each (e.g. `api`, `sandbox`).
    pub pids: Vec<(String, u32)>,
    /// The database whose PostgreSQL backends are counted (with the server's own processes).
    pub pg_database: Option<String>,
    /// Processes counted by name (`beam.smp`, `redis-server`).
    pub proc_names: Vec<String>,
    /// The longest wait for the last delivery of a scenario.
    pub timeout: Duration,
}

mod cpu;
mod receiver;
mod sender;
mod worker;

pub use cpu::*;
pub use receiver::*;
use sender::*;
use worker::*;

// ---------------------------------------------------------------------------------------------
// Scenarios

/// The figures of one scenario.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub scenario: Scenario,
    pub events: u64,
    pub missing: u64,
    pub duplicates: u64,
    pub send_errors: u64,
    pub first_error: Option<String>,
    pub elapsed: Duration,
    /// Send → received, ms (not for the drain).
    pub latency: Option<Percentiles>,
    /// CPU ms by process label.
    pub cpu: Vec<(String, f64)>,
    /// The bench's own CPU ms (receiver and callers), not in `cpu`.
    pub bench_cpu_ms: f64,
}

impl Outcome {
    pub fn delivered(&self) -> u64 {
        self.events - self.missing
    }

    pub fn per_second(&self) -> f64 {
        self.delivered() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn cpu_total_ms(&self) -> f64 {
        self.cpu.iter().map(|(_, ms)| ms).sum()
    }

    pub fn cpu_per_delivery_ms(&self) -> f64 {
        self.cpu_total_ms() / self.delivered().max(1) as f64
    }
}

struct Run<'a> {
    settings: &'a WebhooksSettings,
    tracker: Arc<Tracker>,
    sender: Arc<Sender>,
    probe: CpuProbe,
    /// The next unused event number.
    next: AtomicU64,
}

impl Run<'_> {
    fn take(&self, n: u64) -> std::ops::Range<u64> {
        let start = self.next.fetch_add(n, Ordering::Relaxed);
        start..start + n
    }

    fn own_cpu_ms() -> f64 {
        cpu_ticks(std::process::id()).unwrap_or(0) as f64 * 1000.0 / TICKS_PER_SEC as f64
    }

    fn start_worker(&self) -> anyhow::Result<Worker> {
        Worker::start(&self.settings.worker, &self.settings.worker_log)
    }

    /// The worker is up and delivering: a few events sent and awaited.
    async fn warm_up(&self) -> anyhow::Result<()> {
        let range = self.take(WARMUP_EVENTS);
        let errors = self.sender.send_all(&self.tracker, range.clone(), 4).await;
        ensure!(errors.is_empty(), "warm-up sends failed: {}", errors[0]);
        ensure!(
            self.tracker.wait_for(range, self.settings.timeout).await,
            "the warm-up events never arrived (is the worker delivering? see {})",
            self.settings.worker_log
        );
        Ok(())
    }

    async fn drain(&self) -> anyhow::Result<Outcome> {
        let n = self.settings.events;
        let range = self.take(n);
        eprintln!("drain: writing {n} events with no worker running…");
        self.sender
            .write_backlog(&self.tracker, range.clone(), self.settings.concurrency)
            .await?;
        if let Some((_, db)) = &self.sender.business {
            wait_until_queued(db, Duration::from_secs(120)).await?;
        }
        let measured = self.measure(None);
        let worker = self.start_worker()?;
        eprintln!(
            "drain: worker {} started; waiting for the last delivery…",
            worker.pid()
        );
        self.tracker
            .wait_for(range.clone(), self.settings.timeout)
            .await;
        let elapsed = self.until_last_arrival(&range, &measured);
        let outcome = self.outcome(
            Scenario::Drain,
            range,
            measured,
            &worker,
            elapsed,
            Vec::new(),
        );
        worker.stop().await;
        Ok(outcome)
    }

    async fn saturate(&self) -> anyhow::Result<Outcome> {
        let worker = self.start_worker()?;
        let result = async {
            self.warm_up().await?;
            let n = self.settings.events;
            let range = self.take(n);
            eprintln!(
                "saturate: {n} events by {} callers…",
                self.settings.concurrency
            );
            let measured = self.measure(Some(&worker));
            let errors = self
                .sender
                .send_all(&self.tracker, range.clone(), self.settings.concurrency)
                .await;
            self.tracker
                .wait_for(range.clone(), self.settings.timeout)
                .await;
            let elapsed = self.until_last_arrival(&range, &measured);
            Ok(self.outcome(
                Scenario::Saturate,
                range,
                measured,
                &worker,
                elapsed,
                errors,
            ))
        }
        .await;
        worker.stop().await;
        result
    }

    async fn steady(&self) -> anyhow::Result<Outcome> {
        let worker = self.start_worker()?;
        let result = async {
            self.warm_up().await?;
            let rate = self.settings.rate.max(1);
            let n = (rate as f64 * self.settings.steady_for.as_secs_f64()).round() as u64;
            let range = self.take(n);
            eprintln!(
                "steady: {rate}/s for {:.0} s ({n} events)…",
                self.settings.steady_for.as_secs_f64()
            );
            let measured = self.measure(Some(&worker));
            let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut sends = Vec::with_capacity(n as usize);
            for seq in range.clone() {
                ticker.tick().await;
                self.tracker.mark_sent(seq);
                let sender = self.sender.clone();
                sends.push(tokio::spawn(async move { sender.send(seq).await }));
            }
            let errors: Vec<String> = futures::future::join_all(sends)
                .await
                .into_iter()
                .filter_map(|joined| joined.map_or_else(|e| Some(e.to_string()), Result::err))
                .collect();
            self.tracker
                .wait_for(range.clone(), self.settings.timeout)
                .await;
            let elapsed = measured.started.elapsed();
            Ok(self.outcome(Scenario::Steady, range, measured, &worker, elapsed, errors))
        }
        .await;
        worker.stop().await;
        result
    }

    /// Starts measuring a scenario: the CPU so far of every process watched (the worker too
    /// when it is already running) and of the bench itself, and the clocks.
    fn measure(&self, worker: Option<&Worker>) -> Measured {
        let extra: Vec<_> = worker
            .map(|w| ("worker".to_owned(), w.pid()))
            .into_iter()
            .collect();
        Measured {
            before: self.probe.snapshot(&extra),
            bench_before: Self::own_cpu_ms(),
            started_us: self.tracker.now_us(),
            started: Instant::now(),
        }
    }

    /// From the start of `measured` to the last arrival of `range`; to now when some never
    /// arrived.
    fn until_last_arrival(&self, range: &std::ops::Range<u64>, measured: &Measured) -> Duration {
        match self.tracker.missing(range) {
            0 => Duration::from_micros(
                self.tracker
                    .last_arrival(range)
                    .saturating_sub(measured.started_us),
            ),
            _ => measured.started.elapsed(),
        }
    }

    /// A scenario's figures, its CPU measured from `measured` to now (the worker's included).
    /// Latencies exist where the bench sent the events itself (not for a drain's backlog).
    fn outcome(
        &self,
        scenario: Scenario,
        range: std::ops::Range<u64>,
        measured: Measured,
        worker: &Worker,
        elapsed: Duration,
        errors: Vec<String>,
    ) -> Outcome {
        let after = self.probe.snapshot(&[("worker".to_owned(), worker.pid())]);
        let bench_cpu_ms = Self::own_cpu_ms() - measured.bench_before;
        let latency = match scenario {
            Scenario::Drain => None,
            Scenario::Saturate | Scenario::Steady => {
                Percentiles::of(&self.tracker.latencies(&range))
            }
        };
        Outcome {
            scenario,
            events: range.end - range.start,
            missing: self.tracker.missing(&range),
            duplicates: self.tracker.duplicates.load(Ordering::Relaxed),
            send_errors: errors.len() as u64,
            first_error: errors.into_iter().next(),
            elapsed,
            latency,
            cpu: CpuProbe::spent(&measured.before, &after),
            bench_cpu_ms,
        }
    }
}

/// Where a scenario's measuring started.
struct Measured {
    before: Snapshot,
    bench_before: f64,
    started_us: u64,
    started: Instant,
}

/// Runs the scenarios in order; prints progress on stderr.
pub async fn run(settings: &WebhooksSettings) -> anyhow::Result<Vec<Outcome>> {
    ensure!(settings.events >= 1, "--events must be at least 1");
    let steady = (settings.rate as f64 * settings.steady_for.as_secs_f64()).ceil() as u64;
    let capacity = settings.scenarios.len() as u64 * (settings.events.max(steady) + WARMUP_EVENTS);
    let tracker = Tracker::new(capacity);
    let receiver = start_receiver(settings.receiver, tracker.clone()).await?;
    let sender = Arc::new(Sender::prepare(settings, receiver).await?);
    let run = Run {
        settings,
        tracker,
        sender,
        probe: CpuProbe {
            pids: settings.pids.clone(),
            pg_database: settings.pg_database.clone(),
            names: settings.proc_names.clone(),
        },
        next: AtomicU64::new(0),
    };
    let mut outcomes = Vec::new();
    for scenario in &settings.scenarios {
        let outcome = match scenario {
            Scenario::Drain => run.drain().await?,
            Scenario::Saturate => run.saturate().await?,
            Scenario::Steady => run.steady().await?,
        };
        eprint!("{}", report(std::slice::from_ref(&outcome)));
        outcomes.push(outcome);
    }
    let strangers = run.tracker.strangers.load(Ordering::Relaxed);
    if strangers > 0 {
        eprintln!(
            "warning: {strangers} requests reached the receiver without a marker of this run"
        );
    }
    Ok(outcomes)
}

/// One table of the scenarios' figures.
pub fn report(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<9} {:>7} {:>8} {:>12} {:>9} {:>9} {:>12}  cpu ms by process (bench itself apart)",
        "scenario", "events", "seconds", "delivered/s", "p50 ms", "p99 ms", "cpu ms/deliv"
    );
    for o in outcomes {
        let (p50, p99) = o.latency.map_or(("-".to_owned(), "-".to_owned()), |l| {
            (format!("{:.1}", l.p50), format!("{:.1}", l.p99))
        });
        let by: Vec<String> = o
            .cpu
            .iter()
            .map(|(label, ms)| format!("{label} {ms:.0}"))
            .collect();
        let _ = writeln!(
            out,
            "{:<9} {:>7} {:>8.2} {:>12.0} {:>9} {:>9} {:>12.3}  {} (bench {:.0})",
            o.scenario.name(),
            o.events,
            o.elapsed.as_secs_f64(),
            o.per_second(),
            p50,
            p99,
            o.cpu_per_delivery_ms(),
            by.join(", "),
            o.bench_cpu_ms
        );
        if o.missing > 0 || o.send_errors > 0 || o.duplicates > 0 {
            let _ = writeln!(
                out,
                "          missing {}, send errors {}, duplicates {}{}",
                o.missing,
                o.send_errors,
                o.duplicates,
                o.first_error
                    .as_deref()
                    .map(|e| format!(" (first: {e})"))
                    .unwrap_or_default()
            );
        }
    }
    out
}

#[cfg(test)]
mod tests;
