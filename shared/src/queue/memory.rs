//! The in-process broker for `api dev` and tests: the same semantics as the RabbitMQ topology
//! (competing consumers, prefetch, requeue, dead-letter queues) inside one process.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::Notify;

use super::{Acker, Broker, Delivery, QUEUES, QueueError};

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
}

impl MemoryBroker {
    pub fn new() -> MemoryBroker {
        MemoryBroker::default()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Queue>> {
        // Nothing panics while the lock is held; a poisoned map is still consistent.
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, key: Key, message: Message, front: bool) {
        let mut queues = self.lock();
        let queue = queues.entry(key).or_default();
        if front {
            queue.ready.push_front(message);
        } else {
            queue.ready.push_back(message);
        }
        queue.changed.notify_waiters();
    }

    /// A consumer's delivery is settled: `requeue` puts it back, `dead` moves it to the DLQ,
    /// neither forgets it. Either way the consumer has room for one more.
    fn settle(&self, queue: &'static str, unacked: &AtomicUsize, outcome: Outcome) {
        let mut queues = self.lock();
        match outcome {
            Outcome::Ack => {}
            Outcome::Requeue(body) => {
                queues
                    .entry((queue, false))
                    .or_default()
                    .ready
                    .push_front(Message {
                        body,
                        redelivered: true,
                    })
            }
            Outcome::DeadLetter(body) => {
                let dead = queues.entry((queue, true)).or_default();
                dead.ready.push_back(Message {
                    body,
                    redelivered: false,
                });
                dead.changed.notify_waiters();
            }
        }
        unacked.fetch_sub(1, Ordering::SeqCst);
        queues
            .entry((queue, false))
            .or_default()
            .changed
            .notify_waiters();
    }
}

fn known(queue: &str) -> Result<&'static str, QueueError> {
    QUEUES
        .iter()
        .copied()
        .find(|q| *q == queue)
        .ok_or_else(|| QueueError::Unroutable(queue.to_owned()))
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
        let message = Message {
            body: body.to_vec(),
            redelivered: false,
        };
        self.shared.push((queue, dead_letter), message, false);
        Ok(())
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
        let queues = self.shared.lock();
        Ok(queues
            .get(&(queue, dead_letter))
            .map_or(0, |q| q.ready.len() as u64))
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
        Some(self.delivery(message))
    }

    fn delivery(&self, message: Message) -> Delivery {
        Delivery {
            body: message.body.clone(),
            redelivered: message.redelivered,
            acker: Box::new(MemoryAcker {
                shared: self.shared.clone(),
                queue: self.queue,
                unacked: self.unacked.clone(),
                body: Some(message.body),
            }),
        }
    }
}

enum Outcome {
    Ack,
    Requeue(Vec<u8>),
    DeadLetter(Vec<u8>),
}

struct MemoryAcker {
    shared: Arc<Shared>,
    queue: &'static str,
    unacked: Arc<AtomicUsize>,
    /// `None` once settled.
    body: Option<Vec<u8>>,
}

impl MemoryAcker {
    fn settle(&mut self, outcome: impl FnOnce(Vec<u8>) -> Outcome) {
        if let Some(body) = self.body.take() {
            self.shared.settle(self.queue, &self.unacked, outcome(body));
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
        self.settle(|body| {
            if requeue {
                Outcome::Requeue(body)
            } else {
                Outcome::DeadLetter(body)
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
