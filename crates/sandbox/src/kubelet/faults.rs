//! Faults, for tests and for users who want to see what a system does under them: a
//! container's process killed with a chosen signal or frozen (a hung member), a node crashed
//! or shut down gracefully and started again, a claim's data wiped or corrupted, a Pod cut
//! off the network, from one peer, or from the Pods of another namespace (or given Pods)
//! both ways, and delay and loss on a Pod's link.

use std::sync::Arc;

use nix::sys::signal::Signal;

use super::context::{Peers, PodEntry};
use super::node::NodeAgent;
use super::{Kubelet, NodeSlot, NodeState};
use crate::network::{Impairment, NetworkError, PodNetwork};
use crate::runtime::{RuntimeError, VolumeError};

/// Why a fault could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error("no node {0} in this sandbox")]
    NoSuchNode(String),
    #[error("node {node} is not running (it is {state:?}); start it first")]
    NodeNotRunning { node: String, state: NodeState },
    #[error("node {0} is already running")]
    NodeRunning(String),
    #[error("no Pod {namespace}/{name} runs on a node of this sandbox")]
    NoSuchPod { namespace: String, name: String },
    #[error("Pod {namespace}/{name} has no container {container} (it has: {existing})")]
    NoSuchContainer {
        namespace: String,
        name: String,
        container: String,
        existing: String,
    },
    #[error("Pod {namespace}/{name} has several containers ({existing}): name one")]
    AmbiguousContainer {
        namespace: String,
        name: String,
        existing: String,
    },
    #[error("Pod {namespace}/{name} has no network of its own (hostNetwork, or it is terminal)")]
    NoPodNetwork { namespace: String, name: String },
    #[error("invalid signal {0:?}: give a name (SIGKILL, TERM) or a number")]
    InvalidSignal(String),
    #[error(
        "this sandbox runs no nodes: start it with SandboxOptions::cluster (or `kube-sandbox up` without --api-only)"
    )]
    NoNodes,
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Volume(#[from] VolumeError),
    #[error(transparent)]
    Network(#[from] NetworkError),
}

impl Kubelet {
    pub(crate) fn pod_entry(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<PodEntry>, FaultError> {
        self.context.pod_entry(namespace, name)
    }

    fn pod_network(&self, namespace: &str, name: &str) -> Result<Arc<PodNetwork>, FaultError> {
        self.pod_entry(namespace, name)?
            .network()
            .ok_or_else(|| FaultError::NoPodNetwork {
                namespace: namespace.into(),
                name: name.into(),
            })
    }

    /// The container named, or the Pod's only container.
    pub(super) fn container_of(
        entry: &PodEntry,
        container: Option<&str>,
    ) -> Result<String, FaultError> {
        let names: Vec<String> = entry
            .sandbox
            .container_statuses()
            .into_iter()
            .map(|s| s.name)
            .collect();
        let existing = names.join(", ");
        match container {
            Some(container) if names.iter().any(|n| n == container) => Ok(container.to_string()),
            Some(container) => Err(FaultError::NoSuchContainer {
                namespace: entry.namespace.clone(),
                name: entry.name.clone(),
                container: container.into(),
                existing,
            }),
            None if names.len() == 1 => Ok(names[0].clone()),
            None => Err(FaultError::AmbiguousContainer {
                namespace: entry.namespace.clone(),
                name: entry.name.clone(),
                existing,
            }),
        }
    }

    /// Sends `signal` to a container's process (PID 1 of its namespace, which ignores
    /// signals it has no handler for, except SIGKILL and SIGSTOP).
    pub fn signal_container(
        &self,
        namespace: &str,
        pod: &str,
        container: Option<&str>,
        signal: Signal,
    ) -> Result<(), FaultError> {
        let entry = self.pod_entry(namespace, pod)?;
        let container = Self::container_of(&entry, container)?;
        Ok(entry.sandbox.signal_container(&container, signal)?)
    }

    /// Freezes a container (SIGSTOP): it keeps its connections but answers nothing.
    pub fn freeze_container(
        &self,
        namespace: &str,
        pod: &str,
        container: Option<&str>,
    ) -> Result<(), FaultError> {
        self.signal_container(namespace, pod, container, Signal::SIGSTOP)
    }

    /// Lets a frozen container run again (SIGCONT).
    pub fn thaw_container(
        &self,
        namespace: &str,
        pod: &str,
        container: Option<&str>,
    ) -> Result<(), FaultError> {
        self.signal_container(namespace, pod, container, Signal::SIGCONT)
    }

    /// Node crash: every process of its Pods killed at once, its Pods cut off the network, its
    /// heartbeat stopped. Pod objects stay as they were until the node lifecycle marks the node
    /// NotReady and evicts them; [`Kubelet::start_node`] brings it back.
    pub async fn crash_node(&self, node: &str) -> Result<(), FaultError> {
        let agent = self.take_running(node, NodeState::Crashed).await?;
        agent.crash().await;
        Ok(())
    }

    /// Graceful node shutdown: the node goes NotReady, every Pod gets SIGTERM and its grace
    /// period (at most the shutdown grace period), and is left terminal (`Failed` with reason
    /// `Terminated`, or `Succeeded` when it exited 0), never restarted.
    pub async fn shutdown_node(&self, node: &str) -> Result<(), FaultError> {
        let agent = self.take_running(node, NodeState::ShutDown).await?;
        agent.shut_down(self.shutdown_grace_period).await;
        Ok(())
    }

    async fn take_running(&self, node: &str, next: NodeState) -> Result<NodeAgent, FaultError> {
        let mut nodes = self.nodes.lock().await;
        let slot = nodes
            .get_mut(node)
            .ok_or_else(|| FaultError::NoSuchNode(node.into()))?;
        match std::mem::replace(slot, NodeSlot::Stopped(next)) {
            NodeSlot::Running(agent) => Ok(agent),
            NodeSlot::Stopped(state) => {
                *slot = NodeSlot::Stopped(state);
                Err(FaultError::NodeNotRunning {
                    node: node.into(),
                    state,
                })
            }
        }
    }

    /// Starts a crashed or shut-down node again: Ready, and its Pods that are not terminal run
    /// again (restarted by their restart policy, so `restartCount` goes up).
    pub async fn start_node(&self, node: &str) -> Result<(), FaultError> {
        let mut nodes = self.nodes.lock().await;
        let slot = nodes
            .get_mut(node)
            .ok_or_else(|| FaultError::NoSuchNode(node.into()))?;
        if matches!(slot, NodeSlot::Running(_)) {
            return Err(FaultError::NodeRunning(node.into()));
        }
        let ip = self.addresses[node];
        *slot =
            NodeSlot::Running(NodeAgent::start(self.context.clone(), node, ip, &self.token).await);
        Ok(())
    }

    /// The disk behind a claim is replaced: the claim stays bound, its directory empty.
    pub fn wipe_claim(&self, namespace: &str, claim: &str) -> Result<(), FaultError> {
        Ok(self
            .context
            .runtime
            .persistent_volumes()
            .wipe(namespace, claim)?)
    }

    /// The directory behind a bound claim (what a Pod mounting it sees), for tests to read.
    pub fn claim_dir(
        &self,
        namespace: &str,
        claim: &str,
    ) -> Result<std::path::PathBuf, FaultError> {
        Ok(self
            .context
            .runtime
            .persistent_volumes()
            .existing(namespace, claim)?)
    }

    /// Bit rot in a claim's files; returns how many files changed.
    pub fn corrupt_claim(&self, namespace: &str, claim: &str) -> Result<usize, FaultError> {
        Ok(self
            .context
            .runtime
            .persistent_volumes()
            .corrupt(namespace, claim)?)
    }

    /// Cuts a Pod off the network (its link goes down; packets are dropped, connections hang)
    /// or heals it.
    pub async fn set_pod_connected(
        &self,
        namespace: &str,
        pod: &str,
        connected: bool,
    ) -> Result<(), FaultError> {
        Ok(self
            .pod_network(namespace, pod)?
            .set_link_up(connected)
            .await?)
    }

    /// A partition between two Pods of `namespace` (both ways), while both still reach everyone
    /// else; `blocked == false` heals it.
    pub async fn set_pods_partitioned(
        &self,
        namespace: &str,
        a: &str,
        b: &str,
        blocked: bool,
    ) -> Result<(), FaultError> {
        let first = self.pod_network(namespace, a)?;
        let second = self.pod_network(namespace, b)?;
        if blocked {
            first.block_peer(second.ip()).await?;
            second.block_peer(first.ip()).await?;
        } else {
            first.unblock_peer(second.ip()).await?;
            second.unblock_peer(first.ip()).await?;
        }
        Ok(())
    }

    /// Cuts Pod `namespace/pod` off from `peers`, both ways: every packet between it and them
    /// is dropped (connections hang and time out, as across a real partition), while both
    /// still reach everyone else (the API server, DNS, the other Pods). The cut follows the
    /// peers by name: Pods created while it stands are cut off too. Cuts add up; returns how
    /// many Pods the Pod is cut from now. [`Kubelet::heal_pod_cut`] ends them.
    ///
    /// Typical use: an operator's Pod cut off from the Pods of the namespace it manages,
    /// while those Pods stay healthy.
    pub async fn cut_pod_off(
        &self,
        namespace: &str,
        pod: &str,
        peers: Peers,
    ) -> Result<usize, FaultError> {
        let entry = self.pod_entry(namespace, pod)?;
        let network = self.pod_network(namespace, pod)?;
        Ok(self.context.pods.cut(&entry, network, peers).await?)
    }

    /// Ends every cut of Pod `namespace/pod`; returns whether it had one.
    pub async fn heal_pod_cut(&self, namespace: &str, pod: &str) -> Result<bool, FaultError> {
        let entry = self.pod_entry(namespace, pod)?;
        Ok(self.context.pods.heal(&entry.uid).await?)
    }

    /// Delay and loss on a Pod's link: `tc netem` where the kernel has it, else packet filters
    /// and a userspace delay queue (`iptables`, `nfnetlink_queue`); fails with
    /// [`NetworkError::Unsupported`] where neither works.
    pub async fn impair_pod(
        &self,
        namespace: &str,
        pod: &str,
        impairment: Option<Impairment>,
    ) -> Result<(), FaultError> {
        let network = self.pod_network(namespace, pod)?;
        match impairment {
            Some(impairment) => network.set_impairment(impairment).await?,
            None => network.clear_impairment().await?,
        }
        Ok(())
    }
}

/// A fault as `kube-sandbox fault` sends it to a running sandbox (one JSON object).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "fault", rename_all = "kebab-case")]
pub enum Fault {
    /// Send a signal (`SIGKILL`, `TERM`, `9`, ...) to a container's process.
    Signal {
        namespace: String,
        pod: String,
        container: Option<String>,
        signal: String,
    },
    /// SIGSTOP: a hung process.
    Freeze {
        namespace: String,
        pod: String,
        container: Option<String>,
    },
    /// SIGCONT.
    Thaw {
        namespace: String,
        pod: String,
        container: Option<String>,
    },
    CrashNode {
        node: String,
    },
    ShutdownNode {
        node: String,
    },
    StartNode {
        node: String,
    },
    WipeClaim {
        namespace: String,
        claim: String,
    },
    CorruptClaim {
        namespace: String,
        claim: String,
    },
    /// The Pod's link goes down.
    Disconnect {
        namespace: String,
        pod: String,
    },
    Reconnect {
        namespace: String,
        pod: String,
    },
    /// No traffic between two Pods of a namespace (both ways).
    Partition {
        namespace: String,
        a: String,
        b: String,
    },
    Heal {
        namespace: String,
        a: String,
        b: String,
    },
    /// Delay and loss on a Pod's link (`tc netem` where the kernel has it, else iptables and
    /// a userspace delay queue).
    Impair {
        namespace: String,
        pod: String,
        delay_ms: u64,
        jitter_ms: u64,
        loss_percent: f64,
    },
    /// Removes a Pod's delay and loss.
    Unimpair {
        namespace: String,
        pod: String,
    },
    /// No traffic between a Pod and the Pods of a namespace (or the Pods named there), both
    /// ways, including Pods created there later.
    Isolate {
        namespace: String,
        pod: String,
        peers: Peers,
    },
    /// Ends every cut of a Pod made by `isolate`.
    Rejoin {
        namespace: String,
        pod: String,
    },
}

/// `SIGKILL`, `KILL`, `kill` or `9`.
pub fn parse_signal(text: &str) -> Result<Signal, FaultError> {
    if let Ok(number) = text.parse::<i32>() {
        return Signal::try_from(number).map_err(|_| FaultError::InvalidSignal(text.into()));
    }
    let upper = text.to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    name.parse()
        .map_err(|_| FaultError::InvalidSignal(text.into()))
}

impl Fault {
    /// Applies the fault; returns what was done, in a sentence.
    pub async fn apply(&self, kubelet: &Kubelet) -> Result<String, FaultError> {
        Ok(match self {
            Self::Signal {
                namespace,
                pod,
                container,
                signal,
            } => {
                let signal = parse_signal(signal)?;
                kubelet.signal_container(namespace, pod, container.as_deref(), signal)?;
                format!("sent {signal} to Pod {namespace}/{pod}")
            }
            Self::Freeze {
                namespace,
                pod,
                container,
            } => {
                kubelet.freeze_container(namespace, pod, container.as_deref())?;
                format!("froze Pod {namespace}/{pod}")
            }
            Self::Thaw {
                namespace,
                pod,
                container,
            } => {
                kubelet.thaw_container(namespace, pod, container.as_deref())?;
                format!("thawed Pod {namespace}/{pod}")
            }
            Self::CrashNode { node } => {
                kubelet.crash_node(node).await?;
                format!("node {node} crashed")
            }
            Self::ShutdownNode { node } => {
                kubelet.shutdown_node(node).await?;
                format!("node {node} shut down")
            }
            Self::StartNode { node } => {
                kubelet.start_node(node).await?;
                format!("node {node} started")
            }
            Self::WipeClaim { namespace, claim } => {
                kubelet.wipe_claim(namespace, claim)?;
                format!("wiped claim {namespace}/{claim}")
            }
            Self::CorruptClaim { namespace, claim } => {
                let files = kubelet.corrupt_claim(namespace, claim)?;
                format!("corrupted {files} files of claim {namespace}/{claim}")
            }
            Self::Disconnect { namespace, pod } => {
                kubelet.set_pod_connected(namespace, pod, false).await?;
                format!("Pod {namespace}/{pod} is off the network")
            }
            Self::Reconnect { namespace, pod } => {
                kubelet.set_pod_connected(namespace, pod, true).await?;
                format!("Pod {namespace}/{pod} is back on the network")
            }
            Self::Partition { namespace, a, b } => {
                kubelet.set_pods_partitioned(namespace, a, b, true).await?;
                format!("Pods {a} and {b} of {namespace} are partitioned")
            }
            Self::Heal { namespace, a, b } => {
                kubelet.set_pods_partitioned(namespace, a, b, false).await?;
                format!("the partition between {a} and {b} of {namespace} is healed")
            }
            Self::Impair {
                namespace,
                pod,
                delay_ms,
                jitter_ms,
                loss_percent,
            } => {
                let impairment = Impairment {
                    delay: std::time::Duration::from_millis(*delay_ms),
                    jitter: std::time::Duration::from_millis(*jitter_ms),
                    loss_percent: *loss_percent,
                };
                kubelet.impair_pod(namespace, pod, Some(impairment)).await?;
                format!("Pod {namespace}/{pod} has {delay_ms} ms delay and {loss_percent}% loss")
            }
            Self::Unimpair { namespace, pod } => {
                kubelet.impair_pod(namespace, pod, None).await?;
                format!("Pod {namespace}/{pod} has its link back as it was")
            }
            Self::Isolate {
                namespace,
                pod,
                peers,
            } => {
                let now = kubelet.cut_pod_off(namespace, pod, peers.clone()).await?;
                format!("Pod {namespace}/{pod} is cut off from {peers} ({now} Pods now)")
            }
            Self::Rejoin { namespace, pod } => {
                if kubelet.heal_pod_cut(namespace, pod).await? {
                    format!("Pod {namespace}/{pod} reaches its peers again")
                } else {
                    format!("Pod {namespace}/{pod} was not cut off")
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_parse_by_name_or_number() {
        assert_eq!(parse_signal("SIGKILL").unwrap(), Signal::SIGKILL);
        assert_eq!(parse_signal("term").unwrap(), Signal::SIGTERM);
        assert_eq!(parse_signal("19").unwrap(), Signal::SIGSTOP);
        assert!(matches!(
            parse_signal("SIGNOPE"),
            Err(FaultError::InvalidSignal(_))
        ));
    }

    #[test]
    fn isolate_names_a_namespace_or_pods_of_it() {
        let fault: Fault = serde_json::from_str(
            r#"{"fault":"isolate","namespace":"ops","pod":"operator-0","peers":{"namespace":"prod"}}"#,
        )
        .unwrap();
        let Fault::Isolate { peers, .. } = &fault else {
            panic!("{fault:?}");
        };
        assert!(peers.matches("prod", "etcd-0") && peers.matches("prod", "anything"));
        assert!(!peers.matches("ops", "etcd-0"));
        let some = Peers::pods("prod", &["etcd-1", "etcd-2"]);
        assert!(some.matches("prod", "etcd-2") && !some.matches("prod", "etcd-0"));
        let text = serde_json::to_string(&Fault::Isolate {
            namespace: "ops".into(),
            pod: "op".into(),
            peers: some.clone(),
        })
        .unwrap();
        assert_eq!(
            text,
            r#"{"fault":"isolate","namespace":"ops","pod":"op","peers":{"namespace":"prod","pods":["etcd-1","etcd-2"]}}"#
        );
        assert_eq!(some.to_string(), "Pods etcd-1, etcd-2 of namespace prod");
    }

    #[test]
    fn faults_travel_as_tagged_json() {
        let fault = Fault::CrashNode {
            node: "node-1".into(),
        };
        let text = serde_json::to_string(&fault).unwrap();
        assert_eq!(text, r#"{"fault":"crash-node","node":"node-1"}"#);
        assert_eq!(serde_json::from_str::<Fault>(&text).unwrap(), fault);
    }
}
