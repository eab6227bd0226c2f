//! What the etcd-sim test files share (included with `#[path]`): a plain HTTP GET, and a
//! client of a member once it answers.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use etcd_client::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `GET path` on `base` (`http://host:port`): the status code and the body.
pub async fn http_get(base: &str, path: &str) -> (u16, String) {
    let authority = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(authority)
        .await
        .expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    let text = String::from_utf8_lossy(&raw);
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// The status code of `GET path` on `base`.
pub async fn http_status(base: &str, path: &str) -> u16 {
    http_get(base, path).await.0
}

/// A client of the member at `url` once it answers Status (within `within`).
pub async fn connect_when_up(url: &str, within: Duration) -> Client {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(mut client) = Client::connect([url], None).await
            && client.status().await.is_ok()
        {
            return client;
        }
        assert!(
            Instant::now() < deadline,
            "{url} did not answer within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
