use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::state::AppState;

/// Alive: answers as long as the process serves HTTP.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    tag = "Operations",
    responses(
        (status = 200, description = "The process is alive.", body = crate::openapi::Health),
        (status = 403, response = crate::openapi::BrowserRefused),
    ),
)]
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Ready: the database and the broker answer.
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "readyz",
    tag = "Operations",
    responses(
        (status = 200, description = "Ready: the database and the broker answer.", body = crate::openapi::Readiness),
        (status = 403, response = crate::openapi::BrowserRefused),
        (status = 503, description = "Not ready: the database or the broker does not answer.", body = crate::openapi::Readiness),
    ),
)]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    shared::bootstrap::readiness(&state.db, state.relay.broker().as_ref()).await
}
