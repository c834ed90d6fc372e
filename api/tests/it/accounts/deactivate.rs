//! Deactivating accounts: idempotent, validated, closed at the bank, refused for failed accounts.

use reqwest::StatusCode;
use serde_json::json;
use test_support::{Backend, account_body, json, spawn_app, store};

test_support::on_both_databases!(deactivation_is_idempotent_and_refuses_failed_accounts,);

async fn deactivation_is_idempotent_and_refuses_failed_accounts(backend: Backend) {
    let app = spawn_app(backend).await;
    let account = json(
        app.create(app.test_key(), "k", &account_body(1, "test-bank"))
            .await,
    )
    .await;
    let id = account["id"].as_str().unwrap();
    let path = format!("/v1/virtual-accounts/{id}/deactivate");
    let resp = app
        .post(
            app.test_key(),
            &path,
            Some(&json!({"reason": "customer left"})),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let first = json(resp).await;
    assert_eq!(first["status"], "deactivated");
    assert!(first["deactivatedAt"].is_string());
    let again = json(app.post(app.test_key(), &path, None).await).await;
    assert_eq!(again, first, "a second deactivation changes nothing");
    let close_jobs = store::jobs_of_kind_for(&app.db, "close", id).await;
    assert_eq!(close_jobs, 1);

    let resp = app
        .post(
            app.test_key(),
            &path,
            Some(&json!({"reason": "x".repeat(201)})),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let resp = app
        .post(app.test_key(), &path, Some(&json!({"why": "x"})))
        .await;
    assert_eq!(json(resp).await["errors"][0]["code"], "unknown_field");

    let other = json(
        app.create(app.test_key(), "k2", &account_body(2, "access-bank"))
            .await,
    )
    .await;
    let other_id = other["id"].as_str().unwrap();
    store::set_account_status(&app.db, other_id, "failed").await;
    let resp = app.deactivate(app.test_key(), other_id).await;
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert_eq!(json(resp).await["code"], "invalid_state");

    let resp = app
        .post(
            app.test_key(),
            "/v1/virtual-accounts/va_nope/deactivate",
            None,
        )
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
}
