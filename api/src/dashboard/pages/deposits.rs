//! Deposits: every deposit of the mode (flagged ones marked), searched by provider reference or
//! account number, paged like the API's lists, and the CSV export of the whole filtered set,
//! streamed a page at a time (never every row in memory).

use std::collections::HashMap;

use askama::Template;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use domain::ids::{AccountId, BusinessId};
use domain::{DepositSource, DepositStatus, Mode};
use futures::StreamExt;
use sea_orm::DatabaseConnection;
use store::accounts;
use store::deposits::{self, Deposit, ModeQuery};
use store::paging::{Keyset, PageRequest, Position};

use crate::dashboard::listing::{self, List, Pager, grouped};
use crate::dashboard::session::{Scoped, Viewer};
use crate::dashboard::view::{self, Badge, Frame, PageResult, SearchForm, Section, When, naira};
use crate::extract::QueryPairs;
use crate::state::AppState;

const PAGE_SIZE: u64 = 25;
/// Rows read per query while exporting.
const EXPORT_BATCH: u64 = 500;

struct DepositRow {
    received: When,
    amount: String,
    status: Badge,
    flagged: bool,
    account_href: String,
    account_number: Option<String>,
    account_name: String,
    sender_name: Option<String>,
    sender_bank: Option<String>,
    reference: String,
    /// Found by a recheck rather than notified (the CSV says which for every row).
    by_recheck: bool,
}

#[derive(Template)]
#[template(path = "deposits.html")]
struct ListPage {
    frame: Frame,
    search: SearchForm,
    error: Option<&'static str>,
    rows: Vec<DepositRow>,
    flagged_note: bool,
    pager: Pager,
    /// What the deposits of the filter shown add up to.
    totals: String,
    export_href: String,
}

/// The list's filter from the query; a bad search text is dropped with its reason.
fn read_filter(query: &QueryPairs) -> (String, Option<DepositStatus>, Option<&'static str>) {
    let (q, error) = listing::search_text(query, "q");
    let status = query.get("status").and_then(DepositStatus::parse);
    (q.to_owned(), status, error)
}

fn mode_query<'a>(
    scope: &'a Scoped<Viewer>,
    q: &'a str,
    status: Option<DepositStatus>,
) -> ModeQuery<'a> {
    ModeQuery {
        business_id: scope.business_id(),
        mode: scope.mode,
        search: Some(q).filter(|q| !q.is_empty()),
        status,
    }
}

/// The accounts of a page of deposits, by id, in one query.
async fn accounts_of(
    db: &DatabaseConnection,
    business_id: &BusinessId,
    mode: Mode,
    rows: &[Deposit],
) -> Result<HashMap<AccountId, accounts::Account>, sea_orm::DbErr> {
    let mut ids: Vec<AccountId> = rows.iter().map(|d| d.account_id.clone()).collect();
    ids.sort();
    ids.dedup();
    Ok(accounts::find_many(db, business_id, mode, &ids)
        .await?
        .into_iter()
        .map(|a| (a.id.clone(), a))
        .collect())
}

pub async fn list(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    query: QueryPairs,
) -> PageResult {
    let (q, status, error) = read_filter(&query);
    let filter_query = mode_query(&scope, &q, status);
    let list = List::read(
        &state,
        &query,
        listing::PLAIN,
        filter_query.filter(),
        PAGE_SIZE,
    );
    let reads = state.reads.db().await;
    let cap = state.config.limits.list_exact_total;
    // The page, its total and its amounts are independent reads: on a pool's connections at
    // once, the page waits for the slowest of them, not their sum.
    let (fetched, total, amounts) = tokio::try_join!(
        deposits::page_for_mode(&reads, &filter_query, &list.request),
        deposits::total_for_mode(&reads, &filter_query, cap),
        deposits::amounts_for_mode(&reads, &filter_query, cap),
    )?;
    let totals = match amounts {
        Some((all, 0)) => format!("{} in all", naira(all)),
        Some((all, flagged)) => format!(
            "{} in all, {} of it flagged (never credited)",
            naira(all),
            naira(flagged)
        ),
        None => format!(
            "More than {} deposits: search or choose a status to see their total, or download the CSV",
            grouped(cap)
        ),
    };
    let accounts = accounts_of(&reads, scope.business_id(), scope.mode, &fetched.rows).await?;
    let mode = scope.mode.as_str();
    let action = Section::Deposits.href(scope.mode);
    let status_value = status.map_or("", DepositStatus::as_str);
    let keep = [("q", q.as_str()), ("status", status_value)];
    let pager = list.pager(
        &state,
        &action,
        &keep,
        &fetched,
        total,
        ("deposit", "deposits"),
    );
    let rows: Vec<DepositRow> = fetched
        .rows
        .iter()
        .map(|d| {
            let account = accounts.get(&d.account_id);
            DepositRow {
                received: When::of(&d.received_at),
                amount: naira(d.amount),
                status: Badge::of(d.status),
                flagged: d.status == DepositStatus::Flagged,
                account_href: format!("/dashboard/{mode}/accounts/{}", d.account_id),
                account_number: account.and_then(|a| a.account_number.clone()),
                account_name: account.map_or_else(String::new, |a| {
                    scope.own_account_name(&a.account_name).to_owned()
                }),
                sender_name: d.sender_name.clone().filter(|n| !n.is_empty()),
                sender_bank: d.sender_bank_name.clone().filter(|n| !n.is_empty()),
                reference: d.provider_reference.clone(),
                by_recheck: d.source == DepositSource::Recheck,
            }
        })
        .collect();
    let page = ListPage {
        frame: scope.frame(Section::Deposits, "Deposits"),
        export_href: format!("/dashboard/{mode}/deposits/export{}", view::query(&keep)),
        search: SearchForm::new(action, &q, status),
        flagged_note: rows.iter().any(|r| r.flagged),
        error,
        rows,
        pager,
        totals,
    };
    Ok(view::page(&page))
}

/// The CSV columns, in order.
const CSV_HEADER: [&str; 17] = [
    "Deposit ID",
    "Received (WAT)",
    "Received at (UTC)",
    "Amount (NGN)",
    "Amount (kobo)",
    "Currency",
    "Status",
    "Account number",
    "Account name",
    "Account ID",
    "Provider reference",
    "Sender name",
    "Sender account number",
    "Sender bank",
    "Narration",
    "Source",
    "Recorded at (UTC)",
];

/// The whole filtered set as CSV (RFC 4180: CRLF, quoted where needed), UTF-8 with a byte-order
/// mark so spreadsheets read names right, cells that a spreadsheet would run as a formula made
/// text. Streamed: each batch of rows is read (by cursor, constant time) as the download goes.
pub async fn export(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    query: QueryPairs,
) -> Response {
    let (q, status, _) = read_filter(&query);
    let business_id = scope.business_id().to_owned();
    let mode = scope.mode;
    let mut head = String::from("\u{feff}");
    csv_line(&mut head, CSV_HEADER.iter().map(|h| (*h).to_owned()));
    // A batch at a time: None once the last batch is sent.
    let start = Some(Position::Page(1));
    // One handle for the whole export: every batch from the same server.
    let reads = state.reads.db().await;
    let batches = futures::stream::try_unfold(start, move |position| {
        let (db, business_id, q) = (reads.clone(), business_id.clone(), q.clone());
        async move {
            let Some(position) = position else {
                return Ok(None);
            };
            let query = ModeQuery {
                business_id: &business_id,
                mode,
                search: Some(q.as_str()).filter(|q| !q.is_empty()),
                status,
            };
            let request = PageRequest {
                page_size: EXPORT_BATCH,
                position,
            };
            let fetched = deposits::page_for_mode(&db, &query, &request)
                .await
                .map_err(export_failed)?;
            let accounts = accounts_of(&db, &business_id, mode, &fetched.rows)
                .await
                .map_err(export_failed)?;
            let mut chunk = String::new();
            for d in &fetched.rows {
                csv_line(&mut chunk, csv_row(d, accounts.get(&d.account_id)));
            }
            let next = fetched.next.map(|key: Keyset| Position::After(key));
            Ok::<_, std::io::Error>(Some((Bytes::from(chunk), next)))
        }
    });
    let body = futures::stream::once(async move { Ok::<_, std::io::Error>(Bytes::from(head)) })
        .chain(batches);
    let filename = format!(
        "deposits-{}-{}.csv",
        scope.mode,
        domain::time::now().format("%Y%m%d-%H%M%S")
    );
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

/// A failure mid-download ends the body with an error (the browser shows the download failed)
/// rather than a file that silently stops.
fn export_failed(e: sea_orm::DbErr) -> std::io::Error {
    tracing::error!(error = %e, "a deposits export failed");
    std::io::Error::other("the export could not be read")
}

fn csv_row(d: &Deposit, account: Option<&accounts::Account>) -> Vec<String> {
    let wat = chrono::FixedOffset::east_opt(3600).expect("one hour");
    vec![
        d.id.to_string(),
        d.received_at
            .with_timezone(&wat)
            .format("%Y-%m-%d %H:%M:%S")
            .to_string(),
        domain::time::rfc3339(&d.received_at),
        naira_plain(d.amount),
        d.amount.to_string(),
        d.currency.clone(),
        d.status.as_str().to_owned(),
        account
            .and_then(|a| a.account_number.clone())
            .unwrap_or_default(),
        account.map(|a| a.account_name.clone()).unwrap_or_default(),
        d.account_id.to_string(),
        d.provider_reference.clone(),
        d.sender_name.clone().unwrap_or_default(),
        d.sender_account_number.clone().unwrap_or_default(),
        d.sender_bank_name.clone().unwrap_or_default(),
        d.narration.clone().unwrap_or_default(),
        d.source.as_str().to_owned(),
        domain::time::rfc3339(&d.created_at),
    ]
}

/// Kobo as naira for a spreadsheet: "1500.00" (no symbol, no grouping, so it reads as a number).
fn naira_plain(kobo: i64) -> String {
    let sign = if kobo < 0 { "-" } else { "" };
    let kobo = kobo.unsigned_abs();
    format!("{sign}{}.{:02}", kobo / 100, kobo % 100)
}

/// One CSV record, CRLF-terminated.
fn csv_line(out: &mut String, cells: impl IntoIterator<Item = String>) {
    for (i, cell) in cells.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&csv_cell(&cell));
    }
    out.push_str("\r\n");
}

/// A cell as RFC 4180 writes it, with formula injection defused: text a spreadsheet would
/// evaluate (starting with = + - @, or a tab or carriage return before one) gets a leading '.
fn csv_cell(value: &str) -> String {
    let defused = if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{value}")
    } else {
        value.to_owned()
    };
    if defused.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", defused.replace('"', "\"\""))
    } else {
        defused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_quoted_as_rfc_4180_says() {
        assert_eq!(csv_cell("plain"), "plain");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell("two\r\nlines"), "\"two\r\nlines\"");
        let mut line = String::new();
        csv_line(&mut line, ["a".to_owned(), String::new(), "c".to_owned()]);
        assert_eq!(line, "a,,c\r\n");
    }

    #[test]
    fn formulas_are_made_text() {
        for bad in ["=1+1", "+234", "-2", "@SUM(A1)", "\t=1"] {
            assert!(
                csv_cell(bad).trim_start_matches('"').starts_with('\''),
                "{bad}"
            );
        }
        assert_eq!(
            csv_cell("=HYPERLINK(\"x\",\"y\")"),
            "\"'=HYPERLINK(\"\"x\"\",\"\"y\"\")\""
        );
        assert_eq!(csv_cell("Ada = Obi"), "Ada = Obi");
    }

    #[test]
    fn amounts_read_as_numbers() {
        assert_eq!(naira_plain(150_000), "1500.00");
        assert_eq!(naira_plain(5), "0.05");
        assert_eq!(naira_plain(2_500_050), "25000.50");
    }
}
