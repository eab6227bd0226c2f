//! The labels the operator puts on the objects it creates, as the reference operator sets them,
//! the selectors built from them, and the quorum arithmetic those selectors serve (the
//! PodDisruptionBudget over voters).

use std::collections::BTreeMap;

/// Label key naming the EtcdCluster an object belongs to.
pub const CLUSTER: &str = "etcd-operator.cozystack.io/cluster";

/// Label key of the member's raft role; only voters carry it (value [`ROLE_VOTER`]), so the
/// PodDisruptionBudget selects voters alone.
pub const ROLE: &str = "etcd-operator.cozystack.io/role";

/// The value of [`ROLE`] on a voting member's Pod.
pub const ROLE_VOTER: &str = "voter";

/// `app.kubernetes.io/name`, always [`NAME_ETCD`].
pub const NAME: &str = "app.kubernetes.io/name";

/// The value of [`NAME`].
pub const NAME_ETCD: &str = "etcd";

/// `app.kubernetes.io/instance`: the EtcdCluster's name.
pub const INSTANCE: &str = "app.kubernetes.io/instance";

/// `app.kubernetes.io/managed-by`, always [`MANAGED_BY_OPERATOR`].
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// The value of [`MANAGED_BY`].
pub const MANAGED_BY_OPERATOR: &str = "etcd-operator";

/// `app.kubernetes.io/component`: the EtcdMember's name, on member-level objects.
pub const COMPONENT: &str = "app.kubernetes.io/component";

/// The finalizer on every EtcdMember: the member leaves etcd before its objects go.
pub const MEMBER_FINALIZER: &str = "etcd-operator.cozystack.io/member-cleanup";

/// On a member's Pod: etcd's `--initial-cluster`, which the etcd container reads from this
/// annotation (the downward API, as `ETCD_INITIAL_CLUSTER`) each time it starts.
pub const INITIAL_CLUSTER_ANNOTATION: &str = "etcd-operator.cozystack.io/initial-cluster";

/// On a member's Pod: etcd's `--initial-cluster-state` (`new` or `existing`), read like
/// [`INITIAL_CLUSTER_ANNOTATION`] as `ETCD_INITIAL_CLUSTER_STATE`.
pub const INITIAL_CLUSTER_STATE_ANNOTATION: &str =
    "etcd-operator.cozystack.io/initial-cluster-state";

/// The labels of cluster-level objects (Services, the PodDisruptionBudget).
pub fn cluster_labels(cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME.to_owned(), NAME_ETCD.to_owned()),
        (INSTANCE.to_owned(), cluster.to_owned()),
        (MANAGED_BY.to_owned(), MANAGED_BY_OPERATOR.to_owned()),
        (CLUSTER.to_owned(), cluster.to_owned()),
    ])
}

/// The labels of member-level objects (the Pod, the PVC, the EtcdMember): the cluster's labels
/// plus [`COMPONENT`]. The role label is not included: it follows the member's raft role.
pub fn member_labels(cluster: &str, member: &str) -> BTreeMap<String, String> {
    let mut labels = cluster_labels(cluster);
    labels.insert(COMPONENT.to_owned(), member.to_owned());
    labels
}

/// The selector of every Pod of a cluster, in label-selector string form.
pub fn cluster_selector(cluster: &str) -> String {
    format!("{CLUSTER}={cluster}")
}

/// The selector of one member's Pod, in label-selector string form.
pub fn member_selector(cluster: &str, member: &str) -> String {
    format!("{CLUSTER}={cluster},{COMPONENT}={member}")
}

/// The number of voters that form a quorum among `voters`: a strict majority.
pub fn quorum(voters: u32) -> u32 {
    voters / 2 + 1
}

/// How many of `voters` can fail while the rest still form a quorum.
pub fn fault_tolerance(voters: u32) -> u32 {
    voters.saturating_sub(1) / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_is_a_strict_majority() {
        let expected = [(0, 1), (1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (7, 4)];
        for (voters, size) in expected {
            assert_eq!(quorum(voters), size, "quorum of {voters}");
        }
    }

    #[test]
    fn fault_tolerance_leaves_a_quorum() {
        for voters in 1..10 {
            assert!(voters - fault_tolerance(voters) >= quorum(voters));
            assert!(voters - fault_tolerance(voters) - 1 < quorum(voters));
        }
        assert_eq!(fault_tolerance(0), 0);
    }

    #[test]
    fn selectors_match_the_reference_operator() {
        assert_eq!(
            cluster_selector("a"),
            "etcd-operator.cozystack.io/cluster=a"
        );
        assert_eq!(
            member_selector("a", "a-1"),
            "etcd-operator.cozystack.io/cluster=a,app.kubernetes.io/component=a-1"
        );
        let labels = member_labels("a", "a-1");
        assert_eq!(labels.len(), 5);
        assert_eq!(labels[COMPONENT], "a-1");
        assert_eq!(labels[INSTANCE], "a");
    }
}
