use domain::ids::BusinessId;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use crypto::Cipher;
use domain::user::SessionLimits;
use moka::sync::Cache;
use ops::config::Config;
use outbound::providers::Providers;
use queue::relay::Relay;
use sea_orm::{DatabaseConnection, DbBackend};
use store::changes::{self, Heard};
use store::keys::KeyOwner;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::cookies::CookiePolicy;
use crate::passwords::Hashing;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub db: DatabaseConnection,
    pub cipher: Arc<Cipher>,
    pub config: Arc<Config>,
    pub auth_cache: AuthCache,
    pub auth_failures: AuthFailures,
    /// Dashboard sign-in attempts per client address (`VAS_DASHBOARD__SIGN_INS_PER_MINUTE`).
    pub sign_in_attempts: AuthFailures,
    /// The bound on Argon2id computations at once.
    pub hashing: Hashing,
    pub providers: Providers,
    /// Woken after a commit that wrote a job due now.
    pub relay: Relay,
    /// How the dashboard's cookies are sent: from the configured public URL, and whether this
    /// is `api dev` on loopback ([`AppState::in_dev_on`]).
    pub cookies: CookiePolicy,
    /// Where lists, search and exports read (a replica when configured); by-id reads and
    /// everything written use `db`.
    pub reads: store::read::Reads,
    /// How many creations of one business this process has in PostgreSQL at once.
    pub creations: CreationGate,
}

impl AppState {
    pub fn new(db: DatabaseConnection, cipher: Arc<Cipher>, config: Config, relay: Relay) -> Self {
        let ttl = Duration::from_secs(config.http.auth_cache_secs);
        Self {
            reads: store::read::Reads::primary_only(db.clone()),
            db,
            cipher,
            providers: Providers::from_config(&config),
            auth_cache: AuthCache::new(ttl),
            auth_failures: AuthFailures::new(config.limits.auth_failures_per_minute),
            sign_in_attempts: AuthFailures::new(config.dashboard.sign_ins_per_minute),
            hashing: Hashing::new(&config.dashboard),
            cookies: CookiePolicy::new(config.dashboard.public_url.as_deref(), None),
            config: Arc::new(config),
            relay,
            creations: CreationGate::default(),
        }
    }

    /// The state of `api dev` listening at `listener`: on loopback, the dashboard's cookies go
    /// without `Secure` unless the public URL is https.
    pub fn in_dev_on(mut self, listener: SocketAddr) -> Self {
        self.cookies =
            CookiePolicy::new(self.config.dashboard.public_url.as_deref(), Some(listener));
        self
    }

    /// How long a dashboard session lasts idle and at most: what the session extractor ends and
    /// the maintenance task purges.
    pub fn session_limits(&self) -> SessionLimits {
        let c = &self.config.dashboard;
        SessionLimits {
            idle: chrono::Duration::seconds(c.idle_timeout_secs as i64),
            absolute: chrono::Duration::seconds(c.absolute_timeout_secs as i64),
        }
    }

    /// Lists and search read from `reads` (a replica) instead of the primary.
    pub fn with_reads(mut self, reads: store::read::Reads) -> Self {
        self.reads = reads;
        self
    }
}

/// How many creations of one business in one mode a process lets into PostgreSQL at once. Each
/// holds that business's row (its rolling-hour count) from its count to its commit, so only one
/// makes progress; with 32 queued there, the lock manager's own work made a creation cost 1.3–1.4
/// ms of PostgreSQL CPU instead of 1.0. A few keep the row's next holder ready.
pub const CREATIONS_IN_DATABASE_PER_BUSINESS: usize = 4;

/// Per business and mode, a semaphore of [`CREATIONS_IN_DATABASE_PER_BUSINESS`] permits; a
/// business with none in flight holds no entry, so the map is as large as the businesses
/// creating accounts right now (a wait its caller abandoned may leave one idle entry, until that
/// business's next creation ends: at most one per business and mode).
#[derive(Clone, Default)]
pub struct CreationGate {
    open: Arc<std::sync::Mutex<std::collections::HashMap<BusinessMode, Arc<Semaphore>>>>,
}

type BusinessMode = (BusinessId, domain::Mode);

/// A creation's turn in PostgreSQL; dropping it lets the business's next one in.
pub struct CreationTurn {
    gate: CreationGate,
    key: BusinessMode,
    semaphore: Arc<Semaphore>,
    permit: Option<OwnedSemaphorePermit>,
}

impl CreationGate {
    /// Waits (first come, first served) until the business has a free place. The wait is part of
    /// getting a connection, so it is bounded as that is ([`store::ACQUIRE_TIMEOUT`]) and
    /// fails as that does (a 503 with Retry-After): with the database down, queued creations
    /// answer then, not one pool timeout after another.
    pub async fn enter(
        &self,
        business_id: &BusinessId,
        mode: domain::Mode,
    ) -> Result<CreationTurn, sea_orm::DbErr> {
        self.enter_within(business_id, mode, store::ACQUIRE_TIMEOUT)
            .await
    }

    async fn enter_within(
        &self,
        business_id: &BusinessId,
        mode: domain::Mode,
        limit: Duration,
    ) -> Result<CreationTurn, sea_orm::DbErr> {
        let key = (business_id.to_owned(), mode);
        let semaphore = self
            .open
            .lock()
            .expect("not poisoned")
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(CREATIONS_IN_DATABASE_PER_BUSINESS)))
            .clone();
        let mut turn = CreationTurn {
            gate: self.clone(),
            key,
            semaphore: semaphore.clone(),
            permit: None,
        };
        match tokio::time::timeout(limit, semaphore.acquire_owned()).await {
            Ok(permit) => {
                turn.permit = Some(permit.expect("never closed"));
                Ok(turn)
            }
            // Dropping `turn` forgets the business if nobody else is in or waiting.
            Err(_) => Err(sea_orm::DbErr::ConnectionAcquire(
                sea_orm::ConnAcquireErr::Timeout,
            )),
        }
    }

    #[cfg(test)]
    fn businesses(&self) -> usize {
        self.open.lock().expect("not poisoned").len()
    }
}

impl Drop for CreationTurn {
    fn drop(&mut self) {
        drop(self.permit.take());
        let mut open = self.gate.open.lock().expect("not poisoned");
        // Clones are taken under this lock: held by the map and this turn alone, nobody waits.
        if Arc::strong_count(&self.semaphore) == 2 {
            open.remove(&self.key);
        }
    }
}

/// Working keys this process has seen, more than any business has; past it the least useful
/// entries are evicted one by one, never the whole cache.
const CACHED_KEYS: u64 = 100_000;

/// How long a key that worked is remembered as one (its hash only), so that its address being
/// over the failure limit does not refuse it (one egress address may serve
/// several businesses).
const KNOWN_KEY_SECS: u64 = 24 * 3600;

/// Key hash → owner of a working key, for a few seconds: authentication costs no query on a hot
/// path. A KYB approval, roll or revocation made by any process is heard at once
/// ([`AuthCache::follow_changes`]) and the business's entries forgotten (a rolled key's own
/// expiry is honoured exactly); the TTL only bounds what a change never announced can cost.
/// Unknown keys are not cached: what they cost is bounded by [`AuthFailures`] instead, and they
/// cannot push working keys out.
#[derive(Clone)]
pub struct AuthCache {
    keys: Option<Cache<String, Arc<CachedKey>>>,
    /// False while changes cannot be heard (the listener's connection is lost): nothing is
    /// served from `keys` nor kept in it then.
    hearing: Arc<AtomicBool>,
    /// Moved by every change heard, before its entries are forgotten: a lookup that read the
    /// database before a change is not kept after it ([`Lookup`]).
    changes_heard: Arc<AtomicU64>,
    /// Hashes of keys that worked in this process lately, however short `keys`' TTL: only
    /// someone who holds a working key can present one, so looking it up is never the flood the
    /// failure limit guards against, and two businesses behind one address (a NAT, a PaaS) do
    /// not lock each other out. Each holds the minute this process last stamped, so that a
    /// lookup (no cache, or an expired entry) does not stamp the same minute again.
    known: Cache<String, Arc<AtomicI64>>,
}

/// How many changes the cache had heard when a lookup began.
#[derive(Debug, Clone, Copy)]
pub struct Lookup(u64);

/// A working key's owner, and the minute of its last use as this process last saw it.
#[derive(Debug)]
pub struct CachedKey {
    pub owner: KeyOwner,
    /// Minutes since the epoch; i64::MIN when never used. Shared by every entry of the key.
    used_minute: Arc<AtomicI64>,
}

impl CachedKey {
    /// `owner` as just read, with the minute this process last stamped (`used_minute`), which
    /// takes the stored stamp when that is later.
    fn new(owner: KeyOwner, used_minute: Arc<AtomicI64>) -> Self {
        used_minute.fetch_max(
            owner.last_used_at.map_or(i64::MIN, minute_number),
            Ordering::Relaxed,
        );
        Self { owner, used_minute }
    }

    /// True once per minute (per process): when `at`'s minute is later than the stored one, so
    /// the caller writes the new minute; every other request of that minute writes nothing.
    pub fn claim_use_stamp(&self, at: DateTime<Utc>) -> bool {
        let minute = minute_number(at);
        let mut seen = self.used_minute.load(Ordering::Relaxed);
        while seen < minute {
            match self.used_minute.compare_exchange(
                seen,
                minute,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now_seen) => seen = now_seen,
            }
        }
        false
    }
}

fn minute_number(t: DateTime<Utc>) -> i64 {
    t.timestamp().div_euclid(60)
}

impl AuthCache {
    fn new(ttl: Duration) -> Self {
        let keys = (!ttl.is_zero()).then(|| {
            Cache::builder()
                .max_capacity(CACHED_KEYS)
                .time_to_live(ttl)
                .build()
        });
        let known = Cache::builder()
            .max_capacity(CACHED_KEYS)
            .time_to_live(Duration::from_secs(KNOWN_KEY_SECS))
            .build();
        Self {
            keys,
            hearing: Arc::new(AtomicBool::new(true)),
            changes_heard: Arc::new(AtomicU64::new(0)),
            known,
        }
    }

    pub fn get(&self, key_hash: &str) -> Option<Arc<CachedKey>> {
        if !self.hearing.load(Ordering::SeqCst) {
            return None;
        }
        self.keys.as_ref()?.get(key_hash)
    }

    /// Taken before a key is looked up in the database, and given to [`insert`](Self::insert).
    pub fn lookup(&self) -> Lookup {
        Lookup(self.changes_heard.load(Ordering::SeqCst))
    }

    /// Hears key and KYB changes made by any process (docs/decisions/auth-cache.md) until
    /// `shutdown`; with no cache there is nothing to forget, and nothing is followed. On PostgreSQL
    /// nothing is cached until the listener listens.
    pub fn follow_changes(
        &self,
        db: DatabaseConnection,
        shutdown: CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        let cache = self.clone();
        let follows = cache.keys.is_some();
        if follows && db.get_database_backend() == DbBackend::Postgres {
            cache.hear(Heard::Deaf);
        }
        async move {
            if follows {
                changes::follow(db, shutdown, move |heard| cache.hear(heard)).await;
            }
        }
    }

    /// Forgets what `heard` may have made untrue.
    pub fn hear(&self, heard: Heard) {
        let Some(keys) = &self.keys else {
            return;
        };
        self.changes_heard.fetch_add(1, Ordering::SeqCst);
        match heard {
            Heard::Business(id) => {
                for (hash, entry) in keys.iter() {
                    if entry.owner.business_id == id {
                        keys.invalidate(hash.as_str());
                    }
                }
            }
            Heard::Anything | Heard::Deaf => {
                self.hearing
                    .store(heard == Heard::Anything, Ordering::SeqCst);
                keys.invalidate_all();
            }
        }
    }

    /// True when the key worked here lately: it is looked up even from an address over the
    /// failure limit.
    pub fn is_known(&self, key_hash: &str) -> bool {
        self.known.contains_key(key_hash)
    }

    /// Caches a working key's owner, read after `lookup` (when caching is on and no change was
    /// heard since), and returns the entry to use.
    pub fn insert(&self, key_hash: String, owner: KeyOwner, lookup: Lookup) -> Arc<CachedKey> {
        let used_minute = self
            .known
            .get(&key_hash)
            .unwrap_or_else(|| Arc::new(AtomicI64::new(i64::MIN)));
        // Inserted again, so a key in use stays known: its time to live starts anew.
        self.known.insert(key_hash.clone(), used_minute.clone());
        let entry = Arc::new(CachedKey::new(owner, used_minute));
        let unchanged = || self.changes_heard.load(Ordering::SeqCst) == lookup.0;
        if let Some(keys) = &self.keys
            && self.hearing.load(Ordering::SeqCst)
            && unchanged()
        {
            keys.insert(key_hash.clone(), entry.clone());
            // A change heard between the check and the insert forgot everything but this entry.
            if !unchanged() {
                keys.invalidate(&key_hash);
            }
        }
        entry
    }

    /// The key stopped working (a roll's grace ended; revoked): not cached, no longer known.
    pub fn forget(&self, key_hash: &str) {
        self.known.invalidate(key_hash);
        if let Some(keys) = &self.keys {
            keys.invalidate(key_hash);
        }
    }
}

/// The window failed authentications are counted in.
const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Client addresses tracked at once; past it the least useful are evicted one by one.
const TRACKED_ADDRESSES: u64 = 100_000;

/// Failed authentications per client address in fixed one-minute windows: over the limit, the
/// address's requests are refused (429) before any database lookup, until its window ends.
#[derive(Clone)]
pub struct AuthFailures {
    limit: u32,
    windows: Cache<IpAddr, Arc<FailureWindow>>,
}

#[derive(Debug)]
struct FailureWindow {
    started: Instant,
    failures: AtomicU32,
}

impl AuthFailures {
    fn new(limit: u32) -> Self {
        Self {
            limit,
            windows: Cache::builder()
                .max_capacity(TRACKED_ADDRESSES)
                .time_to_live(FAILURE_WINDOW)
                .build(),
        }
    }

    /// Seconds until the address may try again, when it is over the limit.
    pub fn retry_after(&self, client: IpAddr) -> Option<u64> {
        if self.limit == 0 {
            return None;
        }
        let window = self.windows.get(&client_key(client))?;
        let left = FAILURE_WINDOW.checked_sub(window.started.elapsed())?;
        (window.failures.load(Ordering::Relaxed) >= self.limit)
            .then(|| left.as_secs_f64().ceil().max(1.0) as u64)
    }

    /// Counts one failed authentication from the address.
    pub fn record(&self, client: IpAddr) {
        if self.limit == 0 {
            return;
        }
        let key = client_key(client);
        let window = self.window(key);
        if window.failures.fetch_add(1, Ordering::Relaxed) + 1 == self.limit {
            tracing::warn!(
                client = %key,
                limit = self.limit,
                "too many failed authentications from one address: refusing it for the rest of \
                 the minute"
            );
        }
    }

    /// Counts one attempt from the address and decides it in the same step (so attempts sent at
    /// once cannot all pass): None when it may go ahead, else the seconds until the address may
    /// try again.
    pub fn admit(&self, client: IpAddr) -> Option<u64> {
        if self.limit == 0 {
            return None;
        }
        let window = self.window(client_key(client));
        let counted = window
            .failures
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        (counted > self.limit).then(|| {
            let left = FAILURE_WINDOW.saturating_sub(window.started.elapsed());
            left.as_secs_f64().ceil().max(1.0) as u64
        })
    }

    /// The address's current window (a new one once the last is a minute old).
    fn window(&self, key: IpAddr) -> Arc<FailureWindow> {
        let window = self.windows.get_with(key, Self::fresh_window);
        if window.started.elapsed() < FAILURE_WINDOW {
            return window;
        }
        let window = Self::fresh_window();
        self.windows.insert(key, window.clone());
        window
    }

    fn fresh_window() -> Arc<FailureWindow> {
        Arc::new(FailureWindow {
            started: Instant::now(),
            failures: AtomicU32::new(0),
        })
    }
}

/// The unit a client is counted by: an IPv4 address, or an IPv6 /64 (one subscriber's
/// allocation; counting single IPv6 addresses would let one client rotate through 2^64 of them).
fn client_key(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_clients_are_counted_per_64_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_key(a), client_key(b));
        assert_ne!(client_key(a), client_key(other));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(client_key(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn an_address_is_refused_after_the_limit_and_others_are_not() {
        let failures = AuthFailures::new(3);
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        for _ in 0..2 {
            failures.record(client);
        }
        assert_eq!(failures.retry_after(client), None);
        failures.record(client);
        let retry = failures.retry_after(client).expect("over the limit");
        assert!((1..=60).contains(&retry), "{retry}");
        assert_eq!(failures.retry_after(other), None);
        assert_eq!(AuthFailures::new(0).retry_after(client), None);
    }

    #[test]
    fn admitted_attempts_are_counted_and_decided_in_one_step() {
        let attempts = AuthFailures::new(2);
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(attempts.admit(client), None);
        assert_eq!(attempts.admit(client), None);
        let retry = attempts.admit(client).expect("the third is over the limit");
        assert!((1..=60).contains(&retry), "{retry}");
        assert_eq!(attempts.admit("192.0.2.2".parse().unwrap()), None);
        assert_eq!(AuthFailures::new(0).admit(client), None);
    }

    async fn every_place_of_biz_1(gate: &CreationGate) -> Vec<CreationTurn> {
        let mut turns = Vec::new();
        for _ in 0..CREATIONS_IN_DATABASE_PER_BUSINESS {
            turns.push(
                gate.enter(&BusinessId::unchecked("biz_1"), domain::Mode::Test)
                    .await
                    .unwrap(),
            );
        }
        turns
    }

    #[tokio::test]
    async fn a_business_has_at_most_its_places_in_the_database_and_then_no_entry() {
        let gate = CreationGate::default();
        let mut turns = every_place_of_biz_1(&gate).await;
        // Full: the next creation of that business waits; another business's or mode's does not.
        let (biz_1, biz_2) = (
            BusinessId::unchecked("biz_1"),
            BusinessId::unchecked("biz_2"),
        );
        let next = gate.enter(&biz_1, domain::Mode::Test);
        tokio::pin!(next);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), next.as_mut())
                .await
                .is_err()
        );
        drop(gate.enter(&biz_2, domain::Mode::Test).await.unwrap());
        drop(gate.enter(&biz_1, domain::Mode::Live).await.unwrap());
        turns.pop();
        let last = tokio::time::timeout(Duration::from_secs(1), next)
            .await
            .expect("a place freed lets the waiting creation in")
            .unwrap();
        drop(turns);
        assert_eq!(gate.businesses(), 1, "biz_1 still has one in flight");
        drop(last);
        assert_eq!(gate.businesses(), 0, "no creation in flight, no entry");
    }

    /// A creation that finds no place in time fails as a pool timeout does, which the api
    /// answers 503 with Retry-After (`store::failover::is_unavailable`).
    #[tokio::test]
    async fn a_wait_for_a_place_is_bounded_and_answered_unavailable() {
        let gate = CreationGate::default();
        let turns = every_place_of_biz_1(&gate).await;
        let biz_1 = BusinessId::unchecked("biz_1");
        let waited = gate.enter_within(&biz_1, domain::Mode::Test, Duration::from_millis(50));
        let err = tokio::time::timeout(Duration::from_secs(5), waited)
            .await
            .expect("the wait ends at its limit")
            .err()
            .expect("no place within the limit");
        assert!(store::failover::is_unavailable(&err), "{err}");
        drop(turns);
        assert_eq!(gate.businesses(), 0, "the timed-out wait left no entry");
    }

    /// A working test key of one business, last used at `last_used_at`.
    fn key_owner(last_used_at: Option<DateTime<Utc>>) -> KeyOwner {
        KeyOwner {
            key_id: domain::ids::KeyId::unchecked("key_1"),
            business_id: BusinessId::unchecked("biz_1"),
            business_name: "Acme".into(),
            mode: domain::Mode::Test,
            kyb_status: domain::KybStatus::Approved,
            expires_at: None,
            last_used_at,
        }
    }

    #[test]
    fn the_use_stamp_is_claimed_once_per_minute() {
        let at = DateTime::parse_from_rfc3339("2024-05-01T10:42:10Z")
            .unwrap()
            .to_utc();
        let owner = key_owner(Some(at - chrono::TimeDelta::minutes(3)));
        let entry = CachedKey::new(owner, Arc::new(AtomicI64::new(i64::MIN)));
        assert!(entry.claim_use_stamp(at));
        assert!(!entry.claim_use_stamp(at + chrono::TimeDelta::seconds(40)));
        assert!(entry.claim_use_stamp(at + chrono::TimeDelta::seconds(50)));
        // A clock that steps back claims nothing.
        assert!(!entry.claim_use_stamp(at));
    }

    #[test]
    fn a_lookup_does_not_stamp_a_minute_this_process_stamped() {
        let at = DateTime::parse_from_rfc3339("2024-05-01T10:42:10Z")
            .unwrap()
            .to_utc();
        let never_used = || key_owner(None);
        // No owner cache: every request looks the key up.
        let cache = AuthCache::new(Duration::ZERO);
        assert!(
            cache
                .insert("hash".into(), never_used(), cache.lookup())
                .claim_use_stamp(at)
        );
        // The stamp is written beside the request: the next lookup may not see it yet.
        let again = cache.insert("hash".into(), never_used(), cache.lookup());
        assert!(!again.claim_use_stamp(at + chrono::TimeDelta::seconds(5)));
        assert!(again.claim_use_stamp(at + chrono::TimeDelta::seconds(60)));
        // Forgotten (revoked, say), the key starts from what is stored.
        cache.forget("hash");
        assert!(
            cache
                .insert("hash".into(), never_used(), cache.lookup())
                .claim_use_stamp(at)
        );
    }

    /// A key of `business`, as a lookup found it.
    fn owner_of(business: &str) -> KeyOwner {
        KeyOwner {
            business_id: BusinessId::unchecked(business),
            ..key_owner(None)
        }
    }

    #[test]
    fn a_change_heard_forgets_that_business_only() {
        let cache = AuthCache::new(Duration::from_secs(600));
        cache.insert("a".into(), owner_of("biz_1"), cache.lookup());
        cache.insert("b".into(), owner_of("biz_2"), cache.lookup());
        cache.hear(Heard::Business("biz_1".into()));
        assert!(
            cache.get("a").is_none(),
            "the changed business is looked up again"
        );
        assert!(cache.get("b").is_some(), "another business keeps its entry");
        cache.hear(Heard::Anything);
        assert!(cache.get("b").is_none(), "anything may have changed");
    }

    #[test]
    fn a_lookup_that_began_before_a_change_is_not_kept() {
        let cache = AuthCache::new(Duration::from_secs(600));
        let lookup = cache.lookup();
        // The key was read, then its change was heard, then the lookup ended.
        cache.hear(Heard::Business("biz_1".into()));
        let entry = cache.insert("a".into(), owner_of("biz_1"), lookup);
        assert_eq!(
            entry.owner.business_id, "biz_1",
            "the request itself is served"
        );
        assert!(cache.get("a").is_none(), "but the answer is not kept");
    }

    #[test]
    fn nothing_is_cached_while_changes_cannot_be_heard() {
        let cache = AuthCache::new(Duration::from_secs(600));
        cache.insert("a".into(), owner_of("biz_1"), cache.lookup());
        cache.hear(Heard::Deaf);
        assert!(cache.get("a").is_none());
        cache.insert("a".into(), owner_of("biz_1"), cache.lookup());
        assert!(cache.get("a").is_none(), "not kept while deaf");
        cache.hear(Heard::Anything);
        cache.insert("a".into(), owner_of("biz_1"), cache.lookup());
        assert!(
            cache.get("a").is_some(),
            "listening again, the cache serves again"
        );
    }
}
