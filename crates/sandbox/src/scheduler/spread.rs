//! `topologySpreadConstraints`: DoNotSchedule constraints filter nodes by skew, ScheduleAnyway
//! constraints score them, both counting matching Pods per topology domain as the
//! PodTopologySpread plugin does.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::cluster::ClusterIndex;
use super::labels::{labels_of, merge_label_keys, selector_matches};
use super::node_affinity;
use super::taints::{NO_EXECUTE, NO_SCHEDULE, first_untolerated, scheduling_taints};

pub const REASON_SPREAD: &str = "node(s) didn't match pod topology spread constraints";
pub const REASON_SPREAD_MISSING_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

const HOSTNAME: &str = "kubernetes.io/hostname";

/// One constraint of the incoming Pod, resolved.
struct Constraint {
    max_skew: i64,
    min_domains: Option<i64>,
    topology_key: String,
    /// `None` (no labelSelector) selects no Pod, so the constraint never limits anything.
    selector: Option<LabelSelector>,
    honor_node_affinity: bool,
    honor_node_taints: bool,
}

impl Constraint {
    fn new(constraint: &TopologySpreadConstraint, pod: &Pod) -> Self {
        let selector = constraint.label_selector.as_ref().map(|selector| {
            merge_label_keys(
                selector,
                constraint.match_label_keys.as_deref().unwrap_or_default(),
                &[],
                labels_of(&pod.metadata),
            )
        });
        Self {
            max_skew: i64::from(constraint.max_skew),
            min_domains: constraint.min_domains.map(i64::from),
            topology_key: constraint.topology_key.clone(),
            selector,
            honor_node_affinity: constraint.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_node_taints: constraint.node_taints_policy.as_deref() == Some("Honor"),
        }
    }

    /// Whether the node's Pods count toward this constraint under its node policies.
    fn counts_node(&self, pod: &Pod, node: &Node) -> bool {
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default();
        (!self.honor_node_affinity || node_affinity::required_matches(pod, node))
            && (!self.honor_node_taints
                || first_untolerated(
                    &scheduling_taints(node),
                    tolerations,
                    &[NO_SCHEDULE, NO_EXECUTE],
                )
                .is_none())
    }

    /// Live Pods of the incoming Pod's namespace on `node` that the selector matches.
    fn matching_pods(&self, namespace: &str, node: &Node, cluster: &ClusterIndex<'_>) -> i64 {
        let Some(selector) = &self.selector else {
            return 0;
        };
        let matching = cluster.pods_on(node).filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.metadata.namespace.as_deref().unwrap_or_default() == namespace
                && selector_matches(selector, labels_of(&p.metadata))
        });
        matching.count() as i64
    }

    fn selects(&self, pod: &Pod) -> bool {
        self.selector
            .as_ref()
            .is_some_and(|s| selector_matches(s, labels_of(&pod.metadata)))
    }
}

fn constraints(pod: &Pod, when_unsatisfiable: &str) -> Vec<Constraint> {
    let all = pod
        .spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.as_deref())
        .unwrap_or_default();
    all.iter()
        .filter(|c| c.when_unsatisfiable == when_unsatisfiable)
        .map(|c| Constraint::new(c, pod))
        .collect()
}

fn has_all_keys(node: &Node, constraints: &[Constraint]) -> bool {
    let labels = labels_of(&node.metadata);
    constraints
        .iter()
        .all(|c| labels.contains_key(&c.topology_key))
}

/// The DoNotSchedule constraints with their per-domain counts and global minimum.
pub struct SpreadFilter {
    self_matches: Vec<bool>,
    constraints: Vec<(Constraint, BTreeMap<String, i64>, i64)>,
}

impl SpreadFilter {
    pub fn new(pod: &Pod, cluster: &ClusterIndex<'_>) -> Self {
        let hard = constraints(pod, "DoNotSchedule");
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut counts: Vec<BTreeMap<String, i64>> = hard.iter().map(|_| BTreeMap::new()).collect();
        for node in cluster.nodes.iter().filter(|n| has_all_keys(n, &hard)) {
            for (constraint, domains) in hard.iter().zip(counts.iter_mut()) {
                if !constraint.counts_node(pod, node) {
                    continue;
                }
                let value = labels_of(&node.metadata)[&constraint.topology_key].clone();
                *domains.entry(value).or_default() +=
                    constraint.matching_pods(namespace, node, cluster);
            }
        }
        let self_matches = hard.iter().map(|c| c.selects(pod)).collect();
        let constraints = hard
            .into_iter()
            .zip(counts)
            .map(|(constraint, domains)| {
                let too_few_domains = constraint
                    .min_domains
                    .is_some_and(|min| (domains.len() as i64) < min);
                let global_min = if too_few_domains {
                    0
                } else {
                    domains.values().copied().min().unwrap_or(i64::MAX)
                };
                (constraint, domains, global_min)
            })
            .collect();
        Self {
            self_matches,
            constraints,
        }
    }

    /// Why placing the Pod on `node` would break a constraint, if it would.
    pub fn reject(&self, node: &Node) -> Option<&'static str> {
        let labels = labels_of(&node.metadata);
        for ((constraint, domains, global_min), self_match) in
            self.constraints.iter().zip(&self.self_matches)
        {
            let Some(value) = labels.get(&constraint.topology_key) else {
                return Some(REASON_SPREAD_MISSING_LABEL);
            };
            let count = domains.get(value).copied().unwrap_or(0);
            let skew = (count + i64::from(*self_match)).saturating_sub(*global_min);
            if skew > constraint.max_skew {
                return Some(REASON_SPREAD);
            }
        }
        None
    }
}

/// Normalized scores (0..=100, higher is better) of the candidate nodes for the ScheduleAnyway
/// constraints, or `None` when the Pod has none.
pub fn scores(pod: &Pod, cluster: &ClusterIndex<'_>, candidates: &[&Node]) -> Option<Vec<i64>> {
    let soft = constraints(pod, "ScheduleAnyway");
    if soft.is_empty() {
        return None;
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let ignored: Vec<bool> = candidates.iter().map(|n| !has_all_keys(n, &soft)).collect();
    let considered = || {
        candidates
            .iter()
            .zip(&ignored)
            .filter(|(_, ignored)| !**ignored)
            .map(|(n, _)| *n)
    };
    // Domains are those of the candidate nodes; hostname counts each node's own Pods.
    let mut domains: Vec<BTreeMap<String, i64>> = soft.iter().map(|_| BTreeMap::new()).collect();
    for node in considered() {
        for (constraint, counts) in soft.iter().zip(domains.iter_mut()) {
            if constraint.topology_key != HOSTNAME {
                counts.insert(
                    labels_of(&node.metadata)[&constraint.topology_key].clone(),
                    0,
                );
            }
        }
    }
    let weights: Vec<f64> = soft
        .iter()
        .zip(&domains)
        .map(|(c, counts)| {
            let size = if c.topology_key == HOSTNAME {
                considered().count()
            } else {
                counts.len()
            };
            ((size + 2) as f64).ln()
        })
        .collect();
    for node in cluster.nodes.iter().filter(|n| has_all_keys(n, &soft)) {
        for (constraint, counts) in soft.iter().zip(domains.iter_mut()) {
            let value = &labels_of(&node.metadata)[&constraint.topology_key];
            if constraint.topology_key != HOSTNAME
                && constraint.counts_node(pod, node)
                && let Some(count) = counts.get_mut(value)
            {
                *count += constraint.matching_pods(namespace, node, cluster);
            }
        }
    }
    let raw: Vec<i64> = candidates
        .iter()
        .map(|node| {
            let labels = labels_of(&node.metadata);
            let mut score = 0.0;
            for ((constraint, counts), weight) in soft.iter().zip(&domains).zip(&weights) {
                let Some(value) = labels.get(&constraint.topology_key) else {
                    continue;
                };
                let count = if constraint.topology_key == HOSTNAME {
                    constraint.matching_pods(namespace, node, cluster)
                } else {
                    counts.get(value).copied().unwrap_or(0)
                };
                score += count as f64 * weight + (constraint.max_skew - 1) as f64;
            }
            score.round() as i64
        })
        .collect();
    let kept = || {
        raw.iter()
            .zip(&ignored)
            .filter(|(_, ignored)| !**ignored)
            .map(|(s, _)| *s)
    };
    let (min, max) = (kept().min().unwrap_or(0), kept().max().unwrap_or(0));
    Some(
        raw.iter()
            .zip(&ignored)
            .map(|(score, ignored)| match (*ignored, max) {
                (true, _) => 0,
                (false, 0) => 100,
                (false, max) => 100 * (max + min - score) / max,
            })
            .collect(),
    )
}
