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
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use serde::Serialize;

use super::accounts::identity_context;
use super::businesses::webhook_secret_context;
use super::users::totp_context;
use crate::tenant::Tenant;
use crypto::Cipher;
use entities::{business_mode, user, virtual_account};

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
    let mut pass = Pass {
        cipher,
        dry_run,
        report: Report {
            key_id: cipher.key_id().to_owned(),
            ..Report::default()
        },
    };
    identities(db, &mut pass).await?;
    webhook_secrets(db, &mut pass).await?;
    totp_secrets(db, &mut pass).await?;
    Ok(pass.report)
}

/// One run: the key, whether it writes, and what it found so far.
struct Pass<'a> {
    cipher: &'a Cipher,
    dry_run: bool,
    report: Report,
}

/// One stored secret: the row it is in, its column, the sealed text read from it, the context it
/// is sealed with, and how the report names its row.
struct Stored<'s, E: EntityTrait> {
    row: Condition,
    column: E::Column,
    sealed: &'s str,
    context: &'s str,
    label: &'s str,
}

impl Pass<'_> {
    /// Seals one value again when another key sealed it, and writes it back only if it still
    /// holds what was read (compare-and-set): done when it did, skipped when the value changed
    /// since it was read. `count` is the report's tally of this kind of secret.
    async fn reseal<E: EntityTrait, C: ConnectionTrait>(
        &mut self,
        db: &C,
        stored: Stored<'_, E>,
        count: fn(&mut Report) -> &mut u64,
    ) -> Result<(), DbErr> {
        let resealed = match self.cipher.reseal(stored.sealed, stored.context) {
            Ok(Some(resealed)) => resealed,
            Ok(None) => return Ok(()),
            Err(_) => {
                self.report.unreadable.push(stored.label.to_owned());
                return Ok(());
            }
        };
        if !self.dry_run {
            let replaced = E::update_many()
                .col_expr(stored.column, Expr::value(resealed))
                .filter(stored.row)
                .filter(stored.column.eq(stored.sealed))
                .exec(db)
                .await?
                .rows_affected;
            if replaced != 1 {
                self.report.skipped += 1;
                return Ok(());
            }
        }
        *count(&mut self.report) += 1;
        Ok(())
    }
}

async fn identities<C: ConnectionTrait>(db: &C, pass: &mut Pass<'_>) -> Result<(), DbErr> {
    use virtual_account::Column as Col;
    let current = format!("{}%", pass.cipher.current_prefix());
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
            let stored = Stored::<virtual_account::Entity> {
                row: Condition::all().add(Col::Id.eq(id.as_str())),
                column: Col::IdentityEnc,
                sealed: &sealed,
                context: &identity_context(&id),
                label: &id,
            };
            pass.reseal(db, stored, |r| &mut r.identities).await?;
        }
    }
}

async fn webhook_secrets<C: ConnectionTrait>(db: &C, pass: &mut Pass<'_>) -> Result<(), DbErr> {
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
            let stored = Stored::<business_mode::Entity> {
                row: Condition::all().add(Tenant::new(&row.business_id, row.mode).filter::<Col>()),
                column,
                sealed,
                context: &context,
                label: &label,
            };
            pass.reseal(db, stored, |r| &mut r.webhook_secrets).await?;
        }
    }
    Ok(())
}

async fn totp_secrets<C: ConnectionTrait>(db: &C, pass: &mut Pass<'_>) -> Result<(), DbErr> {
    use user::Column as Col;
    // The people of the businesses: few enough to read whole.
    let rows = user::Entity::find()
        .filter(
            Condition::any()
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
            let stored = Stored::<user::Entity> {
                row: Condition::all().add(Col::Id.eq(row.id.as_str())),
                column,
                sealed,
                context: &context,
                label: &row.id,
            };
            pass.reseal(db, stored, |r| &mut r.totp_secrets).await?;
        }
    }
    Ok(())
}
