use domain::ids::{SessionId, UserId};
use sea_orm::entity::prelude::*;

/// A dashboard session: found by the SHA-256 of its cookie token, never by the token.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "dashboard_sessions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: SessionId,
    pub token_hash: String,
    pub user_id: UserId,
    /// The password was right, the TOTP code is still to come: not signed in.
    pub awaiting_totp: bool,
    pub created_at: DateTimeUtc,
    pub last_seen_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
