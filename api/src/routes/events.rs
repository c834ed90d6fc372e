//! `/events`: a caller's events, their delivery attempts, and resending.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::Value;
use shared::db::deliveries::{self, Attempt, Delivery};
use shared::db::events::{self, Event};
use shared::domain::FieldError;
use shared::time::rfc3339;
use shared::views::Page;

use crate::error::{ApiError, ApiResult};
use crate::extract::{Caller, QueryPairs};
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/events", get(list))
        .route("/events/{id}", get(read))
        .route("/events/{id}/resend", post(resend))
}

/// An event as callers read it: the webhook envelope, plus its deliveries when read alone.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    pub id: String,
    pub object: &'static str,
    #[serde(rename = "type")]
    pub event_type: String,
    pub mode: String,
    pub created_at: String,
    pub data: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<Vec<DeliveryView>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryView {
    pub id: String,
    pub url: String,
    pub status: String,
    pub created_at: String,
    pub next_attempt_at: Option<String>,
    pub completed_at: Option<String>,
    pub attempts: Vec<AttemptView>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptView {
    pub at: String,
    /// 0 when no response came.
    pub status_code: i32,
    pub duration_ms: i64,
    pub response_body: Option<String>,
}

impl EventView {
    fn new(event: &Event, deliveries: Option<Vec<DeliveryView>>) -> Self {
        Self {
            id: event.id.clone(),
            object: "event",
            event_type: event.event_type.clone(),
            mode: event.mode.clone(),
            created_at: rfc3339(&event.created_at),
            data: serde_json::from_str(&event.data).unwrap_or(Value::Null),
            deliveries,
        }
    }
}

impl DeliveryView {
    fn new(delivery: &Delivery, attempts: &[Attempt]) -> Self {
        Self {
            id: delivery.id.clone(),
            url: delivery.url.clone(),
            status: delivery.status.clone(),
            created_at: rfc3339(&delivery.created_at),
            next_attempt_at: delivery.next_attempt_at.as_ref().map(rfc3339),
            completed_at: delivery.completed_at.as_ref().map(rfc3339),
            attempts: attempts
                .iter()
                .map(|a| AttemptView {
                    at: rfc3339(&a.attempted_at),
                    status_code: a.status_code,
                    duration_ms: a.duration_ms,
                    response_body: a.response_excerpt.clone(),
                })
                .collect(),
        }
    }
}

async fn list(
    State(state): State<AppState>,
    caller: Caller,
    query: QueryPairs,
) -> ApiResult<Json<Page<EventView>>> {
    let mut errors = Vec::new();
    let page = query.int("page", 1, 1, 1_000_000, &mut errors);
    let page_size = query.int("pageSize", 20, 1, 100, &mut errors);
    let event_type = query.get("type");
    if let Some(t) = event_type
        && !events::TYPES.contains(&t)
    {
        errors.push(FieldError::new(
            "type",
            "invalid_value",
            format!("type must be one of {}", events::TYPES.join(", ")),
        ));
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let (rows, total) = events::list(
        &state.db,
        caller.business_id(),
        caller.mode(),
        event_type,
        page,
        page_size,
    )
    .await?;
    let data = rows.iter().map(|e| EventView::new(e, None)).collect();
    Ok(Json(Page::new(data, page, page_size, total)))
}

async fn with_deliveries(state: &AppState, event: &Event) -> ApiResult<EventView> {
    let deliveries = deliveries::for_event(&state.db, &event.id)
        .await?
        .iter()
        .map(|(d, attempts)| DeliveryView::new(d, attempts))
        .collect();
    Ok(EventView::new(event, Some(deliveries)))
}

async fn read(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<EventView>> {
    let event = events::find(&state.db, caller.business_id(), caller.mode(), &id)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(with_deliveries(&state, &event).await?))
}

/// 202 with the event: a fresh schedule for it to the mode's current URL (same `webhook-id`).
async fn resend(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<(StatusCode, Json<EventView>)> {
    let event = events::find(&state.db, caller.business_id(), caller.mode(), &id)
        .await?
        .ok_or(ApiError::NotFound)?;
    match deliveries::resend(&state.db, &event, shared::time::now()).await? {
        Some(delivery) => {
            state.relay.kick();
            tracing::info!(event_id = %event.id, delivery_id = %delivery.id, "event resend requested");
        }
        None => {
            return Err(ApiError::InvalidState(format!(
                "no webhook URL is configured for {} mode",
                caller.mode()
            )));
        }
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(with_deliveries(&state, &event).await?),
    ))
}
