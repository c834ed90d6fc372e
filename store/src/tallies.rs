//! Account tallies (`m0015_account_counts`), kept in the transaction of every creation and status
//! change: the list totals without a search (a read of a few rows, however many accounts) and the
//! exact rolling-hour count of the creation limit (O(1) per creation, not a count of the hour).
//!
//! The rolling hour: `created` counts every account written in a business and mode, `expired` how
//! many of them were created at or before the mark `expired_until`. A creation, in one statement
//! under the business-and-mode row lock, moves the mark up to an hour before its own stamp,
//! counting only the accounts that left the window since the last mark (each account is counted
//! once as it leaves); the hour then holds `created - expired`. That is exact as long as the mark
//! never passes an account that is not yet committed, which [`count_creation`] makes sure of.
//!
//! Why accounts keep their tallies in code while the other lists use triggers (`list_counts`): the
//! creation limit must read and move its count in the statement that locks the business row, and
//! return it to the caller (`RateLimit` headers, the 501st refused); a trigger can keep a total but
//! cannot hand the creation its rolling hour under that lock.

use chrono::{DateTime, Duration, Utc};
use domain::ids::{AccountId, BusinessId};
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Func, OnConflict, Query, SelectStatement};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter,
    QuerySelect, QueryTrait, TransactionSession, TransactionTrait,
};

use crate::tenant::Tenant;
use domain::{AccountStatus, Mode};
use entities::{account_count, business_mode, virtual_account};

/// The rolling window of the account limit.
pub const LIMIT_WINDOW: Duration = Duration::hours(1);

/// A business and mode's creation tally, as read.
#[derive(Debug, Clone)]
pub(crate) struct Tally {
    created: i64,
    expired: i64,
    expired_until: Option<DateTime<Utc>>,
    /// The time of the read: the database's clock (PostgreSQL; SQLite serves one process, whose
    /// clock it is), never before the newest stamp.
    pub now: DateTime<Utc>,
}

/// The rolling hour as of a tally's `now`.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    /// Accounts created in the hour before `now`.
    pub in_window: u64,
    /// The oldest of them.
    pub oldest: Option<DateTime<Utc>>,
}

/// Locks the business-and-mode row (FOR UPDATE on PostgreSQL; SQLite has one writer at a time)
/// and reads its tally: creations of one business and mode serialise here, in every process.
pub(crate) async fn lock<C: ConnectionTrait>(
    txn: &C,
    business_id: &BusinessId,
    mode: Mode,
) -> Result<Tally, DbErr> {
    read(txn, business_id, mode, true).await
}

/// The tally without taking the lock (for the limit headers of answers that create nothing).
pub(crate) async fn peek<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
) -> Result<Tally, DbErr> {
    read(db, business_id, mode, false).await
}

async fn read<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
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

/// The rolling hour at the tally's `now`, for answers that create nothing (the mark stays): one
/// statement counting the accounts that left it since the mark and finding the oldest still in it (both index ranges of
/// `virtual_accounts_business_mode_created_id`).
pub(crate) async fn window<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    tally: &Tally,
) -> Result<Window, DbErr> {
    use virtual_account::Column as Col;
    let cutoff = tally.now - LIMIT_WINDOW;
    let of_business = || {
        virtual_account::Entity::find()
            .select_only()
            .filter(Tenant::new(business_id, mode).filter::<Col>())
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
    let expired = if moves {
        let leaving: i64 = row.try_get("", "leaving")?;
        tally.expired + leaving
    } else {
        tally.expired
    };
    Ok(Window {
        in_window: std::cmp::max(tally.created - expired, 0) as u64,
        oldest: row.try_get("", "oldest")?,
    })
}

/// A creation as counted under the business-and-mode row lock.
#[derive(Debug, Clone)]
pub(crate) struct Counted {
    /// Accounts created in the hour up to the new one's stamp, the new one included.
    pub in_window: u64,
    /// The oldest of them.
    pub oldest: Option<DateTime<Utc>>,
}

/// Counts a creation stamped `at` (its account already written in the caller's transaction), in
/// ONE statement that locks the business-and-mode row: the row lock is then held for this
/// statement and the commit only, which is all that creations of one business and mode queue for.
/// The statement adds one to `created`, moves the mark up to `at - 1h` (never back), adding the
/// accounts that left the window since the last mark to `expired`, and returns the hour's count
/// and its oldest stamp. The caller rolls back when the count is over the limit.
///
/// The mark may only pass committed accounts: an account stamped at or before a mark already
/// passed would never be counted as leaving. So the statement refuses (None) when the mark has
/// reached `at`, which takes a creation transaction open for an hour; the caller answers with an
/// error and writes nothing.
pub(crate) async fn count_creation<C: ConnectionTrait>(
    txn: &C,
    business_id: &BusinessId,
    mode: Mode,
    at: DateTime<Utc>,
) -> Result<Option<Counted>, DbErr> {
    let update = count_creation_update(
        business_id,
        mode,
        Expr::val(at),
        Expr::val(at - LIMIT_WINDOW),
    );
    let backend = txn.get_database_backend();
    let Some(row) = txn.query_one_raw(backend.build(&update)).await? else {
        return Ok(None);
    };
    let in_window: i64 = row.try_get_by_index(0)?;
    Ok(Some(Counted {
        in_window: std::cmp::max(in_window, 0) as u64,
        oldest: row.try_get_by_index(1)?,
    }))
}

/// [`count_creation`]'s statement for a creation stamped `at`, `cutoff` being `at` less
/// [`LIMIT_WINDOW`]: values, or (on PostgreSQL) expressions of a `WITH` that writes the account in
/// the same statement ([`stamp_of`]). It returns the hour's count and its oldest stamp, `at` when
/// the statement cannot see the new account yet (a `WITH`'s parts share one snapshot).
pub(crate) fn count_creation_update(
    business_id: &BusinessId,
    mode: Mode,
    at: Expr,
    cutoff: Expr,
) -> sea_orm::sea_query::UpdateStatement {
    use business_mode::Column as B;
    use virtual_account::Column as A;
    // The business and mode opaque to the planner, or a business the statistics call small
    // has its creations planned afresh every time (`super::eq_opaque`).
    let of_business = || {
        virtual_account::Entity::find()
            .select_only()
            .filter(super::eq_opaque(A::BusinessId, business_id))
            .filter(super::eq_opaque(A::Mode, mode))
    };
    let mark = || Expr::col((business_mode::Entity, B::AccountsExpiredUntil));
    let leaving = of_business()
        .expr(Expr::cust("count(*)"))
        .filter(Expr::col((virtual_account::Entity, A::CreatedAt)).lte(cutoff.clone()))
        .filter(
            Expr::col((virtual_account::Entity, A::CreatedAt))
                .gt(Func::coalesce([mark(), Expr::val(LONG_AGO)])),
        )
        .into_query();
    let oldest = of_business()
        .expr(Expr::cust("min(created_at)"))
        .filter(Expr::col((virtual_account::Entity, A::CreatedAt)).gt(cutoff.clone()))
        .into_query();
    let sub = |s: SelectStatement| Expr::SubQuery(None, Box::new(s.into()));
    let latest = |col: B, value: Expr| {
        Func::greatest([
            Expr::from(Func::coalesce([Expr::col(col), value.clone()])),
            value,
        ])
    };
    let mut update = Query::update();
    update
        .table(business_mode::Entity)
        .value(B::AccountsCreated, Expr::col(B::AccountsCreated).add(1i64))
        .value(
            B::AccountsExpired,
            Expr::col(B::AccountsExpired).add(sub(leaving)),
        )
        .value(
            B::AccountsExpiredUntil,
            latest(B::AccountsExpiredUntil, cutoff),
        )
        .value(B::LastAccountAt, latest(B::LastAccountAt, at.clone()))
        .cond_where(Tenant::new(business_id, mode).filter::<B>())
        .and_where(mark().is_null().or(mark().lt(at.clone())))
        .returning(Query::returning().exprs([
            Expr::col(B::AccountsCreated).sub(Expr::col(B::AccountsExpired)),
            Expr::from(Func::coalesce([sub(oldest), at])),
        ]));
    update
}

/// A mark before any account: a bound both databases compare as a date (SQLite compares the
/// stored text).
const LONG_AGO: DateTime<Utc> = DateTime::<Utc>::UNIX_EPOCH;

/// The values [`count_creation_update`] binds, in its order (a [`super::Rendered`] statement):
/// the creation counted, the business and mode of the accounts leaving the window, the mark's
/// default, the row's business and mode, and the oldest account's business and mode.
pub(crate) fn push_count_creation_values(
    into: &mut Vec<sea_orm::Value>,
    business_id: &BusinessId,
    mode: Mode,
) {
    into.extend([
        1i64.into(),
        business_id.into(),
        mode.into(),
        LONG_AGO.into(),
        business_id.into(),
        mode.into(),
        business_id.into(),
        mode.into(),
    ]);
}

/// The stamp and the window's cutoff of an account written in the same `WITH` as its count, as
/// [`count_creation_update`] takes them: `table.created_at` and an hour before (PostgreSQL).
pub(crate) fn stamp_of(table: &str) -> (Expr, Expr) {
    let at = Expr::col((Alias::new(table), virtual_account::Column::CreatedAt));
    let cutoff = Expr::cust(format!(
        "{table}.created_at - interval '{} seconds'",
        LIMIT_WINDOW.num_seconds()
    ));
    (at, cutoff)
}

/// How many rows each status's count is spread over.
const SHARDS: u32 = 16;

/// The shard an account's changes are counted in (any would do: the count is the sum).
pub(crate) fn shard_of(account_id: &AccountId) -> i32 {
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
            let row = (&account.business_id, account.mode, status, shard);
            add(txn, row, delta).await?;
        }
    }
    Ok(())
}

async fn add<C: ConnectionTrait>(
    db: &C,
    row: (&BusinessId, Mode, AccountStatus, i32),
    delta: i64,
) -> Result<(), DbErr> {
    db.execute(&count_insert(row, delta, None)?).await?;
    Ok(())
}

/// The row of a count that [`count_insert`] adds `delta` to.
fn count_row(
    (business_id, mode, status, shard): (&BusinessId, Mode, AccountStatus, i32),
    delta: i64,
) -> account_count::ActiveModel {
    account_count::ActiveModel {
        business_id: Set(business_id.to_owned()),
        mode: Set(mode),
        status: Set(status),
        shard: Set(shard),
        n: Set(delta),
    }
}

/// [`add`]'s upsert; with `only_with`, written only when that table of the same `WITH` has a row.
fn count_insert(
    counted: (&BusinessId, Mode, AccountStatus, i32),
    delta: i64,
    only_with: Option<&str>,
) -> Result<sea_orm::sea_query::InsertStatement, DbErr> {
    use account_count::Column as Col;
    let row = count_row(counted, delta);
    let values = super::upsert_values(super::row_values(&row, |_| None)?, only_with);
    let mut insert = super::insert_select::<account_count::Entity>(values, "the account count")?;
    insert.on_conflict(
        OnConflict::columns([Col::BusinessId, Col::Mode, Col::Status, Col::Shard])
            .value(
                Col::N,
                Expr::col((account_count::Entity, Col::N)).add(delta),
            )
            .to_owned(),
    );
    Ok(insert)
}

/// [`status_changed`] of a pending account `account_id` becoming `to`, as one statement of a
/// `WITH` that runs only when the table `changed` of that `WITH` has a row (PostgreSQL).
pub(crate) fn left_pending_insert(
    business_id: &BusinessId,
    mode: Mode,
    account_id: &AccountId,
    to: AccountStatus,
    changed: &str,
) -> Result<sea_orm::sea_query::InsertStatement, DbErr> {
    count_insert(
        (business_id, mode, to, shard_of(account_id)),
        1,
        Some(changed),
    )
}

/// The values [`left_pending_insert`] binds, in its order (a [`super::Rendered`] statement): the
/// count's row, then the delta of its update.
pub(crate) fn push_left_pending_values(
    into: &mut Vec<sea_orm::Value>,
    business_id: &BusinessId,
    mode: Mode,
    account_id: &AccountId,
    to: AccountStatus,
) -> Result<(), DbErr> {
    let row = count_row((business_id, mode, to, shard_of(account_id)), 1);
    super::push_row_values(into, &row, |_| false)?;
    into.push(1i64.into());
    Ok(())
}

/// How many accounts a business has in one mode, of one status or all: a few rows read,
/// however many accounts.
pub async fn total<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
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
            .filter(Tenant::new(business_id, mode).filter::<account_count::Column>())
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
    business_id: &BusinessId,
    mode: Mode,
) -> Result<(), DbErr> {
    use virtual_account::Column as Col;
    let txn = db.begin().await?;
    lock(&txn, business_id, mode).await?;
    let by_status: Vec<(AccountStatus, i64)> = virtual_account::Entity::find()
        .select_only()
        .column(Col::Status)
        .expr(Expr::cust("count(*)"))
        .filter(Tenant::new(business_id, mode).filter::<Col>())
        .group_by(Col::Status)
        .into_tuple()
        .all(&txn)
        .await?;
    let last: Option<DateTime<Utc>> = virtual_account::Entity::find()
        .select_only()
        .expr(Expr::cust("max(created_at)"))
        .filter(Tenant::new(business_id, mode).filter::<Col>())
        .into_tuple()
        .one(&txn)
        .await?
        .flatten();
    account_count::Entity::delete_many()
        .filter(Tenant::new(business_id, mode).filter::<account_count::Column>())
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
        .filter(Tenant::new(business_id, mode).filter::<B>())
        .exec(&txn)
        .await?;
    txn.commit().await
}
