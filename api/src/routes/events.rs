//! `/events`: a caller's events, their delivery attempts, and resending.

use axum::Router;

use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
}
