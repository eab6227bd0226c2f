//! The observed state of an EtcdCluster.

use k8s_openapi::api::core::v1::{
    Affinity, LocalObjectReference, ResourceRequirements, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::shared::{AdditionalMetadata, EtcdOptions, StorageSpec};

/// What the operator last observed of a cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdClusterStatus {
    /// Members that are healthy and serving; the current scale of the `/scale` subresource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_members: Option<i32>,

    /// Label selector matching every Pod of the cluster
    /// ("etcd-operator.cozystack.io/cluster=<name>"), read through the `/scale` subresource by
    /// autoscalers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,

    /// Members the operator considers broken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken_members: Option<i32>,

    /// etcd's cluster ID in hexadecimal (for example "769f1c9e0d723d0b"), set after the first
    /// bootstrap; a string because a uint64 can exceed JSON's safe integers.
    #[serde(rename = "clusterID", skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,

    /// The --initial-cluster-token recorded at bootstrap and reused for every member added
    /// later.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_token: Option<String>,

    /// True once the operator has turned authentication on in etcd; never cleared. The
    /// operator presents the root credentials only when it is true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_enabled: Option<bool>,

    /// The target the operator is working toward, taken from the spec when the previous
    /// target was reached or its deadline passed; spec changes in between wait. Unset before
    /// the first reconciliation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed: Option<ObservedClusterSpec>,

    /// When the operator gives up on the current target and adopts the latest spec. Cleared
    /// when the target is reached; setting it to a past time aborts a stuck target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_deadline: Option<Time>,

    /// The latest observations of the cluster: Available, Progressing, Degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,

    /// Each member as etcd reports it, keyed by EtcdMember name. An extension of this
    /// implementation.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub members: Option<Vec<ClusterMemberStatus>>,

    /// Name of the EtcdMember that is etcd's leader, when one is known. An extension of this
    /// implementation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,

    /// Set once when the cluster was bootstrapped from `spec.bootstrap.restore`: the snapshot
    /// it was restored from and the revision etcd reported when the restored seed first
    /// answered. An extension of this implementation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<RestoredFrom>,

    /// The last lost-quorum recovery: written before its first destructive step, so an
    /// operator that dies at any point resumes it. An extension of this implementation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum_recovery: Option<super::recovery::QuorumRecoveryStatus>,

    /// The current or last remediation of etcd's NOSPACE alarm: its phase, written before
    /// each step, and every member's backend size when it began and now. An extension of this
    /// implementation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_space_remediation: Option<NoSpaceRemediationStatus>,
}

/// Where a NOSPACE remediation stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum NoSpacePhase {
    /// Waiting until every member answers and the voters are healthy, or for a
    /// higher-priority repair.
    Waiting,
    /// Compacting the keyspace up to the current revision.
    Compacting,
    /// Defragmenting a member over 90 % of its quota (followers first, the leader last).
    Defragmenting,
    /// Every member is below 90 % of its quota: disarming the alarm.
    Disarming,
    /// Compacted and defragmented, yet the live data is over 90 % of the quota: raise
    /// `spec.options.quotaBackendBytes` or delete keys.
    QuotaExceeded,
    /// The cluster's `etcd-operator.cozystack.io/nospace-remediation: manual` annotation
    /// leaves it to a person (an EtcdDefrag).
    Manual,
    /// The alarm is gone.
    Remedied,
}

/// One NOSPACE remediation.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NoSpaceRemediationStatus {
    pub phase: NoSpacePhase,
    /// When the operator first saw the alarm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the alarm was seen gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// What the operator is doing or waiting for, in its words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The revision the keyspace was compacted to, when this remediation compacted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted_revision: Option<i64>,
    /// Each member's backend, keyed by EtcdMember name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub members: Vec<NoSpaceMemberSizes>,
}

/// A member's backend during a NOSPACE remediation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NoSpaceMemberSizes {
    pub name: String,
    /// The quota it runs with (its quotaBackendBytes, else etcd's 2 GiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_bytes: Option<i64>,
    /// Its database file's size when the remediation began (or when it first answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_size_before: Option<i64>,
    /// Its database file's size as last seen during the remediation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_size_after: Option<i64>,
    /// The live data in it as last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_size_in_use: Option<i64>,
    /// The keyspace revision at which the remediation last defragmented it. etcd recomputes
    /// the in-use size only when it next commits a write, which NOSPACE refuses, so right
    /// after a compaction the in-use size is stale: every member over the limit is
    /// defragmented once per compacted revision, whatever it reports in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defragmented_at_revision: Option<i64>,
}

/// Where a restored cluster's data came from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoredFrom {
    /// The snapshot, as `s3://<bucket>/<key>`.
    #[serde(default)]
    pub uri: String,
    /// etcd's revision when the restored seed first answered (the snapshot's revision when
    /// no client wrote before the operator looked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// When the operator recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
}

/// The target spec the operator is working toward, latched from `spec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedClusterSpec {
    /// Target member count.
    pub replicas: i32,

    /// Target etcd version.
    pub version: String,

    /// Target storage of the members.
    pub storage: StorageSpec,

    /// Target resources of the members' etcd container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::resource_requirements")]
    pub resources: Option<ResourceRequirements>,

    /// Target scheduling affinity of the member Pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::affinity")]
    pub affinity: Option<Affinity>,

    /// Target spread constraints of the member Pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::topology_spread_constraints")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,

    /// Target extra labels and annotations of created objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_metadata: Option<AdditionalMetadata>,

    /// Target etcd tuning flags of the members.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<EtcdOptions>,

    /// Target image pull Secrets of the member Pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::local_object_references")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
}

/// One member of the cluster as etcd reports it. An extension of this implementation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterMemberStatus {
    /// Name of the EtcdMember.
    pub name: String,

    /// etcd's member ID in hexadecimal, once the member has been added to etcd.
    #[serde(rename = "memberID", skip_serializing_if = "Option::is_none")]
    pub member_id: Option<String>,

    /// True while the member is a learner (not yet promoted to a voter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_learner: Option<bool>,

    /// True when the member is etcd's leader.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_leader: Option<bool>,

    /// True when the member answered its last status request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,

    /// etcd server version the member reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,

    /// Physical size of the member's backend database, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_size: Option<i64>,

    /// Bytes of the backend database in use; `dbSize` minus this is what a defragmentation
    /// can reclaim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_size_in_use: Option<i64>,

    /// etcd's active alarms raised by this member (`NOSPACE`, `CORRUPT`); unset when it has
    /// none or etcd's alarm list could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alarms: Option<Vec<String>>,
}
