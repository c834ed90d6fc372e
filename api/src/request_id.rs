//! `X-Request-Id`: echoed when the caller sent a sensible one, generated otherwise, present on
//! every response and in every log line of the request.

use domain::ids::RequestId;
use std::panic::AssertUnwindSafe;

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use tracing::Instrument;

use crate::error::ApiError;

pub const HEADER: &str = "x-request-id";

/// The id of the request being served, if any (error bodies carry it).
pub fn current() -> Option<String> {
    ops::telemetry::request_id()
}

/// Echoed as sent: any id a tracing system makes (UUIDs, `{trace}/{span}`, `a=b`), as long as it
/// is 1–200 visible ASCII characters (no spaces or control characters, so a log line stays one
/// line with one token for it).
fn acceptable(id: &str) -> bool {
    !id.is_empty() && id.len() <= 200 && id.bytes().all(|b| b.is_ascii_graphic())
}

pub async fn middleware(mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| acceptable(v))
        .map(str::to_owned)
        .unwrap_or_else(|| String::from(RequestId::new()));
    let value = HeaderValue::from_str(&id).expect("checked to be header-safe");
    request.headers_mut().insert(HEADER, value.clone());
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %request.method(),
        path = %request.uri().path(),
    );
    let observed = ops::metrics::HttpObservation::start(&request);
    // A panic in a handler is a 500 problem like any other failure (logged, with the request
    // id), not a dropped connection.
    let handled = async move {
        match AssertUnwindSafe(next.run(request)).catch_unwind().await {
            Ok(response) => response,
            Err(_) => {
                tracing::error!("the request's handler panicked");
                ApiError::Internal(anyhow::anyhow!("the handler panicked")).into_response()
            }
        }
    };
    let mut response = ops::telemetry::with_request_id(id, handled.instrument(span.clone())).await;
    let status = response.status().as_u16();
    let elapsed = observed.finish(ops::metrics::API_HTTP, response.status());
    span.in_scope(|| tracing::info!(status, latency_ms = elapsed.as_millis() as u64, "served"));
    response.headers_mut().insert(HEADER, value);
    response
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::routing::get;

    #[tokio::test]
    async fn a_panicking_handler_is_a_500_problem_with_the_request_id() {
        let app = Router::new()
            .route(
                "/boom",
                get(|| async {
                    if true {
                        panic!("boom");
                    }
                    "unreachable"
                }),
            )
            .layer(axum::middleware::from_fn(super::middleware));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let response = reqwest::Client::new()
            .get(format!("http://{address}/boom"))
            .header("X-Request-Id", "trace-1")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 500);
        assert_eq!(response.headers()["x-request-id"], "trace-1");
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );
        let problem: serde_json::Value = response.json().await.unwrap();
        assert_eq!(problem["code"], "internal_error");
        assert_eq!(problem["requestId"], "trace-1");
        assert!(!problem.to_string().contains("boom"), "no panic text leaks");
    }
}
