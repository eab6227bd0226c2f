//! `etcd-sim`: one simulated etcd member, started with etcd's own flags (see
//! [`etcd_sim::single`]); serves until SIGTERM or SIGINT.

use std::process::ExitCode;

use etcd_sim::state::VERSION;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let flags = match etcd_sim::flags::parse(std::env::args().skip(1), |k| std::env::var(k).ok()) {
        Ok(flags) => flags,
        Err(e) => {
            eprintln!("etcd-sim: {e}");
            return ExitCode::from(2);
        }
    };
    if flags.version {
        println!(
            "etcd Version: {VERSION}\nGit SHA: etcd-sim\nGo Version: none\nGo OS/Arch: simulated"
        );
        return ExitCode::SUCCESS;
    }
    let server = match etcd_sim::single::start(&flags).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("etcd-sim: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(
        name = %flags.name,
        member = %format!("{:x}", server.id()),
        listening = ?server.addrs(),
        ignored = ?flags.ignored,
        "ready to serve client requests"
    );
    wait_for_signal().await;
    server.stop();
    ExitCode::SUCCESS
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
