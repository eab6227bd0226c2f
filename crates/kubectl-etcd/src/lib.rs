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

fn member_name(member: &ObservedMember) -> &str {
    member.member.metadata.name.as_deref().unwrap_or_default()
}

/// The member ID: etcd's Status at its endpoint, else the member list by name, else the
/// EtcdMember's status.
fn member_id(session: &Session, member: &ObservedMember) -> Option<u64> {
    let view = &session.observed.etcd;
    let url = etcd_operator::build::member_client_url(&member.member);
    view.observation_at(&url)
        .and_then(|o| o.member_id())
        .or_else(|| {
            view.member_list()
                .iter()
                .find(|m| m.name == member_name(member))
                .map(|m| m.id)
        })
        .or_else(|| {
            member
                .member
                .status
                .as_ref()
                .and_then(|s| s.member_id.as_deref())
                .and_then(parse_member_id)
        })
}

fn quota(session: &Session) -> i64 {
    session
        .observed
        .cluster
        .spec
        .options
        .as_ref()
        .and_then(|o| o.quota_backend_bytes)
        .filter(|q| *q > 0)
        .unwrap_or(DEFAULT_QUOTA)
}

fn pick<'a>(session: &'a Session, only: Option<&str>) -> anyhow::Result<Vec<&'a ObservedMember>> {
    let all: Vec<&ObservedMember> = session.observed.members.iter().collect();
    match only {
        None => Ok(all),
        Some(name) => {
            let found: Vec<_> = all.into_iter().filter(|m| member_name(m) == name).collect();
            if found.is_empty() {
                session.local_url(name)?;
            }
            Ok(found)
        }
    }
}

fn status(session: &Session, only: Option<&str>) -> anyhow::Result<Printed> {
    let view = &session.observed.etcd;
    let quota = quota(session);
    let mut table = Table::new(&[
        "NAME",
        "ID",
        "LEADER",
        "LEARNER",
        "VERSION",
        "DB SIZE",
        "IN USE",
        "QUOTA",
        "RAFT INDEX",
        "RAFT TERM",
        "ALARMS",
        "POD",
        "MEMBER",
        "ERROR",
    ]);
    let mut rows = Vec::new();
    for member in pick(session, only)? {
        let name = member_name(member).to_string();
        let url = etcd_operator::build::member_client_url(&member.member);
        let observation = view.observation_at(&url);
        let status = observation.and_then(|o| o.status.as_ref().ok());
        let id = member_id(session, member);
        let alarms: Vec<String> = id
            .map(|id| {
                view.active_alarms()
                    .iter()
                    .filter(|a| a.member_id == id)
                    .map(|a| a.kind.to_string())
                    .collect()
            })
            .unwrap_or_default();
        let pod_phase = member
            .pod
            .as_ref()
            .map(|p| format!("{:?}", p.phase))
            .unwrap_or_else(|| "Missing".into());
        let member_phase = member
            .member
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .map(|p| p.to_string())
            .unwrap_or_else(|| "-".into());
        let error = match observation.map(|o| &o.status) {
            Some(Err(err)) => session
                .forward_error(&name)
                .unwrap_or_else(|| err.to_string()),
            Some(Ok(_)) => String::new(),
            None if member.pod.is_none() => "no Pod".into(),
            None => "not observed".into(),
        };
        let percent = status.map(|s| (s.db_size as f64) * 100.0 / quota as f64);
        rows.push(json!({
            "name": name,
            "id": id.map(member_id_hex),
            "leader": status.map(|s| s.leader != 0 && s.leader == s.member_id),
            "learner": status.map(|s| s.is_learner),
            "version": status.map(|s| s.version.clone()),
            "dbSize": status.map(|s| s.db_size),
            "dbSizeInUse": status.map(|s| s.db_size_in_use),
            "quotaBytes": quota,
            "quotaPercent": percent.map(|p| (p * 10.0).round() / 10.0),
            "raftIndex": status.map(|s| s.raft_index),
            "raftAppliedIndex": status.map(|s| s.raft_applied_index),
            "raftTerm": status.map(|s| s.raft_term),
            "alarms": alarms,
            "podPhase": pod_phase,
            "memberPhase": member_phase,
            "error": (!error.is_empty()).then_some(error.clone()),
        }));
        let dash = || "-".to_string();
        table.push(vec![
            name,
            id.map(member_id_hex).unwrap_or_else(dash),
            status
                .map(|s| (s.leader != 0 && s.leader == s.member_id).to_string())
                .unwrap_or_else(dash),
            status
                .map(|s| s.is_learner.to_string())
                .unwrap_or_else(dash),
            status.map(|s| s.version.clone()).unwrap_or_else(dash),
            status.map(|s| bytes(s.db_size)).unwrap_or_else(dash),
            status.map(|s| bytes(s.db_size_in_use)).unwrap_or_else(dash),
            percent.map(|p| format!("{p:.1}%")).unwrap_or_else(dash),
            status
                .map(|s| s.raft_index.to_string())
                .unwrap_or_else(dash),
            status.map(|s| s.raft_term.to_string()).unwrap_or_else(dash),
            if alarms.is_empty() {
                dash()
            } else {
                alarms.join(",")
            },
            pod_phase,
            member_phase,
            if error.is_empty() { dash() } else { error },
        ]);
    }
    Ok(Printed {
        value: json!({"cluster": session.name, "namespace": session.namespace, "members": rows}),
        table: Some(table),
        lines: Vec::new(),
        code: 0,
    })
}

fn members(session: &Session) -> anyhow::Result<Printed> {
    let view = &session.observed.etcd;
    let list = view
        .members
        .as_ref()
        .map_err(|e| anyhow!("etcd's member list is not available: {e}"))?;
    let mut table = Table::new(&[
        "ID",
        "NAME",
        "STARTED",
        "LEARNER",
        "PEER URLS",
        "CLIENT URLS",
        "ETCDMEMBER",
    ]);
    let mut rows = Vec::new();
    for member in list {
        let object = session
            .observed
            .members
            .iter()
            .find(|m| member_name(m) == member.name)
            .map(|m| member_name(m).to_string());
        rows.push(json!({
            "id": member_id_hex(member.id),
            "name": member.name,
            "started": member.has_started(),
            "learner": member.is_learner,
            "peerURLs": member.peer_urls,
            "clientURLs": member.client_urls,
            "etcdMember": object,
        }));
        table.push(vec![
            member_id_hex(member.id),
            if member.name.is_empty() {
                "-".into()
            } else {
                member.name.clone()
            },
            member.has_started().to_string(),
            member.is_learner.to_string(),
            member.peer_urls.join(","),
            if member.client_urls.is_empty() {
                "-".into()
            } else {
                member.client_urls.join(",")
            },
            object.unwrap_or_else(|| "-".into()),
        ]);
    }
    Ok(Printed {
        value: json!({"clusterID": view.cluster_id.map(member_id_hex), "members": rows}),
        table: Some(table),
        lines: Vec::new(),
        code: 0,
    })
}

fn health(session: &Session) -> Printed {
    let view = &session.observed.etcd;
    let mut voters = Vec::new();
    let mut learners = Vec::new();
    let listed = view.members.as_ref().ok();
    for member in &session.observed.members {
        let name = member_name(member).to_string();
        let id = member_id(session, member);
        let learner = listed
            .and_then(|l| l.iter().find(|m| Some(m.id) == id || m.name == name))
            .map(|m| m.is_learner)
            .unwrap_or(false);
        let url = etcd_operator::build::member_client_url(&member.member);
        let observation = view.observation_at(&url);
        let healthy = observation.is_some_and(|o| o.is_healthy());
        let detail = match observation {
            _ if member.pod.is_none() => "no Pod".to_string(),
            None => "not observed".to_string(),
            Some(o) => match (&o.status, &o.health) {
                (Err(err), _) => session
                    .forward_error(&name)
                    .unwrap_or_else(|| format!("unreachable: {err}")),
                (Ok(_), Some(Ok(()))) => "healthy".to_string(),
                (Ok(_), Some(Err(err))) => format!("answers Status but not a read: {err}"),
                (Ok(s), None) if s.is_learner => "learner (not asked for a read)".into(),
                (Ok(_), None) => "not asked".into(),
            },
        };
        let evidence = VoterEvidence {
            name,
            healthy,
            detail,
        };
        if learner {
            learners.push(evidence);
        } else {
            voters.push(evidence);
        }
    }
    let state = classify(&voters);
    let healthy = voters.iter().filter(|v| v.healthy).count();
    let quorum = voters.len() / 2 + 1;
    let mut table = Table::new(&["MEMBER", "ROLE", "HEALTHY", "DETAIL"]);
    for (role, list) in [("voter", &voters), ("learner", &learners)] {
        for v in list {
            table.push(vec![
                v.name.clone(),
                role.into(),
                v.healthy.to_string(),
                v.detail.clone(),
            ]);
        }
    }
    let summary = format!(
        "{}: {healthy} of {} voters healthy, quorum is {quorum}{}",
        state.as_str(),
        voters.len(),
        match state {
            Health::Healthy => String::new(),
            Health::MinorityLost => format!(
                "; etcd serves, but losing {} more voter(s) stops it",
                healthy + 1 - quorum
            ),
            Health::QuorumLost => "; etcd refuses writes until a majority of voters is back".into(),
        }
    );
    let alarms: Vec<String> = view.active_alarms().iter().map(|a| a.to_string()).collect();
    let mut lines = vec![String::new(), summary.clone()];
    if !alarms.is_empty() {
        lines.push(format!("active alarms: {}", alarms.join(", ")));
    }
    Printed {
        value: json!({
            "cluster": session.name, "namespace": session.namespace,
            "health": state, "healthyVoters": healthy, "voters": voters.len(), "quorum": quorum,
            "summary": summary, "evidence": {"voters": voters, "learners": learners},
            "alarms": alarms,
        }),
        table: Some(table),
        lines,
        code: state.exit_code(),
    }
}

/// Members in the order defrag visits them: followers first, the leader last.
fn followers_first<'a>(
    session: &Session,
    members: Vec<&'a ObservedMember>,
) -> Vec<&'a ObservedMember> {
    let leader = session.observed.etcd.leader();
    let mut members = members;
    members.sort_by_key(|m| member_id(session, m).is_some_and(|id| Some(id) == leader));
    members
}

async fn defrag(session: &Session, only: Option<&str>) -> anyhow::Result<Printed> {
    let members = followers_first(session, pick(session, only)?);
    let mut table = Table::new(&["NAME", "DB SIZE BEFORE", "DB SIZE AFTER", "IN USE"]);
    let mut rows = Vec::new();
    for member in members {
        let name = member_name(member);
        if member.pod.is_none() {
            bail!(
                "member {name} has no Pod: nothing to defragment; run again once it is back, or with --member for the others"
            );
        }
        let client = session.etcd_member(name, Timeouts::DEFRAGMENT).await?;
        let url = session.local_url(name)?;
        let before = client
            .endpoint_status(url)
            .await
            .map_err(|e| anyhow!(e.to_string()))?;
        client.defragment(url).await.map_err(|e| {
            anyhow!("defragmenting {name}: {e}; the members before it were defragmented")
        })?;
        let after = client
            .endpoint_status(url)
            .await
            .map_err(|e| anyhow!(e.to_string()))?;
        rows.push(json!({"name": name, "dbSizeBefore": before.db_size, "dbSizeAfter": after.db_size, "dbSizeInUse": after.db_size_in_use}));
        table.push(vec![
            name.to_string(),
            bytes(before.db_size),
            bytes(after.db_size),
            bytes(after.db_size_in_use),
        ]);
    }
    Ok(Printed {
        value: json!({"defragmented": rows}),
        table: Some(table),
        lines: Vec::new(),
        code: 0,
    })
}

async fn compact(session: &Session, revision: Option<i64>) -> anyhow::Result<Printed> {
    let client = session.etcd().await?;
    let current = client
        .revision()
        .await
        .map_err(|e| anyhow!(e.to_string()))?;
    let revision = revision.unwrap_or(current);
    if revision > current {
        bail!(Usage(format!(
            "revision {revision} is in the future: the current revision is {current}"
        )));
    }
    client.compact(revision).await.map_err(|e| {
        anyhow!("compacting to revision {revision}: {e} (a revision already compacted cannot be compacted again; pick a newer one)")
    })?;
    Ok(Printed {
        value: json!({"compactedRevision": revision, "currentRevision": current}),
        table: None,
        lines: vec![format!(
            "compacted revision {revision} (current revision {current})"
        )],
        code: 0,
    })
}

fn name_of_id(session: &Session, id: u64) -> String {
    session
        .observed
        .etcd
        .member_list()
        .iter()
        .find(|m| m.id == id)
        .map(|m| m.name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "-".into())
}

fn alarm_list(session: &Session) -> anyhow::Result<Printed> {
    let alarms = session
        .observed
        .etcd
        .alarms
        .as_ref()
        .map_err(|e| anyhow!("etcd's alarm list is not available: {e}"))?;
    let mut table = Table::new(&["MEMBER ID", "NAME", "ALARM"]);
    let mut rows = Vec::new();
    for alarm in alarms {
        let name = name_of_id(session, alarm.member_id);
        rows.push(json!({"memberID": member_id_hex(alarm.member_id), "name": name, "alarm": alarm.kind.to_string()}));
        table.push(vec![
            member_id_hex(alarm.member_id),
            name,
            alarm.kind.to_string(),
        ]);
    }
    let lines = if alarms.is_empty() {
        vec!["no active alarms".to_string()]
    } else {
        Vec::new()
    };
    Ok(Printed {
        value: json!({"alarms": rows}),
        table: (!alarms.is_empty()).then_some(table),
        lines,
        code: 0,
    })
}

async fn alarm_disarm(session: &Session, only: Option<&str>) -> anyhow::Result<Printed> {
    let client = session.etcd().await?;
    let alarms = client.alarms().await.map_err(|e| anyhow!(e.to_string()))?;
    let only_id = match only {
        Some(name) => {
            let member = pick(session, Some(name))?;
            Some(
                member
                    .first()
                    .and_then(|m| member_id(session, m))
                    .ok_or_else(|| anyhow!("member {name} has no etcd member ID yet"))?,
            )
        }
        None => None,
    };
    let mut disarmed = Vec::new();
    for alarm in alarms
        .into_iter()
        .filter(|a| only_id.is_none_or(|id| a.member_id == id))
    {
        client
            .disarm(alarm)
            .await
            .map_err(|e| anyhow!(e.to_string()))?;
        disarmed.push(alarm);
    }
    let still = client.alarms().await.map_err(|e| anyhow!(e.to_string()))?;
    let mut lines: Vec<String> = disarmed.iter().map(|a| format!("disarmed {a}")).collect();
    if disarmed.is_empty() {
        lines.push("no active alarms to disarm".into());
    }
    for alarm in &still {
        lines.push(format!(
            "still active: {alarm} (etcd raised it again: free space first with `kubectl etcdop compact` and `kubectl etcdop defrag`, or raise spec.options.quotaBackendBytes)"
        ));
    }
    Ok(Printed {
        value: json!({
            "disarmed": disarmed.iter().map(|a| json!({"memberID": member_id_hex(a.member_id), "alarm": a.kind.to_string()})).collect::<Vec<_>>(),
            "active": still.iter().map(|a| json!({"memberID": member_id_hex(a.member_id), "alarm": a.kind.to_string()})).collect::<Vec<_>>(),
        }),
        table: None,
        lines,
        code: if still.is_empty() { 0 } else { 1 },
    })
}

async fn forfeit_leadership(session: &Session, to: Option<&str>) -> anyhow::Result<Printed> {
    let view = &session.observed.etcd;
    let Some(leader) = view.leader() else {
        bail!("no member reports a leader: etcd has no quorum; see `kubectl etcdop health`");
    };
    let leader_member = session
        .observed
        .members
        .iter()
        .find(|m| member_id(session, m) == Some(leader))
        .ok_or_else(|| {
            anyhow!(
                "the leader {} is not one of the cluster's EtcdMembers",
                member_id_hex(leader)
            )
        })?;
    let candidates: Vec<&ObservedMember> = session
        .observed
        .members
        .iter()
        .filter(|m| {
            let id = member_id(session, m);
            id.is_some() && id != Some(leader)
        })
        .filter(|m| {
            let url = etcd_operator::build::member_client_url(&m.member);
            view.observation_at(&url)
                .is_some_and(|o| o.is_healthy() && o.status.as_ref().is_ok_and(|s| !s.is_learner))
        })
        .filter(|m| to.is_none_or(|t| member_name(m) == t))
        .collect();
    let Some(target) = candidates.first() else {
        bail!(match to {
            Some(to) => format!(
                "member {to} is not a healthy voter other than the leader; see `kubectl etcdop status`"
            ),
            None =>
                "no other healthy voter to hand leadership to; see `kubectl etcdop health`".into(),
        });
    };
    let target_id = member_id(session, target).unwrap_or_default();
    let client = session.etcd().await?;
    let leader_url = session.local_url(member_name(leader_member))?;
    client
        .move_leader_at(leader_url, target_id)
        .await
        .map_err(|e| anyhow!("moving leadership: {e}"))?;
    let (from, to) = (member_name(leader_member), member_name(target));
    Ok(Printed {
        value: json!({"from": from, "to": to, "fromID": member_id_hex(leader), "toID": member_id_hex(target_id)}),
        table: None,
        lines: vec![format!("leadership moved from {from} to {to}")],
        code: 0,
    })
}

async fn remove_member(session: &Session, member: &str) -> anyhow::Result<Printed> {
    let list = session.observed.etcd.member_list();
    let id = list
        .iter()
        .find(|m| m.name == member)
        .map(|m| m.id)
        .or_else(|| parse_member_id(member).filter(|id| list.iter().any(|m| m.id == *id)))
        .ok_or_else(|| {
            Usage(format!(
                "etcd has no member named or numbered {member}; see `kubectl etcdop members`"
            ))
        })?;
    let voters = list.iter().filter(|m| !m.is_learner).count();
    let removing_voter = list.iter().any(|m| m.id == id && !m.is_learner);
    if removing_voter && voters == 1 {
        bail!(Usage(format!(
            "member {member} is the only voter: removing it would leave no cluster"
        )));
    }
    let client = session.etcd().await?;
    let remaining = client
        .member_remove(id)
        .await
        .map_err(|e| anyhow!("removing member {}: {e}", member_id_hex(id)))?;
    Ok(Printed {
        value: json!({"removed": member_id_hex(id), "members": remaining.iter().map(|m| member_id_hex(m.id)).collect::<Vec<_>>()}),
        table: None,
        lines: vec![format!(
            "removed member {} ({member}); {} member(s) remain. The operator sees the change on its next pass (spec.replicas still counts it)",
            member_id_hex(id),
            remaining.len()
        )],
        code: 0,
    })
}

async fn add_member(session: &Session, peer_url: &str) -> anyhow::Result<Printed> {
    if !(peer_url.starts_with("http://") || peer_url.starts_with("https://")) {
        bail!(Usage(format!(
            "--peer-url {peer_url:?} is not a URL such as https://<member>.<cluster>.<namespace>.svc:2380"
        )));
    }
    let client = session.etcd().await?;
    let added = client
        .member_add_learner(&[peer_url.to_string()])
        .await
        .map_err(|e| anyhow!("adding a learner at {peer_url}: {e}"))?;
    Ok(Printed {
        value: json!({"id": member_id_hex(added.id), "learner": true, "peerURLs": [peer_url]}),
        table: None,
        lines: vec![format!(
            "added learner {} at {peer_url}; start etcd there with --initial-cluster-state=existing, then promote it",
            member_id_hex(added.id)
        )],
        code: 0,
    })
}

/// Streams a snapshot into `.<file>.part` (created new, fsynced), checks etcd's trailing
/// SHA-256, links it as `file` (never over an existing file) and fsyncs the directory: `file`
/// is either absent or a whole, verified snapshot.
async fn snapshot_save(
    session: &Session,
    file: &Path,
    only: Option<&str>,
) -> anyhow::Result<Printed> {
    let leader = session.observed.etcd.leader();
    let member = match only {
        Some(name) => name.to_string(),
        None => {
            // A healthy member, the leader if it is one.
            let mut healthy: Vec<&ObservedMember> = session
                .observed
                .members
                .iter()
                .filter(|m| {
                    let url = etcd_operator::build::member_client_url(&m.member);
                    session
                        .observed
                        .etcd
                        .observation_at(&url)
                        .is_some_and(|o| o.is_healthy())
                })
                .collect();
            healthy.sort_by_key(|m| member_id(session, m) != leader);
            healthy
                .first()
                .map(|m| member_name(m).to_string())
                .ok_or_else(|| {
                    anyhow!(
                        "no healthy member to take a snapshot from; see `kubectl etcdop health`"
                    )
                })?
        }
    };
    if file.exists() {
        bail!(Usage(format!(
            "{} exists; remove it or choose another file name",
            file.display()
        )));
    }
    let client = session.etcd_member(&member, Timeouts::SNAPSHOT).await?;
    let (size, sha, revision) = write_snapshot(&client, &member, file).await?;
    Ok(Printed {
        value: json!({"file": file.display().to_string(), "sizeBytes": size, "sha256": sha, "member": member, "revision": revision}),
        table: None,
        lines: vec![format!(
            "saved {} ({size} bytes) from {member}{}\nsha256:{sha}",
            file.display(),
            revision
                .map(|r| format!(" at revision {r}"))
                .unwrap_or_default()
        )],
        code: 0,
    })
}

/// Streams a snapshot from `client` (one member, `member` for messages) into `file`: a new
/// temporary file beside it, etcd's trailing SHA-256 checked, fsync, then published under
/// `file` (never replacing one). Returns the size, the file's SHA-256 and the revision.
pub(crate) async fn write_snapshot(
    client: &etcd_operator::etcd::EtcdClient,
    member: &str,
    file: &Path,
) -> anyhow::Result<(u64, String, Option<i64>)> {
    use std::io::Write;
    let revision = client.revision().await.ok();
    let mut stream = client
        .snapshot()
        .await
        .map_err(|e| anyhow!("starting a snapshot from {member}: {e}"))?;
    let directory = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let file_name = file
        .file_name()
        .ok_or_else(|| Usage(format!("{} is not a file name", file.display())))?;
    let temporary = directory.join(format!(".{}.part", file_name.to_string_lossy()));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .with_context(|| {
            format!(
                "creating {} (remove it if a previous snapshot was interrupted)",
                temporary.display()
            )
        })?;
    let result: anyhow::Result<(u64, String)> = async {
        let mut whole = ring::digest::Context::new(&ring::digest::SHA256);
        let mut body = ring::digest::Context::new(&ring::digest::SHA256);
        // The last 32 bytes are etcd's SHA-256 of everything before them.
        let mut tail: Vec<u8> = Vec::new();
        let mut size = 0u64;
        while let Some(chunk) = stream
            .next_chunk()
            .await
            .map_err(|e| anyhow!("receiving the snapshot from {member}: {e}"))?
        {
            out.write_all(&chunk)
                .with_context(|| format!("writing {}", temporary.display()))?;
            whole.update(&chunk);
            size += chunk.len() as u64;
            tail.extend_from_slice(&chunk);
            if tail.len() > 32 {
                let keep = tail.split_off(tail.len() - 32);
                body.update(&tail);
                tail = keep;
            }
        }
        if tail.len() != 32 || body.finish().as_ref() != tail.as_slice() {
            bail!("the snapshot from {member} fails its integrity check (etcd's trailing SHA-256 does not match); nothing was written to {}", file.display());
        }
        out.sync_all()
            .with_context(|| format!("fsync of {}", temporary.display()))?;
        Ok((size, hex(whole.finish().as_ref())))
    }
    .await;
    drop(out);
    let (size, sha) = match result {
        Ok(done) => done,
        Err(err) => {
            let _ = std::fs::remove_file(&temporary);
            return Err(err);
        }
    };
    // A hard link publishes the whole file atomically and, unlike rename, never replaces an
    // existing one; the temporary name goes after.
    let linked = std::fs::hard_link(&temporary, file);
    let _ = std::fs::remove_file(&temporary);
    linked.map_err(|err| {
        if err.kind() == std::io::ErrorKind::AlreadyExists {
            anyhow!(Usage(format!(
                "{} exists; remove it or choose another file name (nothing was written)",
                file.display()
            )))
        } else {
            anyhow!(err).context(format!(
                "publishing {} as {}",
                temporary.display(),
                file.display()
            ))
        }
    })?;
    if let Ok(dir) = std::fs::File::open(&directory) {
        let _ = dir.sync_all();
    }
    Ok((size, sha, revision))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn pause(cli: &Cli, cluster: Option<String>, paused: bool) -> anyhow::Result<Printed> {
    let target = target(cli, cluster);
    let (client, namespace) = session::kube_client(&target).await?;
    let found = session::find_cluster(&client, &namespace, target.cluster.as_deref()).await?;
    let name = found.metadata.name.clone().unwrap_or_default();
    let api: Api<EtcdCluster> = Api::namespaced(client, &namespace);
    let value = if paused { json!(true) } else { Value::Null };
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": value}})),
    )
    .await
    .with_context(|| format!("patching EtcdCluster {namespace}/{name}"))?;
    let word = if paused { "paused" } else { "resumed" };
    Ok(Printed {
        value: json!({"cluster": name, "namespace": namespace, "paused": paused}),
        table: None,
        lines: vec![format!("etcdcluster/{name} {word}")],
        code: 0,
    })
}

async fn recover_quorum(
    cli: &Cli,
    cluster: Option<String>,
    member: Option<String>,
    wait: Option<Duration>,
) -> anyhow::Result<Printed> {
    use etcd_operator_api::cluster::RECOVER_QUORUM_ANNOTATION;
    let target = target(cli, cluster);
    let (client, namespace) = session::kube_client(&target).await?;
    let found = session::find_cluster(&client, &namespace, target.cluster.as_deref()).await?;
    let name = found.metadata.name.clone().unwrap_or_default();
    if let Some(m) = member
        .as_deref()
        .filter(|m| !m.starts_with(etcd_operator_api::cluster::RECOVER_FROM_SNAPSHOT_PREFIX))
    {
        let members: Api<etcd_operator_api::EtcdMember> =
            Api::namespaced(client.clone(), &namespace);
        let known = members
            .get_opt(m)
            .await
            .with_context(|| format!("reading EtcdMember {namespace}/{m}"))?
            .is_some_and(|em| em.spec.cluster_name == name);
        if !known {
            bail!(Usage(format!(
                "{m} is not a member of etcdcluster/{name}; see kubectl etcdop status"
            )));
        }
    }
    let value = member.clone().unwrap_or_else(|| "auto".to_string());
    let api: Api<EtcdCluster> = Api::namespaced(client, &namespace);
    let requested_at = k8s_openapi::jiff::Timestamp::now();
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {RECOVER_QUORUM_ANNOTATION: value}}})),
    )
    .await
    .with_context(|| format!("annotating EtcdCluster {namespace}/{name}"))?;
    if let Some(timeout) = wait {
        let (lines, code) = ops::wait_recovery(&api, &name, requested_at, timeout).await?;
        let status = api.get(&name).await.ok().and_then(|c| c.status);
        return Ok(Printed {
            value: json!({"cluster": name, "namespace": namespace, "recoverQuorum": value,
                "quorumRecovery": status.and_then(|s| s.quorum_recovery)}),
            table: None,
            lines,
            code,
        });
    }
    Ok(Printed {
        value: json!({"cluster": name, "namespace": namespace, "recoverQuorum": value}),
        table: None,
        lines: vec![format!(
            "etcdcluster/{name} annotated {RECOVER_QUORUM_ANNOTATION}={value}: the operator recovers from {} if quorum is lost (see status.quorumRecovery and the Events); a cluster whose majority serves is left alone",
            member.as_deref().unwrap_or(
                "the survivor with the highest raft index (or, when no member's data survives, the newest verified EtcdSnapshot of the cluster)"
            )
        )],
        code: 0,
    })
}

async fn snapshot_create(
    cli: &Cli,
    cluster: Option<String>,
    name: &str,
    destination: Value,
    timeout: Duration,
) -> anyhow::Result<Printed> {
    let target = target(cli, cluster);
    let (client, namespace) = session::kube_client(&target).await?;
    let found = session::find_cluster(&client, &namespace, target.cluster.as_deref()).await?;
    let cluster_name = found.metadata.name.clone().unwrap_or_default();
    let snapshot: EtcdSnapshot = serde_json::from_value(json!({
        "apiVersion": "etcd-operator.cozystack.io/v1alpha2",
        "kind": "EtcdSnapshot",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterRef": {"name": cluster_name}, "destination": destination},
    }))
    .context("building the EtcdSnapshot")?;
    let api: Api<EtcdSnapshot> = Api::namespaced(client, &namespace);
    api.create(&PostParams::default(), &snapshot)
        .await
        .with_context(|| format!("creating EtcdSnapshot {namespace}/{name}"))?;
    let started = std::time::Instant::now();
    loop {
        let current = api
            .get(name)
            .await
            .with_context(|| format!("reading EtcdSnapshot {namespace}/{name}"))?;
        let status = current.status.unwrap_or_default();
        let phase = status.phase.map(|p| format!("{p:?}"));
        let message = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| format!("{}: {}", c.reason, c.message));
        match phase.as_deref() {
            Some("Complete") => {
                let artifact = status.artifact.unwrap_or_default();
                return Ok(Printed {
                    value: json!({"name": name, "phase": "Complete", "artifact": artifact}),
                    table: None,
                    lines: vec![format!(
                        "etcdsnapshot/{name} complete: {} ({} bytes, {})",
                        artifact.uri,
                        artifact.size_bytes.unwrap_or_default(),
                        artifact.checksum.unwrap_or_default()
                    )],
                    code: 0,
                });
            }
            Some("Failed") => bail!(
                "etcdsnapshot/{name} failed: {}",
                message.unwrap_or_else(|| "no reason given".into())
            ),
            _ if started.elapsed() > timeout => bail!(
                "etcdsnapshot/{name} is not done after {timeout:?} (phase {}, {}); it goes on: watch it with `kubectl get etcdsnapshot {name} -n {namespace} -w`",
                phase.unwrap_or_else(|| "none".into()),
                message.unwrap_or_default()
            ),
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// `restore`: the new cluster created from the snapshot, then watched until Available with
/// `status.restoredFrom` recorded (or the operator's reason for not getting there).
async fn restore_cluster(
    cli: &Cli,
    name: &str,
    snapshot_name: &str,
    overrides: &restore::Overrides,
    wait: Option<Duration>,
) -> anyhow::Result<Printed> {
    let (client, namespace) = session::kube_client(&target(cli, None)).await?;
    let snapshots: Api<EtcdSnapshot> = Api::namespaced(client.clone(), &namespace);
    let Some(snapshot) = snapshots
        .get_opt(snapshot_name)
        .await
        .with_context(|| format!("reading EtcdSnapshot {namespace}/{snapshot_name}"))?
    else {
        bail!(Usage(format!(
            "there is no etcdsnapshot/{snapshot_name} in namespace {namespace}; see kubectl get etcdsnapshots -n {namespace}"
        )));
    };
    let clusters: Api<EtcdCluster> = Api::namespaced(client, &namespace);
    let taken_of = clusters
        .get_opt(&snapshot.spec.cluster_ref.name)
        .await
        .with_context(|| {
            format!(
                "reading EtcdCluster {namespace}/{}",
                snapshot.spec.cluster_ref.name
            )
        })?;
    let plan = restore::plan(name, &namespace, &snapshot, taken_of.as_ref(), overrides)
        .map_err(|e| anyhow!(Usage(e)))?;
    if overrides.dry_run {
        return Ok(Printed {
            value: plan.manifest.clone(),
            table: None,
            lines: std::iter::once(serde_yaml::to_string(&plan.manifest)?)
                .chain(plan.notes.iter().map(|n| format!("# {n}")))
                .collect(),
            code: 0,
        });
    }
    if clusters
        .get_opt(name)
        .await
        .with_context(|| format!("reading EtcdCluster {namespace}/{name}"))?
        .is_some()
    {
        bail!(Usage(format!(
            "etcdcluster/{name} already exists: a restore only creates a new cluster; pick another name or delete it first"
        )));
    }
    let cluster: EtcdCluster =
        serde_json::from_value(plan.manifest.clone()).context("building the EtcdCluster")?;
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .with_context(|| format!("creating EtcdCluster {namespace}/{name}"))?;
    let mut lines = vec![format!(
        "etcdcluster/{name} created from etcdsnapshot/{snapshot_name} ({})",
        plan.uri
    )];
    lines.extend(plan.notes.iter().map(|n| format!("note: {n}")));
    let Some(timeout) = wait else {
        return Ok(Printed {
            value: json!({"name": name, "namespace": namespace, "source": plan.uri, "created": true}),
            table: None,
            lines,
            code: 0,
        });
    };
    let started = std::time::Instant::now();
    loop {
        let current = clusters
            .get(name)
            .await
            .with_context(|| format!("reading EtcdCluster {namespace}/{name}"))?;
        let status = current.status.clone().unwrap_or_default();
        let condition = |kind: &str| {
            status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == kind)
                .cloned()
        };
        let available = condition("Available").is_some_and(|c| c.status == "True");
        if available && let Some(restored) = &status.restored_from {
            lines.push(format!(
                "etcdcluster/{name} available: {} of {} members ready, restored from {} at revision {}",
                status.ready_members.unwrap_or_default(),
                current.spec.replicas_or_default(),
                restored.uri,
                restored
                    .revision
                    .map(|r| r.to_string())
                    .unwrap_or_else(|| "unknown".into())
            ));
            return Ok(Printed {
                value: json!({"name": name, "namespace": namespace, "source": plan.uri,
                    "restoredFrom": restored, "readyMembers": status.ready_members}),
                table: None,
                lines,
                code: 0,
            });
        }
        if started.elapsed() > timeout {
            let why = ["Progressing", "Available", "Degraded"]
                .iter()
                .filter_map(|k| condition(k))
                .map(|c| format!("{} {}: {}", c.type_, c.reason, c.message))
                .collect::<Vec<_>>()
                .join("; ");
            bail!(
                "etcdcluster/{name} is not Available after {timeout:?} ({why}); it goes on: watch it with `kubectl get etcdcluster {name} -n {namespace} -w` and `kubectl describe etcdcluster {name}`"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
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
