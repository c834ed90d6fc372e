//! The error responses an operation lists (`#/components/responses/<Name>`). Every one is a
//! [`Problem`](super::Problem), referenced by `$ref`, so a client generated from the document has
//! one error type; the codes a response may carry are in its description, in one example each,
//! and in `x-problem-codes`. Status, titles and descriptions come from [`ProblemCode`].

use std::collections::BTreeMap;

use serde_json::json;
use utoipa::openapi::example::ExampleBuilder;
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::{ContentBuilder, Ref, RefOr};
use utoipa::{IntoResponses, ToResponse};

use super::ProblemCode;

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Declares the reusable error responses, each listing the codes it may carry (all of one status),
/// and [`all`], which the document registers. A response carries the [`ERROR_HEADERS`] of its
/// codes, or only those named after `headers` when one limit sends fewer than another.
macro_rules! problem_responses {
    ($($(#[$doc:meta])* $name:ident => [$($code:ident),+ $(,)?] $(headers [$($header:literal),* $(,)?])?;)*) => {
        $(
            $(#[$doc])*
            pub struct $name;

            impl<'r> ToResponse<'r> for $name {
                fn response() -> (&'r str, RefOr<Response>) {
                    let only: Option<&[&str]> = None $(.or(Some(&[$($header),*])))?;
                    (stringify!($name), RefOr::T(problem_response(&[$(ProblemCode::$code),+], only)))
                }
            }
        )*

        /// Every error response, by component name.
        pub fn all() -> Vec<(&'static str, RefOr<Response>)> {
            vec![$(<$name as ToResponse>::response()),*]
        }
    };
}

problem_responses! {
    /// 400 for bodies.
    BadRequest => [InvalidJson];
    /// 400 on account creation: the body or the `Idempotency-Key`.
    CreateBadRequest => [InvalidJson, IdempotencyKeyMissing, IdempotencyKeyInvalid];
    Unauthorized => [Unauthorized];
    /// 403 on authenticated operations.
    Forbidden => [KybNotApproved, BrowserRequestRefused];
    /// 403 on test-mode-only operations.
    ForbiddenTestOnly => [TestModeOnly, KybNotApproved, BrowserRequestRefused];
    /// 403 anywhere: a request with an `Origin` header.
    BrowserRefused => [BrowserRequestRefused];
    NotFound => [NotFound];
    InvalidState => [InvalidState];
    IdempotencyKeyInUse => [IdempotencyKeyInUse];
    PayloadTooLarge => [PayloadTooLarge];
    UnsupportedMediaType => [UnsupportedMediaType];
    ValidationFailed => [ValidationFailed];
    /// 422 on account creation.
    CreateUnprocessable => [ValidationFailed, IdempotencyKeyReused, IdentityRejected];
    /// 429 on account creation: over the creation limit (its state in `RateLimit` headers), or
    /// the failed-authentication limit below.
    RateLimited => [RateLimited];
    /// 429 on every authenticated operation: too many failed authentications from the client's
    /// address, answered before the key is looked up; only `Retry-After` is sent.
    FailedAuthenticationsLimited => [RateLimited] headers ["Retry-After"];
    /// 429 on resending an event: over the business's resends per minute
    /// (docs/api/events-and-webhooks.md), or the failed-authentication limit; only `Retry-After` is
    /// sent.
    ResendLimited => [RateLimited] headers ["Retry-After"];
    /// 408: the body did not arrive within the body-read limit.
    RequestTimeout => [RequestTimeout];
    InternalError => [InternalError];
    /// 409 on payout creation.
    PayoutConflict => [IdempotencyKeyInUse, SettlementAccountMissing, PayoutsOnHold];
    /// 422 on payout creation.
    PayoutUnprocessable => [ValidationFailed, IdempotencyKeyReused, InsufficientBalance];
    /// 422 on setting the settlement account.
    SettlementUnprocessable => [ValidationFailed, BankAccountNotFound];
    ProviderUnavailable => [ProviderUnavailable];
    /// 503 anywhere the database is written or read: a failover under way.
    ServiceUnavailable => [ServiceUnavailable];
    /// 503 where a bank is also called: the bank or the database.
    ProviderOrServiceUnavailable => [ProviderUnavailable, ServiceUnavailable];
}

/// Declares sets of error responses that kinds of operation list alike, each an
/// [`IntoResponses`] an operation names in `responses(…)` beside its own: the same `$ref`s as
/// listing them one by one (responses are keyed by status, so where the set stands is no matter).
macro_rules! response_sets {
    ($($(#[$doc:meta])* $name:ident => [$($status:literal => $response:ident),+ $(,)?];)*) => {
        $(
            $(#[$doc])*
            pub struct $name;

            impl IntoResponses for $name {
                fn responses() -> BTreeMap<String, RefOr<Response>> {
                    BTreeMap::from([$((
                        $status.to_string(),
                        RefOr::Ref(Ref::from_response_name(<$response as ToResponse>::response().0)),
                    )),+])
                }
            }
        )*
    };
}

response_sets! {
    /// Any operation with a secret key.
    Authenticated => [401 => Unauthorized, 403 => Forbidden, 500 => InternalError];
    /// An operation on one resource of the key's business and mode, named by its id.
    ById => [401 => Unauthorized, 403 => Forbidden, 404 => NotFound, 500 => InternalError];
    /// A list: its query parameters are checked.
    List => [401 => Unauthorized, 403 => Forbidden, 422 => ValidationFailed, 500 => InternalError];
    /// A JSON body, before it is read.
    JsonBody => [413 => PayloadTooLarge, 415 => UnsupportedMediaType];
}

/// A response header carried by some codes.
struct ExtraHeader {
    name: &'static str,
    description: &'static str,
    integer: bool,
    codes: &'static [ProblemCode],
}

const RATE_LIMIT: &str =
    "The account-creation limit now: `\"accounts\";r=<remaining>;t=<seconds until a slot frees>`.";
const RATE_LIMIT_POLICY: &str = "The account-creation limit: `\"accounts\";q=500;w=3600` (500 per business and mode in any rolling hour).";

const ERROR_HEADERS: &[ExtraHeader] = &[
    ExtraHeader {
        name: "Retry-After",
        description: "Seconds to wait before trying again.",
        integer: true,
        codes: &[
            ProblemCode::RateLimited,
            ProblemCode::PayoutsOnHold,
            ProblemCode::ProviderUnavailable,
            ProblemCode::ServiceUnavailable,
        ],
    },
    ExtraHeader {
        name: "RateLimit",
        description: RATE_LIMIT,
        integer: false,
        codes: &[ProblemCode::RateLimited, ProblemCode::IdentityRejected],
    },
    ExtraHeader {
        name: "RateLimit-Policy",
        description: RATE_LIMIT_POLICY,
        integer: false,
        codes: &[ProblemCode::RateLimited, ProblemCode::IdentityRejected],
    },
];

/// An example body of `code`.
fn example(code: ProblemCode) -> serde_json::Value {
    let mut example = json!({
        "type": code.type_uri(),
        "title": code.title(),
        "status": code.status(),
        "detail": code.description(),
        "code": code,
        "requestId": "req_01J9Z6W8Q3X4T5V6B7N8M9P0QR",
    });
    if code == ProblemCode::ValidationFailed {
        example["detail"] = json!("customerBvn must be exactly 11 digits");
        example["errors"] = json!([{"field": "customerBvn", "code": "invalid_format", "message": "customerBvn must be exactly 11 digits"}]);
    }
    example
}

fn problem_response(codes: &[ProblemCode], only_headers: Option<&[&str]>) -> Response {
    let status = codes[0].status();
    assert!(
        codes.iter().all(|c| c.status() == status),
        "one response, one status: {codes:?}"
    );
    let mut description = codes
        .iter()
        .map(|c| c.title())
        .collect::<Vec<_>>()
        .join(" / ");
    description.push_str(".\n\n");
    for c in codes {
        description.push_str(&format!("- `{c}`: {}\n", c.description()));
    }
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("Problem")))
        .examples_from_iter(codes.iter().map(|&c| {
            (
                c.as_str(),
                ExampleBuilder::new()
                    .summary(c.title())
                    .value(Some(example(c)))
                    .build(),
            )
        }))
        .build();
    let mut response = ResponseBuilder::new()
        .description(description)
        .content(PROBLEM_JSON, content)
        .extensions(Some(Extensions::from_iter([(
            "x-problem-codes",
            json!(codes),
        )])));
    for h in ERROR_HEADERS
        .iter()
        .filter(|h| only_headers.is_none_or(|only| only.contains(&h.name)))
    {
        let carried: Vec<_> = codes.iter().filter(|c| h.codes.contains(c)).collect();
        if carried.is_empty() {
            continue;
        }
        let when = if carried.len() == codes.len() {
            String::new()
        } else {
            let which: Vec<_> = carried.iter().map(|c| format!("`{c}`")).collect();
            format!(" With {} only.", which.join(", "))
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
                carried.len() == codes.len(),
            ),
        );
    }
    response.build()
}

/// A response header; `required` is set through `extensions` because utoipa's `Header` has no
/// such field (the OpenAPI Header Object does).
pub fn header(schema: impl Into<RefOr<Schema>>, description: &str, required: bool) -> Header {
    let mut header = HeaderBuilder::new()
        .schema(Some(schema))
        .description(Some(description))
        .build();
    if required {
        header.extensions = Some(Extensions::from_iter([("required", true)]));
    }
    header
}
