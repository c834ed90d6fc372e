use domain::ids::{AccountId, BusinessId, KeyId};
use domain::{AccountStatus, Bank, IdentityType, Mode};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "virtual_accounts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: AccountId,
    pub business_id: BusinessId,
    pub mode: Mode,
    pub status: AccountStatus,
    pub bank: Bank,
    pub account_number: Option<String>,
    pub account_name: String,
    pub customer_name: String,
    pub customer_email: String,
    pub customer_phone: String,
    pub customer_reference: Option<String>,
    pub identity_type: IdentityType,
    /// Encrypted BVN/NIN, bound to this row's id.
    pub identity_enc: String,
    pub failure_reason: Option<String>,
    pub deactivation_reason: Option<String>,
    pub created_at: DateTimeUtc,
    pub activated_at: Option<DateTimeUtc>,
    pub deactivated_at: Option<DateTimeUtc>,
    pub updated_at: DateTimeUtc,
    /// The id (`key_…`) of the secret key that created the account (m0025; None before it):
    /// creation is audited here rather than in the audit log. Not in the API's account object.
    pub created_by_key_id: Option<KeyId>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
