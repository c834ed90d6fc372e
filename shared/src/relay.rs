//! The outbox relay: publishes due jobs to the broker with confirms. Woken right after a commit
//! that wrote a job (low latency), and sweeping every second for anything due or left behind by
//! a crash (no loss). Safe to run in many processes at once.

use std::sync::Arc;
use std::time::Duration;

use sea_orm::DatabaseConnection;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::db::outbox::{self, JobMessage};
use crate::queue::Broker;

/// A message published but whose job is neither finished nor rescheduled after this long is
/// published again (its message may have been lost with a broker or an in-process queue).
pub const REPUBLISH_AFTER: Duration = Duration::from_secs(300);
const SWEEP_EVERY: Duration = Duration::from_secs(1);
const BATCH: u64 = 200;

#[derive(Clone)]
pub struct Relay {
    db: DatabaseConnection,
    broker: Arc<dyn Broker>,
    wake: Arc<Notify>,
}

impl Relay {
    pub fn new(db: DatabaseConnection, broker: Arc<dyn Broker>) -> Self {
        Self {
            db,
            broker,
            wake: Arc::new(Notify::new()),
        }
    }

    /// The broker it publishes to (for readiness checks).
    pub fn broker(&self) -> &Arc<dyn Broker> {
        &self.broker
    }

    /// Asks for a sweep now (call after committing a job that is due at once).
    pub fn kick(&self) {
        self.wake.notify_one();
    }

    /// Publishes every due job; returns how many were published.
    pub async fn sweep(&self) -> Result<usize, sea_orm::DbErr> {
        let mut total = 0;
        loop {
            let broker = self.broker.clone();
            let published = outbox::publish_due(
                &self.db,
                domain::time::now(),
                REPUBLISH_AFTER,
                BATCH,
                |row| {
                    let broker = broker.clone();
                    async move {
                        let body = serde_json::to_vec(&JobMessage { job_id: row.id.clone() })
                            .expect("messages serialise");
                        match broker.publish(&row.queue, &body, false).await {
                            Ok(()) => {
                                metrics::counter!("jobs_published_total", "queue" => row.queue.clone()).increment(1);
                                true
                            }
                            Err(e) => {
                                tracing::warn!(job_id = %row.id, queue = %row.queue, error = %e, "publish failed; will retry");
                                false
                            }
                        }
                    }
                },
            )
            .await?;
            total += published;
            if (published as u64) < BATCH {
                return Ok(total);
            }
        }
    }

    /// Sweeps until cancelled.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut sweeps: u64 = 0;
        loop {
            if let Err(e) = self.sweep().await {
                tracing::warn!(error = %e, "outbox sweep failed");
            }
            // The backlog is a count over an index: every tenth sweep is often enough.
            if sweeps.is_multiple_of(10)
                && let Ok(backlog) = outbox::backlog(&self.db, domain::time::now()).await
            {
                metrics::gauge!("outbox_backlog").set(backlog as f64);
            }
            sweeps += 1;
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(SWEEP_EVERY) => {}
            }
        }
    }
}
