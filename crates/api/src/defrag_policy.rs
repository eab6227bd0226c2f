//! `EtcdDefragPolicy`: EtcdDefrag runs stamped out on a cron schedule.

use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::defrag::DefragRule;

/// A recurring defragmentation of one EtcdCluster: on each tick of `schedule` the operator
/// creates an EtcdDefrag owned by the policy, which then runs like any other.
// clippy reads the repeated `printcolumn(type_ = ...)` of the derive as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "etcd-operator.cozystack.io",
    version = "v1alpha2",
    kind = "EtcdDefragPolicy",
    plural = "etcddefragpolicies",
    singular = "etcddefragpolicy",
    shortname = "etcddfp",
    category = "etcd-operator",
    namespaced,
    status = "EtcdDefragPolicyStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "EtcdDefragPolicy stamps out EtcdDefrag runs on a cron schedule; each run is an EtcdDefrag owned by the policy.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterRef.name"
    ),
    printcolumn(name = "Schedule", type_ = "string", json_path = ".spec.schedule"),
    printcolumn(name = "Suspend", type_ = "boolean", json_path = ".spec.suspend"),
    printcolumn(
        name = "Last Schedule",
        type_ = "date",
        json_path = ".status.lastScheduleTime"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Last Success",
        type_ = "date",
        json_path = ".status.lastSuccessfulTime",
        priority = 1,
    )
)]
#[serde(rename_all = "camelCase")]
pub struct EtcdDefragPolicySpec {
    /// The EtcdCluster, in the same namespace, each stamped EtcdDefrag targets.
    #[schemars(schema_with = "crate::schema::local_object_reference")]
    pub cluster_ref: LocalObjectReference,

    /// A five-field cron expression in UTC (for example "0 3 * * *"); a `CRON_TZ=<zone> `
    /// prefix selects another time zone.
    #[schemars(length(min = 1))]
    pub schedule: String,

    /// Pauses stamping; runs in flight are left alone, missed ticks are not backfilled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,

    /// What a due tick does while a run it stamped earlier is still active: `Forbid` (the
    /// default) skips the tick, `Allow` stamps anyway (the run queues behind the active one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_policy: Option<ConcurrencyPolicy>,

    /// How late a missed tick may still be started, in seconds; later ones are skipped.
    /// Unset means no deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub starting_deadline_seconds: Option<i64>,

    /// How many finished (Complete or Failed) runs of this policy are kept; older ones are
    /// deleted. Unset leaves cleanup to `ttlSecondsAfterFinished`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub history_limit: Option<i32>,

    /// Copied into each stamped EtcdDefrag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<DefragRule>,

    /// Copied into each stamped EtcdDefrag.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
}

/// What a due tick does while an earlier run of the policy is still active.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Stamp anyway: the new run waits in Pending behind the active one.
    Allow,
    /// Skip the tick.
    #[default]
    Forbid,
}

/// What the operator last observed of a policy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdDefragPolicyStatus {
    /// The stamped EtcdDefrags that have not finished yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        schema_with = "crate::schema::local_object_references",
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub active: Option<Vec<LocalObjectReference>>,

    /// Why stamping is paused (Suspended) or not happening (InvalidSchedule), or that it is
    /// scheduling (Scheduled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,

    /// The scheduled time of the latest tick acted on (stamped or skipped on purpose); the next
    /// tick is the first after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,

    /// When a run of this policy last reached Complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<Time>,
}
