//! The API's one error type. Every error renders itself as RFC 9457 `application/problem+json`
//! with a `code` from SPEC §2, and its `type` is a page this service serves (`/problems/{code}`).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use domain::FieldError;
use serde::Serialize;

use crate::request_id;

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

/// A problem type this service documents at `/problems/{code}`.
pub struct ProblemType {
    pub code: &'static str,
    pub status: u16,
    pub title: &'static str,
    pub description: &'static str,
}

pub const PROBLEM_TYPES: &[ProblemType] = &[
    ProblemType {
        code: "invalid_json",
        status: 400,
        title: "Invalid JSON",
        description: "The body is not JSON, or not a JSON object.",
    },
    ProblemType {
        code: "idempotency_key_missing",
        status: 400,
        title: "Idempotency key missing",
        description: "Creating an account needs an Idempotency-Key header: a value of your choosing, the same on every retry of one request.",
    },
    ProblemType {
        code: "idempotency_key_invalid",
        status: 400,
        title: "Idempotency key invalid",
        description: "An Idempotency-Key is 1 to 200 characters.",
    },
    ProblemType {
        code: "unauthorized",
        status: 401,
        title: "Unauthorized",
        description: "Send a valid secret key as `Authorization: Bearer sk_…`. A missing, malformed, unknown or revoked key all get this answer.",
    },
    ProblemType {
        code: "kyb_not_approved",
        status: 403,
        title: "KYB not approved",
        description: "Live keys work once the business's verification (KYB) is approved. Use the test key until then.",
    },
    ProblemType {
        code: "browser_request_refused",
        status: 403,
        title: "Browser request refused",
        description: "The request carried an Origin header, so it came from a browser. Secret keys belong on a server: call this API from your backend.",
    },
    ProblemType {
        code: "test_mode_only",
        status: 403,
        title: "Test mode only",
        description: "This operation exists only with a test key.",
    },
    ProblemType {
        code: "not_found",
        status: 404,
        title: "Not found",
        description: "There is no such resource for this key's business and mode.",
    },
    ProblemType {
        code: "method_not_allowed",
        status: 405,
        title: "Method not allowed",
        description: "The path exists but does not take this method.",
    },
    ProblemType {
        code: "idempotency_key_in_use",
        status: 409,
        title: "Idempotency key in use",
        description: "Another request with the same Idempotency-Key is still being processed. Retry shortly to get its result.",
    },
    ProblemType {
        code: "invalid_state",
        status: 409,
        title: "Invalid state",
        description: "The operation does not apply to the resource in its current status.",
    },
    ProblemType {
        code: "payload_too_large",
        status: 413,
        title: "Payload too large",
        description: "Bodies are at most 64 KiB.",
    },
    ProblemType {
        code: "unsupported_media_type",
        status: 415,
        title: "Unsupported media type",
        description: "Send bodies as application/json.",
    },
    ProblemType {
        code: "validation_failed",
        status: 422,
        title: "Validation failed",
        description: "One or more fields are invalid; `errors` lists every one with its field, code and message.",
    },
    ProblemType {
        code: "idempotency_key_reused",
        status: 422,
        title: "Idempotency key reused",
        description: "This Idempotency-Key was first used with a different body. Use a new key for a new request.",
    },
    ProblemType {
        code: "identity_rejected",
        status: 422,
        title: "Identity rejected",
        description: "The provider bank rejected the customer's BVN or NIN. The account is kept as failed; `detail` gives the bank's reason.",
    },
    ProblemType {
        code: "rate_limited",
        status: 429,
        title: "Rate limited",
        description: "Over a limit (500 new accounts per business and mode in any rolling hour, or 20 failed authentications from one address in a minute). Retry after the seconds in Retry-After.",
    },
    ProblemType {
        code: "internal_error",
        status: 500,
        title: "Internal error",
        description: "Something failed on our side. Retrying with the same Idempotency-Key is safe.",
    },
];

impl ApiError {
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidJson(_) => "invalid_json",
            ApiError::IdempotencyKeyMissing => "idempotency_key_missing",
            ApiError::IdempotencyKeyInvalid => "idempotency_key_invalid",
            ApiError::Unauthorized => "unauthorized",
            ApiError::KybNotApproved => "kyb_not_approved",
            ApiError::BrowserRequestRefused => "browser_request_refused",
            ApiError::TestModeOnly => "test_mode_only",
            ApiError::NotFound => "not_found",
            ApiError::IdempotencyKeyInUse => "idempotency_key_in_use",
            ApiError::InvalidState(_) => "invalid_state",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::PayloadTooLarge => "payload_too_large",
            ApiError::UnsupportedMediaType => "unsupported_media_type",
            ApiError::Validation(_) => "validation_failed",
            ApiError::IdempotencyKeyReused => "idempotency_key_reused",
            ApiError::IdentityRejected(_) => "identity_rejected",
            ApiError::RateLimited { .. } | ApiError::TooManyFailedAuthentications { .. } => {
                "rate_limited"
            }
            ApiError::Internal(_) => "internal_error",
        }
    }

    pub fn problem_type(&self) -> &'static ProblemType {
        problem_type(self.code()).expect("every code is catalogued")
    }

    pub fn validation(field: &str, code: &'static str, message: impl Into<String>) -> Self {
        ApiError::Validation(vec![FieldError::new(field, code, message)])
    }
}

pub fn problem_type(code: &str) -> Option<&'static ProblemType> {
    PROBLEM_TYPES.iter().find(|p| p.code == code)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Problem<'a> {
    r#type: String,
    title: &'static str,
    status: u16,
    detail: String,
    code: &'static str,
    request_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<&'a [FieldError]>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let kind = self.problem_type();
        if let ApiError::Internal(err) = &self {
            // The cause goes to the log with the request id; the caller sees neither SQL nor stack.
            tracing::error!(error = format!("{err:#}"), "internal error");
        }
        let detail = match &self {
            ApiError::Internal(_) => "something failed on our side; it is safe to retry".into(),
            other => other.to_string(),
        };
        let body = Problem {
            r#type: format!("/problems/{}", kind.code),
            title: kind.title,
            status: kind.status,
            detail,
            code: kind.code,
            request_id: request_id::current(),
            errors: match &self {
                ApiError::Validation(errors) => Some(errors),
                _ => None,
            },
        };
        let status = StatusCode::from_u16(kind.status).expect("catalogued statuses are valid");
        let mut response = (status, axum::Json(body)).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let ApiError::RateLimited { retry_after_secs }
        | ApiError::TooManyFailedAuthentications { retry_after_secs } = self
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

pub type ApiResult<T> = Result<T, ApiError>;
