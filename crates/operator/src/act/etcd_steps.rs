//! The steps that are one etcd call, sent to the plan's endpoints (healthy voters, the leader
//! first). Answers that mean "already done" count as done: a crash between the call and the
//! next observation must not turn into an error loop.

use crate::etcd::{EtcdClient, EtcdErrorKind, Timeouts};
use crate::plan::Step;

use super::{ActContext, ActError};

/// Performs an etcd step.
pub async fn perform(
    ctx: &ActContext,
    step: &Step,
    endpoints: &[String],
    access: &crate::etcd::EtcdAccess,
    password: Option<&crate::plan::Password>,
) -> Result<(), ActError> {
    if endpoints.is_empty() {
        return Err(ActError::NoEndpoint {
            what: step.message(),
        });
    }
    // MemberPromote goes to the leader alone (the plan lists it first): a follower forwards it
    // to the leader over the peer port without the caller's authentication, so with auth on
    // the leader refuses it (`auth: user name is empty`) and the follower retries until the
    // request times out (etcd-io/etcd#20757, in 3.4.23 and 3.5.1; seen here on 3.4.23 after a
    // password change, every promote through a follower timing out). A leader change in
    // between fails the step; the next pass sends it to the new leader.
    let endpoints = match step {
        Step::PromoteLearner { .. } => &endpoints[..1],
        _ => endpoints,
    };
    let client = EtcdClient::connect(
        ctx.etcd_urls.map_all(endpoints),
        Timeouts::MEMBERSHIP,
        access,
    )
    .await?;
    let result = match step {
        Step::AddLearner { peer_url, .. } => client
            .member_add_learner(std::slice::from_ref(peer_url))
            .await
            .map(|_| ()),
        Step::PromoteLearner { id, .. } => client.member_promote(*id).await.map(|_| ()),
        Step::RemoveEtcdMember { id, .. } => client.member_remove(*id).await.map(|_| ()),
        Step::MoveLeader { to_id, .. } => client.move_leader(*to_id).await,
        Step::EnableDowngrade { version } => client.enable_downgrade(version).await,
        Step::CancelDowngrade { .. } => client.cancel_downgrade().await,
        Step::DisarmAlarm { alarm, .. } => client.disarm(*alarm).await,
        Step::Compact { revision } => client.compact(*revision).await,
        Step::Defragment { endpoint, .. } => client.defragment(&ctx.etcd_urls.map(endpoint)).await,
        Step::ChangeRootPassword | Step::EnableAuth => {
            let Some(password) = password else {
                return Err(ActError::NotObserved {
                    what: "the root password (spec.auth.rootCredentialsSecretRef)".to_string(),
                });
            };
            if *step == Step::EnableAuth {
                client.enable_auth(&password.0).await
            } else {
                client.change_root_password(&password.0).await
            }
        }
        _ => Ok(()),
    };
    match result {
        Ok(()) => Ok(()),
        Err(e) if already_done(step, e.kind) => {
            tracing::info!(step = %step.message(), answer = %e, "etcd says the step is already done");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// etcd refusals that mean the step's effect is already in place.
fn already_done(step: &Step, kind: EtcdErrorKind) -> bool {
    matches!(
        (step, kind),
        // Added before (the operator died before observing it): the next pass adopts it.
        (Step::AddLearner { .. }, EtcdErrorKind::PeerUrlExists)
            | (Step::PromoteLearner { .. }, EtcdErrorKind::MemberNotLearner)
            // Cancelled before (or by etcd's leader once every member ran the target).
            | (Step::CancelDowngrade { .. }, EtcdErrorKind::NoDowngradeInProgress)
            | (Step::RemoveEtcdMember { .. }, EtcdErrorKind::MemberNotFound)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_membership_changes_count_as_done() {
        let add = Step::AddLearner {
            member: "a-1".into(),
            peer_url: "http://a-1.a.ns.svc:2380".into(),
        };
        assert!(already_done(&add, EtcdErrorKind::PeerUrlExists));
        assert!(!already_done(&add, EtcdErrorKind::UnhealthyCluster));
        let remove = Step::RemoveEtcdMember {
            member: None,
            id: 7,
        };
        assert!(already_done(&remove, EtcdErrorKind::MemberNotFound));
        let promote = Step::PromoteLearner {
            member: "a-1".into(),
            id: 7,
        };
        assert!(already_done(&promote, EtcdErrorKind::MemberNotLearner));
        assert!(!already_done(&promote, EtcdErrorKind::LearnerNotInSync));
    }
}
