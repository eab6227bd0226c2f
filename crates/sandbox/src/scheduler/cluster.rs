//! The state a placement is decided on: nodes, the Pods already placed, and namespace labels
//! (for `namespaceSelector`), indexed once per decision.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};

/// Namespace name → its labels.
pub type NamespaceLabels = BTreeMap<String, BTreeMap<String, String>>;

/// What the scheduler sees of the cluster.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    pub nodes: Vec<Node>,
    /// Pods bound to nodes. Pods in a terminal phase are ignored, as the real scheduler's cache
    /// never holds them; terminating Pods still occupy their node.
    pub pods: Vec<Pod>,
    pub namespaces: NamespaceLabels,
}

/// Whether a Pod has finished (`Succeeded` or `Failed`).
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The node a Pod is bound to, if any.
pub fn node_name_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()?
        .node_name
        .as_deref()
        .filter(|n| !n.is_empty())
}

/// The cluster indexed for one decision.
pub struct ClusterIndex<'a> {
    /// Every node, by name.
    pub nodes: Vec<&'a Node>,
    /// Each live placed Pod with its node.
    pub placed: Vec<(&'a Pod, &'a Node)>,
    /// Node name → how many live Pods it runs.
    pub pod_counts: BTreeMap<&'a str, usize>,
    pub namespaces: &'a NamespaceLabels,
}

impl<'a> ClusterIndex<'a> {
    pub fn new(cluster: &'a Cluster) -> Self {
        let mut nodes: Vec<&Node> = cluster.nodes.iter().collect();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let by_name: BTreeMap<&str, &Node> = nodes
            .iter()
            .map(|n| (n.metadata.name.as_deref().unwrap_or_default(), *n))
            .collect();
        let mut placed = Vec::new();
        let mut pod_counts = BTreeMap::new();
        for pod in cluster.pods.iter().filter(|p| !is_terminal(p)) {
            if let Some(node) = node_name_of(pod).and_then(|name| by_name.get(name)) {
                placed.push((pod, *node));
                *pod_counts
                    .entry(node.metadata.name.as_deref().unwrap_or_default())
                    .or_default() += 1;
            }
        }
        Self {
            nodes,
            placed,
            pod_counts,
            namespaces: &cluster.namespaces,
        }
    }

    /// The live Pods on one node.
    pub fn pods_on<'b>(&'b self, node: &'b Node) -> impl Iterator<Item = &'a Pod> + 'b {
        let name = node.metadata.name.as_deref();
        self.placed
            .iter()
            .filter(move |(_, n)| n.metadata.name.as_deref() == name)
            .map(|(p, _)| *p)
    }

    pub fn pod_count(&self, node: &Node) -> usize {
        self.pod_counts
            .get(node.metadata.name.as_deref().unwrap_or_default())
            .copied()
            .unwrap_or(0)
    }
}
