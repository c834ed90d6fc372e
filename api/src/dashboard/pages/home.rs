//! Home, per mode (docs/dashboard.md): the page after sign-in. How money moved today and this week, the
//! balance and what is on its way out, payouts by outcome, accounts, webhook deliveries, what
//! needs attention, and four charts (server-drawn SVG with its scale and days as text beside
//! it and each bar's figure as hover text, each with its figures as a table), all
//! read on the read replica where one is configured, with the API's own counts where it keeps
//! them. Days are Lagos days (WAT).

use askama::Template;
use axum::extract::State;
use chrono::{Datelike, Utc};
use domain::payout::PayoutStatus;
use store::home::{self, DAYS, DayDeliveries, DayDeposits};

use crate::dashboard::listing::grouped;
use crate::dashboard::session::{Scoped, Viewer};
use crate::dashboard::view::{self, Badge, Frame, PageResult, Section, When, naira};
use crate::state::AppState;

/// The charts' drawing area, in SVG units (scaled to the page's width by the stylesheet).
const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 160.0;

/// Deposits over a stretch of days: how many, and their amount.
struct Moved {
    count: String,
    amount: String,
}

/// "1 deposit", "1,204 deposits".
fn deposit_count(count: u64) -> String {
    format!(
        "{} deposit{}",
        grouped(count),
        if count == 1 { "" } else { "s" }
    )
}

fn moved(days: &[DayDeposits]) -> Moved {
    Moved {
        count: deposit_count(days.iter().map(|d| d.count).sum()),
        amount: naira(days.iter().map(|d| d.amount).sum()),
    }
}

/// One bar of a chart, in SVG units, with what it stands for (its hover text).
struct Bar {
    x: String,
    y: String,
    width: String,
    height: String,
    title: String,
}

/// A chart's figures as a table: one row per bar or point.
struct Figure {
    label: String,
    values: Vec<String>,
}

struct Chart {
    id: &'static str,
    title: &'static str,
    /// What the picture shows, in a sentence (the SVG's accessible description).
    summary: String,
    /// The y axis's top (the largest figure; none when every figure is zero) and its zero.
    top: Option<String>,
    zero: String,
    /// Under the x axis: the first and last day, or (`each`) every bar's name under it.
    x_labels: Vec<String>,
    each: bool,
    /// "bar", or "hit": a line chart's invisible full-height slot per point, for its hover text.
    bar_class: &'static str,
    bars: Vec<Bar>,
    /// A line instead of bars: SVG `points`.
    line: Option<String>,
    heads: Vec<&'static str>,
    figures: Vec<Figure>,
}

/// Bars of `values` across the drawing area, scaled to the largest.
fn bars(values: &[f64], titles: Vec<String>) -> Vec<Bar> {
    let max = values.iter().copied().fold(0.0, f64::max);
    let slot = WIDTH / values.len().max(1) as f64;
    values
        .iter()
        .zip(titles)
        .enumerate()
        .map(|(i, (&v, title))| {
            let h = if max > 0.0 { v / max * HEIGHT } else { 0.0 };
            Bar {
                x: format!("{:.1}", i as f64 * slot + slot * 0.15),
                y: format!("{:.1}", HEIGHT - h),
                width: format!("{:.1}", slot * 0.7),
                height: format!("{h:.1}"),
                title,
            }
        })
        .collect()
}

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage {
    frame: Frame,
    mode_href: String,
    today: Moved,
    week: Moved,
    available: String,
    in_flight: String,
    payouts: Vec<(Badge, String)>,
    accounts_created: String,
    accounts_pending: String,
    deliveries: home::Deliveries,
    last_failure: Option<(String, String, When)>,
    attention: Vec<(String, String)>,
    charts: Vec<Chart>,
}

pub async fn show(scope: Scoped<Viewer>, State(state): State<AppState>) -> PageResult {
    let (business_id, mode) = (scope.business_id(), scope.mode);
    let db = state.reads.db().await;
    let now = Utc::now();
    let home::Home {
        cuts,
        days,
        balances,
        sent,
        deliveries,
        available,
        in_flight,
        payouts: by_outcome,
        flagged_deposits: flagged,
        accounts_created: created,
        accounts_pending: pending,
    } = home::read(&db, business_id, mode, now).await?;

    let m = mode.as_str();
    // Days since Monday (Lagos): this week is Monday to today.
    let weekday = (now + chrono::Duration::hours(1))
        .weekday()
        .num_days_from_monday() as usize;
    let mut attention = Vec::new();
    if deliveries.dead > 0 {
        let href = deliveries.last_failure.as_ref().map_or_else(
            || format!("/dashboard/{m}/events"),
            |f| format!("/dashboard/{m}/events/{}", f.event_id),
        );
        attention.push((
            format!(
                "{} webhook deliver{} gave up after every retry",
                grouped(deliveries.dead),
                if deliveries.dead == 1 { "y" } else { "ies" }
            ),
            href,
        ));
    }
    if flagged > 0 {
        attention.push((
            format!(
                "{} flagged deposit{}: money that reached a deactivated account",
                grouped(flagged),
                if flagged == 1 { "" } else { "s" }
            ),
            format!("/dashboard/{m}/deposits?status=flagged"),
        ));
    }
    for (status, n) in &by_outcome {
        if matches!(status, PayoutStatus::Reversed | PayoutStatus::Failed) && *n > 0 {
            attention.push((
                format!(
                    "{} payout{} {}",
                    grouped(*n),
                    if *n == 1 { "" } else { "s" },
                    if *status == PayoutStatus::Reversed {
                        "returned by the bank"
                    } else {
                        "failed"
                    }
                ),
                format!(
                    "/dashboard/{m}/balance?payoutStatus={}#payouts",
                    status.as_str()
                ),
            ));
        }
    }
    let page = HomePage {
        frame: scope.frame(Section::Home, "Home"),
        mode_href: format!("/dashboard/{m}"),
        today: moved(&days[DAYS - 1..]),
        week: moved(&days[DAYS - 1 - weekday..]),
        available: naira(available),
        in_flight: naira(in_flight),
        payouts: by_outcome
            .iter()
            .map(|(s, n)| (Badge::of(*s), grouped(*n)))
            .collect(),
        accounts_created: grouped(created),
        accounts_pending: grouped(pending),
        last_failure: deliveries.last_failure.as_ref().map(|f| {
            let reason = match (&f.error, f.status_code) {
                (Some(e), _) if !e.is_empty() => e.clone(),
                (_, Some(0) | None) => "No answer (network error)".to_owned(),
                (_, Some(code)) => format!("HTTP {code}"),
            };
            (
                reason,
                format!("/dashboard/{m}/events/{}", f.event_id),
                When::of(&f.at),
            )
        }),
        deliveries,
        attention,
        charts: charts(&cuts, &days, &balances, &sent, &by_outcome),
    };
    Ok(view::page(&page))
}

/// The four charts, each with its table.
fn charts(
    cuts: &[chrono::DateTime<Utc>],
    days: &[DayDeposits],
    balances: &[i64],
    sent: &[DayDeliveries],
    by_outcome: &[(PayoutStatus, u64)],
) -> Vec<Chart> {
    let day_label = |i: usize| {
        (cuts[i] + chrono::Duration::hours(1))
            .format("%-d %b")
            .to_string()
    };
    let first_and_last = || vec![day_label(0), day_label(DAYS - 1)];
    let deposit_titles = (0..DAYS)
        .map(|i| {
            format!(
                "{}: {}, {}",
                day_label(i),
                deposit_count(days[i].count),
                naira(days[i].amount)
            )
        })
        .collect();
    let most = days.iter().map(|d| d.amount).max().unwrap_or(0);
    let deposits = Chart {
        id: "chart-deposits",
        title: "Deposits per day",
        summary: format!("Amount received each day over the last {DAYS} days (WAT)."),
        top: (most > 0).then(|| naira(most)),
        zero: naira(0),
        x_labels: first_and_last(),
        each: false,
        bar_class: "bar",
        bars: bars(
            &days.iter().map(|d| d.amount as f64).collect::<Vec<_>>(),
            deposit_titles,
        ),
        line: None,
        heads: vec!["Day (WAT)", "Deposits", "Amount"],
        figures: (0..DAYS)
            .map(|i| Figure {
                label: day_label(i),
                values: vec![grouped(days[i].count), naira(days[i].amount)],
            })
            .collect(),
    };
    let most = balances.iter().copied().max().unwrap_or(0);
    let max = most.max(1) as f64;
    let step = WIDTH / (DAYS - 1) as f64;
    let points = balances
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            format!(
                "{:.1},{:.1}",
                i as f64 * step,
                HEIGHT - b.max(0) as f64 / max * HEIGHT
            )
        })
        .collect::<Vec<_>>()
        .join(" ");
    let balance = Chart {
        id: "chart-balance",
        title: "Balance over time",
        summary: format!("The available balance at the end of each of the last {DAYS} days (WAT)."),
        top: (most > 0).then(|| naira(most)),
        zero: naira(0),
        x_labels: first_and_last(),
        each: false,
        bar_class: "hit",
        // Each point's day, centred on it, so hovering anywhere above it names its figure.
        bars: (0..DAYS)
            .map(|i| Bar {
                x: format!("{:.1}", (i as f64 - 0.5) * step),
                y: "0".to_owned(),
                width: format!("{step:.1}"),
                height: format!("{HEIGHT:.0}"),
                title: format!("{}: {} at the day's end", day_label(i), naira(balances[i])),
            })
            .collect(),
        line: Some(points),
        heads: vec!["Day (WAT)", "Balance at the day's end"],
        figures: (0..DAYS)
            .map(|i| Figure {
                label: day_label(i),
                values: vec![naira(balances[i])],
            })
            .collect(),
    };
    let outcome_titles = by_outcome
        .iter()
        .map(|(s, n)| format!("{}: {}", Badge::of(*s).label, grouped(*n)))
        .collect();
    let most = by_outcome.iter().map(|(_, n)| *n).max().unwrap_or(0);
    let outcomes = Chart {
        id: "chart-payouts",
        title: "Payouts by outcome",
        summary: "How many payouts ended, or stand, in each state.".to_owned(),
        top: (most > 0).then(|| grouped(most)),
        zero: "0".to_owned(),
        x_labels: by_outcome
            .iter()
            .map(|(s, _)| Badge::of(*s).label)
            .collect(),
        each: true,
        bar_class: "bar",
        bars: bars(
            &by_outcome
                .iter()
                .map(|(_, n)| *n as f64)
                .collect::<Vec<_>>(),
            outcome_titles,
        ),
        line: None,
        heads: vec!["Outcome", "Payouts"],
        figures: by_outcome
            .iter()
            .map(|(s, n)| Figure {
                label: Badge::of(*s).label,
                values: vec![grouped(*n)],
            })
            .collect(),
    };
    let rate =
        |d: &DayDeliveries| (d.total > 0).then(|| d.succeeded as f64 / d.total as f64 * 100.0);
    let webhook_titles = (0..DAYS)
        .map(|i| match rate(&sent[i]) {
            Some(r) => format!(
                "{}: {r:.0}% of {} delivered",
                day_label(i),
                grouped(sent[i].total)
            ),
            None => format!("{}: no deliveries", day_label(i)),
        })
        .collect();
    let mut webhook_bars = bars(
        &sent
            .iter()
            .map(|d| rate(d).unwrap_or(0.0))
            .collect::<Vec<_>>(),
        webhook_titles,
    );
    // Scaled to 100 %, not to the best day.
    for (bar, d) in webhook_bars.iter_mut().zip(sent) {
        let h = rate(d).unwrap_or(0.0) / 100.0 * HEIGHT;
        bar.y = format!("{:.1}", HEIGHT - h);
        bar.height = format!("{h:.1}");
    }
    let webhooks = Chart {
        id: "chart-webhooks",
        title: "Webhook success rate",
        summary: format!(
            "The share of each day's webhook deliveries that reached your server, over the last {DAYS} days (WAT)."
        ),
        top: Some("100%".to_owned()),
        zero: "0%".to_owned(),
        x_labels: first_and_last(),
        each: false,
        bar_class: "bar",
        bars: webhook_bars,
        line: None,
        heads: vec!["Day (WAT)", "Deliveries", "Delivered"],
        figures: (0..DAYS)
            .map(|i| Figure {
                label: day_label(i),
                values: vec![
                    grouped(sent[i].total),
                    rate(&sent[i]).map_or_else(|| "–".to_owned(), |r| format!("{r:.0}%")),
                ],
            })
            .collect(),
    };
    vec![deposits, balance, outcomes, webhooks]
}
