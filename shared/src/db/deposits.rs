//! Deposits: a provider transaction matched to an account and recorded exactly once, whatever
//! path brought it (a notification, a recheck) and however many times.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, TransactionTrait,
};

use super::entities::{deposit, provider_notification, virtual_account};
use crate::providers::RemoteTransaction;
use crate::views::{AccountView, DepositView};
use domain::ids::new_id;
use domain::{AccountStatus, Bank, DepositSource, DepositStatus, EventType, Mode};

pub use deposit::Model as Deposit;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Notification,
    /// Found by this recheck.
    Recheck(String),
}

impl Source {
    fn kind(&self) -> DepositSource {
        match self {
            Source::Notification => DepositSource::Notification,
            Source::Recheck(_) => DepositSource::Recheck,
        }
    }

    fn recheck_id(&self) -> Option<String> {
        match self {
            Source::Notification => None,
            Source::Recheck(id) => Some(id.clone()),
        }
    }
}

#[derive(Debug)]
pub enum Recorded {
    /// A new deposit, announced by its event.
    New(Box<Deposit>),
    /// This transaction was recorded before: nothing changed.
    Duplicate,
    /// No account of this bank and mode has that number.
    Unmatched,
}

/// Records a transaction in one transaction with its event: `credited` on an active account,
/// `flagged` on a deactivated one. The unique (mode, bank, reference) index makes a second copy
/// a no-op even when copies race.
pub async fn record(
    db: &DatabaseConnection,
    mode: Mode,
    bank: Bank,
    tx: &RemoteTransaction,
    source: Source,
    now: DateTime<Utc>,
) -> Result<Recorded, DbErr> {
    let txn = db.begin().await?;
    let outcome = record_in(&txn, mode, bank, tx, &source, now).await?;
    txn.commit().await?;
    Ok(outcome)
}

async fn record_in<C: ConnectionTrait>(
    db: &C,
    mode: Mode,
    bank: Bank,
    tx: &RemoteTransaction,
    source: &Source,
    now: DateTime<Utc>,
) -> Result<Recorded, DbErr> {
    let Some(account) = virtual_account::Entity::find()
        .filter(virtual_account::Column::Mode.eq(mode))
        .filter(virtual_account::Column::Bank.eq(bank))
        .filter(virtual_account::Column::AccountNumber.eq(tx.account_number.as_str()))
        .one(db)
        .await?
    else {
        return Ok(Recorded::Unmatched);
    };
    let status = if account.status == AccountStatus::Active {
        DepositStatus::Credited
    } else {
        // Deactivated (or any other state that should not take money): never lost, never credited.
        DepositStatus::Flagged
    };
    let row = deposit::Model {
        id: new_id("dep"),
        account_id: account.id.clone(),
        business_id: account.business_id.clone(),
        mode,
        bank,
        status,
        amount: tx.amount,
        currency: tx.currency.clone(),
        provider_reference: tx.reference.clone(),
        sender_name: tx.sender_name.clone(),
        sender_account_number: tx.sender_account_number.clone(),
        sender_bank_name: tx.sender_bank_name.clone(),
        narration: tx.narration.clone(),
        source: source.kind(),
        recheck_id: source.recheck_id(),
        received_at: tx.paid_at,
        created_at: now,
    };
    let inserted = deposit::Entity::insert(deposit::ActiveModel {
        id: Set(row.id.clone()),
        account_id: Set(row.account_id.clone()),
        business_id: Set(row.business_id.clone()),
        mode: Set(row.mode),
        bank: Set(row.bank),
        status: Set(row.status),
        amount: Set(row.amount),
        currency: Set(row.currency.clone()),
        provider_reference: Set(row.provider_reference.clone()),
        sender_name: Set(row.sender_name.clone()),
        sender_account_number: Set(row.sender_account_number.clone()),
        sender_bank_name: Set(row.sender_bank_name.clone()),
        narration: Set(row.narration.clone()),
        source: Set(row.source),
        recheck_id: Set(row.recheck_id.clone()),
        received_at: Set(row.received_at),
        created_at: Set(row.created_at),
    })
    .on_conflict(
        OnConflict::columns([
            deposit::Column::Mode,
            deposit::Column::Bank,
            deposit::Column::ProviderReference,
        ])
        .do_nothing()
        .to_owned(),
    )
    .exec_without_returning(db)
    .await?;
    if inserted == 0 {
        return Ok(Recorded::Duplicate);
    }
    let mut data = DepositView::from(&row);
    data.account = Some(AccountView::from(&account));
    let event_type = match status {
        DepositStatus::Credited => EventType::DepositReceived,
        DepositStatus::Flagged => EventType::DepositFlagged,
    };
    super::events::record(db, &account.business_id, mode, event_type, &data, now).await?;
    Ok(Recorded::New(Box::new(row)))
}

/// Stores a verified notification and records its transaction, in one transaction: once this
/// returns, the provider may be told 200.
pub async fn accept_notification(
    db: &DatabaseConnection,
    mode: Mode,
    bank: Bank,
    body: &str,
    transaction: Option<&RemoteTransaction>,
    now: DateTime<Utc>,
) -> Result<(String, Recorded), DbErr> {
    let txn = db.begin().await?;
    let recorded = match transaction {
        Some(tx) => record_in(&txn, mode, bank, tx, &Source::Notification, now).await?,
        None => Recorded::Duplicate,
    };
    let (outcome, deposit_id) = match (&recorded, transaction) {
        (_, None) => ("ignored", None),
        (Recorded::New(d), _) => ("recorded", Some(d.id.clone())),
        (Recorded::Duplicate, _) => ("duplicate", None),
        (Recorded::Unmatched, _) => ("unmatched", None),
    };
    let id = new_id("ntf");
    provider_notification::Entity::insert(provider_notification::ActiveModel {
        id: Set(id.clone()),
        bank: Set(bank),
        mode: Set(mode),
        body: Set(body.to_owned()),
        provider_reference: Set(transaction.map(|t| t.reference.clone())),
        outcome: Set(outcome.to_owned()),
        deposit_id: Set(deposit_id),
        received_at: Set(now),
    })
    .exec_without_returning(&txn)
    .await?;
    txn.commit().await?;
    Ok((id, recorded))
}

/// Keeps a signed notification that could not be read as one (outcome `invalid`), for operators.
pub async fn keep_invalid_notification(
    db: &DatabaseConnection,
    mode: Mode,
    bank: Bank,
    body: &str,
    now: DateTime<Utc>,
) -> Result<String, DbErr> {
    let id = new_id("ntf");
    provider_notification::Entity::insert(provider_notification::ActiveModel {
        id: Set(id.clone()),
        bank: Set(bank),
        mode: Set(mode),
        body: Set(body.to_owned()),
        provider_reference: Set(None),
        outcome: Set("invalid".to_owned()),
        deposit_id: Set(None),
        received_at: Set(now),
    })
    .exec_without_returning(db)
    .await?;
    Ok(id)
}

/// How many deposits a recheck recorded (however many runs it took).
pub async fn found_by_recheck(db: &DatabaseConnection, recheck_id: &str) -> Result<u64, DbErr> {
    deposit::Entity::find()
        .filter(deposit::Column::RecheckId.eq(recheck_id))
        .count(db)
        .await
}

/// An account's deposits, newest first.
pub async fn list(
    db: &DatabaseConnection,
    account_id: &str,
    page: u64,
    page_size: u64,
) -> Result<(Vec<Deposit>, u64), DbErr> {
    let select = deposit::Entity::find().filter(deposit::Column::AccountId.eq(account_id));
    let total = select.clone().count(db).await?;
    let rows = select
        .order_by_desc(deposit::Column::CreatedAt)
        .order_by_desc(deposit::Column::Id)
        .offset((page - 1) * page_size)
        .limit(page_size)
        .all(db)
        .await?;
    Ok((rows, total))
}
