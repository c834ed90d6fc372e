//! Measurement, not a check (ignored by default): deliveries per second to a fast local receiver
//! with one and two consumers, and the time from an event's commit to its receipt (p50, p99).
//! Runs on SQLite with the in-process queue, and on PostgreSQL with RabbitMQ when
//! TEST_DATABASE_URL and TEST_AMQP_URL are set.
//!
//! ```text
//! cargo test -p worker-webhooks --test it bench:: -- --ignored --nocapture
//! ```

use domain::ids::EventId;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::Mode;
use ops::config::Config;
use queue::broker::Broker;
use queue::relay::Relay;
use test_support::store::count_deliveries_with_status;
use test_support::{Backend, Receiver, Setup, TestBroker, TestDb, record_event, setup};
use tokio_util::sync::CancellationToken;

const THROUGHPUT_EVENTS: usize = 2000;
const LATENCY_EVENTS: usize = 500;

fn name(backend: &Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "SQLite + in-process queue",
        Backend::Postgres(_) => "PostgreSQL + RabbitMQ",
    }
}

/// Dropped, it removes its broker prefix and database.
struct Rig {
    setup: Setup,
    broker: Arc<dyn Broker>,
    relay: Relay,
    config: Config,
    receiver: Receiver,
    stop: CancellationToken,
    _broker: TestBroker,
    _db: TestDb,
}

impl Rig {
    async fn new(backend: &Backend) -> Rig {
        let db = TestDb::new(backend).await;
        let test_broker = TestBroker::for_backend(backend).await;
        let broker = test_broker.broker.clone();
        let setup = setup(&db.url, None).await;
        let receiver = Receiver::start().await;
        setup.set_url(&setup.business.id, &receiver.url).await;
        let relay = Relay::new(setup.db.clone(), broker.clone());
        let mut config = Config::default();
        config.database.url = Some(db.url.clone());
        // The receiver runs on this machine.
        config.webhooks.allow_private_addresses = true;
        Rig {
            setup,
            broker,
            relay,
            config,
            receiver,
            stop: CancellationToken::new(),
            _broker: test_broker,
            _db: db,
        }
    }

    fn start_consumers(&self, n: usize) {
        for _ in 0..n {
            let parts = self
                .setup
                .worker_parts(&self.broker, &self.relay, &self.stop);
            tokio::spawn(worker_webhooks::run_with(self.config.clone(), parts));
        }
    }

    fn start_relay(&self) {
        tokio::spawn(self.relay.clone().run(self.stop.clone()));
    }

    async fn record(&self, n: usize) -> EventId {
        let data = serde_json::json!({"id": format!("va_{n}"), "object": "virtual_account", "status": "deactivated"});
        record_event(&self.setup.db, &self.setup.business.id, Mode::Test, &data).await
    }

    /// Stops the workers, then (dropped) removes the broker prefix and the database.
    async fn finish(self) {
        self.stop.cancel();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Deliveries per second: a backlog of events, then `workers` workers started, each as a
/// `worker-webhooks` process runs: a consumer and its own outbox relay.
async fn throughput(backend: &Backend, workers: usize) -> (f64, f64) {
    let rig = Rig::new(backend).await;
    for n in 0..THROUGHPUT_EVENTS {
        rig.record(n).await;
    }
    let started = Instant::now();
    for _ in 0..workers {
        rig.start_relay();
    }
    rig.start_consumers(workers);
    rig.receiver
        .wait_for(THROUGHPUT_EVENTS, Duration::from_secs(600))
        .await;
    let received = started.elapsed();
    while count_deliveries_with_status(&rig.setup.db, "succeeded").await < THROUGHPUT_EVENTS as u64
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let recorded = started.elapsed();
    rig.finish().await;
    (
        THROUGHPUT_EVENTS as f64 / received.as_secs_f64(),
        THROUGHPUT_EVENTS as f64 / recorded.as_secs_f64(),
    )
}

/// How fast one relay alone publishes a backlog (messages per second): the ceiling it puts on
/// one worker's deliveries.
async fn relay_alone(backend: &Backend) -> f64 {
    let rig = Rig::new(backend).await;
    for n in 0..THROUGHPUT_EVENTS {
        rig.record(n).await;
    }
    let started = Instant::now();
    let published = rig.relay.sweep().await.unwrap();
    let rate = published as f64 / started.elapsed().as_secs_f64();
    rig.finish().await;
    rate
}

/// Commit → receipt, one consumer, events committed one by one at about 100/s. With `kick`, the
/// committer wakes the relay as the API does after a commit that wrote a job; without it, the
/// relay's one-second sweep finds the job.
async fn latency(backend: &Backend, kick: bool) -> (Duration, Duration, Duration) {
    let rig = Rig::new(backend).await;
    rig.start_relay();
    rig.start_consumers(1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut committed = HashMap::new();
    for n in 0..LATENCY_EVENTS {
        let id = rig.record(n).await;
        committed.insert(id, Instant::now());
        if kick {
            rig.relay.kick();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let received = rig
        .receiver
        .wait_for(LATENCY_EVENTS, Duration::from_secs(120))
        .await;
    let mut latencies: Vec<Duration> = received
        .iter()
        .map(|r| r.at - committed[r.webhook_id().as_str()])
        .collect();
    latencies.sort();
    let pick = |q: f64| latencies[((latencies.len() as f64 * q).ceil() as usize).max(1) - 1];
    rig.finish().await;
    (pick(0.5), pick(0.99), *latencies.last().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "measurement; run with --ignored --nocapture"]
async fn measure_deliveries_per_second_and_commit_to_receipt_latency() {
    let mut backends = vec![Backend::Sqlite];
    if let (Ok(db), Ok(_)) = (
        std::env::var("TEST_DATABASE_URL"),
        std::env::var("TEST_AMQP_URL"),
    ) {
        backends.push(Backend::Postgres(db));
    }
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!("\nworker-webhooks, {profile} build, fast local receiver (200 at once)");
    for backend in &backends {
        println!("\n{}:", name(backend));
        for workers in [1, 2] {
            let (received, recorded) = throughput(backend, workers).await;
            println!(
                "  {workers} worker(s) (consumer + relay each), {THROUGHPUT_EVENTS} events: \
                 {received:.0} deliveries/s received, {recorded:.0}/s recorded as succeeded"
            );
        }
        println!(
            "  one relay alone publishes {:.0} messages/s",
            relay_alone(backend).await
        );
        for kick in [true, false] {
            let (p50, p99, max) = latency(backend, kick).await;
            println!(
                "  commit → receipt ({LATENCY_EVENTS} events at ~100/s, relay {}): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                if kick {
                    "woken after commit"
                } else {
                    "sweep only"
                },
                p50.as_secs_f64() * 1e3,
                p99.as_secs_f64() * 1e3,
                max.as_secs_f64() * 1e3,
            );
        }
    }
}
