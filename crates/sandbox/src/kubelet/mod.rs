//! The node agent: runs the Pods bound to each sandbox node as real processes and reports their
//! status, as a kubelet does, through a `kube::Client` like any other client of the API server.
//!
//! [`Kubelet::start`] runs one agent per node, all sharing one [`ContainerRuntime`] and one
//! [`ClusterNetwork`]:
//! - each agent watches the Pods with `spec.nodeName` = its node and runs a worker per Pod
//!   ([`worker`]): network, volumes (claims, emptyDir, memory, secret, configMap, downwardAPI,
//!   projected with the service-account token from TokenRequest), environment, init containers
//!   then containers, the restart policy with the CrashLoopBackOff back-off scaled by the
//!   [`TimeScale`], startup/liveness/readiness probes, status through `pods/status`, graceful
//!   deletion;
//! - each agent renews its node's Lease in `kube-node-lease` and posts its Ready condition;
//! - one endpoints controller writes Endpoints and keeps the cluster DNS and the Service proxy
//!   in step ([`services`]); one claim controller binds PersistentVolumeClaims to directories;
//! - `pods/log` is served from the Pods' log files ([`Kubelet::pod_logs`]).
//!
//! Faults (kill or freeze a container, crash or shut down a node, wipe or corrupt a claim, cut
//! a Pod off the network) are methods of [`Kubelet`] (see [`faults`]), and so is running a
//! command inside a container ([`Kubelet::exec_in_container`]).
//!
//! Time scale: the CrashLoopBackOff and image pull back-offs (10 s doubling to 5 min) and the
//! Lease renewal (10 s) are multiplied by it; probe periods and grace periods are not (they are
//! the Pod's own numbers).

pub mod backoff;
pub mod claims;
mod context;
pub mod env;
mod exec;
pub mod faults;
mod heartbeat;
mod logs;
mod node;
pub mod pod_dns;
pub mod probes;
pub mod server;
pub mod services;
pub mod status;
pub mod volumes;
mod worker;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use context::Peers;
pub use faults::{Fault, FaultError};
pub use worker::NODE_SHUTDOWN_MESSAGE;

use crate::apiserver::PodLogs;
use crate::controllers::TimeScale;
use crate::kubernetes::pki::ClusterCa;
use crate::network::{ClusterNetwork, NetworkError};
use crate::runtime::ContainerRuntime;
use context::KubeletContext;
use node::NodeAgent;

/// How to run the node agents of a sandbox.
#[derive(Clone)]
pub struct KubeletConfig {
    /// A client with cluster-wide rights (the sandbox's admin client).
    pub client: Client,
    pub runtime: ContainerRuntime,
    pub network: Arc<ClusterNetwork>,
    pub time_scale: TimeScale,
    /// The nodes to run an agent for (their Node objects exist already).
    pub nodes: Vec<String>,
    /// How long a graceful node shutdown gives Pods at most (`shutdownGracePeriod`).
    pub shutdown_grace_period: Duration,
    /// The CA of a real control plane the nodes join ([`crate::kubernetes`]): each node then
    /// registers its Node object, serves its kubelet endpoint ([`server`]), and leaves the
    /// Endpoints of Services and the binding of claims to kube-controller-manager. `None`:
    /// the sandbox's own API server, which reaches the nodes in this process.
    pub control_plane_ca: Option<Arc<ClusterCa>>,
    /// The zone of each node (`topology.kubernetes.io/zone`), for the Node a node registers.
    pub zones: BTreeMap<String, String>,
}

impl KubeletConfig {
    pub fn new(
        client: Client,
        runtime: ContainerRuntime,
        network: Arc<ClusterNetwork>,
        nodes: Vec<String>,
    ) -> Self {
        Self {
            client,
            runtime,
            network,
            time_scale: TimeScale::REAL,
            nodes,
            shutdown_grace_period: Duration::from_secs(30),
            control_plane_ca: None,
            zones: BTreeMap::new(),
        }
    }
}

/// Errors of starting the node agents.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("giving node {node} an address in the cluster network: {source}")]
    NodeAddress {
        node: String,
        #[source]
        source: NetworkError,
    },
}

/// Whether a node's agent runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    Running,
    /// Crashed: processes killed, no heartbeat; Pod objects as they were.
    Crashed,
    /// Shut down gracefully: Pods terminal, no heartbeat.
    ShutDown,
}

enum NodeSlot {
    Running(NodeAgent),
    Stopped(NodeState),
}

/// The node agents of a sandbox. Dropping it kills every Pod process at once.
pub struct Kubelet {
    context: Arc<KubeletContext>,
    token: CancellationToken,
    nodes: Mutex<BTreeMap<String, NodeSlot>>,
    addresses: BTreeMap<String, Ipv4Addr>,
    shutdown_grace_period: Duration,
    tasks: Vec<JoinHandle<()>>,
}

impl Kubelet {
    /// Starts the shared controllers and one agent per node; each node gets an address on the
    /// cluster bridge (its InternalIP and its Pods' `hostIP`).
    pub async fn start(config: KubeletConfig) -> Result<Self, KubeletError> {
        let token = CancellationToken::new();
        let context = KubeletContext::start(&config, &token);
        let real = config.control_plane_ca.is_some();
        let tasks = vec![
            tokio::spawn(services::run(
                config.client.clone(),
                config.network.clone(),
                !real,
                token.clone(),
            )),
            tokio::spawn(claims::run(
                config.client.clone(),
                config.runtime.persistent_volumes().clone(),
                if real {
                    claims::ClaimMode::Provision
                } else {
                    claims::ClaimMode::Bind
                },
                token.clone(),
            )),
        ];
        let mut addresses = BTreeMap::new();
        let mut nodes = BTreeMap::new();
        for name in &config.nodes {
            let ip = match config.network.add_node_address().await {
                Ok(ip) => ip,
                Err(source) => {
                    token.cancel();
                    return Err(KubeletError::NodeAddress {
                        node: name.clone(),
                        source,
                    });
                }
            };
            addresses.insert(name.clone(), ip);
            nodes.insert(
                name.clone(),
                NodeSlot::Running(NodeAgent::start(context.clone(), name, ip, &token).await),
            );
        }
        Ok(Self {
            context,
            token,
            nodes: Mutex::new(nodes),
            addresses,
            shutdown_grace_period: config.shutdown_grace_period,
            tasks,
        })
    }

    /// The source of `pods/log` for the API server.
    pub fn pod_logs(&self) -> Arc<dyn PodLogs> {
        Arc::new(logs::NodeLogs {
            context: self.context.clone(),
        })
    }

    /// The source of `pods/exec` and `pods/portforward` for an API server or a kubelet
    /// endpoint: commands joined to a container, connections from inside the cluster network.
    pub fn pod_streams(&self) -> Arc<dyn crate::apiserver::PodStreams> {
        Arc::new(NodeStreams {
            context: self.context.clone(),
        })
    }

    /// The node names, in order.
    pub fn node_names(&self) -> Vec<String> {
        self.addresses.keys().cloned().collect()
    }

    /// A node's address in the cluster network.
    pub fn node_address(&self, node: &str) -> Option<Ipv4Addr> {
        self.addresses.get(node).copied()
    }

    pub async fn node_state(&self, node: &str) -> Option<NodeState> {
        self.nodes.lock().await.get(node).map(|slot| match slot {
            NodeSlot::Running(_) => NodeState::Running,
            NodeSlot::Stopped(state) => *state,
        })
    }

    /// Stops every agent and kills every Pod process now.
    pub fn stop(&self) {
        self.token.cancel();
        self.tasks.iter().for_each(JoinHandle::abort);
        for entry in self.context.pods.drain() {
            entry.sandbox.kill_all();
        }
    }
}

/// The nodes' side of `pods/exec` (a command joined to the container, as the kubelet runs it)
/// and `pods/portforward` (a connection from inside the cluster network to the Pod's IP).
struct NodeStreams {
    context: Arc<KubeletContext>,
}

#[async_trait::async_trait]
impl crate::apiserver::PodStreams for NodeStreams {
    fn exec_command(
        &self,
        request: &crate::apiserver::ExecRequest,
    ) -> Result<std::process::Command, String> {
        self.context
            .exec_in_container(
                &request.namespace,
                &request.pod,
                Some(&request.container),
                &request.command,
            )
            .map_err(|err| format!("unable to exec in container {}: {err}", request.container))
    }

    async fn connect(
        &self,
        address: std::net::SocketAddr,
    ) -> std::io::Result<tokio::net::TcpStream> {
        self.context.network.connect(address).await
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.stop();
    }
}
