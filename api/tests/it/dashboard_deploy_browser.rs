//! The dashboard as deployed, in headless Chromium with JavaScript off: with an https
//! public URL its cookies are `Secure` and `__Host-` named, and a browser keeps them and signs in
//! (Chromium treats http://127.0.0.1 as a secure context, as it does localhost); a section typed
//! without its mode lands on test mode's page. Without Chromium each test says it was skipped.

use domain::Role;
use test_support::browser::{Browser, body_text, signed_in, wait_for_url};
use test_support::dashboard::add_user;
use test_support::{Backend, spawn_app, spawn_app_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn host_prefixed_secure_cookies_are_kept_and_sign_in_works() {
    let test = "host_prefixed_secure_cookies_are_kept_and_sign_in_works";
    let Some(browser) = Browser::start(test, false).await else {
        return;
    };
    let c = &browser.client;
    let app = spawn_app_with(Backend::Sqlite, |c| {
        c.dashboard.public_url = Some("https://vas.example.com".into())
    })
    .await;
    let (email, password) = add_user(&app, Role::Viewer).await;
    signed_in(c, &app, &email, &password).await;
    let url = wait_for_url(c, "the home page", |u| u.path() == "/dashboard/test/").await;
    assert_eq!(url.path(), "/dashboard/test/");
    assert!(body_text(c).await.contains(&email), "signed in");
    let cookies = c.get_all_cookies().await.unwrap();
    let names: Vec<&str> = cookies.iter().map(|k| k.name()).collect();
    let session = cookies
        .iter()
        .find(|k| k.name() == "__Host-vas_session")
        .unwrap_or_else(|| panic!("the browser kept the session cookie: {names:?}"));
    assert_eq!(session.secure(), Some(true));
    assert_eq!(session.path(), Some("/"));
    assert!(!names.contains(&"vas_session"), "{names:?}");

    // Another page with the same cookie: still signed in.
    c.goto(&app.url("/dashboard/test/events")).await.unwrap();
    wait_for_url(c, "the events page", |u| {
        u.path() == "/dashboard/test/events"
    })
    .await;
    assert!(body_text(c).await.contains(&email));
    browser.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_section_typed_without_its_mode_lands_on_test_mode() {
    let test = "a_section_typed_without_its_mode_lands_on_test_mode";
    let Some(browser) = Browser::start(test, false).await else {
        return;
    };
    let c = &browser.client;
    let app = spawn_app(Backend::Sqlite).await;
    let (email, password) = add_user(&app, Role::Viewer).await;
    // Not signed in yet: to sign in, then to the page.
    c.goto(&app.url("/dashboard/deposits?q=REF-1"))
        .await
        .unwrap();
    wait_for_url(c, "the sign-in page", |u| u.path() == "/dashboard/sign-in").await;
    signed_in(c, &app, &email, &password).await;
    c.goto(&app.url("/dashboard/deposits?q=REF-1"))
        .await
        .unwrap();
    let url = wait_for_url(c, "test mode's deposits", |u| {
        u.path() == "/dashboard/test/deposits"
    })
    .await;
    assert_eq!(url.query(), Some("q=REF-1"));
    assert!(!body_text(c).await.contains("Page not found"));
    browser.finish().await;
}
