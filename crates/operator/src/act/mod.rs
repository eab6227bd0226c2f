//! `act`: performs a [`Plan`] exactly as `plan/mod.rs` states the contract.
//!
//! 1. The status writes first: the cluster's, then each member's, through the status
//!    subresource with the observed resourceVersion (a stale write fails with 409 rather than
//!    clobbering). If any fails, stop: the step depends on them (a phase is announced before
//!    the mutation it describes).
//! 2. Then the one step: one Kubernetes write (creates; updates and patches carrying the
//!    observed resourceVersion; deletes with a UID precondition, so a newer object of the same
//!    name is never deleted) or one etcd call.
//!
//! Every write is returned as a [`Written`], so the reconciler can wait for its caches to
//! show it before the next pass plans from them.

mod context;
mod error;
mod etcd_steps;
mod issue;
mod kube_steps;
mod status;
mod written;

pub use context::ActContext;
pub use error::{ActError, is_not_found, status_code};
pub use status::post_params;
pub use written::{ObjectKind, Written};

use crate::plan::{Observed, Plan, Step};

/// What a pass changed.
#[derive(Debug, Default)]
pub struct ActOutcome {
    /// Every Kubernetes write that succeeded, in order.
    pub written: Vec<Written>,
}

/// Writes the plan's statuses, then performs its step.
pub async fn act(
    ctx: &ActContext,
    plan: &Plan,
    observed: &Observed,
) -> Result<ActOutcome, ActError> {
    let mut outcome = ActOutcome::default();
    if let Some(cluster_status) = &plan.cluster_status {
        outcome
            .written
            .push(status::write_cluster_status(ctx, observed, cluster_status).await?);
    }
    for write in &plan.member_statuses {
        outcome
            .written
            .push(status::write_member_status(ctx, observed, write).await?);
        if changes_phase(observed, write) {
            crate::failpoints::after_phase_write();
        }
    }
    outcome.written.extend(perform(ctx, plan, observed).await?);
    crate::failpoints::after_step(&plan.step);
    Ok(outcome)
}

/// Whether `write` gives the member another phase than the one observed.
fn changes_phase(observed: &Observed, write: &crate::plan::MemberStatusWrite) -> bool {
    let before = observed
        .members
        .iter()
        .find(|m| m.member.metadata.name.as_deref() == Some(write.member.as_str()))
        .and_then(|m| m.member.status.as_ref())
        .and_then(|s| s.phase);
    before != write.status.phase
}

/// The one step.
async fn perform(
    ctx: &ActContext,
    plan: &Plan,
    observed: &Observed,
) -> Result<Option<Written>, ActError> {
    match &plan.step {
        // Nothing to do, or only the statuses (already written).
        Step::Idle
        | Step::Wait { .. }
        | Step::SetPhase { .. }
        | Step::RebuildMember { .. }
        | Step::AdoptMember { .. } => Ok(None),
        Step::AddLearner { .. }
        | Step::PromoteLearner { .. }
        | Step::RemoveEtcdMember { .. }
        | Step::MoveLeader { .. }
        | Step::EnableDowngrade { .. }
        | Step::CancelDowngrade { .. }
        | Step::DisarmAlarm { .. }
        | Step::Compact { .. }
        | Step::Defragment { .. } => {
            etcd_steps::perform(
                ctx,
                &plan.step,
                &plan.etcd_endpoints,
                &observed.security.access,
                None,
            )
            .await?;
            Ok(None)
        }
        Step::ChangeRootPassword | Step::EnableAuth => {
            etcd_steps::perform(
                ctx,
                &plan.step,
                &plan.etcd_endpoints,
                &observed.security.access,
                observed.security.root_password.as_ref(),
            )
            .await?;
            if plan.step != Step::EnableAuth {
                return Ok(None);
            }
            // Recorded at once: from now on the operator authenticates (a crash before this
            // write is found by the next observation, which etcd refuses anonymously).
            Ok(Some(status::latch_auth_enabled(ctx, observed).await?))
        }
        Step::IssueCertificate { secret, what, .. } => {
            issue::perform(ctx, secret, what, observed).await?;
            // Secrets are not in the caches: the next pass reads them again.
            Ok(None)
        }
        step => kube_steps::perform(ctx, step, observed).await,
    }
}
