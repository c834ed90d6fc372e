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

// ---------------------------------------------------------------------------------------------
// The receiver

/// Send and arrival times (µs since the start, 0 = not yet) of every event of the run.
pub struct Tracker {
    start: Instant,
    sent: Vec<AtomicU64>,
    received: Vec<AtomicU64>,
    /// Distinct events received.
    arrived: AtomicU64,
    duplicates: AtomicU64,
    /// Requests without a marker of this run.
    strangers: AtomicU64,
    changed: Notify,
}

impl Tracker {
    pub fn new(capacity: u64) -> Arc<Self> {
        let slots = |n: u64| (0..n).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        Arc::new(Self {
            start: Instant::now(),
            sent: slots(capacity),
            received: slots(capacity),
            arrived: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            strangers: AtomicU64::new(0),
            changed: Notify::new(),
        })
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    pub fn mark_sent(&self, seq: u64) {
        if let Some(slot) = self.sent.get(seq as usize) {
            slot.store(self.now_us(), Ordering::Relaxed);
        }
    }

    /// Records one arrival; true when it is the event's first.
    pub fn arrive(&self, body: &[u8]) -> bool {
        let Some(seq) = find_seq(body).filter(|s| (*s as usize) < self.received.len()) else {
            self.strangers.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        let first = self.received[seq as usize]
            .compare_exchange(0, self.now_us(), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        if first {
            self.arrived.fetch_add(1, Ordering::Relaxed);
            self.changed.notify_waiters();
        } else {
            self.duplicates.fetch_add(1, Ordering::Relaxed);
        }
        first
    }

    /// Whether every event of `range` arrived.
    fn all_arrived(&self, range: &std::ops::Range<u64>) -> bool {
        range
            .clone()
            .all(|s| self.received[s as usize].load(Ordering::Relaxed) != 0)
    }

    /// Waits until every event of `range` arrived; false on timeout.
    async fn wait_for(&self, range: std::ops::Range<u64>, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.changed.notified();
            if self.all_arrived(&range) {
                return true;
            }
            // A short poll as well: notify_waiters only wakes those already waiting.
            let poll = tokio::time::sleep(Duration::from_millis(20));
            tokio::select! {
                () = changed => {}
                () = poll => {}
                () = tokio::time::sleep_until(deadline) => return self.all_arrived(&range),
            }
        }
    }

    fn missing(&self, range: &std::ops::Range<u64>) -> u64 {
        range
            .clone()
            .filter(|s| self.received[*s as usize].load(Ordering::Relaxed) == 0)
            .count() as u64
    }

    /// The latest arrival in `range`, in µs since the start.
    fn last_arrival(&self, range: &std::ops::Range<u64>) -> u64 {
        range
            .clone()
            .map(|s| self.received[s as usize].load(Ordering::Relaxed))
            .max()
            .unwrap_or(0)
    }

    /// Send → received of every event of `range` that has both.
    fn latencies(&self, range: &std::ops::Range<u64>) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds");
        for s in range.clone() {
            let sent = self.sent[s as usize].load(Ordering::Relaxed);
            let got = self.received[s as usize].load(Ordering::Relaxed);
            if sent != 0 && got != 0 {
                h.saturating_record(got.saturating_sub(sent).max(1));
            }
        }
        h
    }
}

/// The number after [`MARKER`] in a body.
pub fn find_seq(body: &[u8]) -> Option<u64> {
    let marker = MARKER.as_bytes();
    let at = body.windows(marker.len()).position(|w| w == marker)? + marker.len();
    let digits = body[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&body[at..at + digits])
        .ok()?
        .parse()
        .ok()
}

async fn receive(State(tracker): State<Arc<Tracker>>, body: Bytes) -> StatusCode {
    tracker.arrive(&body);
    StatusCode::OK
}

/// Starts the receiver; returns its address.
pub async fn start_receiver(bind: SocketAddr, tracker: Arc<Tracker>) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("binding the receiver to {bind}"))?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new().fallback(receive).with_state(tracker);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("receiver stopped: {e}");
        }
    });
    Ok(addr)
}

// ---------------------------------------------------------------------------------------------
// CPU time from /proc

/// Clock ticks a second of /proc's utime and stime (USER_HZ, 100 on Linux).
const TICKS_PER_SEC: u64 = 100;

/// utime + stime of a process, in ticks.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_ticks(&stat)
}

/// utime + stime from the text of `/proc/<pid>/stat` (fields 14 and 15; the name, in
/// parentheses, may hold spaces).
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The PostgreSQL server's own processes (not a backend of another database).
fn is_pg_server_process(cmdline: &str) -> bool {
    const OWN: [&str; 6] = [
        "checkpointer",
        "background writer",
        "walwriter",
        "autovacuum launcher",
        "logical replication launcher",
        "stats collector",
    ];
    match cmdline.strip_prefix("postgres: ") {
        Some(rest) => OWN.iter().any(|own| rest.trim_end().ends_with(own)), // after "15/main: "
        // The postmaster keeps its command line.
        None => true,
    }
}

/// Which processes are counted, and under what label.
#[derive(Debug, Clone)]
pub struct CpuProbe {
    pids: Vec<(String, u32)>,
    pg_database: Option<String>,
    names: Vec<String>,
}

/// Ticks by (label, pid).
type Snapshot = Vec<(String, u32, u64)>;

impl CpuProbe {
    fn snapshot(&self, extra: &[(String, u32)]) -> Snapshot {
        let mut out: Snapshot = Vec::new();
        for (label, pid) in self.pids.iter().chain(extra) {
            if let Some(t) = cpu_ticks(*pid) {
                out.push((label.clone(), *pid, t));
            }
        }
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return out;
        };
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let comm = comm.trim();
            let label = if comm == "postgres" {
                let Some(db) = &self.pg_database else {
                    continue;
                };
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                // "postgres: [cluster: ]user database host(port) state"
                let ours = cmdline.starts_with("postgres: ")
                    && cmdline.split_whitespace().any(|w| w == db.as_str());
                if !(ours || is_pg_server_process(&cmdline)) {
                    continue;
                }
                "postgres".to_owned()
            } else if self.names.iter().any(|n| n == comm) {
                comm.to_owned()
            } else {
                continue;
            };
            if let Some(t) = cpu_ticks(pid) {
                out.push((label, pid, t));
            }
        }
        out
    }

    /// CPU milliseconds by label between two snapshots (a process that appeared counts from 0).
    fn spent(before: &Snapshot, after: &Snapshot) -> Vec<(String, f64)> {
        let mut by_label: Vec<(String, f64)> = Vec::new();
        for (label, pid, t) in after {
            let was = before
                .iter()
                .find(|(_, p, _)| p == pid)
                .map_or(0, |(_, _, t)| *t);
            let ms = t.saturating_sub(was) as f64 * 1000.0 / TICKS_PER_SEC as f64;
            match by_label.iter_mut().find(|(l, _)| l == label) {
                Some((_, sum)) => *sum += ms,
                None => by_label.push((label.clone(), ms)),
            }
        }
        by_label
    }
}

// ---------------------------------------------------------------------------------------------
// The delivery worker

struct Worker {
    child: Child,
}

impl Worker {
    fn start(command: &str, log: &str) -> anyhow::Result<Self> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {log}"))?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("exec {command}"))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("starting the worker")?;
        Ok(Self { child })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then SIGKILL after 10 s (only this process, which the bench started).
    async fn stop(mut self) {
        let pid = self.pid().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Sending events

/// How events are made, per target.
struct Sender {
    http: Client,
    target: Target,
    /// Ours: the accounts that receive simulated deposits, in turn; svix: the application id.
    into: Vec<Receiving>,
    /// Ours: the business, and the database for drain events.
    business: Option<(String, DatabaseConnection)>,
}

impl Sender {
    async fn prepare(settings: &WebhooksSettings, receiver: SocketAddr) -> anyhow::Result<Self> {
        let http = Client::builder()
            .timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(settings.concurrency.max(1))
            .tcp_nodelay(true)
            .build()?;
        let url = format!("http://{receiver}/hook");
        match &settings.target {
            Target::Ours {
                api,
                keys,
                database_url,
                ..
            } => {
                let db = Database::connect(database_url)
                    .await
                    .context("connecting to --database-url")?;
                ensure!(!keys.is_empty(), "no --key");
                let mut businesses = Vec::new();
                let mut by_business = Vec::new();
                for key in keys {
                    let business = crate::lists::business_of(&db, key, None).await?;
                    let set = shared::db::businesses::set_webhook_url(
                        &db,
                        &business,
                        domain::Mode::Test,
                        &url,
                    )
                    .await?;
                    ensure!(set, "business {business} has no test settings");
                    let mut accounts = Vec::new();
                    for _ in 0..settings.accounts.max(1) {
                        accounts.push(create_account(&http, api, key).await?);
                    }
                    businesses.push(business);
                    by_business.push(accounts);
                }
                // In turn across the businesses: consecutive sends go to different ones.
                let mut accounts = Vec::new();
                for i in 0..settings.accounts.max(1) {
                    accounts.extend(by_business.iter().map(|a| a[i].clone()));
                }
                eprintln!(
                    "bench webhooks: businesses {}, {} accounts, endpoint {url}",
                    businesses.join(", "),
                    accounts.len()
                );
                Ok(Self {
                    http,
                    target: settings.target.clone(),
                    into: accounts,
                    business: Some((businesses.swap_remove(0), db)),
                })
            }
            Target::Svix { url: svix, token } => {
                let app: Value = svix_post(
                    &http,
                    svix,
                    token,
                    "/api/v1/app/",
                    &json!({"name": "bench webhooks"}),
                )
                .await?;
                let app = app["id"]
                    .as_str()
                    .context("svix answered no app id")?
                    .to_owned();
                svix_post(
                    &http,
                    svix,
                    token,
                    &format!("/api/v1/app/{app}/endpoint/"),
                    &json!({"url": url, "version": 1, "description": "bench receiver"}),
                )
                .await?;
                eprintln!("bench webhooks: svix app {app}, endpoint {url}");
                Ok(Self {
                    http,
                    target: settings.target.clone(),
                    into: vec![Receiving {
                        id: app,
                        account: None,
                        key: String::new(),
                    }],
                    business: None,
                })
            }
        }
    }

    /// Sends one event through the front door; Err carries what went wrong.
    async fn send(&self, seq: u64) -> Result<(), String> {
        let into = &self.into[seq as usize % self.into.len()];
        let (response, what) = match &self.target {
            Target::Ours {
                api,
                bank_secret: None,
                ..
            } => (
                self.http
                    .post(format!(
                        "{}/v1/virtual-accounts/{}/simulate-deposit",
                        api.trim_end_matches('/'),
                        into.id
                    ))
                    .bearer_auth(&into.key)
                    .json(&json!({"amount": 100_000, "narration": format!("{MARKER}{seq}")}))
                    .send()
                    .await,
                "simulate-deposit",
            ),
            // What the sandbox's bank sends once the money has arrived; the api answers it once
            // the deposit, its event and the job to deliver it are stored.
            Target::Ours {
                api,
                bank_secret: Some(secret),
                ..
            } => {
                let (bank, number) = into.account.as_ref().ok_or("no account number")?;
                let mut paid = provider_sandbox::Transaction::received(number, 100_000);
                paid.narration = format!("{MARKER}{seq}");
                let notification = provider_sandbox::signed_deposit(secret, *bank, &paid)
                    .map_err(|e| e.to_string())?;
                (
                    self.http
                        .post(format!(
                            "{}{}",
                            api.trim_end_matches('/'),
                            notification.path
                        ))
                        .header("Content-Type", "application/json")
                        .header("X-Provider-Signature", notification.signature)
                        .body(notification.body)
                        .send()
                        .await,
                    "bank notification",
                )
            }
            Target::Svix { url, token } => (
                self.http
                    .post(format!(
                        "{}/api/v1/app/{}/msg/",
                        url.trim_end_matches('/'),
                        into.id
                    ))
                    .bearer_auth(token)
                    .json(&json!({"eventType": "bench.event", "payload": {"message": format!("{MARKER}{seq}")}}))
                    .send()
                    .await,
                "POST msg",
            ),
        };
        match response {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(format!(
                "{what}: HTTP {} {}",
                r.status(),
                r.text().await.unwrap_or_default()
            )),
            Err(e) => Err(format!("{what}: {e}")),
        }
    }

    /// Writes the drain's events while no worker runs. Ours: in the database (`events::record`,
    /// as the api does; its relay queues them); svix: through its API (its queue holds them).
    async fn write_backlog(
        &self,
        tracker: &Tracker,
        range: std::ops::Range<u64>,
        concurrency: usize,
    ) -> anyhow::Result<()> {
        if let Some((business, db)) = &self.business {
            let mut seq = range.start;
            while seq < range.end {
                let txn = db.begin().await?;
                let end = (seq + WRITE_BATCH).min(range.end);
                for s in seq..end {
                    tracker.mark_sent(s);
                    shared::db::events::record(
                        &txn,
                        business,
                        domain::Mode::Test,
                        domain::EventType::WebhookTest,
                        &json!({"message": format!("{MARKER}{s}")}),
                        domain::time::now(),
                    )
                    .await?;
                }
                txn.commit().await?;
                seq = end;
            }
            return Ok(());
        }
        let errors = self.send_all(tracker, range, concurrency).await;
        ensure!(
            errors.is_empty(),
            "sending the backlog failed: {}",
            errors[0]
        );
        Ok(())
    }

    /// Sends every event of `range` with `concurrency` callers; returns the errors.
    async fn send_all(
        &self,
        tracker: &Tracker,
        range: std::ops::Range<u64>,
        concurrency: usize,
    ) -> Vec<String> {
        let next = AtomicU64::new(range.start);
        let callers = (0..concurrency.max(1)).map(|_| async {
            let mut errors = Vec::new();
            loop {
                let seq = next.fetch_add(1, Ordering::Relaxed);
                if seq >= range.end {
                    return errors;
                }
                tracker.mark_sent(seq);
                if let Err(e) = self.send(seq).await {
                    errors.push(e);
                }
            }
        });
        futures::future::join_all(callers)
            .await
            .into_iter()
            .flatten()
            .collect()
    }
}

/// Ours: an account that receives deposits, with its bank and number and its business's key;
/// svix: the application.
#[derive(Clone)]
struct Receiving {
    id: String,
    account: Option<(domain::Bank, String)>,
    key: String,
}

async fn create_account(http: &Client, api: &str, key: &str) -> anyhow::Result<Receiving> {
    let response = http
        .post(format!("{}/v1/virtual-accounts", api.trim_end_matches('/')))
        .bearer_auth(key)
        .header("Idempotency-Key", ulid::Ulid::new().to_string())
        .json(&crate::payload::unique_customer("test-bank"))
        .send()
        .await
        .context("creating the account that receives the deposits")?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or_default();
    ensure!(
        status.is_success(),
        "creating an account: HTTP {status} {body}"
    );
    let field = |name: &str| {
        body[name]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("the created account has no {name}: {body}"))
    };
    // An account of test-bank is active at once, at the bank it asked for.
    let bank = field("preferredBank")?;
    let bank = domain::Bank::parse(&bank).with_context(|| format!("unknown bank {bank}"))?;
    Ok(Receiving {
        id: field("id")?,
        account: Some((bank, field("accountNumber")?)),
        key: key.to_owned(),
    })
}

async fn svix_post(
    http: &Client,
    base: &str,
    token: &str,
    path: &str,
    body: &Value,
) -> anyhow::Result<Value> {
    let response = http
        .post(format!("{}{path}", base.trim_end_matches('/')))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .with_context(|| format!("svix {path}"))?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or_default();
    ensure!(status.is_success(), "svix {path}: HTTP {status} {body}");
    Ok(body)
}

/// Ours: waits until the relay has published every webhook job (the backlog is in the queue).
async fn wait_until_queued(db: &DatabaseConnection, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let row = db
            .query_one_raw(sea_orm::Statement::from_string(
                db.get_database_backend(),
                "SELECT count(*) AS n FROM outbox WHERE queue = 'webhooks' \
                 AND completed_at IS NULL AND dead_at IS NULL \
                 AND (published_at IS NULL OR publishing_until IS NOT NULL)",
            ))
            .await?
            .context("count returned no row")?;
        let n: i64 = row.try_get("", "n")?;
        if n == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{n} webhook jobs still unpublished after {timeout:?}: is the api (its relay) running?"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

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
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_found_in_any_body() {
        assert_eq!(
            find_seq(br#"{"data":{"narration":"bench-seq-42"}}"#),
            Some(42)
        );
        assert_eq!(find_seq(b"bench-seq-0"), Some(0));
        assert_eq!(find_seq(br#"{"message":"hello"}"#), None);
        assert_eq!(find_seq(b"bench-seq-"), None);
    }

    #[test]
    fn arrivals_are_counted_once() {
        let tracker = Tracker::new(3);
        tracker.mark_sent(1);
        assert!(tracker.arrive(b"bench-seq-1"));
        assert!(!tracker.arrive(b"bench-seq-1"), "a repeat");
        assert!(!tracker.arrive(b"bench-seq-7"), "not of this run");
        assert!(!tracker.arrive(b"nothing"));
        assert_eq!(tracker.missing(&(0..3)), 2);
        assert_eq!(tracker.duplicates.load(Ordering::Relaxed), 1);
        assert_eq!(tracker.strangers.load(Ordering::Relaxed), 2);
        assert_eq!(tracker.latencies(&(0..3)).len(), 1);
    }

    #[test]
    fn cpu_ticks_are_read_past_a_name_with_spaces() {
        let stat = "1234 (tokio runtime) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0";
        assert_eq!(parse_stat_ticks(stat), Some(325));
        assert!(cpu_ticks(std::process::id()).is_some());
    }

    #[test]
    fn postgres_server_processes_are_told_from_other_backends() {
        assert!(is_pg_server_process("postgres: walwriter "));
        assert!(is_pg_server_process(
            "/usr/lib/postgresql/15/bin/postgres -D /x"
        ));
        assert!(!is_pg_server_process(
            "postgres: postgres other 127.0.0.1(5000) idle"
        ));
    }
}
