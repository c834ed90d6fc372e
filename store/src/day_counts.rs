//! The maintained figures of `day_counts` (`m0028_day_counts`): deposits per Lagos day,
//! webhook deliveries per day and over every day by outcome, and payouts over every day by
//! status with their amounts. The service never writes them: the database's triggers keep them
//! with every write, in the writer's transaction, so they are exact whoever writes.

use domain::Mode;
use domain::ids::BusinessId;
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query};
use sea_orm::{ConnectionTrait, DbErr};

/// What is counted, as the migration's triggers name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Deposits by the day they were received; bucket `''`; with their amounts.
    Deposits,
    /// Webhook deliveries by the day they were made; bucket: the outcome (`waiting`,
    /// `retrying`, `succeeded`, `dead`); also over every day.
    Deliveries,
    /// Payouts over every day; bucket: the status; with their amounts.
    Payouts,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Deposits => "deposits",
            Kind::Deliveries => "deliveries",
            Kind::Payouts => "payouts",
        }
    }
}

/// Which days' figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Days {
    /// Lagos days from the first to the last (`YYYY-MM-DD`), both included.
    Between(String, String),
    /// The figure over every day (the day `''`; deliveries and payouts keep one).
    AllTime,
}

/// A business and mode's figures of `kind` on `days`, summed over their shards, by day and
/// bucket: (day, bucket, count, amount in kobo). One range of the primary key.
pub async fn read<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    kind: Kind,
    days: &Days,
) -> Result<Vec<(String, String, i64, i64)>, DbErr> {
    let col = |name: &str| Expr::col(Alias::new(name));
    let mut select = Query::select();
    select
        .column(Alias::new("day"))
        .column(Alias::new("bucket"))
        .expr_as(Expr::cust("CAST(SUM(n) AS BIGINT)"), Alias::new("n"))
        .expr_as(
            Expr::cust("CAST(SUM(amount) AS BIGINT)"),
            Alias::new("amount"),
        )
        .from(Alias::new("day_counts"))
        .and_where(col("business_id").eq(business_id))
        .and_where(col("mode").eq(mode.as_str()))
        .and_where(col("kind").eq(kind.as_str()))
        .group_by_col(Alias::new("day"))
        .group_by_col(Alias::new("bucket"));
    match days {
        Days::Between(first, last) => select
            .and_where(col("day").gte(first.as_str()))
            .and_where(col("day").lte(last.as_str())),
        Days::AllTime => select.and_where(col("day").eq("")),
    };
    let backend = db.get_database_backend();
    db.query_all_raw(backend.build(&select))
        .await?
        .iter()
        .map(|row| {
            Ok((
                row.try_get("", "day")?,
                row.try_get("", "bucket")?,
                row.try_get("", "n")?,
                row.try_get("", "amount")?,
            ))
        })
        .collect()
}
