//! The figures of the dashboard's home page (docs/dashboard.md), for one business and mode: deposits, the
//! balance over time and webhook deliveries per day over the last [`DAYS`] days, cut at Lagos
//! midnight (WAT, UTC+1, no daylight saving), and deliveries by outcome; with the counts the API
//! already keeps (accounts, payouts and deposits by status, the balance), read where they are
//! kept with the API's own functions. [`read`] is every figure of the page at once.
//!
//! Deposits and deliveries per day, and deliveries by outcome, are read from `day_counts`
//! (m0028), which the database's triggers keep by Lagos day with every write: a few hundred rows
//! however many deposits and deliveries the business has. The balance's days are one index
//! probe each.

use chrono::{DateTime, Duration, FixedOffset, NaiveTime, Utc};
use domain::ids::BusinessId;
use domain::{DeliveryStatus, Mode};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};

use super::day_counts::{self, Days, Kind};
use super::list_counts::{self, List};
use super::{ledger, payouts, tallies};
use crate::tenant::Tenant;
use domain::payout::PayoutStatus;
use domain::{AccountStatus, DepositStatus};
use entities::{delivery, ledger_entry};

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

/// The Lagos day (`YYYY-MM-DD`) that starts at a cut: `day_counts`' key.
fn day_name(cut: DateTime<Utc>) -> String {
    cut.with_timezone(&lagos()).format("%Y-%m-%d").to_string()
}

/// The index of a day's name among the last [`DAYS`] days.
fn day_index(cuts: &[DateTime<Utc>], day: &str) -> Option<usize> {
    cuts[..DAYS].iter().position(|cut| day_name(*cut) == day)
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
    business_id: &BusinessId,
    mode: Mode,
    cuts: &[DateTime<Utc>],
) -> Result<Vec<DayDeposits>, DbErr> {
    let mut days = vec![DayDeposits::default(); DAYS];
    let window = Days::Between(day_name(cuts[0]), day_name(cuts[DAYS - 1]));
    let rows = day_counts::read(db, business_id, mode, Kind::Deposits, &window).await?;
    for (day, _, n, amount) in rows {
        if let Some(d) = day_index(cuts, &day).map(|i| &mut days[i]) {
            d.count = u64::try_from(n).unwrap_or(0);
            d.amount = amount;
        }
    }
    Ok(days)
}

/// The available balance at the end of each of the last [`DAYS`] days (today: now), oldest
/// first: the "balance after" of the day's last ledger entry, or of the last one before it.
pub async fn balance_per_day<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    cuts: &[DateTime<Utc>],
) -> Result<Vec<i64>, DbErr> {
    use ledger_entry::Column as Col;
    use sea_orm::QueryTrait;
    use sea_orm::sea_query::{Alias, Expr, Query, SubQueryStatement};
    // One statement, one column per day: each the newest entry before that day's end, one probe
    // of (business, mode, created_at) each.
    let mut select = Query::select();
    for (i, end) in cuts[1..].iter().enumerate() {
        let newest = ledger_entry::Entity::find()
            .select_only()
            .column(Col::BalanceAfter)
            .filter(Tenant::new(business_id, mode).filter::<Col>())
            .filter(Col::CreatedAt.lt(*end))
            .order_by_desc(Col::CreatedAt)
            .order_by_desc(Col::Id)
            .limit(1)
            .into_query();
        select.expr_as(
            Expr::SubQuery(None, Box::new(SubQueryStatement::SelectStatement(newest))),
            Alias::new(format!("d{i}")),
        );
    }
    let row = db
        .query_one_raw(db.get_database_backend().build(&select))
        .await?
        .ok_or_else(|| DbErr::Custom("a select of subqueries returned no row".into()))?;
    let balances = (0..DAYS)
        .map(|i| row.try_get::<Option<i64>>("", &format!("d{i}")))
        .map(|b| b.map(|b| b.unwrap_or(0)))
        .collect::<Result<Vec<_>, _>>()?;
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
    business_id: &BusinessId,
    mode: Mode,
    cuts: &[DateTime<Utc>],
) -> Result<Vec<DayDeliveries>, DbErr> {
    let mut days = vec![DayDeliveries::default(); DAYS];
    let window = Days::Between(day_name(cuts[0]), day_name(cuts[DAYS - 1]));
    let rows = day_counts::read(db, business_id, mode, Kind::Deliveries, &window).await?;
    for (day, outcome, n, _) in rows {
        if let Some(d) = day_index(cuts, &day).map(|i| &mut days[i]) {
            let n = u64::try_from(n).unwrap_or(0);
            d.total += n;
            if outcome == DeliveryStatus::Succeeded.as_str() {
                d.succeeded += n;
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
    business_id: &BusinessId,
    mode: Mode,
) -> Result<Deliveries, DbErr> {
    use delivery::Column as Col;
    let mut out = Deliveries::default();
    let rows = day_counts::read(db, business_id, mode, Kind::Deliveries, &Days::AllTime).await?;
    for (_, outcome, n, _) in rows {
        let n = u64::try_from(n).unwrap_or(0);
        match outcome.as_str() {
            "succeeded" => out.succeeded += n,
            "dead" => out.dead += n,
            "retrying" => out.retrying += n,
            _ => out.waiting += n,
        }
    }
    // A succeeded delivery keeps the last error of the attempts before its success: only the
    // ones still failing (retrying or dead) say what is wrong now. The newest of each status,
    // one end of `deliveries_business_mode_status_updated` each.
    let mut last: Option<delivery::Model> = None;
    for status in [DeliveryStatus::Dead, DeliveryStatus::Pending] {
        let newest = delivery::Entity::find()
            .filter(Tenant::new(business_id, mode).filter::<Col>())
            .filter(Col::Status.eq(status))
            .filter(Col::Attempts.gt(0))
            .order_by_desc(Col::UpdatedAt)
            .one(db)
            .await?;
        if let Some(d) = newest
            && last.as_ref().is_none_or(|l| d.updated_at > l.updated_at)
        {
            last = Some(d);
        }
    }
    out.last_failure = last.map(|d| LastFailure {
        event_id: d.event_id.into(),
        status_code: d.last_status_code,
        error: d.last_error,
        at: d.updated_at,
    });
    Ok(out)
}

/// Every figure of the home page of a business and mode, as of `now`.
#[derive(Debug, Clone)]
pub struct Home {
    /// The Lagos midnights that cut [`Home::days`]' days (see [`day_cuts`]).
    pub cuts: Vec<DateTime<Utc>>,
    pub days: Vec<DayDeposits>,
    pub balances: Vec<i64>,
    pub sent: Vec<DayDeliveries>,
    pub deliveries: Deliveries,
    /// The available balance.
    pub available: i64,
    /// What is on its way out: pending and processing payouts.
    pub in_flight: i64,
    /// Payouts by status, in [`PayoutStatus::ALL`]'s order.
    pub payouts: Vec<(PayoutStatus, u64)>,
    pub flagged_deposits: u64,
    pub accounts_created: u64,
    pub accounts_pending: u64,
}

pub async fn read<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    now: DateTime<Utc>,
) -> Result<Home, DbErr> {
    let cuts = day_cuts(now);
    let mut payouts_by_status = Vec::new();
    for status in PayoutStatus::ALL {
        let n = list_counts::total(db, business_id, mode, List::Payouts, Some(status.as_str()))
            .await?
            .value;
        payouts_by_status.push((status, n));
    }
    let flagged = Some(DepositStatus::Flagged.as_str());
    Ok(Home {
        days: deposits_per_day(db, business_id, mode, &cuts).await?,
        balances: balance_per_day(db, business_id, mode, &cuts).await?,
        sent: deliveries_per_day(db, business_id, mode, &cuts).await?,
        deliveries: deliveries(db, business_id, mode).await?,
        available: ledger::find(db, business_id, mode)
            .await?
            .map_or(0, |b| b.available),
        in_flight: payouts::in_flight(db, business_id, mode).await?,
        payouts: payouts_by_status,
        flagged_deposits: list_counts::total(db, business_id, mode, List::DepositStatuses, flagged)
            .await?
            .value,
        accounts_created: tallies::total(db, business_id, mode, None).await?,
        accounts_pending: tallies::total(db, business_id, mode, Some(AccountStatus::Pending))
            .await?,
        cuts,
    })
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
