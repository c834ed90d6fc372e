//! The one test harness every crate's tests use (a dev-dependency only).
//!
//! - [`wait`]: poll until something holds, or fail saying what did not happen.
//! - [`account_body`]: a valid create body for test customer `n`.
//! - [`json`]: read response bodies and problems.
//! - [`http`]: serve a router in this process on 127.0.0.1:0; a slow client ([`http::trickle`]).
//! - [`receiver`]: a scripted webhook receiver that records what arrives.
//! - [`process`]: the workspace's binaries as an operator runs them.
//! - [`metrics`]: the series of a `/metrics` exposition, and this process's memory.
//!
//! With the `backends` feature:
//! - [`Backend`], [`on_both_databases!`], [`on_both_brokers!`]: each test on SQLite and the
//!   in-process queue, and on PostgreSQL + RabbitMQ when `TEST_DATABASE_URL` / `TEST_AMQP_URL`
//!   are set (saying plainly when that variant is skipped; under `CI` a missing URL fails).
//! - [`TestDb`], [`TestBroker`]: a fresh database / broker prefix per test, removed afterwards.
//! - [`Setup`]: a migrated database with one business, for tests that run no API.
//! - [`store`]: what is stored, read and changed by name (no raw SQL in tests).
//! - [`stack`]: the real binaries on PostgreSQL and RabbitMQ, for end-to-end tests.
//!
//! With the `app` feature: [`TestApp`], the api with its relay, the provider sandbox and, on
//! demand, each worker, in this process on port 0; [`dashboard`]: its users, and a cookie-keeping
//! HTTP client for the dashboard.
//!
//! With the `browser` feature: [`browser`], the dashboard in headless Chromium over WebDriver.

mod customers;
pub mod http;
pub mod json;
pub mod metrics;
pub mod process;
pub mod receiver;
pub mod wait;

#[cfg(feature = "backends")]
mod backend;
#[cfg(feature = "backends")]
mod broker;
#[cfg(feature = "backends")]
pub mod clusters;
#[cfg(feature = "backends")]
mod db;
#[cfg(feature = "backends")]
mod fixtures;
#[cfg(feature = "backends")]
pub mod stack;
#[cfg(feature = "backends")]
pub mod store;

#[cfg(feature = "app")]
mod app;
#[cfg(feature = "app")]
pub mod dashboard;
#[cfg(feature = "app")]
mod logs;

#[cfg(feature = "browser")]
pub mod browser;

pub use customers::account_body;
pub use json::{expect_problem, id_of, json, json_of, text_of};
pub use receiver::{Received, Receiver, Reply};
pub use wait::{eventually, wait_until};

#[cfg(feature = "backends")]
pub use backend::{Backend, amqp_url, postgres_url};
#[cfg(feature = "backends")]
pub use broker::{RabbitPrefix, TestBroker, Topology, with_rabbit};
#[cfg(feature = "backends")]
pub use db::TestDb;
#[cfg(feature = "backends")]
pub use fixtures::{Setup, record_event, set_webhook_url, setup, worker_parts};

#[cfg(feature = "app")]
pub use app::{
    BankDeposit, TestApp, spawn_app, spawn_app_with, start_instance, start_payouts_worker,
    start_provisioning_worker, start_recheck_worker, start_webhooks_worker, test_config,
};
#[cfg(feature = "app")]
pub use logs::captured_logs;

/// What the macros name through `$crate`, so a test crate needs no dependency of its own on them.
#[doc(hidden)]
pub mod __private {
    #[cfg(feature = "backends")]
    pub use queue::broker::MemoryBroker;
}
