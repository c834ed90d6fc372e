//! Settling a creation with the bank's answer: the number written (once per bank and mode), the
//! account activated or failed, a number that came too late closed again.

use super::*;
use domain::ids::{AccountId, JobId};

/// What [`settle`] made of a provider's answer.
#[derive(Debug)]
pub enum Settled {
    /// The account took the answer (its event is recorded).
    Changed(Box<Account>),
    /// Nothing to apply: the answer is `Pending`, or the account is no longer pending.
    Unchanged,
    /// The provider's number is held by another account of the same mode and bank: the
    /// provider's error, logged and counted. Nothing was written; the account stays pending.
    NumberHeld,
}

/// Records the provider's answer to a creation and the key's final status, in one transaction.
/// The answer only applies to a still-pending account: if the job got there first, its result
/// stands and the status reflects it. No number yet, or one another account holds, leaves the
/// account pending (202) and makes its job due at once.
pub async fn settle_creation(
    db: &DatabaseConnection,
    req: &CreateRequest<'_>,
    account_id: &AccountId,
    job_id: &JobId,
    outcome: ProvisioningOutcome,
    now: DateTime<Utc>,
) -> Result<(Account, u16), DbErr> {
    if db.get_database_backend() == DbBackend::Postgres {
        match one_statement::settle_active(db, req, account_id, job_id, &outcome, now).await {
            Ok(Some(account)) => {
                let status = status_for(&account);
                return Ok((account, status));
            }
            // Not the ordinary case, or another account was given the same number at the same
            // instant: the transaction path decides, as it always has.
            Ok(None) => {}
            Err(e) if crate::is_unique_violation(&e) => {}
            Err(e) => return Err(e),
        }
    }
    match settle_creation_once(db, req, account_id, job_id, &outcome, now).await {
        // Another account was given the same number at the same instant: once that one has
        // committed, this attempt finds the number held.
        Err(e) if crate::is_unique_violation(&e) => {
            settle_creation_once(db, req, account_id, job_id, &outcome, now).await
        }
        settled => settled,
    }
}

pub(super) async fn settle_creation_once(
    db: &DatabaseConnection,
    req: &CreateRequest<'_>,
    account_id: &AccountId,
    job_id: &JobId,
    outcome: &ProvisioningOutcome,
    now: DateTime<Utc>,
) -> Result<(Account, u16), DbErr> {
    let txn = db.begin().await?;
    // Active from creation is answered by the 201 itself: no `virtualaccount.active` event.
    let changed = match settle(&txn, account_id, outcome, false, now).await? {
        Settled::Changed(account) => {
            crate::outbox::mark(&txn, job_id, Mark::Completed, now).await?;
            Some(*account)
        }
        // The job settled it first: its result stands.
        Settled::Unchanged if *outcome != ProvisioningOutcome::Pending => {
            crate::outbox::mark(&txn, job_id, Mark::Completed, now).await?;
            None
        }
        Settled::Unchanged | Settled::NumberHeld => {
            crate::outbox::mark(&txn, job_id, Mark::DueNow, now).await?;
            None
        }
    };
    let account = match changed {
        Some(account) => account,
        None => virtual_account::Entity::find_by_id(account_id.clone())
            .one(&txn)
            .await?
            .ok_or_else(|| DbErr::RecordNotFound(account_id.to_string()))?,
    };
    let status = status_for(&account);
    idempotency_of(req)
        .complete(&txn, status, account_id, now)
        .await?;
    txn.commit().await?;
    Ok((account, status))
}

/// The creation status an account's state stands for (201 numbered, 202 waiting, 422 rejected).
pub(super) fn status_for(account: &Account) -> u16 {
    status_of(account.status, account.activated_at.is_some())
}

/// [`status_for`] an account of `status`, numbered at some point (`activated`) or not.
pub(super) fn status_of(status: AccountStatus, activated: bool) -> u16 {
    match status {
        AccountStatus::Active => 201,
        AccountStatus::Failed => 422,
        AccountStatus::Deactivated if activated => 201,
        AccountStatus::Deactivated | AccountStatus::Pending => 202,
    }
}

/// Applies a provider answer to a pending account (only a pending one: a deactivated account is
/// never revived) and records its event.
pub async fn settle<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    account_id: &AccountId,
    outcome: &ProvisioningOutcome,
    announce_active: bool,
    now: DateTime<Utc>,
) -> Result<Settled, DbErr> {
    use virtual_account::Column as Col;
    let Some(update) = settle_update(account_id, outcome, now) else {
        return Ok(Settled::Unchanged);
    };
    let event = match outcome {
        ProvisioningOutcome::Active { .. } => {
            announce_active.then_some(EventType::VirtualAccountActive)
        }
        ProvisioningOutcome::Rejected { .. } => Some(EventType::VirtualAccountFailed),
        ProvisioningOutcome::Pending => None,
    };
    let Some(account) = update.exec_with_returning(db).await?.pop() else {
        if let ProvisioningOutcome::Active { account_number } = outcome {
            let pending = virtual_account::Entity::find_by_id(account_id.clone())
                .filter(Col::Status.eq(AccountStatus::Pending))
                .one(db)
                .await?;
            if pending.is_some() {
                number_held(db, account_id, account_number).await?;
                return Ok(Settled::NumberHeld);
            }
            close_late_number(db, account_id, account_number, now).await?;
        }
        return Ok(Settled::Unchanged);
    };
    tallies::status_changed(db, &account, AccountStatus::Pending, account.status).await?;
    if let Some(event_type) = event {
        record_account_event(db, &account, event_type, now).await?;
    }
    Ok(Settled::Changed(Box::new(account)))
}

/// [`settle`]'s update of the account, None for an answer that changes nothing (`Pending`).
pub(super) fn settle_update(
    account_id: &AccountId,
    outcome: &ProvisioningOutcome,
    now: DateTime<Utc>,
) -> Option<sea_orm::UpdateMany<virtual_account::Entity>> {
    use virtual_account::Column as Col;
    let update = virtual_account::Entity::update_many()
        .col_expr(Col::UpdatedAt, now.into())
        .filter(Col::Id.eq(account_id))
        .filter(Col::Status.eq(AccountStatus::Pending));
    match outcome {
        ProvisioningOutcome::Pending => None,
        ProvisioningOutcome::Active { account_number } => Some(
            update
                .col_expr(Col::Status, AccountStatus::Active.into())
                .col_expr(Col::AccountNumber, Some(account_number.clone()).into())
                .col_expr(Col::ActivatedAt, Some(now).into())
                // A number another account of the mode and bank holds is the provider's error:
                // the account stays pending. (Two accounts given one number at the same instant
                // still meet the unique index: the caller's transaction fails and is retried.)
                .filter(number_free(account_number)),
        ),
        ProvisioningOutcome::Rejected { reason } => Some(
            update
                .col_expr(Col::Status, AccountStatus::Failed.into())
                .col_expr(Col::FailureReason, Some(reason.clone()).into()),
        ),
    }
}

/// The values [`settle_update`] binds for an `Active` answer's `account_number`, in its order (a
/// [`crate::Rendered`] statement): the new stamp, status, number and activation, the account
/// and the status it must have, then [`number_free`]'s.
pub(super) fn push_settle_active_values(
    into: &mut Vec<sea_orm::Value>,
    account_id: &AccountId,
    account_number: &str,
    now: DateTime<Utc>,
) {
    into.extend([
        now.into(),
        AccountStatus::Active.into(),
        Some(account_number.to_owned()).into(),
        Some(now).into(),
        account_id.into(),
        AccountStatus::Pending.into(),
        1i32.into(),
        account_number.into(),
    ]);
}

/// No account of the updated row's mode and bank holds `account_number` (a condition of an
/// update of `virtual_accounts`, read from `account_numbers`).
pub(super) fn number_free(account_number: &str) -> Condition {
    use account_number::Column as N;
    use sea_orm::sea_query::{ExprTrait, Query};
    use virtual_account::Column as Col;
    let holder = Query::select()
        .expr(Expr::val(1))
        .from(account_number::Entity)
        .and_where(
            Expr::col((account_number::Entity, N::Mode))
                .equals((virtual_account::Entity, Col::Mode)),
        )
        .and_where(
            Expr::col((account_number::Entity, N::Bank))
                .equals((virtual_account::Entity, Col::Bank)),
        )
        .and_where(Expr::col((account_number::Entity, N::AccountNumber)).eq(account_number))
        .to_owned();
    Condition::all().add(Expr::exists(holder).not())
}

/// Runs an update that writes an account number, in a savepoint: None when the number is another
/// account's already (the primary key of `account_numbers`, which the trigger on
/// `virtual_accounts` writes; recognised by SQLSTATE),
/// with the caller's transaction still usable (on PostgreSQL a failed statement would abort it).
pub(super) async fn write_number<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    update: sea_orm::UpdateMany<virtual_account::Entity>,
) -> Result<Option<u64>, DbErr> {
    let savepoint = db.begin().await?;
    match update.exec(&savepoint).await {
        Ok(result) => {
            savepoint.commit().await?;
            Ok(Some(result.rows_affected))
        }
        Err(e) if crate::is_unique_violation(&e) => {
            savepoint.rollback().await?;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A provider handed out a number another account holds: its error, not the customer's. The
/// account keeps waiting (the give-up rule ends it); operators see a log line and
/// `provider_duplicate_numbers_total{bank}`. Neither says the number or any identity.
pub(super) async fn number_held<C: ConnectionTrait>(
    db: &C,
    account_id: &AccountId,
    account_number: &str,
) -> Result<(), DbErr> {
    let Some(account) = virtual_account::Entity::find_by_id(account_id.clone())
        .one(db)
        .await?
    else {
        return Ok(());
    };
    let holder =
        account_number::Entity::find_by_id((account.mode, account.bank, account_number.to_owned()))
            .one(db)
            .await?
            .map(|held| held.account_id);
    tracing::error!(
        account_id = %account_id,
        bank = %account.bank,
        mode = %account.mode,
        holder = ?holder,
        "the provider bank gave an account number that another account already holds; the account stays pending"
    );
    metrics::counter!("provider_duplicate_numbers_total", "bank" => account.bank.as_str())
        .increment(1);
    Ok(())
}

/// A number that arrives for an account deactivated while it was pending: kept on the account
/// (money sent to it is then recorded as `flagged`, never unmatched) and closed at the bank, in
/// the caller's transaction. The account stays deactivated and no `active` event is sent. Does
/// nothing to an account that is not such a one.
pub(super) async fn close_late_number<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    account_id: &AccountId,
    account_number: &str,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    use virtual_account::Column as Col;
    let keep = virtual_account::Entity::update_many()
        .col_expr(Col::AccountNumber, Some(account_number.to_owned()).into())
        .col_expr(Col::UpdatedAt, now.into())
        .filter(Col::Id.eq(account_id))
        .filter(Col::Status.eq(AccountStatus::Deactivated))
        .filter(Col::AccountNumber.is_null());
    // A number another account holds is not kept, but the bank's account is closed all the same.
    let kept = match write_number(db, keep).await? {
        Some(rows) => rows,
        None => {
            number_held(db, account_id, account_number).await?;
            1
        }
    };
    if kept == 1 {
        enqueue_close(db, account_id, now).await?;
        tracing::info!(
            account_id = %account_id,
            "a number came for a deactivated account; closing it at the bank"
        );
    }
    Ok(())
}

pub(super) async fn record_account_event<C: ConnectionTrait>(
    db: &C,
    account: &Account,
    event_type: EventType,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    crate::events::record(
        db,
        &account.business_id,
        account.mode,
        event_type,
        &views::AccountView::from(account),
        now,
    )
    .await?;
    Ok(())
}
