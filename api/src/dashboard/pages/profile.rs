//! The profile page: one's password (changing it ends one's other sessions) and two-step
//! verification (TOTP: enrol with a QR code drawn here, confirm with a code and the password,
//! remove with the password). The TOTP secret is sealed with the service's key; the page shows it only while
//! enrolling, to the user enrolling. Each change is recorded in the audit log.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use domain::user::check_password;
use domain::{AuditAction, Mode};
use sea_orm::{DatabaseTransaction, DbErr, TransactionTrait};
use store::audit::{self, Entry};
use store::users;

use crate::dashboard::auth;
use crate::dashboard::forms::Posted;
use crate::dashboard::session::Signed;
use crate::dashboard::view::{self, Frame, PageError, PageResult, Section};
use crate::extract::QueryPairs;
use crate::state::AppState;

struct Enrolling {
    uri: String,
    qr_svg: String,
    /// The base32 set-up key, in groups of four for typing.
    secret: String,
}

#[derive(Template)]
#[template(path = "profile.html")]
struct ProfilePage {
    frame: Frame,
    notice: Option<&'static str>,
    error: Option<&'static str>,
    totp_on: bool,
    enrolling: Option<Enrolling>,
}

/// The mode the frame's links keep (profile is not per mode): live only when open.
fn mode_of(signed: &Signed, value: Option<&str>) -> Mode {
    match value.and_then(Mode::parse) {
        Some(Mode::Live) if signed.live_available() => Mode::Live,
        _ => Mode::Test,
    }
}

/// Messages after a change, by the key its redirect puts in the URL (`view::notice`).
const NOTICES: &[(&str, &str)] = &[
    (
        "password",
        "Password changed. Your other sessions were signed out.",
    ),
    (
        "totp_on",
        "Two-step verification is on. Signing in now asks for a code.",
    ),
    ("totp_off", "Two-step verification is off."),
];

fn render(
    state: &AppState,
    signed: &Signed,
    mode: Mode,
    notice: Option<&'static str>,
    error: Option<&'static str>,
    status: StatusCode,
) -> PageResult {
    let user = &signed.owner.user;
    let enrolling = match (&user.totp_secret_enc, &user.totp_pending_enc) {
        (None, Some(sealed)) => {
            let (secret, totp) = auth::unseal_totp(&state.cipher, user, sealed)?;
            let uri = totp.to_url()?;
            Some(Enrolling {
                qr_svg: auth::qr_svg(&uri).ok_or_else(|| anyhow::anyhow!("QR code too large"))?,
                uri,
                secret: secret
                    .as_bytes()
                    .chunks(4)
                    .map(|c| String::from_utf8_lossy(c).into_owned())
                    .collect::<Vec<_>>()
                    .join(" "),
            })
        }
        _ => None,
    };
    Ok(view::render(
        status,
        &ProfilePage {
            frame: signed.frame(Section::Profile, mode, "Your profile"),
            notice,
            error,
            totp_on: user.has_totp(),
            enrolling,
        },
    ))
}

/// The page again with `error`: 422, nothing changed.
fn refused(state: &AppState, signed: &Signed, mode: Mode, error: &'static str) -> PageResult {
    render(
        state,
        signed,
        mode,
        None,
        Some(error),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
}

/// Records a change of the user's own two-step verification in the audit log, in `txn`, and
/// commits both.
async fn record_and_commit(
    txn: DatabaseTransaction,
    signed: &Signed,
    action: AuditAction,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let user = &signed.owner.user;
    let entry = Entry::new(&user.business_id, action).target(user.email.as_str());
    audit::record(&txn, &signed.actor(), entry, now).await?;
    txn.commit().await
}

/// The page again with `error` (422) when `typed` is not the user's password, or the e-mail is
/// locked (`Signed::password_reentered`); None when it is theirs.
async fn password_refused(
    state: &AppState,
    signed: &Signed,
    mode: Mode,
    typed: &str,
    error: &'static str,
) -> Result<Option<Response>, PageError> {
    if signed.password_reentered(state, typed).await? {
        return Ok(None);
    }
    refused(state, signed, mode, error).map(Some)
}

pub async fn show(signed: Signed, State(state): State<AppState>, query: QueryPairs) -> PageResult {
    let mode = mode_of(&signed, query.get("mode"));
    render(
        &state,
        &signed,
        mode,
        view::notice(query.get("done"), NOTICES),
        None,
        StatusCode::OK,
    )
}

fn done(mode: Mode, what: &str) -> Response {
    Redirect::to(&format!("/dashboard/profile?mode={mode}&done={what}")).into_response()
}

fn back(mode: Mode) -> Response {
    Redirect::to(&format!("/dashboard/profile?mode={mode}")).into_response()
}

pub async fn change_password(Posted(signed, state, fields): Posted<Signed>) -> PageResult {
    let mode = mode_of(&signed, Some(fields.get("mode")));
    let fail = |error| refused(&state, &signed, mode, error);
    let user = &signed.owner.user;
    let (new, confirm) = (fields.get("new"), fields.get("confirm"));
    let wrong = "Your current password is not right.";
    if let Some(refused) =
        password_refused(&state, &signed, mode, fields.get("current"), wrong).await?
    {
        return Ok(refused);
    }
    if let Err(why) = check_password(new) {
        return fail(if why.contains("least") {
            "The new password is too short: use 12 characters or more."
        } else {
            "The new password is too long: use at most 256 characters."
        });
    }
    if new != confirm {
        return fail("The two new passwords are not the same.");
    }
    let hash = state.hashing.hash(new.to_owned()).await?;
    users::set_password(
        &state.db,
        &signed.actor(),
        user,
        &hash,
        Some(&signed.owner.session.id),
        domain::time::now(),
    )
    .await?;
    tracing::info!(user_id = %user.id, "dashboard password changed; other sessions ended");
    Ok(done(mode, "password"))
}

/// Starts an enrolment (a new secret, sealed) or, `start` false, cancels it; nothing once
/// two-step verification is on.
async fn set_pending(form: Posted<Signed>, start: bool) -> PageResult {
    let Posted(signed, state, fields) = form;
    let mode = mode_of(&signed, Some(fields.get("mode")));
    let user = &signed.owner.user;
    if !user.has_totp() {
        let sealed = start.then(|| {
            state
                .cipher
                .encrypt(&auth::new_totp_secret(), &users::totp_context(&user.id))
        });
        users::set_totp_pending(&state.db, &user.id, sealed, domain::time::now()).await?;
    }
    Ok(back(mode))
}

pub async fn totp_start(form: Posted<Signed>) -> PageResult {
    set_pending(form, true).await
}

pub async fn totp_confirm(Posted(signed, state, fields): Posted<Signed>) -> PageResult {
    let mode = mode_of(&signed, Some(fields.get("mode")));
    let user = &signed.owner.user;
    let Some(sealed) = user
        .totp_pending_enc
        .as_deref()
        .filter(|_| !user.has_totp())
    else {
        return Ok(back(mode));
    };
    let wrong = "Your password is not right: two-step verification stays off.";
    if let Some(refused) =
        password_refused(&state, &signed, mode, fields.get("password"), wrong).await?
    {
        return Ok(refused);
    }
    let (_, totp) = auth::unseal_totp(&state.cipher, user, sealed)?;
    let now = domain::time::now();
    let Some(step) = auth::check_code(&totp, fields.get("code"), now.timestamp().max(0) as u64)
    else {
        return refused(
            &state,
            &signed,
            mode,
            "That code is not right. Check the app shows this account, then try the next code.",
        );
    };
    // The enrolment and its audit entry commit together.
    let txn = state.db.begin().await?;
    if !users::confirm_totp(&txn, &user.id, sealed, step, now).await? {
        return Ok(back(mode));
    }
    record_and_commit(txn, &signed, AuditAction::TotpEnabled, now).await?;
    tracing::info!(user_id = %user.id, "dashboard TOTP enrolled");
    Ok(done(mode, "totp_on"))
}

pub async fn totp_cancel(form: Posted<Signed>) -> PageResult {
    set_pending(form, false).await
}

pub async fn totp_remove(Posted(signed, state, fields): Posted<Signed>) -> PageResult {
    let mode = mode_of(&signed, Some(fields.get("mode")));
    let user = &signed.owner.user;
    let wrong = "Your password is not right: two-step verification stays on.";
    if let Some(refused) =
        password_refused(&state, &signed, mode, fields.get("password"), wrong).await?
    {
        return Ok(refused);
    }
    let now = domain::time::now();
    let txn = state.db.begin().await?;
    users::remove_totp(&txn, &user.id, now).await?;
    record_and_commit(txn, &signed, AuditAction::TotpRemoved, now).await?;
    tracing::info!(user_id = %user.id, "dashboard TOTP removed");
    Ok(done(mode, "totp_off"))
}
