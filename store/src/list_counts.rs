//! The maintained totals of the deposits, events, payouts and ledger lists
//! (`m0017_list_counts`): a list's `total` without a search is a read of a few rows, however
//! many the list has.
//!
//! The service never writes these counts itself: database triggers keep them with every INSERT,
//! DELETE and bucket-changing UPDATE of the counted tables, in the writer's transaction (at its
//! commit on PostgreSQL), so they are exact whoever writes and however many write at once. A
//! round of deposits has the database count its inserts in one statement instead, built from the
//! triggers' own rules (`m0032_counted_by_caller`). Accounts keep theirs in code (`tallies`),
//! because their count is also the creation limit's.

use domain::ids::BusinessId;
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query};
use sea_orm::{ConnectionTrait, DbErr};

use super::paging::Total;
use domain::Mode;

/// A counted list, and what its bucket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    /// `GET /v1/virtual-accounts/{id}/deposits`: bucket, the account id.
    Deposits,
    /// A mode's deposits (the dashboard's Deposits page): bucket, the deposit status.
    DepositStatuses,
    /// `GET /v1/events`: bucket, the event type.
    Events,
    /// `GET /v1/payouts`: bucket, the payout status.
    Payouts,
    /// `GET /v1/balance/transactions`: one bucket, `''`.
    Ledger,
}

impl List {
    /// The name the migration's triggers write.
    pub fn as_str(self) -> &'static str {
        match self {
            List::Deposits => "deposits",
            List::DepositStatuses => "deposit_statuses",
            List::Events => "events",
            List::Payouts => "payouts",
            List::Ledger => "ledger",
        }
    }
}

/// The exact number of rows of a business and mode's `list` in `bucket` (every bucket when
/// None): the sum of at most a few hundred count rows, one range of the primary key.
pub async fn total<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    list: List,
    bucket: Option<&str>,
) -> Result<Total, DbErr> {
    let col = |name: &str| Expr::col(Alias::new(name));
    let mut select = Query::select();
    select
        .expr_as(
            Expr::cust("CAST(COALESCE(SUM(n), 0) AS BIGINT)"),
            Alias::new("n"),
        )
        .from(Alias::new("list_counts"))
        .and_where(col("business_id").eq(business_id))
        .and_where(col("mode").eq(mode.as_str()))
        .and_where(col("list").eq(list.as_str()));
    if let Some(bucket) = bucket {
        select.and_where(col("bucket").eq(bucket));
    }
    let backend = db.get_database_backend();
    let row = db
        .query_one_raw(backend.build(&select))
        .await?
        .ok_or_else(|| DbErr::Custom("a sum returned no row".into()))?;
    let n: i64 = row.try_get("", "n")?;
    Ok(Total {
        value: std::cmp::max(n, 0) as u64,
        estimate: false,
    })
}
