//! A business's settings in one mode (its keys are `api_keys` rows). Its row is also the lock
//! that makes the hourly account limit exact (creations in one business and mode serialise on
//! it) and that serialises rolling and revoking the mode's keys.

use domain::Mode;
use domain::ids::BusinessId;
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "business_modes")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub business_id: BusinessId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub mode: Mode,
    pub webhook_url: Option<String>,
    /// Encrypted `whsec_…`.
    pub webhook_secret_enc: String,
    /// The secret before the last rotation, still signing until `previous_secret_expires_at`.
    pub previous_webhook_secret_enc: Option<String>,
    pub previous_secret_expires_at: Option<DateTimeUtc>,
    /// Accounts ever written in this business and mode (`m0015_account_counts`).
    pub accounts_created: i64,
    /// Of those, how many were created at or before `accounts_expired_until`.
    pub accounts_expired: i64,
    pub accounts_expired_until: Option<DateTimeUtc>,
    /// The newest account's creation stamp: stamps never go backwards.
    pub last_account_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
