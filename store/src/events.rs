//! Events: written in the same transaction as the state change they announce, together with a
//! delivery (and its job) when the business has a webhook URL for the event's mode.

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use serde::Serialize;

use super::paging;
use crate::tenant::Tenant;
use domain::ids::{AccountId, BusinessId, EventId};
use domain::{EventType, Mode};
use entities::event;

pub use event::Model as Event;

/// Records an event in the caller's transaction. When the business has a webhook URL for the
/// mode, a delivery to it and the job that drives it are written in the same transaction: the
/// event and its delivery commit together or not at all. Without a URL the event is recorded and
/// nothing is delivered.
pub async fn record<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    event_type: EventType,
    data: &impl Serialize,
    now: DateTime<Utc>,
) -> Result<Event, DbErr> {
    let row = new_event(business_id, mode, event_type, data, now);
    if db.get_database_backend() == DbBackend::Postgres {
        super::deliveries::record_event_with_delivery(db, &row, now).await?;
        return Ok(row);
    }
    event::Entity::insert(event::ActiveModel::from(row.clone()))
        .exec_without_returning(db)
        .await?;
    if let Some(url) = super::businesses::webhook_url(db, business_id, mode).await? {
        super::deliveries::create(db, &row, &url, now).await?;
    }
    Ok(row)
}

/// An event's row, as [`record`] writes it.
pub(crate) fn new_event(
    business_id: &BusinessId,
    mode: Mode,
    event_type: EventType,
    data: &impl Serialize,
    now: DateTime<Utc>,
) -> Event {
    // Stored exactly as serialised (member order kept); read back once to find the account.
    let data = serde_json::to_string(data).expect("event data serialises");
    event::Model {
        id: EventId::new(),
        business_id: business_id.to_owned(),
        mode,
        event_type,
        account_id: account_of(event_type, &data).map(AccountId::unchecked),
        data,
        created_at: now,
    }
}

/// The account an event is about: account events carry the account as `data`, deposit events
/// name it in `data.accountId`; other events (payouts, tests) are about none.
fn account_of(event_type: EventType, data: &str) -> Option<String> {
    let member = if event_type.as_str().starts_with("virtualaccount.") {
        "id"
    } else if event_type.as_str().starts_with("deposit.") {
        "accountId"
    } else {
        return None;
    };
    let data: serde_json::Value = serde_json::from_str(data).ok()?;
    data.get(member)?.as_str().map(str::to_owned)
}

/// The webhook body of an event, docs/api/events-and-webhooks.md:
/// `{"id","type","mode","createdAt","data"}`. Built from the stored row alone, so every attempt
/// (and every replay) sends the same bytes.
pub fn envelope(event: &Event) -> String {
    fn json(value: impl Serialize) -> String {
        serde_json::to_string(&value).expect("ids, enums and times serialise")
    }
    format!(
        r#"{{"id":{},"type":{},"mode":{},"createdAt":{},"data":{}}}"#,
        json(&event.id),
        json(event.event_type),
        json(event.mode),
        json(domain::time::rfc3339(&event.created_at)),
        event.data,
    )
}

/// An event of a business and mode (None for another business's or mode's: no existence leak).
pub async fn find<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    id: &EventId,
) -> Result<Option<Event>, DbErr> {
    event::Entity::find_by_id(id.clone())
        .filter(Tenant::new(business_id, mode).filter::<event::Column>())
        .one(db)
        .await
}

/// A page of a business's events in one mode, newest first, and the (exact, maintained) total.
pub async fn list<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    event_type: Option<EventType>,
    request: &paging::PageRequest,
) -> Result<(paging::Fetched<Event>, paging::Total), DbErr> {
    let mut select =
        event::Entity::find().filter(Tenant::new(business_id, mode).filter::<event::Column>());
    if let Some(event_type) = event_type {
        select = select.filter(event::Column::EventType.eq(event_type));
    }
    let total = super::list_counts::total(
        db,
        business_id,
        mode,
        super::list_counts::List::Events,
        event_type.map(EventType::as_str),
    )
    .await?;
    let fetched = paging::fetch(
        db,
        select,
        event::Column::CreatedAt,
        event::Column::Id,
        request,
        |e| (e.created_at, e.id.to_string()),
    )
    .await?;
    Ok((fetched, total))
}

/// The newest events about one account, at most `limit`. The caller has checked the account is
/// the business's (by `accounts::find`); the business and mode are matched again all the same.
pub async fn for_account<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    account_id: &AccountId,
    limit: u64,
) -> Result<Vec<Event>, DbErr> {
    event::Entity::find()
        .filter(event::Column::AccountId.eq(account_id))
        .filter(Tenant::new(business_id, mode).filter::<event::Column>())
        .order_by_desc(event::Column::CreatedAt)
        .order_by_desc(event::Column::Id)
        .limit(limit)
        .all(db)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_is_the_stored_event_in_spec_order() {
        let event = Event {
            id: EventId::unchecked("evt_1"),
            business_id: BusinessId::unchecked("biz_1"),
            mode: Mode::Test,
            event_type: EventType::VirtualAccountActive,
            data: r#"{"id":"va_1","status":"active"}"#.into(),
            account_id: Some(AccountId::unchecked("va_1")),
            created_at: DateTime::parse_from_rfc3339("2025-01-02T03:04:05.678Z")
                .unwrap()
                .with_timezone(&Utc),
        };
        let body = envelope(&event);
        assert_eq!(
            body,
            r#"{"id":"evt_1","type":"virtualaccount.active","mode":"test","createdAt":"2025-01-02T03:04:05.678Z","data":{"id":"va_1","status":"active"}}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed["data"]["status"], "active");
        assert_eq!(envelope(&event), body, "the same bytes every time");
    }
}
