use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::state::AppState;

/// Alive: answers as long as the process serves HTTP.
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Ready: the database answers.
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    match state.db.ping().await {
        Ok(()) => (
            StatusCode::OK,
            Json(json!({"status": "ok", "database": "ok"})),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "database not reachable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"status": "unavailable", "database": "unreachable"})),
            )
        }
    }
}
