use domain::Mode;
use domain::idempotency::KeyState;
use domain::ids::BusinessId;
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "idempotency_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub business_id: BusinessId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub mode: Mode,
    #[sea_orm(primary_key, auto_increment = false)]
    pub key: String,
    /// SHA-256 of the canonical request body.
    pub request_hash: String,
    pub state: KeyState,
    pub response_status: Option<i32>,
    pub account_id: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
