//! One HTTP attempt of a delivery, as the receiver answered it.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "delivery_attempts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub delivery_id: String,
    pub attempted_at: DateTimeUtc,
    /// Where it went: the mode's webhook URL at the time. None when the mode had none (nothing
    /// was sent), or for attempts recorded before URLs were kept.
    pub url: Option<String>,
    /// The HTTP status, or 0 when no response came (network error, timeout, refused target).
    pub status_code: i32,
    pub duration_ms: i64,
    /// The first 1 KiB of the response body.
    pub response_excerpt: Option<String>,
    /// Why no response came (operators only).
    pub error: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
