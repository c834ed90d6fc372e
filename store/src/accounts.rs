//! Accounts: the create transaction (idempotency, reference, rolling-hour limit, insert, outbox),
//! listing, reading and deactivation.

use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::{Expr, Func, LikeExpr};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, Condition, ConnectionTrait,
    DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, EntityTrait, QueryFilter,
    QuerySelect, TransactionSession, TransactionTrait,
};

use super::audit::{self, Actor};
use super::idempotency::{self, Claim, Scope, StoredKey};
use super::outbox::{Mark, enqueue};
use super::paging;
use super::tallies;
use crypto::Cipher;
use domain::ids::{AccountId, BusinessId, JobId, KeyId};
use domain::provider::OpenAccount;
use domain::{AccountStatus, AuditAction, EventType, IdentityNumber, Mode, NewAccount};
use entities::{account_number, account_state, business_mode, idempotency_key, virtual_account};
use jobs::ProvisioningJob;

use crate::tenant::Tenant;
use domain::provider::ProvisioningOutcome;
pub use virtual_account::Model as Account;

pub use super::tallies::LIMIT_WINDOW;

mod list;
pub(crate) mod numbered;
mod one_statement;
mod settle;
#[cfg(test)]
mod side_rows;

pub use list::*;
pub use settle::*;

/// Who is creating, and under which key.
pub struct CreateRequest<'a> {
    pub business_id: &'a BusinessId,
    pub business_name: &'a str,
    pub mode: Mode,
    /// The id (`key_…`) of the secret key making the request: the new account records it.
    pub key_id: &'a KeyId,
    pub idempotency_key: &'a str,
    /// The canonical body's keyed digest: the same key with another body is refused.
    pub request: &'a crypto::RequestDigest,
    pub account: &'a NewAccount,
    pub limit_per_hour: u32,
    /// How long the caller may spend asking the provider before the job takes over.
    pub provider_grace: Duration,
}

/// Where the caller stands against the hourly limit after this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitState {
    pub limit: u32,
    pub remaining: u32,
    /// Seconds until the oldest counted creation leaves the window.
    pub reset_secs: u64,
}

#[derive(Debug)]
pub enum CreateOutcome {
    /// A new pending account, its key still in flight: the caller asks the provider, then calls
    /// `settle_creation`. If the caller dies first, the job (due shortly) finishes the work.
    Started {
        account: Account,
        job_id: JobId,
    },
    /// The key was seen before with this body: the first answer's status, the account as it is now.
    Replayed {
        account: Account,
        status: u16,
    },
    /// The customerReference already has a pending or active account.
    ReferenceHit {
        account: Account,
    },
    /// The key was seen before with another body.
    KeyReused,
    /// The key's first request has not finished.
    KeyInFlight,
    RateLimited {
        retry_after_secs: u64,
    },
}

/// One short transaction, in the order that keeps the business-and-mode row lock shortest: the
/// key is claimed (a request with the same key waits for this transaction, then finds the key);
/// the account is written unless its customerReference already has a live account (the unique
/// index `virtual_accounts_live_reference_key` decides, so two creations with one reference
/// cannot both win); its provisioning job; then one statement locks the row and counts the
/// creation in the rolling hour, and the transaction commits (or rolls back everything over the
/// limit).
/// Creations of one business and mode, in any process, queue only for that last statement and
/// the commit.
pub async fn create(
    db: &DatabaseConnection,
    cipher: &Cipher,
    req: &CreateRequest<'_>,
    now: DateTime<Utc>,
) -> Result<(CreateOutcome, LimitState), DbErr> {
    if db.get_database_backend() == DbBackend::Postgres
        && let Some(created) = one_statement::create(db, cipher, req, now).await?
    {
        return Ok(created);
    }
    let txn = db.begin().await?;
    let key = idempotency_of(req);
    let account_id = AccountId::new();
    if let Claim::Seen(existing) = key.claim(&txn, Some(&account_id), now).await? {
        let outcome = if is_settled(&existing, req, now) {
            replay(&txn, req, existing).await?
        } else if !key.same_request(&existing) {
            CreateOutcome::KeyReused
        } else {
            CreateOutcome::KeyInFlight
        };
        let limit = limit_state(&txn, req).await?;
        txn.commit().await?;
        return Ok((outcome, limit));
    }

    let Some(account) = insert_account(&txn, cipher, req, account_id).await? else {
        let reference = req
            .account
            .customer_reference
            .as_deref()
            .unwrap_or_default();
        let account = find_live_by_reference(&txn, req, reference)
            .await?
            .ok_or_else(|| DbErr::Custom("a reference conflicted with no live account".into()))?;
        key.complete(&txn, 200, &account.id, now).await?;
        let limit = limit_state(&txn, req).await?;
        txn.commit().await?;
        return Ok((CreateOutcome::ReferenceHit { account }, limit));
    };
    // The stamp is the database's (a long wait for a connection must not leave the provisioning
    // job due before the handler's own bank call has had its full timeout), so creation stamps
    // and the rolling hour follow one clock however many api instances, with whatever clocks,
    // create at once.
    let now = account.created_at;
    let job_id = enqueue(
        &txn,
        &ProvisioningJob::Provision {
            account_id: account.id.clone(),
        },
        now + req.provider_grace,
        now,
    )
    .await?;
    let counted = tallies::count_creation(&txn, req.business_id, req.mode, now)
        .await?
        .ok_or_else(|| {
            DbErr::Custom("the creation transaction outlived the rolling hour's mark".into())
        })?;
    let limit = limit_of(req, counted.in_window, counted.oldest, now);
    if counted.in_window > u64::from(req.limit_per_hour) {
        // Nothing stays written: rolling back forgets the key too, so it may be retried.
        txn.rollback().await?;
        return Ok((
            CreateOutcome::RateLimited {
                retry_after_secs: limit.reset_secs.max(1),
            },
            LimitState {
                remaining: 0,
                ..limit
            },
        ));
    }
    txn.commit().await?;
    Ok((CreateOutcome::Started { account, job_id }, limit))
}

/// A key whose first request finished, or was abandoned so long ago (its process died between
/// the two transactions) that the account's own state now answers for it.
fn is_settled(key: &StoredKey, req: &CreateRequest<'_>, now: DateTime<Utc>) -> bool {
    let abandoned_after = req.provider_grace + Duration::seconds(30);
    idempotency::is_completed(key)
        || (key.account_id.is_some() && key.updated_at < now - abandoned_after)
}

/// The request's key, in the accounts namespace.
fn idempotency_of<'a>(req: &CreateRequest<'a>) -> idempotency::Key<'a> {
    idempotency::Key {
        business_id: req.business_id,
        mode: req.mode,
        scope: Scope::Accounts,
        key: req.idempotency_key,
        request: req.request,
    }
}

pub(crate) async fn lock_business_mode(
    txn: &DatabaseTransaction,
    business_id: &BusinessId,
    mode: Mode,
) -> Result<(), DbErr> {
    // FOR UPDATE on PostgreSQL; SQLite has one writer at a time already.
    business_mode::Entity::find_by_id((business_id.to_owned(), mode))
        .lock_exclusive()
        .one(txn)
        .await?
        .ok_or_else(|| DbErr::RecordNotFound(format!("business {business_id}")))?;
    Ok(())
}

async fn replay<C: ConnectionTrait>(
    db: &C,
    req: &CreateRequest<'_>,
    key: StoredKey,
) -> Result<CreateOutcome, DbErr> {
    if !req.request.matches(&key.request_hash) {
        return Ok(CreateOutcome::KeyReused);
    }
    let account_id = key
        .account_id
        .clone()
        .ok_or_else(|| DbErr::Custom("completed idempotency key without account".into()))?;
    let account = virtual_account::Entity::find_by_id(AccountId::unchecked(account_id))
        .one(db)
        .await?
        .ok_or_else(|| DbErr::Custom("idempotency key names a missing account".into()))?;
    let status = idempotency::completed_status(&key).unwrap_or_else(|| status_for(&account));
    Ok(CreateOutcome::Replayed { account, status })
}

async fn find_live_by_reference<C: ConnectionTrait>(
    db: &C,
    req: &CreateRequest<'_>,
    reference: &str,
) -> Result<Option<Account>, DbErr> {
    live_by_reference(req, reference).one(db).await
}

/// The caller's live (pending or active) account with this customerReference.
fn live_by_reference(
    req: &CreateRequest<'_>,
    reference: &str,
) -> sea_orm::Select<virtual_account::Entity> {
    use sea_orm::sea_query::{Alias, ExprTrait};
    // The business and mode opaque to the planner: see `crate::eq_opaque`.
    virtual_account::Entity::find()
        .filter(super::eq_opaque(
            virtual_account::Column::BusinessId,
            req.business_id,
        ))
        .filter(super::eq_opaque(virtual_account::Column::Mode, req.mode))
        // The live-reference index's key (the reference while the account is pending or
        // active) and, implied by it, the index's predicate.
        .filter(
            Expr::col((virtual_account::Entity, Alias::new(LIVE_REFERENCE_COLUMN))).eq(reference),
        )
}

/// The values [`live_by_reference`] binds as the select of `EXISTS (SELECT 1 …)`, in its order
/// (a [`super::Rendered`] statement).
fn push_live_by_reference_values(
    into: &mut Vec<sea_orm::Value>,
    req: &CreateRequest<'_>,
    reference: &str,
) {
    into.extend([
        1i32.into(),
        req.business_id.into(),
        req.mode.into(),
        reference.into(),
    ]);
}

/// The limit state now, for an answer that creates nothing (read without the lock).
async fn limit_state<C: ConnectionTrait>(
    db: &C,
    req: &CreateRequest<'_>,
) -> Result<LimitState, DbErr> {
    let tally = tallies::peek(db, req.business_id, req.mode).await?;
    let window = tallies::window(db, req.business_id, req.mode, &tally).await?;
    Ok(limit_of(req, window.in_window, window.oldest, tally.now))
}

/// Where a caller stands against the limit with `in_window` creations in the rolling hour up to
/// `now`, the oldest stamped `oldest`.
fn limit_of(
    req: &CreateRequest<'_>,
    in_window: u64,
    oldest: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> LimitState {
    let reset_secs = oldest
        .map(|t| ((t + LIMIT_WINDOW - now).num_milliseconds().max(0) as u64).div_ceil(1000))
        .unwrap_or(0);
    let limit = req.limit_per_hour;
    LimitState {
        limit,
        remaining: limit.saturating_sub(in_window.min(u64::from(u32::MAX)) as u32),
        reset_secs,
    }
}

pub(crate) fn identity_context(account_id: &str) -> String {
    format!("{account_id}:identity")
}

/// Writes the new account, stamped by the database's clock (`clock_timestamp()` on PostgreSQL;
/// SQLite serves one process, whose clock it is), unless its customerReference already has a
/// live account: then nothing is written (None), the unique index deciding under any concurrency.
async fn insert_account(
    txn: &DatabaseTransaction,
    cipher: &Cipher,
    req: &CreateRequest<'_>,
    id: AccountId,
) -> Result<Option<Account>, DbErr> {
    let backend = txn.get_database_backend();
    let insert = account_insert(backend, &account_row(cipher, req, id), None)?;
    virtual_account::Entity::find()
        .from_raw_sql(backend.build(&insert))
        .one(txn)
        .await
}

/// The new account's row as [`account_insert`] writes it (its stamps are the database's).
fn account_row(
    cipher: &Cipher,
    req: &CreateRequest<'_>,
    id: AccountId,
) -> virtual_account::ActiveModel {
    let a = req.account;
    virtual_account::ActiveModel {
        id: Set(id.clone()),
        business_id: Set(req.business_id.to_owned()),
        mode: Set(req.mode),
        status: Set(AccountStatus::Pending),
        bank: Set(a.preferred_bank),
        account_number: Set(None),
        account_name: Set(format!("{}/{}", req.business_name, a.customer_name)),
        customer_name: Set(a.customer_name.clone()),
        customer_email: Set(a.customer_email.clone()),
        customer_phone: Set(a.customer_phone.clone()),
        customer_reference: Set(a.customer_reference.clone()),
        identity_type: Set(a.identity_type),
        identity_enc: Set(cipher.encrypt(a.identity_number.expose(), &identity_context(&id))),
        failure_reason: Set(None),
        deactivation_reason: Set(None),
        activated_at: Set(None),
        deactivated_at: Set(None),
        // One more bound value of the same insert: no statement of its own.
        created_by_key_id: Set(Some(req.key_id.to_owned())),
        ..Default::default()
    }
}

/// The columns [`account_insert`] stamps with the database's clock rather than binding.
fn stamped(col: &virtual_account::Column) -> bool {
    matches!(
        col,
        virtual_account::Column::CreatedAt | virtual_account::Column::UpdatedAt
    )
}

/// [`insert_account`]'s statement, returning the row written; with `only_with`, it writes only
/// when that table of the same `WITH` has a row (PostgreSQL). Its values are the row's, but
/// the stamps ([`stamped`]).
fn account_insert(
    backend: DbBackend,
    row: &virtual_account::ActiveModel,
    only_with: Option<&str>,
) -> Result<sea_orm::sea_query::InsertStatement, DbErr> {
    use sea_orm::sea_query::{Alias, OnConflict, Query};
    // One reading of the clock for both stamps: `INSERT … SELECT …, stamp.t, stamp.t FROM
    // (SELECT <clock> AS t) stamp`.
    let stamp = Query::select()
        .expr_as(super::clock_expr(backend), Alias::new("t"))
        .to_owned();
    let mut values = super::row_values(row, |col| {
        stamped(col).then(|| Expr::col((Alias::new("stamp"), Alias::new("t"))))
    })?;
    values.from_subquery(stamp, Alias::new("stamp"));
    let values = super::upsert_values(values, only_with);
    let mut insert = super::insert_select::<virtual_account::Entity>(values, "the account insert")?;
    insert
        .on_conflict(
            OnConflict::columns([
                Alias::new("business_id"),
                Alias::new("mode"),
                Alias::new(LIVE_REFERENCE_COLUMN),
            ])
            .target_and_where(Expr::cust(LIVE_REFERENCE))
            .do_nothing()
            .to_owned(),
        )
        .returning_all();
    Ok(insert)
}

/// The predicate of the unique index `virtual_accounts_live_reference_key` (m0022): a conflict
/// target names it so that only this index decides "already has a live account".
const LIVE_REFERENCE: &str = "live_reference IS NOT NULL";

/// The generated column (m0022) that holds an account's customerReference while the account is
/// pending or active, and NULL otherwise: one live account per reference is a unique index on it.
/// Not in the entity: the database alone writes it.
const LIVE_REFERENCE_COLUMN: &str = "live_reference";

/// The provider's open-account request for an account, built from its stored row alone (the
/// identity decrypted for this call only): the api's create and worker-provisioning both send
/// exactly this, so the bank is asked the same whoever asks. An identity that does not decrypt,
/// or is not a BVN/NIN, is an error (its text never holds the number).
pub fn open_request(cipher: &Cipher, account: &Account) -> Result<OpenAccount, DbErr> {
    let unreadable = |why: String| DbErr::Custom(format!("account {}: {why}", account.id));
    let identity_type = account.identity_type;
    let identity_number = reveal_identity(cipher, account)
        .map_err(|e| unreadable(format!("the identity does not decrypt: {e}")))
        .and_then(|plain| {
            IdentityNumber::parse(&plain)
                .ok_or_else(|| unreadable("the identity is not 11 digits".into()))
        })?;
    Ok(OpenAccount::new(
        &account.id,
        &account.account_name,
        &account.customer_name,
        &account.customer_email,
        &account.customer_phone,
        identity_type,
        identity_number,
    ))
}

/// The plain BVN/NIN of an account, for the provider call only.
pub fn reveal_identity(cipher: &Cipher, account: &Account) -> Result<String, crypto::CryptoError> {
    cipher.decrypt(&account.identity_enc, &identity_context(&account.id))
}

/// One business's account in one mode, or None (another business's or mode's is None too).
pub async fn find<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    id: &AccountId,
) -> Result<Option<Account>, DbErr> {
    virtual_account::Entity::find_by_id(id.clone())
        .filter(Tenant::new(business_id, mode).filter::<virtual_account::Column>())
        .one(db)
        .await
}

/// [`find`], for a deposit into the account (`simulate-deposit`): one that holds a number may be
/// as last read ([`numbered`]), since what the deposit's caller takes from it (its number, bank,
/// mode and business) never changes once it is numbered, and the deposit's statement checks the
/// rest as it locks the row.
pub async fn find_for_deposit(
    db: &DatabaseConnection,
    business_id: &BusinessId,
    mode: Mode,
    id: &AccountId,
) -> Result<Option<Account>, DbErr> {
    if let Some(account) = numbered::with_id(db, id)
        && Tenant::new(business_id, mode).holds(&account.business_id, account.mode)
    {
        return Ok(Some(Account::clone(&account)));
    }
    let found = find(db, business_id, mode, id).await?;
    if let Some(account) = &found {
        numbered::keep(db, account);
    }
    Ok(found)
}

/// Several of one business's accounts in one mode (a page of deposits names them), in one
/// query; ids of another business or mode are left out.
pub async fn find_many<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    ids: &[AccountId],
) -> Result<Vec<Account>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    virtual_account::Entity::find()
        .filter(virtual_account::Column::Id.is_in(ids.iter().cloned()))
        .filter(Tenant::new(business_id, mode).filter::<virtual_account::Column>())
        .all(db)
        .await
}

#[derive(Debug)]
pub enum DeactivateOutcome {
    Deactivated(Account),
    AlreadyDeactivated(Account),
    InvalidState(Account),
    NotFound,
}

/// Deactivates an account and queues its closing at the provider, recorded in the audit log as
/// `actor`'s, in one transaction. A repeat changes nothing and records nothing.
pub async fn deactivate(
    db: &DatabaseConnection,
    actor: &Actor,
    business_id: &BusinessId,
    mode: Mode,
    id: &AccountId,
    reason: Option<String>,
    now: DateTime<Utc>,
) -> Result<DeactivateOutcome, DbErr> {
    let txn = db.begin().await?;
    let Some(account) = virtual_account::Entity::find_by_id(id.clone())
        .filter(Tenant::new(business_id, mode).filter::<virtual_account::Column>())
        .lock_exclusive()
        .one(&txn)
        .await?
    else {
        return Ok(DeactivateOutcome::NotFound);
    };
    let status = account.status;
    if status == AccountStatus::Deactivated {
        return Ok(DeactivateOutcome::AlreadyDeactivated(account));
    }
    if !status.can_become(AccountStatus::Deactivated) {
        return Ok(DeactivateOutcome::InvalidState(account));
    }
    let mut active: virtual_account::ActiveModel = account.into();
    active.status = Set(AccountStatus::Deactivated);
    active.deactivated_at = Set(Some(now));
    active.deactivation_reason = Set(reason);
    active.updated_at = Set(now);
    let account = active.update(&txn).await?;
    tallies::status_changed(&txn, &account, status, AccountStatus::Deactivated).await?;
    record_account_event(&txn, &account, EventType::VirtualAccountDeactivated, now).await?;
    enqueue_close(&txn, &account.id, now).await?;
    let target = match &account.account_number {
        Some(number) => format!("{} ({number})", account.id),
        None => account.id.to_string(),
    };
    let mut entry = audit::Entry::new(business_id, AuditAction::AccountDeactivated)
        .mode(mode)
        .target(target);
    if let Some(reason) = &account.deactivation_reason {
        entry = entry.detail(reason.as_str());
    }
    audit::record(&txn, actor, entry, now).await?;
    txn.commit().await?;
    Ok(DeactivateOutcome::Deactivated(account))
}

/// Enqueues closing the account at its provider bank, due now: after a deactivation, and
/// whenever a bank may hold open an account the service no longer wants.
pub async fn enqueue_close<C: ConnectionTrait>(
    db: &C,
    account_id: &AccountId,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let close = ProvisioningJob::Close {
        account_id: account_id.clone(),
    };
    enqueue(db, &close, now, now).await.map(|_| ())
}

/// Forgets idempotency keys older than `keep` (at least 24 hours by contract).
pub async fn purge_idempotency_keys<C: ConnectionTrait>(
    db: &C,
    older_than: DateTime<Utc>,
) -> Result<u64, DbErr> {
    Ok(idempotency_key::Entity::delete_many()
        .filter(idempotency_key::Column::CreatedAt.lt(older_than))
        .exec(db)
        .await?
        .rows_affected)
}
