//! Inter-pod affinity and anti-affinity, as the InterPodAffinity plugin counts them: per
//! topology pair (key, value), how many placed Pods match a term, then each node is judged by
//! the pairs its own labels name.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Pod, PodAffinityTerm, WeightedPodAffinityTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::cluster::{ClusterIndex, NamespaceLabels};
use super::labels::{labels_of, merge_label_keys, selector_matches};

pub const REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
pub const REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
pub const REASON_EXISTING_ANTI_AFFINITY: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

/// The weight the real scheduler gives an existing Pod's required affinity to the incoming Pod
/// when scoring (`hardPodAffinityWeight`).
const HARD_POD_AFFINITY_WEIGHT: i64 = 1;

/// One affinity term of a Pod, resolved: which namespaces and labels it selects.
#[derive(Debug, Clone)]
pub struct AffinityTerm {
    namespaces: BTreeSet<String>,
    namespace_selector: Option<LabelSelector>,
    selector: Option<LabelSelector>,
    pub topology_key: String,
    pub weight: i64,
}

impl AffinityTerm {
    /// Resolves a term of `owner`: without namespaces and namespaceSelector it selects the owner's
    /// namespace; `matchLabelKeys`/`mismatchLabelKeys` take their values from the owner's labels.
    pub fn new(term: &PodAffinityTerm, owner: &Pod, weight: i64) -> Self {
        let mut namespaces: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
        if namespaces.is_empty() && term.namespace_selector.is_none() {
            namespaces.insert(owner.metadata.namespace.clone().unwrap_or_default());
        }
        let selector = term.label_selector.as_ref().map(|selector| {
            merge_label_keys(
                selector,
                term.match_label_keys.as_deref().unwrap_or_default(),
                term.mismatch_label_keys.as_deref().unwrap_or_default(),
                labels_of(&owner.metadata),
            )
        });
        Self {
            namespaces,
            namespace_selector: term.namespace_selector.clone(),
            selector,
            topology_key: term.topology_key.clone(),
            weight,
        }
    }

    /// Whether `pod` is one this term selects. A term without a label selector selects nothing.
    pub fn matches(&self, pod: &Pod, namespace_labels: &NamespaceLabels) -> bool {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let in_namespace = self.namespaces.contains(namespace)
            || self.namespace_selector.as_ref().is_some_and(|selector| {
                namespace_labels
                    .get(namespace)
                    .is_some_and(|labels| selector_matches(selector, labels))
            });
        in_namespace
            && self
                .selector
                .as_ref()
                .is_some_and(|selector| selector_matches(selector, labels_of(&pod.metadata)))
    }
}

/// The four kinds of affinity terms a Pod carries, resolved.
#[derive(Debug, Clone, Default)]
pub struct PodAffinityTerms {
    pub required_affinity: Vec<AffinityTerm>,
    pub required_anti_affinity: Vec<AffinityTerm>,
    pub preferred_affinity: Vec<AffinityTerm>,
    pub preferred_anti_affinity: Vec<AffinityTerm>,
}

impl PodAffinityTerms {
    pub fn of(pod: &Pod) -> Self {
        let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
        let required = |terms: Option<&Vec<PodAffinityTerm>>| -> Vec<AffinityTerm> {
            terms
                .into_iter()
                .flatten()
                .map(|t| AffinityTerm::new(t, pod, 0))
                .collect()
        };
        let preferred = |terms: Option<&Vec<WeightedPodAffinityTerm>>| -> Vec<AffinityTerm> {
            terms
                .into_iter()
                .flatten()
                .map(|t| AffinityTerm::new(&t.pod_affinity_term, pod, i64::from(t.weight)))
                .collect()
        };
        let affinity_part = affinity.and_then(|a| a.pod_affinity.as_ref());
        let anti_part = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        Self {
            required_affinity: required(affinity_part.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            required_anti_affinity: required(anti_part.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred_affinity: preferred(affinity_part.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred_anti_affinity: preferred(anti_part.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
        }
    }

    fn is_empty(&self) -> bool {
        self.required_affinity.is_empty()
            && self.required_anti_affinity.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty()
    }
}

/// A topology pair: a label key and the value a node has for it.
type TopologyPair = (String, String);

fn pair_of(term: &AffinityTerm, node: &Node) -> Option<TopologyPair> {
    let value = labels_of(&node.metadata).get(&term.topology_key)?;
    Some((term.topology_key.clone(), value.clone()))
}

/// What the filter needs, counted once per scheduling attempt over all placed Pods.
pub struct AffinityFilter {
    incoming: PodAffinityTerms,
    incoming_matches_own_affinity: bool,
    affinity_counts: BTreeMap<TopologyPair, i64>,
    anti_affinity_counts: BTreeMap<TopologyPair, i64>,
    existing_anti_affinity_counts: BTreeMap<TopologyPair, i64>,
}

impl AffinityFilter {
    pub fn new(pod: &Pod, cluster: &ClusterIndex<'_>) -> Self {
        let incoming = PodAffinityTerms::of(pod);
        let mut filter = Self {
            incoming_matches_own_affinity: incoming
                .required_affinity
                .iter()
                .all(|t| t.matches(pod, cluster.namespaces)),
            incoming,
            affinity_counts: BTreeMap::new(),
            anti_affinity_counts: BTreeMap::new(),
            existing_anti_affinity_counts: BTreeMap::new(),
        };
        for (existing, node) in &cluster.placed {
            for term in &filter.incoming.required_affinity {
                if term.matches(existing, cluster.namespaces)
                    && let Some(pair) = pair_of(term, node)
                {
                    *filter.affinity_counts.entry(pair).or_default() += 1;
                }
            }
            for term in &filter.incoming.required_anti_affinity {
                if term.matches(existing, cluster.namespaces)
                    && let Some(pair) = pair_of(term, node)
                {
                    *filter.anti_affinity_counts.entry(pair).or_default() += 1;
                }
            }
            for term in PodAffinityTerms::of(existing).required_anti_affinity {
                if term.matches(pod, cluster.namespaces)
                    && let Some(pair) = pair_of(&term, node)
                {
                    *filter
                        .existing_anti_affinity_counts
                        .entry(pair)
                        .or_default() += 1;
                }
            }
        }
        filter
    }

    /// The reason a node fails, checked in the real plugin's order: the Pod's affinity, its
    /// anti-affinity, then the placed Pods' anti-affinity.
    pub fn reject(&self, node: &Node) -> Option<&'static str> {
        let labels = labels_of(&node.metadata);
        let count = |counts: &BTreeMap<TopologyPair, i64>, key: &str, value: &str| {
            counts
                .get(&(key.to_string(), value.to_string()))
                .copied()
                .unwrap_or(0)
        };
        let mut pods_exist = true;
        for term in &self.incoming.required_affinity {
            let Some(value) = labels.get(&term.topology_key) else {
                return Some(REASON_AFFINITY);
            };
            if count(&self.affinity_counts, &term.topology_key, value) <= 0 {
                pods_exist = false;
            }
        }
        // The first Pod of a group with affinity to itself may go anywhere that has the keys.
        let first_of_group = self.affinity_counts.is_empty() && self.incoming_matches_own_affinity;
        if !(pods_exist || first_of_group) {
            return Some(REASON_AFFINITY);
        }
        for term in &self.incoming.required_anti_affinity {
            if let Some(value) = labels.get(&term.topology_key)
                && count(&self.anti_affinity_counts, &term.topology_key, value) > 0
            {
                return Some(REASON_ANTI_AFFINITY);
            }
        }
        if labels
            .iter()
            .any(|(k, v)| count(&self.existing_anti_affinity_counts, k, v) > 0)
        {
            return Some(REASON_EXISTING_ANTI_AFFINITY);
        }
        None
    }
}

/// Preferred affinity scores per topology pair, from the Pod's preferred terms and the placed
/// Pods' terms about it; a node's raw score is the sum over the pairs its labels name.
pub fn raw_scores(pod: &Pod, cluster: &ClusterIndex<'_>, nodes: &[&Node]) -> Vec<i64> {
    let incoming = PodAffinityTerms::of(pod);
    let mut topology_score: BTreeMap<TopologyPair, i64> = BTreeMap::new();
    for (existing, node) in &cluster.placed {
        let existing_terms = PodAffinityTerms::of(existing);
        if incoming.preferred_affinity.is_empty()
            && incoming.preferred_anti_affinity.is_empty()
            && existing_terms.is_empty()
        {
            continue;
        }
        let mut add = |term: &AffinityTerm, weight: i64| {
            if let Some(pair) = pair_of(term, node) {
                *topology_score.entry(pair).or_default() += weight;
            }
        };
        for term in &incoming.preferred_affinity {
            if term.matches(existing, cluster.namespaces) {
                add(term, term.weight);
            }
        }
        for term in &incoming.preferred_anti_affinity {
            if term.matches(existing, cluster.namespaces) {
                add(term, -term.weight);
            }
        }
        for term in &existing_terms.required_affinity {
            if term.matches(pod, cluster.namespaces) {
                add(term, HARD_POD_AFFINITY_WEIGHT);
            }
        }
        for term in &existing_terms.preferred_affinity {
            if term.matches(pod, cluster.namespaces) {
                add(term, term.weight);
            }
        }
        for term in &existing_terms.preferred_anti_affinity {
            if term.matches(pod, cluster.namespaces) {
                add(term, -term.weight);
            }
        }
    }
    nodes
        .iter()
        .map(|node| {
            let labels = labels_of(&node.metadata);
            topology_score
                .iter()
                .filter(|((key, value), _)| labels.get(key) == Some(value))
                .map(|(_, score)| score)
                .sum()
        })
        .collect()
}
