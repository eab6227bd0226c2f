//! The HTTP server: `/metrics` (Prometheus text format), `/healthz` (the process serves) and
//! `/readyz` (a standby replica, or a leader whose caches are filled).
//!
//! `/healthz` is the liveness probe's: it reads one flag of this process and asks neither the
//! API server nor the leader Lease, so it fails only when the process is wedged (it does not
//! answer) or its controller stopped by itself, never because the API server is away or the
//! node is loaded. Losing the Lease is handled by the process itself (it exits).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::Metrics;

/// What the probes report.
#[derive(Default)]
pub struct Probes {
    /// False once the controller has stopped unexpectedly.
    live: AtomicBool,
    /// True while standing by, or leading with filled caches.
    ready: AtomicBool,
}

impl Probes {
    pub fn new() -> Probes {
        Probes {
            live: AtomicBool::new(true),
            ready: AtomicBool::new(false),
        }
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    pub fn set_live(&self, live: bool) {
        self.live.store(live, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
struct ServerState {
    metrics: Arc<Metrics>,
    probes: Arc<Probes>,
}

/// The routes, for serving and for tests.
pub fn router(metrics: Arc<Metrics>, probes: Arc<Probes>) -> Router {
    Router::new()
        .route("/metrics", get(serve_metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(ServerState { metrics, probes })
}

async fn serve_metrics(State(state): State<ServerState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
}

async fn healthz(State(state): State<ServerState>) -> impl IntoResponse {
    if state.probes.is_live() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "the controller stopped")
    }
}

async fn readyz(State(state): State<ServerState>) -> impl IntoResponse {
    if state.probes.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches are not filled yet")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use tokio_util::sync::CancellationToken;

    async fn get_path(addr: SocketAddr, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let code = response[9..12].parse().unwrap();
        (code, response)
    }

    #[tokio::test]
    async fn probes_and_metrics_are_served() {
        let metrics = Arc::new(Metrics::new());
        metrics.set_leader(true);
        let probes = Arc::new(Probes::new());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let serving = {
            let (metrics, probes, shutdown) = (metrics.clone(), probes.clone(), shutdown.clone());
            tokio::spawn(async move {
                axum::serve(listener, router(metrics, probes))
                    .with_graceful_shutdown(async move { shutdown.cancelled().await })
                    .await
            })
        };
        assert_eq!(get_path(addr, "/healthz").await.0, 200);
        assert_eq!(get_path(addr, "/readyz").await.0, 503);
        probes.set_ready(true);
        assert_eq!(get_path(addr, "/readyz").await.0, 200);
        let (code, body) = get_path(addr, "/metrics").await;
        assert_eq!(code, 200);
        assert!(body.contains("etcd_operator_leader 1"), "{body}");
        probes.set_live(false);
        assert_eq!(get_path(addr, "/healthz").await.0, 503);
        shutdown.cancel();
        serving.await.unwrap().unwrap();
    }
}
