//! One attempt of one delivery: re-read the delivery, take the mode's current webhook URL (an
//! endpoint that moved gets the retries too), wait for a slot at that endpoint (or come back
//! later without spending an attempt), sign the event's envelope with the mode's webhook secret
//! (and the previous one during a rotation), POST it, record what happened and where it went,
//! and tell the consumer when to run again (or that the delivery is dead).
//!
//! The reads before an attempt and the record after it are each made in rounds shared with the
//! attempts running at the same moment ([`store::batch`]): under load, three statements read
//! what many attempts need, and one transaction records many attempts.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use chrono::Utc;
use crypto::Cipher;
use domain::ids::DeliveryId;
use domain::{DeliveryStatus, Mode};
use entities::business_mode;
use jobs::WebhookJob;
use ops::config::WebhooksConfig;
use outbound::signing::{self, SigningKey};
use outbound::ssrf::{GuardedResolver, TargetPolicy};
use queue::worker::{JobHandler, Ran};
use reqwest::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use sea_orm::DatabaseConnection;
use store::batch::Coalescer;
use store::businesses::webhook_secret_context;
use store::deliveries::{self, AttemptRecord, AttemptWrite, Delivery, ForAttempt, Next};
use store::events;
use store::outbox::{JobOutcome, JobRow};

use crate::endpoints::{Admission, Endpoints, Limits, Outcome, Sender};

/// How long to wait before trying again when the attempt could not even be prepared (the
/// database or the key is unavailable). Such a wait costs the delivery none of its attempts.
const NOT_ATTEMPTED_RETRY: Duration = Duration::from_secs(30);
const USER_AGENT: &str = concat!("vas-webhooks/", env!("CARGO_PKG_VERSION"));
/// The most attempts whose reads, or whose records, share one round.
const ROUND: usize = 64;

pub struct Deliverer {
    db: DatabaseConnection,
    cipher: Arc<Cipher>,
    config: WebhooksConfig,
    /// In-flight bounds per endpoint, and circuit breakers per endpoint, business and mode.
    endpoints: Arc<Endpoints>,
    /// Which addresses webhooks may go to, in both modes.
    policy: TargetPolicy,
    /// Resolves only to addresses the policy allows, and connects only to those it checked.
    client: reqwest::Client,
    /// Reads what attempts need, many at once.
    reads: Coalescer<DeliveryId, Result<Option<ForAttempt>, String>>,
    /// Records attempts, many in one transaction.
    records: Coalescer<AttemptWrite, Result<bool, String>>,
}

/// What one HTTP attempt gave.
#[derive(Debug)]
struct Sent {
    record: AttemptRecord,
    retry_after: Option<Duration>,
    /// False when no request was made (the target was refused before sending).
    requested: bool,
}

impl Deliverer {
    /// Needs a Tokio runtime (its rounds run as tasks).
    pub fn new(db: DatabaseConnection, cipher: Arc<Cipher>, config: WebhooksConfig) -> Self {
        let timeout = Duration::from_secs(config.timeout_secs.max(1));
        let reading = db.clone();
        let reads = Coalescer::new(ROUND, move |ids: Vec<DeliveryId>| {
            let db = reading.clone();
            async move {
                match deliveries::for_attempts(&db, &ids).await {
                    Ok(found) => ids
                        .iter()
                        .map(|id| Ok(found.iter().find(|f| &f.delivery.id == id).cloned()))
                        .collect(),
                    Err(e) => ids.iter().map(|_| Err(e.to_string())).collect(),
                }
            }
        });
        let recording = db.clone();
        let records = Coalescer::new(ROUND, move |writes: Vec<AttemptWrite>| {
            let db = recording.clone();
            async move {
                match deliveries::record_attempts(&db, &writes).await {
                    Ok(moved) => moved.into_iter().map(Ok).collect(),
                    Err(e) => writes.iter().map(|_| Err(e.to_string())).collect(),
                }
            }
        });
        Self {
            reads,
            records,
            db,
            cipher,
            policy: TargetPolicy::from_config(&config),
            client: client(timeout, TargetPolicy::from_config(&config)),
            endpoints: Endpoints::new(Limits::from_config(&config)),
            config,
        }
    }

    async fn deliver(&self, row: &JobRow, delivery_id: &DeliveryId) -> anyhow::Result<Ran> {
        let read = self
            .reads
            .submit(delivery_id.clone())
            .await
            .ok_or_else(|| anyhow::anyhow!("the worker is shutting down"))?
            .map_err(anyhow::Error::msg)?;
        let Some(ForAttempt {
            delivery,
            event,
            settings,
        }) = read
        else {
            return Ok(JobOutcome::Done.into());
        };
        if delivery.status != DeliveryStatus::Pending
            || delivery.job_id.as_deref().is_some_and(|j| j != row.id)
        {
            // Finished, or superseded by a replay or resend whose own job carries it on.
            return Ok(JobOutcome::Done.into());
        }
        let now = domain::time::now();
        if let Some(due) = delivery.next_attempt_at
            && due > now + chrono::Duration::seconds(1)
        {
            // The last attempt's schedule stands (its record rescheduled the job in the same
            // commit; this run came early, from a stale copy of the message or a written-by-hand
            // job): wait for the time that attempt set.
            return Ok(JobOutcome::Retry {
                after: (due - now).to_std().unwrap_or(Duration::ZERO),
                error: "not due yet: the previous attempt's schedule stands".into(),
            }
            .into());
        }
        let mode = delivery.mode;
        let Some(settings) = settings else {
            let error = format!("business {} has no {mode} settings", delivery.business_id);
            tracing::error!(
                %delivery_id,
                error,
                "cannot read the webhook settings; the delivery waits"
            );
            return Ok(JobOutcome::Retry {
                after: NOT_ATTEMPTED_RETRY,
                error,
            }
            .into());
        };
        // Every attempt goes where the business says now, never to an endpoint it has left.
        let Some(url) = settings.webhook_url.clone().filter(|u| !u.is_empty()) else {
            let sent = refused(None, "no webhook URL is set for this mode".into());
            return self.settle(row, &delivery, None, sent).await;
        };
        let Some(event) = event else {
            return Ok(JobOutcome::Dead {
                error: format!("event {} is missing", delivery.event_id),
            }
            .into());
        };
        let keys = match self.signing_keys(&settings, mode) {
            Ok(keys) => keys,
            Err(error) => {
                tracing::error!(delivery_id = %delivery_id, error, "cannot sign; the delivery waits");
                return Ok(JobOutcome::Retry {
                    after: NOT_ATTEMPTED_RETRY,
                    error,
                }
                .into());
            }
        };
        let sender = Sender::new(&delivery.business_id, mode);
        let permit = match self.endpoints.admit(&url, &sender, Instant::now()).await {
            Admission::Go(permit) => permit,
            Admission::Wait { after, reason } => {
                // Handed back: no consumer slot is held while it waits, and no attempt is spent.
                metrics::counter!("webhook_deliveries_deferred_total", "reason" => reason.label())
                    .increment(1);
                tracing::debug!(
                    %delivery_id,
                    reason = reason.label(),
                    after_ms = after.as_millis() as u64,
                    "delivery deferred"
                );
                return Ok(JobOutcome::Retry {
                    after,
                    error: format!("deferred: {}", reason.label()),
                }
                .into());
            }
        };
        let body = events::envelope(&event);
        let started = Instant::now();
        let sent = self.send(&url, &event.id, body, &keys).await;
        let outcome = match (sent.requested, is_success(&sent.record)) {
            (false, _) => Outcome::NotSent,
            (true, true) => Outcome::Succeeded,
            (true, false) => Outcome::Failed,
        };
        permit.finish(outcome, started.elapsed(), Instant::now());
        self.settle(row, &delivery, Some(&event), sent).await
    }

    /// The mode's current key, and the previous one while its rotation overlap lasts: those of
    /// them that decrypt. One that does not is logged (never its content) and left out, so a
    /// damaged or foreign previous secret does not stop deliveries the current one can sign.
    fn signing_keys(
        &self,
        settings: &business_mode::Model,
        mode: Mode,
    ) -> Result<Vec<SigningKey>, String> {
        let business_id = &settings.business_id;
        let context = webhook_secret_context(business_id, mode);
        let key = |sealed: &str| -> Result<SigningKey, String> {
            let secret = self
                .cipher
                .decrypt(sealed, &context)
                .map_err(|e| format!("does not decrypt: {e}"))?;
            SigningKey::from_secret(&secret).map_err(|e| format!("is not a webhook secret: {e}"))
        };
        let mut sealed = vec![("current", settings.webhook_secret_enc.as_str())];
        if let (Some(previous), Some(expires)) = (
            &settings.previous_webhook_secret_enc,
            settings.previous_secret_expires_at,
        ) && expires > domain::time::now()
        {
            sealed.push(("previous", previous));
        }
        let mut keys = Vec::with_capacity(sealed.len());
        for (which, sealed) in sealed {
            match key(sealed) {
                Ok(k) => keys.push(k),
                Err(error) => {
                    metrics::counter!("webhook_secret_unusable_total", "secret_kind" => which)
                        .increment(1);
                    tracing::error!(
                        %business_id,
                        %mode,
                        secret_kind = which,
                        error,
                        "a webhook secret is unusable; signing with the others"
                    );
                }
            }
        }
        if keys.is_empty() {
            return Err(format!(
                "no webhook secret of business {business_id} in {mode} mode is usable"
            ));
        }
        Ok(keys)
    }

    /// One POST. Never fails: what went wrong is the attempt's record (status 0).
    async fn send(&self, url: &str, event_id: &str, body: String, keys: &[SigningKey]) -> Sent {
        let attempted_at = domain::time::now();
        let started = Instant::now();
        let target = match url::Url::parse(url) {
            Ok(target) => target,
            Err(e) => {
                return refused(Some(url), format!("the webhook URL is not valid: {e}"));
            }
        };
        // The same rule in both modes: addresses in the URL itself are judged here (the client
        // connects to them without resolving); names, by the client's resolver.
        if let Err(e) = self.policy.check_url_static(&target) {
            return refused(Some(url), format!("refused: {e}"));
        }
        let timestamp = Utc::now().timestamp();
        let signature = signing::signature_header(keys, event_id, timestamp, body.as_bytes());
        let request = self
            .client
            .post(target)
            .timeout(Duration::from_secs(self.config.timeout_secs.max(1)))
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(signing::HEADER_ID, event_id)
            .header(signing::HEADER_TIMESTAMP, timestamp.to_string())
            .header(signing::HEADER_SIGNATURE, signature)
            .body(body);
        match request.send().await {
            Ok(mut response) => {
                let status = response.status();
                let retry_after = response
                    .headers()
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| crate::schedule::parse_retry_after(v, SystemTime::now()));
                let excerpt = read_excerpt(status.as_u16(), &mut response).await;
                Sent {
                    record: AttemptRecord {
                        attempted_at,
                        url: Some(url.to_owned()),
                        status_code: i32::from(status.as_u16()),
                        duration_ms: elapsed_ms(started),
                        response_excerpt: excerpt,
                        error: (!status.is_success()).then(|| format!("HTTP {status}")),
                    },
                    retry_after,
                    requested: true,
                }
            }
            Err(e) => Sent {
                record: AttemptRecord {
                    attempted_at,
                    url: Some(url.to_owned()),
                    status_code: 0,
                    duration_ms: elapsed_ms(started),
                    response_excerpt: None,
                    error: Some(describe(&e)),
                },
                retry_after: None,
                requested: true,
            },
        }
    }

    /// Records the attempt and decides what comes next.
    async fn settle(
        &self,
        row: &JobRow,
        delivery: &Delivery,
        event: Option<&events::Event>,
        sent: Sent,
    ) -> anyhow::Result<Ran> {
        let now = domain::time::now();
        let made = delivery.attempts + 1;
        let record = &sent.record;
        let succeeded = is_success(record);
        // The schedule bounds how many tries there are and when the next is at the earliest; a
        // `Retry-After` can only push it later (up to the configured maximum), so a receiver
        // answering `Retry-After: 0` cannot use up the schedule in a second.
        let delay = if succeeded {
            None
        } else {
            crate::schedule::retry_delay(&self.config.retry_schedule, made).map(|scheduled| {
                sent.retry_after.map_or(scheduled, |asked| {
                    crate::schedule::clamp_retry_after(asked, self.config.max_retry_after_secs)
                        .max(scheduled)
                })
            })
        };
        let next = match (succeeded, delay) {
            (true, _) => Next::Succeeded,
            (false, Some(delay)) => Next::RetryAt(now + to_chrono(delay)),
            (false, None) => Next::Dead,
        };
        let write = AttemptWrite {
            delivery: delivery.clone(),
            job_id: row.id.clone(),
            attempt: record.clone(),
            next: next.clone(),
            now,
        };
        let outcome = write.job_outcome();
        let moved = self
            .records
            .submit(write)
            .await
            .ok_or_else(|| anyhow::anyhow!("the worker is shutting down"))?
            .map_err(anyhow::Error::msg)?;
        // Every attempt is on record in the database (`delivery_attempts`); the log tells
        // operators about the ones that did not succeed at once, and about every one at debug
        // level: a line per first-time success, thousands a second under load, is noise.
        macro_rules! attempt_line {
            ($level:ident) => {
                tracing::$level!(
                    delivery_id = %delivery.id,
                    event_id = %delivery.event_id,
                    attempt = made,
                    endpoint = record.url.as_deref().map(crate::endpoints::endpoint_id).unwrap_or_default(),
                    status_code = record.status_code,
                    duration_ms = record.duration_ms,
                    next = ?next,
                    "webhook attempt"
                )
            };
        }
        if succeeded && made == 1 {
            attempt_line!(debug);
        } else {
            attempt_line!(info);
        }
        if !moved {
            return self.moved_on(row, &delivery.id).await.map(Ran::from);
        }
        // Only attempts that count: a superseded or duplicate run's is not on record either.
        observe(record, &next);
        if let Some(event) = event {
            observe_deposit_latency(delivery, event, &next, now);
        }
        // The record ended this run's job too, in the same commit.
        Ok(Ran::recorded(outcome))
    }

    /// The delivery changed while this attempt ran. Superseded (replay, resend) or finished:
    /// this job is done. Still pending on this very job (a duplicate run recorded first): keep
    /// the schedule that run set, rather than completing the job under it.
    async fn moved_on(&self, row: &JobRow, delivery_id: &DeliveryId) -> anyhow::Result<JobOutcome> {
        let current = deliveries::find(&self.db, delivery_id).await?;
        tracing::info!(delivery_id = %delivery_id, "delivery moved on while this attempt ran");
        Ok(match current {
            Some(d)
                if d.status == DeliveryStatus::Pending
                    && d.job_id.as_deref().is_none_or(|j| j == row.id) =>
            {
                let now = domain::time::now();
                let due = d.next_attempt_at.unwrap_or(now);
                JobOutcome::Retry {
                    after: (due - now).to_std().unwrap_or(Duration::ZERO),
                    error: "another run of this job recorded its attempt first".into(),
                }
            }
            _ => JobOutcome::Done,
        })
    }
}

#[async_trait]
impl JobHandler for Deliverer {
    type Job = WebhookJob;

    async fn handle(&self, row: &JobRow, job: WebhookJob) -> anyhow::Result<Ran> {
        let WebhookJob::Deliver { delivery_id } = job;
        self.deliver(row, &delivery_id).await
    }

    /// The attempt could not even run (the database failed): soon, with jitter.
    fn retry_after(&self, _row: &JobRow) -> Duration {
        crate::schedule::jitter(Duration::from_secs(5))
    }

    /// An attempt writes no jobs.
    fn done_writes_jobs(&self) -> bool {
        false
    }
}

/// `webhook_deliveries_total{outcome}` per attempt (`succeeded`; `retrying`: failed with attempts
/// left; `dead`: failed and given up) and the attempt's HTTP latency. A target refused before any
/// request was sent is counted, not timed. `webhook_dead_letters` goes up at once here; the
/// periodic count ([`crate::count_dead_letters`]) brings replays back down.
fn observe(record: &AttemptRecord, next: &Next) {
    let outcome = match next {
        Next::Succeeded => "succeeded",
        Next::RetryAt(_) => "retrying",
        Next::Dead => "dead",
    };
    metrics::counter!("webhook_deliveries_total", "outcome" => outcome).increment(1);
    if record.status_code != 0 || record.duration_ms > 0 {
        metrics::histogram!("webhook_delivery_duration_seconds")
            .record(record.duration_ms as f64 / 1000.0);
    }
    if matches!(next, Next::Dead) {
        metrics::gauge!("webhook_dead_letters").increment(1.0);
    }
}

/// `deposit_webhook_latency_seconds`: from a credited deposit's receipt (its event is recorded in
/// the deposit's own transaction) to its webhook's first 2xx, the figure a business waits on. A
/// delivery that succeeded before (a resend) is not counted again.
fn observe_deposit_latency(
    delivery: &Delivery,
    event: &events::Event,
    next: &Next,
    now: chrono::DateTime<Utc>,
) {
    let succeeded_before = delivery
        .last_status_code
        .is_some_and(|code| (200..300).contains(&code));
    if *next == Next::Succeeded
        && event.event_type == domain::EventType::DepositReceived
        && !succeeded_before
    {
        let waited = (now - event.created_at).as_seconds_f64().max(0.0);
        metrics::histogram!("deposit_webhook_latency_seconds").record(waited);
    }
}

/// An attempt refused before any request was made.
fn refused(url: Option<&str>, error: String) -> Sent {
    Sent {
        record: AttemptRecord {
            attempted_at: domain::time::now(),
            url: url.map(str::to_owned),
            status_code: 0,
            duration_ms: 0,
            response_excerpt: None,
            error: Some(error),
        },
        retry_after: None,
        requested: false,
    }
}

fn is_success(record: &AttemptRecord) -> bool {
    (200..300).contains(&record.status_code)
}

fn client(timeout: Duration, policy: TargetPolicy) -> reqwest::Client {
    reqwest::Client::builder()
        .user_agent(USER_AGENT)
        // 3xx is a failure (Standard Webhooks): the URL should be updated, not followed.
        .redirect(reqwest::redirect::Policy::none())
        // A proxy would resolve names itself, past the SSRF check.
        .no_proxy()
        .connect_timeout(timeout)
        .pool_idle_timeout(Duration::from_secs(60))
        .dns_resolver(Arc::new(GuardedResolver(policy)))
        .build()
        .expect("the HTTP client builds")
}

/// What is kept of the reply (`outbound::webhook_reply`): nothing for a 2xx. The body is still
/// read up to that bound, so a short reply leaves the connection reusable; the rest of a longer
/// one is never downloaded.
async fn read_excerpt(status: u16, response: &mut reqwest::Response) -> Option<String> {
    // The read every body from outside goes through; a body that breaks off gives no excerpt.
    let body = outbound::http::read_capped(response, outbound::webhook_reply::EXCERPT_BYTES)
        .await
        .ok()?;
    outbound::webhook_reply::excerpt(i32::from(status), &body.bytes)
}

/// A reqwest error with its causes (the resolver's SSRF refusal is one of them).
fn describe(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let mut text = kind.to_owned();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn elapsed_ms(started: Instant) -> i64 {
    i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX)
}

fn to_chrono(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `observe` records for these attempts, rendered by a recorder of this test's own (the
    /// process-wide one is shared by every test).
    fn observed(attempts: &[(i32, i64, Next)]) -> String {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            for (status_code, duration_ms, next) in attempts {
                let record = AttemptRecord {
                    attempted_at: domain::time::now(),
                    url: None,
                    status_code: *status_code,
                    duration_ms: *duration_ms,
                    response_excerpt: None,
                    error: None,
                };
                observe(&record, next);
            }
        });
        handle.render()
    }

    #[test]
    fn attempts_are_counted_by_outcome_and_timed_when_a_request_was_sent() {
        let later = domain::time::now();
        let text = observed(&[
            (500, 120, Next::RetryAt(later)),
            (0, 10_000, Next::RetryAt(later)),
            (200, 40, Next::Succeeded),
            (503, 80, Next::Dead),
            // Refused before any request (an SSRF refusal): counted, not timed.
            (0, 0, Next::Dead),
        ]);
        for line in [
            r#"webhook_deliveries_total{outcome="retrying"} 2"#,
            r#"webhook_deliveries_total{outcome="succeeded"} 1"#,
            r#"webhook_deliveries_total{outcome="dead"} 2"#,
            "webhook_dead_letters 2",
            "webhook_delivery_duration_seconds_count 4",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
    }
}
