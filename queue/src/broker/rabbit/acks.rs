//! Settling deliveries: one acker per message, and each consuming channel's acks sent together
//! where AMQP allows.

use super::*;

pub(super) struct RabbitAcker {
    /// `None` once used.
    pub(super) acker: Option<lapin::Acker>,
    /// The consuming channel's batches and this message's tag; `None` for `basic.get`.
    pub(super) batches: Option<(Arc<AckBatches>, u64)>,
    /// Keeps the delivery's channel open until it is settled.
    pub(super) channel: Channel,
}

impl RabbitAcker {
    pub(super) async fn settle(&mut self, requeue: Option<bool>) -> Result<(), QueueError> {
        let Some(acker) = self.acker.take() else {
            return Ok(());
        };
        let batches = self.batches.take();
        let (what, sent) = match (requeue, batches) {
            (None, Some((batches, tag))) => return batches.ack(tag, acker).await,
            (None, None) => ("ack", acker.ack(BasicAckOptions::default()).await),
            (Some(requeue), batches) => {
                let sent = acker
                    .nack(BasicNackOptions {
                        multiple: false,
                        requeue,
                    })
                    .await;
                // Only once the nack is on its way: until then no batch may cover the message.
                if let Some((batches, tag)) = batches {
                    batches.settled(tag);
                }
                ("nack", sent)
            }
        };
        settlement(what, sent)
    }
}

/// What became of one `basic.ack` or `basic.nack`.
pub(super) fn settlement(what: &str, sent: lapin::Result<bool>) -> Result<(), QueueError> {
    match sent {
        Ok(true) => Ok(()),
        Ok(false) => Err(QueueError::Unreachable(format!(
            "cannot {what}: the delivery's channel closed, so the broker will deliver it again"
        ))),
        Err(error) => Err(lapin_error(what, &error)),
    }
}

#[async_trait]
impl Acker for RabbitAcker {
    async fn ack(mut self: Box<Self>) -> Result<(), QueueError> {
        self.settle(None).await
    }

    async fn nack(mut self: Box<Self>, requeue: bool) -> Result<(), QueueError> {
        self.settle(Some(requeue)).await
    }
}

impl Drop for RabbitAcker {
    /// Neither acked nor nacked: requeue it now rather than when the channel closes, so it does
    /// not hold a prefetch slot meanwhile (as the memory broker does).
    fn drop(&mut self) {
        let batches = self.batches.take();
        let Some(acker) = self.acker.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if acker.usable() => {
                let channel = self.channel.clone();
                runtime.spawn(async move {
                    let requeue = BasicNackOptions {
                        multiple: false,
                        requeue: true,
                    };
                    if let Err(error) = acker.nack(requeue).await {
                        tracing::debug!(%error, "requeueing a dropped delivery");
                    }
                    if let Some((batches, tag)) = batches {
                        batches.settled(tag);
                    }
                    drop(channel);
                });
            }
            // The channel is gone (it returns the message) or there is no runtime to send on:
            // the message stays unsettled, so no batch of this channel may cover it.
            _ => drop(batches),
        }
    }
}

/// One consuming channel's acknowledgements, sent together where AMQP allows
/// (docs/decisions/quorum-queues.md). A `basic.ack` with `multiple` settles every message of the
/// channel up to its tag, and a quorum queue then appends one settle command to its log, not one
/// per message. The acks that come while a frame is being sent go out together in the next one.
///
/// A batch only ever covers messages this process acked: it reaches up to just below the oldest
/// message of the channel not yet settled here (tags grow in delivery order, so a message
/// delivered later cannot fall under it). An ack above that message is sent on its own at once,
/// so a slow message (an endpoint taking its time) holds back no other's ack, and a nack is sent
/// before its message leaves the open set, so no batch overtakes it.
pub(super) struct AckBatches {
    pub(super) state: std::sync::Mutex<AckState>,
    pub(super) sent: Arc<AtomicU64>,
}

#[derive(Default)]
pub(super) struct AckState {
    /// Delivered to this process and not yet settled by it.
    pub(super) open: BTreeSet<u64>,
    /// Acked here and waiting for the frame that settles them.
    pub(super) waiting: Vec<WaitingAck>,
    /// A task is sending frames; acks that come meanwhile wait for its next round.
    pub(super) sending: bool,
}

pub(super) struct WaitingAck {
    pub(super) tag: u64,
    pub(super) acker: lapin::Acker,
    pub(super) done: tokio::sync::oneshot::Sender<Result<(), QueueError>>,
}

impl AckBatches {
    pub(super) fn new(sent: Arc<AtomicU64>) -> Self {
        AckBatches {
            state: std::sync::Mutex::default(),
            sent,
        }
    }

    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, AckState> {
        // Nothing panics while holding it; a poisoned lock still holds consistent sets.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a delivered message; the acker settles it through these batches.
    pub(super) fn open(self: &Arc<Self>, tag: u64) -> (Arc<Self>, u64) {
        self.state().open.insert(tag);
        (self.clone(), tag)
    }

    /// The message was settled otherwise (a nack sent) or will be by the channel's end.
    pub(super) fn settled(&self, tag: u64) {
        self.state().open.remove(&tag);
    }

    /// Acks `tag`, returning once a frame that settles it is sent.
    pub(super) async fn ack(
        self: Arc<Self>,
        tag: u64,
        acker: lapin::Acker,
    ) -> Result<(), QueueError> {
        let (done, sent) = tokio::sync::oneshot::channel();
        let lead = {
            let mut state = self.state();
            state.open.remove(&tag);
            state.waiting.push(WaitingAck { tag, acker, done });
            !std::mem::replace(&mut state.sending, true)
        };
        if lead {
            // Its own task: a caller cancelled mid-send must not leave the others waiting.
            tokio::spawn(self.send());
        }
        match sent.await {
            Ok(verdict) => verdict,
            Err(_) => Err(QueueError::Unreachable(
                "the acknowledgement was abandoned; the broker will deliver it again".to_owned(),
            )),
        }
    }

    /// Sends what is waiting, round after round, until nothing is.
    pub(super) async fn send(self: Arc<Self>) {
        loop {
            let (waiting, floor) = {
                let mut state = self.state();
                if state.waiting.is_empty() {
                    state.sending = false;
                    return;
                }
                let floor = state.open.first().copied().unwrap_or(u64::MAX);
                (std::mem::take(&mut state.waiting), floor)
            };
            let (mut covered, alone): (Vec<_>, Vec<_>) =
                waiting.into_iter().partition(|w| w.tag < floor);
            covered.sort_unstable_by_key(|w| w.tag);
            let mut frames = Vec::with_capacity(alone.len() + 1);
            if let Some(last) = covered.pop() {
                frames.push((last, covered));
            }
            frames.extend(alone.into_iter().map(|w| (w, Vec::new())));
            let counter: &AtomicU64 = &self.sent;
            let sends = frames.into_iter().map(|(last, below)| async move {
                let multiple = !below.is_empty();
                let sent = last.acker.ack(BasicAckOptions { multiple }).await;
                counter.fetch_add(1, Ordering::Relaxed);
                let verdict = settlement("ack", sent);
                for w in below {
                    let _ = w.done.send(verdict.clone());
                }
                let _ = last.done.send(verdict);
            });
            futures::future::join_all(sends).await;
        }
    }
}
