//! One simulated etcd cluster: its membership, leader, raft term and index, revision,
//! alarms and each member's backend size, and the rules by which etcd 3.6 accepts or refuses
//! each call the operator makes. Pure: no clock (callers pass `now_ms`, milliseconds since
//! the UNIX epoch), no I/O.
//!
//! Each call is asked of one member, `via`, the way a client asks the member it is connected
//! to. The order of the checks follows etcd's (interceptor, then the server's strict
//! reconfiguration checks, then the proposal through raft, then the membership store's
//! validation at apply time), so a call that breaks several rules gets etcd's refusal.

use std::collections::{BTreeMap, BTreeSet};

mod raft;

use super::ids;
use super::types::{Alarm, AlarmAction, AlarmKind, Header, Member, MemberId, RangeQuery, Status};
use crate::refusal::Refusal;

/// etcd's health interval: a peer counts as connected once connected this long.
pub const HEALTH_INTERVAL_MS: u64 = 5_000;
/// etcd allows this many learners at once.
pub const MAX_LEARNERS: usize = 1;
/// The server version the simulator reports.
pub const VERSION: &str = "3.6.17";
/// The storage version etcd 3.6 reports.
pub const STORAGE_VERSION: &str = "3.6.0";
/// etcd's default backend quota, 2 GiB.
pub const DEFAULT_QUOTA: i64 = 2 * 1024 * 1024 * 1024;
/// A fresh 3.6 backend's size on disk and in use, as a new member reports them.
pub const FRESH_DB_SIZE: (i64, i64) = (20_480, 16_384);

/// Why a cluster could not be bootstrapped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapError(pub String);

impl std::fmt::Display for BootstrapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BootstrapError {}

#[derive(Clone, Debug)]
struct MemberState {
    member: Member,
    /// When its process started serving; `None` while it does not run.
    running_since: Option<u64>,
    /// Name and client URLs it will publish through raft once there is a leader.
    pending_publish: Option<(String, Vec<String>)>,
    db_size: i64,
    db_size_in_use: i64,
}

impl MemberState {
    fn running(&self) -> bool {
        self.running_since.is_some()
    }
}

/// One simulated cluster.
#[derive(Clone, Debug)]
pub struct Cluster {
    cluster_id: u64,
    members: BTreeMap<MemberId, MemberState>,
    removed: BTreeSet<MemberId>,
    leader: MemberId,
    raft_term: u64,
    raft_index: u64,
    revision: i64,
    compact_revision: i64,
    alarms: BTreeSet<Alarm>,
    quota: i64,
    cluster_version_set: bool,
}

impl Cluster {
    /// A new cluster of `initial` members (`--name` and peer URLs each, as in
    /// `--initial-cluster`) under `token` (`--initial-cluster-token`): IDs as etcd derives
    /// them, no member running yet, so no leader.
    pub fn bootstrap(
        token: &str,
        initial: &[(String, Vec<String>)],
    ) -> Result<Cluster, BootstrapError> {
        if initial.is_empty() {
            return Err(BootstrapError("an initial cluster needs a member".into()));
        }
        let mut members = BTreeMap::new();
        let mut seen_urls = BTreeSet::new();
        for (name, urls) in initial {
            if urls.is_empty() || !urls.iter().all(|u| ids::valid_peer_url(u)) {
                return Err(BootstrapError(format!(
                    "invalid peer URLs for {name}: {urls:?}"
                )));
            }
            if let Some(dup) = urls.iter().find(|u| !seen_urls.insert(u.as_str())) {
                return Err(BootstrapError(format!("peer URL {dup} listed twice")));
            }
            let mut peer_urls = urls.clone();
            peer_urls.sort();
            let id = ids::member_id(&peer_urls, token, None);
            let member = Member {
                id,
                name: name.clone(),
                peer_urls,
                client_urls: Vec::new(),
                is_learner: false,
            };
            members.insert(id, MemberState::fresh(member));
        }
        let member_ids: Vec<MemberId> = members.keys().copied().collect();
        Ok(Cluster {
            cluster_id: ids::cluster_id(&member_ids),
            // One configuration change per initial member is the start of the log.
            raft_index: member_ids.len() as u64,
            members,
            removed: BTreeSet::new(),
            leader: 0,
            raft_term: 1,
            revision: 1,
            compact_revision: 0,
            alarms: BTreeSet::new(),
            quota: DEFAULT_QUOTA,
            cluster_version_set: false,
        })
    }

    /// The cluster's ID.
    pub fn cluster_id(&self) -> u64 {
        self.cluster_id
    }

    /// The leader; 0 while there is none.
    pub fn leader(&self) -> MemberId {
        self.leader
    }

    /// The committed raft index.
    pub fn raft_index(&self) -> u64 {
        self.raft_index
    }

    /// The raft term.
    pub fn raft_term(&self) -> u64 {
        self.raft_term
    }

    /// The store's revision.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// The members, by ID.
    pub fn members(&self) -> Vec<Member> {
        self.members.values().map(|m| m.member.clone()).collect()
    }

    /// The member with `name`, if any.
    pub fn member_named(&self, name: &str) -> Option<MemberId> {
        self.members
            .values()
            .find(|m| m.member.name == name)
            .map(|m| m.member.id)
    }

    /// The member whose peer URLs include `url`, if any.
    pub fn member_with_peer_url(&self, url: &str) -> Option<MemberId> {
        self.members
            .values()
            .find(|m| m.member.peer_urls.iter().any(|u| u == url))
            .map(|m| m.member.id)
    }

    /// Whether `id`'s process runs.
    pub fn is_running(&self, id: MemberId) -> bool {
        self.members.get(&id).is_some_and(MemberState::running)
    }

    /// The active alarms.
    pub fn alarms(&self) -> Vec<Alarm> {
        self.alarms.iter().copied().collect()
    }

    /// Sets the backend quota (`--quota-backend-bytes`).
    pub fn set_quota(&mut self, bytes: i64) {
        self.quota = bytes;
    }

    /// Sets member `id`'s backend size on disk and in use (what a benchmark or a test wants a
    /// member to report, e.g. a backend near its quota).
    pub fn set_db_size(&mut self, id: MemberId, size: i64, in_use: i64) {
        if let Some(state) = self.members.get_mut(&id) {
            state.db_size = size;
            state.db_size_in_use = in_use;
        }
    }

    /// Member `id`'s process starts serving at `now_ms` under `name` with `client_urls`; it
    /// publishes them through raft once there is a leader (its name makes it "started").
    pub fn start_member(
        &mut self,
        id: MemberId,
        name: &str,
        client_urls: &[String],
        now_ms: u64,
    ) -> Result<(), Refusal> {
        let state = self.members.get_mut(&id).ok_or(Refusal::MemberNotFound)?;
        if state.running_since.is_none() {
            state.running_since = Some(now_ms);
        }
        if state.member.name != name || state.member.client_urls != client_urls {
            state.pending_publish = Some((name.to_string(), client_urls.to_vec()));
        }
        self.settle(now_ms);
        Ok(())
    }

    /// Member `id`'s process stops (killed, or its Pod deleted).
    pub fn stop_member(&mut self, id: MemberId, now_ms: u64) {
        if let Some(state) = self.members.get_mut(&id) {
            state.running_since = None;
        }
        self.settle(now_ms);
    }

    /// `count` writes of `bytes` in all reach the store: the revision and raft index advance,
    /// every member's backend grows, and a member whose backend goes over the quota raises
    /// NOSPACE (etcd raises it on the write that finds the quota exceeded). Refused like a
    /// write: without a leader, or under NOSPACE or CORRUPT.
    pub fn record_writes(&mut self, count: u32, bytes: i64) -> Result<(), Refusal> {
        if self.leader == 0 {
            return Err(Refusal::Timeout);
        }
        if self.alarms.iter().any(|a| a.kind == AlarmKind::Corrupt) {
            return Err(Refusal::Corrupt);
        }
        if self.alarms.iter().any(|a| a.kind == AlarmKind::NoSpace) {
            return Err(Refusal::NoSpace);
        }
        self.revision += i64::from(count);
        self.raft_index += u64::from(count);
        let mut over = Vec::new();
        for state in self.members.values_mut() {
            state.db_size_in_use += bytes;
            state.db_size = state.db_size.max(state.db_size_in_use);
            if state.db_size > self.quota {
                over.push(state.member.id);
            }
        }
        for member_id in over {
            self.alarms.insert(Alarm {
                member_id,
                kind: AlarmKind::NoSpace,
            });
            self.raft_index += 1;
        }
        Ok(())
    }

    /// etcd's MemberList, asked of `via` (linearizable: through the leader).
    pub fn member_list(
        &self,
        via: MemberId,
        linearizable: bool,
    ) -> Result<(Header, Vec<Member>), Refusal> {
        self.voter_serving(via)?;
        if linearizable {
            self.need_leader()?;
        }
        Ok((self.header(via), self.members()))
    }

    /// etcd's MemberAdd (as a learner when `is_learner`) at `now_ms`: the new member and the
    /// member list after it.
    pub fn member_add(
        &mut self,
        via: MemberId,
        peer_urls: &[String],
        is_learner: bool,
        now_ms: u64,
    ) -> Result<(Header, Member, Vec<Member>), Refusal> {
        self.voter_serving(via)?;
        if peer_urls.is_empty() || !peer_urls.iter().all(|u| ids::valid_peer_url(u)) {
            return Err(Refusal::MemberBadUrls);
        }
        // mayAddMember, under etcd's default --strict-reconfig-check.
        if !is_learner && !self.ready_to_add_voter() {
            return Err(Refusal::NotEnoughStarted);
        }
        if !self.connected_fully(via, now_ms) {
            return Err(Refusal::Unhealthy);
        }
        self.need_leader()?;
        // The configuration change is a raft entry, refused or not: etcd validates it only
        // when it applies (ValidateConfigurationChange).
        self.raft_index += 1;
        let mut sorted = peer_urls.to_vec();
        sorted.sort();
        let id = ids::member_id(&sorted, "", Some(now_ms / 1000));
        if self.removed.contains(&id) {
            return Err(Refusal::MemberNotFound);
        }
        if self.members.contains_key(&id) {
            return Err(Refusal::MemberExist);
        }
        let taken = self
            .members
            .values()
            .flat_map(|m| m.member.peer_urls.iter());
        if taken.into_iter().any(|u| sorted.contains(u)) {
            return Err(Refusal::PeerUrlExist);
        }
        let learners = self
            .members
            .values()
            .filter(|m| m.member.is_learner)
            .count();
        if is_learner && learners + 1 > MAX_LEARNERS {
            return Err(Refusal::TooManyLearners);
        }
        let member = Member {
            id,
            name: String::new(),
            peer_urls: sorted,
            client_urls: Vec::new(),
            is_learner,
        };
        self.members.insert(id, MemberState::fresh(member.clone()));
        self.settle(now_ms);
        Ok((self.header(via), member, self.members()))
    }

    /// etcd's MemberRemove: the member list after it.
    pub fn member_remove(
        &mut self,
        via: MemberId,
        id: MemberId,
        now_ms: u64,
    ) -> Result<(Header, Vec<Member>), Refusal> {
        self.voter_serving(via)?;
        // mayRemoveMember: removing a learner never endangers quorum.
        let target = self.members.get(&id);
        if !target.is_some_and(|t| t.member.is_learner) {
            if !self.ready_to_remove_voter(id) {
                return Err(Refusal::NotEnoughStarted);
            }
            // A member that is down (or unknown) is safe to remove; otherwise the members
            // connected to `via` must keep a quorum without it.
            let target_up = target.is_some_and(MemberState::running);
            if id == via || target_up {
                let voters = self.voters().count();
                let active = self
                    .voters()
                    .filter(|v| self.connected(via, v, now_ms))
                    .count();
                if active < 2 + (voters - 1) / 2 {
                    return Err(Refusal::Unhealthy);
                }
            }
        }
        self.need_leader()?;
        self.raft_index += 1;
        if self.removed.contains(&id) || !self.members.contains_key(&id) {
            return Err(Refusal::MemberNotFound);
        }
        self.members.remove(&id);
        self.removed.insert(id);
        if self.leader == id {
            self.leader = 0;
        }
        self.settle(now_ms);
        Ok((self.header(via), self.members()))
    }

    /// etcd's MemberPromote (served by the leader, wherever it is asked): the member list
    /// after it. A learner is in sync with the leader once its process runs.
    pub fn member_promote(
        &mut self,
        via: MemberId,
        id: MemberId,
        now_ms: u64,
    ) -> Result<(Header, Vec<Member>), Refusal> {
        self.voter_serving(via)?;
        self.need_leader()?;
        // isLearnerReady, on the leader: the member must be in raft's progress, and caught up.
        let target = self.members.get(&id).ok_or(Refusal::MemberNotFound)?;
        if !target.running() {
            return Err(Refusal::LearnerNotReady);
        }
        if !self.ready_to_promote() {
            return Err(Refusal::NotEnoughStarted);
        }
        let is_learner = target.member.is_learner;
        self.raft_index += 1;
        if !is_learner {
            return Err(Refusal::MemberNotLearner);
        }
        if let Some(state) = self.members.get_mut(&id) {
            state.member.is_learner = false;
        }
        self.settle(now_ms);
        Ok((self.header(via), self.members()))
    }

    /// etcd's Status of `via` (a learner answers it too).
    pub fn status(&self, via: MemberId) -> Result<Status, Refusal> {
        let state = self.serving(via)?;
        let mut errors = Vec::new();
        if self.leader == 0 {
            errors.push(Refusal::NoLeader.message().to_string());
        }
        errors.extend(self.alarms.iter().map(Alarm::status_error));
        Ok(Status {
            header: self.header(via),
            version: VERSION.to_string(),
            storage_version: STORAGE_VERSION.to_string(),
            db_size: state.db_size,
            db_size_in_use: state.db_size_in_use,
            db_size_quota: self.quota,
            leader: self.leader,
            raft_index: self.raft_index,
            raft_applied_index: self.raft_index,
            raft_term: self.raft_term,
            is_learner: state.member.is_learner,
            errors,
        })
    }

    /// etcd's Alarm (every action goes through raft): for GET the active alarms (of `kind`,
    /// or all for `None`), for ACTIVATE the alarm (raised now or before), for DEACTIVATE the
    /// alarm if it was active.
    pub fn alarm(
        &mut self,
        via: MemberId,
        action: AlarmAction,
        member_id: MemberId,
        kind: Option<AlarmKind>,
    ) -> Result<(Header, Vec<Alarm>), Refusal> {
        self.voter_serving(via)?;
        self.need_leader()?;
        self.raft_index += 1;
        let changed = |alarm: Option<Alarm>| alarm.into_iter().collect::<Vec<_>>();
        let answer = match (action, kind) {
            (AlarmAction::Get, _) => self
                .alarms
                .iter()
                .filter(|a| kind.is_none_or(|k| a.kind == k))
                .copied()
                .collect(),
            (_, None) => Vec::new(),
            (AlarmAction::Activate, Some(kind)) => {
                // The alarm is answered whether it was raised now or before.
                let alarm = Alarm { member_id, kind };
                self.alarms.insert(alarm);
                vec![alarm]
            }
            (AlarmAction::Deactivate, Some(kind)) => {
                let alarm = Alarm { member_id, kind };
                changed(self.alarms.remove(&alarm).then_some(alarm))
            }
        };
        Ok((self.header(via), answer))
    }

    /// etcd's MoveLeader, which only the leader serves.
    pub fn move_leader(&mut self, via: MemberId, target: MemberId) -> Result<Header, Refusal> {
        self.voter_serving(via)?;
        if self.leader == 0 || self.leader != via {
            return Err(Refusal::NotLeader);
        }
        let transferee = self.members.get(&target);
        if transferee.is_none_or(|t| t.member.is_learner) {
            return Err(Refusal::BadLeaderTransferee);
        }
        if target != self.leader {
            if !transferee.is_some_and(MemberState::running) {
                return Err(Refusal::LeaderTransferTimeout);
            }
            self.leader = target;
            self.raft_term += 1;
            self.raft_index += 1;
        }
        Ok(self.header(via))
    }

    /// etcd's Defragment of `via`'s backend: its size shrinks to what is in use.
    pub fn defragment(&mut self, via: MemberId) -> Result<Header, Refusal> {
        self.voter_serving(via)?;
        if let Some(state) = self.members.get_mut(&via) {
            state.db_size = state.db_size_in_use;
        }
        Ok(self.header(via))
    }

    /// The header of `via`'s Snapshot stream (a learner serves it too).
    pub fn snapshot(&self, via: MemberId) -> Result<Header, Refusal> {
        self.serving(via)?;
        Ok(self.header(via))
    }

    /// etcd's Range over a store that holds no keys: the header and the count (0).
    pub fn range(&self, via: MemberId, query: RangeQuery) -> Result<(Header, i64), Refusal> {
        let state = self.serving(via)?;
        if state.member.is_learner && !query.serializable {
            return Err(Refusal::NotSupportedForLearner);
        }
        if !query.serializable {
            self.need_leader()?;
        }
        if query.revision > self.revision {
            return Err(Refusal::FutureRev);
        }
        if query.revision > 0 && query.revision < self.compact_revision {
            return Err(Refusal::Compacted);
        }
        Ok((self.header(via), 0))
    }

    /// etcd's Compact up to `revision`.
    pub fn compact(&mut self, via: MemberId, revision: i64) -> Result<Header, Refusal> {
        self.voter_serving(via)?;
        self.need_leader()?;
        // Through raft; the revision is checked when the entry applies.
        self.raft_index += 1;
        if revision <= self.compact_revision {
            return Err(Refusal::Compacted);
        }
        if revision > self.revision {
            return Err(Refusal::FutureRev);
        }
        self.compact_revision = revision;
        Ok(self.header(via))
    }
}

impl MemberState {
    fn fresh(member: Member) -> MemberState {
        MemberState {
            member,
            running_since: None,
            pending_publish: None,
            db_size: FRESH_DB_SIZE.0,
            db_size_in_use: FRESH_DB_SIZE.1,
        }
    }
}
