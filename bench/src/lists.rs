//! `bench lists`: bulk-loads accounts for one business and mode straight into PostgreSQL, then
//! times `GET /v1/virtual-accounts` as a caller would (page 1, a search that matches one account,
//! a search that matches none, cursor hops from deep in the list, a deep page number) and shows
//! PostgreSQL's plans of the statements the service runs for them.

use domain::ids::BusinessId;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use reqwest::Client;
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, DbBackend, Statement, Value as Db};
use serde_json::Value;
use store::accounts::SEARCH_TEXT;
use store::paging::EXACT_TOTAL_UP_TO;

use crate::stats::{Outcome, Percentiles, Stats};

/// The goal for every list request but a deep page number (docs/benchmarks.md): p99 ≤ 30 ms.
pub const GOAL_P99_MS: f64 = 30.0;
/// What `q` is when it must match nothing (no account's fields hold these trigrams).
pub const NO_MATCH: &str = "zzqx-nobody-here";
/// What the loaded accounts' sealed identities hold: the shape of a sealed value under a key id
/// no deployment has, so a read of one fails loudly instead of showing anything. Lists never
/// read them; `api admin crypto reencrypt` would refuse these rows (a benchmark database only).
pub const DUMMY_SEAL_PREFIX: &str = "v1:00000000:";

#[derive(Debug, Clone)]
pub struct ListsSettings {
    pub database_url: String,
    /// The service's base URL (without /v1).
    pub api: String,
    pub key: String,
    /// The business the key belongs to; looked up from the key when None.
    pub business: Option<String>,
    /// How many accounts the business must have in the key's mode (loaded up to this many).
    pub accounts: u64,
    /// How many rows each of the deposits (of one account), events, payouts and ledger lists
    /// must have (loaded up to this many); 0 measures accounts alone.
    pub rows: u64,
    /// Measured requests per case.
    pub requests: u64,
    /// Requests per case sent first and not counted.
    pub warmup: u64,
    pub page_size: u64,
    /// The page number of the deep-page case; the cursor walk starts from its `nextCursor`.
    pub deep_page: u64,
    /// The api's process id: its VmRSS is sampled after each case.
    pub api_pid: Option<u32>,
    pub timeout: Duration,
}

/// One measured kind of request.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    /// p99 goal in ms (None: no goal, shown for reference).
    pub goal_ms: Option<f64>,
    pub stats: Stats,
    /// `total` and `totalIsEstimate` of the first response.
    pub total: Option<(u64, bool)>,
}

impl Case {
    pub fn latency(&self) -> Option<Percentiles> {
        Percentiles::of(&self.stats.latency_ok)
    }

    pub fn met(&self) -> Option<bool> {
        Some(self.latency()?.p99 <= self.goal_ms?)
    }

    fn failures(&self) -> u64 {
        self.stats
            .statuses
            .iter()
            .filter(|(s, _)| **s != 200)
            .map(|(_, n)| n)
            .sum::<u64>()
            + self.stats.transport_errors
    }
}

/// The summary of one `EXPLAIN (ANALYZE, BUFFERS)`.
#[derive(Debug, Clone)]
pub struct Plan {
    pub name: String,
    /// Plan nodes from the top down the first child, with the index or table each reads.
    pub path: String,
    pub execution_ms: f64,
    pub shared_hit: u64,
    pub shared_read: u64,
}

#[derive(Debug, Clone)]
pub struct ListsReport {
    pub accounts: u64,
    pub loaded: u64,
    pub load_time: Duration,
    pub cases: Vec<Case>,
    pub plans: Vec<Plan>,
    /// The api's VmRSS (kB) after each case, the largest.
    pub api_rss_kb: Option<u64>,
    /// The deposits, events, payouts and ledger lists, as loaded.
    pub others: Vec<OtherReport>,
    /// The webhook deliveries the home page's figures were read over (one per loaded event).
    pub deliveries: Option<u64>,
}

/// `q` as the service turns it into a LIKE pattern: lower-cased, wildcards literal, substring.
pub fn like_pattern(q: &str) -> String {
    let escaped = q
        .to_lowercase()
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("%{escaped}%")
}

/// One statement that inserts accounts `from..=to` of a business in a mode: distinct names,
/// e-mails, phones, references and 10-digit numbers, `created_at` spread evenly over the year
/// before now in the order of insertion (as a real table grows), every tenth without reference
/// and every fiftieth deactivated. `$1` is the business id, `$2` the mode.
pub fn load_sql(from: u64, to: u64, total: u64) -> String {
    format!(
        "INSERT INTO virtual_accounts (id, business_id, mode, status, bank, account_number, \
           account_name, customer_name, customer_email, customer_phone, customer_reference, \
           identity_type, identity_enc, failure_reason, deactivation_reason, created_at, \
           activated_at, deactivated_at, updated_at) \
         SELECT 'va_bench' || $2 || lpad(g::text, 16, '0'), $1, $2, \
           CASE WHEN g % 50 = 0 THEN 'deactivated' ELSE 'active' END, \
           (ARRAY['wema-bank','access-bank','titan-trust-bank'])[1 + g % 3], \
           lpad(((g * 104729) % 1000000000)::text, 9, '0') || (g % 10)::text, \
           'VAS/' || first || ' ' || last, first || ' ' || last, \
           lower(first) || '.' || lower(last) || g || '@' || \
             (ARRAY['gmail.com','yahoo.com','outlook.com','hotmail.com','mail.ng'])[1 + g % 5], \
           '+234' || (ARRAY['803','806','813','816','703','706','810','903','905','701'])[1 + g % 10] \
             || lpad(((g * 7919) % 10000000)::text, 7, '0'), \
           CASE WHEN g % 10 = 0 THEN NULL ELSE 'cust-' || g END, \
           'bvn', '{DUMMY_SEAL_PREFIX}' || md5(g::text), NULL, \
           CASE WHEN g % 50 = 0 THEN 'customer left' END, \
           at, at + interval '2 seconds', CASE WHEN g % 50 = 0 THEN at + interval '30 days' END, at \
         FROM ( \
           SELECT g, \
             (ARRAY['Ada','Chinedu','Ngozi','Emeka','Funmilayo','Tunde','Aisha','Ibrahim', \
               'Blessing','Oluwaseun','Chiamaka','Yusuf','Folake','Kelechi','Zainab','Obinna', \
               'Temitope','Musa','Ifeoma','Segun','Halima','Uche','Bukola','Danjuma'])[1 + g % 24] \
               AS first, \
             (ARRAY['Okafor','Adeyemi','Bello','Eze','Ogunleye','Abubakar','Nwosu','Balogun', \
               'Okonkwo','Adebayo','Mohammed','Obi','Olawale','Ike','Suleiman','Chukwu', \
               'Afolabi','Lawal','Nnamdi','Oyelaran','Danladi'])[1 + (g / 24) % 21] AS last, \
             now() - interval '365 days' + (g::float8 / {total}) * interval '365 days' AS at \
           FROM generate_series({from}::bigint, {to}::bigint) AS g \
         ) AS s"
    )
}

/// The api's resident memory from /proc (Linux), in kB.
pub fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

pub(crate) fn statement(sql: &str, values: Vec<Db>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// The business of `key` (by its hash in api_keys), unless `given`.
pub(crate) async fn business_of(
    db: &DatabaseConnection,
    key: &str,
    given: Option<&str>,
) -> anyhow::Result<BusinessId> {
    if let Some(id) = given {
        return BusinessId::parse(id).context("--business");
    }
    let row = db
        .query_one_raw(statement(
            "SELECT business_id FROM api_keys WHERE key_hash = $1",
            vec![domain::keys::hash_secret_key(key).into()],
        ))
        .await?
        .context("no business has this key in this database (pass --business)")?;
    Ok(BusinessId::unchecked(
        row.try_get::<String>("", "business_id")?,
    ))
}

async fn count(db: &DatabaseConnection, business: &str, mode: &str) -> anyhow::Result<u64> {
    let row = db
        .query_one_raw(statement(
            "SELECT count(*) AS n FROM virtual_accounts WHERE business_id = $1 AND mode = $2",
            vec![business.into(), mode.into()],
        ))
        .await?
        .context("count returned no row")?;
    let n: i64 = row.try_get("", "n")?;
    Ok(n.max(0) as u64)
}

/// Loads the business's accounts up to `accounts` (in batches of 100,000: one statement each),
/// then VACUUMs and ANALYZEs the table. Returns how many were inserted.
async fn load(
    db: &DatabaseConnection,
    business: &str,
    mode: &str,
    accounts: u64,
) -> anyhow::Result<u64> {
    const BATCH: u64 = 100_000;
    let existing = count(db, business, mode).await?;
    let mut next = existing + 1;
    while next <= accounts {
        let to = (next + BATCH - 1).min(accounts);
        db.execute_raw(statement(
            &load_sql(next, to, accounts),
            vec![business.into(), mode.into()],
        ))
        .await
        .with_context(|| format!("loading accounts {next}..={to}"))?;
        eprintln!("  loaded {to} of {accounts}");
        next = to + 1;
    }
    // The steady state of a table in service, which autovacuum reaches on its own after a bulk
    // insert (and would otherwise reach in the middle of the measurements): statistics, and a
    // visibility map that lets counts read the index alone. The rows m0022's trigger wrote beside
    // each account too: without statistics, a search by number was planned as if
    // `account_numbers` were empty (a bitmap of all its million rows, 80 ms, instead of 2 ms).
    db.execute_unprepared("VACUUM (ANALYZE) virtual_accounts, account_states, account_numbers")
        .await?;
    Ok(accounts.saturating_sub(existing))
}

/// True when the schema keeps account tallies (`m0015_account_counts`).
async fn has_tallies(db: &DatabaseConnection) -> anyhow::Result<bool> {
    let row = db
        .query_one_raw(statement(
            "SELECT to_regclass('account_counts') IS NOT NULL AS present",
            vec![],
        ))
        .await?
        .context("to_regclass returned no row")?;
    Ok(row.try_get("", "present")?)
}

/// The e-mail and account number of one account in the middle of the list (its own, so each
/// matches exactly one). Just past the middle: the middle one's number ends in seven zeros (see
/// [`load_sql`]), and its last six digits are a search text of one repeated trigram, which no
/// trigram index narrows (90–100 ms before and after m0022).
async fn middle_account(
    db: &DatabaseConnection,
    business: &str,
    mode: &str,
) -> anyhow::Result<(String, String)> {
    let n = count(db, business, mode).await?;
    let row = db
        .query_one_raw(statement(
            "SELECT customer_email, account_number FROM virtual_accounts \
             WHERE business_id = $1 AND mode = $2 AND account_number IS NOT NULL \
             ORDER BY created_at DESC, id DESC OFFSET $3 LIMIT 1",
            vec![business.into(), mode.into(), ((n / 2 + 1) as i64).into()],
        ))
        .await?
        .context("the business has no numbered accounts")?;
    Ok((
        row.try_get("", "customer_email")?,
        row.try_get("", "account_number")?,
    ))
}

struct Http {
    client: Client,
    endpoint: String,
    key: String,
}

impl Http {
    /// One list request: its outcome, latency and, on 200, its JSON body.
    async fn get(&self, query: &[(&str, &str)]) -> (Outcome, Duration, Option<Value>) {
        let t0 = Instant::now();
        let response = self
            .client
            .get(&self.endpoint)
            .bearer_auth(&self.key)
            .query(query)
            .send()
            .await;
        let outcome = match response {
            Ok(r) => {
                let status = r.status().as_u16();
                match r.text().await {
                    Ok(body) => Outcome::Response {
                        status,
                        replayed: false,
                        body,
                    },
                    Err(e) => Outcome::Transport(e.to_string()),
                }
            }
            Err(e) => Outcome::Transport(e.to_string()),
        };
        let elapsed = t0.elapsed();
        let json = match &outcome {
            Outcome::Response {
                status: 200, body, ..
            } => serde_json::from_str(body).ok(),
            _ => None,
        };
        (outcome, elapsed, json)
    }
}

fn total_of(json: &Value) -> Option<(u64, bool)> {
    Some((
        json["total"].as_u64()?,
        json["totalIsEstimate"].as_bool().unwrap_or(false),
    ))
}

/// Sends `warmup` then `requests` of the same query, one at a time.
async fn fixed(
    http: &Http,
    settings: &ListsSettings,
    name: &str,
    goal_ms: Option<f64>,
    query: &[(&str, &str)],
) -> Case {
    let mut case = Case {
        name: name.to_owned(),
        goal_ms,
        stats: Stats::new(),
        total: None,
    };
    for i in 0..settings.warmup + settings.requests {
        let (outcome, elapsed, json) = http.get(query).await;
        if case.total.is_none() {
            case.total = json.as_ref().and_then(total_of);
        }
        if i >= settings.warmup {
            case.stats.record(outcome, elapsed);
        }
    }
    case
}

/// Walks `nextCursor` from page `deep` (of the list filtered by `filter`), timing each hop (the
/// deep page itself is not timed; at the end of the list the walk starts again from it).
async fn cursor_walk(
    http: &Http,
    settings: &ListsSettings,
    page_size: &str,
    deep: u64,
    filter: &[(&str, &str)],
    label: &str,
) -> Case {
    let deep = deep.to_string();
    let mut start = vec![("pageSize", page_size), ("page", deep.as_str())];
    start.extend_from_slice(filter);
    let mut case = Case {
        name: format!("{label}cursor hops from page {deep} (nextCursor)"),
        goal_ms: Some(GOAL_P99_MS),
        stats: Stats::new(),
        total: None,
    };
    let mut cursor: Option<String> = None;
    let mut restarts = 0;
    let mut i = 0;
    while i < settings.warmup + settings.requests {
        let Some(c) = cursor.take() else {
            let (_, _, json) = http.get(&start).await;
            cursor = json
                .as_ref()
                .and_then(|j| j["nextCursor"].as_str().map(str::to_owned));
            restarts += 1;
            if cursor.is_none() || restarts > settings.warmup + settings.requests {
                // The deep page is past the end: nothing to walk.
                break;
            }
            continue;
        };
        let mut hop = vec![("pageSize", page_size), ("cursor", c.as_str())];
        hop.extend_from_slice(filter);
        let (outcome, elapsed, json) = http.get(&hop).await;
        if case.total.is_none() {
            case.total = json.as_ref().and_then(total_of);
        }
        cursor = json
            .as_ref()
            .and_then(|j| j["nextCursor"].as_str().map(str::to_owned));
        if i >= settings.warmup {
            case.stats.record(outcome, elapsed);
        }
        i += 1;
    }
    case
}

/// `EXPLAIN (ANALYZE, BUFFERS)` of `sql`, summarised.
pub(crate) async fn explain(
    db: &DatabaseConnection,
    name: &str,
    sql: &str,
    values: Vec<Db>,
) -> anyhow::Result<Plan> {
    let row = db
        .query_one_raw(statement(
            &format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}"),
            values,
        ))
        .await
        .with_context(|| format!("explaining {name}"))?
        .context("EXPLAIN returned no row")?;
    let json: Value = row.try_get_by_index(0)?;
    Ok(summarise(name, &json[0]))
}

/// The node path, execution time and buffers of one `EXPLAIN (…, FORMAT JSON)` element.
pub fn summarise(name: &str, explained: &Value) -> Plan {
    let mut path = Vec::new();
    let mut node = &explained["Plan"];
    while node.is_object() {
        let mut step = String::new();
        if let Some(partial) = node["Partial Mode"].as_str().filter(|m| *m != "Simple") {
            let _ = write!(step, "{partial} ");
        }
        if node["Parallel Aware"].as_bool() == Some(true) {
            step.push_str("Parallel ");
        }
        step.push_str(node["Node Type"].as_str().unwrap_or("?"));
        if node["Scan Direction"].as_str() == Some("Backward") {
            step.push_str(" Backward");
        }
        if let Some(index) = node["Index Name"].as_str() {
            let _ = write!(step, " on {index}");
        } else if let Some(table) = node["Relation Name"].as_str() {
            let _ = write!(step, " on {table}");
        }
        if let Some(rows) = node["Actual Rows"].as_f64() {
            let _ = write!(step, " (rows {rows})");
        }
        if let Some(removed) = node["Rows Removed by Filter"].as_f64().filter(|r| *r > 0.0) {
            let _ = write!(step, " [filtered out {removed}]");
        }
        if let Some(rechecked) = node["Rows Removed by Index Recheck"]
            .as_f64()
            .filter(|r| *r > 0.0)
        {
            let _ = write!(step, " [recheck removed {rechecked}]");
        }
        path.push(step);
        node = &node["Plans"][0];
    }
    let top = &explained["Plan"];
    Plan {
        name: name.to_owned(),
        path: path.join(" > "),
        execution_ms: explained["Execution Time"].as_f64().unwrap_or(0.0),
        shared_hit: top["Shared Hit Blocks"].as_u64().unwrap_or(0),
        shared_read: top["Shared Read Blocks"].as_u64().unwrap_or(0),
    }
}

/// The statements `store::accounts::list` and `store::paging` run for the measured
/// requests, in their form (kept beside them by hand: change both together).
async fn plans(
    db: &DatabaseConnection,
    business: &str,
    mode: &str,
    (email, number): (&str, &str),
    settings: &ListsSettings,
) -> anyhow::Result<Vec<Plan>> {
    let base = "FROM virtual_accounts WHERE business_id = $1 AND mode = $2";
    let columns = "id, business_id, mode, status, bank, account_number, account_name, \
        customer_name, customer_email, customer_phone, customer_reference, identity_type, \
        identity_enc, failure_reason, deactivation_reason, created_at, activated_at, \
        deactivated_at, updated_at";
    let order = "ORDER BY created_at DESC, id DESC";
    let limit = settings.page_size + 1;
    let search = format!("{base} AND {SEARCH_TEXT} LIKE $3 ESCAPE '\\'");
    let ids = || -> Vec<Db> { vec![business.into(), mode.into()] };
    let with = |q: &str| -> Vec<Db> { vec![business.into(), mode.into(), like_pattern(q).into()] };
    let mut out = vec![
        explain(
            db,
            "page 1: rows",
            &format!("SELECT {columns} {base} {order} LIMIT {limit}"),
            ids(),
        )
        .await?,
        explain(
            db,
            "page 1 (no q): total (tally)",
            "SELECT * FROM business_modes WHERE business_id = $1 AND mode = $2",
            ids(),
        )
        .await?,
    ];
    for (label, q) in [("q one e-mail", email), ("q no match", NO_MATCH)] {
        out.push(
            explain(
                db,
                &format!("{label}: rows"),
                &format!("SELECT {columns} {search} {order} LIMIT {limit}"),
                with(q),
            )
            .await?,
        );
        out.push(
            explain(
                db,
                &format!("{label}: capped total"),
                &format!(
                    "SELECT count(*) AS n FROM (SELECT 1 {search} LIMIT {}) AS capped",
                    EXACT_TOTAL_UP_TO + 1
                ),
                with(q),
            )
            .await?,
        );
    }
    // Digits: the accounts whose text matches and those whose number does, as one set; a whole
    // number is looked up by the banks' primary key, not by its trigrams.
    let banks = domain::Bank::ALL
        .iter()
        .map(|b| format!("'{}'", b.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    let by_number = format!(
        "{base} AND id IN (SELECT id {search} UNION ALL SELECT account_id FROM account_numbers \
         WHERE business_id = $1 AND mode = $2 AND bank IN ({banks}) AND account_number = $4)"
    );
    let mut whole = with(number);
    whole.push(number.into());
    out.push(
        explain(
            db,
            "q one number: rows",
            &format!("SELECT {columns} {by_number} {order} LIMIT {limit}"),
            whole,
        )
        .await?,
    );
    let qualified = columns
        .split(", ")
        .map(|c| format!("virtual_accounts.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    out.push(
        explain(
            db,
            "status=deactivated: rows",
            &format!(
                "SELECT {qualified} FROM virtual_accounts INNER JOIN account_states \
                 ON account_states.account_id = virtual_accounts.id \
                 WHERE virtual_accounts.business_id = $1 AND virtual_accounts.mode = $2 \
                 AND account_states.business_id = $1 AND account_states.mode = $2 \
                 AND account_states.status = 'deactivated' \
                 ORDER BY account_states.created_at DESC, account_states.account_id DESC \
                 LIMIT {limit}"
            ),
            ids(),
        )
        .await?,
    );
    let offset = settings.deep_page.saturating_sub(1) * settings.page_size;
    out.push(
        explain(
            db,
            &format!("page={}: rows", settings.deep_page),
            &format!("SELECT {columns} {base} {order} LIMIT {limit} OFFSET {offset}"),
            ids(),
        )
        .await?,
    );
    Ok(out)
}

/// Loads, measures and explains.
pub async fn run(settings: &ListsSettings) -> anyhow::Result<ListsReport> {
    let key_mode = domain::keys::secret_key_mode(&settings.key)
        .context("--key is not a secret key of this service (sk_test_… or sk_live_…)")?;
    let mode = key_mode.as_str();
    let db = Database::connect(&settings.database_url)
        .await
        .context("connecting to --database-url")?;
    ensure!(
        db.get_database_backend() == DbBackend::Postgres,
        "bench lists needs PostgreSQL (the figures are PostgreSQL's)"
    );
    let business = business_of(&db, &settings.key, settings.business.as_deref()).await?;

    eprintln!(
        "bench lists: business {business} ({mode}): making sure it has {} accounts…",
        settings.accounts
    );
    let t0 = Instant::now();
    let loaded = load(&db, &business, mode, settings.accounts).await?;
    // The rows were written around the service: its tallies (list totals) are rebuilt (on a
    // schema that has them: an older service's database is measured as it is).
    if has_tallies(&db).await? {
        store::tallies::recount(&db, &business, key_mode)
            .await
            .context("recounting the business's accounts")?;
    }
    let load_time = t0.elapsed();
    let accounts = count(&db, &business, mode).await?;
    let (email, number) = middle_account(&db, &business, mode).await?;

    let http = Http {
        client: Client::builder()
            .timeout(settings.timeout)
            .tcp_nodelay(true)
            .build()?,
        endpoint: format!("{}/v1/virtual-accounts", settings.api.trim_end_matches('/')),
        key: settings.key.clone(),
    };
    let size = settings.page_size.to_string();
    let deep = settings.deep_page.to_string();
    let mut rss: Option<u64> = None;
    let sample = |rss: &mut Option<u64>| {
        if let Some(kb) = settings.api_pid.and_then(rss_kb) {
            *rss = Some(rss.map_or(kb, |r| r.max(kb)));
        }
    };
    let goal = Some(GOAL_P99_MS);
    let mut cases = Vec::new();
    eprintln!(
        "measuring: {} requests per case after {} not counted, one at a time…",
        settings.requests, settings.warmup
    );
    cases.push(fixed(&http, settings, "page 1", goal, &[("pageSize", &size)]).await);
    sample(&mut rss);
    cases.push(
        fixed(
            &http,
            settings,
            "q = one account's e-mail",
            goal,
            &[("pageSize", &size), ("q", &email)],
        )
        .await,
    );
    sample(&mut rss);
    // Parts of that e-mail: its local part with the `@` (rarer trigrams), and only
    // the digits before the `@` with it (trigrams many e-mails share: the index hands back more
    // candidates to check).
    let local = email.split('@').next().unwrap_or_default();
    let digits: String = local.chars().filter(char::is_ascii_digit).collect();
    // The number is not in the accounts' trigram index (an activation changes no
    // indexed column: docs/decisions/one-statement-paths.md): digits are also looked up in
    // `account_numbers`' own index. A status filter walks `account_states`: the common status and a
    // rare one (every 50th).
    let tail = &number[number.len().saturating_sub(6)..];
    for (label, name, value) in [
        (
            "q = part of an e-mail (local part + @)",
            "q",
            format!("{local}@"),
        ),
        (
            "q = part of an e-mail (digits + @)",
            "q",
            format!("{digits}@"),
        ),
        ("q = one account's number", "q", number.clone()),
        (
            "q = part of a number (its last 6 digits)",
            "q",
            tail.to_owned(),
        ),
        ("status=active", "status", "active".to_owned()),
        ("status=deactivated", "status", "deactivated".to_owned()),
    ] {
        cases.push(
            fixed(
                &http,
                settings,
                label,
                goal,
                &[("pageSize", &size), (name, &value)],
            )
            .await,
        );
        sample(&mut rss);
    }
    cases.push(
        fixed(
            &http,
            settings,
            "q matching nothing",
            goal,
            &[("pageSize", &size), ("q", NO_MATCH)],
        )
        .await,
    );
    sample(&mut rss);
    cases.push(cursor_walk(&http, settings, &size, settings.deep_page, &[], "").await);
    sample(&mut rss);
    cases.push(
        fixed(
            &http,
            settings,
            &format!("page={deep} (offset; no goal)"),
            None,
            &[("pageSize", &size), ("page", &deep)],
        )
        .await,
    );
    sample(&mut rss);
    if cases.iter().all(|c| c.stats.latency_ok.is_empty()) {
        let sample = cases
            .iter()
            .find_map(|c| c.stats.error_samples.values().next().cloned())
            .or_else(|| cases.iter().find_map(|c| c.stats.transport_sample.clone()))
            .unwrap_or_default();
        bail!("no list request succeeded: {sample}");
    }

    eprintln!("explaining the service's statements…");
    let mut plans = plans(&db, &business, mode, (&email, &number), settings).await?;
    let (others, deliveries) = if settings.rows > 0 {
        let others = run_others(&db, settings, &business, mode, &mut cases, &mut plans).await?;
        let deliveries =
            crate::home::run(&db, settings, &business, mode, &mut cases, &mut plans).await?;
        (others, Some(deliveries))
    } else {
        (Vec::new(), None)
    };
    sample(&mut rss);
    Ok(ListsReport {
        accounts,
        loaded,
        load_time,
        cases,
        plans,
        api_rss_kb: rss,
        others,
        deliveries,
    })
}

impl ListsReport {
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "accounts: {} in the business's mode ({} loaded now in {:.1} s)",
            self.accounts,
            self.loaded,
            self.load_time.as_secs_f64()
        );
        for other in &self.others {
            let checked = match other.checked {
                Some((kept, stored)) if kept == stored => {
                    "counted by the triggers as inserted; maintained count = COUNT(*)".to_owned()
                }
                Some((kept, stored)) => format!("maintained count {kept} != COUNT(*) {stored}"),
                None => "no maintained counts in this schema".to_owned(),
            };
            let _ = writeln!(
                out,
                "{}: {} rows ({} loaded now in {:.1} s; {checked})",
                other.list.name(),
                other.rows,
                other.loaded,
                other.load_time.as_secs_f64()
            );
        }
        if let Some(n) = self.deliveries {
            let _ = writeln!(out, "deliveries: {n} rows (one per loaded event)");
        }
        let _ = writeln!(
            out,
            "\n| request | p50 ms | p99 ms | goal p99 | met | total (estimate?) | errors |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---|---|---:|");
        for case in &self.cases {
            let (p50, p99) = case.latency().map_or(("-".into(), "-".into()), |p| {
                (format!("{:.2}", p.p50), format!("{:.2}", p.p99))
            });
            let goal = case
                .goal_ms
                .map_or("-".to_owned(), |g| format!("≤ {g:.0} ms"));
            let met = match case.met() {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "-",
            };
            let total = case.total.map_or("-".to_owned(), |(t, e)| {
                if e {
                    format!("{t} (estimate)")
                } else {
                    t.to_string()
                }
            });
            let _ = writeln!(
                out,
                "| {} | {p50} | {p99} | {goal} | {met} | {total} | {} |",
                case.name,
                case.failures()
            );
        }
        if let Some(kb) = self.api_rss_kb {
            let _ = writeln!(
                out,
                "\napi RSS (VmRSS, largest after each case): {:.1} MiB",
                kb as f64 / 1024.0
            );
        }
        let _ = writeln!(
            out,
            "\nEXPLAIN (ANALYZE, BUFFERS) of the service's statements:"
        );
        for plan in &self.plans {
            let _ = writeln!(
                out,
                "- {}: {:.2} ms, buffers hit {} read {}\n    {}",
                plan.name, plan.execution_ms, plan.shared_hit, plan.shared_read, plan.path
            );
        }
        for case in &self.cases {
            for (status, body) in &case.stats.error_samples {
                let _ = writeln!(out, "warning: {}: {status} {body}", case.name);
            }
            if let Some(t) = &case.stats.transport_sample {
                let _ = writeln!(out, "warning: {}: {t}", case.name);
            }
        }
        out
    }
}

mod others;
pub use others::*;

#[cfg(test)]
mod tests;
