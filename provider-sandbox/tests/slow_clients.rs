//! The sandbox's listener bounds slow clients: a request head sent a byte at a time is cut off at
//! the configured header limit.

use std::time::{Duration, Instant};

use ops::config::SandboxConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
    let started = Instant::now();
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move {
        for byte in b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n" {
            if write.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let mut answer = Vec::new();
    // End of stream or a reset: either way the sandbox let go.
    let outcome =
        tokio::time::timeout(Duration::from_secs(10), read.read_to_end(&mut answer)).await;
    let elapsed = started.elapsed();
    writer.abort();
    println!("sandbox, one header byte a second: disconnected after {elapsed:?} (limit {limit:?})");
    assert!(outcome.is_ok(), "still connected after 10 s");
    assert!(answer.is_empty(), "nothing is answered");
    assert!(elapsed < limit + Duration::from_millis(1500), "{elapsed:?}");
}
