//! `VAS_AMQP__URL` may list several nodes of one cluster: a process connects to one that answers,
//! and `/metrics` says which (`rabbitmq_node`). The failover itself, on a real three-node
//! cluster, is `api/tests/it/ha_clusters.rs`.

use queue::broker::{Broker, RabbitBroker};
use test_support::RabbitPrefix;

/// A port nothing listens on: connections to it are refused at once.
fn dead_node() -> String {
    let port = test_support::http::free_port();
    format!("amqp://guest:guest@127.0.0.1:{port}/%2f")
}

#[tokio::test]
async fn a_node_that_does_not_answer_is_skipped_and_metrics_name_the_one_in_use() {
    let Some(url) = test_support::amqp_url() else {
        return;
    };
    let dead = dead_node();
    let prefix = RabbitPrefix::new(&url, 'n');
    let broker = RabbitBroker::connect(&format!("{dead},{url}"), &prefix.prefix)
        .await
        .expect("the second node answers");
    broker.declare().await.expect("declared");
    broker
        .publish("webhooks", b"x", false)
        .await
        .expect("published");
    assert_eq!(broker.depth("webhooks", false).await.unwrap(), 1);

    let metrics = ops::metrics::render();
    let live = url.split('@').nth(1).unwrap().split('/').next().unwrap();
    let dead_label = dead.split('@').nth(1).unwrap().split('/').next().unwrap();
    assert!(
        metrics.contains(&format!("rabbitmq_node{{node=\"{live}\"}} 1")),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!("rabbitmq_node{{node=\"{dead_label}\"}} 0")),
        "{metrics}"
    );
}

#[tokio::test]
async fn no_node_answering_is_one_error_naming_each() {
    let (a, b) = (dead_node(), dead_node());
    let error = RabbitBroker::connect(&format!("{a},{b}"), "t")
        .await
        .expect_err("nothing answers");
    let text = error.to_string();
    for url in [&a, &b] {
        let label = url.split('@').nth(1).unwrap().split('/').next().unwrap();
        assert!(text.contains(label), "{text}");
    }
    assert!(!text.contains("guest:guest"), "no password in: {text}");
}
