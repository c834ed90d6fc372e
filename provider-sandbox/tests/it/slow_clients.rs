//! The sandbox's listener bounds slow clients: a request head sent a byte at a time is cut off at
//! the configured header limit.

use std::time::Duration;

use ops::config::SandboxConfig;
use test_support::http::trickle;

#[tokio::test]
async fn a_head_sent_a_byte_a_second_is_disconnected_at_the_header_limit() {
    let limit = Duration::from_secs(2);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let timeouts = ops::http::Timeouts {
        header_read: limit,
        ..ops::http::Timeouts::default()
    };
    let address = provider_sandbox::spawn(SandboxConfig::default(), listener, timeouts)
        .await
        .unwrap();
    let (answer, closed) = trickle(
        address,
        b"",
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n",
    )
    .await;
    println!("sandbox, one header byte a second: disconnected after {closed:?} (limit {limit:?})");
    let elapsed = closed.expect("still connected after 10 s");
    assert!(answer.is_empty(), "nothing is answered");
    assert!(elapsed < limit + Duration::from_millis(1500), "{elapsed:?}");
}
