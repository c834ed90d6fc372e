//! Group commit for many concurrent tasks: each submits one small piece of database work and
//! waits for its answer; one runner takes every piece waiting when it is free and does them
//! together (one statement or one transaction), then answers each. Idle, a piece goes after the
//! tasks woken with it have submitted theirs (scheduler passes, no timer); under load, the pieces
//! that arrived while the previous round ran share the next one, so statements, round trips and
//! commits per job fall as load rises.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

type Piece<I, O> = (I, oneshot::Sender<O>);

/// Answers a round's items, one output each in their order.
fn reply<O>(replies: Vec<oneshot::Sender<O>>, outputs: Vec<O>) {
    debug_assert_eq!(outputs.len(), replies.len(), "one output per item");
    for (reply, output) in replies.into_iter().zip(outputs) {
        // A submitter that gave up (cancelled) no longer listens.
        let _ = reply.send(output);
    }
}

/// Runs submitted items in rounds of at most `max` (see the module documentation). The runner
/// is a task that ends when the last clone of its `Coalescer` is dropped.
pub struct Coalescer<I, O> {
    tx: mpsc::UnboundedSender<Piece<I, O>>,
}

impl<I, O> Clone for Coalescer<I, O> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
        }
    }
}

impl<I: Send + 'static, O: Send + 'static> Coalescer<I, O> {
    /// `run` gets a round's items in the order they came and must answer one output per item,
    /// in the same order. Needs a Tokio runtime.
    pub fn new<F, Fut>(max: usize, run: F) -> Self
    where
        F: Fn(Vec<I>) -> Fut + Send + 'static,
        Fut: Future<Output = Vec<O>> + Send,
    {
        let max = max.max(1);
        let (tx, mut rx) = mpsc::unbounded_channel::<Piece<I, O>>();
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut pieces = vec![first];
                // The tasks already woken submit theirs before the round is taken: a burst (a
                // batch of jobs published together) shares one round, not a round of its first
                // item and another of the rest. A scheduler pass at a time, while a pass brings
                // more; no timer (docs/benchmarks.md, "A burst shares one round").
                loop {
                    tokio::task::yield_now().await;
                    let before = pieces.len();
                    while pieces.len() < max {
                        match rx.try_recv() {
                            Ok(piece) => pieces.push(piece),
                            Err(_) => break,
                        }
                    }
                    if pieces.len() == before || pieces.len() == max {
                        break;
                    }
                }
                let (items, replies): (Vec<I>, Vec<_>) = pieces.into_iter().unzip();
                reply(replies, run(items).await);
            }
        });
        Self { tx }
    }

    /// Submits one item and waits for its output; None if the runner is gone (its runtime is
    /// shutting down) or dropped the item's answer.
    pub async fn submit(&self, item: I) -> Option<O> {
        let (reply, answer) = oneshot::channel();
        self.tx.send((item, reply)).ok()?;
        answer.await.ok()
    }
}

/// A [`Coalescer`] per key, made when a key's first item comes and gone when it has nothing left:
/// a key's items share rounds as a `Coalescer`'s do, one round at a time, and never wait for
/// another key's round (each key's rounds are a task of their own). For work that must be done
/// one at a time per key anyway (e.g. everything that takes one row's lock): its items then share
/// one transaction instead of queueing for the row one commit after another.
pub struct Keyed<K, I, O> {
    inner: Arc<KeyedInner<K, I, O>>,
}

/// A key's round: its items in the order they came, one output each in that order.
pub type KeyedRun<K, I, O> = fn(&K, Vec<I>) -> BoxFuture<'static, Vec<O>>;

struct KeyedInner<K, I, O> {
    max: usize,
    run: KeyedRun<K, I, O>,
    /// The keys with a round running, and the items waiting for their next.
    waiting: Mutex<HashMap<K, Vec<Piece<I, O>>>>,
}

impl<K, I, O> Keyed<K, I, O>
where
    K: Eq + Hash + Clone + Send + Sync + 'static,
    I: Send + 'static,
    O: Send + 'static,
{
    /// Rounds of at most `max` items of one key. Needs a Tokio runtime.
    pub fn new(max: usize, run: KeyedRun<K, I, O>) -> Self {
        Self {
            inner: Arc::new(KeyedInner {
                max: max.max(1),
                run,
                waiting: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Submits one item of `key` and waits for its output; None if its round was lost (the task
    /// running it panicked).
    pub async fn submit(&self, key: K, item: I) -> Option<O> {
        let (reply, answered) = oneshot::channel();
        let first = {
            let mut waiting = self.inner.waiting();
            match waiting.get_mut(&key) {
                Some(queue) => {
                    queue.push((item, reply));
                    None
                }
                None => {
                    waiting.insert(key.clone(), Vec::new());
                    Some((item, reply))
                }
            }
        };
        if let Some(first) = first {
            // A task of its own, so that a submitter cancelled (its caller gone) does not take
            // the round, and the items waiting behind it, along.
            tokio::spawn(self.inner.clone().lead(key, first));
        }
        answered.await.ok()
    }

    /// How many items of `key` wait for its next round; None when no round of it runs.
    #[cfg(test)]
    pub(crate) fn waiting(&self, key: &K) -> Option<usize> {
        self.inner.waiting().get(key).map(Vec::len)
    }
}

impl<K, I, O> KeyedInner<K, I, O>
where
    K: Eq + Hash + Clone + Send + Sync + 'static,
    I: Send + 'static,
    O: Send + 'static,
{
    fn waiting(&self) -> MutexGuard<'_, HashMap<K, Vec<Piece<I, O>>>> {
        // Nothing panics while holding it; a poisoned map is still whole.
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `key`'s rounds until none of its items waits.
    async fn lead(self: Arc<Self>, key: K, first: Piece<I, O>) {
        // Should a round panic, the key is freed and its waiting items answered None.
        let mut leading = Leading {
            inner: &self,
            key: Some(key.clone()),
        };
        let mut pieces = vec![first];
        loop {
            let (items, replies): (Vec<I>, Vec<_>) = pieces.into_iter().unzip();
            let outputs = (self.run)(&key, items).await;
            // The next round is taken (or the key freed) before this one is answered, so that
            // whoever gets an answer finds the key as it is.
            let next = {
                let mut waiting = self.waiting();
                let queue = waiting.entry(key.clone()).or_default();
                if queue.is_empty() {
                    waiting.remove(&key);
                    leading.key = None;
                    None
                } else {
                    let n = queue.len().min(self.max);
                    Some(queue.drain(..n).collect())
                }
            };
            reply(replies, outputs);
            match next {
                Some(next) => pieces = next,
                None => return,
            }
        }
    }
}

/// A running key's round; dropped while still holding the key (its task unwinding), frees it.
struct Leading<'a, K: Eq + Hash, I, O> {
    inner: &'a KeyedInner<K, I, O>,
    key: Option<K>,
}

impl<K: Eq + Hash, I, O> Drop for Leading<'_, K, I, O> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let mut waiting = self
                .inner
                .waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            waiting.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn every_item_gets_its_own_answer_and_waiting_items_share_rounds() {
        let rounds = Arc::new(AtomicUsize::new(0));
        let counted = rounds.clone();
        let doubler = Coalescer::new(8, move |items: Vec<u32>| {
            counted.fetch_add(1, Ordering::Relaxed);
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                items.into_iter().map(|i| i * 2).collect()
            }
        });
        let answers = futures::future::join_all((0..40u32).map(|i| {
            let d = doubler.clone();
            async move { d.submit(i).await }
        }))
        .await;
        assert_eq!(answers, (0..40u32).map(|i| Some(i * 2)).collect::<Vec<_>>());
        let rounds = rounds.load(Ordering::Relaxed);
        assert!(
            (5..40).contains(&rounds),
            "40 items waiting together share rounds of at most 8: {rounds} rounds"
        );
    }

    /// A burst, as a worker gets it: a batch of messages, each handed to a task of its own, every
    /// task woken at once. On Tokio's multi-threaded scheduler the runner, woken by the first
    /// submission, would run next (the woken task's slot) and take a round of that one item.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_burst_of_tasks_woken_together_shares_one_round() {
        for burst in [2usize, 16, 64] {
            let sizes = Arc::new(std::sync::Mutex::new(Vec::new()));
            let seen = sizes.clone();
            let echo = Coalescer::new(64, move |items: Vec<usize>| {
                seen.lock().unwrap().push(items.len());
                async move { items }
            });
            // Spawned from a task on the one worker thread, as a consumer spawns its handlers.
            let answers = tokio::spawn(async move {
                let handlers: Vec<_> = (0..burst)
                    .map(|i| {
                        let echo = echo.clone();
                        tokio::spawn(async move { echo.submit(i).await })
                    })
                    .collect();
                let mut answers = Vec::new();
                for handler in handlers {
                    answers.push(handler.await.unwrap());
                }
                answers
            })
            .await
            .unwrap();
            assert_eq!(answers, (0..burst).map(Some).collect::<Vec<_>>());
            assert_eq!(
                *sizes.lock().unwrap(),
                vec![burst],
                "{burst} items submitted together"
            );
        }
    }

    /// Rounds of keys 0 and 1 wait for a permit of their gate (counted); other keys' go at once.
    /// Items doubled; item 13 panics its round.
    static GATES: [tokio::sync::Semaphore; 2] = [
        tokio::sync::Semaphore::const_new(0),
        tokio::sync::Semaphore::const_new(0),
    ];
    static GATED_ROUNDS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

    fn gated_double(key: &usize, items: Vec<u32>) -> BoxFuture<'static, Vec<u32>> {
        let key = *key;
        Box::pin(async move {
            if let Some(gate) = GATES.get(key) {
                gate.acquire().await.unwrap().forget();
                GATED_ROUNDS[key].fetch_add(1, Ordering::Relaxed);
            }
            assert!(!items.contains(&13), "unlucky");
            items.into_iter().map(|i| i * 2).collect()
        })
    }

    /// Until `n` items wait for key's next round (0: its first round is running).
    async fn until_waiting(keyed: &Keyed<usize, u32, u32>, key: usize, n: usize) {
        for _ in 0..1000 {
            if keyed.waiting(&key) == Some(n) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("{n} items never waited for key {key}");
    }

    #[tokio::test]
    async fn a_keys_items_share_rounds_and_never_wait_for_another_keys() {
        let keyed = Arc::new(Keyed::new(64, gated_double));
        let submit = |item: u32| {
            let k = keyed.clone();
            tokio::spawn(async move { k.submit(0, item).await })
        };
        // Key 0's first round holds it; 30 more of its items wait for the next round.
        let first = submit(1);
        until_waiting(&keyed, 0, 0).await;
        let rest: Vec<_> = (100..130u32).map(submit).collect();
        until_waiting(&keyed, 0, 30).await;
        // Another key's item goes at once, not after key 0's rounds.
        assert_eq!(keyed.submit(7, 21).await, Some(42));
        assert!(!first.is_finished(), "key 0's first round is still held");
        GATES[0].add_permits(2);
        assert_eq!(first.await.unwrap(), Some(2));
        for (answer, item) in rest.into_iter().zip(100..130u32) {
            assert_eq!(answer.await.unwrap(), Some(item * 2));
        }
        assert_eq!(
            GATED_ROUNDS[0].load(Ordering::Relaxed),
            2,
            "the 30 shared one round"
        );
        assert!(
            keyed.inner.waiting().is_empty(),
            "an idle key holds nothing"
        );
    }

    #[tokio::test]
    async fn a_round_that_panics_frees_its_key() {
        let keyed = Arc::new(Keyed::new(64, gated_double));
        let submit = |item: u32| {
            let k = keyed.clone();
            tokio::spawn(async move { k.submit(1, item).await })
        };
        let lost = submit(13);
        until_waiting(&keyed, 1, 0).await;
        let behind = submit(5);
        until_waiting(&keyed, 1, 1).await;
        GATES[1].add_permits(1);
        assert_eq!(lost.await.unwrap(), None, "its round panicked");
        assert_eq!(
            behind.await.unwrap(),
            None,
            "it waited for the round that panicked"
        );
        assert!(keyed.inner.waiting().is_empty());
        GATES[1].add_permits(1);
        assert_eq!(
            keyed.submit(1, 6).await,
            Some(12),
            "the key takes items again"
        );
    }
}
