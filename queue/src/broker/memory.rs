//! The in-process broker for `api dev` and tests: the same semantics as the RabbitMQ topology
//! (competing consumers, prefetch, requeue, dead-letter queues bounded in length and age) inside
//! one process.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{Acker, Broker, DeadLetter, DeadLetterBounds, Delivery, QUEUES, QueueError, known};

/// An in-process broker. Clones share the same queues.
#[derive(Clone, Default)]
pub struct MemoryBroker {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MemoryBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBroker").finish_non_exhaustive()
    }
}

/// A queue is a work queue's name and whether it is the dead-letter queue beside it.
type Key = (&'static str, bool);

#[derive(Default)]
struct Shared {
    queues: Mutex<HashMap<Key, Queue>>,
    dead_letters: DeadLetterBounds,
}

#[derive(Default)]
struct Queue {
    ready: VecDeque<Message>,
    /// Woken when a message becomes ready or a consumer gets room under its prefetch.
    changed: Arc<Notify>,
}

struct Message {
    body: Vec<u8>,
    redelivered: bool,
    /// Gone from the queue then (dead letters only).
    expires_at: Option<Instant>,
}

impl Queue {
    /// Drops what expired: as RabbitMQ does, from the head.
    fn expire(&mut self) {
        let now = Instant::now();
        while self
            .ready
            .front()
            .is_some_and(|m| m.expires_at.is_some_and(|at| at <= now))
        {
            self.ready.pop_front();
        }
    }
}

impl MemoryBroker {
    pub fn new() -> MemoryBroker {
        MemoryBroker::default()
    }

    /// A broker whose dead-letter queues keep what `bounds` allows (the default otherwise).
    pub fn with_dead_letter_bounds(bounds: DeadLetterBounds) -> MemoryBroker {
        MemoryBroker {
            shared: Arc::new(Shared {
                queues: Mutex::default(),
                dead_letters: bounds,
            }),
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Queue>> {
        // Nothing panics while the lock is held; a poisoned map is still consistent.
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, key: Key, body: Vec<u8>) {
        self.push_expiring(key, body, None);
    }

    /// Appends a message; a dead letter expires after the bound's TTL (or `expires_in`, if
    /// sooner) and pushes out the oldest beyond the bound's length.
    fn push_expiring(&self, key: Key, body: Vec<u8>, expires_in: Option<Duration>) {
        let mut queues = self.lock();
        self.push_locked(&mut queues, key, body, expires_in);
    }

    fn push_locked(
        &self,
        queues: &mut HashMap<Key, Queue>,
        key: Key,
        body: Vec<u8>,
        expires_in: Option<Duration>,
    ) {
        let queue = queues.entry(key).or_default();
        let (_, dead_letter) = key;
        let expires_at = dead_letter.then(|| {
            let ttl = self.dead_letters.ttl;
            Instant::now() + expires_in.map_or(ttl, |e| e.min(ttl))
        });
        queue.ready.push_back(Message {
            body,
            redelivered: false,
            expires_at,
        });
        if dead_letter {
            let max = self.dead_letters.max_length as usize;
            while queue.ready.len() > max {
                queue.ready.pop_front();
            }
        }
        queue.changed.notify_waiters();
    }

    /// A delivery is settled: `requeue` puts it back, `dead` moves it to the DLQ (a dead letter
    /// dead-lettered again is dropped, as a DLQ without its own DLX does), neither forgets it.
    /// Either way its consumer has room for one more.
    fn settle(&self, key: Key, unacked: &AtomicUsize, outcome: Outcome) {
        let mut queues = self.lock();
        match outcome {
            Outcome::Ack => {}
            Outcome::Requeue(message) => queues.entry(key).or_default().ready.push_front(Message {
                redelivered: true,
                ..message
            }),
            Outcome::DeadLetter(message) => {
                let (queue, dead_letter) = key;
                if !dead_letter {
                    self.push_locked(&mut queues, (queue, true), message.body, None);
                }
            }
        }
        unacked.fetch_sub(1, Ordering::SeqCst);
        queues.entry(key).or_default().changed.notify_waiters();
    }
}

#[async_trait]
impl Broker for MemoryBroker {
    async fn declare(&self) -> Result<(), QueueError> {
        let mut queues = self.shared.lock();
        for q in QUEUES {
            queues.entry((q, false)).or_default();
            queues.entry((q, true)).or_default();
        }
        Ok(())
    }

    async fn publish(&self, queue: &str, body: &[u8], dead_letter: bool) -> Result<(), QueueError> {
        let queue = known(queue)?;
        self.shared.push((queue, dead_letter), body.to_vec());
        Ok(())
    }

    async fn publish_dead_letter(&self, letter: DeadLetter<'_>) -> Result<(), QueueError> {
        let queue = known(letter.queue)?;
        self.shared
            .push_expiring((queue, true), letter.body.to_vec(), Some(letter.expires_in));
        Ok(())
    }

    async fn get(&self, queue: &str, dead_letter: bool) -> Result<Option<Delivery>, QueueError> {
        let key = (known(queue)?, dead_letter);
        let message = {
            let mut queues = self.shared.lock();
            let queue = queues.entry(key).or_default();
            queue.expire();
            queue.ready.pop_front()
        };
        // Its own count: a `get` is no consumer's prefetch.
        let unacked = Arc::new(AtomicUsize::new(1));
        Ok(message.map(|m| delivery(&self.shared, key, &unacked, m)))
    }

    fn dead_letter_bounds(&self) -> DeadLetterBounds {
        self.shared.dead_letters
    }

    async fn consume(
        &self,
        queue: &str,
        prefetch: u16,
    ) -> Result<BoxStream<'static, Result<Delivery, QueueError>>, QueueError> {
        let consumer = Consumer {
            shared: self.shared.clone(),
            queue: known(queue)?,
            // As in AMQP, a prefetch of 0 means no limit.
            prefetch: if prefetch == 0 {
                usize::MAX
            } else {
                usize::from(prefetch)
            },
            unacked: Arc::new(AtomicUsize::new(0)),
        };
        let stream = futures::stream::unfold(consumer, |consumer| async move {
            let delivery = consumer.next().await;
            Some((Ok(delivery), consumer))
        });
        Ok(stream.boxed())
    }

    async fn depth(&self, queue: &str, dead_letter: bool) -> Result<u64, QueueError> {
        let queue = known(queue)?;
        let mut queues = self.shared.lock();
        Ok(queues.get_mut(&(queue, dead_letter)).map_or(0, |q| {
            q.expire();
            q.ready.len() as u64
        }))
    }

    async fn is_ready(&self) -> bool {
        true
    }
}

struct Consumer {
    shared: Arc<Shared>,
    queue: &'static str,
    prefetch: usize,
    /// Deliveries handed out and not yet settled; shared with their ackers.
    unacked: Arc<AtomicUsize>,
}

impl Consumer {
    async fn next(&self) -> Delivery {
        loop {
            let changed = self
                .shared
                .lock()
                .entry((self.queue, false))
                .or_default()
                .changed
                .clone();
            let notified = changed.notified();
            tokio::pin!(notified);
            // Registered before looking, so a change between the look and the wait wakes us.
            notified.as_mut().enable();
            if let Some(delivery) = self.try_take() {
                return delivery;
            }
            notified.await;
        }
    }

    fn try_take(&self) -> Option<Delivery> {
        let mut queues = self.shared.lock();
        if self.unacked.load(Ordering::SeqCst) >= self.prefetch {
            return None;
        }
        let message = queues.get_mut(&(self.queue, false))?.ready.pop_front()?;
        self.unacked.fetch_add(1, Ordering::SeqCst);
        Some(delivery(
            &self.shared,
            (self.queue, false),
            &self.unacked,
            message,
        ))
    }
}

fn delivery(
    shared: &Arc<Shared>,
    key: Key,
    unacked: &Arc<AtomicUsize>,
    message: Message,
) -> Delivery {
    Delivery {
        body: message.body.clone(),
        redelivered: message.redelivered,
        acker: Box::new(MemoryAcker {
            shared: shared.clone(),
            key,
            unacked: unacked.clone(),
            message: Some(message),
        }),
    }
}

enum Outcome {
    Ack,
    Requeue(Message),
    DeadLetter(Message),
}

struct MemoryAcker {
    shared: Arc<Shared>,
    /// The queue it came from.
    key: Key,
    unacked: Arc<AtomicUsize>,
    /// `None` once settled.
    message: Option<Message>,
}

impl MemoryAcker {
    fn settle(&mut self, outcome: impl FnOnce(Message) -> Outcome) {
        if let Some(message) = self.message.take() {
            self.shared
                .settle(self.key, &self.unacked, outcome(message));
        }
    }
}

#[async_trait]
impl Acker for MemoryAcker {
    async fn ack(mut self: Box<Self>) -> Result<(), QueueError> {
        self.settle(|_| Outcome::Ack);
        Ok(())
    }

    async fn nack(mut self: Box<Self>, requeue: bool) -> Result<(), QueueError> {
        self.settle(|message| {
            if requeue {
                Outcome::Requeue(message)
            } else {
                Outcome::DeadLetter(message)
            }
        });
        Ok(())
    }
}

impl Drop for MemoryAcker {
    /// Neither acked nor nacked: back to the queue, as RabbitMQ does when a channel closes.
    fn drop(&mut self) {
        self.settle(Outcome::Requeue);
    }
}
