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

#[cfg(test)]
mod tests {
    use super::*;

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
}
