//! The balance ledger (SPEC §7): every movement of money is one append-only entry, written in
//! the caller's transaction together with the `balances` row it changes, so the balance is the
//! ledger's sum at every commit. One entry per (type, source) by a unique index: a fact moves
//! money once.

use std::collections::HashMap;

use sea_orm::sea_query::{
    Alias, CommonTableExpression, Expr, ExprTrait, OnConflict, Query, SubQueryStatement, WithClause,
};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, Iterable, QueryFilter, QueryOrder,
    QuerySelect, StatementBuilder,
};
use serde::Serialize;

use super::entities::{balance, ledger_entry};
use super::list_counts::List;
use domain::Mode;
use domain::ids::new_id;
use domain::payout::EntryType;

pub use balance::Model as Balance;
pub use ledger_entry::Model as Entry;

/// A debit larger than the available balance: nothing was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insufficient {
    /// The available balance when the debit was refused, kobo.
    pub available: i64,
}

/// Adds `amount` (kobo, > 0) to the business's balance in `mode` and enters it, in the caller's
/// transaction. The balance row is created on the first credit.
///
/// The balance row's lock is held from here to the commit, and every credit and debit of the
/// business and mode waits for it: a caller writes it as late in its transaction as it can (a
/// deposit's credit is its transaction's last statement).
pub async fn credit<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
    entry_type: EntryType,
    amount: i64,
    source_id: &str,
) -> Result<Entry, DbErr> {
    debug_assert!(amount > 0);
    let clock = || super::clock_expr(db.get_database_backend());
    let upsert = Query::insert()
        .into_table(balance::Entity)
        .columns([
            balance::Column::BusinessId,
            balance::Column::Mode,
            balance::Column::Available,
            balance::Column::UpdatedAt,
        ])
        .values([
            business_id.into(),
            mode.as_str().into(),
            amount.into(),
            clock(),
        ])
        .map_err(|e| DbErr::Custom(format!("the balance upsert: {e}")))?
        .on_conflict(
            OnConflict::columns([balance::Column::BusinessId, balance::Column::Mode])
                .value(
                    balance::Column::Available,
                    Expr::col((balance::Entity, balance::Column::Available)).add(amount),
                )
                .value(balance::Column::UpdatedAt, clock())
                .to_owned(),
        )
        .returning_col(balance::Column::Available)
        .to_owned();
    let entry = NewEntry {
        business_id,
        mode,
        entry_type,
        amount,
        source_id,
    };
    move_and_enter(db, upsert, entry)
        .await?
        .ok_or_else(|| DbErr::Custom("balance upsert returned no row".into()))
}

/// Takes `amount` (kobo, > 0) from the balance if it is available, and enters it, in the
/// caller's transaction. The check and the debit are ONE conditional statement, so concurrent
/// debits (any process, either database) can never take the balance below zero: the row lock
/// of the UPDATE serialises them and each re-checks `available >= amount`.
pub async fn debit<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
    entry_type: EntryType,
    amount: i64,
    source_id: &str,
) -> Result<Result<Entry, Insufficient>, DbErr> {
    debug_assert!(amount > 0);
    let update = Query::update()
        .table(balance::Entity)
        .value(
            balance::Column::Available,
            Expr::col(balance::Column::Available).sub(amount),
        )
        .value(
            balance::Column::UpdatedAt,
            super::clock_expr(db.get_database_backend()),
        )
        .and_where(balance::Column::BusinessId.eq(business_id))
        .and_where(balance::Column::Mode.eq(mode))
        .and_where(balance::Column::Available.gte(amount))
        .returning_col(balance::Column::Available)
        .to_owned();
    let entry = NewEntry {
        business_id,
        mode,
        entry_type,
        amount: -amount,
        source_id,
    };
    if let Some(entry) = move_and_enter(db, update, entry).await? {
        return Ok(Ok(entry));
    }
    let available = find(db, business_id, mode)
        .await?
        .map_or(0, |b| b.available);
    Ok(Err(Insufficient { available }))
}

/// An entry to write once its balance has moved.
struct NewEntry<'a> {
    business_id: &'a str,
    mode: Mode,
    entry_type: EntryType,
    /// Signed, kobo.
    amount: i64,
    source_id: &'a str,
}

/// Runs `balance` (a statement on `balances` returning the new `available`, or no row when it
/// refused) and writes the entry that records it, stamped after the balance row's lock was taken
/// (by the database's clock on PostgreSQL), so entries of one balance are in the order their
/// balances were written. None when the balance statement moved nothing.
///
/// On PostgreSQL the two are one statement, `WITH moved AS (<balance> RETURNING available)
/// INSERT INTO ledger_entries … SELECT … FROM moved`: no round trip while the lock is held
/// beyond the statement that takes it.
async fn move_and_enter<C, S>(db: &C, balance: S, new: NewEntry<'_>) -> Result<Option<Entry>, DbErr>
where
    C: ConnectionTrait,
    S: StatementBuilder + Into<SubQueryStatement>,
{
    use ledger_entry::Column as Col;
    let backend = db.get_database_backend();
    let mut entry = Entry {
        id: new_id("btx"),
        business_id: new.business_id.to_owned(),
        mode: new.mode,
        entry_type: new.entry_type,
        amount: new.amount,
        balance_after: 0,
        source_id: new.source_id.to_owned(),
        created_at: domain::time::now(),
    };
    if backend != DbBackend::Postgres {
        let Some(row) = db.query_one(&balance).await? else {
            return Ok(None);
        };
        entry.balance_after = row.try_get("", "available")?;
        ledger_entry::Entity::insert(ledger_entry::ActiveModel::from(entry.clone()))
            .exec_without_returning(db)
            .await?;
        return Ok(Some(entry));
    }
    let moved = Alias::new("moved");
    let row = ledger_entry::ActiveModel::from(entry.clone());
    let mut values = super::row_values(&row, |col| match col {
        Col::BalanceAfter => Some(Expr::col((moved.clone(), balance::Column::Available))),
        Col::CreatedAt => Some(super::clock_expr(backend)),
        _ => None,
    })?;
    values.from(moved.clone());
    let insert = Query::insert()
        .into_table(ledger_entry::Entity)
        .columns(Col::iter())
        .select_from(values)
        .map_err(|e| DbErr::Custom(format!("the ledger entry: {e}")))?
        .returning(Query::returning().columns([Col::BalanceAfter, Col::CreatedAt]))
        .to_owned();
    let cte = CommonTableExpression::new()
        .query(balance)
        .table_name(moved)
        .to_owned();
    let statement = WithClause::new().cte(cte).to_owned().query(insert);
    let Some(row) = db.query_one(&statement).await? else {
        return Ok(None);
    };
    entry.balance_after = row.try_get("", "balance_after")?;
    entry.created_at = row.try_get("", "created_at")?;
    Ok(Some(entry))
}

/// The balance row, if money ever moved in this mode.
pub async fn find<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
) -> Result<Option<Balance>, DbErr> {
    balance::Entity::find_by_id((business_id.to_owned(), mode))
        .one(db)
        .await
}

/// A page of entries, newest first, and the (exact, maintained) total.
pub async fn list(
    db: &sea_orm::DatabaseConnection,
    business_id: &str,
    mode: Mode,
    request: &super::paging::PageRequest,
) -> Result<(super::paging::Fetched<Entry>, super::paging::Total), DbErr> {
    use ledger_entry::Column as Col;
    let select = ledger_entry::Entity::find()
        .filter(Col::BusinessId.eq(business_id))
        .filter(Col::Mode.eq(mode));
    let total = super::list_counts::total(db, business_id, mode, List::Ledger, None).await?;
    let fetched = super::paging::fetch(db, select, Col::CreatedAt, Col::Id, request, |e| {
        (e.created_at, e.id.clone())
    })
    .await?;
    Ok((fetched, total))
}

/// One thing `verify` found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mismatch {
    pub business_id: String,
    pub mode: Mode,
    /// `balance_differs_from_sum` or `balance_after_breaks_chain`.
    pub problem: &'static str,
    /// The entry whose `balance_after` is wrong, for a broken chain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<String>,
    pub expected: i64,
    pub found: i64,
}

/// What `api admin ledger verify` prints.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    pub ok: bool,
    pub balances: u64,
    pub entries: u64,
    pub mismatches: Vec<Mismatch>,
}

/// Checks that every balance equals the sum of its entries and that each entry's
/// `balance_after` is the running sum in entry order. Reads one balance's entries at a time.
pub async fn verify<C: ConnectionTrait>(db: &C) -> Result<Verification, DbErr> {
    use ledger_entry::Column as Col;
    // Every (business, mode) that has a balance row or an entry.
    let mut keys: HashMap<(String, Mode), i64> = balance::Entity::find()
        .all(db)
        .await?
        .into_iter()
        .map(|b| ((b.business_id, b.mode), b.available))
        .collect();
    let balances = keys.len() as u64;
    let with_entries: Vec<(String, Mode)> = ledger_entry::Entity::find()
        .select_only()
        .column(Col::BusinessId)
        .column(Col::Mode)
        .distinct()
        .into_tuple()
        .all(db)
        .await?;
    // Entries without a balance row must sum to zero.
    for key in with_entries {
        keys.entry(key).or_insert(0);
    }
    let mut mismatches = Vec::new();
    let mut entries = 0u64;
    for ((business_id, mode), available) in keys {
        let rows = ledger_entry::Entity::find()
            .filter(Col::BusinessId.eq(business_id.as_str()))
            .filter(Col::Mode.eq(mode))
            .order_by_asc(Col::CreatedAt)
            .order_by_asc(Col::Id)
            .all(db)
            .await?;
        let mut sum = 0i64;
        for entry in &rows {
            sum += entry.amount;
            if entry.balance_after != sum {
                mismatches.push(Mismatch {
                    business_id: business_id.clone(),
                    mode,
                    problem: "balance_after_breaks_chain",
                    entry_id: Some(entry.id.clone()),
                    expected: sum,
                    found: entry.balance_after,
                });
            }
        }
        entries += rows.len() as u64;
        if sum != available {
            mismatches.push(Mismatch {
                business_id,
                mode,
                problem: "balance_differs_from_sum",
                entry_id: None,
                expected: sum,
                found: available,
            });
        }
    }
    Ok(Verification {
        ok: mismatches.is_empty(),
        balances,
        entries,
        mismatches,
    })
}
