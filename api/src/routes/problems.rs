//! `GET /problems/{code}`: what each error `type` means.

use axum::Json;
use axum::extract::Path;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, problem_type};

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
