//! The dashboard's home page at scale (docs/benchmarks.md#home-page): its figures read with the
//! page's own function (`store::home::read`, every statement the page runs) on the loaded
//! business, after `bench lists` has loaded its deposits, events, payouts and ledger, and one
//! webhook delivery per loaded event. Beside it, for scale, what the old reading cost: the last
//! 30 days' deposits and the business's deliveries counted from their rows.

use domain::ids::BusinessId;
use std::time::Instant;

use anyhow::Context;
use chrono::Utc;
use domain::Mode;
use sea_orm::{ConnectionTrait, DatabaseConnection, Value as Db};

use crate::lists::{Case, GOAL_P99_MS, ListsSettings, Plan, explain, statement};
use crate::stats::{Outcome, Stats};

/// One statement inserting deliveries `from..=to`, one per loaded event (`bench lists`' event
/// ids, `$1` business, `$2` mode), created with their event: 1 in 50 dead after 8 attempts, 1 in
/// 100 retrying, the rest succeeded at the first.
pub fn deliveries_load_sql(from: u64, to: u64) -> String {
    let n = "lpad(e.g::text, 16, '0')";
    format!(
        "INSERT INTO deliveries (id, event_id, business_id, mode, url, status, attempts, \
           next_attempt_at, last_status_code, last_error, job_id, created_at, updated_at, \
           completed_at) \
         SELECT 'whd_bench' || $2 || {n}, ev.id, $1, $2, 'https://hooks.example.com/bench', \
           CASE WHEN e.g % 50 = 0 THEN 'dead' WHEN e.g % 100 = 1 THEN 'pending' \
             ELSE 'succeeded' END, \
           CASE WHEN e.g % 50 = 0 THEN 8 WHEN e.g % 100 = 1 THEN 2 ELSE 1 END, \
           CASE WHEN e.g % 100 = 1 THEN ev.created_at + interval '1 hour' END, \
           CASE WHEN e.g % 50 = 0 OR e.g % 100 = 1 THEN 503 ELSE 200 END, \
           NULL, NULL, ev.created_at, ev.created_at, \
           CASE WHEN e.g % 100 = 1 THEN NULL ELSE ev.created_at END \
         FROM generate_series({from}::bigint, {to}::bigint) AS e(g) \
         JOIN events AS ev ON ev.id = 'evt_bench' || $2 || {n}"
    )
}

async fn deliveries(db: &DatabaseConnection, values: &[Db]) -> anyhow::Result<u64> {
    let row = db
        .query_one_raw(statement(
            "SELECT count(*) AS n FROM deliveries WHERE business_id = $1 AND mode = $2",
            values.to_vec(),
        ))
        .await?
        .context("count returned no row")?;
    let n: i64 = row.try_get("", "n")?;
    Ok(n.max(0) as u64)
}

/// Loads deliveries up to `rows` (10,000 per statement, as the other lists), then times the home
/// page's figures; its case goes to `cases`, the reference plans to `plans`. Returns the
/// deliveries stored.
pub async fn run(
    db: &DatabaseConnection,
    settings: &ListsSettings,
    business: &BusinessId,
    mode: &str,
    cases: &mut Vec<Case>,
    plans: &mut Vec<Plan>,
) -> anyhow::Result<u64> {
    const BATCH: u64 = 10_000;
    let values: Vec<Db> = vec![business.into(), mode.into()];
    let mut next = deliveries(db, &values).await? + 1;
    eprintln!(
        "bench lists: deliveries: making sure there are {} rows…",
        settings.rows
    );
    while next <= settings.rows {
        let to = (next + BATCH - 1).min(settings.rows);
        db.execute_raw(statement(&deliveries_load_sql(next, to), values.clone()))
            .await
            .with_context(|| format!("loading deliveries {next}..={to}"))?;
        if to.is_multiple_of(100_000) || to == settings.rows {
            eprintln!("  deliveries: loaded {to} of {}", settings.rows);
        }
        next = to + 1;
    }
    db.execute_unprepared("VACUUM (ANALYZE) deliveries").await?;
    let stored = deliveries(db, &values).await?;

    let the_mode = Mode::parse(mode).context("the mode is test or live")?;
    let mut case = Case {
        name: "home page: every figure (store::home::read)".into(),
        goal_ms: Some(GOAL_P99_MS),
        stats: Stats::new(),
        total: None,
    };
    for i in 0..settings.warmup + settings.requests {
        let t0 = Instant::now();
        let outcome = match store::home::read(db, business, the_mode, Utc::now()).await {
            Ok(_) => Outcome::Response {
                status: 200,
                replayed: false,
                body: String::new(),
            },
            Err(e) => Outcome::Transport(e.to_string()),
        };
        if i >= settings.warmup {
            case.stats.record(outcome, t0.elapsed());
        }
    }
    cases.push(case);

    // What the page cost before its figures were kept by day (m0028): counting the rows.
    plans.push(
        explain(
            db,
            "home, counted from the rows (before m0028): the last 30 days' deposits",
            "SELECT count(*), sum(amount) FROM deposits WHERE business_id = $1 AND mode = $2 \
             AND received_at >= now() - interval '30 days'",
            values.clone(),
        )
        .await?,
    );
    plans.push(
        explain(
            db,
            "home, counted from the rows (before m0028): deliveries by outcome",
            "SELECT status, attempts > 0, count(*) FROM deliveries \
             WHERE business_id = $1 AND mode = $2 GROUP BY 1, 2",
            values,
        )
        .await?,
    );
    Ok(stored)
}
