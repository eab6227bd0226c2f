//! The checks etcd makes before it proposes a change (who serves, its strict
//! reconfiguration checks, its health interval) and raft's part (elections, publications).

use super::{Cluster, MemberState};
use crate::refusal::Refusal;
use crate::state::types::{Header, MemberId};

use super::HEALTH_INTERVAL_MS;

/// etcd's quorum of `members` voters.
fn quorum(members: usize) -> usize {
    members / 2 + 1
}

impl Cluster {
    pub(super) fn header(&self, via: MemberId) -> Header {
        Header {
            cluster_id: self.cluster_id,
            member_id: via,
            revision: self.revision,
            raft_term: self.raft_term,
        }
    }

    /// `via` runs (a member removed or stopped serves nothing).
    pub(super) fn serving(&self, via: MemberId) -> Result<&MemberState, Refusal> {
        self.members
            .get(&via)
            .filter(|m| m.running())
            .ok_or(Refusal::Stopped)
    }

    /// `via` runs and is a voter: etcd's interceptor refuses learners every call but Status,
    /// serializable Range and the Snapshot stream.
    pub(super) fn voter_serving(&self, via: MemberId) -> Result<&MemberState, Refusal> {
        let state = self.serving(via)?;
        if state.member.is_learner {
            return Err(Refusal::NotSupportedForLearner);
        }
        Ok(state)
    }

    /// A proposal needs a leader; without one etcd waits out its request timeout.
    pub(super) fn need_leader(&self) -> Result<(), Refusal> {
        if self.leader == 0 {
            return Err(Refusal::Timeout);
        }
        Ok(())
    }

    pub(super) fn voters(&self) -> impl Iterator<Item = &MemberState> {
        self.members.values().filter(|m| !m.member.is_learner)
    }

    /// Whether `peer` has been connected to `via` for the health interval (`via` itself
    /// always counts).
    pub(super) fn connected(&self, via: MemberId, peer: &MemberState, now_ms: u64) -> bool {
        if peer.member.id == via {
            return true;
        }
        let via_since = self.members.get(&via).and_then(|m| m.running_since);
        match (via_since, peer.running_since) {
            (Some(a), Some(b)) => a.max(b) + HEALTH_INTERVAL_MS <= now_ms,
            _ => false,
        }
    }

    /// etcd's `isConnectedFullySince`: every voter connected to `via` for the interval.
    pub(super) fn connected_fully(&self, via: MemberId, now_ms: u64) -> bool {
        self.voters().all(|v| self.connected(via, v, now_ms))
    }

    /// etcd's `IsReadyToAddVotingMember`.
    pub(super) fn ready_to_add_voter(&self) -> bool {
        let members = self.voters().count() + 1;
        let started = self.voters().filter(|v| v.member.is_started()).count();
        (started == 1 && members == 2) || started >= quorum(members)
    }

    /// etcd's `IsReadyToRemoveVotingMember`.
    pub(super) fn ready_to_remove_voter(&self, id: MemberId) -> bool {
        let rest = self.voters().filter(|v| v.member.id != id);
        let (members, started) = rest.fold((0, 0), |(n, s), v| {
            (n + 1, s + usize::from(v.member.is_started()))
        });
        started >= quorum(members)
    }

    /// etcd's `IsReadyToPromoteMember`: the learner counts as a started voter.
    pub(super) fn ready_to_promote(&self) -> bool {
        let members = self.voters().count() + 1;
        let started = self.voters().filter(|v| v.member.is_started()).count() + 1;
        started >= quorum(members)
    }

    /// Raft's part, after any change: elect a leader when the running voters are a quorum
    /// and the leader is gone (the lowest ID wins, in a new term), lose it when they are not,
    /// and apply the members' pending publications once there is a leader.
    pub(super) fn settle(&mut self, _now_ms: u64) {
        let voters = self.voters().count();
        let running: Vec<MemberId> = self
            .voters()
            .filter(|v| v.running())
            .map(|v| v.member.id)
            .collect();
        if voters == 0 || running.len() < quorum(voters) {
            self.leader = 0;
            return;
        }
        if !running.contains(&self.leader) {
            self.leader = running[0];
            self.raft_term += 1;
            // The new leader's empty entry.
            self.raft_index += 1;
        }
        if !self.cluster_version_set {
            self.cluster_version_set = true;
            self.raft_index += 1;
        }
        for state in self.members.values_mut() {
            if let Some((name, client_urls)) = state.pending_publish.take() {
                state.member.name = name;
                state.member.client_urls = client_urls;
                self.raft_index += 1;
            }
        }
    }
}
