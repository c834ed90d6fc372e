//! The outbox relay: publishes due jobs to the broker with confirms. Woken right after a commit
//! that wrote a job (low latency), and sweeping every second for anything due or left behind by
//! a crash (no loss). Safe to run in many processes at once.
//!
//! A sweep claims a batch of due rows in a short transaction (marking them published, with a
//! lease until the broker confirms), publishes them outside it in messages that each name up to
//! 16 of a queue's rows (the broker's work is per message, not per job) with confirms pipelined
//! (all sent, then all confirms awaited), then records the confirms (and unpublishes what
//! failed): no row lock is held across a broker round trip, so a consumer finishing a job never
//! waits on the relay. A relay that dies mid-publish leaves its claims unconfirmed; they are
//! published again when their lease ends. A publish the broker refuses because a queue or exchange
//! is missing (a fresh node, a deleted queue) declares the topology again and is retried at once.
//!
//! Every so often the relay also looks for lost messages: published jobs that no consumer
//! started within a lease (or started and never finished), in a queue that holds fewer ready
//! messages than such jobs' claims. Only those are published again; a queue that keeps every
//! message while no worker runs is left alone, so an outage leaves each claim's messages, not
//! more with every sweep.

use domain::ids::JobId;
use std::sync::Arc;
use std::time::Duration;

use sea_orm::{DatabaseConnection, DbErr};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::broker::{Broker, Outgoing, QueueError};
use store::outbox::{self, JobMessage, JobRow};

/// How often the relay sweeps, and the leases it works with.
#[derive(Debug, Clone, Copy)]
pub struct RelayTimings {
    /// Sweep for due jobs this often (and whenever kicked).
    pub sweep_every: Duration,
    /// A claimed row is this relay's to publish for this long; past it, its publish counts as
    /// unconfirmed and any relay publishes it. Longer than a batch's publish with pipelined
    /// confirms takes (well under a second), short because it is how long the work a killed
    /// process had claimed waits; a publish that does run longer only sends a duplicate, which
    /// every consumer tolerates.
    pub claim_lease: Duration,
    /// A published job not started within this long, or started and not finished within it,
    /// may have lost its message (see the module documentation).
    pub lease: Duration,
    /// Look for lost messages this often.
    pub lost_check_every: Duration,
}

impl Default for RelayTimings {
    fn default() -> Self {
        RelayTimings {
            sweep_every: Duration::from_secs(1),
            claim_lease: Duration::from_secs(10),
            lease: Duration::from_secs(300),
            lost_check_every: Duration::from_secs(10),
        }
    }
}

/// What a sweep did.
struct Swept {
    published: usize,
    /// The broker refused (or could not take) some publish.
    refused: bool,
}

/// Rows claimed and published per round.
const BATCH: u64 = 200;
/// The most jobs one message names. A message's jobs all go to the one consumer that takes it,
/// so a claim's jobs are spread over several messages for the worker processes to share; a
/// round of one business's deposits (16 at 32 callers) is still one message.
const JOBS_PER_MESSAGE: usize = 16;
/// Overdue rows looked at per lost-message check.
const LOST_LIMIT: u64 = 1_000;

#[derive(Clone)]
pub struct Relay {
    db: DatabaseConnection,
    broker: Arc<dyn Broker>,
    wake: Arc<Notify>,
    timings: RelayTimings,
}

impl Relay {
    pub fn new(db: DatabaseConnection, broker: Arc<dyn Broker>) -> Self {
        Self::with_timings(db, broker, RelayTimings::default())
    }

    pub fn with_timings(
        db: DatabaseConnection,
        broker: Arc<dyn Broker>,
        timings: RelayTimings,
    ) -> Self {
        Self {
            db,
            broker,
            wake: Arc::new(Notify::new()),
            timings,
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
    pub async fn sweep(&self) -> Result<usize, DbErr> {
        Ok(self.sweep_rounds().await?.published)
    }

    /// [`sweep`](Self::sweep), and whether the broker refused any publish.
    async fn sweep_rounds(&self) -> Result<Swept, DbErr> {
        let mut total = 0;
        loop {
            let now = domain::time::now();
            let until = outbox::claim_until(now, self.timings.claim_lease);
            let rows = outbox::claim_due(&self.db, now, until, BATCH).await?;
            if rows.is_empty() {
                return Ok(Swept {
                    published: total,
                    refused: false,
                });
            }
            let claimed = rows.len();
            let (published, failed) = self.publish(rows).await;
            outbox::confirm_published(&self.db, &published, until).await?;
            outbox::release_claims(&self.db, &failed, until).await?;
            total += published.len();
            if !failed.is_empty() || (claimed as u64) < BATCH {
                // The broker is unhappy (the rest waits for the next sweep), or all is done.
                return Ok(Swept {
                    published: total,
                    refused: !failed.is_empty(),
                });
            }
        }
    }

    /// Publishes claimed rows, each queue's in messages of up to [`JOBS_PER_MESSAGE`] jobs (see
    /// [`JobMessage`]); returns the ids confirmed and the ids that failed.
    async fn publish(&self, rows: Vec<JobRow>) -> (Vec<JobId>, Vec<JobId>) {
        let mut messages: Vec<(String, Vec<JobId>)> = Vec::new();
        for row in rows {
            match messages
                .iter_mut()
                .find(|(queue, ids)| *queue == row.queue && ids.len() < JOBS_PER_MESSAGE)
            {
                Some((_, ids)) => ids.push(row.id),
                None => messages.push((row.queue, vec![row.id])),
            }
        }
        let bodies: Vec<Vec<u8>> = messages
            .iter()
            .map(|(_, ids)| {
                serde_json::to_vec(&JobMessage::new(ids.clone()).expect("a claimed job"))
                    .expect("messages serialise")
            })
            .collect();
        let outgoing = |pick: &[usize]| -> Vec<Outgoing<'_>> {
            pick.iter()
                .map(|&i| Outgoing {
                    queue: &messages[i].0,
                    body: &bodies[i],
                })
                .collect()
        };
        let all: Vec<usize> = (0..messages.len()).collect();
        let mut verdicts: Vec<Result<(), QueueError>> =
            self.broker.publish_many(&outgoing(&all)).await;
        if verdicts
            .iter()
            .any(|v| matches!(v, Err(QueueError::Unroutable(_))))
        {
            // A queue or exchange is missing: the broker lost its definitions (a fresh node, a
            // deleted queue). Declare them again and publish what failed once more (a missing
            // exchange also closed the channel under the messages behind it).
            let failed: Vec<usize> = all
                .iter()
                .copied()
                .filter(|&i| verdicts[i].is_err())
                .collect();
            tracing::warn!(
                messages = failed.len(),
                "the broker has no route for some jobs; declaring the topology again"
            );
            match self.broker.declare().await {
                Ok(()) => {
                    let again = self.broker.publish_many(&outgoing(&failed)).await;
                    for (i, verdict) in failed.iter().zip(again) {
                        verdicts[*i] = verdict;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "declaring the topology failed"),
            }
        }
        let (mut published, mut failed) = (Vec::new(), Vec::new());
        let mut first_error = None;
        for ((queue, ids), verdict) in messages.into_iter().zip(verdicts) {
            match verdict {
                Ok(()) => {
                    metrics::counter!("jobs_published_total", "queue" => queue)
                        .increment(ids.len() as u64);
                    published.extend(ids);
                }
                Err(e) => {
                    tracing::debug!(jobs = ids.len(), %queue, error = %e, "publish failed; will retry");
                    first_error.get_or_insert(e);
                    failed.extend(ids);
                }
            }
        }
        if let Some(error) = first_error {
            // One line a round, not one a job: while a broker fails over, every round fails
            // whole, and a line per job would bury everything else in the log.
            tracing::warn!(
                failed = failed.len(),
                published = published.len(),
                %error,
                "publishes failed; the jobs are published again by a later round"
            );
        }
        (published, failed)
    }

    /// Makes jobs whose messages are lost due for publishing again; returns how many. A queue
    /// holding at least as many ready messages as it should (by the database) lost none.
    pub async fn recover_lost(&self) -> Result<u64, DbErr> {
        let now = domain::time::now();
        let mut released = 0;
        for census in outbox::census(&self.db, now, self.timings.lease, LOST_LIMIT).await? {
            let ready = match self.broker.depth(&census.queue, false).await {
                Ok(ready) => ready,
                Err(QueueError::Unroutable(_)) => 0, // the queue itself is gone
                Err(e) => {
                    tracing::debug!(queue = %census.queue, error = %e, "cannot count the queue");
                    continue;
                }
            };
            let missing = census.waiting.saturating_sub(ready) as usize;
            if missing == 0 {
                continue;
            }
            let lost: Vec<JobRow> = census.overdue.into_iter().take(missing).flatten().collect();
            let n = outbox::release_lost(&self.db, &lost, now, self.timings.lease).await?;
            if n > 0 {
                tracing::warn!(
                    queue = %census.queue,
                    jobs = n,
                    waiting = census.waiting,
                    ready,
                    "messages of published jobs are missing from their queue; publishing them again"
                );
                metrics::counter!("jobs_republished_total", "queue" => census.queue.clone())
                    .increment(n);
            }
            released += n;
        }
        Ok(released)
    }

    /// Sweeps until cancelled.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut sweeps: u64 = 0;
        let mut refusals: u32 = 0;
        let mut last_lost_check: Option<tokio::time::Instant> = None;
        loop {
            if last_lost_check.is_none_or(|at| at.elapsed() >= self.timings.lost_check_every) {
                last_lost_check = Some(tokio::time::Instant::now());
                if let Err(e) = self.recover_lost().await {
                    tracing::warn!(error = %e, "looking for lost messages failed");
                }
            }
            match self.sweep_rounds().await {
                Ok(swept) if swept.refused => refusals = refusals.saturating_add(1),
                Ok(_) => refusals = 0,
                Err(e) => tracing::warn!(error = %e, "outbox sweep failed"),
            }
            // The backlog is a count over an index: every tenth sweep is often enough.
            if sweeps.is_multiple_of(10)
                && let Ok(backlog) = outbox::backlog(&self.db, domain::time::now()).await
            {
                metrics::gauge!("outbox_backlog").set(backlog as f64);
                let now = domain::time::now();
                if let Ok(oldest) = outbox::oldest_due(&self.db, now).await {
                    let age = oldest.map_or(0.0, |due| (now - due).as_seconds_f64().max(0.0));
                    metrics::gauge!("outbox_oldest_job_age_seconds").set(age);
                }
            }
            sweeps += 1;
            if refusals > 0 {
                // The broker refused the last round (it is failing over, or gone): a kick waits
                // out a short pause, growing to the sweep interval, or every commit would start
                // another round bound to fail, each claiming and releasing its rows. A kick that
                // comes meanwhile is kept: the round after the pause picks its job up.
                let pause =
                    crate::broker::reconnect_delay(refusals - 1).min(self.timings.sweep_every);
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(pause) => {}
                }
                continue;
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(self.timings.sweep_every) => {}
            }
        }
    }
}
