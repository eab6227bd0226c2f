//! The pure decisions of the EtcdSnapshot controller: what to do next, from which member,
//! where the object goes, whether an existing object may be replaced, and what the status and
//! the Events say. No I/O here; `take` performs what these decide.
//!
//! - here: the cluster's facts, the voter, the next step, the overwrite guard, the newest
//!   successes;
//! - [`failure`]: why a snapshot failed, in words;
//! - [`check`]: what is verified (the read-back, the restore check);
//! - [`status`]: the statuses and the Ready condition.

mod check;
mod failure;
mod status;

pub use check::{
    Checked, Stored, check_read_back, check_restored, checked_from_status, restore_check_pending,
    verify,
};
pub use failure::{Failure, StoreWords};
pub use status::{
    Source, complete_status, failed_status, pending_status, started_status, verifying_status,
};

use etcd_operator_api::shared::{PvcSnapshotLocation, SnapshotLocation, StoreKind};
use etcd_operator_api::snapshot::SnapshotPhase;
use k8s_openapi::jiff::Timestamp;

use crate::build::member_client_url;
use crate::plan::Observed;

/// The user-defined object metadata (`x-amz-meta-etcd-snapshot-uid`) that records which
/// EtcdSnapshot wrote an object: the overwrite guard reads it back.
pub const UID_METADATA: &str = "etcd-snapshot-uid";

/// The metadata naming the EtcdSnapshot (`<namespace>/<name>`), for people reading the bucket.
pub const NAME_METADATA: &str = "etcd-snapshot";

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

#[cfg(test)]
mod tests;
