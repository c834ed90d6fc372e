//! `/settlement-account`, `/banks`, `/balance` and `/balance/transactions`
//! (docs/api/settlement-and-payouts.md).

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::payout::SettlementRequest;
use domain::settlement_banks::SETTLEMENT_BANKS;
use store::audit::Actor;
use store::{ledger, payouts};
use views::{BalanceTransactionView, BalanceView, Page, SettlementAccountView};

use crate::actions::{self, settlement::SettlementError};
use crate::error::responses as problem;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Caller, ClientAddr, JsonObject, QueryPairs};
use crate::routes::paging::{PageParams, Paging};
use crate::state::AppState;
use store::paging::Filter;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_settlement_account, get_settlement_account))
        .routes(routes!(banks))
        .routes(routes!(balance))
        .routes(routes!(balance_transactions))
}

/// `PUT /settlement-account`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"bankCode": "058", "accountNumber": "0123456785", "schedule": "manual"}))]
#[allow(dead_code)] // read by `SettlementRequest::parse` from the JSON object
struct SettlementAccountRequest {
    /// A bank of `GET /banks` (3-digit CBN code).
    #[schema(pattern = "^[0-9]{3}$")]
    bank_code: String,
    /// The 10-digit NUBAN, its check digit valid for that bank.
    #[schema(pattern = "^[0-9]{10}$")]
    account_number: String,
    /// `manual` (default) or `daily`.
    #[schema(value_type = Option<String>, example = "manual")]
    schedule: Option<String>,
}

/// Set the settlement account
///
/// Checks the NUBAN for the bank, asks the payout provider for the account's name (name
/// enquiry) and stores it for the key's mode, replacing any earlier one. Emits
/// `settlement_account.updated`. In live mode a new bank or number holds payouts for 24 hours
/// (`payoutsAvailableAt`).
#[utoipa::path(
    put,
    path = "/settlement-account",
    operation_id = "setSettlementAccount",
    tag = "Settlement and payouts",
    security(("bearerAuth" = [])),
    request_body(content = SettlementAccountRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "Stored.", body = SettlementAccountView),
        (status = 400, response = problem::BadRequest),
        problem::Authenticated,
        problem::JsonBody,
        (status = 422, response = problem::SettlementUnprocessable),
        (status = 503, response = problem::ProviderUnavailable),
    ),
)]
async fn put_settlement_account(
    State(state): State<AppState>,
    caller: Caller,
    ClientAddr(client_addr): ClientAddr,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<SettlementAccountView>> {
    let request = SettlementRequest::parse(&body).map_err(ApiError::Validation)?;
    let actor = Actor::api_key(&caller.0.key_id, client_addr);
    let stored = actions::settlement::change(
        &state,
        &actor,
        caller.business_id(),
        caller.mode(),
        &request,
    )
    .await?;
    Ok(Json(SettlementAccountView::from(&stored)))
}

/// Get the settlement account
#[utoipa::path(
    get,
    path = "/settlement-account",
    operation_id = "getSettlementAccount",
    tag = "Settlement and payouts",
    security(("bearerAuth" = [])),
    responses(
        (status = 200, description = "The mode's settlement account.", body = SettlementAccountView),
        problem::ById,
    ),
)]
async fn get_settlement_account(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<SettlementAccountView>> {
    let found = payouts::find_settlement_account(&state.db, caller.business_id(), caller.mode())
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(SettlementAccountView::from(&found)))
}

/// A bank a settlement account can be at.
#[derive(Debug, Serialize, ToSchema)]
pub struct BankEntry {
    /// The 3-digit CBN code.
    #[schema(example = "058")]
    pub code: &'static str,
    #[schema(example = "Guaranty Trust Bank")]
    pub name: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BankList {
    pub data: Vec<BankEntry>,
}

/// List settlement banks
///
/// The commercial banks a settlement account can be at, with their CBN codes, by name.
#[utoipa::path(
    get,
    path = "/banks",
    operation_id = "listBanks",
    tag = "Settlement and payouts",
    security(("bearerAuth" = [])),
    responses(
        (status = 200, description = "The banks.", body = BankList),
        problem::Authenticated,
    ),
)]
async fn banks(_caller: Caller) -> Json<BankList> {
    Json(BankList {
        data: SETTLEMENT_BANKS
            .iter()
            .map(|b| BankEntry {
                code: b.code,
                name: b.name,
            })
            .collect(),
    })
}

/// Get the balance
///
/// The key's mode: `available` (the ledger's sum) and `inFlight` (payouts still pending or
/// processing).
#[utoipa::path(
    get,
    path = "/balance",
    operation_id = "getBalance",
    tag = "Settlement and payouts",
    security(("bearerAuth" = [])),
    responses(
        (status = 200, description = "The balance.", body = BalanceView),
        problem::Authenticated,
    ),
)]
async fn balance(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<BalanceView>> {
    let found = ledger::find(&state.db, caller.business_id(), caller.mode()).await?;
    let in_flight = payouts::in_flight(&state.db, caller.business_id(), caller.mode()).await?;
    Ok(Json(BalanceView::new(
        caller.mode(),
        found.as_ref(),
        in_flight,
    )))
}

/// List balance transactions
///
/// The ledger, newest first: `deposit` (+), `payout` (−), `payout_return` (+).
#[utoipa::path(
    get,
    path = "/balance/transactions",
    operation_id = "listBalanceTransactions",
    tag = "Settlement and payouts",
    security(("bearerAuth" = [])),
    params(
        PageParams,
    ),
    responses(
        (status = 200, description = "A page of entries.", body = Page<BalanceTransactionView>),
        problem::List,
    ),
)]
async fn balance_transactions(
    State(state): State<AppState>,
    caller: Caller,
    query: QueryPairs,
) -> ApiResult<Json<Page<BalanceTransactionView>>> {
    let filter = Filter::new("ledger", caller.business_id(), caller.mode(), &[]);
    let paging = Paging::checked(&state, &query, filter, Vec::new())?;
    let (fetched, total) = ledger::list(
        &state.reads.db().await,
        caller.business_id(),
        caller.mode(),
        &paging.request,
    )
    .await?;
    Ok(paging.answer(&state, fetched, total, |e| BalanceTransactionView::from(e)))
}

impl From<SettlementError> for ApiError {
    fn from(e: SettlementError) -> Self {
        match e {
            SettlementError::BankAccountNotFound => ApiError::BankAccountNotFound,
            SettlementError::ProviderUnavailable { retry_after_secs } => {
                ApiError::ProviderUnavailable { retry_after_secs }
            }
            SettlementError::Db(e) => e.into(),
        }
    }
}
