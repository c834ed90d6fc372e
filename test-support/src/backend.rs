//! Which backends a test runs on: SQLite with the in-process queue always; PostgreSQL with
//! RabbitMQ when `TEST_DATABASE_URL` (and `TEST_AMQP_URL`) are set. Unset, the PostgreSQL
//! variant says plainly that it was skipped; under `CI`, an unset URL fails the test instead.

/// The database (and so the broker) a test runs on.
#[derive(Clone, Debug)]
pub enum Backend {
    /// A temporary SQLite file and the in-process queue.
    Sqlite,
    /// A fresh database on this PostgreSQL server (the admin URL), and RabbitMQ when
    /// `TEST_AMQP_URL` is set.
    Postgres(String),
}

impl Backend {
    /// PostgreSQL when `TEST_DATABASE_URL` is set; otherwise None, saying the variant is skipped.
    pub fn postgres() -> Option<Backend> {
        postgres_url().map(Backend::Postgres)
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, Backend::Postgres(_))
    }
}

/// `TEST_DATABASE_URL`, or None with a note that the PostgreSQL variant is not run.
pub fn postgres_url() -> Option<String> {
    env_url(
        "TEST_DATABASE_URL",
        "PostgreSQL",
        "skipped: TEST_DATABASE_URL is not set, PostgreSQL variant not run",
    )
}

/// `TEST_AMQP_URL`, or None with a note that the RabbitMQ variant is not run.
pub fn amqp_url() -> Option<String> {
    env_url(
        "TEST_AMQP_URL",
        "RabbitMQ",
        "skipped: TEST_AMQP_URL is not set, RabbitMQ variant not run",
    )
}

/// The variable's value; unset or empty: a panic under `CI`, else `note` on stderr and None.
pub(crate) fn env_url(var: &str, what: &str, note: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but {var} is not: {what} tests must run in CI")
        }
        _ => {
            eprintln!("{note}");
            None
        }
    }
}

/// Runs each named async test `fn name(backend: Backend)` twice, as `name::sqlite` and
/// `name::postgres` (the latter skipped, saying so, when `TEST_DATABASE_URL` is unset).
#[macro_export]
macro_rules! on_both_databases {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn sqlite() {
                    super::$name($crate::Backend::Sqlite).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn postgres() {
                    if let Some(backend) = $crate::Backend::postgres() {
                        super::$name(backend).await
                    }
                }
            }
        )*
    };
}

/// Runs each named async check `fn name<B: Broker>(broker: B)` as `name::memory` (the
/// in-process broker) and `name::rabbit` (a fresh RabbitMQ prefix, nothing declared yet; skipped,
/// saying so, when `TEST_AMQP_URL` is unset).
#[macro_export]
macro_rules! on_both_brokers {
    ($($check:ident),* $(,)?) => {$(
        mod $check {
            #[tokio::test]
            async fn memory() {
                super::$check($crate::__private::MemoryBroker::new()).await;
            }

            #[tokio::test]
            async fn rabbit() {
                $crate::with_rabbit(|broker, _| super::$check(broker)).await;
            }
        }
    )*};
}
