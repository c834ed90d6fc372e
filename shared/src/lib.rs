//! What the processes share beyond the domain and `ops`, in folders named for what they hold:
//!
//! - `db`: storage — the sea-orm entities (typed enum columns) and every query, on PostgreSQL
//!   or SQLite;
//! - `messaging`: the broker (RabbitMQ and in-process), the jobs of each queue, the outbox
//!   relay, the consumer every worker runs;
//! - `outbound`: HTTP to servers the service does not control — the provider-bank client,
//!   webhook addresses (SSRF), signatures and reply excerpts;
//! - `json`: the JSON shapes of the resources callers see, built from stored rows (the
//!   dashboard's HTML is the api's);
//! - `crypto`: field encryption at rest, used by storage and by start-up alike, so it sits
//!   beside both rather than inside either;
//! - `bootstrap`: opening all of the above from the configuration when a process starts; it
//!   depends on every folder, so none of them can hold it.

pub mod bootstrap;
pub mod crypto;
pub mod db;
pub mod jobs;
pub mod json;
pub mod messaging;
pub mod outbound;
