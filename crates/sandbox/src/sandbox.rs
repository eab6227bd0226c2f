//! A whole sandbox as a value: start it, use its kubeconfig or `kube::Client`, drop it to stop
//! everything. Many run side by side in one process, each on its own port.
//!
//! Two shapes:
//! - [`SandboxOptions::cluster`]: a whole cluster. The API server, Node objects whose node
//!   agents run Pods as processes ([`crate::kubelet`]), the cluster network with its DNS and
//!   Service proxy (state in the sandbox's directory), the scheduler and controllers. Faults
//!   through [`Sandbox::kubelet`] or [`Sandbox::fault`]; commands in the cluster network through
//!   [`Sandbox::command`]. Needs root.
//! - [`SandboxOptions::new`]: the API server and its Node objects only, for tests that play the
//!   node agent by hand (no root needed). Pods stay Pending; a Pod bound to a node is deleted
//!   gracefully: it gets `deletionTimestamp` and stays until someone deletes it with
//!   `gracePeriodSeconds=0`.
//!
//! [`Sandbox::client`] is the administrator's client; [`Sandbox::service_account_client`] one
//! authorized by RBAC.
//!
//! Either shape can also run a stand-in for cert-manager ([`SandboxOptions::cert_manager`],
//! see [`crate::certmanager`]).
//!
//! The nodes join one of two control planes ([`ControlPlane`]): the sandbox's own API server,
//! scheduler and controllers in this process (the default: it starts in milliseconds), or a
//! real one ([`SandboxOptions::kubernetes`]): etcd, kube-apiserver, kube-controller-manager
//! and kube-scheduler built from `k8s.io/kubernetes` ([`crate::kubernetes`]), whose rules the
//! node agents then obey as kubelets (they register their Nodes, serve the kubelet endpoint,
//! leave Endpoints and volume binding to the controller-manager).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;

use crate::apiserver::bootstrap::create_builtin;
use crate::apiserver::{ApiServer, ApiServerConfig, RunningApiServer, kubeconfig};
use crate::certmanager::{CertManagerHandle, CertManagerOptions};
use crate::cluster::{ClusterApi, ClusterOptions, RunningCluster, create_network};
use crate::controllers::TimeScale;
use crate::kubelet::{Fault, FaultError, Kubelet};
use crate::kubernetes::{KubernetesOptions, RunningKubernetes, pki};
use crate::network::ClusterNetwork;
use crate::runtime::{ContainerRuntime, ImageMap};

/// Which control plane a sandbox runs.
#[derive(Debug, Clone, Default)]
pub enum ControlPlane {
    /// kube-sandbox's own API server, scheduler and controllers, in this process.
    #[default]
    Sandbox,
    /// A real control plane from `k8s.io/kubernetes` (needs root and the binaries
    /// `scripts/install-deps.sh` builds); always with nodes.
    Kubernetes(KubernetesOptions),
}

/// How to start a sandbox.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// Where the kubeconfig, the cluster network's files, the runtime's state and the control
    /// socket are written.
    pub dir: PathBuf,
    /// Number of Node objects to create, `node-1`..., labelled with their hostname and a zone
    /// of their own (`zone-a`...).
    pub nodes: usize,
    pub apiserver: ApiServerConfig,
    /// How the nodes run Pods; `None`: the API server only.
    pub cluster: Option<ClusterOptions>,
    /// Serve cert-manager's `Certificate`, `Issuer` and `ClusterIssuer` and run the
    /// stand-in's controller ([`crate::certmanager`]); `None`: not served.
    pub cert_manager: Option<CertManagerOptions>,
    pub control_plane: ControlPlane,
}

impl SandboxOptions {
    /// The API server and three Node objects in `dir` on a free port; nothing runs Pods.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            nodes: 3,
            apiserver: ApiServerConfig::default(),
            cluster: None,
            cert_manager: None,
            control_plane: ControlPlane::Sandbox,
        }
    }

    /// Runs a real control plane with its default binaries (makes it a cluster).
    pub fn kubernetes(self) -> Self {
        self.control_plane(ControlPlane::Kubernetes(KubernetesOptions::default()))
    }

    /// Runs `control_plane` (a real one makes it a cluster).
    pub fn control_plane(mut self, control_plane: ControlPlane) -> Self {
        if matches!(control_plane, ControlPlane::Kubernetes(_)) {
            self.cluster_options();
        }
        self.control_plane = control_plane;
        self
    }

    /// A whole cluster in `dir`: three nodes that run Pods as processes, the cluster network,
    /// the scheduler and controllers, real time, the built-in etcd images.
    pub fn cluster(dir: impl Into<PathBuf>) -> Self {
        Self {
            cluster: Some(ClusterOptions::default()),
            ..Self::new(dir)
        }
    }

    fn cluster_options(&mut self) -> &mut ClusterOptions {
        self.cluster.get_or_insert_with(ClusterOptions::default)
    }

    /// Images to host binaries, before the built-in etcd mappings (makes it a cluster).
    pub fn images(mut self, images: ImageMap) -> Self {
        self.cluster_options().images = images.then(ImageMap::builtin());
        self
    }

    /// Shortens the cluster's waits (see [`ClusterOptions::time_scale`]; makes it a cluster).
    pub fn time_scale(mut self, time_scale: TimeScale) -> Self {
        self.cluster_options().time_scale = time_scale;
        self
    }

    /// How long Pods stay on a NotReady node before eviction (makes it a cluster).
    pub fn pod_eviction_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.cluster_options().pod_eviction_timeout = timeout;
        self
    }

    /// Runs the cert-manager stand-in with its defaults (ClusterIssuers' CA Secrets in the
    /// `cert-manager` namespace); with or without nodes.
    pub fn cert_manager(self) -> Self {
        self.cert_manager_with(CertManagerOptions::default())
    }

    /// Runs the cert-manager stand-in with these options.
    pub fn cert_manager_with(mut self, options: CertManagerOptions) -> Self {
        self.cert_manager = Some(options);
        self
    }

    pub fn port(mut self, port: u16) -> Self {
        self.apiserver.port = port;
        self
    }

    pub fn nodes(mut self, nodes: usize) -> Self {
        self.nodes = nodes;
        self
    }
}

/// The API server of a running sandbox.
enum Backend {
    Sandbox(RunningApiServer),
    Kubernetes(Box<RunningKubernetes>),
}

/// A running sandbox. Dropping it stops its node agents (every Pod process is killed at once),
/// its API server and everything it started.
pub struct Sandbox {
    cert_manager: Option<CertManagerHandle>,
    cluster: Option<RunningCluster>,
    dir: PathBuf,
    api: Backend,
    kubeconfig: String,
    kubeconfig_path: PathBuf,
    client: kube::Client,
}

/// The zone of node `index` (from 1): one zone each, `zone-a` to `zone-z`, then `zone-27`...
fn zone_of(index: usize) -> String {
    match u8::try_from(index) {
        Ok(number @ 1..=26) => format!("zone-{}", char::from(b'a' + number - 1)),
        _ => format!("zone-{index}"),
    }
}

impl Sandbox {
    /// Starts the control plane, writes `dir/kubeconfig` and creates the nodes.
    pub async fn start(options: SandboxOptions) -> anyhow::Result<Self> {
        crate::apiserver::tls::install_crypto_provider();
        std::fs::create_dir_all(&options.dir)
            .with_context(|| format!("creating {}", options.dir.display()))?;
        if let ControlPlane::Kubernetes(kubernetes) = &options.control_plane {
            return Self::start_kubernetes(&options, kubernetes).await;
        }
        let api = RunningApiServer::start(options.apiserver.clone()).await?;
        let kubeconfig = kubeconfig::render(&api.url(), &api.ca_pem, api.admin_token());
        let kubeconfig_path = options.dir.join("kubeconfig");
        std::fs::write(&kubeconfig_path, &kubeconfig)
            .with_context(|| format!("writing {}", kubeconfig_path.display()))?;
        for index in 1..=options.nodes {
            create_node(&api.server, &format!("node-{index}"), &zone_of(index))?;
        }
        if let Some(cert_manager) = &options.cert_manager {
            crate::certmanager::install(&api.server, cert_manager)?;
        }
        let client = client_for(&kubeconfig).await?;
        let cluster = match &options.cluster {
            Some(cluster) => {
                let (nodes, zones) = node_names(options.nodes);
                Some(
                    RunningCluster::start(
                        ClusterApi::Sandbox(&api),
                        client.clone(),
                        &options.dir,
                        nodes,
                        zones,
                        cluster,
                    )
                    .await?,
                )
            }
            None => None,
        };
        Ok(Self {
            cert_manager: start_cert_manager(&options, &client),
            cluster,
            dir: options.dir.clone(),
            api: Backend::Sandbox(api),
            kubeconfig,
            kubeconfig_path,
            client,
        })
    }

    /// [`Sandbox::start`] with a real control plane: the cluster network first (the control
    /// plane runs inside it), then etcd, kube-apiserver, kube-controller-manager and
    /// kube-scheduler, then the nodes, which register themselves; returns once every node is
    /// Ready and untainted.
    async fn start_kubernetes(
        options: &SandboxOptions,
        kubernetes: &KubernetesOptions,
    ) -> anyhow::Result<Self> {
        let cluster = options.cluster.clone().unwrap_or_default();
        let network = Arc::new(create_network(&options.dir).await?);
        let control_plane =
            RunningKubernetes::start(network.clone(), &options.dir, kubernetes, &cluster).await?;
        let kubeconfig = pki::kubeconfig(
            &control_plane.url,
            &control_plane.ca.ca_pem,
            "kubernetes-admin",
            &control_plane.admin,
        );
        let kubeconfig_path = options.dir.join("kubeconfig");
        std::fs::write(&kubeconfig_path, &kubeconfig)
            .with_context(|| format!("writing {}", kubeconfig_path.display()))?;
        let client = client_for(&kubeconfig).await?;
        if let Some(cert_manager) = &options.cert_manager {
            crate::certmanager::install_with_client(&client, cert_manager).await?;
        }
        let (nodes, zones) = node_names(options.nodes);
        let running = RunningCluster::start(
            ClusterApi::Kubernetes {
                network,
                ca: control_plane.ca.clone(),
            },
            client.clone(),
            &options.dir,
            nodes.clone(),
            zones,
            &cluster,
        )
        .await?;
        wait_nodes_ready(&client, &nodes).await?;
        Ok(Self {
            cert_manager: start_cert_manager(options, &client),
            cluster: Some(running),
            dir: options.dir.clone(),
            api: Backend::Kubernetes(Box::new(control_plane)),
            kubeconfig,
            kubeconfig_path,
            client,
        })
    }

    /// How long the real control plane took to be healthy (`None` with the sandbox's own).
    pub fn control_plane_started_in(&self) -> Option<std::time::Duration> {
        match &self.api {
            Backend::Kubernetes(control_plane) => Some(control_plane.started_in),
            Backend::Sandbox(_) => None,
        }
    }

    /// Whether the control plane is a real one.
    pub fn is_kubernetes(&self) -> bool {
        matches!(self.api, Backend::Kubernetes(_))
    }

    /// The sandbox's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The node agents: faults (kill, freeze, node crash and shutdown, claims, partitions) and
    /// node states. An error when the sandbox runs no nodes.
    pub fn kubelet(&self) -> Result<&Kubelet, FaultError> {
        self.cluster
            .as_ref()
            .map(|c| c.kubelet.as_ref())
            .ok_or(FaultError::NoNodes)
    }

    /// Applies a fault, as `kube-sandbox fault` does; says what was done.
    pub async fn fault(&self, fault: &Fault) -> Result<String, FaultError> {
        fault.apply(self.kubelet()?).await
    }

    /// The cluster network (`None` without nodes): connections, lookups and sockets inside it.
    pub fn network(&self) -> Option<&Arc<ClusterNetwork>> {
        self.cluster.as_ref().map(|c| &c.network)
    }

    /// The process runtime (`None` without nodes): claim directories and images.
    pub fn runtime(&self) -> Option<&ContainerRuntime> {
        self.cluster.as_ref().map(|c| &c.runtime)
    }

    /// A command that runs inside the cluster network with the cluster DNS, as
    /// `kube-sandbox exec` runs it: cluster names and addresses resolve and connect, and the
    /// kubeconfig works (the API server listens on the same address there).
    pub fn command(
        &self,
        program: impl AsRef<std::ffi::OsStr>,
    ) -> anyhow::Result<std::process::Command> {
        let network = self.network().ok_or(FaultError::NoNodes)?;
        Ok(network.command(program)?)
    }

    /// The administrator's client configuration, to build a client with other settings (for
    /// example without kube-rs' default retries of 429 answers).
    pub async fn client_config(&self) -> anyhow::Result<kube::Config> {
        config_for(&self.kubeconfig).await
    }

    /// A client with the administrator's identity.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The kubeconfig's text.
    pub fn kubeconfig(&self) -> &str {
        &self.kubeconfig
    }

    /// `dir/kubeconfig`, for `kubectl --kubeconfig`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// `https://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        match &self.api {
            Backend::Sandbox(api) => api.url(),
            Backend::Kubernetes(control_plane) => control_plane.url.clone(),
        }
    }

    /// The cluster CA in PEM.
    pub fn ca_pem(&self) -> &str {
        match &self.api {
            Backend::Sandbox(api) => &api.ca_pem,
            Backend::Kubernetes(control_plane) => &control_plane.ca.ca_pem,
        }
    }

    /// The sandbox's own API server (`None` with a real control plane): for tests that look
    /// into its store or register their own log source.
    pub fn api_server(&self) -> Option<&Arc<ApiServer>> {
        match &self.api {
            Backend::Sandbox(api) => Some(&api.server),
            Backend::Kubernetes(_) => None,
        }
    }

    /// A client that authenticates as a service account with a token from the TokenRequest
    /// API, so its requests are authorized by RBAC.
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<kube::Client> {
        use k8s_openapi::api::authentication::v1::TokenRequest;
        use k8s_openapi::api::core::v1::ServiceAccount;
        let issued = kube::Api::<ServiceAccount>::namespaced(self.client.clone(), namespace)
            .create_token_request(name, &Default::default(), &TokenRequest::default())
            .await
            .with_context(|| format!("a token for ServiceAccount {namespace}/{name}"))?;
        let token = issued.status.map(|s| s.token).unwrap_or_default();
        let text = kubeconfig::render(&self.url(), self.ca_pem(), &token);
        client_for(&text).await
    }

    /// Runs async code on a thread of its own inside the cluster network, with a runtime of
    /// its own: every socket it opens is in the cluster network, so a Rust client (an etcd
    /// client, say) reaches Pod and Service addresses as a Pod would. Names do not go through
    /// the cluster DNS there: resolve them with [`ClusterNetwork::lookup`] first.
    pub async fn run_in_cluster_network<F, Fut, R>(&self, job: F) -> anyhow::Result<R>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = R>,
        R: Send + 'static,
    {
        let namespace = self.network().ok_or(FaultError::NoNodes)?.namespace();
        let (sender, receiver) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("cluster-network-job".into())
            .spawn(move || {
                let outcome = namespace
                    .enter_current_thread()
                    .and_then(|()| {
                        tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                    })
                    .map(|runtime| runtime.block_on(job()));
                let _ = sender.send(outcome);
            })
            .context("starting a thread in the cluster network")?;
        Ok(receiver
            .await
            .context("the job in the cluster network panicked")??)
    }

    /// Stops the nodes (killing every Pod process) and the API server now; dropping does
    /// the same.
    pub fn stop(&self) {
        if let Some(cert_manager) = &self.cert_manager {
            cert_manager.stop();
        }
        if let Some(cluster) = &self.cluster {
            cluster.stop();
        }
        match &self.api {
            Backend::Sandbox(api) => api.stop(),
            Backend::Kubernetes(control_plane) => control_plane.stop(),
        }
    }
}

async fn config_for(kubeconfig_text: &str) -> anyhow::Result<kube::Config> {
    let parsed = kube::config::Kubeconfig::from_yaml(kubeconfig_text)?;
    Ok(
        kube::Config::from_custom_kubeconfig(parsed, &kube::config::KubeConfigOptions::default())
            .await?,
    )
}

async fn client_for(kubeconfig_text: &str) -> anyhow::Result<kube::Client> {
    Ok(crate::kube_client::client_for(
        config_for(kubeconfig_text).await?,
    )?)
}

/// The nodes' names, `node-1`..., and the zone of each.
fn node_names(count: usize) -> (Vec<String>, std::collections::BTreeMap<String, String>) {
    let nodes: Vec<String> = (1..=count).map(|index| format!("node-{index}")).collect();
    let zones = nodes
        .iter()
        .enumerate()
        .map(|(index, name)| (name.clone(), zone_of(index + 1)))
        .collect();
    (nodes, zones)
}

fn start_cert_manager(
    options: &SandboxOptions,
    client: &kube::Client,
) -> Option<CertManagerHandle> {
    options.cert_manager.clone().map(|cert_manager| {
        let time_scale = options
            .cluster
            .as_ref()
            .map_or(TimeScale::REAL, |c| c.time_scale);
        crate::certmanager::start(client.clone(), cert_manager, time_scale)
    })
}

/// Waits until every node is Ready and carries none of the node lifecycle's taints (a node
/// that registered a moment ago is tainted `not-ready` until the controller-manager sees it
/// Ready), so the first Pods schedule at once.
async fn wait_nodes_ready(client: &kube::Client, nodes: &[String]) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Node;
    let api: kube::Api<Node> = kube::Api::all(client.clone());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let mut waiting = Vec::new();
        for name in nodes {
            let node = api.get_opt(name).await?;
            let ready = node.as_ref().is_some_and(|node| {
                let status = node.status.as_ref();
                let ready = status
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                    .is_some_and(|c| c.status == "True");
                let tainted = node
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|taints| {
                        taints
                            .iter()
                            .any(|t| t.key.starts_with("node.kubernetes.io/"))
                    });
                ready && !tainted
            });
            if !ready {
                waiting.push(name.clone());
            }
        }
        if waiting.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "nodes {waiting:?} were not Ready and untainted within 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// A Node object, Ready, labelled the way the scheduler and topology spread read it.
fn create_node(server: &ApiServer, name: &str, zone: &str) -> anyhow::Result<()> {
    let now = crate::apiserver::objects::metadata::now();
    let node = json!({
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": zone,
        }},
        "spec": {},
    });
    create_builtin(server, "", "nodes", "", node)?;
    let kind = server
        .registry
        .get("", "nodes")
        .context("nodes are not served")?;
    let capacity =
        json!({"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    crate::apiserver::objects::update_with(
        server,
        &kind,
        "v1",
        "",
        name,
        Some("status"),
        &crate::apiserver::objects::WriteOptions::internal("kube-sandbox"),
        &mut |current| {
            let mut updated = current.clone();
            updated["status"] = json!({
                "capacity": capacity,
                "allocatable": capacity,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": now, "lastTransitionTime": now}],
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
                "nodeInfo": {"kubeletVersion": "v1.32.0-sandbox", "operatingSystem": "linux", "architecture": "amd64",
                    "containerRuntimeVersion": "sandbox://0.1", "kernelVersion": "", "osImage": "kube-sandbox",
                    "kubeProxyVersion": "", "machineID": "", "systemUUID": "", "bootID": ""},
            });
            Ok(updated)
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_node_has_a_zone_of_its_own() {
        assert_eq!(super::zone_of(1), "zone-a");
        assert_eq!(super::zone_of(26), "zone-z");
        assert_eq!(super::zone_of(27), "zone-27");
    }
}
