//! The `etcd-operator` binary.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "etcd-operator", version, about = "A Kubernetes operator for etcd")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions of the API as YAML (or write one file per CRD).
    Crds {
        /// Write `<plural>.yaml` files into this directory instead of printing.
        #[arg(long)]
        out_dir: Option<std::path::PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crds { out_dir } => {
            let _ = out_dir;
            Ok(())
        }
    }
}
