//! Who is signed in, in one place: the `Signed<R>` extractor finds the session of the cookie,
//! ends it when idle or old, and requires role `R` at least; `Scoped<R>` adds the mode of the
//! URL (`/dashboard/{mode}/…`), with live mode only once the business's KYB is approved.

use domain::ids::BusinessId;
use std::marker::PhantomData;

use axum::extract::{FromRequestParts, Path, RawPathParams};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::Duration;
use domain::{Mode, Role};
use store::audit::Actor;
use store::keys::kyb_allows;
use store::users::{self, SessionOwner};

use super::auth;
use super::view::{self, Frame, NavLink, Section};
use crate::cookies::{self, SESSION_COOKIE};
use crate::extract::client_addr;
use crate::state::AppState;

/// The least role a page needs, as a type: `Signed<Developer>`.
pub trait MinRole: Send + Sync + 'static {
    const ROLE: Role;
}

pub struct Viewer;
pub struct Developer;
pub struct Owner;

impl MinRole for Viewer {
    const ROLE: Role = Role::Viewer;
}
impl MinRole for Developer {
    const ROLE: Role = Role::Developer;
}
impl MinRole for Owner {
    const ROLE: Role = Role::Owner;
}

/// A signed-in user whose role is at least `R`'s.
pub struct Signed<R: MinRole = Viewer> {
    pub owner: SessionOwner,
    /// For the forms of the page (sign-out included).
    pub form_token: String,
    /// Where the request came from, for the audit log.
    pub client_addr: Option<String>,
    _role: PhantomData<R>,
}

impl<R: MinRole> Signed<R> {
    pub fn role(&self) -> Role {
        self.owner.user.role()
    }

    pub fn live_available(&self) -> bool {
        kyb_allows(Mode::Live, self.owner.kyb_status())
    }

    /// This user, acting from this request's address: what the audit log records.
    pub fn actor(&self) -> Actor {
        Actor::user(
            &self.owner.user.id,
            &self.owner.user.email,
            self.client_addr.clone(),
        )
    }

    /// This user re-entering their password for a change (`auth::password_reentered`): false
    /// when it is wrong or the e-mail is locked.
    pub async fn password_reentered(&self, state: &AppState, typed: &str) -> anyhow::Result<bool> {
        let user = &self.owner.user;
        auth::password_reentered(
            &state.db,
            &state.hashing,
            user,
            self.client_addr.clone(),
            typed,
        )
        .await
    }

    /// The frame of this user's page of `section` in `mode`: the navigation their role may use,
    /// and the same section in the other mode.
    pub fn frame(&self, section: Section, mode: Mode, title: impl Into<String>) -> Frame {
        let role = self.role();
        let nav = view::NAV
            .iter()
            .filter(|e| role.allows(e.min_role))
            .map(|e| NavLink {
                label: e.label,
                href: e.section.href(mode),
                current: e.section == section,
            })
            .collect();
        Frame {
            title: title.into(),
            business_name: self.owner.business.name.clone(),
            user_email: self.owner.user.email.clone(),
            role_label: role.label(),
            mode: mode.as_str(),
            is_test: mode == Mode::Test,
            live_available: self.live_available(),
            test_href: section.href(Mode::Test),
            live_href: section.href(Mode::Live),
            profile_href: Section::Profile.href(mode),
            home_href: Section::Home.href(mode),
            form_token: self.form_token.clone(),
            nav,
        }
    }
}

impl<R: MinRole> FromRequestParts<AppState> for Signed<R> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let Some(token) = cookies::cookie(&parts.headers, SESSION_COOKIE) else {
            return Err(to_sign_in(parts, false));
        };
        let found = users::find_session(&state.db, &auth::token_hash(token))
            .await
            .map_err(|e| view::PageError::from(e).into_response())?;
        let owner = match found {
            Some(owner) if !owner.session.awaiting_totp => owner,
            // Half-way through signing in (the code is still to come): not signed in yet.
            Some(_) => return Err(to_sign_in(parts, false)),
            None => return Err(to_sign_in(parts, true)),
        };
        let now = domain::time::now();
        let limits = state.session_limits();
        let session = &owner.session;
        if !limits.is_live(session.created_at, session.last_seen_at, now) {
            if let Err(e) = users::end_session(&state.db, &session.id).await {
                tracing::warn!(error = %e, "ending an expired dashboard session failed");
            }
            return Err(to_sign_in(parts, true));
        }
        // Written at most once a minute (or a tenth of the idle time, when shorter), so reading
        // pages is not a stream of writes; a session may end that much before the full idle time.
        let lag = Duration::seconds(60).min(limits.idle / 10);
        if now - session.last_seen_at >= lag
            && let Err(e) = users::touch_session(&state.db, &session.id, now).await
        {
            tracing::warn!(error = %e, "recording dashboard session use failed");
        }
        if !owner.user.role().allows(R::ROLE) {
            return Err(view::forbidden(owner.user.role()));
        }
        Ok(Signed {
            form_token: auth::form_token(token),
            client_addr: client_addr(parts, state),
            owner,
            _role: PhantomData,
        })
    }
}

/// Back to the sign-in page: after it, a GET comes back where it was going. `ended` says a
/// session was there and is over (its cookie is cleared).
fn to_sign_in(parts: &Parts, ended: bool) -> Response {
    let mut pairs: Vec<(&str, String)> = Vec::new();
    if parts.method == Method::GET {
        let target = parts
            .uri
            .path_and_query()
            .map_or("/dashboard/", |p| p.as_str());
        pairs.push(("next", target.to_owned()));
    }
    if ended {
        pairs.push(("ended", "1".to_owned()));
    }
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let location = format!("/dashboard/sign-in{}", view::query(&pairs));
    let mut response = Redirect::to(&location).into_response();
    if ended {
        let clear = cookies::clear_cookie(SESSION_COOKIE);
        if let Ok(value) = HeaderValue::from_str(&clear) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// The id of an item page's path (`/dashboard/{mode}/…/{id}`); None when the path cannot name
/// one (unreadable, or holding a control character: no id holds one, and PostgreSQL text cannot
/// hold NUL), which the page answers as not found, like an unknown id.
pub struct ItemId(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for ItemId {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let path = Path::<(String, String)>::from_request_parts(parts, state).await;
        Ok(ItemId(
            path.ok()
                .map(|Path((_, id))| id)
                .filter(|id| !id.chars().any(char::is_control)),
        ))
    }
}

/// A signed-in page of one mode: `/dashboard/{mode}/…`.
pub struct Scoped<R: MinRole = Viewer> {
    pub signed: Signed<R>,
    pub mode: Mode,
}

impl<R: MinRole> Scoped<R> {
    pub fn business_id(&self) -> &BusinessId {
        &self.signed.owner.business.id
    }

    pub fn frame(&self, section: Section, title: impl Into<String>) -> Frame {
        self.signed.frame(section, self.mode, title)
    }

    /// An account's name as this business's own lists show it: without the business's name
    /// that every one of its accounts starts with (docs/api/accounts.md: `<business name>/<customerName>`).
    pub fn own_account_name<'a>(&self, account_name: &'a str) -> &'a str {
        account_name
            .strip_prefix(self.signed.owner.business.name.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
            .filter(|rest| !rest.is_empty())
            .unwrap_or(account_name)
    }

    /// 404 in the frame of `section`, whose list (`/dashboard/{mode}/{list}`) has no such
    /// `item` in this mode: a link back to it.
    pub fn not_found(&self, section: Section, (item, list): (&str, &str)) -> Response {
        let mut title = format!("{item} not found");
        if let Some(first) = title.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        view::render(
            StatusCode::NOT_FOUND,
            &view::FramedMessage {
                frame: self.frame(section, title),
                message: format!(
                    "There is no such {item} in {} mode of {}.",
                    self.mode, self.signed.owner.business.name
                ),
                link_href: format!("/dashboard/{}/{list}", self.mode),
                link_label: format!("Back to {list}"),
            },
        )
    }
}

impl<R: MinRole> FromRequestParts<AppState> for Scoped<R> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|_| view::not_found())?;
        let mode = params
            .iter()
            .find(|(name, _)| *name == "mode")
            .and_then(|(_, value)| Mode::parse(value))
            .ok_or_else(view::not_found)?;
        let signed = Signed::<R>::from_request_parts(parts, state).await?;
        if mode == Mode::Live && !signed.live_available() {
            return Err(view::message(
                StatusCode::FORBIDDEN,
                "Live mode is not open yet",
                "Live mode opens once your business's verification (KYB) is approved. Until \
                 then, everything runs in test mode.",
                "/dashboard/test/",
                "Go to test mode",
            ));
        }
        Ok(Scoped { signed, mode })
    }
}
