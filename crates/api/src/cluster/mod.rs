//! `EtcdCluster`: the desired state of one etcd cluster.

mod recovery;
mod retention;
mod security;
mod status;

pub use recovery::{
    DEFAULT_RECOVERY_AFTER, QuorumRecoveryMember, QuorumRecoveryMode, QuorumRecoveryPhase,
    QuorumRecoverySnapshot, QuorumRecoverySpec, QuorumRecoveryStatus, RECOVER_FROM_SNAPSHOT_PREFIX,
    RECOVER_QUORUM_ANNOTATION,
};
pub use retention::{PvcRetention, PvcRetentionPolicy};

pub use security::{
    AuthSpec, BootstrapSpec, CertificateLifetimes, ClientCertManagerTls, ClientOperatorIssuedTls,
    ClientTls, DEFAULT_CA_DURATION, DEFAULT_CERTIFICATE_DURATION, DURATION_PATTERN, EtcdClusterTls,
    IssuerKind, IssuerReference, PeerCertManagerTls, PeerOperatorIssuedTls, PeerTls,
    parse_duration,
};
pub use status::{
    ClusterMemberStatus, EtcdClusterStatus, NoSpaceMemberSizes, NoSpacePhase,
    NoSpaceRemediationStatus, ObservedClusterSpec, RestoredFrom,
};

use k8s_openapi::api::core::v1::{
    Affinity, LocalObjectReference, ResourceRequirements, TopologySpreadConstraint,
};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::labels;
use crate::shared::{AdditionalMetadata, EtcdOptions, StorageSpec};

/// The member count of a cluster whose `replicas` is not set.
pub const DEFAULT_REPLICAS: i32 = 3;

/// The progress deadline, in seconds, of a cluster whose `progressDeadlineSeconds` is not set.
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: i32 = 600;

/// The desired state of an etcd cluster.
// clippy reads the repeated `printcolumn(type_ = ...)` of the derive as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "etcd-operator.cozystack.io",
    version = "v1alpha2",
    kind = "EtcdCluster",
    plural = "etcdclusters",
    singular = "etcdcluster",
    shortname = "etcdc",
    category = "etcd-operator",
    namespaced,
    status = "EtcdClusterStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "EtcdCluster is an etcd cluster the operator runs: one Pod and one EtcdMember per member, membership changed one step at a time through etcd's own membership API.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.readyMembers",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version"),
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyMembers"),
    printcolumn(
        name = "Available",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Available\")].status",
    ),
    printcolumn(name = "Leader", type_ = "string", json_path = ".status.leader",),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Progress",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Progressing\")].reason",
        priority = 1,
    ),
    printcolumn(
        name = "Cluster ID",
        type_ = "string",
        json_path = ".status.clusterID",
        priority = 1,
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!(has(self.replicas) && self.replicas == 0 && has(self.storage) && has(self.storage.medium) && self.storage.medium == 'Memory')").message("spec.replicas=0 with spec.storage.medium=Memory is unsupported: pausing a memory-backed cluster wedges on resume. Delete and recreate the cluster instead."),
    validation = Rule::new("!(has(self.storage) && has(self.storage.medium) && self.storage.medium == 'Memory') || quantity(string(self.storage.size)).isGreaterThan(quantity('0'))").message("spec.storage.size must be > 0 when spec.storage.medium=Memory (the tmpfs sizeLimit cannot be zero)."),
    validation = Rule::new("has(self.tls) == has(oldSelf.tls)").message("spec.tls cannot be added to or removed from an existing cluster; delete and recreate"),
    validation = Rule::new("!has(self.tls) || !has(oldSelf.tls) || self.tls == oldSelf.tls").message("spec.tls is immutable post-create; delete and recreate the cluster to change TLS configuration"),
    validation = Rule::new("has(self.storage.storageClassName) == has(oldSelf.storage.storageClassName)").message("spec.storage.storageClassName cannot be added to or removed from an existing cluster; delete and recreate"),
    validation = Rule::new("!has(self.storage.storageClassName) || !has(oldSelf.storage.storageClassName) || self.storage.storageClassName == oldSelf.storage.storageClassName").message("spec.storage.storageClassName is immutable post-create (a PVC's storageClassName itself is immutable, and the operator does not roll PVCs); delete and recreate the cluster to change the StorageClass"),
    validation = Rule::new("has(self.auth) == has(oldSelf.auth)").message("spec.auth cannot be added to or removed from an existing cluster; delete and recreate"),
    validation = Rule::new("!has(self.auth) || !has(oldSelf.auth) || self.auth == oldSelf.auth").message("spec.auth is immutable post-create; delete and recreate the cluster to change auth configuration"),
    validation = Rule::new("!(has(self.auth) && self.auth.enabled) || (has(self.tls) && has(self.tls.client))").message("spec.auth.enabled requires spec.tls.client (auth credentials must not cross a plaintext connection)"),
    validation = Rule::new("!(has(self.auth) && self.auth.enabled) || has(self.auth.rootCredentialsSecretRef)").message("spec.auth.enabled requires spec.auth.rootCredentialsSecretRef"),
    validation = Rule::new("has(self.bootstrap) == has(oldSelf.bootstrap)").message("spec.bootstrap cannot be added to or removed from an existing cluster; it is consulted only at first bootstrap"),
    validation = Rule::new("!has(self.bootstrap) || !has(oldSelf.bootstrap) || self.bootstrap == oldSelf.bootstrap").message("spec.bootstrap is immutable post-create; it is consulted only at first bootstrap"),
    validation = Rule::new("!(has(self.bootstrap) && has(self.bootstrap.restore)) || !(has(self.storage) && has(self.storage.medium) && self.storage.medium == 'Memory')").message("spec.bootstrap.restore is unsupported with spec.storage.medium=Memory: the restored data dir is tmpfs, so any seed Pod restart re-restores the snapshot — reverting writes (single member) or breaking the cluster with a fresh ID it can't rejoin (multi-member). Use persistent storage to restore."),
)]
pub struct EtcdClusterSpec {
    /// Number of members; odd numbers make the best use of quorum. Defaults to 3. 0 parks the
    /// cluster: the last member's Pod is deleted but its EtcdMember and PVC are kept, and scaling
    /// back up resumes etcd from the same data with the same cluster and member IDs.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 3))]
    pub replicas: Option<i32>,

    /// etcd version to run, as MAJOR.MINOR.PATCH (for example "3.6.11").
    #[schemars(regex(pattern = r"^\d+\.\d+\.\d+$"))]
    pub version: String,

    /// Each member's data directory: size and medium (PVC or tmpfs). Defaults to a 1Gi PVC.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"size": "1Gi", "medium": ""}))]
    pub storage: Option<StorageSpec>,

    /// Seconds the operator keeps working toward a target state before it gives up on it and
    /// adopts the latest spec instead. Defaults to 600. Setting status.progressDeadline to a
    /// past time aborts a stuck target at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 600))]
    pub progress_deadline_seconds: Option<i32>,

    /// Transport security of the client API (port 2379) and the peer API (port 2380). Unset
    /// means plaintext on both. Fixed at creation: it cannot be added, removed or changed
    /// afterwards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<EtcdClusterTls>,

    /// Authentication inside etcd. Unset means none. Fixed at creation: it cannot be added,
    /// removed or changed afterwards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSpec>,

    /// How a new cluster starts, for example from a snapshot. Read only at the first bootstrap
    /// and fixed at creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<BootstrapSpec>,

    /// Resource requests and limits of the etcd container. Unset means 100m CPU and 128Mi
    /// memory requests and no limits. Memory-backed clusters should set a memory limit that
    /// covers the tmpfs size plus etcd's own use. A change is rolled out to the running
    /// members one at a time, the leader last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::resource_requirements")]
    pub resources: Option<ResourceRequirements>,

    /// Labels and annotations added to every object the operator creates for this cluster
    /// (Pods, PVCs, Services, the PodDisruptionBudget, EtcdMembers). The operator's own keys
    /// win on collision. A change is patched onto the existing objects in place (no
    /// restart; keys taken out are removed) and applies to objects created later.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_metadata: Option<AdditionalMetadata>,

    /// Scheduling affinity of member Pods, copied to each Pod's spec.affinity. A change is
    /// rolled out to the running members one at a time, the leader last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::affinity")]
    pub affinity: Option<Affinity>,

    /// How member Pods spread over zones and nodes, copied to each Pod's
    /// spec.topologySpreadConstraints. A change is rolled out to the running members one at
    /// a time, the leader last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::topology_spread_constraints")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,

    /// etcd tuning flags for each member's command line. A change is rolled out to the
    /// running members one at a time, the leader last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<EtcdOptions>,

    /// Secrets in the cluster's namespace used to pull the etcd image from a private
    /// registry, copied to each Pod's spec.imagePullSecrets. A change is rolled out to the
    /// running members one at a time, the leader last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::local_object_references")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,

    /// When true the operator takes no action on this cluster (no Pod, member or etcd
    /// changes) but keeps writing its status, so a human can intervene. An extension of this
    /// implementation; unset means false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,

    /// Lost-quorum recovery: `mode` `Manual` (default: only a person starts it, with the
    /// `etcd-operator.cozystack.io/recover-quorum` annotation) or `Automatic` (the operator
    /// too, once a majority's data has been gone for `after`, default 5m). An extension of
    /// this implementation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum_recovery: Option<QuorumRecoverySpec>,

    /// When the members' PVCs (their data) are deleted: on cluster deletion (`whenDeleted`)
    /// and on scale-in (`whenScaled`), both `Delete` by default. An EtcdMember deleted by
    /// hand always keeps its PVC, and its ordinal is not reused while that PVC exists. An
    /// extension of this implementation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim_retention_policy: Option<PvcRetentionPolicy>,
}

impl EtcdClusterSpec {
    /// `replicas` with the API's default applied.
    pub fn replicas_or_default(&self) -> i32 {
        self.replicas.unwrap_or(DEFAULT_REPLICAS)
    }

    /// `progressDeadlineSeconds` with the API's default applied.
    pub fn progress_deadline_seconds_or_default(&self) -> i32 {
        self.progress_deadline_seconds
            .unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS)
    }

    /// `storage` with the API's default applied.
    pub fn storage_or_default(&self) -> StorageSpec {
        self.storage.clone().unwrap_or_default()
    }

    /// `persistentVolumeClaimRetentionPolicy` with the API's defaults applied.
    pub fn pvc_retention_or_default(&self) -> PvcRetentionPolicy {
        self.persistent_volume_claim_retention_policy
            .unwrap_or_default()
    }

    /// Whether `paused` is set to true.
    pub fn is_paused(&self) -> bool {
        self.paused.unwrap_or(false)
    }
}

impl EtcdCluster {
    /// The label selector matching every Pod of this cluster, as `status.selector` carries it
    /// for the `/scale` subresource: `etcd-operator.cozystack.io/cluster=<name>`.
    pub fn selector_string(&self) -> String {
        labels::cluster_selector(self.metadata.name.as_deref().unwrap_or_default())
    }
}
