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
use futures::StreamExt;
use futures::stream::BoxStream;
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

/// How long opening a connection (TCP and the AMQP handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one broker round trip (a publish and its confirm, a declare, …) may take.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(15);
/// AMQP names are short strings.
const MAX_NAME: usize = 255;
/// Persistent, in AMQP's `delivery_mode`.
const PERSISTENT: u8 = 2;

/// The RabbitMQ broker. Clones share one connection.
#[derive(Clone)]
pub struct RabbitBroker {
    inner: Arc<Inner>,
}

struct Inner {
    /// The cluster's nodes, in the order given; at least one.
    nodes: Vec<Node>,
    /// PEM certificates to trust for `amqps://` besides the public roots (a private CA).
    ca_pem: Option<String>,
    prefix: String,
    /// The connection name operators see in the management UI; consumer tags start with it.
    name: String,
    dead_letters: DeadLetterBounds,
    consumers: AtomicU64,
    /// `basic.ack` frames sent by every consuming channel (each may settle several messages).
    acks_sent: Arc<AtomicU64>,
    session: Mutex<Session>,
}

/// One node of the cluster.
struct Node {
    url: String,
    /// `host:port`, for logs and the `rabbitmq_node` gauge (the URL carries the password).
    label: String,
}

#[derive(Default)]
struct Session {
    live: Option<Live>,
    /// The node of the live connection, or the one to try first.
    node: usize,
    /// Failed connection attempts in a row.
    failures: u32,
    /// No attempt before this instant.
    retry_at: Option<Instant>,
}

struct Live {
    connection: Connection,
    /// In confirm mode; cloned by every publish.
    publisher: Channel,
}

enum Unavailable {
    /// Backing off after a failed attempt: the next one is due then.
    Until(Instant),
    Failed(QueueError),
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
                Ok(Ok(verdict)) => return verdict,
                Ok(Err(error)) => error,
                Err(_) => {
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

impl Inner {
    /// `rabbitmq_node{node}`: 1 for the node this process is connected to, 0 for the others.
    fn show_node(&self, connected: usize) {
        // Connecting comes before a process serves `/metrics`: the recorder must exist already.
        ops::metrics::install();
        for (index, node) in self.nodes.iter().enumerate() {
            metrics::gauge!("rabbitmq_node", "node" => node.label.clone())
                .set(if index == connected { 1.0 } else { 0.0 });
        }
    }

    fn queue_name(&self, queue: &str, dead_letter: bool) -> String {
        if dead_letter {
            format!("{}.{queue}.dlq", self.prefix)
        } else {
            format!("{}.{queue}", self.prefix)
        }
    }

    /// The unbounded dead-letter queue of earlier versions.
    fn legacy_dead_queue(&self, queue: &str) -> String {
        format!("{}.{queue}.dead", self.prefix)
    }

    fn dead_letter_exchange(&self) -> String {
        format!("{}.dlx", self.prefix)
    }

    /// An earlier version's unbounded dead-letter queue of `queue`, if there is one: unbound
    /// from the dead-letter exchange so that it stops growing, and deleted if empty. One that
    /// still holds messages is left for operators (its messages are copies; the database
    /// records every dead job). Failures are logged only: the new queues work without this.
    async fn retire_legacy_dead_queue(&self, queue: &str, dlx: &str) {
        let name = self.legacy_dead_queue(queue);
        if !self.queue_exists(&name).await {
            return;
        }
        // Channels of their own: a refusal closes the channel it happens on.
        let Ok(channel) = self.channel(false).await else {
            return;
        };
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let Ok(existing) = within(
            "looking for a legacy dead-letter queue",
            channel.queue_declare(name.as_str().into(), passive, FieldTable::default()),
        )
        .await
        else {
            return; // not there: nothing to retire
        };
        let unbound = within(
            &format!("unbinding {name}"),
            channel.queue_unbind(
                name.as_str().into(),
                dlx.into(),
                queue.into(),
                FieldTable::default(),
            ),
        )
        .await;
        if let Err(error) = unbound {
            tracing::warn!(queue = %name, %error, "cannot unbind the legacy dead-letter queue");
            return;
        }
        let messages = existing.message_count();
        if messages > 0 {
            tracing::warn!(
                queue = %name,
                messages,
                "a legacy dead-letter queue holds copies of dead jobs (the database records them all); \
                 it no longer receives any and can be deleted"
            );
            return;
        }
        // Empty a moment ago and unbound since, so nothing arrives any more. (Quorum queues do
        // not take `if_empty`.)
        match within(
            &format!("deleting {name}"),
            channel.queue_delete(name.as_str().into(), QueueDeleteOptions::default()),
        )
        .await
        {
            Ok(_) => tracing::info!(queue = %name, "deleted the empty legacy dead-letter queue"),
            Err(error) => tracing::debug!(queue = %name, %error, "legacy dead-letter queue kept"),
        }
    }

    /// Whether a queue named `name` exists, asked so that the usual answer on a broker that
    /// never had it ("no") is not an error. A passive declare of a missing queue is refused with
    /// NOT_FOUND, which closes the channel and makes lapin log an error: on a fresh broker every
    /// process start would log one per queue. Instead the name is declared as a throwaway
    /// exclusive, non-durable queue: that succeeds only when no such queue exists (and the
    /// throwaway is deleted at once; it would vanish with this connection anyway), while an
    /// existing durable queue refuses it (RESOURCE_LOCKED or PRECONDITION_FAILED, on a channel
    /// of its own). Unknown (no channel) counts as absent: there is nothing to act on. Two
    /// processes probing at once would refuse each other's throwaway (RESOURCE_LOCKED, logged as
    /// an error), hence only [`RabbitBroker::retire_legacy_dead_queues`] probes.
    async fn queue_exists(&self, name: &str) -> bool {
        let Ok(channel) = self.channel(false).await else {
            return false;
        };
        let throwaway = QueueDeclareOptions {
            exclusive: true,
            auto_delete: true,
            ..QueueDeclareOptions::default()
        };
        let declared = within(
            &format!("checking for {name}"),
            channel.queue_declare(name.into(), throwaway, FieldTable::default()),
        )
        .await;
        if declared.is_err() {
            return true;
        }
        let _ = within(
            &format!("deleting the throwaway {name}"),
            channel.queue_delete(name.into(), QueueDeleteOptions::default()),
        )
        .await;
        let _ = channel.close(200, "checked".into()).await;
        false
    }

    /// The session with a live connection and publishing channel, reconnecting if need be.
    /// With `wait`, a call during the backoff sleeps until the next attempt is due instead of
    /// failing at once.
    async fn session(&self, wait: bool) -> Result<MutexGuard<'_, Session>, QueueError> {
        loop {
            let mut session = self.session.lock().await;
            match session.ensure(self).await {
                Ok(()) => return Ok(session),
                Err(Unavailable::Until(at)) if wait => {
                    drop(session);
                    tokio::time::sleep_until(at).await;
                }
                Err(Unavailable::Until(at)) => {
                    let ms = at.saturating_duration_since(Instant::now()).as_millis();
                    return Err(QueueError::Unreachable(format!(
                        "RabbitMQ is unreachable; the next connection attempt is in {ms} ms"
                    )));
                }
                Err(Unavailable::Failed(error)) => return Err(error),
            }
        }
    }

    /// A new channel on the live connection, for a consumer or a one-off declare.
    async fn channel(&self, wait: bool) -> Result<Channel, QueueError> {
        let session = self.session(wait).await?;
        let live = session.live.as_ref().expect("a live session");
        within("opening a channel", live.connection.create_channel()).await
    }

    async fn publisher(&self) -> Result<Channel, QueueError> {
        let session = self.session(false).await?;
        Ok(session
            .live
            .as_ref()
            .expect("a live session")
            .publisher
            .clone())
    }
}

impl Session {
    async fn ensure(&mut self, inner: &Inner) -> Result<(), Unavailable> {
        if let Some(live) = &mut self.live {
            if live.connection.status().connected() {
                if live.publisher.status().connected() {
                    return Ok(());
                }
                // A channel error (a publish to a missing exchange, say) closed the publishing
                // channel but not the connection.
                match timeout(OPERATION_TIMEOUT, open_publisher(&live.connection)).await {
                    Ok(Ok(publisher)) => {
                        live.publisher = publisher;
                        return Ok(());
                    }
                    Ok(Err(error)) if live.connection.status().connected() => {
                        return Err(Unavailable::Failed(lapin_error(
                            "opening the publishing channel",
                            &error,
                        )));
                    }
                    _ => {}
                }
            }
            tracing::warn!(
                connection = %inner.name,
                node = %inner.nodes[self.node].label,
                "RabbitMQ connection lost; reconnecting"
            );
            self.live = None;
            // The lost node is tried last.
            self.node = (self.node + 1) % inner.nodes.len();
        }
        if let Some(at) = self.retry_at
            && Instant::now() < at
        {
            return Err(Unavailable::Until(at));
        }
        // Every node once, from the one in use (or the next, when it was just lost).
        let count = inner.nodes.len();
        let mut errors = Vec::new();
        for step in 0..count {
            let index = (self.node + step) % count;
            let node = &inner.nodes[index];
            match timeout(CONNECT_TIMEOUT, Live::open(inner, &node.url)).await {
                Ok(Ok(live)) => {
                    if self.failures > 0 || step > 0 {
                        tracing::info!(connection = %inner.name, node = %node.label, failures = self.failures, "reconnected to RabbitMQ");
                    } else {
                        tracing::info!(connection = %inner.name, node = %node.label, "connected to RabbitMQ");
                    }
                    self.live = Some(live);
                    self.node = index;
                    self.failures = 0;
                    self.retry_at = None;
                    inner.show_node(index);
                    return Ok(());
                }
                Ok(Err(error)) => errors.push(format!("{}: {error}", node.label)),
                Err(_) => errors.push(format!(
                    "{}: no answer within {CONNECT_TIMEOUT:?}",
                    node.label
                )),
            }
        }
        let error =
            QueueError::Unreachable(format!("connecting to RabbitMQ: {}", errors.join("; ")));
        let delay = reconnect_delay(self.failures);
        self.failures = self.failures.saturating_add(1);
        self.retry_at = Some(Instant::now() + delay);
        tracing::warn!(
            connection = %inner.name,
            failures = self.failures,
            retry_in_ms = delay.as_millis() as u64,
            %error,
            "cannot connect to RabbitMQ"
        );
        Err(Unavailable::Failed(error))
    }
}

impl Live {
    async fn open(inner: &Inner, url: &str) -> lapin::Result<Live> {
        let properties =
            ConnectionProperties::default().with_connection_name(inner.name.clone().into());
        let connection = match &inner.ca_pem {
            None => Connection::connect(url, properties).await?,
            Some(pem) => {
                let tls = lapin::tcp::OwnedTLSConfig {
                    identity: None,
                    cert_chain: Some(pem.clone()),
                };
                let runtime = lapin::runtime::default_runtime()?;
                Connection::connect_with_config(url, properties, tls, runtime).await?
            }
        };
        let publisher = open_publisher(&connection).await?;
        Ok(Live {
            connection,
            publisher,
        })
    }
}

async fn open_publisher(connection: &Connection) -> lapin::Result<Channel> {
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    Ok(channel)
}

/// The nodes of `urls`: one AMQP URL or several, comma-separated.
fn parse_nodes(urls: &str) -> Result<Vec<Node>, QueueError> {
    let nodes = urls
        .split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(|url| {
            let parsed: lapin::uri::AMQPUri = url.parse().map_err(|error: String| {
                // The parser's message may quote the URL, password and all.
                let error = error.replace(url, "…");
                QueueError::Other(format!("an invalid RabbitMQ URL in the list: {error}"))
            })?;
            Ok(Node {
                url: url.to_owned(),
                label: format!("{}:{}", parsed.authority.host, parsed.authority.port),
            })
        })
        .collect::<Result<Vec<_>, QueueError>>()?;
    if nodes.is_empty() {
        return Err(QueueError::Other("the RabbitMQ URL is empty".into()));
    }
    Ok(nodes)
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
        for name in [exchange, dlx.as_str()] {
            within(
                &format!("declaring exchange {name}"),
                channel.exchange_declare(
                    name.into(),
                    ExchangeKind::Direct,
                    durable_exchange,
                    FieldTable::default(),
                ),
            )
            .await?;
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
                within(
                    &format!("declaring queue {queue}"),
                    channel.queue_declare(queue.as_str().into(), durable_queue, arguments),
                )
                .await?;
                within(
                    &format!("binding queue {queue} to {exchange}"),
                    channel.queue_bind(
                        queue.as_str().into(),
                        exchange.into(),
                        q.into(),
                        QueueBindOptions::default(),
                        FieldTable::default(),
                    ),
                )
                .await?;
            }
        }
        let _ = channel.close(200, "declared".into()).await;
        Ok(())
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
        let mut sent = Vec::with_capacity(messages.len());
        for message in messages {
            let confirm = match known(message.queue) {
                Err(error) => Err(error),
                Ok(q) => match timeout(
                    OPERATION_TIMEOUT,
                    send(&channel, exchange, q, message.body, persistent()),
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
                },
            };
            sent.push(confirm);
        }
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

struct RabbitAcker {
    /// `None` once used.
    acker: Option<lapin::Acker>,
    /// The consuming channel's batches and this message's tag; `None` for `basic.get`.
    batches: Option<(Arc<AckBatches>, u64)>,
    /// Keeps the delivery's channel open until it is settled.
    channel: Channel,
}

impl RabbitAcker {
    async fn settle(&mut self, requeue: Option<bool>) -> Result<(), QueueError> {
        let Some(acker) = self.acker.take() else {
            return Ok(());
        };
        let batches = self.batches.take();
        let (what, sent) = match (requeue, batches) {
            (None, Some((batches, tag))) => return batches.ack(tag, acker).await,
            (None, None) => ("ack", acker.ack(BasicAckOptions::default()).await),
            (Some(requeue), batches) => {
                let sent = acker
                    .nack(BasicNackOptions {
                        multiple: false,
                        requeue,
                    })
                    .await;
                // Only once the nack is on its way: until then no batch may cover the message.
                if let Some((batches, tag)) = batches {
                    batches.settled(tag);
                }
                ("nack", sent)
            }
        };
        settlement(what, sent)
    }
}

/// What became of one `basic.ack` or `basic.nack`.
fn settlement(what: &str, sent: lapin::Result<bool>) -> Result<(), QueueError> {
    match sent {
        Ok(true) => Ok(()),
        Ok(false) => Err(QueueError::Unreachable(format!(
            "cannot {what}: the delivery's channel closed, so the broker will deliver it again"
        ))),
        Err(error) => Err(lapin_error(what, &error)),
    }
}

#[async_trait]
impl Acker for RabbitAcker {
    async fn ack(mut self: Box<Self>) -> Result<(), QueueError> {
        self.settle(None).await
    }

    async fn nack(mut self: Box<Self>, requeue: bool) -> Result<(), QueueError> {
        self.settle(Some(requeue)).await
    }
}

impl Drop for RabbitAcker {
    /// Neither acked nor nacked: requeue it now rather than when the channel closes, so it does
    /// not hold a prefetch slot meanwhile (as the memory broker does).
    fn drop(&mut self) {
        let batches = self.batches.take();
        let Some(acker) = self.acker.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if acker.usable() => {
                let channel = self.channel.clone();
                runtime.spawn(async move {
                    let requeue = BasicNackOptions {
                        multiple: false,
                        requeue: true,
                    };
                    if let Err(error) = acker.nack(requeue).await {
                        tracing::debug!(%error, "requeueing a dropped delivery");
                    }
                    if let Some((batches, tag)) = batches {
                        batches.settled(tag);
                    }
                    drop(channel);
                });
            }
            // The channel is gone (it returns the message) or there is no runtime to send on:
            // the message stays unsettled, so no batch of this channel may cover it.
            _ => drop(batches),
        }
    }
}

/// One consuming channel's acknowledgements, sent together where AMQP allows
/// (docs/decisions/quorum-queues.md). A `basic.ack` with `multiple` settles every message of the
/// channel up to its tag, and a quorum queue then appends one settle command to its log, not one
/// per message. The acks that come while a frame is being sent go out together in the next one.
///
/// A batch only ever covers messages this process acked: it reaches up to just below the oldest
/// message of the channel not yet settled here (tags grow in delivery order, so a message
/// delivered later cannot fall under it). An ack above that message is sent on its own at once,
/// so a slow message (an endpoint taking its time) holds back no other's ack, and a nack is sent
/// before its message leaves the open set, so no batch overtakes it.
struct AckBatches {
    state: std::sync::Mutex<AckState>,
    sent: Arc<AtomicU64>,
}

#[derive(Default)]
struct AckState {
    /// Delivered to this process and not yet settled by it.
    open: BTreeSet<u64>,
    /// Acked here and waiting for the frame that settles them.
    waiting: Vec<WaitingAck>,
    /// A task is sending frames; acks that come meanwhile wait for its next round.
    sending: bool,
}

struct WaitingAck {
    tag: u64,
    acker: lapin::Acker,
    done: tokio::sync::oneshot::Sender<Result<(), QueueError>>,
}

impl AckBatches {
    fn new(sent: Arc<AtomicU64>) -> Self {
        AckBatches {
            state: std::sync::Mutex::default(),
            sent,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, AckState> {
        // Nothing panics while holding it; a poisoned lock still holds consistent sets.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a delivered message; the acker settles it through these batches.
    fn open(self: &Arc<Self>, tag: u64) -> (Arc<Self>, u64) {
        self.state().open.insert(tag);
        (self.clone(), tag)
    }

    /// The message was settled otherwise (a nack sent) or will be by the channel's end.
    fn settled(&self, tag: u64) {
        self.state().open.remove(&tag);
    }

    /// Acks `tag`, returning once a frame that settles it is sent.
    async fn ack(self: Arc<Self>, tag: u64, acker: lapin::Acker) -> Result<(), QueueError> {
        let (done, sent) = tokio::sync::oneshot::channel();
        let lead = {
            let mut state = self.state();
            state.open.remove(&tag);
            state.waiting.push(WaitingAck { tag, acker, done });
            !std::mem::replace(&mut state.sending, true)
        };
        if lead {
            // Its own task: a caller cancelled mid-send must not leave the others waiting.
            tokio::spawn(self.send());
        }
        match sent.await {
            Ok(verdict) => verdict,
            Err(_) => Err(QueueError::Unreachable(
                "the acknowledgement was abandoned; the broker will deliver it again".to_owned(),
            )),
        }
    }

    /// Sends what is waiting, round after round, until nothing is.
    async fn send(self: Arc<Self>) {
        loop {
            let (waiting, floor) = {
                let mut state = self.state();
                if state.waiting.is_empty() {
                    state.sending = false;
                    return;
                }
                let floor = state.open.first().copied().unwrap_or(u64::MAX);
                (std::mem::take(&mut state.waiting), floor)
            };
            let (mut covered, alone): (Vec<_>, Vec<_>) =
                waiting.into_iter().partition(|w| w.tag < floor);
            covered.sort_unstable_by_key(|w| w.tag);
            let mut frames = Vec::with_capacity(alone.len() + 1);
            if let Some(last) = covered.pop() {
                frames.push((last, covered));
            }
            frames.extend(alone.into_iter().map(|w| (w, Vec::new())));
            let counter: &AtomicU64 = &self.sent;
            let sends = frames.into_iter().map(|(last, below)| async move {
                let multiple = !below.is_empty();
                let sent = last.acker.ack(BasicAckOptions { multiple }).await;
                counter.fetch_add(1, Ordering::Relaxed);
                let verdict = settlement("ack", sent);
                for w in below {
                    let _ = w.done.send(verdict.clone());
                }
                let _ = last.done.send(verdict);
            });
            futures::future::join_all(sends).await;
        }
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
mod tests {
    use super::*;

    #[test]
    fn a_list_of_nodes_is_comma_separated() {
        let nodes = parse_nodes(
            "amqp://u:p@10.0.0.1:5672/%2f, amqp://u:p@rabbit-2/%2f,,amqp://u:p@rabbit-3:5673/vas",
        )
        .unwrap();
        let labels: Vec<_> = nodes.iter().map(|n| n.label.as_str()).collect();
        assert_eq!(labels, ["10.0.0.1:5672", "rabbit-2:5672", "rabbit-3:5673"]);
        assert_eq!(nodes[1].url, "amqp://u:p@rabbit-2/%2f");
        assert_eq!(parse_nodes("amqp://h/%2f").unwrap().len(), 1);
    }

    #[test]
    fn an_empty_or_invalid_list_is_refused() {
        assert!(parse_nodes(" , ").is_err());
        assert!(parse_nodes("amqp://h:5672/%2f,http://h").is_err());
        let Err(QueueError::Other(error)) = parse_nodes("amqp://h/%2f, amqp:u:s3cret@h2") else {
            panic!("a URL that cannot be a base is refused");
        };
        assert!(!error.contains("s3cret"), "{error}");
    }
}
