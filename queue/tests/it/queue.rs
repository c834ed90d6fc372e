//! The broker contract, checked on the in-process broker always and on RabbitMQ when
//! `TEST_AMQP_URL` is set (CI sets it; with `CI` set and no URL the RabbitMQ tests fail).
//! Each RabbitMQ test declares its own topology under a random prefix and deletes it after.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use lapin::options::QueueDeleteOptions;
use queue::broker::{Broker, Delivery, MemoryBroker, QUEUES, QueueError, RabbitBroker};
use test_support::{on_both_brokers, with_rabbit};
use tokio::time::{Instant, sleep, timeout};

/// How long anything that should happen may take.
const WAIT: Duration = Duration::from_secs(5);
/// How long we watch for something that should not happen.
const QUIET: Duration = Duration::from_millis(400);

type Deliveries = BoxStream<'static, Result<Delivery, QueueError>>;

// ---------------------------------------------------------------------------------------------
// Harness: `on_both_brokers!` and `with_rabbit` are test_support's.

async fn admin(url: &str) -> lapin::Connection {
    lapin::Connection::connect(url, lapin::ConnectionProperties::default())
        .await
        .expect("admin connection")
}

async fn next(stream: &mut Deliveries) -> Delivery {
    timeout(WAIT, stream.next())
        .await
        .expect("no delivery in time")
        .expect("the stream ended")
        .expect("the stream failed")
}

async fn nothing_more(stream: &mut Deliveries) {
    if let Ok(item) = timeout(QUIET, stream.next()).await {
        panic!("expected nothing, got {item:?}");
    }
}

/// Waits for a queue's depth to settle at `expected` (RabbitMQ counts asynchronously).
async fn assert_depth(broker: &impl Broker, queue: &str, dead_letter: bool, expected: u64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let depth = broker.depth(queue, dead_letter).await.expect("depth");
        if depth == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{queue} (dead letter: {dead_letter}) has {depth} ready, expected {expected}"
        );
        sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The contract, on both brokers

on_both_brokers!(
    declare_is_idempotent,
    publish_then_consume,
    nack_with_requeue_redelivers,
    nack_without_requeue_dead_letters,
    competing_consumers_share_the_work,
    an_unsettled_delivery_comes_back,
    unknown_queues_are_errors,
    prefetch_holds_back_deliveries,
);

async fn declare_is_idempotent<B: Broker>(broker: B) {
    broker.declare().await.expect("first declare");
    broker.declare().await.expect("second declare");
    assert!(broker.is_ready().await);
    for q in QUEUES {
        assert_eq!(broker.depth(q, false).await.unwrap(), 0, "{q}");
        assert_eq!(broker.depth(q, true).await.unwrap(), 0, "{q}.dead");
    }
}

async fn publish_then_consume<B: Broker>(broker: B) {
    broker.declare().await.unwrap();
    let body = br#"{"id":"acct_01"}"#;
    broker.publish("provisioning", body, false).await.unwrap();
    assert_depth(&broker, "provisioning", false, 1).await;
    // Only the queue it was published to.
    assert_eq!(broker.depth("webhooks", false).await.unwrap(), 0);

    let mut stream = broker.consume("provisioning", 10).await.unwrap();
    let delivery = next(&mut stream).await;
    assert_eq!(delivery.body, body);
    assert!(!delivery.redelivered);
    delivery.ack().await.unwrap();

    nothing_more(&mut stream).await;
    assert_depth(&broker, "provisioning", false, 0).await;
    assert_eq!(broker.depth("provisioning", true).await.unwrap(), 0);
}

async fn nack_with_requeue_redelivers<B: Broker>(broker: B) {
    broker.declare().await.unwrap();
    broker.publish("webhooks", b"again", false).await.unwrap();
    let mut stream = broker.consume("webhooks", 5).await.unwrap();

    let first = next(&mut stream).await;
    assert!(!first.redelivered);
    first.nack(true).await.unwrap();

    let second = next(&mut stream).await;
    assert_eq!(second.body, b"again");
    assert!(second.redelivered);
    second.ack().await.unwrap();

    nothing_more(&mut stream).await;
    assert_depth(&broker, "webhooks", false, 0).await;
    assert_eq!(broker.depth("webhooks", true).await.unwrap(), 0);
}

async fn nack_without_requeue_dead_letters<B: Broker>(broker: B) {
    broker.declare().await.unwrap();
    broker.publish("recheck", b"poison", false).await.unwrap();
    let mut stream = broker.consume("recheck", 5).await.unwrap();
    next(&mut stream).await.nack(false).await.unwrap();

    assert_depth(&broker, "recheck", true, 1).await;
    assert_eq!(broker.depth("recheck", false).await.unwrap(), 0);
    nothing_more(&mut stream).await;

    // Straight to the dead-letter queue, as a replay tool or a give-up path would.
    broker.publish("webhooks", b"given up", true).await.unwrap();
    assert_depth(&broker, "webhooks", true, 1).await;
    assert_eq!(broker.depth("webhooks", false).await.unwrap(), 0);
    assert_eq!(broker.depth("recheck", true).await.unwrap(), 1);
}

async fn competing_consumers_share_the_work<B: Broker + Clone>(broker: B) {
    broker.declare().await.unwrap();
    let (sent, mut received) = tokio::sync::mpsc::unbounded_channel();
    let mut consumers = Vec::new();
    for consumer in 0..2 {
        // A clone, as another worker instance would have.
        let mut stream = broker.clone().consume("webhooks", 2).await.unwrap();
        let sent = sent.clone();
        consumers.push(tokio::spawn(async move {
            while let Some(delivery) = stream.next().await {
                let delivery = delivery.expect("a delivery");
                sleep(Duration::from_millis(10)).await;
                let body = String::from_utf8(delivery.body.clone()).unwrap();
                delivery.ack().await.expect("ack");
                if sent.send((consumer, body)).is_err() {
                    break;
                }
            }
        }));
    }
    drop(sent);

    for i in 0..20 {
        broker
            .publish("webhooks", format!("m{i}").as_bytes(), false)
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    while seen.len() < 20 {
        let item = timeout(WAIT, received.recv())
            .await
            .unwrap_or_else(|_| panic!("only {} of 20 arrived: {seen:?}", seen.len()))
            .expect("the consumers stopped");
        seen.push(item);
    }
    if let Ok(Some(extra)) = timeout(QUIET, received.recv()).await {
        panic!("a 21st delivery: {extra:?} after {seen:?}");
    }
    for consumer in consumers {
        consumer.abort();
    }

    let bodies: BTreeSet<&str> = seen.iter().map(|(_, body)| body.as_str()).collect();
    let expected: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    let expected: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
    assert_eq!(bodies, expected, "lost or duplicated: {seen:?}");
    for consumer in 0..2 {
        assert!(
            seen.iter().any(|(c, _)| *c == consumer),
            "consumer {consumer} got none: {seen:?}"
        );
    }
    assert_depth(&broker, "webhooks", false, 0).await;
}

async fn an_unsettled_delivery_comes_back<B: Broker>(broker: B) {
    broker.declare().await.unwrap();
    broker
        .publish("provisioning", b"dropped", false)
        .await
        .unwrap();

    // Dropping the delivery while the stream goes on.
    let mut stream = broker.consume("provisioning", 1).await.unwrap();
    let first = next(&mut stream).await;
    assert!(!first.redelivered);
    drop(first);
    let second = next(&mut stream).await;
    assert_eq!(second.body, b"dropped");
    assert!(second.redelivered);

    // Dropping the delivery and its stream, as a worker that dies does.
    drop(stream);
    drop(second);
    let mut stream = broker.consume("provisioning", 1).await.unwrap();
    let third = next(&mut stream).await;
    assert_eq!(third.body, b"dropped");
    assert!(third.redelivered);
    third.ack().await.unwrap();
    nothing_more(&mut stream).await;
    assert_depth(&broker, "provisioning", false, 0).await;
}

async fn unknown_queues_are_errors<B: Broker>(broker: B) {
    broker.declare().await.unwrap();
    let published = broker.publish("nowhere", b"x", false).await;
    assert!(
        matches!(published, Err(QueueError::Unroutable(_))),
        "{published:?}"
    );
    let dead = broker.publish("nowhere", b"x", true).await;
    assert!(matches!(dead, Err(QueueError::Unroutable(_))), "{dead:?}");
    assert!(broker.consume("nowhere", 1).await.is_err());
    assert!(broker.depth("nowhere", false).await.is_err());
    // Still usable afterwards.
    broker.publish("recheck", b"fine", false).await.unwrap();
    assert_depth(&broker, "recheck", false, 1).await;
}

async fn prefetch_holds_back_deliveries<B: Broker>(broker: B) {
    broker.declare().await.unwrap();
    broker.publish("provisioning", b"one", false).await.unwrap();
    broker.publish("provisioning", b"two", false).await.unwrap();

    let mut stream = broker.consume("provisioning", 1).await.unwrap();
    let first = next(&mut stream).await;
    nothing_more(&mut stream).await;
    // The unacked one is not counted; the held-back one is.
    assert_depth(&broker, "provisioning", false, 1).await;

    let first_body = first.body.clone();
    first.ack().await.unwrap();
    let second = next(&mut stream).await;
    let bodies = BTreeSet::from([first_body, second.body.clone()]);
    assert_eq!(bodies, BTreeSet::from([b"one".to_vec(), b"two".to_vec()]));
    second.ack().await.unwrap();
    assert_depth(&broker, "provisioning", false, 0).await;
}

// ---------------------------------------------------------------------------------------------
// RabbitMQ only

/// The connection goes away (as in a broker restart) and the same broker value carries on.
#[tokio::test]
async fn rabbit_reconnects_after_losing_its_connection() {
    with_rabbit(|broker, _| async move {
        broker.declare().await.unwrap();

        // Publishing is the first to notice.
        let mut before = broker.consume("webhooks", 1).await.unwrap();
        broker.drop_connection_for_test().await;
        match timeout(WAIT, before.next()).await {
            Ok(None | Some(Err(_))) => {}
            other => panic!("the old consumer should end, got {other:?}"),
        }
        broker.publish("webhooks", b"after", false).await.unwrap();
        assert!(broker.is_ready().await);
        let mut stream = broker.consume("webhooks", 1).await.unwrap();
        let delivery = next(&mut stream).await;
        assert_eq!(delivery.body, b"after");
        delivery.ack().await.unwrap();

        // Consuming is the first to notice.
        broker.drop_connection_for_test().await;
        let mut stream = broker.consume("webhooks", 1).await.unwrap();
        broker.publish("webhooks", b"again", false).await.unwrap();
        let delivery = next(&mut stream).await;
        assert_eq!(delivery.body, b"again");
        delivery.ack().await.unwrap();
        assert_depth(&broker, "webhooks", false, 0).await;

        // The readiness probe is the first to notice.
        broker.drop_connection_for_test().await;
        assert!(broker.is_ready().await);
    })
    .await;
}

/// Acks that come together leave as one `basic.ack` frame (docs/decisions/quorum-queues.md), and
/// such a frame never covers a message still being worked on: acked around an open message, the
/// acked ones are gone and the open one comes back when it is dropped.
#[tokio::test]
async fn rabbit_sends_acks_together_but_never_for_an_open_message() {
    with_rabbit(|broker, _| async move {
        broker.declare().await.unwrap();
        for i in 0..40 {
            let body = format!("m{i}");
            broker
                .publish("webhooks", body.as_bytes(), false)
                .await
                .unwrap();
        }
        let mut stream = broker.consume("webhooks", 50).await.unwrap();
        let mut deliveries = Vec::new();
        for _ in 0..40 {
            deliveries.push(next(&mut stream).await);
        }
        let before = broker.acks_sent();
        let acks = futures::future::join_all(deliveries.into_iter().map(Delivery::ack)).await;
        assert!(acks.iter().all(Result::is_ok), "{acks:?}");
        let frames = broker.acks_sent() - before;
        // The first ack leaves at once; the 39 that come while it is sent share the next frame.
        assert!(frames <= 2, "40 acks at once took {frames} frames");
        nothing_more(&mut stream).await;
        assert_depth(&broker, "webhooks", false, 0).await;

        // Three more; the oldest stays open while the two after it are acked together (so
        // that they would share one frame but for the open message below them).
        for body in ["a", "b", "c"] {
            broker
                .publish("webhooks", body.as_bytes(), false)
                .await
                .unwrap();
        }
        let a = next(&mut stream).await;
        let b = next(&mut stream).await;
        let c = next(&mut stream).await;
        assert_eq!(
            (&a.body[..], &b.body[..], &c.body[..]),
            (&b"a"[..], &b"b"[..], &b"c"[..])
        );
        let (b, c) = futures::future::join(b.ack(), c.ack()).await;
        b.unwrap();
        c.unwrap();
        drop(a);
        let again = next(&mut stream).await;
        assert_eq!(again.body, b"a", "only the dropped message comes back");
        assert!(again.redelivered);
        again.ack().await.unwrap();
        nothing_more(&mut stream).await;
        assert_depth(&broker, "webhooks", false, 0).await;

        // A new consumer finds nothing left behind by the batches.
        drop(stream);
        let mut fresh = broker.consume("webhooks", 50).await.unwrap();
        nothing_more(&mut fresh).await;
    })
    .await;
}

/// A `mandatory` publish that no queue takes comes back as an error, and the publishing
/// channel survives it.
#[tokio::test]
async fn rabbit_returns_unroutable_messages() {
    with_rabbit(|broker, topology| async move {
        broker.declare().await.unwrap();
        let connection = admin(&topology.url).await;
        let channel = connection.create_channel().await.unwrap();
        let queue = format!("{}.webhooks", topology.prefix);
        channel
            .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
            .await
            .unwrap();

        let published = broker.publish("webhooks", b"nowhere", false).await;
        assert!(
            matches!(published, Err(QueueError::Unroutable(_))),
            "{published:?}"
        );
        broker
            .publish("recheck", b"somewhere", false)
            .await
            .unwrap();
        assert_depth(&broker, "recheck", false, 1).await;
        let _ = connection.close(200, "done".into()).await;
    })
    .await;
}

/// Before `declare` the exchange is missing: an error, after which the broker recovers its
/// publishing channel on its own.
#[tokio::test]
async fn rabbit_publish_before_declare_fails_then_recovers() {
    with_rabbit(|broker, _| async move {
        let published = broker.publish("provisioning", b"early", false).await;
        assert!(published.is_err(), "{published:?}");
        assert!(broker.depth("provisioning", false).await.is_err());
        assert!(broker.is_ready().await);

        broker.declare().await.unwrap();
        broker
            .publish("provisioning", b"on time", false)
            .await
            .unwrap();
        let mut stream = broker.consume("provisioning", 1).await.unwrap();
        assert_eq!(next(&mut stream).await.body, b"on time");
    })
    .await;
}

/// The topology's declares are sent together: one that the broker refuses (a queue already
/// there with other arguments) fails `declare` with an error naming that queue, not one of the
/// steps after it, and the broker declares once the conflict is gone.
#[tokio::test]
async fn rabbit_declare_names_the_queue_it_could_not_declare() {
    with_rabbit(|broker, topology| async move {
        let connection = admin(&topology.url).await;
        let channel = connection.create_channel().await.unwrap();
        // A classic queue where a quorum one is declared, in the middle of the topology.
        let queue = format!("{}.recheck", topology.prefix);
        channel
            .queue_declare(
                queue.as_str().into(),
                lapin::options::QueueDeclareOptions::default(),
                lapin::types::FieldTable::default(),
            )
            .await
            .unwrap();

        let declared = broker.declare().await;
        let Err(QueueError::Other(error)) = &declared else {
            panic!("expected a refusal, got {declared:?}");
        };
        assert!(
            error.starts_with(&format!("declaring queue {queue}:")),
            "{error}"
        );
        assert!(error.contains("PRECONDITION_FAILED"), "{error}");

        channel
            .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
            .await
            .unwrap();
        broker
            .declare()
            .await
            .expect("declared once the conflict is gone");
        broker.publish("recheck", b"routed", false).await.unwrap();
        assert_depth(&broker, "recheck", false, 1).await;
        let _ = connection.close(200, "done".into()).await;
    })
    .await;
}

#[tokio::test]
async fn rabbit_rejects_a_bad_prefix() {
    // Checked before connecting; no broker needed.
    for prefix in ["", "has space", "ünïcode", &"x".repeat(240)] {
        let connected = RabbitBroker::connect("amqp://guest:guest@127.0.0.1:1/%2f", prefix).await;
        assert!(
            matches!(connected, Err(QueueError::Other(_))),
            "{prefix:?}: {connected:?}"
        );
    }
}

#[tokio::test]
async fn rabbit_connect_fails_when_unreachable() {
    // A port nothing listens on; no broker needed.
    let connected = RabbitBroker::connect("amqp://guest:guest@127.0.0.1:1/%2f", "vas").await;
    assert!(
        matches!(connected, Err(QueueError::Unreachable(_))),
        "{connected:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Memory only

#[tokio::test]
async fn memory_queues_exist_before_declare() {
    let broker = MemoryBroker::new();
    broker.publish("recheck", b"early", false).await.unwrap();
    let mut stream = broker.clone().consume("recheck", 1).await.unwrap();
    let delivery = next(&mut stream).await;
    assert_eq!(delivery.body, b"early");
    delivery.ack().await.unwrap();
    assert_eq!(broker.depth("recheck", false).await.unwrap(), 0);
}

// ---------------------------------------------------------------------------------------------
// amqps://

/// A TLS-terminating proxy in front of the test broker, with a certificate for `localhost`
/// signed by a private CA: what a managed RabbitMQ with its own CA looks like. Returns the
/// proxy's port and the CA certificate (PEM).
async fn tls_proxy(upstream: std::net::SocketAddr) -> (u16, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    use tokio_rustls::rustls;

    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::from_params(&ca_params, &ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();

    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![leaf.der().clone()],
        rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).unwrap(),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(client).await else {
                    return;
                };
                let Ok(mut broker) = tokio::net::TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut broker).await;
            });
        }
    });
    (port, ca.pem())
}

#[tokio::test]
async fn amqps_works_with_a_private_ca_and_refuses_an_unknown_one() {
    with_rabbit(|_, topology| async move {
        let mut plain = url::Url::parse(&topology.url).unwrap();
        let upstream = plain.socket_addrs(|| Some(5672)).unwrap()[0];
        let (port, ca_pem) = tls_proxy(upstream).await;
        plain.set_host(Some("localhost")).unwrap();
        plain.set_port(Some(port)).unwrap();
        let tls_url = plain.as_str().replacen("amqp://", "amqps://", 1);

        // The public roots alone do not know the private CA: refused, naming the certificate.
        let refused = RabbitBroker::connect(&tls_url, &topology.prefix).await;
        let error = refused.expect_err("an unknown CA is refused").to_string();
        assert!(error.contains("certificate"), "{error}");

        // With the CA: the whole contract over TLS.
        let broker = RabbitBroker::connect_with_ca(&tls_url, &topology.prefix, Some(ca_pem))
            .await
            .expect("amqps with the private CA");
        publish_then_consume(broker).await;
    })
    .await;
}
