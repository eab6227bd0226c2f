//! [`observe_cluster`]: everything the planner needs to know about etcd, in one value.
//!
//! Unreachable members and a cluster without quorum are facts in the view (with etcd's error
//! text), never an error that aborts observation: the planner must see an outage to act on it.

use futures::future::join_all;

use super::access::EtcdAccess;
use super::client::{EtcdClient, Timeouts};
use super::error::{EtcdError, EtcdErrorKind};
use super::pool::{EtcdConnections, drops_connection};
use super::types::{Alarm, Compaction, EndpointStatus, MemberInfo};

/// What one endpoint said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointObservation {
    /// The client URL asked.
    pub endpoint: String,
    /// Its Status, or why it did not answer.
    pub status: Result<EndpointStatus, EtcdError>,
    /// A linearizable read through this endpoint alone. `None` when it was not asked: the
    /// Status failed, or the member is a learner (learners refuse linearizable reads).
    pub health: Option<Result<(), EtcdError>>,
}

impl EndpointObservation {
    /// The member ID of whoever answered at this endpoint.
    pub fn member_id(&self) -> Option<u64> {
        self.status.as_ref().ok().map(|s| s.member_id)
    }

    pub fn is_healthy(&self) -> bool {
        matches!(self.health, Some(Ok(())))
    }
}

/// etcd as observed in one pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdView {
    /// One entry per endpoint asked, in the order given.
    pub endpoints: Vec<EndpointObservation>,
    /// The member list, preferably from the leader; a member without quorum still answers it
    /// from its own (possibly stale) view.
    pub members: Result<Vec<MemberInfo>, EtcdError>,
    /// The cluster ID from the member list's response header.
    pub cluster_id: Option<u64>,
    /// Active alarms: those the leader lists in its Status when it also served a linearizable
    /// read (its alarm store is then current, and no raft entry is spent), else etcd's
    /// AlarmList, which goes through raft and so fails without quorum.
    pub alarms: Result<Vec<Alarm>, EtcdError>,
    /// Whether the cluster can serve a linearizable read through at least one voter.
    pub health: Result<(), EtcdError>,
    /// Whether the keyspace is compacted up to the current revision: asked only while a
    /// NOSPACE alarm is active (the remediation compacts first), `None` otherwise or when
    /// etcd did not answer.
    pub compaction: Option<Compaction>,
    /// etcd's cluster version (`MAJOR.MINOR` of `/version`'s `etcdcluster`): asked only while
    /// a version change is pending or rolling (see `Observer::observe`), `None` otherwise, when
    /// etcd has not decided it, or when it could not be read.
    pub cluster_version: Option<(u64, u64)>,
}

impl EtcdView {
    /// The view when there was nothing to ask (no member has a Pod yet, or all are dormant).
    pub fn not_observed(reason: &str) -> EtcdView {
        let err = EtcdError::new("Observe", &[], EtcdErrorKind::Unreachable, reason);
        EtcdView {
            endpoints: Vec::new(),
            members: Err(err.clone()),
            cluster_id: None,
            alarms: Err(err.clone()),
            health: Err(err),
            compaction: None,
            cluster_version: None,
        }
    }

    pub fn is_healthy(&self) -> bool {
        self.health.is_ok()
    }

    /// The leader, as reported by the answering member with the highest raft term.
    pub fn leader(&self) -> Option<u64> {
        self.statuses()
            .filter(|s| s.leader != 0)
            .max_by_key(|s| s.raft_term)
            .map(|s| s.leader)
    }

    /// The Status reported by member `id`, if it answered.
    pub fn status_of(&self, id: u64) -> Option<&EndpointStatus> {
        self.statuses().find(|s| s.member_id == id)
    }

    /// The observation of the endpoint where member `id` answered.
    pub fn observation_of(&self, id: u64) -> Option<&EndpointObservation> {
        self.endpoints.iter().find(|o| o.member_id() == Some(id))
    }

    /// The observation of one endpoint URL.
    pub fn observation_at(&self, endpoint: &str) -> Option<&EndpointObservation> {
        self.endpoints.iter().find(|o| o.endpoint == endpoint)
    }

    pub fn statuses(&self) -> impl Iterator<Item = &EndpointStatus> {
        self.endpoints.iter().filter_map(|o| o.status.as_ref().ok())
    }

    /// The member list, empty when it could not be fetched.
    pub fn member_list(&self) -> &[MemberInfo] {
        self.members.as_deref().unwrap_or(&[])
    }

    /// The active alarms, empty when they could not be listed.
    pub fn active_alarms(&self) -> &[Alarm] {
        self.alarms.as_deref().unwrap_or(&[])
    }

    /// The applied raft index of the leader, when it answered.
    pub fn leader_applied_index(&self) -> Option<u64> {
        self.leader()
            .and_then(|id| self.status_of(id))
            .map(|s| s.raft_applied_index)
    }
}

/// Asks every endpoint concurrently (Status, then a linearizable read on voters), then the
/// member list (from the leader when it answered) and the alarms. Bounded by roughly three
/// `timeouts.deadline()`s however many endpoints are down; one that refuses connections fails
/// at once.
pub async fn observe_cluster(
    endpoints: &[String],
    timeouts: Timeouts,
    access: &EtcdAccess,
) -> EtcdView {
    observe_cluster_with(&EtcdConnections::default(), endpoints, timeouts, access).await
}

/// [`observe_cluster`] over `connections` kept from earlier observations (and keeping the new
/// ones): a settled cluster is observed without a handshake or an `Authenticate`.
pub async fn observe_cluster_with(
    connections: &EtcdConnections,
    endpoints: &[String],
    timeouts: Timeouts,
    access: &EtcdAccess,
) -> EtcdView {
    if endpoints.is_empty() {
        return EtcdView::not_observed("no endpoints to observe");
    }
    let observations: Vec<EndpointObservation> = join_all(
        endpoints
            .iter()
            .map(|ep| observe_endpoint(connections, ep, timeouts, access)),
    )
    .await;

    let leader = observations
        .iter()
        .filter_map(|o| o.status.as_ref().ok())
        .filter(|s| s.leader != 0)
        .max_by_key(|s| s.raft_term)
        .map(|s| s.leader);
    let leader_endpoint = leader.and_then(|id| {
        observations
            .iter()
            .find(|o| o.member_id() == Some(id))
            .map(|o| o.endpoint.clone())
    });
    let voters: Vec<String> = observations
        .iter()
        .filter(|o| matches!(&o.status, Ok(s) if !s.is_learner))
        .map(|o| o.endpoint.clone())
        .collect();
    // With no voter answering Status, still try everything: the member list may be served by
    // one that answered slowly, and the error text says more than "no voters".
    let cluster_endpoints = match (&leader_endpoint, voters.is_empty()) {
        (Some(leader), _) => vec![leader.clone()],
        (None, false) => voters.clone(),
        (None, true) => endpoints.to_vec(),
    };

    let connecting = match cluster_endpoints.as_slice() {
        [only] => connections.endpoint(only, timeouts, access).await,
        _ => EtcdClient::connect(cluster_endpoints.clone(), timeouts, access).await,
    };
    let (members, alarms, compaction) = match connecting {
        Ok(client) => {
            // AlarmList is a raft proposal (a log entry on every member, each pass); the
            // leader's Status lists the same alarms from its store. On etcd 3.6 the entries
            // also decide how a member joins: past 100 applied entries the leader sends a
            // new member a snapshot instead of its log, and a member joining by snapshot
            // sometimes loses its first publish and serves nobody for etcd's 7 s request
            // timeout.
            let listed = alarm_source(&observations, leader);
            let (members, alarms) = tokio::join!(client.member_list_with_cluster_id(), async {
                match listed {
                    AlarmSource::LeaderStatus(alarms) => Ok(alarms),
                    AlarmSource::AlarmList => client.alarms().await,
                    AlarmSource::NoQuorum => Err(EtcdError::new(
                        "AlarmList",
                        &cluster_endpoints,
                        EtcdErrorKind::NoLeader,
                        "not asked: listing alarms goes through raft, and no voter served a linearizable read",
                    )),
                }
            });
            if let [only] = cluster_endpoints.as_slice() {
                for error in [members.as_ref().err(), alarms.as_ref().err()]
                    .into_iter()
                    .flatten()
                {
                    connections.forget_after(only, error);
                }
            }
            let nospace = alarms
                .as_ref()
                .is_ok_and(|a| a.iter().any(|a| a.kind == super::types::AlarmKind::NoSpace));
            let compaction = if nospace {
                client.compaction().await.ok()
            } else {
                None
            };
            (members, alarms, compaction)
        }
        Err(e) => (Err(e.clone()), Err(e), None),
    };
    let (cluster_id, members) = match members {
        Ok((cluster_id, members)) => (Some(cluster_id).filter(|id| *id != 0), Ok(members)),
        Err(e) => (None, Err(e)),
    };
    let health = cluster_health(&observations, endpoints);
    EtcdView {
        endpoints: observations,
        members,
        cluster_id,
        alarms,
        health,
        compaction,
        cluster_version: None,
    }
}

/// Where an observation takes the active alarms from.
enum AlarmSource {
    /// The leader's Status, the leader having served a linearizable read in this observation
    /// (so its applied state, alarm store included, is current).
    LeaderStatus(Vec<Alarm>),
    /// etcd's AlarmList (a raft proposal): when some voter served a read but not the leader, and
    /// under CORRUPT, when etcd refuses reads but still lists alarms.
    AlarmList,
    /// No voter served a read and none said CORRUPT: AlarmList would wait out its deadline
    /// without quorum (seconds of every pass while quorum is lost), so it is not asked.
    NoQuorum,
}

fn alarm_source(observations: &[EndpointObservation], leader: Option<u64>) -> AlarmSource {
    let at_leader = leader.and_then(|id| observations.iter().find(|o| o.member_id() == Some(id)));
    if let Some(at_leader) = at_leader
        && let Ok(status) = &at_leader.status
        && at_leader.is_healthy()
    {
        return AlarmSource::LeaderStatus(Alarm::from_status_errors(&status.errors));
    }
    let corrupt = observations
        .iter()
        .any(|o| matches!(&o.health, Some(Err(e)) if e.kind == EtcdErrorKind::Corrupt));
    if corrupt || observations.iter().any(EndpointObservation::is_healthy) {
        AlarmSource::AlarmList
    } else {
        AlarmSource::NoQuorum
    }
}

async fn observe_endpoint(
    connections: &EtcdConnections,
    endpoint: &str,
    timeouts: Timeouts,
    access: &EtcdAccess,
) -> EndpointObservation {
    // Status needs no credentials, and a learner cannot authenticate (etcd serves
    // Authenticate through raft, which learners do not): ask it anonymously, over TLS.
    // The client is of exactly this endpoint: its own Status, on the kept connection
    // (`endpoint_status` would dial a connection of its own, every pass). A kept connection
    // that broke since (the member restarted, or went away) is dialled again at once, so the
    // answer is the member's as it is now: back, or refusing connections (`Unreachable`), not
    // the old connection's end. A timeout is not tried again: it would only wait once more.
    let anonymous = access.anonymous();
    let status = match connections
        .endpoint_kept(endpoint, timeouts, &anonymous)
        .await
    {
        Ok((client, kept)) => match client.status().await {
            Err(e) if kept && e.kind != EtcdErrorKind::Timeout && drops_connection(e.kind) => {
                connections.forget(endpoint);
                match connections.endpoint(endpoint, timeouts, &anonymous).await {
                    Ok(client) => client.status().await,
                    Err(e) => Err(e),
                }
            }
            answer => answer,
        },
        Err(e) => Err(e),
    };
    if let Err(e) = &status {
        connections.forget_after(endpoint, e);
    }
    let health = match &status {
        // A member that knows no leader cannot serve a linearizable read: asking would only
        // wait out the deadline (every pass, while quorum is lost).
        Ok(s) if !s.is_learner && s.leader == 0 => Some(Err(EtcdError::new(
            "Health",
            &[endpoint.to_string()],
            EtcdErrorKind::NoLeader,
            "not asked: the member knows no leader (its Status)",
        ))),
        Ok(s) if !s.is_learner => {
            let health = match connections.endpoint(endpoint, timeouts, access).await {
                Ok(client) => client.cluster_health().await,
                Err(e) => Err(e),
            };
            if let Err(e) = &health {
                connections.forget_after(endpoint, e);
            }
            Some(health)
        }
        _ => None,
    };
    EndpointObservation {
        endpoint: endpoint.to_string(),
        status,
        health,
    }
}

/// Healthy when any voter served a linearizable read; otherwise the errors, one per endpoint.
fn cluster_health(
    observations: &[EndpointObservation],
    endpoints: &[String],
) -> Result<(), EtcdError> {
    if observations.iter().any(EndpointObservation::is_healthy) {
        return Ok(());
    }
    let detail = observations
        .iter()
        .map(|o| {
            let why = match (&o.status, &o.health) {
                (Err(e), _) => format!("{}: {}", e.kind, e.detail),
                (Ok(_), Some(Err(e))) => format!("{}: {}", e.kind, e.detail),
                (Ok(s), _) if s.is_learner => "learner".to_string(),
                (Ok(_), _) => "not asked".to_string(),
            };
            format!("{} ({why})", o.endpoint)
        })
        .collect::<Vec<_>>()
        .join("; ");
    let kind = if observations.iter().all(|o| o.status.is_err()) {
        EtcdErrorKind::Unreachable
    } else {
        EtcdErrorKind::NoLeader
    };
    Err(EtcdError::new(
        "Health",
        endpoints,
        kind,
        format!("no voter served a linearizable read: {detail}"),
    ))
}
