//! `/events`: a caller's events, their delivery attempts, and resending.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use domain::ids::EventId;
use domain::time::rfc3339;
use domain::{DeliveryStatus, EventType, Mode};
use serde::Serialize;
use serde_json::Value;
use store::audit::Actor;
use store::deliveries::{self, Attempt, Delivery};
use store::events::{self, Event};
use store::paging::Filter;
use utoipa::ToSchema;
use utoipa::openapi::schema::{Object, Type};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use views::Page;

use super::paging::{PageParams, Paging};
use crate::actions::{self, events::ResendError};
use crate::error::responses as problem;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Caller, ClientAddr, Path, QueryPairs};
use crate::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(read))
        .routes(routes!(resend))
}

/// An event: the webhook envelope (the body every delivery of it carries), plus its deliveries
/// when read alone or resent.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Event)]
pub struct EventView {
    /// `evt_…`; also the `webhook-id` header of every delivery of it.
    #[schema(example = "evt_01J9Z6W8Q3X4T5V6B7N8M9P0QR")]
    pub id: String,
    #[schema(schema_with = event_object)]
    pub object: &'static str,
    #[serde(rename = "type")]
    pub event_type: EventType,
    pub mode: Mode,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// The account (`virtualaccount.*`) or the deposit with its `account` (`deposit.*`), as the
    /// API returns them.
    #[schema(value_type = Object)]
    pub data: Value,
    /// Every delivery of the event, with its attempts: only on `GET /events/{id}` and resend.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub deliveries: Option<Vec<DeliveryView>>,
}

/// One delivery of an event: the webhook URL of its latest attempt (or, before any, the one it
/// was made for), and every attempt with the URL it went to.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Delivery)]
pub struct DeliveryView {
    #[schema(example = "whd_01J9Z6W8Q3X4T5V6B7N8M9P0QR")]
    pub id: String,
    pub url: String,
    pub status: DeliveryStatus,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// When the next attempt is due; null once the delivery succeeded or died.
    #[schema(format = DateTime)]
    pub next_attempt_at: Option<String>,
    #[schema(format = DateTime)]
    pub completed_at: Option<String>,
    pub attempts: Vec<AttemptView>,
}

/// One attempt of a delivery.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = DeliveryAttempt)]
pub struct AttemptView {
    #[schema(format = DateTime)]
    pub at: String,
    /// Where it went: the mode's webhook URL at the time of the attempt (an endpoint that moved
    /// gets the attempts after the move). Null when the mode had no webhook URL (nothing was
    /// sent), or for attempts recorded before URLs were kept.
    pub url: Option<String>,
    /// The receiver's HTTP status; 0 when no response came (network error, timeout, refused
    /// target).
    #[schema(minimum = 0, maximum = 599)]
    pub status_code: i32,
    #[schema(minimum = 0)]
    pub duration_ms: i64,
    /// The first 256 bytes of the response body when the answer was not a 2xx; null for a 2xx
    /// or no answer.
    pub response_body: Option<String>,
}

fn event_object() -> Object {
    super::fields::constant(Type::String, "event")
}

impl EventView {
    fn new(event: &Event, deliveries: Option<Vec<DeliveryView>>) -> Self {
        Self {
            id: event.id.to_string(),
            object: "event",
            event_type: event.event_type,
            mode: event.mode,
            created_at: rfc3339(&event.created_at),
            data: serde_json::from_str(&event.data).unwrap_or(Value::Null),
            deliveries,
        }
    }
}

impl DeliveryView {
    fn new(delivery: &Delivery, attempts: &[Attempt]) -> Self {
        Self {
            id: delivery.id.to_string(),
            url: delivery.url.clone(),
            status: delivery.status,
            created_at: rfc3339(&delivery.created_at),
            next_attempt_at: delivery.next_attempt_at.as_ref().map(rfc3339),
            completed_at: delivery.completed_at.as_ref().map(rfc3339),
            attempts: attempts
                .iter()
                .map(|a| AttemptView {
                    at: rfc3339(&a.attempted_at),
                    url: a.url.clone(),
                    status_code: a.status_code,
                    duration_ms: a.duration_ms,
                    response_body: outbound::webhook_reply::shown(
                        a.status_code,
                        a.response_excerpt.as_deref(),
                    ),
                })
                .collect(),
        }
    }
}

/// List events
///
/// The events of the key's mode, newest first, without their deliveries.
#[utoipa::path(
    get,
    path = "/events",
    operation_id = "listEvents",
    tag = "Events",
    security(("bearerAuth" = [])),
    params(
        PageParams,
        ("type" = Option<views::schema::EventType>, Query, description = "Only events of this type."),
    ),
    responses(
        (status = 200, description = "A page of events.", body = Page<EventView>),
        problem::List,
    ),
)]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    query: QueryPairs,
) -> ApiResult<Json<Page<EventView>>> {
    let mut errors = Vec::new();
    let event_type = query.one_of::<EventType>("type", &mut errors);
    let filter = Filter::new(
        "events",
        caller.business_id(),
        caller.mode(),
        &[("type", event_type.map(EventType::as_str))],
    );
    let paging = Paging::checked(&state, &query, filter, errors)?;
    let (fetched, total) = events::list(
        &state.reads.db().await,
        caller.business_id(),
        caller.mode(),
        event_type,
        &paging.request,
    )
    .await?;
    Ok(paging.answer(&state, fetched, total, |e| EventView::new(e, None)))
}

async fn with_deliveries(state: &AppState, event: &Event) -> ApiResult<EventView> {
    let deliveries = deliveries::for_event(&state.db, &event.id)
        .await?
        .iter()
        .map(|(d, attempts)| DeliveryView::new(d, attempts))
        .collect();
    Ok(EventView::new(event, Some(deliveries)))
}

/// Read an event
///
/// The event with every delivery of it and each delivery's attempts.
#[utoipa::path(
    get,
    path = "/events/{id}",
    operation_id = "getEvent",
    tag = "Events",
    security(("bearerAuth" = [])),
    params(("id" = String, Path, description = "The event id, `evt_…`.")),
    responses(
        (status = 200, description = "The event, with its deliveries.", body = EventView),
        problem::ById,
    ),
)]
async fn read(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<EventId>,
) -> ApiResult<Json<EventView>> {
    let event = events::find(&state.db, caller.business_id(), caller.mode(), &id)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(with_deliveries(&state, &event).await?))
}

/// Resend an event
///
/// Schedules the event again, to the mode's current webhook URL, with a fresh set of attempts and
/// the same `webhook-id` (receivers dedupe on it). 409 `invalid_state` when the mode has no
/// webhook URL. A business may resend a configured number of events per minute (both modes and
/// the dashboard's resends together; 60 by default): past it, 429 `rate_limited` with
/// `Retry-After`. Every resend is recorded in the audit log with the key's id and the client's
/// address.
#[utoipa::path(
    post,
    path = "/events/{id}/resend",
    operation_id = "resendEvent",
    tag = "Events",
    security(("bearerAuth" = [])),
    params(("id" = String, Path, description = "The event id, `evt_…`.")),
    responses(
        (status = 202, description = "Scheduled: the event, with its deliveries.", body = EventView),
        problem::ById,
        (status = 409, response = problem::InvalidState),
        (status = 429, response = problem::ResendLimited),
    ),
)]
async fn resend(
    State(state): State<AppState>,
    caller: Caller,
    ClientAddr(client_addr): ClientAddr,
    Path(id): Path<EventId>,
) -> ApiResult<(StatusCode, Json<EventView>)> {
    let event = events::find(&state.db, caller.business_id(), caller.mode(), &id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let actor = Actor::api_key(&caller.0.key_id, client_addr);
    actions::events::resend(&state, &actor, &event).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(with_deliveries(&state, &event).await?),
    ))
}

impl From<ResendError> for ApiError {
    fn from(e: ResendError) -> Self {
        match e {
            e @ ResendError::NoWebhookUrl(_) => ApiError::InvalidState(e.to_string()),
            ResendError::RateLimited { retry_after_secs } => {
                ApiError::RateLimited { retry_after_secs }
            }
            ResendError::Db(e) => e.into(),
        }
    }
}
