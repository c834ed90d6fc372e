//! One row of the audit log: who did what to a business, when, from where. Never a secret.

use domain::ids::{AuditId, BusinessId, KeyId, UserId};
use domain::{AuditAction, Mode};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "audit_log")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: AuditId,
    /// None for a failed sign-in of an e-mail that belongs to no one.
    pub business_id: Option<BusinessId>,
    /// None for an operator (`api admin`).
    pub actor_user_id: Option<UserId>,
    /// The actor's e-mail at the time.
    pub actor_email: Option<String>,
    /// A change made through the API: the id of the secret key that made it.
    pub actor_key_id: Option<KeyId>,
    /// An operator's command: the host account that ran it.
    pub actor_operator: Option<String>,
    /// An operator's command: which (`api admin`, `worker-webhooks replay`).
    pub actor_via: Option<String>,
    pub action: AuditAction,
    pub mode: Option<Mode>,
    pub target: Option<String>,
    pub detail: Option<String>,
    /// The client's address as the api saw it.
    pub client_addr: Option<String>,
    /// The first time; repeats folded into this row (`times`) came within its minute.
    pub created_at: DateTimeUtc,
    /// How many times it happened: more than 1 only for repeats folded into one row.
    pub times: i32,
    /// What makes repeats one row (`audit::record_folded`); None for every other entry.
    pub fold_key: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
