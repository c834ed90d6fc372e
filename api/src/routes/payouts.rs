//! `/payouts`: create (with the accounts' idempotency machinery), list, get
//! (docs/api/settlement-and-payouts.md).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::ids::PayoutId;
use domain::payout::{NewPayout, PayoutStatus};
use store::audit::Actor;
use store::idempotency::{Key, Scope};
use store::payouts::{self, CreateOutcome, CreateRequest};
use views::{Page, PayoutView};

use crate::error::responses as problem;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Caller, ClientAddr, IdempotentCreate, Path, QueryPairs};
use crate::routes::paging::{PageParams, Paging};
use crate::state::AppState;
use store::paging::Filter;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(read))
}

/// `POST /payouts`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"amount": 500000, "narration": "November payout", "reference": "po-2026-11"}))]
#[allow(dead_code)] // read by `NewPayout::parse` from the JSON object
struct CreatePayoutRequest {
    /// Integer kobo, from 10000 (NGN 100) to `VAS_PAYOUTS__MAX_AMOUNT` (default 500000000).
    #[schema(minimum = 10000)]
    amount: i64,
    /// At most 100 characters.
    #[schema(max_length = 100)]
    narration: Option<String>,
    /// Your own id, 1–100 characters, unique per business and mode: repeating it answers 200
    /// with the existing payout and creates nothing.
    #[schema(min_length = 1, max_length = 100)]
    reference: Option<String>,
}

/// Create a payout
///
/// Pays `amount` out of the available balance to the mode's settlement account. The balance
/// check and the debit are one atomic step. 202 with the pending payout; `payout.succeeded`,
/// `payout.failed` or `payout.reversed` follows. A repeated `Idempotency-Key` with the same body
/// returns the first status and the payout as it is now, with `Idempotent-Replayed: true`.
#[utoipa::path(
    post,
    path = "/payouts",
    operation_id = "createPayout",
    tag = "Settlement and payouts",
    security(("bearerAuth" = [])),
    params(
        ("Idempotency-Key" = String, Header, min_length = 1, max_length = 200,
            description = "Your key for this request, 1–200 characters, the same on every retry of it. Kept at least 24 hours, per business and mode."),
    ),
    request_body(content = CreatePayoutRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "`reference` already names a payout: that payout; nothing was created.",
            body = PayoutView, headers(
                ("Idempotent-Replayed" = String, description = "`true` when this answer replays an earlier request with the same Idempotency-Key."))),
        (status = 202, description = "Created, pending; the amount is taken from the available balance.",
            body = PayoutView, headers(
                ("Idempotent-Replayed" = String, description = "`true` when this answer replays an earlier request with the same Idempotency-Key."))),
        (status = 400, response = problem::CreateBadRequest),
        problem::Authenticated,
        (status = 409, response = problem::PayoutConflict),
        problem::JsonBody,
        (status = 422, response = problem::PayoutUnprocessable),
    ),
)]
async fn create(
    State(state): State<AppState>,
    ClientAddr(client_addr): ClientAddr,
    create: IdempotentCreate,
) -> ApiResult<Response> {
    let caller = &create.caller;
    let actor = Actor::api_key(&caller.0.key_id, client_addr);
    let payout = NewPayout::parse(&create.body, state.config.payouts.max_amount)
        .map_err(ApiError::Validation)?;
    let digest = create.digest(&state.cipher);
    let request = CreateRequest {
        business_id: caller.business_id(),
        mode: caller.mode(),
        idempotency: Some(Key {
            business_id: caller.business_id(),
            mode: caller.mode(),
            scope: Scope::Payouts,
            key: &create.key,
            request: &digest,
        }),
        payout: &payout,
        actor: Some(&actor),
    };
    let mut headers = HeaderMap::new();
    let (status, payout) = match payouts::create(&state.db, &request).await? {
        CreateOutcome::Created(payout) => {
            state.relay.kick();
            tracing::info!(payout_id = %payout.id, amount = payout.amount, "payout created");
            (StatusCode::ACCEPTED, payout)
        }
        CreateOutcome::Replayed { payout, status } => {
            headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
            let status = StatusCode::from_u16(status).map_err(|e| ApiError::Internal(e.into()))?;
            (status, payout)
        }
        CreateOutcome::ReferenceHit(payout) => (StatusCode::OK, payout),
        CreateOutcome::KeyReused => return Err(ApiError::IdempotencyKeyReused),
        CreateOutcome::KeyInFlight => return Err(ApiError::IdempotencyKeyInUse),
        CreateOutcome::SettlementAccountMissing => return Err(ApiError::SettlementAccountMissing),
        CreateOutcome::OnHold { retry_after_secs } => {
            return Err(ApiError::PayoutsOnHold { retry_after_secs });
        }
        CreateOutcome::InsufficientBalance { available } => {
            return Err(ApiError::InsufficientBalance { available });
        }
    };
    Ok((status, headers, Json(PayoutView::from(&payout))).into_response())
}

/// List payouts
///
/// The key's business and mode only, newest first.
#[utoipa::path(
    get,
    path = "/payouts",
    operation_id = "listPayouts",
    tag = "Settlement and payouts",
    security(("bearerAuth" = [])),
    params(
        PageParams,
        ("status" = Option<PayoutStatus>, Query, description = "Only payouts in this status."),
    ),
    responses(
        (status = 200, description = "A page of payouts.", body = Page<PayoutView>),
        problem::List,
    ),
)]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    query: QueryPairs,
) -> ApiResult<Json<Page<PayoutView>>> {
    let mut errors = Vec::new();
    let status = query.one_of::<PayoutStatus>("status", &mut errors);
    let filter = Filter::new(
        "payouts",
        caller.business_id(),
        caller.mode(),
        &[("status", status.map(|s| s.as_str()))],
    );
    let paging = Paging::checked(&state, &query, filter, errors)?;
    let (fetched, total) = payouts::list(
        &state.reads.db().await,
        caller.business_id(),
        caller.mode(),
        status,
        &paging.request,
    )
    .await?;
    Ok(paging.answer(&state, fetched, total, |p| PayoutView::from(p)))
}

/// Get a payout
#[utoipa::path(
    get,
    path = "/payouts/{id}",
    operation_id = "getPayout",
    tag = "Settlement and payouts",
    security(("bearerAuth" = [])),
    params(("id" = String, Path, description = "The payout id, `po_…`.")),
    responses(
        (status = 200, description = "The payout.", body = PayoutView),
        problem::ById,
    ),
)]
async fn read(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<PayoutId>,
) -> ApiResult<Json<PayoutView>> {
    let payout = payouts::find(&state.db, caller.business_id(), caller.mode(), &id)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(PayoutView::from(&payout)))
}
