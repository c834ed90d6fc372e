//! What an operator reads when a worker cannot reach its database or broker at start: its own
//! stderr, with every password of the URLs it names masked
//! (docs/operations/keys-and-secret-rotation.md), whatever their form.

use test_support::TestDb;
use test_support::http::free_port;
use test_support::process::refused_start;

/// Base64 of 32 bytes: a key the worker accepts.
const KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

/// Runs the worker with `env` until it gives up; its stderr.
fn start(env: &[(&str, String)]) -> String {
    let mut all = vec![("VAS_CRYPTO__KEY", KEY.to_owned())];
    all.extend_from_slice(env);
    refused_start(env!("CARGO_BIN_EXE_worker-recheck"), &all)
}

#[test]
fn a_multi_host_database_url_that_cannot_connect_is_printed_without_its_passwords() {
    let (first, second) = (free_port(), free_port());
    let stderr = start(&[
        (
            "VAS_DATABASE__URL",
            format!(
                "postgres://vas:db-s3cret@127.0.0.1:{first},127.0.0.1:{second}/vas?password=query-s3cret&target_session_attrs=read-write"
            ),
        ),
        (
            "VAS_AMQP__URL",
            "amqp://guest:mq-s3cret@127.0.0.1:1/%2f".to_owned(),
        ),
    ]);
    assert!(!stderr.contains("s3cret"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "connecting to the database (postgres://vas:***@127.0.0.1:{first},127.0.0.1:{second}/vas?password=***&target_session_attrs=read-write)"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "no primary among 127.0.0.1:{first} (connection refused), 127.0.0.1:{second} (connection refused)"
        )),
        "{stderr}"
    );
}

#[test]
fn every_node_of_a_broker_list_that_cannot_connect_is_printed_without_its_password() {
    let db = TestDb::sqlite();
    let (first, second) = (free_port(), free_port());
    let stderr = start(&[
        ("VAS_DATABASE__URL", db.url.clone()),
        (
            "VAS_AMQP__URL",
            format!(
                "amqp://guest:first-s3cret@127.0.0.1:{first}/%2f,amqp://guest:second-s3cret@127.0.0.1:{second}/%2f"
            ),
        ),
    ]);
    assert!(!stderr.contains("s3cret"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "connecting to RabbitMQ (amqp://guest:***@127.0.0.1:{first}/%2f,amqp://guest:***@127.0.0.1:{second}/%2f)"
        )),
        "{stderr}"
    );
}

#[test]
fn a_database_url_parameter_the_driver_does_not_know_is_logged_without_its_value() {
    let port = free_port();
    let stderr = start(&[
        (
            "VAS_DATABASE__URL",
            format!("postgres://vas@127.0.0.1:{port}/vas?sslmode=disable&sslpassword=key-s3cret"),
        ),
        (
            "VAS_AMQP__URL",
            "amqp://guest:guest@127.0.0.1:1/%2f".to_owned(),
        ),
    ]);
    assert!(!stderr.contains("s3cret"), "{stderr}");
    // The driver still says what it ignored, by name (the patched copy: vendor/README.md).
    assert!(
        stderr.contains("ignoring unrecognized connect parameter key=sslpassword"),
        "{stderr}"
    );
}
