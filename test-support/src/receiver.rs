//! A webhook receiver: listens on 127.0.0.1, records every request (headers, raw body, arrival
//! time) and answers from a script (status, `Retry-After`, body, delay), then a default.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// How to answer one request.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub retry_after: Option<String>,
    pub delay: Duration,
    pub body: String,
}

impl Reply {
    pub fn ok() -> Self {
        Self::status(200)
    }

    pub fn status(status: u16) -> Self {
        Self {
            status,
            retry_after: None,
            delay: Duration::ZERO,
            body: String::new(),
        }
    }

    pub fn retry_after(mut self, value: &str) -> Self {
        self.retry_after = Some(value.to_owned());
        self
    }

    pub fn slow(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    pub fn body(mut self, body: &str) -> Self {
        self.body = body.to_owned();
        self
    }
}

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    }

    pub fn webhook_id(&self) -> String {
        self.header("webhook-id")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("the body is JSON")
    }

    /// Whether the request's signature verifies with `secret` (`whsec_…`), checked by the
    /// `standardwebhooks` crate, an implementation independent of ours.
    pub fn verifies(&self, secret: &str) -> bool {
        standardwebhooks::Webhook::new(secret)
            .expect("a webhook secret")
            .verify(&self.body, &self.headers)
            .is_ok()
    }
}

#[derive(Default)]
struct Inner {
    requests: Mutex<Vec<Received>>,
    script: Mutex<VecDeque<Reply>>,
    fallback: Mutex<Option<Reply>>,
    /// Only requests signed with this secret get the script or the default; others, 401.
    only: Mutex<Option<String>>,
}

#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT/hook`
    pub url: String,
    inner: Arc<Inner>,
}

impl Receiver {
    /// Answers 200 to everything until told otherwise.
    pub async fn start() -> Receiver {
        Self::start_on("127.0.0.1:0".parse().unwrap()).await
    }

    pub async fn start_on(addr: SocketAddr) -> Receiver {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .expect("bind receiver");
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner::default());
        let app = Router::new().fallback(receive).with_state(inner.clone());
        crate::http::serve_listener(listener, app);
        Receiver {
            addr,
            url: format!("http://{addr}/hook"),
            inner,
        }
    }

    /// The same receiver under the name `localhost`.
    pub fn localhost_url(&self) -> String {
        format!("http://localhost:{}/hook", self.addr.port())
    }

    /// Answers the next requests with these, in order; then with the default.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.inner.script.lock().unwrap().extend(replies);
    }

    /// The answer once the script is used up.
    pub fn set_default(&self, reply: Reply) {
        *self.inner.fallback.lock().unwrap() = Some(reply);
    }

    /// Answers 401 to every request whose signature does not verify with `secret` (`whsec_…`),
    /// as a business's receiver treats requests signed by anyone else; those use up no script.
    pub fn accept_only(&self, secret: &str) {
        *self.inner.only.lock().unwrap() = Some(secret.to_owned());
    }

    pub fn requests(&self) -> Vec<Received> {
        self.inner.requests.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.inner.requests.lock().unwrap().len()
    }

    /// The requests once there are at least `n`; panics after `within`.
    pub async fn wait_for(&self, n: usize, within: Duration) -> Vec<Received> {
        let started = Instant::now();
        loop {
            let requests = self.requests();
            if requests.len() >= n {
                return requests;
            }
            assert!(
                started.elapsed() < within,
                "{} requests after {within:?}, expected {n}",
                requests.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn receive(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Response {
    let reply = {
        let received = Received {
            headers,
            body,
            at: Instant::now(),
        };
        let foreign = inner
            .only
            .lock()
            .unwrap()
            .as_deref()
            .is_some_and(|secret| !received.verifies(secret));
        inner.requests.lock().unwrap().push(received);
        if foreign {
            return StatusCode::UNAUTHORIZED.into_response();
        }
        let scripted = inner.script.lock().unwrap().pop_front();
        scripted
            .or_else(|| inner.fallback.lock().unwrap().clone())
            .unwrap_or_else(Reply::ok)
    };
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut response = (
        StatusCode::from_u16(reply.status).unwrap(),
        reply.body.clone(),
    )
        .into_response();
    if let Some(value) = &reply.retry_after {
        response
            .headers_mut()
            .insert("retry-after", HeaderValue::from_str(value).unwrap());
    }
    response
}
