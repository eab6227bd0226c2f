//! A Pod's place in the cluster network: its own network namespace, joined to the bridge by a
//! veth pair, with an address from the Pod range; and the faults tests inflict on it.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use super::delay::{DelayQueue, DelaySpec};
use super::filter::{self, Filters};
use super::netns::{NetNamespace, ip_batch, ip_batch_blocking, namespaced_command};
use super::{ClusterNetworkInner, NetworkError};

/// The network of one Pod. Dropping it removes the veth pair and releases the address; the
/// namespace itself lives on while a process of the Pod is still inside it.
pub struct PodNetwork {
    network: Arc<ClusterNetworkInner>,
    namespace: Arc<NetNamespace>,
    ip: Ipv4Addr,
    host_link: String,
    /// The bridge its veth is on ([`ClusterNetworkInner::join_bridge`]).
    bridge: usize,
    /// The Pod's packet filters (cuts, and the impairment where netem is missing).
    filters: tokio::sync::Mutex<FilterState>,
}

#[derive(Default)]
struct FilterState {
    filters: Filters,
    /// The userspace delay, while an impairment with a delay stands in for netem.
    delay: Option<DelayQueue>,
    /// The impairment is netem's (`tc qdisc ... netem` worked).
    netem: bool,
}

/// Packet impairment on a Pod's link (needs `tc qdisc ... netem` in the kernel).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Impairment {
    pub delay: Duration,
    pub jitter: Duration,
    /// Percentage of packets lost, 0.0..=100.0.
    pub loss_percent: f64,
}

impl PodNetwork {
    pub(crate) async fn attach(network: Arc<ClusterNetworkInner>) -> Result<Self, NetworkError> {
        let ip = network.allocate_pod_ip()?;
        let bridge = match network.join_bridge().await {
            Ok(bridge) => bridge,
            Err(error) => {
                network.release_pod_ip(ip);
                return Err(error);
            }
        };
        match Self::wire(&network, ip, bridge).await {
            Ok((namespace, host_link)) => Ok(Self {
                network,
                namespace,
                ip,
                host_link,
                bridge,
                filters: Default::default(),
            }),
            Err(error) => {
                network.leave_bridge(bridge);
                network.release_pod_ip(ip);
                Err(error)
            }
        }
    }

    async fn wire(
        network: &ClusterNetworkInner,
        ip: Ipv4Addr,
        bridge: usize,
    ) -> Result<(Arc<NetNamespace>, String), NetworkError> {
        let namespace = Arc::new(NetNamespace::create().map_err(NetworkError::Namespace)?);
        let host_link = network.next_link_name();
        let range = network.config.pod_cidr;
        ip_batch(
            &network.namespace,
            &[
                // The Pod's MAC follows its address, so a later Pod given the same address
                // is reached through the ARP entries its predecessor left behind.
                format!(
                    "link add {host_link} type veth peer name eth0 address {} netns {}",
                    super::mac_for(ip),
                    namespace.proc_path()
                ),
                format!(
                    "link set {host_link} master {}",
                    network.bridge_name(bridge)
                ),
                format!("link set {host_link} up"),
            ],
        )
        .await?;
        let configured = ip_batch(
            &namespace,
            &[
                "link set lo up".to_string(),
                format!("addr add {ip}/{} dev eth0", range.prefix_len()),
                "link set eth0 up".to_string(),
                format!("route add default via {}", range.gateway()),
            ],
        )
        .await;
        if let Err(error) = configured {
            let _ = ip_batch(&network.namespace, &[format!("link del {host_link}")]).await;
            return Err(error);
        }
        Ok((namespace, host_link))
    }

    /// The Pod's address (`status.podIP`).
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// The namespace the Pod's containers join.
    pub fn namespace(&self) -> Arc<NetNamespace> {
        self.namespace.clone()
    }

    /// The host side of the veth pair, on the bridge.
    pub fn host_link(&self) -> &str {
        &self.host_link
    }

    /// Cuts the Pod off the network (`up == false`) or heals it: its veth goes down or up.
    /// Connections are not reset; packets are dropped until the link is up again.
    pub async fn set_link_up(&self, up: bool) -> Result<(), NetworkError> {
        let state = if up { "up" } else { "down" };
        ip_batch(
            &self.network.namespace,
            &[format!("link set {} {state}", self.host_link)],
        )
        .await
    }

    /// Drops every packet between this Pod and `peer` (both ways, as the peer's replies have no
    /// route back): a partition between two Pods, while both still reach everyone else.
    pub async fn block_peer(&self, peer: Ipv4Addr) -> Result<(), NetworkError> {
        ip_batch(
            &self.namespace,
            &[format!("route replace blackhole {peer}/32")],
        )
        .await
    }

    pub async fn unblock_peer(&self, peer: Ipv4Addr) -> Result<(), NetworkError> {
        ip_batch(&self.namespace, &[format!("route del blackhole {peer}/32")]).await
    }

    /// Drops every packet between this Pod and `peer`, both ways, with packet filters in the
    /// Pod's namespace: connections hang and time out as across a real partition (where
    /// [`PodNetwork::block_peer`] makes them fail at once). Idempotent.
    pub async fn cut_from(&self, peer: Ipv4Addr) -> Result<(), NetworkError> {
        self.change_filters(|f| {
            f.cut.insert(peer);
        })
        .await
    }

    /// Undoes [`PodNetwork::cut_from`]. Idempotent.
    pub async fn uncut_from(&self, peer: Ipv4Addr) -> Result<(), NetworkError> {
        self.change_filters(|f| {
            f.cut.remove(&peer);
        })
        .await
    }

    /// The peers this Pod is cut from.
    pub async fn cut_peers(&self) -> Vec<Ipv4Addr> {
        self.filters
            .lock()
            .await
            .filters
            .cut
            .iter()
            .copied()
            .collect()
    }

    async fn change_filters(&self, change: impl FnOnce(&mut Filters)) -> Result<(), NetworkError> {
        let mut state = self.filters.lock().await;
        let mut wanted = state.filters.clone();
        change(&mut wanted);
        if wanted == state.filters {
            return Ok(());
        }
        filter::apply(&self.namespace, &wanted).await?;
        wanted.hooked = true;
        state.filters = wanted;
        Ok(())
    }

    /// Delays or drops packets leaving the Pod towards the bridge: with `tc netem` where the
    /// kernel has it; otherwise with packet filters (a random drop for the loss, and each packet
    /// held in a userspace queue for `delay ± jitter`, in order, see `network::delay`).
    ///
    /// Fails with [`NetworkError::Unsupported`] where neither works (no netem, and no
    /// `iptables` or `nfnetlink_queue`).
    pub async fn set_impairment(&self, impairment: Impairment) -> Result<(), NetworkError> {
        let mut args = vec![
            "qdisc".to_string(),
            "replace".into(),
            "dev".into(),
            "eth0".into(),
            "root".into(),
            "netem".into(),
        ];
        if !impairment.delay.is_zero() {
            args.extend([
                "delay".into(),
                format!("{}us", impairment.delay.as_micros()),
            ]);
            if !impairment.jitter.is_zero() {
                args.push(format!("{}us", impairment.jitter.as_micros()));
            }
        }
        if impairment.loss_percent > 0.0 {
            args.extend(["loss".into(), format!("{}%", impairment.loss_percent)]);
        }
        match self.tc(&args).await {
            Ok(()) => {
                let mut state = self.filters.lock().await;
                state.netem = true;
                drop(state);
                // A previous impairment by filters goes.
                self.filtered_impairment(None).await
            }
            Err(NetworkError::Unsupported(netem)) => self
                .filtered_impairment(Some(impairment))
                .await
                .map_err(|error| match error {
                    NetworkError::Unsupported(why) => {
                        NetworkError::Unsupported(format!("{netem}; and {why}"))
                    }
                    other => other,
                }),
            Err(other) => Err(other),
        }
    }

    /// Removes the impairment, whichever way it was made.
    pub async fn clear_impairment(&self) -> Result<(), NetworkError> {
        let netem = std::mem::take(&mut self.filters.lock().await.netem);
        if netem {
            self.tc(&["qdisc", "del", "dev", "eth0", "root"].map(String::from))
                .await?;
        }
        self.filtered_impairment(None).await
    }

    /// The impairment by packet filters (`None`: none). The delay queue is bound before the
    /// rules send packets to it, and the rules go before it stops.
    async fn filtered_impairment(
        &self,
        impairment: Option<Impairment>,
    ) -> Result<(), NetworkError> {
        let mut state = self.filters.lock().await;
        let delay = impairment
            .filter(|i| !i.delay.is_zero())
            .map(|i| DelaySpec {
                delay: i.delay,
                jitter: i.jitter,
            });
        let mut wanted = state.filters.clone();
        wanted.loss = impairment.map_or(0.0, |i| (i.loss_percent / 100.0).clamp(0.0, 1.0));
        wanted.delay = delay.is_some();
        if wanted == state.filters && delay.is_none() {
            return Ok(());
        }
        let old_queue = state.delay.take();
        if let Some(spec) = delay {
            // Restarted with the new wait (the old one first releases what it holds).
            drop(old_queue);
            let namespace = self.namespace.clone();
            let queue = tokio::task::spawn_blocking(move || DelayQueue::start(namespace, spec))
                .await
                .map_err(|e| NetworkError::Io(std::io::Error::other(e)))?
                .map_err(|error| {
                    NetworkError::Unsupported(format!(
                        "the kernel's packet queue to userspace (nfnetlink_queue) is not usable: {error}"
                    ))
                })?;
            state.delay = Some(queue);
            filter::apply(&self.namespace, &wanted).await?;
        } else {
            filter::apply(&self.namespace, &wanted).await?;
            if let Some(queue) = old_queue {
                let _ = tokio::task::spawn_blocking(move || drop(queue)).await;
            }
        }
        wanted.hooked = true;
        state.filters = wanted;
        Ok(())
    }

    async fn tc(&self, args: &[String]) -> Result<(), NetworkError> {
        let mut command = namespaced_command(&self.namespace, "tc");
        command.args(args);
        let output = tokio::process::Command::from(command)
            .output()
            .await
            .map_err(NetworkError::IpCommand)?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        if stderr.contains("qdisc kind is unknown") {
            return Err(NetworkError::Unsupported(
                "this kernel has no netem queueing discipline (CONFIG_NET_SCH_NETEM); \
                 use set_link_up(false) or block_peer for partitions"
                    .into(),
            ));
        }
        Err(NetworkError::IpFailed {
            commands: format!("tc {}", args.join(" ")),
            stderr,
        })
    }
}

impl Drop for PodNetwork {
    fn drop(&mut self) {
        // Deleting one end deletes both. Done at once, so a dropped Pod is off the bridge
        // before the next one takes its place.
        let deleted = ip_batch_blocking(
            &self.network.namespace,
            &[format!("link del {}", self.host_link)],
        );
        if let Err(error) = deleted {
            tracing::debug!(link = %self.host_link, %error, "veth of a dropped Pod was already gone");
        }
        self.network.leave_bridge(self.bridge);
        self.network.release_pod_ip(self.ip);
    }
}
