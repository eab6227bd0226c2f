//! `EtcdMember`: one member of an etcd cluster, owning its Pod and PVC.

use k8s_openapi::api::core::v1::{
    Affinity, LocalObjectReference, ResourceRequirements, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::labels;
use crate::shared::{AdditionalMetadata, EtcdOptions, RestoreSpec, StorageSpec};

/// The desired state of one etcd member. Created and deleted by the operator for its
/// EtcdCluster; users do not create these.
// clippy reads the repeated `printcolumn(type_ = ...)` of the derive as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "etcd-operator.cozystack.io",
    version = "v1alpha2",
    kind = "EtcdMember",
    plural = "etcdmembers",
    singular = "etcdmember",
    shortname = "etcdm",
    category = "etcd-operator",
    namespaced,
    status = "EtcdMemberStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "EtcdMember is one member of an EtcdCluster: it owns the member's Pod and PVC and records the member's lifecycle. The operator creates and deletes these; users should not.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterName"),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version"),
    printcolumn(name = "Running", type_ = "string", json_path = ".status.version"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase",),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Voter",
        type_ = "boolean",
        json_path = ".status.isVoter",
        priority = 1,
    ),
    printcolumn(
        name = "Member ID",
        type_ = "string",
        json_path = ".status.memberID",
        priority = 1,
    ),
    printcolumn(
        name = "Recreated",
        type_ = "integer",
        json_path = ".status.recreateCount",
        priority = 1,
    )
)]
#[serde(rename_all = "camelCase")]
pub struct EtcdMemberSpec {
    /// Name of the EtcdCluster this member belongs to.
    #[schemars(length(min = 1))]
    pub cluster_name: String,

    /// etcd version this member runs (the image tag), as MAJOR.MINOR.PATCH.
    #[schemars(regex(pattern = r"^\d+\.\d+\.\d+$"))]
    pub version: String,

    /// The cluster's storage at the time this member was created; its size grows with the
    /// cluster's (storage growth), its medium and class never change.
    pub storage: StorageSpec,

    /// The cluster's container resources at the time this member was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::resource_requirements")]
    pub resources: Option<ResourceRequirements>,

    /// The cluster's extra labels and annotations at the time this member was created, merged
    /// onto the member's Pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_metadata: Option<AdditionalMetadata>,

    /// The cluster's scheduling affinity at the time this member was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::affinity")]
    pub affinity: Option<Affinity>,

    /// The cluster's spread constraints at the time this member was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::topology_spread_constraints")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,

    /// The cluster's etcd tuning flags at the time this member was created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<EtcdOptions>,

    /// The cluster's image pull Secrets at the time this member was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::local_object_references")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,

    /// True for the members that form a new cluster together: etcd starts with
    /// --initial-cluster-state=new instead of joining an existing cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<bool>,

    /// Value of etcd's --initial-cluster flag.
    pub initial_cluster: String,

    /// Value of etcd's --initial-cluster-token, copied from the cluster's status.clusterToken.
    pub cluster_token: String,

    /// Backs the `/scale` subresource; always 1, since a member is exactly one Pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1), extend("default" = 1))]
    pub replicas: Option<i32>,

    /// True while the cluster is scaled to zero: the member's Pod is deleted, its PVC kept,
    /// and etcd resumes from that data when the cluster scales up again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dormant: Option<bool>,

    /// What the member's Pod needs of the cluster's TLS, copied at creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<EtcdMemberTls>,

    /// Set only on the first member of a cluster restored from a snapshot: its data
    /// directory is filled from the snapshot before etcd starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreSpec>,
}

/// The part of the cluster's TLS a member's Pod mounts or configures.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdMemberTls {
    /// The cluster's client server Secret; unset means a plaintext client API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::local_object_reference")]
    pub client_server_secret_ref: Option<LocalObjectReference>,

    /// Whether etcd requires client certificates (--client-cert-auth), because the cluster
    /// has an operator client certificate.
    #[serde(rename = "clientMTLS", skip_serializing_if = "Option::is_none")]
    pub client_mtls: Option<bool>,

    /// The cluster's peer Secret; unset means a plaintext peer API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::local_object_reference")]
    pub peer_secret_ref: Option<LocalObjectReference>,

    /// Run the peer API with etcd's --peer-auto-tls (encrypted, not authenticated). Set by the
    /// operator only for clusters migrated from a legacy auto-TLS cluster; never by users.
    #[serde(rename = "peerAutoTLS", skip_serializing_if = "Option::is_none")]
    pub peer_auto_tls: Option<bool>,
}

/// What the operator last observed of a member.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdMemberStatus {
    /// etcd's member ID in hexadecimal, set once the member has been added to etcd.
    #[serde(rename = "memberID", skip_serializing_if = "Option::is_none")]
    pub member_id: Option<String>,

    /// Name of the member's Pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,

    /// UID of the member's Pod as last seen; for a memory-backed member, a recorded UID with
    /// no live Pod of that UID means its data is gone.
    #[serde(rename = "podUID", skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,

    /// True when etcd lists the member as a voter rather than a learner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_voter: Option<bool>,

    /// 1 when the member has a Pod, 0 otherwise; the current scale of the `/scale`
    /// subresource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Label selector matching the member's Pod, for the `/scale` subresource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,

    /// Name of the member's data PVC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pvc_name: Option<String>,

    /// etcd server version the member reports running, which can differ from spec.version
    /// (see the VersionDrifted condition).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,

    /// The latest observations of the member: Joined, Ready, VersionDrifted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,

    /// Where the member is in its lifecycle: Pending, Provisioning, Ready, Recreating,
    /// Replacing or Terminating. An extension of this implementation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<MemberPhase>,

    /// Times the member's Pod was created again on the same data; after three the member is
    /// replaced. An extension of this implementation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recreate_count: Option<i32>,

    /// When `phase` last changed. An extension of this implementation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_phase_transition_time: Option<Time>,
}

/// The lifecycle of a member. The operator writes a phase before it performs the change the
/// phase describes, so a restarted operator resumes where it stopped.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum MemberPhase {
    // Created, not yet worked on.
    Pending,
    // Being added to etcd (as a learner) and started, until it is a healthy voter.
    Provisioning,
    // A healthy voter.
    Ready,
    // Its Pod is being deleted and created again on the same data (repair level 1).
    Recreating,
    // Being removed from etcd, its data deleted, and added again (repair level 2).
    Replacing,
    // Leaving the cluster: removed from etcd, then its Pod and PVC deleted.
    Terminating,
}

impl MemberPhase {
    /// The wire form of the phase.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Provisioning => "Provisioning",
            Self::Ready => "Ready",
            Self::Recreating => "Recreating",
            Self::Replacing => "Replacing",
            Self::Terminating => "Terminating",
        }
    }
}

impl std::fmt::Display for MemberPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl EtcdMember {
    /// The label selector matching this member's Pod, as `status.selector` carries it:
    /// `etcd-operator.cozystack.io/cluster=<cluster>,app.kubernetes.io/component=<member>`.
    pub fn selector_string(&self) -> String {
        labels::member_selector(
            &self.spec.cluster_name,
            self.metadata.name.as_deref().unwrap_or_default(),
        )
    }
}
