//! The cluster network: its own network namespace, a bridge, Pod addresses, DNS and a Service proxy.
//!
//! ```text
//!   cluster network namespace (held by a descriptor of this process)
//!   ┌──────────────────────────────────────────────────────────────────┐
//!   │ lo: local route for the Service range (ClusterIPs, DNS 10.96.0.10)│
//!   │ cbr0 10.244.0.1/16 ── vpN ═══ eth0 10.244.x.y (Pod namespace)     │
//!   │ DNS server, Service proxy, sockets of `connect`/`bind_*`          │
//!   └──────────────────────────────────────────────────────────────────┘
//! ```
//!
//! The machine's own network namespace is never changed: every `ip` and `tc` command runs in a
//! child that joined a namespace this module created, and only dedicated threads enter one.
//! When this process dies its descriptors close and the kernel removes the namespaces, bridge
//! and veth pairs (Pod namespaces go with their last process).

mod cidr;
pub mod delay;
pub mod dns;
mod exec;
pub mod filter;
mod netns;
mod pod;
mod proxy;
mod sockets;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hickory_server::Server;

pub use cidr::{CidrParseError, Ipam, IpamError, Ipv4Cidr, mac_for};
pub use dns::ClusterDns;
pub use exec::ClusterNetworkInfo;
pub use netns::NetNamespace;
pub use pod::{Impairment, PodNetwork};
pub use proxy::ServiceProxy;
pub use sockets::SocketFactory;

use netns::{NetnsWorker, ip_batch, write_atomically};

/// Errors of the cluster network.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("could not create or enter a network namespace (this needs root): {0}")]
    Namespace(#[source] io::Error),
    #[error("could not run ip/tc (is iproute2 installed?): {0}")]
    IpCommand(#[source] io::Error),
    #[error("`{commands}` failed inside the cluster network: {stderr}")]
    IpFailed { commands: String, stderr: String },
    #[error("{0}")]
    Ipam(#[from] IpamError),
    #[error("{0}")]
    Unsupported(String),
    #[error("no running cluster network at {path}: {reason}")]
    NoRunningNetwork { path: PathBuf, reason: String },
    #[error("invalid cluster network configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Addresses and names of a cluster network.
#[derive(Clone, Debug)]
pub struct ClusterNetworkConfig {
    /// Pod addresses; the first host address is the bridge (the Pods' gateway).
    pub pod_cidr: Ipv4Cidr,
    /// ClusterIPs; the whole range is local to the cluster network.
    pub service_cidr: Ipv4Cidr,
    /// The cluster DNS address, inside `service_cidr` (10.96.0.10 by default).
    pub dns_server: Ipv4Addr,
    pub cluster_domain: String,
    pub bridge_name: String,
    /// Pods joined to one bridge before the next bridge is made. A Linux bridge has at most
    /// 1,023 ports (`BR_MAX_PORTS`), so a network with more Pods than that chains bridges:
    /// each further bridge (`sbr1`, `sbr2`...) joins the first through a veth pair of its own
    /// and shares its Pod range and gateway, one layer-2 segment as before. 1,000 by default.
    pub pods_per_bridge: usize,
    /// Where the network writes `resolv.conf` and [`ClusterNetworkInfo::FILE_NAME`]; it must exist.
    pub state_dir: PathBuf,
}

impl ClusterNetworkConfig {
    /// The usual kubeadm ranges: Pods 10.244.0.0/16, Services 10.96.0.0/12, DNS 10.96.0.10.
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        Self {
            pod_cidr: Ipv4Cidr::new(Ipv4Addr::new(10, 244, 0, 0), 16).expect("valid range"),
            service_cidr: Ipv4Cidr::new(Ipv4Addr::new(10, 96, 0, 0), 12).expect("valid range"),
            dns_server: Ipv4Addr::new(10, 96, 0, 10),
            cluster_domain: "cluster.local".into(),
            bridge_name: "cbr0".into(),
            pods_per_bridge: 1000,
            state_dir: state_dir.into(),
        }
    }

    fn validate(&self) -> Result<(), NetworkError> {
        let problem = if !self.service_cidr.contains(self.dns_server) {
            Some(format!(
                "DNS server {} is outside the Service range {}",
                self.dns_server, self.service_cidr
            ))
        } else if self.pod_cidr.contains(self.service_cidr.network())
            || self.service_cidr.contains(self.pod_cidr.network())
        {
            Some(format!(
                "Pod range {} overlaps Service range {}",
                self.pod_cidr, self.service_cidr
            ))
        } else if self.bridge_name.is_empty() || self.bridge_name.len() > 15 {
            Some(format!(
                "bridge name {:?} must have 1 to 15 characters",
                self.bridge_name
            ))
        } else if !(1..=MAX_PODS_PER_BRIDGE).contains(&self.pods_per_bridge) {
            Some(format!(
                "pods per bridge {} must be 1 to {MAX_PODS_PER_BRIDGE} (a bridge has at most \
                 1,023 ports, and the first also holds the links to the others)",
                self.pods_per_bridge
            ))
        } else if !self.state_dir.is_dir() {
            Some(format!(
                "state directory {} does not exist",
                self.state_dir.display()
            ))
        } else {
            None
        };
        problem.map_or(Ok(()), |problem| Err(NetworkError::Config(problem)))
    }
}

/// The most Pods [`ClusterNetworkConfig::pods_per_bridge`] allows: the first bridge holds its
/// Pods and one link to every further bridge within the kernel's 1,023 ports.
pub const MAX_PODS_PER_BRIDGE: usize = 1000;

/// The state Pod networks share with the cluster network.
pub(crate) struct ClusterNetworkInner {
    config: ClusterNetworkConfig,
    namespace: Arc<NetNamespace>,
    pod_ips: Mutex<Ipam>,
    links: AtomicU64,
    /// Pods on each bridge, the first bridge at 0.
    bridge_pods: Mutex<Vec<usize>>,
    /// How many bridges exist; held while a further one is made.
    bridges_made: tokio::sync::Mutex<usize>,
}

impl ClusterNetworkInner {
    /// The name of bridge `index`: the configured one first, then `sbr1`, `sbr2`...
    fn bridge_name(&self, index: usize) -> String {
        if index == 0 {
            self.config.bridge_name.clone()
        } else {
            format!("sbr{index}")
        }
    }

    /// A place for one more Pod: the first bridge with room, made (and joined to the first)
    /// when every bridge is full. Its index; give it back with [`Self::leave_bridge`].
    async fn join_bridge(&self) -> Result<usize, NetworkError> {
        let index = {
            let mut pods = self.bridge_pods.lock().expect("bridge lock");
            let index = pods
                .iter()
                .position(|n| *n < self.config.pods_per_bridge)
                .unwrap_or_else(|| {
                    pods.push(0);
                    pods.len() - 1
                });
            pods[index] += 1;
            index
        };
        let mut made = self.bridges_made.lock().await;
        while *made <= index {
            let n = *made;
            let (bridge, first) = (self.bridge_name(n), self.bridge_name(0));
            let made_one = ip_batch(
                &self.namespace,
                &[
                    format!("link add {bridge} type bridge"),
                    format!("link set {bridge} up"),
                    format!("link add sbu{n} type veth peer name sbd{n}"),
                    format!("link set sbu{n} master {first}"),
                    format!("link set sbd{n} master {bridge}"),
                    format!("link set sbu{n} up"),
                    format!("link set sbd{n} up"),
                ],
            )
            .await;
            if let Err(error) = made_one {
                // Whatever the batch made before it failed goes, so the next Pod tries afresh.
                for link in [bridge, format!("sbu{n}")] {
                    let _ = ip_batch(&self.namespace, &[format!("link del {link}")]).await;
                }
                drop(made);
                self.leave_bridge(index);
                return Err(error);
            }
            *made += 1;
        }
        Ok(index)
    }

    fn leave_bridge(&self, index: usize) {
        self.bridge_pods.lock().expect("bridge lock")[index] -= 1;
    }

    fn allocate_pod_ip(&self) -> Result<Ipv4Addr, IpamError> {
        self.pod_ips.lock().expect("pod IPAM lock").allocate()
    }

    fn release_pod_ip(&self, ip: Ipv4Addr) {
        self.pod_ips.lock().expect("pod IPAM lock").release(ip);
    }

    fn next_link_name(&self) -> String {
        format!("vp{}", self.links.fetch_add(1, Ordering::Relaxed))
    }
}

/// One cluster network. Dropping it stops its DNS server and proxy and lets the kernel remove
/// the namespace once no Pod network refers to it any more.
pub struct ClusterNetwork {
    inner: Arc<ClusterNetworkInner>,
    worker: Arc<NetnsWorker>,
    sockets: SocketFactory,
    dns: ClusterDns,
    dns_server: Mutex<Option<Server<dns::ZoneResponder>>>,
    proxy: ServiceProxy,
    info: ClusterNetworkInfo,
}

impl ClusterNetwork {
    /// Creates the namespace, the bridge, the Service route, the DNS server and the proxy.
    /// Must run inside a tokio runtime, which then serves DNS and the proxy.
    pub async fn create(config: ClusterNetworkConfig) -> Result<Self, NetworkError> {
        config.validate()?;
        let namespace = Arc::new(NetNamespace::create().map_err(NetworkError::Namespace)?);
        let bridge = &config.bridge_name;
        ip_batch(
            &namespace,
            &[
                "link set lo up".to_string(),
                // A fixed MAC: a bridge without one takes the lowest MAC of its ports and
                // changes it whenever a Pod's veth with a lower one comes or the one it took
                // goes. Every Pod's ARP entry for the gateway then points at a MAC nobody
                // answers for, and the Pod is cut off from the API server, DNS and Services
                // until that entry expires (30-60 s): the operator Pod's stalls during churn.
                format!(
                    "link add {bridge} address {} type bridge",
                    mac_for(config.pod_cidr.gateway())
                ),
                format!(
                    "addr add {}/{} dev {bridge}",
                    config.pod_cidr.gateway(),
                    config.pod_cidr.prefix_len()
                ),
                format!("link set {bridge} up"),
                format!("route add local {} dev lo", config.service_cidr),
            ],
        )
        .await?;
        let worker = Arc::new(
            NetnsWorker::start(namespace.clone(), "cluster-network")
                .map_err(NetworkError::Namespace)?,
        );
        let sockets = SocketFactory::new(worker.clone());
        let dns_address = dns::server_address(config.dns_server);
        let udp = sockets.bind_udp(dns_address).await?;
        let tcp = sockets.bind_tcp(dns_address).await?;
        let cluster_dns = ClusterDns::new(&config.cluster_domain);
        let dns_server = cluster_dns.serve(udp, tcp);

        let mut pod_ips = Ipam::new(config.pod_cidr);
        pod_ips.allocate_specific(config.pod_cidr.gateway())?;
        let info = ClusterNetworkInfo {
            netns_path: worker.netns_path().clone(),
            netns_inode: namespace.inode(),
            resolv_conf: config.state_dir.join("resolv.conf"),
            dns_server: config.dns_server,
            pod_cidr: config.pod_cidr,
            service_cidr: config.service_cidr,
            cluster_domain: config.cluster_domain.clone(),
        };
        write_atomically(
            &info.resolv_conf,
            resolv_conf("default", &config.cluster_domain, config.dns_server).as_bytes(),
        )?;
        write_atomically(
            &config.state_dir.join(ClusterNetworkInfo::FILE_NAME),
            serde_json::to_string_pretty(&info)
                .map_err(io::Error::other)?
                .as_bytes(),
        )?;
        Ok(Self {
            inner: Arc::new(ClusterNetworkInner {
                config,
                namespace,
                pod_ips: Mutex::new(pod_ips),
                links: AtomicU64::new(0),
                bridge_pods: Mutex::new(vec![0]),
                bridges_made: tokio::sync::Mutex::new(1),
            }),
            proxy: ServiceProxy::new(sockets.clone()),
            worker,
            sockets,
            dns: cluster_dns,
            dns_server: Mutex::new(Some(dns_server)),
            info,
        })
    }

    pub fn config(&self) -> &ClusterNetworkConfig {
        &self.inner.config
    }

    /// What another process needs to enter this network (also written to the state directory).
    pub fn info(&self) -> &ClusterNetworkInfo {
        &self.info
    }

    /// The cluster network's namespace.
    pub fn namespace(&self) -> Arc<NetNamespace> {
        self.inner.namespace.clone()
    }

    /// The bridge address: the Pods' default gateway, and the source of connections the
    /// sandbox makes into the cluster.
    pub fn gateway(&self) -> Ipv4Addr {
        self.inner.config.pod_cidr.gateway()
    }

    /// The record table of the cluster DNS.
    pub fn dns(&self) -> &ClusterDns {
        &self.dns
    }

    /// The Service proxy.
    pub fn proxy(&self) -> &ServiceProxy {
        &self.proxy
    }

    /// Sockets inside the cluster network, for code anywhere in this process.
    pub fn sockets(&self) -> &SocketFactory {
        &self.sockets
    }

    /// A new Pod namespace joined to a bridge with room (see
    /// [`ClusterNetworkConfig::pods_per_bridge`]), with the next free Pod address.
    pub async fn attach_pod(&self) -> Result<PodNetwork, NetworkError> {
        PodNetwork::attach(self.inner.clone()).await
    }

    /// An address for a node (its `status.addresses`, the `hostIP` of its Pods), on the
    /// bridge so that listeners in the cluster network can use it.
    pub async fn add_node_address(&self) -> Result<Ipv4Addr, NetworkError> {
        let ip = self.inner.allocate_pod_ip()?;
        let added = ip_batch(
            &self.inner.namespace,
            &[format!(
                "addr add {ip}/32 dev {}",
                self.inner.config.bridge_name
            )],
        )
        .await;
        if let Err(error) = added {
            self.inner.release_pod_ip(ip);
            return Err(error);
        }
        Ok(ip)
    }

    /// A TCP connection from inside the cluster network.
    pub async fn connect(&self, address: SocketAddr) -> io::Result<tokio::net::TcpStream> {
        self.sockets.connect(address).await
    }

    /// Resolves `name` through the cluster DNS with the search list of namespace `default`,
    /// so `etcd-0.etcd.default.svc` works as it would from a Pod.
    pub async fn lookup(&self, name: &str) -> io::Result<Vec<Ipv4Addr>> {
        let socket = self
            .sockets
            .bind_udp(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))
            .await?;
        dns::lookup_ipv4(
            &socket,
            dns::server_address(self.inner.config.dns_server),
            name,
            &dns::search_domains("default", &self.inner.config.cluster_domain),
        )
        .await
    }

    /// Resolves `host` (a name or an address) and connects to `port` on its first address.
    pub async fn connect_host(&self, host: &str, port: u16) -> io::Result<tokio::net::TcpStream> {
        let ip = match host.parse::<Ipv4Addr>() {
            Ok(ip) => ip,
            Err(_) => self.lookup(host).await?[0],
        };
        self.connect(SocketAddr::from((ip, port))).await
    }

    /// A command that runs inside the cluster network, resolving names with the cluster DNS.
    pub fn command(
        &self,
        program: impl AsRef<std::ffi::OsStr>,
    ) -> Result<std::process::Command, NetworkError> {
        self.info.command(program)
    }

    /// Runs blocking code on a thread inside the cluster network and returns its result.
    pub fn enter<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> io::Result<R> {
        self.worker.run(job)
    }
}

impl Drop for ClusterNetwork {
    fn drop(&mut self) {
        self.proxy.stop();
        drop(self.dns_server.lock().expect("dns server lock").take());
        self.worker.stop();
        let _ = std::fs::remove_file(
            self.inner
                .config
                .state_dir
                .join(ClusterNetworkInfo::FILE_NAME),
        );
        let _ = std::fs::remove_file(&self.info.resolv_conf);
    }
}

/// `/etc/resolv.conf` of a Pod in `namespace`, as the kubelet writes it for `ClusterFirst`.
pub fn resolv_conf(namespace: &str, cluster_domain: &str, dns_server: Ipv4Addr) -> String {
    format!(
        "search {}\nnameserver {dns_server}\noptions ndots:5\n",
        dns::search_domains(namespace, cluster_domain).join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_points_at_the_cluster_dns() {
        assert_eq!(
            resolv_conf("team-a", "cluster.local", Ipv4Addr::new(10, 96, 0, 10)),
            "search team-a.svc.cluster.local svc.cluster.local cluster.local\n\
             nameserver 10.96.0.10\noptions ndots:5\n"
        );
    }

    #[test]
    fn default_config_is_consistent() {
        let mut config = ClusterNetworkConfig::new(std::env::temp_dir());
        assert!(config.validate().is_ok());
        config.dns_server = Ipv4Addr::new(10, 244, 0, 10);
        assert!(matches!(config.validate(), Err(NetworkError::Config(_))));
    }
}
