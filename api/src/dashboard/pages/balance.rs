//! Balance and payouts: the balance (available, in flight), the settlement account and its
//! schedule, the payouts and the ledger (each paged like the API's lists, on one page). An owner
//! changes the settlement account after re-entering the password, through the action of
//! `PUT /settlement-account` (`actions::settlement`: name enquiry, the live hold, the event).

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect};
use chrono::Utc;
use domain::Role;
use domain::payout::{EntryType, PayoutStatus, Schedule, SettlementRequest};
use domain::settlement_banks::SETTLEMENT_BANKS;
use store::paging::Filter;
use store::{ledger, payouts};

use crate::actions::settlement::{self, SettlementError};
use crate::dashboard::forms::Posted;
use crate::dashboard::listing::{List, Pager, Params};
use crate::dashboard::session::{MinRole, Owner, Scoped, Viewer};
use crate::dashboard::view::{self, Badge, Frame, PageResult, Section, StatusOption, When, naira};
use crate::extract::QueryPairs;
use crate::state::AppState;

const PAGE_SIZE: u64 = 10;
const PAYOUTS: Params = Params {
    cursor: "payoutsCursor",
    page: "payoutsPage",
};
const LEDGER: Params = Params {
    cursor: "ledgerCursor",
    page: "ledgerPage",
};

struct Settlement {
    bank: String,
    account_number: String,
    account_name: String,
    schedule: String,
    verified: When,
    /// Set while live payouts are held after a change.
    held_until: Option<When>,
}

struct BankOption {
    code: &'static str,
    name: &'static str,
    selected: bool,
}

/// What the owner's form shows: the current account, or what was just sent.
struct FormValues {
    banks: Vec<BankOption>,
    account_number: String,
    daily: bool,
}

struct PayoutRow {
    id: String,
    created: When,
    amount: String,
    status: Badge,
    /// Where it went: name, then bank and account number.
    to: (String, String),
    /// The caller's reference, else its narration: what the caller will recognise it by.
    reference: Option<String>,
    /// The narration too, under a reference.
    narration: Option<String>,
    /// The failure reason, or the provider's session id once it succeeded.
    detail: Option<String>,
}

struct EntryRow {
    created: When,
    kind: &'static str,
    amount: String,
    credit: bool,
    balance_after: String,
    source: String,
}

#[derive(Template)]
#[template(path = "balance.html")]
struct BalancePage {
    frame: Frame,
    available: String,
    in_flight: String,
    updated: Option<When>,
    settlement: Option<Settlement>,
    daily_at: String,
    min_payout: String,
    is_owner: bool,
    form: FormValues,
    form_action: String,
    notice: Option<&'static str>,
    errors: Vec<String>,
    action: String,
    payout_statuses: Vec<StatusOption>,
    payout_status: &'static str,
    ledger_cursor: String,
    ledger_page: String,
    payouts: Vec<PayoutRow>,
    /// The one destination of every payout listed, said once above them (else a column).
    paid_to: Option<(String, String)>,
    payout_heads: Vec<(&'static str, &'static str)>,
    payouts_pager: Pager,
    entries: Vec<EntryRow>,
    ledger_pager: Pager,
}

/// Messages after a change, by the key its redirect puts in the URL (`view::notice`).
const NOTICES: &[(&str, &str)] = &[("settlement", "Settlement account saved.")];

pub async fn show(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    query: QueryPairs,
) -> PageResult {
    let notice = view::notice(query.get("done"), NOTICES);
    render(
        &state,
        &scope,
        &query,
        notice,
        Vec::new(),
        None,
        StatusCode::OK,
    )
    .await
}

async fn render<R: MinRole>(
    state: &AppState,
    scope: &Scoped<R>,
    query: &QueryPairs,
    notice: Option<&'static str>,
    errors: Vec<String>,
    sent: Option<(&str, &str, &str)>,
    status: StatusCode,
) -> PageResult {
    let (business_id, mode) = (scope.business_id(), scope.mode);
    let m = mode.as_str();
    let balance = ledger::find(&state.db, business_id, mode).await?;
    let in_flight = payouts::in_flight(&state.db, business_id, mode).await?;
    let account = payouts::find_settlement_account(&state.db, business_id, mode).await?;
    let now = Utc::now();

    let payout_status = query.get("payoutStatus").and_then(PayoutStatus::parse);
    let payout_status_value = payout_status.map_or("", PayoutStatus::as_str);
    // The API's filters: these cursors are those of `GET /payouts` and `GET /balance/transactions`.
    let payouts_filter = Filter::new(
        "payouts",
        business_id,
        mode,
        &[("status", payout_status.map(PayoutStatus::as_str))],
    );
    let ledger_filter = Filter::new("ledger", business_id, mode, &[]);
    let payouts_list = List::read(state, query, PAYOUTS, payouts_filter, PAGE_SIZE);
    let ledger_list = List::read(state, query, LEDGER, ledger_filter, PAGE_SIZE);
    let (payout_rows, payouts_total) = payouts::list(
        &state.reads.db().await,
        business_id,
        mode,
        payout_status,
        &payouts_list.request,
    )
    .await?;
    let (entry_rows, ledger_total) = ledger::list(
        &state.reads.db().await,
        business_id,
        mode,
        &ledger_list.request,
    )
    .await?;

    let action = Section::Balance.href(mode);
    let raw = |name: &str| query.get(name).unwrap_or("").to_owned();
    let (ledger_cursor, ledger_page) = (raw(LEDGER.cursor), raw(LEDGER.page));
    let (payouts_cursor, payouts_page) = (raw(PAYOUTS.cursor), raw(PAYOUTS.page));
    // Each list's links keep the other list where it is.
    let payouts_keep = [
        ("payoutStatus", payout_status_value),
        (LEDGER.cursor, ledger_cursor.as_str()),
        (LEDGER.page, ledger_page.as_str()),
    ];
    let payouts_pager = payouts_list.pager(
        state,
        &action,
        &payouts_keep,
        &payout_rows,
        payouts_total,
        ("payout", "payouts"),
    );
    let ledger_keep = [
        ("payoutStatus", payout_status_value),
        (PAYOUTS.cursor, payouts_cursor.as_str()),
        (PAYOUTS.page, payouts_page.as_str()),
    ];
    let ledger_pager = ledger_list.pager(
        state,
        &action,
        &ledger_keep,
        &entry_rows,
        ledger_total,
        ("entry", "entries"),
    );
    let payouts: Vec<PayoutRow> = payout_rows
        .rows
        .iter()
        .map(|p| PayoutRow {
            id: p.id.to_string(),
            created: When::of(&p.created_at),
            amount: naira(p.amount),
            status: Badge::of(p.status),
            to: (
                p.account_name.clone(),
                format!("{} · {}", p.bank_name, p.account_number),
            ),
            reference: p.reference.clone().or_else(|| p.narration.clone()),
            narration: p.reference.as_ref().and(p.narration.clone()),
            detail: match (&p.failure_reason, &p.session_id) {
                (Some(reason), _) => Some(reason.clone()),
                (None, Some(session)) => Some(format!("Session {session}")),
                _ => None,
            },
        })
        .collect();
    let paid_to = payouts
        .first()
        .map(|p| p.to.clone())
        .filter(|to| payouts.iter().all(|p| p.to == *to));
    let entries = entry_rows
        .rows
        .iter()
        .map(|e| EntryRow {
            created: When::of(&e.created_at),
            kind: match e.entry_type {
                EntryType::Deposit => "Deposit",
                EntryType::Payout => "Payout",
                EntryType::PayoutReturn => "Payout returned",
            },
            amount: if e.amount > 0 {
                format!("+{}", naira(e.amount))
            } else {
                naira(e.amount)
            },
            credit: e.amount > 0,
            balance_after: naira(e.balance_after),
            source: e.source_id.clone(),
        })
        .collect();
    let payout_statuses = StatusOption::all(payout_status);
    let (sent_bank, sent_number, sent_schedule) = match (sent, &account) {
        (Some(sent), _) => sent,
        (None, Some(a)) => (
            a.bank_code.as_str(),
            a.account_number.as_str(),
            a.schedule.as_str(),
        ),
        (None, None) => ("", "", "manual"),
    };
    let form = FormValues {
        banks: SETTLEMENT_BANKS
            .iter()
            .map(|b| BankOption {
                code: b.code,
                name: b.name,
                selected: b.code == sent_bank,
            })
            .collect(),
        account_number: sent_number.to_owned(),
        daily: sent_schedule == Schedule::Daily.as_str(),
    };
    let settlement = account.as_ref().map(|a| Settlement {
        bank: format!("{} ({})", a.bank_name, a.bank_code),
        account_number: a.account_number.clone(),
        account_name: a.account_name.clone(),
        schedule: a.schedule.as_str().to_owned(),
        verified: When::of(&a.verified_at),
        held_until: (a.payouts_available_at > now).then(|| When::of(&a.payouts_available_at)),
    });
    let page = BalancePage {
        frame: scope.frame(Section::Balance, "Balance & payouts"),
        available: naira(balance.as_ref().map_or(0, |b| b.available)),
        in_flight: naira(in_flight),
        updated: balance.as_ref().map(|b| When::of(&b.updated_at)),
        settlement,
        daily_at: state.config.payouts.daily_at.clone(),
        min_payout: naira(domain::payout::MIN_PAYOUT),
        is_owner: scope.signed.role().allows(Role::Owner),
        form,
        form_action: format!("/dashboard/{m}/balance/settlement-account"),
        notice,
        errors,
        action,
        payout_statuses,
        payout_status: payout_status_value,
        ledger_cursor,
        ledger_page,
        payout_heads: payout_heads(paid_to.is_none()),
        paid_to,
        payouts,
        payouts_pager,
        entries,
        ledger_pager,
    };
    Ok(view::render(status, &page))
}

/// An owner changes the settlement account: the password first, then exactly what
/// `PUT /settlement-account` does with the same fields.
pub async fn change_settlement(Posted(scope, state, fields): Posted<Scoped<Owner>>) -> PageResult {
    let (bank, number, schedule) = (
        fields.get("bankCode").trim(),
        fields.get("accountNumber").trim(),
        fields.get("schedule").trim(),
    );
    let sent = Some((bank, number, schedule));
    let query = QueryPairs(Default::default());
    let refuse = |errors: Vec<String>, status: StatusCode| {
        render(&state, &scope, &query, None, errors, sent, status)
    };
    let user = &scope.signed.owner.user;
    if !scope
        .signed
        .password_reentered(&state, fields.get("password"))
        .await?
    {
        return refuse(
            vec!["Your password is not right: the settlement account was not changed.".into()],
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    let mut body = serde_json::Map::new();
    body.insert("bankCode".into(), bank.into());
    body.insert("accountNumber".into(), number.into());
    body.insert("schedule".into(), schedule.into());
    let request = match SettlementRequest::parse(&body) {
        Ok(request) => request,
        Err(errors) => {
            let messages = errors.iter().map(|e| field_message(&e.field)).collect();
            return refuse(messages, StatusCode::UNPROCESSABLE_ENTITY).await;
        }
    };
    let actor = scope.signed.actor();
    match settlement::change(&state, &actor, scope.business_id(), scope.mode, &request).await {
        Ok(stored) => {
            tracing::info!(
                user_id = %user.id,
                mode = %scope.mode,
                bank_code = %stored.bank_code,
                "settlement account changed from the dashboard"
            );
            Ok(Redirect::to(&format!(
                "/dashboard/{}/balance?done=settlement",
                scope.mode
            ))
            .into_response())
        }
        Err(SettlementError::BankAccountNotFound) => {
            refuse(
                vec![
                    "The bank has no account with that number: check the bank and the number."
                        .into(),
                ],
                StatusCode::UNPROCESSABLE_ENTITY,
            )
            .await
        }
        Err(SettlementError::ProviderUnavailable { .. }) => {
            refuse(
                vec![
                    "The bank could not be asked for the account's name just now. Nothing was \
                     changed; try again in a minute."
                        .into(),
                ],
                StatusCode::SERVICE_UNAVAILABLE,
            )
            .await
        }
        Err(SettlementError::Db(e)) => Err(e.into()),
    }
}

/// What a person is told about a field `SettlementRequest` refused.
fn field_message(field: &str) -> String {
    match field {
        "bankCode" => "Choose the bank from the list.",
        "accountNumber" => {
            "That is not an account number of that bank: a NUBAN is 10 digits, the last one a \
             check digit. Check the number and the bank."
        }
        "schedule" => "Choose manual or daily payouts.",
        _ => "Check the form and try again.",
    }
    .to_owned()
}

/// The payouts table's columns: "To" only when the payouts listed went to more than one place.
fn payout_heads(mixed: bool) -> Vec<(&'static str, &'static str)> {
    let mut heads = vec![("Created", ""), ("Amount", "num"), ("Status", "")];
    if mixed {
        heads.push(("To", ""));
    }
    heads.extend([("Reference", ""), ("Payout ID", "")]);
    heads
}
