//! The HTTP surface: the provider protocol per bank (docs/operations/provider-banks.md) under
//! `/{bank}`, the control call that sends money, and `/healthz`.

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use domain::Bank;
use domain::provider::{MOST_CONFIRMED_HANDOVERS, NewTransfer, RemoteTransferStatus};
use rand::Rng;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use crate::Sandbox;
use crate::error::ApiError;
use crate::notify;
use crate::state::{Account, NewAccount, Status, Transaction};
use crate::transfers::{self, TransferView};

pub fn router(sandbox: Sandbox) -> Router {
    // Latency and failures apply to the bank protocol only: the control call is the test
    // harness's own lever and must not flake.
    let banks = Router::new()
        .route("/{bank}/accounts", post(create_account))
        .route("/{bank}/accounts/{reference}", get(get_account))
        .route("/{bank}/accounts/{reference}/close", post(close_account))
        .route(
            "/{bank}/accounts/{reference}/transactions",
            get(list_transactions),
        )
        .route(
            "/{bank}/banks/{bank_code}/accounts/{account_number}",
            get(name_enquiry),
        )
        .route("/{bank}/transfers", post(create_transfer))
        .route("/{bank}/transfers/{reference}", get(get_transfer))
        .route_layer(middleware::from_fn_with_state(sandbox.clone(), chaos));
    let authenticated = banks
        .route("/control/deposits", post(control_deposit))
        .route("/control/deposits/notify", post(control_notify))
        .route("/control/deposits/confirm", post(control_confirm))
        .route("/control/transfers", get(control_transfers))
        .fallback(|| async { ApiError::not_found("no such path") })
        .layer(middleware::from_fn_with_state(
            sandbox.clone(),
            authenticate,
        ));
    ops::metrics::install();
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(ops::metrics::endpoint))
        .merge(authenticated)
        .layer(middleware::from_fn(observe))
        .with_state(sandbox)
}

/// Ready unless the state file (when there is one) could not be written last time.
async fn readyz(State(sandbox): State<Sandbox>) -> (StatusCode, Json<Value>) {
    let state_file = sandbox.state_file_health();
    let ok = state_file != "failing";
    (
        if ok {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        Json(json!({"status": if ok { "ok" } else { "unavailable" }, "stateFile": state_file})),
    )
}

/// `sandbox_requests_total{method,route,status}` and `sandbox_request_duration_seconds`: their
/// own names, because `api dev` runs the sandbox inside the api's process and metrics recorder.
async fn observe(request: Request, next: Next) -> Response {
    let observed = ops::metrics::HttpObservation::start(&request);
    let response = next.run(request).await;
    observed.finish(ops::metrics::SANDBOX_HTTP, response.status());
    response
}

async fn authenticate(State(sandbox): State<Sandbox>, request: Request, next: Next) -> Response {
    let expected = sandbox.config().key.as_bytes();
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match presented {
        // Constant time, as a real bank would compare keys.
        Some(key) if bool::from(key.as_bytes().ct_eq(expected)) => next.run(request).await,
        _ => ApiError::unauthorized().into_response(),
    }
}

/// Makes the banks as slow and unreliable as configured, so callers exercise timeouts and retries.
/// A simulated failure does no work, like a bank that is down.
async fn chaos(State(sandbox): State<Sandbox>, request: Request, next: Next) -> Response {
    let config = sandbox.config();
    if config.latency_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(config.latency_ms)).await;
    }
    // `random` is in [0, 1): a rate of 0 (or NaN) never fails, a rate of 1 always does.
    if rand::rng().random::<f64>() < config.failure_rate {
        return ApiError::unavailable().into_response();
    }
    next.run(request).await
}

fn parse_bank(slug: &str) -> Result<Bank, ApiError> {
    Bank::parse(slug).ok_or_else(|| ApiError::not_found(format!("unknown bank '{slug}'")))
}

/// The body as JSON of the expected shape, or 400 with serde's reason.
fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid body: {e}")))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateAccountBody {
    reference: String,
    account_name: String,
    customer_name: String,
    customer_email: String,
    customer_phone: String,
    bvn: Option<String>,
    nin: Option<String>,
}

/// The creation answer: `accountNumber` only once there is one (202 carries none).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CreatedView<'a> {
    reference: &'a str,
    status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    account_number: Option<&'a str>,
}

/// The account as `GET` and `close` show it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AccountView<'a> {
    reference: &'a str,
    status: Status,
    account_number: Option<&'a str>,
    failure_reason: Option<&'a str>,
}

impl<'a> From<&'a Account> for AccountView<'a> {
    fn from(a: &'a Account) -> Self {
        Self {
            reference: &a.reference,
            status: a.status,
            account_number: a.account_number.as_deref(),
            failure_reason: a.failure_reason.as_deref(),
        }
    }
}

async fn create_account(
    State(sandbox): State<Sandbox>,
    Path(bank): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let bank = parse_bank(&bank)?;
    let body: CreateAccountBody = parse_body(&body)?;
    if body.reference.trim().is_empty() {
        return Err(ApiError::bad_request("reference must not be empty"));
    }
    let identity_number = match (body.bvn, body.nin) {
        (Some(bvn), None) => bvn,
        (None, Some(nin)) => nin,
        _ => return Err(ApiError::bad_request("exactly one of bvn, nin is required")),
    };
    let new = NewAccount {
        reference: body.reference,
        account_name: body.account_name,
        customer_name: body.customer_name,
        customer_email: body.customer_email,
        customer_phone: body.customer_phone,
        identity_number,
    };
    let delay = sandbox.config().activation_delay_secs;
    let account = sandbox
        .update(|ledger| ledger.create(bank, new, domain::time::now(), delay))
        .await?;
    let status = match account.status {
        Status::Active => StatusCode::CREATED,
        Status::Pending => StatusCode::ACCEPTED,
        Status::Failed => {
            let reason = account.failure_reason.unwrap_or_default();
            return Err(ApiError::unprocessable("identity_rejected", reason));
        }
        // Not a creation outcome: a repeat of a reference that was opened and since closed.
        Status::Closed => StatusCode::OK,
    };
    let view = CreatedView {
        reference: &account.reference,
        status: account.status,
        account_number: account.account_number.as_deref(),
    };
    Ok((status, Json(view)).into_response())
}

async fn get_account(
    State(sandbox): State<Sandbox>,
    Path((bank, reference)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let bank = parse_bank(&bank)?;
    let account = sandbox
        .update(|ledger| ledger.get(bank, &reference, domain::time::now()))
        .await?
        .ok_or_else(|| unknown_account(&reference))?;
    Ok(Json(AccountView::from(&account)).into_response())
}

async fn close_account(
    State(sandbox): State<Sandbox>,
    Path((bank, reference)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let bank = parse_bank(&bank)?;
    let account = sandbox
        .update(|ledger| ledger.close(bank, &reference, domain::time::now()))
        .await?
        .ok_or_else(|| unknown_account(&reference))?;
    Ok(Json(AccountView::from(&account)).into_response())
}

#[derive(Deserialize)]
struct Range {
    from: Option<String>,
    to: Option<String>,
}

async fn list_transactions(
    State(sandbox): State<Sandbox>,
    Path((bank, reference)): Path<(String, String)>,
    query: Result<Query<Range>, QueryRejection>,
) -> Result<Response, ApiError> {
    let bank = parse_bank(&bank)?;
    let Query(range) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let from = parse_time("from", range.from.as_deref())?;
    let to = parse_time("to", range.to.as_deref())?;
    let data = sandbox
        .update(|ledger| ledger.transactions(bank, &reference, from, to, domain::time::now()))
        .await?
        .ok_or_else(|| unknown_account(&reference))?;
    Ok(Json(json!({ "data": data })).into_response())
}

/// An optional RFC 3339 bound; an empty value counts as absent.
fn parse_time(name: &str, value: Option<&str>) -> Result<Option<DateTime<Utc>>, ApiError> {
    match value.filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => DateTime::parse_from_rfc3339(v)
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|e| ApiError::bad_request(format!("{name} is not an RFC 3339 time: {e}"))),
    }
}

fn unknown_account(reference: &str) -> ApiError {
    ApiError::not_found(format!("no account with reference '{reference}'"))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DepositBody {
    bank: String,
    account_number: String,
    /// Kept loose so that a missing, fractional or negative amount is a 422 about the amount
    /// rather than a 400 about the body.
    amount: Option<Value>,
    sender_name: Option<String>,
    sender_account_number: Option<String>,
    sender_bank_name: Option<String>,
    narration: Option<String>,
    #[serde(default = "notify_by_default")]
    notify: bool,
    /// With `notify`: the notification is handed over in the answer (`notification`), signed as
    /// it would have been sent, instead of being sent. The service's own `simulate-deposit`
    /// stores it at once, so a simulated deposit costs no request back to the service, and
    /// confirms it ([`control_confirm`]); should it fail to store it, it asks for it to be sent
    /// after all ([`control_notify`]); unconfirmed, it is sent after `handover_grace_secs`.
    #[serde(default)]
    handover: bool,
}

fn notify_by_default() -> bool {
    true
}

async fn control_deposit(
    State(sandbox): State<Sandbox>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body: DepositBody = parse_body(&body)?;
    let amount = body
        .amount
        .as_ref()
        .and_then(Value::as_i64)
        .filter(|amount| *amount > 0)
        .ok_or_else(|| {
            ApiError::unprocessable(
                "invalid_amount",
                "amount must be an integer number of kobo > 0",
            )
        })?;
    let bank = parse_bank(&body.bank)?;
    let account_number = body.account_number;
    let received = Transaction::received(&account_number, amount);
    let make = || Transaction {
        sender_name: body.sender_name.unwrap_or(received.sender_name),
        sender_account_number: body
            .sender_account_number
            .unwrap_or(received.sender_account_number),
        sender_bank_name: body.sender_bank_name.unwrap_or(received.sender_bank_name),
        narration: body.narration.unwrap_or(received.narration),
        ..received
    };
    let transaction = sandbox
        .update(|ledger| ledger.deposit(bank, &account_number, make))
        .await?
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "{} has no account numbered '{account_number}'",
                bank.slug()
            ))
        })?;
    let config = sandbox.config();
    if body.notify && body.handover {
        let notify::Signed {
            body: text,
            signature,
            ..
        } = notify::signed_deposit(&config.secret, bank, &transaction)
            .map_err(|e| ApiError::internal(&e.into()))?;
        // Built by serde_json from strings, so always UTF-8.
        let text = String::from_utf8(text).map_err(|e| ApiError::internal(&e.into()))?;
        let grace = std::time::Duration::from_secs(config.handover_grace_secs);
        sandbox.handovers().hand_over(bank, &transaction, grace);
        let answer = json!({
            "providerReference": transaction.reference,
            "notification": {"body": text, "signature": signature},
        });
        return Ok((StatusCode::ACCEPTED, Json(answer)).into_response());
    }
    if body.notify {
        return Ok(notified(&sandbox, bank, &transaction).await);
    }
    let answer = json!({ "providerReference": transaction.reference });
    Ok((StatusCode::ACCEPTED, Json(answer)).into_response())
}

/// Sends the transaction's notification and answers 202 once its first attempt has ended, as a
/// bank that notifies as part of the transfer: the money shows in the service when the 202
/// arrives, and a caller simulating deposits as fast as it can goes no faster than the service
/// stores them (answered at once, it would queue their webhooks by the thousand).
async fn notified(sandbox: &Sandbox, bank: Bank, transaction: &Transaction) -> Response {
    sandbox
        .notify(bank, transaction)
        .wait(notify::FIRST_ATTEMPT_WAIT)
        .await;
    let answer = json!({ "providerReference": transaction.reference });
    (StatusCode::ACCEPTED, Json(answer)).into_response()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfirmBody {
    provider_references: Vec<String>,
}

/// The service stored these handed-over notifications: they are not to be sent. Answers how
/// many were still waiting.
async fn control_confirm(
    State(sandbox): State<Sandbox>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body: ConfirmBody = parse_body(&body)?;
    if body.provider_references.len() > MOST_CONFIRMED_HANDOVERS {
        return Err(ApiError::bad_request(format!(
            "at most {} providerReferences at a time",
            MOST_CONFIRMED_HANDOVERS
        )));
    }
    let confirmed = sandbox
        .handovers()
        .confirm(body.provider_references.iter().map(String::as_str));
    Ok(Json(json!({ "confirmed": confirmed })).into_response())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NotifyBody {
    bank: String,
    account_number: String,
    provider_reference: String,
}

/// Sends a recorded deposit's notification as a bank does (retrying), answering once its first
/// attempt has ended: for a handed-over notification the service could not store.
async fn control_notify(State(sandbox): State<Sandbox>, body: Bytes) -> Result<Response, ApiError> {
    let body: NotifyBody = parse_body(&body)?;
    let bank = parse_bank(&body.bank)?;
    let transaction = sandbox
        .update(|ledger| ledger.transaction(bank, &body.account_number, &body.provider_reference))
        .await?
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "{} has no transaction '{}' into '{}'",
                bank.slug(),
                body.provider_reference,
                body.account_number
            ))
        })?;
    // Sent now, so not by the watch as well.
    sandbox
        .handovers()
        .confirm([transaction.reference.as_str()]);
    Ok(notified(&sandbox, bank, &transaction).await)
}

/// Name enquiry: the account's holder at a bank (any bank code with a valid NUBAN), or 404.
async fn name_enquiry(
    Path((bank, bank_code, account_number)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    parse_bank(&bank)?;
    let name = transfers::account_name(&bank_code, &account_number).ok_or_else(|| {
        ApiError::not_found_code(
            "account_not_found",
            "no account with that number at that bank",
        )
    })?;
    Ok(
        Json(json!({"bankCode": bank_code, "accountNumber": account_number, "accountName": name}))
            .into_response(),
    )
}

/// `POST /transfers`: 202 processing; the same reference again answers the same transfer and
/// never moves money twice.
async fn create_transfer(
    State(sandbox): State<Sandbox>,
    Path(bank): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let bank = parse_bank(&bank)?;
    let new: NewTransfer = parse_body(&body)?;
    if let Some(problem) = transfers::problems(&new) {
        return Err(ApiError::unprocessable("invalid_transfer", problem));
    }
    let delay = chrono::Duration::seconds(
        i64::try_from(sandbox.config().transfer_delay_secs).unwrap_or(i64::MAX / 1000),
    );
    let transfer = sandbox
        .update(|ledger| ledger.create_transfer(bank, new, domain::time::now(), delay))
        .await?;
    if transfer.requests == 1 {
        watch_transfer(sandbox.clone(), bank, transfer.asked.reference.clone());
    }
    let view = json!({"reference": transfer.asked.reference, "status": transfer.status});
    Ok((StatusCode::ACCEPTED, Json(view)).into_response())
}

async fn get_transfer(
    State(sandbox): State<Sandbox>,
    Path((bank, reference)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let bank = parse_bank(&bank)?;
    let transfer = sandbox
        .update(|ledger| ledger.transfer(bank, &reference, domain::time::now()))
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no transfer with reference '{reference}'")))?;
    Ok(Json(TransferView::from(&transfer)).into_response())
}

/// Every transfer with how many times it was asked for: tests prove one transfer per payout.
async fn control_transfers(State(sandbox): State<Sandbox>) -> Result<Response, ApiError> {
    let all = sandbox.update(|ledger| ledger.all_transfers()).await?;
    let data: Vec<Value> = all
        .into_iter()
        .map(|(bank, t)| {
            json!({"bank": bank, "reference": t.asked.reference, "amount": t.asked.amount,
                   "status": t.status, "requests": t.requests,
                   "accountNumber": t.asked.account_number, "bankCode": t.asked.bank_code})
        })
        .collect();
    Ok(Json(json!({ "data": data })).into_response())
}

/// Settles a transfer when it is due and notifies the service of each outcome once (the `03`
/// success is never notified), like a bank's own processing.
pub(crate) fn watch_transfer(sandbox: Sandbox, bank: domain::Bank, reference: String) {
    tokio::spawn(async move {
        loop {
            let now = domain::time::now();
            let transfer = match sandbox
                .update(|ledger| ledger.transfer(bank, &reference, now))
                .await
            {
                Ok(Some(transfer)) => transfer,
                Ok(None) => return,
                Err(e) => {
                    tracing::error!(error = %e, "transfer state could not be saved; retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    continue;
                }
            };
            if let Some(event) = transfer.status.event() {
                let status = transfer.status;
                let first = sandbox
                    .update(|ledger| ledger.announce_transfer(bank, &reference, status))
                    .await
                    .unwrap_or(false);
                if first && !transfers::notification_lost(&transfer) {
                    let config = sandbox.config();
                    notify::spawn_event(
                        sandbox.http().clone(),
                        config.notify_url.as_deref(),
                        &config.secret,
                        bank,
                        event,
                        &reference,
                        &TransferView::from(&transfer),
                    );
                }
            }
            let next = match transfer.status {
                RemoteTransferStatus::Processing => transfer.settles_at,
                RemoteTransferStatus::Succeeded if transfer.asked.amount.rem_euclid(100) == 2 => {
                    transfer.settles_at + transfers::REVERSAL_AFTER
                }
                _ => return,
            };
            let wait = (next - domain::time::now()).to_std().unwrap_or_default();
            tokio::time::sleep(wait + std::time::Duration::from_millis(5)).await;
        }
    });
}
