use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ops::config::Config;
use sea_orm::DatabaseConnection;
use shared::crypto::Cipher;
use shared::db::businesses::KeyOwner;
use shared::providers::Providers;
use shared::relay::Relay;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub db: DatabaseConnection,
    pub cipher: Arc<Cipher>,
    pub config: Arc<Config>,
    pub auth_cache: AuthCache,
    pub providers: Providers,
    /// Woken after a commit that wrote a job due now.
    pub relay: Relay,
}

impl AppState {
    pub fn new(db: DatabaseConnection, cipher: Arc<Cipher>, config: Config, relay: Relay) -> Self {
        let ttl = Duration::from_secs(config.http.auth_cache_secs);
        Self {
            db,
            cipher,
            providers: Providers::from_config(&config),
            config: Arc::new(config),
            auth_cache: AuthCache::new(ttl),
            relay,
        }
    }
}

/// Key hash → owner, for a few seconds: authentication costs no query on a hot path, and a KYB
/// approval or revocation made by another process is seen within the TTL.
/// When a key was looked up, and whose it was (None: nobody's).
type CachedOwner = (Instant, Option<KeyOwner>);

#[derive(Clone)]
pub struct AuthCache {
    ttl: Duration,
    entries: Arc<Mutex<HashMap<String, CachedOwner>>>,
}

impl AuthCache {
    fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Arc::default(),
        }
    }

    /// Some(answer) when cached and fresh; the answer itself may be "no such key".
    pub fn get(&self, key_hash: &str) -> Option<Option<KeyOwner>> {
        let entries = self.entries.lock().expect("auth cache lock");
        entries
            .get(key_hash)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, owner)| owner.clone())
    }

    pub fn put(&self, key_hash: String, owner: Option<KeyOwner>) {
        if self.ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().expect("auth cache lock");
        // Unknown keys are cached too (against floods of bad keys); bound the map so they can't
        // grow it without limit.
        if entries.len() >= 10_000 {
            entries.retain(|_, (at, _)| at.elapsed() < self.ttl);
            if entries.len() >= 10_000 {
                entries.clear();
            }
        }
        entries.insert(key_hash, (Instant::now(), owner));
    }
}
