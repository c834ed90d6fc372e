//! worker-webhooks: delivers each event to its business's endpoint for the event's mode, signed
//! as Standard Webhooks defines, one attempt per job. A failed attempt reschedules the job on the
//! configured schedule (with jitter, or when the receiver's `Retry-After` says); a delivery that
//! exhausts the schedule is dead: marked so in the database and copied to the `webhooks`
//! dead-letter queue (bounded; a replay drops the copy). Operators list dead deliveries and
//! replay them (see [`operator`]).
//!
//! Each delivery is its own job, and each attempt goes to the mode's webhook URL of its moment.
//! One endpoint holds at most `webhooks.max_in_flight_per_endpoint` of the consumer's
//! `webhooks.concurrency` slots (the prefetch; a quick one, `max_in_flight_per_quick_endpoint`):
//! its other deliveries are handed back to the outbox for a little later, without spending
//! attempts; the businesses sharing an endpoint share its slots fairly, and a business whose
//! deliveries keep failing there is backed off by a circuit breaker of its own, per mode, so it
//! never delays another business ([`endpoints`]).

pub mod deliver;
pub mod endpoints;
pub mod operator;
pub mod schedule;

use std::sync::Arc;
use std::time::Duration;

use bootstrap::{Worker, WorkerParts};
use ops::config::Config;
use queue::worker::Consumer;
use sea_orm::DatabaseConnection;
use tokio_util::sync::CancellationToken;

pub use deliver::Deliverer;

pub const QUEUE: &str = <jobs::WebhookJob as jobs::QueueJob>::QUEUE;

/// The consumer, on any broker (RabbitMQ, or the in-process one of `api dev`). Returns when
/// `shutdown` is cancelled and in-flight deliveries have finished.
pub async fn run_with(config: Config, parts: WorkerParts) -> anyhow::Result<()> {
    let WorkerParts {
        db,
        cipher,
        broker,
        relay,
        shutdown,
    } = parts;
    let gauge = tokio::spawn(count_dead_letters(db.clone(), shutdown.clone()));
    let failing = tokio::spawn(show_failing_endpoints(db.clone(), shutdown.clone()));
    let handler = Arc::new(Deliverer::new(db.clone(), cipher, config.webhooks.clone()));
    Consumer::new(db, broker, relay, handler)
        .prefetch(config.webhooks.concurrency.max(1))
        // An attempt in flight finishes within its timeout.
        .grace(Duration::from_secs(config.webhooks.timeout_secs.max(1) + 5))
        .run(shutdown)
        .await;
    let _ = gauge.await;
    let _ = failing.await;
    Ok(())
}

/// This worker, as `api dev`, the test app and its binary start it.
pub const WORKER: Worker = Worker {
    name: "worker-webhooks",
    run: |config, parts| Box::pin(run_with(config, parts)),
};

/// How often `webhook_dead_letters` is recounted from the database. Deaths raise it at once
/// (`deliver::observe`); replays, made by an operator command elsewhere, show at the next count.
const DEAD_LETTER_COUNT_EVERY: Duration = Duration::from_secs(30);

/// Keeps the `webhook_dead_letters` gauge equal to the number of dead deliveries until cancelled.
pub async fn count_dead_letters(db: DatabaseConnection, shutdown: CancellationToken) {
    loop {
        match store::deliveries::count_dead(&db).await {
            Ok(n) => metrics::gauge!("webhook_dead_letters").set(n as f64),
            Err(e) => tracing::warn!(error = %e, "counting dead deliveries failed"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(DEAD_LETTER_COUNT_EVERY) => {}
        }
    }
}

/// How many businesses `webhook_endpoint_failing_seconds` shows: the worst few name the
/// offenders; a series per business would grow with every customer.
const FAILING_SHOWN: u64 = 5;

/// How often the failing endpoints are looked for.
const FAILING_CHECK_EVERY: Duration = Duration::from_secs(15);

/// Keeps `webhook_endpoint_failing_seconds{business}` up to date until cancelled: for the
/// [`FAILING_SHOWN`] businesses whose webhooks have failed longest, how long; a business that
/// leaves that list is set to 0 (its series stays, so a resolved alert resolves).
pub async fn show_failing_endpoints(db: DatabaseConnection, shutdown: CancellationToken) {
    let mut shown = std::collections::BTreeSet::new();
    loop {
        match store::deliveries::failing_longest(&db, FAILING_SHOWN).await {
            Ok(failing) => {
                let now = domain::time::now();
                let current: std::collections::BTreeSet<String> = failing
                    .iter()
                    .map(|(business, _)| business.clone())
                    .collect();
                for gone in shown.difference(&current) {
                    metrics::gauge!("webhook_endpoint_failing_seconds", "business" => gone.clone())
                        .set(0.0);
                }
                for (business, since) in failing {
                    let seconds = (now - since).as_seconds_f64().max(0.0);
                    metrics::gauge!("webhook_endpoint_failing_seconds", "business" => business)
                        .set(seconds);
                }
                shown.extend(current);
            }
            Err(e) => tracing::warn!(error = %e, "looking for failing webhook endpoints failed"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(FAILING_CHECK_EVERY) => {}
        }
    }
}

/// The `worker-webhooks` process.
pub async fn run(config: Config) -> anyhow::Result<()> {
    outbound::ssrf::TargetPolicy::from_config(&config.webhooks).warn_at_start("worker-webhooks");
    WORKER.run_process(config).await
}
