//! `GET /openapi.json` and `GET /docs`: the document and a page that renders it. The page needs
//! nothing but this service: inline CSS and script, no CDN, no build-time download.

use axum::Extension;
use axum::body::Bytes;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::responses as problem;
use crate::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(openapi_json))
        .routes(routes!(docs))
}

/// The serialised document, built once from the registration by `crate::router` and handed to
/// [`openapi_json`] as a request extension (the handler is itself part of the registration).
#[derive(Clone)]
pub struct Document(pub Bytes);

/// The OpenAPI document
///
/// This document: OpenAPI 3.1, JSON.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "getOpenApiDocument",
    tag = "Documentation",
    responses(
        (status = 200, description = "The OpenAPI 3.1 document of this API.", body = Object, content_type = "application/json"),
        (status = 403, response = problem::BrowserRefused),
    ),
)]
pub async fn openapi_json(Extension(Document(document)): Extension<Document>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], document).into_response()
}

/// The API reference page
///
/// A readable page rendered from `openapi.json`, by an inline script; it loads nothing from
/// anywhere else.
#[utoipa::path(
    get,
    path = "/docs",
    operation_id = "getDocsPage",
    tag = "Documentation",
    responses(
        (status = 200, description = "An HTML page that renders this document.", body = String, content_type = "text/html"),
        (status = 403, response = problem::BrowserRefused),
    ),
)]
pub async fn docs() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        include_str!("../docs.html"),
    )
        .into_response()
}
