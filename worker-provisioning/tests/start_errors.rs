//! What an operator reads when worker-provisioning cannot start: its own stderr, naming the
//! setting at fault and never printing a secret (docs/operations/keys-and-secret-rotation.md).
//! Being this package's integration test, it also makes `cargo test --workspace` build the
//! binary afresh for the end-to-end tests that start it (`test_support::stack`).

use test_support::TestDb;
use test_support::http::free_port;
use test_support::process::refused_start;

/// Runs the worker on a database of its own with `env` until it gives up; its stderr.
fn start(env: &[(&str, String)]) -> String {
    let db = TestDb::sqlite();
    let mut all = vec![("VAS_DATABASE__URL", db.url.clone())];
    all.extend_from_slice(env);
    refused_start(env!("CARGO_BIN_EXE_worker-provisioning"), &all)
}

#[test]
fn a_key_that_is_not_32_bytes_is_refused_by_name_and_never_printed() {
    let stderr = start(&[
        ("VAS_CRYPTO__KEY", "not-a-key-s3cret".to_owned()),
        (
            "VAS_AMQP__URL",
            "amqp://guest:guest@127.0.0.1:1/%2f".to_owned(),
        ),
    ]);
    assert!(!stderr.contains("s3cret"), "{stderr}");
    assert!(
        stderr.contains("VAS_CRYPTO__KEY: an encryption key must be base64 of exactly 32 bytes"),
        "{stderr}"
    );
}

#[test]
fn a_broker_that_cannot_be_reached_is_named_without_its_password() {
    let port = free_port();
    let stderr = start(&[
        (
            "VAS_CRYPTO__KEY",
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".to_owned(),
        ),
        (
            "VAS_AMQP__URL",
            format!("amqp://guest:mq-s3cret@127.0.0.1:{port}/%2f"),
        ),
    ]);
    assert!(!stderr.contains("s3cret"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "connecting to RabbitMQ (amqp://guest:***@127.0.0.1:{port}/%2f)"
        )),
        "{stderr}"
    );
}
