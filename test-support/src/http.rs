//! Serving in this process, on a port the system picks.

use std::net::SocketAddr;

use tokio::net::TcpListener;

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
