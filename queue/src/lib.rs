//! How work travels between the processes: the broker behind one trait (`broker`: RabbitMQ and
//! in-process), the outbox relay that publishes jobs after the database commits (`relay`), the
//! consumer every worker runs (`worker`), and when a job that asks a bank again runs next
//! (`retry`: it sets the job row's next run, so it lives with the jobs, not with the HTTP client).
//!
//! The jobs' payloads are the `jobs` crate's and the outbox table is storage's (`store::outbox`):
//! a job is written in the transaction of the change that causes it; this crate only moves it on.

pub mod broker;
pub mod relay;
pub mod retry;
pub mod worker;
