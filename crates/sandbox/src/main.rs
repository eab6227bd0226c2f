//! `kube-sandbox up --dir DIR [--port N] [--nodes N]`: runs a sandbox control plane until
//! SIGINT or SIGTERM, with its kubeconfig in `DIR/kubeconfig`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use kube_sandbox::{Sandbox, SandboxOptions};

#[derive(Parser)]
#[command(
    name = "kube-sandbox",
    about = "A Kubernetes control plane in one process, for tests and demos"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the control plane, write DIR/kubeconfig, print `ready`, run until SIGINT/SIGTERM.
    Up {
        /// Directory for the kubeconfig and the sandbox's state.
        #[arg(long)]
        dir: PathBuf,
        /// Port of the API server (0 picks a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Number of nodes.
        #[arg(long, default_value_t = 3)]
        nodes: usize,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Up { dir, port, nodes } => {
            let sandbox = Sandbox::start(SandboxOptions::new(dir).port(port).nodes(nodes)).await?;
            eprintln!(
                "kube-sandbox: serving {} (kubeconfig {})",
                sandbox.url(),
                sandbox.kubeconfig_path().display()
            );
            println!("ready");
            wait_for_signal().await?;
            sandbox.stop();
            Ok(())
        }
    }
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    Ok(())
}
