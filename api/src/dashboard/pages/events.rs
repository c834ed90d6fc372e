//! Events: the mode's events by type (the API's `GET /events` list and paging), an event's page
//! with its data and every delivery attempt, and resending (developer and owner), through the
//! API's action (`actions::events`).

use askama::Template;
use axum::extract::State;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect};
use domain::ids::EventId;
use domain::{EventType, Role};
use store::deliveries;
use store::events::{self, Event};
use store::paging::Filter;

use crate::actions::{self, events::ResendError};
use crate::dashboard::forms::FormFields;
use crate::dashboard::listing::{self, List, Pager};
use crate::dashboard::session::{Developer, ItemId, MinRole, Scoped, Viewer};
use crate::dashboard::view::{self, AttemptRow, Badge, Frame, PageResult, Section, When};
use crate::extract::QueryPairs;
use crate::state::AppState;

const PAGE_SIZE: u64 = 25;

struct TypeOption {
    value: &'static str,
    selected: bool,
}

struct EventRow {
    href: String,
    id: String,
    event_type: &'static str,
    created: When,
    summary: view::EventSummary,
    /// The latest delivery's state; None when the mode had no webhook URL.
    delivery: Option<Badge>,
}

#[derive(Template)]
#[template(path = "events.html")]
struct ListPage {
    frame: Frame,
    action: String,
    types: Vec<TypeOption>,
    filtered: bool,
    rows: Vec<EventRow>,
    pager: Pager,
}

pub async fn list(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    query: QueryPairs,
) -> PageResult {
    let event_type = query.get("type").and_then(EventType::parse);
    // The API's filter: a cursor of the dashboard is one of `GET /events` too.
    let filter = Filter::new(
        "events",
        scope.business_id(),
        scope.mode,
        &[("type", event_type.map(EventType::as_str))],
    );
    let list = List::read(&state, &query, listing::PLAIN, filter, PAGE_SIZE);
    let (fetched, total) = events::list(
        &state.reads.db().await,
        scope.business_id(),
        scope.mode,
        event_type,
        &list.request,
    )
    .await?;
    let ids: Vec<EventId> = fetched.rows.iter().map(|e| e.id.clone()).collect();
    let sent = deliveries::for_events(&state.db, &ids).await?;
    let mode = scope.mode.as_str();
    let action = Section::Events.href(scope.mode);
    let keep = [("type", event_type.map_or("", EventType::as_str))];
    let pager = list.pager(&state, &action, &keep, &fetched, total, ("event", "events"));
    let rows = fetched
        .rows
        .iter()
        .map(|e| EventRow {
            href: format!("/dashboard/{mode}/events/{}", e.id),
            id: e.id.to_string(),
            event_type: e.event_type.as_str(),
            created: When::of(&e.created_at),
            summary: view::EventSummary::of(&e.data),
            delivery: view::latest_delivery(&sent, &e.id),
        })
        .collect();
    let types = EventType::ALL
        .into_iter()
        .map(|t| TypeOption {
            value: t.as_str(),
            selected: Some(t) == event_type,
        })
        .collect();
    let page = ListPage {
        frame: scope.frame(Section::Events, "Events"),
        filtered: event_type.is_some(),
        types,
        rows,
        pager,
        action,
    };
    Ok(view::page(&page))
}

struct DeliveryBlock {
    url: String,
    status: Badge,
    created: When,
    next_attempt: Option<When>,
    completed: Option<When>,
    attempts: Vec<AttemptRow>,
}

#[derive(Template)]
#[template(path = "event.html")]
struct EventPage {
    frame: Frame,
    back_href: String,
    id: String,
    event_type: &'static str,
    created: When,
    account_href: Option<String>,
    data: String,
    deliveries: Vec<DeliveryBlock>,
    can_resend: bool,
    resend_action: String,
    notice: Option<&'static str>,
    error: Option<&'static str>,
}

/// The event of the path, of this business and mode; None for anything else (another
/// business's or mode's id is not found, exactly like an unknown one).
async fn find_event<R: MinRole>(
    state: &AppState,
    scope: &Scoped<R>,
    ItemId(id): ItemId,
) -> Result<Option<Event>, sea_orm::DbErr> {
    let Some(id) = id else {
        return Ok(None);
    };
    events::find(
        &state.db,
        scope.business_id(),
        scope.mode,
        &EventId::unchecked(id),
    )
    .await
}

async fn render_event<R: MinRole>(
    state: &AppState,
    scope: &Scoped<R>,
    event: &Event,
    notice: Option<&'static str>,
    error: Option<&'static str>,
    status: StatusCode,
) -> PageResult {
    let mode = scope.mode.as_str();
    let deliveries = deliveries::for_event(&state.db, &event.id)
        .await?
        .into_iter()
        .map(|(d, attempts)| DeliveryBlock {
            url: d.url.clone(),
            status: Badge::of(d.status),
            created: When::of(&d.created_at),
            next_attempt: When::maybe(d.next_attempt_at.as_ref()),
            completed: When::maybe(d.completed_at.as_ref()),
            attempts: attempts
                .iter()
                .map(|a| AttemptRow::new(a, &d.url))
                .collect(),
        })
        .collect();
    // The data as the webhook carries it, indented for reading.
    let data = serde_json::from_str::<serde_json::Value>(&event.data)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| event.data.clone());
    let page = EventPage {
        frame: scope.frame(Section::Events, event.event_type.as_str()),
        back_href: format!("/dashboard/{mode}/events"),
        id: event.id.to_string(),
        event_type: event.event_type.as_str(),
        created: When::of(&event.created_at),
        account_href: event
            .account_id
            .as_ref()
            .map(|a| format!("/dashboard/{mode}/accounts/{a}")),
        data,
        deliveries,
        can_resend: scope.signed.role().allows(Role::Developer),
        resend_action: format!("/dashboard/{mode}/events/{}/resend", event.id),
        notice,
        error,
    };
    Ok(view::render(status, &page))
}

pub async fn show(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    path: ItemId,
    query: QueryPairs,
) -> PageResult {
    let Some(event) = find_event(&state, &scope, path).await? else {
        return Ok(scope.not_found(Section::Events, ("event", "events")));
    };
    // A fixed message by key: no text from the URL reaches the page.
    let notice = match query.get("done") {
        Some("resent") => Some("Sent again: a new delivery is on its way to your webhook URL."),
        _ => None,
    };
    render_event(&state, &scope, &event, notice, None, StatusCode::OK).await
}

/// Resending: developer and owner (a viewer is refused by `Scoped<Developer>`, token or not).
pub async fn resend(
    scope: Scoped<Developer>,
    State(state): State<AppState>,
    path: ItemId,
    _: FormFields,
) -> PageResult {
    let Some(event) = find_event(&state, &scope, path).await? else {
        return Ok(scope.not_found(Section::Events, ("event", "events")));
    };
    // The API's action: the same per-business limit, and its audit entry in the same
    // transaction.
    match actions::events::resend(&state, &scope.signed.actor(), &event).await {
        Ok(_) => {}
        Err(ResendError::NoWebhookUrl(_)) => {
            return render_event(
            &state,
            &scope,
            &event,
            None,
            Some(
                "There is no webhook URL for this mode, so there is nowhere to send it. Set one on \
                 the Developers page first.",
            ),
            StatusCode::CONFLICT,
            )
            .await;
        }
        Err(ResendError::RateLimited { retry_after_secs }) => {
            let mut page = render_event(
                &state,
                &scope,
                &event,
                None,
                Some(
                    "Too many resends in the last minute for this business. Nothing was sent; \
                     try again in a minute.",
                ),
                StatusCode::TOO_MANY_REQUESTS,
            )
            .await?;
            page.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(retry_after_secs));
            return Ok(page);
        }
        Err(ResendError::Db(e)) => return Err(e.into()),
    }
    Ok(Redirect::to(&format!(
        "/dashboard/{}/events/{}?done=resent",
        scope.mode, event.id
    ))
    .into_response())
}
