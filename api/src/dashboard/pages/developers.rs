//! Developers, per mode (docs/api/authentication-and-modes.md, docs/dashboard.md): the working
//! secret keys (prefix and last four, created, last used), rolling and revoking them, the webhook
//! URL and rotating the webhook secret (the actions of `api admin key` and `api admin webhook`, in
//! `actions`), and `webhook.test` events with their delivery attempts. Test mode is for developers
//! and owners; live mode for owners, whose live changes carry their password.
//!
//! A new key or secret is in exactly one response body: the POST that made it renders the page
//! itself (never a redirect to a page that could be loaded again), and its form names the state
//! it was shown with (the newest key, the secret's version), so the same form sent again (a
//! reload, the back button, a double click) finds that state gone and changes and shows nothing.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use domain::ids::KeyId;
use domain::keys::KeyGrace;
use domain::{AuditAction, EventType, Mode, Role};
use sea_orm::TransactionTrait;
use store::audit::{self, Entry};
use store::businesses::{self, Rotation};
use store::keys::{self, Expect, KeyAction, KeyChange};
use store::paging::{PageRequest, Position};
use store::{deliveries, events};

use crate::actions::{self, keys::KeyError, webhooks::WebhookError};
use crate::dashboard::forms::{FormFields, Posted};
use crate::dashboard::session::{Developer, Scoped};
use crate::dashboard::view::{
    self, AttemptRow, Badge, Frame, PageError, PageResult, Section, When,
};
use crate::extract::QueryPairs;
use crate::state::AppState;

/// The test events the page shows, newest first.
const TEST_EVENTS_SHOWN: u64 = 5;

/// When the current key stops after a roll: the choices of docs/dashboard.md.
const GRACES: [(&str, &str, u64); 4] = [
    ("now", "At once", 0),
    ("1h", "In 1 hour", 3600),
    ("24h", "In 24 hours", 86_400),
    ("7d", "In 7 days", 604_800),
];

fn grace_of(value: &str) -> Option<KeyGrace> {
    GRACES
        .iter()
        .find(|(v, _, _)| *v == value)
        .and_then(|(_, _, secs)| KeyGrace::from_secs(*secs).ok())
}

struct GraceOption {
    value: &'static str,
    label: &'static str,
    selected: bool,
}

/// The choice a roll form starts with: a day's overlap, so a routine roll breaks nothing while
/// the new key is deployed ("At once" is there for a leaked key).
const DEFAULT_GRACE: &str = "24h";

struct KeyRow {
    id: String,
    shown: String,
    created: When,
    last_used: Option<When>,
    /// Set on a key rolled away: it works until then.
    expires: Option<When>,
}

struct TestEventRow {
    id: String,
    created: When,
    /// The latest delivery's state; None when the mode had no URL when it was sent.
    delivery: Option<Badge>,
    attempts: Vec<AttemptRow>,
}

/// What a POST adds to the page it renders.
#[derive(Default)]
struct Extra {
    notice: Option<&'static str>,
    error: Option<String>,
    /// The key just issued: shown in this response only.
    new_key: Option<NewKey>,
    /// The webhook secret just issued: shown in this response only.
    new_secret: Option<String>,
    /// The URL as typed, when it was refused.
    url_typed: Option<String>,
}

struct NewKey {
    key: String,
    previous_until: Option<When>,
}

#[derive(Template)]
#[template(path = "developers.html")]
struct DevelopersPage {
    frame: Frame,
    base: String,
    notice: Option<&'static str>,
    error: Option<String>,
    /// Live changes carry the owner's password.
    needs_password: bool,
    keys: Vec<KeyRow>,
    /// The newest working key's id ("" for none): what the roll form was shown with.
    newest_key: String,
    graces: Vec<GraceOption>,
    new_key: Option<NewKey>,
    webhook_url: Option<String>,
    url_value: String,
    secret_version: String,
    previous_secret_until: Option<When>,
    new_secret: Option<String>,
    test_events: Vec<TestEventRow>,
}

/// Live keys and webhooks are an owner's (docs/dashboard.md): a developer gets a page that says so.
fn owners_only(scope: &Scoped<Developer>) -> Option<Response> {
    (scope.mode == Mode::Live && !scope.signed.role().allows(Role::Owner)).then(|| {
        view::render(
            StatusCode::FORBIDDEN,
            &view::FramedMessage {
                frame: scope.frame(Section::Developers, "Developers"),
                message: "Live keys and webhooks are managed by your business's owners. Test \
                          mode's are yours."
                    .into(),
                link_href: "/dashboard/test/developers".into(),
                link_label: "Go to test mode's Developers page".into(),
            },
        )
    })
}

/// What answers a change instead, when it may not go ahead: live mode is an owner's
/// ([`owners_only`]), and a live change needs the owner's password again (in test mode nothing
/// more). `url_typed`: the URL the refused form sent, shown again.
async fn refused(
    state: &AppState,
    scope: &Scoped<Developer>,
    fields: &FormFields,
    url_typed: Option<String>,
) -> Result<Option<Response>, PageError> {
    if let Some(refused) = owners_only(scope) {
        return Ok(Some(refused));
    }
    if scope.mode == Mode::Live
        && !scope
            .signed
            .password_reentered(state, fields.get("password"))
            .await?
    {
        let extra = Extra {
            url_typed,
            ..failed(PASSWORD_NEEDED)
        };
        let page = render(state, scope, extra, StatusCode::UNPROCESSABLE_ENTITY).await?;
        return Ok(Some(page));
    }
    Ok(None)
}

const PASSWORD_NEEDED: &str =
    "Your password was not right. Live keys and webhooks change only with your password.";

async fn render(
    state: &AppState,
    scope: &Scoped<Developer>,
    extra: Extra,
    status: StatusCode,
) -> PageResult {
    let (business_id, mode) = (scope.business_id(), scope.mode);
    let now = domain::time::now();
    let working = keys::list_working(&state.db, business_id, mode, now).await?;
    let newest_key = working
        .first()
        .map(|k| k.id.to_string())
        .unwrap_or_default();
    let keys = working
        .iter()
        .map(|k| KeyRow {
            id: k.id.to_string(),
            shown: format!("{}…{}", k.prefix, k.last_four.as_deref().unwrap_or("????")),
            created: When::of(&k.created_at),
            last_used: When::maybe(k.last_used_at.as_ref()),
            expires: When::maybe(k.expires_at.as_ref()),
        })
        .collect();
    let settings = businesses::mode_settings(&state.db, business_id, mode)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the business has no {mode} settings"))?;
    let webhook_url = settings.webhook_url.clone().filter(|u| !u.is_empty());
    let previous_secret_until = settings
        .previous_secret_expires_at
        .filter(|until| *until > now && settings.previous_webhook_secret_enc.is_some())
        .map(|until| When::of(&until));
    let (sent, _) = events::list(
        &state.db,
        business_id,
        mode,
        Some(EventType::WebhookTest),
        &PageRequest {
            page_size: TEST_EVENTS_SHOWN,
            position: Position::Page(1),
        },
    )
    .await?;
    let mut test_events = Vec::new();
    for event in &sent.rows {
        let sent_to = deliveries::for_event(&state.db, &event.id).await?;
        let latest = sent_to.last();
        test_events.push(TestEventRow {
            id: event.id.to_string(),
            created: When::of(&event.created_at),
            delivery: latest.map(|(d, _)| Badge::of(d.status)),
            attempts: latest
                .map(|(d, attempts)| {
                    let row = |a| AttemptRow::new(a, &d.url);
                    attempts.iter().rev().map(row).collect()
                })
                .unwrap_or_default(),
        });
    }
    let page = DevelopersPage {
        frame: scope.frame(Section::Developers, "Developers"),
        base: Section::Developers.href(mode),
        notice: extra.notice,
        error: extra.error,
        needs_password: mode == Mode::Live,
        keys,
        newest_key,
        graces: GRACES
            .iter()
            .map(|&(value, label, _)| GraceOption {
                value,
                label,
                selected: value == DEFAULT_GRACE,
            })
            .collect(),
        new_key: extra.new_key,
        url_value: extra
            .url_typed
            .or_else(|| webhook_url.clone())
            .unwrap_or_default(),
        webhook_url,
        secret_version: businesses::secret_version(&settings),
        previous_secret_until,
        new_secret: extra.new_secret,
        test_events,
    };
    Ok(view::render(status, &page))
}

/// Messages after a change, by the key its redirect puts in the URL (`view::notice`).
const NOTICES: &[(&str, &str)] = &[
    (
        "revoked",
        "The key was revoked: requests with it now get 401.",
    ),
    ("url", "Webhook URL saved. New events go there."),
    (
        "test",
        "Test event sent. Reload this page to see its delivery attempts.",
    ),
];

fn done(mode: Mode, what: &str) -> Response {
    Redirect::to(&format!("{}?done={what}", Section::Developers.href(mode))).into_response()
}

fn failed(error: impl Into<String>) -> Extra {
    Extra {
        error: Some(error.into()),
        ..Extra::default()
    }
}

pub async fn show(
    scope: Scoped<Developer>,
    State(state): State<AppState>,
    query: QueryPairs,
) -> PageResult {
    if let Some(refused) = owners_only(&scope) {
        return Ok(refused);
    }
    let extra = Extra {
        notice: view::notice(query.get("done"), NOTICES),
        ..Extra::default()
    };
    render(&state, &scope, extra, StatusCode::OK).await
}

/// The page's key change, by this user in this mode (`actions::keys::change`).
async fn change_keys(
    state: &AppState,
    scope: &Scoped<Developer>,
    action: KeyAction,
    expect: Expect<'_>,
) -> Result<KeyChange, KeyError> {
    actions::keys::change(
        &state.db,
        Some(&state.auth_cache),
        &scope.signed.actor(),
        scope.business_id(),
        scope.mode,
        action,
        expect,
    )
    .await
}

pub async fn roll(Posted(scope, state, fields): Posted<Scoped<Developer>>) -> PageResult {
    if let Some(refused) = refused(&state, &scope, &fields, None).await? {
        return Ok(refused);
    }
    let Some(grace) = grace_of(fields.get("expire")) else {
        let error = failed("Choose when the current key stops working.");
        return render(&state, &scope, error, StatusCode::UNPROCESSABLE_ENTITY).await;
    };
    let shown_with = Some(fields.get("current_key")).filter(|id| !id.is_empty());
    let change = change_keys(
        &state,
        &scope,
        KeyAction::Roll(grace),
        Expect::Newest(shown_with),
    )
    .await?;
    match change {
        KeyChange::Rolled(rolled) => {
            tracing::info!(business_id = %scope.business_id(), mode = %scope.mode, "secret key rolled from the dashboard");
            // "At once" has no time to show: the page says the key stopped.
            let previous_until = rolled
                .previous_key_expires_at
                .as_deref()
                .filter(|_| !grace.as_duration().is_zero())
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| When::of(&t.to_utc()));
            let extra = Extra {
                new_key: Some(NewKey {
                    key: rolled.secret_key,
                    previous_until,
                }),
                ..Extra::default()
            };
            render(&state, &scope, extra, StatusCode::OK).await
        }
        _ => {
            let error = failed(
                "This form was sent before: its key was rolled then and shown once. Nothing \
                 changed now. If you did not copy that key, roll again.",
            );
            render(&state, &scope, error, StatusCode::CONFLICT).await
        }
    }
}

pub async fn revoke(Posted(scope, state, fields): Posted<Scoped<Developer>>) -> PageResult {
    if let Some(refused) = refused(&state, &scope, &fields, None).await? {
        return Ok(refused);
    }
    let action = KeyAction::RevokeKey(KeyId::unchecked(fields.get("key_id")));
    let change = change_keys(&state, &scope, action, Expect::Anything).await?;
    match change {
        KeyChange::Revoked(_) => Ok(done(scope.mode, "revoked")),
        _ => {
            let error = failed("That key had already stopped working: nothing changed.");
            render(&state, &scope, error, StatusCode::CONFLICT).await
        }
    }
}

pub async fn set_webhook_url(
    Posted(scope, state, fields): Posted<Scoped<Developer>>,
) -> PageResult {
    let typed = fields.get("url").trim().to_owned();
    if let Some(refused) = refused(&state, &scope, &fields, Some(typed.clone())).await? {
        return Ok(refused);
    }
    let policy = outbound::ssrf::TargetPolicy::from_config(&state.config.webhooks);
    let set = actions::webhooks::set_url(
        &state.db,
        policy,
        &scope.signed.actor(),
        scope.business_id(),
        scope.mode,
        &typed,
    )
    .await;
    match set {
        Ok(_) => Ok(done(scope.mode, "url")),
        Err(WebhookError::Refused(e)) => {
            let mut why = e.to_string();
            if let Some(first) = why.get_mut(0..1) {
                first.make_ascii_uppercase();
            }
            let extra = Extra {
                url_typed: Some(typed),
                ..failed(format!("{why}."))
            };
            render(&state, &scope, extra, StatusCode::UNPROCESSABLE_ENTITY).await
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn rotate_secret(Posted(scope, state, fields): Posted<Scoped<Developer>>) -> PageResult {
    if let Some(refused) = refused(&state, &scope, &fields, None).await? {
        return Ok(refused);
    }
    let rotation = actions::webhooks::rotate_secret(
        &state.db,
        &state.cipher,
        &scope.signed.actor(),
        scope.business_id(),
        scope.mode,
        Some(fields.get("secret_version")),
    )
    .await?;
    match rotation {
        Rotation::Rotated(secret) => {
            tracing::info!(business_id = %scope.business_id(), mode = %scope.mode, "webhook secret rotated from the dashboard");
            let extra = Extra {
                new_secret: Some(secret),
                ..Extra::default()
            };
            render(&state, &scope, extra, StatusCode::OK).await
        }
        Rotation::Stale => {
            let error = failed(
                "This form was sent before: the secret was rotated then and shown once. Nothing \
                 changed now. If you did not copy that secret, rotate again.",
            );
            render(&state, &scope, error, StatusCode::CONFLICT).await
        }
    }
}

pub async fn send_test_event(Posted(scope, state, _): Posted<Scoped<Developer>>) -> PageResult {
    if let Some(refused) = owners_only(&scope) {
        return Ok(refused);
    }
    let (business_id, mode) = (scope.business_id(), scope.mode);
    if businesses::webhook_url(&state.db, business_id, mode)
        .await?
        .is_none()
    {
        let error = failed("Set a webhook URL first: a test event is sent there.");
        return render(&state, &scope, error, StatusCode::CONFLICT).await;
    }
    let now = domain::time::now();
    // The event (and its delivery, written with it) and the audit entry commit together.
    let txn = state.db.begin().await?;
    let event = events::record(
        &txn,
        business_id,
        mode,
        EventType::WebhookTest,
        &serde_json::json!({
            "message": "A test event from the Developers page of the dashboard."
        }),
        now,
    )
    .await?;
    let entry = Entry::new(business_id, AuditAction::WebhookTestSent)
        .mode(mode)
        .target(event.id.as_str());
    audit::record(&txn, &scope.signed.actor(), entry, now).await?;
    txn.commit().await?;
    state.relay.kick();
    Ok(done(mode, "test"))
}
