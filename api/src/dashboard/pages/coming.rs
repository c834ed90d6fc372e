//! Sections whose pages are not built yet: the frame, the navigation and the role checks are in
//! place, and the page says it is coming.

use askama::Template;
use axum::response::Response;

use crate::dashboard::session::{MinRole, Scoped, Viewer};
use crate::dashboard::view::{self, Frame, Section};

#[derive(Template)]
#[template(path = "coming.html")]
struct ComingPage {
    frame: Frame,
    description: &'static str,
}

fn coming<R: MinRole>(scope: &Scoped<R>, section: Section, description: &'static str) -> Response {
    let title = view::nav_entry(section).map_or("Coming", |e| e.label);
    view::page(&ComingPage {
        frame: scope.frame(section, title),
        description,
    })
}

pub async fn deposits(scope: Scoped<Viewer>) -> Response {
    coming(
        &scope,
        Section::Deposits,
        "Every deposit of this mode, flagged ones marked, with search and a CSV export. Until \
         then, each account's page lists its deposits.",
    )
}

pub async fn events(scope: Scoped<Viewer>) -> Response {
    coming(
        &scope,
        Section::Events,
        "Every event sent to your webhook URL, with its delivery attempts, and a way to send one \
         again. Until then, each account's page lists its events.",
    )
}

pub async fn balance(scope: Scoped<Viewer>) -> Response {
    coming(
        &scope,
        Section::Balance,
        "Your balance, its ledger, payouts and the settlement account they are paid to.",
    )
}
