//! `GET /problems/{code}`: what each error `type` means.

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::responses as problem;
use crate::error::{ApiError, ApiResult, ProblemCode};
use crate::extract::Path;
use crate::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(describe))
}

/// What an error `type` means.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProblemDescription {
    #[schema(example = "/problems/not_found")]
    pub r#type: String,
    pub code: ProblemCode,
    pub title: &'static str,
    #[schema(minimum = 400, maximum = 599)]
    pub status: u16,
    pub description: &'static str,
}

/// Describe an error type
///
/// What a problem `code` means: every error's `type` is `/problems/{code}`.
#[utoipa::path(
    get,
    path = "/problems/{code}",
    operation_id = "describeProblem",
    tag = "Problems",
    params(("code" = ProblemCode, Path, description = "A problem code, e.g. `validation_failed`.")),
    responses(
        (status = 200, description = "The problem type.", body = ProblemDescription),
        (status = 403, response = problem::BrowserRefused),
        (status = 404, response = problem::NotFound),
    ),
)]
pub async fn describe(Path(code): Path<String>) -> ApiResult<Json<ProblemDescription>> {
    let code = ProblemCode::parse(&code).ok_or(ApiError::NotFound)?;
    Ok(Json(ProblemDescription {
        r#type: code.type_uri(),
        code,
        title: code.title(),
        status: code.status(),
        description: code.description(),
    }))
}
