//! The job layer under stress: an early message (clock skew), a relay stuck publishing, a broker
//! refusing publishes, a long outage of every worker, a broker that lost its queues, a
//! dead-letter queue that would grow forever, a replay. Each runs on SQLite with the in-process broker, and on RabbitMQ (with
//! PostgreSQL when TEST_DATABASE_URL is set) when TEST_AMQP_URL is set.

use domain::ids::JobId;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use futures::stream::BoxStream;
use jobs::{ProvisioningJob, WebhookJob};
use migrations::MigratorTrait;
use queue::broker::{
    Broker, DeadLetter, DeadLetterBounds, Delivery, MemoryBroker, Outgoing, QueueError,
    RabbitBroker,
};
use queue::relay::{Relay, RelayTimings};
use queue::worker::{Consumer, JobHandler, Ran};
use sea_orm::{ConnectionTrait, DatabaseConnection};
use store::outbox::{self, JobMessage, JobOutcome, JobRow};
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------------
// Harness

fn env_url(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|url| !url.is_empty())
}

/// A migrated database and a broker with a topology of their own, removed when dropped.
struct Env {
    db: DatabaseConnection,
    broker: Arc<dyn Broker>,
    /// RabbitMQ's URL and this test's queue prefix.
    rabbit: Option<(String, String)>,
    shutdown: CancellationToken,
    _sqlite: Option<tempfile::TempDir>,
    postgres: Option<(String, String)>,
}

#[derive(Clone, Copy)]
enum Kind {
    Memory,
    Rabbit,
}

impl Env {
    /// None (with a note) for RabbitMQ when TEST_AMQP_URL is unset.
    async fn new(kind: Kind, bounds: DeadLetterBounds) -> Option<Env> {
        let (broker, rabbit): (Arc<dyn Broker>, _) = match kind {
            Kind::Memory => (
                Arc::new(MemoryBroker::with_dead_letter_bounds(bounds)),
                None,
            ),
            Kind::Rabbit => {
                let Some(url) = env_url("TEST_AMQP_URL") else {
                    assert!(
                        std::env::var_os("CI").is_none(),
                        "CI is set but TEST_AMQP_URL is not"
                    );
                    eprintln!("skipped: TEST_AMQP_URL is not set");
                    return None;
                };
                let prefix = format!("t{}", ulid::Ulid::new().to_string().to_lowercase());
                let broker = RabbitBroker::connect_with(&url, &prefix, None, bounds)
                    .await
                    .expect("connect to TEST_AMQP_URL");
                (Arc::new(broker), Some((url, prefix)))
            }
        };
        broker.declare().await.expect("declare");
        // PostgreSQL beside RabbitMQ when there is one, as in production.
        let postgres = match (kind, env_url("TEST_DATABASE_URL")) {
            (Kind::Rabbit, Some(admin)) => {
                let name = format!("vas_jobs_{}", ulid::Ulid::new().to_string().to_lowercase());
                let conn = sea_orm::Database::connect(admin.as_str()).await.unwrap();
                conn.execute_unprepared(&format!("CREATE DATABASE {name}"))
                    .await
                    .unwrap();
                conn.close().await.ok();
                Some((admin, name))
            }
            _ => None,
        };
        let (url, sqlite) = match &postgres {
            Some((admin, name)) => {
                let mut url = url::Url::parse(admin).unwrap();
                url.set_path(&format!("/{name}"));
                (url.to_string(), None)
            }
            None => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!(
                    "sqlite://{}?mode=rwc",
                    dir.path().join("t.sqlite").display()
                );
                (url, Some(dir))
            }
        };
        let db = store::connect(&url, 10).await.unwrap();
        migrations::Migrator::up(&db, None).await.unwrap();
        Some(Env {
            db,
            broker,
            rabbit,
            shutdown: CancellationToken::new(),
            _sqlite: sqlite,
            postgres,
        })
    }

    fn relay(&self, timings: RelayTimings) -> Relay {
        Relay::with_timings(self.db.clone(), self.broker.clone(), timings)
    }

    async fn enqueue(&self, job: &ProvisioningJob, run_at: chrono::DateTime<chrono::Utc>) -> JobId {
        outbox::enqueue(&self.db, job, run_at, domain::time::now())
            .await
            .unwrap()
    }

    async fn job(&self, id: &JobId) -> JobRow {
        outbox::find(&self.db, id).await.unwrap().expect("the job")
    }

    /// Waits until `queue` (or its dead-letter queue) holds `expected` ready messages.
    async fn depth_becomes(&self, queue: &str, dead_letter: bool, expected: u64, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            // A queue that is missing for the moment counts as not there yet.
            let depth = self.broker.depth(queue, dead_letter).await;
            if matches!(depth, Ok(d) if d == expected) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{queue} (dead letter: {dead_letter}) holds {depth:?}, expected {expected}"
            );
            sleep(Duration::from_millis(50)).await;
        }
    }

    /// Checks every 100 ms, `times` times, that `queue` holds `expected` ready messages.
    async fn depth_stays(&self, queue: &str, expected: u64, times: usize, why: &str) {
        for _ in 0..times {
            sleep(Duration::from_millis(100)).await;
            let depth = self.broker.depth(queue, false).await.unwrap();
            assert_eq!(depth, expected, "{why}");
        }
    }

    /// Takes every message `queue` holds until they name `expected` (in any order), and fails if
    /// they name a job twice or one not expected, or do not name them all `within`.
    async fn messages_name(&self, queue: &str, expected: &[JobId], within: Duration) {
        let deadline = Instant::now() + within;
        let mut named: Vec<JobId> = Vec::new();
        let mut want = expected.to_vec();
        want.sort();
        loop {
            while let Some(message) = self.broker.get(queue, false).await.unwrap() {
                let body: JobMessage = serde_json::from_slice(&message.body).unwrap();
                named.extend(body.into_job_ids());
                message.ack().await.unwrap();
            }
            named.sort();
            if named == want {
                return;
            }
            assert!(
                Instant::now() < deadline && named.iter().all(|id| want.contains(id)),
                "{queue}'s messages named {named:?}, expected {want:?}"
            );
            let mut deduped = named.clone();
            deduped.dedup();
            assert_eq!(deduped.len(), named.len(), "a job named twice: {named:?}");
            sleep(Duration::from_millis(50)).await;
        }
    }

    async fn cleanup(self) {
        self.shutdown.cancel();
        self.db.clone().close().await.ok();
        if let Some((url, prefix)) = &self.rabbit {
            queue::broker::delete_topology(url, prefix).await;
        }
        if let Some((admin, name)) = &self.postgres
            && let Ok(conn) = sea_orm::Database::connect(admin.as_str()).await
        {
            let _ = conn
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await;
            conn.close().await.ok();
        }
    }
}

/// Runs `check` on a fresh environment and cleans up whether or not it passed.
async fn with_env<F, Fut>(kind: Kind, bounds: DeadLetterBounds, check: F)
where
    F: FnOnce(Arc<Env>) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(env) = Env::new(kind, bounds).await else {
        return;
    };
    let env = Arc::new(env);
    let outcome = AssertUnwindSafe(check(env.clone())).catch_unwind().await;
    env.shutdown.cancel();
    // Let the relay and consumers stop before the database goes.
    sleep(Duration::from_millis(100)).await;
    if let Ok(env) = Arc::try_unwrap(env) {
        env.cleanup().await;
    }
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Each named check runs as `<check>::memory` and `<check>::rabbit`.
macro_rules! on_both_brokers {
    ($($check:ident),* $(,)?) => {$(
        mod $check {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn memory() {
                super::with_env(super::Kind::Memory, Default::default(), super::$check).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn rabbit() {
                super::with_env(super::Kind::Rabbit, Default::default(), super::$check).await;
            }
        }
    )*};
}

/// Quick sweeps and a short lease, so minutes of behaviour take a second or two.
fn fast() -> RelayTimings {
    RelayTimings {
        sweep_every: Duration::from_millis(50),
        claim_lease: Duration::from_secs(60),
        lease: Duration::from_millis(300),
        lost_check_every: Duration::from_millis(100),
    }
}

/// A handler that records what it ran and when, and how many of its runs were under way at once.
struct Recorder<J> {
    runs: Mutex<Vec<(J, chrono::DateTime<chrono::Utc>)>>,
    /// Jobs for which to answer `Dead` (the rest are done).
    doomed: Vec<J>,
    /// How long each run takes.
    pace: Duration,
    running: AtomicUsize,
    most_at_once: AtomicUsize,
}

impl<J> Recorder<J> {
    fn new(doomed: Vec<J>) -> Arc<Self> {
        Self::paced(doomed, Duration::ZERO)
    }

    fn paced(doomed: Vec<J>, pace: Duration) -> Arc<Self> {
        Arc::new(Recorder {
            runs: Mutex::new(Vec::new()),
            doomed,
            pace,
            running: AtomicUsize::new(0),
            most_at_once: AtomicUsize::new(0),
        })
    }

    fn runs(&self) -> Vec<(J, chrono::DateTime<chrono::Utc>)>
    where
        J: Clone,
    {
        self.runs.lock().unwrap().clone()
    }
}

#[async_trait]
impl<J> JobHandler for Recorder<J>
where
    J: jobs::QueueJob + Clone + PartialEq,
{
    type Job = J;

    async fn handle(&self, _row: &JobRow, job: J) -> anyhow::Result<Ran> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_at_once.fetch_max(now, Ordering::SeqCst);
        if !self.pace.is_zero() {
            sleep(self.pace).await;
        }
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.runs
            .lock()
            .unwrap()
            .push((job.clone(), domain::time::now()));
        Ok(if self.doomed.contains(&job) {
            JobOutcome::Dead {
                error: "doomed".into(),
            }
        } else {
            JobOutcome::Done
        }
        .into())
    }

    fn retry_after(&self, _row: &JobRow) -> Duration {
        Duration::from_secs(1)
    }
}

/// A handler that says it recorded its run's end itself (as a webhook attempt's record does)
/// without writing anything, so that whatever the row shows afterwards is the consumer's doing.
struct SaysRecorded {
    runs: Mutex<usize>,
}

#[async_trait]
impl JobHandler for SaysRecorded {
    type Job = WebhookJob;

    async fn handle(&self, _row: &JobRow, _job: WebhookJob) -> anyhow::Result<Ran> {
        *self.runs.lock().unwrap() += 1;
        Ok(Ran::recorded(JobOutcome::Retry {
            after: Duration::from_secs(3600),
            error: "recorded by the handler".into(),
        }))
    }

    fn retry_after(&self, _row: &JobRow) -> Duration {
        Duration::from_secs(1)
    }
}

fn start<H: JobHandler>(env: &Env, relay: &Relay, handler: Arc<H>) -> CancellationToken {
    let stop = env.shutdown.child_token();
    let consumer = Consumer::new(env.db.clone(), env.broker.clone(), relay.clone(), handler)
        .prefetch(4)
        .grace(Duration::from_secs(1))
        .dead_letter_check_every(Duration::from_millis(200))
        .subscription_check_every(Duration::from_millis(500));
    tokio::spawn(consumer.run(stop.clone()));
    stop
}

fn provision(n: usize) -> ProvisioningJob {
    ProvisioningJob::Provision {
        account_id: domain::ids::AccountId::unchecked(format!("va_{n}")),
    }
}

async fn eventually(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// On both brokers

on_both_brokers!(
    an_early_message_runs_the_job_at_its_time,
    the_relay_holds_no_row_while_it_publishes,
    a_long_outage_leaves_one_message_per_claim,
    a_relay_that_dies_mid_publish_leaves_nothing_behind,
    a_replayed_dead_job_leaves_no_copy_in_the_dead_letter_queue,
    relays_claiming_at_once_share_the_due_jobs_oldest_first,
    a_run_whose_handler_recorded_its_end_is_not_recorded_again,
    a_message_of_many_jobs_runs_them_together_as_the_prefetch_allows,
    a_full_consumer_gives_a_waiting_message_to_one_with_room,
);

/// One claim's twenty jobs go out as two messages (16 and 4). The consumer runs them at once as
/// far as its prefetch of 4 allows (never more), each once, copies the dead one to the
/// dead-letter queue alone, and acknowledges each message once its jobs are settled: after it
/// stops, nothing comes back to the queue.
async fn a_message_of_many_jobs_runs_them_together_as_the_prefetch_allows(env: Arc<Env>) {
    let mut ids = Vec::new();
    for n in 0..20 {
        ids.push(env.enqueue(&provision(n), domain::time::now()).await);
    }
    let relay = env.relay(fast());
    assert_eq!(relay.sweep().await.unwrap(), 20);
    env.depth_becomes("provisioning", false, 2, Duration::from_secs(5))
        .await;
    let handler = Recorder::paced(vec![provision(7)], Duration::from_millis(100));
    let stop = start(&env, &relay, handler.clone());
    eventually("every job ends", Duration::from_secs(10), async || {
        let mut ended = 0;
        for id in &ids {
            let row = env.job(id).await;
            ended += usize::from(row.completed_at.is_some() || row.dead_at.is_some());
        }
        ended == ids.len()
    })
    .await;
    env.depth_becomes("provisioning", true, 1, Duration::from_secs(5))
        .await;
    stop.cancel();
    sleep(Duration::from_millis(500)).await;

    let most = handler.most_at_once.load(Ordering::SeqCst);
    assert_eq!(
        most, 4,
        "jobs of one message at once: {most}, the prefetch is 4"
    );
    // Each job ran, and only once: twenty runs of twenty different jobs.
    let mut runs: Vec<String> = handler
        .runs()
        .into_iter()
        .map(|(job, _)| format!("{job:?}"))
        .collect();
    assert_eq!(runs.len(), 20, "runs: {runs:?}");
    runs.sort();
    runs.dedup();
    assert_eq!(runs.len(), 20, "a job ran twice");
    assert!(env.job(&ids[7]).await.dead_at.is_some());
    assert_eq!(
        env.broker.depth("provisioning", false).await.unwrap(),
        0,
        "the messages were acknowledged"
    );
    let copy = env
        .broker
        .get("provisioning", true)
        .await
        .unwrap()
        .expect("the dead job's copy");
    let message: JobMessage = serde_json::from_slice(&copy.body).unwrap();
    assert_eq!(message.job_ids(), std::slice::from_ref(&ids[7]));
    copy.ack().await.unwrap();
}

/// The broker's prefetch counts messages, not jobs: a consumer of 4 slots takes both messages of
/// 4 jobs while the first one's jobs run for seconds. A second consumer started afterwards gets
/// the other message once the first gives it back (after a second without a free slot), and
/// runs its jobs while the first is still busy; every job runs once.
async fn a_full_consumer_gives_a_waiting_message_to_one_with_room(env: Arc<Env>) {
    let relay = env.relay(fast());
    let mut ids = Vec::new();
    for claim in 0..2 {
        for n in 0..4 {
            ids.push(
                env.enqueue(&provision(claim * 4 + n), domain::time::now())
                    .await,
            );
        }
        assert_eq!(relay.sweep().await.unwrap(), 4);
    }
    let busy = Recorder::paced(vec![], Duration::from_secs(8));
    start(&env, &relay, busy.clone());
    // Both messages are in the first consumer's hands: none is left in the queue.
    eventually(
        "the first consumer took both messages",
        Duration::from_secs(5),
        async || {
            busy.running.load(Ordering::SeqCst) == 4
                && env.broker.depth("provisioning", false).await.unwrap() == 0
        },
    )
    .await;
    let idle = Recorder::new(vec![]);
    // Its idle subscription is not made again meanwhile (as `start`'s quick check would): a
    // quorum queue hands a returned message to the consumer that has waited longest, which a
    // new subscription never is.
    let consumer = Consumer::new(
        env.db.clone(),
        env.broker.clone(),
        relay.clone(),
        idle.clone(),
    )
    .prefetch(4)
    .subscription_check_every(Duration::from_secs(60));
    tokio::spawn(consumer.run(env.shutdown.child_token()));
    eventually(
        "the second consumer ran the waiting message's jobs",
        Duration::from_secs(6),
        async || idle.runs().len() == 4,
    )
    .await;
    assert!(
        busy.runs().is_empty(),
        "the first consumer's jobs are still running"
    );
    eventually("every job ends", Duration::from_secs(15), async || {
        let mut ended = 0;
        for id in &ids {
            ended += usize::from(env.job(id).await.completed_at.is_some());
        }
        ended == ids.len()
    })
    .await;
    // Each consumer ran one whole message (either may have started first), and each job ran once.
    let names = |runs: Vec<(ProvisioningJob, _)>| -> Vec<String> {
        let mut names: Vec<String> = runs.iter().map(|(job, _)| format!("{job:?}")).collect();
        names.sort();
        names
    };
    let message = |claim: usize| -> Vec<String> {
        (0..4)
            .map(|n| format!("{:?}", provision(claim * 4 + n)))
            .collect()
    };
    let (first, second) = (names(busy.runs()), names(idle.runs()));
    let (a, b) = (message(0), message(1));
    assert!(
        (first == a && second == b) || (first == b && second == a),
        "each consumer ran one message's jobs once: {first:?} and {second:?}"
    );
}

/// Item 9: a relay whose clock runs 5 s ahead publishes a job 3 s early. The consumer does not
/// drop the message (the job would then wait for a lost-message check, minutes); the job goes
/// back to being due and runs once, at its time.
async fn an_early_message_runs_the_job_at_its_time(env: Arc<Env>) {
    let run_at = domain::time::now() + chrono::Duration::seconds(3);
    let id = env.enqueue(&provision(1), run_at).await;
    let ahead = domain::time::now() + chrono::Duration::seconds(5);
    let until = outbox::claim_until(ahead, Duration::from_secs(60));
    let claimed = outbox::claim_due(&env.db, ahead, until, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let body = serde_json::to_vec(&JobMessage::one(id.clone())).unwrap();
    env.broker
        .publish("provisioning", &body, false)
        .await
        .unwrap();
    outbox::confirm_published(&env.db, std::slice::from_ref(&id), until)
        .await
        .unwrap();

    // The lost-message check is kept far away: only the early path can bring the job back.
    let relay = env.relay(RelayTimings {
        lease: Duration::from_secs(3600),
        ..fast()
    });
    tokio::spawn(relay.clone().run(env.shutdown.child_token()));
    let recorder = Recorder::<ProvisioningJob>::new(vec![]);
    start(&env, &relay, recorder.clone());

    eventually("the job ran", Duration::from_secs(10), async || {
        !recorder.runs().is_empty()
    })
    .await;
    sleep(Duration::from_millis(500)).await;
    let runs = recorder.runs();
    assert_eq!(runs.len(), 1, "ran once: {runs:?}");
    assert!(
        runs[0].1 >= run_at - chrono::Duration::seconds(1),
        "ran at {}, due at {run_at}",
        runs[0].1
    );
    assert!(env.job(&id).await.completed_at.is_some());
}

/// A broker whose batch publishes wait at a gate, counting them, and that refuses every
/// message of a batch while `refusing` is set (as a broker failing over nacks them).
struct Gated {
    inner: Arc<dyn Broker>,
    batches: Mutex<Vec<usize>>,
    entered: tokio::sync::Notify,
    open: tokio::sync::Semaphore,
    refusing: AtomicBool,
}

impl Gated {
    /// Over `inner`, with the gate letting `permits` batches through at once.
    fn new(inner: Arc<dyn Broker>, permits: usize) -> Arc<Self> {
        Arc::new(Gated {
            inner,
            batches: Mutex::new(Vec::new()),
            entered: tokio::sync::Notify::new(),
            open: tokio::sync::Semaphore::new(permits),
            refusing: AtomicBool::new(false),
        })
    }

    fn rounds(&self) -> usize {
        self.batches.lock().unwrap().len()
    }
}

#[async_trait]
impl Broker for Gated {
    async fn declare(&self) -> Result<(), QueueError> {
        self.inner.declare().await
    }
    async fn publish(&self, queue: &str, body: &[u8], dead: bool) -> Result<(), QueueError> {
        self.inner.publish(queue, body, dead).await
    }
    async fn publish_many(&self, messages: &[Outgoing<'_>]) -> Vec<Result<(), QueueError>> {
        self.batches.lock().unwrap().push(messages.len());
        self.entered.notify_one();
        let _pass = self.open.acquire().await.unwrap();
        if self.refusing.load(Ordering::SeqCst) {
            return messages
                .iter()
                .map(|_| Err(QueueError::NotConfirmed("nacked by the test".into())))
                .collect();
        }
        self.inner.publish_many(messages).await
    }
    async fn publish_dead_letter(&self, letter: DeadLetter<'_>) -> Result<(), QueueError> {
        self.inner.publish_dead_letter(letter).await
    }
    async fn get(&self, queue: &str, dead: bool) -> Result<Option<Delivery>, QueueError> {
        self.inner.get(queue, dead).await
    }
    fn dead_letter_bounds(&self) -> DeadLetterBounds {
        self.inner.dead_letter_bounds()
    }
    async fn consume(
        &self,
        queue: &str,
        prefetch: u16,
    ) -> Result<BoxStream<'static, Result<Delivery, QueueError>>, QueueError> {
        self.inner.consume(queue, prefetch).await
    }
    async fn depth(&self, queue: &str, dead: bool) -> Result<u64, QueueError> {
        self.inner.depth(queue, dead).await
    }
    async fn is_ready(&self) -> bool {
        self.inner.is_ready().await
    }
}

/// Item 10: while the relay waits on the broker, the rows it is publishing are not locked (a
/// consumer finishing one of them does not wait), no other relay takes them, and the whole
/// batch goes out in one pipelined publish of four messages, naming every job once.
async fn the_relay_holds_no_row_while_it_publishes(env: Arc<Env>) {
    let mut ids = Vec::new();
    for n in 0..50 {
        ids.push(env.enqueue(&provision(n), domain::time::now()).await);
    }
    let gated = Gated::new(env.broker.clone(), 0);
    let relay = Relay::with_timings(env.db.clone(), gated.clone(), fast());
    let sweep = tokio::spawn({
        let relay = relay.clone();
        async move { relay.sweep().await }
    });
    timeout(Duration::from_secs(10), gated.entered.notified())
        .await
        .expect("the relay publishes");
    assert_eq!(
        *gated.batches.lock().unwrap(),
        vec![4],
        "one publish of four messages (16, 16, 16 and 2 jobs)"
    );

    // The broker is slow to confirm. A consumer finishes one of the jobs meanwhile...
    let row = env.job(&ids[0]).await;
    let now = domain::time::now();
    timeout(
        Duration::from_secs(2),
        outbox::finish(&env.db, &row, &JobOutcome::Done, now),
    )
    .await
    .expect("finishing a job does not wait for the relay")
    .unwrap();
    // ...and another relay finds nothing to claim.
    let until = outbox::claim_until(now, Duration::from_secs(60));
    let second = timeout(
        Duration::from_secs(2),
        outbox::claim_due(&env.db, now, until, 200),
    )
    .await
    .expect("claiming does not wait for the relay")
    .unwrap();
    assert!(second.is_empty(), "claimed twice: {}", second.len());

    gated.open.add_permits(1);
    let published = timeout(Duration::from_secs(10), sweep)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(published, 50);
    for id in &ids {
        let row = env.job(id).await;
        assert!(row.published_at.is_some(), "{id} marked published");
        assert!(row.publishing_until.is_none(), "{id} claim settled");
    }
    env.depth_becomes("provisioning", false, 4, Duration::from_secs(5))
        .await;
    env.messages_name("provisioning", &ids, Duration::from_secs(5))
        .await;
}

/// While the broker refuses every publish (a node failing over), the commits that keep kicking
/// the relay do not each start a round bound to fail: after a refused round the relay pauses,
/// 250 ms, then 500 ms, growing to the sweep interval. Once the broker takes messages again,
/// every job refused meanwhile is published at the round after the pause, and a kick starts a
/// round at once again. The refusals are the test broker's, so the in-process broker is enough.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusing_broker_is_not_hammered_by_kicks() {
    with_env(Kind::Memory, Default::default(), async |env: Arc<Env>| {
        let gated = Gated::new(env.broker.clone(), tokio::sync::Semaphore::MAX_PERMITS);
        gated.refusing.store(true, Ordering::SeqCst);
        let sweep_every = Duration::from_secs(2);
        let relay = Relay::with_timings(
            env.db.clone(),
            gated.clone(),
            RelayTimings {
                sweep_every,
                claim_lease: Duration::from_secs(60),
                lease: Duration::from_secs(3600),
                lost_check_every: Duration::from_secs(3600),
            },
        );
        tokio::spawn(relay.clone().run(env.shutdown.child_token()));

        // Two and a half seconds of commits: a job every 100 ms, a kick every 10 ms.
        let mut ids = Vec::new();
        let started = Instant::now();
        let mut n = 0;
        while started.elapsed() < Duration::from_millis(2500) {
            if n % 10 == 0 {
                ids.push(env.enqueue(&provision(n / 10), domain::time::now()).await);
            }
            n += 1;
            relay.kick();
            sleep(Duration::from_millis(10)).await;
        }
        // Rounds at about 0, 0.25, 0.75 and 1.75 s; without the pause, one per kick.
        let refused = gated.rounds();
        assert!(
            (3..=6).contains(&refused),
            "{refused} rounds in 2.5 s of kicks every 10 ms while the broker refused"
        );
        for id in &ids {
            let row = env.job(id).await;
            assert!(
                row.published_at.is_none(),
                "{id} marked published though refused"
            );
            assert!(row.publishing_until.is_none(), "{id} still claimed");
        }

        // The broker takes messages again: the round after the pause publishes every job.
        gated.refusing.store(false, Ordering::SeqCst);
        eventually(
            "every job refused meanwhile is published",
            sweep_every * 2,
            async || {
                for id in &ids {
                    if env.job(id).await.published_at.is_none() {
                        return false;
                    }
                }
                true
            },
        )
        .await;
        env.messages_name("provisioning", &ids, Duration::from_secs(2))
            .await;

        // And a kick is answered at once again, well before the next timed sweep.
        let rounds = gated.rounds();
        let id = env.enqueue(&provision(1000), domain::time::now()).await;
        relay.kick();
        eventually(
            "a job kicked after the broker recovered is published",
            sweep_every / 2,
            async || env.job(&id).await.published_at.is_some(),
        )
        .await;
        assert_eq!(gated.rounds(), rounds + 1, "one round for the kick");
    })
    .await;
}

/// Item 11: with no worker running, sweep after sweep and lost-message check after check leave
/// one message per claim of up to 16 jobs in the queue, naming them (before, every job was
/// published again every 5 minutes: an hour-long outage left ~12 copies of each). A message
/// really lost (taken off the queue without its jobs done) is published again, once.
async fn a_long_outage_leaves_one_message_per_claim(env: Arc<Env>) {
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(env.enqueue(&provision(n), domain::time::now()).await);
    }
    let relay = env.relay(fast());
    let relay_stop = env.shutdown.child_token();
    let running = tokio::spawn(relay.clone().run(relay_stop.clone()));
    env.depth_becomes("provisioning", false, 1, Duration::from_secs(5))
        .await;
    // Ten leases and ~20 lost-message checks later: still one message for the claim.
    env.depth_stays("provisioning", 1, 30, "one message per claim")
        .await;
    // A second claim's message is a second message, and both stay.
    let later = env.enqueue(&provision(5), domain::time::now()).await;
    relay.kick();
    env.depth_becomes("provisioning", false, 2, Duration::from_secs(5))
        .await;
    env.depth_stays("provisioning", 2, 10, "one message per claim")
        .await;

    // The broker loses both (taken and acknowledged, the jobs never done), at once: the relay
    // is stopped meanwhile, as a check between the two would rightly publish the first again.
    relay_stop.cancel();
    running.await.unwrap();
    ids.push(later);
    env.messages_name("provisioning", &ids, Duration::from_secs(1))
        .await;
    tokio::spawn(relay.clone().run(env.shutdown.child_token()));
    // Published again, every job once, in the one claim that takes them all.
    env.depth_becomes("provisioning", false, 1, Duration::from_secs(5))
        .await;
    env.depth_stays("provisioning", 1, 10, "published again once")
        .await;
    env.messages_name("provisioning", &ids, Duration::from_secs(1))
        .await;
}

/// Item 11, the other half: a relay that claimed jobs and died before the broker confirmed them
/// (or never sent them) leaves them unconfirmed; once its claim's lease ends another relay
/// publishes them, once each.
async fn a_relay_that_dies_mid_publish_leaves_nothing_behind(env: Arc<Env>) {
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(env.enqueue(&provision(n), domain::time::now()).await);
    }
    let now = domain::time::now();
    let until = outbox::claim_until(now, Duration::from_secs(2));
    let claimed = outbox::claim_due(&env.db, now, until, 10).await.unwrap();
    assert_eq!(claimed.len(), 3);
    // The claiming relay is gone. Another one leaves its claims alone while they last...
    let relay = env.relay(fast());
    tokio::spawn(relay.clone().run(env.shutdown.child_token()));
    sleep(Duration::from_millis(1000)).await;
    assert_eq!(env.broker.depth("provisioning", false).await.unwrap(), 0);
    // ...and publishes them when they end, in one message.
    env.depth_becomes("provisioning", false, 1, Duration::from_secs(5))
        .await;
    // The broker holds a message before the relay has its confirm and records it: wait for that.
    for id in &ids {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while env.job(id).await.publishing_until.is_some() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{id} not confirmed within 5 s"
            );
            sleep(Duration::from_millis(20)).await;
        }
    }
    sleep(Duration::from_millis(1000)).await;
    assert_eq!(env.broker.depth("provisioning", false).await.unwrap(), 1);
    env.messages_name("provisioning", &ids, Duration::from_secs(1))
        .await;
}

/// Relays claiming at the same moment (`FOR UPDATE SKIP LOCKED` on PostgreSQL) split the due jobs
/// between them: none claimed twice, none left behind, none claimed before it is due, each batch
/// oldest first. A claim is settled only by the relay that holds it.
async fn relays_claiming_at_once_share_the_due_jobs_oldest_first(env: Arc<Env>) {
    let now = domain::time::now();
    let mut due = Vec::new();
    // Written newest first, so that the order claimed is the jobs' time, not the order written.
    for n in 0..30 {
        let at = now - chrono::Duration::seconds(n as i64 + 1);
        due.push(env.enqueue(&provision(n), at).await);
    }
    let later = env
        .enqueue(&provision(99), now + chrono::Duration::minutes(5))
        .await;
    let until = |k: i64| outbox::claim_until(now, Duration::from_secs(60 + k as u64));
    let claims =
        futures::future::join_all((0..4).map(|k| outbox::claim_due(&env.db, now, until(k), 10)))
            .await;
    let mut claimed: Vec<JobId> = Vec::new();
    for (k, batch) in claims.into_iter().enumerate() {
        let batch = batch.unwrap();
        assert!(batch.len() <= 10, "a batch is at most its size");
        assert!(
            batch.windows(2).all(|w| w[0].run_at <= w[1].run_at),
            "each batch oldest first"
        );
        for row in &batch {
            let stored = env.job(&row.id).await;
            assert!(stored.published_at.is_some(), "{} marked published", row.id);
            assert_eq!(stored.publishing_until, Some(until(k as i64)), "{}", row.id);
            assert!(stored.started_at.is_none());
        }
        claimed.extend(batch.into_iter().map(|row| row.id));
    }
    let mut sorted = claimed.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), claimed.len(), "a job claimed twice");
    let mut expected = due.clone();
    expected.sort();
    assert_eq!(sorted, expected, "every due job claimed, and only those");
    assert!(!claimed.contains(&later));
    assert!(
        outbox::claim_due(&env.db, now, until(9), 10)
            .await
            .unwrap()
            .is_empty(),
        "nothing left to claim"
    );

    // A claim is settled under its own lease only.
    let first = env.job(&claimed[0]).await;
    let mine: Vec<JobId> = {
        let mut ids = Vec::new();
        for id in &claimed {
            if env.job(id).await.publishing_until == first.publishing_until {
                ids.push(id.clone());
            }
        }
        ids
    };
    let lease = first.publishing_until.unwrap();
    let others = lease + chrono::Duration::milliseconds(1);
    assert_eq!(
        outbox::confirm_published(&env.db, &mine, others)
            .await
            .unwrap(),
        0,
        "another lease confirms none of them"
    );
    assert_eq!(
        outbox::confirm_published(&env.db, &mine, lease)
            .await
            .unwrap(),
        mine.len() as u64
    );
    for id in &mine {
        assert!(env.job(id).await.publishing_until.is_none(), "{id} settled");
    }
}

/// Item 13: a dead job's copy waits in the dead-letter queue until the job is replayed (as
/// `worker-webhooks replay` does: the dead job completed, a new one made); then the copy goes,
/// and a copy of a job still dead stays.
async fn a_replayed_dead_job_leaves_no_copy_in_the_dead_letter_queue(env: Arc<Env>) {
    let deliver = |id: &str| WebhookJob::Deliver {
        delivery_id: domain::ids::DeliveryId::unchecked(id),
    };
    let relay = env.relay(fast());
    tokio::spawn(relay.clone().run(env.shutdown.child_token()));
    let recorder = Recorder::new(vec![deliver("whd_a"), deliver("whd_b")]);
    start(&env, &relay, recorder.clone());
    let now = domain::time::now();
    let a = outbox::enqueue(&env.db, &deliver("whd_a"), now, now)
        .await
        .unwrap();
    let b = outbox::enqueue(&env.db, &deliver("whd_b"), now, now)
        .await
        .unwrap();
    relay.kick();
    env.depth_becomes("webhooks", true, 2, Duration::from_secs(10))
        .await;
    for id in [&a, &b] {
        let row = env.job(id).await;
        assert!(row.dead_at.is_some() && row.last_error.as_deref() == Some("doomed"));
    }

    // The replay of A.
    let now = domain::time::now();
    outbox::mark(&env.db, &a, outbox::Mark::Completed, now)
        .await
        .unwrap();
    outbox::enqueue(&env.db, &deliver("whd_a2"), now, now)
        .await
        .unwrap();
    relay.kick();
    // What is left, once the tidying is over (it takes copies out and puts back those it
    // keeps, so the depth passes through 1 mid-way), is B's copy alone.
    let started = std::time::Instant::now();
    loop {
        env.depth_becomes("webhooks", true, 1, Duration::from_secs(10))
            .await;
        // The tidying may hold the copy out between the depth read and this get: look again.
        let seen = match env.broker.get("webhooks", true).await.unwrap() {
            Some(left) => {
                let message: JobMessage = serde_json::from_slice(&left.body).unwrap();
                left.nack(true).await.unwrap();
                assert_eq!(message.job_ids().len(), 1, "a copy names one job");
                Some(message.job_ids()[0].clone())
            }
            None => None,
        };
        if seen.as_deref() == Some(b.as_str()) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the replayed job's copy {seen:?} stayed in the dead-letter queue"
        );
        sleep(Duration::from_millis(100)).await;
    }
    sleep(Duration::from_millis(600)).await;
    assert_eq!(env.broker.depth("webhooks", true).await.unwrap(), 1);
}

// ---------------------------------------------------------------------------------------------
// Bounded dead-letter queues

mod dead_letter_queues_are_bounded {
    use super::*;

    fn bounds() -> DeadLetterBounds {
        DeadLetterBounds {
            max_length: 3,
            ttl: Duration::from_secs(2),
        }
    }

    #[tokio::test]
    async fn memory() {
        with_env(Kind::Memory, bounds(), check).await;
    }

    #[tokio::test]
    async fn rabbit() {
        with_env(Kind::Rabbit, bounds(), check).await;
    }

    /// At most `max_length` (the oldest go first), none older than `ttl`.
    async fn check(env: Arc<Env>) {
        for n in 0..5 {
            let body = format!("m{n}");
            env.broker
                .publish("recheck", body.as_bytes(), true)
                .await
                .unwrap();
        }
        env.depth_becomes("recheck", true, 3, Duration::from_secs(5))
            .await;
        let oldest = env.broker.get("recheck", true).await.unwrap().unwrap();
        assert_eq!(oldest.body, b"m2");
        oldest.nack(true).await.unwrap();
        env.depth_becomes("recheck", true, 0, Duration::from_secs(10))
            .await;
    }
}

// ---------------------------------------------------------------------------------------------
// RabbitMQ only

async fn rabbit_env(bounds: DeadLetterBounds) -> Option<Env> {
    Env::new(Kind::Rabbit, bounds).await
}

/// Item 12: `rabbitmqctl delete_queue` of a work queue while a worker consumes it. New work is
/// then consumed without restarting anything: the consumer declares the topology again when the
/// broker cancels it. And with no consumer running, the relay declares it again when a publish
/// finds no queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_work_queue_is_declared_again_without_a_restart() {
    let Some(env) = rabbit_env(DeadLetterBounds::default()).await else {
        return;
    };
    let env = Arc::new(env);
    let check = AssertUnwindSafe(async {
        let (_, prefix) = env.rabbit.clone().unwrap();
        let queue = format!("{prefix}.provisioning");
        // Lost-message checks kept out of the way: the topology must come back by itself.
        let relay = env.relay(RelayTimings {
            lease: Duration::from_secs(60),
            ..fast()
        });
        tokio::spawn(relay.clone().run(env.shutdown.child_token()));
        let recorder = Recorder::<ProvisioningJob>::new(vec![]);
        let worker = start(&env, &relay, recorder.clone());
        env.enqueue(&provision(1), domain::time::now()).await;
        relay.kick();
        eventually("the first job ran", Duration::from_secs(10), async || {
            recorder.runs().len() == 1
        })
        .await;

        delete_queue(&queue);
        env.enqueue(&provision(2), domain::time::now()).await;
        relay.kick();
        eventually(
            "the job after the deletion ran",
            Duration::from_secs(20),
            async || recorder.runs().iter().any(|(job, _)| *job == provision(2)),
        )
        .await;

        // No consumer now: the relay meets the missing queue itself.
        worker.cancel();
        sleep(Duration::from_millis(1500)).await;
        delete_queue(&queue);
        let mut waiting = vec![env.enqueue(&provision(3), domain::time::now()).await];
        relay.kick();
        env.depth_becomes("provisioning", false, 1, Duration::from_secs(20))
            .await;

        // The exchange too (as on a fresh node): the publish fails on the channel, and the relay
        // declares again all the same.
        let admin = lapin::Connection::connect(&env.rabbit.as_ref().unwrap().0, Default::default())
            .await
            .unwrap();
        let channel = admin.create_channel().await.unwrap();
        channel
            .exchange_delete(prefix.as_str().into(), Default::default())
            .await
            .unwrap();
        let _ = admin.close(200, "done".into()).await;
        for n in 4..7 {
            waiting.push(env.enqueue(&provision(n), domain::time::now()).await);
        }
        relay.kick();
        env.messages_name("provisioning", &waiting, Duration::from_secs(20))
            .await;
    })
    .catch_unwind()
    .await;
    env.shutdown.cancel();
    sleep(Duration::from_millis(200)).await;
    if let Ok(env) = Arc::try_unwrap(env) {
        env.cleanup().await;
    }
    if let Err(panic) = check {
        std::panic::resume_unwind(panic);
    }
}

fn delete_queue(queue: &str) {
    rabbitmqctl(&["delete_queue", queue]);
}

/// A publish the broker nacks closes the channel it went on, and the next publish goes on a
/// fresh one: RabbitMQ 3.10 has been seen, after a node's death, to nack a channel's every
/// publish to a quorum queue for minutes while the queue took other channels' messages
/// (docs/operations/high-availability.md). The nacks here come from a policy that bounds the
/// queue to one message and rejects publishes over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nacked_publish_renews_the_publishing_channel() {
    let Some(url) = env_url("TEST_AMQP_URL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but TEST_AMQP_URL is not"
        );
        eprintln!("skipped: TEST_AMQP_URL is not set");
        return;
    };
    let prefix = format!("t{}", ulid::Ulid::new().to_string().to_lowercase());
    let broker = RabbitBroker::connect(&url, &prefix).await.unwrap();
    broker.declare().await.unwrap();
    let queue = format!("{prefix}.provisioning");
    let outcome = AssertUnwindSafe(async {
        rabbitmqctl(&[
            "set_policy",
            "--apply-to",
            "queues",
            &prefix,
            &format!("^{}$", queue.replace('.', "\\.")),
            r#"{"max-length":1,"overflow":"reject-publish"}"#,
        ]);
        policy_becomes(&queue, &prefix).await;

        // The first message fills the queue; a later one is nacked (a quorum queue learns it is
        // full a moment after the message that filled it).
        let mut taken = 0;
        let mut renewed = false;
        for _ in 0..50 {
            let before = broker.publishing_channel_for_test().await.unwrap();
            match broker.publish("provisioning", b"{}", false).await {
                Ok(()) => taken += 1,
                Err(QueueError::NotConfirmed(_)) => {
                    let after = broker.publishing_channel_for_test().await.unwrap();
                    assert_ne!(
                        after, before,
                        "the nacked publish's channel is still in use"
                    );
                    renewed = true;
                    break;
                }
                Err(other) => panic!("a publish to a full queue: {other}"),
            }
            sleep(Duration::from_millis(20)).await;
        }
        assert!(renewed, "no publish was nacked ({taken} taken)");

        // A batch with a nacked message renews it too.
        let before = broker.publishing_channel_for_test().await.unwrap();
        let body = b"{}".as_slice();
        let verdicts = broker
            .publish_many(&[
                Outgoing {
                    queue: "provisioning",
                    body,
                },
                Outgoing {
                    queue: "provisioning",
                    body,
                },
            ])
            .await;
        assert!(
            verdicts
                .iter()
                .all(|v| matches!(v, Err(QueueError::NotConfirmed(_)))),
            "a full queue took a batch: {verdicts:?}"
        );
        let after = broker.publishing_channel_for_test().await.unwrap();
        assert_ne!(after, before, "the nacked batch's channel is still in use");

        // Unbounded again: the fresh channel's publishes are confirmed, and the queue holds
        // exactly the messages that were.
        rabbitmqctl(&["clear_policy", &prefix]);
        policy_becomes(&queue, "").await;
        broker.publish("provisioning", b"{}", false).await.unwrap();
        assert_eq!(
            broker.depth("provisioning", false).await.unwrap(),
            taken + 1,
            "the queue holds the confirmed messages only"
        );
    })
    .catch_unwind()
    .await;
    let _ = std::process::Command::new("rabbitmqctl")
        .args(["clear_policy", &prefix])
        .output();
    queue::broker::delete_topology(&url, &prefix).await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Runs `rabbitmqctl args…`, which must succeed.
fn rabbitmqctl(args: &[&str]) {
    let out = std::process::Command::new("rabbitmqctl")
        .args(args)
        .output()
        .expect("rabbitmqctl runs");
    assert!(
        out.status.success(),
        "rabbitmqctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until `queue`'s effective policy is `policy` (`""`: none).
async fn policy_becomes(queue: &str, policy: &str) {
    eventually(
        &format!("{queue}'s policy is {policy:?}"),
        Duration::from_secs(20),
        async || {
            let out = std::process::Command::new("rabbitmqctl")
                .args(["list_queues", "-q", "--no-table-headers", "name", "policy"])
                .output()
                .expect("rabbitmqctl runs");
            String::from_utf8_lossy(&out.stdout).lines().any(|line| {
                let mut fields = line.split('\t');
                fields.next() == Some(queue) && fields.next().unwrap_or("").trim() == policy
            })
        },
    )
    .await;
}

/// Item 13, upgrades: a broker that has an earlier version's unbounded `.dead` queues. Declaring
/// the bounded ones does not fail (they have new names); retiring them (`api migrate`) stops an
/// old one receiving dead letters and deletes it if empty, keeps it (for operators) if not.
#[tokio::test]
async fn an_earlier_versions_dead_letter_queues_are_retired() {
    let Some(url) = env_url("TEST_AMQP_URL") else {
        eprintln!("skipped: TEST_AMQP_URL is not set");
        return;
    };
    let prefix = format!("t{}", ulid::Ulid::new().to_string().to_lowercase());
    let outcome = AssertUnwindSafe(async {
        // The earlier topology's dead-letter side: the exchange and two plain `.dead` queues.
        let admin = lapin::Connection::connect(&url, lapin::ConnectionProperties::default())
            .await
            .unwrap();
        let channel = admin.create_channel().await.unwrap();
        let dlx = format!("{prefix}.dlx");
        channel
            .exchange_declare(
                dlx.as_str().into(),
                lapin::ExchangeKind::Direct,
                lapin::options::ExchangeDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                Default::default(),
            )
            .await
            .unwrap();
        let mut quorum = lapin::types::FieldTable::default();
        quorum.insert(
            "x-queue-type".into(),
            lapin::types::AMQPValue::LongString("quorum".into()),
        );
        for q in ["webhooks", "recheck"] {
            let name = format!("{prefix}.{q}.dead");
            channel
                .queue_declare(
                    name.as_str().into(),
                    lapin::options::QueueDeclareOptions {
                        durable: true,
                        ..Default::default()
                    },
                    quorum.clone(),
                )
                .await
                .unwrap();
            channel
                .queue_bind(
                    name.as_str().into(),
                    dlx.as_str().into(),
                    q.into(),
                    Default::default(),
                    Default::default(),
                )
                .await
                .unwrap();
        }
        channel
            .basic_publish(
                dlx.as_str().into(),
                "webhooks".into(),
                Default::default(),
                b"an old copy",
                Default::default(),
            )
            .await
            .unwrap();
        sleep(Duration::from_millis(300)).await;

        let broker = RabbitBroker::connect(&url, &prefix).await.unwrap();
        broker
            .declare()
            .await
            .expect("declared beside the old queues");
        broker.declare().await.expect("and again");
        broker.retire_legacy_dead_queues().await;
        broker.retire_legacy_dead_queues().await;
        broker.publish("webhooks", b"new", true).await.unwrap();

        let passive = lapin::options::QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        let count = |name: String| {
            let admin = &admin;
            async move {
                let channel = admin.create_channel().await.unwrap();
                channel
                    .queue_declare(name.as_str().into(), passive, Default::default())
                    .await
                    .map(|q| q.message_count())
            }
        };
        sleep(Duration::from_millis(300)).await;
        assert_eq!(count(format!("{prefix}.webhooks.dead")).await.unwrap(), 1);
        assert_eq!(broker.depth("webhooks", true).await.unwrap(), 1);
        assert!(
            count(format!("{prefix}.recheck.dead")).await.is_err(),
            "the empty old queue is deleted"
        );
        let _ = admin.close(200, "done".into()).await;
    })
    .catch_unwind()
    .await;
    queue::broker::delete_topology(&url, &prefix).await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

// ---------------------------------------------------------------------------------------------
// Figures (not a check): `cargo test -p queue --test it queue_hardening::relay_figures -- --ignored
// --nocapture` with TEST_AMQP_URL (and TEST_DATABASE_URL) set.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "prints figures"]
async fn relay_figures() {
    let Some(env) = rabbit_env(DeadLetterBounds::default()).await else {
        return;
    };
    const N: usize = 2_000;
    let now = domain::time::now();
    for n in 0..N {
        env.enqueue(&provision(n), now).await;
    }
    let relay = env.relay(fast());
    let started = std::time::Instant::now();
    let published = relay.sweep().await.unwrap();
    let sweep = started.elapsed();
    assert_eq!(published, N);

    // What one awaited confirm per message costs, as the relay published before.
    let body = br#"{"jobId":"job_x"}"#;
    let started = std::time::Instant::now();
    for _ in 0..N {
        env.broker.publish("recheck", body, false).await.unwrap();
    }
    let one_by_one = started.elapsed();
    println!(
        "relay sweep of {N} due jobs (claim, pipelined publish, confirm): {:.0} ms, {:.0} jobs/s; \
         {N} publishes awaiting each confirm: {:.0} ms, {:.0} messages/s",
        sweep.as_secs_f64() * 1e3,
        N as f64 / sweep.as_secs_f64(),
        one_by_one.as_secs_f64() * 1e3,
        N as f64 / one_by_one.as_secs_f64(),
    );
    env.cleanup().await;
}

/// A run whose handler recorded its end in its own commit is left as the handler wrote it: the
/// consumer does not record it a second time (a retry would count twice and move the job's time
/// again).
async fn a_run_whose_handler_recorded_its_end_is_not_recorded_again(env: Arc<Env>) {
    let relay = env.relay(fast());
    tokio::spawn(relay.clone().run(env.shutdown.child_token()));
    let handler = Arc::new(SaysRecorded {
        runs: Mutex::new(0),
    });
    start(&env, &relay, handler.clone());
    let now = domain::time::now();
    let job = WebhookJob::Deliver {
        delivery_id: domain::ids::DeliveryId::unchecked("whd_recorded"),
    };
    let id = outbox::enqueue(&env.db, &job, now, now).await.unwrap();
    relay.kick();
    eventually("the job ran", Duration::from_secs(10), async || {
        *handler.runs.lock().unwrap() >= 1
    })
    .await;
    // Time for the consumer's round that would have recorded it. (Left started and due, as
    // this handler wrote nothing, the job is published and run again after its lease, and
    // that run is recorded by the handler too.)
    sleep(Duration::from_millis(500)).await;
    let row = env.job(&id).await;
    assert_eq!(
        (
            row.attempts,
            row.run_at,
            row.last_error.as_deref(),
            row.completed_at,
            row.dead_at
        ),
        (0, now, None, None, None),
        "as the handler left it: {row:?}"
    );
    assert!(row.started_at.is_some(), "{row:?}");
}
