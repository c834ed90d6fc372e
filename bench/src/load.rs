//! The workers: `concurrency` tasks, each sending one request after another.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use reqwest::Client;
use serde_json::Value;
use tokio::sync::Barrier;
use ulid::Ulid;

use crate::payload;
use crate::stats::{Outcome, Report, Stats, is_success};

/// When the measured part of a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this long (requests in flight then are waited for and counted).
    After(Duration),
    /// After this many requests in all.
    Requests(u64),
}

/// What each request carries.
#[derive(Debug, Clone)]
pub enum Workload {
    /// A fresh Idempotency-Key and a fresh customer every time.
    Create { bank: String },
    /// One Idempotency-Key and one body, again and again.
    Replay { key: String, body: Value },
    /// A fresh Idempotency-Key and a payout of `amount` kobo every time (`POST /v1/payouts`).
    Payout { amount: i64 },
}

impl Workload {
    /// Where its requests go.
    pub fn endpoint(&self, settings: &Settings) -> String {
        match self {
            Workload::Create { .. } | Workload::Replay { .. } => settings.endpoint(),
            Workload::Payout { .. } => {
                format!("{}/v1/payouts", settings.base.trim_end_matches('/'))
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// The service's base URL, e.g. `http://127.0.0.1:8080` (without `/v1`).
    pub base: String,
    /// Secret keys: worker `i` uses key `i % len` (several businesses, each its own limit and lock).
    pub api_keys: Vec<String>,
    pub concurrency: usize,
    pub stop: Stop,
    pub warmup: Duration,
    pub timeout: Duration,
}

impl Settings {
    /// The key worker `worker` sends.
    pub fn key_of(&self, worker: usize) -> &str {
        &self.api_keys[worker % self.api_keys.len()]
    }

    pub fn endpoint(&self) -> String {
        format!("{}/v1/virtual-accounts", self.base.trim_end_matches('/'))
    }
}

pub fn client(settings: &Settings) -> anyhow::Result<Client> {
    Client::builder()
        .timeout(settings.timeout)
        .connect_timeout(Duration::from_secs(5))
        .pool_max_idle_per_host(settings.concurrency)
        .tcp_nodelay(true)
        .build()
        .context("building the HTTP client")
}

/// Sends one creation request and reads the whole response.
pub async fn send(
    client: &Client,
    endpoint: &str,
    api_key: &str,
    idempotency_key: &str,
    body: &Value,
) -> Outcome {
    let response = client
        .post(endpoint)
        .bearer_auth(api_key)
        .header("Idempotency-Key", idempotency_key)
        .json(body)
        .send()
        .await;
    let response = match response {
        Ok(r) => r,
        Err(e) => return Outcome::Transport(error_chain(&e)),
    };
    let status = response.status().as_u16();
    let replayed = response
        .headers()
        .get("idempotent-replayed")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    match response.text().await {
        Ok(body) => Outcome::Response {
            status,
            replayed,
            body,
        },
        Err(e) => Outcome::Transport(error_chain(&e)),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

/// For `replay`: creates the account the replays will point at, and returns the key and body.
pub async fn prepare_replay(
    client: &Client,
    settings: &Settings,
    bank: &str,
) -> anyhow::Result<(String, Value)> {
    let key = Ulid::new().to_string();
    let body = payload::unique_customer(bank);
    match send(
        client,
        &settings.endpoint(),
        settings.key_of(0),
        &key,
        &body,
    )
    .await
    {
        Outcome::Response { status, .. } if is_success(status) => Ok((key, body)),
        Outcome::Response { status, body, .. } => {
            anyhow::bail!("the first request (to be replayed) answered {status}: {body}")
        }
        Outcome::Transport(e) => anyhow::bail!("the first request (to be replayed) failed: {e}"),
    }
}

struct Shared {
    client: Client,
    endpoint: String,
    settings: Settings,
    workload: Workload,
    warmup_end: Instant,
    /// Requests started in the measured part (for `Stop::Requests`).
    started: AtomicU64,
    /// Set on Ctrl-C: every worker stops after its current request.
    cancelled: Arc<AtomicBool>,
    barrier: Barrier,
}

impl Shared {
    async fn one(&self, worker: usize) -> Outcome {
        let api_key = self.settings.key_of(worker);
        match &self.workload {
            Workload::Create { bank } => {
                let key = Ulid::new().to_string();
                let body = payload::unique_customer(bank);
                send(&self.client, &self.endpoint, api_key, &key, &body).await
            }
            // One creation, under the first key, replayed by every worker.
            Workload::Replay { key, body } => {
                send(
                    &self.client,
                    &self.endpoint,
                    self.settings.key_of(0),
                    key,
                    body,
                )
                .await
            }
            Workload::Payout { amount } => {
                let key = Ulid::new().to_string();
                send(
                    &self.client,
                    &self.endpoint,
                    api_key,
                    &key,
                    &serde_json::json!({ "amount": amount }),
                )
                .await
            }
        }
    }

    fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }
}

async fn worker(shared: Arc<Shared>, index: usize) -> Stats {
    // Warm-up: requests that start before the warm-up ends are not counted.
    while Instant::now() < shared.warmup_end && !shared.cancelled() {
        let _ = shared.one(index).await;
    }
    // Everyone starts the measured part together.
    shared.barrier.wait().await;
    let start = Instant::now();
    let mut stats = Stats::new();
    loop {
        if shared.cancelled() {
            break;
        }
        match shared.settings.stop {
            Stop::After(d) => {
                if start.elapsed() >= d {
                    break;
                }
            }
            Stop::Requests(n) => {
                if shared.started.fetch_add(1, Ordering::Relaxed) >= n {
                    break;
                }
            }
        }
        let t0 = Instant::now();
        let outcome = shared.one(index).await;
        stats.record(outcome, t0.elapsed());
    }
    stats
}

/// Runs the load and returns its report. `cancelled` may be set from outside (Ctrl-C) to stop early.
pub async fn run(
    client: Client,
    settings: Settings,
    workload: Workload,
    cancelled: Arc<AtomicBool>,
) -> anyhow::Result<Report> {
    anyhow::ensure!(settings.concurrency >= 1, "concurrency must be at least 1");
    anyhow::ensure!(!settings.api_keys.is_empty(), "at least one key");
    let mode = match workload {
        Workload::Create { .. } => "create",
        Workload::Replay { .. } => "replay",
        Workload::Payout { .. } => "payouts",
    };
    let shared = Arc::new(Shared {
        client,
        endpoint: workload.endpoint(&settings),
        warmup_end: Instant::now() + settings.warmup,
        started: AtomicU64::new(0),
        cancelled,
        barrier: Barrier::new(settings.concurrency + 1),
        settings,
        workload,
    });
    let workers: Vec<_> = (0..shared.settings.concurrency)
        .map(|i| tokio::spawn(worker(shared.clone(), i)))
        .collect();
    shared.barrier.wait().await;
    let start = Instant::now();
    let mut stats = Stats::new();
    for w in workers {
        stats.merge(w.await.context("a worker panicked")?);
    }
    let elapsed = start.elapsed();
    Ok(Report {
        mode,
        target: shared.endpoint.clone(),
        concurrency: shared.settings.concurrency,
        warmup: shared.settings.warmup,
        elapsed,
        interrupted: shared.cancelled(),
        stats,
    })
}
