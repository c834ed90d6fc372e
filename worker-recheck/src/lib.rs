//! worker-recheck: for each `recheck` job, pulls the provider's transactions for the account and
//! window, records the missing ones exactly once (the same path as notifications, so the same
//! events), keeps those that can be no deposit as `invalid` (as a notification of them would
//! be), and completes the recheck with the number of deposits it found. Provider errors are
//! retried with backoff, then the recheck fails with the reason.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bootstrap::{Worker, WorkerParts};
use domain::ids::RecheckId;
use domain::{Bank, Mode, RecheckStatus};
use jobs::{QueueJob, RecheckJob};
use ops::config::{Config, RecheckConfig};
use outbound::providers::{InvalidListed, Listed, Providers};
use queue::relay::Relay;
use queue::worker::{Consumer, JobHandler, Ran};
use sea_orm::DatabaseConnection;
use store::deposits::{self, Incoming, Recorded, Source};
use store::outbox::{JobOutcome, JobRow};
use store::{accounts, rechecks};

pub const QUEUE: &str = RecheckJob::QUEUE;

pub struct Rechecker {
    pub db: DatabaseConnection,
    pub providers: Providers,
    pub config: RecheckConfig,
    pub relay: Relay,
}

/// The delay before retry number `attempt + 1` of a provider error (the shared backoff).
pub fn retry_delay(config: &RecheckConfig, attempt: i32) -> Duration {
    queue::retry::jittered_delay(
        Duration::from_secs(config.initial_retry_secs),
        Duration::from_secs(config.max_retry_secs),
        attempt,
    )
}

#[async_trait]
impl JobHandler for Rechecker {
    type Job = RecheckJob;

    async fn handle(&self, row: &JobRow, job: RecheckJob) -> anyhow::Result<Ran> {
        let RecheckJob::Recheck { recheck_id } = job;
        self.run(row, &recheck_id).await.map(Ran::from)
    }

    fn retry_after(&self, row: &JobRow) -> Duration {
        retry_delay(&self.config, row.attempts)
    }
}

impl Rechecker {
    /// Marks the recheck `failed` with `reason`; its job is then done.
    async fn fail(&self, recheck_id: &RecheckId, reason: String) -> anyhow::Result<JobOutcome> {
        tracing::warn!(recheck_id = %recheck_id, reason, "recheck failed");
        rechecks::set_status(
            &self.db,
            recheck_id,
            RecheckStatus::Failed,
            None,
            Some(reason),
            domain::time::now(),
        )
        .await?;
        Ok(JobOutcome::Done)
    }

    /// A listed transaction that can be no deposit is kept as `invalid` beside the invalid
    /// notifications (docs/api/deposits-and-rechecks.md), once however often it is found; logged
    /// without its content.
    async fn keep_invalid(
        &self,
        recheck_id: &RecheckId,
        mode: Mode,
        bank: Bank,
        invalid: &InvalidListed,
    ) -> anyhow::Result<()> {
        let incoming = Incoming {
            mode,
            bank,
            body: &invalid.item,
            now: domain::time::now(),
        };
        let id = deposits::keep_invalid(&self.db, incoming, invalid.reference.as_deref()).await?;
        tracing::warn!(recheck_id = %recheck_id, notification_id = %id, bank = bank.slug(), reference = ?invalid.reference, why = %invalid.why, "provider listed a transaction that cannot be a deposit; kept as invalid");
        Ok(())
    }

    async fn run(&self, row: &JobRow, recheck_id: &RecheckId) -> anyhow::Result<JobOutcome> {
        let Some(recheck) = rechecks::find_by_id(&self.db, recheck_id).await? else {
            return Ok(JobOutcome::Done);
        };
        if recheck.status.is_finished() {
            return Ok(JobOutcome::Done); // a repeat of a finished job
        }
        let now = domain::time::now();
        rechecks::set_status(
            &self.db,
            recheck_id,
            RecheckStatus::Running,
            None,
            None,
            now,
        )
        .await?;
        // Every way this run can end for good ends the recheck too: one left `running` would be
        // returned to every later request for the account, and nothing would ever finish it.
        let mode = recheck.mode;
        let Some(account) =
            accounts::find(&self.db, &recheck.business_id, mode, &recheck.account_id).await?
        else {
            return self.fail(recheck_id, "the account is gone".into()).await;
        };
        let bank = account.bank;
        let transactions = match self
            .providers
            .transactions(
                bank,
                mode,
                &account.id,
                recheck.window_from,
                recheck.window_to,
            )
            .await
        {
            Ok(list) => list,
            Err(e) => {
                let attempts = row.attempts as u32 + 1;
                if attempts >= self.config.max_attempts {
                    let reason =
                        format!("the provider bank could not be asked after {attempts} tries: {e}");
                    return self.fail(recheck_id, reason).await;
                }
                return Ok(JobOutcome::Retry {
                    after: retry_delay(&self.config, row.attempts),
                    error: e.to_string(),
                });
            }
        };
        let mut new = 0;
        let mut usable = Vec::new();
        for listed in transactions {
            match listed {
                Listed::Usable(tx) => usable.push(tx),
                Listed::Invalid(invalid) => {
                    self.keep_invalid(recheck_id, mode, bank, &invalid).await?
                }
            }
        }
        for tx in usable
            .iter()
            .filter(|t| account.account_number.as_deref() == Some(t.account_number.as_str()))
        {
            let recorded = deposits::record(
                &self.db,
                mode,
                bank,
                tx,
                Source::Recheck(recheck_id.clone()),
                domain::time::now(),
            )
            .await?;
            if let Recorded::New(deposit) = recorded {
                new += 1;
                tracing::info!(recheck_id = %recheck_id, deposit_id = %deposit.id, "recheck recorded a missed deposit");
            }
        }
        if new > 0 {
            self.relay.kick(); // their events' deliveries are due now
        }
        // Counted from the table, so a run that died half-way still counts what it recorded.
        let found = deposits::found_by_recheck(&self.db, recheck_id).await?;
        rechecks::set_status(
            &self.db,
            recheck_id,
            RecheckStatus::Completed,
            Some(found as i32),
            None,
            domain::time::now(),
        )
        .await?;
        tracing::info!(recheck_id = %recheck_id, found, "recheck completed");
        Ok(JobOutcome::Done)
    }
}

/// The consumer, on any broker. Returns when `shutdown` is cancelled and in-flight jobs finished.
pub async fn run_with(config: Config, parts: WorkerParts) -> anyhow::Result<()> {
    let handler = Arc::new(Rechecker {
        db: parts.db.clone(),
        providers: Providers::from_config(&config),
        config: config.recheck.clone(),
        relay: parts.relay.clone(),
    });
    Consumer::new(parts.db, parts.broker, parts.relay, handler)
        .prefetch(8)
        .grace(Duration::from_secs(30))
        .run(parts.shutdown)
        .await;
    Ok(())
}

/// This worker, as `api dev`, the test app and its binary start it.
pub const WORKER: Worker = Worker {
    name: "worker-recheck",
    run: |config, parts| Box::pin(run_with(config, parts)),
};

/// The `worker-recheck` process.
pub async fn run(config: Config) -> anyhow::Result<()> {
    WORKER.run_process(config).await
}
