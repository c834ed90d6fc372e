//! Liveness, readiness and metrics, for operators.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use bootstrap::Readiness;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::responses as problem;
use crate::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
}

/// The process is alive.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    #[schema(schema_with = ok)]
    pub status: &'static str,
}

fn ok() -> utoipa::openapi::schema::Object {
    super::fields::constant(utoipa::openapi::schema::Type::String, "ok")
}

/// Alive: answers as long as the process serves HTTP.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    tag = "Operations",
    responses(
        (status = 200, description = "The process is alive.", body = Health),
        (status = 403, response = problem::BrowserRefused),
    ),
)]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// Ready: the database and the broker answer.
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "readyz",
    tag = "Operations",
    responses(
        (status = 200, description = "Ready: the database and the broker answer.", body = Readiness),
        (status = 403, response = problem::BrowserRefused),
        (status = 503, description = "Not ready: the database or the broker does not answer.", body = Readiness),
    ),
)]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    bootstrap::readiness(&state.db, state.relay.broker().as_ref()).await
}

/// Prometheus metrics
///
/// The process's metrics in the Prometheus text format (`text/plain; version=0.0.4`): HTTP
/// requests by route and status, jobs published and consumed by queue and outcome, the outbox
/// backlog, provider calls by bank and outcome (and, where webhooks are delivered, deliveries by
/// outcome and the dead-letter count).
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "getMetrics",
    tag = "Operations",
    responses(
        (status = 200, description = "Metrics in the Prometheus text exposition format.", body = String, content_type = "text/plain"),
        (status = 403, response = problem::BrowserRefused),
    ),
)]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    bootstrap::metrics_with_readiness(&state.db, state.relay.broker().as_ref()).await
}
