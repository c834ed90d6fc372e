//! The dashboard's pages, one module per section.

pub mod accounts;
pub mod balance;
pub mod deposits;
pub mod developers;
pub mod events;
pub mod home;
pub mod profile;
pub mod sign_in;
pub mod team;

use axum::response::Redirect;

use super::session::Signed;

/// `/dashboard/`: test mode's home (signing in first when needed).
pub async fn home(_: Signed) -> Redirect {
    Redirect::to("/dashboard/test/")
}
