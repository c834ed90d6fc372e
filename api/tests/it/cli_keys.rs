//! `api admin key roll|revoke` as an operator runs them, against the database a running api
//! uses: the printed key works at once, the old one stops as asked.

use std::process::{Command, Output};

use reqwest::StatusCode;
use serde_json::Value;
use test_support::{Backend, TestApp, spawn_app};

test_support::on_both_databases!(
    roll_prints_a_working_key_and_the_old_one_stops,
    roll_with_a_grace_keeps_both_and_refuses_more_than_seven_days,
    revoke_stops_every_working_key,
);

/// Runs `api admin key ARGS…` against the app's database; its output.
async fn admin_key(app: &TestApp, args: &[&str]) -> Output {
    let mut cmd = Command::new(test_support::process::api_binary());
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("VAS_DATABASE__URL", &app.test_db.url)
        .args(["admin", "key"])
        .args(args);
    tokio::task::spawn_blocking(move || cmd.output().expect("api runs"))
        .await
        .unwrap()
}

async fn admin_key_ok(app: &TestApp, args: &[&str]) -> Value {
    let out = admin_key(app, args).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).expect("one JSON object")
}

async fn status(app: &TestApp, key: &str) -> StatusCode {
    app.get(key, "/v1/virtual-accounts").await.status()
}

async fn roll_prints_a_working_key_and_the_old_one_stops(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = app.business.id.clone();
    let old = app.test_key().to_owned();
    assert_eq!(status(&app, &old).await, StatusCode::OK);
    let out = admin_key(&app, &["roll", &id, "--mode", "test"]).await;
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let rolled: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let key = rolled["secretKey"]
        .as_str()
        .expect("the new key")
        .to_owned();
    assert!(key.starts_with("sk_test_"), "{key}");
    assert!(
        chrono::DateTime::parse_from_rfc3339(rolled["previousKeyExpiresAt"].as_str().unwrap())
            .is_ok()
    );
    assert!(
        !stderr.contains(&key),
        "the key is printed once, on stdout only"
    );
    assert_eq!(status(&app, &key).await, StatusCode::OK);
    assert_eq!(status(&app, &old).await, StatusCode::UNAUTHORIZED);

    let out = admin_key(&app, &["roll", "biz_nope", "--mode", "test"]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no business biz_nope"));
}

async fn roll_with_a_grace_keeps_both_and_refuses_more_than_seven_days(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = app.business.id.clone();
    let old = app.test_key().to_owned();

    let out = admin_key(&app, &["roll", &id, "--mode", "test", "--grace", "604801"]).await;
    assert!(!out.status.success(), "more than 7 days is refused");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("at most 7 days"), "{stderr}");
    assert!(out.stdout.is_empty(), "no key was issued");
    assert_eq!(status(&app, &old).await, StatusCode::OK, "nothing changed");

    let before = chrono::Utc::now();
    let rolled = admin_key_ok(&app, &["roll", &id, "--mode", "test", "--grace", "604800"]).await;
    let after = chrono::Utc::now();
    let until = chrono::DateTime::parse_from_rfc3339(
        rolled["previousKeyExpiresAt"].as_str().expect("a time"),
    )
    .unwrap()
    .to_utc();
    let week = chrono::TimeDelta::days(7);
    // Milliseconds in the printed time.
    let slack = chrono::TimeDelta::milliseconds(1);
    assert!(
        until >= before + week - slack && until <= after + week,
        "{until}"
    );
    let key = rolled["secretKey"].as_str().unwrap();
    assert_eq!(status(&app, key).await, StatusCode::OK);
    assert_eq!(status(&app, &old).await, StatusCode::OK, "within the grace");
}

async fn revoke_stops_every_working_key(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = app.business.id.clone();
    let old = app.test_key().to_owned();
    let rolled = admin_key_ok(&app, &["roll", &id, "--mode", "test", "--grace", "3600"]).await;
    let new = rolled["secretKey"].as_str().unwrap().to_owned();
    let revoked = admin_key_ok(&app, &["revoke", &id, "--mode", "test"]).await;
    assert_eq!(revoked["revokedKeys"], 2);
    assert_eq!(revoked["mode"], "test");
    assert_eq!(status(&app, &old).await, StatusCode::UNAUTHORIZED);
    assert_eq!(status(&app, &new).await, StatusCode::UNAUTHORIZED);
    // The way back: a roll issues a fresh key.
    let fresh = admin_key_ok(&app, &["roll", &id, "--mode", "test"]).await;
    assert_eq!(fresh["previousKeyExpiresAt"], Value::Null);
    let fresh = fresh["secretKey"].as_str().unwrap();
    assert_eq!(status(&app, fresh).await, StatusCode::OK);
}
