//! The one HTTP server of every listener (the api, the provider sandbox, the workers' ops ports):
//! an axum router on hyper's HTTP/1 connections, with time limits so that a client sending its
//! request a byte at a time (slowloris) cannot hold a connection and its task forever, and a
//! graceful shutdown that lets requests in flight finish.
//!
//! The limits are those of Go's `net/http` and Envoy:
//! - **header read**: from the first byte of a request (for a connection's first request, from
//!   the accept) until its head is complete; past it the connection is closed;
//! - **body read**: from the head until the whole body has arrived, for a handler that reads it;
//!   past it the client is answered `408 Request Timeout` and the connection is closed;
//! - **idle**: on a kept-alive connection, from the end of a response until the first byte of the
//!   next request; past it the connection is closed.
//!
//! A request being handled (and its response being written) is not limited here. hyper's own
//! `header_read_timeout` is not used: it runs from the end of the previous response, so it would
//! bound the idle wait and the header read by one figure.
//!
//! Handlers can extract `ConnectInfo<SocketAddr>`: the peer's address.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use anyhow::Context as _;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

/// How long a client may take over each part of a request (see the module's documentation). Its
/// `Default` is the configuration's (`[http]` in config.default.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub header_read: Duration,
    pub body_read: Duration,
    pub idle: Duration,
}

/// A listener on `addr`; the error names the address.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))
}

/// Serves `app` on `listener` until `shutdown` is cancelled, then stops accepting, lets the
/// requests in flight finish (idle connections are closed), and returns once every connection
/// has ended.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    timeouts: Timeouts,
    shutdown: CancellationToken,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        // Finished connections are reaped as new ones come, so the set holds open ones only.
        while connections.try_join_next().is_some() {}
        match accepted {
            Ok((stream, peer)) => {
                connections.spawn(serve_connection(
                    stream,
                    peer,
                    app.clone(),
                    timeouts,
                    shutdown.clone(),
                ));
            }
            // The peer gave up before we took the connection: nothing to do.
            Err(e) if is_connection_error(&e) => {}
            // Out of file descriptors and the like: wait rather than spin.
            Err(e) => {
                tracing::error!(error = %e, "accepting a connection failed; retrying in 1 s");
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: axum::Router,
    timeouts: Timeouts,
    shutdown: CancellationToken,
) {
    // Responses are written whole; waiting to coalesce them only adds latency.
    let _ = stream.set_nodelay(true);
    let clock = Arc::new(Clock::new(timeouts));
    let io = TokioIo::new(Watched {
        inner: stream,
        clock: clock.clone(),
    });
    let service = {
        let clock = clock.clone();
        hyper::service::service_fn(move |request| handle(app.clone(), request, peer, clock.clone()))
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.header_read_timeout(None); // the clock's instead (see the module's documentation)
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let mut draining = false;
    loop {
        let deadline = clock.deadline();
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            () = clock.changed.notified() => {}
            () = sleep_until(deadline.map(|(at, _)| at)) => {
                if let Some((at, wait)) = clock.deadline()
                    && at <= Instant::now()
                {
                    tracing::debug!(%peer, wait = wait.label(), "closing a connection: the client took too long");
                    metrics::counter!("http_connection_timeouts_total", "phase" => wait.label())
                        .increment(1);
                    return;
                }
            }
            () = shutdown.cancelled(), if !draining => {
                draining = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One request: the peer's address for handlers, the body read limit, and the connection's clock
/// held busy until the response has been written.
async fn handle(
    mut app: axum::Router,
    request: Request<Incoming>,
    peer: SocketAddr,
    clock: Arc<Clock>,
) -> Result<Response<Body>, Infallible> {
    let busy = Busy::start(clock.clone());
    let timed_out = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + clock.timeouts.body_read;
    let mut request = request.map(|body| {
        Body::new(DeadlineBody {
            inner: body,
            deadline,
            sleep: None,
            timed_out: timed_out.clone(),
        })
    });
    request.extensions_mut().insert(ConnectInfo(peer));
    std::future::poll_fn(|cx| tower_service::Service::<Request<Body>>::poll_ready(&mut app, cx))
        .await?;
    let mut response = tower_service::Service::call(&mut app, request).await?;
    if timed_out.load(Ordering::Relaxed) {
        // Whatever the handler made of the failed read, the client was too slow; the rest of
        // its body is not waited for. A handler that answered 408 itself (see
        // `is_body_timeout`) keeps its body; any other answer is replaced.
        tracing::debug!(%peer, "request body not received in time: 408");
        metrics::counter!("http_connection_timeouts_total", "phase" => Wait::Body.label())
            .increment(1);
        if response.status() != StatusCode::REQUEST_TIMEOUT {
            response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
        }
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(response.map(|body| {
        Body::new(Finishing {
            inner: body,
            _busy: busy,
        })
    }))
}

/// What a connection is waiting for when its deadline passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    Head,
    Body,
    Idle,
}

impl Wait {
    fn label(self) -> &'static str {
        match self {
            Wait::Head => "header",
            Wait::Body => "body",
            Wait::Idle => "idle",
        }
    }
}

/// When a connection must have made progress by: a request head is being read (since its first
/// byte, or since the accept), the connection is idle (since the last response), or a request
/// is being handled (no deadline).
struct Clock {
    timeouts: Timeouts,
    state: Mutex<ClockState>,
    /// Told of every change, so the connection's task recomputes its deadline.
    changed: Notify,
}

struct ClockState {
    in_flight: u32,
    reading_head: bool,
    since: Instant,
}

impl Clock {
    fn new(timeouts: Timeouts) -> Self {
        Clock {
            timeouts,
            state: Mutex::new(ClockState {
                in_flight: 0,
                reading_head: true,
                since: Instant::now(),
            }),
            changed: Notify::new(),
        }
    }

    fn update<T>(&self, f: impl FnOnce(&mut ClockState) -> T) -> T {
        let value = f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner));
        self.changed.notify_one();
        value
    }

    fn deadline(&self) -> Option<(Instant, Wait)> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.in_flight > 0 {
            None
        } else if state.reading_head {
            Some((state.since + self.timeouts.header_read, Wait::Head))
        } else {
            Some((state.since + self.timeouts.idle, Wait::Idle))
        }
    }

    /// The first byte after an idle wait starts the header read limit.
    fn bytes_read(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.in_flight == 0 && !state.reading_head {
            state.reading_head = true;
            state.since = Instant::now();
            drop(state);
            self.changed.notify_one();
        }
    }
}

/// A request in flight on its connection: from its head until its response has been written
/// (or given up).
struct Busy(Arc<Clock>);

impl Busy {
    fn start(clock: Arc<Clock>) -> Self {
        clock.update(|state| state.in_flight += 1);
        Busy(clock)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.update(|state| {
            state.in_flight -= 1;
            if state.in_flight == 0 {
                state.reading_head = false;
                state.since = Instant::now();
            }
        });
    }
}

/// The connection's socket, telling the clock when bytes arrive.
struct Watched {
    inner: TcpStream,
    clock: Arc<Clock>,
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.clock.bytes_read();
        }
        result
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The request body, failing once its deadline has passed while more is awaited. A total
/// deadline, not one per chunk: one byte every few seconds must not keep a body open.
struct DeadlineBody {
    inner: Incoming,
    deadline: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
    timed_out: Arc<AtomicBool>,
}

#[derive(Debug, thiserror::Error)]
#[error("the request body was not received in time")]
struct BodyTimedOut;

/// Whether reading a request body failed because the body-read limit passed (the client is
/// answered 408), as opposed to a body over a size limit or a broken connection: a handler
/// that records its answer (access log, metrics) can record the 408 the client gets.
pub fn is_body_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.is::<BodyTimedOut>() {
            return true;
        }
        cause = e.source();
    }
    false
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        // What has arrived is taken even past the deadline (the handler may have been busy).
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|r| r.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        ready!(sleep.as_mut().poll(cx));
        this.timed_out.store(true, Ordering::Relaxed);
        Poll::Ready(Some(Err(BodyTimedOut.into())))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The response body, keeping its connection busy until hyper has written (and dropped) it.
struct Finishing {
    inner: Body,
    _busy: Busy,
}

impl http_body::Body for Finishing {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl std::fmt::Debug for Finishing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finishing").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeouts() -> Timeouts {
        Timeouts {
            header_read: Duration::from_secs(2),
            body_read: Duration::from_secs(3),
            idle: Duration::from_secs(5),
        }
    }

    /// Within 100 ms of `now + after`: the clock reads `Instant::now()` itself.
    fn about(deadline: Option<(Instant, Wait)>, after: u64, wait: Wait) -> bool {
        let expected = Instant::now() + Duration::from_secs(after);
        deadline.is_some_and(|(at, w)| {
            w == wait && at <= expected && expected - at < Duration::from_millis(100)
        })
    }

    #[test]
    fn the_clock_waits_for_a_head_then_for_nothing_then_idles() {
        let clock = Arc::new(Clock::new(timeouts()));
        assert!(about(clock.deadline(), 2, Wait::Head), "from the accept");
        let busy = Busy::start(clock.clone());
        assert_eq!(
            clock.deadline(),
            None,
            "a request being handled has no limit"
        );
        clock.bytes_read(); // its body
        assert_eq!(clock.deadline(), None);
        drop(busy);
        assert!(about(clock.deadline(), 5, Wait::Idle), "after the response");
        clock.bytes_read();
        let head = clock.deadline();
        assert!(
            about(head, 2, Wait::Head),
            "the next request's first byte starts the header limit"
        );
        std::thread::sleep(Duration::from_millis(20));
        clock.bytes_read();
        assert_eq!(
            clock.deadline(),
            head,
            "later bytes of the same head do not extend it"
        );
    }
}
