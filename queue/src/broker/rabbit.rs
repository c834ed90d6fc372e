//! RabbitMQ through lapin: durable quorum queues behind a direct exchange, a dead-letter
//! exchange with a dead-letter queue per work queue (bounded: `x-max-length` and
//! `x-message-ttl`), publisher confirms, `mandatory` publishes, manual acks (sent together where
//! they can be: [`AckBatches`]) and a per-consumer prefetch.
//!
//! Dead-letter queues are named `<prefix>.<queue>.dlq`. Versions before the bound named them
//! `<prefix>.<queue>.dead`, without arguments; a queue's arguments cannot change once declared
//! (declaring it with others fails with PRECONDITION_FAILED), so the bounded queues got new
//! names, and [`RabbitBroker::retire_legacy_dead_queues`] (run by `api migrate`, once per
//! upgrade) unbinds an old `.dead` queue (it stops growing) and deletes it once empty. Its
//! messages were copies: the database records every dead job. `declare`, which every process
//! runs at start, never looks for them: the only lookups AMQP offers by name either fail on a
//! missing queue or collide between processes starting at once, and any refusal closes a
//! channel, which the client logs as an error.
//!
//! One connection per broker value (and its clones), with one confirm-mode channel shared by
//! every publish and a fresh channel per consumer. The URL may list several nodes of one cluster,
//! comma-separated: the connection goes to one of them, and when it is lost, to the next that
//! answers (quorum queues are replicated across the cluster's nodes, so any node serves every
//! queue); the node in use is the gauge `rabbitmq_node{node}`. The connection is re-established
//! lazily: the first call that finds it closed reconnects, and failed rounds over every node back
//! off with [`reconnect_delay`]. Publishing fails fast while the broker is unreachable (the outbox keeps the
//! message); `consume` and `declare` wait out the backoff before their attempt, so a worker's
//! "consume again" loop does not spin.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryFutureExt};
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicGetOptions, BasicNackOptions, BasicPublishOptions,
    BasicQosOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ErrorKind,
    ExchangeKind, PublisherConfirm,
};
use tokio::sync::{Mutex, MutexGuard};
use tokio::time::{Instant, timeout};

use super::{
    Acker, Broker, DeadLetter, DeadLetterBounds, Delivery, Outgoing, QUEUES, QueueError, known,
    reconnect_delay,
};

mod acks;
mod connection;

use acks::{AckBatches, RabbitAcker};
use connection::{Inner, Session, parse_nodes};

/// How long opening a connection (TCP and the AMQP handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one broker round trip (a publish and its confirm, a declare, …) may take.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(15);
/// The AMQP heartbeat asked for, in seconds, unless the URL sets `heartbeat`: a node that stops
/// answering without closing the connection (frozen, cut off) is given up after two of them
/// and the next node is tried, where RabbitMQ's own 60 s would leave a process waiting on it
/// for two minutes (docs/operations/high-availability.md).
const HEARTBEAT: u16 = 10;
/// AMQP names are short strings.
const MAX_NAME: usize = 255;
/// Persistent, in AMQP's `delivery_mode`.
const PERSISTENT: u8 = 2;

/// The RabbitMQ broker. Clones share one connection.
#[derive(Clone)]
pub struct RabbitBroker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RabbitBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the URL: it carries the password.
        f.debug_struct("RabbitBroker")
            .field("prefix", &self.inner.prefix)
            .field("connection_name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

impl RabbitBroker {
    /// Connects to `url` (`amqp://user:pass@host:5672/%2f`, or several such URLs of one cluster's
    /// nodes, comma-separated); every exchange and queue name starts with `prefix`. Fails when no
    /// node can be reached now.
    pub async fn connect(url: &str, prefix: &str) -> Result<RabbitBroker, QueueError> {
        Self::connect_with_ca(url, prefix, None).await
    }

    /// As [`connect`](Self::connect); with `amqps://`, the broker's certificate may also be
    /// signed by one of `ca_pem`'s (PEM) certificates instead of a public root.
    pub async fn connect_with_ca(
        url: &str,
        prefix: &str,
        ca_pem: Option<String>,
    ) -> Result<RabbitBroker, QueueError> {
        Self::connect_with(url, prefix, ca_pem, DeadLetterBounds::default()).await
    }

    /// As [`connect_with_ca`](Self::connect_with_ca), with dead-letter queues that keep what
    /// `dead_letters` allows. The bound is fixed when a queue is first declared.
    pub async fn connect_with(
        url: &str,
        prefix: &str,
        ca_pem: Option<String>,
        dead_letters: DeadLetterBounds,
    ) -> Result<RabbitBroker, QueueError> {
        let longest = QUEUES.iter().map(|q| q.len()).max().unwrap_or(0) + ".dead".len() + 1;
        if prefix.is_empty()
            || prefix.len() + longest > MAX_NAME
            || !prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
        {
            return Err(QueueError::Other(format!(
                "invalid queue prefix {prefix:?}: use 1 to {} letters, digits, '.', '-', '_' or ':'",
                MAX_NAME - longest
            )));
        }
        let nodes = parse_nodes(url)?;
        let program = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.file_stem().map(|s| s.to_string_lossy().into_owned()));
        let pid = std::process::id();
        let name = match program {
            Some(program) => format!("vas-{program}-{pid}"),
            None => format!("vas-{pid}"),
        };
        let broker = RabbitBroker {
            inner: Arc::new(Inner {
                nodes,
                ca_pem,
                prefix: prefix.to_owned(),
                name,
                dead_letters,
                consumers: AtomicU64::new(0),
                acks_sent: Arc::default(),
                session: Mutex::new(Session::default()),
            }),
        };
        drop(broker.inner.session(false).await?);
        Ok(broker)
    }

    /// Publishes with confirms; once more on a fresh channel if the channel died under it.
    async fn publish_with(
        &self,
        queue: &str,
        body: &[u8],
        dead_letter: bool,
        properties: BasicProperties,
    ) -> Result<(), QueueError> {
        let q = known(queue)?;
        let exchange = if dead_letter {
            self.inner.dead_letter_exchange()
        } else {
            self.inner.prefix.clone()
        };
        let mut retried = false;
        loop {
            let channel = self.inner.publisher().await?;
            let error = match timeout(
                OPERATION_TIMEOUT,
                publish_confirmed(&channel, &exchange, q, body, properties.clone()),
            )
            .await
            {
                Ok(Ok(verdict)) => {
                    if matches!(verdict, Err(QueueError::NotConfirmed(_))) {
                        renew_publisher(&channel).await;
                    }
                    return verdict;
                }
                Ok(Err(error)) => error,
                Err(_) => {
                    renew_publisher(&channel).await;
                    return Err(QueueError::NotConfirmed(format!(
                        "no confirm within {OPERATION_TIMEOUT:?}"
                    )));
                }
            };
            // The channel or connection died under this publish (a broker restart, or another
            // publish's channel error): once more on a fresh one. A duplicate is harmless;
            // consumers are idempotent.
            if !retried && !channel.status().connected() {
                tracing::debug!(%error, "publish failed with its channel; retrying once");
                retried = true;
                continue;
            }
            return Err(lapin_error(
                &format!("publishing to {exchange} / {q}"),
                &error,
            ));
        }
    }

    /// Retires an earlier version's unbounded `.dead` queues (see the module's notes): one
    /// process at a time, so `api migrate` runs it, never a process's start.
    pub async fn retire_legacy_dead_queues(&self) {
        let dlx = self.inner.dead_letter_exchange();
        for q in QUEUES {
            self.inner.retire_legacy_dead_queue(q, &dlx).await;
        }
    }

    /// How many `basic.ack` frames this broker's consumers have sent; one settles every message
    /// its batch covers.
    pub fn acks_sent(&self) -> u64 {
        self.inner.acks_sent.load(Ordering::Relaxed)
    }

    /// The number of the channel the next publish goes on (opening one if none is open).
    /// Test-only: it shows whether a channel was renewed.
    #[doc(hidden)]
    pub async fn publishing_channel_for_test(&self) -> Result<u16, QueueError> {
        Ok(self.inner.publisher().await?.id())
    }

    /// Closes the connection under the broker's feet, as a broker restart would. Test-only.
    #[doc(hidden)]
    pub async fn drop_connection_for_test(&self) {
        let session = self.inner.session.lock().await;
        if let Some(live) = &session.live {
            let _ = live
                .connection
                .close(200, "closed by drop_connection_for_test".into())
                .await;
        }
    }
}

/// Maps a lapin error: a missing exchange or queue is unroutable, another channel-level
/// refusal is the broker's answer, and the rest means the connection is gone.
fn lapin_error(context: &str, error: &lapin::Error) -> QueueError {
    match error.kind() {
        ErrorKind::ProtocolError(amqp)
            if *amqp.kind() == AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND) =>
        {
            QueueError::Unroutable(format!("{context}: {error}"))
        }
        ErrorKind::ProtocolError(amqp) if matches!(amqp.kind(), AMQPErrorKind::Soft(_)) => {
            QueueError::Other(format!("{context}: {error}"))
        }
        ErrorKind::ChannelsLimitReached
        | ErrorKind::SerialisationError(_)
        | ErrorKind::FutureCompleted
        | ErrorKind::NoDefaultRuntime => QueueError::Other(format!("{context}: {error}")),
        _ => QueueError::Unreachable(format!("{context}: {error}")),
    }
}

/// Milliseconds, as AMQP's TTLs and expirations count.
fn millis(span: Duration) -> i64 {
    i64::try_from(span.as_millis()).unwrap_or(i64::MAX)
}

/// [`within`] for a future that outlives the context's borrow (one of several awaited together).
async fn within_owned<T>(
    context: String,
    operation: impl Future<Output = lapin::Result<T>>,
) -> Result<T, QueueError> {
    within(&context, operation).await
}

/// Runs one broker round trip with [`OPERATION_TIMEOUT`].
async fn within<T>(
    context: &str,
    operation: impl Future<Output = lapin::Result<T>>,
) -> Result<T, QueueError> {
    match timeout(OPERATION_TIMEOUT, operation).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(lapin_error(context, &error)),
        Err(_) => Err(QueueError::Unreachable(format!(
            "{context}: no answer within {OPERATION_TIMEOUT:?}"
        ))),
    }
}

fn persistent() -> BasicProperties {
    BasicProperties::default()
        .with_delivery_mode(PERSISTENT)
        .with_content_type("application/json".into())
}

/// Sends a `mandatory` publish; the returned future resolves with the broker's confirm.
async fn send(
    channel: &Channel,
    exchange: &str,
    routing_key: &str,
    body: &[u8],
    properties: BasicProperties,
) -> lapin::Result<PublisherConfirm> {
    let options = BasicPublishOptions {
        mandatory: true,
        immediate: false,
    };
    channel
        .basic_publish(
            ShortString::from(exchange),
            ShortString::from(routing_key),
            options,
            body,
            properties,
        )
        .await
}

/// The broker's verdict on one message.
fn verdict(
    exchange: &str,
    routing_key: &str,
    confirmation: Confirmation,
) -> Result<(), QueueError> {
    match confirmation {
        Confirmation::Ack(None) => Ok(()),
        Confirmation::Ack(Some(returned)) => Err(QueueError::Unroutable(format!(
            "{exchange} / {routing_key}: returned by the broker: {} {}",
            returned.reply_code, returned.reply_text
        ))),
        Confirmation::Nack(_) => Err(QueueError::NotConfirmed(format!(
            "the broker nacked the message to {exchange} / {routing_key}"
        ))),
        Confirmation::NotRequested => Err(QueueError::NotConfirmed(
            "the publishing channel is not in confirm mode".into(),
        )),
    }
}

/// Closes a publishing channel the broker nacked a message on (or never confirmed one), so that
/// the next publish opens a fresh one. A quorum queue knows each publishing channel as an
/// enqueuer with a sequence of its own, and RabbitMQ 3.10 has been seen, after a node's death,
/// to nack every later publish of a channel to one queue for minutes while the queue itself had
/// a leader and took other channels' messages (docs/operations/high-availability.md). Whatever
/// this channel still had unconfirmed is reported failed and published again.
async fn renew_publisher(channel: &Channel) {
    if channel.status().connected() {
        tracing::info!(
            channel = channel.id(),
            "a publish was not confirmed; opening a new publishing channel"
        );
        let _ = timeout(
            OPERATION_TIMEOUT,
            channel.close(200, "renewed after a publish was not confirmed".into()),
        )
        .await;
    }
}

/// Publishes and waits for the confirm. The outer error is lapin's (the channel or connection
/// failed); the inner one is the broker's verdict on the message.
async fn publish_confirmed(
    channel: &Channel,
    exchange: &str,
    routing_key: &str,
    body: &[u8],
    properties: BasicProperties,
) -> lapin::Result<Result<(), QueueError>> {
    let confirmation = send(channel, exchange, routing_key, body, properties)
        .await?
        .await?;
    Ok(verdict(exchange, routing_key, confirmation))
}

#[async_trait]
impl Broker for RabbitBroker {
    async fn declare(&self) -> Result<(), QueueError> {
        let inner = &self.inner;
        let channel = inner.channel(true).await?;
        let exchange = inner.prefix.as_str();
        let dlx = inner.dead_letter_exchange();
        let durable_exchange = ExchangeDeclareOptions {
            durable: true,
            ..ExchangeDeclareOptions::default()
        };
        let durable_queue = QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        };
        let quorum = || {
            let mut arguments = FieldTable::default();
            arguments.insert(
                "x-queue-type".into(),
                AMQPValue::LongString("quorum".into()),
            );
            arguments
        };
        // Every declare and bind is sent at once and their answers awaited together: the broker
        // takes one channel's methods in the order they were sent (an exchange before the queues
        // bound to it), so the topology costs one round trip where it cost eighteen.
        let mut steps: Vec<BoxFuture<'_, Result<(), QueueError>>> = Vec::new();
        for name in [exchange.to_owned(), dlx.clone()] {
            let declared = channel.exchange_declare(
                name.as_str().into(),
                ExchangeKind::Direct,
                durable_exchange,
                FieldTable::default(),
            );
            steps.push(within_owned(format!("declaring exchange {name}"), declared).boxed());
        }
        for q in QUEUES {
            let work = inner.queue_name(q, false);
            let mut arguments = quorum();
            arguments.insert(
                "x-dead-letter-exchange".into(),
                AMQPValue::LongString(dlx.as_str().into()),
            );
            arguments.insert(
                "x-dead-letter-routing-key".into(),
                AMQPValue::LongString(q.into()),
            );
            let dead = inner.queue_name(q, true);
            let mut bounded = quorum();
            let bounds = inner.dead_letters;
            bounded.insert(
                "x-max-length".into(),
                AMQPValue::LongLongInt(i64::from(bounds.max_length)),
            );
            bounded.insert(
                "x-overflow".into(),
                AMQPValue::LongString("drop-head".into()),
            );
            bounded.insert(
                "x-message-ttl".into(),
                AMQPValue::LongLongInt(millis(bounds.ttl)),
            );
            for (queue, arguments, exchange) in
                [(work, arguments, exchange), (dead, bounded, dlx.as_str())]
            {
                let declared =
                    channel.queue_declare(queue.as_str().into(), durable_queue, arguments);
                steps.push(
                    within_owned(format!("declaring queue {queue}"), declared.map_ok(drop)).boxed(),
                );
                let bound = channel.queue_bind(
                    queue.as_str().into(),
                    exchange.into(),
                    q.into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                );
                steps.push(
                    within_owned(format!("binding queue {queue} to {exchange}"), bound).boxed(),
                );
            }
        }
        // The first failure in sending order is the cause: it closes the channel, and every step
        // after it fails for that.
        let outcome = futures::future::join_all(steps)
            .await
            .into_iter()
            .collect::<Result<Vec<()>, QueueError>>();
        let _ = channel.close(200, "declared".into()).await;
        outcome.map(drop)
    }

    async fn publish(&self, queue: &str, body: &[u8], dead_letter: bool) -> Result<(), QueueError> {
        self.publish_with(queue, body, dead_letter, persistent())
            .await
    }

    async fn publish_many(&self, messages: &[Outgoing<'_>]) -> Vec<Result<(), QueueError>> {
        let exchange = self.inner.prefix.as_str();
        let channel = match self.inner.publisher().await {
            Ok(channel) => channel,
            Err(error) => {
                let text = error.to_string();
                return messages
                    .iter()
                    .map(|_| Err(QueueError::Unreachable(text.clone())))
                    .collect();
            }
        };
        // Every message goes out before any confirm is awaited: one round trip for the batch.
        // And every message is handed to the connection before any is awaited as written: a
        // publish's first poll queues its frames (and takes its confirm's number), its await
        // waits for the connection's IO thread to write them. Awaited one by one, each message
        // waited for its own write, a send and a wake-up of the broker each; queued together,
        // the batch goes out in a few writes (docs/benchmarks.md#a-batchs-messages-written-together).
        let sends = messages.iter().map(|message| {
            let channel = &channel;
            async move {
                let q = known(message.queue)?;
                match timeout(
                    OPERATION_TIMEOUT,
                    send(channel, exchange, q, message.body, persistent()),
                )
                .await
                {
                    Ok(Ok(confirm)) => Ok((q, confirm)),
                    Ok(Err(error)) => Err(lapin_error(
                        &format!("publishing to {exchange} / {q}"),
                        &error,
                    )),
                    Err(_) => Err(QueueError::Unreachable(format!(
                        "publishing to {exchange} / {q}: not sent within {OPERATION_TIMEOUT:?}"
                    ))),
                }
            }
        });
        let sent = futures::future::join_all(sends).await;
        let deadline = Instant::now() + OPERATION_TIMEOUT;
        let mut verdicts = Vec::with_capacity(sent.len());
        for confirm in sent {
            verdicts.push(match confirm {
                Err(error) => Err(error),
                Ok((q, confirm)) => match tokio::time::timeout_at(deadline, confirm).await {
                    Ok(Ok(confirmation)) => verdict(exchange, q, confirmation),
                    Ok(Err(error)) => Err(lapin_error(
                        &format!("publishing to {exchange} / {q}"),
                        &error,
                    )),
                    Err(_) => Err(QueueError::NotConfirmed(format!(
                        "no confirm within {OPERATION_TIMEOUT:?}"
                    ))),
                },
            });
        }
        if verdicts
            .iter()
            .any(|v| matches!(v, Err(QueueError::NotConfirmed(_))))
        {
            renew_publisher(&channel).await;
        }
        verdicts
    }

    async fn publish_dead_letter(&self, letter: DeadLetter<'_>) -> Result<(), QueueError> {
        let expiration = millis(letter.expires_in).max(0).to_string();
        self.publish_with(
            letter.queue,
            letter.body,
            true,
            persistent().with_expiration(expiration.as_str().into()),
        )
        .await
    }

    async fn get(&self, queue: &str, dead_letter: bool) -> Result<Option<Delivery>, QueueError> {
        let name = self.inner.queue_name(known(queue)?, dead_letter);
        // Its own channel, which the delivery keeps open until it is settled.
        let channel = self.inner.channel(false).await?;
        let got = within(
            &format!("getting from {name}"),
            channel.basic_get(name.as_str().into(), BasicGetOptions { no_ack: false }),
        )
        .await?;
        Ok(got.map(|message| {
            let delivery = message.delivery;
            Delivery {
                body: delivery.data,
                redelivered: delivery.redelivered,
                acker: Box::new(RabbitAcker {
                    acker: Some(delivery.acker),
                    batches: None,
                    channel,
                }),
            }
        }))
    }

    fn dead_letter_bounds(&self) -> DeadLetterBounds {
        self.inner.dead_letters
    }

    async fn consume(
        &self,
        queue: &str,
        prefetch: u16,
    ) -> Result<BoxStream<'static, Result<Delivery, QueueError>>, QueueError> {
        let q = known(queue)?;
        let name = self.inner.queue_name(q, false);
        let n = self.inner.consumers.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}-{q}-{n}", self.inner.name);
        let channel = self.inner.channel(true).await?;
        within(
            "setting the prefetch",
            channel.basic_qos(prefetch, BasicQosOptions { global: false }),
        )
        .await?;
        let consumer = within(
            &format!("consuming {name}"),
            channel.basic_consume(
                name.as_str().into(),
                tag.as_str().into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            ),
        )
        .await?;
        tracing::debug!(consumer = %tag, queue = %name, prefetch, "consuming");
        // The stream holds the channel (and each delivery holds it too), so the channel lives as
        // long as either does and closes, returning whatever is unacked, when both are gone.
        let acks = Arc::new(AckBatches::new(self.inner.acks_sent.clone()));
        let stream = consumer.map(move |delivery| match delivery {
            Ok(delivery) => Ok(Delivery {
                body: delivery.data,
                redelivered: delivery.redelivered,
                acker: Box::new(RabbitAcker {
                    batches: Some(acks.open(delivery.delivery_tag)),
                    acker: Some(delivery.acker),
                    channel: channel.clone(),
                }),
            }),
            Err(error) => {
                tracing::warn!(consumer = %tag, %error, "consumer failed");
                Err(lapin_error(&format!("consuming {name}"), &error))
            }
        });
        Ok(stream.boxed())
    }

    async fn depth(&self, queue: &str, dead_letter: bool) -> Result<u64, QueueError> {
        let name = self.inner.queue_name(known(queue)?, dead_letter);
        // Its own channel: a passive declare of a missing queue closes the channel.
        let channel = self.inner.channel(false).await?;
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let declared = within(
            &format!("inspecting {name}"),
            channel.queue_declare(name.as_str().into(), passive, FieldTable::default()),
        )
        .await?;
        Ok(u64::from(declared.message_count()))
    }

    async fn is_ready(&self) -> bool {
        self.inner.session(false).await.is_ok()
    }
}

/// Deletes every queue and exchange under `prefix` (tests clean up with it; operators can retire
/// a prefix with it). Errors are ignored: what is not there is already deleted.
pub async fn delete_topology(url: &str, prefix: &str) {
    let Ok(nodes) = parse_nodes(url) else { return };
    let mut connection = None;
    for node in nodes {
        if let Ok(c) =
            lapin::Connection::connect(&node.url, lapin::ConnectionProperties::default()).await
        {
            connection = Some(c);
            break;
        }
    }
    let Some(connection) = connection else { return };
    // A channel per delete: a failed delete closes its channel.
    for q in QUEUES {
        for queue in [
            format!("{prefix}.{q}"),
            format!("{prefix}.{q}.dlq"),
            format!("{prefix}.{q}.dead"),
        ] {
            if let Ok(channel) = connection.create_channel().await {
                let _ = channel
                    .queue_delete(
                        queue.as_str().into(),
                        lapin::options::QueueDeleteOptions::default(),
                    )
                    .await;
                // Closed here: a connection closed with channels open logs an error.
                let _ = channel.close(200, "deleted".into()).await;
            }
        }
    }
    for exchange in [prefix.to_owned(), format!("{prefix}.dlx")] {
        if let Ok(channel) = connection.create_channel().await {
            let _ = channel
                .exchange_delete(
                    exchange.as_str().into(),
                    lapin::options::ExchangeDeleteOptions::default(),
                )
                .await;
            let _ = channel.close(200, "deleted".into()).await;
        }
    }
    let _ = connection.close(200, "topology deleted".into()).await;
}

#[cfg(test)]
mod tests;
