//! One HTTP attempt of a delivery, as the receiver answered it.

use domain::ids::{AttemptId, DeliveryId};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "delivery_attempts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: AttemptId,
    pub delivery_id: DeliveryId,
    pub attempted_at: DateTimeUtc,
    /// Where it went: the mode's webhook URL at the time. None when the mode had none (nothing
    /// was sent), or for attempts recorded before URLs were kept.
    pub url: Option<String>,
    /// The HTTP status, or 0 when no response came (network error, timeout, refused target).
    pub status_code: i32,
    pub duration_ms: i64,
    /// What `outbound::webhook_reply` keeps of the reply: up to 256 bytes of a non-2xx
    /// answer (rows from before that rule may hold more, and are cut when shown).
    pub response_excerpt: Option<String>,
    /// Why no response came (operators only).
    pub error: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
