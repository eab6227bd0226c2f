//! Facts derived once per pass from [`Observed`]: each EtcdMember matched to its etcd member by
//! peer URL, its health, the voter set and quorum arithmetic, strays.

use etcd_operator_api::MemberPhase;
use etcd_operator_api::labels::{MEMBER_FINALIZER, quorum};
use etcd_operator_api::shared::StorageMedium;
use k8s_openapi::jiff::Timestamp;

use super::observed::{Observed, ObservedMember};
use crate::build::{member_client_url, member_ordinal, member_peer_url};
use crate::etcd::{EndpointObservation, MemberInfo, parse_member_id};

/// How a member's etcd answered this pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// A voter that served a linearizable read.
    Healthy,
    /// A learner that answered Status (learners are not asked for linearizable reads).
    Learner,
    /// Answered Status but could not serve a linearizable read (no leader, no quorum).
    NoQuorum,
    /// Did not answer.
    Down,
    /// Not asked (no Pod, or not in the endpoints observed).
    Unknown,
}

/// One EtcdMember with everything derived about it.
#[derive(Clone, Debug)]
pub struct MemberView<'a> {
    pub observed: &'a ObservedMember,
    pub name: &'a str,
    pub ordinal: Option<u32>,
    pub phase: MemberPhase,
    pub peer_url: String,
    /// The etcd member whose peer URLs include this member's peer URL.
    pub etcd: Option<&'a MemberInfo>,
    /// etcd's ID for it: from the match, else from `status.memberID`.
    pub id: Option<u64>,
    pub health: Health,
    pub deleting: bool,
    pub dormant: bool,
    pub memory: bool,
    pub has_finalizer: bool,
    /// The rendered hash of the Pod the operator would build for it now, computed at most once
    /// per pass ([`Context::wanted_rendered_hash`]): the rollout check asks for it several
    /// times per member and pass, and rendering the command line is not free.
    wanted_hash: std::sync::OnceLock<Option<String>>,
}

impl MemberView<'_> {
    pub fn is_voter(&self) -> bool {
        self.etcd.is_some_and(|m| !m.is_learner)
    }

    pub fn is_learner(&self) -> bool {
        self.etcd.is_some_and(|m| m.is_learner)
    }

    /// Running: not leaving and not dormant.
    pub fn is_running(&self) -> bool {
        !self.deleting && !self.dormant
    }

    /// Ready in the sense of the readiness gate: phase Ready, a healthy voter, and its Pod
    /// Ready (the client Service routes by Pod readiness, so a member etcd calls healthy
    /// whose Pod is not Ready yet serves no client).
    pub fn is_ready(&self) -> bool {
        self.phase == MemberPhase::Ready
            && self.health == Health::Healthy
            && self.is_voter()
            && self.pod_ready()
    }

    /// Ready as etcd sees it (phase Ready, a healthy voter) with its Pod running: what counts as
    /// Ready for a scale-out (the readiness gate), and while etcd's NOSPACE alarm is active.
    /// Under NOSPACE the Pod's readiness says nothing: the probe (`/health?exclude=NOSPACE`)
    /// still fails on etcd 3.5.1 when more than one member raised the alarm, because that
    /// version excludes only the first alarm of a kind (etcd-io/etcd#13467, fixed in 3.5.2),
    /// and the cluster takes no writes whatever the Service routes.
    pub fn is_ready_under_nospace(&self) -> bool {
        self.phase == MemberPhase::Ready
            && self.health == Health::Healthy
            && self.is_voter()
            && self
                .observed
                .pod
                .as_ref()
                .is_some_and(|p| !p.deleting && p.phase == crate::plan::PodPhase::Running)
    }

    /// Able to take leadership: phase Ready, a healthy voter in etcd's view, its Pod there and
    /// not going away (Ready or not: readiness is about serving clients).
    pub fn can_lead(&self) -> bool {
        self.phase == MemberPhase::Ready
            && self.health == Health::Healthy
            && self.is_voter()
            && self.observed.pod.as_ref().is_some_and(|p| !p.deleting)
    }

    /// Its Pod exists, is not going away, and is Ready.
    pub fn pod_ready(&self) -> bool {
        self.observed
            .pod
            .as_ref()
            .is_some_and(|p| p.ready && !p.deleting)
    }

    pub fn status(&self) -> etcd_operator_api::EtcdMemberStatus {
        self.observed.member.status.clone().unwrap_or_default()
    }

    pub fn recreate_count(&self) -> i32 {
        self.observed
            .member
            .status
            .as_ref()
            .and_then(|s| s.recreate_count)
            .unwrap_or(0)
    }

    pub fn phase_since(&self) -> Option<Timestamp> {
        self.observed
            .member
            .status
            .as_ref()
            .and_then(|s| s.last_phase_transition_time.as_ref())
            .map(|t| t.0)
    }

    pub fn recorded_pod_uid(&self) -> Option<&str> {
        self.observed
            .member
            .status
            .as_ref()
            .and_then(|s| s.pod_uid.as_deref())
    }

    pub fn is_bootstrap_seed(&self) -> bool {
        self.observed.member.spec.bootstrap == Some(true)
    }
}

/// A voter of the cluster, as etcd lists it.
#[derive(Clone, Copy, Debug)]
pub struct Voter {
    pub id: u64,
    pub healthy: bool,
}

/// Everything derived from one [`Observed`].
pub struct Context<'a> {
    pub observed: &'a Observed,
    pub now: Timestamp,
    pub cluster_name: String,
    /// Members in ordinal order; members with other names (made by the reference operator,
    /// `<cluster>-xxxxx`) after, oldest first (see [`member_order`]).
    pub members: Vec<MemberView<'a>>,
    /// etcd members no EtcdMember claims, by peer URL or by name.
    pub strays: Vec<&'a MemberInfo>,
    /// The cluster with this pass's latches applied (token, target, progress deadline): what
    /// new members and the PDB are built from.
    pub cluster: etcd_operator_api::EtcdCluster,
    /// The target member count (`status.observed.replicas` after this pass's latch).
    pub desired: i32,
    /// `status.clusterID` is latched: the cluster has formed once.
    pub formed: bool,
    /// A rule asked for the EtcdSnapshots while they were not read
    /// ([`crate::plan::Observed::snapshots`] is `None`): the plan is to be made again with
    /// them.
    pub snapshots_wanted: std::cell::Cell<bool>,
}

impl<'a> Context<'a> {
    /// [`crate::build::member_rendered_hash`] of `m` under this pass's settings, rendered on
    /// the first call of the pass and kept in `m` for the others.
    pub fn wanted_rendered_hash<'m>(&self, m: &'m MemberView<'_>) -> Option<&'m str> {
        m.wanted_hash
            .get_or_init(|| {
                crate::build::member_rendered_hash(&m.observed.member, &self.observed.settings)
            })
            .as_deref()
    }

    pub fn new(observed: &'a Observed, now: Timestamp) -> Context<'a> {
        let cluster = &observed.cluster;
        let cluster_name = cluster.metadata.name.clone().unwrap_or_default();
        let etcd_members = observed.etcd.member_list();

        let mut members: Vec<MemberView<'a>> = observed
            .members
            .iter()
            .map(|om| member_view(observed, om, &cluster_name, etcd_members))
            .collect();
        members.sort_by(|a, b| member_order(a, b));

        let strays = etcd_members
            .iter()
            .filter(|e| {
                !members.iter().any(|m| {
                    m.etcd.is_some_and(|matched| matched.id == e.id)
                        || (e.has_started() && e.name == m.name)
                })
            })
            .collect();

        let status = cluster.status.as_ref();
        let formed = status.and_then(|s| s.cluster_id.as_ref()).is_some();
        Context {
            observed,
            now,
            cluster_name,
            members,
            strays,
            cluster: cluster.clone(),
            desired: target_replicas(cluster),
            formed,
            snapshots_wanted: std::cell::Cell::new(false),
        }
    }

    /// Adopts `cluster` (the same object with this pass's latches) as the one rules build from.
    pub fn with_latched(mut self, cluster: etcd_operator_api::EtcdCluster) -> Self {
        self.desired = target_replicas(&cluster);
        self.cluster = cluster;
        self
    }

    pub fn running(&self) -> impl Iterator<Item = &MemberView<'a>> {
        self.members.iter().filter(|m| m.is_running())
    }

    /// The voters: from etcd's member list when it answered, else from the members' recorded
    /// status (the last thing etcd told us).
    pub fn voters(&self) -> Vec<Voter> {
        match &self.observed.etcd.members {
            Ok(list) => list
                .iter()
                .filter(|m| !m.is_learner)
                .map(|m| Voter {
                    id: m.id,
                    healthy: self.id_is_healthy(m.id),
                })
                .collect(),
            Err(_) => self
                .members
                .iter()
                .filter(|m| {
                    m.observed.member.status.as_ref().and_then(|s| s.is_voter) == Some(true)
                })
                .filter_map(|m| m.id)
                .map(|id| Voter {
                    id,
                    healthy: self.id_is_healthy(id),
                })
                .collect(),
        }
    }

    fn id_is_healthy(&self, id: u64) -> bool {
        self.observed
            .etcd
            .observation_of(id)
            .is_some_and(EndpointObservation::is_healthy)
    }

    /// Whether the cluster keeps quorum if voter `id` stops serving (`removed`: and also
    /// leaves the voter set). "Keeps quorum": the healthy voters left are at least a quorum of
    /// the voter set left. A learner, or a voter already down, changes nothing.
    pub fn keeps_quorum_without(&self, id: u64, removed: bool) -> bool {
        let voters = self.voters();
        let Some(target) = voters.iter().find(|v| v.id == id) else {
            return true;
        };
        let healthy = voters.iter().filter(|v| v.healthy).count() as u32;
        let healthy_after = healthy - u32::from(target.healthy);
        let set_after = voters.len() as u32 - u32::from(removed);
        set_after == 0 || healthy_after >= quorum(set_after)
    }

    /// Whether the voters other than `id` have quorum on their own (of the current set):
    /// the condition for repairing `id` (a cluster-wide outage is not a member's fault).
    pub fn others_have_quorum(&self, id: Option<u64>) -> bool {
        let voters = self.voters();
        if voters.is_empty() {
            return false;
        }
        let healthy_others = voters
            .iter()
            .filter(|v| v.healthy && Some(v.id) != id)
            .count();
        healthy_others as u32 >= quorum(voters.len() as u32)
    }

    /// Healthy voters, and quorum of the voter set.
    pub fn quorum_numbers(&self) -> (usize, usize, u32) {
        let voters = self.voters();
        let healthy = voters.iter().filter(|v| v.healthy).count();
        (healthy, voters.len(), quorum(voters.len() as u32))
    }

    /// The member etcd reports as leader.
    pub fn leader(&self) -> Option<&MemberView<'a>> {
        let id = self.observed.etcd.leader()?;
        self.members
            .iter()
            .find(|m| m.id == Some(id) && m.etcd.is_some())
    }

    /// Where leadership goes before `leaving` is disrupted: the ready voter with the lowest
    /// ordinal, other than `leaving`.
    pub fn successor_for(&self, leaving: &str) -> Option<&MemberView<'a>> {
        let candidates = || {
            self.members
                .iter()
                .filter(move |m| m.name != leaving && m.is_running())
        };
        // A Ready member first; else one etcd calls a healthy voter whose Pod runs but is not
        // Ready: while an alarm stands (CORRUPT fails every Pod's readiness probe) leadership
        // must still move off a member the operator is about to remove.
        candidates()
            .find(|m| m.is_ready())
            .or_else(|| candidates().find(|m| m.can_lead()))
    }

    /// Why a MemberAdd must wait, if it must: a learner not yet promoted, a member added but
    /// not started, or a member on its way out of etcd.
    pub fn membership_change_in_flight(&self) -> Option<String> {
        let list = self.observed.etcd.member_list();
        if let Some(learner) = list.iter().find(|m| m.is_learner) {
            return Some(format!("learner {:x} is not promoted yet", learner.id));
        }
        if let Some(unstarted) = list.iter().find(|m| !m.has_started()) {
            return Some(format!(
                "member {:x} was added but has not started",
                unstarted.id
            ));
        }
        self.members
            .iter()
            .find(|m| {
                m.etcd.is_some()
                    && (m.deleting
                        || matches!(m.phase, MemberPhase::Replacing | MemberPhase::Terminating))
            })
            .map(|m| format!("member {} is leaving etcd", m.name))
    }

    /// `--initial-cluster` for `member` joining now: every member etcd lists (an unstarted
    /// one under the name of the EtcdMember that claims its peer URL). `None` without a
    /// member list that includes `member`.
    pub fn initial_cluster_from_etcd(&self, member: &MemberView<'_>) -> Option<String> {
        member.etcd?;
        let list = self.observed.etcd.members.as_ref().ok()?;
        let mut pairs = Vec::new();
        for m in list {
            let name = if m.has_started() {
                m.name.clone()
            } else {
                let claimant = self
                    .members
                    .iter()
                    .find(|v| m.peer_urls.contains(&v.peer_url))?;
                claimant.name.to_string()
            };
            for url in &m.peer_urls {
                pairs.push(format!("{name}={url}"));
            }
        }
        pairs.sort();
        Some(pairs.join(","))
    }

    /// The alarms etcd reports (empty when it could not be asked).
    pub fn alarms(&self) -> &[crate::etcd::Alarm] {
        self.observed.etcd.active_alarms()
    }

    /// etcd's NOSPACE alarm is active (see [`MemberView::is_ready_under_nospace`]).
    pub fn nospace(&self) -> bool {
        self.alarms()
            .iter()
            .any(|a| a.kind == crate::etcd::AlarmKind::NoSpace)
    }
}

fn target_replicas(cluster: &etcd_operator_api::EtcdCluster) -> i32 {
    cluster
        .status
        .as_ref()
        .and_then(|s| s.observed.as_ref())
        .map(|o| o.replicas)
        .unwrap_or_else(|| cluster.spec.replicas_or_default())
}

fn member_view<'a>(
    observed: &'a Observed,
    om: &'a ObservedMember,
    cluster: &str,
    etcd_members: &'a [MemberInfo],
) -> MemberView<'a> {
    let member = &om.member;
    let name = member.metadata.name.as_deref().unwrap_or_default();
    let status = member.status.as_ref();
    let peer_url = member_peer_url(member);
    let client_url = member_client_url(member);
    let etcd = etcd_members
        .iter()
        .find(|e| e.peer_urls.contains(&peer_url));
    let id = etcd.map(|e| e.id).or_else(|| {
        status
            .and_then(|s| s.member_id.as_deref())
            .and_then(parse_member_id)
    });
    let view = &observed.etcd;
    let observation = id
        .and_then(|id| view.observation_of(id))
        .or_else(|| view.observation_at(&client_url));
    let health = match observation {
        None => Health::Unknown,
        Some(o) => match (&o.status, &o.health) {
            (Err(_), _) => Health::Down,
            (Ok(s), _) if s.is_learner => Health::Learner,
            (Ok(_), Some(Ok(()))) => Health::Healthy,
            (Ok(_), _) => Health::NoQuorum,
        },
    };
    MemberView {
        observed: om,
        name,
        ordinal: member_ordinal(cluster, name),
        phase: status.and_then(|s| s.phase).unwrap_or(MemberPhase::Pending),
        peer_url,
        etcd,
        id,
        health,
        deleting: member.metadata.deletion_timestamp.is_some(),
        dormant: member.spec.dormant == Some(true),
        memory: member.spec.storage.medium_or_default() == StorageMedium::Memory,
        has_finalizer: member
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == MEMBER_FINALIZER),
        wanted_hash: std::sync::OnceLock::new(),
    }
}

/// The order of members wherever a rule speaks of ordinals ("leadership to the lowest
/// ordinal", "scale-in removes the highest"): members named `<cluster>-<ordinal>` by ordinal;
/// members with other names (the reference operator's `generateName` names) after them, in
/// creation order (`metadata.creationTimestamp`, then name), which is what their ordinal
/// would have been. So a scale-in takes the newest adopted member first, and leadership goes
/// to the lowest ordinal, or in a cluster of adopted members only, to the oldest.
pub fn member_order(a: &MemberView<'_>, b: &MemberView<'_>) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a.ordinal, b.ordinal) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => {
            let created = |m: &MemberView<'_>| {
                m.observed
                    .member
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0)
            };
            // A member without a timestamp (not read from the API) sorts last.
            match (created(a), created(b)) {
                (Some(x), Some(y)) => x.cmp(&y),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            }
            .then_with(|| a.name.cmp(b.name))
        }
    }
}
