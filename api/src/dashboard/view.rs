//! What every page shares: the frame around it (navigation, business, user, mode), rendering, the
//! error pages, and how times, money and statuses are shown.

use askama::Template;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, FixedOffset, Utc};
use domain::payout::PayoutStatus;
use domain::{AccountStatus, DeliveryStatus, DepositStatus, Mode, RecheckStatus, Role, TextEnum};

use store::deliveries::{Attempt, Delivery};

use crate::passwords::Busy;

/// The dashboard's sections, in navigation order. Adding a page: give it a section here (and a
/// row in [`NAV`]), a route in `dashboard::router`, and a template that extends `base.html`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Home,
    Accounts,
    Deposits,
    Events,
    Balance,
    Developers,
    Team,
    Profile,
}

pub struct NavEntry {
    pub section: Section,
    pub label: &'static str,
    /// The path under `/dashboard/{mode}/`.
    pub slug: &'static str,
    /// Hidden from roles below this.
    pub min_role: Role,
}

/// The navigation, in one place: links and who sees them.
pub const NAV: [NavEntry; 7] = [
    NavEntry {
        section: Section::Home,
        label: "Home",
        // The mode's own page, `/dashboard/{mode}/`.
        slug: "",
        min_role: Role::Viewer,
    },
    NavEntry {
        section: Section::Accounts,
        label: "Accounts",
        slug: "accounts",
        min_role: Role::Viewer,
    },
    NavEntry {
        section: Section::Deposits,
        label: "Deposits",
        slug: "deposits",
        min_role: Role::Viewer,
    },
    NavEntry {
        section: Section::Events,
        label: "Events",
        slug: "events",
        min_role: Role::Viewer,
    },
    NavEntry {
        section: Section::Balance,
        label: "Balance & payouts",
        slug: "balance",
        min_role: Role::Viewer,
    },
    NavEntry {
        section: Section::Developers,
        label: "Developers",
        slug: "developers",
        min_role: Role::Developer,
    },
    NavEntry {
        section: Section::Team,
        label: "Team",
        slug: "team",
        min_role: Role::Owner,
    },
];

pub fn nav_entry(section: Section) -> Option<&'static NavEntry> {
    NAV.iter().find(|e| e.section == section)
}

impl Section {
    /// This section's page in `mode`, `/dashboard/{mode}/{slug}` (the profile, not per mode,
    /// keeps the mode in its query).
    pub fn href(self, mode: Mode) -> String {
        match nav_entry(self) {
            Some(entry) => format!("/dashboard/{mode}/{}", entry.slug),
            None => format!("/dashboard/profile?mode={mode}"),
        }
    }
}

pub struct NavLink {
    pub label: &'static str,
    pub href: String,
    pub current: bool,
}

/// The frame of a signed-in page: `base.html` reads it.
pub struct Frame {
    pub title: String,
    pub business_name: String,
    pub user_email: String,
    pub role_label: &'static str,
    /// `test` or `live`.
    pub mode: &'static str,
    pub is_test: bool,
    /// Live mode exists once the business's KYB is approved.
    pub live_available: bool,
    /// The same section in test and in live mode.
    pub test_href: String,
    pub live_href: String,
    pub profile_href: String,
    pub home_href: String,
    /// Bound to the session: every form that posts carries it.
    pub form_token: String,
    pub nav: Vec<NavLink>,
}

/// Renders a page; a template that fails to render is a logged 500, never a half page.
pub fn render<T: Template>(status: StatusCode, page: &T) -> Response {
    match page.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "a dashboard page failed to render");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Html("<!doctype html><title>Error</title><p>Something went wrong.</p>"),
            )
                .into_response()
        }
    }
}

pub fn page<T: Template>(page: &T) -> Response {
    render(StatusCode::OK, page)
}

/// A page on its own (no frame): errors, the sign-in pages.
#[derive(Template)]
#[template(path = "message.html")]
pub struct MessagePage {
    pub title: String,
    pub message: String,
    pub link_href: String,
    pub link_label: String,
}

pub fn message(
    status: StatusCode,
    title: &str,
    message: &str,
    href: &str,
    label: &str,
) -> Response {
    render(
        status,
        &MessagePage {
            title: title.to_owned(),
            message: message.to_owned(),
            link_href: href.to_owned(),
            link_label: label.to_owned(),
        },
    )
}

/// A message inside the frame of a signed-in page (an account that is not there, …).
#[derive(Template)]
#[template(path = "framed_message.html")]
pub struct FramedMessage {
    pub frame: Frame,
    pub message: String,
    pub link_href: String,
    pub link_label: String,
}

pub fn not_found() -> Response {
    message(
        StatusCode::NOT_FOUND,
        "Page not found",
        "There is nothing at this address.",
        "/dashboard/",
        "Go to the dashboard",
    )
}

pub fn forbidden(role: Role) -> Response {
    message(
        StatusCode::FORBIDDEN,
        "Not available to your role",
        &format!(
            "Your role ({}) cannot open this page. Ask an owner of your business if you need it.",
            role.label()
        ),
        "/dashboard/",
        "Go to the dashboard",
    )
}

/// Too many passwords are being checked at once (a flood of sign-ins): try again shortly.
pub fn busy(busy: Busy) -> Response {
    retry_after(
        message(
            StatusCode::TOO_MANY_REQUESTS,
            "Too busy right now",
            "Too many sign-ins are being checked at the moment. Wait a few seconds, then try \
             again.",
            "/dashboard/",
            "Go to the dashboard",
        ),
        busy.retry_after_secs,
    )
}

/// The response with `Retry-After: secs`.
pub fn retry_after(mut response: Response, secs: u64) -> Response {
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    response
}

/// A failure of ours: logged with its cause, shown without it.
#[derive(Debug)]
pub struct PageError(pub anyhow::Error);

impl<E: Into<anyhow::Error>> From<E> for PageError {
    fn from(e: E) -> Self {
        PageError(e.into())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        if let Some(busy) = self.0.downcast_ref::<Busy>() {
            return self::busy(*busy);
        }
        tracing::error!(error = %self.0, "a dashboard page failed");
        message(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Something went wrong",
            "We could not load this page. Try again in a moment.",
            "/dashboard/",
            "Go to the dashboard",
        )
    }
}

pub type PageResult = Result<Response, PageError>;

/// West Africa Time, the business day of the service's customers (no daylight saving).
fn wat() -> FixedOffset {
    FixedOffset::east_opt(3600).expect("one hour")
}

/// A moment as people read it, with its zone: "3 Mar 2026, 14:05 WAT", with its exact value for
/// machines.
pub struct When {
    pub text: String,
    pub iso: String,
}

impl When {
    pub fn of(t: &DateTime<Utc>) -> When {
        When {
            text: t
                .with_timezone(&wat())
                .format("%-d %b %Y, %H:%M WAT")
                .to_string(),
            iso: domain::time::rfc3339(t),
        }
    }

    pub fn maybe(t: Option<&DateTime<Utc>>) -> Option<When> {
        t.map(When::of)
    }
}

/// One delivery attempt as a page shows it (an event's deliveries, the Developers page's test
/// events).
pub struct AttemptRow {
    pub at: When,
    /// Where it went, when not to the delivery's URL (the endpoint moved since).
    pub url: Option<String>,
    /// "200", or "No response" for 0.
    pub status: String,
    pub ok: bool,
    pub duration_ms: i64,
    pub response: Option<String>,
    pub error: Option<String>,
}

impl AttemptRow {
    pub fn new(a: &Attempt, delivery_url: &str) -> Self {
        AttemptRow {
            at: When::of(&a.attempted_at),
            url: a.url.clone().filter(|u| u != delivery_url),
            status: if a.status_code == 0 {
                "No response".into()
            } else {
                a.status_code.to_string()
            },
            ok: (200..300).contains(&a.status_code),
            duration_ms: a.duration_ms,
            response: outbound::webhook_reply::shown(a.status_code, a.response_excerpt.as_deref()),
            error: a.error.clone(),
        }
    }
}

pub use domain::money::naira;

/// What an event is about, from its `data` (docs/api/events-and-webhooks.md): the amount it moved and whose it was (an
/// account's or a deposit's customer, a payout's destination). None where the event has neither.
pub struct EventSummary {
    pub amount: Option<String>,
    pub who: Option<String>,
}

impl EventSummary {
    pub fn of(data: &str) -> EventSummary {
        let data: serde_json::Value = serde_json::from_str(data).unwrap_or_default();
        let text = |v: &serde_json::Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
        EventSummary {
            amount: data["amount"].as_i64().map(naira),
            who: text(&data["customerName"])
                .or_else(|| text(&data["account"]["customerName"]))
                .or_else(|| text(&data["destination"]["accountName"]))
                .or_else(|| text(&data["accountName"])),
        }
    }
}

/// What a status means to the person reading it, as a badge's colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Good,
    Wait,
    Bad,
    Quiet,
}

impl Tone {
    /// The stylesheet's class for it.
    pub fn class(self) -> &'static str {
        match self {
            Tone::Good => "good",
            Tone::Wait => "wait",
            Tone::Bad => "bad",
            Tone::Quiet => "quiet",
        }
    }
}

/// A status the dashboard shows as a badge. Each says its tone with an exhaustive match, so a
/// status added to the domain cannot silently show grey.
pub trait Status: TextEnum {
    fn tone(self) -> Tone;
}

/// Each status's tone, as an exhaustive `match` per status type.
macro_rules! tones {
    ($($status:ident { $($($variant:ident)|+ => $tone:ident),+ $(,)? })*) => {
        $(
            impl Status for $status {
                fn tone(self) -> Tone {
                    match self {
                        $($($status::$variant)|+ => Tone::$tone),+
                    }
                }
            }
        )*
    };
}

tones! {
    AccountStatus { Active => Good, Pending => Wait, Failed => Bad, Deactivated => Quiet }
    DepositStatus { Credited => Good, Flagged => Bad }
    RecheckStatus { Completed => Good, Queued | Running => Wait, Failed => Bad }
    DeliveryStatus { Succeeded => Good, Pending => Wait, Dead => Bad }
    PayoutStatus { Succeeded => Good, Pending | Processing => Wait, Failed | Reversed => Bad }
}

/// A status as a badge: its words and its colour class.
pub struct Badge {
    pub label: String,
    pub tone: &'static str,
}

impl Badge {
    pub fn of<S: Status>(status: S) -> Badge {
        let mut label = status.text().replace('_', " ");
        if let Some(first) = label.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        Badge {
            label,
            tone: status.tone().class(),
        }
    }
}

/// One choice of a status filter: the status, its badge's words, and whether it is chosen.
pub struct StatusOption {
    pub value: &'static str,
    pub label: String,
    pub selected: bool,
}

impl StatusOption {
    /// Every status of `S`, in declaration order, with `chosen` selected.
    pub fn all<S: Status + PartialEq>(chosen: Option<S>) -> Vec<StatusOption> {
        S::variants()
            .iter()
            .map(|&s| StatusOption {
                value: s.text(),
                label: Badge::of(s).label,
                selected: Some(s) == chosen,
            })
            .collect()
    }
}

/// What a list's search form shows (`parts::search_form`): where it sends, the search text, the
/// statuses to choose from, and whether a filter is on (then a "Clear" link shows).
pub struct SearchForm {
    pub action: String,
    pub q: String,
    pub statuses: Vec<StatusOption>,
    pub filtered: bool,
}

impl SearchForm {
    pub fn new<S: Status + PartialEq>(action: String, q: &str, status: Option<S>) -> SearchForm {
        SearchForm {
            action,
            filtered: !q.is_empty() || status.is_some(),
            q: q.to_owned(),
            statuses: StatusOption::all(status),
        }
    }
}

/// The badge of the latest of `sent` (oldest first) made for `event_id`: where the event stands.
pub fn latest_delivery(sent: &[Delivery], event_id: &str) -> Option<Badge> {
    sent.iter()
        .rev()
        .find(|d| d.event_id == event_id)
        .map(|d| Badge::of(d.status))
}

/// The message after a change, by the fixed key a redirect put in the URL (`?done=…`): no text
/// from the URL reaches the page.
pub fn notice(done: Option<&str>, notices: &[(&str, &'static str)]) -> Option<&'static str> {
    let done = done?;
    notices
        .iter()
        .find(|(key, _)| *key == done)
        .map(|(_, text)| *text)
}

/// A query string built from pairs (empty values left out), for links that keep a filter.
pub fn query(pairs: &[(&str, &str)]) -> String {
    let mut out = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        if !v.is_empty() {
            out.append_pair(k, v);
        }
    }
    let out = out.finish();
    if out.is_empty() {
        out
    } else {
        format!("?{out}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_in_west_africa_time() {
        let t = DateTime::parse_from_rfc3339("2026-03-03T13:05:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(When::of(&t).text, "3 Mar 2026, 14:05 WAT");
    }

    #[test]
    fn badges_name_their_status() {
        let b = Badge::of(AccountStatus::Deactivated);
        assert_eq!((b.label.as_str(), b.tone), ("Deactivated", "quiet"));
        assert_eq!(Badge::of(DepositStatus::Flagged).tone, "bad");
        assert_eq!(Badge::of(PayoutStatus::Processing).tone, "wait");
    }

    #[test]
    fn queries_leave_out_empty_values() {
        assert_eq!(query(&[("q", "ada obi"), ("status", "")]), "?q=ada+obi");
        assert_eq!(query(&[("q", "")]), "");
    }
}
