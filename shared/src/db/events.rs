//! Events: written in the same transaction as the state change they announce.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveValue::Set, ConnectionTrait, DbErr, EntityTrait};
use serde::Serialize;

use super::entities::event;
use crate::domain::Mode;
use crate::ids::new_id;

pub use event::Model as Event;

pub const ACCOUNT_ACTIVE: &str = "virtualaccount.active";
pub const ACCOUNT_FAILED: &str = "virtualaccount.failed";
pub const ACCOUNT_DEACTIVATED: &str = "virtualaccount.deactivated";

pub async fn record<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
    event_type: &str,
    data: &impl Serialize,
    now: DateTime<Utc>,
) -> Result<Event, DbErr> {
    let row = event::Model {
        id: new_id("evt"),
        business_id: business_id.to_owned(),
        mode: mode.as_str().to_owned(),
        event_type: event_type.to_owned(),
        data: serde_json::to_string(data).expect("event data serialises"),
        created_at: now,
    };
    event::Entity::insert(event::ActiveModel {
        id: Set(row.id.clone()),
        business_id: Set(row.business_id.clone()),
        mode: Set(row.mode.clone()),
        event_type: Set(row.event_type.clone()),
        data: Set(row.data.clone()),
        created_at: Set(now),
    })
    .exec_without_returning(db)
    .await?;
    Ok(row)
}
