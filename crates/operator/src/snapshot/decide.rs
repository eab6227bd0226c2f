//! The pure decisions of the EtcdSnapshot controller: what to do next, from which member,
//! where the object goes, whether an existing object may be replaced, and what the status and
//! the Events say. No I/O here; `take` performs what these decide.

use etcd_operator_api::conditions::snapshot::READY;
use etcd_operator_api::shared::{PvcSnapshotLocation, SnapshotLocation, StoreKind};
use etcd_operator_api::snapshot::{EtcdSnapshotStatus, SnapshotArtifact, SnapshotPhase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

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

/// The object key: `<key>/<name>.db`, as the reference names it (slashes around `key` are
/// not doubled; no key means `<name>.db` at the bucket's root).
pub fn object_key(key: Option<&str>, snapshot: &str) -> String {
    match key.map(|k| k.trim_matches('/')).filter(|k| !k.is_empty()) {
        Some(prefix) => format!("{prefix}/{snapshot}.db"),
        None => format!("{snapshot}.db"),
    }
}

/// `s3://<bucket>/<object key>`.
pub fn object_uri(bucket: &str, key: &str) -> String {
    format!("s3://{bucket}/{key}")
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

/// What a finished upload and its read-back amount to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub uri: String,
    pub size: u64,
    pub sha256: String,
}

/// The read-back check: the same size and SHA-256 as computed while writing.
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

/// `Complete`: stored and read back; Ready True.
pub fn complete_status(
    previous: &EtcdSnapshotStatus,
    stored: &Stored,
    source: &Source,
    now: Timestamp,
    generation: Option<i64>,
) -> EtcdSnapshotStatus {
    EtcdSnapshotStatus {
        phase: Some(SnapshotPhase::Complete),
        artifact: Some(SnapshotArtifact {
            uri: stored.uri.clone(),
            size_bytes: Some(stored.size as i64),
            checksum: Some(format!("sha256:{}", stored.sha256)),
        }),
        conditions: Some(vec![condition(
            "True",
            "Complete",
            format!(
                "stored {} ({} bytes) from member {}{}, read back and verified",
                stored.uri,
                stored.size,
                source.member,
                source
                    .revision
                    .map(|r| format!(" at revision {r}"))
                    .unwrap_or_default()
            ),
            now,
            generation,
        )]),
        start_time: previous.start_time.clone().or(Some(now.to_string())),
        completion_time: Some(now.to_string()),
        revision: source.revision,
        member: Some(source.member.clone()),
        etcd_version: source.etcd_version.clone(),
        verified: Some(true),
        failure_reason: None,
    }
}

/// `Failed`: the reason in the condition and in `failureReason`. `verified` is False only
/// when the failure is the read-back itself; `stored` keeps the artifact of such an object so
/// that the user sees what is in the bucket.
pub fn failed_status(
    previous: &EtcdSnapshotStatus,
    failure: &Failure,
    stored: Option<&Stored>,
    now: Timestamp,
    generation: Option<i64>,
) -> EtcdSnapshotStatus {
    let message = failure.message();
    EtcdSnapshotStatus {
        phase: Some(SnapshotPhase::Failed),
        artifact: stored.map(|s| SnapshotArtifact {
            uri: s.uri.clone(),
            size_bytes: Some(s.size as i64),
            checksum: Some(format!("sha256:{}", s.sha256)),
        }),
        conditions: Some(vec![condition(
            "False",
            failure.reason(),
            message.clone(),
            now,
            generation,
        )]),
        start_time: previous.start_time.clone(),
        completion_time: Some(now.to_string()),
        revision: previous.revision,
        member: previous.member.clone(),
        etcd_version: previous.etcd_version.clone(),
        verified: matches!(failure, Failure::VerificationFailed { .. }).then_some(false),
        failure_reason: Some(message),
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
        ];
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
    fn objects_are_named_like_the_reference() {
        assert_eq!(object_key(Some("etcd/prod"), "daily"), "etcd/prod/daily.db");
        assert_eq!(
            object_key(Some("/etcd/prod/"), "daily"),
            "etcd/prod/daily.db"
        );
        assert_eq!(object_key(Some(""), "daily"), "daily.db");
        assert_eq!(object_key(Some("/"), "daily"), "daily.db");
        assert_eq!(object_key(None, "daily"), "daily.db");
        assert_eq!(object_uri("b", "etcd/daily.db"), "s3://b/etcd/daily.db");
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

    #[test]
    fn verification_compares_size_then_hash() {
        let stored = Stored {
            uri: "s3://b/k.db".into(),
            size: 10,
            sha256: "ab".into(),
        };
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
    fn statuses_carry_phase_artifact_and_condition() {
        let now: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let pending = pending_status(now, Some(1));
        assert_eq!(pending.phase, Some(SnapshotPhase::Pending));
        let started = started_status("etcd-1", "s3://b/k.db", now, Some(1));
        assert_eq!(started.phase, Some(SnapshotPhase::Started));
        assert_eq!(started.member.as_deref(), Some("etcd-1"));
        assert_eq!(started.start_time.as_deref(), Some("2026-01-02T03:04:05Z"));
        let stored = Stored {
            uri: "s3://b/k.db".into(),
            size: 20480,
            sha256: "00ff".into(),
        };
        let source = Source {
            member: "etcd-1".into(),
            revision: Some(42),
            etcd_version: Some("3.5.1".into()),
        };
        let later: Timestamp = "2026-01-02T03:04:09Z".parse().unwrap();
        let done = complete_status(&started, &stored, &source, later, Some(1));
        assert_eq!(done.phase, Some(SnapshotPhase::Complete));
        let artifact = done.artifact.clone().unwrap();
        assert_eq!(artifact.uri, "s3://b/k.db");
        assert_eq!(artifact.size_bytes, Some(20480));
        assert_eq!(artifact.checksum.as_deref(), Some("sha256:00ff"));
        assert_eq!(done.revision, Some(42));
        assert_eq!(done.verified, Some(true));
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

        let failed = failed_status(
            &started,
            &Failure::Unauthorized {
                store: String::new(),
            },
            None,
            later,
            Some(1),
        );
        assert_eq!(failed.phase, Some(SnapshotPhase::Failed));
        assert_eq!(failed.artifact, None);
        assert_eq!(failed.verified, None);
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
        let unverified = failed_status(&started, &mismatch, Some(&stored), later, Some(1));
        assert_eq!(unverified.verified, Some(false));
        assert!(unverified.artifact.is_some());
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
