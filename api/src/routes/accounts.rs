//! `/virtual-accounts`: create, list, get, deactivate.

use std::borrow::Cow;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AllOfBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType};
use utoipa::{PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::ids::AccountId;
use domain::provider::{ProvisioningOutcome, provisioning_outcome};
use domain::validation::{FieldError, reject_unknown};
use domain::{AccountStatus, Mode, NewAccount};
use outbound::providers::{self, ProviderError};
use store::accounts::{
    self, CreateOutcome, CreateRequest, DeactivateOutcome, LimitState, ListQuery,
};
use store::audit::Actor;
use store::paging::Filter;
use views::{AccountView, Page};

use super::fields::Text;
use super::paging::{PageParams, Paging};
use crate::error::responses as problem;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Caller, ClientAddr, IdempotentCreate, OptionalJsonObject, Path, QueryPairs};
use crate::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(read))
        .routes(routes!(deactivate))
}

// The rules are those `domain::NewAccount::parse` applies (the handler reads the body with it);
// `tests::the_create_schema_states_the_rules_new_account_parse_applies` holds the two together.
/// `POST /virtual-accounts`. Exactly one of `customerBvn` and `customerNin`; unknown members are
/// refused (`unknown_field`); every invalid field is listed in one 422.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({
    "customerName": "Ada Obi", "customerEmail": "ada@example.com", "customerPhone": "08031234567",
    "customerBvn": "22212345678", "preferredBank": "test-bank", "customerReference": "user-42"
}))]
#[allow(dead_code)] // read by `NewAccount::parse` from the JSON object, not through this type
struct CreateAccountFields {
    /// 1–100 characters after trimming, no control characters.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = r"^\s*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
    )]
    customer_name: String,
    /// A valid address whose domain has a dot; at most 254 characters.
    #[schema(format = Email, max_length = 254, example = "ada@example.com")]
    customer_email: String,
    /// A Nigerian mobile number: `0XXXXXXXXXX`, `234XXXXXXXXXX` or `+234XXXXXXXXXX`, in a mobile
    /// range (the pattern follows libphonenumber's ranges, which the service checks); returned
    /// normalised to E.164.
    #[schema(
        pattern = r"^(0|234|\+234)((702[0-24-9]|819[01])[0-9]{6}|(7(0[13-9]|[12][0-9])|8(0[1-9]|1[0-8])|9(0[1-9]|1[1-6]))[0-9]{7})$",
        example = "08031234567"
    )]
    customer_phone: String,
    /// Bank Verification Number: 11 ASCII digits. Never returned.
    #[schema(value_type = String, required = false, pattern = "^[0-9]{11}$", min_length = 11, max_length = 11, example = "22212345678")]
    customer_bvn: Option<String>,
    /// National Identification Number: 11 ASCII digits. Never returned.
    #[schema(value_type = String, required = false, pattern = "^[0-9]{11}$", min_length = 11, max_length = 11)]
    customer_nin: Option<String>,
    /// One allowed in the key's mode: `test-bank` is refused with a live key.
    #[schema(value_type = views::schema::Bank)]
    preferred_bank: String,
    /// Your reference for the customer, 1–100 characters. While it has a `pending` or `active`
    /// account, creating again returns that account with 200.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
    )]
    customer_reference: Option<String>,
}

/// The create body's schema: its fields, and exactly one of `customerBvn` and `customerNin`
/// (`allOf: [<the fields>, oneOf: [required customerBvn, required customerNin]]`), a rule a
/// derived schema cannot state.
pub struct CreateAccountRequest;

impl PartialSchema for CreateAccountRequest {
    fn schema() -> RefOr<Schema> {
        let requires = |field: &str| {
            ObjectBuilder::new()
                .schema_type(SchemaType::AnyValue)
                .required(field)
                .build()
        };
        let fields = CreateAccountFields::schema();
        let description = match &fields {
            RefOr::T(Schema::Object(o)) => o.description.clone(),
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
}

impl ToSchema for CreateAccountRequest {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("CreateAccountRequest")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        CreateAccountFields::schemas(schemas);
    }
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
    request_body(content = CreateAccountRequest, content_type = "application/json"),
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
        (status = 400, response = problem::CreateBadRequest),
        problem::Authenticated,
        (status = 409, response = problem::IdempotencyKeyInUse),
        problem::JsonBody,
        (status = 422, response = problem::CreateUnprocessable),
        (status = 429, response = problem::RateLimited),
    ),
)]
async fn create(State(state): State<AppState>, create: IdempotentCreate) -> ApiResult<Response> {
    let caller = &create.caller;
    let account = NewAccount::parse(&create.body, caller.mode()).map_err(ApiError::Validation)?;
    let digest = create.digest(&state.cipher);
    let provider_timeout = Duration::from_millis(state.config.http.provider_timeout_ms);
    let request = CreateRequest {
        business_id: caller.business_id(),
        business_name: &caller.0.business_name,
        mode: caller.mode(),
        key_id: &caller.0.key_id,
        idempotency_key: &create.key,
        request: &digest,
        account: &account,
        limit_per_hour: state.config.limits.accounts_per_hour,
        provider_grace: chrono::Duration::from_std(provider_timeout).unwrap_or_default()
            + chrono::Duration::seconds(5),
    };
    let turn = state
        .creations
        .enter(request.business_id, request.mode)
        .await?;
    let (outcome, limit) =
        accounts::create(&state.db, &state.cipher, &request, domain::time::now()).await?;
    // The bank is asked outside the business's turn: it holds no lock in the database.
    drop(turn);
    let mut headers = rate_limit_headers(&limit);
    let (status, account) = match outcome {
        CreateOutcome::Started {
            account: created,
            job_id,
        } => {
            let answered = open_at_provider(
                &state,
                &created,
                account.preferred_bank,
                request.mode,
                provider_timeout,
            )
            .await;
            let (settled, status) = accounts::settle_creation(
                &state.db,
                &request,
                &created.id,
                &job_id,
                answered,
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

/// Asks the bank for the account within `timeout`; [`provisioning_outcome`] reads the answer, as
/// the provisioning worker's are read. Anything but a clear answer (timeout, outage, an
/// unconfigured bank) is `Pending`: the account waits and the provisioning job takes over, so a
/// provider outage never fails a creation.
async fn open_at_provider(
    state: &AppState,
    created: &accounts::Account,
    bank: domain::Bank,
    mode: Mode,
    timeout: Duration,
) -> ProvisioningOutcome {
    let open = match accounts::open_request(&state.cipher, created) {
        Ok(open) => open,
        Err(e) => {
            tracing::error!(account_id = %created.id, error = %e, "cannot build the open request; the worker takes over");
            return ProvisioningOutcome::Pending;
        }
    };
    let result = state
        .providers
        .open_account(bank, mode, &open, timeout)
        .await;
    if let Err(e) = &result
        && !matches!(e, ProviderError::Rejected(_))
    {
        tracing::warn!(account_id = %created.id, bank = bank.slug(), error = %e, "provider did not settle the creation; the worker takes over");
    }
    provisioning_outcome(providers::answer(result))
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
        PageParams,
        ("q" = Option<String>, Query, max_length = 200, description = "Search text, at most 200 characters."),
        ("status" = Option<views::schema::AccountStatus>, Query, description = "Only accounts in this status."),
    ),
    responses(
        (status = 200, description = "A page of accounts.", body = Page<AccountView>),
        problem::List,
    ),
)]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    query: QueryPairs,
) -> ApiResult<Json<Page<AccountView>>> {
    let mut errors = Vec::new();
    let status = query.one_of::<AccountStatus>("status", &mut errors);
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
    let filter = Filter::new(
        "accounts",
        caller.business_id(),
        caller.mode(),
        &[("q", q), ("status", status.map(AccountStatus::as_str))],
    );
    let paging = Paging::checked(&state, &query, filter, errors)?;
    let (fetched, total) = accounts::list(
        &state.reads.db().await,
        caller.business_id(),
        caller.mode(),
        &ListQuery {
            request: &paging.request,
            q,
            status,
            exact_total_up_to: state.config.limits.list_exact_total,
        },
    )
    .await?;
    Ok(paging.answer(&state, fetched, total, |a| AccountView::from(a)))
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
        problem::ById,
    ),
)]
async fn read(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<AccountId>,
) -> ApiResult<Json<AccountView>> {
    let account = accounts::find(&state.db, caller.business_id(), caller.mode(), &id)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(AccountView::from(&account)))
}

/// `POST /virtual-accounts/{id}/deactivate`: the body is optional.
#[derive(Debug, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeactivateRequest {
    #[schema(schema_with = reason_schema)]
    pub reason: Option<String>,
}

const REASON: Text = Text {
    name: "reason",
    min: 1,
    max: 200,
    trim: true,
    about: "Why, for your records:",
};

fn reason_schema() -> utoipa::openapi::schema::Object {
    REASON.schema()
}

impl DeactivateRequest {
    fn parse(body: &Map<String, Value>) -> ApiResult<Self> {
        let mut errors = Vec::new();
        reject_unknown(body, &[REASON.name], &mut errors);
        let reason = REASON.read(body, &mut errors);
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        Ok(Self { reason })
    }
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
    request_body(content = Option<DeactivateRequest>, content_type = "application/json",
        description = "Optional: send no body, or `{\"reason\": \"…\"}`."),
    responses(
        (status = 200, description = "The account, now deactivated.", body = AccountView),
        (status = 400, response = problem::BadRequest),
        problem::ById,
        (status = 409, response = problem::InvalidState),
        problem::JsonBody,
        (status = 422, response = problem::ValidationFailed),
    ),
)]
async fn deactivate(
    State(state): State<AppState>,
    caller: Caller,
    ClientAddr(client_addr): ClientAddr,
    Path(id): Path<AccountId>,
    OptionalJsonObject(body): OptionalJsonObject,
) -> ApiResult<Json<AccountView>> {
    let DeactivateRequest { reason } = DeactivateRequest::parse(&body)?;
    let outcome = accounts::deactivate(
        &state.db,
        &Actor::api_key(&caller.0.key_id, client_addr),
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
    use domain::Bank;
    use serde_json::json;

    /// Whether a string `value` satisfies a string property's schema (type, lengths, pattern,
    /// enum): what a client validating against the document would decide.
    fn schema_accepts(property: &Value, value: &str) -> bool {
        let property = match property.get("$ref").and_then(Value::as_str) {
            Some("#/components/schemas/Bank") => {
                serde_json::to_value(views::schema::Bank::schema()).unwrap()
            }
            Some(other) => panic!("unexpected reference {other}"),
            None => property.clone(),
        };
        let chars = value.chars().count() as u64;
        property["minLength"]
            .as_u64()
            .is_none_or(|min| chars >= min)
            && property["maxLength"]
                .as_u64()
                .is_none_or(|max| chars <= max)
            && property["pattern"]
                .as_str()
                .is_none_or(|p| regex::Regex::new(p).unwrap().is_match(value))
            && property["enum"]
                .as_array()
                .is_none_or(|values| values.iter().any(|v| v == value))
    }

    #[test]
    fn the_deactivate_body_declares_what_it_reads() {
        super::super::fields::assert_declares_what_it_reads::<DeactivateRequest, _>(
            DeactivateRequest::parse,
        );
    }

    #[test]
    fn the_create_schema_states_the_rules_new_account_parse_applies() {
        let schema = serde_json::to_value(CreateAccountRequest::schema()).unwrap();
        let fields = &schema["allOf"][0];
        let properties = fields["properties"].as_object().unwrap();
        let valid = json!({
            "customerName": "Ada Obi", "customerEmail": "ada@example.com",
            "customerPhone": "08031234567", "customerBvn": "22212345678",
            "preferredBank": "test-bank", "customerReference": "user-42"
        });
        // The fields `field` has errors on, with `value` in place of the valid one.
        let refused = |field: &str, value: Option<Value>| -> bool {
            let mut body = valid.as_object().unwrap().clone();
            if field == "customerNin" {
                body.remove("customerBvn");
            }
            match value {
                Some(v) => body.insert(field.to_owned(), v),
                None => body.remove(field),
            };
            match NewAccount::parse(&body, Mode::Test) {
                Ok(_) => false,
                Err(errors) => errors.iter().any(|e| e.field == field),
            }
        };

        // The members: every declared one is read, any other is refused.
        assert!(refused("nickname", Some(json!("x"))), "undeclared member");
        assert_eq!(fields["additionalProperties"], false);
        let required: Vec<_> = fields["required"].as_array().unwrap().iter().collect();
        for name in properties.keys() {
            let must = required.iter().any(|r| *r == name);
            if name != "customerBvn" && name != "customerNin" {
                assert_eq!(refused(name, None), must, "{name}: required?");
            }
        }
        assert!(
            refused("customerBvn", Some(Value::Null)),
            "neither identity"
        );

        let long = |n: usize| "x".repeat(n);
        let email = |tail: usize| {
            format!(
                "{}@{}.{}.{}.com",
                "a".repeat(64),
                "b".repeat(63),
                "c".repeat(63),
                "d".repeat(tail)
            )
        };
        let samples: Vec<(&str, Vec<String>)> = vec![
            (
                "customerName",
                vec![
                    "A".into(),
                    " Ada ".into(),
                    long(100),
                    long(101),
                    String::new(),
                    "   ".into(),
                    "a\u{1}b".into(),
                    "a\u{85}b".into(),
                ],
            ),
            ("customerEmail", vec![email(57), email(58)]),
            (
                "customerPhone",
                vec![
                    "08031234567".into(),
                    "+2347061234567".into(),
                    "2349051234567".into(),
                    "0803123456".into(),
                    "080312345678".into(),
                    "+44803123456".into(),
                ],
            ),
            (
                "customerBvn",
                vec![
                    "22212345678".into(),
                    "2221234567".into(),
                    "222123456789".into(),
                    "2221234567a".into(),
                ],
            ),
            (
                "customerNin",
                vec!["22212345678".into(), "2221234567".into()],
            ),
            (
                "preferredBank",
                Bank::ALL
                    .iter()
                    .map(|b| b.slug().to_owned())
                    .chain(["nope".to_owned()])
                    .collect(),
            ),
            (
                "customerReference",
                vec![
                    "user-42".into(),
                    " a ".into(),
                    long(100),
                    long(101),
                    String::new(),
                    "   ".into(),
                    "a\tb".into(),
                ],
            ),
        ];
        for (field, values) in samples {
            assert!(properties.contains_key(field), "{field} is documented");
            for value in values {
                assert_eq!(
                    schema_accepts(&properties[field], &value),
                    !refused(field, Some(json!(value))),
                    "{field} = {value:?}: the schema and NewAccount::parse disagree"
                );
            }
        }
    }
}
