//! The nodes of a sandbox: its cluster network (state in the sandbox's directory), the process
//! runtime, one node agent per Node, the scheduler and controllers, and the control socket that
//! `kube-sandbox fault` talks to. The API server is reachable from Pods as the `kubernetes`
//! Service, and inside the cluster network on the same loopback address and port as outside,
//! so `DIR/kubeconfig` works from `kube-sandbox exec`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;

use crate::apiserver::RunningApiServer;
use crate::apiserver::bootstrap::create_builtin;
use crate::controllers::{self, ControlPlaneHandle, ControlPlaneOptions, TimeScale};
use crate::kubelet::{Kubelet, KubeletConfig};
use crate::network::{ClusterNetwork, ClusterNetworkConfig};
use crate::runtime::{ContainerRuntime, ImageMap, RuntimeConfig};

/// How the nodes of a sandbox run.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Images to host binaries; the user's rules come first, then the built-in etcd ones.
    pub images: ImageMap,
    /// Shortens the control plane's and the node agents' waits: node monitor grace period and
    /// eviction timeout, Job and Deployment timers, CrashLoopBackOff and image pull back-off,
    /// Lease renewals (see [`TimeScale`]). Probe periods and grace periods are not scaled.
    pub time_scale: TimeScale,
    /// How long a silent node keeps its Ready condition (`--node-monitor-grace-period`, 50 s).
    pub node_monitor_grace_period: Duration,
    /// How long Pods without their own tolerations stay on a NotReady or unreachable node
    /// before they are evicted (300 s).
    pub pod_eviction_timeout: Duration,
    /// The most a graceful node shutdown gives each Pod (`shutdownGracePeriod`, 30 s).
    pub shutdown_grace_period: Duration,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            images: ImageMap::builtin(),
            time_scale: TimeScale::REAL,
            node_monitor_grace_period: Duration::from_secs(50),
            pod_eviction_timeout: Duration::from_secs(300),
            shutdown_grace_period: Duration::from_secs(30),
        }
    }
}

/// The running nodes of a sandbox. Dropping it kills every Pod process at once.
pub(crate) struct RunningCluster {
    pub kubelet: Arc<Kubelet>,
    control_socket: crate::control::ControlSocket,
    control_plane: ControlPlaneHandle,
    pub network: Arc<ClusterNetwork>,
    pub runtime: ContainerRuntime,
}

impl RunningCluster {
    pub async fn start(
        api: &RunningApiServer,
        client: kube::Client,
        dir: &Path,
        nodes: Vec<String>,
        options: &ClusterOptions,
    ) -> anyhow::Result<Self> {
        let network = Arc::new(
            ClusterNetwork::create(ClusterNetworkConfig::new(dir))
                .await
                .context("creating the cluster network (kube-sandbox runs Pods as root)")?,
        );
        let runtime = ContainerRuntime::new(RuntimeConfig {
            state_root: dir.join("state"),
            images: options.images.clone(),
        })
        .context("starting the process runtime")?;
        // The same loopback address and port inside the cluster network as outside.
        let loopback = SocketAddrV4::new(Ipv4Addr::LOCALHOST, api.address.port());
        network
            .proxy()
            .set_service_to_machine(loopback, loopback.into())
            .await
            .context("serving the API server inside the cluster network")?;
        // The DNS server's address, as kubeadm reserves it for the kube-dns Service.
        let dns = network.config().dns_server.to_string();
        create_builtin(
            &api.server,
            "",
            "services",
            "kube-system",
            json!({
                "metadata": {"name": "kube-dns", "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
                "spec": {"clusterIP": dns, "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                ]},
            }),
        )
        .context("creating the kube-dns Service")?;
        let control_plane = controllers::start(
            client.clone(),
            ControlPlaneOptions::default()
                .time_scale(options.time_scale)
                .node_monitor_grace_period(options.node_monitor_grace_period)
                .pod_eviction_timeout(options.pod_eviction_timeout),
        );
        let mut config = KubeletConfig::new(client, runtime.clone(), network.clone(), nodes);
        config.time_scale = options.time_scale;
        config.shutdown_grace_period = options.shutdown_grace_period;
        let kubelet = Arc::new(Kubelet::start(config).await?);
        api.server.register_pod_logs(kubelet.pod_logs());
        api.server.register_pod_streams(Arc::new(NodeStreams {
            kubelet: kubelet.clone(),
            network: network.clone(),
        }));
        let control_socket =
            crate::control::serve(&dir.join(crate::control::SOCKET), kubelet.clone())
                .context("opening the control socket")?;
        Ok(Self {
            kubelet,
            control_socket,
            control_plane,
            network,
            runtime,
        })
    }

    pub fn stop(&self) {
        self.control_socket.stop();
        self.control_plane.stop();
        self.kubelet.stop();
    }
}

impl Drop for RunningCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The nodes' side of `pods/exec` (a command joined to the container, as the kubelet runs it)
/// and `pods/portforward` (a connection from inside the cluster network to the Pod's IP).
struct NodeStreams {
    kubelet: Arc<Kubelet>,
    network: Arc<ClusterNetwork>,
}

#[async_trait::async_trait]
impl crate::apiserver::PodStreams for NodeStreams {
    fn exec_command(
        &self,
        request: &crate::apiserver::ExecRequest,
    ) -> Result<std::process::Command, String> {
        self.kubelet
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
        self.network.connect(address).await
    }
}
