//! The HTTP server every listener runs (`ops::http::serve`), over raw TCP as a slow or idle
//! client would use it: its time limits, the peer address it gives handlers, and its drain.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::ConnectInfo;
use axum::routing::{get, post};
use ops::http::Timeouts;
use test_support::http::trickle;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/echo", post(|body: Bytes| async move { body }))
        .route(
            "/peer",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(1000)).await;
                "done"
            }),
        )
}

fn secs(header: u64, body: u64, idle: u64) -> Timeouts {
    Timeouts {
        header_read: Duration::from_secs(header),
        body_read: Duration::from_secs(body),
        idle: Duration::from_secs(idle),
    }
}

struct Server {
    addr: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

async fn start(timeouts: Timeouts) -> Server {
    let listener = ops::http::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(ops::http::serve(listener, app(), timeouts, stop.clone()));
    Server { addr, stop, task }
}

/// Reads one response with a `content-length`: its status and body.
async fn read_response(stream: &mut TcpStream) -> (u16, String) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).await.expect("reading the head");
        assert!(n > 0, "closed mid-head: {}", String::from_utf8_lossy(&buf));
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let status = head[9..12].parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream
        .read_exact(&mut body)
        .await
        .expect("reading the body");
    (status, String::from_utf8(body).unwrap())
}

/// Waits (at most `limit`) for the server to close the connection; returns when it did, counted
/// from `since`, or `None` if it was still open.
async fn closed_after(stream: TcpStream, since: Instant, limit: Duration) -> Option<Duration> {
    let (mut read, _write) = stream.into_split();
    let mut rest = Vec::new();
    // End of stream or a reset: either way the server let go.
    match tokio::time::timeout(limit, read.read_to_end(&mut rest)).await {
        Ok(_) => Some(since.elapsed()),
        Err(_) => None,
    }
}

#[tokio::test]
async fn a_head_sent_one_byte_a_second_is_cut_off_at_the_header_limit() {
    let server = start(secs(2, 30, 60)).await;
    let (answer, closed) = trickle(
        server.addr,
        b"",
        b"GET / HTTP/1.1\r\nHost: x\r\nX-Padding: aaaaaaaaaaaaaaaa\r\n\r\n",
    )
    .await;
    println!("slow header: disconnected after {closed:?} (limit 2 s)");
    let elapsed = closed.expect("still connected after 10 s");
    assert!(answer.is_empty(), "no request was answered");
    assert!(
        elapsed >= Duration::from_millis(1900) && elapsed < Duration::from_millis(3500),
        "disconnected after {elapsed:?}, expected about 2 s"
    );
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_at_the_header_limit() {
    let server = start(secs(1, 30, 60)).await;
    let started = Instant::now();
    let stream = TcpStream::connect(server.addr).await.unwrap();
    let elapsed = closed_after(stream, started, Duration::from_secs(5))
        .await
        .expect("closed");
    assert!(elapsed < Duration::from_millis(2500), "{elapsed:?}");
}

#[tokio::test]
async fn a_body_sent_one_byte_a_second_is_answered_408_at_the_body_limit() {
    let server = start(secs(10, 2, 60)).await;
    let (answer, closed) = trickle(
        server.addr,
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n",
        &[b'a'; 40],
    )
    .await;
    println!(
        "slow body: {:?} after {closed:?} (limit 2 s)",
        answer.lines().next()
    );
    let elapsed = closed.expect("still connected after 10 s");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(
        elapsed >= Duration::from_millis(1900) && elapsed < Duration::from_millis(3500),
        "answered after {elapsed:?}, expected about 2 s"
    );
}

#[tokio::test]
async fn a_body_that_arrives_in_time_is_read_whole() {
    let server = start(secs(10, 2, 60)).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhel")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stream.write_all(b"lo").await.unwrap();
    assert_eq!(read_response(&mut stream).await, (200, "hello".into()));
}

#[tokio::test]
async fn a_kept_alive_connection_may_idle_longer_than_the_header_limit_then_is_closed() {
    let server = start(secs(1, 30, 3)).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    stream.write_all(request).await.unwrap();
    assert_eq!(read_response(&mut stream).await, (200, "hello".into()));
    // Longer than the header limit: an idle wait is not a slow head.
    tokio::time::sleep(Duration::from_millis(1800)).await;
    stream.write_all(request).await.unwrap();
    assert_eq!(read_response(&mut stream).await, (200, "hello".into()));
    let answered = Instant::now();
    let elapsed = closed_after(stream, answered, Duration::from_secs(8))
        .await
        .expect("an idle connection is closed");
    println!("idle keep-alive: closed after {elapsed:?} (limit 3 s)");
    assert!(
        elapsed >= Duration::from_millis(2900) && elapsed < Duration::from_millis(4500),
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn a_request_being_handled_is_not_cut_off() {
    let server = start(secs(1, 1, 1)).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // The handler takes 1 s, as long as every limit: none applies while it works.
    assert_eq!(read_response(&mut stream).await, (200, "done".into()));
}

#[tokio::test]
async fn handlers_see_the_peer_address() {
    let server = start(Timeouts::default()).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let local = stream.local_addr().unwrap();
    stream
        .write_all(b"GET /peer HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_response(&mut stream).await, (200, local.to_string()));
}

#[tokio::test]
async fn shutdown_finishes_requests_in_flight_then_stops_accepting() {
    let server = start(Timeouts::default()).await;
    let mut busy = TcpStream::connect(server.addr).await.unwrap();
    busy.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut idle = TcpStream::connect(server.addr).await.unwrap();
    idle.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_response(&mut idle).await, (200, "hello".into()));
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.stop.cancel();
    let since = Instant::now();
    assert_eq!(
        closed_after(idle, since, Duration::from_secs(2))
            .await
            .map(|_| ()),
        Some(()),
        "an idle connection is closed at once"
    );
    assert_eq!(read_response(&mut busy).await, (200, "done".into()));
    tokio::time::timeout(Duration::from_secs(3), server.task)
        .await
        .expect("serve returns once drained")
        .unwrap();
    assert!(
        TcpStream::connect(server.addr).await.is_err(),
        "no longer accepting"
    );
}
