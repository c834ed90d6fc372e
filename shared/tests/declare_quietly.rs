//! `declare` on a fresh RabbitMQ logs nothing at warning or error level: looking for an earlier
//! version's `.dead` queues must not make the broker refuse anything (a refused passive declare
//! closes its channel, which the AMQP client logs as an error, at every start of every process).
//! Alone in its test binary because the log subscriber is one per process.

use std::io::Write;
use std::sync::{Arc, Mutex};

use shared::queue::{Broker, RabbitBroker};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declaring_on_a_fresh_broker_logs_no_error() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
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
        let logged = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
        assert!(logged.is_empty(), "logged:\n{logged}");
    })
    .await;
}
