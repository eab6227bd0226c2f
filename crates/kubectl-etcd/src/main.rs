//! The `kubectl-etcd` binary: `kubectl etcd <command>` once it is on PATH.

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    std::process::exit(kubectl_etcd::main().await);
}
