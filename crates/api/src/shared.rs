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
/// free-form flag map would let users set flags that fight the operator. A change is rolled
/// out to the running members one at a time (each Pod created again on its data), the leader
/// last.
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
/// source): exactly one of `s3`, `pvc` and the extensions `gcs`, `azure` and `local`.
///
/// The reference's rule (`has(self.s3) != has(self.pvc)`, with its message) stands for every
/// object without an extension store, so whatever the reference accepts or refuses is accepted
/// or refused here with the same words; an object with an extension store must name exactly
/// one store in all.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new(EXTENSION_STORE_GUARD_RULE).message("exactly one of destination.s3 or destination.pvc must be set"),
    validation = Rule::new(EXACTLY_ONE_STORE_RULE).message(EXACTLY_ONE_STORE_MESSAGE),
)]
pub struct SnapshotLocation {
    /// An object in an S3-compatible store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3SnapshotLocation>,

    /// A file on a PersistentVolumeClaim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pvc: Option<PvcSnapshotLocation>,

    /// Extension: an object in Google Cloud Storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcs: Option<GcsSnapshotLocation>,

    /// Extension: a blob in Azure Blob Storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzureSnapshotLocation>,

    /// Extension: a directory on a volume mounted into the operator's own Pod. A destination
    /// only: a restoring Pod cannot read the operator's filesystem, so it is refused as a
    /// restore source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalSnapshotLocation>,
}

/// The reference's "exactly one of s3 or pvc" rule, standing aside when an extension store is
/// set (the next rule judges those objects).
pub const EXTENSION_STORE_GUARD_RULE: &str =
    "has(self.gcs) || has(self.azure) || has(self.local) || (has(self.s3) != has(self.pvc))";
/// Exactly one store, when an extension store is set.
pub const EXACTLY_ONE_STORE_RULE: &str = "!(has(self.gcs) || has(self.azure) || has(self.local)) || (has(self.s3) ? 1 : 0) + (has(self.pvc) ? 1 : 0) + (has(self.gcs) ? 1 : 0) + (has(self.azure) ? 1 : 0) + (has(self.local) ? 1 : 0) == 1";
/// Its message.
pub const EXACTLY_ONE_STORE_MESSAGE: &str = "exactly one of destination.s3, destination.pvc, destination.gcs, destination.azure or destination.local must be set";

/// Which store a location names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreKind {
    S3,
    Pvc,
    Gcs,
    Azure,
    Local,
}

impl StoreKind {
    /// The field's name in a location (`s3`, `pvc`, `gcs`, `azure`, `local`).
    pub fn field(self) -> &'static str {
        match self {
            StoreKind::S3 => "s3",
            StoreKind::Pvc => "pvc",
            StoreKind::Gcs => "gcs",
            StoreKind::Azure => "azure",
            StoreKind::Local => "local",
        }
    }

    /// The scheme of an artifact URI in this store.
    pub fn scheme(self) -> &'static str {
        match self {
            StoreKind::S3 => "s3",
            StoreKind::Pvc => "pvc",
            StoreKind::Gcs => "gs",
            StoreKind::Azure => "azure",
            StoreKind::Local => "file",
        }
    }
}

impl SnapshotLocation {
    /// The stores set, in the order s3, pvc, gcs, azure, local (exactly one in a valid object).
    pub fn stores(&self) -> Vec<StoreKind> {
        [
            (self.s3.is_some(), StoreKind::S3),
            (self.pvc.is_some(), StoreKind::Pvc),
            (self.gcs.is_some(), StoreKind::Gcs),
            (self.azure.is_some(), StoreKind::Azure),
            (self.local.is_some(), StoreKind::Local),
        ]
        .into_iter()
        .filter_map(|(set, kind)| set.then_some(kind))
        .collect()
    }

    /// The one store this location names; `None` when none or more than one is set (which
    /// admission refuses).
    pub fn store(&self) -> Option<StoreKind> {
        match self.stores().as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// The credentials Secret of an object store (none for `pvc` and `local`).
    pub fn credentials_secret(&self) -> Option<&str> {
        match self.store()? {
            StoreKind::S3 => self
                .s3
                .as_ref()
                .map(|l| l.credentials_secret_ref.name.as_str()),
            StoreKind::Gcs => self
                .gcs
                .as_ref()
                .map(|l| l.credentials_secret_ref.name.as_str()),
            StoreKind::Azure => self
                .azure
                .as_ref()
                .map(|l| l.credentials_secret_ref.name.as_str()),
            StoreKind::Pvc | StoreKind::Local => None,
        }
    }

    /// The restore source of an EtcdSnapshot whose destination is `self` and whose artifact
    /// is `uri`: the same store and access with the artifact's exact key (or file). Refused,
    /// in a sentence, when the artifact is not where the destination says, or when the store
    /// cannot be a restore source (`local`).
    pub fn restore_source(&self, uri: &str) -> Result<SnapshotLocation, String> {
        let Some(kind) = self.store() else {
            return Err("the destination names no single store".to_string());
        };
        let rest = uri
            .strip_prefix(kind.scheme())
            .and_then(|r| r.strip_prefix("://"))
            .ok_or_else(|| {
                format!(
                    "the artifact {uri} is not in the destination's store ({}://...)",
                    kind.scheme()
                )
            })?;
        let exact = |container: &str, what: &str| {
            rest.strip_prefix(&format!("{container}/"))
                .filter(|k| !k.is_empty())
                .map(str::to_string)
                .ok_or_else(|| format!("the artifact {uri} is not in the destination's {what}"))
        };
        match kind {
            StoreKind::S3 => {
                let s3 = self.s3.clone().unwrap_or_default();
                let key = exact(&s3.bucket, &format!("bucket {}", s3.bucket))?;
                Ok(SnapshotLocation {
                    s3: Some(S3SnapshotLocation {
                        key: Some(key),
                        ..s3
                    }),
                    ..Default::default()
                })
            }
            StoreKind::Gcs => {
                let gcs = self.gcs.clone().unwrap_or_default();
                let key = exact(&gcs.bucket, &format!("bucket {}", gcs.bucket))?;
                Ok(SnapshotLocation {
                    gcs: Some(GcsSnapshotLocation {
                        key: Some(key),
                        ..gcs
                    }),
                    ..Default::default()
                })
            }
            StoreKind::Azure => {
                let azure = self.azure.clone().unwrap_or_default();
                let container = format!("{}/{}", azure.account, azure.container);
                let key = exact(&container, &format!("container {container}"))?;
                Ok(SnapshotLocation {
                    azure: Some(AzureSnapshotLocation {
                        key: Some(key),
                        ..azure
                    }),
                    ..Default::default()
                })
            }
            StoreKind::Pvc => {
                let pvc = self.pvc.clone().unwrap_or_default();
                let path = exact(&pvc.claim_name, &format!("claim {}", pvc.claim_name))?;
                Ok(SnapshotLocation {
                    pvc: Some(PvcSnapshotLocation {
                        claim_name: pvc.claim_name,
                        sub_path: Some(path),
                    }),
                    ..Default::default()
                })
            }
            StoreKind::Local => Err(LOCAL_NOT_A_RESTORE_SOURCE.to_string()),
        }
    }
}

/// Why a `local` store is never a restore source, and what to do instead.
pub const LOCAL_NOT_A_RESTORE_SOURCE: &str = "a local store is a directory of the operator's own Pod, which the restoring Pod cannot read: restore from the volume behind it (copy the file onto a PersistentVolumeClaim in the cluster's namespace and use source.pvc) or from an object store";

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

/// Extension: a location in Google Cloud Storage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcsSnapshotLocation {
    /// The bucket.
    #[schemars(length(min = 1))]
    pub bucket: String,

    /// Object key. For a snapshot destination, a prefix to which "<snapshot-name>.db" is
    /// appended; for a restore source, the exact key of the snapshot object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,

    /// Base URL of the storage API; unset means https://storage.googleapis.com. An emulator
    /// (fake-gcs-server) at an http:// URL is used as plain HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,

    /// Secret in the cluster's namespace with the key GOOGLE_SERVICE_ACCOUNT_KEY: a service
    /// account's JSON key (as `gcloud iam service-accounts keys create` writes it).
    #[schemars(schema_with = "crate::schema::local_object_reference")]
    pub credentials_secret_ref: LocalObjectReference,
}

/// Extension: a location in Azure Blob Storage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureSnapshotLocation {
    /// The storage account.
    #[schemars(length(min = 1))]
    pub account: String,

    /// The blob container.
    #[schemars(length(min = 1))]
    pub container: String,

    /// Blob name. For a snapshot destination, a prefix to which "<snapshot-name>.db" is
    /// appended; for a restore source, the exact name of the snapshot blob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,

    /// The account's blob service URL; unset means https://<account>.blob.core.windows.net.
    /// For Azurite, http://<host>:10000/<account> (used as plain HTTP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,

    /// Secret in the cluster's namespace with the key AZURE_STORAGE_ACCOUNT_KEY (the
    /// account's shared key) or AZURE_STORAGE_SAS_TOKEN (a SAS token, with or without its
    /// leading "?"), or both (the account key is used then).
    #[schemars(schema_with = "crate::schema::local_object_reference")]
    pub credentials_secret_ref: LocalObjectReference,
}

/// Extension: a directory on a volume mounted into the operator's own Pod (its
/// `--local-store-root`, /var/lib/etcd-operator/snapshots by default, or below).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(LOCAL_PATH_RULE).message(LOCAL_PATH_MESSAGE))]
pub struct LocalSnapshotLocation {
    /// Absolute path of the directory in the operator's container; the snapshot is written
    /// to "<path>/<snapshot-name>.db".
    #[schemars(length(min = 1))]
    pub path: String,
}

/// `local.path` is absolute and has no `..` segment (an empty one is `minLength`'s to refuse).
pub const LOCAL_PATH_RULE: &str =
    "size(self.path) == 0 || (self.path.startsWith('/') && !self.path.matches('(^|/)[.][.](/|$)'))";
/// Its message.
pub const LOCAL_PATH_MESSAGE: &str =
    "local.path must be an absolute directory path without '..' segments";

/// The snapshot a new cluster is restored from. A restore source names one existing object, so
/// an S3 source needs its exact key and a PVC source its exact file path.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("!has(self.source.s3) || (has(self.source.s3.key) && size(self.source.s3.key) > 0)").message("bootstrap.restore.source.s3.key must be the exact (non-empty) object key for a restore source"),
    validation = Rule::new("!has(self.source.pvc) || (has(self.source.pvc.subPath) && size(self.source.pvc.subPath) > 0)").message("bootstrap.restore.source.pvc.subPath must be the exact (non-empty) snapshot file path for a restore source"),
    validation = Rule::new("!has(self.source.gcs) || (has(self.source.gcs.key) && size(self.source.gcs.key) > 0)").message(RESTORE_GCS_KEY_MESSAGE),
    validation = Rule::new("!has(self.source.azure) || (has(self.source.azure.key) && size(self.source.azure.key) > 0)").message(RESTORE_AZURE_KEY_MESSAGE),
    validation = Rule::new("!has(self.source.local)").message(RESTORE_LOCAL_MESSAGE),
)]
#[serde(rename_all = "camelCase")]
pub struct RestoreSpec {
    /// Where the snapshot is read from: S3, a PVC, or (extensions) GCS or Azure, the same
    /// shape as an EtcdSnapshot's destination. A `local` store cannot be a restore source.
    pub source: SnapshotLocation,

    /// Extension: a Secret key (default key `identity`) holding the age identity
    /// (`AGE-SECRET-KEY-1...`) that decrypts an encrypted snapshot. Compression (zstd, gzip)
    /// and encryption (age) are recognised from the object's first bytes; an encrypted one
    /// without this fails the restore with `EncryptedSnapshot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_identity_secret_ref: Option<SecretKeyRef>,
}

/// The message of the rule that a GCS restore source names its exact key.
pub const RESTORE_GCS_KEY_MESSAGE: &str = "bootstrap.restore.source.gcs.key must be the exact (non-empty) object key for a restore source";
/// The message of the rule that an Azure restore source names its exact blob.
pub const RESTORE_AZURE_KEY_MESSAGE: &str = "bootstrap.restore.source.azure.key must be the exact (non-empty) blob name for a restore source";
/// The message of the rule that refuses a `local` restore source.
pub const RESTORE_LOCAL_MESSAGE: &str = "bootstrap.restore.source.local is not a restore source: a local store is a directory of the operator's own Pod, which the restoring Pod cannot read; copy the snapshot onto a PersistentVolumeClaim in the cluster's namespace (source.pvc) or into an object store";

/// One key of a Secret in the snapshot's (or cluster's) namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// The Secret's name.
    #[schemars(length(min = 1))]
    pub name: String,

    /// The key in the Secret; each field that uses this type says its default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl SecretKeyRef {
    /// The key, or `default` when unset or empty.
    pub fn key_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.key
            .as_deref()
            .filter(|k| !k.is_empty())
            .unwrap_or(default)
    }
}
