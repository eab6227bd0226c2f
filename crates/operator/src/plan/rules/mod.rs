//! The priority order of seed 000: the first rule that applies decides the step.
//!
//! 1. cluster being deleted;
//! 2. `spec.paused`;
//! 3. lost-quorum recovery in progress;
//! 4. members being deleted (leave sequence);
//! 5. CORRUPT alarm;
//! 6. NOSPACE alarm;
//! 7. per-member repair (preceded by a stalled version rollout: a member that cannot start
//!    on its new version stops the rollout, is held out of the ladder while the other
//!    members' repairs still run, and is rolled back when the spec goes back);
//! 8. lost quorum;
//! 9. advance non-Ready members;
//! 10. cluster operations behind the readiness gate.
//!
//! Between 2 and 3 sit cert-manager's Certificates (created, and patched back when they
//! differ from what the operator sets), operator-issued certificates (the CA, each member's,
//! the operator's, issued when missing or due), the TLS Secrets (unusable ones stop everything but
//! deletion, with the reason), a changed root password applied, a safety stop: etcd answering with a cluster ID other than the one
//! latched means our members talk to another cluster, and nothing may act on it; members the
//! reference operator made taken over as they are (`adopt`; one that cannot be is reported and
//! stops everything after it); and the
//! start instructions of the Pods (`start`): a member that has started restarts only on its
//! own data, never bootstrapping or rejoining from an empty data directory; then a failing
//! restore of the seed from `spec.bootstrap.restore` (`restore`), which stops everything else.

pub mod adopt;
mod advance;
mod helpers;
mod lifecycle;
mod metadata;
mod operations;
pub mod quorum;
mod repair;
mod restore;
mod retention;
pub mod rollout;
mod snapshot_recovery;
mod start;
pub mod version_path;

use super::context::Context;
use super::decision::Decision;
use super::step::{Step, WaitReason};
use super::timing;

pub use advance::caught_up;
pub use lifecycle::{NOSPACE_REMEDIATION_ANNOTATION, fullest_backend, nears_quota, nospace_status};
pub use restore::restore_source_uri;
pub use retention::SCALE_IN_ANNOTATION;

/// Applies the rules in order.
pub fn decide(ctx: &Context<'_>) -> Decision {
    let rules: [fn(&Context<'_>) -> Option<Decision>; 19] = [
        lifecycle::cluster_deletion,
        lifecycle::paused,
        lifecycle::certificates,
        lifecycle::issued_certificates,
        lifecycle::security_problems,
        lifecycle::root_password_change,
        lifecycle::foreign_cluster_id,
        adopt::adopt_members,
        start::pod_start_instructions,
        restore::restore_failed,
        quorum::in_progress,
        lifecycle::terminating_members,
        lifecycle::corrupt_alarm,
        lifecycle::nospace_alarm,
        rollout::stalled_upgrade,
        repair_or_recovery,
        lost_quorum,
        advance::advance_members,
        operations::cluster_operations,
    ];
    rules.iter().find_map(|rule| rule(ctx)).unwrap_or(Decision {
        step: Step::Idle,
        requeue: timing::IDLE_POLL,
        edits: Vec::new(),
        recovery: None,
    })
}

/// Rule 7, unless it is blocked (a wait: a repair cannot proceed without quorum) while a
/// lost-quorum recovery is asked for or due: then rule 8's start comes first, since no
/// per-member repair can bring a lost majority back.
fn repair_or_recovery(ctx: &Context<'_>) -> Option<Decision> {
    let repair = repair::member_repair(ctx);
    match &repair {
        Some(d) if !matches!(d.step, Step::Wait { .. }) => repair,
        Some(Decision {
            step:
                Step::Wait {
                    reason: WaitReason::QuorumAtRisk,
                    ..
                },
            ..
        }) => quorum::start(ctx)
            .or_else(|| {
                repair::lost_quorum(ctx).filter(|d| {
                    matches!(
                        d.step,
                        Step::Wait {
                            reason: WaitReason::QuorumLost,
                            ..
                        }
                    )
                })
            })
            .or(repair),
        _ => quorum::start(ctx).or(repair),
    }
}

/// Rule 8: start a lost-quorum recovery, or report the loss.
fn lost_quorum(ctx: &Context<'_>) -> Option<Decision> {
    quorum::start(ctx).or_else(|| repair::lost_quorum(ctx))
}
