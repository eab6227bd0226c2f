//! `EtcdSnapshot`: a one-shot snapshot of a cluster to S3 or a PVC.

use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::shared::SnapshotLocation;

/// A request for one snapshot of an EtcdCluster. Immutable in intent: to write elsewhere,
/// create another EtcdSnapshot.
// clippy reads the repeated `printcolumn(type_ = ...)` of the derive as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "etcd-operator.cozystack.io",
    version = "v1alpha2",
    kind = "EtcdSnapshot",
    plural = "etcdsnapshots",
    singular = "etcdsnapshot",
    namespaced,
    status = "EtcdSnapshotStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "EtcdSnapshot is a one-shot snapshot of an EtcdCluster, written to S3 or a PVC.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterRef.name"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct EtcdSnapshotSpec {
    /// The EtcdCluster, in the same namespace, to snapshot.
    #[schemars(schema_with = "crate::schema::local_object_reference")]
    pub cluster_ref: LocalObjectReference,

    /// Where the snapshot is written: S3 or a PVC.
    pub destination: SnapshotLocation,

    /// Extension: what deleting this EtcdSnapshot does to its stored object. `Retain` (the
    /// default, the reference behaviour) leaves it in the store; `Delete` removes it first
    /// (only an object this snapshot wrote). Snapshots an EtcdSnapshotSchedule stamps are
    /// `Delete`: the schedule's retention decides what is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<SnapshotDeletionPolicy>,
}

/// What deleting an EtcdSnapshot does to its stored object.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum SnapshotDeletionPolicy {
    /// The object stays in the store.
    #[default]
    Retain,
    /// The object is deleted before the EtcdSnapshot goes.
    Delete,
}

/// What the operator last observed of a snapshot.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdSnapshotStatus {
    /// Where the snapshot is in its lifecycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::plain_string")]
    pub phase: Option<SnapshotPhase>,

    /// The stored snapshot, once complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<SnapshotArtifact>,

    /// The latest observations: a single Ready condition, True only when complete, with the
    /// reason telling the state otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,

    /// Extension: when the operator started taking the snapshot (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,

    /// Extension: when the snapshot was stored and verified, or failed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,

    /// Extension: the etcd revision of the snapshot, from the member it was taken from, asked
    /// just before the stream began (a lower bound while writes continue during the stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,

    /// Extension: the EtcdMember the snapshot was streamed from (a healthy voter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,

    /// Extension: the etcd version of the member the snapshot came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_version: Option<String>,

    /// Extension: whether the stored object was read back and matched the size and SHA-256
    /// computed while it was written (True), or did not (False, and the phase is Failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,

    /// Extension: on failure, what went wrong in plain words (also the Ready condition's
    /// message), for example "the S3 credentials were refused".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
}

/// The lifecycle of a snapshot.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum SnapshotPhase {
    /// Accepted, not started.
    Pending,
    /// The snapshot is being taken.
    Started,
    /// The snapshot is stored; see `artifact`.
    Complete,
    /// The snapshot failed.
    Failed,
}

/// Where a finished snapshot is stored.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotArtifact {
    /// Full location, for example "s3://bucket/key.db" or "file:///snapshot/data/name.db".
    pub uri: String,

    /// Size of the snapshot in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<i64>,

    /// Checksum as "<algorithm>:<hex>", for example "sha256:abc123...".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
}
