//! Requests cannot grow `/metrics`: a stream of made-up methods and paths (unauthenticated) adds
//! no series. Alone in its test binary because the metrics recorder is one per process.

use std::sync::Arc;

use api::AppState;
use crypto::Cipher;
use queue::broker::MemoryBroker;
use queue::relay::Relay;
use test_support::metrics::{assert_no_series_added, rss_kib};
use test_support::{Backend, TestDb};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_made_up_methods_and_paths_leave_metrics_the_same_size() {
    // The app alone (no relay, no workers): nothing else records metrics meanwhile.
    let test_db = TestDb::new(&Backend::Sqlite).await;
    let key = Cipher::generate_key();
    let config = test_support::test_config(&test_db.url, &key);
    let db = store::connect(&test_db.url, 1).await.unwrap();
    bootstrap::migrate(&db).await.unwrap();
    let relay = Relay::new(db.clone(), Arc::new(MemoryBroker::new()));
    let state = AppState::new(db, Arc::new(Cipher::new(&key, &[]).unwrap()), config, relay);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(api::runtime::serve(
        state,
        listener,
        CancellationToken::new(),
    ));
    let client = reqwest::Client::new();
    let made_up = |i: usize| reqwest::Method::from_bytes(format!("XMETHOD{i:04}").as_bytes());
    let send = |i: usize| {
        // Half to a route that exists (405), half to paths that do not (404).
        let path = if i.is_multiple_of(2) {
            "/v1/healthz".to_owned()
        } else {
            format!("/v1/no-such-path-{i:04}/{i}")
        };
        client
            .request(made_up(i).unwrap(), format!("{base}{path}"))
            .send()
    };
    let metrics = || async { client.get(format!("{base}/metrics")).send().await.unwrap() };

    // Warm up: one of each kind, and `/metrics` itself, so every series that can exist does.
    for i in [0, 1] {
        send(i).await.unwrap();
    }
    metrics().await;
    let before = metrics().await.text().await.unwrap();
    let rss_before = rss_kib();

    for i in 2..1002 {
        let status = send(i).await.unwrap().status().as_u16();
        assert!(matches!(status, 404 | 405), "XMETHOD{i:04}: {status}");
    }
    let after = metrics().await.text().await.unwrap();
    let rss_after = rss_kib();

    println!(
        "/metrics: {} bytes before, {} after 1,000 made-up methods; RSS {:?} KiB before, {:?} KiB after",
        before.len(),
        after.len(),
        rss_before,
        rss_after
    );
    assert!(
        after.contains(r#"http_requests_total{method="other",route="unmatched",status="404"} 501"#),
        "{after}"
    );
    assert!(
        after.contains(
            r#"http_requests_total{method="other",route="/v1/healthz",status="405"} 501"#
        ),
        "{after}"
    );
    assert!(
        !after.contains("XMETHOD"),
        "no method is a label of its own"
    );
    assert!(!after.contains("no-such-path"), "no raw path is a label");
    // Only digits of counts and sums grew (the old code added ~1,000 series, megabytes).
    assert_no_series_added(&before, &after);
}
