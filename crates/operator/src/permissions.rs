//! Every Kubernetes permission the operator uses, and the call that uses it. The ClusterRole
//! in `deploy/rbac/` (and the Helm chart's copy) must grant exactly these: a unit test fails on
//! a missing or an extra rule, and the end-to-end tests run the operator under that role.

/// One RBAC rule: an API group, a resource (or `resource/subresource`), its verbs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permission {
    pub group: &'static str,
    pub resource: &'static str,
    pub verbs: &'static [&'static str],
    /// Which code needs it.
    pub used_by: &'static str,
}

const GROUP: &str = etcd_operator_api::GROUP;

/// What the reconciler needs, cluster-wide (or in the watched namespace).
pub const CLUSTER_PERMISSIONS: &[Permission] = &[
    Permission {
        group: GROUP,
        resource: "etcdclusters",
        verbs: &["get", "list", "watch", "patch"],
        used_by: "the controller's watch; reconcile::finalizer patches the cluster-cleanup finalizer",
    },
    Permission {
        group: GROUP,
        resource: "etcdclusters/status",
        verbs: &["update"],
        used_by: "act::status replaces the status with the observed resourceVersion",
    },
    Permission {
        group: GROUP,
        resource: "etcdclusters/finalizers",
        verbs: &["update"],
        used_by: "owner references with blockOwnerDeletion to an EtcdCluster (Services, PDB, EtcdMembers), where OwnerReferencesPermissionEnforcement is on",
    },
    Permission {
        group: GROUP,
        resource: "etcdmembers",
        verbs: &["get", "list", "watch", "create", "delete", "patch"],
        used_by: "observe's cache and cache-miss reads; act creates, deletes, patches spec.dormant, the member-cleanup finalizer and a changed additionalMetadata",
    },
    Permission {
        group: GROUP,
        resource: "etcdmembers/status",
        verbs: &["update"],
        used_by: "act::status writes each member's phase before the mutation it describes",
    },
    Permission {
        group: GROUP,
        resource: "etcdmembers/finalizers",
        verbs: &["update"],
        used_by: "owner references with blockOwnerDeletion to an EtcdMember (its Pod and PVC)",
    },
    Permission {
        group: GROUP,
        resource: "etcdsnapshots",
        verbs: &["get", "list", "watch", "create", "delete", "patch"],
        used_by: "snapshot::controller's watch and its artifact finalizer (deletionPolicy Delete); an EtcdSnapshotSchedule creates its snapshots and deletes those beyond retention",
    },
    Permission {
        group: GROUP,
        resource: "etcdsnapshots/status",
        verbs: &["patch"],
        used_by: "snapshot::controller records phase, artifact, Ready condition and the extension fields",
    },
    Permission {
        group: GROUP,
        resource: "etcdsnapshotschedules",
        verbs: &["get", "list", "watch"],
        used_by: "the EtcdSnapshotSchedule controller's watch and fresh reads",
    },
    Permission {
        group: GROUP,
        resource: "etcdsnapshotschedules/status",
        verbs: &["update"],
        used_by: "the EtcdSnapshotSchedule controller writes lastScheduleTime, lastSuccessfulTime, active, kept",
    },
    Permission {
        group: GROUP,
        resource: "etcddefrags",
        verbs: &["get", "list", "watch", "create", "delete"],
        used_by: "the EtcdDefrag controller's watch and fresh reads; an EtcdDefragPolicy creates its runs; ttlSecondsAfterFinished and historyLimit delete finished ones",
    },
    Permission {
        group: GROUP,
        resource: "etcddefrags/status",
        verbs: &["update"],
        used_by: "the EtcdDefrag controller writes each member's outcome before the next",
    },
    Permission {
        group: GROUP,
        resource: "etcddefragpolicies",
        verbs: &["get", "list", "watch"],
        used_by: "the EtcdDefragPolicy controller's watch and fresh reads",
    },
    Permission {
        group: GROUP,
        resource: "etcddefragpolicies/status",
        verbs: &["update"],
        used_by: "the EtcdDefragPolicy controller writes lastScheduleTime, lastSuccessfulTime, active",
    },
    Permission {
        group: GROUP,
        resource: "etcddefragpolicies/finalizers",
        verbs: &["update"],
        used_by: "owner references with blockOwnerDeletion from a stamped EtcdDefrag to its policy",
    },
    Permission {
        group: "",
        resource: "pods",
        verbs: &["get", "list", "watch", "create", "delete", "patch"],
        used_by: "observe; act creates and deletes member Pods and patches the voter label",
    },
    Permission {
        group: "",
        resource: "persistentvolumeclaims",
        verbs: &["get", "list", "watch", "create", "delete", "patch"],
        used_by: "observe; act creates and deletes member data volumes, expands them (storage growth), hands a retained one to its EtcdCluster (or releases it) by patching its owner references, and patches a changed additionalMetadata onto it",
    },
    Permission {
        group: "storage.k8s.io",
        resource: "storageclasses",
        verbs: &["get"],
        used_by: "observe asks a PVC's StorageClass whether it allows volume expansion (only while the PVC is to grow)",
    },
    Permission {
        group: "",
        resource: "services",
        verbs: &["get", "list", "watch", "create", "update", "patch"],
        used_by: "observe; act creates the headless and client Services, repairs their drift and patches a changed additionalMetadata onto them",
    },
    Permission {
        group: "policy",
        resource: "poddisruptionbudgets",
        verbs: &[
            "get", "list", "watch", "create", "update", "delete", "patch",
        ],
        used_by: "observe; act keeps the voters' PodDisruptionBudget and patches a changed additionalMetadata onto it",
    },
    Permission {
        group: "",
        resource: "events",
        verbs: &["create"],
        used_by: "reconcile::events records an Event per action",
    },
    Permission {
        group: "",
        resource: "secrets",
        verbs: &["get", "create", "update", "delete"],
        used_by: "observe reads the TLS Secrets of spec.tls by name at every pass; with operatorIssued, act writes the cluster's CA, each member's and the operator's certificate Secrets; the snapshot controller reads an EtcdSnapshot's destination.s3.credentialsSecretRef, and for destination.pvc creates (then deletes) the access Secret of its agent Pod",
    },
    Permission {
        group: "cert-manager.io",
        resource: "certificates",
        verbs: &["get", "create", "patch"],
        used_by: "spec.tls with certManager: the operator creates its Certificates and patches back hand edits",
    },
    Permission {
        group: "cert-manager.io",
        resource: "issuers",
        verbs: &["get"],
        used_by: "a Certificate that is not Ready: whether the Issuer it names exists",
    },
    Permission {
        group: "cert-manager.io",
        resource: "clusterissuers",
        verbs: &["get"],
        used_by: "a Certificate that is not Ready: whether the ClusterIssuer it names exists",
    },
];

/// What leader election needs, in the Lease's namespace only.
pub const LEASE_PERMISSIONS: &[Permission] = &[Permission {
    group: "coordination.k8s.io",
    resource: "leases",
    verbs: &["get", "create", "update"],
    used_by: "leader: read, create, renew, take over and release the leader Lease",
}];
