//! Sections whose pages are not built yet: the frame, the navigation and the role checks are in
//! place, and the page says it is coming.

use askama::Template;
use axum::response::Response;

use crate::dashboard::session::{Developer, MinRole, Owner, Scoped};
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

pub async fn developers(scope: Scoped<Developer>) -> Response {
    coming(
        &scope,
        Section::Developers,
        "Your secret keys (roll and revoke), the webhook URL and secret, and test events.",
    )
}

pub async fn team(scope: Scoped<Owner>) -> Response {
    coming(
        &scope,
        Section::Team,
        "The people of your business and their roles: add, change and remove.",
    )
}
