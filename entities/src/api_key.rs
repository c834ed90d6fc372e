//! A secret key of a business and mode. A business and mode has at most two working keys: the
//! current one (`expires_at` unset) and one rolled away that works until `expires_at`.

use domain::Mode;
use domain::ids::{BusinessId, KeyId};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "api_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: KeyId,
    pub business_id: BusinessId,
    pub mode: Mode,
    /// SHA-256 of the secret key; the key itself is never stored.
    #[sea_orm(unique)]
    pub key_hash: String,
    /// What the dashboard may show beside the mode's prefix (unknown for keys issued before
    /// this table existed).
    pub last_four: Option<String>,
    pub created_at: DateTimeUtc,
    /// Set when the key is rolled: it works until then.
    pub expires_at: Option<DateTimeUtc>,
    /// Set when the key is revoked: it stopped then.
    pub revoked_at: Option<DateTimeUtc>,
    /// The minute of the key's last successful use.
    pub last_used_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
