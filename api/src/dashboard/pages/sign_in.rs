//! Signing in (e-mail and password, then the TOTP code when enrolled) and out. A wrong e-mail
//! and a wrong password get the same answer after the same work; five failures for an e-mail
//! within 15 minutes lock it for 15 minutes, known or not. Every password or code is counted
//! before it is checked (`auth::counted_check`), so attempts sent at once count the same; attempts
//! are limited per client address too, and failed, locked and refused sign-ins go into the audit
//! log.

use askama::Template;
use axum::extract::State;
use std::net::IpAddr;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::Duration;
use domain::AuditAction;
use domain::user::normalise_email;
use sea_orm::TransactionTrait;
use store::audit::{self, Actor, Entry};
use store::users::{self, SessionOwner, User};

use crate::cookies::{self, SESSION_COOKIE, SIGN_IN_COOKIE};
use crate::dashboard::auth::{
    self, Checked, TOTP_STEP_SECS, counted_check, record_failure, record_refusal, throttle_key,
};
use crate::dashboard::forms::FormFields;
use crate::dashboard::session::Signed;
use crate::dashboard::view::{self, PageResult};
use crate::extract::{ClientAddr, QueryPairs};
use crate::passwords::Busy;
use crate::state::AppState;

const WRONG: &str = "That e-mail and password do not match an account.";
const LOCKED: &str = "Too many failed attempts for this e-mail. Wait 15 minutes, then try again.";
const TOO_MANY: &str =
    "Too many sign-in attempts from your network. Wait a minute, then try again.";
const BUSY: &str = "Too many sign-ins are being checked at the moment. Wait a few seconds, then \
                    try again.";
const HOME: &str = "/dashboard/test/";

#[derive(Template)]
#[template(path = "sign_in.html")]
struct SignInPage<'a> {
    form_token: String,
    email: &'a str,
    next: &'a str,
    notice: Option<&'static str>,
    error: Option<&'static str>,
}

#[derive(Template)]
#[template(path = "sign_in_code.html")]
struct CodePage<'a> {
    form_token: String,
    email: &'a str,
    next: &'a str,
    error: Option<&'static str>,
}

/// Where to go after signing in: a dashboard path, never another site.
fn safe_next(next: &str) -> &str {
    let ok = next.starts_with("/dashboard/")
        && !next.starts_with("/dashboard/sign-")
        && !next.contains("//")
        && !next.contains('\\')
        && !next.chars().any(char::is_control);
    if ok { next } else { HOME }
}

/// None when the client's address may make one more sign-in attempt now (counting it), else
/// the seconds until it may.
fn address_limit(state: &AppState, addr: Option<&str>) -> Option<u64> {
    let ip = addr?.parse::<IpAddr>().ok()?;
    state.sign_in_attempts.admit(ip)
}

fn with_cookies(mut response: Response, cookies: &[String]) -> Response {
    for cookie in cookies {
        if let Ok(value) = HeaderValue::from_str(cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

pub async fn form(
    signed: Result<Signed, Response>,
    headers: HeaderMap,
    query: QueryPairs,
) -> Response {
    let next = safe_next(query.get("next").unwrap_or(""));
    if signed.is_ok() {
        return Redirect::to(next).into_response();
    }
    let notice = if query.get("ended").is_some() {
        Some("Your session ended. Sign in again to continue.")
    } else if query.get("signed_out").is_some() {
        Some("You have signed out.")
    } else {
        None
    };
    let error = query.get("locked").map(|_| LOCKED);
    sign_in_page(&headers, "", next, notice, error, StatusCode::OK)
}

/// The sign-in page; sets the sign-in cookie its form token is bound to when there is none.
fn sign_in_page(
    headers: &HeaderMap,
    email: &str,
    next: &str,
    notice: Option<&'static str>,
    error: Option<&'static str>,
    status: StatusCode,
) -> Response {
    let (token, cookie) = match auth::form_cookie(headers) {
        Some(token) => (token.to_owned(), None),
        None => {
            let token = auth::random_token();
            let cookie = cookies::set_cookie(SIGN_IN_COOKIE, &token, Some(3600));
            (token, Some(cookie))
        }
    };
    let page = SignInPage {
        form_token: auth::form_token(&token),
        email,
        next,
        notice,
        error,
    };
    with_cookies(view::render(status, &page), cookie.as_slice())
}

pub async fn submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    ClientAddr(addr): ClientAddr,
    fields: FormFields,
) -> PageResult {
    let typed = fields.get("email");
    let next = safe_next(fields.get("next"));
    let key = throttle_key(typed);
    let refuse = |error, status| {
        Ok(sign_in_page(
            &headers,
            typed,
            next,
            None,
            Some(error),
            status,
        ))
    };
    if let Some(secs) = address_limit(&state, addr.as_deref()) {
        let page = sign_in_page(
            &headers,
            typed,
            next,
            None,
            Some(TOO_MANY),
            StatusCode::TOO_MANY_REQUESTS,
        );
        return Ok(view::retry_after(page, secs));
    }
    let busy = |busy: Busy| {
        let page = sign_in_page(
            &headers,
            typed,
            next,
            None,
            Some(BUSY),
            StatusCode::TOO_MANY_REQUESTS,
        );
        Ok(view::retry_after(page, busy.retry_after_secs))
    };
    // The turn at hashing first: an attempt beyond the bound is refused before it costs any
    // database work, so a flood of sign-ins cannot queue on the database either.
    let turn = match state.hashing.turn().await {
        Ok(turn) => turn,
        Err(b) => return busy(b),
    };
    let user = match normalise_email(typed) {
        Some(email) => users::find_by_email(&state.db, &email).await?,
        None => None,
    };
    let password = fields.get("password").to_owned();
    let hash = user.as_ref().map(|u| u.password_hash.clone());
    let checked = counted_check(&state.db, &key, || async {
        Ok(state.hashing.verify_in(turn, password, hash).await?)
    })
    .await;
    let checked = match checked {
        Ok(checked) => checked,
        Err(e) => match e.downcast::<Busy>() {
            Ok(b) => return busy(b),
            Err(e) => return Err(e.into()),
        },
    };
    let user = match (checked, user) {
        (Checked::Right, Some(user)) => user,
        (Checked::Locked, user) => {
            record_refusal(&state.db, user.as_ref(), &key, addr).await?;
            return refuse(LOCKED, StatusCode::TOO_MANY_REQUESTS);
        }
        // (No password is right for an unknown e-mail.)
        (wrong, user) => {
            let locked = wrong == Checked::Wrong { locked: true };
            tracing::info!(locked, "dashboard sign-in failed");
            let detail = if user.is_some() {
                "wrong password"
            } else {
                "no user has this e-mail"
            };
            record_failure(&state.db, user.as_ref(), &key, addr, Some(detail), locked).await?;
            if locked {
                return refuse(LOCKED, StatusCode::TOO_MANY_REQUESTS);
            }
            return refuse(WRONG, StatusCode::UNAUTHORIZED);
        }
    };
    end_presented_session(&state, &headers).await?;
    if user.has_totp() {
        // Half-way: a session that only the code page accepts, for a few minutes.
        let token = auth::random_token();
        let now = domain::time::now();
        users::open_session(&state.db, &user.id, &auth::token_hash(&token), true, now).await?;
        let location = format!("/dashboard/sign-in/code{}", view::query(&[("next", next)]));
        return Ok(with_cookies(
            Redirect::to(&location).into_response(),
            &[cookies::set_cookie(SESSION_COOKIE, &token, None)],
        ));
    }
    start_session(&state, &user, next, addr).await
}

/// A new session for a user who has passed every step: cookie set, sign-in cookie dropped.
async fn start_session(
    state: &AppState,
    user: &User,
    next: &str,
    addr: Option<String>,
) -> PageResult {
    let token = auth::random_token();
    let now = domain::time::now();
    let txn = state.db.begin().await?;
    users::open_session(&txn, &user.id, &auth::token_hash(&token), false, now).await?;
    let actor = Actor::user(&user.id, &user.email, addr);
    audit::record(
        &txn,
        &actor,
        Entry::new(&user.business_id, AuditAction::SignedIn),
        now,
    )
    .await?;
    txn.commit().await?;
    tracing::info!(user_id = %user.id, "dashboard sign-in");
    Ok(with_cookies(
        Redirect::to(next).into_response(),
        &[
            cookies::set_cookie(SESSION_COOKIE, &token, None),
            cookies::clear_cookie(SIGN_IN_COOKIE),
        ],
    ))
}

/// Ends the session of the cookie the browser sent, if any: signing in again replaces it.
/// Returns whose it was.
async fn end_presented_session(
    state: &AppState,
    headers: &HeaderMap,
) -> anyhow::Result<Option<SessionOwner>> {
    if let Some(token) = cookies::cookie(headers, SESSION_COOKIE)
        && let Some(owner) = users::find_session(&state.db, &auth::token_hash(token)).await?
    {
        users::end_session(&state.db, &owner.session.id).await?;
        return Ok(Some(owner));
    }
    Ok(None)
}

/// The half-way session of the cookie: a right password, a code still to come, not too old.
async fn awaiting_code(
    state: &AppState,
    headers: &HeaderMap,
) -> anyhow::Result<Option<SessionOwner>> {
    let Some(token) = cookies::cookie(headers, SESSION_COOKIE) else {
        return Ok(None);
    };
    let Some(owner) = users::find_session(&state.db, &auth::token_hash(token)).await? else {
        return Ok(None);
    };
    let fresh = domain::time::now() - owner.session.created_at < Duration::seconds(TOTP_STEP_SECS);
    Ok((owner.session.awaiting_totp && fresh && owner.user.has_totp()).then_some(owner))
}

pub async fn code_form(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: QueryPairs,
) -> PageResult {
    let Some(owner) = awaiting_code(&state, &headers).await? else {
        return Ok(Redirect::to("/dashboard/sign-in").into_response());
    };
    let token = cookies::cookie(&headers, SESSION_COOKIE).unwrap_or_default();
    Ok(view::page(&CodePage {
        form_token: auth::form_token(token),
        email: &owner.user.email,
        next: safe_next(query.get("next").unwrap_or("")),
        error: None,
    }))
}

pub async fn code_submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    ClientAddr(addr): ClientAddr,
    fields: FormFields,
) -> PageResult {
    let Some(owner) = awaiting_code(&state, &headers).await? else {
        return Ok(Redirect::to("/dashboard/sign-in").into_response());
    };
    let user = &owner.user;
    let next = safe_next(fields.get("next"));
    let key = throttle_key(&user.email);
    let locked_out = || async {
        users::end_session(&state.db, &owner.session.id).await?;
        Ok::<_, anyhow::Error>(with_cookies(
            Redirect::to("/dashboard/sign-in?locked=1").into_response(),
            &[cookies::clear_cookie(SESSION_COOKIE)],
        ))
    };
    let token = cookies::cookie(&headers, SESSION_COOKIE).unwrap_or_default();
    if let Some(secs) = address_limit(&state, addr.as_deref()) {
        let page = CodePage {
            form_token: auth::form_token(token),
            email: &user.email,
            next,
            error: Some(TOO_MANY),
        };
        return Ok(view::retry_after(
            view::render(StatusCode::TOO_MANY_REQUESTS, &page),
            secs,
        ));
    }
    let sealed = user.totp_secret_enc.as_deref().unwrap_or_default();
    let (_, totp) = auth::unseal_totp(&state.cipher, user, sealed)?;
    let checked = counted_check(&state.db, &key, || async {
        let now = domain::time::now();
        let step = auth::check_code(&totp, fields.get("code"), now.timestamp().max(0) as u64);
        Ok(match step {
            Some(step) => users::use_totp_step(&state.db, &user.id, step).await?,
            None => false,
        })
    })
    .await?;
    match checked {
        Checked::Right => {}
        Checked::Locked => {
            record_refusal(&state.db, Some(user), &key, addr).await?;
            return Ok(locked_out().await?);
        }
        Checked::Wrong { locked } => {
            record_failure(
                &state.db,
                Some(user),
                &key,
                addr,
                Some("wrong code"),
                locked,
            )
            .await?;
            if locked {
                return Ok(locked_out().await?);
            }
            return Ok(view::render(
                StatusCode::UNAUTHORIZED,
                &CodePage {
                    form_token: auth::form_token(token),
                    email: &user.email,
                    next,
                    error: Some("That code is not right, or was used already. Try the next one."),
                },
            ));
        }
    }
    users::end_session(&state.db, &owner.session.id).await?;
    start_session(&state, user, next, addr).await
}

/// Ends the session (whatever state it is in) and forgets its cookie.
pub async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
    ClientAddr(addr): ClientAddr,
    _: FormFields,
) -> PageResult {
    if let Some(owner) = end_presented_session(&state, &headers).await?
        && !owner.session.awaiting_totp
    {
        let user = &owner.user;
        let actor = Actor::user(&user.id, &user.email, addr);
        let entry = Entry::new(&user.business_id, AuditAction::SignedOut);
        audit::record(&state.db, &actor, entry, domain::time::now()).await?;
    }
    Ok(with_cookies(
        Redirect::to("/dashboard/sign-in?signed_out=1").into_response(),
        &[cookies::clear_cookie(SESSION_COOKIE)],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_the_dashboard() {
        assert_eq!(
            safe_next("/dashboard/live/accounts?q=a"),
            "/dashboard/live/accounts?q=a"
        );
        assert_eq!(safe_next("https://evil.example/"), HOME);
        assert_eq!(safe_next("//evil.example/dashboard/"), HOME);
        assert_eq!(safe_next("/dashboard//evil.example"), HOME);
        assert_eq!(safe_next("/dashboard/sign-in"), HOME);
        assert_eq!(safe_next(""), HOME);
    }
}
