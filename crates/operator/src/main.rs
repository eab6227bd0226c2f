//! The `etcd-operator` binary.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "etcd-operator",
    version,
    about = "A Kubernetes operator for etcd"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator: reconcile EtcdClusters (leader-elected among replicas), serve
    /// /metrics, /healthz and /readyz, until SIGTERM.
    Run(Box<etcd_operator::config::RunArgs>),
    /// Print the CustomResourceDefinitions of the API as YAML (or write one file per CRD).
    Crds {
        /// Write `<plural>.yaml` files into this directory instead of printing.
        #[arg(long)]
        out_dir: Option<std::path::PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    // One TLS provider for the whole process (kube and the etcd client), before any client.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?
            .block_on(etcd_operator::run::run(*args)),
        Command::Crds { out_dir: None } => print_crds(),
        Command::Crds { out_dir: Some(dir) } => write_crds(&dir),
    }
}

/// Prints every CRD to stdout as one YAML stream, documents separated by `---`.
fn print_crds() -> anyhow::Result<()> {
    let stream = etcd_operator_api::crds()
        .iter()
        .map(etcd_operator_api::crd_yaml)
        .collect::<Vec<_>>()
        .join("---\n");
    std::io::stdout()
        .lock()
        .write_all(stream.as_bytes())
        .context("writing the CRDs to stdout")
}

/// Writes each CRD to `<dir>/<plural>.yaml`, creating `dir` if needed.
fn write_crds(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating the output directory {}", dir.display()))?;
    for crd in etcd_operator_api::crds() {
        let path = dir.join(etcd_operator_api::crd_file_name(&crd));
        std::fs::write(&path, etcd_operator_api::crd_yaml(&crd))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
