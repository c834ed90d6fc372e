//! The API's one error type. Every error renders itself as RFC 9457 `application/problem+json`
//! with a `code` from docs/api/errors.md, and its `type` is a page this service serves
//! (`/problems/{code}`).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use domain::FieldError;
use serde::Serialize;
use utoipa::ToSchema;

pub mod responses;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidJson(String),
    #[error("the Idempotency-Key header is required")]
    IdempotencyKeyMissing,
    #[error("Idempotency-Key must be 1–200 characters")]
    IdempotencyKeyInvalid,
    #[error("a valid secret key is required")]
    Unauthorized,
    #[error("live keys work once the business's KYB is approved")]
    KybNotApproved,
    #[error("requests from browsers are refused: secret keys belong on a server")]
    BrowserRequestRefused,
    #[error("this operation exists only in test mode")]
    TestModeOnly,
    #[error("no such resource")]
    NotFound,
    #[error("a request with this Idempotency-Key is still being processed")]
    IdempotencyKeyInUse,
    #[error("{0}")]
    InvalidState(String),
    #[error("the method is not allowed on this path")]
    MethodNotAllowed,
    #[error("the body did not arrive in time")]
    RequestTimeout,
    #[error("the body is over 64 KiB")]
    PayloadTooLarge,
    #[error("the body must be application/json")]
    UnsupportedMediaType,
    #[error("{}", validation_detail(.0))]
    Validation(Vec<FieldError>),
    #[error("this Idempotency-Key was used with a different request body")]
    IdempotencyKeyReused,
    #[error("{0}")]
    IdentityRejected(String),
    #[error("too many new accounts; retry after {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    #[error("too many failed authentications from this address; retry after {retry_after_secs} s")]
    TooManyFailedAuthentications { retry_after_secs: u64 },
    #[error("this mode has no settlement account: set one with PUT /settlement-account")]
    SettlementAccountMissing,
    #[error(
        "live payouts are held for 24 hours after a settlement-account change; retry after {retry_after_secs} s"
    )]
    PayoutsOnHold { retry_after_secs: u64 },
    #[error("the available balance is {available} kobo")]
    InsufficientBalance { available: i64 },
    #[error("the bank has no account with that number")]
    BankAccountNotFound,
    #[error("the payout provider cannot be reached; retry after {retry_after_secs} s")]
    ProviderUnavailable { retry_after_secs: u64 },
    #[error("the database is failing over; retry after {retry_after_secs} s")]
    ServiceUnavailable { retry_after_secs: u64 },
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

fn validation_detail(errors: &[FieldError]) -> String {
    match errors {
        [one] => one.message.clone(),
        many => format!(
            "{} fields are invalid: {}",
            many.len(),
            many.iter()
                .map(|e| e.field.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Declares [`ProblemCode`]: each code written once, with its status, title and description (what
/// `GET /problems/{code}` serves and the OpenAPI document lists).
macro_rules! problem_codes {
    ($($(#[$doc:meta])* $variant:ident = $code:tt, $status:tt, $title:tt, $description:tt;)*) => {
        /// The error, one of the codes `GET /problems/{code}` describes (docs/api/errors.md).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, ToSchema)]
        pub enum ProblemCode {
            $($(#[$doc])* #[serde(rename = $code)] $variant,)*
        }

        impl ProblemCode {
            pub const ALL: &'static [ProblemCode] = &[$(ProblemCode::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self { $(ProblemCode::$variant => $code,)* }
            }

            pub fn status(self) -> u16 {
                match self { $(ProblemCode::$variant => $status,)* }
            }

            pub fn title(self) -> &'static str {
                match self { $(ProblemCode::$variant => $title,)* }
            }

            pub fn description(self) -> &'static str {
                match self { $(ProblemCode::$variant => $description,)* }
            }
        }
    };
}

problem_codes! {
    InvalidJson = "invalid_json", 400, "Invalid JSON",
        "The body is not JSON, or not a JSON object.";
    IdempotencyKeyMissing = "idempotency_key_missing", 400, "Idempotency key missing",
        "Creating an account needs an Idempotency-Key header: a value of your choosing, the same on every retry of one request.";
    IdempotencyKeyInvalid = "idempotency_key_invalid", 400, "Idempotency key invalid",
        "An Idempotency-Key is 1 to 200 characters.";
    Unauthorized = "unauthorized", 401, "Unauthorized",
        "Send a valid secret key as `Authorization: Bearer sk_…`. A missing, malformed, unknown or revoked key all get this answer.";
    KybNotApproved = "kyb_not_approved", 403, "KYB not approved",
        "Live keys work once the business's verification (KYB) is approved. Use the test key until then.";
    BrowserRequestRefused = "browser_request_refused", 403, "Browser request refused",
        "The request carried an Origin header, so it came from a browser. Secret keys belong on a server: call this API from your backend.";
    TestModeOnly = "test_mode_only", 403, "Test mode only",
        "This operation exists only with a test key.";
    NotFound = "not_found", 404, "Not found",
        "There is no such resource for this key's business and mode.";
    MethodNotAllowed = "method_not_allowed", 405, "Method not allowed",
        "The path exists but does not take this method.";
    RequestTimeout = "request_timeout", 408, "Request timeout",
        "The body did not arrive within the time allowed (30 s by default) after the request's headers. Nothing was done; the connection is closed.";
    IdempotencyKeyInUse = "idempotency_key_in_use", 409, "Idempotency key in use",
        "Another request with the same Idempotency-Key is still being processed. Retry shortly to get its result.";
    InvalidState = "invalid_state", 409, "Invalid state",
        "The operation does not apply to the resource in its current status.";
    SettlementAccountMissing = "settlement_account_missing", 409, "Settlement account missing",
        "A payout needs a settlement account in this mode: set one with `PUT /settlement-account` first.";
    PayoutsOnHold = "payouts_on_hold", 409, "Payouts on hold",
        "Live payouts are held for 24 hours after the settlement account changes. Retry after the seconds in Retry-After.";
    PayloadTooLarge = "payload_too_large", 413, "Payload too large",
        "Bodies are at most 64 KiB.";
    UnsupportedMediaType = "unsupported_media_type", 415, "Unsupported media type",
        "Send bodies as application/json.";
    ValidationFailed = "validation_failed", 422, "Validation failed",
        "One or more fields are invalid; `errors` lists every one with its field, code and message.";
    IdempotencyKeyReused = "idempotency_key_reused", 422, "Idempotency key reused",
        "This Idempotency-Key was first used with a different body. Use a new key for a new request.";
    IdentityRejected = "identity_rejected", 422, "Identity rejected",
        "The provider bank rejected the customer's BVN or NIN. The account is kept as failed; `detail` gives the bank's reason.";
    InsufficientBalance = "insufficient_balance", 422, "Insufficient balance",
        "The payout is larger than the available balance; `detail` gives the available amount.";
    BankAccountNotFound = "bank_account_not_found", 422, "Bank account not found",
        "The bank's name enquiry found no account with that number at that bank.";
    RateLimited = "rate_limited", 429, "Rate limited",
        "Over a limit (500 new accounts per business and mode in any rolling hour, or too many failed authentications from one address in a minute). Retry after the seconds in Retry-After.";
    ProviderUnavailable = "provider_unavailable", 503, "Provider unavailable",
        "The bank this operation needs (the payout provider's name enquiry) did not answer. Nothing was changed; retry after the seconds in Retry-After.";
    ServiceUnavailable = "service_unavailable", 503, "Service unavailable",
        "The database could not commit the request just now (a failover to its standby is under way). Nothing was changed; retry after the seconds in Retry-After, with the same Idempotency-Key.";
    InternalError = "internal_error", 500, "Internal error",
        "Something failed on our side. Retrying with the same Idempotency-Key is safe.";
}

impl ProblemCode {
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.as_str() == code)
    }

    /// The problem's `type`: a page this service serves.
    pub fn type_uri(self) -> String {
        format!("/problems/{}", self.as_str())
    }
}

impl std::fmt::Display for ProblemCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ApiError {
    pub fn code(&self) -> ProblemCode {
        match self {
            ApiError::InvalidJson(_) => ProblemCode::InvalidJson,
            ApiError::IdempotencyKeyMissing => ProblemCode::IdempotencyKeyMissing,
            ApiError::IdempotencyKeyInvalid => ProblemCode::IdempotencyKeyInvalid,
            ApiError::Unauthorized => ProblemCode::Unauthorized,
            ApiError::KybNotApproved => ProblemCode::KybNotApproved,
            ApiError::BrowserRequestRefused => ProblemCode::BrowserRequestRefused,
            ApiError::TestModeOnly => ProblemCode::TestModeOnly,
            ApiError::NotFound => ProblemCode::NotFound,
            ApiError::IdempotencyKeyInUse => ProblemCode::IdempotencyKeyInUse,
            ApiError::InvalidState(_) => ProblemCode::InvalidState,
            ApiError::MethodNotAllowed => ProblemCode::MethodNotAllowed,
            ApiError::RequestTimeout => ProblemCode::RequestTimeout,
            ApiError::PayloadTooLarge => ProblemCode::PayloadTooLarge,
            ApiError::UnsupportedMediaType => ProblemCode::UnsupportedMediaType,
            ApiError::Validation(_) => ProblemCode::ValidationFailed,
            ApiError::IdempotencyKeyReused => ProblemCode::IdempotencyKeyReused,
            ApiError::IdentityRejected(_) => ProblemCode::IdentityRejected,
            ApiError::RateLimited { .. } | ApiError::TooManyFailedAuthentications { .. } => {
                ProblemCode::RateLimited
            }
            ApiError::SettlementAccountMissing => ProblemCode::SettlementAccountMissing,
            ApiError::PayoutsOnHold { .. } => ProblemCode::PayoutsOnHold,
            ApiError::InsufficientBalance { .. } => ProblemCode::InsufficientBalance,
            ApiError::BankAccountNotFound => ProblemCode::BankAccountNotFound,
            ApiError::ProviderUnavailable { .. } => ProblemCode::ProviderUnavailable,
            ApiError::ServiceUnavailable { .. } => ProblemCode::ServiceUnavailable,
            ApiError::Internal(_) => ProblemCode::InternalError,
        }
    }

    pub fn validation(field: &str, code: &'static str, message: impl Into<String>) -> Self {
        ApiError::Validation(vec![FieldError::new(field, code, message)])
    }
}

/// An error as the caller receives it: RFC 9457 `application/problem+json`. The one error shape of
/// the API: every operation's error responses refer to this schema.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "type": "/problems/validation_failed", "title": "Validation failed", "status": 422,
    "detail": "customerBvn must be exactly 11 digits", "code": "validation_failed",
    "requestId": "req_01J9Z6W8Q3X4T5V6B7N8M9P0QR",
    "errors": [{"field": "customerBvn", "code": "invalid_format", "message": "customerBvn must be exactly 11 digits"}]
}))]
pub struct Problem {
    /// `/problems/{code}`, a page this service serves.
    #[schema(example = "/problems/not_found", pattern = "^/problems/[a-z_]+$")]
    pub r#type: String,
    pub title: String,
    /// The HTTP status, repeated.
    #[schema(minimum = 400, maximum = 599)]
    pub status: u16,
    /// What went wrong, for people; never a stack trace, SQL or secret.
    pub detail: String,
    pub code: ProblemCode,
    /// The request's `X-Request-Id`.
    #[schema(required = true)]
    pub request_id: Option<String>,
    /// With `validation_failed`: every field error at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub errors: Option<Vec<InvalidField>>,
}

/// One invalid field.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = FieldError)]
pub struct InvalidField {
    /// The member, e.g. `customerBvn` (`data.amount` for nested ones).
    pub field: String,
    /// E.g. `required`, `invalid_type`, `invalid_format`, `invalid_value`, `too_short`,
    /// `too_long`, `out_of_range`, `unknown_field`, `exactly_one_required`,
    /// `not_allowed_in_mode`.
    pub code: String,
    pub message: String,
}

impl From<&FieldError> for InvalidField {
    fn from(e: &FieldError) -> Self {
        Self {
            field: e.field.clone(),
            code: e.code.to_owned(),
            message: e.message.clone(),
        }
    }
}

impl Problem {
    fn of(error: &ApiError) -> Self {
        let code = error.code();
        Problem {
            r#type: code.type_uri(),
            title: code.title().to_owned(),
            status: code.status(),
            detail: match error {
                ApiError::Internal(_) => "something failed on our side; it is safe to retry".into(),
                other => other.to_string(),
            },
            code,
            // Read from the request's task-local id (ops), not from `request_id`, which depends
            // on this module for its own 500.
            request_id: ops::telemetry::request_id(),
            errors: match error {
                ApiError::Validation(errors) => {
                    Some(errors.iter().map(InvalidField::from).collect())
                }
                _ => None,
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let this = unavailable_as_503(self);
        if let ApiError::Internal(err) = &this {
            // The cause goes to the log with the request id; the caller sees neither SQL nor stack.
            tracing::error!(error = format!("{err:#}"), "internal error");
        }
        let body = Problem::of(&this);
        let status = StatusCode::from_u16(body.status).expect("catalogued statuses are valid");
        let mut response = (status, axum::Json(body)).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let ApiError::RateLimited { retry_after_secs }
        | ApiError::TooManyFailedAuthentications { retry_after_secs }
        | ApiError::PayoutsOnHold { retry_after_secs }
        | ApiError::ProviderUnavailable { retry_after_secs }
        | ApiError::ServiceUnavailable { retry_after_secs } = this
        {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
        }
        response
    }
}

impl From<sea_orm::DbErr> for ApiError {
    fn from(err: sea_orm::DbErr) -> Self {
        ApiError::Internal(err.into())
    }
}

/// Seconds a caller waits before retrying a request the database could not take: about the time
/// a failover takes.
const FAILOVER_RETRY_AFTER_SECS: u64 = 5;

/// An internal error whose cause is the database being unreachable or read-only for now (a
/// failover) is a 503 with Retry-After, however it reached here; nothing was committed.
fn unavailable_as_503(error: ApiError) -> ApiError {
    match error {
        ApiError::Internal(err)
            if err.chain().any(|cause| {
                cause
                    .downcast_ref::<sea_orm::DbErr>()
                    .is_some_and(store::failover::is_unavailable)
            }) =>
        {
            tracing::warn!(
                error = format!("{err:#}"),
                "database unavailable; answered 503"
            );
            ApiError::ServiceUnavailable {
                retry_after_secs: FAILOVER_RETRY_AFTER_SECS,
            }
        }
        other => other,
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
