//! The dashboard's Developers and Team pages over plain HTTP (docs/dashboard.md): keys rolled and
//! revoked from the page work (or stop) on the JSON API at once, a new key or secret or password is
//! in exactly one response body, roles gate every control and every POST, live changes need the
//! owner's password, webhook URLs follow `api admin webhook set`'s rules, test events arrive
//! signed, the last owner stays, and every change is in the audit log (never a secret). The
//! browser tests (dashboard_team_browser.rs) drive the same pages in Chromium.

use domain::ids::UserId;
use std::time::Duration;

use domain::{AuditAction, Mode, Role};
use entities::api_key;
use reqwest::StatusCode;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use store::audit::{self, AuditEntry};
use store::keys::{self, KeyAction};
use test_support::dashboard::{Answer, Http, add_user, find_user, sign_in_status, stored_user};
use test_support::{
    Backend, Receiver, Reply, TestApp, account_body, eventually, spawn_app, spawn_app_with,
    start_webhooks_worker,
};

test_support::on_both_databases!(
    a_rolled_key_works_at_once_and_the_old_one_stops_at_once,
    a_new_key_is_in_exactly_one_response_body,
    a_grace_keeps_the_old_key_working_until_it_ends,
    revoking_a_key_stops_it_at_once_and_keeps_the_other,
    a_viewer_has_no_controls_and_every_post_answers_403,
    live_keys_are_for_owners_and_changes_need_the_password,
    webhook_urls_follow_the_admin_rules,
    an_operator_may_allow_webhooks_to_this_machine_never_to_link_local,
    a_test_event_arrives_signed_and_a_rotated_secret_is_shown_once,
    team_add_change_and_remove_users,
    the_last_owner_cannot_be_removed_or_demoted,
    two_owners_demoting_each_other_at_once_leave_an_owner,
    profile_changes_and_sign_ins_are_audited,
    the_audit_log_is_paged_and_never_holds_a_secret,
    admin_key_commands_are_audited_as_the_operator,
    team_changes_need_the_password_and_wrong_ones_count_toward_the_lock,
);

const WITHIN: Duration = Duration::from_secs(20);

async fn signed_in(app: &TestApp, role: Role) -> (Http, String, String) {
    let (email, password) = add_user(app, role).await;
    let mut http = Http::new(app);
    http.sign_in(&email, &password).await;
    (http, email, password)
}

/// The value of the first hidden input named `name` on the page.
fn hidden(body: &str, name: &str) -> String {
    let marker = format!(r#"name="{name}" value=""#);
    let start = body
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} on {body}"))
        + marker.len();
    let end = body[start..].find('"').unwrap();
    body[start..start + end].to_owned()
}

/// The text of `<code class="secret-value" id="{id}">`, when the page shows one.
fn shown_once(body: &str, id: &str) -> Option<String> {
    let marker = format!(r#"<code class="secret-value" id="{id}">"#);
    let start = body.find(&marker)? + marker.len();
    let end = body[start..].find("</code>")?;
    Some(body[start..start + end].to_owned())
}

/// The fields of the Developers page's roll form as the page gave them.
fn roll_fields(page: &Answer, expire: &str) -> Vec<(String, String)> {
    vec![
        ("form_token".into(), page.form_token()),
        ("current_key".into(), hidden(&page.body, "current_key")),
        ("expire".into(), expire.into()),
    ]
}

async fn post(http: &mut Http, path: &str, fields: &[(String, String)]) -> Answer {
    let fields: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    http.post(path, &fields).await
}

/// Opens the Developers page and rolls the key with the old one stopping at `expire`.
async fn roll(http: &mut Http, mode: &str, expire: &str) -> Answer {
    let page = http.get(&format!("/dashboard/{mode}/developers")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let fields = roll_fields(&page, expire);
    post(
        http,
        &format!("/dashboard/{mode}/developers/keys/roll"),
        &fields,
    )
    .await
}

async fn status_with(app: &TestApp, key: &str) -> StatusCode {
    app.get(key, "/v1/virtual-accounts").await.status()
}

/// The business's audit log, newest first.
async fn audit_rows(app: &TestApp) -> Vec<AuditEntry> {
    test_support::store::audit_log(&app.db, &app.business.id).await
}

async fn rows_of(app: &TestApp, action: AuditAction) -> Vec<AuditEntry> {
    audit_rows(app)
        .await
        .into_iter()
        .filter(|r| r.action == action)
        .collect()
}

async fn a_rolled_key_works_at_once_and_the_old_one_stops_at_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let (mut http, email, _) = signed_in(&app, Role::Developer).await;
    let old = app.test_key().to_owned();
    let page = http.get("/dashboard/test/developers").await;
    let last_four = &old[old.len() - 4..];
    assert!(
        page.body.contains(&format!("sk_test_…{last_four}")),
        "the working key as prefix and last four"
    );
    assert!(!page.body.contains(&old), "never the key itself");

    let rolled = roll(&mut http, "test", "now").await;
    assert_eq!(rolled.status, 200, "{}", rolled.body);
    let new = shown_once(&rolled.body, "new-key").expect("the new key is shown");
    assert!(new.starts_with("sk_test_"));
    assert_eq!(status_with(&app, &old).await, StatusCode::UNAUTHORIZED);
    let created = app
        .create(&new, "after-roll", &account_body(1, "test-bank"))
        .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    assert!(rolled.body.contains("The previous key has stopped working"));

    let rows = rows_of(&app, AuditAction::KeyRolled).await;
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.actor_email.as_deref(), Some(email.as_str()));
    assert_eq!(row.mode, Some(Mode::Test));
    assert_eq!(row.client_addr.as_deref(), Some("127.0.0.1"));
    assert_eq!(
        row.target.as_deref(),
        Some(format!("sk_test_…{}", &new[new.len() - 4..]).as_str())
    );
    assert!(
        row.detail.as_deref().unwrap().contains("stopped at once"),
        "{row:?}"
    );
}

async fn a_new_key_is_in_exactly_one_response_body(backend: Backend) {
    let app = spawn_app(backend).await;
    let (mut http, _, _) = signed_in(&app, Role::Owner).await;
    let page = http.get("/dashboard/test/developers").await;
    let fields = roll_fields(&page, "1h");
    let rolled = post(&mut http, "/dashboard/test/developers/keys/roll", &fields).await;
    assert_eq!(rolled.status, 200);
    assert_eq!(rolled.header("cache-control"), "no-store");
    let new = shown_once(&rolled.body, "new-key").unwrap();

    // A reload sends the same form again: it rolls nothing and shows nothing.
    let again = post(&mut http, "/dashboard/test/developers/keys/roll", &fields).await;
    assert_eq!(again.status, 409);
    assert!(again.body.contains("This form was sent before"));
    assert!(shown_once(&again.body, "new-key").is_none());
    // Going back (a GET of the page) or anywhere else shows only its last four.
    let back = http.get("/dashboard/test/developers").await;
    assert!(back.body.contains(&new[new.len() - 4..]));
    for path in [
        "/dashboard/test/developers",
        "/dashboard/test/developers?done=revoked",
        "/dashboard/test/accounts",
        "/dashboard/test/team",
        "/dashboard/profile",
    ] {
        http.get(path).await;
    }
    let bodies = http.seen.iter().filter(|b| b.contains(&new)).count();
    assert_eq!(bodies, 1, "the new key is in one response body ever");
    assert!(status_with(&app, &new).await.is_success());
    assert_eq!(rows_of(&app, AuditAction::KeyRolled).await.len(), 1);
    // Nothing at rest holds it either.
    assert!(!String::from_utf8_lossy(&app.test_db.raw_contents()).contains(&new));
}

async fn a_grace_keeps_the_old_key_working_until_it_ends(backend: Backend) {
    let app = spawn_app(backend).await;
    let (mut http, _, _) = signed_in(&app, Role::Developer).await;
    let old = app.test_key().to_owned();
    let rolled = roll(&mut http, "test", "1h").await;
    let new = shown_once(&rolled.body, "new-key").unwrap();
    assert!(rolled.body.contains("The previous key keeps working until"));
    assert!(
        status_with(&app, &old).await.is_success(),
        "within the grace"
    );
    assert!(status_with(&app, &new).await.is_success());
    // The old key's end is an hour from now.
    let expiring = api_key::Entity::find()
        .filter(api_key::Column::BusinessId.eq(app.business.id.as_str()))
        .filter(api_key::Column::ExpiresAt.is_not_null())
        .all(&app.db)
        .await
        .unwrap();
    assert_eq!(expiring.len(), 1);
    let left = expiring[0].expires_at.unwrap() - chrono::Utc::now();
    assert!(
        (3500..=3600).contains(&left.num_seconds()),
        "{left:?} left of the grace"
    );
    let page = http.get("/dashboard/test/developers").await;
    assert!(
        page.body.contains("Expiring"),
        "the page says which key expires"
    );

    // The clock is driven past the grace: the old key stops, the new one works on.
    api_key::Entity::update_many()
        .col_expr(
            api_key::Column::ExpiresAt,
            Expr::value(chrono::Utc::now() - chrono::Duration::seconds(1)),
        )
        .filter(api_key::Column::Id.eq(expiring[0].id.as_str()))
        .exec(&app.db)
        .await
        .unwrap();
    assert_eq!(status_with(&app, &old).await, StatusCode::UNAUTHORIZED);
    assert!(status_with(&app, &new).await.is_success());
    let page = http.get("/dashboard/test/developers").await;
    assert!(
        !page.body.contains("Expiring"),
        "only working keys are listed"
    );
}

async fn revoking_a_key_stops_it_at_once_and_keeps_the_other(backend: Backend) {
    let app = spawn_app(backend).await;
    let (mut http, email, _) = signed_in(&app, Role::Developer).await;
    let old = app.test_key().to_owned();
    let rolled = roll(&mut http, "test", "7d").await;
    let new = shown_once(&rolled.body, "new-key").unwrap();
    let working = keys::list_working(&app.db, &app.business.id, Mode::Test, chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(
        working.len(),
        2,
        "at most two working keys: new and expiring"
    );
    let old_id = working
        .iter()
        .find(|k| k.expires_at.is_some())
        .unwrap()
        .id
        .clone();

    let token = http.form_token_of("/dashboard/test/developers").await;
    let revoked = http
        .post_form(
            "/dashboard/test/developers/keys/revoke",
            &token,
            &[("key_id", &old_id)],
        )
        .await;
    http.assert_done(revoked, "The key was revoked").await;
    assert_eq!(status_with(&app, &old).await, StatusCode::UNAUTHORIZED);
    assert!(status_with(&app, &new).await.is_success());
    // Again: it has stopped already, nothing changes.
    let again = http
        .post_form(
            "/dashboard/test/developers/keys/revoke",
            &token,
            &[("key_id", &old_id)],
        )
        .await;
    assert_eq!(again.status, 409);
    assert!(status_with(&app, &new).await.is_success());
    let rows = rows_of(&app, AuditAction::KeyRevoked).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].actor_email.as_deref(), Some(email.as_str()));
    assert_eq!(
        rows[0].target.as_deref(),
        Some(format!("sk_test_…{}", &old[old.len() - 4..]).as_str())
    );
}

async fn a_viewer_has_no_controls_and_every_post_answers_403(backend: Backend) {
    let app = spawn_app(backend).await;
    app.approve_kyb().await;
    let receiver = Receiver::start().await;
    app.set_webhook_url(&app.business.id, Mode::Test, &receiver.url)
        .await;
    let (mut viewer, _, _) = signed_in(&app, Role::Viewer).await;
    let (mut developer, _, _) = signed_in(&app, Role::Developer).await;
    let (mut owner, _, _) = signed_in(&app, Role::Owner).await;
    let owner_page = owner.get("/dashboard/test/developers").await;
    let key_id = hidden(&owner_page.body, "current_key");
    let version = hidden(&owner_page.body, "secret_version");
    let before = audit_rows(&app).await.len();

    for mode in ["test", "live"] {
        for path in ["accounts", "developers", "team"] {
            let page = viewer.get(&format!("/dashboard/{mode}/{path}")).await;
            for control in [
                "/keys/roll",
                "/keys/revoke",
                "/webhook",
                "/resend",
                "/team/users",
            ] {
                assert!(
                    !page.body.contains(control),
                    "a viewer sees no {control} control on {mode}/{path}"
                );
            }
        }
    }
    // The viewer's own, valid form token does not make these theirs.
    let token = viewer.form_token_of("/dashboard/test/accounts").await;
    let posts: [(&str, Vec<(&str, &str)>); 9] = [
        (
            "/dashboard/test/developers/keys/roll",
            vec![("current_key", &key_id), ("expire", "now")],
        ),
        (
            "/dashboard/test/developers/keys/revoke",
            vec![("key_id", &key_id)],
        ),
        (
            "/dashboard/test/developers/webhook",
            vec![("url", "http://127.0.0.1:9/evil")],
        ),
        (
            "/dashboard/test/developers/webhook/rotate",
            vec![("secret_version", &version)],
        ),
        ("/dashboard/test/developers/webhook/test", vec![]),
        (
            "/dashboard/test/team/users",
            vec![("email", "mallory@example.com"), ("role", "owner")],
        ),
        (
            "/dashboard/test/team/users/role",
            vec![("user_id", "usr_x"), ("role", "owner")],
        ),
        (
            "/dashboard/test/team/users/remove",
            vec![("user_id", "usr_x")],
        ),
        (
            "/dashboard/live/developers/keys/roll",
            vec![("current_key", ""), ("expire", "now")],
        ),
    ];
    for (path, extra) in &posts {
        let mut fields = vec![("form_token", token.as_str())];
        fields.extend(extra.iter().copied());
        let answer = viewer.post(path, &fields).await;
        assert_eq!(answer.status, 403, "{path}");
        assert!(!answer.body.contains("sk_test_"), "{path}");
    }
    // A developer: test-mode Developers is theirs, the team and live keys are not.
    let token = developer.form_token_of("/dashboard/test/accounts").await;
    for (path, extra) in &posts[5..] {
        let mut fields = vec![("form_token", token.as_str())];
        fields.extend(extra.iter().copied());
        assert_eq!(developer.post(path, &fields).await.status, 403, "{path}");
    }
    let live = developer.get("/dashboard/live/developers").await;
    assert_eq!(live.status, 403);
    assert!(live.body.contains("Live keys and webhooks are managed by"));

    // Nothing changed: the key works, no event, no new user, nothing in the audit log.
    assert!(status_with(&app, app.test_key()).await.is_success());
    assert!(status_with(&app, app.live_key()).await.is_success());
    assert_eq!(audit_rows(&app).await.len(), before);
    assert!(receiver.requests().is_empty());
}

async fn live_keys_are_for_owners_and_changes_need_the_password(backend: Backend) {
    let app = spawn_app(backend).await;
    let (mut owner, email, password) = signed_in(&app, Role::Owner).await;
    assert_eq!(
        owner.get("/dashboard/live/developers").await.status,
        403,
        "no live mode before KYB"
    );
    app.approve_kyb().await;
    let page = owner.get("/dashboard/live/developers").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("sk_live_…"));
    assert!(page.body.contains(r#"id="roll-password""#));
    let old = app.live_key().to_owned();

    let mut fields = roll_fields(&page, "now");
    fields.push(("password".into(), "not my password".into()));
    let refused = post(&mut owner, "/dashboard/live/developers/keys/roll", &fields).await;
    assert_eq!(refused.status, 422);
    assert!(refused.body.contains("Your password was not right"));
    assert!(shown_once(&refused.body, "new-key").is_none());
    assert!(status_with(&app, &old).await.is_success(), "nothing rolled");

    fields.pop();
    fields.push(("password".into(), password.clone()));
    let rolled = post(&mut owner, "/dashboard/live/developers/keys/roll", &fields).await;
    assert_eq!(rolled.status, 200, "{}", rolled.body);
    let new = shown_once(&rolled.body, "new-key").unwrap();
    assert!(new.starts_with("sk_live_"));
    assert_eq!(status_with(&app, &old).await, StatusCode::UNAUTHORIZED);
    assert!(status_with(&app, &new).await.is_success());
    // The test key was not touched.
    assert!(status_with(&app, app.test_key()).await.is_success());
    let rows = rows_of(&app, AuditAction::KeyRolled).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].mode, Some(Mode::Live));
    assert_eq!(rows[0].actor_email.as_deref(), Some(email.as_str()));

    // The live webhook URL takes the password too.
    let no_password = owner
        .submit(
            "/dashboard/live/developers",
            "/dashboard/live/developers/webhook",
            &[("url", "https://example.com/hooks")],
        )
        .await;
    assert_eq!(no_password.status, 422);
    assert!(rows_of(&app, AuditAction::WebhookUrlSet).await.is_empty());
}

/// The Developers page's webhook form in test mode, sent with `url`: the answer to its POST.
async fn set_test_webhook(http: &mut Http, token: &str, url: &str) -> Answer {
    http.post_form("/dashboard/test/developers/webhook", token, &[("url", url)])
        .await
}

/// The Developers page's "send a test webhook" button in test mode: the answer to its POST.
async fn send_test_webhook(http: &mut Http, token: &str) -> Answer {
    http.post_form("/dashboard/test/developers/webhook/test", token, &[])
        .await
}

async fn webhook_urls_follow_the_admin_rules(backend: Backend) {
    // As in production: no private addresses allowed.
    let app = spawn_app_with(backend, |c| c.webhooks.allow_private_addresses = false).await;
    app.approve_kyb().await;
    let (mut owner, _, password) = signed_in(&app, Role::Owner).await;
    let token = owner.form_token_of("/dashboard/test/developers").await;
    let cases = [
        ("test", "not a url", "The URL is not valid"),
        (
            "test",
            "ftp://example.com/x",
            "The URL must be http or https",
        ),
        (
            "live",
            "http://example.com/x",
            "Live webhook URLs must be https",
        ),
        ("live", "https://127.0.0.1/x", "loopback address"),
        ("live", "https://10.1.2.3/x", "private address"),
        // Test mode too: its replies are shown to the developer.
        (
            "test",
            "http://127.0.0.1:9/hook",
            "127.0.0.1 is a loopback address",
        ),
        ("test", "http://[::1]:9/hook", "::1 is a loopback address"),
        (
            "test",
            "http://10.0.0.1/hook",
            "10.0.0.1 is a private address",
        ),
        (
            "test",
            "http://169.254.169.254/latest/meta-data",
            "169.254.169.254 is a link-local address",
        ),
        ("test", "http://localhost:9/hook", "a loopback address"),
    ];
    for (mode, url, why) in cases {
        let answer = owner
            .post_form(
                &format!("/dashboard/{mode}/developers/webhook"),
                &token,
                &[("url", url), ("password", &password)],
            )
            .await;
        assert_eq!(answer.status, 422, "{mode} {url}");
        assert!(answer.body.contains(why), "{mode} {url}: {}", answer.body);
        assert!(
            !why.contains("address") || answer.body.contains("public addresses only"),
            "{mode} {url}: {}",
            answer.body
        );
        assert!(
            answer
                .body
                .contains(&format!(r#"value="{}""#, url.replace('&', "&amp;"))),
            "what was typed stays in the field"
        );
    }
    assert!(rows_of(&app, AuditAction::WebhookUrlSet).await.is_empty());
    assert_eq!(
        store::businesses::webhook_url(&app.db, &app.business.id, Mode::Test)
            .await
            .unwrap(),
        None
    );
    let set = set_test_webhook(&mut owner, &token, "http://93.184.216.34/hook").await;
    assert_eq!(set.status, 303);
    let page = owner.follow(set).await;
    assert!(page.body.contains("Webhook URL saved"));
    let rows = rows_of(&app, AuditAction::WebhookUrlSet).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].target.as_deref(), Some("http://93.184.216.34/hook"));
}

async fn an_operator_may_allow_webhooks_to_this_machine_never_to_link_local(backend: Backend) {
    // The test app allows private addresses, as `api dev` and an operator's setting do.
    let app = spawn_app(backend).await;
    assert!(app.config.webhooks.allow_private_addresses);
    let (mut owner, _, _) = signed_in(&app, Role::Owner).await;
    let token = owner.form_token_of("/dashboard/test/developers").await;
    let metadata = set_test_webhook(&mut owner, &token, "http://169.254.169.254/latest").await;
    assert_eq!(metadata.status, 422);
    assert!(
        metadata.body.contains("link-local address"),
        "{}",
        metadata.body
    );
    let set = set_test_webhook(&mut owner, &token, "http://127.0.0.1:9/hook").await;
    assert_eq!(set.status, 303);
    let page = owner.follow(set).await;
    assert!(page.body.contains("Webhook URL saved"));
    assert!(page.body.contains("http://127.0.0.1:9/hook"));
    assert_eq!(
        store::businesses::webhook_url(&app.db, &app.business.id, Mode::Test)
            .await
            .unwrap()
            .as_deref(),
        Some("http://127.0.0.1:9/hook")
    );
}

async fn a_test_event_arrives_signed_and_a_rotated_secret_is_shown_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::ok().body("got it"));
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());
    let (mut http, email, _) = signed_in(&app, Role::Developer).await;
    let token = http.form_token_of("/dashboard/test/developers").await;
    let refused = send_test_webhook(&mut http, &token).await;
    assert_eq!(refused.status, 409, "no URL yet");
    assert!(refused.body.contains("Set a webhook URL first"));
    let set = set_test_webhook(&mut http, &token, &receiver.url).await;
    assert_eq!(set.status, 303);
    let sent = send_test_webhook(&mut http, &token).await;
    assert_eq!(sent.status, 303);
    let requests = receiver.wait_for(1, WITHIN).await;
    let first = &requests[0];
    assert_eq!(first.json()["type"], "webhook.test");
    assert_eq!(first.json()["mode"], "test");
    let old_secret = app.business.test.webhook_secret.clone();
    assert!(first.verifies(&old_secret), "Standard Webhooks verifies it");
    // The page shows its delivery attempt.
    let event_id = first.webhook_id();
    eventually(WITHIN, async || {
        let page = http.get("/dashboard/test/developers").await;
        if page.body.contains(&event_id)
            && page.body.contains(r#"<span class="badge good">200</span>"#)
        {
            Ok(())
        } else {
            Err("the attempt is not on the page yet".to_owned())
        }
    })
    .await;
    // A 2xx answer's body is not kept (docs/api/events-and-webhooks.md: only a non-2xx one's first
    // 256 bytes).
    assert!(
        !http
            .get("/dashboard/test/developers")
            .await
            .body
            .contains("got it")
    );

    // Rotating: the new secret is shown once; the old one keeps signing beside it.
    let page = http.get("/dashboard/test/developers").await;
    let fields = vec![
        ("form_token".to_owned(), page.form_token()),
        (
            "secret_version".to_owned(),
            hidden(&page.body, "secret_version"),
        ),
    ];
    let rotated = post(
        &mut http,
        "/dashboard/test/developers/webhook/rotate",
        &fields,
    )
    .await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let new_secret = shown_once(&rotated.body, "new-secret").unwrap();
    assert!(new_secret.starts_with("whsec_"));
    let again = post(
        &mut http,
        "/dashboard/test/developers/webhook/rotate",
        &fields,
    )
    .await;
    assert_eq!(again.status, 409, "a form sent again rotates nothing");
    assert!(shown_once(&again.body, "new-secret").is_none());
    let page = http.get("/dashboard/test/developers").await;
    assert!(page.body.contains("The previous secret also signs"));
    let sent = send_test_webhook(&mut http, &token).await;
    assert_eq!(sent.status, 303);
    let requests = receiver.wait_for(2, WITHIN).await;
    let second = &requests[1];
    assert!(second.verifies(&new_secret), "signed with the new secret");
    assert!(
        second.verifies(&old_secret),
        "and, for 24 hours, the old one"
    );
    let bodies = http.seen.iter().filter(|b| b.contains(&new_secret)).count();
    assert_eq!(bodies, 1, "the new secret is in one response body ever");
    assert!(!http.seen.iter().any(|b| b.contains(&old_secret)));

    assert_eq!(rows_of(&app, AuditAction::WebhookTestSent).await.len(), 2);
    let rotated = rows_of(&app, AuditAction::WebhookSecretRotated).await;
    assert_eq!(rotated.len(), 1);
    assert_eq!(rotated[0].actor_email.as_deref(), Some(email.as_str()));
}

async fn team_add_change_and_remove_users(backend: Backend) {
    let app = spawn_app(backend).await;
    let (mut owner, owner_email, owner_password) = signed_in(&app, Role::Owner).await;
    let page = owner.get("/dashboard/test/team").await;
    assert!(page.body.contains(&owner_email));
    let token = page.form_token();
    let fields = [
        ("form_token", token.as_str()),
        ("email", "Ngozi@Example.com"),
        ("role", "developer"),
        ("password", owner_password.as_str()),
    ];
    let added = owner.post("/dashboard/test/team/users", &fields).await;
    assert_eq!(added.status, 200, "{}", added.body);
    let password = shown_once(&added.body, "new-password").expect("the password, once");
    assert!(
        added
            .body
            .contains("ngozi@example.com was added as Developer")
    );
    // Sent again (a reload): the e-mail is taken, no password is shown.
    let again = owner.post("/dashboard/test/team/users", &fields).await;
    assert_eq!(again.status, 409);
    assert!(shown_once(&again.body, "new-password").is_none());
    assert_eq!(
        owner.seen.iter().filter(|b| b.contains(&password)).count(),
        1
    );

    let mut ngozi = Http::new(&app);
    ngozi.sign_in("ngozi@example.com", &password).await;
    assert_eq!(ngozi.get("/dashboard/test/developers").await.status, 200);

    let user_id = stored_user(&app, "ngozi@example.com").await.id;
    let changed = owner
        .post_form(
            "/dashboard/test/team/users/role",
            &token,
            &[
                ("user_id", &user_id),
                ("role", "viewer"),
                ("password", &owner_password),
            ],
        )
        .await;
    assert_eq!(changed.status, 303);
    assert_eq!(
        ngozi.get("/dashboard/test/developers").await.status,
        403,
        "a role change applies to the next page"
    );
    let removed = owner
        .post_form(
            "/dashboard/test/team/users/remove",
            &token,
            &[("user_id", &user_id), ("password", &owner_password)],
        )
        .await;
    assert_eq!(removed.status, 303);
    assert!(owner.follow(removed).await.body.contains("User removed"));
    let after = ngozi.get("/dashboard/test/accounts").await;
    assert_eq!(after.status, 303, "their session ended at once");
    assert!(after.location().starts_with("/dashboard/sign-in"));
    assert_eq!(
        ngozi
            .sign_in_answer("ngozi@example.com", &password)
            .await
            .status,
        401
    );
    // Another business's user is not this owner's to change.
    let other = app
        .other_business("Other Ltd", domain::KybStatus::Pending)
        .await;
    let (stranger, _) = test_support::dashboard::add_user_to(&app, &other.id, Role::Viewer).await;
    let stranger_id = stored_user(&app, &stranger).await.id;
    let refused = owner
        .post_form(
            "/dashboard/test/team/users/remove",
            &token,
            &[("user_id", &stranger_id), ("password", &owner_password)],
        )
        .await;
    assert_eq!(refused.status, 404);
    assert!(
        store::users::find(&app.db, &stranger_id)
            .await
            .unwrap()
            .is_some()
    );

    let page = owner.get("/dashboard/test/team").await;
    for (action, detail) in [
        (AuditAction::UserAdded, "as Developer"),
        (AuditAction::UserRoleChanged, "Developer → Viewer"),
        (AuditAction::UserRemoved, "was Viewer"),
    ] {
        let rows: Vec<_> = rows_of(&app, action)
            .await
            .into_iter()
            .filter(|r| r.target.as_deref() == Some("ngozi@example.com"))
            .collect();
        assert_eq!(rows.len(), 1, "{action}");
        assert_eq!(rows[0].actor_email.as_deref(), Some(owner_email.as_str()));
        assert_eq!(rows[0].target.as_deref(), Some("ngozi@example.com"));
        assert_eq!(rows[0].detail.as_deref(), Some(detail));
        assert!(
            page.body.contains(action.label()),
            "{action} on the Team page"
        );
    }
}

async fn the_last_owner_cannot_be_removed_or_demoted(backend: Backend) {
    let app = spawn_app(backend).await;
    let (mut owner, email, password) = signed_in(&app, Role::Owner).await;
    let me = stored_user(&app, &email).await.id;
    let token = owner.form_token_of("/dashboard/test/team").await;
    for (path, extra) in [
        ("/dashboard/test/team/users/remove", None),
        (
            "/dashboard/test/team/users/role",
            Some(("role", "developer")),
        ),
    ] {
        let mut fields = vec![
            ("form_token", token.as_str()),
            ("user_id", me.as_str()),
            ("password", password.as_str()),
        ];
        fields.extend(extra);
        let answer = owner.post(path, &fields).await;
        assert_eq!(answer.status, 409, "{path}");
        assert!(answer.body.contains("A business needs an owner"));
    }
    assert_eq!(
        owner.get("/dashboard/test/team").await.status,
        200,
        "still an owner"
    );
    assert!(rows_of(&app, AuditAction::UserRemoved).await.is_empty());
    assert!(rows_of(&app, AuditAction::UserRoleChanged).await.is_empty());

    // With a second owner, either may go, but not both.
    let (mut second, second_email, second_password) = signed_in(&app, Role::Owner).await;
    let second_id = stored_user(&app, &second_email).await.id;
    let second_token = second.form_token_of("/dashboard/test/team").await;
    let demoted = second
        .post_form(
            "/dashboard/test/team/users/role",
            &second_token,
            &[
                ("user_id", &me),
                ("role", "viewer"),
                ("password", &second_password),
            ],
        )
        .await;
    assert_eq!(demoted.status, 303);
    let removed_self = second
        .post_form(
            "/dashboard/test/team/users/remove",
            &second_token,
            &[("user_id", &second_id), ("password", &second_password)],
        )
        .await;
    assert_eq!(removed_self.status, 409, "the last owner again");
    assert_eq!(owner.get("/dashboard/test/team").await.status, 403);
}

async fn profile_changes_and_sign_ins_are_audited(backend: Backend) {
    let app = spawn_app(backend).await;
    let (mut http, email, password) = signed_in(&app, Role::Viewer).await;
    let token = http.form_token_of("/dashboard/profile").await;
    let new_password = "a brand new passphrase";
    let changed = http
        .post_form(
            "/dashboard/profile/password",
            &token,
            &[
                ("mode", "test"),
                ("current", &password),
                ("new", new_password),
                ("confirm", new_password),
            ],
        )
        .await;
    assert_eq!(changed.status, 303);
    let started = http
        .post_form("/dashboard/profile/totp/start", &token, &[("mode", "test")])
        .await;
    let page = http.follow(started).await;
    let start = page.body.find(r#"<code class="secret">"#).unwrap() + 21;
    let end = page.body[start..].find("</code>").unwrap();
    let secret = page.body[start..start + end].replace(' ', "");
    let totp = api::dashboard::auth::totp(&secret, &email).unwrap();
    let code = totp
        .generate(chrono::Utc::now().timestamp() as u64)
        .to_string();
    let confirmed = http
        .post_form(
            "/dashboard/profile/totp/confirm",
            &token,
            &[
                ("mode", "test"),
                ("code", &code),
                ("password", new_password),
            ],
        )
        .await;
    assert_eq!(confirmed.status, 303);
    let removed = http
        .post_form(
            "/dashboard/profile/totp/remove",
            &token,
            &[("mode", "test"), ("password", new_password)],
        )
        .await;
    assert_eq!(removed.status, 303);
    http.post_form("/dashboard/sign-out", &token, &[]).await;

    let rows = audit_rows(&app).await;
    let actions: Vec<AuditAction> = rows.iter().rev().map(|r| r.action).collect();
    assert_eq!(
        actions,
        [
            AuditAction::UserAdded,
            AuditAction::SignedIn,
            AuditAction::PasswordChanged,
            AuditAction::TotpEnabled,
            AuditAction::TotpRemoved,
            AuditAction::SignedOut,
        ]
    );
    for row in &rows[..5] {
        assert_eq!(row.actor_email.as_deref(), Some(email.as_str()));
        assert_eq!(row.client_addr.as_deref(), Some("127.0.0.1"));
    }
    let text = format!("{rows:?}");
    for secret_text in [
        password.as_str(),
        new_password,
        secret.as_str(),
        code.as_str(),
    ] {
        assert!(!text.contains(secret_text), "no secret in the audit log");
    }
}

async fn the_audit_log_is_paged_and_never_holds_a_secret(backend: Backend) {
    let app = spawn_app(backend).await;
    let (mut owner, _, password) = signed_in(&app, Role::Owner).await;
    let mut issued = Vec::new();
    for _ in 0..14 {
        let rolled = roll(&mut owner, "test", "now").await;
        issued.push(shown_once(&rolled.body, "new-key").unwrap());
    }
    let token = owner.form_token_of("/dashboard/test/team").await;
    for i in 0..12 {
        let added = owner
            .post_form(
                "/dashboard/test/team/users",
                &token,
                &[
                    ("email", &format!("user{i}@example.com")),
                    ("role", "viewer"),
                    ("password", &password),
                ],
            )
            .await;
        issued.push(shown_once(&added.body, "new-password").unwrap());
    }
    // 1 user added by the test + 1 sign-in + 14 rolls + 12 users: 28 rows, two pages.
    assert_eq!(audit_rows(&app).await.len(), 28);
    let first = owner.get("/dashboard/test/team").await;
    assert!(first.body.contains("1–25 of 28"), "{}", first.body);
    assert!(first.body.contains("Page 1 of 2"));
    let second = owner.get("/dashboard/test/team?page=2").await;
    assert!(second.body.contains("26–28 of 28"));
    assert!(
        second.body.contains("Added a user"),
        "the oldest row is last"
    );
    let stored = String::from_utf8_lossy(&app.test_db.raw_contents()).into_owned();
    for secret in &issued {
        assert!(!first.body.contains(secret) && !second.body.contains(secret));
        assert!(!stored.contains(secret), "nothing at rest holds a secret");
    }
}

async fn admin_key_commands_are_audited_as_the_operator(backend: Backend) {
    let app = spawn_app(backend).await;
    // The function `api admin key roll|revoke` calls.
    keys::change(
        &app.db,
        &app.business.id,
        Mode::Test,
        KeyAction::Revoke,
        chrono::Utc::now(),
    )
    .await
    .unwrap()
    .unwrap();
    let rows = rows_of(&app, AuditAction::KeyRevoked).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].actor_user_id, None);
    assert_eq!(rows[0].actor_email, None);
    assert_eq!(rows[0].client_addr, None);
    let (mut owner, _, _) = signed_in(&app, Role::Owner).await;
    let page = owner.get("/dashboard/test/team").await;
    let account = rows[0].actor_operator.as_deref().expect("the host account");
    assert!(
        page.body
            .contains(&format!("Operator ({account}) via api admin"))
    );
    let developers = owner.get("/dashboard/test/developers").await;
    assert!(developers.body.contains("No key works in test mode"));
}

async fn two_owners_demoting_each_other_at_once_leave_an_owner(backend: Backend) {
    use store::users::{MemberChange, MemberOutcome, change_member, find_by_email};
    let app = spawn_app(backend).await;
    let (a, _) = add_user(&app, Role::Owner).await;
    let (b, _) = add_user(&app, Role::Owner).await;
    let a = find_by_email(&app.db, &a).await.unwrap().unwrap();
    let b = find_by_email(&app.db, &b).await.unwrap().unwrap();
    for _ in 0..5 {
        let (by_a, by_b) = (
            audit::Actor::user(&a.id, &a.email, None),
            audit::Actor::user(&b.id, &b.email, None),
        );
        let now = chrono::Utc::now();
        let demote = MemberChange::Role(Role::Viewer);
        let (first, second) = tokio::join!(
            change_member(&app.db, &by_a, &app.business.id, &b.id, demote, now),
            change_member(&app.db, &by_b, &app.business.id, &a.id, demote, now),
        );
        let outcomes = [first.unwrap(), second.unwrap()];
        let done = outcomes
            .iter()
            .filter(|o| matches!(o, MemberOutcome::Done(_)))
            .count();
        let refused = outcomes
            .iter()
            .filter(|o| matches!(o, MemberOutcome::LastOwner))
            .count();
        assert_eq!((done, refused), (1, 1), "one demotion, one refusal");
        let owners = store::users::list_for_business(&app.db, &app.business.id)
            .await
            .unwrap()
            .into_iter()
            .filter(|u| u.role == Role::Owner)
            .count();
        assert_eq!(owners, 1);
        // Both owners again for the next round.
        for user in [&a, &b] {
            change_member(
                &app.db,
                &audit::Actor::operator(),
                &app.business.id,
                &user.id,
                MemberChange::Role(Role::Owner),
                chrono::Utc::now(),
            )
            .await
            .unwrap();
        }
    }
}

/// docs/dashboard.md: adding or removing a user and changing a role need the owner's password
/// again, so a taken-over owner session alone cannot add an owner; each wrong one counts like a
/// sign-in.
async fn team_changes_need_the_password_and_wrong_ones_count_toward_the_lock(backend: Backend) {
    let app = spawn_app(backend).await;
    let (target, _) = add_user(&app, Role::Viewer).await;
    let target_id = stored_user(&app, &target).await.id;
    let role_of = |id: UserId| {
        let db = app.db.clone();
        async move { store::users::find(&db, &id).await.unwrap().map(|u| u.role) }
    };
    let team_state = || async {
        let mallory = find_user(&app, "mallory@example.com").await.is_some();
        (mallory, role_of(target_id.clone()).await)
    };
    // One owner per form: its wrong tries stay under the lock.
    let forms: [(&str, Vec<(&str, &str)>); 3] = [
        (
            "/dashboard/test/team/users",
            vec![("email", "mallory@example.com"), ("role", "owner")],
        ),
        (
            "/dashboard/test/team/users/role",
            vec![("user_id", &target_id), ("role", "owner")],
        ),
        (
            "/dashboard/test/team/users/remove",
            vec![("user_id", &target_id)],
        ),
    ];
    for (path, extra) in &forms {
        let (mut owner, _, password) = signed_in(&app, Role::Owner).await;
        let token = owner.form_token_of("/dashboard/test/team").await;
        let before = audit_rows(&app).await.len();
        let state_before = team_state().await;
        for typed in [None, Some(""), Some("not the owner's password")] {
            let mut fields = vec![("form_token", token.as_str())];
            fields.extend(extra.iter().copied());
            fields.extend(typed.map(|t| ("password", t)));
            let refused = owner.post(path, &fields).await;
            assert_eq!(refused.status, 422, "{path} with {typed:?}");
            assert!(
                refused
                    .body
                    .contains("Your password is not right: nothing changed."),
                "{path}"
            );
            assert!(
                !refused.body.contains("new-password"),
                "{path}: no password shown"
            );
        }
        // Nothing changed.
        assert_eq!(team_state().await, state_before, "{path}");
        assert_eq!(
            audit_rows(&app).await.len(),
            before,
            "{path}: nothing recorded"
        );

        let mut fields = vec![("form_token", token.as_str())];
        fields.extend(extra.iter().copied());
        fields.push(("password", &password));
        let done = owner.post(path, &fields).await;
        assert!(matches!(done.status, 200 | 303), "{path}: {}", done.body);
    }
    assert!(find_user(&app, "mallory@example.com").await.is_some());
    assert_eq!(
        role_of(target_id.clone()).await,
        None,
        "made owner, then removed"
    );

    // Wrong passwords re-entered count like sign-ins: the fifth locks, then even the right
    // password is refused, on the form and at the sign-in page.
    let (mut owner, email, password) = signed_in(&app, Role::Owner).await;
    let token = owner.form_token_of("/dashboard/test/team").await;
    let add = |typed: &'static str| {
        vec![
            ("form_token", token.clone()),
            ("email", "eve@example.com".to_owned()),
            ("role", "owner".to_owned()),
            ("password", typed.to_owned()),
        ]
    };
    for _ in 0..5 {
        let fields = add("a guess at the password");
        let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(
            owner
                .post("/dashboard/test/team/users", &fields)
                .await
                .status,
            422
        );
    }
    let right: Vec<(&str, &str)> = vec![
        ("form_token", &token),
        ("email", "eve@example.com"),
        ("role", "owner"),
        ("password", &password),
    ];
    let locked = owner.post("/dashboard/test/team/users", &right).await;
    assert_eq!(
        locked.status, 422,
        "locked: the right password is refused too"
    );
    assert!(find_user(&app, "eve@example.com").await.is_none());
    assert_eq!(sign_in_status(&app, &email, &password).await, 429);
    let locks = rows_of(&app, AuditAction::SignInLocked).await;
    assert_eq!(locks.len(), 1);
    assert_eq!(locks[0].actor_email.as_deref(), Some(email.as_str()));
    assert_eq!(locks[0].client_addr.as_deref(), Some("127.0.0.1"));
}
