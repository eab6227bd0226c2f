//! `kube-sandbox`: a Kubernetes cluster in one process, for tests and demos.
//!
//! - `kube-sandbox up --dir DIR [--port N] [--nodes N] [--images FILE] [--time-scale F]`: runs
//!   the API server, nodes that run Pods as processes, the cluster network, the scheduler and
//!   controllers until SIGINT or SIGTERM; `DIR/kubeconfig` for kubectl. `--api-only` runs the
//!   API server alone (no root needed). `--cert-manager` adds a stand-in for cert-manager
//!   (its `Certificate`, `Issuer` and `ClusterIssuer` kinds, selfSigned and CA issuers).
//!   `--control-plane kubernetes` runs a real control plane instead of the sandbox's own API
//!   server and controllers: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
//!   as `scripts/install-deps.sh` builds them; the nodes join it as kubelets.
//! - `kube-sandbox exec --dir DIR -- COMMAND...`: runs a command inside the cluster network
//!   with the cluster DNS (cluster names resolve, `DIR/kubeconfig` works there too);
//!   `--pod NAME [-n NAMESPACE] [-c CONTAINER]` runs it inside a container instead.
//! - `kube-sandbox fault --dir DIR ...`: kills or freezes a container, crashes, shuts down or
//!   starts a node, wipes or corrupts a claim, cuts Pods off the network or from each other
//!   (`partition`, `isolate`), delays and drops their packets (`impair`), through the running
//!   sandbox's control socket (`DIR/control.sock`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use kube_sandbox::control::ContainerRef;
use kube_sandbox::controllers::TimeScale;
use kube_sandbox::kubelet::Fault;
use kube_sandbox::network::ClusterNetworkInfo;
use kube_sandbox::runtime::ImageMap;
use kube_sandbox::{ControlPlane, Sandbox, SandboxOptions};

#[derive(Parser)]
#[command(
    name = "kube-sandbox",
    about = "A Kubernetes cluster in one process, for tests and demos"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the cluster, write DIR/kubeconfig, print `ready`, run until SIGINT/SIGTERM.
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
        /// Image map (YAML): images to host binaries, before the built-in etcd mappings.
        #[arg(long)]
        images: Option<PathBuf>,
        /// Multiplies the cluster's waits (back-offs, node monitor grace, eviction timeout,
        /// Lease renewals): 0.1 is ten times faster. Probe periods and grace periods are not
        /// scaled.
        #[arg(long, default_value_t = 1.0)]
        time_scale: f64,
        /// How long Pods stay on a NotReady node before eviction, in seconds (cluster time).
        #[arg(long, default_value_t = 300)]
        pod_eviction_timeout: u64,
        /// Serve the API only: no nodes run Pods (no root needed).
        #[arg(long)]
        api_only: bool,
        /// Serve cert-manager.io/v1 Certificates, Issuers and ClusterIssuers and run a
        /// stand-in for cert-manager's selfSigned and CA issuers (ClusterIssuers read their CA
        /// Secret from the cert-manager namespace).
        #[arg(long)]
        cert_manager: bool,
        /// Which control plane the nodes join: the sandbox's own API server and controllers
        /// (starts at once), or a real Kubernetes control plane (etcd, kube-apiserver,
        /// kube-controller-manager, kube-scheduler; built by scripts/install-deps.sh).
        #[arg(long, value_enum, default_value_t = ControlPlaneKind::Sandbox)]
        control_plane: ControlPlaneKind,
    },
    /// Run COMMAND inside the cluster network of the sandbox running in DIR, with its DNS; or,
    /// with --pod, inside a container of a Pod (as `kubectl exec` would).
    Exec {
        /// Directory of the running sandbox (as given to `up`).
        #[arg(long)]
        dir: PathBuf,
        /// Run inside this Pod's container instead.
        #[arg(long)]
        pod: Option<String>,
        /// The Pod's namespace.
        #[arg(short, long, default_value = "default", requires = "pod")]
        namespace: String,
        /// The container (needed when the Pod has several).
        #[arg(short, long, requires = "pod")]
        container: Option<String>,
        /// The command and its arguments (after `--`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Inflict a fault on the sandbox running in DIR.
    Fault {
        /// Directory of the running sandbox (as given to `up`).
        #[arg(long)]
        dir: PathBuf,
        #[command(subcommand)]
        fault: FaultCommand,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ControlPlaneKind {
    Sandbox,
    Kubernetes,
}

#[derive(Subcommand)]
enum FaultCommand {
    /// Send a signal to a container's process.
    Kill {
        pod: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
        /// The container (needed when the Pod has several).
        #[arg(short, long)]
        container: Option<String>,
        #[arg(short, long, default_value = "SIGKILL")]
        signal: String,
    },
    /// Stop a container's process (SIGSTOP): a hung process.
    Freeze {
        pod: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
        #[arg(short, long)]
        container: Option<String>,
    },
    /// Let a frozen container run again (SIGCONT).
    Thaw {
        pod: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
        #[arg(short, long)]
        container: Option<String>,
    },
    /// Kill everything on a node at once; its heartbeat stops.
    CrashNode { node: String },
    /// Graceful node shutdown: SIGTERM, grace period, Pods left terminal.
    ShutdownNode { node: String },
    /// Start a crashed or shut-down node again.
    StartNode { node: String },
    /// Empty a PersistentVolumeClaim's directory.
    WipeClaim {
        claim: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
    },
    /// Corrupt the files of a PersistentVolumeClaim.
    CorruptClaim {
        claim: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
    },
    /// Take a Pod off the network (its link goes down).
    Disconnect {
        pod: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
    },
    /// Put a disconnected Pod back on the network.
    Reconnect {
        pod: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
    },
    /// Drop all traffic between two Pods (both still reach everyone else).
    Partition {
        a: String,
        b: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
    },
    /// Delay and drop a Pod's packets (netem where the kernel has it, else iptables and a
    /// userspace delay queue).
    Impair {
        pod: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
        /// Added delay, in milliseconds.
        #[arg(long, default_value_t = 0)]
        delay_ms: u64,
        /// Variation of the delay, in milliseconds.
        #[arg(long, default_value_t = 0)]
        jitter_ms: u64,
        /// Share of packets dropped, 0 to 100.
        #[arg(long, default_value_t = 0.0)]
        loss_percent: f64,
    },
    /// Remove a Pod's delay and loss.
    Unimpair {
        pod: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
    },
    /// Heal a partition between two Pods.
    Heal {
        a: String,
        b: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
    },
    /// Cut a Pod off from the Pods of another namespace (or the Pods named there), both
    /// ways, including Pods created there later; it still reaches everyone else.
    Isolate {
        pod: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
        /// The namespace whose Pods it is cut off from.
        #[arg(long)]
        from_namespace: String,
        /// Only these Pods of that namespace (repeat the flag); all of them without it.
        #[arg(long = "from-pod")]
        from_pods: Vec<String>,
    },
    /// End every cut of a Pod made by `isolate`.
    Rejoin {
        pod: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
    },
}

impl FaultCommand {
    fn into_fault(self) -> Fault {
        match self {
            Self::Kill {
                pod,
                namespace,
                container,
                signal,
            } => Fault::Signal {
                namespace,
                pod,
                container,
                signal,
            },
            Self::Freeze {
                pod,
                namespace,
                container,
            } => Fault::Freeze {
                namespace,
                pod,
                container,
            },
            Self::Thaw {
                pod,
                namespace,
                container,
            } => Fault::Thaw {
                namespace,
                pod,
                container,
            },
            Self::CrashNode { node } => Fault::CrashNode { node },
            Self::ShutdownNode { node } => Fault::ShutdownNode { node },
            Self::StartNode { node } => Fault::StartNode { node },
            Self::WipeClaim { claim, namespace } => Fault::WipeClaim { namespace, claim },
            Self::CorruptClaim { claim, namespace } => Fault::CorruptClaim { namespace, claim },
            Self::Disconnect { pod, namespace } => Fault::Disconnect { namespace, pod },
            Self::Reconnect { pod, namespace } => Fault::Reconnect { namespace, pod },
            Self::Partition { a, b, namespace } => Fault::Partition { namespace, a, b },
            Self::Heal { a, b, namespace } => Fault::Heal { namespace, a, b },
            Self::Impair {
                pod,
                namespace,
                delay_ms,
                jitter_ms,
                loss_percent,
            } => Fault::Impair {
                namespace,
                pod,
                delay_ms,
                jitter_ms,
                loss_percent,
            },
            Self::Unimpair { pod, namespace } => Fault::Unimpair { namespace, pod },
            Self::Isolate {
                pod,
                namespace,
                from_namespace,
                from_pods,
            } => Fault::Isolate {
                namespace,
                pod,
                peers: kube_sandbox::kubelet::Peers {
                    namespace: from_namespace,
                    pods: (!from_pods.is_empty()).then_some(from_pods),
                },
            },
            Self::Rejoin { pod, namespace } => Fault::Rejoin { namespace, pod },
        }
    }
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
        Command::Up {
            dir,
            port,
            nodes,
            images,
            time_scale,
            pod_eviction_timeout,
            api_only,
            cert_manager,
            control_plane,
        } => {
            let mut options = SandboxOptions::new(dir).port(port).nodes(nodes);
            if cert_manager {
                options = options.cert_manager();
            }
            if control_plane == ControlPlaneKind::Kubernetes {
                if api_only {
                    anyhow::bail!(
                        "--control-plane kubernetes runs inside the cluster network, which needs nodes: drop --api-only"
                    );
                }
                let kubernetes = kube_sandbox::kubernetes::KubernetesOptions {
                    port,
                    ..Default::default()
                };
                options = options.control_plane(ControlPlane::Kubernetes(kubernetes));
            }
            if !api_only {
                let user = match images {
                    Some(path) => ImageMap::load(&path)?,
                    None => ImageMap::default(),
                };
                options = options
                    .images(user)
                    .time_scale(TimeScale::new(time_scale)?)
                    .pod_eviction_timeout(Duration::from_secs(pod_eviction_timeout));
            } else if images.is_some() {
                anyhow::bail!("--images needs nodes to run Pods: drop --api-only");
            }
            let sandbox = Sandbox::start(options).await?;
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
        Command::Exec {
            dir,
            pod,
            namespace,
            container,
            command,
        } => {
            let mut child = match pod {
                Some(pod) => {
                    let reference = ContainerRef {
                        namespace,
                        pod,
                        container,
                    };
                    kube_sandbox::control::container_exec(&dir, &reference)
                        .await?
                        .command(&command)?
                }
                None => {
                    let info = ClusterNetworkInfo::load(&dir).with_context(|| {
                        format!("is `kube-sandbox up --dir {}` running?", dir.display())
                    })?;
                    let mut child = info.command(&command[0])?;
                    child.args(&command[1..]);
                    child
                }
            };
            let status = child
                .status()
                .with_context(|| format!("running {}", command[0]))?;
            let signal = std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0);
            std::process::exit(status.code().unwrap_or(128 + signal));
        }
        Command::Fault { dir, fault } => {
            let message = kube_sandbox::control::send_fault(&dir, &fault.into_fault()).await?;
            println!("{message}");
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
