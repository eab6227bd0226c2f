//! The PodDisruptionBudget over the cluster's voters.

use std::collections::BTreeMap;

use etcd_operator_api::EtcdCluster;
use etcd_operator_api::labels::{CLUSTER, ROLE, ROLE_VOTER, cluster_labels, quorum};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::BuildError;
use super::metadata::{cluster_owner_reference, non_empty, with_additional_metadata};
use super::service::{cluster_name, target_metadata};

/// `minAvailable` for `voters` voters: their quorum, so a drain can take down at most the
/// members the cluster can lose.
pub fn pdb_min_available(voters: u32) -> i32 {
    quorum(voters) as i32
}

/// The PodDisruptionBudget `<cluster>` selecting the cluster's voter Pods (cluster label and
/// `role=voter`; learners are not protected, they do not count toward quorum).
pub fn voter_pdb(cluster: &EtcdCluster, voters: u32) -> Result<PodDisruptionBudget, BuildError> {
    let name = cluster_name(cluster)?;
    let (labels, annotations) = with_additional_metadata(
        cluster_labels(&name),
        BTreeMap::new(),
        target_metadata(cluster),
    );
    let mut annotations = annotations;
    if let Some(record) = super::metadata::metadata_record(target_metadata(cluster)) {
        annotations.insert(
            super::metadata::ADDITIONAL_METADATA_RECORD.to_string(),
            record,
        );
    }
    Ok(PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: cluster.metadata.namespace.clone(),
            labels: non_empty(labels),
            annotations: non_empty(annotations),
            owner_references: Some(vec![cluster_owner_reference(cluster)?]),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(pdb_min_available(voters))),
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([
                    (CLUSTER.to_string(), name),
                    (ROLE.to_string(), ROLE_VOTER.to_string()),
                ])),
                match_expressions: None,
            }),
            ..Default::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::tests_support::cluster;

    #[test]
    fn min_available_is_the_quorum_of_the_voters() {
        assert_eq!(pdb_min_available(1), 1);
        assert_eq!(pdb_min_available(3), 2);
        assert_eq!(pdb_min_available(4), 3);
        assert_eq!(pdb_min_available(5), 3);
    }

    #[test]
    fn pdb_selects_voters_of_the_cluster() {
        let pdb = voter_pdb(&cluster("etcd", 3), 3).unwrap();
        assert_eq!(pdb.metadata.name.as_deref(), Some("etcd"));
        let spec = pdb.spec.unwrap();
        assert_eq!(spec.min_available, Some(IntOrString::Int(2)));
        assert_eq!(spec.max_unavailable, None);
        let selector = spec.selector.unwrap().match_labels.unwrap();
        assert_eq!(selector["etcd-operator.cozystack.io/cluster"], "etcd");
        assert_eq!(selector["etcd-operator.cozystack.io/role"], "voter");
        assert_eq!(
            pdb.metadata.owner_references.unwrap()[0].kind,
            "EtcdCluster"
        );
    }
}
