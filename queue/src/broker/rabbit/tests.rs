use super::*;

#[test]
fn a_list_of_nodes_is_comma_separated() {
    let nodes = parse_nodes(
        "amqp://u:p@10.0.0.1:5672/%2f, amqp://u:p@rabbit-2/%2f,,amqp://u:p@rabbit-3:5673/vas",
    )
    .unwrap();
    let labels: Vec<_> = nodes.iter().map(|n| n.label.as_str()).collect();
    assert_eq!(labels, ["10.0.0.1:5672", "rabbit-2:5672", "rabbit-3:5673"]);
    assert_eq!(nodes[1].url, "amqp://u:p@rabbit-2/%2f");
    assert_eq!(parse_nodes("amqp://h/%2f").unwrap().len(), 1);
}

#[test]
fn a_node_asks_for_a_short_heartbeat_unless_its_url_sets_one() {
    let nodes = parse_nodes("amqp://u:p@h1/%2f,amqp://u:p@h2/%2f?heartbeat=30").unwrap();
    let heartbeats: Vec<_> = nodes.iter().map(|n| n.uri.query.heartbeat).collect();
    assert_eq!(heartbeats, [Some(HEARTBEAT), Some(30)]);
}

#[test]
fn an_empty_or_invalid_list_is_refused() {
    assert!(parse_nodes(" , ").is_err());
    assert!(parse_nodes("amqp://h:5672/%2f,http://h").is_err());
    let Err(QueueError::Other(error)) = parse_nodes("amqp://h/%2f, amqp:u:s3cret@h2") else {
        panic!("a URL that cannot be a base is refused");
    };
    assert!(!error.contains("s3cret"), "{error}");
}
