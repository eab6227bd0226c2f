//! A real Kubernetes control plane for kube-sandbox's nodes: etcd, kube-apiserver,
//! kube-controller-manager (every default controller) and kube-scheduler, the binaries
//! `scripts/install-deps.sh` builds from `k8s.io/kubernetes` (`tools/kubernetes/`), run as
//! child processes inside the cluster network.
//!
//! ```text
//!   machine                     cluster network namespace
//!   127.0.0.1:P ── forwarder ──► 127.0.0.1:P  kube-apiserver (0.0.0.0:P, advertises A:P)
//!   (kubectl, tests)             127.0.0.1:2379 etcd (the API server's store)
//!                                127.0.0.1:10257 kube-controller-manager, :10259 scheduler
//!                                A = a control-plane address on the bridge; the `kubernetes`
//!                                Service's endpoint, so Pods reach the API server through it
//!                                N:10250 each node's kubelet endpoint (exec, port-forward, logs)
//! ```
//!
//! Running inside the cluster network is what lets kube-apiserver reach the kubelets at their
//! node addresses and publish a non-loopback endpoint for the `kubernetes` Service, as on a real
//! cluster; the machine reaches it through one forwarded port, the same port that works inside
//! the network, so `DIR/kubeconfig` works in both. Certificates are kubeadm's layout
//! ([`pki`]); the controller-manager and the scheduler authenticate as
//! `system:kube-controller-manager` and `system:kube-scheduler` and are authorized by the
//! bootstrap RBAC policy; each controller uses its own ServiceAccount.

pub mod health;
pub mod pki;
pub mod process;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::network::ClusterNetwork;
use health::Scheme;
use pki::{ClusterCa, Leaf, ServiceAccountKey, Usage};
use process::Process;

/// The Kubernetes release the tests run on, which `scripts/install-deps.sh` builds
/// (`tools/kubernetes/1.37/go.mod`).
pub const KUBERNETES_VERSION: &str = "1.37.2";
/// The release before it, built too (`tools/kubernetes/1.36/`): the CRD, chart and lifecycle
/// checks run on both.
pub const PREVIOUS_KUBERNETES_VERSION: &str = "1.36.3";
/// The etcd release that stores the control plane's objects (what kubeadm of that release
/// runs), built by `scripts/install-deps.sh` too.
pub const STORE_ETCD_VERSION: &str = "3.6.17";

/// Where install-deps puts the control plane's binaries; `KUBE_SANDBOX_KUBERNETES_DIR`
/// overrides it.
pub fn default_binaries() -> PathBuf {
    std::env::var_os("KUBE_SANDBOX_KUBERNETES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| binaries_of(KUBERNETES_VERSION))
}

/// Where install-deps puts the binaries of Kubernetes `version`.
pub fn binaries_of(version: &str) -> PathBuf {
    PathBuf::from(format!("/usr/local/lib/kubernetes-v{version}"))
}

/// The etcd binary of the store; `KUBE_SANDBOX_STORE_ETCD` overrides it.
pub fn default_store_etcd() -> PathBuf {
    std::env::var_os("KUBE_SANDBOX_STORE_ETCD")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("/usr/local/lib/etcd-{STORE_ETCD_VERSION}/etcd")))
}

/// How to run the control plane.
#[derive(Clone, Debug)]
pub struct KubernetesOptions {
    /// The directory with `kube-apiserver`, `kube-controller-manager` and `kube-scheduler`.
    pub binaries: PathBuf,
    /// The etcd binary of the API server's store.
    pub store_etcd: PathBuf,
    /// How often the node lifecycle controller looks at the nodes (`--node-monitor-period`).
    /// Its grace period and the Pods' eviction timeout are the cluster's
    /// ([`ClusterOptions`](crate::ClusterOptions)).
    pub node_monitor_period: Duration,
    /// The API server's port on the machine (and inside the cluster network); 0 picks a free
    /// one.
    pub port: u16,
}

impl Default for KubernetesOptions {
    fn default() -> Self {
        Self {
            binaries: default_binaries(),
            store_etcd: default_store_etcd(),
            node_monitor_period: Duration::from_secs(5),
            port: 0,
        }
    }
}

impl KubernetesOptions {
    /// Kubernetes `version`, from where install-deps puts it.
    pub fn release(version: &str) -> Self {
        Self {
            binaries: binaries_of(version),
            ..Self::default()
        }
    }

    /// Checks that every binary is there and says how to get it when it is not.
    pub fn check(&self) -> anyhow::Result<()> {
        for name in [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ] {
            let path = self.binaries.join(name);
            if !path.is_file() {
                bail!(
                    "{} is missing: the real control plane needs Kubernetes built from Go modules; run scripts/install-deps.sh (or set KUBE_SANDBOX_KUBERNETES_DIR to a directory with kube-apiserver, kube-controller-manager and kube-scheduler)",
                    path.display()
                );
            }
        }
        if !self.store_etcd.is_file() {
            bail!(
                "{} is missing: the real control plane stores its objects in etcd v{STORE_ETCD_VERSION}; run scripts/install-deps.sh (or set KUBE_SANDBOX_STORE_ETCD)",
                self.store_etcd.display()
            );
        }
        Ok(())
    }
}

/// What the sandbox needs of a running control plane.
pub struct RunningKubernetes {
    /// `https://127.0.0.1:P`, on the machine and inside the cluster network alike.
    pub url: String,
    /// The API server's address on the bridge (the `kubernetes` Service's endpoint).
    pub address: Ipv4Addr,
    pub port: u16,
    pub ca: Arc<ClusterCa>,
    /// The administrator's client certificate (`system:masters`).
    pub admin: Leaf,
    /// How long it took until every component was healthy.
    pub started_in: Duration,
    processes: Mutex<Vec<Process>>,
    /// Dropping it (or sending) stops the forwarder's thread.
    forwarder: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

impl RunningKubernetes {
    /// Starts the control plane inside `network`, its files in `dir`, and waits until every
    /// component is healthy.
    ///
    /// From `cluster`: how long a silent node stays Ready (kube-controller-manager's
    /// `--node-monitor-grace-period`) and how long Pods without tolerations of their own stay
    /// on a not-ready or unreachable node (kube-apiserver's
    /// `--default-not-ready-toleration-seconds` and `--default-unreachable-toleration-seconds`,
    /// which the DefaultTolerationSeconds admission plugin writes into every Pod), both on the
    /// cluster's time scale.
    pub async fn start(
        network: Arc<ClusterNetwork>,
        dir: &Path,
        options: &KubernetesOptions,
        cluster: &crate::ClusterOptions,
    ) -> anyhow::Result<Self> {
        options.check()?;
        let started = Instant::now();
        let dir = dir.join("control-plane");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, options.port))
            .with_context(|| {
                format!(
                    "binding the API server's port {} on the machine",
                    options.port
                )
            })?;
        let port = listener.local_addr()?.port();
        let url = format!("https://127.0.0.1:{port}");
        let address = network
            .add_node_address()
            .await
            .context("giving the API server an address on the cluster bridge")?;

        let files = Files::write(&dir, &network, address, &url)?;
        let mut processes = Vec::new();
        let config = network.config();

        let mut etcd = network.command(&options.store_etcd)?;
        etcd.args([
            "--name=control-plane".to_string(),
            format!("--data-dir={}", dir.join("etcd").display()),
            "--listen-client-urls=http://127.0.0.1:2379".into(),
            "--advertise-client-urls=http://127.0.0.1:2379".into(),
            "--listen-peer-urls=http://127.0.0.1:2380".into(),
            "--initial-advertise-peer-urls=http://127.0.0.1:2380".into(),
            "--initial-cluster=control-plane=http://127.0.0.1:2380".into(),
            // The store of a test cluster, gone with it: no fsync (as envtest runs it).
            "--unsafe-no-fsync=true".into(),
            "--log-level=warn".into(),
        ]);
        processes.push(Process::start("etcd", etcd, &dir)?);

        let scale = cluster.time_scale;
        let grace = scale.scale(cluster.node_monitor_grace_period);
        let eviction = scale
            .scale(cluster.pod_eviction_timeout)
            .as_secs()
            .max(1)
            .to_string();
        let mut apiserver = network.command(options.binaries.join("kube-apiserver"))?;
        apiserver.args([
            "--etcd-servers=http://127.0.0.1:2379".to_string(),
            "--bind-address=0.0.0.0".into(),
            format!("--secure-port={port}"),
            format!("--advertise-address={address}"),
            format!("--tls-cert-file={}", files.apiserver.0.display()),
            format!("--tls-private-key-file={}", files.apiserver.1.display()),
            format!("--client-ca-file={}", files.ca.display()),
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NodeRestriction".into(),
            format!("--service-cluster-ip-range={}", config.service_cidr),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", files.sa_public.display()),
            format!(
                "--service-account-signing-key-file={}",
                files.sa_private.display()
            ),
            "--allow-privileged=true".into(),
            format!(
                "--kubelet-client-certificate={}",
                files.kubelet_client.0.display()
            ),
            format!("--kubelet-client-key={}", files.kubelet_client.1.display()),
            format!("--kubelet-certificate-authority={}", files.ca.display()),
            "--kubelet-preferred-address-types=InternalIP".into(),
            format!("--default-not-ready-toleration-seconds={eviction}"),
            format!("--default-unreachable-toleration-seconds={eviction}"),
            "--v=1".into(),
        ]);
        if let Some(audit) = std::env::var_os("KUBE_SANDBOX_AUDIT") {
            // Every request's metadata (who, what, the answer's code) in
            // $KUBE_SANDBOX_AUDIT/audit-<port>.log: what a test's clients asked and were told,
            // kept after the sandbox's own directory is gone.
            let audit = PathBuf::from(audit);
            std::fs::create_dir_all(&audit)?;
            let policy = dir.join("audit-policy.yaml");
            std::fs::write(
                &policy,
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n",
            )?;
            apiserver.args([
                format!("--audit-policy-file={}", policy.display()),
                format!(
                    "--audit-log-path={}",
                    audit.join(format!("audit-{port}.log")).display()
                ),
                "--audit-log-format=json".to_string(),
                "--audit-log-mode=batch".to_string(),
            ]);
        }
        processes.push(Process::start("kube-apiserver", apiserver, &dir)?);
        let forwarder = spawn_forwarder(listener, network.clone(), port)?;

        let mut running = Self {
            url,
            address,
            port,
            ca: Arc::new(files.ca_authority),
            admin: files.admin,
            started_in: Duration::ZERO,
            processes: Mutex::new(processes),
            forwarder: Mutex::new(Some(forwarder)),
        };
        let local = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        running
            .wait_healthy(&network, "kube-apiserver", local, "/readyz")
            .await?;

        let mut controller_manager =
            network.command(options.binaries.join("kube-controller-manager"))?;
        controller_manager.args([
            format!("--kubeconfig={}", files.controller_manager.display()),
            format!(
                "--authentication-kubeconfig={}",
                files.controller_manager.display()
            ),
            format!(
                "--authorization-kubeconfig={}",
                files.controller_manager.display()
            ),
            "--bind-address=127.0.0.1".into(),
            "--secure-port=10257".into(),
            format!("--tls-cert-file={}", files.loopback.0.display()),
            format!("--tls-private-key-file={}", files.loopback.1.display()),
            "--leader-elect=false".into(),
            "--controllers=*".into(),
            "--use-service-account-credentials=true".into(),
            format!("--root-ca-file={}", files.ca.display()),
            format!(
                "--service-account-private-key-file={}",
                files.sa_private.display()
            ),
            format!("--cluster-signing-cert-file={}", files.ca.display()),
            format!("--cluster-signing-key-file={}", files.ca_key.display()),
            format!(
                "--node-monitor-period={}ms",
                options.node_monitor_period.as_millis()
            ),
            format!("--node-monitor-grace-period={}ms", grace.as_millis()),
            "--cluster-name=kube-sandbox".into(),
            "--v=1".into(),
        ]);
        let mut scheduler = network.command(options.binaries.join("kube-scheduler"))?;
        scheduler.args([
            format!("--kubeconfig={}", files.scheduler.display()),
            format!("--authentication-kubeconfig={}", files.scheduler.display()),
            format!("--authorization-kubeconfig={}", files.scheduler.display()),
            "--bind-address=127.0.0.1".into(),
            "--secure-port=10259".into(),
            format!("--tls-cert-file={}", files.loopback.0.display()),
            format!("--tls-private-key-file={}", files.loopback.1.display()),
            "--leader-elect=false".into(),
            "--v=1".into(),
        ]);
        {
            let mut processes = running.processes.lock().expect("processes lock");
            processes.push(Process::start(
                "kube-controller-manager",
                controller_manager,
                &dir,
            )?);
            processes.push(Process::start("kube-scheduler", scheduler, &dir)?);
        }
        let (controllers, scheduling) = tokio::join!(
            running.wait_healthy(
                &network,
                "kube-controller-manager",
                SocketAddr::from((Ipv4Addr::LOCALHOST, 10257)),
                "/healthz"
            ),
            running.wait_healthy(
                &network,
                "kube-scheduler",
                SocketAddr::from((Ipv4Addr::LOCALHOST, 10259)),
                "/healthz"
            ),
        );
        controllers?;
        scheduling?;
        running.started_in = started.elapsed();
        Ok(running)
    }

    /// Waits until `path` at `address` answers 200 `ok` (60 s at most); an error names the
    /// process that exited, with the end of its log.
    async fn wait_healthy(
        &self,
        network: &ClusterNetwork,
        name: &str,
        address: SocketAddr,
        path: &str,
    ) -> anyhow::Result<()> {
        let scheme = Scheme::Https {
            server_name: "127.0.0.1".into(),
            ca_pem: self.ca.ca_pem.clone(),
            client: Some(self.admin.clone()),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let last = match health::get(network, address, path, &scheme).await {
                Ok((200, body)) if body.trim() == "ok" => return Ok(()),
                Ok((code, body)) => format!("{code}: {body:.300}"),
                Err(error) => error,
            };
            if let Some((process, status, log)) = self.exited() {
                bail!(
                    "{process} exited ({status}) while {name} started; the end of its log:\n{log}"
                );
            }
            if Instant::now() > deadline {
                bail!("{name} was not healthy within 60 s: {last}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A process that has ended: its name, exit status and the end of its log.
    pub fn exited(&self) -> Option<(String, String, String)> {
        let mut processes = self.processes.lock().expect("processes lock");
        processes.iter_mut().find_map(|p| {
            p.exited()
                .map(|status| (p.name.clone(), status.to_string(), p.log_tail(4000)))
        })
    }

    /// Kills every process now (the API server first, the store last).
    pub fn stop(&self) {
        self.forwarder.lock().expect("forwarder lock").take();
        let mut processes = self.processes.lock().expect("processes lock");
        while let Some(mut process) = processes.pop() {
            process.kill();
        }
    }
}

impl Drop for RunningKubernetes {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The files the processes read: certificates, keys and kubeconfigs.
struct Files {
    ca_authority: ClusterCa,
    ca: PathBuf,
    ca_key: PathBuf,
    apiserver: (PathBuf, PathBuf),
    kubelet_client: (PathBuf, PathBuf),
    /// Serving certificate of the controller-manager and the scheduler (127.0.0.1).
    loopback: (PathBuf, PathBuf),
    sa_private: PathBuf,
    sa_public: PathBuf,
    admin: Leaf,
    controller_manager: PathBuf,
    scheduler: PathBuf,
}

impl Files {
    fn write(
        dir: &Path,
        network: &ClusterNetwork,
        address: Ipv4Addr,
        url: &str,
    ) -> anyhow::Result<Self> {
        let ca = ClusterCa::generate()?;
        let write = |name: &str, text: &str| -> anyhow::Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            Ok(path)
        };
        let pair = |name: &str, leaf: &Leaf| -> anyhow::Result<(PathBuf, PathBuf)> {
            Ok((
                write(&format!("{name}.crt"), &leaf.cert_pem)?,
                write(&format!("{name}.key"), &leaf.key_pem)?,
            ))
        };
        let config = network.config();
        let first_service_ip = Ipv4Addr::from(u32::from(config.service_cidr.network()) + 1);
        let domain = &config.cluster_domain;
        let serving_names = vec![
            "127.0.0.1".to_string(),
            "localhost".into(),
            address.to_string(),
            first_service_ip.to_string(),
            "kubernetes".into(),
            "kubernetes.default".into(),
            "kubernetes.default.svc".into(),
            format!("kubernetes.default.svc.{domain}"),
        ];
        let apiserver = ca.leaf("kube-apiserver", &[], &serving_names, Usage::Server)?;
        let kubelet_client = ca.leaf(
            "kube-apiserver-kubelet-client",
            &["system:masters"],
            &[],
            Usage::Client,
        )?;
        let loopback = ca.leaf(
            "localhost",
            &[],
            &["127.0.0.1".into(), "localhost".into()],
            Usage::Server,
        )?;
        let admin = ca.leaf("kubernetes-admin", &["system:masters"], &[], Usage::Client)?;
        let controller_manager =
            ca.leaf("system:kube-controller-manager", &[], &[], Usage::Client)?;
        let scheduler = ca.leaf("system:kube-scheduler", &[], &[], Usage::Client)?;
        let service_accounts = ServiceAccountKey::generate()?;
        Ok(Self {
            ca: write("ca.crt", &ca.ca_pem)?,
            ca_key: write("ca.key", &ca.key_pem)?,
            apiserver: pair("apiserver", &apiserver)?,
            kubelet_client: pair("apiserver-kubelet-client", &kubelet_client)?,
            loopback: pair("loopback", &loopback)?,
            sa_private: write("sa.key", &service_accounts.private_pem)?,
            sa_public: write("sa.pub", &service_accounts.public_pem)?,
            controller_manager: write(
                "controller-manager.kubeconfig",
                &pki::kubeconfig(
                    url,
                    &ca.ca_pem,
                    "system:kube-controller-manager",
                    &controller_manager,
                ),
            )?,
            scheduler: write(
                "scheduler.kubeconfig",
                &pki::kubeconfig(url, &ca.ca_pem, "system:kube-scheduler", &scheduler),
            )?,
            admin,
            ca_authority: ca,
        })
    }
}

/// Runs [`forward`] on a thread and runtime of its own, until the returned sender is sent to or
/// dropped. Not on the caller's runtime: a test that blocks its runtime's workers (a `kubectl`
/// run with `std::process::Command` from async code, say) would otherwise stall every
/// connection to the API server, kubectl's own included, until its TLS handshake times out.
fn spawn_forwarder(
    listener: std::net::TcpListener,
    network: Arc<ClusterNetwork>,
    port: u16,
) -> anyhow::Result<tokio::sync::oneshot::Sender<()>> {
    listener.set_nonblocking(true)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("apiserver-forwarder")
        .enable_all()
        .build()
        .context("the API server forwarder's runtime")?;
    std::thread::Builder::new()
        .name("apiserver-forwarder".into())
        .spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                tokio::select! {
                    _ = forward(listener, network, port) => {}
                    _ = stopped => {}
                }
            });
            // Open connections end with the runtime.
            runtime.shutdown_background();
        })
        .context("starting the API server forwarder's thread")?;
    Ok(stop)
}

/// Forwards each connection to the machine's `127.0.0.1:port` to the same address inside the
/// cluster network, where kube-apiserver listens.
async fn forward(listener: tokio::net::TcpListener, network: Arc<ClusterNetwork>, port: u16) {
    let target = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            // Out of descriptors, say: wait instead of spinning.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let network = network.clone();
        tokio::spawn(async move {
            let _ = inbound.set_nodelay(true);
            match network.connect(target).await {
                Ok(mut outbound) => {
                    let _ = outbound.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
                Err(error) => {
                    tracing::debug!(%error, "the API server is not reachable in the cluster network");
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    /// The versions here are the ones `scripts/install-deps.sh` builds (and `tools/` pins).
    #[test]
    fn the_versions_are_the_ones_install_deps_builds() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let script = std::fs::read_to_string(root.join("scripts/install-deps.sh")).unwrap();
        let line = |prefix: &str| {
            script
                .lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} line in install-deps.sh"))
                .to_string()
        };
        assert_eq!(
            line("KUBERNETES_VERSIONS="),
            format!(
                "KUBERNETES_VERSIONS=({} {})",
                super::KUBERNETES_VERSION,
                super::PREVIOUS_KUBERNETES_VERSION
            )
        );
        assert!(
            line("ETCD_VERSIONS=").contains(super::STORE_ETCD_VERSION),
            "install-deps builds etcd {}",
            super::STORE_ETCD_VERSION
        );
        for version in [
            super::KUBERNETES_VERSION,
            super::PREVIOUS_KUBERNETES_VERSION,
        ] {
            let minor = version.rsplit_once('.').unwrap().0;
            let go_mod =
                std::fs::read_to_string(root.join(format!("tools/kubernetes/{minor}/go.mod")))
                    .unwrap();
            assert!(
                go_mod.contains(&format!("k8s.io/kubernetes v{version}")),
                "tools/kubernetes/{minor} pins v{version}"
            );
        }
    }
}
