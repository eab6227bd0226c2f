//! `EtcdSnapshotSchedule` (extension kind): EtcdSnapshots stamped out on a cron schedule, with
//! retention that deletes the snapshots (and their stored artifacts) beyond the policy.
//!
//! The field style follows the reference's `EtcdDefragPolicy` (`schedule`, `suspend`,
//! `concurrencyPolicy`, `startingDeadlineSeconds`); retention follows the familiar
//! keep-last/hourly/daily/weekly scheme of backup tools.

use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::defrag_policy::ConcurrencyPolicy;
use crate::shared::SnapshotLocation;
use crate::snapshot::{SnapshotCompression, SnapshotEncryption, SnapshotVerify};

/// A recurring snapshot of one EtcdCluster: on each tick of `schedule` the operator creates an
/// EtcdSnapshot from `template`, labelled with the schedule's name, and deletes the snapshots
/// of the schedule that `retention` no longer keeps, with their stored objects.
// clippy reads the repeated `printcolumn(type_ = ...)` of the derive as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "etcd-operator.cozystack.io",
    version = "v1alpha2",
    kind = "EtcdSnapshotSchedule",
    plural = "etcdsnapshotschedules",
    singular = "etcdsnapshotschedule",
    shortname = "etcdss",
    category = "etcd-operator",
    namespaced,
    status = "EtcdSnapshotScheduleStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "EtcdSnapshotSchedule (extension) stamps out EtcdSnapshots on a cron schedule and keeps what its retention says.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterRef.name"
    ),
    printcolumn(name = "Schedule", type_ = "string", json_path = ".spec.schedule"),
    printcolumn(name = "Suspend", type_ = "boolean", json_path = ".spec.suspend"),
    printcolumn(name = "Kept", type_ = "integer", json_path = ".status.kept"),
    printcolumn(
        name = "Last Success",
        type_ = "date",
        json_path = ".status.lastSuccessfulTime"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Newest Verified",
        type_ = "string",
        json_path = ".status.newestVerified",
        priority = 1,
    ),
    printcolumn(
        name = "Last Schedule",
        type_ = "date",
        json_path = ".status.lastScheduleTime",
        priority = 1,
    )
)]
#[serde(rename_all = "camelCase")]
pub struct EtcdSnapshotScheduleSpec {
    /// The EtcdCluster, in the same namespace, each stamped EtcdSnapshot targets.
    #[schemars(schema_with = "crate::schema::local_object_reference")]
    pub cluster_ref: LocalObjectReference,

    /// A five-field cron expression in UTC (for example "0 * * * *"); a `CRON_TZ=<zone> `
    /// prefix selects another time zone.
    #[schemars(length(min = 1))]
    pub schedule: String,

    /// Pauses stamping; snapshots in flight finish, missed ticks are not backfilled, and
    /// retention still applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,

    /// What a due tick does while a snapshot this schedule stamped is still running: `Forbid`
    /// (the default) skips the tick, `Allow` stamps anyway.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_policy: Option<ConcurrencyPolicy>,

    /// How late a missed tick may still be started, in seconds; later ones are skipped.
    /// Unset means no deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub starting_deadline_seconds: Option<i64>,

    /// When the first snapshot is taken: `Immediately` (the default: a new schedule backs its
    /// cluster up at once rather than leave it without a backup until the first tick) or
    /// `AtFirstTick`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_snapshot: Option<FirstSnapshot>,

    /// What each stamped EtcdSnapshot is made of.
    pub template: SnapshotTemplate,

    /// Which Complete snapshots of this schedule are kept; the others are deleted with their
    /// stored objects. The newest verified snapshot is always kept. Unset keeps the last 7.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<SnapshotRetention>,

    /// How many Failed snapshots of this schedule are kept (default 3); older ones are
    /// deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub failed_history_limit: Option<i32>,
}

/// When a new schedule takes its first snapshot.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum FirstSnapshot {
    /// As soon as the schedule is created (when it has stamped nothing yet).
    #[default]
    Immediately,
    /// At the schedule's first tick.
    AtFirstTick,
}

/// The EtcdSnapshot a schedule stamps.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(crate::snapshot::VERIFY_RESTORE_NEEDS_IDENTITY).message(crate::snapshot::VERIFY_RESTORE_NEEDS_IDENTITY_MESSAGE))]
#[x_kube(validation = Rule::new(crate::snapshot::VERIFY_RESTORE_NOT_LOCAL).message(crate::snapshot::VERIFY_RESTORE_NOT_LOCAL_MESSAGE))]
pub struct SnapshotTemplate {
    /// Where each snapshot is written, as an EtcdSnapshot's `destination`. An S3 `key` is a
    /// prefix: each snapshot is stored as `<key>/<snapshot name>.db`.
    pub destination: SnapshotLocation,

    /// Each snapshot's `compression`, as an EtcdSnapshot's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<SnapshotCompression>,

    /// Each snapshot's `encryption`, as an EtcdSnapshot's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<SnapshotEncryption>,

    /// Each snapshot's `verify`, as an EtcdSnapshot's. A snapshot that fails verification is
    /// never the schedule's newest verified one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<SnapshotVerify>,
}

/// Which snapshots a schedule keeps: the union of what each rule keeps. A rule keeping one
/// per hour, day or week keeps the newest snapshot of each of the last N periods (UTC) that
/// have a snapshot.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotRetention {
    /// The newest N Complete snapshots.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub keep_last: Option<i32>,

    /// The newest snapshot of each of the last N hours that have one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub keep_hourly: Option<i32>,

    /// The newest snapshot of each of the last N days that have one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub keep_daily: Option<i32>,

    /// The newest snapshot of each of the last N ISO weeks that have one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub keep_weekly: Option<i32>,
}

/// What the operator last observed of a schedule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdSnapshotScheduleStatus {
    /// The stamped EtcdSnapshots that have not finished yet.
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

    /// The scheduled time of the latest tick acted on (stamped or skipped on purpose).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,

    /// When a snapshot of this schedule last reached Complete, verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<Time>,

    /// The newest Complete, verified snapshot of this schedule (never deleted by retention).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newest_verified: Option<String>,

    /// How many Complete snapshots retention keeps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<i32>,
}
