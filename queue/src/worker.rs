//! Consuming a work queue: each message names jobs one relay claimed together (one or more);
//! each job's row decides whether there is work. Runs as many handlers at once as the prefetch
//! allows, whatever the messages that carry them; on shutdown stops taking messages and lets the
//! jobs in hand finish (a message whose jobs did not all run returns to the queue).
//!
//! The broker's prefetch bounds messages, not jobs, so a consumer may hold more jobs than it has
//! slots. One message at a time starts its jobs, and a message of several jobs that cannot start
//! its first within [`give_back_after`](Consumer::give_back_after) goes back to the queue, at its
//! place, for a consumer with room: a worker started while another sits on a burst gets its share
//! within about that long (see `docs/decisions/outbox-and-relay.md`).
//!
//! A `Consumer<H>` consumes the queue of `H::Job` and hands its handler only jobs of that type.
//! What no handler should see is settled here, once for every queue: a message that is not a
//! job message, a job of a kind this version cannot read (a newer version's), a repeat, and a
//! message that came before its job's time. The consumer also keeps its queue's dead-letter
//! queue free of stale copies: once a dead job is replayed, its copy there is dropped.
//!
//! The database work every message needs is shared between the messages in hand at the same
//! moment ([`store::batch`]): their jobs are started in one statement, and the runs that end
//! together are recorded in one, so a busy queue costs few round trips and commits per job.

use domain::ids::JobId;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use sea_orm::DatabaseConnection;
use tokio::sync::{Mutex, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::broker::{Broker, DeadLetter, Delivery, QueueError, reconnect_delay};
use crate::relay::Relay;
use jobs::QueueJob;
use store::batch::Coalescer;
use store::outbox::{self, JobMessage, JobOutcome, JobRow, Runnable};

#[async_trait]
pub trait JobHandler: Send + Sync + 'static {
    /// The jobs of the queue it consumes.
    type Job: QueueJob;

    /// Does the job's work. Must be idempotent: a job can run twice (a crash before `finish`).
    /// An error means this run could not finish (the database or a provider failed): the job
    /// runs again after [`retry_after`](Self::retry_after).
    async fn handle(&self, row: &JobRow, job: Self::Job) -> anyhow::Result<Ran>;

    /// How long a job whose run failed with an error waits before it runs again.
    fn retry_after(&self, row: &JobRow) -> Duration;

    /// Whether a run that ends `Done` may have written jobs due at once (events whose deliveries
    /// are due now, …), so the relay should look at once rather than at its next sweep. A
    /// handler whose runs write no jobs says no: each kick is a sweep's round trips.
    fn done_writes_jobs(&self) -> bool {
        true
    }
}

/// How a run ended, and whether the handler has recorded that end itself, in the same commit as
/// the run's own writes (a webhook attempt does: `deliveries::record_attempts`), so the consumer
/// only acknowledges the message.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    pub outcome: JobOutcome,
    pub recorded: bool,
}

impl Ran {
    /// An end the handler has recorded already.
    pub fn recorded(outcome: JobOutcome) -> Self {
        Self {
            outcome,
            recorded: true,
        }
    }
}

/// An end for the consumer to record.
impl From<JobOutcome> for Ran {
    fn from(outcome: JobOutcome) -> Self {
        Self {
            outcome,
            recorded: false,
        }
    }
}

/// How many messages' jobs are started, or finished, in one statement at most.
const ROUND: usize = 64;

/// The consumer's shared rounds of database work (see [`store::batch`]): starting the jobs of
/// the messages that came, and recording how runs ended.
struct Rounds {
    start: Coalescer<JobId, Result<Option<JobRow>, String>>,
    finish: Coalescer<(JobRow, JobOutcome), Result<(), String>>,
}

impl Rounds {
    fn new(db: &DatabaseConnection, queue: &'static str) -> Self {
        let starting = db.clone();
        let start = Coalescer::new(ROUND, move |ids: Vec<JobId>| {
            let db = starting.clone();
            async move {
                match outbox::start_due(&db, queue, &ids, domain::time::now()).await {
                    Ok(rows) => ids
                        .iter()
                        .map(|id| Ok(rows.iter().find(|r| &r.id == id).cloned()))
                        .collect(),
                    Err(e) => ids.iter().map(|_| Err(e.to_string())).collect(),
                }
            }
        });
        let finishing = db.clone();
        let finish = Coalescer::new(ROUND, move |runs: Vec<(JobRow, JobOutcome)>| {
            let db = finishing.clone();
            async move {
                let result = outbox::finish_many(&db, &runs, domain::time::now()).await;
                runs.iter()
                    .map(|_| result.as_ref().map(|_| ()).map_err(|e| e.to_string()))
                    .collect()
            }
        });
        Self { start, finish }
    }
}

/// A consumer's slots: `prefetch` jobs run at once, and one message at a time starts its jobs.
struct Slots {
    jobs: Arc<Semaphore>,
    starting: Mutex<()>,
}

pub struct Consumer<H> {
    db: DatabaseConnection,
    broker: Arc<dyn Broker>,
    relay: Relay,
    handler: Arc<H>,
    prefetch: u16,
    grace: Duration,
    give_back_after: Duration,
    dead_letter_check_every: Duration,
    subscription_check_every: Duration,
}

impl<H: JobHandler> Consumer<H> {
    const QUEUE: &'static str = H::Job::QUEUE;

    /// A consumer of `H::Job`'s queue: 16 jobs at a time, 20 seconds of grace on shutdown.
    pub fn new(
        db: DatabaseConnection,
        broker: Arc<dyn Broker>,
        relay: Relay,
        handler: Arc<H>,
    ) -> Self {
        Consumer {
            db,
            broker,
            relay,
            handler,
            prefetch: 16,
            grace: Duration::from_secs(20),
            give_back_after: Duration::from_secs(1),
            dead_letter_check_every: Duration::from_secs(30),
            subscription_check_every: Duration::from_secs(15),
        }
    }

    /// How many jobs run at once (the broker's prefetch).
    pub fn prefetch(mut self, prefetch: u16) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// How long in-flight jobs may take to finish after shutdown is asked for.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// How long a message of several jobs waits for a slot for its first job before it goes
    /// back to the queue for another consumer (see the module documentation).
    pub fn give_back_after(mut self, after: Duration) -> Self {
        self.give_back_after = after;
        self
    }

    /// How often to look for replayed dead jobs whose dead-letter copies are stale.
    pub fn dead_letter_check_every(mut self, every: Duration) -> Self {
        self.dead_letter_check_every = every;
        self
    }

    /// How long an idle subscription lives before it is made again (see [`run`](Self::run)).
    pub fn subscription_check_every(mut self, every: Duration) -> Self {
        self.subscription_check_every = every;
        self
    }

    /// Consumes until `shutdown`. After the broker ends a subscription (a lost connection, a
    /// deleted queue), the topology is declared again before subscribing again (at start, only
    /// if the queue is missing). A subscription can also stop working without the broker saying
    /// so: a queue deleted and at once declared again (by another process's relay) has been seen
    /// to leave the consumer attached to the new queue, its deliveries never reaching the stream.
    /// So a subscription that received nothing for `subscription_check_every`, with nothing in
    /// flight, is made again (a cheap new channel; messages a broken one held go back to the
    /// queue).
    pub async fn run(self, shutdown: CancellationToken) {
        let queue = Self::QUEUE;
        let this = Arc::new(self);
        let janitor = tokio::spawn(this.clone().keep_dead_letters_current(shutdown.clone()));
        let rounds = Arc::new(Rounds::new(&this.db, queue));
        // Jobs run at once, whatever the messages that carry them: the prefetch bounds messages.
        let slots = Arc::new(Slots {
            jobs: Arc::new(Semaphore::new(usize::from(this.prefetch.max(1)))),
            starting: Mutex::new(()),
        });
        let mut in_flight = JoinSet::new();
        let mut failures = 0;
        let mut idle_renewal = false;
        // At start the process has just declared the topology (`bootstrap::connect_broker`),
        // and an idle renewal finds it as it was: both consume at once, and declare only if the
        // queue is missing. After a lost subscription the topology comes first: the broker may
        // have come back without it (a fresh node, a deleted queue).
        let mut topology_in_place = true;
        'connect: while !shutdown.is_cancelled() {
            let renewal = std::mem::take(&mut idle_renewal);
            let consumed = match std::mem::take(&mut topology_in_place) {
                true => match this.broker.consume(queue, this.prefetch).await {
                    Err(QueueError::Unroutable(_)) => this.subscribe(queue).await,
                    other => other,
                },
                false => this.subscribe(queue).await,
            };
            let mut stream = match consumed {
                Ok(stream) => {
                    failures = 0;
                    stream
                }
                Err(e) => {
                    tracing::warn!(queue, error = %e, "cannot consume; retrying");
                    failures += 1;
                    tokio::select! {
                        () = shutdown.cancelled() => break 'connect,
                        () = tokio::time::sleep(reconnect_delay(failures)) => continue 'connect,
                    }
                }
            };
            if !renewal {
                tracing::info!(queue, "consuming");
            }
            let mut check = tokio::time::interval(this.subscription_check_every);
            check.reset();
            let mut received = false;
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break 'connect,
                    _ = check.tick() => {
                        if !std::mem::take(&mut received) && in_flight.is_empty() {
                            tracing::debug!(queue, "idle; renewing the subscription");
                            idle_renewal = true;
                            topology_in_place = true;
                            continue 'connect;
                        }
                    }
                    next = stream.next() => match next {
                        Some(Ok(delivery)) => {
                            received = true;
                            let (this, rounds, slots) = (this.clone(), rounds.clone(), slots.clone());
                            in_flight.spawn(this.process(rounds, slots, shutdown.clone(), delivery));
                        }
                        Some(Err(e)) => {
                            tracing::warn!(queue, error = %e, "consumer lost; reconnecting");
                            continue 'connect;
                        }
                        None => {
                            // The broker cancelled the consumer (its queue was deleted) or the
                            // connection closed.
                            tracing::warn!(queue, "consumer stream ended; reconnecting");
                            continue 'connect;
                        }
                    },
                    Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
                }
            }
        }
        let pending = in_flight.len();
        if pending > 0 {
            tracing::info!(queue, pending, "draining in-flight jobs");
        }
        let drained = tokio::time::timeout(this.grace, async {
            while in_flight.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            // Their messages were never acknowledged: the broker gives them to another worker.
            tracing::warn!(
                queue,
                left = in_flight.len(),
                "grace period over; abandoning jobs"
            );
            in_flight.abort_all();
        }
        let _ = janitor.await;
    }

    /// Declares the topology, then subscribes.
    async fn subscribe(
        &self,
        queue: &str,
    ) -> Result<BoxStream<'static, Result<Delivery, QueueError>>, QueueError> {
        self.broker.declare().await?;
        self.broker.consume(queue, self.prefetch).await
    }

    /// Runs the jobs a message names, each as a task of its own once one of the consumer's
    /// `prefetch` slots is free, then settles the message: acknowledged once every job is
    /// settled, or put back whole after a pause if any could not be (the jobs that did are
    /// repeats when it comes again). A message of one job is settled as that job says; of
    /// several, a dead job's copy goes to the dead-letter queue on its own.
    async fn process(
        self: Arc<Self>,
        rounds: Arc<Rounds>,
        slots: Arc<Slots>,
        shutdown: CancellationToken,
        delivery: Delivery,
    ) {
        let queue = Self::QUEUE;
        let Ok(message) = serde_json::from_slice::<JobMessage>(&delivery.body) else {
            // Not written by a relay: there is no row to record it in.
            tracing::error!(
                queue,
                bytes = delivery.body.len(),
                "a message that names no job; dead-lettering it"
            );
            metrics::counter!("jobs_consumed_total", "queue" => queue, "outcome" => "unreadable")
                .increment(1);
            let _ = delivery.nack(false).await;
            return;
        };
        let mut job_ids = message.into_job_ids();
        if job_ids.len() == 1 {
            let job_id = job_ids.remove(0);
            let Ok(_slot) = slots.jobs.acquire().await else {
                return;
            };
            match self.run_job(&rounds, job_id).await {
                Settle::Ack => {
                    let _ = delivery.ack().await;
                }
                Settle::Requeue => requeue_later(delivery).await,
                Settle::DeadLetter => {
                    let _ = delivery.nack(false).await; // to the queue's dead-letter queue
                }
            }
            return;
        }
        // One message starts its jobs at a time, so two never each hold jobs waiting for this
        // consumer's slots: a later one waits whole for its turn and its first slot, and goes
        // back if that takes too long.
        let first = async {
            let turn = slots.starting.lock().await;
            (turn, slots.jobs.clone().acquire_owned().await)
        };
        let (turn, first_slot) = tokio::select! {
            biased;
            () = shutdown.cancelled() => {
                let _ = delivery.nack(true).await;
                return;
            }
            got = first => got,
            () = tokio::time::sleep(self.give_back_after) => {
                // This consumer is full: the message goes back, at its place, for one with room
                // (or to this one again, once it has some).
                tracing::debug!(
                    queue,
                    jobs = job_ids.len(),
                    "no slot free; giving the message back"
                );
                metrics::counter!("messages_given_back_total", "queue" => queue).increment(1);
                let _ = delivery.nack(true).await;
                return;
            }
        };
        let Ok(first_slot) = first_slot else {
            return;
        };
        let mut jobs = JoinSet::new();
        let mut stopping = false;
        let mut slot = Some(first_slot);
        for job_id in job_ids {
            let slot = match slot.take() {
                Some(slot) => slot,
                // Once shutdown is asked for, no more of its jobs start: those running finish,
                // and the message goes back for the rest.
                None => match tokio::select! {
                    biased;
                    () = shutdown.cancelled() => {
                        stopping = true;
                        break;
                    }
                    slot = slots.jobs.clone().acquire_owned() => slot,
                } {
                    Ok(slot) => slot,
                    Err(_) => return,
                },
            };
            let (this, rounds) = (self.clone(), rounds.clone());
            jobs.spawn(async move {
                let settle = this.run_job(&rounds, job_id.clone()).await;
                drop(slot);
                (job_id, settle)
            });
        }
        drop(turn);
        let mut requeue = false;
        while let Some(joined) = jobs.join_next().await {
            match joined {
                Ok((_, Settle::Ack)) => {}
                Ok((job_id, Settle::DeadLetter)) => self.copy_to_dead_letters(&job_id).await,
                Ok((_, Settle::Requeue)) | Err(_) => requeue = true,
            }
        }
        if stopping {
            let _ = delivery.nack(true).await;
        } else if requeue {
            requeue_later(delivery).await;
        } else {
            let _ = delivery.ack().await;
        }
    }

    /// A dead job's copy in the queue's dead-letter queue, for whoever watches the broker (the
    /// row is the record), as a message of that job alone would have gone there.
    async fn copy_to_dead_letters(&self, job_id: &JobId) {
        let body =
            serde_json::to_vec(&JobMessage::one(job_id.clone())).expect("messages serialise");
        let letter = DeadLetter {
            queue: Self::QUEUE,
            body: &body,
            expires_in: self.broker.dead_letter_bounds().ttl,
        };
        if let Err(e) = self.broker.publish_dead_letter(letter).await {
            tracing::warn!(%job_id, error = %e, "cannot copy a dead job to the dead-letter queue");
        }
    }

    /// Runs one job of a message, and says how its part of the message is to be settled.
    async fn run_job(&self, rounds: &Rounds, job_id: JobId) -> Settle {
        let queue = Self::QUEUE;
        // Usually the job is due and unfinished, and starting it is all there is to do first
        // (in one statement with the other messages that came meanwhile). Otherwise it is read
        // to tell why not.
        let started = match rounds.start.submit(job_id.clone()).await {
            Some(Ok(started)) => started,
            Some(Err(e)) => {
                tracing::warn!(%job_id, error = %e, "cannot start job; requeueing");
                return Settle::Requeue;
            }
            None => return Settle::Requeue,
        };
        let now = domain::time::now();
        let started_already = started.is_some();
        let runnable = match started {
            Some(row) => outbox::read_job::<H::Job>(row),
            None => match outbox::load_runnable::<H::Job, _>(&self.db, &job_id, now).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(%job_id, error = %e, "cannot read job; requeueing");
                    return Settle::Requeue;
                }
            },
        };
        let (row, job) = match runnable {
            Runnable::Run(row, job) if started_already => (row, job),
            Runnable::Run(row, job) => {
                // Due only by the time of the look (or not seen by the round): started here.
                if let Err(e) = outbox::start(&self.db, &row, now).await {
                    tracing::warn!(%job_id, error = %e, "cannot start job; requeueing");
                    return Settle::Requeue;
                }
                (row, job)
            }
            Runnable::Repeat => {
                metrics::counter!("jobs_consumed_total", "queue" => queue, "outcome" => "skipped")
                    .increment(1);
                // Finished already, or another queue's: this message is a repeat (or a stray).
                return Settle::Ack;
            }
            Runnable::Early(row) => {
                // This process's clock is behind the relay's, or the message is an old copy of a
                // rescheduled job. The job goes back to being due: a relay publishes it at its
                // time, rather than it waiting for a lost-message check.
                if let Err(e) = outbox::not_yet_due(&self.db, &row, now).await {
                    tracing::warn!(%job_id, error = %e, "cannot put an early job back; requeueing");
                    return Settle::Requeue;
                }
                tracing::info!(
                    %job_id,
                    queue,
                    run_at = %row.run_at,
                    "message came before its job's time; the job is published again when due"
                );
                metrics::counter!("jobs_consumed_total", "queue" => queue, "outcome" => "early")
                    .increment(1);
                return Settle::Ack;
            }
            Runnable::Unreadable(row, error) => {
                tracing::error!(job_id = %row.id, queue, error, "job dead-lettered");
                metrics::counter!("jobs_consumed_total", "queue" => queue, "outcome" => "dead")
                    .increment(1);
                let dead = JobOutcome::Dead { error };
                if outbox::finish(&self.db, &row, &dead, domain::time::now())
                    .await
                    .is_err()
                {
                    return Settle::Requeue;
                }
                return Settle::DeadLetter;
            }
        };
        let request_id = row.request_id.clone().unwrap_or_default();
        let span = tracing::info_span!(
            "job",
            job_id = %row.id,
            queue,
            attempt = row.attempts + 1,
            request_id = %request_id,
        );
        let started = std::time::Instant::now();
        let result = ops::telemetry::with_request_id(
            request_id,
            tracing::Instrument::instrument(self.handler.handle(&row, job), span.clone()),
        )
        .await;
        metrics::histogram!("job_duration_seconds", "queue" => queue)
            .record(started.elapsed().as_secs_f64());
        let _enter = span.enter();
        let Ran { outcome, recorded } = match result {
            Ok(ran) => ran,
            Err(error) => {
                let after = self.handler.retry_after(&row);
                tracing::warn!(
                    retry_in_ms = after.as_millis() as u64,
                    error = format!("{error:#}"),
                    "job could not run; will retry"
                );
                JobOutcome::Retry {
                    after,
                    error: format!("{error:#}"),
                }
                .into()
            }
        };
        let label = match &outcome {
            JobOutcome::Done => "done",
            JobOutcome::Retry { .. } => "retry",
            JobOutcome::Dead { .. } => "dead",
        };
        metrics::counter!("jobs_consumed_total", "queue" => queue, "outcome" => label).increment(1);
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
        if !recorded {
            match rounds.finish.submit((row.clone(), outcome.clone())).await {
                Some(Ok(())) => {}
                failed => {
                    let error = failed.and_then(Result::err).unwrap_or_default();
                    tracing::warn!(job_id = %row.id, error, "cannot record job outcome; requeueing");
                    return Settle::Requeue;
                }
            }
        }
        // A finished job may have written events whose deliveries are due now; a short retry is
        // due soon. Either way the relay should look now rather than at its next sweep.
        if (matches!(outcome, JobOutcome::Done) && self.handler.done_writes_jobs())
            || matches!(outcome, JobOutcome::Retry { after, .. } if after < Duration::from_secs(2))
        {
            self.relay.kick();
        }
        if let JobOutcome::Dead { .. } = outcome {
            // A copy for whoever watches the broker; the row is the record.
            Settle::DeadLetter
        } else {
            Settle::Ack
        }
    }

    /// Every `dead_letter_check_every`: if a dead job of this queue was replayed since the last
    /// look, drops the stale copies from the dead-letter queue. Replays are counted over the
    /// dead-letter queue's TTL (older copies are gone anyway), so the clocks of the process that
    /// replays and of this one need not agree.
    async fn keep_dead_letters_current(self: Arc<Self>, shutdown: CancellationToken) {
        let queue = Self::QUEUE;
        let ttl = chrono::Duration::from_std(self.broker.dead_letter_bounds().ttl)
            .unwrap_or(chrono::Duration::days(7));
        let mut tidied_at: Option<u64> = None;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(self.dead_letter_check_every) => {}
            }
            let since = domain::time::now() - ttl;
            let replayed = match outbox::replayed_dead_since(&self.db, queue, since).await {
                Ok(n) => n,
                Err(e) => {
                    tracing::debug!(queue, error = %e, "cannot look for replayed jobs");
                    continue;
                }
            };
            if tidied_at == Some(replayed) || (tidied_at.is_none() && replayed == 0) {
                tidied_at = Some(replayed);
                continue;
            }
            match self.drop_stale_dead_letters().await {
                Ok((kept, dropped)) => {
                    tidied_at = Some(replayed);
                    if dropped > 0 {
                        tracing::info!(queue, kept, dropped, "dropped stale dead letters");
                    }
                }
                Err(e) => tracing::warn!(queue, error = %e, "cannot tidy the dead-letter queue"),
            }
        }
    }

    /// Reads the dead-letter queue once through: a copy of a job that is still dead goes back
    /// (expiring when it would have), anything else (replayed, purged, not a job) is dropped.
    /// Returns how many were kept and dropped.
    pub async fn drop_stale_dead_letters(&self) -> anyhow::Result<(u64, u64)> {
        let queue = Self::QUEUE;
        let ttl = self.broker.dead_letter_bounds().ttl;
        let (mut kept, mut dropped) = (0, 0);
        // Only what is there now: copies put back go behind it.
        let depth = self.broker.depth(queue, true).await?;
        for _ in 0..depth {
            let Some(delivery) = self.broker.get(queue, true).await? else {
                break;
            };
            // A copy names one job (a dead job of a message of several is copied alone).
            let row = match serde_json::from_slice::<JobMessage>(&delivery.body) {
                Ok(message) if message.job_ids().len() == 1 => {
                    outbox::find(&self.db, &message.job_ids()[0]).await?
                }
                _ => None,
            };
            let now = domain::time::now();
            let left = row
                .filter(|row| row.completed_at.is_none())
                .and_then(|row| row.dead_at)
                .and_then(|dead_at| {
                    (dead_at + chrono::Duration::from_std(ttl).ok()? - now)
                        .to_std()
                        .ok()
                })
                .filter(|left| !left.is_zero());
            if let Some(left) = left {
                self.broker
                    .publish_dead_letter(DeadLetter {
                        queue,
                        body: &delivery.body,
                        expires_in: left,
                    })
                    .await?;
                kept += 1;
            } else {
                dropped += 1;
            }
            delivery.ack().await?;
        }
        Ok((kept, dropped))
    }
}

/// How the broker is to settle a job's part of its message.
enum Settle {
    /// Done with (run, a repeat, or put back in the outbox for its time).
    Ack,
    /// Not settled (the database failed): the message goes back after a pause.
    Requeue,
    /// Dead: a copy goes to the dead-letter queue.
    DeadLetter,
}

/// Puts a message back after a pause (the database is failing: no point in a hot loop).
async fn requeue_later(delivery: Delivery) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _ = delivery.nack(true).await;
}
