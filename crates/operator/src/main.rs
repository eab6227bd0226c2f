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
    /// snapshot from an object store (S3, GCS, Azure) or copy it from a claim into the work
    /// directory, decrypting (age) and decompressing (zstd, gzip) what it recognises, checking
    /// etcd's trailing hash. Credentials from the environment: AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY (S3), GOOGLE_SERVICE_ACCOUNT_KEY (GCS), AZURE_STORAGE_ACCOUNT_KEY
    /// or AZURE_STORAGE_SAS_TOKEN (Azure); the age identity from AGE_IDENTITY.
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
        /// `Zstd` or `Gzip` (none by default).
        #[arg(long, value_parser = parse_compression, default_value = "None")]
        compression: etcd_operator_api::snapshot::SnapshotCompression,
        /// An age recipient to encrypt to (repeatable); the identity to read the file back
        /// with comes from AGE_IDENTITY.
        #[arg(long = "age-recipient")]
        age_recipients: Vec<String>,
        #[arg(long, default_value = etcd_operator::snapshot::pvc::TERMINATION_LOG)]
        result_file: std::path::PathBuf,
    },
    /// Snapshot agent for `verify: Restore` (a container beside the restored throwaway etcd):
    /// wait for it to serve, read its revision and count its keys; the result goes to the
    /// termination message. Credentials from ETCD_USERNAME/ETCD_PASSWORD.
    SnapshotCheck {
        #[arg(long)]
        endpoint: String,
        #[arg(long, default_value_t = 300)]
        deadline_seconds: u64,
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
            let identity = age_identity();
            agent_exit(
                restore::fetch_file(&work_dir, &file, &uri, identity.as_deref()).map(
                    |(size, sha256)| {
                        format!("copied {uri}: etcd's {size} bytes, sha256:{sha256}, etcd's trailing hash checked")
                    },
                ),
            )
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
                identity: age_identity(),
            };
            let outcome = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?
                .block_on(restore::fetch(&args));
            agent_exit(outcome.map(|(size, sha256)| {
                format!(
                    "fetched etcd's {size} bytes, sha256:{sha256}, etcd's trailing hash checked"
                )
            }))
        }
        Command::SnapshotSave {
            endpoint,
            member,
            file,
            uri,
            uid,
            access_dir,
            compression,
            age_recipients,
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
                compression,
                recipients: age_recipients,
                identity: age_identity(),
            };
            let outcome = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?
                .block_on(pvc::save(&args));
            pvc::report(&outcome, &result_file);
            if !matches!(outcome, pvc::AgentResult::Saved(_)) {
                std::process::exit(1)
            }
            Ok(())
        }
        Command::SnapshotCheck {
            endpoint,
            deadline_seconds,
            result_file,
        } => {
            use etcd_operator::snapshot::{pvc, verify};
            let credentials = std::env::var("ETCD_USERNAME")
                .ok()
                .zip(std::env::var("ETCD_PASSWORD").ok());
            let outcome = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?
                .block_on(verify::check(
                    &endpoint,
                    credentials,
                    std::time::Duration::from_secs(deadline_seconds),
                ));
            let failed = outcome.is_err();
            let result = outcome.unwrap_or_else(pvc::AgentResult::Failed);
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

/// The age identity file's text from `AGE_IDENTITY` (filled from a Secret key by
/// reference), if set.
fn age_identity() -> Option<String> {
    std::env::var(etcd_operator::build::AGE_IDENTITY_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
}

fn parse_compression(
    value: &str,
) -> Result<etcd_operator_api::snapshot::SnapshotCompression, String> {
    use etcd_operator_api::snapshot::SnapshotCompression;
    match value {
        "None" | "none" => Ok(SnapshotCompression::None),
        "Zstd" | "zstd" => Ok(SnapshotCompression::Zstd),
        "Gzip" | "gzip" => Ok(SnapshotCompression::Gzip),
        other => Err(format!("{other:?} is not None, Zstd or Gzip")),
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
