//! Taints and tolerations, matched as `v1.Toleration.ToleratesTaint` does; shared by the
//! scheduler's filter and score and by the node lifecycle's taint eviction.

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint, Toleration};

pub const NO_SCHEDULE: &str = "NoSchedule";
pub const PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
pub const NO_EXECUTE: &str = "NoExecute";

/// The taint the node lifecycle puts on a node whose Ready condition is False.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint the node lifecycle puts on a node whose Ready condition is Unknown.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The taint that mirrors `spec.unschedulable`.
pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// Whether one toleration tolerates one taint: an empty effect tolerates every effect, an empty
/// key with `Exists` every key, `Equal` (the default operator) needs the same value.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// Whether any of `tolerations` tolerates `taint`.
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations
        .iter()
        .any(|toleration| tolerates(toleration, taint))
}

/// The first taint with one of `effects` that no toleration tolerates.
pub fn first_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    effects: &[&str],
) -> Option<&'a Taint> {
    taints
        .iter()
        .find(|taint| effects.contains(&taint.effect.as_str()) && !tolerated(tolerations, taint))
}

/// A taint without value or time.
pub fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.to_string(),
        effect: effect.to_string(),
        value: None,
        time_added: None,
    }
}

/// A node's condition of `type_`, if it reports one.
pub fn node_condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The taints a node is scheduled against: its own, plus the NoSchedule taint the node lifecycle
/// would add for a Ready condition that is not True, so a NotReady node is avoided (with the real
/// taint's message and tolerations) even before or without the node lifecycle controller.
pub fn scheduling_taints(node: &Node) -> Vec<Taint> {
    let mut taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let implied = match node_condition(node, "Ready").map(|c| c.status.as_str()) {
        Some("True") => None,
        Some("False") => Some(NOT_READY),
        _ => Some(UNREACHABLE),
    };
    if let Some(key) = implied
        && !taints
            .iter()
            .any(|t| (t.key == NOT_READY || t.key == UNREACHABLE) && t.effect == NO_SCHEDULE)
    {
        taints.push(taint(key, NO_SCHEDULE));
    }
    taints
}
