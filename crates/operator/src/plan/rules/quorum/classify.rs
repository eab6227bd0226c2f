//! How a lost quorum stands, pure: each voter classified from what was observed, the verdict
//! on the cluster, the survivor with the most data, and the recovery the status records.
//! Read by both ways back, from a survivor (`quorum`) and from a snapshot
//! (`snapshot_recovery`).

use etcd_operator_api::MemberPhase;
use etcd_operator_api::cluster::{QuorumRecoveryStatus, RECOVER_QUORUM_ANNOTATION};
use etcd_operator_api::labels::quorum;

use crate::plan::context::{Context, Health, MemberView};
use crate::plan::decision::Decision;
use crate::plan::step::Step;

/// What the operator can tell about one voter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VoterState {
    /// Served a linearizable read.
    Serving,
    /// Answered Status (its data exists) without quorum.
    Answering { raft_index: u64, revision: i64 },
    /// Its data is gone, with the evidence.
    DataLost(String),
    /// No answer and no evidence of loss: it may come back with its data.
    Unreachable { pod_running: bool },
}

impl VoterState {
    fn may_have_data(&self) -> bool {
        !matches!(self, VoterState::DataLost(_))
    }

    pub fn label(&self) -> String {
        match self {
            VoterState::Serving => "Serving".into(),
            VoterState::Answering { .. } => "Answering (no quorum)".into(),
            VoterState::DataLost(why) => format!("DataLost: {why}"),
            VoterState::Unreachable { pod_running: true } => {
                "Unreachable: its Pod runs (a partition, or the operator cut off from it)".into()
            }
            VoterState::Unreachable { pod_running: false } => {
                "Unreachable: its Pod is not running (its data may still be on its PVC)".into()
            }
        }
    }
}

/// The verdict on the cluster as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A majority of the voters serves: nothing to recover.
    Healthy,
    /// No majority serves, but the voters that may still have their data are a quorum: an
    /// outage, a partition, or the operator cut off. Wait and report.
    Transient,
    /// A majority's data is gone and at least one voter with data answers: recoverable from a
    /// survivor.
    LostForGood,
    /// A majority's data is gone and the voters that may have data do not answer.
    SurvivorUnreachable,
    /// No voter's data survives: only a snapshot can bring the cluster back.
    AllLost,
}

/// One classified voter.
#[derive(Clone, Debug)]
pub struct Classified<'c, 'a> {
    pub member: &'c MemberView<'a>,
    pub state: VoterState,
}

/// The classification of a pass.
pub struct Classification<'c, 'a> {
    pub voters: Vec<Classified<'c, 'a>>,
    pub verdict: Verdict,
}

impl Classification<'_, '_> {
    /// The answering voter with the highest raft index (the lowest ordinal on a tie).
    pub fn best_survivor(&self) -> Option<&Classified<'_, '_>> {
        self.voters
            .iter()
            .filter_map(|c| match c.state {
                VoterState::Answering { raft_index, .. } => Some((c, raft_index)),
                _ => None,
            })
            .fold(
                None,
                |best: Option<(&Classified<'_, '_>, u64)>, (c, index)| match best {
                    Some((_, b)) if b >= index => best,
                    _ => Some((c, index)),
                },
            )
            .map(|(c, _)| c)
    }

    pub fn summary(&self) -> String {
        self.voters
            .iter()
            .map(|c| format!("{}: {}", c.member.name, c.state.label()))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Why `m`'s data is gone, if there is positive evidence of it.
pub fn data_lost(m: &MemberView<'_>) -> Option<String> {
    if m.memory {
        return super::super::repair::memory_data_lost(m);
    }
    if let Some(pod) = m.observed.pod.as_ref()
        && pod.data_dir_lost(m.name)
    {
        return Some(
            "etcd found its data directory empty and refused to start (it may only resume on its own data)"
                .into(),
        );
    }
    match m.observed.pvc.as_ref() {
        None => return Some(format!("its PVC data-{} is gone", m.name)),
        Some(pvc) if pvc.deleting => {
            return Some(format!("its PVC data-{} is being deleted", m.name));
        }
        _ => {}
    }
    if m.phase == MemberPhase::Replacing {
        let reason = m
            .observed
            .member
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|l| l.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.reason.as_str());
        if let Some(reason @ ("DataLost" | "VolumeLost")) = reason {
            return Some(format!("the member is being replaced ({reason})"));
        }
    }
    None
}

/// The voters of the cluster: running members etcd lists as voters, or, when etcd's member
/// list is not known, the ones last recorded as voters.
fn voter_members<'c, 'a>(ctx: &'c Context<'a>) -> Vec<&'c MemberView<'a>> {
    let list_known = ctx.observed.etcd.members.is_ok();
    ctx.members
        .iter()
        .filter(|m| !m.deleting && !m.dormant)
        .filter(|m| {
            if list_known {
                m.is_voter()
            } else {
                m.observed.member.status.as_ref().and_then(|s| s.is_voter) == Some(true)
            }
        })
        .collect()
}

/// Classifies every voter and the cluster (pure).
pub fn classify<'c, 'a>(ctx: &'c Context<'a>) -> Classification<'c, 'a> {
    let voters: Vec<Classified<'c, 'a>> = voter_members(ctx)
        .into_iter()
        .map(|m| {
            let status = m.id.and_then(|id| ctx.observed.etcd.status_of(id));
            let state = match (m.health, status) {
                (Health::Healthy, _) => VoterState::Serving,
                (Health::NoQuorum | Health::Learner, Some(s)) => VoterState::Answering {
                    raft_index: s.raft_index,
                    revision: s.revision,
                },
                _ => match data_lost(m) {
                    Some(why) => VoterState::DataLost(why),
                    None => VoterState::Unreachable {
                        pod_running: m
                            .observed
                            .pod
                            .as_ref()
                            .is_some_and(|p| !p.deleting && !p.phase.is_terminal()),
                    },
                },
            };
            Classified { member: m, state }
        })
        .collect();
    let n = voters.len() as u32;
    let serving = voters
        .iter()
        .filter(|c| c.state == VoterState::Serving)
        .count() as u32;
    let with_data = voters.iter().filter(|c| c.state.may_have_data()).count() as u32;
    let answering = voters
        .iter()
        .filter(|c| matches!(c.state, VoterState::Answering { .. }))
        .count();
    let verdict = if n == 0 || serving >= quorum(n) || ctx.observed.etcd.is_healthy() {
        Verdict::Healthy
    } else if with_data == 0 {
        Verdict::AllLost
    } else if with_data >= quorum(n) {
        Verdict::Transient
    } else if answering > 0 {
        Verdict::LostForGood
    } else {
        Verdict::SurvivorUnreachable
    };
    Classification { voters, verdict }
}

/// The recovery recorded in the status, if any.
pub(super) fn recorded<'a>(ctx: &Context<'a>) -> Option<&'a QuorumRecoveryStatus> {
    ctx.observed
        .cluster
        .status
        .as_ref()
        .and_then(|s| s.quorum_recovery.as_ref())
}

/// The value of the recover-quorum annotation.
pub fn requested<'a>(ctx: &Context<'a>) -> Option<&'a str> {
    ctx.observed
        .cluster
        .metadata
        .annotations
        .as_ref()?
        .get(RECOVER_QUORUM_ANNOTATION)
        .map(|v| v.trim())
}

pub(in crate::plan::rules) fn with_recovery(mut d: Decision, r: QuorumRecoveryStatus) -> Decision {
    d.recovery = Some(r);
    d
}

pub(in crate::plan::rules) fn remove_annotation(why: &str) -> Step {
    Step::RemoveClusterAnnotation {
        annotation: RECOVER_QUORUM_ANNOTATION.to_string(),
        why: why.to_string(),
    }
}
