//! The webhook receiver of the run: it notes when each event arrives.

use super::*;

/// Send and arrival times (µs since the start, 0 = not yet) of every event of the run.
pub struct Tracker {
    pub(super) start: Instant,
    pub(super) sent: Vec<AtomicU64>,
    pub(super) received: Vec<AtomicU64>,
    /// Distinct events received.
    pub(super) arrived: AtomicU64,
    pub(super) duplicates: AtomicU64,
    /// Requests without a marker of this run.
    pub(super) strangers: AtomicU64,
    pub(super) changed: Notify,
}

impl Tracker {
    pub fn new(capacity: u64) -> Arc<Self> {
        let slots = |n: u64| (0..n).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        Arc::new(Self {
            start: Instant::now(),
            sent: slots(capacity),
            received: slots(capacity),
            arrived: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            strangers: AtomicU64::new(0),
            changed: Notify::new(),
        })
    }

    pub(super) fn now_us(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    pub fn mark_sent(&self, seq: u64) {
        if let Some(slot) = self.sent.get(seq as usize) {
            slot.store(self.now_us(), Ordering::Relaxed);
        }
    }

    /// Records one arrival; true when it is the event's first.
    pub fn arrive(&self, body: &[u8]) -> bool {
        let Some(seq) = find_seq(body).filter(|s| (*s as usize) < self.received.len()) else {
            self.strangers.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        let first = self.received[seq as usize]
            .compare_exchange(0, self.now_us(), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        if first {
            self.arrived.fetch_add(1, Ordering::Relaxed);
            self.changed.notify_waiters();
        } else {
            self.duplicates.fetch_add(1, Ordering::Relaxed);
        }
        first
    }

    /// Whether every event of `range` arrived.
    pub(super) fn all_arrived(&self, range: &std::ops::Range<u64>) -> bool {
        range
            .clone()
            .all(|s| self.received[s as usize].load(Ordering::Relaxed) != 0)
    }

    /// Waits until every event of `range` arrived; false on timeout.
    pub(super) async fn wait_for(&self, range: std::ops::Range<u64>, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.changed.notified();
            if self.all_arrived(&range) {
                return true;
            }
            // A short poll as well: notify_waiters only wakes those already waiting.
            let poll = tokio::time::sleep(Duration::from_millis(20));
            tokio::select! {
                () = changed => {}
                () = poll => {}
                () = tokio::time::sleep_until(deadline) => return self.all_arrived(&range),
            }
        }
    }

    pub(super) fn missing(&self, range: &std::ops::Range<u64>) -> u64 {
        range
            .clone()
            .filter(|s| self.received[*s as usize].load(Ordering::Relaxed) == 0)
            .count() as u64
    }

    /// The latest arrival in `range`, in µs since the start.
    pub(super) fn last_arrival(&self, range: &std::ops::Range<u64>) -> u64 {
        range
            .clone()
            .map(|s| self.received[s as usize].load(Ordering::Relaxed))
            .max()
            .unwrap_or(0)
    }

    /// Send → received of every event of `range` that has both.
    pub(super) fn latencies(&self, range: &std::ops::Range<u64>) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds");
        for s in range.clone() {
            let sent = self.sent[s as usize].load(Ordering::Relaxed);
            let got = self.received[s as usize].load(Ordering::Relaxed);
            if sent != 0 && got != 0 {
                h.saturating_record(got.saturating_sub(sent).max(1));
            }
        }
        h
    }
}

/// The number after [`MARKER`] in a body.
pub fn find_seq(body: &[u8]) -> Option<u64> {
    let marker = MARKER.as_bytes();
    let at = body.windows(marker.len()).position(|w| w == marker)? + marker.len();
    let digits = body[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&body[at..at + digits])
        .ok()?
        .parse()
        .ok()
}

pub(super) async fn receive(State(tracker): State<Arc<Tracker>>, body: Bytes) -> StatusCode {
    tracker.arrive(&body);
    StatusCode::OK
}

/// Starts the receiver; returns its address.
pub async fn start_receiver(bind: SocketAddr, tracker: Arc<Tracker>) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("binding the receiver to {bind}"))?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new().fallback(receive).with_state(tracker);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("receiver stopped: {e}");
        }
    });
    Ok(addr)
}
