//! PostgreSQL behind a libpq multi-host URL (`postgres://u@h1:5432,h2:5432/vas?target_session_attrs=read-write`,
//! what `pg_autoctl show uri` prints): the pool writes to whichever host accepts writes, and after
//! a failover finds the new one without a restart.
//!
//! sqlx parses one host only, so [`MultiHost::parse`] splits the list and each host gets the same
//! options otherwise. A watcher keeps one connection of its own to the current primary and asks
//! it `pg_is_in_recovery()` every [`WATCH_EVERY`]; when that fails or says "standby", it asks
//! every host until one is a primary, points the pool there (`Pool::set_connect_options`: the
//! pool's next connection goes to the new host) and stamps the switch, so that connections
//! opened before it are closed rather than handed out (`before_acquire`, by their age). Every new
//! connection is checked to be a primary (`after_connect`), so a pool never writes to a standby
//! between two looks. Work that failed meanwhile is retried or failed by the rules that already
//! keep it exactly once; the api answers it 503 ([`is_unavailable`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sea_orm::sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sea_orm::sqlx::{self, ConnectOptions as _, Connection as _};
use sea_orm::{DatabaseConnection, DbErr, RuntimeErr, SqlxPostgresConnector};

/// How often the watcher asks the current primary whether it still is one.
pub const WATCH_EVERY: Duration = Duration::from_millis(500);
/// How long one host may take to answer the watcher.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A multi-host URL taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiHost {
    /// `host:port` of each host, in the URL's order.
    pub hosts: Vec<(String, u16)>,
    /// The URL with the first host only and without `target_session_attrs` (which sqlx does not
    /// know): the options every host shares.
    pub single: String,
    /// `target_session_attrs`: `read-write` (or `primary`) means writes go to a primary only.
    pub target: Target,
}

/// libpq's `target_session_attrs`, the values this service acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `read-write` or `primary`: a host that accepts writes.
    Primary,
    /// `any` (libpq's default), `read-only`, `standby`, `prefer-standby`: any host that answers,
    /// standbys first.
    Any,
}

impl MultiHost {
    /// The hosts of a `postgres://` URL, or None when it names one host and no
    /// `target_session_attrs` (then it is connected as it always was). A host without a port
    /// gets 5432, as with libpq.
    pub fn parse(url: &str) -> Result<Option<MultiHost>, String> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Ok(None);
        };
        if scheme != "postgres" && scheme != "postgresql" {
            return Ok(None);
        }
        let (authority, tail) = match rest.find(['/', '?']) {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        let (userinfo, hostlist) = match authority.rsplit_once('@') {
            Some((user, hosts)) => (Some(user), hosts),
            None => (None, authority),
        };
        let (path, query) = match tail.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (tail, None),
        };
        let mut target = None;
        let mut kept = Vec::new();
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            match pair.split_once('=') {
                Some(("target_session_attrs", value)) => {
                    target = Some(match value {
                        "read-write" | "primary" => Target::Primary,
                        "any" | "read-only" | "standby" | "prefer-standby" => Target::Any,
                        other => {
                            return Err(format!("target_session_attrs={other} is not supported"));
                        }
                    });
                }
                _ if pair.is_empty() => {}
                _ => kept.push(pair),
            }
        }
        let hosts = hostlist
            .split(',')
            .enumerate()
            .map(|(index, host)| {
                parse_host(host)
                    .map_err(|why| format!("host {} of the database URL: {why}", index + 1))
            })
            .collect::<Result<Vec<_>, String>>()?;
        if hosts.len() == 1 && target.is_none() {
            return Ok(None);
        }
        let (first, port) = &hosts[0];
        let first = if first.contains(':') {
            format!("[{first}]")
        } else {
            first.clone()
        };
        let user = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
        let query = if kept.is_empty() {
            String::new()
        } else {
            format!("?{}", kept.join("&"))
        };
        Ok(Some(MultiHost {
            single: format!("{scheme}://{user}{first}:{port}{path}{query}"),
            hosts,
            target: target.unwrap_or(Target::Any),
        }))
    }
}

impl MultiHost {
    /// [`single`](Self::single) with host `index` instead of the first.
    pub fn url_for(&self, index: usize) -> String {
        let at = |(host, port): &(String, u16)| {
            if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            }
        };
        self.single
            .replacen(&at(&self.hosts[0]), &at(&self.hosts[index]), 1)
    }
}

/// `host`, `host:port` or `[v6]:port`; the port defaults to 5432, as with libpq. An error does
/// not repeat the text: with a password holding an unescaped `/`, part of it lands here.
fn parse_host(host: &str) -> Result<(String, u16), String> {
    let (name, port) = match host.strip_prefix('[') {
        Some(v6) => {
            let (name, after) = v6
                .split_once(']')
                .ok_or_else(|| "an IPv6 address without its `]`".to_owned())?;
            (name, after.strip_prefix(':'))
        }
        None => match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        },
    };
    if name.is_empty() {
        return Err("empty".to_owned());
    }
    let port = match port {
        Some(port) => port
            .parse::<u16>()
            .map_err(|_| "an invalid port".to_owned())?,
        None => 5432,
    };
    Ok((name.to_owned(), port))
}

/// Where the pool writes, shared by its hooks and its watcher.
struct Primary {
    hosts: Vec<(String, u16)>,
    base: PgConnectOptions,
    state: Mutex<State>,
}

struct State {
    current: usize,
    /// When the pool was last pointed at a new host: older connections are not handed out.
    switched: Instant,
}

impl Primary {
    fn options(&self, index: usize) -> PgConnectOptions {
        let (host, port) = &self.hosts[index];
        self.base.clone().host(host).port(*port)
    }

    fn label(&self, index: usize) -> String {
        let (host, port) = &self.hosts[index];
        format!("{host}:{port}")
    }

    /// The first host (from `start`) that answers as a primary, with a connection to it; else
    /// each host with why it was not taken (`h1:5432 (connection refused)`).
    async fn find(&self, start: usize) -> Result<(usize, sqlx::PgConnection), Vec<String>> {
        let mut skipped = Vec::new();
        for step in 0..self.hosts.len() {
            let index = (start + step) % self.hosts.len();
            match self.probe(index).await {
                Ok(connection) => return Ok((index, connection)),
                Err(why) => skipped.push(format!("{} ({why})", self.label(index))),
            }
        }
        Err(skipped)
    }

    /// A connection to host `index` if it answers within [`PROBE_TIMEOUT`] as a primary; else
    /// why not.
    async fn probe(&self, index: usize) -> Result<sqlx::PgConnection, String> {
        let attempt = async {
            let mut connection = self.options(index).connect().await.map_err(why_not)?;
            match is_primary(&mut connection).await {
                Ok(true) => Ok(connection),
                Ok(false) => Err("a standby".to_owned()),
                Err(e) => Err(why_not(e)),
            }
        };
        tokio::time::timeout(PROBE_TIMEOUT, attempt)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {PROBE_TIMEOUT:?}")))
    }
}

/// Why a host was not taken, in the words an operator acts on: refused (down, or the wrong
/// port), authentication (the user, its password, `pg_hba.conf`), TLS (the server's words on a
/// certificate, a CA, a host name, or no TLS at all), else the server's own message. sqlx's
/// errors never carry the password.
fn why_not(error: sqlx::Error) -> String {
    match error {
        sqlx::Error::Io(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            "connection refused".to_owned()
        }
        // A failed TLS handshake (rustls' "invalid peer certificate: …") arrives as I/O.
        sqlx::Error::Io(e) => e.to_string(),
        sqlx::Error::Tls(e) => format!("TLS: {e}"),
        sqlx::Error::Database(db) if db.code().is_some_and(|code| code.starts_with("28")) => {
            format!("authentication failed: {}", db.message())
        }
        sqlx::Error::Database(db) => db.message().to_owned(),
        other => other.to_string(),
    }
}

async fn is_primary(connection: &mut sqlx::PgConnection) -> Result<bool, sqlx::Error> {
    let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(connection)
        .await?;
    Ok(!in_recovery)
}

/// A pool on the primary among `multi`'s hosts, kept there across failovers. Fails when no host
/// is a primary within `acquire_timeout`.
pub async fn connect_primary(
    multi: &MultiHost,
    max_connections: u32,
    acquire_timeout: Duration,
) -> Result<DatabaseConnection, DbErr> {
    let base: PgConnectOptions = multi
        .single
        .parse::<PgConnectOptions>()
        .map_err(|e| DbErr::Conn(RuntimeErr::SqlxError(Arc::new(e))))?
        .disable_statement_logging();
    let primary = Arc::new(Primary {
        hosts: multi.hosts.clone(),
        base,
        state: Mutex::new(State {
            current: 0,
            switched: Instant::now(),
        }),
    });
    let deadline = Instant::now() + acquire_timeout;
    let (index, watch) = loop {
        match primary.find(0).await {
            Ok(found) => break found,
            Err(skipped) if Instant::now() >= deadline => {
                return Err(DbErr::Conn(RuntimeErr::Internal(format!(
                    "no primary among {}",
                    skipped.join(", ")
                ))));
            }
            Err(_) => tokio::time::sleep(WATCH_EVERY).await,
        }
    };
    {
        let mut state = primary.state.lock().expect("not poisoned");
        state.current = index;
        state.switched = Instant::now();
    }
    show_primary(&primary, index);
    tracing::info!(host = %primary.label(index), "connected to the PostgreSQL primary");
    let on_acquire = primary.clone();
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .min_connections(1)
        .acquire_timeout(acquire_timeout)
        .after_connect(|connection, _| {
            Box::pin(async move {
                // Between two looks of the watcher: a standby is never written to.
                if is_primary(connection).await? {
                    Ok(())
                } else {
                    Err(sqlx::Error::Protocol(
                        "the host is a standby; waiting for the new primary".into(),
                    ))
                }
            })
        })
        .test_before_acquire(false)
        .before_acquire(move |connection, meta| {
            let switched = on_acquire
                .state
                .lock()
                .expect("not poisoned")
                .switched
                .elapsed();
            Box::pin(async move {
                // Opened before the last switch: to the old primary, closed instead of used.
                if meta.age >= switched {
                    return Ok(false);
                }
                if meta.idle_for >= super::PING_IF_IDLE_FOR {
                    connection.ping().await?;
                }
                Ok(true)
            })
        })
        .connect_lazy_with(primary.options(index));
    tokio::spawn(watch_primary(primary, pool.clone(), watch));
    Ok(SqlxPostgresConnector::from_sqlx_postgres_pool(pool))
}

/// Asks the primary every [`WATCH_EVERY`] whether it still is one; on no answer or "standby",
/// finds the new one and points the pool at it. Ends when the pool is closed.
async fn watch_primary(primary: Arc<Primary>, pool: PgPool, mut watch: sqlx::PgConnection) {
    let mut lost_at: Option<Instant> = None;
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        if pool.is_closed() {
            return;
        }
        let current = primary.state.lock().expect("not poisoned").current;
        if lost_at.is_none() {
            match tokio::time::timeout(PROBE_TIMEOUT, is_primary(&mut watch)).await {
                Ok(Ok(true)) => continue,
                outcome => {
                    let why = match outcome {
                        Ok(Ok(_)) => "it is a standby now".to_owned(),
                        Ok(Err(e)) => e.to_string(),
                        Err(_) => format!("no answer within {PROBE_TIMEOUT:?}"),
                    };
                    tracing::warn!(host = %primary.label(current), reason = %why, "PostgreSQL primary lost; looking for the new one");
                    lost_at = Some(Instant::now());
                }
            }
        }
        // The next host first: the lost one is likely still down.
        let Ok((index, connection)) = primary.find(current + 1).await else {
            continue;
        };
        watch = connection;
        {
            let mut state = primary.state.lock().expect("not poisoned");
            state.current = index;
            state.switched = Instant::now();
        }
        pool.set_connect_options(primary.options(index));
        show_primary(&primary, index);
        metrics::counter!("database_failovers_total").increment(1);
        tracing::warn!(
            host = %primary.label(index),
            after_ms = lost_at.map_or(0, |t| t.elapsed().as_millis() as u64),
            "PostgreSQL primary found; writing there"
        );
        lost_at = None;
    }
}

/// `database_primary{host}`: 1 for the host this process writes to, 0 for the others.
fn show_primary(primary: &Primary, current: usize) {
    ops::metrics::install();
    for index in 0..primary.hosts.len() {
        metrics::gauge!("database_primary", "host" => primary.label(index))
            .set(if index == current { 1.0 } else { 0.0 });
    }
}

/// True when the error means the database could not be reached or would not take the write now
/// (a lost connection, a pool that could not connect, a server shutting down or starting, a
/// standby refusing a write): a failover, say, after which the same request can succeed. Told by
/// the error's kind and SQLSTATE, never its text.
pub fn is_unavailable(err: &DbErr) -> bool {
    let runtime = match err {
        DbErr::ConnectionAcquire(_) => return true,
        DbErr::Conn(e) | DbErr::Exec(e) | DbErr::Query(e) => e,
        _ => return false,
    };
    let RuntimeErr::SqlxError(error) = runtime else {
        return false;
    };
    match error.as_ref() {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // 25006 read_only_sql_transaction, 57P01–57P03 shutdown and startup, class 08
            // connection exceptions.
            code == "25006" || code.starts_with("57P0") || code.starts_with("08")
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_host_url_is_split_into_its_hosts() {
        let multi = MultiHost::parse(
            "postgres://vas:s3cret@db1:5432,db2:5433,db3/vas?sslmode=prefer&target_session_attrs=read-write",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            multi.hosts,
            [
                ("db1".to_owned(), 5432),
                ("db2".to_owned(), 5433),
                ("db3".to_owned(), 5432)
            ]
        );
        assert_eq!(
            multi.single,
            "postgres://vas:s3cret@db1:5432/vas?sslmode=prefer"
        );
        assert_eq!(multi.target, Target::Primary);
        assert_eq!(
            multi.url_for(1),
            "postgres://vas:s3cret@db2:5433/vas?sslmode=prefer"
        );
    }

    #[test]
    fn one_host_without_target_session_attrs_is_left_as_it_is() {
        for url in [
            "postgres://postgres@127.0.0.1:5432/postgres",
            "postgres://localhost/vas",
            "sqlite://x.db?mode=rwc",
        ] {
            assert_eq!(MultiHost::parse(url).unwrap(), None, "{url}");
        }
        let one = MultiHost::parse("postgresql://u@h/vas?target_session_attrs=any")
            .unwrap()
            .unwrap();
        assert_eq!(one.hosts, [("h".to_owned(), 5432)]);
        assert_eq!(one.single, "postgresql://u@h:5432/vas");
        assert_eq!(one.target, Target::Any);
    }

    #[test]
    fn a_bad_port_or_attribute_is_refused() {
        assert!(MultiHost::parse("postgres://u@h1:54x,h2/vas").is_err());
        assert!(MultiHost::parse("postgres://u@h1,h2/vas?target_session_attrs=sometimes").is_err());
        assert!(MultiHost::parse("postgres://u@h1,/vas").is_err());
        // A password with an unescaped `/` ends the host list early: the error names the
        // host's place, never the text that holds part of the password.
        let error = MultiHost::parse("postgres://vas:s3cr/et@h1,h2/vas").unwrap_err();
        assert_eq!(error, "host 1 of the database URL: an invalid port");
        let v6 = MultiHost::parse("postgres://u@[::1]:6000,h2/vas")
            .unwrap()
            .unwrap();
        assert_eq!(v6.hosts[0], ("::1".to_owned(), 6000));
        assert_eq!(v6.single, "postgres://u@[::1]:6000/vas");
    }

    #[test]
    fn lost_connections_are_unavailable_and_other_errors_are_not() {
        let io = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(is_unavailable(&DbErr::Conn(RuntimeErr::SqlxError(
            Arc::new(io)
        ))));
        assert!(is_unavailable(&DbErr::ConnectionAcquire(
            sea_orm::error::ConnAcquireErr::Timeout
        )));
        let timed_out = sqlx::Error::PoolTimedOut;
        assert!(is_unavailable(&DbErr::Exec(RuntimeErr::SqlxError(
            Arc::new(timed_out)
        ))));
        assert!(!is_unavailable(&DbErr::RecordNotFound("x".into())));
        let decode = sqlx::Error::ColumnNotFound("x".into());
        assert!(!is_unavailable(&DbErr::Query(RuntimeErr::SqlxError(
            Arc::new(decode)
        ))));
    }
}
