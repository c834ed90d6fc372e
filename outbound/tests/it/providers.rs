//! The provider client against misbehaving providers (local servers on port 0): a redirect is
//! never followed, and no body is read past its limit.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use domain::provider::OpenAccount;
use domain::{Bank, Mode, NewAccount};
use ops::config::Config;
use outbound::providers::{ProviderError, Providers, RemoteAccount};

async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

fn providers_at(addr: SocketAddr) -> Providers {
    let mut config = Config::default();
    config.sandbox.url = Some(format!("http://{addr}"));
    Providers::from_config(&config)
}

/// Test customer 1's open-account request, from the create body as the API parses it.
fn request() -> OpenAccount {
    let body = test_support::account_body(1, "test-bank");
    let new = NewAccount::parse(body.as_object().unwrap(), Mode::Test).expect("a valid body");
    OpenAccount::new(
        "va_1",
        &format!("Acme Ltd/{}", new.customer_name),
        &new.customer_name,
        &new.customer_email,
        &new.customer_phone,
        new.identity_type,
        new.identity_number,
    )
}

/// Test customer 1's account opened at test-bank, waiting at most `within`.
async fn open_test_account(
    providers: &Providers,
    within: Duration,
) -> Result<RemoteAccount, ProviderError> {
    providers
        .open_account(Bank::TestBank, Mode::Test, &request(), within)
        .await
}

/// A server that counts every request it receives, on any path and method.
async fn counting_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let addr = serve(Router::new().fallback(any(move || {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            (
                StatusCode::CREATED,
                r#"{"reference":"va_1","status":"active","accountNumber":"0123456789"}"#,
            )
        }
    })))
    .await;
    (addr, hits)
}

fn redirect_to(status: StatusCode, target: String) -> Response {
    (status, [(header::LOCATION, target)]).into_response()
}

#[tokio::test]
async fn a_redirect_is_a_provider_error_and_nothing_reaches_its_target() {
    let (elsewhere, hits) = counting_server().await;
    let target = format!("http://{elsewhere}/collect");
    let (t1, t2, t3) = (target.clone(), target.clone(), target.clone());
    let provider = serve(
        Router::new()
            .route(
                "/test-bank/accounts",
                post(move || async move { redirect_to(StatusCode::TEMPORARY_REDIRECT, t1) }),
            )
            .route(
                "/test-bank/accounts/{reference}",
                get(move || async move { redirect_to(StatusCode::FOUND, t2) }),
            )
            .route(
                "/test-bank/accounts/{reference}/close",
                post(move || async move { redirect_to(StatusCode::PERMANENT_REDIRECT, t3) }),
            ),
    )
    .await;
    let providers = providers_at(provider);

    let open = open_test_account(&providers, Duration::from_secs(5)).await;
    assert!(matches!(open, Err(ProviderError::BadAnswer(_))), "{open:?}");
    let status = providers.account(Bank::TestBank, Mode::Test, "va_1").await;
    assert!(
        matches!(status, Err(ProviderError::BadAnswer(_))),
        "{status:?}"
    );
    let close = providers
        .close_account(Bank::TestBank, Mode::Test, "va_1")
        .await;
    assert!(
        matches!(close, Err(ProviderError::BadAnswer(_))),
        "{close:?}"
    );

    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the redirect's target received the request (and the identity number)"
    );
    // The same target answers when asked directly: the client could have reached it.
    reqwest::get(&target).await.unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

/// A body that never ends: 64 KiB chunks of spaces, for ever.
fn endless(status: StatusCode) -> Response {
    let chunk = Bytes::from(vec![b' '; 64 * 1024]);
    let stream = futures::stream::repeat_with(move || Ok::<_, Infallible>(chunk.clone()));
    (status, Body::from_stream(stream)).into_response()
}

#[tokio::test]
async fn an_endless_body_is_cut_off_and_the_call_fails() {
    let provider = serve(
        Router::new()
            .route(
                "/test-bank/accounts",
                post(|| async { endless(StatusCode::CREATED) }),
            )
            .route(
                "/test-bank/accounts/{reference}/transactions",
                get(|| async { endless(StatusCode::OK) }),
            ),
    )
    .await;
    let providers = providers_at(provider);
    // Well within the call's own timeout: the read stops at the limit, not at the clock.
    let open = tokio::time::timeout(
        Duration::from_secs(20),
        open_test_account(&providers, Duration::from_secs(60)),
    )
    .await
    .expect("the call returns");
    match open {
        Err(ProviderError::BadAnswer(why)) => assert!(why.contains("over"), "{why}"),
        other => panic!("expected a bad answer, got {other:?}"),
    }
    let now = domain::time::now();
    let listed = tokio::time::timeout(
        Duration::from_secs(20),
        providers.transactions(
            Bank::TestBank,
            Mode::Test,
            "va_1",
            now - chrono::Duration::days(1),
            now,
        ),
    )
    .await
    .expect("the call returns");
    assert!(
        matches!(listed, Err(ProviderError::BadAnswer(_))),
        "{listed:?}"
    );
}

#[tokio::test]
async fn an_answer_padded_past_the_limit_is_refused_and_a_normal_one_is_read() {
    let answer = r#"{"reference":"va_1","status":"active","accountNumber":"0123456789"}"#;
    // Valid JSON all the same: a client that read it all would accept it.
    let padded = format!("{answer}{}", " ".repeat(2 * 1024 * 1024));
    let provider = serve(
        Router::new()
            .route(
                "/test-bank/accounts",
                post(move || async move { (StatusCode::CREATED, padded) }),
            )
            .route(
                "/test-bank/accounts/{reference}",
                get(move || async move { (StatusCode::OK, answer) }),
            ),
    )
    .await;
    let providers = providers_at(provider);
    let open = open_test_account(&providers, Duration::from_secs(10)).await;
    assert!(matches!(open, Err(ProviderError::BadAnswer(_))), "{open:?}");
    let remote = providers
        .account(Bank::TestBank, Mode::Test, "va_1")
        .await
        .expect("a normal answer is read")
        .expect("the account exists");
    assert_eq!(remote.account_number.as_deref(), Some("0123456789"));
}
