//! The real `worker-webhooks` binaries on PostgreSQL and RabbitMQ, as operators run them: two
//! processes share the work, the second started while the first holds a burst; one is killed
//! with SIGKILL mid-delivery and nothing is lost (a duplicate with the same webhook-id is
//! allowed); a receiver that is down for the whole schedule ends dead-lettered, and one
//! `worker-webhooks replay` delivers it.

use domain::ids::EventId;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

use crate::support::binary;
use queue::broker::{Broker, RabbitBroker};
use serde_json::Value;
use test_support::process::Process;
use test_support::store::{count_deliveries_with_status, delivery_state, delivery_states_of_event};
use test_support::{
    RabbitPrefix, Receiver, Reply, TestDb, amqp_url, postgres_url, setup, wait_until,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_share_the_work_survive_a_kill_and_replay_a_dead_letter() {
    let (Some(pg), Some(amqp)) = (postgres_url(), amqp_url()) else {
        return;
    };
    let test_db = TestDb::postgres(&pg).await;
    let setup = setup(&test_db.url, None).await;
    let rabbit = RabbitPrefix::new(&amqp, 'w');
    let prefix = rabbit.prefix.clone();
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("VAS_DATABASE__URL", test_db.url.clone()),
        ("VAS_AMQP__URL", amqp.clone()),
        ("VAS_AMQP__PREFIX", prefix.clone()),
        ("VAS_CRYPTO__KEY", setup.crypto_key.clone()),
        ("VAS_OPS__BIND", "127.0.0.1:0".into()),
        ("VAS_WEBHOOKS__RETRY_SCHEDULE", "[1,1]".into()),
        ("VAS_WEBHOOKS__CONCURRENCY", "8".into()),
        // One endpoint may take all of a worker's slots here: this is about sharing and kills.
        ("VAS_WEBHOOKS__MAX_IN_FLIGHT_PER_ENDPOINT", "8".into()),
        // The receiver runs on this machine.
        ("VAS_WEBHOOKS__ALLOW_PRIVATE_ADDRESSES", "true".into()),
        ("RUST_LOG", "warn".into()),
    ];
    let start =
        || Process::quiet(binary(dir.path()).envs(env.iter().map(|(k, v)| (*k, v.as_str()))));

    // Every answer takes a while, so a kill lands while deliveries are in flight.
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::ok().slow(Duration::from_millis(1500)));
    setup.set_url(&setup.business.id, &receiver.url).await;
    let mut a = start();
    let mut ids = HashSet::new();
    for n in 0..40 {
        ids.insert(setup.record(&setup.business.id, n).await);
    }
    // The second worker starts once the first is delivering: the first was handed the whole
    // burst (its prefetch counts messages of up to 16 deliveries), and gives back what it
    // cannot start.
    receiver.wait_for(8, Duration::from_secs(30)).await;
    let _b = start();
    // More requests held at once than one worker's 8 slots: both workers are mid-delivery.
    wait_until(
        "both workers in flight",
        Duration::from_secs(30),
        async || {
            let held = receiver
                .requests()
                .iter()
                .filter(|r| r.at.elapsed() < Duration::from_millis(1300))
                .count();
            held > 8
        },
    )
    .await;
    a.kill_9();

    wait_until(
        "every event delivered after the kill",
        Duration::from_secs(60),
        async || count_deliveries_with_status(&setup.db, "succeeded").await == 40,
    )
    .await;
    let received = receiver.requests();
    let seen: HashSet<EventId> = received
        .iter()
        .map(|r| EventId::unchecked(r.webhook_id()))
        .collect();
    assert_eq!(seen, ids, "every event arrived, under its own id");
    assert!(
        received.len() > 40,
        "the killed worker's deliveries in flight were sent again"
    );
    for r in &received {
        assert!(r.verifies(&setup.business.test.webhook_secret));
    }

    // A receiver down for the whole schedule: dead, in the dead-letter queue, listed.
    let port = test_support::http::free_port();
    let other = setup.other_business("Down Ltd").await;
    setup
        .set_url(&other.id, &format!("http://127.0.0.1:{port}/hook"))
        .await;
    let event_id = setup.record(&other.id, 1000).await;
    wait_until("dead-lettered", Duration::from_secs(30), async || {
        delivery_states_of_event(&setup.db, &event_id).await == [("dead".to_owned(), 3)]
    })
    .await;
    let broker = RabbitBroker::connect(&amqp, &prefix).await.unwrap();
    wait_until("in webhooks.dead", Duration::from_secs(10), async || {
        broker.depth("webhooks", true).await.unwrap() >= 1
    })
    .await;
    let out = test_support::process::run_ok(
        binary(dir.path())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .args(["dead", "list", "--business", &other.id]),
    );
    let line: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["eventId"], event_id.as_str());
    assert_eq!(line["lastStatusCode"], 0, "nobody answered");
    let delivery_id = line["id"].as_str().unwrap().to_owned();

    // The receiver is back: one replay (the CLI writes; the running worker sends).
    let back = Receiver::start_on(SocketAddr::from(([127, 0, 0, 1], port))).await;
    test_support::process::run_ok(
        binary(dir.path())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .args(["replay", &delivery_id]),
    );
    let arrived = back.wait_for(1, Duration::from_secs(30)).await;
    assert_eq!(arrived[0].webhook_id(), event_id);
    wait_until(
        "replayed delivery succeeded",
        Duration::from_secs(10),
        async || delivery_state(&setup.db, &delivery_id).await.0 == "succeeded",
    )
    .await;
    // The workers are killed (dropped) before their prefix is deleted: `rabbit` was made first.
}
