//! Fairness between endpoints and between the businesses that share one, per worker process:
//! each webhook URL may have at most `max_in_flight_per_endpoint` attempts in flight (a quick one,
//! `max_in_flight_per_quick_endpoint`), shared out between the senders (a business in a mode)
//! that currently use it, and a sender whose deliveries keep failing there is backed off by its
//! own circuit breaker. A delivery that may not go now is handed back to the outbox with a time
//! to come back (see [`Admission::Wait`]), so it holds no consumer slot while it waits and spends
//! none of its attempts.
//!
//! One business's failures never delay another's (docs/api/events-and-webhooks.md): a business that
//! points its URL at someone else's receiver gets refused there (wrong signature), and only its own
//! circuit opens. The slots protect the receiver from overload, so they stay per URL, but each
//! sender using it gets a fair share of them: one that holds its share waits while another wants a
//! slot.
//!
//! An endpoint that answers quickly frees its slots within moments: a delivery waits for one
//! in-process, briefly ([`SHORT_WAIT`]), which costs less than a trip through the outbox. Once its
//! attempts are known to average [`SHORT_WAIT`] or less it has more slots: they free up so soon
//! that they hold up nobody, and one business's drain to its own receiver is not bound by a limit
//! set for slow receivers (docs/operations/dead-letters-and-replay.md). Its semaphore grows then,
//! so deliveries already waiting get the new slots too; once its average is past [`SHORT_WAIT`]
//! it shrinks again, the slots in use being forgotten as their attempts end.
//!
//! A slow endpoint's deliveries are handed back at once, and spread over the times the sender's
//! share of slots is expected to free up (the endpoint's average attempt time divided among
//! them), so its backlog is looked at about once per expected slot instead of every second.
//!
//! Operators see the breakers in metrics without any per-endpoint label (URLs are unbounded and
//! may carry tokens): `webhook_endpoint_circuit_open` (breakers of an endpoint, business and
//! mode that are open or half-open in this process), `webhook_circuit_transitions_total{state}`
//! and `webhook_deliveries_deferred_total{reason}`; each transition is logged with the business
//! id, the mode and a hashed endpoint id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use domain::Mode;
use ops::config::WebhooksConfig;
use rand::Rng;
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The longest a delivery waits in-process for a slot of an endpoint whose attempts take at most
/// this long; a slower endpoint's deliveries do not wait at all.
pub const SHORT_WAIT: Duration = Duration::from_millis(250);

/// What an endpoint's attempt time is assumed to be before one has finished.
const PRIOR_ATTEMPT_TIME: Duration = Duration::from_secs(1);
/// The least time between two deferred deliveries' reservations at one endpoint.
const MIN_SPACING: Duration = Duration::from_millis(50);
/// Deferrals never reach further ahead than this: past it, a delivery simply looks again then.
const HORIZON: Duration = Duration::from_secs(60);
/// How long a sender still counts in the share-out of an endpoint's slots after it last asked
/// for one (or after the time it was told to come back): longer than the outbox takes to bring a
/// deferred delivery back (its relay sweeps each second), so a sender waiting for a slot keeps
/// its share meanwhile.
const ACTIVE_FOR: Duration = Duration::from_secs(3);
/// An endpoint idle (nothing in flight, circuits closed) this long is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// The limits, from the configuration.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_in_flight: usize,
    /// For a quick endpoint; never below `max_in_flight`.
    pub quick_max_in_flight: usize,
    pub failure_threshold: u32,
    pub cooldown: Duration,
    pub max_cooldown: Duration,
}

impl Limits {
    pub fn from_config(config: &WebhooksConfig) -> Self {
        let cooldown = Duration::from_secs(config.circuit_cooldown_secs.max(1));
        let max_in_flight = usize::from(config.max_in_flight_per_endpoint.max(1));
        Self {
            max_in_flight,
            quick_max_in_flight: usize::from(config.max_in_flight_per_quick_endpoint)
                .max(max_in_flight),
            failure_threshold: config.circuit_failure_threshold.max(1),
            cooldown,
            max_cooldown: Duration::from_secs(config.circuit_max_cooldown_secs).max(cooldown),
        }
    }
}

/// Whose deliveries: a business in one mode. Each has its own breaker at every endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sender {
    pub business_id: String,
    pub mode: Mode,
}

impl Sender {
    pub fn new(business_id: &str, mode: Mode) -> Self {
        Self {
            business_id: business_id.to_owned(),
            mode,
        }
    }
}

/// Why a delivery was handed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    /// The endpoint has its most attempts in flight, or the sender its share of them.
    EndpointBusy,
    /// The sender's circuit at the endpoint is open (or half-open with its probe in flight).
    CircuitOpen,
}

impl WaitReason {
    pub fn label(self) -> &'static str {
        match self {
            WaitReason::EndpointBusy => "endpoint_busy",
            WaitReason::CircuitOpen => "circuit_open",
        }
    }
}

pub enum Admission {
    /// Send now; report how it went with [`Permit::finish`].
    Go(Permit),
    /// Come back after this long.
    Wait { after: Duration, reason: WaitReason },
}

/// How an attempt ended, as the breaker counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx.
    Succeeded,
    /// A request was made and did not get a 2xx (an error status, a timeout, no connection).
    Failed,
    /// No request was made (the target was refused before sending): says nothing of the endpoint.
    NotSent,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Circuit {
    Closed { failures: u32 },
    Open { until: Instant, cooldown: Duration },
    HalfOpen { cooldown: Duration, probing: bool },
}

impl Circuit {
    /// How long a delivery that found it not closed waits (None when closed).
    fn wait(self, now: Instant) -> Option<Duration> {
        match self {
            Circuit::Closed { .. } => None,
            // Spread over the next cool-down, so they do not all come back at once.
            Circuit::Open { until, cooldown } => {
                Some(until.saturating_duration_since(now) + spread(cooldown))
            }
            Circuit::HalfOpen { cooldown, .. } => {
                Some(Duration::from_secs(1) + spread(cooldown / 2))
            }
        }
    }
}

#[derive(Debug)]
struct Endpoint {
    /// Hashed URL, for logs.
    id: String,
    /// One permit per attempt that may be in flight, whoever sends it: `max_in_flight`, and
    /// `quick_max_in_flight` while it is [`Endpoint::proven_quick`].
    slots: Arc<Semaphore>,
    /// Whether the quick endpoint's further permits are in `slots`.
    raised: bool,
    /// Permits in use to forget as their attempts end (the semaphore shrank meanwhile).
    owed: usize,
    /// Start times of the attempts in flight, by permit number.
    in_flight: Vec<(u64, Instant)>,
    /// Moving average of attempt times.
    average: Option<Duration>,
    senders: HashMap<Sender, SenderState>,
    last_seen: Instant,
}

/// One sender at one endpoint.
#[derive(Debug)]
struct SenderState {
    circuit: Circuit,
    /// Attempts admitted, in flight or waiting in-process for a slot.
    held: usize,
    /// The last time handed to a deferred delivery.
    reserved_until: Option<Instant>,
    /// Counts in the share-out of slots until then.
    active_until: Instant,
    last_seen: Instant,
}

impl SenderState {
    fn new(now: Instant) -> Self {
        Self {
            circuit: Circuit::Closed { failures: 0 },
            held: 0,
            reserved_until: None,
            active_until: now,
            last_seen: now,
        }
    }

    /// Whether it counts in the share-out: holding slots, or wanting them soon. One whose
    /// circuit is not closed waits (apart from its probe, which it holds).
    fn active(&self, now: Instant) -> bool {
        self.held > 0 || (self.active_until > now && matches!(self.circuit, Circuit::Closed { .. }))
    }

    fn idle(&self, now: Instant) -> bool {
        self.held == 0
            && matches!(self.circuit, Circuit::Closed { .. })
            && self.reserved_until.is_none_or(|t| t <= now)
            && now.duration_since(self.last_seen) >= FORGET_AFTER
    }
}

impl Endpoint {
    fn new(url: &str, limits: &Limits, now: Instant) -> Self {
        Self {
            id: endpoint_id(url),
            slots: Arc::new(Semaphore::new(limits.max_in_flight)),
            raised: false,
            owed: 0,
            in_flight: Vec::new(),
            average: None,
            senders: HashMap::new(),
            last_seen: now,
        }
    }

    /// Whether its attempts are quick enough for a delivery to wait for a slot in-process: its
    /// average, or before one is known, how long its attempts in flight have run so far.
    fn quick(&self, now: Instant) -> bool {
        match self.average {
            Some(_) => self.proven_quick(),
            None => self
                .in_flight
                .iter()
                .all(|(_, started)| now.duration_since(*started) <= SHORT_WAIT),
        }
    }

    /// Whether its attempts are known to be quick: their average, once one has finished.
    fn proven_quick(&self) -> bool {
        self.average.is_some_and(|average| average <= SHORT_WAIT)
    }

    /// The most attempts it may have in flight now.
    fn slots(&self, limits: &Limits) -> usize {
        if self.raised {
            limits.quick_max_in_flight
        } else {
            limits.max_in_flight
        }
    }

    /// Returns a permit to the semaphore, or forgets it while the semaphore is owed one.
    fn give_back(&mut self, slot: OwnedSemaphorePermit) {
        if self.owed > 0 {
            self.owed -= 1;
            slot.forget();
        } else {
            drop(slot);
        }
    }

    /// Grows or shrinks the semaphore to the endpoint's speed, after its average changed.
    fn resize(&mut self, limits: &Limits) {
        let extra = limits
            .quick_max_in_flight
            .saturating_sub(limits.max_in_flight);
        if extra == 0 || self.raised == self.proven_quick() {
            return;
        }
        self.raised = !self.raised;
        if self.raised {
            // Permits still owed from the last shrink need not be forgotten now.
            let kept = extra.min(self.owed);
            self.owed -= kept;
            self.slots.add_permits(extra - kept);
        } else {
            // Free permits go at once; those in use, as their attempts end.
            self.owed += extra - self.slots.forget_permits(extra);
        }
    }

    /// The senders using it now, and the most slots each may hold: all of them for one, an equal
    /// share (rounded up, at least one) between several.
    fn share(&self, slots: usize, now: Instant) -> (usize, usize) {
        let active = self
            .senders
            .values()
            .filter(|s| s.active(now))
            .count()
            .max(1);
        (active, slots.div_ceil(active).max(1))
    }

    fn idle(&self, now: Instant) -> bool {
        self.in_flight.is_empty()
            && self.senders.is_empty()
            && now.duration_since(self.last_seen) >= FORGET_AFTER
    }
}

/// The per-endpoint state of one worker process.
pub struct Endpoints {
    limits: Limits,
    inner: Mutex<Inner>,
}

struct Inner {
    endpoints: HashMap<String, Endpoint>,
    next_permit: u64,
    pruned_at: Option<Instant>,
}

/// Leave to send one attempt to one endpoint. Dropping it without [`Permit::finish`] (a
/// cancelled attempt) frees its slot and tells the breaker nothing.
pub struct Permit {
    endpoints: Arc<Endpoints>,
    slot: Option<OwnedSemaphorePermit>,
    url: String,
    sender: Sender,
    number: u64,
    probe: bool,
    finished: bool,
}

impl Permit {
    /// Frees the slot and tells the breaker how the attempt went (`took`: its duration).
    pub fn finish(mut self, outcome: Outcome, took: Duration, now: Instant) {
        self.finished = true;
        let endpoints = self.endpoints.clone();
        endpoints.release(&mut self, Some((outcome, took)), now);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.finished {
            let endpoints = self.endpoints.clone();
            endpoints.release(self, None, Instant::now());
        }
    }
}

/// A delivery's place in its sender's share while it waits for a slot: given back if the wait is
/// abandoned (its task cancelled), so the sender's share is not used up by deliveries long gone.
struct Claim<'a> {
    endpoints: &'a Endpoints,
    url: &'a str,
    sender: &'a Sender,
    armed: bool,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut inner = self.endpoints.inner.lock().expect("endpoint state lock");
        if let Some(state) = inner
            .endpoints
            .get_mut(self.url)
            .and_then(|e| e.senders.get_mut(self.sender))
        {
            state.held = state.held.saturating_sub(1);
        }
    }
}

impl Endpoints {
    pub fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            inner: Mutex::new(Inner {
                endpoints: HashMap::new(),
                next_permit: 0,
                pruned_at: None,
            }),
        })
    }

    /// May an attempt of `sender` to `url` go now? Waits at most [`SHORT_WAIT`], and only for a
    /// quick endpoint.
    pub async fn admit(self: &Arc<Self>, url: &str, sender: &Sender, now: Instant) -> Admission {
        let limits = &self.limits;
        let (slots, quick, probe) = {
            let mut inner = self.inner.lock().expect("endpoint state lock");
            inner.prune(now);
            let endpoint = inner
                .endpoints
                .entry(url.to_owned())
                .or_insert_with(|| Endpoint::new(url, limits, now));
            endpoint.last_seen = now;
            let state = endpoint
                .senders
                .entry(sender.clone())
                .or_insert_with(|| SenderState::new(now));
            state.last_seen = now;
            if let Circuit::Open { until, cooldown } = state.circuit
                && now >= until
            {
                state.circuit = Circuit::HalfOpen {
                    cooldown,
                    probing: false,
                };
                transition(&endpoint.id, state.circuit, sender, "half_open");
            }
            if let Some(after) = match state.circuit {
                Circuit::HalfOpen { probing: false, .. } => None,
                circuit => circuit.wait(now),
            } {
                // Its deliveries wait: it takes no share of the slots meanwhile.
                return Admission::Wait {
                    after,
                    reason: WaitReason::CircuitOpen,
                };
            }
            state.active_until = state.active_until.max(now + ACTIVE_FOR);
            let (active, share) = endpoint.share(endpoint.slots(limits), now);
            let state = endpoint.senders.get_mut(sender).expect("inserted above");
            if active > 1 && state.held >= share {
                // Its share is taken: the next free slot goes to a sender that wants one.
                let after = defer(endpoint, sender, share, now);
                return Admission::Wait {
                    after,
                    reason: WaitReason::EndpointBusy,
                };
            }
            let mut probe = false;
            if let Circuit::HalfOpen { probing, .. } = &mut state.circuit {
                *probing = true;
                probe = true;
            }
            state.held += 1;
            (endpoint.slots.clone(), endpoint.quick(now), probe)
        };
        let mut claim = Claim {
            endpoints: self,
            url,
            sender,
            armed: true,
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => Some(slot),
            Err(_) if quick && !probe => tokio::time::timeout(SHORT_WAIT, slots.acquire_owned())
                .await
                .ok()
                .and_then(Result::ok),
            Err(_) => None,
        };
        let mut inner = self.inner.lock().expect("endpoint state lock");
        // From here on the claim is settled below, under this lock.
        claim.armed = false;
        inner.next_permit += 1;
        let number = inner.next_permit;
        // Held (`held` > 0), so not pruned meanwhile; should it be gone, look again at once.
        let Some(endpoint) = inner.endpoints.get_mut(url) else {
            return Admission::Wait {
                after: Duration::ZERO,
                reason: WaitReason::EndpointBusy,
            };
        };
        let Some(state) = endpoint.senders.get_mut(sender) else {
            // Through `give_back`, so a permit owed to a shrink is forgotten, not returned.
            if let Some(slot) = slot {
                endpoint.give_back(slot);
            }
            return Admission::Wait {
                after: Duration::ZERO,
                reason: WaitReason::EndpointBusy,
            };
        };
        let Some(slot) = slot else {
            state.held -= 1;
            if probe && let Circuit::HalfOpen { probing, .. } = &mut state.circuit {
                // Earlier attempts still hold the slots: the probe goes once one is free.
                *probing = false;
            }
            let (_, share) = endpoint.share(endpoint.slots(limits), now);
            let after = defer(endpoint, sender, share, now);
            return Admission::Wait {
                after,
                reason: WaitReason::EndpointBusy,
            };
        };
        // While this one waited for a slot, the sender's attempts that held them may have opened
        // its circuit: a delivery admitted under a closed circuit must not slip through an open
        // one.
        if !probe && let Some(after) = state.circuit.wait(now) {
            state.held -= 1;
            endpoint.give_back(slot);
            return Admission::Wait {
                after,
                reason: WaitReason::CircuitOpen,
            };
        }
        endpoint.in_flight.push((number, Instant::now().max(now)));
        drop(inner);
        Admission::Go(Permit {
            endpoints: self.clone(),
            slot: Some(slot),
            url: url.to_owned(),
            sender: sender.clone(),
            number,
            probe,
            finished: false,
        })
    }

    fn release(&self, permit: &mut Permit, result: Option<(Outcome, Duration)>, now: Instant) {
        let limits = &self.limits;
        let mut inner = self.inner.lock().expect("endpoint state lock");
        let Some(endpoint) = inner.endpoints.get_mut(&permit.url) else {
            return;
        };
        endpoint.in_flight.retain(|(n, _)| *n != permit.number);
        endpoint.last_seen = now;
        if let Some((outcome, took)) = result
            && outcome != Outcome::NotSent
        {
            endpoint.average = Some(match endpoint.average {
                Some(average) => average.mul_f64(0.8) + took.mul_f64(0.2),
                None => took,
            });
            endpoint.resize(limits);
        }
        if let Some(slot) = permit.slot.take() {
            endpoint.give_back(slot);
        }
        let Some(state) = endpoint.senders.get_mut(&permit.sender) else {
            return;
        };
        state.held = state.held.saturating_sub(1);
        state.last_seen = now;
        let sender = &permit.sender;
        let Some((outcome, _)) = result else {
            if permit.probe
                && let Circuit::HalfOpen { probing, .. } = &mut state.circuit
            {
                *probing = false; // the next delivery probes instead
            }
            return;
        };
        let id = endpoint.id.as_str();
        match (outcome, state.circuit) {
            (Outcome::NotSent, Circuit::HalfOpen { cooldown, .. }) if permit.probe => {
                state.circuit = Circuit::HalfOpen {
                    cooldown,
                    probing: false,
                };
            }
            (Outcome::NotSent, _) => {}
            (Outcome::Succeeded, Circuit::Closed { .. }) => {
                state.circuit = Circuit::Closed { failures: 0 };
            }
            (Outcome::Succeeded, _) => {
                state.circuit = Circuit::Closed { failures: 0 };
                transition(id, state.circuit, sender, "closed");
            }
            (Outcome::Failed, Circuit::Closed { failures }) => {
                let failures = failures + 1;
                if failures >= limits.failure_threshold {
                    state.circuit = Circuit::Open {
                        until: now + limits.cooldown,
                        cooldown: limits.cooldown,
                    };
                    transition(id, state.circuit, sender, "open");
                } else {
                    state.circuit = Circuit::Closed { failures };
                }
            }
            (Outcome::Failed, Circuit::HalfOpen { cooldown, .. }) if permit.probe => {
                let cooldown = (cooldown * 2).min(limits.max_cooldown);
                state.circuit = Circuit::Open {
                    until: now + cooldown,
                    cooldown,
                };
                transition(id, state.circuit, sender, "open");
            }
            // An attempt that started before the circuit opened: it confirms what is known.
            (Outcome::Failed, _) => {}
        }
        let open = inner
            .endpoints
            .values()
            .flat_map(|e| e.senders.values())
            .filter(|s| !matches!(s.circuit, Circuit::Closed { .. }))
            .count();
        metrics::gauge!("webhook_endpoint_circuit_open").set(open as f64);
    }

    /// Endpoints this process knows of (for tests).
    pub fn known(&self) -> usize {
        self.inner
            .lock()
            .expect("endpoint state lock")
            .endpoints
            .len()
    }
}

impl Inner {
    fn prune(&mut self, now: Instant) {
        if self
            .pruned_at
            .is_some_and(|at| now.duration_since(at) < PRUNE_EVERY)
        {
            return;
        }
        self.pruned_at = Some(now);
        for endpoint in self.endpoints.values_mut() {
            endpoint.senders.retain(|_, s| !s.idle(now));
        }
        self.endpoints.retain(|_, e| !e.idle(now));
    }
}

/// Hands a delivery of `sender` back for later ([`reserve`]); the sender keeps its place in the
/// share-out until a little after it is due back.
fn defer(endpoint: &mut Endpoint, sender: &Sender, share: usize, now: Instant) -> Duration {
    let (attempt, first_free) = endpoint.expected_free(now);
    let Some(state) = endpoint.senders.get_mut(sender) else {
        return Duration::ZERO;
    };
    let after = reserve(state, attempt, first_free, share, now);
    state.active_until = state.active_until.max(now + after + ACTIVE_FOR);
    after
}

impl Endpoint {
    /// How long an attempt is expected to take, and when the oldest attempt in flight is
    /// expected to end.
    fn expected_free(&self, now: Instant) -> (Duration, Instant) {
        let attempt = self.average.unwrap_or(PRIOR_ATTEMPT_TIME).max(MIN_SPACING);
        let first_free = self
            .in_flight
            .iter()
            .map(|(_, started)| *started + attempt)
            .min()
            .unwrap_or(now)
            .max(now);
        (attempt, first_free)
    }
}

/// A time to come back for a deferred delivery: the next of the times the sender's share of
/// slots is expected to free up that none of its other deferred deliveries holds yet.
fn reserve(
    state: &mut SenderState,
    attempt: Duration,
    first_free: Instant,
    share: usize,
    now: Instant,
) -> Duration {
    let spacing = (attempt / u32::try_from(share).unwrap_or(u32::MAX)).max(MIN_SPACING);
    let last = state
        .reserved_until
        .filter(|t| *t >= first_free)
        .map_or(first_free, |t| t + spacing);
    if last - now > HORIZON {
        // Too far ahead to promise: look again then.
        return HORIZON + spread(HORIZON / 4);
    }
    state.reserved_until = Some(last);
    // A little past the expected end, so the slot is free by then.
    (last - now) + MIN_SPACING
}

/// Uniformly between zero and `up_to`.
fn spread(up_to: Duration) -> Duration {
    if up_to.is_zero() {
        return up_to;
    }
    up_to.mul_f64(rand::rng().random_range(0.0..=1.0))
}

fn transition(endpoint: &str, circuit: Circuit, sender: &Sender, state: &'static str) {
    metrics::counter!("webhook_circuit_transitions_total", "state" => state).increment(1);
    let (business_id, mode) = (sender.business_id.as_str(), sender.mode);
    match circuit {
        Circuit::Open { cooldown, .. } => tracing::warn!(
            endpoint,
            business_id,
            %mode,
            cooldown_secs = cooldown.as_secs(),
            "webhook endpoint keeps failing for this business: circuit open, its deliveries wait"
        ),
        _ => {
            tracing::info!(endpoint, business_id, %mode, state, "webhook endpoint circuit")
        }
    }
}

/// A short stable name for an endpoint that reveals nothing of its URL (which may carry a token).
pub fn endpoint_id(url: &str) -> String {
    hex::encode(&Sha256::digest(url.as_bytes())[..6])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_in_flight: 2,
            quick_max_in_flight: 2,
            failure_threshold: 3,
            cooldown: Duration::from_secs(10),
            max_cooldown: Duration::from_secs(30),
        }
    }

    fn sender(business_id: &str) -> Sender {
        Sender::new(business_id, Mode::Test)
    }

    fn go(admission: Admission) -> Permit {
        match admission {
            Admission::Go(permit) => permit,
            Admission::Wait { after, reason } => panic!("told to wait {after:?}: {reason:?}"),
        }
    }

    fn wait(admission: Admission) -> (Duration, WaitReason) {
        match admission {
            Admission::Go(_) => panic!("let through"),
            Admission::Wait { after, reason } => (after, reason),
        }
    }

    const A: &str = "https://a.example/hook";
    const B: &str = "https://b.example/hook";
    const SLOW: Duration = Duration::from_secs(8);

    #[tokio::test]
    async fn each_endpoint_has_its_own_bound_and_a_freed_slot_is_taken_again() {
        let endpoints = Endpoints::new(limits());
        let t = Instant::now();
        // Known to be slow: nobody waits for it in-process.
        go(endpoints.admit(A, &sender("biz_a"), t).await).finish(Outcome::Succeeded, SLOW, t);
        let first = go(endpoints.admit(A, &sender("biz_a"), t).await);
        let _second = go(endpoints.admit(A, &sender("biz_a"), t).await);
        let asked = Instant::now();
        let (_, reason) = wait(endpoints.admit(A, &sender("biz_a"), t).await);
        assert_eq!(reason, WaitReason::EndpointBusy);
        assert!(
            asked.elapsed() < Duration::from_millis(100),
            "handed back at once"
        );
        // Another endpoint is not affected.
        let _b = go(endpoints.admit(B, &sender("biz_b"), t).await);
        first.finish(Outcome::Succeeded, SLOW, t);
        let _third = go(endpoints.admit(A, &sender("biz_a"), t).await);
    }

    #[tokio::test]
    async fn a_quick_endpoint_is_waited_for_briefly_in_process() {
        let endpoints = Endpoints::new(limits());
        let t = Instant::now();
        let first = go(endpoints.admit(A, &sender("biz_a"), t).await);
        let _second = go(endpoints.admit(A, &sender("biz_a"), t).await);
        let freed = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            first.finish(
                Outcome::Succeeded,
                Duration::from_millis(50),
                Instant::now(),
            );
        });
        let asked = Instant::now();
        let _third = go(endpoints.admit(A, &sender("biz_a"), Instant::now()).await);
        assert!(asked.elapsed() >= Duration::from_millis(40));
        freed.await.unwrap();
        // No slot within the short wait: handed back.
        let asked = Instant::now();
        let (_, reason) = wait(endpoints.admit(A, &sender("biz_a"), Instant::now()).await);
        assert_eq!(reason, WaitReason::EndpointBusy);
        let waited = asked.elapsed();
        assert!(
            waited >= SHORT_WAIT && waited < SHORT_WAIT * 4,
            "{waited:?}"
        );
    }

    #[tokio::test]
    async fn a_cancelled_attempt_frees_its_slot() {
        let endpoints = Endpoints::new(limits());
        let t = Instant::now();
        go(endpoints.admit(A, &sender("biz_a"), t).await).finish(Outcome::Succeeded, SLOW, t);
        let first = go(endpoints.admit(A, &sender("biz_a"), t).await);
        let _second = go(endpoints.admit(A, &sender("biz_a"), t).await);
        drop(first);
        let _third = go(endpoints.admit(A, &sender("biz_a"), t).await);
    }

    #[tokio::test]
    async fn deferrals_of_a_busy_endpoint_are_spread_over_its_expected_free_slots() {
        let endpoints = Endpoints::new(limits());
        let t = Instant::now();
        // Learn that an attempt takes 8 s.
        go(endpoints.admit(A, &sender("biz_a"), t).await).finish(Outcome::Succeeded, SLOW, t);
        let _p1 = go(endpoints.admit(A, &sender("biz_a"), t).await);
        let _p2 = go(endpoints.admit(A, &sender("biz_a"), t).await);
        let mut afters = Vec::new();
        for _ in 0..6 {
            afters.push(
                wait(endpoints.admit(A, &sender("biz_a"), t).await)
                    .0
                    .as_secs_f64(),
            );
        }
        // First free at 8 s, then every 8 s / 2 slots = 4 s.
        for (after, expected) in afters.iter().zip([8.0, 12.0, 16.0, 20.0, 24.0, 28.0]) {
            assert!(
                (expected - 0.1..expected + 0.2).contains(after),
                "{afters:?}"
            );
        }
        // Past the horizon: look again in about a minute, without reserving.
        let mut far = Vec::new();
        for _ in 0..20 {
            far.push(
                wait(endpoints.admit(A, &sender("biz_a"), t).await)
                    .0
                    .as_secs_f64(),
            );
        }
        assert!(far.iter().any(|a| *a >= 60.0), "{far:?}");
        assert!(far.iter().all(|a| *a <= 75.5), "{far:?}");
    }

    #[tokio::test]
    async fn a_delivery_waiting_for_a_slot_does_not_slip_through_a_circuit_opened_meanwhile() {
        let endpoints = Endpoints::new(Limits {
            failure_threshold: 2,
            ..limits()
        });
        let t = Instant::now();
        // Both slots taken by attempts that will fail; a third delivery waits for a slot.
        let first = go(endpoints.admit(A, &sender("biz_a"), t).await);
        let second = go(endpoints.admit(A, &sender("biz_a"), t).await);
        let waiting = tokio::spawn({
            let endpoints = endpoints.clone();
            async move { endpoints.admit(A, &sender("biz_a"), t).await }
        });
        tokio::task::yield_now().await;
        // The two fail: the circuit opens, and their slots free up for the waiting one.
        first.finish(Outcome::Failed, Duration::ZERO, t);
        second.finish(Outcome::Failed, Duration::ZERO, t);
        let (after, reason) = wait(waiting.await.unwrap());
        assert_eq!(reason, WaitReason::CircuitOpen);
        assert!(
            after >= Duration::from_secs(5),
            "waits out the cool-down, not {after:?}"
        );
    }

    #[tokio::test]
    async fn the_circuit_opens_after_consecutive_failures_probes_once_and_closes_on_success() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        // This test's own recorder (the process-wide one is shared by every test); the test
        // runtime runs on this one thread.
        let guard = metrics::set_default_local_recorder(&recorder);
        let endpoints = Endpoints::new(limits());
        let t = Instant::now();
        let attempt = async |at: Instant, outcome: Outcome| {
            go(endpoints.admit(A, &sender("biz_a"), at).await).finish(outcome, Duration::ZERO, at)
        };
        attempt(t, Outcome::Failed).await;
        // A success resets the count: failures must be consecutive.
        attempt(t, Outcome::Succeeded).await;
        attempt(t, Outcome::Failed).await;
        attempt(t, Outcome::Failed).await;
        // Refused before sending: says nothing of the endpoint.
        attempt(t, Outcome::NotSent).await;
        attempt(t, Outcome::Failed).await;
        // Open: everything waits out the cool-down (10 s), spread over the next one.
        let (after, reason) = wait(
            endpoints
                .admit(A, &sender("biz_a"), t + Duration::from_secs(4))
                .await,
        );
        assert_eq!(reason, WaitReason::CircuitOpen);
        assert!(
            (6.0..=16.0).contains(&after.as_secs_f64()),
            "{after:?} after 4 s of 10"
        );
        // Another endpoint is not affected.
        drop(go(endpoints.admit(B, &sender("biz_b"), t).await));
        assert!(handle.render().contains("webhook_endpoint_circuit_open 1"));

        // Half-open: one probe, the others wait for it.
        let t = t + Duration::from_secs(10);
        let probe = go(endpoints.admit(A, &sender("biz_a"), t).await);
        assert_eq!(
            wait(endpoints.admit(A, &sender("biz_a"), t).await).1,
            WaitReason::CircuitOpen
        );
        // It fails: open again, for twice as long.
        probe.finish(Outcome::Failed, Duration::ZERO, t);
        let (after, _) = wait(
            endpoints
                .admit(A, &sender("biz_a"), t + Duration::from_secs(19))
                .await,
        );
        assert!(after >= Duration::from_secs(1), "{after:?}");
        let t = t + Duration::from_secs(20);
        // A cancelled probe lets the next delivery probe.
        drop(go(endpoints.admit(A, &sender("biz_a"), t).await));
        let probe = go(endpoints.admit(A, &sender("biz_a"), t).await);
        probe.finish(Outcome::Succeeded, SLOW, t);
        // Closed: back to the in-flight bound only.
        let _p1 = go(endpoints.admit(A, &sender("biz_a"), t).await);
        let _p2 = go(endpoints.admit(A, &sender("biz_a"), t).await);
        assert_eq!(
            wait(endpoints.admit(A, &sender("biz_a"), t).await).1,
            WaitReason::EndpointBusy
        );
        drop((_p1, _p2));
        drop(guard);
        let text = handle.render();
        for line in [
            r#"webhook_circuit_transitions_total{state="open"} 2"#,
            r#"webhook_circuit_transitions_total{state="half_open"} 2"#,
            r#"webhook_circuit_transitions_total{state="closed"} 1"#,
            "webhook_endpoint_circuit_open 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
        assert!(!text.contains("example"), "no URL in any label:\n{text}");
    }

    #[tokio::test]
    async fn the_cool_down_doubles_up_to_its_maximum() {
        let endpoints = Endpoints::new(limits());
        let mut t = Instant::now();
        for _ in 0..3 {
            go(endpoints.admit(A, &sender("biz_a"), t).await).finish(
                Outcome::Failed,
                Duration::ZERO,
                t,
            );
        }
        let mut cooldowns = Vec::new();
        for _ in 0..4 {
            // Step through the cool-down second by second until the probe goes.
            let mut waited = 0;
            let probe = loop {
                match endpoints.admit(A, &sender("biz_a"), t).await {
                    Admission::Go(p) => break p,
                    Admission::Wait { .. } => {
                        t += Duration::from_secs(1);
                        waited += 1;
                    }
                }
            };
            cooldowns.push(waited);
            probe.finish(Outcome::Failed, Duration::ZERO, t);
        }
        assert_eq!(cooldowns, [10, 20, 30, 30]);
    }

    #[tokio::test]
    async fn idle_endpoints_are_forgotten() {
        let endpoints = Endpoints::new(limits());
        let t = Instant::now();
        go(endpoints.admit(A, &sender("biz_a"), t).await).finish(
            Outcome::Succeeded,
            Duration::ZERO,
            t,
        );
        go(endpoints.admit(B, &sender("biz_b"), t).await).finish(
            Outcome::Succeeded,
            Duration::ZERO,
            t,
        );
        assert_eq!(endpoints.known(), 2);
        let later = t + FORGET_AFTER + PRUNE_EVERY;
        go(endpoints.admit(B, &sender("biz_b"), later).await).finish(
            Outcome::Succeeded,
            Duration::ZERO,
            later,
        );
        assert_eq!(endpoints.known(), 1);
    }

    #[tokio::test]
    async fn one_businesss_failures_open_only_its_own_circuit_at_a_shared_url() {
        let endpoints = Endpoints::new(limits());
        let t = Instant::now();
        let (attacker, victim) = (sender("biz_a"), sender("biz_b"));
        let victim_live = Sender::new("biz_b", Mode::Live);
        // The attacker's deliveries are refused (wrong signature) until its circuit opens.
        for _ in 0..3 {
            go(endpoints.admit(A, &attacker, t).await).finish(Outcome::Failed, Duration::ZERO, t);
        }
        assert_eq!(
            wait(endpoints.admit(A, &attacker, t).await).1,
            WaitReason::CircuitOpen
        );
        // The victim's deliveries to the same URL go at once, in either mode, and may use every
        // slot: a business whose deliveries wait out their circuit takes no share meanwhile.
        let both = [
            go(endpoints.admit(A, &victim, t).await),
            go(endpoints.admit(A, &victim, t).await),
        ];
        for permit in both {
            permit.finish(Outcome::Succeeded, Duration::ZERO, t);
        }
        go(endpoints.admit(A, &victim_live, t).await).finish(Outcome::Succeeded, Duration::ZERO, t);
        // One mode's failures leave the other mode's deliveries alone too.
        for _ in 0..3 {
            go(endpoints.admit(A, &victim_live, t).await).finish(
                Outcome::Failed,
                Duration::ZERO,
                t,
            );
        }
        assert_eq!(
            wait(endpoints.admit(A, &victim_live, t).await).1,
            WaitReason::CircuitOpen
        );
        drop(go(endpoints.admit(A, &victim, t).await));
    }

    #[tokio::test]
    async fn businesses_sharing_an_endpoint_share_its_slots() {
        let endpoints = Endpoints::new(Limits {
            max_in_flight: 4,
            quick_max_in_flight: 4,
            ..limits()
        });
        let t = Instant::now();
        let (greedy, other) = (sender("biz_a"), sender("biz_b"));
        // Known to be slow: nobody waits in-process.
        go(endpoints.admit(A, &greedy, t).await).finish(Outcome::Succeeded, SLOW, t);
        // Alone, one business may use every slot.
        let mut held: Vec<Permit> = Vec::new();
        for _ in 0..4 {
            held.push(go(endpoints.admit(A, &greedy, t).await));
        }
        // Another business finds them all taken and is told to come back when one frees up.
        let (after, reason) = wait(endpoints.admit(A, &other, t).await);
        assert_eq!(reason, WaitReason::EndpointBusy);
        assert!(after <= SLOW + Duration::from_secs(1), "{after:?}");
        // A slot frees up: the first business, over its half, does not get it back...
        held.pop().unwrap().finish(Outcome::Succeeded, SLOW, t);
        let t = t + Duration::from_secs(1);
        let (_, reason) = wait(endpoints.admit(A, &greedy, t).await);
        assert_eq!(reason, WaitReason::EndpointBusy);
        // ...the other business does, and keeps getting slots up to its half.
        let mine = go(endpoints.admit(A, &other, t).await);
        held.pop().unwrap().finish(Outcome::Succeeded, SLOW, t);
        assert_eq!(
            wait(endpoints.admit(A, &greedy, t).await).1,
            WaitReason::EndpointBusy
        );
        let _mine_too = go(endpoints.admit(A, &other, t).await);
        // At its half, it waits for its own to finish, and the first business gets the rest.
        assert_eq!(
            wait(endpoints.admit(A, &other, t).await).1,
            WaitReason::EndpointBusy
        );
        mine.finish(Outcome::Succeeded, SLOW, t);
        held.pop().unwrap().finish(Outcome::Succeeded, SLOW, t);
        let _greedy_again = go(endpoints.admit(A, &greedy, t).await);
        // Once the other business has gone quiet (none of its deliveries due back), the first
        // may use every slot again.
        drop(_mine_too);
        drop(held);
        let later = t + HORIZON * 2;
        let mut more = Vec::new();
        for _ in 0..3 {
            more.push(go(endpoints.admit(A, &greedy, later).await));
        }
    }

    #[tokio::test]
    async fn a_wait_for_a_slot_given_up_leaves_the_share_as_it_was() {
        let endpoints = Endpoints::new(limits());
        let t = Instant::now();
        let (first, second) = (sender("biz_a"), sender("biz_b"));
        // Alone, the first business holds both slots of a quick endpoint.
        let held = go(endpoints.admit(A, &first, t).await);
        let _also = go(endpoints.admit(A, &first, t).await);
        // The second waits in-process for a slot, and its task is cancelled meanwhile.
        let waiting = tokio::time::timeout(
            Duration::from_millis(20),
            endpoints.admit(A, &second, Instant::now()),
        );
        assert!(waiting.await.is_err(), "still waiting when cancelled");
        // Its share (one of two) is whole: it gets the next free slot.
        held.finish(
            Outcome::Succeeded,
            Duration::from_millis(10),
            Instant::now(),
        );
        let _mine = go(endpoints.admit(A, &second, Instant::now()).await);
    }

    #[tokio::test]
    async fn a_quick_endpoint_earns_more_slots_and_gives_them_back_once_slow() {
        let endpoints = Endpoints::new(Limits {
            max_in_flight: 2,
            quick_max_in_flight: 5,
            ..limits()
        });
        let t = Instant::now();
        let biz = sender("biz_a");
        // Not yet timed: the smaller bound, whatever the larger one.
        let first = [
            go(endpoints.admit(A, &biz, t).await),
            go(endpoints.admit(A, &biz, t).await),
        ];
        let waited = Instant::now();
        assert_eq!(
            wait(endpoints.admit(A, &biz, t).await).1,
            WaitReason::EndpointBusy
        );
        assert!(waited.elapsed() >= SHORT_WAIT, "waited in-process first");
        // Its attempts answer in 10 ms: it is quick, and may have five in flight.
        for permit in first {
            permit.finish(Outcome::Succeeded, Duration::from_millis(10), t);
        }
        let mut held: Vec<Permit> = Vec::new();
        for _ in 0..5 {
            held.push(go(endpoints.admit(A, &biz, t).await));
        }
        assert_eq!(
            wait(endpoints.admit(A, &biz, t).await).1,
            WaitReason::EndpointBusy
        );
        // One attempt takes 5 s: no longer quick. The semaphore is two again: a delivery finds
        // no slot while four attempts are in flight, and does not wait for one.
        held.remove(0)
            .finish(Outcome::Succeeded, Duration::from_secs(5), t);
        let waited = Instant::now();
        assert_eq!(
            wait(endpoints.admit(A, &biz, t).await).1,
            WaitReason::EndpointBusy
        );
        assert!(
            waited.elapsed() < SHORT_WAIT,
            "a slow endpoint's delivery does not wait"
        );
        // Two more end: their slots are forgotten, and two are still in flight.
        for permit in held.drain(..2) {
            permit.finish(Outcome::Succeeded, Duration::from_secs(5), t);
        }
        assert_eq!(
            wait(endpoints.admit(A, &biz, t).await).1,
            WaitReason::EndpointBusy
        );
        // One more ends: its slot is free again, and the next delivery takes it.
        held.remove(0)
            .finish(Outcome::Succeeded, Duration::from_secs(5), t);
        held.push(go(endpoints.admit(A, &biz, t).await));
        assert_eq!(
            wait(endpoints.admit(A, &biz, t).await).1,
            WaitReason::EndpointBusy
        );
        // Quick again (its average falls under the short wait): five at once again.
        for permit in held.drain(..) {
            permit.finish(Outcome::Succeeded, Duration::from_millis(1), t);
        }
        for _ in 0..12 {
            go(endpoints.admit(A, &biz, t).await).finish(
                Outcome::Succeeded,
                Duration::from_millis(1),
                t,
            );
        }
        let mut five = Vec::new();
        for _ in 0..5 {
            five.push(go(endpoints.admit(A, &biz, t).await));
        }
        assert_eq!(
            wait(endpoints.admit(A, &biz, t).await).1,
            WaitReason::EndpointBusy
        );
    }

    #[test]
    fn endpoint_ids_are_short_stable_and_do_not_show_the_url() {
        let id = endpoint_id("https://a.example/hook?token=s3cret");
        assert_eq!(id.len(), 12);
        assert_eq!(id, endpoint_id("https://a.example/hook?token=s3cret"));
        assert_ne!(id, endpoint_id(A));
    }
}
