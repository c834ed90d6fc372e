//! `bench payouts`: payouts as a caller sees them, against `api serve`, `worker-payouts`,
//! `worker-webhooks` and `provider-sandbox` on PostgreSQL and RabbitMQ (test mode: the sandbox
//! is the bank).
//!
//! 1. **Created per second**: `POST /v1/payouts` from `concurrency` workers (the `create`
//!    engine of [`crate::load`], a fresh `Idempotency-Key` each), then the time until every one
//!    of them has settled (the balance's `inFlight` back to zero).
//! 2. **Created → `payout.succeeded` received**, at a steady rate: one payout every `1/rate`
//!    seconds for `duration`, each timed from its 202 to the first arrival of its
//!    `payout.succeeded` webhook at a receiver this bench runs. That span includes the sandbox
//!    bank's own `VAS_SANDBOX__TRANSFER_DELAY_SECS` (2 s by default; run the sandbox with 0 to
//!    see the service alone).
//!
//! Before measuring it points the business's test webhook URL at its receiver (in the
//! database, as `api admin webhook set` does), sets a settlement account and, through a
//! test-bank account and the sandbox, deposits what the payouts need. Every payout is
//! NGN 100.00, which the sandbox pays (an amount ending in `00`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use domain::Mode;
use hdrhistogram::Histogram;
use reqwest::Client;
use serde_json::{Value, json};
use ulid::Ulid;

use crate::load::{self, Settings, Stop, Workload};
use crate::stats::{Percentiles, Report};

/// Each payout: the smallest one allowed, which the sandbox pays (it does not end in 01–03).
pub const AMOUNT: i64 = domain::payout::MIN_PAYOUT;

#[derive(Debug, Clone)]
pub struct PayoutsSettings {
    /// The PostgreSQL database `api serve` uses: the webhook URL is set there.
    pub database_url: String,
    /// The service's base URL (without /v1).
    pub api: String,
    /// A test secret key of the business that pays out.
    pub key: String,
    /// The business's id, when the key is not in this database's api_keys.
    pub business: Option<String>,
    /// Where the webhook receiver listens (the workers must reach it).
    pub receiver: SocketAddr,
    /// Part 1: workers sending at once, and how many payouts they create.
    pub concurrency: usize,
    pub requests: u64,
    /// Part 2: payouts per second, and for how long.
    pub rate: f64,
    pub duration: Duration,
    /// How long to wait for payouts to settle (part 1) and webhooks to arrive (part 2).
    pub settle: Duration,
    pub timeout: Duration,
}

/// When each payout's `payout.succeeded` first arrived, by payout id, and how many arrived.
#[derive(Default)]
struct Arrivals {
    first: Mutex<HashMap<String, Instant>>,
    deliveries: std::sync::atomic::AtomicU64,
}

async fn receive(State(arrivals): State<Arc<Arrivals>>, body: Bytes) -> StatusCode {
    let at = Instant::now();
    arrivals
        .deliveries
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if let Ok(event) = serde_json::from_slice::<Value>(&body)
        && event["type"] == "payout.succeeded"
        && let Some(id) = event["data"]["id"].as_str()
    {
        arrivals
            .first
            .lock()
            .expect("arrivals lock")
            .entry(id.to_owned())
            .or_insert(at);
    }
    StatusCode::OK
}

/// The webhook receiver; returns its URL.
async fn start_receiver(bind: SocketAddr, arrivals: Arc<Arrivals>) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("binding the webhook receiver to {bind}"))?;
    let addr = listener.local_addr()?;
    let app = Router::new().fallback(receive).with_state(arrivals);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("the webhook receiver stopped: {e}");
        }
    });
    Ok(format!("http://{addr}/hook"))
}

/// The figures of one run.
pub struct PayoutsReport {
    pub created: Report,
    /// From the end of part 1 until nothing was in flight; None if that took over `settle`.
    pub drained: Option<Duration>,
    pub rate: f64,
    pub sent: u64,
    pub accepted: u64,
    /// Statuses other than 202 in part 2.
    pub refused: HashMap<u16, u64>,
    pub received: u64,
    pub deliveries: u64,
    pub latency: Option<Percentiles>,
}

impl PayoutsReport {
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        out.push_str("── 1. payouts created per second ──\n");
        out.push_str(&self.created.to_text());
        match self.drained {
            Some(d) => out.push_str(&format!(
                "all {} settled (inFlight 0) {:.2} s after the last 202: {:.1} payouts settled/s end to end\n",
                self.created.successes(),
                d.as_secs_f64(),
                self.created.successes() as f64
                    / (self.created.elapsed + d).as_secs_f64().max(f64::EPSILON)
            )),
            None => out.push_str("payouts were still in flight when the settle time ran out\n"),
        }
        out.push_str(&format!(
            "── 2. created → payout.succeeded received, {:.1} payouts/s ──\n",
            self.rate
        ));
        out.push_str(&format!(
            "sent {}   202 {}   refused {:?}\n",
            self.sent, self.accepted, self.refused
        ));
        out.push_str(&format!(
            "webhooks received for {} of {} ({} deliveries in all, both parts)\n",
            self.received, self.accepted, self.deliveries
        ));
        match &self.latency {
            Some(p) => out.push_str(&format!(
                "latency ms        p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}  (mean {:.1})\n",
                p.p50, p.p90, p.p99, p.max, p.mean
            )),
            None => out.push_str("latency ms        (no webhook arrived)\n"),
        }
        out
    }
}

pub async fn run(settings: &PayoutsSettings) -> anyhow::Result<PayoutsReport> {
    ensure!(
        settings.key.starts_with("sk_test_"),
        "payouts are benchmarked in test mode (the sandbox is the bank): pass a sk_test_ key"
    );
    ensure!(settings.rate > 0.0, "--rate must be positive");
    let db = sea_orm::Database::connect(settings.database_url.as_str())
        .await
        .context("connecting to --database-url")?;
    let business =
        crate::lists::business_of(&db, &settings.key, settings.business.as_deref()).await?;
    let arrivals = Arc::new(Arrivals::default());
    let url = start_receiver(settings.receiver, arrivals.clone()).await?;
    ensure!(
        store::businesses::set_webhook_url(&db, &business, Mode::Test, &url).await?,
        "no business {business}"
    );
    eprintln!("the test webhook URL of {business} is now {url}");

    let api = settings.api.trim_end_matches('/').to_owned();
    let client = Client::builder()
        .timeout(settings.timeout)
        .pool_max_idle_per_host(settings.concurrency.max(64))
        .tcp_nodelay(true)
        .build()?;
    let call = Caller {
        client: client.clone(),
        api: api.clone(),
        key: settings.key.clone(),
    };
    let number = domain::nuban::account_number("058", 12_345_678).expect("a valid NUBAN");
    call.expect(
        reqwest::Method::PUT,
        "/v1/settlement-account",
        None,
        json!({"bankCode": "058", "accountNumber": number, "schedule": "manual"}),
        200,
    )
    .await?;
    // Part 1's warm-up (1 s) creates payouts too: a generous allowance.
    let payouts = settings.requests
        + (settings.rate * settings.duration.as_secs_f64()).ceil() as u64
        + settings.concurrency as u64 * 200;
    fund(&call, i64::try_from(payouts)? * AMOUNT, settings.settle).await?;

    // 1. Created per second.
    eprintln!(
        "part 1: {} payouts from {} workers…",
        settings.requests, settings.concurrency
    );
    let created = load::run(
        client.clone(),
        Settings {
            base: api.clone(),
            api_keys: vec![settings.key.clone()],
            concurrency: settings.concurrency,
            stop: Stop::Requests(settings.requests),
            warmup: Duration::from_secs(1),
            timeout: settings.timeout,
        },
        Workload::Payout { amount: AMOUNT },
        Arc::new(AtomicBool::new(false)),
    )
    .await?;
    let drained = drain(&call, settings.settle).await?;

    // 2. At a steady rate, each payout from its 202 to its webhook.
    let total = (settings.rate * settings.duration.as_secs_f64())
        .ceil()
        .max(1.0) as u64;
    eprintln!(
        "part 2: {total} payouts at {:.1}/s, then up to {:.0} s for their webhooks…",
        settings.rate,
        settings.settle.as_secs_f64()
    );
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / settings.rate));
    let mut sending = tokio::task::JoinSet::new();
    for _ in 0..total {
        tick.tick().await;
        let call = call.clone();
        sending.spawn(async move {
            let (status, body) = call
                .send(
                    reqwest::Method::POST,
                    "/v1/payouts",
                    Some(&Ulid::new().to_string()),
                    json!({ "amount": AMOUNT }),
                )
                .await?;
            let created_at = Instant::now();
            let id = body["id"].as_str().map(str::to_owned);
            anyhow::Ok((status, id, created_at))
        });
    }
    let mut accepted = Vec::new();
    let mut refused: HashMap<u16, u64> = HashMap::new();
    while let Some(joined) = sending.join_next().await {
        match joined.context("a sender panicked")? {
            Ok((202, Some(id), at)) => accepted.push((id, at)),
            Ok((status, _, _)) => *refused.entry(status).or_default() += 1,
            Err(e) => {
                eprintln!("a payout request failed: {e:#}");
                *refused.entry(0).or_default() += 1;
            }
        }
    }
    let deadline = Instant::now() + settings.settle;
    loop {
        let arrived = {
            let first = arrivals.first.lock().expect("arrivals lock");
            accepted
                .iter()
                .filter(|(id, _)| first.contains_key(id))
                .count()
        };
        if arrived == accepted.len() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut latency =
        Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds");
    let mut received = 0;
    {
        let first = arrivals.first.lock().expect("arrivals lock");
        for (id, created_at) in &accepted {
            if let Some(at) = first.get(id) {
                received += 1;
                let micros = at.saturating_duration_since(*created_at).as_micros();
                latency.saturating_record(u64::try_from(micros).unwrap_or(u64::MAX).max(1));
            }
        }
    }
    Ok(PayoutsReport {
        created,
        drained,
        rate: settings.rate,
        sent: total,
        accepted: accepted.len() as u64,
        refused,
        received,
        deliveries: arrivals
            .deliveries
            .load(std::sync::atomic::Ordering::Relaxed),
        latency: Percentiles::of(&latency),
    })
}

/// The API with the bench's key.
#[derive(Clone)]
struct Caller {
    client: Client,
    api: String,
    key: String,
}

impl Caller {
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        idempotency_key: Option<&str>,
        body: Value,
    ) -> anyhow::Result<(u16, Value)> {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.api))
            .bearer_auth(&self.key);
        if !body.is_null() {
            request = request.json(&body);
        }
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        let response = request.send().await.with_context(|| path.to_owned())?;
        let status = response.status().as_u16();
        Ok((status, response.json().await.unwrap_or(Value::Null)))
    }

    async fn expect(
        &self,
        method: reqwest::Method,
        path: &str,
        idempotency_key: Option<&str>,
        body: Value,
        status: u16,
    ) -> anyhow::Result<Value> {
        let (got, answer) = self.send(method, path, idempotency_key, body).await?;
        if got != status {
            bail!("{path} answered {got}: {answer}");
        }
        Ok(answer)
    }

    async fn balance(&self) -> anyhow::Result<Value> {
        self.expect(reqwest::Method::GET, "/v1/balance", None, Value::Null, 200)
            .await
    }
}

/// Tops the available balance up to `needed` kobo: one deposit to a fresh test-bank account,
/// through the sandbox, waited for until it is credited.
async fn fund(call: &Caller, needed: i64, within: Duration) -> anyhow::Result<()> {
    let available = call.balance().await?["available"].as_i64().unwrap_or(0);
    if available >= needed {
        return Ok(());
    }
    let account = call
        .expect(
            reqwest::Method::POST,
            "/v1/virtual-accounts",
            Some(&Ulid::new().to_string()),
            crate::payload::unique_customer("test-bank"),
            201,
        )
        .await?;
    let id = account["id"].as_str().context("the account has no id")?;
    call.expect(
        reqwest::Method::POST,
        &format!("/v1/virtual-accounts/{id}/simulate-deposit"),
        None,
        json!({ "amount": needed - available }),
        202,
    )
    .await?;
    let deadline = Instant::now() + within;
    while call.balance().await?["available"].as_i64().unwrap_or(0) < needed {
        ensure!(
            Instant::now() < deadline,
            "the deposit was not credited within {within:?} (is the sandbox notifying the api?)"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// How long until nothing is in flight (every payout settled); None past `within`.
async fn drain(call: &Caller, within: Duration) -> anyhow::Result<Option<Duration>> {
    let started = Instant::now();
    loop {
        if call.balance().await?["inFlight"].as_i64() == Some(0) {
            return Ok(Some(started.elapsed()));
        }
        if started.elapsed() >= within {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
