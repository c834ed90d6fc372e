//! A dead delivery's copy in the webhooks dead-letter queue lives until the delivery is
//! replayed: `replay` (database only) is enough for the worker to drop the stale copy, so the
//! database is the one record of what is dead. On SQLite with the in-process queue, and on
//! PostgreSQL + RabbitMQ when TEST_DATABASE_URL and TEST_AMQP_URL are set.

use std::sync::Arc;
use std::time::Duration;

use crypto::Cipher;
use ops::config::WebhooksConfig;
use queue::broker::{Broker, MemoryBroker};
use queue::relay::{Relay, RelayTimings};
use queue::worker::Consumer;
use store::deliveries;
use test_support::{Receiver, Reply, TestBroker, TestDb, setup};
use tokio_util::sync::CancellationToken;
use worker_webhooks::Deliverer;
use worker_webhooks::operator::{ReplayTarget, replay};

async fn eventually(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let started = tokio::time::Instant::now();
    while !check().await {
        assert!(started.elapsed() < within, "{what} after {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_replay_leaves_no_stale_copy(url: &str, broker: Arc<dyn Broker>) {
    let setup = setup(url, None).await;
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::status(500));
    setup.set_url(&setup.business.id, &receiver.url).await;

    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let timings = RelayTimings {
        sweep_every: Duration::from_millis(100),
        ..RelayTimings::default()
    };
    let relay = Relay::with_timings(setup.db.clone(), broker.clone(), timings);
    tokio::spawn(relay.clone().run(shutdown.clone()));
    let config = WebhooksConfig {
        retry_schedule: vec![], // one attempt, then dead
        concurrency: 4,
        timeout_secs: 5,
        max_retry_after_secs: 60,
        // The receiver runs on this machine.
        allow_private_addresses: true,
        ..WebhooksConfig::default()
    };
    let cipher = Arc::new(Cipher::new(&setup.crypto_key, &[]).unwrap());
    let deliverer = Arc::new(Deliverer::new(setup.db.clone(), cipher, config));
    let consumer = Consumer::new(setup.db.clone(), broker.clone(), relay.clone(), deliverer)
        .dead_letter_check_every(Duration::from_millis(200));
    tokio::spawn(consumer.run(shutdown.clone()));

    // Two deliveries die; each leaves a copy in the dead-letter queue.
    let first = setup.record(&setup.business.id, 1).await;
    let second = setup.record(&setup.business.id, 2).await;
    relay.kick();
    eventually("both dead", Duration::from_secs(15), async || {
        deliveries::count_dead(&setup.db).await.unwrap() == 2
    })
    .await;
    eventually("two dead letters", Duration::from_secs(10), async || {
        broker.depth("webhooks", true).await.unwrap() == 2
    })
    .await;

    // The receiver is back; the operator replays the first.
    receiver.set_default(Reply::ok());
    let (dead, _) = deliveries::for_event(&setup.db, &first)
        .await
        .unwrap()
        .remove(0);
    let mut out = Vec::new();
    let replayed = replay(
        &setup.db,
        &ReplayTarget::Ids(vec![dead.id.to_string()]),
        &mut out,
    )
    .await
    .unwrap();
    assert_eq!(replayed, 1);
    relay.kick();
    eventually(
        "the replay delivered",
        Duration::from_secs(15),
        async || {
            deliveries::find(&setup.db, &dead.id)
                .await
                .unwrap()
                .is_some_and(|d| d.status == domain::DeliveryStatus::Succeeded)
        },
    )
    .await;
    // The database says one is dead, and so does the dead-letter queue: its copy of the
    // replayed delivery is gone, the other's stays.
    eventually(
        "the replayed delivery's copy dropped",
        Duration::from_secs(10),
        async || broker.depth("webhooks", true).await.unwrap() == 1,
    )
    .await;
    assert_eq!(deliveries::count_dead(&setup.db).await.unwrap(), 1);
    let (still_dead, _) = deliveries::for_event(&setup.db, &second)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(still_dead.status, domain::DeliveryStatus::Dead);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(broker.depth("webhooks", true).await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_leaves_no_stale_copy_sqlite_memory() {
    let db = TestDb::sqlite();
    a_replay_leaves_no_stale_copy(&db.url, Arc::new(MemoryBroker::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_leaves_no_stale_copy_postgres_rabbit() {
    let (Some(pg), Some(amqp)) = (test_support::postgres_url(), test_support::amqp_url()) else {
        return;
    };
    let db = TestDb::postgres(&pg).await;
    // Its prefix (queues and exchanges) is deleted when the test ends, however it ends.
    let TestBroker {
        broker,
        rabbit: _rabbit,
    } = TestBroker::rabbit(&amqp).await;
    a_replay_leaves_no_stale_copy(&db.url, broker).await;
}
