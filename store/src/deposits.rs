//! Deposits: a provider transaction matched to an account and recorded exactly once, whatever
//! path brought it (a notification, a recheck) and however many times.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction,
    DbBackend, DbErr, EntityTrait, PaginatorTrait, QueryFilter, QuerySelect, TransactionTrait,
};

use super::list_counts::{self, List};
use super::paging;
use crate::tenant::Tenant;
use domain::ids::{BusinessId, ConflictId, DepositId, NotificationId, PayoutId, RecheckId};
use domain::provider::{NotificationOutcome, RemoteTransaction};
use domain::{Bank, DepositSource, DepositStatus, EventType, Mode};
use entities::{account_number, deposit, deposit_conflict, provider_notification, virtual_account};
use views::{AccountView, DepositView};

pub use deposit::Model as Deposit;

mod one_statement;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Notification,
    /// Found by this recheck.
    Recheck(RecheckId),
}

impl Source {
    fn kind(&self) -> DepositSource {
        match self {
            Source::Notification => DepositSource::Notification,
            Source::Recheck(_) => DepositSource::Recheck,
        }
    }

    fn recheck_id(&self) -> Option<RecheckId> {
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
    let (outcome, credit) = record_in(
        &txn,
        Report {
            mode,
            bank,
            tx,
            source: &source,
        },
        now,
    )
    .await?;
    if let Some(credit) = credit {
        credit.apply(&txn).await?;
    }
    txn.commit().await?;
    Ok(outcome)
}

/// A recorded deposit's money, to enter as the last statement before its transaction commits:
/// from the credit to the commit, every deposit of the business waits for its balance row.
#[must_use = "a credited deposit's money must be entered in its transaction"]
struct Credit {
    business_id: BusinessId,
    mode: Mode,
    amount: i64,
    deposit_id: String,
}

impl Credit {
    /// The money of a new deposit: exactly once, as the deposit itself is; a flagged deposit
    /// moves none.
    fn of(deposit: &Deposit) -> Option<Credit> {
        (deposit.status == DepositStatus::Credited).then(|| Credit {
            business_id: deposit.business_id.clone(),
            mode: deposit.mode,
            amount: deposit.amount,
            deposit_id: deposit.id.to_string(),
        })
    }

    fn movement(&self) -> super::ledger::Movement<'_> {
        super::ledger::Movement {
            business_id: &self.business_id,
            mode: self.mode,
            entry_type: domain::payout::EntryType::Deposit,
            amount: self.amount,
            source_id: &self.deposit_id,
        }
    }

    async fn apply<C: ConnectionTrait>(self, db: &C) -> Result<(), DbErr> {
        super::ledger::credit(db, self.movement()).await.map(drop)
    }
}

/// A transaction a bank reported, in a mode, and how it reached us.
#[derive(Clone, Copy)]
struct Report<'a> {
    mode: Mode,
    bank: Bank,
    tx: &'a RemoteTransaction,
    source: &'a Source,
}

/// Records the transaction and its event; a credited deposit's money is left to the caller, to
/// enter last (see [`Credit`]).
async fn record_in<C: ConnectionTrait>(
    db: &C,
    report: Report<'_>,
    now: DateTime<Utc>,
) -> Result<(Recorded, Option<Credit>), DbErr> {
    let mode = report.mode;
    // Locked: a deactivation committing at the same moment is either seen whole (its
    // `deactivated_at` decides below) or waits for this deposit, never half of each.
    let Some(account) = account_for(report).lock_exclusive().one(db).await? else {
        return Ok((Recorded::Unmatched, None));
    };
    let row = deposit_row(&account, report, now);
    if !super::insert_once(db, deposit::ActiveModel::from(row.clone()), DEPOSIT_KEY).await? {
        keep_conflict(db, report, now).await?;
        return Ok((Recorded::Duplicate, None));
    }
    let (event_type, data) = announcement(&row, &account);
    super::events::record(db, &account.business_id, mode, event_type, &data, now).await?;
    let credit = Credit::of(&row);
    Ok((Recorded::New(Box::new(row)), credit))
}

/// The account a report is for: its bank and mode's account with the reported number (found
/// through `account_numbers`, the number's one index).
fn account_for(report: Report<'_>) -> sea_orm::Select<virtual_account::Entity> {
    use account_number::Column as N;
    let holder = sea_orm::sea_query::Query::select()
        .column(N::AccountId)
        .from(account_number::Entity)
        .and_where(N::Mode.eq(report.mode))
        .and_where(N::Bank.eq(report.bank))
        .and_where(N::AccountNumber.eq(report.tx.account_number.as_str()))
        .to_owned();
    virtual_account::Entity::find().filter(virtual_account::Column::Id.in_subquery(holder))
}

/// The values [`account_for`] binds, in its order (a [`super::Rendered`] statement).
fn push_account_for_values(into: &mut Vec<sea_orm::Value>, report: Report<'_>) {
    into.extend([
        report.mode.into(),
        report.bank.into(),
        report.tx.account_number.as_str().into(),
    ]);
}

/// The deposit already recorded for a report's transaction (its mode, bank and reference).
fn recorded_before(report: Report<'_>) -> sea_orm::Select<deposit::Entity> {
    deposit::Entity::find()
        .filter(deposit::Column::Mode.eq(report.mode.as_str()))
        .filter(deposit::Column::Bank.eq(report.bank.slug()))
        .filter(deposit::Column::ProviderReference.eq(report.tx.reference.as_str()))
}

/// The values [`recorded_before`] binds, in its order, as the select of `EXISTS (SELECT 1 …)` (a
/// [`super::Rendered`] statement).
fn push_recorded_before_values(into: &mut Vec<sea_orm::Value>, report: Report<'_>) {
    into.extend([
        1i32.into(),
        report.mode.as_str().into(),
        report.bank.slug().into(),
        report.tx.reference.as_str().into(),
    ]);
}

/// The unique key that records a bank's transaction once.
const DEPOSIT_KEY: [deposit::Column; 3] = [
    deposit::Column::Mode,
    deposit::Column::Bank,
    deposit::Column::ProviderReference,
];

/// The deposit a report makes on `account`: `credited` when the account was active when paid,
/// else `flagged` (paid after its deactivation: never lost, never credited).
fn deposit_row(
    account: &virtual_account::Model,
    report: Report<'_>,
    now: DateTime<Utc>,
) -> Deposit {
    let Report {
        mode,
        bank,
        tx,
        source,
    } = report;
    let credited =
        domain::account::credits_deposit(account.activated_at, account.deactivated_at, tx.paid_at);
    let status = if credited {
        DepositStatus::Credited
    } else {
        DepositStatus::Flagged
    };
    deposit::Model {
        id: DepositId::new(),
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
    }
}

/// The event announcing a new deposit, and its data (the deposit with its account).
fn announcement(row: &Deposit, account: &virtual_account::Model) -> (EventType, DepositView) {
    let mut data = DepositView::from(row);
    data.account = Some(AccountView::from(account));
    let event_type = match row.status {
        DepositStatus::Credited => EventType::DepositReceived,
        DepositStatus::Flagged => EventType::DepositFlagged,
    };
    (event_type, data)
}

/// A transaction the bank reported again with other content (amount, currency or account) under
/// a reference already recorded: the first report stands; the second is kept for operators,
/// counted and logged as an error (the reference and ids only: no names, no numbers).
async fn keep_conflict<C: ConnectionTrait>(
    db: &C,
    report: Report<'_>,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let (mode, bank, tx) = (report.mode, report.bank, report.tx);
    let Some(first) = recorded_before(report).one(db).await? else {
        return Ok(());
    };
    let account_number = virtual_account::Entity::find_by_id(first.account_id.clone())
        .one(db)
        .await?
        .and_then(|a| a.account_number);
    let same = first.amount == tx.amount
        && first.currency == tx.currency
        && account_number.as_deref() == Some(tx.account_number.as_str());
    if same {
        return Ok(());
    }
    deposit_conflict::Entity::insert(deposit_conflict::ActiveModel {
        id: Set(ConflictId::new()),
        deposit_id: Set(first.id.clone()),
        mode: Set(mode),
        bank: Set(bank),
        provider_reference: Set(tx.reference.clone()),
        source: Set(report.source.kind()),
        reported: Set(serde_json::to_string(tx).expect("transactions serialise")),
        created_at: Set(now),
    })
    .exec_without_returning(db)
    .await?;
    metrics::counter!("deposit_conflicts_total", "bank" => bank.slug()).increment(1);
    tracing::error!(
        deposit_id = %first.id,
        bank = bank.slug(),
        provider_reference = %tx.reference,
        first_amount = first.amount,
        reported_amount = tx.amount,
        "a transaction was reported again with other content; the first report stands, the conflict is kept for operators"
    );
    Ok(())
}

/// How a stored notification was handled.
#[derive(Debug)]
pub enum Accepted {
    /// Stored now, with what recording its transaction did and the outcome stored for it.
    Stored {
        id: String,
        recorded: Recorded,
        outcome: NotificationOutcome,
    },
    /// The same body from the same bank and mode was stored before (a bank's retry): nothing
    /// was done again. Its id and the outcome recorded the first time.
    Repeated {
        id: String,
        outcome: NotificationOutcome,
    },
    /// A `transfer.*` notification stored now: `recorded` (the payout moved), `duplicate`
    /// (nothing new for it) or `unmatched` (no payout of that mode has the reference, or the
    /// payout was not sent through the notifying bank: not applied either way).
    Transfer {
        id: String,
        outcome: NotificationOutcome,
        unmatched: Option<Unmatched>,
    },
}

/// A signed notification as it arrived (or a listed item a recheck keeps, see [`keep_invalid`]):
/// the mode and bank it came for, its body, and when.
#[derive(Clone, Copy, Debug)]
pub struct Incoming<'a> {
    pub mode: Mode,
    pub bank: Bank,
    pub body: &'a str,
    pub now: DateTime<Utc>,
}

/// What a verified notification announced, as far as storage acts on it.
#[derive(Clone, Copy, Debug)]
pub enum Notified<'a> {
    /// A transaction into an account; `None` (nothing storage acts on) is stored as `ignored`.
    Deposit(Option<&'a RemoteTransaction>),
    /// A transfer's outcome. `payout_bank` is the configured payout bank, the bank of a payout
    /// that has none recorded.
    Transfer {
        transfer: &'a domain::provider::RemoteTransfer,
        payout_bank: Option<Bank>,
    },
}

/// Stores a verified notification and acts on it, in one transaction: once this returns, the
/// provider may be told 200. A body stored before (same mode, bank and digest) is not stored or
/// acted on again. `known` is the account the caller read already, if any (`simulate-deposit`
/// read it to find its number): a deposit into it is not looked up again. It is used only when
/// its mode, bank and number are the transaction's, and its row is locked as it was read, so a
/// stale one costs the look-up, not the answer.
pub async fn accept(
    db: &DatabaseConnection,
    incoming: Incoming<'_>,
    notified: Notified<'_>,
    known: Option<&virtual_account::Model>,
) -> Result<Accepted, DbErr> {
    if db.get_database_backend() == DbBackend::Postgres
        && let Notified::Deposit(Some(tx)) = notified
        && let Some(accepted) = one_statement::accept_deposit(db, incoming, tx, known).await?
    {
        return Ok(accepted);
    }
    let txn = db.begin().await?;
    let id = match claim_notification(&txn, incoming).await? {
        Claim::New(id) => id,
        Claim::Seen(first) => return Ok(Accepted::repeated(first)),
    };
    let accepted = match notified {
        Notified::Deposit(transaction) => record_deposit(&txn, incoming, id, transaction).await?,
        Notified::Transfer {
            transfer,
            payout_bank,
        } => apply_transfer(&txn, incoming, id, transfer, payout_bank).await?,
    };
    txn.commit().await?;
    Ok(accepted)
}

/// Records a notification's transaction (its deposit's credit last, see [`Credit`]).
async fn record_deposit(
    txn: &DatabaseTransaction,
    incoming: Incoming<'_>,
    id: String,
    transaction: Option<&RemoteTransaction>,
) -> Result<Accepted, DbErr> {
    let (recorded, credit) = match transaction {
        Some(tx) => {
            let report = Report {
                mode: incoming.mode,
                bank: incoming.bank,
                tx,
                source: &Source::Notification,
            };
            record_in(txn, report, incoming.now).await?
        }
        None => (Recorded::Duplicate, None),
    };
    let (outcome, deposit_id) = match (&recorded, transaction) {
        (_, None) => (NotificationOutcome::Ignored, None),
        (Recorded::New(d), _) => (NotificationOutcome::Recorded, Some(d.id.clone())),
        (Recorded::Duplicate, _) => (NotificationOutcome::Duplicate, None),
        (Recorded::Unmatched, _) => (NotificationOutcome::Unmatched, None),
    };
    let reference = transaction.map(|t| t.reference.clone());
    record_outcome(txn, &id, outcome, reference, deposit_id).await?;
    if let Some(credit) = credit {
        credit.apply(txn).await?;
    }
    Ok(Accepted::Stored {
        id,
        recorded,
        outcome,
    })
}

/// Why a `transfer.*` notification was kept without being applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmatched {
    /// No payout of the notification's mode has the reference.
    NoPayout,
    /// The payout was sent through another bank: only that bank may settle or reverse it.
    OtherBank,
}

/// Applies a `transfer.*` notification to the payout whose id is the transfer's reference (of
/// the notification's mode) when the notifying bank is the bank the payout was sent through (its
/// `provider_bank`; for a payout that has none recorded, `payout_bank`, the configured one). A
/// reference that is no payout of that mode, or a payout of another bank, is kept as
/// `unmatched`.
async fn apply_transfer(
    txn: &DatabaseTransaction,
    incoming: Incoming<'_>,
    id: String,
    transfer: &domain::provider::RemoteTransfer,
    payout_bank: Option<Bank>,
) -> Result<Accepted, DbErr> {
    let reported = super::payouts::Reported {
        state: transfer.status.into(),
        session_id: transfer.session_id.as_deref(),
        failure_reason: transfer.failure_reason.as_deref(),
    };
    let mode = incoming.mode;
    // The bank names our payout by its id; text that is none is simply no payout.
    let payout_id = PayoutId::unchecked(transfer.reference.clone());
    // Locked from here to the commit (`apply_in` reads it again in this transaction).
    let sent_through = entities::payout::Entity::find_by_id(payout_id.clone())
        .filter(entities::payout::Column::Mode.eq(mode))
        .lock_exclusive()
        .one(txn)
        .await?
        .map(|p| p.provider_bank.or(payout_bank));
    let applied = match sent_through {
        None => Err(Unmatched::NoPayout),
        Some(through) if through != Some(incoming.bank) => Err(Unmatched::OtherBank),
        Some(_) => super::payouts::apply_in(txn, &payout_id, Some(mode), &reported)
            .await?
            .map(|(_, changed)| changed)
            .ok_or(Unmatched::NoPayout),
    };
    let outcome = match applied {
        Ok(true) => NotificationOutcome::Recorded,
        Ok(false) => NotificationOutcome::Duplicate,
        Err(_) => NotificationOutcome::Unmatched,
    };
    let reference = Some(transfer.reference.clone());
    record_outcome(txn, &id, outcome, reference, None).await?;
    Ok(Accepted::Transfer {
        id,
        outcome,
        unmatched: applied.err(),
    })
}

/// Keeps what a bank reported that can be no deposit (outcome `invalid`), for operators: a signed
/// notification that could not be read as one, or an item of its transaction list a recheck
/// found (`incoming.body` the item as listed, with its `reference`), so that operators find both
/// the same way (docs/api/deposits-and-rechecks.md). The same body again is kept once. Returns the
/// stored row's id.
pub async fn keep_invalid(
    db: &DatabaseConnection,
    incoming: Incoming<'_>,
    reference: Option<&str>,
) -> Result<String, DbErr> {
    let txn = db.begin().await?;
    let id = match claim_notification(&txn, incoming).await? {
        Claim::New(id) => {
            let reference = reference.map(str::to_owned);
            record_outcome(&txn, &id, NotificationOutcome::Invalid, reference, None).await?;
            id
        }
        // Kept before: nothing more to store or count.
        Claim::Seen(first) => {
            txn.commit().await?;
            return Ok(first.id.into());
        }
    };
    txn.commit().await?;
    // Counted once per stored row, after it is stored: what operators watch for a bank whose
    // format drifted (docs/operations/health-and-metrics.md).
    metrics::counter!("provider_invalid_transactions_total", "bank" => incoming.bank.slug())
        .increment(1);
    Ok(id)
}

impl Accepted {
    /// A body stored before: what became of it the first time.
    fn repeated(first: provider_notification::Model) -> Self {
        Accepted::Repeated {
            id: first.id.into(),
            outcome: first.outcome,
        }
    }
}

enum Claim {
    New(String),
    Seen(provider_notification::Model),
}

/// What became of a notification just claimed (still `received`, no reference and no deposit
/// yet): its outcome, the reference it carried and the deposit it recorded, if any.
async fn record_outcome<C: ConnectionTrait>(
    db: &C,
    id: &str,
    outcome: NotificationOutcome,
    reference: Option<String>,
    deposit_id: Option<DepositId>,
) -> Result<(), DbErr> {
    use provider_notification::Column as Col;
    provider_notification::Entity::update_many()
        .col_expr(Col::Outcome, outcome.as_str().into())
        .col_expr(Col::ProviderReference, reference.into())
        .col_expr(Col::DepositId, deposit_id.into())
        .filter(Col::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}

/// Inserts the notification row first, keyed by (mode, bank, body digest): a concurrent copy
/// waits on the unique index and then finds the first one, so a body is acted on once.
async fn claim_notification<C: ConnectionTrait>(
    db: &C,
    incoming: Incoming<'_>,
) -> Result<Claim, DbErr> {
    let (id, row) = notification_row(incoming);
    if super::insert_once(db, row, NOTIFICATION_KEY).await? {
        return Ok(Claim::New(id));
    }
    let (mode, bank) = (incoming.mode, incoming.bank);
    let digest = domain::keys::sha256_hex(incoming.body);
    let first = provider_notification::Entity::find()
        .filter(provider_notification::Column::Mode.eq(mode.as_str()))
        .filter(provider_notification::Column::Bank.eq(bank.slug()))
        .filter(provider_notification::Column::BodyDigest.eq(digest))
        .one(db)
        .await?
        .ok_or_else(|| DbErr::Custom("a notification digest conflicted with no row".into()))?;
    Ok(Claim::Seen(first))
}

/// The unique key that stores a notification's body once.
const NOTIFICATION_KEY: [provider_notification::Column; 3] = [
    provider_notification::Column::Mode,
    provider_notification::Column::Bank,
    provider_notification::Column::BodyDigest,
];

/// A notification's row as claimed (`received`, nothing recorded yet), and its id.
fn notification_row(incoming: Incoming<'_>) -> (String, provider_notification::ActiveModel) {
    let id = NotificationId::new();
    let row = provider_notification::ActiveModel {
        id: Set(id.clone()),
        bank: Set(incoming.bank),
        mode: Set(incoming.mode),
        body: Set(incoming.body.to_owned()),
        body_digest: Set(Some(domain::keys::sha256_hex(incoming.body))),
        provider_reference: Set(None),
        outcome: Set(NotificationOutcome::Received),
        deposit_id: Set(None),
        received_at: Set(incoming.now),
    };
    (id.into(), row)
}

/// How many deposits a recheck recorded (however many runs it took).
pub async fn found_by_recheck(
    db: &DatabaseConnection,
    recheck_id: &RecheckId,
) -> Result<u64, DbErr> {
    deposit::Entity::find()
        .filter(deposit::Column::RecheckId.eq(recheck_id))
        .count(db)
        .await
}

/// A page of an account's deposits, newest first, and the (exact, maintained) total.
pub async fn list(
    db: &DatabaseConnection,
    account: &virtual_account::Model,
    request: &paging::PageRequest,
) -> Result<(paging::Fetched<Deposit>, paging::Total), DbErr> {
    let select = deposit::Entity::find().filter(deposit::Column::AccountId.eq(account.id.as_str()));
    let total = list_counts::total(
        db,
        &account.business_id,
        account.mode,
        List::Deposits,
        Some(&account.id),
    )
    .await?;
    let fetched = newest_first(db, select, request).await?;
    Ok((fetched, total))
}

/// A page of deposits, newest first (by page number or, in constant time, by cursor).
async fn newest_first<C: ConnectionTrait>(
    db: &C,
    select: sea_orm::Select<deposit::Entity>,
    request: &paging::PageRequest,
) -> Result<paging::Fetched<Deposit>, DbErr> {
    paging::fetch(
        db,
        select,
        deposit::Column::CreatedAt,
        deposit::Column::Id,
        request,
        |d| (d.created_at, d.id.to_string()),
    )
    .await
}

/// What the dashboard's list of a mode's deposits is filtered by.
#[derive(Debug, Clone, Copy)]
pub struct ModeQuery<'a> {
    pub business_id: &'a BusinessId,
    pub mode: Mode,
    /// A provider reference or an account number, matched exactly (trimmed by the caller).
    pub search: Option<&'a str>,
    pub status: Option<DepositStatus>,
}

impl ModeQuery<'_> {
    /// The filter a cursor of this list is bound to (not one of an account's deposits).
    pub fn filter(&self) -> paging::Filter {
        paging::Filter::new(
            "deposits-of-mode",
            self.business_id,
            self.mode,
            &[
                ("q", self.search),
                ("status", self.status.map(DepositStatus::as_str)),
            ],
        )
    }
}

/// The deposits of `query`: a search matches a provider reference exactly (through the unique
/// (mode, bank, provider_reference) index, every bank named so the index serves it) or the
/// number of one of the business's accounts in that mode.
async fn mode_select<C: ConnectionTrait>(
    db: &C,
    query: &ModeQuery<'_>,
) -> Result<sea_orm::Select<deposit::Entity>, DbErr> {
    use deposit::Column as Col;
    let mut select =
        deposit::Entity::find().filter(Tenant::new(query.business_id, query.mode).filter::<Col>());
    if let Some(status) = query.status {
        select = select.filter(Col::Status.eq(status));
    }
    if let Some(search) = query.search.filter(|s| !s.is_empty()) {
        let accounts: Vec<String> = account_number::Entity::find()
            .select_only()
            .column(account_number::Column::AccountId)
            .filter(Tenant::new(query.business_id, query.mode).filter::<account_number::Column>())
            .filter(account_number::Column::Bank.is_in(Bank::ALL))
            .filter(account_number::Column::AccountNumber.eq(search))
            .into_tuple()
            .all(db)
            .await?;
        let by_reference = sea_orm::Condition::all()
            .add(Col::Bank.is_in(Bank::ALL))
            .add(Col::ProviderReference.eq(search));
        select = select.filter(
            sea_orm::Condition::any()
                .add(by_reference)
                .add(Col::AccountId.is_in(accounts)),
        );
    }
    Ok(select)
}

/// One page of a mode's deposits, newest first (by page number or, in constant time, by cursor).
pub async fn page_for_mode<C: ConnectionTrait>(
    db: &C,
    query: &ModeQuery<'_>,
    request: &paging::PageRequest,
) -> Result<paging::Fetched<Deposit>, DbErr> {
    newest_first(db, mode_select(db, query).await?, request).await
}

/// The amounts `query` matches, in kobo: (all of them, the flagged ones among them), or None when
/// it matches more than `up_to` deposits (read at most `up_to` + 1 rows: a page view never sums a
/// million).
pub async fn amounts_for_mode<C: ConnectionTrait>(
    db: &C,
    query: &ModeQuery<'_>,
    up_to: u64,
) -> Result<Option<(i64, i64)>, DbErr> {
    use deposit::Column as Col;
    let rows: Vec<(i64, DepositStatus)> = mode_select(db, query)
        .await?
        .select_only()
        .column(Col::Amount)
        .column(Col::Status)
        .limit(up_to + 1)
        .into_tuple()
        .all(db)
        .await?;
    if rows.len() as u64 > up_to {
        return Ok(None);
    }
    let all = rows.iter().map(|(amount, _)| amount).sum();
    let flagged = rows
        .iter()
        .filter(|(_, status)| *status == DepositStatus::Flagged)
        .map(|(amount, _)| amount)
        .sum();
    Ok(Some((all, flagged)))
}

/// How many deposits `query` matches: without a search, exactly (the maintained counts by
/// status); with one, exact up to `exact_total_up_to` and PostgreSQL's estimate beyond (flagged
/// as one): counting a million rows on every page view would cost a third of a second for one
/// digit of precision.
pub async fn total_for_mode<C: ConnectionTrait>(
    db: &C,
    query: &ModeQuery<'_>,
    exact_total_up_to: u64,
) -> Result<paging::Total, DbErr> {
    if query.search.is_none_or(str::is_empty) {
        let status = query.status.map(DepositStatus::as_str);
        return list_counts::total(
            db,
            query.business_id,
            query.mode,
            List::DepositStatuses,
            status,
        )
        .await;
    }
    let select = mode_select(db, query).await?;
    paging::capped_total(db, select, exact_total_up_to).await
}
