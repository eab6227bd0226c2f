//! The pure decisions of the EtcdSnapshot controller: what to do next, from which member,
//! where the object goes, whether an existing object may be replaced, and what the status and
//! the Events say. No I/O here; `take` performs what these decide.

use etcd_operator_api::conditions::snapshot::READY;
use etcd_operator_api::shared::{PvcSnapshotLocation, SnapshotLocation, StoreKind};
use etcd_operator_api::snapshot::{
    EtcdSnapshotStatus, SnapshotArtifact, SnapshotCompression, SnapshotEncryptionStatus,
    SnapshotPhase, SnapshotVerification, SnapshotVerify,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::codec::{Decoded, Encoded, Layers};
use crate::build::member_client_url;
use crate::plan::Observed;

/// The user-defined object metadata (`x-amz-meta-etcd-snapshot-uid`) that records which
/// EtcdSnapshot wrote an object: the overwrite guard reads it back.
pub const UID_METADATA: &str = "etcd-snapshot-uid";
/// The metadata naming the EtcdSnapshot (`<namespace>/<name>`), for people reading the bucket.
pub const NAME_METADATA: &str = "etcd-snapshot";

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
fn key_field(uri: &str) -> &'static str {
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

/// A voter as the snapshot controller sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Voter {
    /// The EtcdMember's name.
    pub member: String,
    /// Its client URL (as the operator dials it).
    pub endpoint: String,
    /// Its client URL as the member advertises it (as a Pod in the cluster dials it).
    pub client_url: String,
    pub healthy: bool,
    pub leader: bool,
}

/// What the controller knows of the cluster a snapshot names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    pub name: String,
    pub deleting: bool,
    pub paused: bool,
    pub replicas: i32,
    /// Problems with the cluster's TLS and auth Secrets, one sentence each.
    pub security_problems: Vec<String>,
    /// Every member that answered as a voter.
    pub voters: Vec<Voter>,
    /// Why the cluster is not healthy, when it is not (etcd's own words).
    pub unhealthy: Option<String>,
}

/// The cluster facts of one observation: `dial` maps a member's client URL to the URL the
/// operator dials (the identity in a Pod, a port map in tests).
pub fn cluster_facts(observed: &Observed, dial: impl Fn(&str) -> String) -> ClusterFacts {
    let cluster = &observed.cluster;
    ClusterFacts {
        name: cluster.metadata.name.clone().unwrap_or_default(),
        deleting: cluster.metadata.deletion_timestamp.is_some(),
        paused: cluster.spec.is_paused(),
        replicas: cluster.spec.replicas_or_default(),
        security_problems: observed.security.problems.clone(),
        unhealthy: observed
            .etcd
            .health
            .as_ref()
            .err()
            .map(|e| e.detail.clone()),
        voters: observed
            .etcd
            .endpoints
            .iter()
            .filter_map(|o| {
                let status = o.status.as_ref().ok().filter(|s| !s.is_learner)?;
                let member = observed
                    .members
                    .iter()
                    .find(|m| member_client_url(&m.member) == o.endpoint)
                    .and_then(|m| m.member.metadata.name.clone())?;
                Some(Voter {
                    member,
                    endpoint: dial(&o.endpoint),
                    client_url: o.endpoint.clone(),
                    healthy: o.is_healthy(),
                    leader: status.leader != 0 && status.leader == status.member_id,
                })
            })
            .collect(),
    }
}

/// The next thing to do for one EtcdSnapshot.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Complete or Failed: nothing more, ever.
    Nothing,
    /// Record the failure.
    Fail(Failure),
    /// Take the snapshot from this voter to this object store (S3, GCS, Azure, local).
    Take {
        voter: Voter,
        to: Box<SnapshotLocation>,
    },
    /// Take the snapshot from this voter to a file on this claim (through an agent Pod).
    TakeToPvc {
        voter: Voter,
        pvc: PvcSnapshotLocation,
    },
}

/// The phase first: a finished snapshot stays as it is. Then the destination, then the
/// cluster (missing, deleting, paused, parked, unreachable Secrets, unhealthy), then a voter.
/// A snapshot found `Started` (the operator stopped in the middle) is taken again.
pub fn next(
    phase: Option<SnapshotPhase>,
    destination: &SnapshotLocation,
    cluster_name: &str,
    cluster: Option<&ClusterFacts>,
) -> Next {
    if matches!(phase, Some(SnapshotPhase::Complete | SnapshotPhase::Failed)) {
        return Next::Nothing;
    }
    let target = match (destination.store(), &destination.pvc) {
        (Some(StoreKind::Pvc), Some(pvc)) => Err(pvc.clone()),
        (Some(_), _) => Ok(Box::new(destination.clone())),
        (None, _) => {
            return Next::Fail(Failure::InvalidDestination {
                detail: "exactly one of destination.s3, pvc, gcs, azure or local must be set"
                    .to_string(),
            });
        }
    };
    let Some(cluster) = cluster else {
        return Next::Fail(Failure::ClusterNotFound {
            cluster: cluster_name.to_string(),
        });
    };
    let name = cluster.name.clone();
    if cluster.deleting {
        return Next::Fail(Failure::ClusterDeleting { cluster: name });
    }
    if cluster.paused {
        return Next::Fail(Failure::ClusterPaused { cluster: name });
    }
    if cluster.replicas == 0 {
        return Next::Fail(Failure::ClusterParked { cluster: name });
    }
    if !cluster.security_problems.is_empty() {
        return Next::Fail(Failure::ClusterSecrets {
            cluster: name,
            problems: cluster.security_problems.join("; "),
        });
    }
    match pick_voter(&cluster.voters) {
        Some(voter) if cluster.unhealthy.is_none() => match target {
            Ok(to) => Next::Take {
                voter: voter.clone(),
                to,
            },
            Err(pvc) => Next::TakeToPvc {
                voter: voter.clone(),
                pvc,
            },
        },
        _ => Next::Fail(Failure::ClusterUnavailable {
            cluster: name,
            detail: cluster
                .unhealthy
                .clone()
                .unwrap_or_else(|| "no voter answered".to_string()),
        }),
    }
}

/// A healthy voter, a follower rather than the leader (streaming the database costs disk and
/// network the leader needs for heartbeats), the first by name among equals.
pub fn pick_voter(voters: &[Voter]) -> Option<&Voter> {
    voters
        .iter()
        .filter(|v| v.healthy)
        .min_by(|a, b| (a.leader, &a.member).cmp(&(b.leader, &b.member)))
}

/// What the store holds at the object's key before writing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Existing {
    Absent,
    /// An object, with the uid metadata it carries (None: not written by an EtcdSnapshot).
    Present {
        writer: Option<String>,
    },
}

/// Per (namespace, cluster), the Unix time the newest Complete and verified snapshot
/// completed.
pub fn latest_successes(
    snapshots: &[std::sync::Arc<etcd_operator_api::EtcdSnapshot>],
) -> std::collections::BTreeMap<(String, String), i64> {
    let mut latest = std::collections::BTreeMap::new();
    for snapshot in snapshots {
        let Some(status) = &snapshot.status else {
            continue;
        };
        if status.phase != Some(SnapshotPhase::Complete) || status.verified != Some(true) {
            continue;
        }
        let Some(done) = status
            .completion_time
            .as_deref()
            .and_then(|t| t.parse::<Timestamp>().ok())
        else {
            continue;
        };
        let key = (
            snapshot.metadata.namespace.clone().unwrap_or_default(),
            snapshot.spec.cluster_ref.name.clone(),
        );
        let seconds = done.as_second();
        latest
            .entry(key)
            .and_modify(|t: &mut i64| *t = (*t).max(seconds))
            .or_insert(seconds);
    }
    latest
}

/// The overwrite guard: only an absent object, or one this same EtcdSnapshot wrote (an
/// attempt interrupted after the upload completed), may be written.
pub fn may_write(existing: &Existing, own_uid: &str, uri: &str) -> Result<(), Failure> {
    match existing {
        Existing::Absent => Ok(()),
        Existing::Present { writer: Some(uid) } if uid == own_uid => Ok(()),
        Existing::Present { writer } => Err(Failure::ObjectExists {
            uri: uri.to_string(),
            writer: writer.clone(),
        }),
    }
}

/// What was written: the artifact (the stored bytes), etcd's bytes, the layers applied and
/// what the database's pages hold. The PVC agent sends it back as JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stored {
    pub uri: String,
    /// The stored bytes' size and SHA-256 (the artifact).
    pub size: u64,
    pub sha256: String,
    /// etcd's bytes (before compression and encryption).
    #[serde(default)]
    pub snapshot_size: u64,
    #[serde(default)]
    pub snapshot_sha256: String,
    #[serde(default)]
    pub compression: SnapshotCompression,
    /// The fingerprints of the age recipients; empty when not encrypted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipients: Vec<String>,
    /// From the database's pages; `None` when they could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_keys: Option<u64>,
}

impl Stored {
    /// From what the encoder computed.
    pub fn of(uri: &str, encoded: &Encoded, recipients: Vec<String>) -> Stored {
        Stored {
            uri: uri.to_string(),
            size: encoded.stored_size,
            sha256: encoded.stored_sha256.clone(),
            snapshot_size: encoded.snapshot.size,
            snapshot_sha256: encoded.snapshot.sha256.clone(),
            compression: encoded.layers.compression,
            recipients,
            revision: encoded.scanned.map(|s| s.revision),
            total_keys: encoded.scanned.map(|s| s.total_keys),
        }
    }

    pub fn encrypted(&self) -> bool {
        !self.recipients.is_empty()
    }

    /// The layers, as decoding reports them.
    pub fn layers(&self) -> Layers {
        Layers {
            compression: self.compression,
            encrypted: self.encrypted(),
        }
    }

    /// Back from a status that recorded it (the artifact and the snapshot's figures), for
    /// the verification that follows.
    pub fn from_status(status: &EtcdSnapshotStatus) -> Option<Stored> {
        let artifact = status.artifact.as_ref()?;
        let hex = |c: &Option<String>| {
            c.as_deref()
                .and_then(|c| c.strip_prefix("sha256:"))
                .map(str::to_string)
        };
        Some(Stored {
            uri: artifact.uri.clone(),
            size: artifact.size_bytes? as u64,
            sha256: hex(&artifact.checksum)?,
            snapshot_size: status.snapshot_size_bytes.unwrap_or(artifact.size_bytes?) as u64,
            snapshot_sha256: hex(&status.snapshot_checksum).or_else(|| hex(&artifact.checksum))?,
            compression: status.compression.unwrap_or_default(),
            recipients: status
                .encryption
                .as_ref()
                .map(|e| e.recipients.clone())
                .unwrap_or_default(),
            revision: status
                .verification
                .as_ref()
                .and_then(|v| v.revision)
                .or(status.revision),
            total_keys: status
                .verification
                .as_ref()
                .and_then(|v| v.total_keys)
                .map(|k| k as u64),
        })
    }
}

/// The read-back check of the stored bytes alone: the same size and SHA-256 as computed while
/// writing.
pub fn verify(written: &Stored, read_size: u64, read_sha256: &str) -> Result<(), Failure> {
    if read_size != written.size {
        return Err(Failure::VerificationFailed {
            detail: format!("has {read_size} bytes where {} were written", written.size),
        });
    }
    if read_sha256 != written.sha256 {
        return Err(Failure::VerificationFailed {
            detail: format!(
                "has SHA-256 {read_sha256} where sha256:{} was written",
                written.sha256
            ),
        });
    }
    Ok(())
}

/// What a verification found, for the status (the PVC agent sends it back as JSON).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checked {
    pub method: SnapshotVerify,
    /// The content (decrypted, decompressed) was checked, not only the stored bytes.
    pub content_checked: bool,
    pub revision: Option<i64>,
    pub total_keys: Option<u64>,
    /// `Restore`: the keys the restored etcd served.
    pub keys: Option<i64>,
    pub message: String,
}

/// The read-back check (verify `Checksum`): the stored bytes' size and SHA-256, then, when
/// they could be decoded (`decoded`; `None` for an encrypted snapshot without an identity),
/// the layers, etcd's bytes (size, SHA-256, etcd's own trailing hash) and what the pages hold,
/// each equal to what was computed while writing.
pub fn check_read_back(
    written: &Stored,
    read_size: u64,
    read_sha256: &str,
    decoded: Option<&Decoded>,
) -> Result<Checked, Failure> {
    verify(written, read_size, read_sha256)?;
    let Some(decoded) = decoded else {
        return Ok(Checked {
            method: SnapshotVerify::Checksum,
            content_checked: false,
            revision: None,
            total_keys: None,
            keys: None,
            message: format!(
                "the stored object ({} bytes) has the SHA-256 written; it is encrypted and no identity was given, so its content was checked only while it was written",
                written.size
            ),
        });
    };
    let mismatch = |detail: String| Err(Failure::VerificationFailed { detail });
    if decoded.layers != written.layers() {
        return mismatch(format!(
            "is encoded as {} where {} was written",
            decoded.layers.describe(),
            written.layers().describe()
        ));
    }
    if !decoded.snapshot.trailer_matches {
        return mismatch(
            "decodes to bytes that fail etcd's integrity check (their last 32 bytes are not the SHA-256 of the rest)"
                .to_string(),
        );
    }
    if decoded.snapshot.size != written.snapshot_size
        || decoded.snapshot.sha256 != written.snapshot_sha256
    {
        return mismatch(format!(
            "decodes to {} bytes with SHA-256 {} where etcd sent {} bytes with sha256:{}",
            decoded.snapshot.size,
            decoded.snapshot.sha256,
            written.snapshot_size,
            written.snapshot_sha256
        ));
    }
    let read = decoded.scanned.map(|s| (s.revision, s.total_keys));
    let wrote = written.revision.zip(written.total_keys);
    if wrote.is_some() && read != wrote {
        return mismatch(format!(
            "holds revision and keys {read:?} where {wrote:?} were streamed"
        ));
    }
    Ok(Checked {
        method: SnapshotVerify::Checksum,
        content_checked: true,
        revision: read.map(|r| r.0),
        total_keys: read.map(|r| r.1),
        keys: None,
        message: format!(
            "read back: {} bytes with the SHA-256 written; decoded ({}) to etcd's {} bytes, etcd's hash matches{}",
            written.size,
            written.layers().describe(),
            written.snapshot_size,
            read.map(|(r, k)| format!(", revision {r}, {k} keys in the database"))
                .unwrap_or_else(
                    || ", its pages could not be read for revision and keys".to_string()
                )
        ),
    })
}

/// The restore check (verify `Restore`): the restored etcd must serve the revision the
/// snapshot's pages hold.
pub fn check_restored(
    written: &Stored,
    checksum: &Checked,
    served_revision: i64,
    served_keys: i64,
) -> Result<Checked, Failure> {
    let expected = checksum.revision.or(written.revision);
    if let Some(expected) = expected
        && expected != served_revision
    {
        return Err(Failure::VerificationFailed {
            detail: format!(
                "restored into a throwaway etcd, serves revision {served_revision} where the snapshot holds revision {expected}"
            ),
        });
    }
    Ok(Checked {
        method: SnapshotVerify::Restore,
        content_checked: true,
        revision: Some(served_revision),
        total_keys: checksum.total_keys.or(written.total_keys),
        keys: Some(served_keys),
        message: format!(
            "{}; restored into a throwaway etcd, which served revision {served_revision} and {served_keys} keys",
            checksum.message
        ),
    })
}

/// Whether a snapshot waits for its restore check: stored and read back, `Restore` asked,
/// not finished.
pub fn restore_check_pending(status: &EtcdSnapshotStatus) -> bool {
    status.phase == Some(SnapshotPhase::Started)
        && status.artifact.is_some()
        && status
            .verification
            .as_ref()
            .is_some_and(|v| v.method == SnapshotVerify::Restore && v.time.is_none())
}

/// The checksum part of a verification recorded in a status (the restore check adds to it).
pub fn checked_from_status(status: &EtcdSnapshotStatus) -> Option<Checked> {
    let v = status.verification.as_ref()?;
    Some(Checked {
        method: SnapshotVerify::Checksum,
        content_checked: v.content_checked.unwrap_or(false),
        revision: v.revision,
        total_keys: v.total_keys.map(|k| k as u64),
        keys: None,
        message: v.message.clone().unwrap_or_default(),
    })
}

fn condition(
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
    generation: Option<i64>,
) -> Condition {
    Condition {
        type_: READY.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        last_transition_time: Time(now),
        observed_generation: generation,
    }
}

/// Where the member came from, for the status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Source {
    pub member: String,
    pub revision: Option<i64>,
    pub etcd_version: Option<String>,
}

/// `Pending`: seen, not started (Ready False, reason Pending).
pub fn pending_status(now: Timestamp, generation: Option<i64>) -> EtcdSnapshotStatus {
    EtcdSnapshotStatus {
        phase: Some(SnapshotPhase::Pending),
        conditions: Some(vec![condition(
            "False",
            "Pending",
            "the snapshot is waiting to start".to_string(),
            now,
            generation,
        )]),
        ..Default::default()
    }
}

/// `Started`: streaming from `member` to `uri`.
pub fn started_status(
    member: &str,
    uri: &str,
    now: Timestamp,
    generation: Option<i64>,
) -> EtcdSnapshotStatus {
    EtcdSnapshotStatus {
        phase: Some(SnapshotPhase::Started),
        conditions: Some(vec![condition(
            "False",
            "Started",
            format!("streaming a snapshot from member {member} to {uri}"),
            now,
            generation,
        )]),
        start_time: Some(now.to_string()),
        member: Some(member.to_string()),
        ..Default::default()
    }
}

/// The fields every status of a written snapshot carries: the artifact, etcd's bytes, the
/// layers, the revision (the pages' when they were read, else the one asked before the
/// stream), the source.
fn written_fields(
    previous: &EtcdSnapshotStatus,
    stored: &Stored,
    source: &Source,
) -> EtcdSnapshotStatus {
    EtcdSnapshotStatus {
        artifact: Some(SnapshotArtifact {
            uri: stored.uri.clone(),
            size_bytes: Some(stored.size as i64),
            checksum: Some(format!("sha256:{}", stored.sha256)),
        }),
        start_time: previous.start_time.clone(),
        revision: stored.revision.or(source.revision),
        member: Some(source.member.clone()),
        etcd_version: source.etcd_version.clone(),
        compression: Some(stored.compression),
        encryption: stored.encrypted().then(|| SnapshotEncryptionStatus {
            method: "age".to_string(),
            recipients: stored.recipients.clone(),
        }),
        snapshot_size_bytes: Some(stored.snapshot_size as i64),
        snapshot_checksum: Some(format!("sha256:{}", stored.snapshot_sha256)),
        ..Default::default()
    }
}

fn verification(checked: &Checked, time: Option<Timestamp>) -> SnapshotVerification {
    SnapshotVerification {
        method: checked.method,
        time: time.map(|t| t.to_string()),
        content_checked: Some(checked.content_checked),
        revision: checked.revision,
        total_keys: checked.total_keys.map(|k| k as i64),
        keys: checked.keys,
        message: Some(checked.message.clone()),
    }
}

/// `Started`, stored and read back, the restore check running in `pod`.
pub fn verifying_status(
    previous: &EtcdSnapshotStatus,
    stored: &Stored,
    source: &Source,
    checksum: &Checked,
    pod: &str,
    now: Timestamp,
    generation: Option<i64>,
) -> EtcdSnapshotStatus {
    let mut pending = checksum.clone();
    pending.method = SnapshotVerify::Restore;
    EtcdSnapshotStatus {
        phase: Some(SnapshotPhase::Started),
        conditions: Some(vec![condition(
            "False",
            "Verifying",
            format!(
                "stored {} and read back; restoring it into a throwaway etcd (Pod {pod}) to verify it",
                stored.uri
            ),
            now,
            generation,
        )]),
        verification: Some(verification(&pending, None)),
        ..written_fields(previous, stored, source)
    }
}

/// `Complete`: stored and verified; Ready True.
pub fn complete_status(
    previous: &EtcdSnapshotStatus,
    stored: &Stored,
    source: &Source,
    checked: &Checked,
    now: Timestamp,
    generation: Option<i64>,
) -> EtcdSnapshotStatus {
    let revision = stored.revision.or(source.revision);
    EtcdSnapshotStatus {
        phase: Some(SnapshotPhase::Complete),
        conditions: Some(vec![condition(
            "True",
            "Complete",
            format!(
                "stored {} ({} bytes{}) from member {}{}, verified ({})",
                stored.uri,
                stored.size,
                match stored.layers().describe().as_str() {
                    d if d.starts_with("none") => String::new(),
                    d => format!(", {d}"),
                },
                source.member,
                revision
                    .map(|r| format!(" at revision {r}"))
                    .unwrap_or_default(),
                match checked.method {
                    SnapshotVerify::Checksum if checked.content_checked => "read back and decoded",
                    SnapshotVerify::Checksum => "read back",
                    SnapshotVerify::Restore => "read back and restored",
                }
            ),
            now,
            generation,
        )]),
        start_time: previous.start_time.clone().or(Some(now.to_string())),
        completion_time: Some(now.to_string()),
        verified: Some(true),
        verification: Some(verification(checked, Some(now))),
        failure_reason: None,
        ..written_fields(previous, stored, source)
    }
}

/// `Failed`: the reason in the condition and in `failureReason`. `verified` is False only
/// when the failure is the verification itself; `stored` keeps the artifact of such an
/// object so that the user sees what is in the store, and `method` says which verification
/// failed.
pub fn failed_status(
    previous: &EtcdSnapshotStatus,
    failure: &Failure,
    stored: Option<&Stored>,
    method: Option<SnapshotVerify>,
    now: Timestamp,
    generation: Option<i64>,
) -> EtcdSnapshotStatus {
    let message = failure.message();
    let base = match stored {
        Some(stored) => {
            let source = Source {
                member: previous.member.clone().unwrap_or_default(),
                revision: previous.revision,
                etcd_version: previous.etcd_version.clone(),
            };
            written_fields(previous, stored, &source)
        }
        None => EtcdSnapshotStatus {
            start_time: previous.start_time.clone(),
            revision: previous.revision,
            etcd_version: previous.etcd_version.clone(),
            ..Default::default()
        },
    };
    let verification_failed = matches!(failure, Failure::VerificationFailed { .. });
    EtcdSnapshotStatus {
        phase: Some(SnapshotPhase::Failed),
        conditions: Some(vec![condition(
            "False",
            failure.reason(),
            message.clone(),
            now,
            generation,
        )]),
        completion_time: Some(now.to_string()),
        member: previous.member.clone(),
        verified: verification_failed.then_some(false),
        verification: verification_failed.then(|| SnapshotVerification {
            method: method.unwrap_or_default(),
            time: Some(now.to_string()),
            content_checked: None,
            revision: None,
            total_keys: None,
            keys: None,
            message: Some(message.clone()),
        }),
        failure_reason: Some(message),
        ..base
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_operator_api::shared::{PvcSnapshotLocation, S3SnapshotLocation};

    fn s3() -> S3SnapshotLocation {
        S3SnapshotLocation {
            endpoint: "http://s3:9000".into(),
            bucket: "backups".into(),
            key: Some("etcd".into()),
            ..Default::default()
        }
    }

    fn to_s3() -> SnapshotLocation {
        SnapshotLocation {
            s3: Some(s3()),
            ..Default::default()
        }
    }

    fn voter(member: &str, healthy: bool, leader: bool) -> Voter {
        Voter {
            member: member.into(),
            endpoint: format!("http://{member}:2379"),
            client_url: format!("http://{member}.etcd:2379"),
            healthy,
            leader,
        }
    }

    fn healthy() -> ClusterFacts {
        ClusterFacts {
            name: "etcd".into(),
            replicas: 3,
            voters: vec![
                voter("etcd-0", true, true),
                voter("etcd-1", true, false),
                voter("etcd-2", true, false),
            ],
            ..Default::default()
        }
    }

    fn failure(next: Next) -> &'static str {
        match next {
            Next::Fail(f) => f.reason(),
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn a_finished_snapshot_is_left_alone() {
        for phase in [SnapshotPhase::Complete, SnapshotPhase::Failed] {
            assert_eq!(next(Some(phase), &to_s3(), "etcd", None), Next::Nothing);
        }
    }

    #[test]
    fn new_and_interrupted_snapshots_are_taken_from_a_follower() {
        for phase in [
            None,
            Some(SnapshotPhase::Pending),
            Some(SnapshotPhase::Started),
        ] {
            match next(phase, &to_s3(), "etcd", Some(&healthy())) {
                Next::Take { voter, to } => {
                    assert_eq!(voter.member, "etcd-1");
                    assert_eq!(*to, to_s3());
                }
                other => panic!("{other:?}"),
            }
        }
    }

    fn to_pvc() -> SnapshotLocation {
        SnapshotLocation {
            pvc: Some(PvcSnapshotLocation {
                claim_name: "backups".into(),
                sub_path: Some("etcd".into()),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_pvc_destination_is_taken_from_a_follower_like_s3() {
        for phase in [None, Some(SnapshotPhase::Started)] {
            match next(phase, &to_pvc(), "etcd", Some(&healthy())) {
                Next::TakeToPvc { voter, pvc } => {
                    assert_eq!(voter.member, "etcd-1");
                    assert_eq!(pvc.claim_name, "backups");
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            next(Some(SnapshotPhase::Complete), &to_pvc(), "etcd", None),
            Next::Nothing
        );
        // The cluster's reasons come first, as for S3.
        assert_eq!(
            failure(next(None, &to_pvc(), "gone", None)),
            "ClusterNotFound"
        );
        let mut unhealthy = healthy();
        unhealthy.voters.iter_mut().for_each(|v| v.healthy = false);
        assert_eq!(
            failure(next(None, &to_pvc(), "etcd", Some(&unhealthy))),
            "ClusterUnavailable"
        );
        let nowhere = SnapshotLocation::default();
        assert_eq!(
            failure(next(None, &nowhere, "etcd", Some(&healthy()))),
            "InvalidDestination"
        );
    }

    #[test]
    fn the_cluster_decides_in_order() {
        assert_eq!(
            failure(next(None, &to_s3(), "gone", None)),
            "ClusterNotFound"
        );
        let mut c = healthy();
        c.deleting = true;
        c.paused = true;
        assert_eq!(
            failure(next(None, &to_s3(), "etcd", Some(&c))),
            "ClusterDeleting"
        );
        c.deleting = false;
        assert_eq!(
            failure(next(None, &to_s3(), "etcd", Some(&c))),
            "ClusterPaused"
        );
        c.paused = false;
        c.replicas = 0;
        assert_eq!(
            failure(next(None, &to_s3(), "etcd", Some(&c))),
            "ClusterParked"
        );
        c.replicas = 3;
        c.security_problems = vec!["Secret etcd-server is missing".into()];
        assert_eq!(
            failure(next(None, &to_s3(), "etcd", Some(&c))),
            "ClusterSecretsInvalid"
        );
        c.security_problems.clear();
        c.unhealthy = Some("no voter served a linearizable read".into());
        assert_eq!(
            failure(next(None, &to_s3(), "etcd", Some(&c))),
            "ClusterUnavailable"
        );
        c.unhealthy = None;
        c.voters.iter_mut().for_each(|v| v.healthy = false);
        assert_eq!(
            failure(next(None, &to_s3(), "etcd", Some(&c))),
            "ClusterUnavailable"
        );
        c.voters.clear();
        assert_eq!(
            failure(next(None, &to_s3(), "etcd", Some(&c))),
            "ClusterUnavailable"
        );
    }

    #[test]
    fn the_messages_say_what_the_issue_promises() {
        let cases = [
            (
                Failure::Unauthorized {
                    store: String::new(),
                },
                "the S3 credentials were refused",
            ),
            (
                Failure::Unauthorized {
                    store: "GCS".into(),
                },
                "the GCS credentials were refused",
            ),
            (
                Failure::Unauthorized {
                    store: "Azure".into(),
                },
                "AZURE_STORAGE_ACCOUNT_KEY/AZURE_STORAGE_SAS_TOKEN",
            ),
            (
                Failure::BucketNotFound {
                    bucket: "b".into(),
                    store: "S3".into(),
                },
                "bucket not found",
            ),
            (
                Failure::BucketNotFound {
                    bucket: "c".into(),
                    store: "Azure".into(),
                },
                "container not found: the store has no container c; create it or fix destination.azure.container",
            ),
            (
                Failure::EndpointUnreachable {
                    endpoint: "http://gcs:4443".into(),
                    detail: "refused".into(),
                    store: "GCS".into(),
                },
                "the GCS endpoint http://gcs:4443 is unreachable (refused); check destination.gcs.endpoint",
            ),
            (
                Failure::ClusterUnavailable {
                    cluster: "etcd".into(),
                    detail: "x".into(),
                },
                "cluster not available",
            ),
            (
                Failure::ClusterPaused {
                    cluster: "etcd".into(),
                },
                "cluster is paused",
            ),
            (
                Failure::ClusterParked {
                    cluster: "etcd".into(),
                },
                "cluster has 0 replicas",
            ),
            (
                Failure::Encoding {
                    detail: "zstd: out of memory".into(),
                },
                "compressing or encrypting the snapshot failed: zstd: out of memory; nothing was stored",
            ),
        ];
        assert_eq!(
            Failure::Encoding {
                detail: String::new()
            }
            .reason(),
            "EncodingFailed",
            "not the store's fault: not StoreError"
        );
        for (failure, words) in cases {
            assert!(
                failure.message().contains(words),
                "{failure:?}: {}",
                failure.message()
            );
        }
    }

    #[test]
    fn facts_come_from_the_observation() {
        use crate::plan::tests::fixtures::{Answer, Fx};
        let mut fx = Fx::healthy(3);
        let facts = cluster_facts(&fx.obs, |u| format!("{u}#dialled"));
        assert_eq!(
            (facts.replicas, facts.paused, facts.deleting),
            (3, false, false)
        );
        assert_eq!(facts.unhealthy, None);
        let mut members: Vec<_> = facts
            .voters
            .iter()
            .map(|v| (v.member.as_str(), v.healthy, v.leader))
            .collect();
        members.sort();
        assert_eq!(
            members,
            [
                ("etcd-0", true, true),
                ("etcd-1", true, false),
                ("etcd-2", true, false)
            ]
        );
        assert!(
            facts
                .voters
                .iter()
                .all(|v| v.endpoint.ends_with("#dialled"))
        );
        match next(None, &to_s3(), "etcd", Some(&facts)) {
            Next::Take { voter, .. } => assert_eq!(voter.member, "etcd-1"),
            other => panic!("{other:?}"),
        }

        // A member down, one a learner: neither is a voter to stream from.
        fx.answer("etcd-1", Answer::Down);
        fx.answer("etcd-2", Answer::Learner);
        let facts = cluster_facts(&fx.obs, str::to_string);
        let names: Vec<_> = facts.voters.iter().map(|v| v.member.as_str()).collect();
        assert_eq!(names, ["etcd-0"]);

        // Without quorum nobody serves a linearizable read: the cluster is unavailable.
        for m in ["etcd-0", "etcd-1", "etcd-2"] {
            fx.answer(m, Answer::NoQuorum);
        }
        fx.obs.etcd.health = Err(crate::etcd::EtcdError::new(
            "Health",
            &[],
            crate::etcd::EtcdErrorKind::NoLeader,
            "no voter served a linearizable read",
        ));
        let facts = cluster_facts(&fx.obs, str::to_string);
        assert!(facts.voters.iter().all(|v| !v.healthy));
        assert_eq!(
            failure(next(None, &to_s3(), "etcd", Some(&facts))),
            "ClusterUnavailable"
        );

        fx.obs.security.problems = vec!["Secret etcd-server is missing".into()];
        fx.obs.cluster.spec.paused = Some(true);
        let facts = cluster_facts(&fx.obs, str::to_string);
        assert!(facts.paused);
        assert_eq!(facts.security_problems.len(), 1);
    }

    #[test]
    fn a_voter_is_healthy_and_preferably_not_the_leader() {
        assert_eq!(pick_voter(&[]), None);
        assert_eq!(pick_voter(&[voter("a", false, false)]), None);
        assert_eq!(
            pick_voter(&[voter("a", true, true)]).map(|v| v.member.as_str()),
            Some("a")
        );
        let voters = [
            voter("c", true, false),
            voter("a", true, true),
            voter("b", false, false),
            voter("d", true, false),
        ];
        assert_eq!(pick_voter(&voters).map(|v| v.member.as_str()), Some("c"));
    }

    #[test]
    fn the_guard_replaces_only_its_own_object() {
        let uri = "s3://b/k.db";
        assert_eq!(may_write(&Existing::Absent, "u1", uri), Ok(()));
        assert_eq!(
            may_write(
                &Existing::Present {
                    writer: Some("u1".into())
                },
                "u1",
                uri
            ),
            Ok(())
        );
        let other = may_write(
            &Existing::Present {
                writer: Some("u2".into()),
            },
            "u1",
            uri,
        );
        assert_eq!(
            other,
            Err(Failure::ObjectExists {
                uri: uri.into(),
                writer: Some("u2".into())
            })
        );
        assert!(
            other
                .unwrap_err()
                .message()
                .contains("another EtcdSnapshot")
        );
        let in_gcs = may_write(&Existing::Present { writer: None }, "u1", "gs://b/k.db")
            .unwrap_err()
            .message();
        assert!(
            in_gcs.contains("choose another destination.gcs.key"),
            "{in_gcs}"
        );
        let local = may_write(
            &Existing::Present { writer: None },
            "u1",
            "file:///var/lib/etcd-operator/snapshots/k.db",
        )
        .unwrap_err()
        .message();
        assert!(local.contains("destination.local.path"), "{local}");
        let foreign = may_write(&Existing::Present { writer: None }, "u1", uri).unwrap_err();
        assert_eq!(foreign.reason(), "ObjectExists");
        assert!(foreign.message().contains("no EtcdSnapshot wrote it"));
    }

    fn stored() -> Stored {
        Stored {
            uri: "s3://b/k.db".into(),
            size: 10,
            sha256: "ab".into(),
            snapshot_size: 30,
            snapshot_sha256: "cd".into(),
            compression: SnapshotCompression::Zstd,
            recipients: vec!["sha256:0123456789abcdef".into()],
            revision: Some(42),
            total_keys: Some(17),
        }
    }

    fn decoded(stored: &Stored) -> Decoded {
        Decoded {
            layers: stored.layers(),
            stored_size: stored.size,
            stored_sha256: stored.sha256.clone(),
            snapshot: crate::snapshot::digest::Digested {
                size: stored.snapshot_size,
                sha256: stored.snapshot_sha256.clone(),
                trailer_matches: true,
            },
            scanned: Some(crate::snapshot::revision::Scanned {
                revision: 42,
                total_keys: 17,
            }),
        }
    }

    #[test]
    fn verification_compares_size_then_hash() {
        let stored = stored();
        assert_eq!(verify(&stored, 10, "ab"), Ok(()));
        let short = verify(&stored, 9, "ab").unwrap_err();
        assert!(
            short
                .message()
                .contains("has 9 bytes where 10 were written")
        );
        let other = verify(&stored, 10, "cd").unwrap_err();
        assert_eq!(other.reason(), "VerificationFailed");
        assert!(other.message().contains("cd"));
    }

    #[test]
    fn the_read_back_checks_every_layer_and_figure() {
        let written = stored();
        let good = decoded(&written);
        let checked = check_read_back(&written, 10, "ab", Some(&good)).unwrap();
        assert!(checked.content_checked);
        assert_eq!((checked.revision, checked.total_keys), (Some(42), Some(17)));
        assert!(
            checked.message.contains("zstd + age"),
            "{}",
            checked.message
        );

        // Without an identity: the stored bytes only, said so.
        let blind = check_read_back(&written, 10, "ab", None).unwrap();
        assert!(!blind.content_checked);
        assert!(blind.message.contains("no identity"));
        assert_eq!(blind.revision, None);

        let cases: Vec<(&str, Decoded)> = vec![
            (
                "encoded as gzip + age",
                Decoded {
                    layers: Layers {
                        compression: SnapshotCompression::Gzip,
                        encrypted: true,
                    },
                    ..good.clone()
                },
            ),
            (
                "etcd's integrity check",
                Decoded {
                    snapshot: crate::snapshot::digest::Digested {
                        trailer_matches: false,
                        ..good.snapshot.clone()
                    },
                    ..good.clone()
                },
            ),
            (
                "where etcd sent 30 bytes",
                Decoded {
                    snapshot: crate::snapshot::digest::Digested {
                        sha256: "ee".into(),
                        ..good.snapshot.clone()
                    },
                    ..good.clone()
                },
            ),
            (
                "revision and keys",
                Decoded {
                    scanned: Some(crate::snapshot::revision::Scanned {
                        revision: 43,
                        total_keys: 17,
                    }),
                    ..good.clone()
                },
            ),
            (
                "revision and keys",
                Decoded {
                    scanned: None,
                    ..good.clone()
                },
            ),
        ];
        for (says, read) in cases {
            let failure = check_read_back(&written, 10, "ab", Some(&read)).unwrap_err();
            assert_eq!(failure.reason(), "VerificationFailed");
            assert!(
                failure.message().contains(says),
                "{says}: {}",
                failure.message()
            );
        }
        // The stored bytes first, whatever decoding says.
        let failure = check_read_back(&written, 11, "ab", Some(&good)).unwrap_err();
        assert!(failure.message().contains("11 bytes"));
        // Pages that could not be read while writing are not required when reading back.
        let unread = Stored {
            revision: None,
            total_keys: None,
            ..written.clone()
        };
        let read = Decoded {
            scanned: None,
            ..good.clone()
        };
        assert!(check_read_back(&unread, 10, "ab", Some(&read)).is_ok());
    }

    #[test]
    fn the_restored_etcd_must_serve_the_snapshots_revision() {
        let written = stored();
        let checksum = check_read_back(&written, 10, "ab", Some(&decoded(&written))).unwrap();
        let restored = check_restored(&written, &checksum, 42, 5).unwrap();
        assert_eq!(restored.method, SnapshotVerify::Restore);
        assert_eq!((restored.revision, restored.keys), (Some(42), Some(5)));
        assert_eq!(restored.total_keys, Some(17));
        assert!(restored.message.contains("served revision 42 and 5 keys"));
        let off = check_restored(&written, &checksum, 41, 5).unwrap_err();
        assert!(
            off.message()
                .contains("serves revision 41 where the snapshot holds revision 42")
        );
    }

    #[test]
    fn statuses_carry_phase_artifact_and_condition() {
        let now: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let pending = pending_status(now, Some(1));
        assert_eq!(pending.phase, Some(SnapshotPhase::Pending));
        let started = started_status("etcd-1", "s3://b/k.db", now, Some(1));
        assert_eq!(started.phase, Some(SnapshotPhase::Started));
        assert_eq!(started.member.as_deref(), Some("etcd-1"));
        assert_eq!(started.start_time.as_deref(), Some("2026-01-02T03:04:05Z"));
        let stored = Stored {
            size: 20480,
            sha256: "00ff".into(),
            ..stored()
        };
        let source = Source {
            member: "etcd-1".into(),
            revision: Some(40),
            etcd_version: Some("3.5.1".into()),
        };
        let checked = check_read_back(&stored, 20480, "00ff", Some(&decoded(&stored))).unwrap();
        let later: Timestamp = "2026-01-02T03:04:09Z".parse().unwrap();
        let done = complete_status(&started, &stored, &source, &checked, later, Some(1));
        assert_eq!(done.phase, Some(SnapshotPhase::Complete));
        let artifact = done.artifact.clone().unwrap();
        assert_eq!(artifact.uri, "s3://b/k.db");
        assert_eq!(artifact.size_bytes, Some(20480));
        assert_eq!(artifact.checksum.as_deref(), Some("sha256:00ff"));
        assert_eq!(
            done.revision,
            Some(42),
            "the pages' revision, not the one asked"
        );
        assert_eq!(done.verified, Some(true));
        assert_eq!(done.compression, Some(SnapshotCompression::Zstd));
        let encryption = done.encryption.clone().unwrap();
        assert_eq!(encryption.method, "age");
        assert_eq!(encryption.recipients, ["sha256:0123456789abcdef"]);
        assert_eq!(done.snapshot_size_bytes, Some(30));
        assert_eq!(done.snapshot_checksum.as_deref(), Some("sha256:cd"));
        let v = done.verification.clone().unwrap();
        assert_eq!(v.method, SnapshotVerify::Checksum);
        assert_eq!(v.time.as_deref(), Some("2026-01-02T03:04:09Z"));
        assert_eq!(
            (v.revision, v.total_keys, v.content_checked),
            (Some(42), Some(17), Some(true))
        );
        assert_eq!(done.start_time.as_deref(), Some("2026-01-02T03:04:05Z"));
        assert_eq!(
            done.completion_time.as_deref(),
            Some("2026-01-02T03:04:09Z")
        );
        let ready = &done.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (ready.type_.as_str(), ready.status.as_str()),
            ("Ready", "True")
        );
        assert!(ready.message.contains("revision 42"));
        assert!(ready.message.contains("zstd + age"), "{}", ready.message);
        // The stored figures come back from the status (the restore check needs them).
        assert_eq!(Stored::from_status(&done), Some(stored.clone()));
        // Asked revision when the pages could not be read.
        let unread = Stored {
            revision: None,
            total_keys: None,
            ..stored.clone()
        };
        let done = complete_status(&started, &unread, &source, &checked, later, Some(1));
        assert_eq!(done.revision, Some(40));

        let failed = failed_status(
            &started,
            &Failure::Unauthorized {
                store: String::new(),
            },
            None,
            None,
            later,
            Some(1),
        );
        assert_eq!(failed.phase, Some(SnapshotPhase::Failed));
        assert_eq!(failed.artifact, None);
        assert_eq!(failed.verified, None);
        assert_eq!(failed.verification, None);
        assert_eq!(failed.member.as_deref(), Some("etcd-1"));
        let ready = &failed.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "Unauthorized")
        );
        assert_eq!(
            failed.failure_reason.as_deref(),
            Some(ready.message.as_str())
        );

        let mismatch = Failure::VerificationFailed { detail: "x".into() };
        let unverified = failed_status(
            &started,
            &mismatch,
            Some(&stored),
            Some(SnapshotVerify::Restore),
            later,
            Some(1),
        );
        assert_eq!(unverified.verified, Some(false));
        assert!(unverified.artifact.is_some());
        assert_eq!(unverified.compression, Some(SnapshotCompression::Zstd));
        let v = unverified.verification.unwrap();
        assert_eq!(v.method, SnapshotVerify::Restore);
        assert!(v.message.unwrap().contains("verification failed"));
    }

    #[test]
    fn a_restore_check_is_pending_only_while_stored_and_unfinished() {
        let now: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let started = started_status("etcd-1", "s3://b/k.db", now, Some(1));
        assert!(!restore_check_pending(&started), "not stored yet");
        let stored = stored();
        let source = Source::default();
        let checksum = check_read_back(&stored, 10, "ab", Some(&decoded(&stored))).unwrap();
        let verifying =
            verifying_status(&started, &stored, &source, &checksum, "pod", now, Some(1));
        assert!(restore_check_pending(&verifying));
        assert_eq!(verifying.phase, Some(SnapshotPhase::Started));
        assert_eq!(verifying.verified, None);
        assert_eq!(
            verifying.conditions.as_ref().unwrap()[0].reason,
            "Verifying"
        );
        assert_eq!(Stored::from_status(&verifying), Some(stored.clone()));
        let back = checked_from_status(&verifying).unwrap();
        assert_eq!((back.revision, back.total_keys), (Some(42), Some(17)));
        let restored = check_restored(&stored, &back, 42, 3).unwrap();
        let done = complete_status(&verifying, &stored, &source, &restored, now, Some(1));
        assert!(!restore_check_pending(&done));
        assert_eq!(done.verification.unwrap().keys, Some(3));
    }

    #[test]
    fn the_latest_success_is_the_newest_complete_and_verified_snapshot_per_cluster() {
        let snapshot = |ns: &str, cluster: &str, phase, verified, done: &str| {
            let mut s = etcd_operator_api::EtcdSnapshot::new("s", Default::default());
            s.metadata.namespace = Some(ns.into());
            s.spec.cluster_ref.name = cluster.into();
            s.status = Some(EtcdSnapshotStatus {
                phase: Some(phase),
                verified,
                completion_time: Some(done.into()),
                ..Default::default()
            });
            std::sync::Arc::new(s)
        };
        let all = [
            snapshot(
                "a",
                "etcd",
                SnapshotPhase::Complete,
                Some(true),
                "2026-01-01T00:00:00Z",
            ),
            snapshot(
                "a",
                "etcd",
                SnapshotPhase::Complete,
                Some(true),
                "2026-01-02T00:00:00Z",
            ),
            // Newer, but failed or not verified: not a success.
            snapshot(
                "a",
                "etcd",
                SnapshotPhase::Failed,
                None,
                "2026-01-03T00:00:00Z",
            ),
            snapshot(
                "a",
                "etcd",
                SnapshotPhase::Complete,
                Some(false),
                "2026-01-04T00:00:00Z",
            ),
            snapshot(
                "b",
                "etcd",
                SnapshotPhase::Complete,
                Some(true),
                "2026-01-01T00:00:00Z",
            ),
            snapshot(
                "b",
                "other",
                SnapshotPhase::Started,
                None,
                "2026-01-01T00:00:00Z",
            ),
        ];
        let latest = latest_successes(&all);
        let day = |d: &str| d.parse::<Timestamp>().unwrap().as_second();
        assert_eq!(
            latest,
            std::collections::BTreeMap::from([
                (("a".into(), "etcd".into()), day("2026-01-02T00:00:00Z")),
                (("b".into(), "etcd".into()), day("2026-01-01T00:00:00Z")),
            ])
        );
    }
}
