//! Consuming a work queue: each message names a job; the job row decides whether there is work.
//! Runs as many handlers at once as the prefetch allows; on shutdown stops taking messages and
//! lets the ones in hand finish (unfinished ones return to the queue).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use sea_orm::DatabaseConnection;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::db::outbox::{self, Job, JobMessage, JobOutcome, JobRow};
use crate::queue::{Broker, Delivery, reconnect_delay};
use crate::relay::Relay;

#[async_trait]
pub trait JobHandler: Send + Sync + 'static {
    /// Does the job's work. Must be idempotent: a job can run twice (a crash before `finish`).
    async fn handle(&self, row: &JobRow, job: Job) -> JobOutcome;
}

pub struct Consumer<H> {
    pub db: DatabaseConnection,
    pub broker: Arc<dyn Broker>,
    pub relay: Relay,
    pub queue: &'static str,
    pub prefetch: u16,
    pub handler: Arc<H>,
    /// How long in-flight jobs may take to finish after shutdown is asked for.
    pub grace: Duration,
}

impl<H: JobHandler> Consumer<H> {
    pub async fn run(self, shutdown: CancellationToken) {
        let this = Arc::new(self);
        let mut in_flight = JoinSet::new();
        let mut failures = 0;
        'connect: while !shutdown.is_cancelled() {
            let mut stream = match this.broker.consume(this.queue, this.prefetch).await {
                Ok(stream) => {
                    failures = 0;
                    stream
                }
                Err(e) => {
                    tracing::warn!(queue = this.queue, error = %e, "cannot consume; retrying");
                    failures += 1;
                    tokio::select! {
                        () = shutdown.cancelled() => break 'connect,
                        () = tokio::time::sleep(reconnect_delay(failures)) => continue 'connect,
                    }
                }
            };
            tracing::info!(queue = this.queue, "consuming");
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break 'connect,
                    next = stream.next() => match next {
                        Some(Ok(delivery)) => {
                            let this = this.clone();
                            in_flight.spawn(async move { this.process(delivery).await });
                        }
                        Some(Err(e)) => {
                            tracing::warn!(queue = this.queue, error = %e, "consumer lost; reconnecting");
                            continue 'connect;
                        }
                        None => {
                            tracing::warn!(queue = this.queue, "consumer stream ended; reconnecting");
                            continue 'connect;
                        }
                    },
                    Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
                }
            }
        }
        let pending = in_flight.len();
        if pending > 0 {
            tracing::info!(queue = this.queue, pending, "draining in-flight jobs");
        }
        let drained = tokio::time::timeout(this.grace, async {
            while in_flight.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            // Their messages were never acknowledged: the broker gives them to another worker.
            tracing::warn!(
                queue = this.queue,
                left = in_flight.len(),
                "grace period over; abandoning jobs"
            );
            in_flight.abort_all();
        }
    }

    async fn process(&self, delivery: Delivery) {
        let Ok(message) = serde_json::from_slice::<JobMessage>(&delivery.body) else {
            tracing::error!(queue = self.queue, "unreadable message; dead-lettering it");
            let _ = delivery.nack(false).await;
            return;
        };
        let job_id = message.job_id;
        let runnable = match outbox::load_runnable(&self.db, &job_id, domain::time::now()).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(job_id, error = %e, "cannot read job; requeueing");
                tokio::time::sleep(Duration::from_secs(1)).await;
                let _ = delivery.nack(true).await;
                return;
            }
        };
        let (row, job) = match runnable {
            outbox::Runnable::Run(row, job) => (row, job),
            outbox::Runnable::Repeat => {
                metrics::counter!("jobs_consumed_total", "queue" => self.queue, "outcome" => "skipped")
                    .increment(1);
                // Finished already, or rescheduled for later: this message is a repeat.
                let _ = delivery.ack().await;
                return;
            }
            outbox::Runnable::Unreadable(row, error) => {
                tracing::error!(job_id = %row.id, queue = self.queue, error, "job dead-lettered");
                metrics::counter!("jobs_consumed_total", "queue" => self.queue, "outcome" => "dead")
                    .increment(1);
                let dead = JobOutcome::Dead { error };
                if outbox::finish(&self.db, &row, &dead, domain::time::now())
                    .await
                    .is_err()
                {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    let _ = delivery.nack(true).await;
                    return;
                }
                let _ = delivery.nack(false).await; // to the queue's dead-letter queue
                return;
            }
        };
        let request_id = row.request_id.clone().unwrap_or_default();
        let span = tracing::info_span!(
            "job",
            job_id = %row.id,
            queue = self.queue,
            attempt = row.attempts + 1,
            request_id = %request_id,
        );
        let started = std::time::Instant::now();
        let outcome = ops::telemetry::with_request_id(
            request_id,
            tracing::Instrument::instrument(self.handler.handle(&row, job), span.clone()),
        )
        .await;
        metrics::histogram!("job_duration_seconds", "queue" => self.queue)
            .record(started.elapsed().as_secs_f64());
        let label = match &outcome {
            JobOutcome::Done => "done",
            JobOutcome::Retry { .. } => "retry",
            JobOutcome::Dead { .. } => "dead",
        };
        metrics::counter!("jobs_consumed_total", "queue" => self.queue, "outcome" => label)
            .increment(1);
        let _enter = span.enter();
        match &outcome {
            JobOutcome::Done => tracing::debug!("job done"),
            JobOutcome::Retry { after, error } => tracing::info!(
                retry_in_ms = after.as_millis() as u64,
                error,
                "job will retry"
            ),
            JobOutcome::Dead { error } => tracing::warn!(error, "job dead-lettered"),
        }
        drop(_enter);
        if let Err(e) = outbox::finish(&self.db, &row, &outcome, domain::time::now()).await {
            tracing::warn!(job_id = %row.id, error = %e, "cannot record job outcome; requeueing");
            tokio::time::sleep(Duration::from_secs(1)).await;
            let _ = delivery.nack(true).await;
            return;
        }
        if let JobOutcome::Dead { .. } = outcome {
            // Operators see dead jobs in the queue's dead-letter queue too.
            if let Err(e) = self.broker.publish(self.queue, &delivery.body, true).await {
                tracing::warn!(job_id = %row.id, error = %e, "could not copy the dead job to its dead-letter queue");
            }
        }
        // A finished job may have written events whose deliveries are due now; a short retry is
        // due soon. Either way the relay should look now rather than at its next sweep.
        if matches!(outcome, JobOutcome::Done)
            || matches!(outcome, JobOutcome::Retry { after, .. } if after < Duration::from_secs(2))
        {
            self.relay.kick();
        }
        let _ = delivery.ack().await;
    }
}
