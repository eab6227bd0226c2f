//! `EtcdDefrag`: a one-shot defragmentation of a cluster's members.

use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The reclaimable space above which a member is defragmented when the rule does not say.
pub const DEFAULT_FREE_SPACE_ABOVE: &str = "200Mi";

/// The smallest reclaim worth a defragmentation under quota pressure when the rule does not
/// say.
pub const DEFAULT_MIN_RECLAIM: &str = "32Mi";

/// A request to defragment the members of an EtcdCluster once.
// clippy reads the repeated `printcolumn(type_ = ...)` of the derive as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "etcd-operator.cozystack.io",
    version = "v1alpha2",
    kind = "EtcdDefrag",
    plural = "etcddefrags",
    singular = "etcddefrag",
    shortname = "etcddf",
    category = "etcd-operator",
    namespaced,
    status = "EtcdDefragStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "EtcdDefrag is a one-shot, run-to-completion defragmentation of an EtcdCluster's members. Like EtcdSnapshot it is a record: it runs once, through status.phase, and never again.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterRef.name"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Defragmented",
        type_ = "integer",
        json_path = ".status.defragmented"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"DefragChecked\")].reason",
        priority = 1,
    ),
    printcolumn(
        name = "Completed",
        type_ = "date",
        json_path = ".status.completedAt",
        priority = 1,
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("size(self.clusterRef.name) != 0").message("spec.clusterRef.name is required"))]
pub struct EtcdDefragSpec {
    /// The EtcdCluster, in the same namespace, to defragment.
    #[schemars(schema_with = "crate::schema::local_object_reference")]
    pub cluster_ref: LocalObjectReference,

    /// Which members to defragment. Unset means an empty rule: members with more than 200Mi
    /// reclaimable. `all: true` defragments every member.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<DefragRule>,

    /// Seconds after reaching a terminal phase at which this object should be deleted. Unset
    /// keeps it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
}

/// Which members are worth defragmenting. A defragmentation can only reclaim dbSize minus
/// dbSizeInUse, so that amount is the gate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!(has(self.all) && self.all) || (!has(self.freeSpaceAbove) && !has(self.quotaUsageAbove) && !has(self.minReclaim))").message("rule.all cannot be combined with freeSpaceAbove/quotaUsageAbove/minReclaim"),
    validation = Rule::new("!has(self.freeSpaceAbove) || quantity(string(self.freeSpaceAbove)).isGreaterThan(quantity('0'))").message("freeSpaceAbove must be greater than 0"),
    validation = Rule::new("!has(self.minReclaim) || quantity(string(self.minReclaim)).isGreaterThan(quantity('0'))").message("minReclaim must be greater than 0"),
    validation = Rule::new("!has(self.minReclaim) || has(self.quotaUsageAbove)").message("minReclaim is only meaningful with quotaUsageAbove"),
    validation = Rule::new("!(has(self.minReclaim) && has(self.freeSpaceAbove)) || quantity(string(self.minReclaim)).compareTo(quantity(string(self.freeSpaceAbove))) <= 0").message("minReclaim must not exceed freeSpaceAbove"),
)]
pub struct DefragRule {
    /// Defragment every member regardless of size. Not combinable with the thresholds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all: Option<bool>,

    /// Defragment a member whose reclaimable space exceeds this; always applied. Unset means
    /// 200Mi. Must be greater than 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::quantity")]
    pub free_space_above: Option<Quantity>,

    /// When a member's dbSize exceeds this share of the backend quota (NOSPACE approaching),
    /// lower the gate to `minReclaim`. An integer percentage from 1 to 100 with a "%", for
    /// example "80%".
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([1-9][0-9]?|100)%$"))]
    pub quota_usage_above: Option<String>,

    /// Under quota pressure, still skip a member that would reclaim less than this. Needs
    /// `quotaUsageAbove`, must not exceed `freeSpaceAbove`, must be greater than 0. Unset means
    /// 32Mi.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::quantity")]
    pub min_reclaim: Option<Quantity>,
}

/// What the operator last observed of a defragmentation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdDefragStatus {
    /// Where the defragmentation is in its lifecycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::plain_string")]
    pub phase: Option<DefragPhase>,

    /// When the sweep over the members began.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,

    /// When the sweep reached a terminal phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,

    /// Members actually defragmented by this run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defragmented: Option<i32>,

    /// The outcome for each member, keyed by EtcdMember name.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub members: Option<Vec<MemberDefragStatus>>,

    /// The latest observations, including why a Pending run waits (for example an unhealthy
    /// cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
}

/// The lifecycle of a defragmentation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DefragPhase {
    /// Queued: another defragmentation of the cluster runs, or the cluster is not healthy
    /// enough yet.
    Pending,
    /// The sweep over the members is in progress.
    Running,
    /// The sweep finished; see `members`.
    Complete,
    /// The sweep could not finish.
    Failed,
}

/// The outcome of one member in a defragmentation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberDefragStatus {
    /// Name of the EtcdMember.
    pub name: String,

    /// The member's raft role when it was processed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::plain_string")]
    pub role: Option<MemberRole>,

    /// What happened to the member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::plain_string")]
    pub outcome: Option<DefragOutcome>,

    /// Why, in the style of a condition reason (for example BelowThreshold,
    /// ClusterNotHealthy, RPCError).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// Physical backend size in bytes before the defragmentation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_size_before: Option<i64>,

    /// Physical backend size in bytes after the defragmentation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_size_after: Option<i64>,

    /// dbSizeBefore minus dbSizeAfter for a completed defragmentation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaimed_bytes: Option<i64>,

    /// When the member was processed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
}

/// A member's raft role.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MemberRole {
    /// The raft leader.
    Leader,
    /// A follower.
    Follower,
}

/// The outcome of one member in a defragmentation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DefragOutcome {
    /// Not processed yet.
    Pending,
    /// Below the rule's threshold: nothing worth reclaiming.
    Skipped,
    /// Defragmented.
    Defragmented,
    /// The Defragment call failed or timed out.
    Failed,
}
