//! The lists beside accounts (`bench lists --rows`): deposits, events, payouts and the ledger,
//! loaded to `--rows` rows each and measured like the accounts.

use super::*;

/// One of the lists beside accounts, loaded to `--rows` rows for the business and
/// mode (deposits: of one account) and measured like the accounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Other {
    Deposits,
    Events,
    Payouts,
    Ledger,
}

impl Other {
    pub const ALL: [Other; 4] = [
        Other::Deposits,
        Other::Events,
        Other::Payouts,
        Other::Ledger,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Other::Deposits => "deposits",
            Other::Events => "events",
            Other::Payouts => "payouts",
            Other::Ledger => "ledger",
        }
    }

    fn table(self) -> &'static str {
        match self {
            Other::Deposits => "deposits",
            Other::Events => "events",
            Other::Payouts => "payouts",
            Other::Ledger => "ledger_entries",
        }
    }

    /// The id prefix of the loaded rows.
    fn prefix(self) -> &'static str {
        match self {
            Other::Deposits => "dep",
            Other::Events => "evt",
            Other::Payouts => "po",
            Other::Ledger => "btx",
        }
    }

    /// The API path (`account`: the account whose deposits are loaded).
    fn path(self, account: &str) -> String {
        match self {
            Other::Deposits => format!("/v1/virtual-accounts/{account}/deposits"),
            Other::Events => "/v1/events".into(),
            Other::Payouts => "/v1/payouts".into(),
            Other::Ledger => "/v1/balance/transactions".into(),
        }
    }

    /// The filter measured (the API filters deposits and the ledger by nothing).
    pub fn filter(self) -> Option<(&'static str, &'static str)> {
        match self {
            Other::Events => Some(("type", "deposit.flagged")),
            Other::Payouts => Some(("status", "failed")),
            Other::Deposits | Other::Ledger => None,
        }
    }

    /// One loaded row in this many matches the filter.
    fn filter_share(self) -> u64 {
        match self {
            Other::Events => 100,
            Other::Payouts => 20,
            Other::Deposits | Other::Ledger => 1,
        }
    }

    /// The rows of the business and mode this list holds (`$1` business, `$2` mode, `$3` the
    /// account, for deposits).
    fn scope(self) -> &'static str {
        match self {
            Other::Deposits => "account_id = $3",
            _ => "business_id = $1 AND mode = $2",
        }
    }

    /// The maintained count's (list, bucket) of m0017, as the service reads it for the
    /// unfiltered list.
    fn counted(self) -> (&'static str, bool) {
        match self {
            Other::Deposits => ("deposits", true),
            Other::Events => ("events", false),
            Other::Payouts => ("payouts", false),
            Other::Ledger => ("ledger", false),
        }
    }
}

/// One statement inserting rows `from..=to` of `list` for a business (`$1`) and mode (`$2`):
/// ids `<prefix>_bench<mode><g>`, `created_at` spread over the past year in insertion order.
/// Deposits go to one account (`$3`, of bank `$4`), one in 1,000 flagged; events are
/// `deposit.received` but one in 100 `deposit.flagged` and one in 10 another type; payouts
/// succeeded but one in 20 failed, reversed, processing and pending each; ledger entries are
/// deposits (their running `balance_after` is not a real balance: a benchmark database only).
pub fn other_load_sql(list: Other, from: u64, to: u64, total: u64) -> String {
    let id = format!("'{}_bench' || $2 || lpad(g::text, 16, '0')", list.prefix());
    let at = format!("now() - interval '365 days' + (g::float8 / {total}) * interval '365 days'");
    let series = format!("generate_series({from}::bigint, {to}::bigint) AS g");
    match list {
        Other::Deposits => format!(
            "INSERT INTO deposits (id, account_id, business_id, mode, bank, status, amount, \
               currency, provider_reference, sender_name, sender_account_number, \
               sender_bank_name, narration, source, received_at, created_at) \
             SELECT {id}, $3, $1, $2, $4, \
               CASE WHEN g % 1000 = 0 THEN 'flagged' ELSE 'credited' END, 10000 + g % 100000, \
               'NGN', 'BENCH' || $2 || lpad(g::text, 16, '0'), 'Sender ' || g, '0011223344', \
               'Zenith Bank', 'payment ' || g, 'notification', {at}, {at} FROM {series}"
        ),
        Other::Events => format!(
            "INSERT INTO events (id, business_id, mode, type, data, account_id, created_at) \
             SELECT {id}, $1, $2, \
               CASE WHEN g % 100 = 0 THEN 'deposit.flagged' \
                 WHEN g % 10 = 1 THEN (ARRAY['virtualaccount.active', 'payout.succeeded', \
                   'virtualaccount.deactivated'])[1 + (g / 10) % 3] \
                 ELSE 'deposit.received' END, \
               '{{\"id\":\"bench\"}}', NULL, {at} FROM {series}"
        ),
        Other::Payouts => format!(
            "INSERT INTO payouts (id, business_id, mode, status, amount, currency, reference, \
               narration, bank_code, bank_name, account_number, account_name, created_at, \
               updated_at) \
             SELECT {id}, $1, $2, \
               COALESCE((ARRAY['failed', 'reversed', 'processing', 'pending'])[1 + g % 20], \
                 'succeeded'), \
               10000 + g % 100000, 'NGN', NULL, 'payout ' || g, '058', 'GTBank', '0123456789', \
               'Bench Ltd', {at}, {at} FROM {series}"
        ),
        Other::Ledger => format!(
            "INSERT INTO ledger_entries (id, business_id, mode, type, amount, balance_after, \
               source_id, created_at) \
             SELECT {id}, $1, $2, 'deposit', 10000, 10000 * g, \
               'dep_bench' || $2 || lpad(g::text, 16, '0'), {at} FROM {series}"
        ),
    }
}

/// The measured figures of one list beside accounts.
#[derive(Debug, Clone)]
pub struct OtherReport {
    pub list: Other,
    pub rows: u64,
    pub loaded: u64,
    pub load_time: Duration,
    /// The maintained count and COUNT(*) after loading (None: a schema without list_counts).
    pub checked: Option<(u64, u64)>,
}

/// The account whose deposits are loaded: the business's oldest in the mode.
async fn deposits_account(
    db: &DatabaseConnection,
    business: &str,
    mode: &str,
) -> anyhow::Result<(String, String)> {
    let row = db
        .query_one_raw(statement(
            "SELECT id, bank FROM virtual_accounts WHERE business_id = $1 AND mode = $2 \
             ORDER BY created_at, id LIMIT 1",
            vec![business.into(), mode.into()],
        ))
        .await?
        .context("the business has no accounts to load deposits for")?;
    Ok((row.try_get("", "id")?, row.try_get("", "bank")?))
}

async fn count_of(db: &DatabaseConnection, list: Other, values: &[Db]) -> anyhow::Result<u64> {
    let row = db
        .query_one_raw(statement(
            &format!(
                "SELECT count(*) AS n FROM {} WHERE {}",
                list.table(),
                list.scope()
            ),
            values.to_vec(),
        ))
        .await?
        .context("count returned no row")?;
    let n: i64 = row.try_get("", "n")?;
    Ok(n.max(0) as u64)
}

/// The total the service answers for the unfiltered list, from m0017's counts.
async fn maintained(db: &DatabaseConnection, list: Other, values: &[Db]) -> anyhow::Result<u64> {
    let (name, by_account) = list.counted();
    let bucket = if by_account { " AND bucket = $3" } else { "" };
    let mut values = values.to_vec();
    values.truncate(if by_account { 3 } else { 2 });
    let row = db
        .query_one_raw(statement(
            &format!(
                "SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) AS n FROM list_counts \
                 WHERE business_id = $1 AND mode = $2 AND list = '{name}'{bucket}"
            ),
            values,
        ))
        .await?
        .context("sum returned no row")?;
    let n: i64 = row.try_get("", "n")?;
    Ok(n.max(0) as u64)
}

async fn has_list_counts(db: &DatabaseConnection) -> anyhow::Result<bool> {
    let row = db
        .query_one_raw(statement(
            "SELECT to_regclass('list_counts') IS NOT NULL AS present",
            vec![],
        ))
        .await?
        .context("to_regclass returned no row")?;
    Ok(row.try_get("", "present")?)
}

/// Loads `list` up to `rows` rows (10,000 per statement; on a schema with m0017 its triggers
/// count every row as it is inserted, so nothing is recounted), VACUUMs and ANALYZEs the
/// table, and checks the maintained count against COUNT(*).
///
/// 10,000, not more: the triggers update the same few count rows once per inserted row, and
/// within one transaction every update leaves a version the next must step over, so a
/// transaction of n rows costs about n² / (2 × the count rows it touches).
async fn load_other(
    db: &DatabaseConnection,
    list: Other,
    values: &[Db],
    rows: u64,
) -> anyhow::Result<OtherReport> {
    const BATCH: u64 = 10_000;
    let t0 = Instant::now();
    let existing = count_of(db, list, values).await?;
    let mut next = existing + 1;
    while next <= rows {
        let to = (next + BATCH - 1).min(rows);
        db.execute_raw(statement(
            &other_load_sql(list, next, to, rows),
            values.to_vec(),
        ))
        .await
        .with_context(|| format!("loading {} {next}..={to}", list.name()))?;
        if to.is_multiple_of(100_000) || to == rows {
            eprintln!("  {}: loaded {to} of {rows}", list.name());
        }
        next = to + 1;
    }
    db.execute_unprepared(&format!("VACUUM (ANALYZE) {}", list.table()))
        .await?;
    let load_time = t0.elapsed();
    let stored = count_of(db, list, values).await?;
    let checked = if has_list_counts(db).await? {
        Some((maintained(db, list, values).await?, stored))
    } else {
        None
    };
    Ok(OtherReport {
        list,
        rows: stored,
        loaded: rows.saturating_sub(existing),
        load_time,
        checked,
    })
}

/// Loads and measures the deposits, events, payouts and ledger lists; their cases and plans
/// are appended to `cases` and `plans`.
pub(super) async fn run_others(
    db: &DatabaseConnection,
    settings: &ListsSettings,
    business: &str,
    mode: &str,
    cases: &mut Vec<Case>,
    plans: &mut Vec<Plan>,
) -> anyhow::Result<Vec<OtherReport>> {
    let (account, bank) = deposits_account(db, business, mode).await?;
    let size = settings.page_size.to_string();
    let counts = has_list_counts(db).await?;
    let mut reports = Vec::new();
    for list in Other::ALL {
        let values: Vec<Db> = vec![
            business.into(),
            mode.into(),
            account.clone().into(),
            bank.clone().into(),
        ];
        let used = if list == Other::Deposits { 4 } else { 2 };
        let values = &values[..used];
        eprintln!(
            "bench lists: {}: making sure there are {} rows…",
            list.name(),
            settings.rows
        );
        let report = load_other(db, list, values, settings.rows).await?;
        if let Some((kept, stored)) = report.checked {
            ensure!(
                kept == stored,
                "{}: the maintained count {kept} is not the {stored} rows stored",
                list.name()
            );
        }
        let http = Http {
            client: Client::builder()
                .timeout(settings.timeout)
                .tcp_nodelay(true)
                .build()?,
            endpoint: format!(
                "{}{}",
                settings.api.trim_end_matches('/'),
                list.path(&account)
            ),
            key: settings.key.clone(),
        };
        let label = format!("{}: ", list.name());
        let goal = Some(GOAL_P99_MS);
        cases.push(
            fixed(
                &http,
                settings,
                &format!("{label}page 1"),
                goal,
                &[("pageSize", &size)],
            )
            .await,
        );
        let filter: Vec<(&str, &str)> = list.filter().into_iter().collect();
        if let Some((name, value)) = list.filter() {
            cases.push(
                fixed(
                    &http,
                    settings,
                    &format!("{label}page 1, {name}={value}"),
                    goal,
                    &[("pageSize", &size), (name, value)],
                )
                .await,
            );
        }
        // Deep enough to start past half the list, not past its end.
        let deep_in = |rows: u64| {
            settings
                .deep_page
                .min((rows / settings.page_size.max(1) / 2).max(1))
        };
        let deep = deep_in(report.rows);
        cases.push(cursor_walk(&http, settings, &size, deep, &[], &label).await);
        if !filter.is_empty() {
            let filtered_label = format!("{label}{}={}, ", filter[0].0, filter[0].1);
            let deep = deep_in(report.rows / list.filter_share());
            cases.push(cursor_walk(&http, settings, &size, deep, &filter, &filtered_label).await);
        }
        plans.extend(other_plans(db, list, values, settings, counts).await?);
        reports.push(report);
    }
    Ok(reports)
}

/// The statements the service runs for page 1 of `list`, in their form: the rows, the total as
/// main counted it (COUNT(*) over the filter) and, with m0017, the total as it is read now.
async fn other_plans(
    db: &DatabaseConnection,
    list: Other,
    values: &[Db],
    settings: &ListsSettings,
    counts: bool,
) -> anyhow::Result<Vec<Plan>> {
    let scope = list.scope();
    let scoped: Vec<Db> = match list {
        // Only $3 is used: renumber it $1.
        Other::Deposits => vec![values[2].clone()],
        _ => values[..2].to_vec(),
    };
    let scope = if list == Other::Deposits {
        "account_id = $1"
    } else {
        scope
    };
    let table = list.table();
    let limit = settings.page_size + 1;
    let name = list.name();
    let mut out = vec![
        explain(
            db,
            &format!("{name}: page 1 rows"),
            &format!(
                "SELECT * FROM {table} WHERE {scope} ORDER BY created_at DESC, id DESC LIMIT {limit}"
            ),
            scoped.clone(),
        )
        .await?,
        explain(
            db,
            &format!("{name}: total by COUNT(*) (before m0017)"),
            &format!("SELECT count(*) FROM {table} WHERE {scope}"),
            scoped.clone(),
        )
        .await?,
    ];
    if let Some((param, value)) = list.filter() {
        let column = if param == "type" { "type" } else { "status" };
        let mut with = scoped.clone();
        with.push(value.into());
        out.push(
            explain(
                db,
                &format!("{name}: {param}={value} total by COUNT(*) (before m0017)"),
                &format!("SELECT count(*) FROM {table} WHERE {scope} AND {column} = $3"),
                with,
            )
            .await?,
        );
    }
    if counts {
        let (list_name, by_account) = list.counted();
        let mut with: Vec<Db> = values[..2].to_vec();
        let bucket = if by_account {
            with.push(values[2].clone());
            " AND bucket = $3"
        } else {
            ""
        };
        out.push(
            explain(
                db,
                &format!("{name}: total from list_counts"),
                &format!(
                    "SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) AS n FROM list_counts \
                     WHERE business_id = $1 AND mode = $2 AND list = '{list_name}'{bucket}"
                ),
                with,
            )
            .await?,
        );
    }
    Ok(out)
}
