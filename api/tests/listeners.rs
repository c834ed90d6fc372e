//! The api's listener bounds slow clients (slowloris): a request head or body sent a byte at a
//! time is cut off at the configured limit (`VAS_HTTP__HEADER_READ_TIMEOUT_SECS`,
//! `VAS_HTTP__BODY_READ_TIMEOUT_SECS`; a cut-off body is recorded as the 408 it is answered),
//! and handlers still see the caller's address.

use std::num::NonZeroU64;
use std::time::Duration;

use test_support::http::trickle;
use test_support::{Backend, spawn_app_with};

test_support::on_both_databases!(
    a_head_sent_a_byte_a_second_is_disconnected_at_the_header_limit,
    a_body_sent_a_byte_a_second_is_answered_408_at_the_body_limit,
);

const LIMIT: Duration = Duration::from_secs(2);

fn two_seconds() -> NonZeroU64 {
    NonZeroU64::new(LIMIT.as_secs()).unwrap()
}

async fn a_head_sent_a_byte_a_second_is_disconnected_at_the_header_limit(backend: Backend) {
    let app = spawn_app_with(backend, |c| c.http.header_read_timeout_secs = two_seconds()).await;
    let (answer, closed) = trickle(
        app.addr,
        b"",
        b"GET /v1/healthz HTTP/1.1\r\nHost: localhost\r\nUser-Agent: slowloris\r\n\r\n",
    )
    .await;
    println!("api, one header byte a second: disconnected after {closed:?} (limit {LIMIT:?})");
    let closed = closed.expect("still connected after 10 s");
    assert!(answer.is_empty(), "nothing is answered: {answer}");
    assert!(
        closed < LIMIT + Duration::from_millis(1500),
        "disconnected after {closed:?}, the limit is {LIMIT:?}"
    );
}

async fn a_body_sent_a_byte_a_second_is_answered_408_at_the_body_limit(backend: Backend) {
    let app = spawn_app_with(backend, |c| c.http.body_read_timeout_secs = two_seconds()).await;
    app.approve_kyb().await;
    let body = serde_json::to_vec(&test_support::account_body(1, "wema-bank")).unwrap();
    let head = format!(
        "POST /v1/virtual-accounts HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\
         Idempotency-Key: slow-body\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        app.test_key(),
        body.len()
    );
    let (answer, closed) = trickle(app.addr, head.as_bytes(), &body).await;
    println!(
        "api, one body byte a second: {:?} after {closed:?} (limit {LIMIT:?})",
        answer.lines().next()
    );
    let closed = closed.expect("still connected after 10 s");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        closed < LIMIT + Duration::from_millis(1500),
        "answered after {closed:?}, the limit is {LIMIT:?}"
    );
    let list = app.get_json(app.test_key(), "/v1/virtual-accounts").await;
    assert_eq!(
        list["data"].as_array().map(Vec::len),
        Some(0),
        "nothing was created from the partial body: {list}"
    );
    // The operator's metrics record the 408 the client got, not the handler's view of a body
    // that never arrived. A binary of its own (not tests/it): no other test's POST to that route
    // is recorded by this process's metrics.
    let metrics = app.metrics().await;
    let create_requests: Vec<&str> = metrics
        .lines()
        .filter(|l| {
            l.starts_with("http_requests_total{")
                && l.contains(r#"method="POST""#)
                && l.contains(r#"virtual-accounts""#)
        })
        .collect();
    assert!(
        create_requests
            .iter()
            .any(|l| l.contains(r#"status="408""#)),
        "{create_requests:?}"
    );
    assert!(
        !create_requests
            .iter()
            .any(|l| l.contains(r#"status="413""#)),
        "{create_requests:?}"
    );
}
