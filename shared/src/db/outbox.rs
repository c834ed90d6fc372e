//! Jobs: written in the caller's transaction (the outbox), published by the relay when due,
//! completed or rescheduled by the consumer. The row is the truth; a message only says "look at
//! job X", so a lost message is republished and a repeated one finds the work done.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{LockBehavior, LockType};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait,
    QueryFilter, QueryOrder, QuerySelect, TransactionTrait,
};
use serde::{Deserialize, Serialize};

use super::entities::outbox;
use domain::ids::new_id;

pub use outbox::Model as JobRow;

/// What a job asks for. Ids only: a consumer re-reads the rows and decides from their state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Job {
    /// Get a number for a pending account (create it at the provider if it never was).
    Provision { account_id: String },
    /// Close a deactivated account at its provider.
    Close { account_id: String },
    /// Deliver one event to one endpoint (one attempt; retries reschedule the job).
    Deliver { delivery_id: String },
    /// Ask the provider for an account's transactions in a window and record what is missing.
    Recheck { recheck_id: String },
    /// Send a payout's transfer to the payout provider and follow it to its outcome.
    SendPayout { payout_id: String },
}

impl Job {
    pub fn queue(&self) -> &'static str {
        match self {
            Job::Provision { .. } | Job::Close { .. } => "provisioning",
            Job::Deliver { .. } => "webhooks",
            Job::Recheck { .. } => "recheck",
            Job::SendPayout { .. } => "payouts",
        }
    }
}

/// The body of a broker message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobMessage {
    pub job_id: String,
}

/// Writes a job in the caller's transaction, due at `run_at`; returns its id.
pub async fn enqueue<C: ConnectionTrait>(
    db: &C,
    job: &Job,
    run_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<String, DbErr> {
    let id = new_id("job");
    outbox::Entity::insert(outbox::ActiveModel {
        id: Set(id.clone()),
        queue: Set(job.queue().to_owned()),
        payload: Set(serde_json::to_string(job).expect("jobs serialise")),
        run_at: Set(run_at),
        published_at: Set(None),
        attempts: Set(0),
        completed_at: Set(None),
        dead_at: Set(None),
        last_error: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        request_id: Set(ops::telemetry::request_id()),
    })
    .exec_without_returning(db)
    .await?;
    Ok(id)
}

/// Due rows not yet published (or published so long ago that the message may have been lost),
/// claimed with `FOR UPDATE SKIP LOCKED` so relays in many processes share the work; `publish`
/// is called for each inside the transaction, and only rows it accepted are marked published.
pub async fn publish_due<F, Fut>(
    db: &DatabaseConnection,
    now: DateTime<Utc>,
    republish_after: Duration,
    batch: u64,
    mut publish: F,
) -> Result<usize, DbErr>
where
    F: FnMut(JobRow) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let stale = now - chrono::Duration::from_std(republish_after).unwrap_or_default();
    let txn = db.begin().await?;
    let rows = outbox::Entity::find()
        .filter(outbox::Column::CompletedAt.is_null())
        .filter(outbox::Column::DeadAt.is_null())
        .filter(outbox::Column::RunAt.lte(now))
        .filter(
            sea_orm::Condition::any()
                .add(outbox::Column::PublishedAt.is_null())
                .add(outbox::Column::PublishedAt.lt(stale)),
        )
        .order_by_asc(outbox::Column::RunAt)
        .limit(batch)
        .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
        .all(&txn)
        .await?;
    let mut published = Vec::new();
    for row in rows {
        let id = row.id.clone();
        if publish(row).await {
            published.push(id);
        } else {
            break; // the broker is unhappy: leave the rest for the next sweep
        }
    }
    if !published.is_empty() {
        outbox::Entity::update_many()
            .col_expr(outbox::Column::PublishedAt, now.into())
            .filter(outbox::Column::Id.is_in(published.clone()))
            .exec(&txn)
            .await?;
    }
    txn.commit().await?;
    Ok(published.len())
}

/// What a message's job is, as the consumer finds it.
#[derive(Debug)]
pub enum Runnable {
    /// Due and not finished: run it.
    Run(JobRow, Job),
    /// Finished, or rescheduled for later: the message is a repeat.
    Repeat,
    /// Its payload is no job this version knows (written by a newer one, or damaged): it can
    /// never run here, so it is given up rather than retried forever.
    Unreadable(JobRow, String),
}

/// The job behind a message.
pub async fn load_runnable<C: ConnectionTrait>(
    db: &C,
    job_id: &str,
    now: DateTime<Utc>,
) -> Result<Runnable, DbErr> {
    let Some(row) = outbox::Entity::find_by_id(job_id.to_owned())
        .one(db)
        .await?
    else {
        return Ok(Runnable::Repeat);
    };
    // A second of slack: clocks of different processes are close, not equal.
    if row.completed_at.is_some()
        || row.dead_at.is_some()
        || row.run_at > now + chrono::Duration::seconds(1)
    {
        return Ok(Runnable::Repeat);
    }
    Ok(match serde_json::from_str(&row.payload) {
        Ok(job) => Runnable::Run(row, job),
        Err(e) => {
            let error = format!("job {job_id} has a payload this version cannot read: {e}");
            Runnable::Unreadable(row, error)
        }
    })
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

pub async fn finish<C: ConnectionTrait>(
    db: &C,
    job: &JobRow,
    outcome: &JobOutcome,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let mut update = outbox::Entity::update_many()
        .col_expr(outbox::Column::UpdatedAt, now.into())
        .filter(outbox::Column::Id.eq(job.id.as_str()))
        .filter(outbox::Column::CompletedAt.is_null());
    update = match outcome {
        JobOutcome::Done => update.col_expr(outbox::Column::CompletedAt, now.into()),
        JobOutcome::Retry { after, error } => update
            .col_expr(
                outbox::Column::RunAt,
                (now + chrono::Duration::from_std(*after).unwrap_or_default()).into(),
            )
            .col_expr(
                outbox::Column::PublishedAt,
                Option::<DateTime<Utc>>::None.into(),
            )
            .col_expr(outbox::Column::Attempts, (job.attempts + 1).into())
            .col_expr(outbox::Column::LastError, Some(error.clone()).into()),
        JobOutcome::Dead { error } => update
            .col_expr(outbox::Column::DeadAt, now.into())
            .col_expr(outbox::Column::LastError, Some(error.clone()).into()),
    };
    update.exec(db).await?;
    Ok(())
}

/// Makes a job due now (e.g. when the synchronous provider call did not settle an account).
pub async fn make_due<C: ConnectionTrait>(
    db: &C,
    job_id: &str,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    outbox::Entity::update_many()
        .col_expr(outbox::Column::RunAt, now.into())
        .col_expr(outbox::Column::UpdatedAt, now.into())
        .filter(outbox::Column::Id.eq(job_id))
        .filter(outbox::Column::CompletedAt.is_null())
        .exec(db)
        .await?;
    Ok(())
}

/// Marks a job done by id (the API settled the account itself).
pub async fn complete<C: ConnectionTrait>(
    db: &C,
    job_id: &str,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    outbox::Entity::update_many()
        .col_expr(outbox::Column::CompletedAt, now.into())
        .col_expr(outbox::Column::UpdatedAt, now.into())
        .filter(outbox::Column::Id.eq(job_id))
        .filter(outbox::Column::CompletedAt.is_null())
        .exec(db)
        .await?;
    Ok(())
}

/// Forgets that unfinished jobs were ever published, so the relay publishes them again at once.
/// For a broker that starts empty (the in-process one of `api dev`): whatever was published to
/// the previous process's queue went with it. Returns how many jobs were affected.
pub async fn forget_publications<C: ConnectionTrait>(db: &C) -> Result<u64, DbErr> {
    Ok(outbox::Entity::update_many()
        .col_expr(
            outbox::Column::PublishedAt,
            Option::<DateTime<Utc>>::None.into(),
        )
        .filter(outbox::Column::PublishedAt.is_not_null())
        .filter(outbox::Column::CompletedAt.is_null())
        .filter(outbox::Column::DeadAt.is_null())
        .exec(db)
        .await?
        .rows_affected)
}

/// Due jobs not yet finished, by queue: the backlog operators watch.
pub async fn backlog<C: ConnectionTrait>(db: &C, now: DateTime<Utc>) -> Result<u64, DbErr> {
    use sea_orm::PaginatorTrait;
    outbox::Entity::find()
        .filter(outbox::Column::CompletedAt.is_null())
        .filter(outbox::Column::DeadAt.is_null())
        .filter(outbox::Column::RunAt.lte(now))
        .count(db)
        .await
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
