//! What a rule decides: the step, when to look again, and the member status changes that must
//! be written before the step runs.

use std::time::Duration;

use etcd_operator_api::MemberPhase;

use super::step::{Step, WaitReason};
use super::timing;

/// A change to one member's status that the step depends on (written first by `act`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberEdit {
    pub member: String,
    /// The new phase (its transition time becomes `now`).
    pub phase: Option<MemberPhase>,
    /// The new `recreateCount`.
    pub recreate_count: Option<i32>,
    /// Restart the phase's transition time even when the phase stays (a new recreation
    /// attempt while already Recreating): the repair clock the backoff and the old-Pod test
    /// read.
    pub restart_clock: bool,
    /// Forget the member's etcd identity (ID, voter flag, recorded Pod UID): it is added
    /// again as a new member.
    pub reset_identity: bool,
    /// Overrides the Ready condition (always False here) with a reason and message.
    pub not_ready: Option<(&'static str, String)>,
}

impl MemberEdit {
    pub fn new(member: &str) -> MemberEdit {
        MemberEdit {
            member: member.to_string(),
            ..Default::default()
        }
    }

    pub fn phase(mut self, phase: MemberPhase) -> MemberEdit {
        self.phase = Some(phase);
        self
    }

    pub fn recreate_count(mut self, count: i32) -> MemberEdit {
        self.recreate_count = Some(count);
        self
    }

    pub fn restart_clock(mut self) -> MemberEdit {
        self.restart_clock = true;
        self
    }

    pub fn reset_identity(mut self) -> MemberEdit {
        self.reset_identity = true;
        self
    }

    pub fn not_ready(mut self, reason: &'static str, message: impl Into<String>) -> MemberEdit {
        self.not_ready = Some((reason, message.into()));
        self
    }
}

/// The outcome of the first rule that applies.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub step: Step,
    pub requeue: Duration,
    pub edits: Vec<MemberEdit>,
    /// `status.quorumRecovery` as it must be written before the step (lost-quorum recovery).
    pub recovery: Option<etcd_operator_api::cluster::QuorumRecoveryStatus>,
}

impl Decision {
    /// A mutation: look again at once.
    pub fn act(step: Step) -> Decision {
        Decision {
            step,
            requeue: timing::AFTER_MUTATION,
            edits: Vec::new(),
            recovery: None,
        }
    }

    /// Nothing to do for now; look again after `requeue`.
    pub fn wait(reason: WaitReason, message: impl Into<String>, requeue: Duration) -> Decision {
        Decision {
            step: Step::Wait {
                reason,
                message: message.into(),
            },
            requeue,
            edits: Vec::new(),
            recovery: None,
        }
    }

    /// Write `phase` for `member` (and nothing else this pass).
    pub fn set_phase(member: &str, phase: MemberPhase) -> Decision {
        Decision::act(Step::SetPhase {
            member: member.to_string(),
            phase,
        })
        .with(MemberEdit::new(member).phase(phase))
    }

    /// Adds `edit`, merged into an earlier edit of the same member.
    pub fn with(mut self, edit: MemberEdit) -> Decision {
        match self.edits.iter_mut().find(|e| e.member == edit.member) {
            Some(existing) => {
                existing.phase = edit.phase.or(existing.phase);
                existing.recreate_count = edit.recreate_count.or(existing.recreate_count);
                existing.reset_identity |= edit.reset_identity;
                existing.restart_clock |= edit.restart_clock;
                existing.not_ready = edit.not_ready.or(existing.not_ready.take());
            }
            None => self.edits.push(edit),
        }
        self
    }
}
