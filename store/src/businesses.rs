use chrono::{DateTime, Duration, Utc};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection,
    DatabaseTransaction, DbErr, EntityTrait, QueryFilter, QuerySelect, TransactionTrait,
};
use serde::Serialize;

use super::audit::{self, Actor, Entry};
use crate::tenant::Tenant;
use crypto::Cipher;
use domain::ids::BusinessId;
use domain::keys::generate_webhook_secret;
use domain::time::now;
use domain::{AuditAction, KybStatus, Mode};
use entities::{business, business_mode};

/// What `api admin business create` prints: the only time the secrets are shown.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuedBusiness {
    pub id: BusinessId,
    pub name: String,
    pub kyb_status: KybStatus,
    pub test: IssuedKeys,
    pub live: IssuedKeys,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuedKeys {
    pub secret_key: String,
    pub webhook_secret: String,
}

impl std::fmt::Debug for IssuedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IssuedKeys(<redacted>)")
    }
}

/// The context a webhook secret is encrypted under: its business and mode.
pub fn webhook_secret_context(business_id: &BusinessId, mode: Mode) -> String {
    format!("{business_id}:{mode}:webhook_secret")
}

/// A business, unrecorded: the test harness's fixtures.
pub async fn create(
    db: &DatabaseConnection,
    cipher: &Cipher,
    name: &str,
    kyb: KybStatus,
) -> Result<IssuedBusiness, DbErr> {
    let txn = db.begin().await?;
    let issued = insert(&txn, cipher, name, kyb, now()).await?;
    txn.commit().await?;
    Ok(issued)
}

/// A business created by `actor` (`api admin business create`, `api dev`'s demo business),
/// recorded in the audit log in the same transaction.
pub async fn create_by(
    db: &DatabaseConnection,
    cipher: &Cipher,
    actor: &Actor,
    name: &str,
    kyb: KybStatus,
) -> Result<IssuedBusiness, DbErr> {
    let at = now();
    let txn = db.begin().await?;
    let issued = insert(&txn, cipher, name, kyb, at).await?;
    let entry = Entry::new(&issued.id, AuditAction::BusinessCreated)
        .target(name)
        .detail(format!("KYB {kyb}"));
    audit::record(&txn, actor, entry, at).await?;
    txn.commit().await?;
    Ok(issued)
}

async fn insert(
    txn: &DatabaseTransaction,
    cipher: &Cipher,
    name: &str,
    kyb: KybStatus,
    at: DateTime<Utc>,
) -> Result<IssuedBusiness, DbErr> {
    let id = BusinessId::new();
    business::ActiveModel {
        id: Set(id.clone()),
        name: Set(name.to_owned()),
        kyb_status: Set(kyb),
        created_at: Set(at),
        updated_at: Set(at),
    }
    .insert(txn)
    .await?;
    let mut issued = Vec::new();
    for mode in Mode::ALL {
        let webhook_secret = generate_webhook_secret();
        business_mode::ActiveModel {
            business_id: Set(id.clone()),
            mode: Set(mode),
            webhook_url: Set(None),
            webhook_secret_enc: Set(
                cipher.encrypt(&webhook_secret, &webhook_secret_context(&id, mode))
            ),
            previous_webhook_secret_enc: Set(None),
            previous_secret_expires_at: Set(None),
            accounts_created: Set(0),
            accounts_expired: Set(0),
            accounts_expired_until: Set(None),
            last_account_at: Set(None),
            created_at: Set(at),
            updated_at: Set(at),
        }
        .insert(txn)
        .await?;
        let secret_key = super::keys::issue(txn, &id, mode, at).await?;
        issued.push(IssuedKeys {
            secret_key,
            webhook_secret,
        });
    }
    let live = issued.pop().expect("two modes");
    let test = issued.pop().expect("two modes");
    Ok(IssuedBusiness {
        id,
        name: name.to_owned(),
        kyb_status: kyb,
        test,
        live,
    })
}

pub async fn find<C: ConnectionTrait>(
    db: &C,
    id: &BusinessId,
) -> Result<Option<business::Model>, DbErr> {
    business::Entity::find_by_id(id.clone()).one(db).await
}

/// Sets the KYB status, and announces it to every api process on commit (`changes`); false when
/// there is no such business. Within a caller's transaction, it is part of that transaction.
pub async fn set_kyb<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    id: &BusinessId,
    kyb: KybStatus,
) -> Result<bool, DbErr> {
    let txn = db.begin().await?;
    let res = business::Entity::update_many()
        .col_expr(business::Column::KybStatus, kyb.into())
        .col_expr(business::Column::UpdatedAt, now().into())
        .filter(business::Column::Id.eq(id))
        .exec(&txn)
        .await?;
    if res.rows_affected != 1 {
        return Ok(false);
    }
    super::changes::announce(&txn, id).await?;
    sea_orm::TransactionSession::commit(txn).await?;
    Ok(true)
}

/// Approves a business's KYB as `actor` (`api admin business approve-kyb`), recorded in the
/// audit log in the same transaction; false when there is no such business.
pub async fn approve_kyb_by(
    db: &DatabaseConnection,
    actor: &Actor,
    id: &BusinessId,
) -> Result<bool, DbErr> {
    let txn = db.begin().await?;
    if !set_kyb(&txn, id, KybStatus::Approved).await? {
        return Ok(false);
    }
    audit::record(&txn, actor, Entry::new(id, AuditAction::KybApproved), now()).await?;
    txn.commit().await?;
    Ok(true)
}

/// Sets the webhook URL of one mode; false when there is no such business.
pub async fn set_webhook_url<C: ConnectionTrait>(
    db: &C,
    id: &BusinessId,
    mode: Mode,
    url: &str,
) -> Result<bool, DbErr> {
    let res = business_mode::Entity::update_many()
        .col_expr(business_mode::Column::WebhookUrl, url.into())
        .col_expr(business_mode::Column::UpdatedAt, now().into())
        .filter(Tenant::new(id, mode).filter::<business_mode::Column>())
        .exec(db)
        .await?;
    Ok(res.rows_affected == 1)
}

/// Sets the webhook URL of one mode (already checked by `webhook_url::check`) and records who
/// did; false when there is no such business.
pub async fn set_webhook_url_by(
    db: &DatabaseConnection,
    actor: &Actor,
    id: &BusinessId,
    mode: Mode,
    url: &str,
) -> Result<bool, DbErr> {
    let txn = db.begin().await?;
    if !set_webhook_url(&txn, id, mode, url).await? {
        return Ok(false);
    }
    let entry = Entry::new(id, AuditAction::WebhookUrlSet)
        .mode(mode)
        .target(url);
    audit::record(&txn, actor, entry, now()).await?;
    txn.commit().await?;
    Ok(true)
}

/// The version of a mode's webhook secret a page was shown with: a digest of its sealed form
/// (which tells nothing about the secret), changed by every rotation.
pub fn secret_version(row: &business_mode::Model) -> String {
    domain::keys::sha256_hex(&row.webhook_secret_enc)[..16].to_owned()
}

/// A mode's settings (webhook URL, sealed secrets), if the business exists.
pub async fn mode_settings<C: ConnectionTrait>(
    db: &C,
    id: &BusinessId,
    mode: Mode,
) -> Result<Option<business_mode::Model>, DbErr> {
    business_mode::Entity::find_by_id((id.clone(), mode))
        .one(db)
        .await
}

#[derive(Debug)]
pub enum Rotation {
    /// The new secret, shown this once.
    Rotated(String),
    /// The secret was not the version expected (rotated meanwhile, or a form sent again):
    /// nothing changed.
    Stale,
}

/// Issues a new webhook secret as an operator (`api admin webhook rotate-secret`); the old one
/// keeps signing beside it for `overlap`.
pub async fn rotate_webhook_secret(
    db: &DatabaseConnection,
    cipher: &Cipher,
    id: &BusinessId,
    mode: Mode,
    overlap: Duration,
) -> Result<Option<String>, DbErr> {
    Ok(
        match rotate_webhook_secret_by(db, cipher, &Actor::operator(), id, mode, overlap, None)
            .await?
        {
            Some(Rotation::Rotated(secret)) => Some(secret),
            Some(Rotation::Stale) | None => None,
        },
    )
}

/// The one implementation of a rotation: a new secret, the old one signing beside it for
/// `overlap`, when the current secret is still `expected_version` (if given), recorded in the
/// audit log in the same transaction. None when there is no such business.
pub async fn rotate_webhook_secret_by(
    db: &DatabaseConnection,
    cipher: &Cipher,
    actor: &Actor,
    id: &BusinessId,
    mode: Mode,
    overlap: Duration,
    expected_version: Option<&str>,
) -> Result<Option<Rotation>, DbErr> {
    let txn = db.begin().await?;
    // Locked: two rotations at once would each print a secret, and only one would take effect.
    let Some(row) = business_mode::Entity::find_by_id((id.clone(), mode))
        .lock_exclusive()
        .one(&txn)
        .await?
    else {
        return Ok(None);
    };
    if expected_version.is_some_and(|v| v != secret_version(&row)) {
        return Ok(Some(Rotation::Stale));
    }
    let secret = generate_webhook_secret();
    let at = now();
    let mut active: business_mode::ActiveModel = row.clone().into();
    active.previous_webhook_secret_enc = Set(Some(row.webhook_secret_enc));
    active.previous_secret_expires_at = Set(Some(at + overlap));
    active.webhook_secret_enc = Set(cipher.encrypt(&secret, &webhook_secret_context(id, mode)));
    active.updated_at = Set(at);
    active.update(&txn).await?;
    let entry = Entry::new(id, AuditAction::WebhookSecretRotated)
        .mode(mode)
        .detail(format!(
            "the previous secret signs beside the new one until {}",
            domain::time::rfc3339(&(at + overlap))
        ));
    audit::record(&txn, actor, entry, at).await?;
    txn.commit().await?;
    Ok(Some(Rotation::Rotated(secret)))
}

/// The webhook URL configured for a business's mode, if any.
pub async fn webhook_url<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
) -> Result<Option<String>, DbErr> {
    Ok(business_mode::Entity::find()
        .select_only()
        .column(business_mode::Column::WebhookUrl)
        .filter(Tenant::new(business_id, mode).filter::<business_mode::Column>())
        .into_tuple::<Option<String>>()
        .one(db)
        .await?
        .flatten()
        .filter(|url| !url.is_empty()))
}
