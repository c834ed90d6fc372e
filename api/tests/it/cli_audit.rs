//! `api admin` beside a running api, on its database: every command that changes something is
//! recorded in the audit log as the operator's, naming the host account that ran it, and the
//! Team page says so.

use domain::ids::BusinessId;
use std::process::{Command, Output};

use ::store::audit::{AuditEntry, actor_label};
use domain::{AuditAction, Role};
use serde_json::Value;
use test_support::dashboard::{Http, add_user};
use test_support::{Backend, TestApp, spawn_app, store};

test_support::on_both_databases!(every_changing_admin_command_is_recorded_as_the_host_account);

/// The account the tests, and so the commands they start, run as.
fn host_account() -> String {
    let out = Command::new("id").arg("-un").output().expect("id runs");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// `api admin ARGS…` against the app's database and key, as an operator runs it beside the api.
async fn admin(app: &TestApp, args: &[&str]) -> Output {
    let mut cmd = test_support::process::clean_command(test_support::process::api_binary());
    cmd.env("VAS_DATABASE__URL", &app.test_db.url)
        .env("VAS_CRYPTO__KEY", &app.crypto_key)
        .arg("admin")
        .args(args);
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("api runs"))
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The one entry of `business_id`'s log for `action`.
async fn the_entry(app: &TestApp, business_id: &BusinessId, action: AuditAction) -> AuditEntry {
    let mut rows: Vec<_> = store::audit_log(&app.db, business_id)
        .await
        .into_iter()
        .filter(|r| r.action == action)
        .collect();
    assert_eq!(rows.len(), 1, "one {action} entry: {rows:?}");
    rows.remove(0)
}

async fn every_changing_admin_command_is_recorded_as_the_host_account(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = format!("Operator ({}) via api admin", host_account());
    let id = app.business.id.as_str();
    let commands: [(&[&str], AuditAction); 6] = [
        (&["business", "approve-kyb", id], AuditAction::KybApproved),
        (
            // A public address: a configured database keeps the strict rule.
            &[
                "webhook",
                "set",
                id,
                "--mode",
                "test",
                "--url",
                "https://93.184.216.34/hook",
            ],
            AuditAction::WebhookUrlSet,
        ),
        (
            &["webhook", "rotate-secret", id, "--mode", "test"],
            AuditAction::WebhookSecretRotated,
        ),
        (
            &["key", "roll", id, "--mode", "test"],
            AuditAction::KeyRolled,
        ),
        (
            &["key", "revoke", id, "--mode", "live"],
            AuditAction::KeyRevoked,
        ),
        (
            &[
                "user",
                "create",
                "--business",
                id,
                "--email",
                "ops@example.com",
            ],
            AuditAction::UserAdded,
        ),
    ];
    for (args, action) in commands {
        admin(&app, args).await;
        let entry = the_entry(&app, &app.business.id, action).await;
        assert_eq!(actor_label(&entry), operator, "{args:?}");
        assert_eq!(entry.client_addr, None, "{args:?}");
    }

    let out = admin(&app, &["business", "create", "--name", "Beta Ltd"]).await;
    let created: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let beta = created["id"].as_str().unwrap();
    let entry = the_entry(
        &app,
        &BusinessId::unchecked(beta),
        AuditAction::BusinessCreated,
    )
    .await;
    assert_eq!(actor_label(&entry), operator);
    assert_eq!(entry.detail.as_deref(), Some("KYB pending"));

    // What an owner reads on the Team page.
    let (email, password) = add_user(&app, Role::Owner).await;
    let mut owner = Http::new(&app);
    owner.sign_in(&email, &password).await;
    let page = owner.get("/dashboard/test/team").await;
    for words in [
        operator.as_str(),
        AuditAction::KybApproved.label(),
        AuditAction::WebhookUrlSet.label(),
    ] {
        assert!(page.body.contains(words), "{words} on the Team page");
    }
}
