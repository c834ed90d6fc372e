//! Where the reads that may be a moment old go (`VAS_DATABASE__READ_URL`): lists, search, the
//! dashboard's lists and export, the event list. Everything else (a GET by id, a replay, anything
//! inside a write, the balance a payout is checked against) keeps using the primary, so a caller
//! always sees its own writes there.
//!
//! The replica is used while it answers and its replay lag is at most
//! `VAS_DATABASE__READ_MAX_LAG_MS`; otherwise those reads go to the primary and
//! `database_read_fallbacks_total{reason}` (`replica_down`, `replica_lagging`) counts each one.
//! The verdict is cached for [`CHECK_EVERY`], so a list costs no extra query.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

/// How long one look at the replica's lag stands.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);
/// How long that look may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// The database handles of the reads that may lag.
#[derive(Clone)]
pub struct Reads {
    primary: DatabaseConnection,
    replica: Option<Arc<Replica>>,
}

struct Replica {
    db: DatabaseConnection,
    max_lag: Duration,
    /// The last look: when, and why not the replica (None: use it).
    verdict: Mutex<Option<(Instant, Option<Fallback>)>>,
}

/// Why a read went to the primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fallback {
    ReplicaDown,
    ReplicaLagging,
}

impl Fallback {
    fn label(self) -> &'static str {
        match self {
            Fallback::ReplicaDown => "replica_down",
            Fallback::ReplicaLagging => "replica_lagging",
        }
    }
}

impl Reads {
    /// No replica: every read goes to the primary.
    pub fn primary_only(primary: DatabaseConnection) -> Reads {
        Reads {
            primary,
            replica: None,
        }
    }

    /// Lists on `replica` while its lag is at most `max_lag`.
    pub fn with_replica(
        primary: DatabaseConnection,
        replica: DatabaseConnection,
        max_lag: Duration,
    ) -> Reads {
        Reads {
            primary,
            replica: Some(Arc::new(Replica {
                db: replica,
                max_lag,
                verdict: Mutex::new(None),
            })),
        }
    }

    /// The handle a read that may lag uses now.
    pub async fn db(&self) -> DatabaseConnection {
        let Some(replica) = &self.replica else {
            return self.primary.clone();
        };
        match replica.fallback(&self.primary).await {
            None => replica.db.clone(),
            Some(reason) => {
                metrics::counter!("database_read_fallbacks_total", "reason" => reason.label())
                    .increment(1);
                self.primary.clone()
            }
        }
    }
}

impl Replica {
    async fn fallback(&self, primary: &DatabaseConnection) -> Option<Fallback> {
        if let Some((at, verdict)) = *self.verdict.lock().expect("not poisoned")
            && at.elapsed() < CHECK_EVERY
        {
            return verdict;
        }
        let verdict = match tokio::time::timeout(CHECK_TIMEOUT, self.lag(primary)).await {
            Ok(Ok(lag)) if lag <= self.max_lag => None,
            Ok(Ok(lag)) => {
                tracing::warn!(
                    lag_ms = lag.as_millis() as u64,
                    "read replica lagging; lists read the primary"
                );
                Some(Fallback::ReplicaLagging)
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "read replica unavailable; lists read the primary");
                Some(Fallback::ReplicaDown)
            }
            Err(_) => Some(Fallback::ReplicaDown),
        };
        *self.verdict.lock().expect("not poisoned") = Some((Instant::now(), verdict));
        verdict
    }

    /// How far the replica's replay is behind: zero when it has replayed everything the primary
    /// had written when asked, else the age of the last transaction it replayed.
    async fn lag(&self, primary: &DatabaseConnection) -> Result<Duration, sea_orm::DbErr> {
        let written = primary
            .query_one_raw(Statement::from_string(
                DbBackend::Postgres,
                "SELECT pg_current_wal_lsn()::text AS lsn",
            ))
            .await?
            .ok_or_else(|| sea_orm::DbErr::Custom("no WAL position".into()))?;
        let written: String = written.try_get("", "lsn")?;
        let replayed = self
            .db
            .query_one_raw(Statement::from_string(
                DbBackend::Postgres,
                "SELECT pg_last_wal_replay_lsn()::text AS lsn, \
                 (EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000)::float8 AS age_ms",
            ))
            .await?
            .ok_or_else(|| sea_orm::DbErr::Custom("no replay position".into()))?;
        let lsn: Option<String> = replayed.try_get("", "lsn")?;
        let Some(lsn) = lsn else {
            // Not a standby (promoted, or a primary given as the replica): nothing to lag.
            return Ok(Duration::ZERO);
        };
        if parse_lsn(&lsn) >= parse_lsn(&written) {
            return Ok(Duration::ZERO);
        }
        let age_ms: Option<f64> = replayed.try_get("", "age_ms")?;
        Ok(age_ms.map_or(
            Duration::MAX,
            |ms| Duration::from_millis(ms.max(0.0) as u64),
        ))
    }
}

/// A WAL position (`16/B374D848`) as one number.
fn parse_lsn(lsn: &str) -> u64 {
    let (high, low) = lsn.split_once('/').unwrap_or(("0", "0"));
    (u64::from_str_radix(high, 16).unwrap_or(0) << 32) | u64::from_str_radix(low, 16).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wal_positions_compare_as_numbers() {
        assert!(parse_lsn("1/0") > parse_lsn("0/FFFFFFFF"));
        assert!(parse_lsn("16/B374D848") > parse_lsn("16/B374D847"));
        assert_eq!(parse_lsn("0/3000060"), 0x3000060);
    }
}
