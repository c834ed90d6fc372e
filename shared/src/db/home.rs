//! The figures of the dashboard's home page (docs/dashboard.md), for one business and mode: deposits, the
//! balance over time and webhook deliveries per day over the last [`DAYS`] days, cut at Lagos
//! midnight (WAT, UTC+1, no daylight saving), and deliveries by outcome. Counts the API already
//! keeps (accounts, payouts and deposits by status, the balance) are read where they are kept,
//! by the callers, with the API's own functions.
//!
//! A day's bucket is a CASE over bound moments, not a database date function: the same SQL on
//! SQLite and PostgreSQL, and each query reads one business's rows of one time range.

use chrono::{DateTime, Duration, FixedOffset, NaiveTime, Utc};
use domain::{DeliveryStatus, Mode};
use sea_orm::sea_query::{Alias, CaseStatement, Expr, ExprTrait, Func, SimpleExpr};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};

use super::entities::{delivery, deposit, ledger_entry};

/// How many days the charts show, today included.
pub const DAYS: usize = 30;

/// West Africa Time: Lagos has had no daylight saving since 1 April 1964.
fn lagos() -> FixedOffset {
    FixedOffset::east_opt(3600).expect("one hour")
}

/// The Lagos midnights that cut the last [`DAYS`] days, oldest first, and the next one: day `i`
/// is `[cuts[i], cuts[i + 1])`, the last day being today's.
pub fn day_cuts(now: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let today = now.with_timezone(&lagos()).date_naive();
    (0..=DAYS as i64)
        .map(|i| {
            let day = today - Duration::days(DAYS as i64 - 1 - i);
            day.and_time(NaiveTime::MIN)
                .and_local_timezone(lagos())
                .single()
                .expect("a fixed offset has one midnight")
                .with_timezone(&Utc)
        })
        .collect()
}

/// The day index of `col`'s moment in `cuts` (see [`day_cuts`]); rows before the first cut are
/// filtered out by the callers.
fn day_of(
    col: impl sea_orm::sea_query::IntoColumnRef + Copy,
    cuts: &[DateTime<Utc>],
) -> SimpleExpr {
    let mut case = CaseStatement::new();
    for i in (0..DAYS).rev() {
        case = case.case(Expr::col(col).gte(cuts[i]), i as i32);
    }
    case.finally(-1).into()
}

/// Deposits received on one day: how many, and their amount in kobo (flagged ones included:
/// money that arrived, credited or not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DayDeposits {
    pub count: u64,
    pub amount: i64,
}

/// Deposits per day over the last [`DAYS`] days, oldest first.
pub async fn deposits_per_day<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
    cuts: &[DateTime<Utc>],
) -> Result<Vec<DayDeposits>, DbErr> {
    use deposit::Column as Col;
    let rows: Vec<(i32, i64, Option<i64>)> = deposit::Entity::find()
        .select_only()
        .column_as(day_of(Col::ReceivedAt, cuts), "day")
        .column_as(Expr::col(Col::Id).count(), "n")
        .column_as(
            Expr::expr(Func::sum(Expr::col(Col::Amount))).cast_as("BIGINT"),
            "amount",
        )
        .filter(Col::BusinessId.eq(business_id))
        .filter(Col::Mode.eq(mode))
        .filter(Col::ReceivedAt.gte(cuts[0]))
        .filter(Col::ReceivedAt.lt(cuts[DAYS]))
        .group_by(Expr::col(Alias::new("day")))
        .into_tuple()
        .all(db)
        .await?;
    let mut days = vec![DayDeposits::default(); DAYS];
    for (day, n, amount) in rows {
        if let Some(d) = usize::try_from(day).ok().and_then(|i| days.get_mut(i)) {
            d.count = n as u64;
            d.amount = amount.unwrap_or(0);
        }
    }
    Ok(days)
}

/// The available balance at the end of each of the last [`DAYS`] days (today: now), oldest
/// first: the "balance after" of the day's last ledger entry, or of the last one before it.
pub async fn balance_per_day<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
    cuts: &[DateTime<Utc>],
) -> Result<Vec<i64>, DbErr> {
    use ledger_entry::Column as Col;
    let mut balances = Vec::with_capacity(DAYS);
    for end in &cuts[1..] {
        // One index range each (business, mode, created_at): the newest entry before the cut.
        let last: Option<i64> = ledger_entry::Entity::find()
            .select_only()
            .column(Col::BalanceAfter)
            .filter(Col::BusinessId.eq(business_id))
            .filter(Col::Mode.eq(mode))
            .filter(Col::CreatedAt.lt(*end))
            .order_by_desc(Col::CreatedAt)
            .order_by_desc(Col::Id)
            .limit(1)
            .into_tuple()
            .one(db)
            .await?;
        balances.push(last.unwrap_or(0));
    }
    Ok(balances)
}

/// Webhook deliveries of events created on one day: how many, and how many have succeeded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DayDeliveries {
    pub total: u64,
    pub succeeded: u64,
}

/// Webhook deliveries per day (by when each was created) over the last [`DAYS`] days.
pub async fn deliveries_per_day<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
    cuts: &[DateTime<Utc>],
) -> Result<Vec<DayDeliveries>, DbErr> {
    use delivery::Column as Col;
    let rows: Vec<(i32, DeliveryStatus, i64)> = delivery::Entity::find()
        .select_only()
        .column_as(day_of(Col::CreatedAt, cuts), "day")
        .column(Col::Status)
        .column_as(Expr::col(Col::Id).count(), "n")
        .filter(Col::BusinessId.eq(business_id))
        .filter(Col::Mode.eq(mode))
        .filter(Col::CreatedAt.gte(cuts[0]))
        .filter(Col::CreatedAt.lt(cuts[DAYS]))
        .group_by(Expr::col(Alias::new("day")))
        .group_by(Col::Status)
        .into_tuple()
        .all(db)
        .await?;
    let mut days = vec![DayDeliveries::default(); DAYS];
    for (day, status, n) in rows {
        if let Some(d) = usize::try_from(day).ok().and_then(|i| days.get_mut(i)) {
            d.total += n as u64;
            if status == DeliveryStatus::Succeeded {
                d.succeeded += n as u64;
            }
        }
    }
    Ok(days)
}

/// A business and mode's webhook deliveries by outcome, and the last failure's reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deliveries {
    pub succeeded: u64,
    /// Pending after at least one failed attempt: another is due.
    pub retrying: u64,
    /// Pending, not tried yet.
    pub waiting: u64,
    pub dead: u64,
    /// The most recent failed attempt's reason (its status code or error) and when, with its
    /// event.
    pub last_failure: Option<LastFailure>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastFailure {
    pub event_id: String,
    pub status_code: Option<i32>,
    pub error: Option<String>,
    pub at: DateTime<Utc>,
}

pub async fn deliveries<C: ConnectionTrait>(
    db: &C,
    business_id: &str,
    mode: Mode,
) -> Result<Deliveries, DbErr> {
    use delivery::Column as Col;
    let tried = Expr::col(Col::Attempts).gt(0);
    let rows: Vec<(DeliveryStatus, bool, i64)> = delivery::Entity::find()
        .select_only()
        .column(Col::Status)
        .column_as(tried, "tried")
        .column_as(Expr::col(Col::Id).count(), "n")
        .filter(Col::BusinessId.eq(business_id))
        .filter(Col::Mode.eq(mode))
        .group_by(Col::Status)
        // By the output's name: the expression again would be another bound parameter, which
        // PostgreSQL does not take for the same.
        .group_by(Expr::col(Alias::new("tried")))
        .into_tuple()
        .all(db)
        .await?;
    let mut out = Deliveries::default();
    for (status, tried, n) in rows {
        let n = n as u64;
        match (status, tried) {
            (DeliveryStatus::Succeeded, _) => out.succeeded += n,
            (DeliveryStatus::Dead, _) => out.dead += n,
            (DeliveryStatus::Pending, true) => out.retrying += n,
            (DeliveryStatus::Pending, false) => out.waiting += n,
        }
    }
    // A succeeded delivery keeps the last error of the attempts before its success: only the
    // ones still failing (retrying or dead) say what is wrong now.
    let failing = delivery::Entity::find()
        .filter(Col::BusinessId.eq(business_id))
        .filter(Col::Mode.eq(mode))
        .filter(Col::Status.ne(DeliveryStatus::Succeeded))
        .filter(Col::Attempts.gt(0))
        .order_by_desc(Col::UpdatedAt)
        .one(db)
        .await?;
    out.last_failure = failing.map(|d| LastFailure {
        event_id: d.event_id,
        status_code: d.last_status_code,
        error: d.last_error,
        at: d.updated_at,
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_cut_at_lagos_midnight() {
        // 23:30 UTC is 00:30 the next day in Lagos: that day is "today".
        let now = "2026-03-02T23:30:00Z".parse::<DateTime<Utc>>().unwrap();
        let cuts = day_cuts(now);
        assert_eq!(cuts.len(), DAYS + 1);
        assert_eq!(cuts[DAYS - 1].to_rfc3339(), "2026-03-02T23:00:00+00:00");
        assert_eq!(cuts[DAYS].to_rfc3339(), "2026-03-03T23:00:00+00:00");
        assert_eq!(cuts[0].to_rfc3339(), "2026-02-01T23:00:00+00:00");
    }
}
