//! Accounts: the list (the API's `q`, `status` and paging, through the same `accounts::list` as
//! `GET /virtual-accounts`, so search and tenancy have one implementation) and an account's page
//! with its deposits, rechecks and events. Nothing here creates an account.

use askama::Template;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use domain::ids::{AccountId, EventId};
use domain::{AccountStatus, Bank, IdentityType, Mode};
use store::accounts::{self, Account, ListQuery};
use store::paging::{MAX_PAGE, MAX_PAGE_SIZE};
use store::{deliveries, deposits, events, rechecks};

use crate::dashboard::listing::{self, grouped};
use crate::dashboard::session::{ItemId, Scoped, Viewer};
use crate::dashboard::view::{self, Badge, Frame, PageResult, SearchForm, Section, When, naira};
use crate::extract::QueryPairs;
use crate::state::AppState;

const PAGE_SIZE: u64 = 25;
const DEPOSITS_PAGE_SIZE: u64 = 20;
const RECHECKS_SHOWN: u64 = 10;
const EVENTS_SHOWN: u64 = 20;

/// What stands in for an account's missing number: a failed account will never have one.
fn missing_number(status: AccountStatus) -> &'static str {
    if status == AccountStatus::Failed {
        "Failed: the bank did not issue a number"
    } else {
        "Not yet: the bank has not given one"
    }
}

struct AccountRow {
    href: String,
    number: Option<String>,
    no_number: &'static str,
    name: String,
    bank: &'static str,
    status: Badge,
    reference: Option<String>,
    created: When,
}

#[derive(Template)]
#[template(path = "accounts.html")]
struct ListPage {
    frame: Frame,
    search: SearchForm,
    error: Option<&'static str>,
    rows: Vec<AccountRow>,
    showing: String,
    page: u64,
    total_pages: u64,
    prev_href: Option<String>,
    next_href: Option<String>,
    curl: String,
}

/// A page number or size from the query: out of range or not a number reads as the default
/// (a person's typo is not worth an error page).
fn number(query: &QueryPairs, name: &str, default: u64, max: u64) -> u64 {
    query
        .get(name)
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|n| (1..=max).contains(n))
        .unwrap_or(default)
}

pub async fn list(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    headers: HeaderMap,
    query: QueryPairs,
) -> PageResult {
    let page = number(&query, "page", 1, MAX_PAGE);
    let page_size = number(&query, "pageSize", PAGE_SIZE, MAX_PAGE_SIZE);
    let status = query.get("status").and_then(AccountStatus::parse);
    // The API's limits on q (it answers 422; a person gets the reason and the unfiltered list).
    let (q, error) = listing::search_text(&query, "q");
    // Page numbers (links a person can follow); the list itself is the JSON API's.
    let request = store::paging::PageRequest {
        page_size,
        position: store::paging::Position::Page(page),
    };
    let (fetched, total) = accounts::list(
        &state.reads.db().await,
        scope.business_id(),
        scope.mode,
        &ListQuery {
            request: &request,
            q: Some(q).filter(|q| !q.is_empty()),
            status,
            exact_total_up_to: state.config.limits.list_exact_total,
        },
    )
    .await?;
    let rows = fetched.rows;
    let estimate = total.estimate;
    let total = total.value;
    let mode = scope.mode.as_str();
    let action = Section::Accounts.href(scope.mode);
    let status_value = status.map_or("", AccountStatus::as_str);
    let size_value = if page_size == PAGE_SIZE {
        String::new()
    } else {
        page_size.to_string()
    };
    let href = |p: u64| {
        let p = p.to_string();
        format!(
            "{action}{}",
            view::query(&[
                ("q", q),
                ("status", status_value),
                ("pageSize", &size_value),
                ("page", if p == "1" { "" } else { &p }),
            ])
        )
    };
    let total_pages = total.div_ceil(page_size).max(1);
    let first = (page - 1) * page_size + 1;
    let showing = if rows.is_empty() {
        String::new()
    } else {
        format!(
            "{}–{} of {}{} account{}",
            grouped(first),
            grouped(first + rows.len() as u64 - 1),
            if estimate { "about " } else { "" },
            grouped(total),
            if total == 1 { "" } else { "s" }
        )
    };
    let rows = rows
        .iter()
        .map(|a| AccountRow {
            href: format!("/dashboard/{mode}/accounts/{}", a.id),
            number: a.account_number.clone(),
            no_number: missing_number(a.status),
            name: scope.own_account_name(&a.account_name).to_owned(),
            bank: a.bank.name(),
            status: Badge::of(a.status),
            reference: a.customer_reference.clone(),
            created: When::of(&a.created_at),
        })
        .collect();
    let page_view = ListPage {
        frame: scope.frame(Section::Accounts, "Accounts"),
        search: SearchForm::new(action.clone(), q, status),
        error,
        rows,
        showing,
        page,
        total_pages,
        prev_href: (page > 1).then(|| href(page - 1)),
        next_href: (page < total_pages).then(|| href(page + 1)),
        curl: curl_example(&state, &headers, scope.mode),
    };
    Ok(view::page(&page_view))
}

/// The API's address as callers reach it: the configured public URL, else the address this page
/// was reached at.
fn api_base(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = &state.config.dashboard.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.eq_ignore_ascii_case("https"))
        .map_or("http", |_| "https");
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("localhost:8080");
    format!("{scheme}://{host}")
}

/// How to create an account, for the empty page: the key is a placeholder, never a real one.
fn curl_example(state: &AppState, headers: &HeaderMap, mode: Mode) -> String {
    let (key_var, bank) = match mode {
        Mode::Test => ("$SK_TEST", Bank::TestBank.slug()),
        Mode::Live => ("$SK_LIVE", Bank::WemaBank.slug()),
    };
    format!(
        r#"curl {base}/v1/virtual-accounts \
  -H "Authorization: Bearer {key_var}" \
  -H "Idempotency-Key: $(uuidgen)" \
  -H "Content-Type: application/json" \
  -d '{{
    "customerName": "Ada Obi",
    "customerEmail": "ada@example.com",
    "customerPhone": "08031234567",
    "customerBvn": "<the customer's 11-digit BVN>",
    "preferredBank": "{bank}",
    "customerReference": "customer-42"
  }}'"#,
        base = api_base(state, headers),
    )
}

struct AccountView {
    id: String,
    /// As the bank shows it (`<business name>/<customer name>`); `short_name` without the first.
    name: String,
    short_name: String,
    number: Option<String>,
    no_number: &'static str,
    bank: &'static str,
    status: Badge,
    customer_name: String,
    customer_email: String,
    customer_phone: String,
    reference: Option<String>,
    /// The kind of identity only: the number is never shown, not even masked.
    identity: &'static str,
    created: When,
    activated: Option<When>,
    deactivated: Option<When>,
    deactivation_reason: Option<String>,
    failure_reason: Option<String>,
}

impl AccountView {
    fn new(a: &Account, short_name: &str) -> Self {
        AccountView {
            id: a.id.to_string(),
            name: a.account_name.clone(),
            short_name: short_name.to_owned(),
            number: a.account_number.clone(),
            no_number: missing_number(a.status),
            bank: a.bank.name(),
            status: Badge::of(a.status),
            customer_name: a.customer_name.clone(),
            customer_email: a.customer_email.clone(),
            customer_phone: a.customer_phone.clone(),
            reference: a.customer_reference.clone(),
            identity: match a.identity_type {
                IdentityType::Nin => "NIN",
                IdentityType::Bvn => "BVN",
            },
            created: When::of(&a.created_at),
            activated: When::maybe(a.activated_at.as_ref()),
            deactivated: When::maybe(a.deactivated_at.as_ref()),
            deactivation_reason: a.deactivation_reason.clone(),
            failure_reason: a.failure_reason.clone(),
        }
    }
}

struct DepositRow {
    received: When,
    amount: String,
    status: Badge,
    flagged: bool,
    sender: String,
    reference: String,
    source: &'static str,
}

struct RecheckRow {
    created: When,
    from: When,
    to: When,
    status: Badge,
    found: Option<i32>,
}

struct EventRow {
    id: String,
    event_type: String,
    created: When,
    /// The webhook delivery's state; None when the mode had no webhook URL.
    delivery: Option<Badge>,
}

#[derive(Template)]
#[template(path = "account.html")]
struct AccountPage {
    frame: Frame,
    back_href: String,
    a: AccountView,
    deposits: Vec<DepositRow>,
    flagged_note: bool,
    deposits_page: u64,
    deposits_pages: u64,
    deposits_prev: Option<String>,
    deposits_next: Option<String>,
    rechecks: Vec<RecheckRow>,
    events: Vec<EventRow>,
}

pub async fn show(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    ItemId(id): ItemId,
    query: QueryPairs,
) -> PageResult {
    let not_found = || scope.not_found(Section::Accounts, ("account", "accounts"));
    let Some(id) = id else {
        return Ok(not_found());
    };
    // Another business's or mode's account is not found, exactly like an unknown id.
    let Some(account) = accounts::find(
        &state.db,
        scope.business_id(),
        scope.mode,
        &AccountId::unchecked(id),
    )
    .await?
    else {
        return Ok(not_found());
    };
    let page = number(&query, "depositsPage", 1, MAX_PAGE);
    let (deposit_rows, deposit_total) = deposits::list(
        &state.reads.db().await,
        &account,
        &store::paging::PageRequest {
            page_size: DEPOSITS_PAGE_SIZE,
            position: store::paging::Position::Page(page),
        },
    )
    .await?;
    let (deposit_rows, deposit_total) = (deposit_rows.rows, deposit_total.value);
    let deposits_pages = deposit_total.div_ceil(DEPOSITS_PAGE_SIZE).max(1);
    let self_href = |p: u64| {
        format!(
            "/dashboard/{}/accounts/{}{}",
            scope.mode,
            account.id,
            if p == 1 {
                String::new()
            } else {
                format!("?depositsPage={p}")
            }
        )
    };
    let deposits: Vec<DepositRow> = deposit_rows
        .iter()
        .map(|d| DepositRow {
            received: When::of(&d.received_at),
            amount: naira(d.amount),
            status: Badge::of(d.status),
            flagged: d.status == domain::DepositStatus::Flagged,
            sender: [d.sender_name.as_deref(), d.sender_bank_name.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" · "),
            reference: d.provider_reference.clone(),
            source: if d.source == domain::DepositSource::Recheck {
                "Recheck"
            } else {
                "Notification"
            },
        })
        .collect();
    let rechecks = rechecks::for_account(&state.db, &account.id, RECHECKS_SHOWN)
        .await?
        .iter()
        .map(|r| RecheckRow {
            created: When::of(&r.created_at),
            from: When::of(&r.window_from),
            to: When::of(&r.window_to),
            status: Badge::of(r.status),
            found: r.deposits_found,
        })
        .collect();
    let event_rows = events::for_account(
        &state.db,
        scope.business_id(),
        scope.mode,
        &account.id,
        EVENTS_SHOWN,
    )
    .await?;
    let ids: Vec<EventId> = event_rows.iter().map(|e| e.id.clone()).collect();
    let sent = deliveries::for_events(&state.db, &ids).await?;
    let events = event_rows
        .iter()
        .map(|e| EventRow {
            id: e.id.to_string(),
            event_type: e.event_type.as_str().to_owned(),
            created: When::of(&e.created_at),
            // The latest delivery tells where the event stands.
            delivery: view::latest_delivery(&sent, &e.id),
        })
        .collect();
    let page_view = AccountPage {
        frame: scope.frame(
            Section::Accounts,
            scope.own_account_name(&account.account_name),
        ),
        back_href: format!("/dashboard/{}/accounts", scope.mode),
        flagged_note: deposits.iter().any(|d| d.flagged),
        deposits,
        deposits_page: page,
        deposits_pages,
        deposits_prev: (page > 1).then(|| self_href(page - 1)),
        deposits_next: (page < deposits_pages).then(|| self_href(page + 1)),
        rechecks,
        events,
        a: AccountView::new(&account, scope.own_account_name(&account.account_name)),
    };
    Ok(view::page(&page_view))
}
