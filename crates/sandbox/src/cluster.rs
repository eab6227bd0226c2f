//! The nodes of a sandbox: its cluster network (state in the sandbox's directory), the process
//! runtime, one node agent per Node, the scheduler and controllers, and the control socket that
//! `kube-sandbox fault` talks to. The API server is reachable from Pods as the `kubernetes`
//! Service, and inside the cluster network on the same loopback address and port as outside,
//! so `DIR/kubeconfig` works from `kube-sandbox exec`.

use std::collections::BTreeMap;
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
use crate::kubernetes::pki::ClusterCa;
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
    /// The sandbox's own scheduler and controllers (`None` with a real control plane).
    control_plane: Option<ControlPlaneHandle>,
    pub network: Arc<ClusterNetwork>,
    pub runtime: ContainerRuntime,
}

/// The API server the nodes join.
pub(crate) enum ClusterApi<'a> {
    /// The sandbox's own, in this process.
    Sandbox(&'a RunningApiServer),
    /// A real control plane running in `network` (created first, as the control plane runs
    /// inside it), whose CA signs the kubelets' serving certificates.
    Kubernetes {
        network: Arc<ClusterNetwork>,
        ca: Arc<ClusterCa>,
    },
}

impl RunningCluster {
    pub async fn start(
        api: ClusterApi<'_>,
        client: kube::Client,
        dir: &Path,
        nodes: Vec<String>,
        zones: BTreeMap<String, String>,
        options: &ClusterOptions,
    ) -> anyhow::Result<Self> {
        let network = match &api {
            ClusterApi::Kubernetes { network, .. } => network.clone(),
            ClusterApi::Sandbox(_) => Arc::new(create_network(dir).await?),
        };
        let runtime = ContainerRuntime::new(RuntimeConfig {
            state_root: dir.join("state"),
            images: options.images.clone(),
        })
        .context("starting the process runtime")?;
        // The DNS server's address, as kubeadm reserves it for the kube-dns Service.
        let dns = network.config().dns_server.to_string();
        let kube_dns = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": "kube-system",
                         "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
            "spec": {"clusterIP": dns, "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP"},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
            ]},
        });
        let control_plane = match &api {
            ClusterApi::Sandbox(api) => {
                // The same loopback address and port inside the cluster network as outside.
                let loopback = SocketAddrV4::new(Ipv4Addr::LOCALHOST, api.address.port());
                network
                    .proxy()
                    .set_service_to_machine(loopback, loopback.into())
                    .await
                    .context("serving the API server inside the cluster network")?;
                create_builtin(&api.server, "", "services", "kube-system", kube_dns)
                    .context("creating the kube-dns Service")?;
                Some(controllers::start(
                    client.clone(),
                    ControlPlaneOptions::default()
                        .time_scale(options.time_scale)
                        .node_monitor_grace_period(options.node_monitor_grace_period)
                        .pod_eviction_timeout(options.pod_eviction_timeout),
                ))
            }
            ClusterApi::Kubernetes { .. } => {
                // kube-controller-manager and kube-scheduler run the controllers; the cluster
                // add-ons a kubeadm cluster has are the sandbox's: its DNS (as CoreDNS, behind
                // kube-dns) and a default StorageClass whose provisioner it is.
                create(&client, "", "services", Some("kube-system"), kube_dns)
                    .await
                    .context("creating the kube-dns Service")?;
                create(
                    &client,
                    "storage.k8s.io",
                    "storageclasses",
                    None,
                    json!({
                        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                        "metadata": {"name": "standard", "annotations": {
                            crate::apiserver::objects::claims::DEFAULT_CLASS_ANNOTATION: "true"}},
                        "provisioner": crate::kubelet::claims::PROVISIONER,
                        "reclaimPolicy": "Delete",
                        "volumeBindingMode": "Immediate",
                        "allowVolumeExpansion": true,
                    }),
                )
                .await
                .context("creating the default StorageClass")?;
                None
            }
        };
        let mut config = KubeletConfig::new(client, runtime.clone(), network.clone(), nodes);
        config.time_scale = options.time_scale;
        config.shutdown_grace_period = options.shutdown_grace_period;
        config.zones = zones;
        if let ClusterApi::Kubernetes { ca, .. } = &api {
            config.control_plane_ca = Some(ca.clone());
        }
        let kubelet = Arc::new(Kubelet::start(config).await?);
        if let ClusterApi::Sandbox(api) = &api {
            api.server.register_pod_logs(kubelet.pod_logs());
            api.server.register_pod_streams(kubelet.pod_streams());
        }
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
        if let Some(control_plane) = &self.control_plane {
            control_plane.stop();
        }
        self.kubelet.stop();
    }
}

impl Drop for RunningCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The cluster network of a sandbox, its state in `dir`.
pub(crate) async fn create_network(dir: &Path) -> anyhow::Result<ClusterNetwork> {
    ClusterNetwork::create(ClusterNetworkConfig::new(dir))
        .await
        .context("creating the cluster network (kube-sandbox runs Pods as root)")
}

/// Creates a built-in object through the API (the real control plane's add-ons), leaving one
/// that exists as it is.
async fn create(
    client: &kube::Client,
    group: &str,
    plural: &str,
    namespace: Option<&str>,
    object: serde_json::Value,
) -> anyhow::Result<()> {
    let version = if group.is_empty() {
        "v1".to_string()
    } else {
        format!("{group}/v1")
    };
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let resource = kube::discovery::ApiResource {
        group: group.to_string(),
        version: "v1".into(),
        api_version: version,
        kind,
        plural: plural.to_string(),
    };
    let api: kube::Api<kube::api::DynamicObject> = match namespace {
        Some(namespace) => kube::Api::namespaced_with(client.clone(), namespace, &resource),
        None => kube::Api::all_with(client.clone(), &resource),
    };
    let object: kube::api::DynamicObject = serde_json::from_value(object)?;
    match api.create(&kube::api::PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error.into()),
    }
}
