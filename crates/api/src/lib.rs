//! The `etcd-operator.cozystack.io/v1alpha2` API: `EtcdCluster`, `EtcdMember`, `EtcdSnapshot`,
//! `EtcdDefrag`, `EtcdDefragPolicy` and (an extension kind) `EtcdSnapshotSchedule`, their CRDs, and the label keys and condition types shared by everything that
//! works with them.
//!
//! The schemas follow the reference operator's CRDs field for field, including its CEL rules;
//! the few additions of this implementation are listed in `docs/api.md`.

pub mod cluster;
pub mod conditions;
mod crd;
pub mod defrag;
pub mod defrag_policy;
pub mod kube_client;
pub mod labels;
pub mod member;
pub mod schema;
pub mod shared;
pub mod snapshot;
pub mod snapshot_schedule;

pub use cluster::{EtcdCluster, EtcdClusterSpec, EtcdClusterStatus};
pub use crd::{crd_file_name, crd_yaml, crds};
pub use defrag::{EtcdDefrag, EtcdDefragSpec, EtcdDefragStatus};
pub use defrag_policy::{EtcdDefragPolicy, EtcdDefragPolicySpec, EtcdDefragPolicyStatus};
pub use member::{EtcdMember, EtcdMemberSpec, EtcdMemberStatus, MemberPhase};
pub use snapshot::{EtcdSnapshot, EtcdSnapshotSpec, EtcdSnapshotStatus};
pub use snapshot_schedule::{
    EtcdSnapshotSchedule, EtcdSnapshotScheduleSpec, EtcdSnapshotScheduleStatus,
};

/// The API group.
pub const GROUP: &str = "etcd-operator.cozystack.io";

/// The API version.
pub const VERSION: &str = "v1alpha2";

/// `apiVersion` of every object of this API.
pub const API_VERSION: &str = "etcd-operator.cozystack.io/v1alpha2";
