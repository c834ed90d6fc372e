//! Secret keys: issuing, rolling and revoking them (docs/api/authentication-and-modes.md), and
//! finding whose a presented key is. The api's `admin key` commands and the dashboard both change
//! keys through [`change_by`].

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, Condition, ConnectionTrait,
    DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder, TransactionTrait,
};
use serde::Serialize;

use super::audit::{self, Actor, Entry};
use crate::tenant::{Tenant, Tenants};
use domain::ids::{BusinessId, KeyId};
use domain::keys::{
    KeyGrace, generate_secret_key, hash_secret_key, key_last_four, last_used_minute,
};
use domain::time::rfc3339;
use domain::{AuditAction, KybStatus, Mode};
use entities::{api_key, business, business_mode};

/// Issues a new current key for a business and mode; returns the key, which is not stored.
pub(crate) async fn issue<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    at: DateTime<Utc>,
) -> Result<String, DbErr> {
    let secret_key = generate_secret_key(mode);
    api_key::ActiveModel {
        id: Set(KeyId::new()),
        business_id: Set(business_id.clone()),
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

/// The KYB status live mode needs (docs/api/authentication-and-modes.md): for every live request,
/// and for [`live_mode_usable`].
pub const LIVE_MODE_KYB: KybStatus = KybStatus::Approved;

/// Whether a business whose KYB is `kyb` may act in `mode`: test mode always, live mode only
/// with [`LIVE_MODE_KYB`]. The API's key check and the dashboard's live view ask this.
pub fn kyb_allows(mode: Mode, kyb: KybStatus) -> bool {
    mode != Mode::Live || kyb == LIVE_MODE_KYB
}

/// The businesses among `ids` whose live mode may move money unattended (the daily automatic
/// payout): KYB `approved`, as every live request needs (docs/api/authentication-and-modes.md), and
/// at least one working live key. Revoking every live key is what an owner does when one leaked;
/// until a key works again (a roll), live mode is stopped and its money waits in the balance. Two
/// set-based reads.
pub async fn live_mode_usable<C: ConnectionTrait>(
    db: &C,
    ids: &[BusinessId],
    at: DateTime<Utc>,
) -> Result<std::collections::HashSet<BusinessId>, DbErr> {
    use sea_orm::QuerySelect;
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let approved: Vec<BusinessId> = business::Entity::find()
        .select_only()
        .column(business::Column::Id)
        .filter(business::Column::Id.is_in(ids.iter().cloned()))
        .filter(business::Column::KybStatus.eq(LIVE_MODE_KYB))
        .into_tuple()
        .all(db)
        .await?;
    if approved.is_empty() {
        return Ok(Default::default());
    }
    let keyed: Vec<BusinessId> = api_key::Entity::find()
        .select_only()
        .column(api_key::Column::BusinessId)
        .distinct()
        .filter(
            Tenants {
                business_ids: &approved,
                mode: Mode::Live,
            }
            .filter::<api_key::Column>(),
        )
        .filter(working_at(at))
        .into_tuple()
        .all(db)
        .await?;
    Ok(keyed.into_iter().collect())
}

/// What to do with a business's keys in one mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyAction {
    /// Issue a new key; the current one keeps working for the grace (none: it stops at once),
    /// and a key already expiring from an earlier roll stops at once, so at most two work.
    Roll(KeyGrace),
    /// Stop every working key at once. The mode then has no key until the next roll.
    Revoke,
    /// Stop one working key (by id) at once; any other keeps working (the dashboard's Revoke
    /// beside a key).
    RevokeKey(KeyId),
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
    /// The keys were not as the caller expected (a form sent again after its change, a key
    /// already stopped): nothing changed.
    Stale,
}

/// When a change applies: always (the admin commands), or only while the mode's newest working
/// key is still the one a form was shown with (None: no key). A roll form sent twice (a
/// reload, a double click) thereby rolls once, and its new key is in one response only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect<'a> {
    Anything,
    Newest(Option<&'a str>),
}

/// A change, and the hashes of the keys it stopped or put on a grace (so a process can forget
/// them in its authentication cache at once).
#[derive(Debug)]
pub struct Changed {
    pub change: KeyChange,
    pub key_hashes: Vec<String>,
}

/// Rolls or revokes the keys of a business and mode as an operator (`api admin key`); None when
/// there is no such business.
pub async fn change(
    db: &DatabaseConnection,
    business_id: &BusinessId,
    mode: Mode,
    action: KeyAction,
    at: DateTime<Utc>,
) -> Result<Option<KeyChange>, DbErr> {
    Ok(change_by(
        db,
        &Actor::operator(),
        business_id,
        mode,
        action,
        Expect::Anything,
        at,
    )
    .await?
    .map(|c| c.change))
}

/// The one implementation of key changes (`api admin key` and the dashboard): applies `action`
/// when `expect` holds, and records it in the audit log and announces it to every api process
/// (`changes`) in the same transaction.
pub async fn change_by(
    db: &DatabaseConnection,
    actor: &Actor,
    business_id: &BusinessId,
    mode: Mode,
    action: KeyAction,
    expect: Expect<'_>,
    at: DateTime<Utc>,
) -> Result<Option<Changed>, DbErr> {
    let txn = db.begin().await?;
    // Writing the mode's row first locks it (a row lock on PostgreSQL, the write lock on
    // SQLite): two changes at once run one after the other, each seeing the other's keys.
    let locked = business_mode::Entity::update_many()
        .col_expr(business_mode::Column::UpdatedAt, Expr::value(at))
        .filter(Tenant::new(business_id, mode).filter::<business_mode::Column>())
        .exec(&txn)
        .await?;
    if locked.rows_affected == 0 {
        return Ok(None);
    }
    let working = api_key::Entity::find()
        .filter(Tenant::new(business_id, mode).filter::<api_key::Column>())
        .filter(working_at(at))
        .order_by_desc(api_key::Column::CreatedAt)
        .order_by_desc(api_key::Column::Id)
        .all(&txn)
        .await?;
    let stale = || {
        Ok(Some(Changed {
            change: KeyChange::Stale,
            key_hashes: Vec::new(),
        }))
    };
    if let Expect::Newest(expected) = expect
        && working.first().map(|k| k.id.as_str()) != expected
    {
        return stale();
    }
    let shown =
        |k: &api_key::Model| format!("sk_{mode}_…{}", k.last_four.as_deref().unwrap_or("????"));
    let mut key_hashes = Vec::new();
    let (outcome, entry) = match action {
        KeyAction::Roll(grace) => {
            let mut previous_key_expires_at = None;
            let mut detail = "no key was working".to_owned();
            for key in working {
                // The current key gets the grace; one still expiring from an earlier roll
                // stops now, so the new key and the one just rolled are all that work.
                let expires_at = if key.expires_at.is_none() {
                    let until = at + grace.as_duration();
                    previous_key_expires_at = Some(rfc3339(&until));
                    detail = if grace.as_duration().is_zero() {
                        format!("the previous key {} stopped at once", shown(&key))
                    } else {
                        format!(
                            "the previous key {} works until {}",
                            shown(&key),
                            rfc3339(&until)
                        )
                    };
                    until
                } else {
                    at
                };
                key_hashes.push(key.key_hash.clone());
                let mut active: api_key::ActiveModel = key.into();
                active.expires_at = Set(Some(expires_at));
                active.update(&txn).await?;
            }
            let secret_key = issue(&txn, business_id, mode, at).await?;
            let entry = Entry::new(business_id, AuditAction::KeyRolled)
                .mode(mode)
                .target(format!("sk_{mode}_…{}", key_last_four(&secret_key)))
                .detail(detail);
            let rolled = KeyChange::Rolled(RolledKey {
                secret_key,
                previous_key_expires_at,
            });
            (rolled, entry)
        }
        KeyAction::Revoke | KeyAction::RevokeKey(_) => {
            let chosen: Vec<api_key::Model> = match &action {
                KeyAction::RevokeKey(id) => working.into_iter().filter(|k| &k.id == id).collect(),
                _ => working,
            };
            if chosen.is_empty() && matches!(action, KeyAction::RevokeKey(_)) {
                return stale();
            }
            let target = chosen.iter().map(shown).collect::<Vec<_>>().join(", ");
            key_hashes.extend(chosen.iter().map(|k| k.key_hash.clone()));
            let ids: Vec<KeyId> = chosen.into_iter().map(|k| k.id).collect();
            let revoked = api_key::Entity::update_many()
                .col_expr(api_key::Column::RevokedAt, Expr::value(at))
                .filter(api_key::Column::Id.is_in(ids))
                .exec(&txn)
                .await?;
            let mut entry = Entry::new(business_id, AuditAction::KeyRevoked).mode(mode);
            entry = if target.is_empty() {
                entry.detail("no key was working")
            } else {
                entry.target(target)
            };
            (KeyChange::Revoked(revoked.rows_affected), entry)
        }
    };
    audit::record(&txn, actor, entry, at).await?;
    // Every api process forgets the business's cached keys on commit
    // (docs/decisions/auth-cache.md).
    super::changes::announce(&txn, business_id).await?;
    txn.commit().await?;
    Ok(Some(Changed {
        change: outcome,
        key_hashes,
    }))
}

/// A working key as the dashboard lists it: never more of the key than its last four.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeySummary {
    pub id: KeyId,
    pub prefix: String,
    pub last_four: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

/// The working keys of a business and mode at `at`, newest first (the order `change_by`'s
/// `Expect::Newest` judges by).
pub async fn list_working<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    at: DateTime<Utc>,
) -> Result<Vec<KeySummary>, DbErr> {
    let keys = api_key::Entity::find()
        .filter(Tenant::new(business_id, mode).filter::<api_key::Column>())
        .filter(working_at(at))
        .order_by_desc(api_key::Column::CreatedAt)
        .order_by_desc(api_key::Column::Id)
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
    pub key_id: KeyId,
    pub business_id: BusinessId,
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
    key_id: &KeyId,
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
