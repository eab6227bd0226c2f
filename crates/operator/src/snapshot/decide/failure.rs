//! Why a snapshot failed, in words a person acts on: [`Failure`] (final; the PVC agent sends
//! it back as JSON) and how its messages name a store ([`StoreWords`]).

/// Why a snapshot failed. Each is final: the snapshot records it and a new EtcdSnapshot is the
/// retry (the message says what to fix first). The PVC agent sends it back as JSON in its
/// termination message.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Failure {
    ClusterNotFound {
        cluster: String,
    },
    ClusterDeleting {
        cluster: String,
    },
    ClusterPaused {
        cluster: String,
    },
    ClusterParked {
        cluster: String,
    },
    /// No voter served a linearizable read.
    ClusterUnavailable {
        cluster: String,
        detail: String,
    },
    /// The cluster's TLS or auth Secrets are unusable, so the operator cannot dial it.
    ClusterSecrets {
        cluster: String,
        problems: String,
    },
    /// The credentials Secret is missing or lacks a key.
    CredentialsSecret {
        detail: String,
    },
    /// The store refused the credentials (unknown key, wrong secret). `store` (here and
    /// below) names the store in messages: "S3" (also when empty), "GCS", "Azure", "local".
    Unauthorized {
        #[serde(default)]
        store: String,
    },
    /// The credentials are known but may not write (or read) the bucket.
    AccessDenied {
        detail: String,
        #[serde(default)]
        store: String,
    },
    /// No such bucket (S3, GCS) or container (Azure).
    BucketNotFound {
        bucket: String,
        #[serde(default)]
        store: String,
    },
    EndpointUnreachable {
        endpoint: String,
        detail: String,
        #[serde(default)]
        store: String,
    },
    /// The destination fields cannot make a store (a malformed endpoint, say).
    InvalidDestination {
        detail: String,
    },
    /// The object exists and another EtcdSnapshot (or something else) wrote it.
    ObjectExists {
        uri: String,
        writer: Option<String>,
    },
    /// Any other answer of the store.
    Store {
        detail: String,
        #[serde(default)]
        store: String,
    },
    /// etcd failed the snapshot stream.
    Etcd {
        member: String,
        detail: String,
    },
    /// etcd's trailing SHA-256 does not match the bytes received.
    Corrupt {
        member: String,
    },
    /// The stored object, read back, differs from what was written.
    VerificationFailed {
        detail: String,
    },
    /// `destination.pvc`: no such PersistentVolumeClaim in the namespace.
    ClaimNotFound {
        claim: String,
    },
    /// The claim exists but is not (or no longer) bound to a volume.
    ClaimNotBound {
        claim: String,
        phase: String,
    },
    /// The volume is full.
    NoSpace {
        uri: String,
        detail: String,
    },
    /// The file exists and another EtcdSnapshot (or something else) wrote it.
    FileExists {
        uri: String,
        writer: Option<String>,
    },
    /// Any other I/O failure on the claim.
    Volume {
        detail: String,
    },
    /// The agent's Pod ended (or never started) without a result.
    AgentFailed {
        detail: String,
    },
    /// The encryption's recipients (or identity) Secret is missing, lacks the key, or holds
    /// no usable key.
    EncryptionSecret {
        detail: String,
    },
    /// Compressing or encrypting etcd's bytes failed (the store and the volume are not at
    /// fault; nothing was kept).
    Encoding {
        detail: String,
    },
}

impl Failure {
    /// The Ready condition's reason, and the Event's.
    pub fn reason(&self) -> &'static str {
        match self {
            Failure::ClusterNotFound { .. } => "ClusterNotFound",
            Failure::ClusterDeleting { .. } => "ClusterDeleting",
            Failure::ClusterPaused { .. } => "ClusterPaused",
            Failure::ClusterParked { .. } => "ClusterParked",
            Failure::ClusterUnavailable { .. } => "ClusterUnavailable",
            Failure::ClusterSecrets { .. } => "ClusterSecretsInvalid",
            Failure::CredentialsSecret { .. } => "CredentialsSecretInvalid",
            Failure::Unauthorized { .. } => "Unauthorized",
            Failure::AccessDenied { .. } => "AccessDenied",
            Failure::BucketNotFound { .. } => "BucketNotFound",
            Failure::EndpointUnreachable { .. } => "EndpointUnreachable",
            Failure::InvalidDestination { .. } => "InvalidDestination",
            Failure::ObjectExists { .. } => "ObjectExists",
            Failure::Store { .. } => "StoreError",
            Failure::Etcd { .. } => "EtcdError",
            Failure::Corrupt { .. } => "SnapshotCorrupt",
            Failure::VerificationFailed { .. } => "VerificationFailed",
            Failure::ClaimNotFound { .. } => "ClaimNotFound",
            Failure::ClaimNotBound { .. } => "ClaimNotBound",
            Failure::NoSpace { .. } => "NoSpace",
            Failure::FileExists { .. } => "FileExists",
            Failure::Volume { .. } => "VolumeError",
            Failure::AgentFailed { .. } => "AgentFailed",
            Failure::EncryptionSecret { .. } => "EncryptionSecretInvalid",
            Failure::Encoding { .. } => "EncodingFailed",
        }
    }

    /// What went wrong and what to do, in plain words (never a secret).
    pub fn message(&self) -> String {
        const RETRY: &str = "then create a new EtcdSnapshot";
        match self {
            Failure::ClusterNotFound { cluster } => format!(
                "cluster not found: no EtcdCluster {cluster} in this namespace; fix spec.clusterRef.name, {RETRY}"
            ),
            Failure::ClusterDeleting { cluster } => {
                format!("cluster {cluster} is being deleted: nothing to snapshot")
            }
            Failure::ClusterPaused { cluster } => format!(
                "cluster is paused: EtcdCluster {cluster} has spec.paused set, and the operator does not touch a paused cluster; unpause it, {RETRY}"
            ),
            Failure::ClusterParked { cluster } => format!(
                "cluster has 0 replicas: EtcdCluster {cluster} is scaled to zero, no member runs to take a snapshot from; scale it up, {RETRY}"
            ),
            Failure::ClusterUnavailable { cluster, detail } => format!(
                "cluster not available: no healthy voter of EtcdCluster {cluster} to take a snapshot from ({detail}); wait until it is Available, {RETRY}"
            ),
            Failure::ClusterSecrets { cluster, problems } => format!(
                "the operator cannot reach EtcdCluster {cluster}: {problems}; fix the cluster's Secrets, {RETRY}"
            ),
            Failure::CredentialsSecret { detail } => format!("{detail}; {RETRY}"),
            Failure::Unauthorized { store } => {
                let words = StoreWords::of(store);
                format!(
                    "the {} credentials were refused: the store does not accept {} of the credentials Secret; fix the Secret, {RETRY}",
                    words.name, words.keys
                )
            }
            Failure::AccessDenied { detail, store } => {
                let words = StoreWords::of(store);
                format!(
                    "access denied: the {} credentials are valid but may not write this object ({detail}); {}, {RETRY}",
                    words.name, words.grant
                )
            }
            Failure::BucketNotFound { bucket, store } => {
                let words = StoreWords::of(store);
                format!(
                    "{0} not found: the store has no {0} {bucket}; create it or fix destination.{1}, {RETRY}",
                    words.bucket, words.bucket_field
                )
            }
            Failure::EndpointUnreachable {
                endpoint,
                detail,
                store,
            } => {
                let words = StoreWords::of(store);
                format!(
                    "the {} endpoint {endpoint} is unreachable ({detail}); check destination.{}.endpoint and the network, {RETRY}",
                    words.name, words.field
                )
            }
            Failure::InvalidDestination { detail } => {
                format!("the destination is not usable: {detail}; fix spec.destination, {RETRY}")
            }
            Failure::ObjectExists { uri, writer } => {
                let field = key_field(uri);
                match writer {
                    Some(other) => format!(
                        "{uri} already exists, written by another EtcdSnapshot (uid {other}); it is never replaced: choose another {field} or snapshot name"
                    ),
                    None => format!(
                        "{uri} already exists and no EtcdSnapshot wrote it; it is never replaced: choose another {field} or snapshot name"
                    ),
                }
            }
            Failure::Store { detail, store } => {
                format!(
                    "the {} store failed the upload: {detail}; {RETRY}",
                    StoreWords::of(store).name
                )
            }
            Failure::Etcd { member, detail } => {
                format!("etcd member {member} failed the snapshot stream: {detail}; {RETRY}")
            }
            Failure::Corrupt { member } => format!(
                "the snapshot from member {member} failed etcd's integrity check (its trailing SHA-256 does not match the data); nothing was stored; {RETRY}"
            ),
            Failure::VerificationFailed { detail } => format!(
                "verification failed: the stored object, read back, {detail}; do not restore from it; {RETRY}"
            ),
            Failure::ClaimNotFound { claim } => format!(
                "claim not found: no PersistentVolumeClaim {claim} in this namespace; create it or fix destination.pvc.claimName, {RETRY}"
            ),
            Failure::ClaimNotBound { claim, phase } => format!(
                "claim not bound: PersistentVolumeClaim {claim} is {phase}, no volume to write to; check its StorageClass and events, {RETRY}"
            ),
            Failure::NoSpace { uri, detail } => format!(
                "no space left on the volume for {uri} ({detail}); nothing was stored; free space on the claim or grow it, {RETRY}"
            ),
            Failure::FileExists { uri, writer } => match writer {
                Some(other) => format!(
                    "{uri} already exists, written by another EtcdSnapshot (uid {other}); it is never replaced: choose another destination.pvc.subPath or snapshot name"
                ),
                None => format!(
                    "{uri} already exists and no EtcdSnapshot wrote it; it is never replaced: choose another destination.pvc.subPath or snapshot name"
                ),
            },
            Failure::Volume { detail } => format!(
                "the volume failed: {detail}; check the claim (permissions, health), {RETRY}"
            ),
            Failure::AgentFailed { detail } => format!("{detail}; {RETRY}"),
            Failure::EncryptionSecret { detail } => {
                format!("{detail}; fix spec.encryption.age (the Secret and its key), {RETRY}")
            }
            Failure::Encoding { detail } => format!(
                "compressing or encrypting the snapshot failed: {detail}; nothing was stored; check spec.compression and spec.encryption, {RETRY}"
            ),
        }
    }
}

/// The field that places an object, by its URI's scheme.
pub(super) fn key_field(uri: &str) -> &'static str {
    match uri.split_once("://").map(|(scheme, _)| scheme) {
        Some("gs") => "destination.gcs.key",
        Some("azure") => "destination.azure.key",
        Some("file") => "destination.local.path",
        _ => "destination.s3.key",
    }
}

/// How the messages name a store: the `store` of a [`Failure`] ("S3" when empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreWords {
    /// "S3", "GCS", "Azure", "local".
    pub name: &'static str,
    /// The location's field: `s3`, `gcs`, `azure`, `local`.
    pub field: &'static str,
    /// The credentials the Secret holds.
    pub keys: &'static str,
    /// What a missing permission needs.
    pub grant: &'static str,
    /// "bucket" or "container".
    pub bucket: &'static str,
    /// The field naming it: `s3.bucket`, `gcs.bucket`, `azure.container`.
    pub bucket_field: &'static str,
}

impl StoreWords {
    pub fn of(store: &str) -> StoreWords {
        match store {
            "GCS" => StoreWords {
                name: "GCS",
                field: "gcs",
                keys: "the service account key GOOGLE_SERVICE_ACCOUNT_KEY",
                grant: "grant the service account storage.objects.create, get and delete on the bucket (roles/storage.objectUser)",
                bucket: "bucket",
                bucket_field: "gcs.bucket",
            },
            "Azure" => StoreWords {
                name: "Azure",
                field: "azure",
                keys: "AZURE_STORAGE_ACCOUNT_KEY/AZURE_STORAGE_SAS_TOKEN",
                grant: "give the SAS token read, write, create and delete permissions on the container",
                bucket: "container",
                bucket_field: "azure.container",
            },
            "local" => StoreWords {
                name: "local",
                field: "local",
                keys: "no credentials",
                grant: "make the directory writable by the operator's user (fsGroup)",
                bucket: "directory",
                bucket_field: "local.path",
            },
            _ => StoreWords {
                name: "S3",
                field: "s3",
                keys: "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
                grant: "grant s3:PutObject and s3:GetObject on the bucket",
                bucket: "bucket",
                bucket_field: "s3.bucket",
            },
        }
    }
}
