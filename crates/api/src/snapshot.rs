//! `EtcdSnapshot`: a one-shot snapshot of a cluster to S3 or a PVC.

use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::shared::SecretKeyRef;
use crate::shared::SnapshotLocation;

/// A request for one snapshot of an EtcdCluster. Immutable in intent: to write elsewhere,
/// create another EtcdSnapshot.
// clippy reads the repeated `printcolumn(type_ = ...)` of the derive as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "etcd-operator.cozystack.io",
    version = "v1alpha2",
    kind = "EtcdSnapshot",
    plural = "etcdsnapshots",
    singular = "etcdsnapshot",
    shortname = "etcdsnap",
    category = "etcd-operator",
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
    printcolumn(name = "Verified", type_ = "boolean", json_path = ".status.verified",),
    printcolumn(
        name = "Size",
        type_ = "integer",
        json_path = ".status.artifact.sizeBytes",
    ),
    printcolumn(name = "Revision", type_ = "integer", json_path = ".status.revision",),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Member",
        type_ = "string",
        json_path = ".status.member",
        priority = 1,
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason",
        priority = 1,
    ),
    printcolumn(
        name = "Artifact",
        type_ = "string",
        json_path = ".status.artifact.uri",
        priority = 1,
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(VERIFY_RESTORE_NEEDS_IDENTITY).message(VERIFY_RESTORE_NEEDS_IDENTITY_MESSAGE))]
#[x_kube(validation = Rule::new(VERIFY_RESTORE_NOT_LOCAL).message(VERIFY_RESTORE_NOT_LOCAL_MESSAGE))]
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

    /// Extension: how the stored artifact is compressed: `None` (the default: etcd's bytes as
    /// they are, the reference behaviour), `Zstd` or `Gzip`. Applied while streaming, before
    /// encryption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<SnapshotCompression>,

    /// Extension: encrypt the stored artifact (after compression) to age recipients read
    /// from a Secret. Unset stores it unencrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<SnapshotEncryption>,

    /// Extension: how the snapshot is verified once stored. `Checksum` (the default) reads the
    /// artifact back, decrypts and decompresses it, and checks its SHA-256, etcd's own hash,
    /// the revision and the key count; `Restore` does that and then restores it into a
    /// throwaway etcd in a Pod and reads it. Restore of an encrypted snapshot needs
    /// `encryption.age.identitySecretRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<SnapshotVerify>,
}

/// The CEL rule shared by an EtcdSnapshot's spec and a schedule's template: `verify: Restore`
/// of an encrypted snapshot needs the identity that decrypts it.
pub(crate) const VERIFY_RESTORE_NEEDS_IDENTITY: &str = "!(has(self.verify) && self.verify == 'Restore' && has(self.encryption) && !has(self.encryption.age.identitySecretRef))";
pub(crate) const VERIFY_RESTORE_NEEDS_IDENTITY_MESSAGE: &str = "verify: Restore of an encrypted snapshot needs encryption.age.identitySecretRef (the identity that decrypts it)";
/// The CEL rule shared by an EtcdSnapshot's spec and a schedule's template: the restore
/// check's Pod cannot read a local store (a directory of the operator's own Pod).
pub(crate) const VERIFY_RESTORE_NOT_LOCAL: &str =
    "!(has(self.verify) && self.verify == 'Restore' && has(self.destination.local))";
pub(crate) const VERIFY_RESTORE_NOT_LOCAL_MESSAGE: &str = "verify: Restore cannot read a local store (a directory of the operator's own Pod): use verify: Checksum, or a PVC or object-store destination";

/// The compression of a stored snapshot.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum SnapshotCompression {
    /// Stored as etcd sent it.
    #[default]
    None,
    /// Zstandard (level 3, with its frame checksum).
    Zstd,
    /// gzip (deflate level 6, with its CRC-32).
    Gzip,
}

impl SnapshotCompression {
    /// The suffix a person would give such a file (`""`, `.zst`, `.gz`).
    pub fn suffix(self) -> &'static str {
        match self {
            Self::None => "",
            Self::Zstd => ".zst",
            Self::Gzip => ".gz",
        }
    }
}

/// How a stored snapshot is verified.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum SnapshotVerify {
    /// Read back: SHA-256 of the stored object, decrypted and decompressed, etcd's own hash,
    /// revision and key count from the database's pages.
    #[default]
    Checksum,
    /// `Checksum`, then a restore into a throwaway etcd in a Pod, read for its revision and
    /// key count.
    Restore,
}

/// Encryption of a stored snapshot. Only age is supported.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotEncryption {
    /// age (https://age-encryption.org/v1): X25519 recipients.
    pub age: AgeEncryption,
}

/// age encryption: to whom the artifact is encrypted and, optionally, the identity the
/// operator decrypts it with.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgeEncryption {
    /// A Secret key (default key `recipients`) holding one or more age recipients
    /// (`age1...`), one a line; `#` starts a comment. The artifact can be decrypted by any of
    /// their identities.
    pub recipients_secret_ref: SecretKeyRef,

    /// A Secret key (default key `identity`) holding an age identity
    /// (`AGE-SECRET-KEY-1...`) of one of the recipients. With it, verification decrypts the
    /// read-back artifact and checks its content, `verify: Restore` can run, and a
    /// lost-quorum recovery can restore from this snapshot; without it, only the stored
    /// bytes' SHA-256 is checked and the private key can stay off the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_secret_ref: Option<SecretKeyRef>,
}

/// The default key of `encryption.age.recipientsSecretRef`.
pub const AGE_RECIPIENTS_KEY: &str = "recipients";
/// The default key of an age identity Secret reference.
pub const AGE_IDENTITY_KEY: &str = "identity";

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

    /// Extension: the etcd revision of the snapshot: the newest revision in its database,
    /// read from the database's own pages while it streamed (what `etcdutl snapshot status`
    /// reports), so exact whatever was written during the stream. Only when the pages cannot
    /// be read (not a database this operator understands), the revision the member reported
    /// just before the stream, a lower bound; `verification.revision` then stays unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,

    /// Extension: the EtcdMember the snapshot was streamed from (a healthy voter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,

    /// Extension: the etcd version of the member the snapshot came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_version: Option<String>,

    /// Extension: whether the snapshot passed its verification (`verification` says what was
    /// checked): True, or False (the phase is then Failed, the artifact is named, and the
    /// snapshot is never used as a good backup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,

    /// Extension: the compression applied to the artifact (`None`: etcd's bytes as they are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<SnapshotCompression>,

    /// Extension: the encryption applied to the artifact, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<SnapshotEncryptionStatus>,

    /// Extension: the size of the snapshot as etcd sent it (its database and etcd's 32-byte
    /// trailing hash), before compression and encryption. Equal to `artifact.sizeBytes` when
    /// neither is applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_size_bytes: Option<i64>,

    /// Extension: the SHA-256 of the snapshot as etcd sent it, as "sha256:<hex>": what
    /// `sha256sum` prints for the decrypted, decompressed file. `artifact.checksum` is the
    /// stored object's own SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_checksum: Option<String>,

    /// Extension: what the verification checked and found, and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<SnapshotVerification>,

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

/// What was applied to a stored snapshot's bytes, for whoever restores it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotEncryptionStatus {
    /// The method: `age`.
    pub method: String,

    /// The fingerprint of each recipient the artifact was encrypted to, as "sha256:" and the
    /// first 16 hex digits of the SHA-256 of the recipient's text (`age1...`). Never key
    /// material.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipients: Vec<String>,
}

/// The result of a snapshot's verification.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotVerification {
    /// `Checksum` or `Restore`: what `spec.verify` asked for.
    pub method: SnapshotVerify,

    /// When the verification finished (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,

    /// Whether the read-back artifact was decrypted and decompressed and its content checked
    /// (etcd's trailing hash, the SHA-256 of etcd's bytes, revision, key count). False only for
    /// an encrypted snapshot without `encryption.age.identitySecretRef`: then only the stored
    /// bytes' size and SHA-256 were checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_checked: Option<bool>,

    /// The revision found: read from the read-back database's pages (as `etcdutl snapshot
    /// status` reads it), and for `Restore` also served by the restored etcd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,

    /// The keys of every bucket of the snapshot's database, as `etcdutl snapshot status`
    /// counts them (its TOTAL KEYS: every revision of every key, and etcd's own records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_keys: Option<i64>,

    /// `Restore`: the keys the restored etcd serves (a count of the whole keyspace at its
    /// revision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<i64>,

    /// What was checked, or what did not match, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
