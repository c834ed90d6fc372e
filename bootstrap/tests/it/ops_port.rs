//! A worker's ops port (`/healthz`, `/readyz`, `/metrics`) is served with the listeners' time
//! limits: a request head sent a byte at a time is cut off at the configured header limit.

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use ops::config::Config;
use queue::broker::MemoryBroker;
use test_support::http::trickle;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_head_sent_a_byte_a_second_is_disconnected_at_the_header_limit() {
    let mut config = Config::default();
    config.http.header_read_timeout_secs = NonZeroU64::new(2).unwrap();
    let db = sea_orm::Database::connect("sqlite::memory:").await.unwrap();
    let stop = CancellationToken::new();
    let address = bootstrap::serve_ops(&config, db, Arc::new(MemoryBroker::new()), stop.clone())
        .await
        .unwrap();

    let healthz = reqwest::get(format!("http://{address}/healthz"))
        .await
        .unwrap();
    assert_eq!(healthz.status().as_u16(), 200, "a prompt client is served");

    let (answer, closed) = trickle(
        address,
        b"",
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n",
    )
    .await;
    stop.cancel();
    println!("ops port, one header byte a second: disconnected after {closed:?} (limit 2 s)");
    let elapsed = closed.expect("still connected after 10 s");
    assert!(answer.is_empty(), "nothing is answered");
    assert!(elapsed < Duration::from_millis(3500), "{elapsed:?}");
}
