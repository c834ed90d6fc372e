//! What the processes share beyond the domain and start-up: storage (sea-orm entities and
//! queries), the broker and its outbox relay and consumer, the provider client, crypto, webhook
//! signing, SSRF checks, the JSON views, and the bootstrap that opens them from the configuration.

pub mod batch;
pub mod bootstrap;
pub mod crypto;
pub mod db;
pub mod http;
pub mod jobs;
pub mod providers;
pub mod queue;
pub mod relay;
pub mod retry;
pub mod signing;
pub mod ssrf;
pub mod views;
pub mod webhook_reply;
pub mod webhook_url;
pub mod worker;
