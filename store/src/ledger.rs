//! The balance ledger (docs/api/settlement-and-payouts.md): every movement of money is one
//! append-only entry, written in the caller's transaction together with the `balances` row it
//! changes, so the balance is the ledger's sum at every commit. One entry per (type, source) by a
//! unique index: a fact moves money once.

use sea_orm::sea_query::{
    Alias, CommonTableExpression, Expr, ExprTrait, OnConflict, Query, SubQueryStatement, WithClause,
};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QueryResult,
    Statement, StatementBuilder,
};
use serde::Serialize;

use super::list_counts::List;
use crate::tenant::Tenant;
use domain::ids::{BusinessId, LedgerEntryId};
use domain::payout::{EntryType, PayoutStatus};
use domain::{DepositStatus, Mode};
use entities::{balance, ledger_entry};

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
///
/// The add is checked in the statement itself on both databases (the balance moves only while
/// `available <= i64::MAX - amount`): past it, PostgreSQL would fail with a bigint error and
/// SQLite would silently store a float. A credit that would overflow moves nothing and is an
/// error ([`OVERFLOW`]), so the caller's transaction rolls back whole: never a wrong number.
pub async fn credit<C: ConnectionTrait>(db: &C, movement: Movement<'_>) -> Result<Entry, DbErr> {
    let Movement {
        business_id,
        mode,
        amount,
        source_id,
        ..
    } = movement;
    debug_assert!(amount > 0);
    let upsert = credit_upsert(db.get_database_backend(), &movement, None)?;
    match move_and_enter(db, upsert, movement).await? {
        Some(entry) => Ok(entry),
        None => {
            tracing::error!(%business_id, %mode, amount, source_id, "a credit would overflow the balance; nothing was credited");
            Err(DbErr::Custom(OVERFLOW.into()))
        }
    }
}

/// A round of credits to one balance (docs/decisions/grouped-deposit-rounds.md): their `sum`
/// added once, in the caller's transaction, which then writes each credit's entry
/// ([`entered`]). The balance after it; None when it would overflow (nothing moved).
pub(crate) async fn credit_sum<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    sum: i64,
) -> Result<Option<i64>, DbErr> {
    let movement = Movement {
        business_id,
        mode,
        entry_type: EntryType::Deposit,
        amount: sum,
        source_id: "",
    };
    let upsert = credit_upsert(db.get_database_backend(), &movement, None)?;
    db.query_one(&upsert)
        .await?
        .map(|row| row.try_get("", "available"))
        .transpose()
}

/// A credit's entry once its balance is known ([`credit_sum`]), to insert with its stamp.
pub(crate) fn entered(entry: &Entry, balance_after: i64) -> ledger_entry::ActiveModel {
    ledger_entry::ActiveModel::from(Entry {
        balance_after,
        ..entry.clone()
    })
}

/// [`credit`]'s balance statement, returning the balance after it (no row: it would overflow);
/// with `only_with`, it runs only when that table of the same `WITH` has a row (PostgreSQL).
fn credit_upsert(
    backend: DbBackend,
    movement: &Movement<'_>,
    only_with: Option<&str>,
) -> Result<sea_orm::sea_query::InsertStatement, DbErr> {
    let Movement {
        business_id,
        mode,
        amount,
        ..
    } = *movement;
    let clock = || super::clock_expr(backend);
    let mut values = Query::select();
    values.exprs([
        Expr::val(business_id),
        Expr::val(mode.as_str()),
        Expr::val(amount),
        clock(),
    ]);
    let values = super::upsert_values(values, only_with);
    let mut upsert = Query::insert();
    upsert
        .into_table(balance::Entity)
        .columns([
            balance::Column::BusinessId,
            balance::Column::Mode,
            balance::Column::Available,
            balance::Column::UpdatedAt,
        ])
        .select_from(values)
        .map_err(|e| DbErr::Custom(format!("the balance upsert: {e}")))?
        .on_conflict(
            OnConflict::columns([balance::Column::BusinessId, balance::Column::Mode])
                .value(
                    balance::Column::Available,
                    Expr::col((balance::Entity, balance::Column::Available)).add(amount),
                )
                .value(balance::Column::UpdatedAt, clock())
                .action_and_where(
                    Expr::col((balance::Entity, balance::Column::Available)).lte(i64::MAX - amount),
                )
                .to_owned(),
        )
        .returning_col(balance::Column::Available);
    Ok(upsert)
}

/// On PostgreSQL, [`credit`] as two parts of a `WITH` that run only when the table `only_with`
/// of that `WITH` has a row: `moved` (the balance) and `entry` (its ledger entry, returning
/// `balance_after`). No row in `entry`: the credit would overflow and moved nothing.
pub(crate) fn credit_ctes(
    movement: &Movement<'_>,
    entry: &Entry,
    only_with: &str,
) -> Result<[CommonTableExpression; 2], DbErr> {
    let upsert = credit_upsert(DbBackend::Postgres, movement, Some(only_with))?;
    let entry = entry_from_moved(entry)?;
    Ok([super::cte("moved", upsert), super::cte("entry", entry)])
}

/// The values [`credit_ctes`] binds, in its order (a [`super::Rendered`] statement): the new
/// balance row, the credit added to one there, the largest balance it may be added to, then the
/// entry's row but its balance and stamp.
pub(crate) fn push_credit_values(
    into: &mut Vec<sea_orm::Value>,
    movement: &Movement<'_>,
    entry: &Entry,
) -> Result<(), DbErr> {
    into.extend([
        movement.business_id.into(),
        movement.mode.as_str().into(),
        movement.amount.into(),
        movement.amount.into(),
        (i64::MAX - movement.amount).into(),
    ]);
    super::push_row_values(
        into,
        &ledger_entry::ActiveModel::from(entry.clone()),
        from_moved,
    )
}

/// The entry's columns [`entry_from_moved`] computes rather than binds: the balance `moved`
/// returned, and the database's stamp.
fn from_moved(col: &ledger_entry::Column) -> bool {
    matches!(
        col,
        ledger_entry::Column::BalanceAfter | ledger_entry::Column::CreatedAt
    )
}

/// The error of a credit that would take a balance past the largest 64-bit integer.
const OVERFLOW: &str =
    "the credit would take the balance past the largest amount it can hold; nothing was credited";

/// Whether `e` is a credit refused because the balance would overflow (see [`credit`]).
pub fn is_overflow(e: &DbErr) -> bool {
    matches!(e, DbErr::Custom(message) if message == OVERFLOW)
}

/// Takes `amount` (kobo, > 0) from the balance if it is available, and enters it, in the
/// caller's transaction. The check and the debit are ONE conditional statement, so concurrent
/// debits (any process, either database) can never take the balance below zero: the row lock
/// of the UPDATE serialises them and each re-checks `available >= amount`.
pub async fn debit<C: ConnectionTrait>(
    db: &C,
    movement: Movement<'_>,
) -> Result<Result<Entry, Insufficient>, DbErr> {
    let Movement {
        business_id,
        mode,
        amount,
        ..
    } = movement;
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
        .cond_where(Tenant::new(business_id, mode).filter::<balance::Column>())
        .and_where(balance::Column::Available.gte(amount))
        .returning_col(balance::Column::Available)
        .to_owned();
    let entry = Movement {
        amount: -amount,
        ..movement
    };
    if let Some(entry) = move_and_enter(db, update, entry).await? {
        return Ok(Ok(entry));
    }
    let available = find(db, business_id, mode)
        .await?
        .map_or(0, |b| b.available);
    Ok(Err(Insufficient { available }))
}

/// Money moving in one business's balance in one mode, and the fact that moves it: what
/// [`credit`] and [`debit`] take (`amount` > 0) and what their entry records (`amount` signed).
#[derive(Clone, Copy, Debug)]
pub struct Movement<'a> {
    pub business_id: &'a BusinessId,
    pub mode: Mode,
    pub entry_type: EntryType,
    /// Kobo.
    pub amount: i64,
    pub source_id: &'a str,
}

/// Runs `balance` (a statement on `balances` returning the new `available`, or no row when it
/// refused) and writes the entry that records it, stamped after the balance row's lock was taken
/// (by the database's clock on PostgreSQL), so entries of one balance are in the order their
/// balances were written. None when the balance statement moved nothing.
///
/// On PostgreSQL the two are one statement, `WITH moved AS (<balance> RETURNING available)
/// INSERT INTO ledger_entries … SELECT … FROM moved`: no round trip while the lock is held
/// beyond the statement that takes it.
async fn move_and_enter<C, S>(db: &C, balance: S, new: Movement<'_>) -> Result<Option<Entry>, DbErr>
where
    C: ConnectionTrait,
    S: StatementBuilder + Into<SubQueryStatement>,
{
    let backend = db.get_database_backend();
    let mut entry = new_entry(&new);
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
    let insert = entry_from_moved(&entry)?;
    let mut with = WithClause::new();
    with.cte(super::cte("moved", balance));
    let statement = super::with_query(with, insert);
    let Some(row) = db.query_one(&statement).await? else {
        return Ok(None);
    };
    entry.balance_after = row.try_get("", "balance_after")?;
    entry.created_at = row.try_get("", "created_at")?;
    Ok(Some(entry))
}

/// A movement's entry, before its balance is known.
pub(crate) fn new_entry(new: &Movement<'_>) -> Entry {
    Entry {
        id: LedgerEntryId::new(),
        business_id: new.business_id.to_owned(),
        mode: new.mode,
        entry_type: new.entry_type,
        amount: new.amount,
        balance_after: 0,
        source_id: new.source_id.to_owned(),
        created_at: domain::time::now(),
    }
}

/// The entry's insert on PostgreSQL, its `balance_after` read from the `WITH` table `moved`
/// (the balance statement's returned row) and stamped by the database's clock.
fn entry_from_moved(entry: &Entry) -> Result<sea_orm::sea_query::InsertStatement, DbErr> {
    use ledger_entry::Column as Col;
    let moved = Alias::new("moved");
    let row = ledger_entry::ActiveModel::from(entry.clone());
    let mut values = super::row_values(&row, |col| {
        from_moved(col).then(|| match col {
            Col::BalanceAfter => Expr::col((moved.clone(), balance::Column::Available)),
            _ => super::clock_expr(DbBackend::Postgres),
        })
    })?;
    values.from(moved);
    Ok(
        super::insert_select::<ledger_entry::Entity>(values, "the ledger entry")?
            .returning(Query::returning().columns([Col::BalanceAfter, Col::CreatedAt]))
            .to_owned(),
    )
}

/// The balance row, if money ever moved in this mode.
pub async fn find<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
) -> Result<Option<Balance>, DbErr> {
    balance::Entity::find_by_id((business_id.to_owned(), mode))
        .one(db)
        .await
}

/// A page of entries, newest first, and the (exact, maintained) total.
pub async fn list(
    db: &sea_orm::DatabaseConnection,
    business_id: &BusinessId,
    mode: Mode,
    request: &super::paging::PageRequest,
) -> Result<(super::paging::Fetched<Entry>, super::paging::Total), DbErr> {
    use ledger_entry::Column as Col;
    let select =
        ledger_entry::Entity::find().filter(Tenant::new(business_id, mode).filter::<Col>());
    let total = super::list_counts::total(db, business_id, mode, List::Ledger, None).await?;
    let fetched = super::paging::fetch(db, select, Col::CreatedAt, Col::Id, request, |e| {
        (e.created_at, e.id.to_string())
    })
    .await?;
    Ok((fetched, total))
}

/// What `verify` found wrong. `expected` and `found` are kobo (signed, as entries are).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Problem {
    /// The balance is not the sum of its entries.
    BalanceDiffersFromSum,
    /// An entry's `balance_after` is not the running sum in entry order.
    BalanceAfterBreaksChain,
    /// A source that moves money (a credited deposit, a payout, a failed or reversed payout's
    /// return) has no entry of its type in its balance: `expected` its amount, `found` 0.
    EntryMissing,
    /// A source has more than one entry of its type: `found` is their sum, `entries` how many.
    EntryRepeated,
    /// A source's one entry is of another amount.
    EntryAmountDiffers,
    /// An entry whose source (deposit or payout) does not exist in its business and mode:
    /// `expected` 0, `found` what it moved.
    EntryWithoutSource,
    /// An entry whose source exists but does not justify its type (a flagged deposit's credit, a
    /// return of a payout that did not fail or reverse): `expected` 0, `found` what it moved.
    EntryNotJustified,
}

/// One thing `verify` found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mismatch {
    pub business_id: BusinessId,
    pub mode: Mode,
    pub problem: Problem,
    /// The entry at fault, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<String>,
    /// The entry type concerned, for the checks against the sources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry_type: Option<EntryType>,
    /// The deposit or payout concerned, for the checks against the sources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    /// How many entries a source has, for `entry_repeated`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entries: Option<i64>,
    pub expected: i64,
    pub found: i64,
}

impl Mismatch {
    fn of_balance(business_id: BusinessId, mode: Mode, problem: Problem) -> Self {
        Self {
            business_id,
            mode,
            problem,
            entry_id: None,
            entry_type: None,
            source_id: None,
            entries: None,
            expected: 0,
            found: 0,
        }
    }
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

/// Which source justifies an entry of a type, and with what amount: the ledger's rules of
/// docs/api/settlement-and-payouts.md, written once and read by both directions of [`verify`].
struct SourceRule {
    entry_type: EntryType,
    table: &'static str,
    /// The amount an entry of this type carries, from the source's row (`amount` or `-amount`).
    amount: &'static str,
    /// The statuses (quoted, comma-separated) in which the source moves this money.
    statuses: String,
}

fn source_rules() -> [SourceRule; 3] {
    let quoted = |values: &[&str]| {
        values
            .iter()
            .map(|v| format!("'{v}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let payout_statuses = |keep: fn(&PayoutStatus) -> bool| {
        let statuses: Vec<&str> = PayoutStatus::ALL
            .into_iter()
            .filter(keep)
            .map(PayoutStatus::as_str)
            .collect();
        quoted(&statuses)
    };
    [
        // Each credited deposit, once (flagged ones are never credited).
        SourceRule {
            entry_type: EntryType::Deposit,
            table: "deposits",
            amount: "amount",
            statuses: quoted(&[DepositStatus::Credited.as_str()]),
        },
        // Each payout, taken when it is created, whatever became of it.
        SourceRule {
            entry_type: EntryType::Payout,
            table: "payouts",
            amount: "-amount",
            statuses: payout_statuses(|_| true),
        },
        // Each payout that failed or was reversed, given back once.
        SourceRule {
            entry_type: EntryType::PayoutReturn,
            table: "payouts",
            amount: "amount",
            statuses: payout_statuses(|s| s.returns_money()),
        },
    ]
}

/// The money each source should have moved: one row per (type, source), with its business,
/// mode and signed amount.
fn expected_entries() -> String {
    source_rules()
        .iter()
        .map(|r| {
            format!(
                "SELECT '{entry_type}' AS type, id AS source_id, business_id, mode, \
                        {amount} AS amount FROM {table} WHERE status IN ({statuses})",
                entry_type = r.entry_type.as_str(),
                amount = r.amount,
                table = r.table,
                statuses = r.statuses,
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ")
}

/// True (in SQL) when a source justifies ledger entry `l`: one primary-key lookup per entry,
/// in the source table its type names.
fn entry_justified() -> String {
    source_rules()
        .iter()
        .map(|r| {
            format!(
                "(l.type = '{entry_type}' AND EXISTS (SELECT 1 FROM {table} s \
                   WHERE s.id = l.source_id AND s.business_id = l.business_id \
                     AND s.mode = l.mode AND s.status IN ({statuses})))",
                entry_type = r.entry_type.as_str(),
                table = r.table,
                statuses = r.statuses,
            )
        })
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// Checks the ledger against itself (every balance equals the sum of its entries; each entry's
/// `balance_after` is the running sum in entry order) and against its sources
/// (docs/api/settlement-and-payouts.md: each money-moving source has exactly one entry of its type
/// and amount, in its business and mode, and no entry moves money without a source whose status
/// justifies it). Every check is one set-based statement (window sums, GROUP BY, anti-joins),
/// whatever the ledger's size; sums are 64-bit integers (an overflow is an error, never a wrong
/// number).
pub async fn verify<C: ConnectionTrait>(db: &C) -> Result<Verification, DbErr> {
    let backend = db.get_database_backend();
    let query = |sql: String| db.query_all_raw(Statement::from_string(backend, sql));
    let mode = |row: &QueryResult| -> Result<Mode, DbErr> {
        let text: String = row.try_get("", "mode")?;
        Mode::parse(&text).ok_or_else(|| DbErr::Custom(format!("a ledger row has mode '{text}'")))
    };
    let entry_type = |row: &QueryResult| -> Result<EntryType, DbErr> {
        let text: String = row.try_get("", "type")?;
        EntryType::parse(&text)
            .ok_or_else(|| DbErr::Custom(format!("a ledger entry has type '{text}'")))
    };
    let count = |table: &str| query(format!("SELECT COUNT(*) AS n FROM {table}"));
    let balances: i64 = first_i64(count("balances").await?, "n")?;
    let entries: i64 = first_i64(count("ledger_entries").await?, "n")?;
    let mut mismatches = Vec::new();

    // Balances against the sum of their entries (entries with no balance row must sum to 0).
    let sums = "SELECT business_id, mode, CAST(SUM(amount) AS BIGINT) AS total \
                FROM ledger_entries GROUP BY business_id, mode";
    for row in query(format!(
        "SELECT b.business_id, b.mode, CAST(COALESCE(s.total, 0) AS BIGINT) AS expected, \
                b.available AS found \
         FROM balances b LEFT JOIN ({sums}) s ON s.business_id = b.business_id AND s.mode = b.mode \
         WHERE b.available <> COALESCE(s.total, 0) \
         UNION ALL \
         SELECT s.business_id, s.mode, s.total, 0 FROM ({sums}) s \
         WHERE s.total <> 0 AND NOT EXISTS (SELECT 1 FROM balances b \
             WHERE b.business_id = s.business_id AND b.mode = s.mode) \
         ORDER BY 1, 2"
    ))
    .await?
    {
        let mut m = Mismatch::of_balance(
            row.try_get("", "business_id")?,
            mode(&row)?,
            Problem::BalanceDiffersFromSum,
        );
        m.expected = row.try_get("", "expected")?;
        m.found = row.try_get("", "found")?;
        mismatches.push(m);
    }

    // Each entry's balance_after against the running sum.
    for row in query(
        "SELECT id, business_id, mode, expected, balance_after FROM ( \
           SELECT id, business_id, mode, balance_after, created_at, \
             CAST(SUM(amount) OVER (PARTITION BY business_id, mode ORDER BY created_at, id \
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS BIGINT) AS expected \
           FROM ledger_entries) t \
         WHERE balance_after <> expected ORDER BY business_id, mode, created_at, id"
            .to_owned(),
    )
    .await?
    {
        let mut m = Mismatch::of_balance(
            row.try_get("", "business_id")?,
            mode(&row)?,
            Problem::BalanceAfterBreaksChain,
        );
        m.entry_id = Some(row.try_get("", "id")?);
        m.expected = row.try_get("", "expected")?;
        m.found = row.try_get("", "balance_after")?;
        mismatches.push(m);
    }

    // Each source against its entries: none, several, or one of another amount.
    let expected = expected_entries();
    for row in query(format!(
        "SELECT e.type, e.source_id, e.business_id, e.mode, e.amount AS expected, \
                CAST(COALESCE(g.n, 0) AS BIGINT) AS n, CAST(COALESCE(g.total, 0) AS BIGINT) AS found, \
                g.entry_id \
         FROM ({expected}) e LEFT JOIN ( \
           SELECT type, source_id, business_id, mode, COUNT(*) AS n, \
                  CAST(SUM(amount) AS BIGINT) AS total, MIN(id) AS entry_id \
           FROM ledger_entries GROUP BY type, source_id, business_id, mode) g \
         ON g.type = e.type AND g.source_id = e.source_id \
            AND g.business_id = e.business_id AND g.mode = e.mode \
         WHERE g.n IS NULL OR g.n <> 1 OR g.total <> e.amount \
         ORDER BY e.business_id, e.mode, e.source_id, e.type"
    ))
    .await?
    {
        let n: i64 = row.try_get("", "n")?;
        let problem = match n {
            0 => Problem::EntryMissing,
            1 => Problem::EntryAmountDiffers,
            _ => Problem::EntryRepeated,
        };
        let mut m = Mismatch::of_balance(row.try_get("", "business_id")?, mode(&row)?, problem);
        m.entry_type = Some(entry_type(&row)?);
        m.source_id = Some(row.try_get("", "source_id")?);
        m.entry_id = (n == 1).then(|| row.try_get("", "entry_id")).transpose()?;
        m.entries = (n > 1).then_some(n);
        m.expected = row.try_get("", "expected")?;
        m.found = row.try_get("", "found")?;
        mismatches.push(m);
    }

    // Each entry against the sources: one that no source of its type, business and mode
    // accounts for moved money on its own.
    let justified = entry_justified();
    for row in query(format!(
        "SELECT l.id, l.type, l.source_id, l.business_id, l.mode, l.amount, \
                CAST(CASE WHEN EXISTS (SELECT 1 FROM deposits d WHERE d.id = l.source_id \
                                         AND d.business_id = l.business_id AND d.mode = l.mode) \
                            OR EXISTS (SELECT 1 FROM payouts p WHERE p.id = l.source_id \
                                         AND p.business_id = l.business_id AND p.mode = l.mode) \
                          THEN 1 ELSE 0 END AS BIGINT) AS source_exists \
         FROM ledger_entries l \
         WHERE NOT ({justified}) \
         ORDER BY l.business_id, l.mode, l.created_at, l.id"
    ))
    .await?
    {
        let exists: i64 = row.try_get("", "source_exists")?;
        let problem = match exists {
            0 => Problem::EntryWithoutSource,
            _ => Problem::EntryNotJustified,
        };
        let mut m = Mismatch::of_balance(row.try_get("", "business_id")?, mode(&row)?, problem);
        m.entry_id = Some(row.try_get("", "id")?);
        m.entry_type = Some(entry_type(&row)?);
        m.source_id = Some(row.try_get("", "source_id")?);
        m.found = row.try_get("", "amount")?;
        mismatches.push(m);
    }

    Ok(Verification {
        ok: mismatches.is_empty(),
        balances: u64::try_from(balances).unwrap_or(0),
        entries: u64::try_from(entries).unwrap_or(0),
        mismatches,
    })
}

fn first_i64(rows: Vec<QueryResult>, column: &str) -> Result<i64, DbErr> {
    rows.first()
        .ok_or_else(|| DbErr::Custom("a count returned no row".into()))?
        .try_get("", column)
}
