//! The real `worker-webhooks` binaries on PostgreSQL and RabbitMQ, as operators run them: two
//! processes share the work; one is killed with SIGKILL mid-delivery and nothing is lost (a
//! duplicate with the same webhook-id is allowed); a receiver that is down for the whole schedule
//! ends dead-lettered, and one `worker-webhooks replay` delivers it.

mod support;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use shared::queue::{Broker, RabbitBroker};
use support::receiver::{Receiver, Reply};
use support::{TestDb, binary, setup};

struct Process(Child);

impl Process {
    fn kill_9(&mut self) {
        std::process::Command::new("kill")
            .args(["-9", &self.0.id().to_string()])
            .status()
            .unwrap();
        let _ = self.0.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn eventually(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < within, "{what} after {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_share_the_work_survive_a_kill_and_replay_a_dead_letter() {
    let (Some(pg), Some(amqp)) = (support::postgres_url(), support::amqp_url()) else {
        return;
    };
    let test_db = TestDb::postgres(&pg).await;
    let setup = setup(&test_db.url, None).await;
    let prefix = format!("w{}", ulid::Ulid::new().to_string().to_lowercase());
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
        ("RUST_LOG", "warn".into()),
    ];
    let start = || {
        Process(
            binary(dir.path())
                .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("worker-webhooks starts"),
        )
    };

    // Every answer takes a while, so a kill lands while deliveries are in flight.
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::ok().slow(Duration::from_millis(1500)));
    setup.set_url(&setup.business.id, &receiver.url).await;
    let mut a = start();
    let _b = start();
    let mut ids = HashSet::new();
    for n in 0..40 {
        ids.insert(setup.record(&setup.business.id, n).await);
    }
    // More requests held at once than one worker's 8 slots: both workers are mid-delivery.
    eventually(
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

    eventually(
        "every event delivered after the kill",
        Duration::from_secs(60),
        async || {
            setup
                .count("SELECT COUNT(*) FROM deliveries WHERE status = 'succeeded'")
                .await
                == 40
        },
    )
    .await;
    let received = receiver.requests();
    let seen: HashSet<String> = received.iter().map(|r| r.webhook_id()).collect();
    assert_eq!(seen, ids, "every event arrived, under its own id");
    assert!(
        received.len() > 40,
        "the killed worker's deliveries in flight were sent again"
    );
    for r in &received {
        assert!(
            standardwebhooks::Webhook::new(&setup.business.test.webhook_secret)
                .unwrap()
                .verify(&r.body, &r.headers)
                .is_ok()
        );
    }

    // A receiver down for the whole schedule: dead, in the dead-letter queue, listed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let other = setup.other_business("Down Ltd").await;
    setup
        .set_url(&other.id, &format!("http://127.0.0.1:{port}/hook"))
        .await;
    let event_id = setup.record(&other.id, 1000).await;
    eventually("dead-lettered", Duration::from_secs(30), async || {
        setup
            .count(&format!(
                "SELECT COUNT(*) FROM deliveries WHERE event_id = '{event_id}' \
                 AND status = 'dead' AND attempts = 3"
            ))
            .await
            == 1
    })
    .await;
    let broker = RabbitBroker::connect(&amqp, &prefix).await.unwrap();
    eventually("in webhooks.dead", Duration::from_secs(10), async || {
        broker.depth("webhooks", true).await.unwrap() >= 1
    })
    .await;
    let out = binary(dir.path())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .args(["dead", "list", "--business", &other.id])
        .output()
        .unwrap();
    assert!(out.status.success());
    let line: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["eventId"], event_id.as_str());
    assert_eq!(line["lastStatusCode"], 0, "nobody answered");
    let delivery_id = line["id"].as_str().unwrap().to_owned();

    // The receiver is back: one replay (the CLI writes; the running worker sends).
    let back = Receiver::start_on(SocketAddr::from(([127, 0, 0, 1], port))).await;
    let out = binary(dir.path())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .args(["replay", &delivery_id])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let arrived = back.wait_for(1, Duration::from_secs(30)).await;
    assert_eq!(arrived[0].webhook_id(), event_id);
    eventually("replayed delivery succeeded", Duration::from_secs(10), async || {
        setup
            .count(&format!(
                "SELECT COUNT(*) FROM deliveries WHERE id = '{delivery_id}' AND status = 'succeeded'"
            ))
            .await
            == 1
    })
    .await;
    drop(_b);
    shared::queue::delete_topology(&amqp, &prefix).await;
}
