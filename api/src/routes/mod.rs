//! Every route, registered once: each module's `routes()` adds its handlers with `routes!`, which
//! gives the axum router its route and the OpenAPI document its operation from the same handler
//! (its `#[utoipa::path]`). `crate::router` serves the result at `/…` and at `/v1/…`.

use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

pub mod accounts;
pub mod deposits;
pub mod docs;
pub mod events;
pub mod fields;
pub mod health;
pub mod paging;
pub mod payouts;
pub mod problems;
pub mod settlement;

/// The API: its router and the operations of its document, from one registration.
pub fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(accounts::routes())
        .merge(deposits::routes())
        .merge(events::routes())
        .merge(settlement::routes())
        .merge(payouts::routes())
        .merge(problems::routes())
        .merge(health::routes())
        .merge(docs::routes())
}
