//! Deposits, rechecks, simulated deposits, and provider notifications.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Utc};
use domain::ids::{AccountId, RecheckId};
use domain::provider::NotificationOutcome;
use domain::provider::RemoteTransaction;
use domain::validation::{FieldError, optional_string, reject_unknown};
use domain::{AccountStatus, Bank, Mode};
use outbound::providers::notification::{self, Announced, Notification};
use outbound::providers::{HandedOver, ProviderError, SimulatedDeposit};
use serde::Serialize;
use serde_json::{Map, Value};
use store::accounts::{self, Account};
use store::deposits::{self, Accepted, Incoming, Notified, Recorded, Unmatched};
use store::paging::Filter;
use store::rechecks;
use utoipa::ToSchema;
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use views::{DepositView, Page, RecheckView};

use super::fields::Text;
use super::paging::{PageParams, Paging};
use crate::error::responses as problem;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Caller, JsonObject, OptionalJsonObject, Path, QueryPairs, RawBody};
use crate::state::AppState;

/// The longest window a recheck may cover.
const MAX_RECHECK_WINDOW: chrono::Duration = chrono::Duration::days(31);

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_deposits))
        .routes(routes!(simulate_deposit))
        .routes(routes!(request_recheck))
        .routes(routes!(read_recheck))
        .routes(routes!(notification))
}

async fn caller_account(state: &AppState, caller: &Caller, id: &AccountId) -> ApiResult<Account> {
    accounts::find(&state.db, caller.business_id(), caller.mode(), id)
        .await?
        .ok_or(ApiError::NotFound)
}

/// List an account's deposits
///
/// Newest first. `credited` deposits reached an active account; `flagged` ones reached a
/// deactivated account and were recorded, never credited.
#[utoipa::path(
    get,
    path = "/virtual-accounts/{id}/deposits",
    operation_id = "listDeposits",
    tag = "Deposits",
    security(("bearerAuth" = [])),
    params(
        ("id" = String, Path, description = "The account id, `va_…`."),
        PageParams,
    ),
    responses(
        (status = 200, description = "A page of deposits.", body = Page<DepositView>),
        problem::ById,
        (status = 422, response = problem::ValidationFailed),
    ),
)]
async fn list_deposits(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<AccountId>,
    query: QueryPairs,
) -> ApiResult<Json<Page<DepositView>>> {
    let mut errors = Vec::new();
    let filter = Filter::new(
        "deposits",
        caller.business_id(),
        caller.mode(),
        &[("accountId", Some(&id))],
    );
    let paging = Paging::read(&state, &query, filter, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let account = caller_account(&state, &caller, &id).await?;
    let (fetched, total) =
        deposits::list(&state.reads.db().await, &account, &paging.request).await?;
    let data = fetched.rows.iter().map(DepositView::from).collect();
    Ok(Json(paging.page(
        &state,
        data,
        total,
        fetched.next.as_ref(),
    )))
}

/// `POST /virtual-accounts/{id}/simulate-deposit` (test mode).
#[derive(Debug, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"amount": 150000, "senderName": "Chidi Okeke", "narration": "Invoice 42", "notify": true}))]
pub struct SimulateDepositRequest {
    #[schema(schema_with = amount_schema)]
    pub amount: i64,
    #[schema(schema_with = sender_name_schema)]
    pub sender_name: Option<String>,
    #[schema(schema_with = narration_schema)]
    pub narration: Option<String>,
    /// `true` (default): the test provider notifies the service as a real bank would. `false`: the
    /// notification is lost, so that a recheck can find the deposit.
    #[serde(default)]
    #[schema(default = true, nullable)]
    pub notify: bool,
}

const SENDER_NAME: Text = Text {
    name: "senderName",
    min: 1,
    max: 100,
    trim: true,
    about: "",
};

const NARRATION: Text = Text {
    name: "narration",
    min: 1,
    max: 200,
    trim: true,
    about: "",
};

fn amount_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
            utoipa::openapi::KnownFormat::Int64,
        )))
        .minimum(Some(1))
        // The maximum is configured, so the document names the setting and its default.
        .description(Some(format!(
            "Integer kobo, from 1 to `VAS_LIMITS__MAX_DEPOSIT` (default {}): the largest deposit \
             the service accepts from a bank.",
            ops::config::Config::default().limits.max_deposit
        )))
        .build()
}

fn sender_name_schema() -> Object {
    SENDER_NAME.schema()
}

fn narration_schema() -> Object {
    NARRATION.schema()
}

impl SimulateDepositRequest {
    /// `max_deposit` is `VAS_LIMITS__MAX_DEPOSIT`: money the service would keep as `invalid` is
    /// refused here for the same reason, rather than sent.
    fn parse(body: &Map<String, Value>, max_deposit: i64) -> ApiResult<Self> {
        let mut errors = Vec::new();
        reject_unknown(
            body,
            &["amount", SENDER_NAME.name, NARRATION.name, "notify"],
            &mut errors,
        );
        let amount = parse_amount(body, max_deposit, &mut errors);
        let sender_name = SENDER_NAME.read(body, &mut errors);
        let narration = NARRATION.read(body, &mut errors);
        let notify = match body.get("notify") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                errors.push(FieldError::new(
                    "notify",
                    "invalid_type",
                    "notify must be true or false",
                ));
                true
            }
        };
        match amount {
            Some(amount) if errors.is_empty() => Ok(Self {
                amount,
                sender_name,
                narration,
                notify,
            }),
            _ => Err(ApiError::Validation(errors)),
        }
    }
}

/// The test provider accepted the simulated transfer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = SimulatedDeposit)]
pub struct SimulatedDepositAccepted {
    /// The provider's transaction reference; the deposit carries it as `providerReference`.
    pub provider_reference: String,
}

/// Simulate a deposit (test mode)
///
/// Asks the test provider to send money to the account. With `notify: true` (default) the
/// provider's notification is stored as a real bank's is before the 202 (the provider hands it
/// over in its answer), so the deposit is listed by the time the 202 arrives; should storing it
/// fail, the provider sends it as a bank does, with retries, and the 202 waits for the first
/// attempt (at most 5 s). With `notify: false` the notification is lost, so that a recheck can
/// find it. Live keys get 403
/// `test_mode_only`; an account without a number (pending, failed) is 409 `invalid_state`; an
/// amount above `VAS_LIMITS__MAX_DEPOSIT`, which the service would keep as `invalid` and never
/// credit, is 422 `validation_failed`.
#[utoipa::path(
    post,
    path = "/virtual-accounts/{id}/simulate-deposit",
    operation_id = "simulateDeposit",
    tag = "Deposits",
    security(("bearerAuth" = [])),
    params(("id" = String, Path, description = "The account id, `va_…`.")),
    request_body(content = SimulateDepositRequest, content_type = "application/json"),
    responses(
        (status = 202, description = "The test provider accepted the transfer.", body = SimulatedDepositAccepted),
        (status = 400, response = problem::BadRequest),
        (status = 401, response = problem::Unauthorized),
        (status = 403, response = problem::ForbiddenTestOnly),
        (status = 404, response = problem::NotFound),
        (status = 409, response = problem::InvalidState),
        problem::JsonBody,
        (status = 422, response = problem::ValidationFailed),
        (status = 500, response = problem::InternalError),
    ),
)]
async fn simulate_deposit(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<AccountId>,
    JsonObject(body): JsonObject,
) -> ApiResult<(StatusCode, Json<SimulatedDepositAccepted>)> {
    if caller.mode() != Mode::Test {
        return Err(ApiError::TestModeOnly);
    }
    let SimulateDepositRequest {
        amount,
        sender_name,
        narration,
        notify,
    } = SimulateDepositRequest::parse(&body, state.config.limits.max_deposit)?;
    // What this takes from the account never changes once it holds a number.
    let account = accounts::find_for_deposit(&state.db, caller.business_id(), caller.mode(), &id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let Some(account_number) = account.account_number.clone() else {
        return Err(ApiError::InvalidState(format!(
            "a {} account has no number to send money to",
            account.status
        )));
    };
    let request = SimulatedDeposit {
        bank: account.bank.to_string(),
        account_number,
        amount,
        sender_name,
        narration,
        notify,
        handover: notify,
    };
    let simulated = state
        .providers
        .simulate_deposit(&request)
        .await
        .map_err(sandbox_failed)?;
    if let Some(handed) = &simulated.notification {
        store_handed_over(&state, &account, &simulated.provider_reference, handed).await?;
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(SimulatedDepositAccepted {
            provider_reference: simulated.provider_reference,
        }),
    ))
}

/// What a failed call to the sandbox's control surface tells the caller.
fn sandbox_failed(e: ProviderError) -> ApiError {
    match e {
        // The sandbox does not know this account (restarted without its state file): the
        // account cannot receive simulated money, which is not the caller's fault or ours.
        ProviderError::Refused(reason) => ApiError::InvalidState(format!(
            "the provider sandbox refused the deposit: {reason}"
        )),
        other => ApiError::Internal(anyhow::anyhow!("the provider sandbox failed: {other}")),
    }
}

/// Stores the notification the sandbox handed over, as the notification endpoint stores one it
/// sends (verified the same way), with the account already read: no request back to this
/// service and no second look-up (docs/api/deposits-and-rechecks.md). Stored, it is confirmed
/// to the sandbox with others, later; unconfirmed (this process stopped first), the sandbox sends
/// it after its grace. When storing fails, the sandbox sends it at once, as a bank does, and the
/// answer waits for its first attempt, as every simulated deposit once did.
async fn store_handed_over(
    state: &AppState,
    account: &Account,
    reference: &str,
    handed: &HandedOver,
) -> ApiResult<()> {
    let body = handed.body.as_bytes();
    let stored = match notification::mode_of(&state.config, account.bank, body, &handed.signature) {
        Some(Mode::Test) => {
            store_notification(state, Mode::Test, account.bank, body, Some(account))
                .await
                .map(drop)
        }
        // Signed with another secret than this service's for the sandbox: sent, it is refused
        // as any such notification is.
        _ => Err(ApiError::Unauthorized),
    };
    let Err(error) = stored else {
        state.providers.confirm_handed_over(reference.to_owned());
        return Ok(());
    };
    tracing::warn!(
        provider_reference = %reference,
        error = %error,
        "a handed-over notification was not stored; the sandbox sends it instead"
    );
    let number = account.account_number.as_deref().unwrap_or_default();
    state
        .providers
        .notify_simulated(account.bank, number, reference)
        .await
        .map_err(sandbox_failed)?;
    Ok(())
}

/// A whole number of kobo that a deposit can be (`domain::deposit::check_deposit_amount`).
fn parse_amount(
    body: &Map<String, Value>,
    max_deposit: i64,
    errors: &mut Vec<FieldError>,
) -> Option<i64> {
    let bad = |errors: &mut Vec<FieldError>, code: &'static str, message: &str| {
        errors.push(FieldError::new("amount", code, message));
        None
    };
    match body.get("amount") {
        None | Some(Value::Null) => bad(errors, "required", "amount is required"),
        // 146.0 is a whole number too (JSON Schema's integer says so); 146.5 is not.
        Some(number @ Value::Number(_)) => match domain::money::whole_kobo(number) {
            Some(a) => match domain::deposit::check_deposit_amount(a, max_deposit) {
                Ok(()) => Some(a),
                Err(e) => {
                    errors.push(e);
                    None
                }
            },
            None => bad(
                errors,
                "invalid_type",
                "amount must be a whole number of kobo",
            ),
        },
        Some(_) => bad(
            errors,
            "invalid_type",
            "amount must be a whole number of kobo",
        ),
    }
}

/// `POST /virtual-accounts/{id}/recheck`: the body is optional. The window defaults to the 24 hours
/// before `to`, `to` to now; `from` must be before `to`, at most 31 days apart, and `to` not in the
/// future.
#[derive(Debug, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecheckRequest {
    #[schema(value_type = Option<String>, format = DateTime)]
    pub from: DateTime<Utc>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub to: DateTime<Utc>,
}

impl RecheckRequest {
    /// The window asked for, with the defaults applied.
    fn parse(body: &Map<String, Value>, now: DateTime<Utc>) -> ApiResult<Self> {
        let mut errors = Vec::new();
        reject_unknown(body, &["from", "to"], &mut errors);
        let to = parse_time(body, "to", &mut errors).unwrap_or(now);
        let from =
            parse_time(body, "from", &mut errors).unwrap_or(to - chrono::Duration::hours(24));
        if errors.is_empty() {
            if from >= to {
                errors.push(FieldError::new(
                    "from",
                    "out_of_range",
                    "from must be before to",
                ));
            } else if to - from > MAX_RECHECK_WINDOW {
                errors.push(FieldError::new(
                    "from",
                    "out_of_range",
                    format!(
                        "a recheck covers at most {} days",
                        MAX_RECHECK_WINDOW.num_days()
                    ),
                ));
            }
            if to > now + chrono::Duration::minutes(5) {
                errors.push(FieldError::new(
                    "to",
                    "out_of_range",
                    "to must not be in the future",
                ));
            }
        }
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        Ok(Self { from, to })
    }
}

/// Recheck an account for missed deposits
///
/// Asks the service to look again, at the provider, for deposits that were not recorded in a
/// window (default: the last 24 hours; at most 31 days). Deposits found are recorded exactly once
/// and emit the same events as notified ones. While a recheck of the account is queued or
/// running, that one is returned instead of queueing another. Only `active` and `deactivated`
/// accounts can be rechecked (else 409 `invalid_state`).
#[utoipa::path(
    post,
    path = "/virtual-accounts/{id}/recheck",
    operation_id = "requestRecheck",
    tag = "Rechecks",
    security(("bearerAuth" = [])),
    params(("id" = String, Path, description = "The account id, `va_…`.")),
    request_body(content = Option<RecheckRequest>, content_type = "application/json",
        description = "Optional: send no body for the last 24 hours."),
    responses(
        (status = 202, description = "The recheck, queued (or the one already queued or running).", body = RecheckView),
        (status = 400, response = problem::BadRequest),
        problem::ById,
        (status = 409, response = problem::InvalidState),
        problem::JsonBody,
        (status = 422, response = problem::ValidationFailed),
    ),
)]
async fn request_recheck(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<AccountId>,
    OptionalJsonObject(body): OptionalJsonObject,
) -> ApiResult<(StatusCode, Json<RecheckView>)> {
    let now = domain::time::now();
    let RecheckRequest { from, to } = RecheckRequest::parse(&body, now)?;
    let account = caller_account(&state, &caller, &id).await?;
    if !matches!(
        account.status,
        AccountStatus::Active | AccountStatus::Deactivated
    ) {
        return Err(ApiError::InvalidState(format!(
            "a {} account cannot be rechecked",
            account.status
        )));
    }
    let (recheck, queued) = rechecks::request(&state.db, &account, from, to, now).await?;
    if queued {
        state.relay.kick();
        tracing::info!(recheck_id = %recheck.id, account_id = %account.id, "recheck queued");
    }
    Ok((StatusCode::ACCEPTED, Json(RecheckView::from(&recheck))))
}

fn parse_time(
    body: &Map<String, Value>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Option<DateTime<Utc>> {
    let raw = optional_string(body, field, errors)?;
    match DateTime::parse_from_rfc3339(raw) {
        Ok(t) => Some(t.with_timezone(&Utc)),
        Err(_) => {
            errors.push(FieldError::new(
                field,
                "invalid_format",
                format!("{field} must be an RFC 3339 time"),
            ));
            None
        }
    }
}

/// Get a recheck
#[utoipa::path(
    get,
    path = "/virtual-accounts/{id}/rechecks/{rid}",
    operation_id = "getRecheck",
    tag = "Rechecks",
    security(("bearerAuth" = [])),
    params(
        ("id" = String, Path, description = "The account id, `va_…`."),
        ("rid" = String, Path, description = "The recheck id, `rck_…`."),
    ),
    responses(
        (status = 200, description = "The recheck.", body = RecheckView),
        problem::ById,
    ),
)]
async fn read_recheck(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, rid)): Path<(AccountId, RecheckId)>,
) -> ApiResult<Json<RecheckView>> {
    let account = caller_account(&state, &caller, &id).await?;
    let recheck = rechecks::find(&state.db, &account.id, &rid)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(RecheckView::from(&recheck)))
}

// Documents the body `notification` reads from the raw bytes (the signature covers them): an
// `event` other than `transfer.received`, or none, is stored and acknowledged without `data`.
/// A deposit notification, as a provider bank sends it.
#[derive(Debug, ToSchema)]
pub struct ProviderNotification {
    /// `transfer.received` (a deposit) and `transfer.succeeded|failed|reversed` (a payout's
    /// transfer, `data` a transfer whose `reference` is the payout id) are acted on; any other
    /// event is stored and acknowledged.
    #[schema(example = "transfer.received")]
    pub event: String,
    /// The transaction (required with `transfer.received`).
    pub data: Option<RemoteTransaction>,
}

/// The notification is stored; the provider need not send it again.
#[derive(Debug, Serialize, ToSchema)]
pub struct NotificationReceipt {
    #[schema(schema_with = always_true)]
    pub received: bool,
    /// The stored notification's id.
    pub id: String,
    pub outcome: NotificationOutcome,
}

fn always_true() -> Object {
    super::fields::constant(Type::Boolean, true)
}

/// `POST /providers/{bank}/notifications`: a bank tells us money arrived. The signature decides
/// the mode (the sandbox's secret: test; the bank's own: live); a bad one is 401 and nothing is
/// stored. Once stored, the bank gets 200, whatever became of the transaction.
#[utoipa::path(
    post,
    path = "/providers/{bank}/notifications",
    operation_id = "receiveProviderNotification",
    tag = "Provider notifications",
    summary = "Receive a provider's deposit notification",
    description = "Called by the provider banks, not by businesses. `X-Provider-Signature` is the hex \
        HMAC-SHA512 of the raw body with the bank's notification secret; a missing or bad one is 401 \
        and nothing is stored. The signature also decides the mode (the sandbox's secret: test). \
        Once the notification is stored the answer is 200, whatever became of the transaction: a new \
        deposit, a duplicate, an event not acted on, or a transaction for an unknown account number \
        (kept for operators).",
    params(
        ("bank" = views::schema::Bank, Path, description = "The provider bank sending the notification."),
        ("X-Provider-Signature" = String, Header, pattern = "^[0-9a-fA-F]{128}$",
            description = "Hex HMAC-SHA512 of the raw body with the bank's notification secret."),
    ),
    request_body(content = ProviderNotification, content_type = "application/json"),
    responses(
        (status = 200, description = "Stored.", body = NotificationReceipt),
        (status = 401, response = problem::Unauthorized),
        (status = 403, response = problem::BrowserRefused),
        (status = 404, response = problem::NotFound),
        (status = 413, response = problem::PayloadTooLarge),
        (status = 500, response = problem::InternalError),
    ),
)]
async fn notification(
    State(state): State<AppState>,
    Path(bank): Path<String>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> ApiResult<Json<NotificationReceipt>> {
    let bank = Bank::parse(&bank).ok_or(ApiError::NotFound)?;
    let signature = headers
        .get("x-provider-signature")
        .and_then(|v| v.to_str().ok())
        .ok_or(ApiError::Unauthorized)?;
    let mode = notification::mode_of(&state.config, bank, &body, signature).ok_or_else(|| {
        tracing::warn!(
            bank = bank.slug(),
            "notification with a bad signature refused"
        );
        ApiError::Unauthorized
    })?;
    store_notification(&state, mode, bank, &body, None)
        .await
        .map(Json)
}

/// Stores a notification whose signature made it `mode`'s, and acts on it. `known` is the
/// account the caller read already (a simulated deposit's), so that a deposit into it is not
/// looked up again.
async fn store_notification(
    state: &AppState,
    mode: Mode,
    bank: Bank,
    body: &[u8],
    known: Option<&Account>,
) -> ApiResult<NotificationReceipt> {
    let Notification { text, content } = match notification::read(
        body,
        state.config.limits.max_deposit,
    ) {
        Ok(read) => read,
        Err(problem) => {
            // Signed by the bank but unusable: kept once for operators (a bank whose format
            // drifted leaves a trace) and acknowledged, since it is stored
            // (docs/operations/provider-banks.md): answering 4xx would only make the bank send it
            // again.
            let kept = String::from_utf8_lossy(body).replace('\0', "");
            let incoming = Incoming {
                mode,
                bank,
                body: &kept,
                now: domain::time::now(),
            };
            let id = deposits::keep_invalid(&state.db, incoming, None).await?;
            tracing::warn!(notification_id = %id, bank = bank.slug(), error = %problem, "signed notification could not be read; kept as invalid");
            return Ok(NotificationReceipt {
                received: true,
                id,
                outcome: NotificationOutcome::Invalid,
            });
        }
    };
    let incoming = Incoming {
        mode,
        bank,
        body: text,
        now: domain::time::now(),
    };
    let notified = match &content {
        Announced::Transfer(transfer) => Notified::Transfer {
            transfer,
            payout_bank: state.providers.payout_bank().ok(),
        },
        Announced::Deposit(tx) => Notified::Deposit(Some(tx)),
        Announced::Other => Notified::Deposit(None),
    };
    let accepted = match notified {
        Notified::Transfer { .. } => deposits::accept(&state.db, incoming, notified, None).await?,
        Notified::Deposit(_) => {
            match deposits::accept(&state.db, incoming, notified, known).await {
                Ok(accepted) => accepted,
                // Nothing of it was written (the whole transaction rolled back): kept as invalid
                // for operators, like an amount above the maximum, rather than asked for again.
                Err(e) if store::ledger::is_overflow(&e) => {
                    let id = deposits::keep_invalid(&state.db, incoming, None).await?;
                    tracing::error!(notification_id = %id, bank = bank.slug(), "a deposit would overflow its balance; kept as invalid, not credited");
                    return Ok(NotificationReceipt {
                        received: true,
                        id,
                        outcome: NotificationOutcome::Invalid,
                    });
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    let (id, outcome) = match accepted {
        Accepted::Repeated { id, outcome } => {
            tracing::info!(notification_id = %id, bank = bank.slug(), "notification received again; stored once");
            (id, outcome)
        }
        Accepted::Transfer {
            id,
            outcome,
            unmatched,
        } => {
            match unmatched {
                Some(Unmatched::NoPayout) => {
                    tracing::warn!(notification_id = %id, bank = bank.slug(), "transfer notification for no known payout kept as unmatched");
                }
                Some(Unmatched::OtherBank) => {
                    tracing::warn!(notification_id = %id, bank = bank.slug(), "transfer notification from a bank the payout was not sent through kept as unmatched, not applied");
                }
                None => state.relay.kick(),
            }
            (id, outcome)
        }
        Accepted::Stored {
            id,
            recorded,
            outcome,
        } => {
            match &recorded {
                Recorded::New(deposit) => {
                    state.relay.kick();
                    tracing::info!(deposit_id = %deposit.id, account_id = %deposit.account_id, status = %deposit.status, "deposit recorded");
                }
                Recorded::Duplicate => {}
                Recorded::Unmatched => {
                    tracing::warn!(notification_id = %id, bank = bank.slug(), "notification for an unknown account number kept as unmatched");
                }
            }
            (id, outcome)
        }
    };
    Ok(NotificationReceipt {
        received: true,
        id,
        outcome,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::fields::assert_declares_what_it_reads;

    #[test]
    fn each_body_declares_what_it_reads() {
        assert_declares_what_it_reads::<SimulateDepositRequest, _>(|body| {
            SimulateDepositRequest::parse(body, 10_000_000_000)
        });
        assert_declares_what_it_reads::<RecheckRequest, _>(|body| {
            RecheckRequest::parse(body, domain::time::now())
        });
    }

    /// A deposit's amount is judged by one rule whichever path brings it: a notification, a
    /// recheck's list, a simulated deposit. Each takes what the others take, and refuses the rest
    /// with the rule's own error.
    #[test]
    fn notification_recheck_and_simulation_refuse_the_same_amounts_for_the_same_reason() {
        use domain::provider::NotADeposit;
        use outbound::providers::notification::NotificationError;
        use outbound::providers::{Listed, read_listed};
        let max = 10_000;
        let rule = |amount: i64| domain::deposit::check_deposit_amount(amount, max).err();
        let transaction = |amount: &Value| {
            serde_json::json!({"reference": "t1", "accountNumber": "0123456789",
                "amount": amount, "currency": "NGN", "paidAt": "2026-11-25T10:00:00Z"})
        };
        // Each path's refusal, fields named as in a transaction; None: taken.
        let notified = |amount: &Value| {
            let body =
                serde_json::json!({"event": "transfer.received", "data": transaction(amount)});
            match notification::read(body.to_string().as_bytes(), max) {
                Ok(_) => None,
                Err(NotificationError::Fields(errors)) => Some(
                    errors
                        .into_iter()
                        .map(|e| {
                            FieldError::new(e.field.replacen("data.", "", 1), e.code, e.message)
                        })
                        .collect::<Vec<_>>(),
                ),
                Err(other) => panic!("{other}"),
            }
        };
        let listed = |amount: &Value| match read_listed(max, vec![transaction(amount)]).pop() {
            Some(Listed::Usable(_)) => None,
            Some(Listed::Invalid(invalid)) => Some(match invalid.why {
                NotADeposit::Refused(errors) => errors,
                NotADeposit::Unreadable(reason) => {
                    vec![FieldError::new("data", "invalid_format", reason)]
                }
            }),
            None => panic!("the item is not read"),
        };
        let simulated = |amount: &Value| {
            let body = Map::from_iter([("amount".to_owned(), amount.clone())]);
            match SimulateDepositRequest::parse(&body, max) {
                Ok(_) => None,
                Err(ApiError::Validation(errors)) => Some(errors),
                Err(other) => panic!("{other:?}"),
            }
        };
        let cases = [
            (serde_json::json!(1), None),
            (serde_json::json!(max), None),
            (serde_json::json!(146.0), None),
            (serde_json::json!(max + 1), rule(max + 1)),
            (serde_json::json!(0), rule(0)),
            (serde_json::json!(-150), rule(-150)),
            (serde_json::json!(i64::MAX), rule(i64::MAX)),
        ];
        for (amount, refused) in cases {
            let refused = refused.map(|e| vec![e]);
            assert_eq!(notified(&amount), refused, "notification of {amount}");
            assert_eq!(listed(&amount), refused, "recheck of {amount}");
            assert_eq!(simulated(&amount), refused, "simulation of {amount}");
        }
        assert_eq!(rule(max + 1).unwrap().code, "out_of_range");
        // Not a whole number: no path takes it (each says so in its own shape).
        for amount in [serde_json::json!(146.5), serde_json::json!("146")] {
            assert!(notified(&amount).is_some(), "{amount}");
            assert!(listed(&amount).is_some(), "{amount}");
            assert!(simulated(&amount).is_some(), "{amount}");
        }
    }
}
