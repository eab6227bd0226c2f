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
    /// Restore agent, step 1 (an init container of a restored cluster's seed): download the
    /// snapshot from an object store (S3, GCS, Azure) into the work directory, checking etcd's
    /// trailing hash. Credentials from the environment: AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY (S3), GOOGLE_SERVICE_ACCOUNT_KEY (GCS), AZURE_STORAGE_ACCOUNT_KEY
    /// or AZURE_STORAGE_SAS_TOKEN (Azure).
    RestoreFetch {
        #[arg(long)]
        work_dir: std::path::PathBuf,
        /// A PVC source: the snapshot file on the mounted claim (instead of an object store).
        #[arg(long, conflicts_with_all = ["endpoint", "bucket", "key", "account", "container"])]
        file: Option<std::path::PathBuf>,
        /// How to name the PVC source in messages (`pvc://<claim>/<subPath>`).
        #[arg(long, requires = "file")]
        uri: Option<String>,
        /// The object store: s3, gcs or azure.
        #[arg(long, default_value = "s3")]
        store: String,
        /// The endpoint (S3: required; GCS, Azure: when not the public service).
        #[arg(long)]
        endpoint: Option<String>,
        /// The bucket (S3, GCS).
        #[arg(long)]
        bucket: Option<String>,
        /// The storage account (Azure).
        #[arg(long)]
        account: Option<String>,
        /// The blob container (Azure).
        #[arg(long)]
        container: Option<String>,
        /// The exact key of the snapshot object.
        #[arg(long, required_unless_present = "file")]
        key: Option<String>,
        #[arg(long)]
        region: Option<String>,
        #[arg(long)]
        force_path_style: bool,
        /// The Secret the credentials come from, for messages.
        #[arg(long)]
        credentials_secret: Option<String>,
    },
    /// Snapshot agent (the Pod of an EtcdSnapshot to a PVC): stream a snapshot from one member
    /// into `--file` on the mounted claim, atomically, checking etcd's trailing hash; the
    /// result goes to the termination message. Credentials from ETCD_USERNAME/ETCD_PASSWORD.
    SnapshotSave {
        #[arg(long)]
        endpoint: String,
        #[arg(long)]
        member: String,
        #[arg(long)]
        file: std::path::PathBuf,
        #[arg(long)]
        uri: String,
        #[arg(long)]
        uid: String,
        /// A directory with ca.crt (and tls.crt, tls.key under mutual TLS).
        #[arg(long)]
        access_dir: Option<std::path::PathBuf>,
        #[arg(long, default_value = etcd_operator::snapshot::pvc::TERMINATION_LOG)]
        result_file: std::path::PathBuf,
    },
    /// Snapshot agent for `deletionPolicy: Delete`: remove `--file` if EtcdSnapshot `--uid`
    /// wrote it.
    SnapshotRemove {
        #[arg(long)]
        file: std::path::PathBuf,
        #[arg(long)]
        uri: String,
        #[arg(long)]
        uid: String,
        #[arg(long, default_value = etcd_operator::snapshot::pvc::TERMINATION_LOG)]
        result_file: std::path::PathBuf,
    },
    /// Restore agent, step 3: move the restored member directory into the data directory
    /// (unless it already holds one) and remove the work directory.
    RestoreCommit {
        #[arg(long)]
        work_dir: std::path::PathBuf,
        #[arg(long)]
        data_dir: std::path::PathBuf,
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
        Command::RestoreFetch {
            work_dir,
            file: Some(file),
            uri,
            ..
        } => {
            use etcd_operator::snapshot::restore;
            let uri = uri.unwrap_or_else(|| file.display().to_string());
            agent_exit(restore::fetch_file(&work_dir, &file, &uri).map(|(size, sha256)| {
                format!("copied {size} bytes from {uri}, sha256:{sha256}, etcd's trailing hash checked")
            }))
        }
        Command::RestoreFetch {
            work_dir,
            store,
            endpoint,
            bucket,
            account,
            container,
            key,
            region,
            force_path_style,
            credentials_secret,
            ..
        } => {
            use etcd_operator::snapshot::{restore, store as stores};
            let flags = restore::FetchFlags {
                store,
                endpoint,
                bucket,
                account,
                container,
                key,
                region,
                force_path_style,
                credentials_secret,
            };
            let location = match flags.location() {
                Ok(location) => location,
                Err(error) => return agent_exit(Err(error)),
            };
            let credentials = stores::credentials_with(&location, &flags.secret_words(), |key| {
                std::env::var(key).ok()
            });
            let args = restore::FetchArgs {
                work_dir,
                location,
                credentials,
            };
            let outcome = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?
                .block_on(restore::fetch(&args));
            agent_exit(outcome.map(|(size, sha256)| {
                format!("fetched {size} bytes, sha256:{sha256}, etcd's trailing hash checked")
            }))
        }
        Command::SnapshotSave {
            endpoint,
            member,
            file,
            uri,
            uid,
            access_dir,
            result_file,
        } => {
            use etcd_operator::snapshot::pvc;
            let credentials = std::env::var("ETCD_USERNAME")
                .ok()
                .zip(std::env::var("ETCD_PASSWORD").ok());
            let args = pvc::SaveArgs {
                endpoint,
                member,
                file,
                uri,
                uid,
                access_dir,
                credentials,
            };
            let outcome = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?
                .block_on(pvc::save(&args));
            let failed = outcome.is_err();
            let result = match outcome {
                Ok(saved) => pvc::AgentResult::Saved(saved),
                Err(failure) => pvc::AgentResult::Failed(failure),
            };
            pvc::report(&result, &result_file);
            if failed {
                std::process::exit(1)
            }
            Ok(())
        }
        Command::SnapshotRemove {
            file,
            uri,
            uid,
            result_file,
        } => {
            use etcd_operator::snapshot::pvc;
            let outcome = pvc::remove(&file, &uri, &uid);
            let failed = outcome.is_err();
            let result = match outcome {
                Ok(said) => pvc::AgentResult::Removed { said },
                Err(failure) => pvc::AgentResult::Failed(failure),
            };
            pvc::report(&result, &result_file);
            if failed {
                std::process::exit(1)
            }
            Ok(())
        }
        Command::RestoreCommit { work_dir, data_dir } => {
            use etcd_operator::snapshot::restore;
            agent_exit(
                restore::commit(&work_dir, &data_dir).map(|done| match done {
                    restore::Committed::Restored => {
                        format!("restored data moved into {}", data_dir.display())
                    }
                    restore::Committed::KeptExisting => format!(
                        "{} already holds a member: kept, the restored copy discarded",
                        data_dir.display()
                    ),
                }),
            )
        }
    }
}

/// Ends an agent step: its result on stdout, or its `RestoreFailed` line on stderr and exit 1.
fn agent_exit(
    outcome: Result<String, etcd_operator::snapshot::restore::RestoreError>,
) -> anyhow::Result<()> {
    match outcome {
        Ok(done) => {
            println!("{done}");
            Ok(())
        }
        Err(error) => {
            eprintln!("{}", error.line());
            std::process::exit(1)
        }
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
