//! Group commit for many concurrent tasks: each submits one small piece of database work and
//! waits for its answer; one runner takes every piece waiting when it is free and does them
//! together (one statement or one transaction), then answers each. Idle, a piece goes at once
//! (no timer, no added latency); under load, the pieces that arrived while the previous round
//! ran share the next one, so statements, round trips and commits per job fall as load rises.

use std::future::Future;

use tokio::sync::{mpsc, oneshot};

type Piece<I, O> = (I, oneshot::Sender<O>);

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
                while pieces.len() < max {
                    match rx.try_recv() {
                        Ok(piece) => pieces.push(piece),
                        Err(_) => break,
                    }
                }
                let (items, replies): (Vec<I>, Vec<oneshot::Sender<O>>) =
                    pieces.into_iter().unzip();
                let outputs = run(items).await;
                debug_assert_eq!(outputs.len(), replies.len(), "one output per item");
                for (reply, output) in replies.into_iter().zip(outputs) {
                    // A submitter that gave up (cancelled) no longer listens.
                    let _ = reply.send(output);
                }
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
}
