//! Secret keys: issuing, rolling and revoking them (SPEC §1), and finding whose a presented key
//! is. The api's `admin key` commands and the dashboard both change keys through [`change`].

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, Condition, ConnectionTrait,
    DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder, TransactionTrait,
};
use serde::Serialize;

use super::entities::{api_key, business, business_mode};
use domain::ids::new_id;
use domain::keys::{
    KeyGrace, generate_secret_key, hash_secret_key, key_last_four, last_used_minute,
};
use domain::time::rfc3339;
use domain::{KybStatus, Mode};

/// Issues a new current key for a business and mode; returns the key, which is not stored.
pub(crate) async fn issue<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
    at: DateTime<Utc>,
) -> Result<String, DbErr> {
    let secret_key = generate_secret_key(mode);
    api_key::ActiveModel {
        id: Set(new_id("key")),
        business_id: Set(business_id.to_owned()),
        mode: Set(mode),
        key_hash: Set(hash_secret_key(&secret_key)),
        last_four: Set(Some(key_last_four(&secret_key))),
        created_at: Set(at),
        expires_at: Set(None),
        revoked_at: Set(None),
        last_used_at: Set(None),
    }
    .insert(db)
    .await?;
    Ok(secret_key)
}

/// Keys that still work at `at`: neither revoked nor past their expiry.
fn working_at(at: DateTime<Utc>) -> Condition {
    Condition::all()
        .add(api_key::Column::RevokedAt.is_null())
        .add(
            Condition::any()
                .add(api_key::Column::ExpiresAt.is_null())
                .add(api_key::Column::ExpiresAt.gt(at)),
        )
}

/// What to do with a business's keys in one mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAction {
    /// Issue a new key; the current one keeps working for the grace (none: it stops at once),
    /// and a key already expiring from an earlier roll stops at once, so at most two work.
    Roll(KeyGrace),
    /// Stop every working key at once. The mode then has no key until the next roll.
    Revoke,
}

/// What a roll prints: the new key, shown this once.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolledKey {
    pub secret_key: String,
    /// When the key that was current stops (RFC 3339); null when there was none.
    pub previous_key_expires_at: Option<String>,
}

impl std::fmt::Debug for RolledKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RolledKey(<redacted>)")
    }
}

#[derive(Debug)]
pub enum KeyChange {
    Rolled(RolledKey),
    /// How many working keys were revoked.
    Revoked(u64),
}

/// Rolls or revokes the keys of a business and mode; None when there is no such business.
pub async fn change(
    db: &DatabaseConnection,
    business_id: &str,
    mode: Mode,
    action: KeyAction,
    at: DateTime<Utc>,
) -> Result<Option<KeyChange>, DbErr> {
    let txn = db.begin().await?;
    // Writing the mode's row first locks it (a row lock on PostgreSQL, the write lock on
    // SQLite): two changes at once run one after the other, each seeing the other's keys.
    let locked = business_mode::Entity::update_many()
        .col_expr(business_mode::Column::UpdatedAt, Expr::value(at))
        .filter(business_mode::Column::BusinessId.eq(business_id))
        .filter(business_mode::Column::Mode.eq(mode))
        .exec(&txn)
        .await?;
    if locked.rows_affected == 0 {
        return Ok(None);
    }
    let working = api_key::Entity::find()
        .filter(api_key::Column::BusinessId.eq(business_id))
        .filter(api_key::Column::Mode.eq(mode))
        .filter(working_at(at))
        .all(&txn)
        .await?;
    let outcome = match action {
        KeyAction::Roll(grace) => {
            let mut previous_key_expires_at = None;
            for key in working {
                // The current key gets the grace; one still expiring from an earlier roll
                // stops now, so the new key and the one just rolled are all that work.
                let expires_at = if key.expires_at.is_none() {
                    let until = at + grace.as_duration();
                    previous_key_expires_at = Some(rfc3339(&until));
                    until
                } else {
                    at
                };
                let mut active: api_key::ActiveModel = key.into();
                active.expires_at = Set(Some(expires_at));
                active.update(&txn).await?;
            }
            let secret_key = issue(&txn, business_id, mode, at).await?;
            KeyChange::Rolled(RolledKey {
                secret_key,
                previous_key_expires_at,
            })
        }
        KeyAction::Revoke => {
            let ids: Vec<String> = working.into_iter().map(|k| k.id).collect();
            let revoked = api_key::Entity::update_many()
                .col_expr(api_key::Column::RevokedAt, Expr::value(at))
                .filter(api_key::Column::Id.is_in(ids))
                .exec(&txn)
                .await?;
            KeyChange::Revoked(revoked.rows_affected)
        }
    };
    txn.commit().await?;
    Ok(Some(outcome))
}

/// A working key as the dashboard lists it: never more of the key than its last four.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeySummary {
    pub id: String,
    pub prefix: String,
    pub last_four: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

/// The working keys of a business and mode at `at`, newest first.
pub async fn list_working<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
    at: DateTime<Utc>,
) -> Result<Vec<KeySummary>, DbErr> {
    let keys = api_key::Entity::find()
        .filter(api_key::Column::BusinessId.eq(business_id))
        .filter(api_key::Column::Mode.eq(mode))
        .filter(working_at(at))
        .order_by_desc(api_key::Column::CreatedAt)
        .all(db)
        .await?;
    Ok(keys
        .into_iter()
        .map(|k| KeySummary {
            id: k.id,
            prefix: format!("sk_{mode}_"),
            last_four: k.last_four,
            created_at: k.created_at,
            expires_at: k.expires_at,
            last_used_at: k.last_used_at,
        })
        .collect())
}

/// Who a presented key belongs to, for authentication.
#[derive(Debug, Clone)]
pub struct KeyOwner {
    pub key_id: String,
    pub business_id: String,
    pub business_name: String,
    pub mode: Mode,
    pub kyb_status: KybStatus,
    /// When a rolled key stops: a cached answer is not trusted past it.
    pub expires_at: Option<DateTime<Utc>>,
    /// The stored minute of its last use.
    pub last_used_at: Option<DateTime<Utc>>,
}

impl KeyOwner {
    pub fn works_at(&self, at: DateTime<Utc>) -> bool {
        self.expires_at.is_none_or(|until| until > at)
    }
}

/// Looks a key up by its hash; a revoked, expired or unknown key is None.
pub async fn find_owner<C: ConnectionTrait>(
    db: &C,
    key_hash: &str,
    at: DateTime<Utc>,
) -> Result<Option<KeyOwner>, DbErr> {
    let Some(key) = api_key::Entity::find()
        .filter(api_key::Column::KeyHash.eq(key_hash))
        .filter(working_at(at))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let Some(biz) = business::Entity::find_by_id(key.business_id.clone())
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let (mode, kyb_status) = (key.mode, biz.kyb_status);
    Ok(Some(KeyOwner {
        key_id: key.id,
        business_id: biz.id,
        business_name: biz.name,
        mode,
        kyb_status,
        expires_at: key.expires_at,
        last_used_at: key.last_used_at,
    }))
}

/// Stamps the key as used in `at`'s minute. Callers write only when the minute they last saw
/// differs; the condition keeps a lagging clock from moving the stamp back.
pub async fn record_use<C: ConnectionTrait>(
    db: &C,
    key_id: &str,
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    let minute = last_used_minute(at);
    api_key::Entity::update_many()
        .col_expr(api_key::Column::LastUsedAt, Expr::value(minute))
        .filter(api_key::Column::Id.eq(key_id))
        .filter(
            Condition::any()
                .add(api_key::Column::LastUsedAt.is_null())
                .add(api_key::Column::LastUsedAt.lt(minute)),
        )
        .exec(db)
        .await?;
    Ok(())
}
