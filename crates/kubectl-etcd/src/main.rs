//! The `kubectl-etcdop` binary: `kubectl etcdop <command>` once it is on PATH.

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The commands run on a worker with a roomy stack: their futures nest deeply (the
    // operator's observe among them), more so in a debug build.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(32 * 1024 * 1024)
        .enable_all()
        .build()
        .expect("starting the Tokio runtime");
    let code = runtime
        .block_on(async { tokio::spawn(kubectl_etcd::main()).await })
        .unwrap_or(1);
    std::process::exit(code);
}
