//! The OpenAPI 3.1 document (`GET /openapi.json`) and a page that renders it (`GET /docs`), both
//! served at `/…` and at `/v1/…`.
//!
//! The document is generated: operations from the handlers' `#[utoipa::path]` annotations,
//! response bodies from the views' `ToSchema` derives (`shared::views`), error responses from the
//! problem catalogue (`error::PROBLEM_TYPES`). The request bodies are parsed by hand in the
//! handlers (every field error listed at once), so their shapes are declared here as schema-only
//! types, next to the rules they document.
//!
//! `/v1`: every path is served twice. The document lists each path once and declares two servers,
//! `/v1` (first, the one to use) and `/`; `api/tests/openapi.rs` checks that every documented
//! operation answers under both.
//!
//! The page needs nothing but this service: inline CSS and script, no CDN, no build-time download.

use std::sync::OnceLock;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{
    AllOfBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type,
};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Required};
use utoipa::{Modify, OpenApi, ToResponse, ToSchema};

use crate::error::problem_type;

const INTRO: &str = "\
Dedicated virtual account numbers for a business's customers, and the deposits they receive.

**Servers.** Every path is served both under `/v1` and without the prefix; the two servers below \
are the same operations. Use `/v1`.

**Authentication.** `Authorization: Bearer sk_test_…` or `sk_live_…`. A key's mode is the mode of \
everything it reads and writes: test and live data never mix. Live keys work once the business's \
KYB is approved. Requests with an `Origin` header (browsers) are refused: secret keys belong on a \
server. `/problems`, `/healthz`, `/readyz`, `/metrics`, this document and its page need no key; \
provider notifications are authenticated by their signature.

**Conventions.** JSON bodies in camelCase, at most 64 KiB, sent as `application/json`. Timestamps \
are RFC 3339 UTC. Money is integer kobo (`150000` is NGN 1,500.00). Ids are prefixed and \
time-ordered (`va_…`, `dep_…`, `rck_…`, `evt_…`). Every response carries `X-Request-Id`.

**Errors** are `application/problem+json` (RFC 9457) with a stable `code`; `type` is \
`/problems/{code}`, which this service serves. A 422 lists every invalid field in `errors`.

**Idempotency.** Creating an account needs an `Idempotency-Key` (1–200 characters): a retry with \
the same key and body returns the first answer (`Idempotent-Replayed: true`) and creates nothing.";

/// The name of the bearer security scheme the authenticated operations require.
pub const BEARER: &str = "bearerAuth";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Virtual Account Service",
        description = INTRO,
        license(name = "MIT"),
    ),
    servers(
        (url = "/v1", description = "Versioned paths (use these)"),
        (url = "/", description = "The same operations without the version prefix"),
    ),
    paths(
        crate::routes::accounts::create,
        crate::routes::accounts::list,
        crate::routes::accounts::read,
        crate::routes::accounts::deactivate,
        crate::routes::deposits::list_deposits,
        crate::routes::deposits::simulate_deposit,
        crate::routes::deposits::request_recheck,
        crate::routes::deposits::read_recheck,
        crate::routes::deposits::notification,
        crate::routes::events::list,
        crate::routes::events::read,
        crate::routes::events::resend,
        crate::routes::problems::describe,
        crate::routes::health::healthz,
        crate::routes::health::readyz,
        metrics,
        openapi_json,
        docs,
    ),
    components(
        schemas(
            Problem,
            shared::views::schema::Mode,
            shared::views::schema::AccountStatus,
            shared::views::schema::Bank,
            shared::views::schema::IdentityType,
            shared::views::schema::DepositStatus,
            shared::views::schema::DepositSource,
            shared::views::schema::RecheckStatus,
            shared::views::schema::EventType,
        ),
        responses(
            BadRequest,
            CreateBadRequest,
            Unauthorized,
            Forbidden,
            ForbiddenTestOnly,
            BrowserRefused,
            NotFound,
            InvalidState,
            IdempotencyKeyInUse,
            PayloadTooLarge,
            UnsupportedMediaType,
            ValidationFailed,
            CreateUnprocessable,
            RateLimited,
            InternalError,
        ),
    ),
    modifiers(&Conventions),
    tags(
        (name = "Virtual accounts", description = "Dedicated account numbers for your customers."),
        (name = "Deposits", description = "Money received on virtual accounts, and simulated deposits in test mode."),
        (name = "Rechecks", description = "Asking the provider bank again for deposits that were not notified."),
        (name = "Provider notifications", description = "Called by the provider banks, not by businesses: signed deposit notifications."),
        (name = "Events", description = "Events, their webhook deliveries and attempts, and resending them."),
        (name = "Problems", description = "What each error `type` means."),
        (name = "Operations", description = "Health, readiness and metrics for operators."),
        (name = "Documentation", description = "This document and its page."),
    ),
)]
pub struct ApiDoc;

/// The document as served, built once.
pub fn document() -> &'static str {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        ApiDoc::openapi()
            .to_pretty_json()
            .expect("the OpenAPI document serialises")
    })
}

/// The OpenAPI document
///
/// This document: OpenAPI 3.1, JSON.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "getOpenApiDocument",
    tag = "Documentation",
    responses(
        (status = 200, description = "The OpenAPI 3.1 document of this API.", body = Object, content_type = "application/json"),
        (status = 403, response = BrowserRefused),
    ),
)]
pub async fn openapi_json() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        document(),
    )
        .into_response()
}

/// The API reference page
///
/// A readable page rendered from `openapi.json`, by an inline script; it loads nothing from
/// anywhere else.
#[utoipa::path(
    get,
    path = "/docs",
    operation_id = "getDocsPage",
    tag = "Documentation",
    responses(
        (status = 200, description = "An HTML page that renders this document.", body = String, content_type = "text/html"),
        (status = 403, response = BrowserRefused),
    ),
)]
pub async fn docs() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
                ),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        include_str!("docs.html"),
    )
        .into_response()
}

/// Prometheus metrics
///
/// The process's metrics in the Prometheus text format (`text/plain; version=0.0.4`): HTTP
/// requests by route and status, jobs published and consumed by queue and outcome, the outbox
/// backlog, provider calls by bank and outcome (and, where webhooks are delivered, deliveries by
/// outcome and the dead-letter count). Served by `ops::metrics::endpoint`; this function only
/// documents it.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "getMetrics",
    tag = "Operations",
    responses(
        (status = 200, description = "Metrics in the Prometheus text exposition format.", body = String, content_type = "text/plain"),
        (status = 403, response = BrowserRefused),
    ),
)]
#[allow(dead_code)]
fn metrics() {}

// ── Schemas the handlers do not derive ─────────────────────────────────────────────────────────

/// An error, as RFC 9457 `application/problem+json`.
#[derive(ToSchema)]
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
    #[schema(schema_with = problem_codes)]
    pub code: String,
    /// The request's `X-Request-Id`.
    #[schema(required = true)]
    pub request_id: Option<String>,
    /// With `validation_failed`: every field error at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<FieldError>>,
}

/// One invalid field.
#[derive(ToSchema)]
pub struct FieldError {
    /// The member, e.g. `customerBvn` (`data.amount` for nested ones).
    pub field: String,
    /// E.g. `required`, `invalid_type`, `invalid_format`, `invalid_value`, `too_short`,
    /// `too_long`, `out_of_range`, `unknown_field`, `exactly_one_required`,
    /// `not_allowed_in_mode`.
    pub code: String,
    pub message: String,
}

fn problem_codes() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(crate::error::PROBLEM_TYPES.iter().map(|p| p.code)))
        .description(Some(
            "The error, one of the codes `GET /problems/{code}` describes.",
        ))
        .into()
}

/// `POST /virtual-accounts`. Exactly one of `customerBvn` and `customerNin`; unknown members are
/// refused (`unknown_field`); every invalid field is listed in one 422.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({
    "customerName": "Ada Obi", "customerEmail": "ada@example.com", "customerPhone": "08031234567",
    "customerBvn": "22212345678", "preferredBank": "test-bank", "customerReference": "user-42"
}))]
pub struct CreateAccountRequest {
    /// 1–100 characters after trimming, no control characters.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = r"^\s*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
    )]
    pub customer_name: String,
    /// A valid address whose domain has a dot; at most 254 characters.
    #[schema(format = Email, max_length = 254, example = "ada@example.com")]
    pub customer_email: String,
    /// A Nigerian mobile number: `0XXXXXXXXXX`, `234XXXXXXXXXX` or `+234XXXXXXXXXX`, in a mobile
    /// range (the pattern follows libphonenumber's ranges, which the service checks); returned
    /// normalised to E.164.
    #[schema(
        pattern = r"^(0|234|\+234)((702[0-24-9]|819[01])[0-9]{6}|(7(0[13-9]|[12][0-9])|8(0[1-9]|1[0-8])|9(0[1-9]|1[1-6]))[0-9]{7})$",
        example = "08031234567"
    )]
    pub customer_phone: String,
    /// Bank Verification Number: 11 ASCII digits. Never returned.
    #[schema(value_type = String, required = false, pattern = "^[0-9]{11}$", min_length = 11, max_length = 11, example = "22212345678")]
    pub customer_bvn: Option<String>,
    /// National Identification Number: 11 ASCII digits. Never returned.
    #[schema(value_type = String, required = false, pattern = "^[0-9]{11}$", min_length = 11, max_length = 11)]
    pub customer_nin: Option<String>,
    /// One allowed in the key's mode: `test-bank` is refused with a live key.
    #[schema(value_type = shared::views::schema::Bank)]
    pub preferred_bank: String,
    /// Your reference for the customer, 1–100 characters. While it has a `pending` or `active`
    /// account, creating again returns that account with 200.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
    )]
    pub customer_reference: Option<String>,
}

/// `POST /virtual-accounts/{id}/deactivate`: the body is optional.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeactivateRequest {
    /// Why, for your records: 1–200 characters after trimming.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"^\s*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
    )]
    pub reason: Option<String>,
}

/// `POST /virtual-accounts/{id}/recheck`: the body is optional. The window defaults to the 24 hours
/// before `to`, `to` to now; `from` must be before `to`, at most 31 days apart, and `to` not in the
/// future.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecheckRequest {
    #[schema(format = DateTime)]
    pub from: Option<String>,
    #[schema(format = DateTime)]
    pub to: Option<String>,
}

/// `POST /virtual-accounts/{id}/simulate-deposit` (test mode).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"amount": 150000, "senderName": "Chidi Okeke", "narration": "Invoice 42", "notify": true}))]
pub struct SimulateDepositRequest {
    /// Integer kobo, 1 to 1 000 000 000 000.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    pub amount: i64,
    /// 1–100 characters after trimming.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = r"^\s*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
    )]
    pub sender_name: Option<String>,
    /// 1–200 characters after trimming.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"^\s*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
    )]
    pub narration: Option<String>,
    /// `true` (default): the test provider notifies the service as a real bank would. `false`: the
    /// notification is lost, so that a recheck can find the deposit.
    #[schema(default = true)]
    pub notify: Option<bool>,
}

/// The test provider accepted the simulated transfer.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimulatedDeposit {
    /// The provider's transaction reference; the deposit carries it as `providerReference`.
    pub provider_reference: String,
}

/// A deposit notification, as a provider bank sends it.
#[derive(ToSchema)]
pub struct ProviderNotification {
    /// `transfer.received` is acted on; any other event is stored and acknowledged.
    #[schema(example = "transfer.received")]
    pub event: String,
    /// The transaction (required with `transfer.received`).
    pub data: Option<ProviderTransaction>,
}

/// A transaction as the provider reports it.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderTransaction {
    /// The provider's transaction reference, 1–200 characters: one deposit per reference.
    #[schema(min_length = 1, max_length = 200)]
    pub reference: String,
    #[schema(pattern = "^[0-9]{10}$")]
    pub account_number: String,
    /// Integer kobo, positive.
    #[schema(minimum = 1)]
    pub amount: i64,
    #[schema(schema_with = shared::views::schema::currency)]
    pub currency: String,
    pub sender_name: Option<String>,
    pub sender_account_number: Option<String>,
    pub sender_bank_name: Option<String>,
    pub narration: Option<String>,
    #[schema(format = DateTime)]
    pub paid_at: String,
}

/// The notification is stored; the provider need not send it again.
#[derive(ToSchema)]
pub struct NotificationReceipt {
    #[schema(schema_with = always_true)]
    pub received: bool,
    /// The stored notification's id.
    pub id: String,
    /// `recorded` (a new deposit), `duplicate` (already recorded), `ignored` (an event not acted
    /// on), `unmatched` (no account has that number; kept for operators).
    #[schema(schema_with = notification_outcomes)]
    pub outcome: String,
}

fn always_true() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Boolean)
        .enum_values(Some([true]))
        .into()
}

fn notification_outcomes() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["recorded", "duplicate", "ignored", "unmatched"]))
        .into()
}

/// What an error `type` means.
#[derive(ToSchema)]
pub struct ProblemDescription {
    #[schema(example = "/problems/not_found")]
    pub r#type: String,
    #[schema(schema_with = problem_codes)]
    pub code: String,
    pub title: String,
    #[schema(minimum = 400, maximum = 599)]
    pub status: u16,
    pub description: String,
}

/// The process is alive.
#[derive(ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: String,
}

/// Whether the process can serve: its database answers.
#[derive(ToSchema)]
pub struct Readiness {
    /// `ok` or `unavailable`.
    #[schema(example = "ok")]
    pub status: String,
    /// `ok` or `unreachable`.
    #[schema(example = "ok")]
    pub database: String,
    /// `ok` or `unreachable`.
    #[schema(example = "ok")]
    pub broker: String,
}

// ── Error responses, generated from the problem catalogue ──────────────────────────────────────

/// Declares reusable error responses (`#/components/responses/<Name>`), each listing the problem
/// codes it may carry; status, titles and descriptions come from `PROBLEM_TYPES`.
macro_rules! problem_responses {
    ($($(#[$doc:meta])* $name:ident => [$($code:literal),+ $(,)?];)*) => {$(
        $(#[$doc])*
        pub struct $name;

        impl<'r> ToResponse<'r> for $name {
            fn response() -> (&'r str, RefOr<utoipa::openapi::Response>) {
                (stringify!($name), RefOr::T(problem_response(&[$($code),+])))
            }
        }
    )*};
}

problem_responses! {
    /// 400 for bodies.
    BadRequest => ["invalid_json"];
    /// 400 on account creation: the body or the `Idempotency-Key`.
    CreateBadRequest => ["invalid_json", "idempotency_key_missing", "idempotency_key_invalid"];
    Unauthorized => ["unauthorized"];
    /// 403 on authenticated operations.
    Forbidden => ["kyb_not_approved", "browser_request_refused"];
    /// 403 on test-mode-only operations.
    ForbiddenTestOnly => ["test_mode_only", "kyb_not_approved", "browser_request_refused"];
    /// 403 anywhere: a request with an `Origin` header.
    BrowserRefused => ["browser_request_refused"];
    NotFound => ["not_found"];
    InvalidState => ["invalid_state"];
    IdempotencyKeyInUse => ["idempotency_key_in_use"];
    PayloadTooLarge => ["payload_too_large"];
    UnsupportedMediaType => ["unsupported_media_type"];
    ValidationFailed => ["validation_failed"];
    /// 422 on account creation.
    CreateUnprocessable => ["validation_failed", "idempotency_key_reused", "identity_rejected"];
    RateLimited => ["rate_limited"];
    InternalError => ["internal_error"];
}

/// Response headers: (name, description, integer?, carried by every code that lists it).
struct ExtraHeader {
    name: &'static str,
    description: &'static str,
    integer: bool,
    codes: &'static [&'static str],
}

const RATE_LIMIT: &str =
    "The account-creation limit now: `\"accounts\";r=<remaining>;t=<seconds until a slot frees>`.";
const RATE_LIMIT_POLICY: &str = "The account-creation limit: `\"accounts\";q=500;w=3600` (500 per business and mode in any rolling hour).";

const ERROR_HEADERS: &[ExtraHeader] = &[
    ExtraHeader {
        name: "Retry-After",
        description: "Seconds to wait before trying again.",
        integer: true,
        codes: &["rate_limited"],
    },
    ExtraHeader {
        name: "RateLimit",
        description: RATE_LIMIT,
        integer: false,
        codes: &["rate_limited", "identity_rejected"],
    },
    ExtraHeader {
        name: "RateLimit-Policy",
        description: RATE_LIMIT_POLICY,
        integer: false,
        codes: &["rate_limited", "identity_rejected"],
    },
];

fn problem_response(codes: &[&str]) -> utoipa::openapi::Response {
    let kinds: Vec<_> = codes
        .iter()
        .map(|c| problem_type(c).unwrap_or_else(|| panic!("{c} is not in PROBLEM_TYPES")))
        .collect();
    let status = kinds[0].status;
    assert!(
        kinds.iter().all(|k| k.status == status),
        "one response, one status: {codes:?}"
    );
    let mut description = kinds
        .iter()
        .map(|k| k.title)
        .collect::<Vec<_>>()
        .join(" / ");
    description.push_str(".\n\n");
    for k in &kinds {
        description.push_str(&format!("- `{}`: {}\n", k.code, k.description));
    }
    // The shared Problem shape, narrowed to this response's status and codes.
    let narrowed = ObjectBuilder::new()
        .property(
            "status",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .enum_values(Some([status])),
        )
        .property(
            "code",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(codes.iter().copied())),
        );
    let schema = AllOfBuilder::new()
        .item(Ref::from_schema_name("Problem"))
        .item(narrowed);
    let first = kinds[0];
    let mut example = json!({
        "type": format!("/problems/{}", first.code),
        "title": first.title,
        "status": status,
        "detail": first.description,
        "code": first.code,
        "requestId": "req_01J9Z6W8Q3X4T5V6B7N8M9P0QR",
    });
    if first.code == "validation_failed" {
        example["detail"] = json!("customerBvn must be exactly 11 digits");
        example["errors"] = json!([{"field": "customerBvn", "code": "invalid_format", "message": "customerBvn must be exactly 11 digits"}]);
    }
    let mut response = ResponseBuilder::new().description(description).content(
        "application/problem+json",
        ContentBuilder::new()
            .schema(Some(schema))
            .example(Some(example))
            .build(),
    );
    for h in ERROR_HEADERS {
        let carried = codes.iter().filter(|c| h.codes.contains(c)).count();
        if carried == 0 {
            continue;
        }
        let when = if carried == codes.len() {
            String::new()
        } else {
            let which: Vec<_> = codes.iter().filter(|c| h.codes.contains(c)).collect();
            format!(
                " With {} only.",
                which
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let schema_type = if h.integer {
            Type::Integer
        } else {
            Type::String
        };
        response = response.header(
            h.name,
            header(
                ObjectBuilder::new().schema_type(schema_type),
                &format!("{}{when}", h.description),
                carried == codes.len(),
            ),
        );
    }
    response.build()
}

/// A response header; `required` is set through `extensions` because utoipa's `Header` has no
/// such field (the OpenAPI Header Object does).
fn header(schema: impl Into<RefOr<Schema>>, description: &str, required: bool) -> Header {
    let mut header = HeaderBuilder::new()
        .schema(Some(schema))
        .description(Some(description))
        .build();
    if required {
        header.extensions = Some(Extensions::from_iter([("required", true)]));
    }
    header
}

// ── Conventions every operation shares ─────────────────────────────────────────────────────────

/// Adds what every operation shares rather than repeating it in each annotation: the bearer
/// security scheme, the optional `X-Request-Id` request header, the `X-Request-Id` response header
/// on every response, `required` on the rate-limit headers of account creation, and the
/// exactly-one-of rule of `customerBvn`/`customerNin`.
struct Conventions;

const REQUEST_ID: &str = "X-Request-Id";

impl Modify for Conventions {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("sk_test_… | sk_live_…")
                    .description(Some(
                        "`Authorization: Bearer sk_test_…` (test mode) or `sk_live_…` (live mode, \
                         once KYB is approved). A missing, malformed, unknown or revoked key is \
                         401 `unauthorized`.",
                    ))
                    .build(),
            ),
        );
        components.headers.insert(
            REQUEST_ID.into(),
            RefOr::T(header(
                ObjectBuilder::new().schema_type(Type::String),
                "The request's id: the caller's `X-Request-Id` when it sent an acceptable one, \
                 else a generated `req_…`. Error bodies carry it as `requestId`; logs carry it too.",
                true,
            )),
        );
        components.parameters.insert(
            REQUEST_ID.into(),
            RefOr::T(
                ParameterBuilder::new()
                    .name(REQUEST_ID)
                    .parameter_in(ParameterIn::Header)
                    .required(Required::False)
                    .description(Some(
                        "Your id for this request, echoed in the response when it is 1–200 \
                         visible ASCII characters (no spaces). Any other value is not an error: \
                         the response then carries a generated id instead.",
                    ))
                    .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                    .build(),
            ),
        );
        for response in components.responses.values_mut() {
            if let RefOr::T(response) = response {
                add_request_id_header(&mut response.headers);
            }
        }
        if let Some(RefOr::T(schema)) = components.schemas.remove("CreateAccountRequest") {
            components.schemas.insert(
                "CreateAccountRequest".into(),
                RefOr::T(exactly_one_identity(schema)),
            );
        }

        for item in openapi.paths.paths.values_mut() {
            for operation in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                conventions_of(operation);
            }
        }
    }
}

fn conventions_of(operation: &mut Operation) {
    // An optional body (`content = Option<T>`) means "no body or a T", not "T or JSON null":
    // a `null` body is 400 `invalid_json`.
    if let Some(RefOr::T(body)) = &mut operation.request_body {
        for content in body.content.values_mut() {
            if let RefOr::T(content) = content
                && let Some(RefOr::T(Schema::OneOf(one_of))) = &content.schema
                && let [RefOr::Ref(reference), RefOr::T(Schema::Object(null))]
                | [RefOr::T(Schema::Object(null)), RefOr::Ref(reference)] =
                    one_of.items.as_slice()
                && null.schema_type == SchemaType::Type(Type::Null)
            {
                content.schema = Some(RefOr::Ref(reference.clone()));
            }
        }
    }
    operation
        .parameters
        .get_or_insert_with(Vec::new)
        .push(RefOr::Ref(Ref::new(format!(
            "#/components/parameters/{REQUEST_ID}"
        ))));
    let creates = operation.operation_id.as_deref() == Some("createVirtualAccount");
    for response in operation.responses.responses.values_mut() {
        if let RefOr::T(response) = response {
            add_request_id_header(&mut response.headers);
            if creates {
                for (name, header) in response.headers.iter_mut() {
                    if let RefOr::T(header) = header
                        && (name == "RateLimit" || name == "RateLimit-Policy")
                    {
                        header.extensions = Some(Extensions::from_iter([("required", true)]));
                    }
                }
            }
        }
    }
}

fn add_request_id_header(headers: &mut std::collections::BTreeMap<String, RefOr<Header>>) {
    headers.insert(
        REQUEST_ID.into(),
        RefOr::Ref(Ref::new(format!("#/components/headers/{REQUEST_ID}"))),
    );
}

/// `allOf: [<the fields>, oneOf: [required customerBvn, required customerNin]]`.
fn exactly_one_identity(fields: Schema) -> Schema {
    let requires = |field: &str| {
        ObjectBuilder::new()
            .schema_type(SchemaType::AnyValue)
            .required(field)
            .build()
    };
    let description = match &fields {
        Schema::Object(o) => o.description.clone(),
        _ => None,
    };
    AllOfBuilder::new()
        .description(description)
        .item(fields)
        .item(
            OneOfBuilder::new()
                .description(Some("Exactly one of customerBvn and customerNin."))
                .item(requires("customerBvn"))
                .item(requires("customerNin")),
        )
        .into()
}
