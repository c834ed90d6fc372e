//! The dashboard (docs/dashboard.md): server-rendered pages for the people of a business, at `/dashboard/`.
//!
//! Protections live here, in front of every route: the security headers on every response, and
//! the form token on every POST (403 without it). Who may see what is decided by the extractors
//! of `session` (`Signed<R>`, `Scoped<R>`), and what the navigation shows by `view::NAV`.
//!
//! Adding a page: a handler taking `Scoped<R>` (per mode) or `Signed<R>` (R the least role:
//! `Viewer`, `Developer`, `Owner`), a template that extends `base.html` and has a `frame` field
//! (`scope.frame(Section::…, title)`), its route in [`router`] and its `view::NAV` row; the
//! pieces pages share (tables, the search form, the pager) are macros in `templates/parts.html`.
//! POST handlers take `forms::Posted<Scoped<R>>` or `forms::Posted<Signed<R>>` (who posted, the
//! state, and the fields, already token-checked) and their forms carry
//! `<input type="hidden" name="form_token" value="{{ frame.form_token }}">`.

pub mod auth;
pub mod forms;
pub mod listing;
mod pages;
pub mod session;
pub mod view;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use crate::cookies::CookiePolicy;
use crate::state::AppState;

pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; frame-ancestors 'none'";

/// Every dashboard route, under `/dashboard` (full paths, merged into the app's router, so
/// `/dashboard` and `/dashboard/` both answer). Unknown paths below it are [`not_found`]'s, called
/// from the app's fallback.
pub fn router(cookies: CookiePolicy) -> Router<AppState> {
    Router::new()
        .route("/dashboard", get(pages::home))
        .route("/dashboard/", get(pages::home))
        .route("/dashboard/assets/dashboard.css", get(stylesheet))
        .route("/dashboard/assets/icon.svg", get(icon))
        .route(
            "/dashboard/sign-in",
            get(pages::sign_in::form).post(pages::sign_in::submit),
        )
        .route(
            "/dashboard/sign-in/code",
            get(pages::sign_in::code_form).post(pages::sign_in::code_submit),
        )
        .route("/dashboard/sign-out", post(pages::sign_in::sign_out))
        .route("/dashboard/profile", get(pages::profile::show))
        .route(
            "/dashboard/profile/password",
            post(pages::profile::change_password),
        )
        .route(
            "/dashboard/profile/totp/start",
            post(pages::profile::totp_start),
        )
        .route(
            "/dashboard/profile/totp/confirm",
            post(pages::profile::totp_confirm),
        )
        .route(
            "/dashboard/profile/totp/cancel",
            post(pages::profile::totp_cancel),
        )
        .route(
            "/dashboard/profile/totp/remove",
            post(pages::profile::totp_remove),
        )
        .route("/dashboard/{mode}/", get(pages::home::show))
        .route("/dashboard/{mode}/accounts", get(pages::accounts::list))
        .route(
            "/dashboard/{mode}/accounts/{id}",
            get(pages::accounts::show),
        )
        .route("/dashboard/{mode}/deposits", get(pages::deposits::list))
        .route(
            "/dashboard/{mode}/deposits/export",
            get(pages::deposits::export),
        )
        .route("/dashboard/{mode}/events", get(pages::events::list))
        .route("/dashboard/{mode}/events/{id}", get(pages::events::show))
        .route(
            "/dashboard/{mode}/events/{id}/resend",
            post(pages::events::resend),
        )
        .route("/dashboard/{mode}/balance", get(pages::balance::show))
        .route(
            "/dashboard/{mode}/balance/settlement-account",
            post(pages::balance::change_settlement),
        )
        .route("/dashboard/{mode}/developers", get(pages::developers::show))
        .route(
            "/dashboard/{mode}/developers/keys/roll",
            post(pages::developers::roll),
        )
        .route(
            "/dashboard/{mode}/developers/keys/revoke",
            post(pages::developers::revoke),
        )
        .route(
            "/dashboard/{mode}/developers/webhook",
            post(pages::developers::set_webhook_url),
        )
        .route(
            "/dashboard/{mode}/developers/webhook/rotate",
            post(pages::developers::rotate_secret),
        )
        .route(
            "/dashboard/{mode}/developers/webhook/test",
            post(pages::developers::send_test_event),
        )
        .route("/dashboard/{mode}/team", get(pages::team::show))
        .route("/dashboard/{mode}/team/users", post(pages::team::add))
        .route(
            "/dashboard/{mode}/team/users/role",
            post(pages::team::set_role),
        )
        .route(
            "/dashboard/{mode}/team/users/remove",
            post(pages::team::remove),
        )
        .layer(middleware::from_fn(forms::guard))
        .layer(middleware::from_fn(security_headers))
        .layer(middleware::from_fn_with_state(cookies, cookie_policy))
}

/// True for the paths the dashboard answers (and the JSON API does not).
pub fn owns(path: &str) -> bool {
    path == "/dashboard" || path.starts_with("/dashboard/")
}

/// The answer to a path under `/dashboard` that no route takes. A section named without its
/// mode (`/dashboard/accounts?q=…`, `/dashboard/events/evt_…`), or a mode without a section
/// (`/dashboard/live`), is sent to that page (test mode's when no mode is named), as
/// `/dashboard/` is; anything else is an HTML "Page not found". Both with the dashboard's headers.
pub fn unrouted(method: &Method, uri: &Uri) -> Response {
    let target = (*method == Method::GET || *method == Method::HEAD)
        .then(|| section_target(uri.path()))
        .flatten();
    match target {
        Some(mut location) => {
            if let Some(query) = uri.query() {
                location.push('?');
                location.push_str(query);
            }
            with_security_headers(Redirect::to(&location).into_response())
        }
        None => with_security_headers(view::not_found()),
    }
}

/// Where a path missing its mode or section goes (see [`unrouted`]).
fn section_target(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/dashboard/")?;
    let (first, after) = rest.split_once('/').map_or((rest, ""), |(f, a)| (f, a));
    if !first.is_empty() && view::NAV.iter().any(|e| e.slug == first) {
        return Some(format!("/dashboard/test/{rest}"));
    }
    match domain::Mode::parse(first) {
        Some(mode) if after.is_empty() => Some(format!("/dashboard/{mode}/")),
        _ => None,
    }
}

/// A dashboard path asked with a method it does not take.
pub fn method_not_allowed() -> Response {
    with_security_headers(view::message(
        StatusCode::METHOD_NOT_ALLOWED,
        "Not allowed",
        "This address does not take that kind of request.",
        "/dashboard/",
        "Go to the dashboard",
    ))
}

/// On every dashboard response, whatever produced it (docs/dashboard.md, "Protections").
async fn security_headers(request: Request, next: Next) -> Response {
    with_security_headers(next.run(request).await)
}

/// Cookies as configured ([`CookiePolicy`]): the request's `Cookie` header is read back
/// into the names the handlers use before anything reads it (the form guard included), and
/// every `Set-Cookie` of ours is sent with the policy's name, path and `Secure`.
async fn cookie_policy(
    State(policy): State<CookiePolicy>,
    mut request: Request,
    next: Next,
) -> Response {
    let sent: Vec<String> = request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| policy.undress(v))
        .collect();
    request.headers_mut().remove(header::COOKIE);
    let joined = sent.join("; ");
    if !joined.is_empty()
        && let Ok(value) = HeaderValue::from_str(&joined)
    {
        request.headers_mut().insert(header::COOKIE, value);
    }
    let mut response = next.run(request).await;
    let set: Vec<HeaderValue> = response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| HeaderValue::from_str(&policy.dress(v)).ok())
        .collect();
    response.headers_mut().remove(header::SET_COOKIE);
    for value in set {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

fn with_security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let set = [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in set {
        headers.insert(name, HeaderValue::from_static(value));
    }
    // Framing is refused by the CSP; this says the same to browsers that predate it.
    headers.insert(
        HeaderName::from_static("x-frame-options"),
        HeaderValue::from_static("DENY"),
    );
    response
}

async fn stylesheet() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("assets/dashboard.css"),
    )
        .into_response()
}

async fn icon() -> Response {
    (
        [(header::CONTENT_TYPE, "image/svg+xml")],
        include_str!("assets/icon.svg"),
    )
        .into_response()
}
