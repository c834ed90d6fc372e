//! The connection to one node of the cluster at a time: the session, reconnecting to the next node
//! that answers with backoff, and the `rabbitmq_node` gauge.

use super::*;

pub(super) struct Inner {
    /// The cluster's nodes, in the order given; at least one.
    pub(super) nodes: Vec<Node>,
    /// PEM certificates to trust for `amqps://` besides the public roots (a private CA).
    pub(super) ca_pem: Option<String>,
    pub(super) prefix: String,
    /// The connection name operators see in the management UI; consumer tags start with it.
    pub(super) name: String,
    pub(super) dead_letters: DeadLetterBounds,
    pub(super) consumers: AtomicU64,
    /// `basic.ack` frames sent by every consuming channel (each may settle several messages).
    pub(super) acks_sent: Arc<AtomicU64>,
    pub(super) session: Mutex<Session>,
}

/// One node of the cluster.
pub(super) struct Node {
    pub(super) url: String,
    /// `url` parsed, with [`HEARTBEAT`] unless the URL sets its own.
    pub(super) uri: lapin::uri::AMQPUri,
    /// `host:port`, for logs and the `rabbitmq_node` gauge (the URL carries the password).
    pub(super) label: String,
}

#[derive(Default)]
pub(super) struct Session {
    pub(super) live: Option<Live>,
    /// The node of the live connection, or the one to try first.
    pub(super) node: usize,
    /// Failed connection attempts in a row.
    pub(super) failures: u32,
    /// No attempt before this instant.
    pub(super) retry_at: Option<Instant>,
}

pub(super) struct Live {
    pub(super) connection: Connection,
    /// In confirm mode; cloned by every publish.
    pub(super) publisher: Channel,
}

pub(super) enum Unavailable {
    /// Backing off after a failed attempt: the next one is due then.
    Until(Instant),
    Failed(QueueError),
}

impl Inner {
    /// `rabbitmq_node{node}`: 1 for the node this process is connected to, 0 for the others.
    pub(super) fn show_node(&self, connected: usize) {
        // Connecting comes before a process serves `/metrics`: the recorder must exist already.
        ops::metrics::install();
        for (index, node) in self.nodes.iter().enumerate() {
            metrics::gauge!("rabbitmq_node", "node" => node.label.clone())
                .set(if index == connected { 1.0 } else { 0.0 });
        }
    }

    pub(super) fn queue_name(&self, queue: &str, dead_letter: bool) -> String {
        if dead_letter {
            format!("{}.{queue}.dlq", self.prefix)
        } else {
            format!("{}.{queue}", self.prefix)
        }
    }

    /// The unbounded dead-letter queue of earlier versions.
    pub(super) fn legacy_dead_queue(&self, queue: &str) -> String {
        format!("{}.{queue}.dead", self.prefix)
    }

    pub(super) fn dead_letter_exchange(&self) -> String {
        format!("{}.dlx", self.prefix)
    }

    /// An earlier version's unbounded dead-letter queue of `queue`, if there is one: unbound
    /// from the dead-letter exchange so that it stops growing, and deleted if empty. One that
    /// still holds messages is left for operators (its messages are copies; the database
    /// records every dead job). Failures are logged only: the new queues work without this.
    pub(super) async fn retire_legacy_dead_queue(&self, queue: &str, dlx: &str) {
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
    pub(super) async fn queue_exists(&self, name: &str) -> bool {
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
    pub(super) async fn session(&self, wait: bool) -> Result<MutexGuard<'_, Session>, QueueError> {
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
    pub(super) async fn channel(&self, wait: bool) -> Result<Channel, QueueError> {
        let session = self.session(wait).await?;
        let live = session.live.as_ref().expect("a live session");
        within("opening a channel", live.connection.create_channel()).await
    }

    pub(super) async fn publisher(&self) -> Result<Channel, QueueError> {
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
    pub(super) async fn ensure(&mut self, inner: &Inner) -> Result<(), Unavailable> {
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
            match timeout(CONNECT_TIMEOUT, Live::open(inner, node)).await {
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
    pub(super) async fn open(inner: &Inner, node: &Node) -> lapin::Result<Live> {
        let properties =
            ConnectionProperties::default().with_connection_name(inner.name.clone().into());
        let uri = node.uri.clone();
        let connection = match &inner.ca_pem {
            None => Connection::connect_uri(uri, properties).await?,
            Some(pem) => {
                let tls = lapin::tcp::OwnedTLSConfig {
                    identity: None,
                    cert_chain: Some(pem.clone()),
                };
                let runtime = lapin::runtime::default_runtime()?;
                Connection::connect_uri_with_config(uri, properties, tls, runtime).await?
            }
        };
        let publisher = open_publisher(&connection).await?;
        Ok(Live {
            connection,
            publisher,
        })
    }
}

pub(super) async fn open_publisher(connection: &Connection) -> lapin::Result<Channel> {
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    Ok(channel)
}

/// The nodes of `urls`: one AMQP URL or several, comma-separated.
pub(super) fn parse_nodes(urls: &str) -> Result<Vec<Node>, QueueError> {
    let nodes = urls
        .split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(|url| {
            let mut parsed: lapin::uri::AMQPUri = url.parse().map_err(|error: String| {
                // The parser's message may quote the URL, password and all.
                let error = error.replace(url, "…");
                QueueError::Other(format!("an invalid RabbitMQ URL in the list: {error}"))
            })?;
            let label = format!("{}:{}", parsed.authority.host, parsed.authority.port);
            parsed.query.heartbeat = parsed.query.heartbeat.or(Some(HEARTBEAT));
            Ok(Node {
                url: url.to_owned(),
                uri: parsed,
                label,
            })
        })
        .collect::<Result<Vec<_>, QueueError>>()?;
    if nodes.is_empty() {
        return Err(QueueError::Other("the RabbitMQ URL is empty".into()));
    }
    Ok(nodes)
}
