//! worker-webhooks: delivers each event to its business's endpoint for the event's mode, signed
//! as Standard Webhooks defines, one attempt per job. A failed attempt reschedules the job on the
//! configured schedule (with jitter, or when the receiver's `Retry-After` says); a delivery that
//! exhausts the schedule is dead: marked so in the database and copied to the `webhooks.dead`
//! queue. Operators list dead deliveries and replay them (see [`operator`]).
//!
//! Each delivery is its own job, so a slow endpoint holds one of the consumer's
//! `webhooks.concurrency` slots (the prefetch) and nothing else.

pub mod deliver;
pub mod operator;
pub mod schedule;

use std::sync::Arc;
use std::time::Duration;

use sea_orm::DatabaseConnection;
use shared::config::Config;
use shared::crypto::Cipher;
use shared::queue::Broker;
use shared::relay::Relay;
use shared::worker::Consumer;
use tokio_util::sync::CancellationToken;

pub use deliver::Deliverer;

pub const QUEUE: &str = "webhooks";

/// The consumer, on any broker (RabbitMQ, or the in-process one of `api dev`). Returns when
/// `shutdown` is cancelled and in-flight deliveries have finished.
pub async fn run_with(
    config: &Config,
    db: DatabaseConnection,
    cipher: Arc<Cipher>,
    broker: Arc<dyn Broker>,
    relay: Relay,
    shutdown: CancellationToken,
) {
    let consumer = Consumer {
        db: db.clone(),
        broker,
        relay,
        queue: QUEUE,
        prefetch: config.webhooks.concurrency.max(1),
        handler: Arc::new(Deliverer::new(db, cipher, config.webhooks.clone())),
        // An attempt in flight finishes within its timeout.
        grace: Duration::from_secs(config.webhooks.timeout_secs.max(1) + 5),
    };
    consumer.run(shutdown).await;
}

/// The `worker-webhooks` process.
pub async fn run(config: Config) -> anyhow::Result<()> {
    shared::ops::run_worker("worker-webhooks", &config, |p| async {
        run_with(&config, p.db, p.cipher, p.broker, p.relay, p.shutdown).await
    })
    .await
}
