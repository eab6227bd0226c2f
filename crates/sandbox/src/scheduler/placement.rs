//! The placement decision: filter every node in the default profile's plugin order, score the
//! nodes left with the default weights, pick the best with a deterministic tie-break.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};

use super::cluster::{Cluster, ClusterIndex};
use super::inter_pod::{self, AffinityFilter};
use super::spread::{self, SpreadFilter};
use super::taints::{
    NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, UNSCHEDULABLE, first_untolerated,
    scheduling_taints, taint, tolerated,
};
use super::{node_affinity, resources};

pub const REASON_UNSCHEDULABLE_NODE: &str = "node(s) were unschedulable";
pub const REASON_NODE_AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";
/// The message when the cluster has no node at all.
pub const NO_NODES_MESSAGE: &str = "no nodes available to schedule pods";

/// Why a Pod stays Pending: the `PodScheduled=False` condition's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unschedulable {
    /// `Unschedulable`, or `SchedulingGated` while the Pod has scheduling gates.
    pub reason: String,
    /// As the real scheduler words it, e.g. `0/3 nodes are available: 3 node(s) didn't match pod
    /// anti-affinity rules.` (the reasons sorted, with how many nodes gave each).
    pub message: String,
}

impl fmt::Display for Unschedulable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

impl std::error::Error for Unschedulable {}

/// Default-profile score weights.
const WEIGHT_TAINT_TOLERATION: i64 = 3;
const WEIGHT_NODE_AFFINITY: i64 = 2;
const WEIGHT_TOPOLOGY_SPREAD: i64 = 2;
const WEIGHT_INTER_POD_AFFINITY: i64 = 2;
const WEIGHT_LEAST_ALLOCATED: i64 = 1;

fn tolerations_of(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
}

/// Chooses the node for `pod`, or says why there is none. Pure: the same inputs always give the
/// same node (ties go to the node with fewer Pods, then the smaller name).
pub fn schedule(pod: &Pod, cluster: &Cluster) -> Result<String, Unschedulable> {
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
    {
        return Err(Unschedulable {
            reason: "SchedulingGated".to_string(),
            message: "Scheduling is blocked due to non-empty scheduling gates".to_string(),
        });
    }
    let index = ClusterIndex::new(cluster);
    if index.nodes.is_empty() {
        return Err(unschedulable(NO_NODES_MESSAGE.to_string()));
    }
    let affinity = AffinityFilter::new(pod, &index);
    let spread = SpreadFilter::new(pod, &index);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut feasible = Vec::new();
    for node in &index.nodes {
        let rejected = filter(pod, node, &index, &affinity, &spread);
        if rejected.is_empty() {
            feasible.push(*node);
        }
        for reason in rejected {
            *reasons.entry(reason).or_default() += 1;
        }
    }
    if feasible.is_empty() {
        let mut histogram: Vec<String> = reasons
            .iter()
            .map(|(reason, count)| format!("{count} {reason}"))
            .collect();
        histogram.sort();
        return Err(unschedulable(format!(
            "0/{} nodes are available: {}.",
            index.nodes.len(),
            histogram.join(", ")
        )));
    }
    let totals = score(pod, &index, &feasible);
    let best = feasible
        .iter()
        .zip(totals)
        .max_by(|(a, score_a), (b, score_b)| {
            score_a
                .cmp(score_b)
                .then_with(|| index.pod_count(b).cmp(&index.pod_count(a)))
                .then_with(|| b.metadata.name.cmp(&a.metadata.name))
        })
        .map(|(node, _)| node.metadata.name.clone().unwrap_or_default());
    best.ok_or_else(|| unschedulable(NO_NODES_MESSAGE.to_string()))
}

fn unschedulable(message: String) -> Unschedulable {
    Unschedulable {
        reason: "Unschedulable".to_string(),
        message,
    }
}

/// The reasons one node is refused, from the first filter plugin that refuses it.
fn filter(
    pod: &Pod,
    node: &Node,
    index: &ClusterIndex<'_>,
    affinity: &AffinityFilter,
    spread: &SpreadFilter,
) -> Vec<String> {
    let tolerations = tolerations_of(pod);
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
        && !tolerated(tolerations, &taint(UNSCHEDULABLE, NO_SCHEDULE))
    {
        return vec![REASON_UNSCHEDULABLE_NODE.to_string()];
    }
    if let Some(taint) = first_untolerated(
        &scheduling_taints(node),
        tolerations,
        &[NO_SCHEDULE, NO_EXECUTE],
    ) {
        return vec![format!(
            "node(s) had untolerated taint {{{}: {}}}",
            taint.key,
            taint.value.as_deref().unwrap_or_default()
        )];
    }
    if !node_affinity::required_matches(pod, node) {
        return vec![REASON_NODE_AFFINITY.to_string()];
    }
    let insufficient = resources::reject(pod, node, index);
    if !insufficient.is_empty() {
        return insufficient;
    }
    if let Some(reason) = spread.reject(node) {
        return vec![reason.to_string()];
    }
    if let Some(reason) = affinity.reject(node) {
        return vec![reason.to_string()];
    }
    Vec::new()
}

/// Each feasible node's weighted sum of normalized plugin scores (each 0..=100).
fn score(pod: &Pod, index: &ClusterIndex<'_>, nodes: &[&Node]) -> Vec<i64> {
    let tolerations = tolerations_of(pod);
    let preferable: Vec<Toleration> = tolerations
        .iter()
        .filter(|t| {
            matches!(
                t.effect.as_deref(),
                None | Some("") | Some(PREFER_NO_SCHEDULE)
            )
        })
        .cloned()
        .collect();
    let intolerable: Vec<i64> = nodes
        .iter()
        .map(|node| untolerated_preferences(&scheduling_taints(node), &preferable))
        .collect();
    let taint_scores = normalize(&intolerable, true);
    let node_affinity_scores = normalize(
        &nodes
            .iter()
            .map(|n| node_affinity::preferred_score(pod, n))
            .collect::<Vec<_>>(),
        false,
    );
    let spread_scores = spread::scores(pod, index, nodes).unwrap_or_else(|| vec![0; nodes.len()]);
    let inter_pod_scores = normalize_range(&inter_pod::raw_scores(pod, index, nodes));
    nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            WEIGHT_TAINT_TOLERATION * taint_scores[i]
                + WEIGHT_NODE_AFFINITY * node_affinity_scores[i]
                + WEIGHT_TOPOLOGY_SPREAD * spread_scores[i]
                + WEIGHT_INTER_POD_AFFINITY * inter_pod_scores[i]
                + WEIGHT_LEAST_ALLOCATED * resources::least_allocated_score(pod, node, index)
        })
        .collect()
}

/// How many PreferNoSchedule taints of the node the Pod does not tolerate.
fn untolerated_preferences(taints: &[Taint], tolerations: &[Toleration]) -> i64 {
    taints
        .iter()
        .filter(|t| t.effect == PREFER_NO_SCHEDULE && !tolerated(tolerations, t))
        .count() as i64
}

/// The framework's default normalization: scale to 0..=100 by the maximum, reversed when fewer
/// is better.
fn normalize(raw: &[i64], reverse: bool) -> Vec<i64> {
    let max = raw.iter().copied().max().unwrap_or(0);
    raw.iter()
        .map(|score| match (max, reverse) {
            (0, true) => 100,
            (0, false) => 0,
            (max, false) => score * 100 / max,
            (max, true) => 100 - score * 100 / max,
        })
        .collect()
}

/// InterPodAffinity's normalization: scale the range between the minimum and the maximum.
fn normalize_range(raw: &[i64]) -> Vec<i64> {
    let (min, max) = (
        raw.iter().copied().min().unwrap_or(0),
        raw.iter().copied().max().unwrap_or(0),
    );
    raw.iter()
        .map(|score| {
            if max > min {
                100 * (score - min) / (max - min)
            } else {
                0
            }
        })
        .collect()
}
