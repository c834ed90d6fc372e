//! Webhook deliveries: one per event and endpoint, driven by an outbox job
//! (`WebhookJob::Deliver`), each HTTP attempt recorded. A replay or resend starts a fresh schedule on the same row (same event,
//! so the same `webhook-id`) with a new job; the job it replaces does nothing if it still runs.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait,
    QueryFilter, QueryOrder, TransactionTrait,
};

use super::businesses::webhook_url;
use super::entities::event::Model as Event;
use super::entities::{business_mode, delivery, delivery_attempt, event};
use super::outbox;
use crate::jobs::WebhookJob;
use domain::DeliveryStatus;
use domain::ids::new_id;

pub use delivery::Model as Delivery;
pub use delivery_attempt::Model as Attempt;

/// Writes a delivery of `event` to `url` and the job that makes its first attempt now, in the
/// caller's transaction.
pub async fn create<C: ConnectionTrait>(
    db: &C,
    event: &Event,
    url: &str,
    now: DateTime<Utc>,
) -> Result<Delivery, DbErr> {
    let id = new_id("whd");
    // The row first, then its job: even outside a transaction a job never finds no delivery.
    delivery::Entity::insert(delivery::ActiveModel {
        id: Set(id.clone()),
        event_id: Set(event.id.clone()),
        business_id: Set(event.business_id.clone()),
        mode: Set(event.mode),
        url: Set(url.to_owned()),
        status: Set(DeliveryStatus::Pending),
        attempts: Set(0),
        next_attempt_at: Set(Some(now)),
        last_status_code: Set(None),
        last_error: Set(None),
        job_id: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        completed_at: Set(None),
    })
    .exec_without_returning(db)
    .await?;
    let job_id = outbox::enqueue(
        db,
        &WebhookJob::Deliver {
            delivery_id: id.clone(),
        },
        now,
        now,
    )
    .await?;
    delivery::Entity::update_many()
        .col_expr(delivery::Column::JobId, Some(job_id).into())
        .filter(delivery::Column::Id.eq(id.as_str()))
        .exec(db)
        .await?;
    find(db, &id)
        .await?
        .ok_or_else(|| DbErr::RecordNotFound(id.clone()))
}

pub async fn find<C: ConnectionTrait>(db: &C, id: &str) -> Result<Option<Delivery>, DbErr> {
    delivery::Entity::find_by_id(id.to_owned()).one(db).await
}

/// What one attempt of a delivery reads: the delivery, its event and its business's settings in
/// the delivery's mode (the webhook URL and secrets of this moment); None for those missing.
#[derive(Debug, Clone)]
pub struct ForAttempt {
    pub delivery: Delivery,
    pub event: Option<Event>,
    pub settings: Option<business_mode::Model>,
}

/// [`ForAttempt`] of each of these deliveries that exists, in three statements however many
/// there are (the worker reads many at once under load).
pub async fn for_attempts<C: ConnectionTrait>(
    db: &C,
    ids: &[String],
) -> Result<Vec<ForAttempt>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let deliveries = delivery::Entity::find()
        .filter(delivery::Column::Id.is_in(ids.iter().cloned()))
        .all(db)
        .await?;
    if deliveries.is_empty() {
        return Ok(Vec::new());
    }
    let mut event_ids: Vec<&str> = deliveries.iter().map(|d| d.event_id.as_str()).collect();
    event_ids.sort_unstable();
    event_ids.dedup();
    let events = event::Entity::find()
        .filter(event::Column::Id.is_in(event_ids))
        .all(db)
        .await?;
    let mut modes: Vec<(&str, domain::Mode)> = deliveries
        .iter()
        .map(|d| (d.business_id.as_str(), d.mode))
        .collect();
    modes.sort_unstable_by_key(|(b, m)| (*b, m.as_str()));
    modes.dedup();
    let which = modes
        .iter()
        .fold(sea_orm::Condition::any(), |any, (business_id, mode)| {
            any.add(
                sea_orm::Condition::all()
                    .add(business_mode::Column::BusinessId.eq(*business_id))
                    .add(business_mode::Column::Mode.eq(*mode)),
            )
        });
    let settings = business_mode::Entity::find().filter(which).all(db).await?;
    Ok(deliveries
        .into_iter()
        .map(|delivery| ForAttempt {
            event: events.iter().find(|e| e.id == delivery.event_id).cloned(),
            settings: settings
                .iter()
                .find(|s| s.business_id == delivery.business_id && s.mode == delivery.mode)
                .cloned(),
            delivery,
        })
        .collect())
}

/// An event's deliveries, oldest first, each with its attempts, oldest first.
pub async fn for_event<C: ConnectionTrait>(
    db: &C,
    event_id: &str,
) -> Result<Vec<(Delivery, Vec<Attempt>)>, DbErr> {
    let deliveries = delivery::Entity::find()
        .filter(delivery::Column::EventId.eq(event_id))
        .order_by_asc(delivery::Column::CreatedAt)
        .order_by_asc(delivery::Column::Id)
        .all(db)
        .await?;
    let mut out = Vec::with_capacity(deliveries.len());
    for d in deliveries {
        let attempts = attempts(db, &d.id).await?;
        out.push((d, attempts));
    }
    Ok(out)
}

/// The deliveries of several events (a page of them), in one query.
pub async fn for_events<C: ConnectionTrait>(
    db: &C,
    event_ids: &[String],
) -> Result<Vec<Delivery>, DbErr> {
    if event_ids.is_empty() {
        return Ok(Vec::new());
    }
    delivery::Entity::find()
        .filter(delivery::Column::EventId.is_in(event_ids.iter().cloned()))
        .order_by_asc(delivery::Column::CreatedAt)
        .order_by_asc(delivery::Column::Id)
        .all(db)
        .await
}

pub async fn attempts<C: ConnectionTrait>(
    db: &C,
    delivery_id: &str,
) -> Result<Vec<Attempt>, DbErr> {
    delivery_attempt::Entity::find()
        .filter(delivery_attempt::Column::DeliveryId.eq(delivery_id))
        .order_by_asc(delivery_attempt::Column::AttemptedAt)
        .order_by_asc(delivery_attempt::Column::Id)
        .all(db)
        .await
}

/// Starts a fresh schedule: pending, no attempts yet, a new job due now, to the mode's current
/// webhook URL (an endpoint that moved is why deliveries die and get replayed), unless the mode
/// has none or the event already has a delivery to it. The job of the schedule it replaces is
/// completed: a pending one would do nothing anyway, and a dead one is thereby marked replayed
/// (its copy in the dead-letter queue is then dropped). Attempts already made stay on record.
pub async fn restart<C: ConnectionTrait>(
    db: &C,
    delivery_id: &str,
    now: DateTime<Utc>,
) -> Result<Option<Delivery>, DbErr> {
    let Some(current) = find(db, delivery_id).await? else {
        return Ok(None);
    };
    let url = match webhook_url(db, &current.business_id, current.mode).await? {
        Some(url) if url != current.url => {
            let taken = delivery::Entity::find()
                .filter(delivery::Column::EventId.eq(current.event_id.as_str()))
                .filter(delivery::Column::Url.eq(url.as_str()))
                .one(db)
                .await?
                .is_some();
            if taken { current.url.clone() } else { url }
        }
        _ => current.url.clone(),
    };
    let job_id = outbox::enqueue(
        db,
        &WebhookJob::Deliver {
            delivery_id: delivery_id.to_owned(),
        },
        now,
        now,
    )
    .await?;
    delivery::Entity::update_many()
        .col_expr(delivery::Column::Url, url.into())
        .col_expr(delivery::Column::Status, DeliveryStatus::Pending.into())
        .col_expr(delivery::Column::Attempts, 0.into())
        .col_expr(delivery::Column::NextAttemptAt, Some(now).into())
        .col_expr(
            delivery::Column::CompletedAt,
            Option::<DateTime<Utc>>::None.into(),
        )
        .col_expr(delivery::Column::JobId, Some(job_id).into())
        .col_expr(delivery::Column::UpdatedAt, now.into())
        .filter(delivery::Column::Id.eq(delivery_id))
        .exec(db)
        .await?;
    if let Some(old) = &current.job_id {
        outbox::complete(db, old, now).await?;
    }
    find(db, delivery_id).await
}

/// `POST /events/{id}/resend`: a fresh schedule for the event to the mode's current URL, on the
/// existing delivery to that URL or a new one. None when the mode has no webhook URL.
pub async fn resend(
    db: &DatabaseConnection,
    event: &Event,
    now: DateTime<Utc>,
) -> Result<Option<Delivery>, DbErr> {
    // Two tries: a concurrent resend may insert the delivery between our look and our insert.
    for _ in 0..2 {
        let txn = db.begin().await?;
        let Some(url) = webhook_url(&txn, &event.business_id, event.mode).await? else {
            return Ok(None);
        };
        let existing = delivery::Entity::find()
            .filter(delivery::Column::EventId.eq(event.id.as_str()))
            .filter(delivery::Column::Url.eq(url.as_str()))
            .one(&txn)
            .await?;
        let result = match existing {
            Some(d) => restart(&txn, &d.id, now)
                .await?
                .ok_or_else(|| DbErr::RecordNotFound(d.id.clone())),
            None => create(&txn, event, &url, now).await,
        };
        match result {
            Ok(d) => {
                txn.commit().await?;
                return Ok(Some(d));
            }
            Err(e) if super::is_unique_violation(&e) => {
                txn.rollback().await?;
                continue;
            }
            Err(e) => return Err(e),
        }
    }
    Err(DbErr::Custom(format!(
        "resending {} kept colliding with another resend",
        event.id
    )))
}

/// One attempt as it happened.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub attempted_at: DateTime<Utc>,
    /// Where it went (the mode's webhook URL at the time); None when the mode had none.
    pub url: Option<String>,
    /// The HTTP status, 0 when no response came.
    pub status_code: i32,
    pub duration_ms: i64,
    pub response_excerpt: Option<String>,
    pub error: Option<String>,
}

/// Where a delivery goes after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Succeeded,
    RetryAt(DateTime<Utc>),
    Dead,
}

/// One attempt to record (see [`record_attempts`]): the delivery as it was read, the job that
/// ran it, what happened and where the delivery goes next.
#[derive(Debug, Clone)]
pub struct AttemptWrite {
    pub delivery: Delivery,
    pub job_id: String,
    pub attempt: AttemptRecord,
    pub next: Next,
    pub now: DateTime<Utc>,
}

/// Records an attempt and moves the delivery on, if the attempt belongs to its current schedule
/// (`job_id`, status and attempt count as they were read). Returns false when the delivery had
/// moved on meanwhile (a replay, a resend, or a duplicate run of the same job): the attempt is
/// still recorded, the delivery is left alone. A delivery moved on takes its attempt's URL, unless
/// another delivery of the event already has it (one delivery per event and URL).
pub async fn record_attempt(
    db: &DatabaseConnection,
    delivery: &Delivery,
    job_id: &str,
    attempt: &AttemptRecord,
    next: &Next,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let write = AttemptWrite {
        delivery: delivery.clone(),
        job_id: job_id.to_owned(),
        attempt: attempt.clone(),
        next: next.clone(),
        now,
    };
    Ok(record_attempts(db, std::slice::from_ref(&write))
        .await?
        .first()
        .copied()
        .unwrap_or(false))
}

/// [`record_attempt`] for several attempts in one transaction (one insert for all the attempts,
/// then each delivery's conditional update, in order): whether each moved its delivery on.
pub async fn record_attempts(
    db: &DatabaseConnection,
    writes: &[AttemptWrite],
) -> Result<Vec<bool>, DbErr> {
    use delivery::Column as Col;
    if writes.is_empty() {
        return Ok(Vec::new());
    }
    let txn = db.begin().await?;
    delivery_attempt::Entity::insert_many(writes.iter().map(|w| {
        let attempt = &w.attempt;
        delivery_attempt::ActiveModel {
            id: Set(new_id("wha")),
            delivery_id: Set(w.delivery.id.clone()),
            attempted_at: Set(attempt.attempted_at),
            url: Set(attempt.url.clone()),
            status_code: Set(attempt.status_code),
            duration_ms: Set(attempt.duration_ms),
            response_excerpt: Set(attempt.response_excerpt.clone()),
            error: Set(attempt.error.clone()),
        }
    }))
    .exec_without_returning(&txn)
    .await?;
    let none = Option::<DateTime<Utc>>::None;
    let mut moved_on = Vec::with_capacity(writes.len());
    for AttemptWrite {
        delivery,
        job_id,
        attempt,
        next,
        now,
    } in writes
    {
        let now = *now;
        let mut update = delivery::Entity::update_many()
            .col_expr(Col::Attempts, (delivery.attempts + 1).into())
            .col_expr(Col::LastStatusCode, Some(attempt.status_code).into())
            .col_expr(Col::LastError, attempt.error.clone().into())
            .col_expr(Col::UpdatedAt, now.into())
            .filter(Col::Id.eq(delivery.id.as_str()))
            .filter(Col::Status.eq(DeliveryStatus::Pending))
            .filter(Col::Attempts.eq(delivery.attempts))
            .filter(
                sea_orm::Condition::any()
                    .add(Col::JobId.eq(job_id.as_str()))
                    .add(Col::JobId.is_null()),
            );
        update = match next {
            Next::Succeeded => update
                .col_expr(Col::Status, DeliveryStatus::Succeeded.into())
                .col_expr(Col::NextAttemptAt, none.into())
                .col_expr(Col::CompletedAt, Some(now).into()),
            Next::RetryAt(at) => update.col_expr(Col::NextAttemptAt, Some(*at).into()),
            Next::Dead => update
                .col_expr(Col::Status, DeliveryStatus::Dead.into())
                .col_expr(Col::NextAttemptAt, none.into())
                .col_expr(Col::CompletedAt, Some(now).into()),
        };
        let moved = update.exec(&txn).await?.rows_affected == 1;
        if moved
            && let Some(url) = attempt.url.as_deref()
            && url != delivery.url
        {
            // In a savepoint: a collision with the event's other delivery leaves the URL as it was.
            let savepoint = txn.begin().await?;
            let relabelled = delivery::Entity::update_many()
                .col_expr(Col::Url, url.into())
                .filter(Col::Id.eq(delivery.id.as_str()))
                .exec(&savepoint)
                .await;
            match relabelled {
                Ok(_) => savepoint.commit().await?,
                Err(e) if super::is_unique_violation(&e) => savepoint.rollback().await?,
                Err(e) => return Err(e),
            }
        }
        moved_on.push(moved);
    }
    txn.commit().await?;
    Ok(moved_on)
}

/// Dead deliveries, oldest death first; optionally of one business, and dead at or after `since`.
pub async fn list_dead<C: ConnectionTrait>(
    db: &C,
    business_id: Option<&str>,
    since: Option<DateTime<Utc>>,
) -> Result<Vec<Delivery>, DbErr> {
    let mut select =
        delivery::Entity::find().filter(delivery::Column::Status.eq(DeliveryStatus::Dead));
    if let Some(business_id) = business_id {
        select = select.filter(delivery::Column::BusinessId.eq(business_id));
    }
    if let Some(since) = since {
        select = select.filter(delivery::Column::CompletedAt.gte(since));
    }
    select
        .order_by_asc(delivery::Column::CompletedAt)
        .order_by_asc(delivery::Column::Id)
        .all(db)
        .await
}

/// How many deliveries are dead (not replayed since): the `webhook_dead_letters` gauge.
pub async fn count_dead<C: ConnectionTrait>(db: &C) -> Result<u64, DbErr> {
    use sea_orm::PaginatorTrait;
    delivery::Entity::find()
        .filter(delivery::Column::Status.eq(DeliveryStatus::Dead))
        .count(db)
        .await
}

/// Replays one delivery (any status) with a fresh schedule; None when there is no such delivery.
pub async fn replay(
    db: &DatabaseConnection,
    delivery_id: &str,
    now: DateTime<Utc>,
) -> Result<Option<Delivery>, DbErr> {
    let txn = db.begin().await?;
    let replayed = restart(&txn, delivery_id, now).await?;
    txn.commit().await?;
    Ok(replayed)
}

/// Replays every dead delivery (of one business, dead since `since`, when given).
pub async fn replay_all_dead(
    db: &DatabaseConnection,
    business_id: Option<&str>,
    since: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<Vec<Delivery>, DbErr> {
    let mut replayed = Vec::new();
    for dead in list_dead(db, business_id, since).await? {
        let txn = db.begin().await?;
        // Only if it is still dead: another replay may have beaten us to it.
        let still_dead = find(&txn, &dead.id)
            .await?
            .is_some_and(|d| d.status == DeliveryStatus::Dead);
        if still_dead && let Some(d) = restart(&txn, &dead.id, now).await? {
            replayed.push(d);
        }
        txn.commit().await?;
    }
    Ok(replayed)
}
