//! A broker per test: the in-process queue, or RabbitMQ under a prefix of its own that is
//! deleted when the test ends, however it ends.

use std::future::Future;
use std::sync::Arc;

use queue::broker::{Broker, MemoryBroker, RabbitBroker};

use crate::Backend;
use crate::backend::env_url;

/// A RabbitMQ prefix (its queues and exchanges), deleted on drop.
pub struct RabbitPrefix {
    pub url: String,
    pub prefix: String,
}

impl RabbitPrefix {
    /// A fresh prefix on `url`: `letter` and a ULID (RabbitMQ names are short and lowercase).
    pub fn new(url: &str, letter: char) -> RabbitPrefix {
        RabbitPrefix {
            url: url.to_owned(),
            prefix: format!("{letter}{}", ulid::Ulid::new().to_string().to_lowercase()),
        }
    }
}

impl Drop for RabbitPrefix {
    fn drop(&mut self) {
        let (url, prefix) = (self.url.clone(), self.prefix.clone());
        // Drop runs outside async: a short-lived runtime on its own thread deletes the prefix.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(queue::broker::delete_topology(&url, &prefix));
        })
        .join();
    }
}

/// A declared broker for one test.
pub struct TestBroker {
    pub broker: Arc<dyn Broker>,
    /// Set when the broker is RabbitMQ: its prefix, deleted when this is dropped.
    pub rabbit: Option<RabbitPrefix>,
}

impl TestBroker {
    /// The in-process queue.
    pub async fn memory() -> TestBroker {
        let broker = MemoryBroker::new();
        broker.declare().await.expect("declare");
        TestBroker {
            broker: Arc::new(broker),
            rabbit: None,
        }
    }

    /// RabbitMQ at `url`, under a fresh prefix.
    pub async fn rabbit(url: &str) -> TestBroker {
        let rabbit = RabbitPrefix::new(url, 't');
        let broker = RabbitBroker::connect(url, &rabbit.prefix)
            .await
            .expect("connect to TEST_AMQP_URL");
        broker.declare().await.expect("declare topology");
        TestBroker {
            broker: Arc::new(broker),
            rabbit: Some(rabbit),
        }
    }

    /// What a test on `backend` uses: RabbitMQ with PostgreSQL when `TEST_AMQP_URL` is set,
    /// otherwise (saying so) the in-process queue.
    pub async fn for_backend(backend: &Backend) -> TestBroker {
        if backend.is_postgres()
            && let Some(url) = env_url(
                "TEST_AMQP_URL",
                "RabbitMQ",
                "TEST_AMQP_URL is not set: the PostgreSQL variant uses the in-process queue",
            )
        {
            return TestBroker::rabbit(&url).await;
        }
        TestBroker::memory().await
    }
}

/// Where a [`with_rabbit`] check's broker lives.
pub struct Topology {
    pub url: String,
    pub prefix: String,
}

/// Runs `check` on a RabbitBroker with a fresh prefix (nothing declared yet), then deletes the
/// prefix whether or not the check passed. Without `TEST_AMQP_URL`, says so and returns.
pub async fn with_rabbit<F, Fut>(check: F)
where
    F: FnOnce(RabbitBroker, Topology) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(url) = crate::amqp_url() else { return };
    let rabbit = RabbitPrefix::new(&url, 't');
    let broker = RabbitBroker::connect(&url, &rabbit.prefix)
        .await
        .expect("connect to TEST_AMQP_URL");
    let topology = Topology {
        url: url.clone(),
        prefix: rabbit.prefix.clone(),
    };
    check(broker, topology).await;
}
