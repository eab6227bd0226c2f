//! Node health, pure: the conditions of a node whose kubelet stopped posting, and the taints
//! its conditions call for, as the real node lifecycle controller sets them.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::scheduler::taints::{
    NO_EXECUTE, NO_SCHEDULE, NOT_READY, UNREACHABLE, UNSCHEDULABLE, node_condition,
};

/// The conditions the kubelet reports and the controller turns Unknown when it goes silent.
const MONITORED_CONDITIONS: &[&str] = &["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// NoSchedule taints that mirror a condition being True (TaintNodesByCondition).
const CONDITION_TAINTS: &[(&str, &str)] = &[
    ("MemoryPressure", "node.kubernetes.io/memory-pressure"),
    ("DiskPressure", "node.kubernetes.io/disk-pressure"),
    ("PIDPressure", "node.kubernetes.io/pid-pressure"),
    (
        "NetworkUnavailable",
        "node.kubernetes.io/network-unavailable",
    ),
];

/// The conditions of a node past its grace period: each monitored condition Unknown (reason
/// `NodeStatusUnknown`, or `NodeStatusNeverUpdated` for one never reported). `None` when they
/// already are.
pub fn unknown_conditions(node: &Node, now: Timestamp) -> Option<Vec<NodeCondition>> {
    let mut changed = Vec::new();
    for type_ in MONITORED_CONDITIONS {
        let (reason, message) = match node_condition(node, type_) {
            Some(current) if current.status == "Unknown" => continue,
            Some(_) => ("NodeStatusUnknown", "Kubelet stopped posting node status."),
            None => (
                "NodeStatusNeverUpdated",
                "Kubelet never posted node status.",
            ),
        };
        let previous = node_condition(node, type_);
        changed.push(NodeCondition {
            type_: type_.to_string(),
            status: "Unknown".to_string(),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            last_heartbeat_time: previous
                .and_then(|c| c.last_heartbeat_time.clone())
                .or(Some(Time(now))),
            last_transition_time: Some(Time(now)),
        });
    }
    (!changed.is_empty()).then_some(changed)
}

/// Whether the controller owns a taint: it adds and removes these, and leaves all others.
fn is_lifecycle_taint(taint: &Taint) -> bool {
    let key = taint.key.as_str();
    match taint.effect.as_str() {
        NO_EXECUTE => key == NOT_READY || key == UNREACHABLE,
        NO_SCHEDULE => {
            key == NOT_READY
                || key == UNREACHABLE
                || key == UNSCHEDULABLE
                || CONDITION_TAINTS.iter().any(|(_, t)| *t == key)
        }
        _ => false,
    }
}

/// The lifecycle taints a node's state calls for: not-ready (Ready False) or unreachable
/// (Ready Unknown) with both NoSchedule and NoExecute, a NoSchedule taint per pressure
/// condition, and unschedulable for `spec.unschedulable`.
fn wanted_taints(node: &Node) -> Vec<(&'static str, &'static str)> {
    let mut wanted = Vec::new();
    let readiness = match node_condition(node, "Ready").map(|c| c.status.as_str()) {
        Some("False") => Some(NOT_READY),
        Some("Unknown") => Some(UNREACHABLE),
        _ => None,
    };
    if let Some(key) = readiness {
        wanted.push((key, NO_SCHEDULE));
        wanted.push((key, NO_EXECUTE));
    }
    for (condition, key) in CONDITION_TAINTS {
        if node_condition(node, condition).is_some_and(|c| c.status == "True") {
            wanted.push((key, NO_SCHEDULE));
        }
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        wanted.push((UNSCHEDULABLE, NO_SCHEDULE));
    }
    wanted
}

/// The node's taints with the lifecycle taints made to match its state (others untouched, and
/// taints already there keep their `timeAdded`). `None` when nothing changes.
pub fn reconciled_taints(node: &Node, now: Timestamp) -> Option<Vec<Taint>> {
    let current = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let wanted = wanted_taints(node);
    let is_wanted = |taint: &Taint| {
        wanted
            .iter()
            .any(|(key, effect)| taint.key == *key && taint.effect == *effect)
    };
    let mut taints: Vec<Taint> = current
        .iter()
        .filter(|t| !is_lifecycle_taint(t) || is_wanted(t))
        .cloned()
        .collect();
    for (key, effect) in &wanted {
        if !taints.iter().any(|t| t.key == *key && t.effect == *effect) {
            let time_added = (*effect == NO_EXECUTE).then_some(Time(now));
            taints.push(Taint {
                key: key.to_string(),
                effect: effect.to_string(),
                value: None,
                time_added,
            });
        }
    }
    (taints != current).then_some(taints)
}
