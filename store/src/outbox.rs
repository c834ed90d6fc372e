//! Jobs: written in the caller's transaction (the outbox), published by the relay when due,
//! started, then completed or rescheduled by the consumer. The row is the truth; a message only
//! says "look at job X", so a lost message is republished and a repeated one finds the work done.
//!
//! A row's life: due (`published_at` empty) → claimed by one relay in a short transaction
//! (`published_at` set, `publishing_until` its lease while unconfirmed) → confirmed by the broker
//! (`publishing_until` empty; a consumer's start settles the claim too, see [`started`]) →
//! started by a consumer (`started_at`) → completed, dead, or rescheduled (due again later,
//! `published_at` empty). A published row is published again only when its message may be lost:
//! not started (or started and not finished) past a lease, and fewer messages wait in its queue
//! than such rows' claims (see [`census`]), so a long outage leaves each claim's messages and no
//! more.

use std::time::Duration;

use chrono::{DateTime, DurationRound, Utc};
use sea_orm::UpdateMany;
use sea_orm::sea_query::{Expr, ExprTrait, LockBehavior, LockType, SimpleExpr};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, DbBackend,
    DbErr, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait,
    Statement, TransactionTrait,
};
use serde::{Deserialize, Serialize};

use domain::ids::JobId;
use entities::outbox;
use jobs::QueueJob;

pub use outbox::Model as JobRow;

/// The body of a broker message: jobs of one queue that one relay claimed together, at least one
/// (docs/decisions/outbox-and-relay.md). A message of one job is `{"jobId": …}`, the shape
/// every message had before messages carried several, so a message of one job and a
/// dead-letter copy (always one job) read the same to every version; more are `{"jobIds": […]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "MessageWire", into = "MessageWire")]
pub struct JobMessage {
    job_ids: Vec<JobId>,
}

impl JobMessage {
    /// A message naming `job_ids`; none when there are none.
    pub fn new(job_ids: Vec<JobId>) -> Option<Self> {
        (!job_ids.is_empty()).then_some(Self { job_ids })
    }

    /// A message naming one job.
    pub fn one(job_id: JobId) -> Self {
        Self {
            job_ids: vec![job_id],
        }
    }

    /// The jobs it names, in the order claimed (never empty).
    pub fn job_ids(&self) -> &[JobId] {
        &self.job_ids
    }

    pub fn into_job_ids(self) -> Vec<JobId> {
        self.job_ids
    }
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum MessageWire {
    One {
        #[serde(rename = "jobId")]
        job_id: JobId,
    },
    Many {
        #[serde(rename = "jobIds")]
        job_ids: Vec<JobId>,
    },
}

impl TryFrom<MessageWire> for JobMessage {
    type Error = &'static str;

    fn try_from(wire: MessageWire) -> Result<Self, Self::Error> {
        match wire {
            MessageWire::One { job_id } => Ok(Self::one(job_id)),
            MessageWire::Many { job_ids } => Self::new(job_ids).ok_or("a message names no job"),
        }
    }
}

impl From<JobMessage> for MessageWire {
    fn from(message: JobMessage) -> Self {
        let mut job_ids = message.job_ids;
        if job_ids.len() == 1
            && let Some(job_id) = job_ids.pop()
        {
            MessageWire::One { job_id }
        } else {
            MessageWire::Many { job_ids }
        }
    }
}

/// Writes a job in the caller's transaction, due at `run_at`, in its type's queue; returns its id.
pub async fn enqueue<C: ConnectionTrait, J: QueueJob>(
    db: &C,
    job: &J,
    run_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<JobId, DbErr> {
    let id = JobId::new();
    enqueue_as(db, id.clone(), job, run_at, now).await?;
    Ok(id)
}

/// [`enqueue`] under an id the caller chose (`JobId::new()`), for a caller that names the job
/// before writing it.
pub async fn enqueue_as<C: ConnectionTrait, J: QueueJob>(
    db: &C,
    id: JobId,
    job: &J,
    run_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    outbox::Entity::insert(job_row(id, job, run_at, now))
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// The row of a new job (unpublished, never run), as [`enqueue_as`] writes it.
pub(crate) fn job_row<J: QueueJob>(
    id: JobId,
    job: &J,
    run_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> outbox::ActiveModel {
    outbox::ActiveModel {
        id: Set(id),
        queue: Set(J::QUEUE.to_owned()),
        payload: Set(serde_json::to_string(job).expect("jobs serialise")),
        run_at: Set(run_at),
        published_at: Set(None),
        publishing_until: Set(None),
        started_at: Set(None),
        attempts: Set(0),
        completed_at: Set(None),
        dead_at: Set(None),
        last_error: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        request_id: Set(ops::telemetry::request_id()),
    }
}

/// The job row with this id.
pub async fn find<C: ConnectionTrait>(db: &C, job_id: &JobId) -> Result<Option<JobRow>, DbErr> {
    outbox::Entity::find_by_id(job_id.to_owned()).one(db).await
}

fn ago(now: DateTime<Utc>, span: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(span)
        .ok()
        .and_then(|span| now.checked_sub_signed(span))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// The end of a relay's claim `lease` from `now`, to the millisecond: the value is compared for
/// equality when the claim is settled, and both databases store milliseconds exactly.
pub fn claim_until(now: DateTime<Utc>, lease: Duration) -> DateTime<Utc> {
    let until = now + chrono::Duration::from_std(lease).unwrap_or_default();
    until
        .duration_trunc(chrono::Duration::milliseconds(1))
        .unwrap_or(until)
}

/// A job still to run: neither completed nor dead.
fn unfinished() -> Condition {
    Condition::all()
        .add(outbox::Column::CompletedAt.is_null())
        .add(outbox::Column::DeadAt.is_null())
}

/// An update of job `id`, stamped `now`, that leaves a completed job as it is.
fn update_open(id: &str, now: DateTime<Utc>) -> UpdateMany<outbox::Entity> {
    outbox::Entity::update_many()
        .col_expr(outbox::Column::UpdatedAt, now.into())
        .filter(outbox::Column::Id.eq(id))
        .filter(outbox::Column::CompletedAt.is_null())
}

/// `update`, also making its rows unpublished and unclaimed: the relay publishes them again
/// when they are due.
fn unpublish(update: UpdateMany<outbox::Entity>) -> UpdateMany<outbox::Entity> {
    let none = || Option::<DateTime<Utc>>::None;
    update
        .col_expr(outbox::Column::PublishedAt, none().into())
        .col_expr(outbox::Column::PublishingUntil, none().into())
}

/// `update`, also making its rows unpublished and unstarted: any run or message of them is
/// over, and the relay publishes them again when they are due.
fn republish(update: UpdateMany<outbox::Entity>) -> UpdateMany<outbox::Entity> {
    unpublish(update).col_expr(
        outbox::Column::StartedAt,
        Option::<DateTime<Utc>>::None.into(),
    )
}

/// Due rows that no relay has published, or whose publish a relay claimed and never confirmed
/// within its lease (the relay died, or the broker never answered).
fn unclaimed_due(now: DateTime<Utc>) -> Condition {
    unfinished().add(outbox::Column::RunAt.lte(now)).add(
        Condition::any()
            .add(
                Condition::all()
                    .add(outbox::Column::PublishedAt.is_null())
                    .add(outbox::Column::PublishingUntil.is_null()),
            )
            .add(outbox::Column::PublishingUntil.lt(now)),
    )
}

/// Claims up to `batch` due rows for this relay to publish now, unconfirmed until `until` (see
/// [`claim_until`]). A short transaction with no broker round trip in it; `FOR UPDATE SKIP
/// LOCKED` on PostgreSQL lets relays in many processes share the work. `published_at` is set
/// here, before any consumer can see the message. The caller publishes the rows, then settles
/// each with [`confirm_published`] or [`release_claims`]; a relay that dies first leaves its
/// claims unconfirmed, and they are claimed again once `until` has passed.
pub async fn claim_due(
    db: &DatabaseConnection,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    batch: u64,
) -> Result<Vec<JobRow>, DbErr> {
    let txn = db.begin().await?;
    let rows = outbox::Entity::find()
        .filter(unclaimed_due(now))
        .order_by_asc(outbox::Column::RunAt)
        .limit(batch)
        .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
        .all(&txn)
        .await?;
    if rows.is_empty() {
        // Nothing to claim.
    } else if db.get_database_backend() == DbBackend::Postgres {
        // The rows are locked by this transaction, so they are still unclaimed and due: the
        // update finds them by primary key alone. Repeating the due condition here let the
        // planner walk `outbox_due` over every due job instead, testing each against the ids:
        // 93 ms for a batch of 200 with 5,000 jobs due (a drain's start).
        let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        txn.execute_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "UPDATE outbox SET published_at = $1, publishing_until = $2, started_at = NULL \
             WHERE id = ANY(ARRAY(SELECT json_array_elements_text($3::json)))",
            [now.into(), until.into(), ids_param(&ids).into()],
        ))
        .await?;
    } else {
        // SQLite locks no rows: the condition is checked again under its one writer.
        outbox::Entity::update_many()
            .col_expr(outbox::Column::PublishedAt, Some(now).into())
            .col_expr(outbox::Column::PublishingUntil, Some(until).into())
            .col_expr(
                outbox::Column::StartedAt,
                Option::<DateTime<Utc>>::None.into(),
            )
            .filter(outbox::Column::Id.is_in(rows.iter().map(|r| r.id.clone())))
            .filter(unclaimed_due(now))
            .exec(&txn)
            .await?;
    }
    txn.commit().await?;
    Ok(rows)
}

/// Records that the broker confirmed these claimed rows. A row that moved on meanwhile (its
/// consumer already rescheduled it, or the claim expired and another relay took it) keeps its
/// newer state.
pub async fn confirm_published<C: ConnectionTrait>(
    db: &C,
    ids: &[JobId],
    until: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let published = outbox::Entity::update_many().col_expr(
        outbox::Column::PublishingUntil,
        Option::<DateTime<Utc>>::None.into(),
    );
    still_claimed(db, published, ids, until).await
}

/// Gives back claims whose publish failed: unpublished, so the next sweep tries them again.
pub async fn release_claims<C: ConnectionTrait>(
    db: &C,
    ids: &[JobId],
    until: DateTime<Utc>,
) -> Result<u64, DbErr> {
    still_claimed(db, unpublish(outbox::Entity::update_many()), ids, until).await
}

/// Applies `update` to those of `ids` still under the claim that ends at `until`.
async fn still_claimed<C: ConnectionTrait>(
    db: &C,
    update: UpdateMany<outbox::Entity>,
    ids: &[JobId],
    until: DateTime<Utc>,
) -> Result<u64, DbErr> {
    if ids.is_empty() {
        return Ok(0);
    }
    // On PostgreSQL the ids go as one JSON array: one statement's shape for every batch size,
    // prepared and planned once per connection, where an `IN` list of each length was another.
    let by_id = if db.get_database_backend() == DbBackend::Postgres {
        Expr::cust_with_values(
            "id = ANY(ARRAY(SELECT json_array_elements_text($1::json)))",
            [ids_param(ids)],
        )
    } else {
        outbox::Column::Id.is_in(ids.iter().cloned())
    };
    let update = update
        .filter(by_id)
        .filter(outbox::Column::PublishingUntil.eq(until));
    // A consumer's start settles the claim first (see [`started`]), so a round that ends the
    // jobs is not waited on; a deadlock PostgreSQL breaks all the same (a late start) is sent again.
    let updated =
        super::retrying_deadlocks("the relay's claims", || update.clone().exec(db)).await?;
    Ok(updated.rows_affected)
}

/// Published rows whose message should be waiting as a ready message in their queue: confirmed,
/// not finished, and not started, or started longer than `lease` ago (that run is presumed dead:
/// its message went back to the queue, or was lost with it).
fn waiting(now: DateTime<Utc>, lease: Duration) -> Condition {
    unfinished()
        .add(outbox::Column::PublishedAt.is_not_null())
        .add(outbox::Column::PublishingUntil.is_null())
        .add(
            Condition::any()
                .add(outbox::Column::StartedAt.is_null())
                .add(outbox::Column::StartedAt.lt(ago(now, lease))),
        )
}

/// Waiting rows whose message has waited past the lease.
fn overdue(now: DateTime<Utc>, lease: Duration) -> Condition {
    waiting(now, lease).add(
        Condition::any()
            .add(outbox::Column::StartedAt.is_not_null())
            .add(outbox::Column::PublishedAt.lt(ago(now, lease))),
    )
}

/// What one queue should hold, by the database.
#[derive(Debug)]
pub struct Census {
    pub queue: String,
    /// Claims whose messages should be waiting in the queue (see [`census`]).
    pub waiting: u64,
    /// The overdue rows of those claims whose jobs have waited past the lease, a claim's rows
    /// together, oldest claim first: the ones to publish again if the queue holds fewer messages
    /// than `waiting`.
    pub overdue: Vec<Vec<JobRow>>,
}

/// For each queue with a published row unstarted (or unfinished) past `lease`: how many claims'
/// messages it should hold and which rows are overdue (at most `limit`), by claim. A claim's
/// rows share its `published_at`, and went out in one message or more (see [`JobMessage`]); the
/// database does not say how many, so a claim counts as one. A queue that holds fewer ready
/// messages than `waiting` has lost some; one that holds as many has lost none, even if no
/// consumer took any for hours. Counting a claim of several messages, or two claims in the same
/// microsecond (two relays), as one only ever expects fewer messages than there are, so the
/// census never publishes twice; a message lost beside others still waiting is found once they
/// are taken. Nothing more is read when no row is overdue.
pub async fn census<C: ConnectionTrait>(
    db: &C,
    now: DateTime<Utc>,
    lease: Duration,
    limit: u64,
) -> Result<Vec<Census>, DbErr> {
    let overdue = outbox::Entity::find()
        .filter(overdue(now, lease))
        .order_by_asc(outbox::Column::PublishedAt)
        .limit(limit)
        .all(db)
        .await?;
    let mut out: Vec<Census> = Vec::new();
    for row in overdue {
        let census = match out.iter().position(|c| c.queue == row.queue) {
            Some(i) => &mut out[i],
            None => {
                out.push(Census {
                    queue: row.queue.clone(),
                    waiting: 0,
                    overdue: Vec::new(),
                });
                out.last_mut().expect("just pushed")
            }
        };
        match census.overdue.last_mut() {
            Some(message) if message[0].published_at == row.published_at => message.push(row),
            _ => census.overdue.push(vec![row]),
        }
    }
    for census in &mut out {
        let messages: Option<i64> = outbox::Entity::find()
            .select_only()
            .expr(Expr::col(outbox::Column::PublishedAt).count_distinct())
            .filter(waiting(now, lease))
            .filter(outbox::Column::Queue.eq(census.queue.as_str()))
            .into_tuple()
            .one(db)
            .await?;
        census.waiting = u64::try_from(messages.unwrap_or(0)).unwrap_or(0);
    }
    Ok(out)
}

/// Makes overdue rows (see [`census`]) due for publishing again: their messages are presumed
/// lost. A row that moved on since it was read (started, finished, rescheduled) is left alone.
/// Returns how many.
pub async fn release_lost<C: ConnectionTrait>(
    db: &C,
    rows: &[JobRow],
    now: DateTime<Utc>,
    lease: Duration,
) -> Result<u64, DbErr> {
    if rows.is_empty() {
        return Ok(0);
    }
    Ok(republish(outbox::Entity::update_many())
        .col_expr(outbox::Column::UpdatedAt, now.into())
        .filter(outbox::Column::Id.is_in(rows.iter().map(|r| r.id.clone())))
        .filter(overdue(now, lease))
        .exec(db)
        .await?
        .rows_affected)
}

/// What a message's job is, as the consumer of queue `J::QUEUE` finds it.
#[derive(Debug)]
pub enum Runnable<J> {
    /// Due and not finished: run it.
    Run(JobRow, J),
    /// Finished, missing, or another queue's: the message is a repeat (or a stray).
    Repeat,
    /// Not due yet by this process's clock (more than a second early).
    Early(JobRow),
    /// Its payload is no job this version knows (written by a newer one, or damaged): it can
    /// never run here, so it is given up rather than retried forever.
    Unreadable(JobRow, String),
}

/// The job behind a message, read as queue `J`'s job type.
pub async fn load_runnable<J: QueueJob, C: ConnectionTrait>(
    db: &C,
    job_id: &JobId,
    now: DateTime<Utc>,
) -> Result<Runnable<J>, DbErr> {
    let Some(row) = find(db, job_id).await? else {
        return Ok(Runnable::Repeat);
    };
    if row.queue != J::QUEUE || row.completed_at.is_some() || row.dead_at.is_some() {
        return Ok(Runnable::Repeat);
    }
    // A second of slack: clocks of different processes are close, not equal.
    if row.run_at > now + chrono::Duration::seconds(1) {
        return Ok(Runnable::Early(row));
    }
    Ok(read_job(row))
}

/// A due, unfinished row of queue `J`, read as its job (or found unreadable).
pub fn read_job<J: QueueJob>(row: JobRow) -> Runnable<J> {
    match serde_json::from_str::<J>(&row.payload) {
        Ok(job) => Runnable::Run(row, job),
        Err(e) => {
            let error = format!("job {} has a payload this version cannot read: {e}", row.id);
            Runnable::Unreadable(row, error)
        }
    }
}

/// `update`, marking its rows started by a consumer at `now`, and settling a relay's claim on
/// them as the broker's confirmation would: the consumer holds the message, so it was published.
/// The relay's confirmation then finds none of these rows still under its claim and takes none of
/// them, so it never waits on a webhook round that is ending their jobs, which took the rows in
/// another order and deadlocked with it (docs/decisions/outbox-and-relay.md). A job started
/// before its claim was confirmed is not claimed again when the claim's lease ends; if its run
/// dies, its message goes back to the queue, and a lost one is found by [`census`].
/// [`start_due`]'s statement on PostgreSQL sets the same columns.
fn started(update: UpdateMany<outbox::Entity>, now: DateTime<Utc>) -> UpdateMany<outbox::Entity> {
    update
        .col_expr(outbox::Column::StartedAt, Some(now).into())
        .col_expr(
            outbox::Column::PublishingUntil,
            Option::<DateTime<Utc>>::None.into(),
        )
}

/// A consumer begins the job: from now on the relay counts its message as taken.
pub async fn start<C: ConnectionTrait>(
    db: &C,
    job: &JobRow,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    started(outbox::Entity::update_many(), now)
        .filter(outbox::Column::Id.eq(job.id.as_str()))
        .filter(unfinished())
        .exec(db)
        .await?;
    Ok(())
}

/// Starts, in one statement, those of these jobs of `queue` that are due (by the same second of
/// slack as [`load_runnable`]) and not finished; returns their rows as started. A message whose
/// job is not among them is a repeat, early, or another queue's: [`load_runnable`] tells which.
/// What the consumer does first with every message, so many are started in one round trip.
pub async fn start_due<C: ConnectionTrait>(
    db: &C,
    queue: &str,
    job_ids: &[JobId],
    now: DateTime<Utc>,
) -> Result<Vec<JobRow>, DbErr> {
    if job_ids.is_empty() {
        return Ok(Vec::new());
    }
    if db.get_database_backend() == DbBackend::Postgres {
        // One text for every round's size: one prepared statement (see [`ids_param`]). The rows
        // are found by primary key only: "unfinished" is written so that the planner cannot take
        // `outbox_due` for it, whose statistics may say "few rows" while thousands are due (a
        // backlog), and which it would then scan whole for every round.
        return outbox::Entity::find()
            .from_raw_sql(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "UPDATE outbox SET started_at = $1, publishing_until = NULL \
                 WHERE id = ANY(ARRAY(SELECT json_array_elements_text($2::json))) \
                 AND queue = $3 AND coalesce(completed_at, dead_at) IS NULL AND run_at <= $4 \
                 RETURNING *",
                [
                    now.into(),
                    ids_param(job_ids).into(),
                    queue.into(),
                    (now + chrono::Duration::seconds(1)).into(),
                ],
            ))
            .all(db)
            .await;
    }
    let update = started(outbox::Entity::update_many(), now)
        .filter(outbox::Column::Id.is_in(job_ids.iter().cloned()))
        .filter(outbox::Column::Queue.eq(queue))
        .filter(unfinished())
        .filter(outbox::Column::RunAt.lte(now + chrono::Duration::seconds(1)));
    if db.support_returning() {
        return update.exec_with_returning(db).await;
    }
    // Without RETURNING (SQLite as built here): the rows this very update stamped. `now` is
    // exact to the microsecond, and a later start of the same job would stamp a later time.
    update.exec(db).await?;
    outbox::Entity::find()
        .filter(outbox::Column::Id.is_in(job_ids.iter().cloned()))
        .filter(outbox::Column::StartedAt.eq(now))
        .filter(unfinished())
        .all(db)
        .await
}

/// A message came before its job's time (the relay's clock is ahead of this process's, or the
/// message is an old copy): the job becomes unpublished again, so a relay publishes it when it
/// is due, instead of the message being dropped and the job waiting for a lost-message sweep.
/// Unless it is due by now.
pub async fn not_yet_due<C: ConnectionTrait>(
    db: &C,
    job: &JobRow,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    unpublish(update_open(&job.id, now))
        .filter(outbox::Column::DeadAt.is_null())
        .filter(outbox::Column::RunAt.gt(now + chrono::Duration::seconds(1)))
        .exec(db)
        .await?;
    Ok(())
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum JobOutcome {
    Done,
    /// Run again after this long (the attempt count goes up).
    Retry {
        after: Duration,
        error: String,
    },
    /// Give up: the job is kept, marked dead, for operators.
    Dead {
        error: String,
    },
}

/// Records how a run ended. One statement on the row, which no relay holds locked.
pub async fn finish<C: ConnectionTrait>(
    db: &C,
    job: &JobRow,
    outcome: &JobOutcome,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    finish_counting(db, &job.id, (job.attempts + 1).into(), outcome, now).await
}

/// [`finish`] for a job known by its id only, in the caller's transaction: a retry counts one
/// more run than the row holds then. For a handler that records its run's end with its own
/// writes (a webhook attempt, `deliveries::record_attempts`).
pub(crate) async fn finish_by_id<C: ConnectionTrait>(
    db: &C,
    job_id: &JobId,
    outcome: &JobOutcome,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let attempts = Expr::col(outbox::Column::Attempts).add(1);
    finish_counting(db, job_id, attempts, outcome, now).await
}

/// [`finish`], a retry setting the run count to `attempts`.
async fn finish_counting<C: ConnectionTrait>(
    db: &C,
    job_id: &JobId,
    attempts: SimpleExpr,
    outcome: &JobOutcome,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let update = update_open(job_id, now);
    let update = match outcome {
        // The same statement as a batch of runs done (`finish_many`).
        JobOutcome::Done => return complete_runs(db, std::slice::from_ref(job_id), now).await,
        JobOutcome::Retry { after, error } => republish(update)
            .col_expr(
                outbox::Column::RunAt,
                (now + chrono::Duration::from_std(*after).unwrap_or_default()).into(),
            )
            .col_expr(outbox::Column::Attempts, attempts)
            .col_expr(outbox::Column::LastError, Some(error.clone()).into()),
        JobOutcome::Dead { error } => update
            .col_expr(outbox::Column::DeadAt, now.into())
            .col_expr(outbox::Column::LastError, Some(error.clone()).into()),
    };
    update.exec(db).await?;
    Ok(())
}

impl JobOutcome {
    /// The outcome's name in [`finish_from`]'s rows.
    pub(crate) fn end(&self) -> &'static str {
        match self {
            JobOutcome::Done => "done",
            JobOutcome::Retry { .. } => "retry",
            JobOutcome::Dead { .. } => "dead",
        }
    }

    /// A retry's or a death's `last_error`.
    pub(crate) fn error(&self) -> Option<&str> {
        match self {
            JobOutcome::Done => None,
            JobOutcome::Retry { error, .. } | JobOutcome::Dead { error } => Some(error),
        }
    }
}

/// [`finish_by_id`] on PostgreSQL as part of a caller's statement, for many runs at once: an
/// `UPDATE` ending the job of each row of the named `WITH` part, whose rows carry `job_id`,
/// `job_end` ([`JobOutcome::end`]), `run_at` (a retry's), `job_error` and `now`. The same columns
/// as [`finish_counting`], [`republish`] and [`complete_runs`] set; a completed job is left as
/// it is.
pub(crate) fn finish_from(ends: &str) -> String {
    let retry = "e.job_end = 'retry'";
    format!(
        "UPDATE outbox AS o SET updated_at = e.now, \
         completed_at = CASE WHEN e.job_end = 'done' THEN e.now ELSE o.completed_at END, \
         dead_at = CASE WHEN e.job_end = 'dead' THEN e.now ELSE o.dead_at END, \
         last_error = CASE WHEN e.job_end = 'done' THEN o.last_error ELSE e.job_error END, \
         run_at = CASE WHEN {retry} THEN e.run_at ELSE o.run_at END, \
         attempts = CASE WHEN {retry} THEN o.attempts + 1 ELSE o.attempts END, \
         published_at = CASE WHEN {retry} THEN NULL ELSE o.published_at END, \
         publishing_until = CASE WHEN {retry} THEN NULL ELSE o.publishing_until END, \
         started_at = CASE WHEN {retry} THEN NULL ELSE o.started_at END \
         FROM {ends} AS e \
         WHERE o.id = ANY(ARRAY(SELECT job_id FROM {ends})) AND o.id = e.job_id \
         AND o.completed_at IS NULL"
    )
}

/// Ids as one JSON array parameter, for `id = ANY(ARRAY(SELECT json_array_elements_text($n::json)))`
/// on PostgreSQL: a statement whose text is the same however many ids a round has is prepared
/// once per connection, where an `IN ($1, …, $n)` list is a new statement for every n (and
/// rounds of every size from 1 to 64 push each other out of the driver's statement cache).
pub fn ids_param<S: AsRef<str>>(ids: &[S]) -> String {
    let ids: Vec<&str> = ids.iter().map(AsRef::as_ref).collect();
    serde_json::to_string(&ids).expect("strings serialise")
}

/// Runs that ended `Done`, completed in one statement.
async fn complete_runs<C: ConnectionTrait>(
    db: &C,
    job_ids: &[JobId],
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    if job_ids.is_empty() {
        return Ok(());
    }
    if db.get_database_backend() == DbBackend::Postgres {
        db.execute_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "UPDATE outbox SET updated_at = $1, completed_at = $1 \
             WHERE id = ANY(ARRAY(SELECT json_array_elements_text($2::json))) \
             AND completed_at IS NULL",
            [now.into(), ids_param(job_ids).into()],
        ))
        .await?;
        return Ok(());
    }
    outbox::Entity::update_many()
        .col_expr(outbox::Column::UpdatedAt, now.into())
        .col_expr(outbox::Column::CompletedAt, now.into())
        .filter(outbox::Column::Id.is_in(job_ids.iter().cloned()))
        .filter(outbox::Column::CompletedAt.is_null())
        .exec(db)
        .await?;
    Ok(())
}

/// Records how several runs ended, as [`finish`] does each: the ones done in a single statement
/// (the usual case), the others each in a statement of its own. Not in one transaction: it would
/// hold the rows it took while it takes the next, in the runs' order, and the relay's statements
/// take many rows at once in another order, so the two could deadlock. Each job's end stands
/// alone, so nothing needs them together: when one fails, the caller runs them all again, and
/// the runs already ended are then repeats.
pub async fn finish_many(
    db: &DatabaseConnection,
    runs: &[(JobRow, JobOutcome)],
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let done: Vec<JobId> = runs
        .iter()
        .filter(|(_, outcome)| matches!(outcome, JobOutcome::Done))
        .map(|(job, _)| job.id.clone())
        .collect();
    complete_runs(db, &done, now).await?;
    for (job, outcome) in runs {
        if !matches!(outcome, JobOutcome::Done) {
            finish(db, job, outcome, now).await?;
        }
    }
    Ok(())
}

/// Dead jobs of `queue` completed since `since`: replayed (a new job carries their work on), so
/// any copy of their message in the dead-letter queue is stale.
pub async fn replayed_dead_since<C: ConnectionTrait>(
    db: &C,
    queue: &str,
    since: DateTime<Utc>,
) -> Result<u64, DbErr> {
    outbox::Entity::find()
        .filter(outbox::Column::Queue.eq(queue))
        .filter(outbox::Column::DeadAt.is_not_null())
        .filter(outbox::Column::CompletedAt.gte(since))
        .count(db)
        .await
}

/// What the code that owns a job (not its consumer) may do to it while it is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// Due now (e.g. the synchronous provider call did not settle the account).
    DueNow,
    /// Done (the API settled the account itself, or a replay supersedes it; a dead job keeps its
    /// `dead_at` and `last_error`, and its completion says it was replayed).
    Completed,
}

/// Applies `mark` to the job `job_id` if it is still open.
pub async fn mark<C: ConnectionTrait>(
    db: &C,
    job_id: &JobId,
    mark: Mark,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    db.execute(&mark_update(job_id, mark, now)).await?;
    Ok(())
}

/// [`mark`]'s statement (a caller may add conditions: part of a `WITH`).
pub(crate) fn mark_update(
    job_id: &JobId,
    mark: Mark,
    now: DateTime<Utc>,
) -> sea_orm::sea_query::UpdateStatement {
    let column = match mark {
        Mark::DueNow => outbox::Column::RunAt,
        Mark::Completed => outbox::Column::CompletedAt,
    };
    update_open(job_id, now)
        .col_expr(column, now.into())
        .into_query()
}

/// The values [`mark_update`] binds, in its order (a [`super::Rendered`] statement): the stamp,
/// the marked column's value, the job.
pub(crate) fn push_mark_values(into: &mut Vec<sea_orm::Value>, job_id: &JobId, now: DateTime<Utc>) {
    into.extend([now.into(), now.into(), job_id.into()]);
}

/// Forgets that unfinished jobs were ever published, so the relay publishes them again at once.
/// For a broker that starts empty (the in-process one of `api dev`): whatever was published to
/// the previous process's queue went with it. Returns how many jobs were affected.
pub async fn forget_publications<C: ConnectionTrait>(db: &C) -> Result<u64, DbErr> {
    Ok(republish(outbox::Entity::update_many())
        .filter(
            Condition::any()
                .add(outbox::Column::PublishedAt.is_not_null())
                .add(outbox::Column::PublishingUntil.is_not_null()),
        )
        .filter(unfinished())
        .exec(db)
        .await?
        .rows_affected)
}

/// Due jobs not yet finished, by queue: the backlog operators watch.
pub async fn backlog<C: ConnectionTrait>(db: &C, now: DateTime<Utc>) -> Result<u64, DbErr> {
    outbox::Entity::find()
        .filter(unfinished())
        .filter(outbox::Column::RunAt.lte(now))
        .count(db)
        .await
}

/// When the longest-waiting job of the backlog fell due (None: no job is due): a backlog that
/// is worked off stays young however large it is; one that is stuck ages.
pub async fn oldest_due<C: ConnectionTrait>(
    db: &C,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, DbErr> {
    Ok(outbox::Entity::find()
        .filter(unfinished())
        .filter(outbox::Column::RunAt.lte(now))
        .order_by_asc(outbox::Column::RunAt)
        .one(db)
        .await?
        .map(|job| job.run_at))
}

/// Forgets finished jobs older than `before`.
pub async fn purge_finished<C: ConnectionTrait>(
    db: &C,
    before: DateTime<Utc>,
) -> Result<u64, DbErr> {
    Ok(outbox::Entity::delete_many()
        .filter(outbox::Column::CompletedAt.lt(before))
        .exec(db)
        .await?
        .rows_affected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use domain::ids::AccountId;
    use jobs::ProvisioningJob;

    /// A message of one job reads as every message read before messages named several; more
    /// are a list; a list of none is no message.
    #[test]
    fn a_message_names_one_job_as_before_and_several_as_a_list() {
        let (a, b) = (JobId::unchecked("job_a"), JobId::unchecked("job_b"));
        let one = serde_json::to_string(&JobMessage::one(a.clone())).unwrap();
        assert_eq!(one, r#"{"jobId":"job_a"}"#);
        let both = JobMessage::new(vec![a.clone(), b.clone()]).unwrap();
        let wire = serde_json::to_string(&both).unwrap();
        assert_eq!(wire, r#"{"jobIds":["job_a","job_b"]}"#);
        let read: JobMessage = serde_json::from_str(&wire).unwrap();
        assert_eq!(read.job_ids(), [a.clone(), b]);
        let read: JobMessage = serde_json::from_str(r#"{"jobIds":["job_a"]}"#).unwrap();
        assert_eq!(read.job_ids(), [a]);
        assert!(serde_json::from_str::<JobMessage>(r#"{"jobIds":[]}"#).is_err());
        assert!(serde_json::from_str::<JobMessage>(r#"{"job":"job_a"}"#).is_err());
        assert!(JobMessage::new(Vec::new()).is_none());
    }

    /// A consumer's start settles the relay's claim on its jobs ([`started`]), by a round's
    /// statement and alone: the relay's confirmation of them, arriving while a webhook round holds
    /// their rows to end them, neither waits for that round nor changes them; its release does not
    /// make them due again, and neither does the end of the claim's lease.
    #[tokio::test]
    async fn a_consumers_start_settles_the_relays_claim() {
        let Some(fresh) = testing::fresh_database().await else {
            return;
        };
        let db = &fresh.db;
        let now = domain::time::now();
        let lease = Duration::from_secs(60);
        let until = claim_until(now, lease);
        let mut ids = Vec::new();
        for _ in 0..3 {
            let job = ProvisioningJob::Provision {
                account_id: AccountId::new(),
            };
            ids.push(enqueue(db, &job, now, now).await.unwrap());
        }
        assert_eq!(claim_due(db, now, until, 10).await.unwrap().len(), 3);

        // The messages reach a consumer before the broker's confirmations reach the relay.
        let round = start_due(db, ProvisioningJob::QUEUE, &ids[..2], now)
            .await
            .unwrap();
        assert_eq!(round.len(), 2);
        let row = |id: JobId| async move {
            outbox::Entity::find_by_id(id)
                .one(db)
                .await
                .unwrap()
                .unwrap()
        };
        start(db, &row(ids[2].clone()).await, now).await.unwrap();

        let holder = db.begin().await.unwrap();
        holder
            .execute_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT id FROM outbox \
                 WHERE id = ANY(ARRAY(SELECT json_array_elements_text($1::json))) FOR UPDATE",
                [ids_param(&ids).into()],
            ))
            .await
            .unwrap();
        let settle = |what: &'static str, settled: u64| {
            assert_eq!(settled, 0, "the relay's {what} changed started jobs")
        };
        let waited = "the relay waited for the round that holds its started jobs";
        let confirmed =
            tokio::time::timeout(Duration::from_secs(5), confirm_published(db, &ids, until))
                .await
                .expect(waited);
        settle("confirmation", confirmed.unwrap());
        let released =
            tokio::time::timeout(Duration::from_secs(5), release_claims(db, &ids, until))
                .await
                .expect(waited);
        settle("release", released.unwrap());
        holder.rollback().await.unwrap();

        let later = until + chrono::Duration::seconds(1);
        let again = claim_due(db, later, claim_until(later, lease), 10)
            .await
            .unwrap();
        assert!(again.is_empty(), "claimed again: {again:?}");
        for id in ids {
            let job = row(id).await;
            assert!(job.published_at.is_some(), "{} no longer published", job.id);
            assert_eq!(job.publishing_until, None, "{} still claimed", job.id);
            assert_eq!(job.started_at, Some(now), "{} not started", job.id);
        }
        fresh.drop().await;
    }
}
