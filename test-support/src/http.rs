//! Serving in this process, on a port the system picks; and a client too slow to serve.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A listener on 127.0.0.1 at a free port, and its address.
pub async fn listener() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    (listener, addr)
}

/// Serves `router` on 127.0.0.1 at a free port until the test ends; returns its address.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let (listener, addr) = listener().await;
    serve_listener(listener, router);
    addr
}

/// Serves `router` on `listener` until the test ends.
pub fn serve_listener(listener: TcpListener, router: axum::Router) {
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
}

/// A port nothing listens on right now (the system's pick, released again).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .expect("local address")
        .port()
}

/// A slow client (slowloris): connects to `addr`, sends `head` at once, then `trickle` one byte
/// a second, until the server answers and closes (or 10 s pass). Returns what the server
/// answered and when it let go, counted from just before the first trickled byte (`None`: still
/// connected after 10 s).
pub async fn trickle(addr: SocketAddr, head: &[u8], trickle: &[u8]) -> (String, Option<Duration>) {
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    stream.write_all(head).await.expect("head sent");
    let started = Instant::now();
    let (mut read, mut write) = stream.into_split();
    let trickle = trickle.to_vec();
    let writer = tokio::spawn(async move {
        for byte in trickle {
            if write.write_all(&[byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let mut answer = Vec::new();
    // End of stream or a reset: either way the server let go.
    let closed = tokio::time::timeout(Duration::from_secs(10), read.read_to_end(&mut answer))
        .await
        .ok()
        .map(|_| started.elapsed());
    writer.abort();
    (String::from_utf8_lossy(&answer).into_owned(), closed)
}
