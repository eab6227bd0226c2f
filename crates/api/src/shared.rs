//! Types more than one resource uses: storage, etcd tuning flags, extra metadata, snapshot
//! locations and restore sources.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The storage size a member gets when `storage.size` is not set.
pub const DEFAULT_STORAGE_SIZE: &str = "1Gi";

/// The per-member data directory of etcd: its size and the volume that backs it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    /// Capacity of each member's data directory: the PVC's requested storage, or the size limit
    /// of the tmpfs when `medium` is `Memory`. Defaults to 1Gi. It can grow but never shrink: a
    /// PVC cannot shrink, and lowering a tmpfs limit frees no memory already in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::quantity", extend("default" = "1Gi"))]
    #[x_kube(validation = Rule::new("quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0").message("spec.storage.size cannot be shrunk"))]
    pub size: Option<Quantity>,

    /// Volume backing the data directory: "" (the default) for a PersistentVolumeClaim per
    /// member, or `Memory` for a tmpfs emptyDir that lives and dies with the Pod. A memory-backed
    /// member that loses its Pod loses its data and is replaced. Immutable: changing it would
    /// strand the existing data; delete and recreate the cluster instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = ""))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.storage.medium is immutable; delete and recreate the cluster to change the storage backend"))]
    pub medium: Option<StorageMedium>,

    /// StorageClass of each member's PVC. Unset uses the namespace's default StorageClass; the
    /// empty string disables dynamic provisioning (a matching PersistentVolume must exist).
    /// Ignored when `medium` is `Memory`. Cannot be added, removed or changed after creation,
    /// because a PVC's storageClassName is itself immutable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

impl StorageSpec {
    /// The size with the API's default applied.
    pub fn size_or_default(&self) -> Quantity {
        self.size
            .clone()
            .unwrap_or_else(|| Quantity(DEFAULT_STORAGE_SIZE.to_owned()))
    }

    /// The medium with the API's default (a PVC) applied.
    pub fn medium_or_default(&self) -> StorageMedium {
        self.medium.unwrap_or_default()
    }
}

/// The volume type behind a member's data directory.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum StorageMedium {
    // A PersistentVolumeClaim per member (the wire value is the empty string).
    #[default]
    #[serde(rename = "")]
    Persistent,
    // A tmpfs emptyDir per member, sized by `storage.size`.
    Memory,
}

/// Tuning flags passed to every member's etcd command line. A closed, typed set on purpose: a
/// free-form flag map would let users set flags that fight the operator. Changes apply to
/// members created afterwards (scale-up, replacement); running members are not rolled.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdOptions {
    /// `--quota-backend-bytes`: the backend size in bytes at which a member raises the NOSPACE
    /// alarm. Unset or 0 means etcd's default (2 GiB); etcd suggests at most 8 GiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub quota_backend_bytes: Option<i64>,

    /// `--auto-compaction-mode`: whether `autoCompactionRetention` is a time window
    /// (`periodic`) or a number of revisions (`revision`). Unset means etcd's default
    /// (`periodic`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_compaction_mode: Option<AutoCompactionMode>,

    /// `--auto-compaction-retention`: a duration such as "5m" or "1h" (a bare integer means
    /// hours) in periodic mode, a revision count in revision mode. Unset or "0" turns
    /// auto-compaction off.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$|^[0-9]+$"))]
    pub auto_compaction_retention: Option<String>,

    /// `--snapshot-count`: committed raft entries kept in memory before etcd takes an internal
    /// raft snapshot (unrelated to EtcdSnapshot backups). Unset means etcd's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub snapshot_count: Option<i64>,
}

/// How etcd reads `autoCompactionRetention`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AutoCompactionMode {
    // Retention is a time window.
    Periodic,
    // Retention is a number of revisions.
    Revision,
}

impl AutoCompactionMode {
    /// The value etcd's `--auto-compaction-mode` flag takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Periodic => "periodic",
            Self::Revision => "revision",
        }
    }
}

/// Extra labels and annotations merged onto every object the operator creates for a cluster.
/// The operator's own label keys win on collision.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AdditionalMetadata {
    /// Labels to add to created objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,

    /// Annotations to add to created objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// Where a snapshot is written to (an EtcdSnapshot's destination) or read from (a restore
/// source): exactly one of `s3` and `pvc`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[x_kube(validation = Rule::new("has(self.s3) != has(self.pvc)").message("exactly one of destination.s3 or destination.pvc must be set"))]
pub struct SnapshotLocation {
    /// An object in an S3-compatible store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3SnapshotLocation>,

    /// A file on a PersistentVolumeClaim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pvc: Option<PvcSnapshotLocation>,
}

/// A location in an S3-compatible object store.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct S3SnapshotLocation {
    /// URL of the S3 endpoint, for example "https://s3.amazonaws.com" or a MinIO or Ceph
    /// endpoint.
    #[schemars(length(min = 1))]
    pub endpoint: String,

    /// The bucket.
    #[schemars(length(min = 1))]
    pub bucket: String,

    /// Object key. For a snapshot destination, a prefix to which "<snapshot-name>.db" is
    /// appended; for a restore source, the exact key of the snapshot object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,

    /// Secret in the cluster's namespace with the keys AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY.
    #[schemars(schema_with = "crate::schema::local_object_reference")]
    pub credentials_secret_ref: LocalObjectReference,

    /// Region of the bucket; optional for endpoints that ignore it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,

    /// Path-style addressing (the bucket in the path, not the host name), which MinIO and Ceph
    /// usually need.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub force_path_style: Option<bool>,
}

/// A location on a PersistentVolumeClaim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PvcSnapshotLocation {
    /// Name of a PVC in the cluster's namespace.
    #[schemars(length(min = 1))]
    pub claim_name: String,

    /// Path inside the volume. For a snapshot destination, an optional subdirectory; for a
    /// restore source, the exact snapshot file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<String>,
}

/// The snapshot a new cluster is restored from. A restore source names one existing object, so
/// an S3 source needs its exact key and a PVC source its exact file path.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("!has(self.source.s3) || (has(self.source.s3.key) && size(self.source.s3.key) > 0)").message("bootstrap.restore.source.s3.key must be the exact (non-empty) object key for a restore source"),
    validation = Rule::new("!has(self.source.pvc) || (has(self.source.pvc.subPath) && size(self.source.pvc.subPath) > 0)").message("bootstrap.restore.source.pvc.subPath must be the exact (non-empty) snapshot file path for a restore source"),
)]
#[serde(rename_all = "camelCase")]
pub struct RestoreSpec {
    /// Where the snapshot is read from: S3 or a PVC, the same shape as an EtcdSnapshot's
    /// destination.
    pub source: SnapshotLocation,

    /// Extension: a Secret key (default key `identity`) holding the age identity
    /// (`AGE-SECRET-KEY-1...`) that decrypts an encrypted snapshot. Compression (zstd, gzip)
    /// and encryption (age) are recognised from the object's first bytes; an encrypted one
    /// without this fails the restore with `EncryptedSnapshot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_identity_secret_ref: Option<crate::snapshot::SecretKeyRef>,
}
