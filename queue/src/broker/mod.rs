//! The message broker behind one trait: RabbitMQ (lapin) in production, an in-process queue for
//! `api dev` and unit tests. Messages carry ids only; the database is the truth, so a lost or
//! repeated message is never a lost or repeated effect.
//!
//! Each work queue has a dead-letter queue beside it, bounded in length and age
//! ([`DeadLetterBounds`]): a convenience for watching a broker, not a record. The record of a
//! dead job is its outbox row (`dead_at`, `last_error`) and, for webhooks, its delivery.

mod memory;
mod rabbit;

use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;

pub use memory::MemoryBroker;
pub use rabbit::{RabbitBroker, delete_topology};

use jobs::{PayoutJob, ProvisioningJob, QueueJob, RecheckJob, WebhookJob};

/// The work queues, one per job type. Each has a dead-letter queue beside it.
pub const QUEUES: [&str; 4] = [
    ProvisioningJob::QUEUE,
    WebhookJob::QUEUE,
    RecheckJob::QUEUE,
    PayoutJob::QUEUE,
];

/// The work queue named `queue`, as the one static name both brokers key their queues by; a
/// name that is none of them is unroutable, whichever broker is asked.
fn known(queue: &str) -> Result<&'static str, QueueError> {
    QUEUES
        .iter()
        .copied()
        .find(|q| *q == queue)
        .ok_or_else(|| QueueError::Unroutable(queue.to_owned()))
}

/// How much a dead-letter queue keeps: at most `max_length` messages (the oldest go first) and
/// none older than `ttl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetterBounds {
    pub max_length: u32,
    pub ttl: Duration,
}

impl Default for DeadLetterBounds {
    /// A week of deaths, up to ten thousand per queue: long enough to notice, small enough that
    /// a storm of failures cannot fill the broker's disk.
    fn default() -> Self {
        DeadLetterBounds {
            max_length: 10_000,
            ttl: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// One message for [`Broker::publish_many`].
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    pub queue: &'a str,
    pub body: &'a [u8],
}

/// A message for a queue's dead-letter queue that expires `expires_in` from now (or earlier, by
/// the queue's own bound).
pub struct DeadLetter<'a> {
    pub queue: &'a str,
    pub body: &'a [u8],
    pub expires_in: Duration,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum QueueError {
    #[error("broker unreachable: {0}")]
    Unreachable(String),
    #[error("the broker did not confirm the publish: {0}")]
    NotConfirmed(String),
    #[error("no queue is bound for {0}")]
    Unroutable(String),
    #[error("broker error: {0}")]
    Other(String),
}

/// One received message. Dropping it without `ack` or `nack` puts it back in the queue (both
/// brokers requeue on drop; RabbitMQ also redelivers whatever a closed channel held).
pub struct Delivery {
    pub body: Vec<u8>,
    /// True when the broker says this message was delivered before.
    pub redelivered: bool,
    pub acker: Box<dyn Acker>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("bytes", &self.body.len())
            .field("redelivered", &self.redelivered)
            .finish_non_exhaustive()
    }
}

#[async_trait]
pub trait Acker: Send + Sync {
    /// Done: the broker forgets the message.
    async fn ack(self: Box<Self>) -> Result<(), QueueError>;
    /// Not done: `requeue` puts it back for another consumer; otherwise it goes to the queue's
    /// dead-letter queue.
    async fn nack(self: Box<Self>, requeue: bool) -> Result<(), QueueError>;
}

impl Delivery {
    pub async fn ack(self) -> Result<(), QueueError> {
        self.acker.ack().await
    }

    pub async fn nack(self, requeue: bool) -> Result<(), QueueError> {
        self.acker.nack(requeue).await
    }
}

#[async_trait]
pub trait Broker: Send + Sync + 'static {
    /// Declares exchanges and queues (idempotent; safe from many processes at once).
    async fn declare(&self) -> Result<(), QueueError>;

    /// Publishes to a work queue (or its dead-letter queue with `dead_letter`) and returns once
    /// the broker has confirmed it durable. Unroutable messages are an error, not silence.
    async fn publish(&self, queue: &str, body: &[u8], dead_letter: bool) -> Result<(), QueueError>;

    /// Publishes to work queues with confirms pipelined: every message is sent, then every
    /// confirm awaited. One verdict per message, in order.
    async fn publish_many(&self, messages: &[Outgoing<'_>]) -> Vec<Result<(), QueueError>> {
        let mut verdicts = Vec::with_capacity(messages.len());
        for message in messages {
            verdicts.push(self.publish(message.queue, message.body, false).await);
        }
        verdicts
    }

    /// Puts a message in its queue's dead-letter queue, confirmed.
    async fn publish_dead_letter(&self, letter: DeadLetter<'_>) -> Result<(), QueueError>;

    /// Takes one ready message from a queue (or its dead-letter queue), if there is one; it is
    /// settled like a consumed one.
    async fn get(&self, queue: &str, dead_letter: bool) -> Result<Option<Delivery>, QueueError>;

    /// What the dead-letter queues keep.
    fn dead_letter_bounds(&self) -> DeadLetterBounds;

    /// A stream of deliveries from a work queue, at most `prefetch` unacknowledged at a time.
    /// The stream ends (or yields an error) when the connection is lost; callers consume again.
    async fn consume(
        &self,
        queue: &str,
        prefetch: u16,
    ) -> Result<BoxStream<'static, Result<Delivery, QueueError>>, QueueError>;

    /// Messages waiting in a queue (or its dead-letter queue), for metrics and tests.
    async fn depth(&self, queue: &str, dead_letter: bool) -> Result<u64, QueueError>;

    /// True when the broker answers now (for `/readyz`).
    async fn is_ready(&self) -> bool;
}

/// How long to wait before reconnecting after the `attempt`-th failure in a row.
pub fn reconnect_delay(attempt: u32) -> Duration {
    Duration::from_millis((250u64 << attempt.min(5)).min(5_000))
}
