use domain::Role;
use domain::ids::{BusinessId, UserId};
use sea_orm::entity::prelude::*;

/// A dashboard user of one business (docs/dashboard.md).
#[derive(Clone, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "users")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: UserId,
    pub business_id: BusinessId,
    /// Lower-cased.
    pub email: String,
    pub role: Role,
    /// Argon2id, PHC string.
    pub password_hash: String,
    /// Encrypted TOTP secret, once enrolment is confirmed.
    pub totp_secret_enc: Option<String>,
    /// Encrypted TOTP secret being enrolled.
    pub totp_pending_enc: Option<String>,
    /// The last TOTP time step accepted.
    pub totp_last_step: Option<i64>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

/// Never prints the password hash or the sealed TOTP secrets.
impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("id", &self.id)
            .field("business_id", &self.business_id)
            .field("role", &self.role)
            .field("totp", &self.totp_secret_enc.is_some())
            .finish_non_exhaustive()
    }
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

impl Model {
    /// The stored role (an unreadable one is an error when the row is read).
    pub fn role(&self) -> domain::Role {
        self.role
    }

    pub fn has_totp(&self) -> bool {
        self.totp_secret_enc.is_some()
    }
}
