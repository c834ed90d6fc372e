//! `X-Request-Id`: echoed when the caller sent a sensible one, generated otherwise, present on
//! every response and in every log line of the request.

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

pub const HEADER: &str = "x-request-id";

/// The id of the request being served, if any (error bodies carry it).
pub fn current() -> Option<String> {
    shared::telemetry::request_id()
}

fn acceptable(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 200
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
}

pub async fn middleware(mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| acceptable(v))
        .map(str::to_owned)
        .unwrap_or_else(|| shared::ids::new_id("req"));
    let value = HeaderValue::from_str(&id).expect("checked to be header-safe");
    request.headers_mut().insert(HEADER, value.clone());
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %request.method(),
        path = %request.uri().path(),
    );
    let observed = shared::metrics::HttpObservation::start(&request);
    let mut response =
        shared::telemetry::with_request_id(id, next.run(request).instrument(span.clone())).await;
    let status = response.status().as_u16();
    let elapsed = observed.finish(shared::metrics::API_HTTP, response.status());
    span.in_scope(|| tracing::info!(status, latency_ms = elapsed.as_millis() as u64, "served"));
    response.headers_mut().insert(HEADER, value);
    response
}
