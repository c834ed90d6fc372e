//! Requests cannot grow the sandbox's `/metrics`: a stream of made-up methods and paths adds no
//! series. Alone in its test binary because the metrics recorder is one per process.

use ops::config::SandboxConfig;
use test_support::metrics::{assert_no_series_added, rss_kib};

#[tokio::test]
async fn a_thousand_made_up_methods_and_paths_leave_metrics_the_same_size() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = provider_sandbox::spawn(
        SandboxConfig::default(),
        listener,
        ops::http::Timeouts::default(),
    )
    .await
    .unwrap();
    let base = format!("http://{address}");
    let client = reqwest::Client::new();
    let send = |i: usize| {
        // Half to a route that exists (405), half to paths that do not.
        let path = if i.is_multiple_of(2) {
            "/healthz".to_owned()
        } else {
            format!("/no-such-bank-{i:04}/accounts/{i}")
        };
        let method = reqwest::Method::from_bytes(format!("XMETHOD{i:04}").as_bytes()).unwrap();
        client.request(method, format!("{base}{path}")).send()
    };
    let metrics = || async {
        client
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };

    // Warm up: one of each kind, and `/metrics` itself, so every series that can exist does.
    for i in [0, 1] {
        send(i).await.unwrap();
    }
    metrics().await;
    let before = metrics().await;
    let rss_before = rss_kib();
    for i in 2..1002 {
        let status = send(i).await.unwrap().status().as_u16();
        assert!((400..500).contains(&status), "XMETHOD{i:04}: {status}");
    }
    let after = metrics().await;
    let rss_after = rss_kib();

    println!(
        "sandbox /metrics: {} bytes before, {} after 1,000 made-up methods; RSS {:?} KiB before, {:?} KiB after",
        before.len(),
        after.len(),
        rss_before,
        rss_after
    );
    assert!(
        after.contains(
            r#"sandbox_requests_total{method="other",route="/healthz",status="405"} 501"#
        ),
        "{after}"
    );
    assert!(
        !after.contains("XMETHOD"),
        "no method is a label of its own"
    );
    assert!(!after.contains("no-such-bank"), "no raw path is a label");
    // Only digits of counts and sums grew (the old code added ~1,000 series, megabytes).
    assert_no_series_added(&before, &after);
}
