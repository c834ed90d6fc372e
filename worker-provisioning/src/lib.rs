//! worker-provisioning: for each `provision` job, asks the account's provider bank for its
//! number (creating the account there if it never was), polling with exponential backoff until
//! it arrives, is refused, or the wait is given up; for each `close` job, closes the account at
//! its bank. Every step re-reads the account first, so a repeated job changes nothing.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bootstrap::{Worker, WorkerParts};
use crypto::Cipher;
use domain::ids::AccountId;
use domain::provider::{ProvisioningOutcome, provisioning_outcome};
use domain::{AccountStatus, Bank, Mode};
use entities::virtual_account;
use jobs::{ProvisioningJob, QueueJob};
use ops::config::{Config, ProvisioningConfig};
use outbound::providers::{self, ProviderError, Providers, RemoteAccount};
use queue::worker::{Consumer, JobHandler, Ran};
use sea_orm::{DatabaseConnection, EntityTrait, TransactionTrait};
use store::accounts::{self, Account, Settled};
use store::outbox::{JobOutcome, JobRow};

pub const QUEUE: &str = ProvisioningJob::QUEUE;

pub struct Provisioner {
    pub db: DatabaseConnection,
    pub cipher: Arc<Cipher>,
    pub providers: Providers,
    pub config: ProvisioningConfig,
}

/// The delay before poll number `attempt + 1`: doubling from the initial delay up to the
/// maximum, with ±20 % jitter so many pending accounts do not poll in step.
pub fn poll_delay(config: &ProvisioningConfig, attempt: i32) -> Duration {
    queue::retry::jittered_delay(
        Duration::from_secs(config.initial_poll_secs),
        Duration::from_secs(config.max_poll_secs),
        attempt,
    )
}

#[async_trait]
impl JobHandler for Provisioner {
    type Job = ProvisioningJob;

    async fn handle(&self, row: &JobRow, job: ProvisioningJob) -> anyhow::Result<Ran> {
        match job {
            ProvisioningJob::Provision { account_id } => self.provision(row, &account_id).await,
            ProvisioningJob::Close { account_id } => self.close(row, &account_id).await,
        }
        .map(Ran::from)
    }

    fn retry_after(&self, row: &JobRow) -> Duration {
        poll_delay(&self.config, row.attempts)
    }
}

impl Provisioner {
    async fn load(&self, account_id: &AccountId) -> anyhow::Result<Option<(Account, Bank, Mode)>> {
        let account = virtual_account::Entity::find_by_id(account_id.clone())
            .one(&self.db)
            .await?;
        Ok(account.map(|account| {
            let (bank, mode) = (account.bank, account.mode);
            (account, bank, mode)
        }))
    }

    async fn provision(&self, row: &JobRow, account_id: &AccountId) -> anyhow::Result<JobOutcome> {
        let Some((account, bank, mode)) = self.load(account_id).await? else {
            return Ok(JobOutcome::Done);
        };
        if account.status == AccountStatus::Deactivated && account.account_number.is_none() {
            return self.close_if_opened(&account, bank, mode).await;
        }
        if account.status != AccountStatus::Pending {
            return Ok(JobOutcome::Done); // settled already
        }
        let remote = match self.providers.account(bank, mode, &account.id).await {
            Ok(Some(remote)) => Ok(remote),
            // The bank never heard of it (the API's call never reached it): open it now.
            Ok(None) => self.open(&account, bank, mode).await,
            Err(e) => Err(e),
        };
        match &remote {
            Err(e @ ProviderError::NotConfigured(..)) => {
                tracing::error!(account_id = %account_id, error = %e, "no provider configured; will keep trying");
            }
            Err(e) if !matches!(e, ProviderError::Rejected(_)) => {
                tracing::info!(account_id = %account_id, bank = bank.slug(), error = %e, "provider call failed; will retry");
            }
            _ => {}
        }
        let now = domain::time::now();
        let outcome = provisioning_outcome(providers::answer(remote));
        let mut waiting_for = "no account number yet";
        if outcome != ProvisioningOutcome::Pending {
            let txn = self.db.begin().await?;
            let settled = accounts::settle(&txn, &account.id, &outcome, true, now).await?;
            txn.commit().await?;
            match settled {
                Settled::Changed(account) => {
                    tracing::info!(account_id = %account.id, status = %account.status, "account settled by the provider");
                    return Ok(JobOutcome::Done);
                }
                Settled::Unchanged => return Ok(JobOutcome::Done),
                // The provider's error (logged and counted where it was found): the account
                // waits like one with no number yet, and the give-up rule ends the wait.
                Settled::NumberHeld => waiting_for = "the provider's number is another account's",
            }
        }
        let waited = (now - account.created_at).num_seconds().max(0) as u64;
        if waited < self.config.give_up_after_secs {
            return Ok(JobOutcome::Retry {
                after: poll_delay(&self.config, row.attempts),
                error: waiting_for.into(),
            });
        }
        let hours = self.config.give_up_after_secs as f64 / 3600.0;
        let reason = format!("the provider bank gave no account number within {hours} hours");
        self.give_up(&account, reason).await
    }

    /// Opens the account at the bank with the customer's identity (decrypted for this call only).
    async fn open(
        &self,
        account: &Account,
        bank: Bank,
        mode: Mode,
    ) -> Result<RemoteAccount, ProviderError> {
        let request = accounts::open_request(&self.cipher, account).map_err(|e| {
            tracing::error!(account_id = %account.id, error = %e, "cannot build the open request; will keep trying");
            ProviderError::Refused(format!("the open request cannot be built: {e}"))
        })?;
        self.providers
            .open_account(bank, mode, &request, Duration::from_secs(10))
            .await
    }

    /// Fails an account that waited too long, and closes it at the bank in case a number comes.
    async fn give_up(&self, account: &Account, reason: String) -> anyhow::Result<JobOutcome> {
        let now = domain::time::now();
        let txn = self.db.begin().await?;
        let settled = accounts::settle(
            &txn,
            &account.id,
            &ProvisioningOutcome::Rejected { reason },
            true,
            now,
        )
        .await?;
        if matches!(settled, Settled::Changed(_)) {
            accounts::enqueue_close(&txn, &account.id, now).await?;
        }
        txn.commit().await?;
        tracing::warn!(account_id = %account.id, "gave up waiting for an account number");
        Ok(JobOutcome::Done)
    }

    /// An account deactivated while pending: its close at deactivation may have reached the bank
    /// before an open still in flight did (the bank then answered "no such account"). If the bank
    /// has it now, it is closed again; a number it gave is kept for the record.
    async fn close_if_opened(
        &self,
        account: &Account,
        bank: Bank,
        mode: Mode,
    ) -> anyhow::Result<JobOutcome> {
        let remote = self.providers.account(bank, mode, &account.id).await?;
        let Some(remote) = remote.filter(|r| r.status.is_open()) else {
            return Ok(JobOutcome::Done);
        };
        let now = domain::time::now();
        let txn = self.db.begin().await?;
        match remote.account_number {
            Some(number) => {
                // Keeps the number and enqueues the close, both only if still unnumbered.
                let outcome = ProvisioningOutcome::Active {
                    account_number: number,
                };
                accounts::settle(&txn, &account.id, &outcome, false, now)
                    .await
                    .map(|_| ())
            }
            None => accounts::enqueue_close(&txn, &account.id, now).await,
        }?;
        txn.commit().await?;
        Ok(JobOutcome::Done)
    }

    async fn close(&self, row: &JobRow, account_id: &AccountId) -> anyhow::Result<JobOutcome> {
        let Some((account, bank, mode)) = self.load(account_id).await? else {
            return Ok(JobOutcome::Done);
        };
        match self.providers.close_account(bank, mode, &account.id).await {
            Ok(()) => {
                tracing::info!(account_id = %account_id, "account closed at the provider");
                Ok(JobOutcome::Done)
            }
            Err(e) => Ok(JobOutcome::Retry {
                after: poll_delay(&self.config, row.attempts),
                error: e.to_string(),
            }),
        }
    }
}

/// The consumer, on any broker (RabbitMQ, or the in-process one of `api dev`). Returns when
/// `shutdown` is cancelled and in-flight jobs have finished.
pub async fn run_with(config: Config, parts: WorkerParts) -> anyhow::Result<()> {
    let handler = Arc::new(Provisioner {
        db: parts.db.clone(),
        cipher: parts.cipher,
        providers: Providers::from_config(&config),
        config: config.provisioning.clone(),
    });
    Consumer::new(parts.db, parts.broker, parts.relay, handler)
        .prefetch(32)
        .grace(Duration::from_secs(20))
        .run(parts.shutdown)
        .await;
    Ok(())
}

/// This worker, as `api dev`, the test app and its binary start it.
pub const WORKER: Worker = Worker {
    name: "worker-provisioning",
    run: |config, parts| Box::pin(run_with(config, parts)),
};

/// The `worker-provisioning` process.
pub async fn run(config: Config) -> anyhow::Result<()> {
    WORKER.run_process(config).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_back_off_exponentially_up_to_the_maximum() {
        let config = ProvisioningConfig {
            initial_poll_secs: 2,
            max_poll_secs: 60,
            give_up_after_secs: 3600,
        };
        let delays: Vec<f64> = (0..10)
            .map(|a| poll_delay(&config, a).as_secs_f64())
            .collect();
        assert!((1.6..=2.4).contains(&delays[0]), "{delays:?}");
        assert!((3.2..=4.8).contains(&delays[1]), "{delays:?}");
        assert!((6.4..=9.6).contains(&delays[2]), "{delays:?}");
        assert!(
            delays[9] <= 60.0 * 1.2 && delays[9] >= 60.0 * 0.8,
            "{delays:?}"
        );
    }
}
