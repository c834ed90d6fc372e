//! Rechecks: asking the provider again for an account's transactions in a window.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, TransactionTrait,
};

use super::accounts::Account;
use super::outbox::enqueue;
use domain::RecheckStatus;
use domain::ids::{AccountId, RecheckId};
use entities::recheck;
use jobs::RecheckJob;

pub use recheck::Model as Recheck;

/// Queues a recheck and its job, or returns the one already queued or running for the account.
pub async fn request(
    db: &DatabaseConnection,
    account: &Account,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(Recheck, bool), DbErr> {
    if let Some(open) = find_open(db, &account.id).await? {
        return Ok((open, false));
    }
    let row = Recheck {
        id: RecheckId::new(),
        account_id: account.id.clone(),
        business_id: account.business_id.clone(),
        mode: account.mode,
        status: RecheckStatus::Queued,
        window_from: from,
        window_to: to,
        deposits_found: None,
        failure_reason: None,
        created_at: now,
        completed_at: None,
        updated_at: now,
    };
    let txn = db.begin().await?;
    let inserted = recheck::Entity::insert(recheck::ActiveModel {
        id: Set(row.id.clone()),
        account_id: Set(row.account_id.clone()),
        business_id: Set(row.business_id.clone()),
        mode: Set(row.mode),
        status: Set(row.status),
        window_from: Set(from),
        window_to: Set(to),
        deposits_found: Set(None),
        failure_reason: Set(None),
        created_at: Set(now),
        completed_at: Set(None),
        updated_at: Set(now),
    })
    .exec_without_returning(&txn)
    .await;
    match inserted {
        Ok(_) => {
            enqueue(
                &txn,
                &RecheckJob::Recheck {
                    recheck_id: row.id.clone(),
                },
                now,
                now,
            )
            .await?;
            txn.commit().await?;
            Ok((row, true))
        }
        // Another request queued one between our look and our insert: that one is the answer.
        Err(e) if super::is_unique_violation(&e) => {
            txn.rollback().await?;
            let open = find_open(db, &account.id).await?.ok_or(e)?;
            Ok((open, false))
        }
        Err(e) => Err(e),
    }
}

async fn find_open(
    db: &DatabaseConnection,
    account_id: &AccountId,
) -> Result<Option<Recheck>, DbErr> {
    recheck::Entity::find()
        .filter(recheck::Column::AccountId.eq(account_id))
        // The one-open index's own predicate: as constants, or no generic plan uses it.
        .filter(super::in_constants(
            recheck::Column::Status,
            RecheckStatus::OPEN,
        ))
        .one(db)
        .await
}

pub async fn find(
    db: &DatabaseConnection,
    account_id: &AccountId,
    id: &RecheckId,
) -> Result<Option<Recheck>, DbErr> {
    recheck::Entity::find_by_id(id.clone())
        .filter(recheck::Column::AccountId.eq(account_id))
        .one(db)
        .await
}

/// An account's newest rechecks, at most `limit` (the caller has checked whose account it is).
pub async fn for_account(
    db: &DatabaseConnection,
    account_id: &AccountId,
    limit: u64,
) -> Result<Vec<Recheck>, DbErr> {
    recheck::Entity::find()
        .filter(recheck::Column::AccountId.eq(account_id))
        .order_by_desc(recheck::Column::CreatedAt)
        .order_by_desc(recheck::Column::Id)
        .limit(limit)
        .all(db)
        .await
}

pub async fn find_by_id(db: &DatabaseConnection, id: &RecheckId) -> Result<Option<Recheck>, DbErr> {
    recheck::Entity::find_by_id(id.clone()).one(db).await
}

/// Moves a recheck to `status` (only from an open state, so a finished one stays finished).
pub async fn set_status(
    db: &DatabaseConnection,
    id: &str,
    status: RecheckStatus,
    deposits_found: Option<i32>,
    failure_reason: Option<String>,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let mut update = recheck::Entity::update_many()
        .col_expr(recheck::Column::Status, status.into())
        .col_expr(recheck::Column::UpdatedAt, now.into())
        .filter(recheck::Column::Id.eq(id))
        .filter(recheck::Column::Status.is_in(RecheckStatus::OPEN));
    if status.is_finished() {
        update = update
            .col_expr(recheck::Column::CompletedAt, Some(now).into())
            .col_expr(recheck::Column::DepositsFound, deposits_found.into())
            .col_expr(recheck::Column::FailureReason, failure_reason.into());
    }
    Ok(update.exec(db).await?.rows_affected == 1)
}
