//! PostgreSQL over TLS as libpq sets it (docs/operations/postgres-tls-and-failover.md), against a
//! server of the test's own with `ssl = on` and a certificate for `localhost` signed by a CA made
//! here: `verify-full` checks the CA and the host name, `verify-ca` the CA only, `require` neither,
//! and none of them falls back to plain text; `VAS_DATABASE__CA_FILE` serves the primary, every
//! host of a multi-host URL and the replica. And a multi-host URL that cannot connect says, for
//! each host, why not.
//!
//! Each test starts its own server (`initdb`, a few seconds; a primary and its standby for the
//! standby's test, about ten), so they run in every test run.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ops::config::Config;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use store::failover::{self, MultiHost};
use test_support::clusters::PgServer;
use test_support::http::free_port;

const TLS_SETTINGS: &str = "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n";

/// A CA, a server certificate for `localhost` it signed, and a second CA that signed nothing
/// here; the CA certificates in files.
struct Pki {
    ca: PathBuf,
    other_ca: PathBuf,
    server_cert: String,
    server_key: String,
    _dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let ca = |name: &str| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, name);
            let cert = params.self_signed(&key).unwrap();
            (params, key, cert)
        };
        let (ca_params, ca_key, ca_cert) = ca("vas test CA");
        let (_, _, other_cert) = ca("another CA");
        let server_key = KeyPair::generate().unwrap();
        let server_cert = CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .signed_by(&server_key, &Issuer::from_params(&ca_params, &ca_key))
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (ca, other_ca) = (dir.path().join("ca.pem"), dir.path().join("other-ca.pem"));
        std::fs::write(&ca, ca_cert.pem()).unwrap();
        std::fs::write(&other_ca, other_cert.pem()).unwrap();
        Pki {
            ca,
            other_ca,
            server_cert: server_cert.pem(),
            server_key: server_key.serialize_pem(),
            _dir: dir,
        }
    }

    /// A server with TLS on, presenting the certificate for `localhost`.
    fn server(&self) -> PgServer {
        PgServer::start(
            TLS_SETTINGS,
            &[
                ("server.crt", self.server_cert.as_bytes()),
                ("server.key", self.server_key.as_bytes()),
            ],
        )
    }
}

/// Whether this connection to the server is encrypted, by the server's own account.
async fn encrypted(db: &DatabaseConnection) -> bool {
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get("", "ssl").unwrap()
}

/// Connects to `url` and asserts the connection is encrypted.
async fn connects_over_tls(url: &str) {
    let db = store::connect(url, 1)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    assert!(encrypted(&db).await, "{url}: not encrypted");
    db.close().await.unwrap();
}

/// Connecting to `url` fails; the error.
async fn refused(url: &str) -> String {
    match store::connect(url, 1).await {
        Ok(db) => panic!("{url}: connected (encrypted: {})", encrypted(&db).await),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn tls_is_checked_as_the_url_says_and_never_falls_back_to_plain_text() {
    let pki = Pki::new();
    let server = pki.server();
    let port = server.node.port;
    let url =
        |host: &str, query: &str| format!("postgres://postgres@{host}:{port}/postgres?{query}");
    let (ca, other_ca) = (pki.ca.display(), pki.other_ca.display());

    // The CA and the host name both right.
    connects_over_tls(&url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .await;
    // Encrypted with no certificate checked.
    connects_over_tls(&url("127.0.0.1", "sslmode=require")).await;
    // A CA that did not sign the server's certificate.
    for mode in ["verify-ca", "verify-full"] {
        let error = refused(&url(
            "localhost",
            &format!("sslmode={mode}&sslrootcert={other_ca}"),
        ))
        .await;
        assert!(error.contains("UnknownIssuer"), "{mode}: {error}");
    }
    // With a CA, `require` checks it as `verify-ca` does (libpq's rule).
    let error = refused(&url(
        "127.0.0.1",
        &format!("sslmode=require&sslrootcert={other_ca}"),
    ))
    .await;
    assert!(
        error.contains("UnknownIssuer"),
        "require with a CA: {error}"
    );
    // The certificate is for `localhost`: 127.0.0.1 is another name, which verify-full
    // refuses and verify-ca does not check.
    let error = refused(&url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .await;
    assert!(error.contains("not valid for name"), "verify-full: {error}");
    connects_over_tls(&url(
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
    ))
    .await;

    // VAS_DATABASE__CA_FILE, for URLs that name no CA: the primary of one host, every host of a
    // multi-host URL (the first one down), the replica.
    let mut config = Config::default();
    config.database.max_connections = 1;
    config.database.ca_file = Some(pki.ca.clone());
    let single = url("localhost", "sslmode=verify-full");
    let primary = bootstrap::connect_database(&single, &config).await.unwrap();
    assert!(encrypted(&primary).await);
    let multi = format!(
        "postgres://postgres@localhost:{},localhost:{port}/postgres?target_session_attrs=read-write&sslmode=verify-full",
        free_port()
    );
    let followed = bootstrap::connect_database(&multi, &config).await.unwrap();
    assert!(encrypted(&followed).await, "the multi-host URL's primary");
    followed.close().await.unwrap();
    // The replica beside a plain primary: what the lists read is the replica, encrypted.
    let plain = bootstrap::connect_database(&url("127.0.0.1", "sslmode=disable"), &config)
        .await
        .unwrap();
    assert!(!encrypted(&plain).await);
    config.database.read_url = Some(url("localhost", "sslmode=verify-full"));
    let reads = bootstrap::connect_reads(&config, &plain).await.unwrap();
    assert!(
        encrypted(&reads.db().await).await,
        "the lists read the replica"
    );
    // And the setting is what made them pass: another CA there refuses the same URL.
    config.database.ca_file = Some(pki.other_ca.clone());
    let error = bootstrap::connect_database(&single, &config)
        .await
        .unwrap_err();
    assert!(format!("{error:#}").contains("UnknownIssuer"), "{error:#}");

    // The same server with TLS off: no mode that asks for TLS connects in plain text.
    server.node.psql("postgres", "ALTER SYSTEM SET ssl = off");
    server.node.psql("postgres", "SELECT pg_reload_conf()");
    let started = Instant::now();
    while server.node.psql("postgres", "SHOW ssl") != "off" {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "ssl is still on"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for query in [
        "sslmode=require".to_owned(),
        format!("sslmode=verify-ca&sslrootcert={ca}"),
        format!("sslmode=verify-full&sslrootcert={ca}"),
    ] {
        let error = refused(&url("localhost", &query)).await;
        assert!(
            error.contains("server does not support TLS"),
            "{query}: {error}"
        );
    }
    let multi = MultiHost::parse(&format!(
        "postgres://postgres@localhost:{port}/postgres?target_session_attrs=read-write&sslmode=require"
    ))
    .unwrap()
    .unwrap();
    let error = failover::connect_primary(&multi, 1, Duration::from_millis(500))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("server does not support TLS"), "{error}");
    primary.close().await.unwrap();
    plain.close().await.unwrap();
}

#[tokio::test]
async fn a_multi_host_url_that_cannot_connect_says_why_for_each_host() {
    let pki = Pki::new();
    let server = pki.server();
    let (down, up) = (free_port(), server.node.port);
    let no_primary = |query: String| async move {
        let multi = MultiHost::parse(&format!(
            "postgres://anonymous:s3cret@127.0.0.1:{down},127.0.0.1:{up}/postgres?target_session_attrs=read-write&{query}"
        ))
        .unwrap()
        .unwrap();
        failover::connect_primary(&multi, 1, Duration::from_millis(500))
            .await
            .unwrap_err()
            .to_string()
    };

    // A user the server does not know: what the single-host form says, beside the host that is
    // down.
    let error = no_primary("sslmode=require".to_owned()).await;
    assert!(
        error.contains(&format!(
            "no primary among 127.0.0.1:{down} (connection refused), 127.0.0.1:{up} (authentication failed: role \"anonymous\" does not exist)"
        )),
        "{error}"
    );
    // A certificate the CA did not sign.
    let error = no_primary(format!(
        "sslmode=verify-ca&sslrootcert={}",
        pki.other_ca.display()
    ))
    .await;
    assert!(
        error.contains(&format!(
            "127.0.0.1:{up} (invalid peer certificate: UnknownIssuer)"
        )),
        "{error}"
    );
    assert!(!error.contains("s3cret"), "{error}");
}

#[tokio::test]
async fn a_standby_is_named_as_the_reason_it_was_not_taken() {
    use test_support::clusters::{PgPair, Replication};
    let pair = PgPair::start("vas", Replication::Asynchronous);
    let standby = pair.nodes[1].port;
    let multi = MultiHost::parse(&format!(
        "postgres://postgres@127.0.0.1:{standby}/vas?target_session_attrs=read-write"
    ))
    .unwrap()
    .unwrap();
    let error = failover::connect_primary(&multi, 1, Duration::from_millis(500))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(&format!("no primary among 127.0.0.1:{standby} (a standby)")),
        "{error}"
    );
}
