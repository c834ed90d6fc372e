//! `/virtual-accounts`: create, list, get, deactivate.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Map, Value};
use std::time::Duration;

use domain::validation::{FieldError, bounded_text, optional_string, reject_unknown};
use domain::{AccountStatus, NewAccount};
use shared::db::accounts::{
    self, CreateOutcome, CreateRequest, DeactivateOutcome, LimitState, ListQuery, Settlement,
};
use shared::providers::{OpenAccount, ProviderError, RemoteStatus};
use shared::views::{AccountView, Page};

use crate::error::{ApiError, ApiResult};
use crate::extract::{Caller, IdempotencyKey, JsonObject, OptionalJsonObject, Path, QueryPairs};
use crate::openapi as doc;
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/virtual-accounts", post(create).get(list))
        .route("/virtual-accounts/{id}", get(read))
        .route("/virtual-accounts/{id}/deactivate", post(deactivate))
}

/// Create a virtual account
///
/// Opens a dedicated account number for one customer at the preferred bank. 201 when the bank
/// answered at once (`active`, `accountNumber` set); 202 when it answers later or is slow or down
/// (`pending`, `accountNumber` null; a `virtualaccount.active` or `virtualaccount.failed` event
/// follows); 200 when `customerReference` already has a `pending` or `active` account (that
/// account, nothing created). A repeated `Idempotency-Key` with the same body returns the first
/// status and the account as it is now, with `Idempotent-Replayed: true`. A bank that rejects the
/// identity at once is 422 `identity_rejected` (the account is kept as `failed`). At most 500 new
/// accounts per business and mode in any rolling hour.
#[utoipa::path(
    post,
    path = "/virtual-accounts",
    operation_id = "createVirtualAccount",
    tag = "Virtual accounts",
    security(("bearerAuth" = [])),
    params(
        ("Idempotency-Key" = String, Header, min_length = 1, max_length = 200,
            description = "Your key for this request, 1–200 characters, the same on every retry of it. Kept at least 24 hours, per business and mode."),
    ),
    request_body(content = doc::CreateAccountRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "`customerReference` already has a pending or active account: that account; nothing was created.",
            body = AccountView, headers(
                ("RateLimit" = String, description = "The creation limit now: `\"accounts\";r=<remaining>;t=<seconds>`."),
                ("RateLimit-Policy" = String, description = "`\"accounts\";q=500;w=3600`: 500 new accounts per business and mode in any rolling hour."),
                ("Idempotent-Replayed" = String, description = "`true` when this answer replays an earlier request with the same Idempotency-Key."))),
        (status = 201, description = "Created and active: the bank gave the number at once.",
            body = AccountView, headers(
                ("RateLimit" = String, description = "The creation limit now: `\"accounts\";r=<remaining>;t=<seconds>`."),
                ("RateLimit-Policy" = String, description = "`\"accounts\";q=500;w=3600`: 500 new accounts per business and mode in any rolling hour."),
                ("Idempotent-Replayed" = String, description = "`true` when this answer replays an earlier request with the same Idempotency-Key."))),
        (status = 202, description = "Created and pending: the number follows, with a `virtualaccount.active` (or `virtualaccount.failed`) event.",
            body = AccountView, headers(
                ("RateLimit" = String, description = "The creation limit now: `\"accounts\";r=<remaining>;t=<seconds>`."),
                ("RateLimit-Policy" = String, description = "`\"accounts\";q=500;w=3600`: 500 new accounts per business and mode in any rolling hour."),
                ("Idempotent-Replayed" = String, description = "`true` when this answer replays an earlier request with the same Idempotency-Key."))),
        (status = 400, response = doc::CreateBadRequest),
        (status = 401, response = doc::Unauthorized),
        (status = 403, response = doc::Forbidden),
        (status = 409, response = doc::IdempotencyKeyInUse),
        (status = 413, response = doc::PayloadTooLarge),
        (status = 415, response = doc::UnsupportedMediaType),
        (status = 422, response = doc::CreateUnprocessable),
        (status = 429, response = doc::RateLimited),
        (status = 500, response = doc::InternalError),
    ),
)]
async fn create(
    State(state): State<AppState>,
    caller: Caller,
    IdempotencyKey(key): IdempotencyKey,
    JsonObject(body): JsonObject,
) -> ApiResult<Response> {
    let account = NewAccount::parse(&body, caller.mode()).map_err(ApiError::Validation)?;
    let hash = request_hash(body);
    let provider_timeout = Duration::from_millis(state.config.http.provider_timeout_ms);
    let request = CreateRequest {
        business_id: caller.business_id(),
        business_name: &caller.0.business_name,
        mode: caller.mode(),
        idempotency_key: &key,
        request_hash: &hash,
        account: &account,
        limit_per_hour: state.config.limits.accounts_per_hour,
        provider_grace: chrono::Duration::from_std(provider_timeout).unwrap_or_default()
            + chrono::Duration::seconds(5),
    };
    let (outcome, limit) =
        accounts::create(&state.db, &state.cipher, &request, domain::time::now()).await?;
    let mut headers = rate_limit_headers(&limit);
    let (status, account) = match outcome {
        CreateOutcome::Started {
            account: created,
            job_id,
        } => {
            let settlement = open_at_provider(&state, &created, &account, provider_timeout).await;
            let (settled, status) = accounts::settle_creation(
                &state.db,
                &request,
                &created.id,
                &job_id,
                settlement,
                domain::time::now(),
            )
            .await?;
            if status == 202 {
                state.relay.kick();
            }
            tracing::info!(account_id = %settled.id, status, "account created");
            (status, settled)
        }
        CreateOutcome::Replayed { account, status } => {
            headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
            (status, account)
        }
        CreateOutcome::ReferenceHit { account } => (200, account),
        CreateOutcome::KeyReused => return Err(ApiError::IdempotencyKeyReused),
        CreateOutcome::KeyInFlight => return Err(ApiError::IdempotencyKeyInUse),
        CreateOutcome::RateLimited { retry_after_secs } => {
            let mut response = ApiError::RateLimited { retry_after_secs }.into_response();
            response.headers_mut().extend(headers);
            return Ok(response);
        }
    };
    if status == 422 {
        // Refused by the bank: the account is kept as failed; the answer is a problem.
        let reason = account
            .failure_reason
            .clone()
            .unwrap_or_else(|| "the provider bank rejected the identity".into());
        let mut response = ApiError::IdentityRejected(reason).into_response();
        response.headers_mut().extend(headers);
        return Ok(response);
    }
    let status = StatusCode::from_u16(status).map_err(|e| ApiError::Internal(e.into()))?;
    Ok((status, headers, Json(AccountView::from(&account))).into_response())
}

/// Asks the bank for the account within `timeout`. Anything but a clear answer (timeout, outage,
/// an unconfigured bank) is `Pending`: the account waits and the provisioning job takes over, so
/// a provider outage never fails a creation.
async fn open_at_provider(
    state: &AppState,
    created: &accounts::Account,
    request: &NewAccount,
    timeout: Duration,
) -> Settlement {
    let open = OpenAccount {
        reference: created.id.clone(),
        account_name: created.account_name.clone(),
        customer_name: created.customer_name.clone(),
        customer_email: created.customer_email.clone(),
        customer_phone: created.customer_phone.clone(),
        bvn: None,
        nin: None,
    }
    .identity(
        request.identity_type,
        request.identity_number.expose().to_owned(),
    );
    let bank = request.preferred_bank;
    let mode = created.mode;
    match state
        .providers
        .open_account(bank, mode, &open, timeout)
        .await
    {
        Ok(remote) => match (remote.status, remote.account_number) {
            (RemoteStatus::Active, Some(number)) => Settlement::Active {
                account_number: number,
            },
            (RemoteStatus::Failed, _) => Settlement::Rejected {
                reason: remote
                    .failure_reason
                    .unwrap_or_else(|| "the provider bank refused the account".into()),
            },
            _ => Settlement::Pending,
        },
        Err(ProviderError::Rejected(reason)) => Settlement::Rejected { reason },
        Err(e) => {
            tracing::warn!(account_id = %created.id, bank = bank.slug(), error = %e, "provider did not settle the creation; the worker takes over");
            Settlement::Pending
        }
    }
}

fn rate_limit_headers(limit: &LimitState) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let policy = format!("\"accounts\";q={};w=3600", limit.limit);
    let now = format!("\"accounts\";r={};t={}", limit.remaining, limit.reset_secs);
    for (name, value) in [("ratelimit-policy", policy), ("ratelimit", now)] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    headers
}

/// The request as a hash: `serde_json` maps keep their keys sorted (no `preserve_order`), so the
/// same fields in any order, with any spacing, hash the same.
fn request_hash(body: Map<String, Value>) -> String {
    domain::keys::sha256_hex(&Value::Object(body).to_string())
}

/// List virtual accounts
///
/// The key's business and mode only, newest first. `q` matches, case-insensitively, a substring
/// of customerName, customerEmail, customerReference, customerPhone or accountNumber.
#[utoipa::path(
    get,
    path = "/virtual-accounts",
    operation_id = "listVirtualAccounts",
    tag = "Virtual accounts",
    security(("bearerAuth" = [])),
    params(
        ("page" = Option<u64>, Query, minimum = 1, maximum = 1000000, description = "From 1 (default 1)."),
        ("pageSize" = Option<u64>, Query, minimum = 1, maximum = 100, description = "1–100 (default 20)."),
        ("q" = Option<String>, Query, max_length = 200, description = "Search text, at most 200 characters."),
        ("status" = Option<shared::views::schema::AccountStatus>, Query, description = "Only accounts in this status."),
    ),
    responses(
        (status = 200, description = "A page of accounts.", body = Page<AccountView>),
        (status = 401, response = doc::Unauthorized),
        (status = 403, response = doc::Forbidden),
        (status = 422, response = doc::ValidationFailed),
        (status = 500, response = doc::InternalError),
    ),
)]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    query: QueryPairs,
) -> ApiResult<Json<Page<AccountView>>> {
    let mut errors = Vec::new();
    let page = query.int("page", 1, 1, 1_000_000, &mut errors);
    let page_size = query.int("pageSize", 20, 1, 100, &mut errors);
    let status = query.get("status").and_then(|s| {
        let parsed = AccountStatus::parse(s);
        if parsed.is_none() {
            errors.push(FieldError::new(
                "status",
                "invalid_value",
                "status must be one of pending, active, deactivated, failed",
            ));
        }
        parsed
    });
    let q = query.get("q");
    if q.is_some_and(|q| q.chars().count() > 200) {
        errors.push(FieldError::new(
            "q",
            "too_long",
            "q must be at most 200 characters",
        ));
    } else if q.is_some_and(|q| q.chars().any(char::is_control)) {
        errors.push(FieldError::new(
            "q",
            "invalid_format",
            "q must not contain control characters",
        ));
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let (rows, total) = accounts::list(
        &state.db,
        caller.business_id(),
        caller.mode(),
        &ListQuery {
            page,
            page_size,
            q,
            status,
        },
    )
    .await?;
    let data = rows.iter().map(AccountView::from).collect();
    Ok(Json(Page::new(data, page, page_size, total)))
}

/// Get a virtual account
#[utoipa::path(
    get,
    path = "/virtual-accounts/{id}",
    operation_id = "getVirtualAccount",
    tag = "Virtual accounts",
    security(("bearerAuth" = [])),
    params(("id" = String, Path, description = "The account id, `va_…`.")),
    responses(
        (status = 200, description = "The account.", body = AccountView),
        (status = 401, response = doc::Unauthorized),
        (status = 403, response = doc::Forbidden),
        (status = 404, response = doc::NotFound),
        (status = 500, response = doc::InternalError),
    ),
)]
async fn read(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<AccountView>> {
    let account = accounts::find(&state.db, caller.business_id(), caller.mode(), &id)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(AccountView::from(&account)))
}

/// Deactivate a virtual account
///
/// The account becomes `deactivated` and is closed at the provider in the background; a
/// `virtualaccount.deactivated` event is sent. Deactivating a deactivated account changes nothing
/// (200). A `failed` account is 409 `invalid_state`. Money that still reaches a deactivated
/// account is recorded as a `flagged` deposit, never credited.
#[utoipa::path(
    post,
    path = "/virtual-accounts/{id}/deactivate",
    operation_id = "deactivateVirtualAccount",
    tag = "Virtual accounts",
    security(("bearerAuth" = [])),
    params(("id" = String, Path, description = "The account id, `va_…`.")),
    request_body(content = Option<doc::DeactivateRequest>, content_type = "application/json",
        description = "Optional: send no body, or `{\"reason\": \"…\"}`."),
    responses(
        (status = 200, description = "The account, now deactivated.", body = AccountView),
        (status = 400, response = doc::BadRequest),
        (status = 401, response = doc::Unauthorized),
        (status = 403, response = doc::Forbidden),
        (status = 404, response = doc::NotFound),
        (status = 409, response = doc::InvalidState),
        (status = 413, response = doc::PayloadTooLarge),
        (status = 415, response = doc::UnsupportedMediaType),
        (status = 422, response = doc::ValidationFailed),
        (status = 500, response = doc::InternalError),
    ),
)]
async fn deactivate(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    OptionalJsonObject(body): OptionalJsonObject,
) -> ApiResult<Json<AccountView>> {
    let mut errors = Vec::new();
    reject_unknown(&body, &["reason"], &mut errors);
    let reason = optional_string(&body, "reason", &mut errors)
        .and_then(|r| bounded_text("reason", r, 1, 200, true, &mut errors));
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let outcome = accounts::deactivate(
        &state.db,
        caller.business_id(),
        caller.mode(),
        &id,
        reason,
        domain::time::now(),
    )
    .await?;
    match outcome {
        DeactivateOutcome::Deactivated(account) => {
            state.relay.kick();
            tracing::info!(account_id = %account.id, "account deactivated");
            Ok(Json(AccountView::from(&account)))
        }
        DeactivateOutcome::AlreadyDeactivated(account) => Ok(Json(AccountView::from(&account))),
        DeactivateOutcome::InvalidState(account) => Err(ApiError::InvalidState(format!(
            "a {} account cannot be deactivated",
            account.status
        ))),
        DeactivateOutcome::NotFound => Err(ApiError::NotFound),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_hash_ignores_key_order_and_spacing_only() {
        let parse = |s: &str| match serde_json::from_str(s).unwrap() {
            Value::Object(map) => map,
            _ => unreachable!(),
        };
        let a = request_hash(parse(r#"{"b":1,"a":{"d":2,"c":[{"f":1,"e":2}]}}"#));
        let b = request_hash(parse(r#"{ "a": {"c": [{"e":2, "f":1}], "d":2}, "b": 1 }"#));
        assert_eq!(a, b);
        let c = request_hash(parse(r#"{"a":{"c":[{"e":2,"f":1}],"d":3},"b":1}"#));
        assert_ne!(a, c);
    }
}
