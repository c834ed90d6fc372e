//! The dashboard's forms: every POST's fields, read once with its form token checked
//! ([`guard`], in front of every route) and handed to the handler as [`FormFields`].

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::{auth, view};
use crate::state::AppState;

/// A form is small: the largest is a password change.
const MAX_FORM_BYTES: usize = 16 * 1024;

/// The fields of a POSTed form, read (and its token checked) by [`guard`] before any
/// handler runs.
#[derive(Debug, Clone, Default)]
pub struct FormFields(HashMap<String, String>);

impl FormFields {
    pub fn get(&self, name: &str) -> &str {
        self.0.get(name).map_or("", String::as_str)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for FormFields {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Response> {
        parts
            .extensions
            .remove::<FormFields>()
            .ok_or_else(refused_form)
    }
}

/// What a form's handler takes: who sent it (`W`: `Signed<R>` or `Scoped<R>`, read first, so
/// refused first), the state, and the form's [`FormFields`].
pub struct Posted<W>(pub W, pub AppState, pub FormFields);

impl<W> FromRequestParts<AppState> for Posted<W>
where
    W: FromRequestParts<AppState, Rejection = Response> + Send,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let who = W::from_request_parts(parts, state).await?;
        let fields = FormFields::from_request_parts(parts, state).await?;
        Ok(Posted(who, state.clone(), fields))
    }
}

/// Every POST carries `form_token`, bound to the session cookie (or, before signing in, to the
/// sign-in cookie): without it, or with another, 403 and no handler runs.
pub async fn guard(request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_FORM_BYTES).await else {
        return view::message(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Form too large",
            "That form sent more than this page accepts.",
            "/dashboard/",
            "Go to the dashboard",
        );
    };
    let fields: HashMap<String, String> =
        url::form_urlencoded::parse(&bytes).into_owned().collect();
    let expected = auth::form_cookie(&parts.headers).map(auth::form_token);
    let presented = fields.get("form_token");
    let valid = matches!((&expected, presented), (Some(e), Some(p)) if auth::same_token(e, p));
    if !valid {
        return refused_form();
    }
    parts.extensions.insert(FormFields(fields));
    next.run(Request::from_parts(parts, Body::empty())).await
}

fn refused_form() -> Response {
    view::message(
        StatusCode::FORBIDDEN,
        "This form has expired",
        "The form was not sent from this session's page. Go back, reload the page and try again.",
        "/dashboard/",
        "Go to the dashboard",
    )
}
