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
    config.require_production()?;
    let url = config.database.url.clone().expect("checked");
    let db = shared::ops::connect_database(&url, &config).await?;
    let cipher = Arc::new(shared::ops::configured_cipher(&config)?);
    let broker = shared::ops::connect_broker(&config).await?;
    let shutdown = CancellationToken::new();
    shared::ops::cancel_on_signal(shutdown.clone());
    let ops = shared::ops::serve_ops(
        config.ops.bind,
        db.clone(),
        broker.clone(),
        shutdown.clone(),
    )
    .await?;
    tracing::info!(address = %ops, "worker-webhooks ops listening");
    let relay = Relay::new(db.clone(), broker.clone());
    let relay_task = tokio::spawn(relay.clone().run(shutdown.clone()));
    run_with(&config, db, cipher, broker, relay, shutdown).await;
    let _ = relay_task.await;
    tracing::info!("worker-webhooks stopped");
    Ok(())
}
