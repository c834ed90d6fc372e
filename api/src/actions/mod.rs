//! What the front ends do, one function each: the JSON API (`routes`), the dashboard and the
//! `api admin` commands call the same action, and each renders its error its own way (routes
//! through `From<…> for ApiError`, the dashboard as its page's message, the CLI as its exit
//! message). An action knows no front end: it takes who acts (`Actor`) and what they asked, and
//! answers with its result or its own error type.
//!
//! Below it: `store`, `outbound` and `queue` (queries, providers, jobs) and `state`; above it: `routes`, `dashboard`
//! and `cli`, which never call one another.

pub mod events;
pub mod keys;
pub mod settlement;
pub mod users;
pub mod webhooks;
