//! What a member's Pod is restarted for: the restart-relevant part of its spec (etcd flags,
//! resources, scheduling, image pull Secrets), as [`MemberConfig`], and its digest, recorded
//! on the Pod ([`CONFIG_DIGEST_ANNOTATION`]) when it is created.

use etcd_operator_api::EtcdMemberSpec;
use etcd_operator_api::cluster::ObservedClusterSpec;
use etcd_operator_api::shared::EtcdOptions;
use k8s_openapi::api::core::v1::{
    Affinity, LocalObjectReference, ResourceRequirements, TopologySpreadConstraint,
};
use serde::Serialize;

/// The digest of the member's [`MemberConfig`] the Pod was created with.
pub const CONFIG_DIGEST_ANNOTATION: &str = "etcd-operator.cozystack.io/config-digest";

/// The fields of a member whose change restarts its Pod (besides `version`). Serialized with
/// explicit nulls: as a merge patch of the EtcdMember's spec, a null removes the field.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberConfig {
    pub options: Option<EtcdOptions>,
    pub resources: Option<ResourceRequirements>,
    pub affinity: Option<Affinity>,
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
}

impl MemberConfig {
    pub fn of_member(spec: &EtcdMemberSpec) -> MemberConfig {
        MemberConfig {
            options: spec.options.clone(),
            resources: spec.resources.clone(),
            affinity: spec.affinity.clone(),
            topology_spread_constraints: spec.topology_spread_constraints.clone(),
            image_pull_secrets: spec.image_pull_secrets.clone(),
        }
    }

    pub fn of_target(target: &ObservedClusterSpec) -> MemberConfig {
        MemberConfig {
            options: target.options.clone(),
            resources: target.resources.clone(),
            affinity: target.affinity.clone(),
            topology_spread_constraints: target.topology_spread_constraints.clone(),
            image_pull_secrets: target.image_pull_secrets.clone(),
        }
    }

    /// A short SHA-256 of its JSON.
    pub fn digest(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let digest = ring::digest::digest(&ring::digest::SHA256, &json);
        digest.as_ref()[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The fields that differ from `other`, by their spec names.
    pub fn differences(&self, other: &MemberConfig) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.options != other.options {
            out.push("options");
        }
        if self.resources != other.resources {
            out.push("resources");
        }
        if self.affinity != other.affinity {
            out.push("affinity");
        }
        if self.topology_spread_constraints != other.topology_spread_constraints {
            out.push("topologySpreadConstraints");
        }
        if self.image_pull_secrets != other.image_pull_secrets {
            out.push("imagePullSecrets");
        }
        out
    }
}

/// A merge patch that turns `old` into `new` (`additionalMetadata`): keys `old` has and `new`
/// lacks become null (removed), since a merge patch otherwise keeps them.
pub fn replacing_patch(
    old: Option<&etcd_operator_api::shared::AdditionalMetadata>,
    new: Option<&etcd_operator_api::shared::AdditionalMetadata>,
) -> serde_json::Value {
    let Some(new) = new else {
        return serde_json::Value::Null;
    };
    let side = |old: Option<&std::collections::BTreeMap<String, String>>,
                new: Option<&std::collections::BTreeMap<String, String>>| {
        let mut map = serde_json::Map::new();
        for key in old.into_iter().flatten().map(|(k, _)| k) {
            map.insert(key.clone(), serde_json::Value::Null);
        }
        for (key, value) in new.into_iter().flatten() {
            map.insert(key.clone(), serde_json::Value::String(value.clone()));
        }
        serde_json::Value::Object(map)
    };
    serde_json::json!({
        "labels": side(old.and_then(|o| o.labels.as_ref()), new.labels.as_ref()),
        "annotations": side(old.and_then(|o| o.annotations.as_ref()), new.annotations.as_ref()),
    })
}

/// The labels and annotations `old` (the metadata the member's Pods were given) has and `new`
/// (the target) lacks, that the live Pod still carries, leaving out the operator's own keys:
/// what a metadata change removes in place.
pub fn removed_metadata(
    old: Option<&etcd_operator_api::shared::AdditionalMetadata>,
    new: Option<&etcd_operator_api::shared::AdditionalMetadata>,
    own_labels: &std::collections::BTreeMap<String, String>,
    pod_labels: &std::collections::BTreeMap<String, String>,
    pod_annotations: &std::collections::BTreeMap<String, String>,
) -> (Vec<String>, Vec<String>) {
    let reserved = |k: &String| k.starts_with(super::metadata::RESERVED_PREFIX);
    let gone = |old: Option<&std::collections::BTreeMap<String, String>>,
                new: Option<&std::collections::BTreeMap<String, String>>,
                on_pod: &std::collections::BTreeMap<String, String>,
                own: bool| {
        old.into_iter()
            .flatten()
            .map(|(k, _)| k)
            .filter(|k| {
                !reserved(k)
                    && !new.is_some_and(|n| n.contains_key(*k))
                    && on_pod.contains_key(*k)
                    && !(own
                        && (own_labels.contains_key(*k) || *k == etcd_operator_api::labels::ROLE))
            })
            .cloned()
            .collect::<Vec<_>>()
    };
    (
        gone(
            old.and_then(|o| o.labels.as_ref()),
            new.and_then(|n| n.labels.as_ref()),
            pod_labels,
            true,
        ),
        gone(
            old.and_then(|o| o.annotations.as_ref()),
            new.and_then(|n| n.annotations.as_ref()),
            pod_annotations,
            false,
        ),
    )
}

/// The labels and annotations of `additional` that the live Pod lacks (or holds another value
/// of), leaving out the operator's own keys: what a metadata change patches in place.
pub fn missing_metadata(
    additional: Option<&etcd_operator_api::shared::AdditionalMetadata>,
    own_labels: &std::collections::BTreeMap<String, String>,
    pod_labels: &std::collections::BTreeMap<String, String>,
    pod_annotations: &std::collections::BTreeMap<String, String>,
) -> (
    std::collections::BTreeMap<String, String>,
    std::collections::BTreeMap<String, String>,
) {
    let reserved = |k: &String| k.starts_with(super::metadata::RESERVED_PREFIX);
    let Some(additional) = additional else {
        return Default::default();
    };
    let labels = additional
        .labels
        .iter()
        .flatten()
        .filter(|(k, v)| {
            !reserved(k)
                && !own_labels.contains_key(*k)
                && *k != etcd_operator_api::labels::ROLE
                && pod_labels.get(*k) != Some(v)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let annotations = additional
        .annotations
        .iter()
        .flatten()
        .filter(|(k, v)| !reserved(k) && pod_annotations.get(*k) != Some(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (labels, annotations)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_metadata_is_what_the_old_had_the_new_lacks_and_the_pod_carries() {
        use etcd_operator_api::shared::AdditionalMetadata;
        let map = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let old = AdditionalMetadata {
            labels: Some(map(&[
                ("team", "a"),
                ("tier", "x"),
                ("app.kubernetes.io/component", "user"),
                ("etcd-operator.cozystack.io/role", "x"),
            ])),
            annotations: Some(map(&[("owner", "ops"), ("keep", "1"), ("absent", "1")])),
        };
        let new = AdditionalMetadata {
            labels: Some(map(&[("team", "b")])),
            annotations: Some(map(&[("keep", "2")])),
        };
        let own = map(&[("app.kubernetes.io/component", "etcd-0")]);
        let pod_labels = map(&[
            ("team", "a"),
            ("tier", "x"),
            ("app.kubernetes.io/component", "etcd-0"),
        ]);
        let pod_annotations = map(&[("owner", "ops"), ("keep", "1")]);
        let (labels, annotations) =
            removed_metadata(Some(&old), Some(&new), &own, &pod_labels, &pod_annotations);
        // `team` stays (changed, not removed); the operator's own and reserved keys stay; a
        // key the Pod does not carry is not asked to go.
        assert_eq!(labels, vec!["tier".to_string()]);
        assert_eq!(annotations, vec!["owner".to_string()]);
        // No target at all: every old key the Pod carries goes.
        let (labels, annotations) =
            removed_metadata(Some(&old), None, &own, &pod_labels, &pod_annotations);
        assert_eq!(labels, vec!["team".to_string(), "tier".to_string()]);
        assert_eq!(annotations, vec!["keep".to_string(), "owner".to_string()]);
        // Nothing before: nothing to remove.
        assert_eq!(
            removed_metadata(None, Some(&new), &own, &pod_labels, &pod_annotations),
            (vec![], vec![])
        );
    }

    #[test]
    fn the_digest_follows_every_field_and_nothing_else() {
        let base = MemberConfig::default();
        let quota = MemberConfig {
            options: Some(EtcdOptions {
                quota_backend_bytes: Some(1 << 30),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(base.digest(), MemberConfig::default().digest());
        assert_ne!(base.digest(), quota.digest());
        assert_eq!(quota.differences(&base), vec!["options"]);
        let json = serde_json::to_value(&base).unwrap();
        assert!(json["options"].is_null() && json["imagePullSecrets"].is_null());
    }

    #[test]
    fn metadata_patches_replace_and_skip_the_operators_keys() {
        use etcd_operator_api::shared::AdditionalMetadata;
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let old = AdditionalMetadata {
            labels: Some(map(&[("team", "a"), ("gone", "x")])),
            annotations: None,
        };
        let new = AdditionalMetadata {
            labels: Some(map(&[("team", "b")])),
            annotations: Some(map(&[("note", "n")])),
        };
        let patch = replacing_patch(Some(&old), Some(&new));
        assert_eq!(patch["labels"]["team"], "b");
        assert!(patch["labels"]["gone"].is_null());
        assert_eq!(patch["annotations"]["note"], "n");
        assert!(replacing_patch(Some(&old), None).is_null());

        let own = map(&[("app.kubernetes.io/component", "etcd-0")]);
        let wanted = AdditionalMetadata {
            labels: Some(map(&[
                ("team", "b"),
                ("app.kubernetes.io/component", "mine"),
                ("etcd-operator.cozystack.io/x", "y"),
            ])),
            annotations: Some(map(&[("note", "n")])),
        };
        let (labels, annotations) = missing_metadata(
            Some(&wanted),
            &own,
            &map(&[("team", "a")]),
            &map(&[("note", "n")]),
        );
        assert_eq!(labels, map(&[("team", "b")]));
        assert!(annotations.is_empty());
    }
}
