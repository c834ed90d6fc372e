//! `declare` logs nothing at warning or error level, on a fresh broker and when many processes
//! start at once: looking for an earlier version's `.dead` queues must not make the broker refuse
//! anything (a refused declare closes its channel, which the AMQP client logs as an error).
//! Alone in its test binary because the log subscriber is one per process; its tests take turns
//! reading it.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use queue::broker::{Broker, RabbitBroker};
use test_support::with_rabbit;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Warnings and errors of this test binary, from any thread (the AMQP client logs from its own).
fn captured() -> &'static Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        captured
    })
}

/// One test at a time, each reading only what was logged since it started.
async fn alone() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: OnceLock<tokio::sync::Mutex<()>> = OnceLock::new();
    let guard = LOCK.get_or_init(Default::default).lock().await;
    captured().0.lock().unwrap().clear();
    guard
}

fn logged() -> String {
    String::from_utf8_lossy(&captured().0.lock().unwrap()).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declaring_on_a_fresh_broker_logs_no_error() {
    let _alone = alone().await;
    with_rabbit(|broker: RabbitBroker, _| async move {
        broker.declare().await.expect("declared");
        // A second process (or a restart) declares the same topology.
        broker.declare().await.expect("declared again");
        broker
            .publish("webhooks", b"x", true)
            .await
            .expect("published");
        // The client logs a refused operation from its own task: give it a moment. (Read
        // before the harness deletes the topology, whose connection close is not under test.)
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let logged = logged();
        assert!(logged.is_empty(), "logged:\n{logged}");
    })
    .await;
}

/// Every process of a deployment starts at once (api, relay, each worker) and
/// declares the topology; none may see an error, in its result or its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_starting_at_once_log_no_error() {
    let _alone = alone().await;
    with_rabbit(|first: RabbitBroker, topology| async move {
        let mut processes = vec![first];
        for _ in 0..7 {
            processes.push(
                RabbitBroker::connect(&topology.url, &topology.prefix)
                    .await
                    .expect("connected"),
            );
        }
        // Three rounds, as restarts during a rolling deploy would.
        for _ in 0..3 {
            let declared =
                futures::future::join_all(processes.iter().map(|broker| broker.declare())).await;
            for outcome in declared {
                outcome.expect("declared beside the others");
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let logged = logged();
        assert!(logged.is_empty(), "logged:\n{logged}");
    })
    .await;
}
