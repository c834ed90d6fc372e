//! `/readyz`'s answer (the api's and every worker's): 200 while the database answers, 503 naming
//! the database once it does not.

use axum::http::StatusCode;
use queue::broker::MemoryBroker;
use serde_json::json;

#[tokio::test]
async fn readiness_names_what_does_not_answer() {
    let db = sea_orm::Database::connect("sqlite::memory:").await.unwrap();
    let broker = MemoryBroker::new();
    let (status, body) = bootstrap::readiness(&db, &broker).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::to_value(&body.0).unwrap(),
        json!({"status": "ok", "database": "ok", "broker": "ok"})
    );

    db.clone().close().await.unwrap();
    let (status, body) = bootstrap::readiness(&db, &broker).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        serde_json::to_value(&body.0).unwrap(),
        json!({"status": "unavailable", "database": "unreachable", "broker": "ok"})
    );
}
