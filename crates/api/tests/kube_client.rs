//! The client's connection pool lets an idle connection go after its idle timeout, so it never
//! reuses one kube-apiserver may be closing (`docs/testing.md` item 8). A local HTTP/1.1 server
//! counts the connections the client opens.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use etcd_operator_api::kube_client::client_with_pool_idle;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server that answers every request with `{}` and keeps the connection open; returns its
/// URL and the number of connections accepted so far.
async fn counting_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(read) = stream.read(&mut chunk).await else {
                        return;
                    };
                    if read == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..read]);
                    while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        buffer.drain(..end + 4);
                        let response = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                        if stream.write_all(response.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (url, accepted)
}

/// Connections the server accepted for two requests `pause` apart, through a client whose pool
/// keeps idle connections for `idle`.
async fn connections_for_two_requests(idle: Duration, pause: Duration) -> usize {
    let (url, accepted) = counting_server().await;
    let config = kube::Config::new(url.parse().unwrap());
    let client = client_with_pool_idle(config, idle).unwrap();
    for index in 0..2 {
        if index > 0 {
            tokio::time::sleep(pause).await;
        }
        let request = http::Request::get("/version").body(Vec::new()).unwrap();
        assert_eq!(client.request_text(request).await.unwrap(), "{}");
    }
    accepted.load(Ordering::SeqCst)
}

#[tokio::test]
async fn an_idle_connection_past_the_pool_timeout_is_not_reused() {
    let connections =
        connections_for_two_requests(Duration::from_millis(150), Duration::from_millis(600)).await;
    assert_eq!(
        connections, 2,
        "the second request must open a new connection"
    );
}

#[tokio::test]
async fn a_connection_idle_within_the_pool_timeout_is_reused() {
    let connections =
        connections_for_two_requests(Duration::from_secs(30), Duration::from_millis(600)).await;
    assert_eq!(
        connections, 1,
        "the second request must reuse the first connection"
    );
}
