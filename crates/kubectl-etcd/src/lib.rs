//! `kubectl etcdop`: day-2 operations on an EtcdCluster through the Kubernetes API.
//!
//! The binary is `kubectl-etcdop`, so that it never collides with the reference operator's
//! `kubectl-etcd`; it names itself after however it was invoked (a link `kubectl-etcd` makes
//! it `kubectl etcdop`), see deploy/krew/etcdop.yaml.
//!
//! Every command finds the cluster (the namespace's only one unless named), reads what it owns
//! and observes etcd exactly as the operator's `observe` does, reaching each member Pod through
//! a `pods/portforward` of the API server, with the TLS and credentials the cluster's Secrets
//! give (the CA, the operator's client certificate, root's password): never from Pod args.
//!
//! Exit codes: 0 done; 1 failed (the message says what to do); 2 bad usage; 3 `health` found
//! a minority of voters lost; 4 `health` found quorum lost; 5 `hashkv` found the members'
//! keyspaces differ; 6 `check perf` failed its criteria.

pub mod health;
pub mod migrate;
pub mod ops;
pub mod output;
pub mod restore;
pub mod session;

mod cluster_commands;
mod data_commands;
use cluster_commands::*;
use data_commands::*;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use clap::{Args, Parser, Subcommand};
use etcd_operator::etcd::{Timeouts, member_id_hex, parse_member_id};
use etcd_operator::plan::ObservedMember;
use etcd_operator_api::{EtcdCluster, EtcdSnapshot};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use health::{Health, VoterEvidence, classify};
use output::{Format, Printed, Table, bytes};
use session::{Session, Target, Usage};

/// etcd's default `--quota-backend-bytes`.
const DEFAULT_QUOTA: i64 = 2 * 1024 * 1024 * 1024;

#[derive(Parser, Debug)]
#[command(
    name = "kubectl-etcdop",
    bin_name = "kubectl etcdop",
    about = "Day-2 operations on EtcdClusters, through the Kubernetes API",
    version
)]
pub struct Cli {
    /// Path to the kubeconfig file.
    #[arg(long, global = true, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The namespace of the EtcdCluster (default: the context's).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value = "table")]
    pub output: Format,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct ClusterArg {
    /// The EtcdCluster (default: the namespace's only one).
    pub cluster: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct MemberArg {
    /// Only this member (its EtcdMember name).
    #[arg(long)]
    pub member: Option<String>,
}

#[derive(Subcommand, Debug)]
// Parsed once per process: the size of the largest variant (`snapshot create`) does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Every member in one table: ID, leader, learner, version, DB size and in use with % of
    /// quota, raft index and term, alarms, Pod and EtcdMember phase.
    Status {
        #[command(flatten)]
        cluster: ClusterArg,
        #[command(flatten)]
        member: MemberArg,
    },
    /// etcd's member list, with each member's EtcdMember.
    Members {
        #[command(flatten)]
        cluster: ClusterArg,
    },
    /// Healthy, minority lost or quorum lost, with the evidence (exit 0, 3, 4).
    Health {
        #[command(flatten)]
        cluster: ClusterArg,
    },
    /// Defragments every member one at a time, followers first and the leader last.
    Defrag {
        #[command(flatten)]
        cluster: ClusterArg,
        #[command(flatten)]
        member: MemberArg,
    },
    /// Compacts the key space up to a revision (default: the current one).
    Compact {
        #[command(flatten)]
        cluster: ClusterArg,
        #[arg(long)]
        revision: Option<i64>,
    },
    /// Lists or disarms alarms.
    Alarm {
        #[command(subcommand)]
        action: AlarmAction,
    },
    /// The leader hands leadership to another healthy voter (or to --to).
    ForfeitLeadership {
        #[command(flatten)]
        cluster: ClusterArg,
        /// The member to lead next.
        #[arg(long)]
        to: Option<String>,
    },
    /// The member named by --member leaves the cluster (etcd MemberRemove of itself).
    Leave {
        #[command(flatten)]
        cluster: ClusterArg,
        #[arg(long, required = true)]
        member: String,
    },
    /// Removes a member by name or hexadecimal ID.
    RemoveMember {
        #[command(flatten)]
        cluster: ClusterArg,
        /// The member's name or ID.
        #[arg(long, required = true)]
        member: String,
    },
    /// Adds a learner with the given peer URL (promote it once it has caught up).
    AddMember {
        #[command(flatten)]
        cluster: ClusterArg,
        #[arg(long, required = true)]
        peer_url: String,
    },
    /// `snapshot save FILE` saves a snapshot to a local file atomically (temporary file, fsync,
    /// rename) and prints its SHA-256; `snapshot create NAME` makes an EtcdSnapshot instead.
    /// (`snapshot FILE` still works, as `snapshot save FILE`.)
    #[command(args_conflicts_with_subcommands = true)]
    Snapshot {
        #[command(subcommand)]
        create: Option<SnapshotCommand>,
        /// Where to write the snapshot.
        file: Option<PathBuf>,
        #[command(flatten)]
        cluster: SnapshotCluster,
        #[command(flatten)]
        member: MemberArg,
    },
    /// Sets spec.paused: the operator leaves the cluster alone until `resume`.
    Pause {
        #[command(flatten)]
        cluster: ClusterArg,
    },
    /// Clears spec.paused.
    Resume {
        #[command(flatten)]
        cluster: ClusterArg,
    },
    /// Asks the operator for a lost-quorum recovery: it recreates the survivor (--member, or
    /// the answering voter with the highest raft index) with --force-new-cluster, then the
    /// other members join again. Refused by the operator while a majority serves.
    RecoverQuorum {
        #[command(flatten)]
        cluster: ClusterArg,
        /// The member to recover from (default: the operator picks the highest raft index).
        #[arg(long, conflicts_with = "snapshot")]
        member: Option<String>,
        /// When no member's data survives: the EtcdSnapshot (of this cluster) to restore from
        /// (default: the newest Complete and verified one).
        #[arg(long)]
        snapshot: Option<String>,
        /// Wait until the recovery completed and the cluster is Available (or it was refused
        /// or aborted), printing each phase.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits.
        #[arg(long, default_value = "15m", value_parser = parse_duration, requires = "wait")]
        timeout: Duration,
    },
    /// Promotes a learner (EtcdMember name or hex ID) to voter; etcd refuses one that has not
    /// caught up with the leader yet. The operator promotes its learners by itself.
    PromoteMember {
        #[command(flatten)]
        cluster: ClusterArg,
        #[arg(long, required = true)]
        member: String,
    },
    /// Compares every member's hash of its keyspace (etcd's HashKV) at one revision all have
    /// applied: equal hashes mean the same data. Exit code 5 when they differ.
    Hashkv {
        #[command(flatten)]
        cluster: ClusterArg,
        /// The revision to compare at (default: the lowest current revision of the members).
        #[arg(long)]
        revision: Option<i64>,
    },
    /// Checks the cluster's performance.
    Check {
        #[command(subcommand)]
        check: CheckCommand,
    },
    /// Issues a client certificate signed by the cluster's operator-issued CA (mutual TLS):
    /// into a Secret of type kubernetes.io/tls, or files. The operator does not renew it.
    Certificate {
        #[command(flatten)]
        cluster: ClusterArg,
        /// The certificate's common name: etcd's user name under authentication.
        #[arg(long = "common-name", required = true)]
        common_name: String,
        /// Write a Secret of this name in the cluster's namespace.
        #[arg(long, conflicts_with = "out_dir")]
        secret: Option<String>,
        /// Or write tls.crt, tls.key and ca.crt into this (new) directory.
        #[arg(long = "out-dir")]
        out_dir: Option<PathBuf>,
        /// Validity (never past the CA's end).
        #[arg(long, default_value = "2160h", value_parser = parse_duration)]
        duration: Duration,
    },
    /// Writes what a support request needs into a directory: the cluster's objects, Events,
    /// member logs, etcd's status and health, the operator's log. Never a Secret.
    Report {
        #[command(flatten)]
        cluster: ClusterArg,
        /// The directory to create (default: etcdop-report-<namespace>-<cluster>-<time>).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Log lines per container.
        #[arg(long, default_value = "2000")]
        tail: i64,
    },
    /// Prints a shell completion script: `source <(kubectl etcdop completion bash)`.
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Takes over an EtcdCluster of the legacy etcd.aenix.io/v1alpha1 operator in place (dry
    /// run by default; --apply to act): a safety snapshot, the spec translated, EtcdCluster
    /// and EtcdMembers with their status filled in, the StatefulSet deleted with its Pods
    /// orphaned, Pods and PVCs re-owned, the Services replaced, backups translated.
    Migrate(migrate::MigrateArgs),
    /// Creates a new EtcdCluster from a Complete EtcdSnapshot (spec.bootstrap.restore), copying
    /// what is not bound to the old cluster's name from the cluster it was taken of, and waits
    /// until it is Available.
    Restore {
        /// The new EtcdCluster's name.
        name: String,
        /// The EtcdSnapshot to restore (in the namespace; Complete).
        #[arg(long = "from-snapshot", required = true)]
        from_snapshot: String,
        /// Members of the new cluster (default: the old cluster's, or 3).
        #[arg(long)]
        replicas: Option<i32>,
        /// etcd version (default: the one the snapshot was taken with).
        #[arg(long)]
        version: Option<String>,
        /// Size of each member's volume (default: the old cluster's).
        #[arg(long)]
        storage_size: Option<String>,
        /// StorageClass of the members' volumes (default: the old cluster's).
        #[arg(long)]
        storage_class: Option<String>,
        /// Print the EtcdCluster, create nothing.
        #[arg(long)]
        dry_run: bool,
        /// Return once created, without waiting for Available.
        #[arg(long)]
        no_wait: bool,
        /// How long to wait for the cluster to be Available.
        #[arg(long, default_value = "10m", value_parser = parse_duration)]
        timeout: Duration,
    },
}

#[derive(Args, Debug, Clone)]
pub struct SnapshotCluster {
    /// The EtcdCluster (default: the namespace's only one).
    #[arg(long)]
    pub cluster: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum AlarmAction {
    /// The active alarms.
    List {
        #[command(flatten)]
        cluster: ClusterArg,
    },
    /// Disarms every active alarm (or only --member's).
    Disarm {
        #[command(flatten)]
        cluster: ClusterArg,
        #[command(flatten)]
        member: MemberArg,
    },
}

#[derive(Subcommand, Debug)]
pub enum CheckCommand {
    /// Puts 1 KiB values at a load's rate for a while, through the port-forwards, and judges
    /// throughput and latency as `etcdctl check perf` does; the keys are deleted after. Exit
    /// code 6 when it fails.
    Perf {
        #[command(flatten)]
        cluster: ClusterArg,
        /// s: 150 puts/s from 50 clients; m: 1000 from 200; l: 8000 from 500.
        #[arg(long, value_enum, default_value = "s")]
        load: ops::PerfLoad,
        /// How long to put.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        duration: Duration,
    },
}

#[derive(Subcommand, Debug)]
pub enum SnapshotCommand {
    /// Saves a snapshot to a local file atomically and prints its SHA-256.
    Save {
        /// Where to write it (must not exist).
        file: PathBuf,
        #[command(flatten)]
        cluster: SnapshotCluster,
        #[command(flatten)]
        member: MemberArg,
    },
    /// Creates an EtcdSnapshot, waits until it is Complete or Failed, prints the artifact.
    Create {
        /// The EtcdSnapshot's name.
        name: String,
        #[command(flatten)]
        cluster: SnapshotCluster,
        /// Store it on this PVC (in the cluster's namespace).
        #[arg(long, conflicts_with = "s3_bucket")]
        pvc: Option<String>,
        /// A subdirectory of the PVC.
        #[arg(long, requires = "pvc")]
        sub_path: Option<String>,
        /// Store it in this S3 bucket.
        #[arg(long, requires_all = ["s3_endpoint", "s3_secret"])]
        s3_bucket: Option<String>,
        #[arg(long)]
        s3_endpoint: Option<String>,
        /// Key prefix in the bucket.
        #[arg(long)]
        s3_key: Option<String>,
        /// Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
        #[arg(long)]
        s3_secret: Option<String>,
        /// The bucket's region.
        #[arg(long)]
        s3_region: Option<String>,
        /// Path-style URLs (MinIO, Ceph, moto).
        #[arg(long)]
        s3_force_path_style: bool,
        /// How long to wait for the snapshot to finish.
        #[arg(long, default_value = "10m", value_parser = parse_duration)]
        timeout: Duration,
    },
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 90s, 10m or 1h"))?;
    Ok(Duration::from_secs(match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{text:?} is not a duration such as 90s, 10m or 1h")),
    }))
}

/// What `run` produced: the exit code and the text for stdout and stderr.
#[derive(Debug, Default)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the plugin with `args` (the first is the program name), as the binary does.
pub async fn run<I, S>(args: I) -> Outcome
where
    I: IntoIterator<Item = S>,
    S: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let parsed = <Cli as clap::CommandFactory>::command()
        .bin_name(invoked_as(args.first()))
        .try_get_matches_from(args)
        .and_then(|matches| <Cli as clap::FromArgMatches>::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() { 2 } else { 0 };
            let text = err.render().to_string();
            return if code == 0 {
                Outcome {
                    code,
                    stdout: text,
                    stderr: String::new(),
                }
            } else {
                Outcome {
                    code,
                    stdout: String::new(),
                    stderr: text,
                }
            };
        }
    };
    let format = cli.output;
    // Boxed: the commands' futures are large, and a caller's stack (a test thread) is small.
    match Box::pin(execute(cli)).await {
        Ok(printed) => Outcome {
            code: printed.code,
            stdout: printed.render(format),
            stderr: String::new(),
        },
        Err(err) => Outcome {
            code: 1,
            stdout: String::new(),
            stderr: format!("error: {}\n", chain(&err)),
        },
    }
}

/// How the user typed the plugin, from the program's name: `kubectl-etcdop` is `kubectl
/// etcdop`, a link `kubectl-etcd` to it is `kubectl etcd` (kubectl maps `_` in a plugin's file
/// name to `-`); anything else (a test's argv) is `kubectl etcdop`.
pub fn invoked_as(program: Option<&std::ffi::OsString>) -> String {
    let name = program
        .map(|p| {
            Path::new(p)
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    match name.strip_prefix("kubectl-") {
        Some(plugin) if !plugin.is_empty() => format!("kubectl {}", plugin.replace('_', "-")),
        _ => "kubectl etcdop".to_string(),
    }
}

/// The error and its causes on one line, as kubectl prints errors.
fn chain(err: &anyhow::Error) -> String {
    if let Some(usage) = err.downcast_ref::<Usage>() {
        return usage.0.clone();
    }
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// The binary's entry point: prints and exits with the code.
pub async fn main() -> i32 {
    let outcome = run(std::env::args_os().collect::<Vec<_>>()).await;
    let _ = std::io::stdout().write_all(outcome.stdout.as_bytes());
    let _ = std::io::stderr().write_all(outcome.stderr.as_bytes());
    outcome.code
}

fn target(cli: &Cli, cluster: Option<String>) -> Target {
    Target {
        kubeconfig: cli.kubeconfig.clone(),
        context: cli.context.clone(),
        namespace: cli.namespace.clone(),
        cluster,
    }
}

async fn execute(cli: Cli) -> anyhow::Result<Printed> {
    match &cli.command {
        Command::Status { cluster, member } => {
            let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
            status(&session, member.member.as_deref())
        }
        Command::Members { cluster } => {
            members(&Session::open(&target(&cli, cluster.cluster.clone())).await?)
        }
        Command::Health { cluster } => Ok(health(
            &Session::open(&target(&cli, cluster.cluster.clone())).await?,
        )),
        Command::Defrag { cluster, member } => {
            let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
            defrag(&session, member.member.as_deref()).await
        }
        Command::Compact { cluster, revision } => {
            let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
            compact(&session, *revision).await
        }
        Command::Alarm { action } => match action {
            AlarmAction::List { cluster } => {
                alarm_list(&Session::open(&target(&cli, cluster.cluster.clone())).await?)
            }
            AlarmAction::Disarm { cluster, member } => {
                let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
                alarm_disarm(&session, member.member.as_deref()).await
            }
        },
        Command::ForfeitLeadership { cluster, to } => {
            let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
            forfeit_leadership(&session, to.as_deref()).await
        }
        Command::Leave { cluster, member } | Command::RemoveMember { cluster, member } => {
            let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
            remove_member(&session, member).await
        }
        Command::AddMember { cluster, peer_url } => {
            let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
            add_member(&session, peer_url).await
        }
        Command::Snapshot {
            create:
                Some(SnapshotCommand::Create {
                    name,
                    cluster,
                    pvc,
                    sub_path,
                    s3_bucket,
                    s3_endpoint,
                    s3_key,
                    s3_secret,
                    s3_region,
                    s3_force_path_style,
                    timeout,
                }),
            ..
        } => {
            let destination = match (pvc, s3_bucket) {
                (Some(claim), None) => json!({"pvc": {"claimName": claim, "subPath": sub_path}}),
                (None, Some(bucket)) => json!({"s3": {
                    "endpoint": s3_endpoint, "bucket": bucket, "key": s3_key,
                    "credentialsSecretRef": {"name": s3_secret},
                    "region": s3_region,
                    "forcePathStyle": s3_force_path_style.then_some(true),
                }}),
                _ => bail!(Usage(
                    "say where the snapshot goes: --pvc <claim> or --s3-bucket <bucket> --s3-endpoint <url> --s3-secret <secret>".into()
                )),
            };
            snapshot_create(&cli, cluster.cluster.clone(), name, destination, *timeout).await
        }
        Command::Snapshot {
            create:
                Some(SnapshotCommand::Save {
                    file,
                    cluster,
                    member,
                }),
            ..
        } => {
            let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
            snapshot_save(&session, file, member.member.as_deref()).await
        }
        Command::PromoteMember { cluster, member } => {
            let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
            ops::promote_member(&session, member).await
        }
        Command::Hashkv { cluster, revision } => {
            let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
            ops::hashkv(&session, *revision).await
        }
        Command::Check {
            check:
                CheckCommand::Perf {
                    cluster,
                    load,
                    duration,
                },
        } => {
            let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
            ops::check_perf(&session, *load, *duration).await
        }
        Command::Certificate {
            cluster,
            common_name,
            secret,
            out_dir,
            duration,
        } => {
            let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
            ops::certificate(
                &session,
                common_name,
                *duration,
                secret.as_deref(),
                out_dir.as_deref(),
            )
            .await
        }
        Command::Report { cluster, dir, tail } => {
            let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
            let status = status(&session, None)?.value;
            let health = health(&session).value;
            ops::report(&session, status, health, dir.as_deref(), *tail).await
        }
        Command::Completion { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let name = command.get_name().to_string();
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut command, name, &mut script);
            Ok(Printed {
                value: json!({"shell": shell.to_string()}),
                table: None,
                lines: vec![String::from_utf8_lossy(&script).trim_end().to_string()],
                code: 0,
            })
        }
        Command::Snapshot {
            create: None,
            file,
            cluster,
            member,
        } => {
            let Some(file) = file else {
                bail!(Usage(
                    "say where to write the snapshot: kubectl etcdop snapshot save <file>, or kubectl etcdop snapshot create <name> for an EtcdSnapshot".into()
                ));
            };
            let session = Session::open(&target(&cli, cluster.cluster.clone())).await?;
            snapshot_save(&session, file, member.member.as_deref()).await
        }
        Command::Restore {
            name,
            from_snapshot,
            replicas,
            version,
            storage_size,
            storage_class,
            dry_run,
            no_wait,
            timeout,
        } => {
            let overrides = restore::Overrides {
                replicas: *replicas,
                version: version.clone(),
                storage_size: storage_size.clone(),
                storage_class: storage_class.clone(),
                dry_run: *dry_run,
            };
            let wait = (!*no_wait).then_some(*timeout);
            restore_cluster(&cli, name, from_snapshot, &overrides, wait).await
        }
        Command::Migrate(args) => migrate::migrate(&target(&cli, None), args).await,
        Command::Pause { cluster } => pause(&cli, cluster.cluster.clone(), true).await,
        Command::Resume { cluster } => pause(&cli, cluster.cluster.clone(), false).await,
        Command::RecoverQuorum {
            cluster,
            member,
            snapshot,
            wait,
            timeout,
        } => {
            let member = member.clone().or_else(|| {
                snapshot.as_ref().map(|s| {
                    format!(
                        "{}{s}",
                        etcd_operator_api::cluster::RECOVER_FROM_SNAPSHOT_PREFIX
                    )
                })
            });
            let wait = wait.then_some(*timeout);
            recover_quorum(&cli, cluster.cluster.clone(), member, wait).await
        }
    }
}

#[cfg(test)]
mod cli_tests {
    use super::*;

    /// clap's own checks of the definition: no two arguments share a name (a subcommand's
    /// `--output` would shadow the global `-o/--output`), every `requires` names an argument.
    #[test]
    fn the_command_line_is_well_formed() {
        <Cli as clap::CommandFactory>::command().debug_assert();
    }

    #[test]
    fn the_plugin_is_named_after_how_it_was_invoked() {
        let name = |p: &str| invoked_as(Some(&std::ffi::OsString::from(p)));
        assert_eq!(name("/usr/local/bin/kubectl-etcdop"), "kubectl etcdop");
        assert_eq!(name("/home/u/.krew/bin/kubectl-etcd"), "kubectl etcd");
        assert_eq!(name("kubectl-etcd_op"), "kubectl etcd-op");
        assert_eq!(name("some-test-binary"), "kubectl etcdop");
        assert_eq!(invoked_as(None), "kubectl etcdop");
    }

    #[test]
    fn snapshot_save_and_the_older_form_parse_to_the_same_file() {
        let parse = |args: &[&str]| Cli::try_parse_from(args).expect("parses");
        match parse(&[
            "kubectl-etcdop",
            "snapshot",
            "save",
            "a.db",
            "--member",
            "m",
        ])
        .command
        {
            Command::Snapshot {
                create: Some(SnapshotCommand::Save { file, member, .. }),
                ..
            } => {
                assert_eq!(file, PathBuf::from("a.db"));
                assert_eq!(member.member.as_deref(), Some("m"));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["kubectl-etcdop", "snapshot", "a.db"]).command {
            Command::Snapshot {
                create: None,
                file: Some(file),
                ..
            } => assert_eq!(file, PathBuf::from("a.db")),
            other => panic!("{other:?}"),
        }
        // --timeout belongs to --wait.
        assert!(
            Cli::try_parse_from(["kubectl-etcdop", "recover-quorum", "--timeout", "1m"]).is_err()
        );
    }
}
