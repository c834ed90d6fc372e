//! The OpenAPI 3.1 document (`GET /openapi.json`, page at `GET /docs`), both served at `/…` and
//! at `/v1/…`.
//!
//! The document is generated: its operations come from the one route registration
//! (`crate::routes::api`, each handler's `#[utoipa::path]` and the request and response types
//! beside it), its error responses from the problem catalogue (`crate::error`). This module adds
//! what is not any route's: the title, servers, tags, the security scheme, and the conventions
//! every operation shares. It depends on no route, so routes and document have no import cycle.
//!
//! `/v1`: every path is served twice. The document lists each path once and declares two servers,
//! `/v1` (first, the one to use) and `/`; `api/tests/it/openapi.rs` checks that every documented
//! operation answers under both.

use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::header::Header;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Ref, RefOr, Required};
use utoipa::{Modify, OpenApi};

use crate::error::responses::{self, header};

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

**Errors** are `application/problem+json` (RFC 9457), every one the `Problem` schema, with a \
stable `code`; `type` is `/problems/{code}`, which this service serves. A 422 lists every invalid \
field in `errors`.

**Idempotency.** Creating an account needs an `Idempotency-Key` (1–200 characters): a retry with \
the same key and body returns the first answer (`Idempotent-Replayed: true`) and creates nothing.";

/// The name of the bearer security scheme the authenticated operations require.
pub const BEARER: &str = "bearerAuth";

/// What is not any route's; `document` adds the registered operations.
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
    components(
        schemas(
            crate::error::Problem,
            views::schema::Mode,
            views::schema::AccountStatus,
            views::schema::Bank,
            views::schema::IdentityType,
            views::schema::DepositStatus,
            views::schema::DepositSource,
            views::schema::RecheckStatus,
            views::schema::EventType,
        ),
    ),
    tags(
        (name = "Virtual accounts", description = "Dedicated account numbers for your customers."),
        (name = "Deposits", description = "Money received on virtual accounts, and simulated deposits in test mode."),
        (name = "Rechecks", description = "Asking the provider bank again for deposits that were not notified."),
        (name = "Provider notifications", description = "Called by the provider banks, not by businesses: signed deposit and transfer notifications."),
        (name = "Settlement and payouts", description = "The settlement account, the balance and its ledger, and payouts to the settlement account."),
        (name = "Events", description = "Events, their webhook deliveries and attempts, and resending them."),
        (name = "Problems", description = "What each error `type` means."),
        (name = "Operations", description = "Health, readiness and metrics for operators."),
        (name = "Documentation", description = "This document and its page."),
    ),
)]
struct ApiDoc;

/// The whole document: `registered` (the operations of `crate::routes::api`) with the title,
/// servers, tags, error responses and shared conventions.
pub fn document(registered: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    let mut document = ApiDoc::openapi();
    document.merge(registered);
    let components = document.components.get_or_insert_with(Default::default);
    components.responses.extend(
        responses::all()
            .into_iter()
            .map(|(name, response)| (name.to_owned(), response)),
    );
    Conventions.modify(&mut document);
    document
}

// ── Conventions every operation shares ─────────────────────────────────────────────────────────

/// Adds what every operation shares rather than repeating it in each annotation: the bearer
/// security scheme, the optional `X-Request-Id` request header, the `X-Request-Id` response header
/// on every response, and `required` on the rate-limit headers of account creation (utoipa's
/// `headers(..)` cannot say it).
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
    // Every authenticated operation can meet the limit on failed authentications per client
    // address (429 `rate_limited` with `Retry-After` only, before the key is even looked up).
    // Account creation keeps its own 429, which also documents its creation limit's headers.
    if operation.security.as_ref().is_some_and(|s| !s.is_empty()) {
        operation
            .responses
            .responses
            .entry("429".into())
            .or_insert_with(|| {
                RefOr::Ref(Ref::new(
                    "#/components/responses/FailedAuthenticationsLimited",
                ))
            });
    }
    // A body that does not arrive within the body-read limit is answered 408.
    if operation.request_body.is_some() {
        operation
            .responses
            .responses
            .entry("408".into())
            .or_insert_with(|| RefOr::Ref(Ref::new("#/components/responses/RequestTimeout")));
    }
    // Whatever can fail inside (a 500) can meet a database failover: 503 with Retry-After.
    // Operations that already answer 503 for a bank say both codes.
    if operation.responses.responses.contains_key("500") {
        let unavailable = if operation.responses.responses.contains_key("503") {
            "#/components/responses/ProviderOrServiceUnavailable"
        } else {
            "#/components/responses/ServiceUnavailable"
        };
        operation
            .responses
            .responses
            .insert("503".into(), RefOr::Ref(Ref::new(unavailable)));
    }
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
