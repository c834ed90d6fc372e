//! Settlement accounts and payouts (docs/api/settlement-and-payouts.md): the create transaction
//! (idempotency, reference, settlement account, live hold, the debit, the job), reading, and the
//! one function that moves a payout along what the provider reports.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, Func, OnConflict};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection,
    DbBackend, DbErr, EntityTrait, QueryFilter, QuerySelect, QueryTrait, TransactionTrait,
};

use super::audit::{self, Actor};
use super::idempotency::{self, Claim};
use super::ledger;
use super::outbox::enqueue;
use crate::tenant::Tenant;
use domain::ids::{BusinessId, PayoutId};
use domain::payout::{EntryType, LIVE_HOLD, NewPayout, PayoutStatus, Schedule, TransferState};
use domain::settlement_banks::SettlementBank;
use domain::{AuditAction, EventType, Mode};
use entities::{payout, settlement_account};
use jobs::PayoutJob;
use views::{PayoutView, SettlementAccountView};

pub use payout::Model as Payout;
pub use settlement_account::Model as SettlementAccount;

// ---- Settlement accounts ----------------------------------------------------------------

/// A verified settlement account to store: the bank's name enquiry answered `account_name`.
pub struct VerifiedAccount<'a> {
    pub bank: SettlementBank,
    pub account_number: &'a str,
    pub account_name: &'a str,
    pub schedule: Schedule,
}

/// Stores (or replaces) the mode's settlement account and records `settlement_account.updated`
/// and who did it in the audit log, in one transaction. A change of bank or number in live mode
/// holds payouts for 24 hours; a change of the schedule alone moves no money elsewhere and keeps
/// the current hold.
pub async fn set_settlement_account(
    db: &DatabaseConnection,
    actor: &Actor,
    business_id: &BusinessId,
    mode: Mode,
    account: &VerifiedAccount<'_>,
    now: DateTime<Utc>,
) -> Result<SettlementAccount, DbErr> {
    let txn = db.begin().await?;
    let existing = settlement_account::Entity::find_by_id((business_id.to_owned(), mode))
        .lock_exclusive()
        .one(&txn)
        .await?;
    let same_destination = existing.as_ref().is_some_and(|e| {
        e.bank_code == account.bank.code && e.account_number == account.account_number
    });
    let payouts_available_at = match (&existing, mode) {
        (Some(e), _) if same_destination => e.payouts_available_at,
        (_, Mode::Live) => now + LIVE_HOLD,
        (_, Mode::Test) => now,
    };
    let row = settlement_account::ActiveModel {
        business_id: Set(business_id.to_owned()),
        mode: Set(mode),
        bank_code: Set(account.bank.code.to_owned()),
        bank_name: Set(account.bank.name.to_owned()),
        account_number: Set(account.account_number.to_owned()),
        account_name: Set(account.account_name.to_owned()),
        schedule: Set(account.schedule),
        verified_at: Set(now),
        payouts_available_at: Set(payouts_available_at),
        created_at: Set(existing.as_ref().map_or(now, |e| e.created_at)),
        updated_at: Set(now),
    };
    settlement_account::Entity::insert(row)
        .on_conflict(
            OnConflict::columns([
                settlement_account::Column::BusinessId,
                settlement_account::Column::Mode,
            ])
            .update_columns([
                settlement_account::Column::BankCode,
                settlement_account::Column::BankName,
                settlement_account::Column::AccountNumber,
                settlement_account::Column::AccountName,
                settlement_account::Column::Schedule,
                settlement_account::Column::VerifiedAt,
                settlement_account::Column::PayoutsAvailableAt,
                settlement_account::Column::UpdatedAt,
            ])
            .to_owned(),
        )
        .exec_without_returning(&txn)
        .await?;
    let stored = find_settlement_account(&txn, business_id, mode)
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("settlement account".into()))?;
    super::events::record(
        &txn,
        business_id,
        mode,
        EventType::SettlementAccountUpdated,
        &SettlementAccountView::from(&stored),
        now,
    )
    .await?;
    audit::record(&txn, actor, settlement_audit_entry(&stored, now), now).await?;
    txn.commit().await?;
    Ok(stored)
}

/// The audit row of a settlement-account change: the bank and the number's last four digits
/// (as keys are shown), the schedule and any hold; never the whole number or the account name.
fn settlement_audit_entry(stored: &SettlementAccount, now: DateTime<Utc>) -> audit::Entry<'_> {
    let digits = &stored.account_number;
    let last_four = &digits[digits.len().saturating_sub(4)..];
    let mut detail = format!("{} payouts", stored.schedule.as_str());
    if stored.payouts_available_at > now {
        detail.push_str(&format!(
            "; payouts held until {}",
            stored
                .payouts_available_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ));
    }
    audit::Entry::new(&stored.business_id, AuditAction::SettlementAccountChanged)
        .mode(stored.mode)
        .target(format!("{} …{last_four}", stored.bank_name))
        .detail(detail)
}

pub async fn find_settlement_account<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
) -> Result<Option<SettlementAccount>, DbErr> {
    settlement_account::Entity::find_by_id((business_id.to_owned(), mode))
        .one(db)
        .await
}

// ---- Creating payouts -------------------------------------------------------------------

/// A payout to create: by a caller (with its Idempotency-Key) or by the daily schedule (with
/// its `auto-YYYY-MM-DD` reference and no key).
pub struct CreateRequest<'a> {
    pub business_id: &'a BusinessId,
    pub mode: Mode,
    pub idempotency: Option<idempotency::Key<'a>>,
    pub payout: &'a NewPayout,
    /// Who asked, recorded in the audit log with a new payout (only then: a replay or a
    /// reference hit creates nothing). None for the daily schedule: the service's own.
    pub actor: Option<&'a Actor>,
}

#[derive(Debug)]
pub enum CreateOutcome {
    /// A new pending payout, the amount debited and its `send_payout` job written (202).
    Created(Payout),
    /// The key was seen before with this body: the first answer's status, the payout as it is now.
    Replayed {
        payout: Payout,
        status: u16,
    },
    /// The reference already names a payout: that one (200), nothing new.
    ReferenceHit(Payout),
    KeyReused,
    KeyInFlight,
    SettlementAccountMissing,
    /// Live payouts wait for the hold after a settlement-account change.
    OnHold {
        retry_after_secs: u64,
    },
    /// Nothing was written; the available balance then, in kobo.
    InsufficientBalance {
        available: i64,
    },
}

/// One transaction: the business-and-mode row is locked first (as for accounts), so the key,
/// the reference and the settlement account are read without a race; the balance check and
/// the debit are one conditional statement (`ledger::debit`). A refusal writes nothing, key
/// included, so the same key may be retried once the cause is gone.
pub async fn create(
    db: &DatabaseConnection,
    req: &CreateRequest<'_>,
) -> Result<CreateOutcome, DbErr> {
    // Fast path without a write transaction: most repeats are replays of finished requests.
    if let Some(key) = &req.idempotency
        && let Some(existing) = key.find(db).await?
        && idempotency::is_completed(&existing)
    {
        return replay(db, key, existing).await;
    }
    let txn = db.begin().await?;
    if let Some(key) = &req.idempotency
        && !key.try_lock(&txn).await?
    {
        txn.rollback().await?;
        return Ok(CreateOutcome::KeyInFlight);
    }
    super::accounts::lock_business_mode(&txn, req.business_id, req.mode).await?;
    let now = super::clock(&txn).await?;
    if let Some(key) = &req.idempotency
        && let Claim::Seen(existing) = key.claim(&txn, None, now).await?
    {
        let outcome = if idempotency::is_completed(&existing) {
            replay(&txn, key, existing).await?
        } else if !key.same_request(&existing) {
            CreateOutcome::KeyReused
        } else {
            CreateOutcome::KeyInFlight
        };
        txn.commit().await?;
        return Ok(outcome);
    }
    let complete =
        async |txn: &sea_orm::DatabaseTransaction, status: u16, id: &str| match &req.idempotency {
            Some(key) => key.complete(txn, status, id, now).await,
            None => Ok(()),
        };

    if let Some(reference) = &req.payout.reference
        && let Some(existing) =
            find_by_reference(&txn, req.business_id, req.mode, reference).await?
    {
        complete(&txn, 200, &existing.id).await?;
        txn.commit().await?;
        return Ok(CreateOutcome::ReferenceHit(existing));
    }

    let Some(destination) = find_settlement_account(&txn, req.business_id, req.mode).await? else {
        txn.rollback().await?;
        return Ok(CreateOutcome::SettlementAccountMissing);
    };
    if req.mode == Mode::Live && destination.payouts_available_at > now {
        txn.rollback().await?;
        let wait = std::cmp::max(
            (destination.payouts_available_at - now).num_milliseconds(),
            0,
        ) as u64;
        return Ok(CreateOutcome::OnHold {
            retry_after_secs: wait.div_ceil(1000).max(1),
        });
    }

    let id = PayoutId::new();
    let debited = ledger::debit(
        &txn,
        ledger::Movement {
            business_id: req.business_id,
            mode: req.mode,
            entry_type: EntryType::Payout,
            amount: req.payout.amount,
            source_id: &id,
        },
    )
    .await?;
    if let Err(ledger::Insufficient { available }) = debited {
        txn.rollback().await?;
        return Ok(CreateOutcome::InsufficientBalance { available });
    }
    let row = payout::ActiveModel {
        id: Set(id.clone()),
        business_id: Set(req.business_id.to_owned()),
        mode: Set(req.mode),
        status: Set(PayoutStatus::Pending),
        amount: Set(req.payout.amount),
        currency: Set(domain::money::CURRENCY.to_owned()),
        reference: Set(req.payout.reference.clone()),
        narration: Set(req.payout.narration.clone()),
        bank_code: Set(destination.bank_code.clone()),
        bank_name: Set(destination.bank_name.clone()),
        account_number: Set(destination.account_number.clone()),
        account_name: Set(destination.account_name.clone()),
        session_id: Set(None),
        failure_reason: Set(None),
        sent_at: Set(None),
        created_at: Set(now),
        completed_at: Set(None),
        updated_at: Set(now),
        provider_bank: Set(None),
        lease_token: Set(None),
        lease_until: Set(None),
    }
    .insert(&txn)
    .await?;
    enqueue(
        &txn,
        &PayoutJob::SendPayout {
            payout_id: id.clone(),
        },
        now,
        now,
    )
    .await?;
    if let Some(actor) = req.actor {
        audit::record(&txn, actor, payout_audit_entry(&row), now).await?;
    }
    complete(&txn, 202, &id).await?;
    txn.commit().await?;
    Ok(CreateOutcome::Created(row))
}

/// The audit row of a new payout: its amount and where it goes, the number by its last four
/// digits (as for the settlement account).
fn payout_audit_entry(payout: &Payout) -> audit::Entry<'_> {
    let digits = &payout.account_number;
    let last_four = &digits[digits.len().saturating_sub(4)..];
    audit::Entry::new(&payout.business_id, AuditAction::PayoutCreated)
        .mode(payout.mode)
        .target(payout.id.as_str())
        .detail(format!(
            "{} to {} …{last_four}",
            domain::money::naira(payout.amount),
            payout.bank_name
        ))
}

async fn replay<C: ConnectionTrait>(
    db: &C,
    key: &idempotency::Key<'_>,
    stored: idempotency::StoredKey,
) -> Result<CreateOutcome, DbErr> {
    if !key.same_request(&stored) {
        return Ok(CreateOutcome::KeyReused);
    }
    let (Some(status), Some(payout_id)) =
        (idempotency::completed_status(&stored), stored.account_id)
    else {
        return Err(DbErr::Custom(
            "completed payout key without its payout".into(),
        ));
    };
    let payout = payout::Entity::find_by_id(PayoutId::unchecked(payout_id))
        .one(db)
        .await?
        .ok_or_else(|| DbErr::Custom("idempotency key names a missing payout".into()))?;
    Ok(CreateOutcome::Replayed { payout, status })
}

async fn find_by_reference<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    reference: &str,
) -> Result<Option<Payout>, DbErr> {
    payout::Entity::find()
        .filter(Tenant::new(business_id, mode).filter::<payout::Column>())
        .filter(payout::Column::Reference.eq(reference))
        .one(db)
        .await
}

// ---- Reading ----------------------------------------------------------------------------

/// One business's payout in one mode, or None (another business's or mode's is None too).
pub async fn find<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    id: &PayoutId,
) -> Result<Option<Payout>, DbErr> {
    payout::Entity::find_by_id(id.clone())
        .filter(Tenant::new(business_id, mode).filter::<payout::Column>())
        .one(db)
        .await
}

/// A page of payouts, newest first, and the (exact, maintained) total.
pub async fn list(
    db: &sea_orm::DatabaseConnection,
    business_id: &BusinessId,
    mode: Mode,
    status: Option<PayoutStatus>,
    request: &super::paging::PageRequest,
) -> Result<(super::paging::Fetched<Payout>, super::paging::Total), DbErr> {
    use payout::Column as Col;
    let mut select = payout::Entity::find().filter(Tenant::new(business_id, mode).filter::<Col>());
    if let Some(status) = status {
        select = select.filter(Col::Status.eq(status));
    }
    let total = super::list_counts::total(
        db,
        business_id,
        mode,
        super::list_counts::List::Payouts,
        status.map(PayoutStatus::as_str),
    )
    .await?;
    let fetched = super::paging::fetch(db, select, Col::CreatedAt, Col::Id, request, |p| {
        (p.created_at, p.id.to_string())
    })
    .await?;
    Ok((fetched, total))
}

/// Kobo in payouts still `pending` or `processing`.
pub async fn in_flight<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
) -> Result<i64, DbErr> {
    // The amounts by status the database keeps (m0028): a few rows however many payouts.
    use super::day_counts::{self, Days, Kind};
    let rows = day_counts::read(db, business_id, mode, Kind::Payouts, &Days::AllTime).await?;
    Ok(rows
        .iter()
        .filter(|(_, status, _, _)| PayoutStatus::parse(status).is_some_and(|s| s.in_flight()))
        .map(|(_, _, _, amount)| amount)
        .sum())
}

/// For each provider bank with payouts `processing`: when the oldest of them was sent (what
/// `payouts_processing_oldest_seconds{bank}` shows; a bank takes minutes at most as a rule).
/// It reads the `processing` rows alone, by `payouts_status_bank_sent` (m0030).
pub async fn oldest_processing<C: ConnectionTrait>(
    db: &C,
) -> Result<Vec<(Option<domain::Bank>, Option<DateTime<Utc>>)>, DbErr> {
    oldest_processing_select().into_tuple().all(db).await
}

/// [`oldest_processing`]'s statement, for its plan to be checked.
pub fn oldest_processing_statement(backend: DbBackend) -> sea_orm::Statement {
    oldest_processing_select().build(backend)
}

fn oldest_processing_select() -> sea_orm::Select<payout::Entity> {
    use payout::Column as Col;
    payout::Entity::find()
        .select_only()
        .column(Col::ProviderBank)
        .column_as(Expr::expr(Func::min(Expr::col(Col::SentAt))), "oldest")
        .filter(Col::Status.eq(PayoutStatus::Processing))
        .group_by(Col::ProviderBank)
}

// ---- The worker's lease ------------------------------------------------------------------

/// What [`take_lease`] found.
#[derive(Debug)]
pub enum Lease {
    /// This run holds the payout (in flight) until its lease ends: it alone may send the
    /// transfer or fail the payout on a refusal. The payout as it is now.
    Held(Box<Payout>),
    /// Another run holds it until then: that run is asking, sending or deciding.
    Busy(DateTime<Utc>),
    /// Not in flight any more (or no such payout): nothing to do.
    Settled,
}

/// Takes (or, for the run that holds it, renews) the payout's lease for `lease` and records the
/// bank it is sent through (`bank`, unless one is recorded already), in one conditional
/// statement: two runs of one job (a redelivered message, two workers) never hold it at once. A
/// lease ends by itself, so a payout whose worker was killed resumes once it has passed.
///
/// Why a lease and not only "one run per job": the decision that fails a payout on a refusal
/// ("the bank refused and holds no such transfer") is only true while no other run can send;
/// [`fail_refused`] makes it under the lease. Its length must exceed the longest provider call
/// (the HTTP client's 15 s timeout): a run renews it right before sending, so a send in flight
/// has always ended, one way or the other, before another run may take the payout.
pub async fn take_lease<C: ConnectionTrait>(
    db: &C,
    payout_id: &PayoutId,
    token: &str,
    bank: domain::Bank,
    lease: std::time::Duration,
) -> Result<Lease, DbErr> {
    use payout::Column as Col;
    use sea_orm::Condition;
    let now = super::clock(db).await?;
    let until = now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::minutes(2));
    let in_flight: Vec<PayoutStatus> = PayoutStatus::ALL
        .into_iter()
        .filter(|s| s.in_flight())
        .collect();
    let taken = payout::Entity::update_many()
        .col_expr(Col::LeaseToken, Some(token.to_owned()).into())
        .col_expr(Col::LeaseUntil, Some(until).into())
        .col_expr(
            Col::ProviderBank,
            Func::coalesce([Expr::col(Col::ProviderBank), Expr::val(bank.slug())]).into(),
        )
        .filter(Col::Id.eq(payout_id))
        .filter(Col::Status.is_in(in_flight))
        .filter(
            Condition::any()
                .add(Col::LeaseUntil.is_null())
                .add(Col::LeaseUntil.lt(now))
                .add(Col::LeaseToken.eq(token)),
        )
        .exec(db)
        .await?
        .rows_affected;
    let current = payout::Entity::find_by_id(payout_id.clone())
        .one(db)
        .await?;
    Ok(match current {
        Some(p) if taken == 1 => Lease::Held(Box::new(p)),
        Some(p) if p.status.in_flight() => Lease::Busy(p.lease_until.unwrap_or(until)),
        _ => Lease::Settled,
    })
}

/// Ends this run's lease (a no-op when another run took it since).
pub async fn release_lease<C: ConnectionTrait>(
    db: &C,
    payout_id: &PayoutId,
    token: &str,
) -> Result<(), DbErr> {
    use payout::Column as Col;
    payout::Entity::update_many()
        .col_expr(Col::LeaseToken, Option::<String>::None.into())
        .col_expr(Col::LeaseUntil, Option::<DateTime<Utc>>::None.into())
        .filter(Col::Id.eq(payout_id))
        .filter(Col::LeaseToken.eq(token))
        .exec(db)
        .await?;
    Ok(())
}

/// Fails a payout the provider refused and holds no transfer of, returning its money, only if
/// this run (`token`) still holds its lease: then no other run can have sent it meanwhile. The
/// check and the failure are one transaction under the payout's row lock. None when the lease
/// was lost (the caller asks the provider again later); else the payout as it is now.
pub async fn fail_refused(
    db: &DatabaseConnection,
    payout_id: &PayoutId,
    token: &str,
    reported: &Reported<'_>,
) -> Result<Option<Payout>, DbErr> {
    let txn = db.begin().await?;
    let held = payout::Entity::find_by_id(payout_id.clone())
        .lock_exclusive()
        .one(&txn)
        .await?
        .is_some_and(|p| p.lease_token.as_deref() == Some(token));
    if !held {
        txn.rollback().await?;
        return Ok(None);
    }
    let applied = apply_in(&txn, payout_id, None, reported).await?;
    txn.commit().await?;
    Ok(applied.map(|(payout, _)| payout))
}

// ---- Moving a payout along --------------------------------------------------------------

/// What the provider reported for a payout's transfer.
#[derive(Debug, Clone)]
pub struct Reported<'a> {
    pub state: TransferState,
    pub session_id: Option<&'a str>,
    pub failure_reason: Option<&'a str>,
}

/// Applies what the provider reports to a payout, under its row lock, in one transaction: each
/// step of `domain::payout::payout_steps` updates the status (and `completed_at` on a final
/// one), returns the money when the step `returns_money()` (a `payout_return` entry: once, by
/// the ledger's unique index) and records the step's event. A late or repeated report finds
/// no step and changes nothing. None when there is no such payout.
pub async fn apply(
    db: &DatabaseConnection,
    payout_id: &PayoutId,
    reported: &Reported<'_>,
) -> Result<Option<Payout>, DbErr> {
    let txn = db.begin().await?;
    let applied = apply_in(&txn, payout_id, None, reported).await?;
    txn.commit().await?;
    Ok(applied.map(|(payout, _)| payout))
}

/// [`apply`] in the caller's transaction, for a payout of `mode` when given (a notification
/// signed for one mode never moves the other's money). The payout, and whether it changed.
pub async fn apply_in<C: ConnectionTrait>(
    txn: &C,
    payout_id: &PayoutId,
    mode: Option<Mode>,
    reported: &Reported<'_>,
) -> Result<Option<(Payout, bool)>, DbErr> {
    let mut select = payout::Entity::find_by_id(payout_id.clone());
    if let Some(mode) = mode {
        select = select.filter(payout::Column::Mode.eq(mode));
    }
    let Some(mut current) = select.lock_exclusive().one(txn).await? else {
        return Ok(None);
    };
    let steps = domain::payout::payout_steps(current.status, reported.state);
    if steps.is_empty() {
        return Ok(Some((current, false)));
    }
    let now = super::clock(txn).await?;
    for step in steps {
        let mut row: payout::ActiveModel = current.clone().into();
        row.status = Set(step);
        row.updated_at = Set(now);
        if step == PayoutStatus::Processing && current.sent_at.is_none() {
            row.sent_at = Set(Some(now));
        }
        if step == PayoutStatus::Succeeded
            && let Some(session) = reported.session_id
        {
            row.session_id = Set(Some(session.to_owned()));
        }
        if step == PayoutStatus::Failed {
            row.failure_reason = Set(Some(
                reported
                    .failure_reason
                    .unwrap_or("the provider bank failed the transfer")
                    .to_owned(),
            ));
        }
        if step == PayoutStatus::Reversed && reported.failure_reason.is_some() {
            row.failure_reason = Set(reported.failure_reason.map(str::to_owned));
        }
        if !step.in_flight() {
            row.completed_at = Set(Some(now));
        }
        current = row.update(txn).await?;
        if step.returns_money() {
            ledger::credit(
                txn,
                ledger::Movement {
                    business_id: &current.business_id,
                    mode: current.mode,
                    entry_type: EntryType::PayoutReturn,
                    amount: current.amount,
                    source_id: &current.id,
                },
            )
            .await?;
        }
        let event = match step {
            PayoutStatus::Succeeded => Some(EventType::PayoutSucceeded),
            PayoutStatus::Failed => Some(EventType::PayoutFailed),
            PayoutStatus::Reversed => Some(EventType::PayoutReversed),
            PayoutStatus::Pending | PayoutStatus::Processing => None,
        };
        if let Some(event) = event {
            super::events::record(
                txn,
                &current.business_id,
                current.mode,
                event,
                &PayoutView::from(&current),
                now,
            )
            .await?;
        }
    }
    Ok(Some((current, true)))
}
