//! The HTTP API and the `api` command's subcommands (serve, migrate, dev, admin).

pub mod actions;
pub mod cli;
pub mod cookies;
pub mod dashboard;
pub mod error;
pub mod extract;
pub mod openapi;
pub mod passwords;
pub mod request_id;
pub mod routes;
pub mod runtime;
pub mod state;

use axum::extract::Request;
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Extension, Router};

pub use state::AppState;

use crate::error::ApiError;

/// Every route, served at `/…` and at `/v1/…`, with the OpenAPI document built from the same
/// registration (`routes::api`).
pub fn router(state: AppState) -> Router {
    ops::metrics::install();
    let (api, registered) = routes::api().split_for_parts();
    let document = openapi::document(registered)
        .to_pretty_json()
        .expect("the OpenAPI document serialises");
    let api = api.layer(Extension(routes::docs::Document(document.into())));
    Router::new()
        .merge(api.clone())
        .nest("/v1", api)
        .merge(dashboard::router(state.cookies))
        // A person who opens the service's address lands on the dashboard; not an API
        // operation, so not in the OpenAPI document.
        .route("/", get(|| async { Redirect::to("/dashboard/") }))
        .fallback(
            |method: axum::http::Method, uri: axum::http::Uri| async move {
                if dashboard::owns(uri.path()) {
                    dashboard::unrouted(&method, &uri)
                } else {
                    ApiError::NotFound.into_response()
                }
            },
        )
        .method_not_allowed_fallback(|uri: axum::http::Uri| async move {
            if dashboard::owns(uri.path()) {
                dashboard::method_not_allowed()
            } else {
                ApiError::MethodNotAllowed.into_response()
            }
        })
        .layer(middleware::from_fn(refuse_browsers))
        .layer(middleware::from_fn(request_id::middleware))
        .with_state(state)
}

/// Secret keys belong on servers: a request with an `Origin` header came from a browser. The
/// dashboard is for browsers (its forms post with an Origin) and has its own protections; it
/// never accepts a secret key, and the API never accepts its session cookie.
async fn refuse_browsers(request: Request, next: Next) -> Response {
    if dashboard::owns(request.uri().path()) {
        return next.run(request).await;
    }
    if request.headers().contains_key(header::ORIGIN) {
        return ApiError::BrowserRequestRefused.into_response();
    }
    next.run(request).await
}
