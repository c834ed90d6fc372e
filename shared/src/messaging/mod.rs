//! Messaging: how work travels between the processes. The broker behind one trait (`queue`:
//! RabbitMQ and in-process), the jobs each queue carries (`jobs`), the outbox relay that
//! publishes them after the database commits (`relay`), the consumer every worker runs
//! (`worker`) with its group commit (`batch`), and when a job that asks a bank again runs next
//! (`retry`: it sets the job row's next run, so it lives with the jobs, not with the HTTP client).
//!
//! The outbox table itself is storage (`db::outbox`): the job is written in the transaction of
//! the change that causes it; this folder only moves it on.

pub mod queue;
pub mod relay;
pub mod retry;
pub mod worker;
