//! worker-payouts: for each `send_payout` job, makes the payout's one transfer at the payout
//! provider (the payout id is the transfer reference) and follows it to its outcome; and the
//! daily schedule, which pays out the whole available balance of `daily` settlement accounts.
//!
//! Exactly one transfer per payout, whatever process is killed when: every run asks the provider
//! about the reference first and sends only when the provider never received it, always under
//! the same reference (which the provider dedupes), so a lost answer or a race between two
//! workers still moves money once. A provider error or timeout is a retry of the same steps.

use domain::ids::{BusinessId, LeaseId, PayoutId};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bootstrap::{Worker, WorkerParts};
use chrono::{DateTime, NaiveTime, Utc};
use domain::payout::{
    MIN_PAYOUT, NewPayout, PayoutStatus, Schedule, TransferState, daily_payout_day, daily_reference,
};
use domain::provider::{NewTransfer, RemoteTransfer};
use domain::{Bank, Mode};
use entities::{payout, settlement_account};
use jobs::{PayoutJob, QueueJob};
use ops::config::{Config, KillPoint, PayoutsConfig};
use outbound::providers::{ProviderError, Providers};
use queue::relay::Relay;
use queue::worker::{Consumer, JobHandler, Ran};
use sea_orm::{ColumnTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QuerySelect};
use store::ledger;
use store::outbox::{JobOutcome, JobRow};
use store::payouts::{self, CreateOutcome, CreateRequest, Lease, Payout, Reported};
use tokio_util::sync::CancellationToken;

pub const QUEUE: &str = PayoutJob::QUEUE;

/// The delay before status query number `attempt + 1`: doubling from the initial delay up to
/// the maximum, with ±20 % jitter so many payouts do not poll in step.
pub fn poll_delay(config: &PayoutsConfig, attempt: i32) -> Duration {
    queue::retry::jittered_delay(
        Duration::from_secs(config.initial_poll_secs),
        Duration::from_secs(config.max_poll_secs),
        attempt,
    )
}

pub struct Payer {
    pub db: DatabaseConnection,
    pub providers: Providers,
    pub config: PayoutsConfig,
}

#[async_trait]
impl JobHandler for Payer {
    type Job = PayoutJob;

    async fn handle(&self, row: &JobRow, job: PayoutJob) -> anyhow::Result<Ran> {
        match job {
            PayoutJob::SendPayout { payout_id } => self.send(row, &payout_id).await.map(Ran::from),
        }
    }

    fn retry_after(&self, row: &JobRow) -> Duration {
        poll_delay(&self.config, row.attempts)
    }
}

impl Payer {
    /// One run of a payout's job, under the payout's lease (see `payouts::take_lease`): a
    /// second run of the same job at the same time (a redelivered message, another worker)
    /// finds it held and comes back later, so only one run at a time asks, sends and decides.
    async fn send(&self, row: &JobRow, payout_id: &PayoutId) -> anyhow::Result<JobOutcome> {
        let Some(payout) = payout::Entity::find_by_id(payout_id.clone())
            .one(&self.db)
            .await?
        else {
            return Ok(JobOutcome::Done);
        };
        if !payout.status.in_flight() {
            return Ok(JobOutcome::Done); // settled already (a notification, another worker)
        }
        // The bank it was sent through, once recorded; else the configured payout bank.
        let bank = match payout.provider_bank {
            Some(bank) => bank,
            None => match self.providers.payout_bank() {
                Ok(bank) => bank,
                Err(e) => return Ok(self.retry(row, &payout, "payout_bank", &e)),
            },
        };
        let token = String::from(LeaseId::new());
        let lease = self.config.lease();
        let payout = match payouts::take_lease(&self.db, &payout.id, &token, bank, lease).await? {
            Lease::Held(payout) => *payout,
            Lease::Settled => return Ok(JobOutcome::Done),
            Lease::Busy(until) => {
                // Looked at again as a transfer with no outcome is: the holder usually
                // finishes first; a killed holder's lease ends by `until`.
                tracing::info!(payout_id = %payout.id, lease_until = %until, "another run holds the payout; will look again");
                return Ok(JobOutcome::Retry {
                    after: poll_delay(&self.config, row.attempts),
                    error: "another run of this payout was under way".into(),
                });
            }
        };
        let run = Run {
            bank: payout.provider_bank.unwrap_or(bank),
            token: &token,
        };
        let outcome = self.run(row, &payout, &run).await;
        // Whatever the run ended in: the next run need not wait for the lease to pass.
        if let Err(e) = payouts::release_lease(&self.db, &payout.id, &token).await {
            tracing::warn!(payout_id = %payout.id, error = %e, "payout lease not released; it ends by itself");
        }
        outcome
    }

    async fn run(
        &self,
        row: &JobRow,
        payout: &Payout,
        run: &Run<'_>,
    ) -> anyhow::Result<JobOutcome> {
        // The provider first: an earlier run may have sent it and lost the answer, or been
        // killed between sending and recording.
        let known = match self
            .providers
            .get_transfer(run.bank, payout.mode, &payout.id)
            .await
        {
            Ok(known) => known,
            Err(e) => return Ok(self.retry(row, payout, "get_transfer", &e)),
        };
        let remote = match known {
            Some(remote) => {
                if payout.status == PayoutStatus::Processing {
                    self.kill_point(payout, KillPoint::WhilePolling);
                }
                remote
            }
            None => {
                // Renewed right before sending: the send (at most the client's timeout) ends
                // well within the lease, so no other run can take the payout while it is in
                // flight.
                let lease = self.config.lease();
                if !matches!(
                    payouts::take_lease(&self.db, &payout.id, run.token, run.bank, lease).await?,
                    Lease::Held(_)
                ) {
                    return Ok(JobOutcome::Retry {
                        after: poll_delay(&self.config, row.attempts),
                        error: "the payout's lease was lost before sending".into(),
                    });
                }
                self.kill_point(payout, KillPoint::BeforeSend);
                match self.send_transfer(run.bank, payout).await {
                    Ok(remote) => {
                        self.kill_point(payout, KillPoint::AfterSend);
                        remote
                    }
                    Err(Refusal::Refused(reason)) => {
                        return self.refused(row, payout, run, &reason).await;
                    }
                    Err(Refusal::Error(e)) => {
                        return Ok(self.retry(row, payout, "send_transfer", &e));
                    }
                }
            }
        };
        let payout = self.record(payout, &remote).await?;
        if payout.status.in_flight() {
            // No outcome yet: the notification usually settles it first; this asks again.
            return Ok(JobOutcome::Retry {
                after: poll_delay(&self.config, row.attempts),
                error: "the transfer has no outcome yet".into(),
            });
        }
        Ok(JobOutcome::Done)
    }

    async fn send_transfer(&self, bank: Bank, payout: &Payout) -> Result<RemoteTransfer, Refusal> {
        let transfer = NewTransfer {
            reference: payout.id.to_string(),
            amount: payout.amount,
            currency: payout.currency.clone(),
            bank_code: payout.bank_code.clone(),
            account_number: payout.account_number.clone(),
            account_name: payout.account_name.clone(),
            narration: payout.narration.clone(),
        };
        match self
            .providers
            .send_transfer(bank, payout.mode, &transfer)
            .await
        {
            Ok(remote) => {
                metrics::counter!("payouts_sent_total", "mode" => payout.mode.as_str())
                    .increment(1);
                tracing::info!(payout_id = %payout.id, "transfer sent");
                Ok(remote)
            }
            Err(ProviderError::Refused(reason)) => Err(Refusal::Refused(reason)),
            Err(e) => Err(Refusal::Error(e)),
        }
    }

    /// The provider refused the transfer request itself (a 4xx). It fails the payout (and
    /// returns the money) only once the provider confirms it holds no such transfer, and only
    /// while this run still holds the payout's lease (no other run can have sent it since); a
    /// refusal that cannot be confirmed is retried like any error.
    async fn refused(
        &self,
        row: &JobRow,
        payout: &Payout,
        run: &Run<'_>,
        reason: &str,
    ) -> anyhow::Result<JobOutcome> {
        match self
            .providers
            .get_transfer(run.bank, payout.mode, &payout.id)
            .await
        {
            Ok(None) => {
                tracing::warn!(payout_id = %payout.id, reason, "the provider refused the transfer");
                let reason = format!("the payout provider refused the transfer: {reason}");
                let reported = Reported {
                    state: TransferState::Failed,
                    session_id: None,
                    failure_reason: Some(&reason),
                };
                let Some(applied) =
                    payouts::fail_refused(&self.db, &payout.id, run.token, &reported).await?
                else {
                    return Ok(JobOutcome::Retry {
                        after: poll_delay(&self.config, row.attempts),
                        error: "the payout's lease was lost before the refusal was recorded".into(),
                    });
                };
                count_outcome(payout, Some(&applied));
                Ok(JobOutcome::Done)
            }
            Ok(Some(remote)) => {
                let payout = self.record(payout, &remote).await?;
                Ok(match payout.status.in_flight() {
                    true => JobOutcome::Retry {
                        after: poll_delay(&self.config, row.attempts),
                        error: "the transfer has no outcome yet".into(),
                    },
                    false => JobOutcome::Done,
                })
            }
            Err(e) => Ok(self.retry(row, payout, "get_transfer", &e)),
        }
    }

    /// Applies what the provider says (at least `processing`: it has the transfer).
    async fn record(&self, payout: &Payout, remote: &RemoteTransfer) -> anyhow::Result<Payout> {
        let reported = Reported {
            state: remote.status.into(),
            session_id: remote.session_id.as_deref(),
            failure_reason: remote.failure_reason.as_deref(),
        };
        let applied = payouts::apply(&self.db, &payout.id, &reported).await?;
        count_outcome(payout, applied.as_ref());
        Ok(applied.unwrap_or_else(|| payout.clone()))
    }

    fn retry(&self, row: &JobRow, payout: &Payout, call: &str, e: &ProviderError) -> JobOutcome {
        match e {
            ProviderError::NotConfigured(..) => {
                tracing::error!(payout_id = %payout.id, error = %e, "no payout provider configured; will keep trying");
            }
            _ => {
                tracing::info!(payout_id = %payout.id, call, error = %e, "payout provider call failed; will retry");
            }
        }
        metrics::counter!("payout_provider_errors_total", "call" => call.to_owned()).increment(1);
        JobOutcome::Retry {
            after: poll_delay(&self.config, row.attempts),
            error: e.to_string(),
        }
    }
}

impl Payer {
    /// The end-to-end tests' failpoint (`VAS_PAYOUTS__TEST_KILL_AT`, off by default): at the
    /// configured step of a test-mode payout this process sends itself SIGKILL, so a test can
    /// prove a kill at that exact step loses nothing and pays nothing twice. A real SIGKILL
    /// (no unwinding, no drain, no flush), sent by `kill` because this workspace forbids unsafe
    /// code; live-mode payouts never stop here.
    fn kill_point(&self, payout: &Payout, step: KillPoint) {
        if self.config.test_kill_at != Some(step) || payout.mode != Mode::Test {
            return;
        }
        tracing::warn!(payout_id = %payout.id, step = step.as_str(), "test kill point reached: SIGKILL");
        let pid = std::process::id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status();
        // SIGKILL is delivered before `kill` returns; should `kill` be missing, die anyway
        // rather than carry on past the step.
        std::thread::sleep(Duration::from_secs(5));
        std::process::abort();
    }
}

/// What one leased run of a payout works with.
struct Run<'a> {
    /// The bank the payout is sent through.
    bank: Bank,
    /// This run's lease.
    token: &'a str,
}

enum Refusal {
    Refused(String),
    Error(ProviderError),
}

/// Counts a payout this worker moved to a final status.
fn count_outcome(before: &Payout, after: Option<&Payout>) {
    if let Some(after) = after
        && after.status != before.status
        && !after.status.in_flight()
    {
        metrics::counter!("payout_outcomes_total", "status" => after.status.as_str()).increment(1);
        tracing::info!(payout_id = %after.id, status = %after.status, "payout settled");
    }
}

// ---- The daily schedule -----------------------------------------------------------------

/// The time now; injectable so tests can be any day and hour.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// Pays out, once a day after `daily_at` (Lagos), the whole available balance of each `daily`
/// settlement account when it is at least the minimum; in live mode only for a business whose
/// live mode works (KYB approved, a working live key: see `keys::live_mode_usable`). The day's reference (`auto-YYYY-MM-DD`)
/// is unique per business and mode, so however many workers run, one payout is made a day.
#[derive(Clone)]
pub struct DailySchedule {
    pub db: DatabaseConnection,
    pub relay: Relay,
    pub daily_at: NaiveTime,
    pub max_amount: i64,
    pub every: Duration,
    pub clock: Clock,
}

/// `HH:MM`, as `VAS_PAYOUTS__DAILY_AT` is written.
pub fn parse_daily_at(text: &str) -> anyhow::Result<NaiveTime> {
    NaiveTime::parse_from_str(text, "%H:%M").map_err(|_| {
        anyhow::anyhow!("VAS_PAYOUTS__DAILY_AT must be a time of day as HH:MM, got '{text}'")
    })
}

impl DailySchedule {
    pub fn from_config(
        config: &Config,
        db: DatabaseConnection,
        relay: Relay,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            db,
            relay,
            daily_at: parse_daily_at(&config.payouts.daily_at)?,
            max_amount: config.payouts.max_amount,
            every: Duration::from_secs(config.payouts.schedule_check_secs.max(1)),
            clock: Arc::new(domain::time::now),
        })
    }

    /// Checks every `every` until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {
                    if let Err(e) = self.pay_due().await {
                        tracing::warn!(error = %e, "daily payouts: cannot check; will try again");
                    }
                }
            }
        }
    }

    /// Creates the payouts due now; returns how many this call created.
    pub async fn pay_due(&self) -> Result<usize, DbErr> {
        let Some(day) = daily_payout_day((self.clock)(), self.daily_at) else {
            return Ok(0);
        };
        let reference = daily_reference(day);
        let accounts = settlement_account::Entity::find()
            .filter(settlement_account::Column::Schedule.eq(Schedule::Daily))
            .all(&self.db)
            .await?;
        if accounts.is_empty() {
            return Ok(0);
        }
        let paid: HashSet<(BusinessId, Mode)> = payout::Entity::find()
            .select_only()
            .column(payout::Column::BusinessId)
            .column(payout::Column::Mode)
            .filter(payout::Column::Reference.eq(reference.as_str()))
            .into_tuple::<(BusinessId, Mode)>()
            .all(&self.db)
            .await?
            .into_iter()
            .collect();
        // Live money moves only for a business whose live mode works: KYB approved, and a
        // working live key (all revoked: stopped until one works again).
        let live: Vec<BusinessId> = accounts
            .iter()
            .filter(|a| a.mode == Mode::Live)
            .map(|a| a.business_id.clone())
            .collect();
        let live_usable =
            store::keys::live_mode_usable(&self.db, &live, domain::time::now()).await?;
        let mut created = 0;
        for account in accounts {
            if paid.contains(&(account.business_id.clone(), account.mode)) {
                continue;
            }
            if account.mode == Mode::Live && !live_usable.contains(&account.business_id) {
                tracing::debug!(business_id = %account.business_id, "no daily live payout: KYB not approved or no working live key");
                continue;
            }
            let available = ledger::find(&self.db, &account.business_id, account.mode)
                .await?
                .map_or(0, |b| b.available);
            // The whole balance, within the largest payout allowed (the rest goes tomorrow).
            let amount = available.min(self.max_amount);
            if amount < MIN_PAYOUT {
                continue;
            }
            let new = NewPayout {
                amount,
                narration: Some(format!("Daily settlement {day}")),
                reference: Some(reference.clone()),
            };
            let outcome = payouts::create(
                &self.db,
                &CreateRequest {
                    business_id: &account.business_id,
                    mode: account.mode,
                    idempotency: None,
                    payout: &new,
                    actor: None,
                },
            )
            .await?;
            match outcome {
                CreateOutcome::Created(p) => {
                    created += 1;
                    self.relay.kick();
                    metrics::counter!("payouts_scheduled_total", "mode" => p.mode.as_str())
                        .increment(1);
                    tracing::info!(payout_id = %p.id, business_id = %p.business_id, amount = p.amount, %day, "daily payout created");
                }
                // Another worker made it first.
                CreateOutcome::ReferenceHit(_) | CreateOutcome::Replayed { .. } => {}
                other => {
                    tracing::debug!(business_id = %account.business_id, ?other, "daily payout not made now");
                }
            }
        }
        Ok(created)
    }
}

/// The consumer and the daily schedule, on any broker (RabbitMQ, or the in-process one of
/// `api dev`). Returns when `shutdown` is cancelled and in-flight jobs have finished.
pub async fn run_with(config: Config, parts: WorkerParts) -> anyhow::Result<()> {
    let WorkerParts {
        db,
        broker,
        relay,
        shutdown,
        ..
    } = parts;
    if let Some(step) = config.payouts.test_kill_at {
        tracing::warn!(
            step = step.as_str(),
            "VAS_PAYOUTS__TEST_KILL_AT is set: this process kills itself when a test-mode payout \
             reaches that step (for end-to-end tests only; unset it anywhere else)"
        );
    }
    let schedule = DailySchedule::from_config(&config, db.clone(), relay.clone())?;
    let handler = Arc::new(Payer {
        db: db.clone(),
        providers: Providers::from_config(&config),
        config: config.payouts.clone(),
    });
    let daily = tokio::spawn(schedule.run(shutdown.clone()));
    let processing = tokio::spawn(show_processing(db.clone(), shutdown.clone()));
    // Each job is a short provider call or two; a long drain would only delay the restart.
    Consumer::new(db, broker, relay, handler)
        .prefetch(32)
        .grace(Duration::from_secs(20))
        .run(shutdown)
        .await;
    let _ = daily.await;
    let _ = processing.await;
    Ok(())
}

/// How often the payouts in `processing` are looked at.
const PROCESSING_CHECK_EVERY: Duration = Duration::from_secs(15);

/// Keeps `payouts_processing_oldest_seconds{bank}` up to date until cancelled: per provider
/// bank, how long its oldest payout has been `processing` since it was sent (0 when none is).
async fn show_processing(db: DatabaseConnection, shutdown: CancellationToken) {
    loop {
        match payouts::oldest_processing(&db).await {
            Ok(oldest) => {
                let now = domain::time::now();
                for bank in Bank::ALL {
                    let since = oldest
                        .iter()
                        .filter(|(b, _)| *b == Some(bank))
                        .find_map(|(_, sent)| *sent);
                    let seconds = since.map_or(0.0, |t| (now - t).as_seconds_f64().max(0.0));
                    metrics::gauge!("payouts_processing_oldest_seconds", "bank" => bank.slug())
                        .set(seconds);
                }
            }
            Err(e) => tracing::warn!(error = %e, "looking at processing payouts failed"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(PROCESSING_CHECK_EVERY) => {}
        }
    }
}

/// This worker, as `api dev`, the test app and its binary start it.
pub const WORKER: Worker = Worker {
    name: "worker-payouts",
    run: |config, parts| Box::pin(run_with(config, parts)),
};

/// The `worker-payouts` process.
pub async fn run(config: Config) -> anyhow::Result<()> {
    // A bad time of day stops the process at start, not at the first check.
    parse_daily_at(&config.payouts.daily_at)?;
    WORKER.run_process(config).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_back_off_exponentially_up_to_the_maximum() {
        let config = PayoutsConfig {
            initial_poll_secs: 2,
            max_poll_secs: 60,
            ..PayoutsConfig::default()
        };
        let delays: Vec<f64> = (0..10)
            .map(|a| poll_delay(&config, a).as_secs_f64())
            .collect();
        assert!((1.6..=2.4).contains(&delays[0]), "{delays:?}");
        assert!((3.2..=4.8).contains(&delays[1]), "{delays:?}");
        assert!((48.0..=72.0).contains(&delays[9]), "{delays:?}");
    }

    #[test]
    fn the_daily_time_is_hours_and_minutes() {
        assert_eq!(
            parse_daily_at("09:00").unwrap(),
            NaiveTime::from_hms_opt(9, 0, 0).unwrap()
        );
        assert!(parse_daily_at("9am").is_err());
        assert!(parse_daily_at("25:00").is_err());
    }
}
