//! Re-encrypting stored secrets with the current key after a key rotation, so that the previous
//! key can be retired: every BVN/NIN, every webhook secret (current and previous) and every
//! dashboard user's TOTP secret (enrolled or pending) sealed with another key is decrypted and
//! sealed again.
//!
//! Safe beside running processes and safe to run again or to kill half-way: each value is
//! replaced only if it still holds what was read (compare-and-set), so a concurrent secret
//! rotation wins, and a value done is never undone.

use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};
use serde::Serialize;

use super::accounts::identity_context;
use super::businesses::webhook_secret_context;
use super::entities::{business_mode, user, virtual_account};
use super::users::totp_context;
use crate::crypto::Cipher;

const BATCH: u64 = 500;

/// What a run did (or, with `dry_run`, would do).
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The key everything is now sealed with.
    pub key_id: String,
    /// Account identities (BVN/NIN) sealed again.
    pub identities: u64,
    /// Webhook secrets (current or previous) sealed again.
    pub webhook_secrets: u64,
    /// Dashboard users' TOTP secrets (enrolled or being enrolled) sealed again.
    pub totp_secrets: u64,
    /// Values that changed under this run (a rotation beside it); run again to finish them.
    pub skipped: u64,
    /// Values no configured key opens, by row: `va_…` or `<business>:<mode>`. They stay as they
    /// are; the key that sealed them must come back into `VAS_CRYPTO__PREVIOUS_KEYS` to read them.
    pub unreadable: Vec<String>,
}

impl Report {
    /// True when every stored value is sealed with the current key.
    pub fn complete(&self) -> bool {
        self.skipped == 0 && self.unreadable.is_empty()
    }
}

/// Seals every stored secret that is not sealed with `cipher`'s current key with it.
pub async fn run<C: ConnectionTrait>(
    db: &C,
    cipher: &Cipher,
    dry_run: bool,
) -> Result<Report, DbErr> {
    let mut report = Report {
        key_id: cipher.key_id().to_owned(),
        ..Report::default()
    };
    identities(db, cipher, dry_run, &mut report).await?;
    webhook_secrets(db, cipher, dry_run, &mut report).await?;
    totp_secrets(db, cipher, dry_run, &mut report).await?;
    Ok(report)
}

async fn identities<C: ConnectionTrait>(
    db: &C,
    cipher: &Cipher,
    dry_run: bool,
    report: &mut Report,
) -> Result<(), DbErr> {
    use virtual_account::Column as Col;
    let current = format!("{}%", cipher.current_prefix());
    let mut after = String::new();
    loop {
        // Keyset pages over stale rows only: a page's rows leave the set as they are done, and
        // `after` skips the ones that cannot be (unreadable, or skipped).
        let rows: Vec<(String, String)> = virtual_account::Entity::find()
            .select_only()
            .column(Col::Id)
            .column(Col::IdentityEnc)
            .filter(Col::Id.gt(after.as_str()))
            .filter(Col::IdentityEnc.not_like(current.as_str()))
            .order_by_asc(Col::Id)
            .limit(BATCH)
            .into_tuple()
            .all(db)
            .await?;
        let Some((last, _)) = rows.last() else {
            return Ok(());
        };
        after = last.clone();
        for (id, sealed) in rows {
            let resealed = match cipher.reseal(&sealed, &identity_context(&id)) {
                Ok(Some(resealed)) => resealed,
                Ok(None) => continue,
                Err(_) => {
                    report.unreadable.push(id);
                    continue;
                }
            };
            if dry_run {
                report.identities += 1;
                continue;
            }
            let replaced = virtual_account::Entity::update_many()
                .col_expr(Col::IdentityEnc, Expr::value(resealed))
                .filter(Col::Id.eq(id.as_str()))
                .filter(Col::IdentityEnc.eq(sealed.as_str()))
                .exec(db)
                .await?
                .rows_affected;
            tally(replaced, &mut report.identities, &mut report.skipped);
        }
    }
}

async fn webhook_secrets<C: ConnectionTrait>(
    db: &C,
    cipher: &Cipher,
    dry_run: bool,
    report: &mut Report,
) -> Result<(), DbErr> {
    use business_mode::Column as Col;
    // One row per business and mode: few enough to read whole.
    let rows = business_mode::Entity::find()
        .order_by_asc(Col::BusinessId)
        .order_by_asc(Col::Mode)
        .all(db)
        .await?;
    for row in rows {
        let label = format!("{}:{}", row.business_id, row.mode);
        let context = webhook_secret_context(&row.business_id, row.mode);
        let columns = [
            (Col::WebhookSecretEnc, Some(row.webhook_secret_enc.as_str())),
            (
                Col::PreviousWebhookSecretEnc,
                row.previous_webhook_secret_enc.as_deref(),
            ),
        ];
        for (column, sealed) in columns {
            let Some(sealed) = sealed else { continue };
            let resealed = match cipher.reseal(sealed, &context) {
                Ok(Some(resealed)) => resealed,
                Ok(None) => continue,
                Err(_) => {
                    report.unreadable.push(label.clone());
                    continue;
                }
            };
            if dry_run {
                report.webhook_secrets += 1;
                continue;
            }
            let replaced = business_mode::Entity::update_many()
                .col_expr(column, Expr::value(resealed))
                .filter(Col::BusinessId.eq(row.business_id.as_str()))
                .filter(Col::Mode.eq(row.mode))
                .filter(column.eq(sealed))
                .exec(db)
                .await?
                .rows_affected;
            tally(replaced, &mut report.webhook_secrets, &mut report.skipped);
        }
    }
    Ok(())
}

async fn totp_secrets<C: ConnectionTrait>(
    db: &C,
    cipher: &Cipher,
    dry_run: bool,
    report: &mut Report,
) -> Result<(), DbErr> {
    use user::Column as Col;
    // The people of the businesses: few enough to read whole.
    let rows = user::Entity::find()
        .filter(
            sea_orm::Condition::any()
                .add(Col::TotpSecretEnc.is_not_null())
                .add(Col::TotpPendingEnc.is_not_null()),
        )
        .order_by_asc(Col::Id)
        .all(db)
        .await?;
    for row in rows {
        let context = totp_context(&row.id);
        let columns = [
            (Col::TotpSecretEnc, row.totp_secret_enc.as_deref()),
            (Col::TotpPendingEnc, row.totp_pending_enc.as_deref()),
        ];
        for (column, sealed) in columns {
            let Some(sealed) = sealed else { continue };
            let resealed = match cipher.reseal(sealed, &context) {
                Ok(Some(resealed)) => resealed,
                Ok(None) => continue,
                Err(_) => {
                    report.unreadable.push(row.id.clone());
                    continue;
                }
            };
            if dry_run {
                report.totp_secrets += 1;
                continue;
            }
            let replaced = user::Entity::update_many()
                .col_expr(column, Expr::value(resealed))
                .filter(Col::Id.eq(row.id.as_str()))
                .filter(column.eq(sealed))
                .exec(db)
                .await?
                .rows_affected;
            tally(replaced, &mut report.totp_secrets, &mut report.skipped);
        }
    }
    Ok(())
}

/// Counts one compare-and-set: done when it replaced the value, skipped when the value had
/// changed since it was read.
fn tally(replaced: u64, done: &mut u64, skipped: &mut u64) {
    if replaced == 1 {
        *done += 1;
    } else {
        *skipped += 1;
    }
}
