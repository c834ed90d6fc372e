use domain::ids::{DepositId, NotificationId};
use domain::provider::NotificationOutcome;
use domain::{Bank, Mode};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "provider_notifications")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: NotificationId,
    pub bank: Bank,
    pub mode: Mode,
    /// The raw body as the bank sent it; for a listed transaction a recheck kept as `invalid`,
    /// the item of the bank's list (JSON, without the notification envelope).
    pub body: String,
    /// SHA-256 of the body: a bank's retry of the same body is stored once (null on rows
    /// stored before deduplication).
    pub body_digest: Option<String>,
    pub provider_reference: Option<String>,
    pub outcome: NotificationOutcome,
    pub deposit_id: Option<DepositId>,
    pub received_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
