//! `nodeSelector` and node affinity: the required part filters nodes, the preferred part scores
//! them by the summed weights of the terms a node matches.

use k8s_openapi::api::core::v1::{Node, NodeSelectorTerm, Pod};

use super::labels::{labels_of, node_field_matches, node_requirement_matches};

/// Whether a node satisfies one term: all of its expressions and fields. An empty term matches
/// no node, as in the real scheduler.
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = labels_of(&node.metadata);
    let name = node.metadata.name.as_deref().unwrap_or_default();
    expressions
        .iter()
        .all(|r| node_requirement_matches(r, labels))
        && fields.iter().all(|r| node_field_matches(r, name))
}

/// Whether a node satisfies the Pod's `nodeSelector` and any one of its required node affinity
/// terms (terms are ORed; a required affinity with no terms matches nothing).
pub fn required_matches(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    let labels = labels_of(&node.metadata);
    if !spec
        .node_selector
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        None => true,
        Some(selector) => selector
            .node_selector_terms
            .iter()
            .any(|term| term_matches(term, node)),
    }
}

/// The sum of the weights of the preferred terms the node matches.
pub fn preferred_score(pod: &Pod, node: &Node) -> i64 {
    let preferred = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default();
    preferred
        .iter()
        .filter(|term| term_matches(&term.preference, node))
        .map(|term| i64::from(term.weight))
        .sum()
}
