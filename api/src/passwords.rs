//! Argon2id password hashes, computed a bounded number at a time. Each computation needs 19 MiB,
//! so an unbounded number (a flood of sign-ins) would take memory without limit: [`Hashing`] lets
//! `concurrent_password_hashes` run at once, and an attempt that cannot start within
//! `password_hash_wait_ms` is refused with [`Busy`] (429 with `Retry-After`).
//!
//! The 19 MiB are not allocated per computation either: each one that runs takes a buffer from a
//! pool of at most `concurrent_password_hashes` (made on first use, kept). Allocating them anew
//! left the memory with the allocator of whichever blocking thread ran the hash, one arena per
//! thread, so even two at a time grew the process by hundreds of MiB that it kept.

use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use argon2::password_hash::{Output, ParamsString, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, PasswordHash, Version};
use ops::config::DashboardConfig;
use rand::Rng;
use tokio::sync::Semaphore;

/// Counts every password really checked (a right or wrong one, or the dummy of an unknown
/// e-mail), so `/metrics` shows the work sign-ins cost.
pub const CHECKS_METRIC: &str = "dashboard_password_checks_total";

/// Too many passwords are being hashed at once: try again in `retry_after_secs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many password checks at once")]
pub struct Busy {
    pub retry_after_secs: u64,
}

/// The gate every Argon2id computation of the api passes.
#[derive(Clone)]
pub struct Hashing {
    permits: Arc<Semaphore>,
    wait: Duration,
    /// Argon2's working memory, one buffer per computation running (never more than permits).
    memory: Arc<Mutex<Vec<Vec<Block>>>>,
}

/// A turn at computing one hash: taken before anything else a sign-in does, so an attempt
/// beyond the bound is refused before it costs database work too.
pub struct Turn(tokio::sync::OwnedSemaphorePermit);

/// The working memory of one computation, given back to the pool when dropped.
struct Memory {
    blocks: Vec<Block>,
    pool: Arc<Mutex<Vec<Vec<Block>>>>,
}

impl Memory {
    /// At least `count` blocks (a stored hash of other parameters may need more than ours).
    fn blocks(&mut self, count: usize) -> &mut [Block] {
        if self.blocks.len() < count {
            self.blocks.resize(count, Block::default());
        }
        &mut self.blocks[..count]
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        let blocks = std::mem::take(&mut self.blocks);
        if let Ok(mut pool) = self.pool.lock() {
            pool.push(blocks);
        }
    }
}

impl Hashing {
    pub fn new(config: &DashboardConfig) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(config.concurrent_password_hashes.max(1))),
            wait: Duration::from_millis(config.password_hash_wait_ms),
            memory: Arc::default(),
        }
    }

    /// For one-off commands (`api admin user create`): one at a time, waiting as long as needed.
    pub fn single() -> Self {
        Self {
            permits: Arc::new(Semaphore::new(1)),
            wait: Duration::MAX,
            memory: Arc::default(),
        }
    }

    fn busy(&self) -> Busy {
        Busy {
            retry_after_secs: self.wait.as_secs().clamp(1, 60),
        }
    }

    /// A turn, once one is free (waiting at most `wait`).
    pub async fn turn(&self) -> Result<Turn, Busy> {
        match tokio::time::timeout(self.wait, self.permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Turn(permit)),
            _ => Err(self.busy()),
        }
    }

    /// Runs `work` on the blocking pool with a buffer of working memory, once a turn is free.
    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Memory) -> T + Send + 'static,
    ) -> Result<T, Busy> {
        let turn = self.turn().await?;
        self.run_in(turn, work).await
    }

    /// Runs `work` on the blocking pool in `turn`.
    async fn run_in<T: Send + 'static>(
        &self,
        turn: Turn,
        work: impl FnOnce(&mut Memory) -> T + Send + 'static,
    ) -> Result<T, Busy> {
        let (busy, Turn(permit)) = (self.busy(), turn);
        let pool = self.memory.clone();
        tokio::task::spawn_blocking(move || {
            let blocks = pool
                .lock()
                .ok()
                .and_then(|mut p| p.pop())
                .unwrap_or_default();
            let mut memory = Memory { blocks, pool };
            let out = work(&mut memory);
            // The buffer goes back to the pool before the permit is released.
            drop(memory);
            drop(permit);
            out
        })
        .await
        .map_err(|_| busy)
    }

    /// A new Argon2id hash of `password`, as a PHC string (the crate's defaults: 19 MiB, 2
    /// passes, 1 lane: OWASP's recommendation).
    pub async fn hash(&self, password: String) -> anyhow::Result<String> {
        self.run(move |memory| {
            let mut salt = [0u8; 16];
            rand::rng().fill(&mut salt);
            hash_with(memory, password.as_bytes(), &salt)
                .map_err(|e| anyhow::anyhow!("hashing a password: {e}"))
        })
        .await?
    }

    /// True when `password` matches `hash`; with no hash (no such user) the dummy is checked and
    /// false returned, so an unknown e-mail costs the same work as a known one and the answer's
    /// timing does not tell which e-mails exist.
    pub async fn verify(&self, password: String, hash: Option<String>) -> Result<bool, Busy> {
        let turn = self.turn().await?;
        self.verify_in(turn, password, hash).await
    }

    /// [`Hashing::verify`] in a turn already taken.
    pub async fn verify_in(
        &self,
        turn: Turn,
        password: String,
        hash: Option<String>,
    ) -> Result<bool, Busy> {
        self.run_in(turn, move |memory| {
            let known = hash.is_some();
            let hash = hash.unwrap_or_else(|| DUMMY_HASH.clone());
            let matches = match verify_with(memory, password.as_bytes(), &hash) {
                Ok(matches) => matches,
                Err(e) => {
                    tracing::error!(error = %e, "a stored password hash cannot be read");
                    false
                }
            };
            metrics::counter!(CHECKS_METRIC).increment(1);
            known && matches
        })
        .await
    }
}

/// Argon2id (v19, default parameters) of `password` with `salt`, as a PHC string: what
/// `argon2::PasswordHasher::hash_password` makes, in `memory`.
fn hash_with(
    memory: &mut Memory,
    password: &[u8],
    salt: &[u8],
) -> argon2::password_hash::Result<String> {
    let params = Params::default();
    let mut out = [0u8; Params::DEFAULT_OUTPUT_LEN];
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone())
        .hash_password_into_with_memory(
            password,
            salt,
            &mut out,
            memory.blocks(params.block_count()),
        )?;
    let salt = SaltString::encode_b64(salt)?;
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(&params)?,
        salt: Some(salt.as_salt()),
        hash: Some(Output::new(&out)?),
    };
    Ok(phc.to_string())
}

/// Whether `password` matches the PHC string `hash` (whatever its Argon2 parameters), computed
/// in `memory`; the comparison takes constant time (`Output`'s equality).
fn verify_with(
    memory: &mut Memory,
    password: &[u8],
    hash: &str,
) -> argon2::password_hash::Result<bool> {
    use argon2::password_hash::Error;
    let parsed = PasswordHash::new(hash)?;
    let algorithm = Algorithm::try_from(parsed.algorithm)?;
    let version = match parsed.version {
        Some(v) => Version::try_from(v)?,
        None => Version::default(),
    };
    let params = Params::try_from(&parsed)?;
    let expected = parsed.hash.ok_or(Error::PhcStringField)?;
    let mut salt = [0u8; 64];
    let salt = parsed
        .salt
        .ok_or(Error::PhcStringField)?
        .decode_b64(&mut salt)?;
    let mut out = vec![0u8; expected.len()];
    Argon2::new(algorithm, version, params.clone()).hash_password_into_with_memory(
        password,
        salt,
        &mut out,
        memory.blocks(params.block_count()),
    )?;
    Ok(expected == Output::new(&out)?)
}

/// A hash of nobody's password (see [`Hashing::verify`]).
static DUMMY_HASH: LazyLock<String> = LazyLock::new(|| {
    use argon2::PasswordHasher;
    let (mut salt, mut password) = ([0u8; 16], [0u8; 32]);
    rand::rng().fill(&mut salt);
    rand::rng().fill(&mut password);
    let salt = SaltString::encode_b64(&salt).expect("16 bytes encode");
    Argon2::default()
        .hash_password(&password, &salt)
        .expect("hashing the dummy password")
        .to_string()
});

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(permits: usize, wait_ms: u64) -> Hashing {
        Hashing::new(&DashboardConfig {
            concurrent_password_hashes: permits,
            password_hash_wait_ms: wait_ms,
            ..DashboardConfig::default()
        })
    }

    #[tokio::test]
    async fn passwords_hash_with_argon2id_and_verify() {
        let hashing = gate(2, 10_000);
        let hash = hashing.hash("correct horse battery".into()).await.unwrap();
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(!hash.contains("correct horse"));
        let verify = |p: &str, h: Option<String>| hashing.verify(p.into(), h);
        assert!(
            verify("correct horse battery", Some(hash.clone()))
                .await
                .unwrap()
        );
        assert!(!verify("wrong horse battery", Some(hash)).await.unwrap());
        assert!(!verify("anything at all", None).await.unwrap());
    }

    #[tokio::test]
    async fn hashes_are_the_argon2_crates_both_ways() {
        use argon2::{PasswordHasher, PasswordVerifier};
        let hashing = gate(1, 10_000);
        let ours = hashing.hash("correct horse battery".into()).await.unwrap();
        let parsed = PasswordHash::new(&ours).unwrap();
        assert!(
            Argon2::default()
                .verify_password(b"correct horse battery", &parsed)
                .is_ok()
        );
        let salt = SaltString::encode_b64(b"sixteen byte slt").unwrap();
        let theirs = Argon2::default()
            .hash_password(b"correct horse battery", &salt)
            .unwrap()
            .to_string();
        assert_eq!(
            theirs.split('$').nth(3),
            ours.split('$').nth(3),
            "the same parameters"
        );
        assert!(
            hashing
                .verify("correct horse battery".into(), Some(theirs.clone()))
                .await
                .unwrap()
        );
        assert!(
            !hashing
                .verify("correct horse batterz".into(), Some(theirs))
                .await
                .unwrap()
        );
        // Other parameters (a smaller memory) verify too.
        let small = Argon2::new(
            Algorithm::Argon2id,
            Version::V0x13,
            Params::new(1024, 1, 1, None).unwrap(),
        )
        .hash_password(b"correct horse battery", &salt)
        .unwrap()
        .to_string();
        assert!(
            hashing
                .verify("correct horse battery".into(), Some(small))
                .await
                .unwrap()
        );
        // One buffer was made, and reused.
        assert_eq!(hashing.memory.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_check_that_cannot_start_in_time_is_busy() {
        let hashing = gate(1, 50);
        let held = hashing.permits.clone().acquire_owned().await.unwrap();
        let busy = hashing.verify("a password".into(), None).await.unwrap_err();
        assert_eq!(busy.retry_after_secs, 1);
        drop(held);
        assert_eq!(hashing.verify("a password".into(), None).await, Ok(false));
    }
}
