//! `GET /problems/{code}`: what each error `type` means.

use axum::Json;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, problem_type};
use crate::extract::Path;

/// Describe an error type
///
/// What a problem `code` means: every error's `type` is `/problems/{code}`.
#[utoipa::path(
    get,
    path = "/problems/{code}",
    operation_id = "describeProblem",
    tag = "Problems",
    params(("code" = String, Path, description = "A problem code, e.g. `validation_failed`.")),
    responses(
        (status = 200, description = "The problem type.", body = crate::openapi::ProblemDescription),
        (status = 403, response = crate::openapi::BrowserRefused),
        (status = 404, response = crate::openapi::NotFound),
    ),
)]
pub async fn describe(Path(code): Path<String>) -> ApiResult<Json<Value>> {
    let p = problem_type(&code).ok_or(ApiError::NotFound)?;
    Ok(Json(json!({
        "type": format!("/problems/{}", p.code),
        "code": p.code,
        "title": p.title,
        "status": p.status,
        "description": p.description,
    })))
}
