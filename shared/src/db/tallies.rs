//! Account tallies (`m0015_account_counts`), kept in the transaction of every creation and status
//! change: the list totals without a search (a read of a few rows, however many accounts) and the
//! exact rolling-hour count of the creation limit (O(1) per creation, not a count of the hour).
//!
//! The rolling hour: `created` counts every account written in a business and mode, `expired` how
//! many of them were created at or before the mark `expired_until`. Under the business-and-mode
//! row lock a creation moves the mark up to an hour ago, counting only the creations that left the
//! window since the last one (each account is counted once as it leaves); the hour then holds
//! `created - expired`. That is exact because stamps never go backwards within a business and mode
//! (each is at least the previous one, `last_account_at`), so no account is ever written at or
//! before a mark already passed.

use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::{Alias, Expr, ExprTrait, OnConflict, Query, SelectStatement};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter,
    QuerySelect, QueryTrait, TransactionSession, TransactionTrait,
};

use super::entities::{account_count, business_mode, virtual_account};
use domain::{AccountStatus, Mode};

/// The rolling window of the account limit.
pub const LIMIT_WINDOW: Duration = Duration::hours(1);

/// A business and mode's creation tally, as read.
#[derive(Debug, Clone)]
pub(crate) struct Tally {
    created: i64,
    expired: i64,
    expired_until: Option<DateTime<Utc>>,
    /// The stamp a creation now takes: the database's clock (PostgreSQL; SQLite serves one
    /// process, whose clock it is), never before the newest stamp.
    pub now: DateTime<Utc>,
}

/// The rolling hour as of a tally's `now`.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    /// Accounts created in the hour before `now`.
    pub in_window: u64,
    /// The oldest of them.
    pub oldest: Option<DateTime<Utc>>,
    expired: i64,
    expired_until: Option<DateTime<Utc>>,
}

/// Locks the business-and-mode row (FOR UPDATE on PostgreSQL; SQLite has one writer at a time)
/// and reads its tally: creations of one business and mode serialise here, in every process.
pub(crate) async fn lock<C: ConnectionTrait>(
    txn: &C,
    business_id: &str,
    mode: Mode,
) -> Result<Tally, DbErr> {
    read(txn, business_id, mode, true).await
}

/// The tally without taking the lock (for the limit headers of answers that create nothing).
pub(crate) async fn peek<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
) -> Result<Tally, DbErr> {
    read(db, business_id, mode, false).await
}

async fn read<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
    lock: bool,
) -> Result<Tally, DbErr> {
    use business_mode::Column as Col;
    let backend = db.get_database_backend();
    let postgres = backend == DbBackend::Postgres;
    let mut select = business_mode::Entity::find_by_id((business_id.to_owned(), mode))
        .select_only()
        .columns([
            Col::AccountsCreated,
            Col::AccountsExpired,
            Col::AccountsExpiredUntil,
            Col::LastAccountAt,
        ]);
    if postgres {
        // The moment of the statement (after the lock), not the transaction's start.
        select = select.expr_as(Expr::cust("clock_timestamp()"), "now");
    }
    if lock {
        select = select.lock_exclusive();
    }
    let row = db
        .query_one_raw(select.build(backend))
        .await?
        .ok_or_else(|| DbErr::RecordNotFound(format!("business {business_id}")))?;
    let clock: DateTime<Utc> = if postgres {
        row.try_get("", "now")?
    } else {
        domain::time::now()
    };
    let last: Option<DateTime<Utc>> = row.try_get("", "last_account_at")?;
    Ok(Tally {
        created: row.try_get("", "accounts_created")?,
        expired: row.try_get("", "accounts_expired")?,
        expired_until: row.try_get("", "accounts_expired_until")?,
        now: last.map_or(clock, |last| std::cmp::max(clock, last)),
    })
}

/// The rolling hour at the tally's `now`: one statement counting the accounts that left it since
/// the mark and finding the oldest still in it (both index ranges of
/// `virtual_accounts_business_mode_created_id`).
pub(crate) async fn window<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
    tally: &Tally,
) -> Result<Window, DbErr> {
    use virtual_account::Column as Col;
    let cutoff = tally.now - LIMIT_WINDOW;
    let of_business = || {
        virtual_account::Entity::find()
            .select_only()
            .filter(Col::BusinessId.eq(business_id))
            .filter(Col::Mode.eq(mode))
    };
    let moves = tally.expired_until.is_none_or(|mark| mark < cutoff);
    let mut leaving = of_business()
        .expr(Expr::cust("count(*)"))
        .filter(Col::CreatedAt.lte(cutoff));
    if let Some(mark) = tally.expired_until {
        leaving = leaving.filter(Col::CreatedAt.gt(mark));
    }
    let oldest = of_business()
        .expr(Expr::cust("min(created_at)"))
        .filter(Col::CreatedAt.gt(cutoff));
    let sub = |s: SelectStatement| Expr::SubQuery(None, Box::new(s.into()));
    let mut both = Query::select();
    both.expr_as(sub(oldest.into_query()), Alias::new("oldest"));
    if moves {
        both.expr_as(sub(leaving.into_query()), Alias::new("leaving"));
    }
    let backend = db.get_database_backend();
    let row = db
        .query_one_raw(backend.build(&both))
        .await?
        .ok_or_else(|| DbErr::Custom("the window query returned no row".into()))?;
    let (expired, expired_until) = if moves {
        let leaving: i64 = row.try_get("", "leaving")?;
        (tally.expired + leaving, Some(cutoff))
    } else {
        (tally.expired, tally.expired_until)
    };
    Ok(Window {
        in_window: std::cmp::max(tally.created - expired, 0) as u64,
        oldest: row.try_get("", "oldest")?,
        expired,
        expired_until,
    })
}

/// Counts one creation at `tally.now`, with the window's new mark, in the caller's transaction
/// (which holds the row lock).
pub(crate) async fn record_creation<C: ConnectionTrait>(
    txn: &C,
    business_id: &str,
    mode: Mode,
    tally: &Tally,
    window: &Window,
) -> Result<(), DbErr> {
    use business_mode::Column as Col;
    business_mode::Entity::update_many()
        .col_expr(
            Col::AccountsCreated,
            Expr::col(Col::AccountsCreated).add(1i64),
        )
        .col_expr(Col::AccountsExpired, window.expired.into())
        .col_expr(Col::AccountsExpiredUntil, window.expired_until.into())
        .col_expr(Col::LastAccountAt, Some(tally.now).into())
        .filter(Col::BusinessId.eq(business_id))
        .filter(Col::Mode.eq(mode))
        .exec(txn)
        .await?;
    Ok(())
}

/// How many rows each status's count is spread over.
const SHARDS: u32 = 16;

/// The shard an account's changes are counted in (any would do: the count is the sum).
fn shard_of(account_id: &str) -> i32 {
    let hash = account_id
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    (hash % SHARDS) as i32
}

/// Moves one account from `from` to `to` in the counts, in the caller's transaction. `pending`
/// has no row (the created total less the others); rows are written in the order of their
/// status so two changes never lock the same two rows in opposite orders.
pub(crate) async fn status_changed<C: ConnectionTrait>(
    txn: &C,
    account: &virtual_account::Model,
    from: AccountStatus,
    to: AccountStatus,
) -> Result<(), DbErr> {
    let mut moves = [(from, -1i64), (to, 1i64)];
    moves.sort_by_key(|(status, _)| status.as_str());
    let shard = shard_of(&account.id);
    for (status, delta) in moves {
        if status != AccountStatus::Pending {
            let row = (account.business_id.as_str(), account.mode, status, shard);
            add(txn, row, delta).await?;
        }
    }
    Ok(())
}

async fn add<C: ConnectionTrait>(
    db: &C,
    (business_id, mode, status, shard): (&str, Mode, AccountStatus, i32),
    delta: i64,
) -> Result<(), DbErr> {
    use account_count::Column as Col;
    account_count::Entity::insert(account_count::ActiveModel {
        business_id: Set(business_id.to_owned()),
        mode: Set(mode),
        status: Set(status),
        shard: Set(shard),
        n: Set(delta),
    })
    .on_conflict(
        OnConflict::columns([Col::BusinessId, Col::Mode, Col::Status, Col::Shard])
            .value(
                Col::N,
                Expr::col((account_count::Entity, Col::N)).add(delta),
            )
            .to_owned(),
    )
    .exec_without_returning(db)
    .await?;
    Ok(())
}

/// How many accounts a business has in one mode, of one status or all: a few rows read,
/// however many accounts.
pub async fn total<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
    status: Option<AccountStatus>,
) -> Result<u64, DbErr> {
    let counted = |rows: &[account_count::Model], status: AccountStatus| -> i64 {
        rows.iter()
            .filter(|r| r.status == status)
            .map(|r| r.n)
            .sum()
    };
    let created = || async {
        Ok::<i64, DbErr>(
            business_mode::Entity::find_by_id((business_id.to_owned(), mode))
                .one(db)
                .await?
                .map_or(0, |m| m.accounts_created),
        )
    };
    let counts = || async {
        account_count::Entity::find()
            .filter(account_count::Column::BusinessId.eq(business_id))
            .filter(account_count::Column::Mode.eq(mode))
            .all(db)
            .await
    };
    let n = match status {
        None => created().await?,
        Some(AccountStatus::Pending) => {
            let rows = counts().await?;
            created().await? - rows.iter().map(|r| r.n).sum::<i64>()
        }
        Some(status) => counted(&counts().await?, status),
    };
    Ok(std::cmp::max(n, 0) as u64)
}

/// Rebuilds a business and mode's tallies from its rows: for accounts written around the
/// service (a bulk load of a benchmark or a test). The service itself never needs it.
pub async fn recount<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
) -> Result<(), DbErr> {
    use virtual_account::Column as Col;
    let txn = db.begin().await?;
    lock(&txn, business_id, mode).await?;
    let by_status: Vec<(AccountStatus, i64)> = virtual_account::Entity::find()
        .select_only()
        .column(Col::Status)
        .expr(Expr::cust("count(*)"))
        .filter(Col::BusinessId.eq(business_id))
        .filter(Col::Mode.eq(mode))
        .group_by(Col::Status)
        .into_tuple()
        .all(&txn)
        .await?;
    let last: Option<DateTime<Utc>> = virtual_account::Entity::find()
        .select_only()
        .expr(Expr::cust("max(created_at)"))
        .filter(Col::BusinessId.eq(business_id))
        .filter(Col::Mode.eq(mode))
        .into_tuple()
        .one(&txn)
        .await?
        .flatten();
    account_count::Entity::delete_many()
        .filter(account_count::Column::BusinessId.eq(business_id))
        .filter(account_count::Column::Mode.eq(mode))
        .exec(&txn)
        .await?;
    for (status, n) in &by_status {
        if *status != AccountStatus::Pending {
            add(&txn, (business_id, mode, *status, 0), *n).await?;
        }
    }
    use business_mode::Column as B;
    business_mode::Entity::update_many()
        .col_expr(
            B::AccountsCreated,
            by_status.iter().map(|(_, n)| n).sum::<i64>().into(),
        )
        .col_expr(B::AccountsExpired, 0i64.into())
        .col_expr(
            B::AccountsExpiredUntil,
            Option::<DateTime<Utc>>::None.into(),
        )
        .col_expr(B::LastAccountAt, last.into())
        .filter(B::BusinessId.eq(business_id))
        .filter(B::Mode.eq(mode))
        .exec(&txn)
        .await?;
    txn.commit().await
}
