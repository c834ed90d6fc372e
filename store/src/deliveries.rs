//! Webhook deliveries: one per event and endpoint, driven by an outbox job
//! (`WebhookJob::Deliver`), each HTTP attempt recorded. A replay or resend starts a fresh schedule on the same row (same event,
//! so the same `webhook-id`) with a new job; the job it replaces does nothing if it still runs.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr,
    EntityTrait, QueryFilter, QueryOrder, Statement, TransactionTrait,
};

use super::audit::{self, Actor, Entry};
use super::businesses::webhook_url;
use super::outbox::{self, JobOutcome};
use super::pg_time;
use crate::tenant::{Business, Tenant};
use domain::ids::{AttemptId, BusinessId, DeliveryId, EventId, JobId};
use domain::{AuditAction, DeliveryStatus};
use entities::event::Model as Event;
use entities::{business_mode, delivery, delivery_attempt, event};
use jobs::WebhookJob;

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
    let (row, job) = new_delivery(event, url, now);
    // The row first (naming the job it is about to get), then its job: even outside a
    // transaction a job never finds no delivery. Two inserts, nothing read back.
    delivery::Entity::insert(delivery::ActiveModel::from(row.clone()))
        .exec_without_returning(db)
        .await?;
    entities::outbox::Entity::insert(job)
        .exec_without_returning(db)
        .await?;
    Ok(row)
}

/// A new delivery of `event` to `url`, due now, and the row of the job that drives it.
pub(crate) fn new_delivery(
    event: &Event,
    url: &str,
    now: DateTime<Utc>,
) -> (Delivery, entities::outbox::ActiveModel) {
    let id = DeliveryId::new();
    let job_id = JobId::new();
    let row = Delivery {
        id: id.clone(),
        event_id: event.id.clone(),
        business_id: event.business_id.clone(),
        mode: event.mode,
        url: url.to_owned(),
        status: DeliveryStatus::Pending,
        attempts: 0,
        next_attempt_at: Some(now),
        last_status_code: None,
        last_error: None,
        job_id: Some(job_id.clone()),
        created_at: now,
        updated_at: now,
        completed_at: None,
    };
    let job = outbox::job_row(job_id, &WebhookJob::Deliver { delivery_id: id }, now, now);
    (row, job)
}

/// On PostgreSQL, the event, its business's webhook URL for the mode, the delivery to it and
/// its job as ONE statement (`WITH ev AS (INSERT event), hook AS (SELECT url), d AS (INSERT
/// delivery … FROM hook), job AS (INSERT job … FROM d) SELECT 1`): one round trip where four were.
/// No URL, no delivery and no job, as in [`create`]'s callers.
pub(crate) async fn record_event_with_delivery<C: ConnectionTrait>(
    db: &C,
    event: &Event,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    use sea_orm::sea_query::{Expr, Query, WithClause};
    let mut with = WithClause::new();
    // The URL is written from `hook`; the placeholder is never stored.
    let delivery = new_delivery(event, "", now);
    for cte in event_with_delivery(event, &delivery, None)? {
        with.cte(cte);
    }
    let mut answer = Query::select();
    answer.expr(Expr::val(1));
    let statement = super::with_query(with, answer);
    db.execute(&statement).await?;
    Ok(())
}

/// [`record_event_with_delivery`]'s parts, named `ev`, `hook`, `d` and `job`, for a `WITH`, with
/// the `delivery` ([`new_delivery`] to the URL "": the URL is written from `hook`); with
/// `only_with`, nothing is written unless that table of the same `WITH` has a row.
pub(crate) fn event_with_delivery(
    event: &Event,
    (row, job): &(Delivery, entities::outbox::ActiveModel),
    only_with: Option<&str>,
) -> Result<Vec<sea_orm::sea_query::CommonTableExpression>, DbErr> {
    use super::{cte, insert_select};
    use sea_orm::sea_query::{Alias, Expr, Query};
    let mut event_values = super::row_values(&event::ActiveModel::from(event.clone()), |_| None)?;
    let mut url = Query::select();
    url.column(business_mode::Column::WebhookUrl)
        .from(business_mode::Entity)
        .cond_where(Tenant::new(&event.business_id, event.mode).filter::<business_mode::Column>())
        .and_where(business_mode::Column::WebhookUrl.is_not_null())
        .and_where(business_mode::Column::WebhookUrl.ne(""));
    if let Some(table) = only_with {
        event_values.from(Alias::new(table));
        url.from(Alias::new(table));
    }
    let insert_event = insert_select::<event::Entity>(event_values, "the event")?;
    let hook = Alias::new("hook");
    let mut delivery_values =
        super::row_values(&delivery::ActiveModel::from(row.clone()), |col| match col {
            delivery::Column::Url => {
                Some(Expr::col((hook.clone(), business_mode::Column::WebhookUrl)))
            }
            _ => None,
        })?;
    delivery_values.from(hook.clone());
    let mut insert_delivery = insert_select::<delivery::Entity>(delivery_values, "the delivery")?;
    insert_delivery.returning_col(delivery::Column::Id);
    let mut job_values = super::row_values(job, |_| None)?;
    job_values.from(Alias::new("d"));
    let insert_job = insert_select::<entities::outbox::Entity>(job_values, "the delivery's job")?;
    Ok(vec![
        cte("ev", insert_event),
        cte("hook", url),
        cte("d", insert_delivery),
        cte("job", insert_job),
    ])
}

/// The values [`event_with_delivery`] binds, in its order (a [`super::Rendered`] statement): the
/// event's row, the business, mode and empty URL of `hook`, the delivery's row but its URL,
/// the job's row.
pub(crate) fn push_event_with_delivery_values(
    into: &mut Vec<sea_orm::Value>,
    event: &Event,
    (row, job): &(Delivery, entities::outbox::ActiveModel),
) -> Result<(), DbErr> {
    super::push_row_values(into, &event::ActiveModel::from(event.clone()), |_| false)?;
    into.extend([
        event.business_id.as_str().into(),
        event.mode.into(),
        "".into(),
    ]);
    super::push_row_values(into, &delivery::ActiveModel::from(row.clone()), |col| {
        matches!(col, delivery::Column::Url)
    })?;
    super::push_row_values(into, job, |_| false)
}

pub async fn find<C: ConnectionTrait>(db: &C, id: &DeliveryId) -> Result<Option<Delivery>, DbErr> {
    delivery::Entity::find_by_id(id.clone()).one(db).await
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
    ids: &[DeliveryId],
) -> Result<Vec<ForAttempt>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    if db.get_database_backend() == DbBackend::Postgres {
        return for_attempts_joined(db, ids).await;
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
    let mut modes: Vec<(&BusinessId, domain::Mode)> = deliveries
        .iter()
        .map(|d| (&d.business_id, d.mode))
        .collect();
    modes.sort_unstable_by_key(|(b, m)| (*b, m.as_str()));
    modes.dedup();
    let which = modes
        .iter()
        .fold(sea_orm::Condition::any(), |any, (business_id, mode)| {
            any.add(Tenant::new(business_id, *mode).filter::<business_mode::Column>())
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

/// `table`'s columns as `alias.column AS alias_column`, so one row can carry several entities.
fn prefixed<C: sea_orm::IdenStatic + sea_orm::Iterable>(alias: &str) -> String {
    C::iter()
        .map(|c| format!("{alias}.{0} AS {alias}_{0}", c.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// [`for_attempts`] on PostgreSQL: one statement (the deliveries joined to their events and
/// settings), whose text is the same for any number of ids (see [`super::outbox::ids_param`]).
static FOR_ATTEMPTS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {}, {}, {} FROM deliveries d \
         LEFT JOIN events e ON e.id = d.event_id \
         LEFT JOIN business_modes s ON s.business_id = d.business_id AND s.mode = d.mode \
         WHERE d.id = ANY(ARRAY(SELECT json_array_elements_text($1::json)))",
        prefixed::<delivery::Column>("d"),
        prefixed::<event::Column>("e"),
        prefixed::<business_mode::Column>("s"),
    )
});

async fn for_attempts_joined<C: ConnectionTrait>(
    db: &C,
    ids: &[DeliveryId],
) -> Result<Vec<ForAttempt>, DbErr> {
    use sea_orm::FromQueryResult;
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            FOR_ATTEMPTS.as_str(),
            [super::outbox::ids_param(ids).into()],
        ))
        .await?;
    rows.iter()
        .map(|row| {
            let event = match row.try_get::<Option<String>>("", "e_id")? {
                Some(_) => Some(Event::from_query_result(row, "e_")?),
                None => None,
            };
            let settings = match row.try_get::<Option<String>>("", "s_business_id")? {
                Some(_) => Some(business_mode::Model::from_query_result(row, "s_")?),
                None => None,
            };
            Ok(ForAttempt {
                delivery: Delivery::from_query_result(row, "d_")?,
                event,
                settings,
            })
        })
        .collect()
}

/// An event's deliveries, oldest first, each with its attempts, oldest first.
pub async fn for_event<C: ConnectionTrait>(
    db: &C,
    event_id: &EventId,
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
    event_ids: &[EventId],
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
    delivery_id: &DeliveryId,
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
    delivery_id: &DeliveryId,
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
        outbox::mark(db, old, outbox::Mark::Completed, now).await?;
    }
    find(db, delivery_id).await
}

/// The window of the resend limit (docs/api/events-and-webhooks.md: a configured number per
/// business per minute).
pub const RESEND_WINDOW: chrono::Duration = chrono::Duration::minutes(1);

/// What became of a resend.
#[derive(Debug)]
pub enum Resent {
    /// The delivery with its fresh schedule.
    Scheduled(Delivery),
    /// The mode has no webhook URL: nothing was sent, nothing counted.
    NoWebhookUrl,
    /// The business has had its resends of the last minute: nothing was sent.
    RateLimited { retry_after_secs: u64 },
}

/// `POST /events/{id}/resend` and the Events page: a fresh schedule for the event to the mode's
/// current URL, on the existing delivery to that URL or a new one, recorded in the audit log as
/// `actor`'s in the same transaction. At most `per_minute` resends per business (both modes) in
/// any rolling minute: the audit log's resend rows are the count, read under the business row's
/// lock, so concurrent resends in any number of api processes never pass the limit.
pub async fn resend(
    db: &DatabaseConnection,
    actor: &Actor,
    event: &Event,
    per_minute: u32,
    now: DateTime<Utc>,
) -> Result<Resent, DbErr> {
    // Two tries: a concurrent resend may insert the delivery between our look and our insert.
    for _ in 0..2 {
        let txn = db.begin().await?;
        let Some(url) = webhook_url(&txn, &event.business_id, event.mode).await? else {
            return Ok(Resent::NoWebhookUrl);
        };
        if let Some(retry_after_secs) =
            resends_exhausted(&txn, &event.business_id, per_minute, now).await?
        {
            return Ok(Resent::RateLimited { retry_after_secs });
        }
        let existing = delivery::Entity::find()
            .filter(delivery::Column::EventId.eq(event.id.as_str()))
            .filter(delivery::Column::Url.eq(url.as_str()))
            .one(&txn)
            .await?;
        let result = match existing {
            Some(d) => restart(&txn, &d.id, now)
                .await?
                .ok_or_else(|| DbErr::RecordNotFound(d.id.to_string())),
            None => create(&txn, event, &url, now).await,
        };
        match result {
            Ok(d) => {
                let entry = Entry::new(&event.business_id, AuditAction::EventResent)
                    .mode(event.mode)
                    .target(event.id.as_str())
                    .detail(format!("delivery {}", d.id));
                audit::record(&txn, actor, entry, now).await?;
                txn.commit().await?;
                return Ok(Resent::Scheduled(d));
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

/// Locks the business row (FOR NO KEY UPDATE on PostgreSQL, so rows that merely reference the
/// business are not held up; SQLite has one writer at a time) and counts its resends in the
/// minute before `now`: None while fewer than `per_minute`, else the seconds until the oldest of
/// them leaves the minute.
async fn resends_exhausted<C: ConnectionTrait>(
    txn: &C,
    business_id: &BusinessId,
    per_minute: u32,
    now: DateTime<Utc>,
) -> Result<Option<u64>, DbErr> {
    use entities::{audit_entry, business};
    use sea_orm::QuerySelect;
    use sea_orm::sea_query::LockType;
    business::Entity::find_by_id(business_id.to_owned())
        .select_only()
        .column(business::Column::Id)
        .lock(LockType::NoKeyUpdate)
        .into_tuple::<String>()
        .one(txn)
        .await?;
    let recent: Vec<DateTime<Utc>> = audit_entry::Entity::find()
        .select_only()
        .column(audit_entry::Column::CreatedAt)
        .filter(Business(business_id).filter::<audit_entry::Column>())
        .filter(audit_entry::Column::CreatedAt.gt(now - RESEND_WINDOW))
        .filter(audit_entry::Column::Action.eq(AuditAction::EventResent))
        .order_by_desc(audit_entry::Column::CreatedAt)
        .limit(u64::from(per_minute))
        .into_tuple()
        .all(txn)
        .await?;
    if recent.len() < per_minute as usize {
        return Ok(None);
    }
    // The oldest of the newest `per_minute`: once it leaves the minute, one more may go.
    let frees_at = recent.last().copied().unwrap_or(now) + RESEND_WINDOW;
    let wait = (frees_at - now).num_milliseconds().max(0) as u64;
    Ok(Some(wait.div_ceil(1000).max(1)))
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
    pub job_id: JobId,
    pub attempt: AttemptRecord,
    pub next: Next,
    pub now: DateTime<Utc>,
}

impl AttemptWrite {
    /// How the run that made this attempt ends when the attempt moves its delivery on: done when
    /// it succeeded, due again when the delivery is, dead when the delivery is.
    pub fn job_outcome(&self) -> JobOutcome {
        let error = self.attempt.error.clone().unwrap_or_default();
        match self.next {
            Next::Succeeded => JobOutcome::Done,
            Next::RetryAt(at) => JobOutcome::Retry {
                after: (at - self.now).to_std().unwrap_or_default(),
                error,
            },
            Next::Dead => JobOutcome::Dead {
                error: format!(
                    "gave up after {} attempts: {error}",
                    self.delivery.attempts + 1
                ),
            },
        }
    }
}

/// Records an attempt and moves the delivery on, if the attempt belongs to its current schedule
/// (`job_id`, status and attempt count as they were read), and then ends that job's run as
/// [`AttemptWrite::job_outcome`] says, in the same commit. Returns false when the delivery had
/// moved on meanwhile (a replay, a resend, or a duplicate run of the same job): the attempt is
/// still recorded, the delivery and the job are left alone. A delivery moved on takes its
/// attempt's URL, unless another delivery of the event already has it (one delivery per event and
/// URL).
pub async fn record_attempt(
    db: &DatabaseConnection,
    delivery: &Delivery,
    job_id: &JobId,
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

/// [`record_attempt`] for several attempts at once: whether each moved its delivery on.
///
/// On PostgreSQL a round is one statement (every attempt inserted, every delivery's conditional
/// update and the end of each moved delivery's job, joined to the round's rows passed as one JSON
/// parameter), so its text never changes with the round's size: one prepared statement, one round
/// trip, one commit. A round with a duplicate (two runs of one delivery) or an attempt that went to
/// another URL than the delivery's (the business moved its endpoint) takes
/// [`record_attempts_in_order`] instead, whose order and savepoints those need.
pub async fn record_attempts(
    db: &DatabaseConnection,
    writes: &[AttemptWrite],
) -> Result<Vec<bool>, DbErr> {
    if writes.is_empty() {
        return Ok(Vec::new());
    }
    let plain = {
        let mut ids: Vec<&str> = writes.iter().map(|w| w.delivery.id.as_str()).collect();
        ids.sort_unstable();
        ids.windows(2).all(|pair| pair[0] != pair[1])
            && writes.iter().all(|w| {
                w.attempt
                    .url
                    .as_deref()
                    .is_none_or(|url| url == w.delivery.url)
            })
    };
    if plain && db.get_database_backend() == DbBackend::Postgres {
        record_attempts_in_one(db, writes).await
    } else {
        record_attempts_in_order(db, writes).await
    }
}

/// One row of a round for [`record_attempts_in_one`]: the attempt, and the delivery's update.
#[derive(serde::Serialize)]
struct RoundRow<'a> {
    attempt_id: AttemptId,
    delivery_id: &'a str,
    attempted_at: String,
    url: Option<&'a str>,
    status_code: i32,
    duration_ms: i64,
    response_excerpt: Option<&'a str>,
    error: Option<&'a str>,
    /// The delivery's attempt count and job as read: the update's condition.
    attempts: i32,
    job_id: &'a str,
    status: &'static str,
    next_attempt_at: Option<String>,
    completed_at: Option<String>,
    now: String,
    /// How the job's run ends (`outbox::JobOutcome::end`), and its `last_error` but when done.
    job_end: &'static str,
    job_error: Option<String>,
}

/// The round's statement (see [`record_attempts`]): the same conditions and values as
/// [`record_attempts_in_order`] gives each delivery alone. Deliveries are distinct, so no row
/// meets two of the round's rows. They are found by primary key (`d.id = ANY(…)`); the status
/// is compared as an expression so that the planner cannot take `deliveries_status_business`
/// instead, whose statistics may say "few pending" while thousands are (a backlog), and which it
/// would then read whole for every round. The jobs of the deliveries moved on end as
/// `outbox::finish` ends a run (`outbox::finish_from`).
static RECORD_ROUND: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH round AS MATERIALIZED ( \
           SELECT * FROM json_to_recordset($1::json) AS r( \
             attempt_id text, delivery_id text, attempted_at timestamptz, url text, \
             status_code int, duration_ms bigint, response_excerpt text, error text, \
             attempts int, job_id text, status text, next_attempt_at timestamptz, \
             completed_at timestamptz, now timestamptz, job_end text, job_error text)), \
         recorded AS ( \
           INSERT INTO delivery_attempts \
             (id, delivery_id, attempted_at, url, status_code, duration_ms, response_excerpt, \
             error) \
           SELECT attempt_id, delivery_id, attempted_at, url, status_code, duration_ms, \
             response_excerpt, error FROM round), \
         moved AS ( \
           UPDATE deliveries AS d SET \
             attempts = round.attempts + 1, last_status_code = round.status_code, \
             last_error = round.error, updated_at = round.now, status = round.status, \
             next_attempt_at = round.next_attempt_at, completed_at = round.completed_at \
           FROM round \
           WHERE d.id = ANY(ARRAY(SELECT delivery_id FROM round)) AND d.id = round.delivery_id \
             AND d.status || '' = 'pending' AND d.attempts = round.attempts \
             AND (d.job_id = round.job_id OR d.job_id IS NULL) \
           RETURNING d.id, round.job_id, round.job_end, round.next_attempt_at AS run_at, \
             round.job_error, round.now), \
         ended AS ({}) \
         SELECT id FROM moved",
        outbox::finish_from("moved")
    )
});

async fn record_attempts_in_one(
    db: &DatabaseConnection,
    writes: &[AttemptWrite],
) -> Result<Vec<bool>, DbErr> {
    let rows: Vec<RoundRow<'_>> = writes
        .iter()
        .map(|w| {
            let (status, next_attempt_at, completed_at) = match w.next {
                Next::Succeeded => (DeliveryStatus::Succeeded, None, Some(w.now)),
                Next::RetryAt(at) => (DeliveryStatus::Pending, Some(at), None),
                Next::Dead => (DeliveryStatus::Dead, None, Some(w.now)),
            };
            let ended = w.job_outcome();
            RoundRow {
                attempt_id: AttemptId::new(),
                delivery_id: &w.delivery.id,
                attempted_at: pg_time(w.attempt.attempted_at),
                url: w.attempt.url.as_deref(),
                status_code: w.attempt.status_code,
                duration_ms: w.attempt.duration_ms,
                response_excerpt: w.attempt.response_excerpt.as_deref(),
                error: w.attempt.error.as_deref(),
                attempts: w.delivery.attempts,
                job_id: &w.job_id,
                status: status.as_str(),
                next_attempt_at: next_attempt_at.map(pg_time),
                completed_at: completed_at.map(pg_time),
                now: pg_time(w.now),
                job_end: ended.end(),
                job_error: ended.error().map(str::to_owned),
            }
        })
        .collect();
    let round = serde_json::to_string(&rows).map_err(|e| DbErr::Custom(e.to_string()))?;
    let statement =
        Statement::from_sql_and_values(DbBackend::Postgres, RECORD_ROUND.as_str(), [round.into()]);
    // Its jobs' starts settled the relay's claims on their rows (`outbox::started`), so a relay
    // confirming them takes none of them; should PostgreSQL break a deadlock all the same, it is
    // sent again.
    let moved = super::retrying_deadlocks("a webhook round's record", || {
        db.query_all_raw(statement.clone())
    })
    .await?
    .iter()
    .map(|row| row.try_get::<DeliveryId>("", "id"))
    .collect::<Result<Vec<_>, _>>()?;
    Ok(writes
        .iter()
        .map(|w| moved.contains(&w.delivery.id))
        .collect())
}

/// [`record_attempt`] for several attempts in one transaction (one insert for all the attempts,
/// then each delivery's conditional update and its job's end, in order): whether each moved its
/// delivery on.
async fn record_attempts_in_order(
    db: &DatabaseConnection,
    writes: &[AttemptWrite],
) -> Result<Vec<bool>, DbErr> {
    use delivery::Column as Col;
    let txn = db.begin().await?;
    delivery_attempt::Entity::insert_many(writes.iter().map(|w| {
        let attempt = &w.attempt;
        delivery_attempt::ActiveModel {
            id: Set(AttemptId::new()),
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
    for write in writes {
        let AttemptWrite {
            delivery,
            job_id,
            attempt,
            next,
            now,
        } = write;
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
        if moved {
            outbox::finish_by_id(&txn, job_id, &write.job_outcome(), now).await?;
        }
        moved_on.push(moved);
    }
    txn.commit().await?;
    Ok(moved_on)
}

/// Dead deliveries, oldest death first; optionally of one business, and dead at or after `since`.
pub async fn list_dead<C: ConnectionTrait>(
    db: &C,
    business_id: Option<&BusinessId>,
    since: Option<DateTime<Utc>>,
) -> Result<Vec<Delivery>, DbErr> {
    let mut select =
        delivery::Entity::find().filter(delivery::Column::Status.eq(DeliveryStatus::Dead));
    if let Some(business_id) = business_id {
        select = select.filter(Business(business_id).filter::<delivery::Column>());
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

/// The businesses whose webhooks have been failing longest: for each, since when its oldest
/// delivery still waiting on a retry was created; at most `limit`, longest first. What the
/// `webhook_endpoint_failing_seconds` gauge shows, so that an alert names the worst offenders
/// without a series per business.
pub async fn failing_longest<C: ConnectionTrait>(
    db: &C,
    limit: u64,
) -> Result<Vec<(String, DateTime<Utc>)>, DbErr> {
    use sea_orm::QuerySelect;
    use sea_orm::sea_query::{Expr, Func};
    let since = Expr::expr(Func::min(Expr::col(delivery::Column::CreatedAt)));
    delivery::Entity::find()
        .select_only()
        .column(delivery::Column::BusinessId)
        .column_as(since.clone(), "since")
        .filter(delivery::Column::Status.eq(DeliveryStatus::Pending))
        .filter(delivery::Column::Attempts.gt(0))
        .group_by(delivery::Column::BusinessId)
        .order_by_asc(since)
        .limit(limit)
        .into_tuple()
        .all(db)
        .await
}

/// Replays one delivery (any status) with a fresh schedule, recorded in the audit log as
/// `actor`'s in the same transaction; None when there is no such delivery.
pub async fn replay(
    db: &DatabaseConnection,
    actor: &Actor,
    delivery_id: &DeliveryId,
    now: DateTime<Utc>,
) -> Result<Option<Delivery>, DbErr> {
    let txn = db.begin().await?;
    let replayed = restart(&txn, delivery_id, now).await?;
    if let Some(d) = &replayed {
        record_replay(&txn, actor, d, now).await?;
    }
    txn.commit().await?;
    Ok(replayed)
}

/// Replays every dead delivery (of one business, dead since `since`, when given), each recorded
/// in the audit log as `actor`'s in its own transaction.
pub async fn replay_all_dead(
    db: &DatabaseConnection,
    actor: &Actor,
    business_id: Option<&BusinessId>,
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
            record_replay(&txn, actor, &d, now).await?;
            replayed.push(d);
        }
        txn.commit().await?;
    }
    Ok(replayed)
}

/// Named as the Events page's resend is: the event, then the delivery.
async fn record_replay<C: ConnectionTrait>(
    db: &C,
    actor: &Actor,
    d: &Delivery,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let entry = Entry::new(&d.business_id, AuditAction::DeliveryReplayed)
        .mode(d.mode)
        .target(d.event_id.as_str())
        .detail(format!("delivery {}", d.id));
    audit::record(db, actor, entry, now).await
}
