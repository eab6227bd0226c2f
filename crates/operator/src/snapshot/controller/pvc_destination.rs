//! `destination.pvc`: the agent Pod that writes the snapshot onto the claim (and removes it
//! under `deletionPolicy: Delete`), started and followed by label.

use std::time::Duration;

use etcd_operator_api::EtcdSnapshot;
use etcd_operator_api::snapshot::SnapshotVerify;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::controller::Action;
use tracing::info;

use super::super::decide::{self, Failure, Voter};
use super::super::pvc;
use super::context::{
    SnapshotContext, SnapshotError, age_seconds, agent_pods, cluster, cluster_facts, event, name,
    record_failure, remove_agent, write_status,
};
use super::take::encoding;
use super::verification::written;
use crate::act::post_params;
use crate::etcd::EtcdAccess;

pub(super) async fn claim(
    ctx: &SnapshotContext,
    namespace: &str,
    claim: &str,
) -> Result<Option<PersistentVolumeClaim>, SnapshotError> {
    Api::<PersistentVolumeClaim>::namespaced(ctx.act.client.clone(), namespace)
        .get_opt(claim)
        .await
        .map_err(|e| SnapshotError::Read(format!("PersistentVolumeClaim {namespace}/{claim}"), e))
}

/// Starts a snapshot to a claim: checks the claim, records `Started`, makes the access
/// Secret (TLS, credentials) and the agent's Pod. The Pod is followed from the next pass.
pub(super) async fn start_pvc(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    voter: &Voter,
    to: &etcd_operator_api::shared::PvcSnapshotLocation,
    access: &EtcdAccess,
) -> Result<Action, SnapshotError> {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let previous = snapshot.status.clone().unwrap_or_default();
    let relative = match pvc::relative_path(to.sub_path.as_deref(), &name(snapshot)) {
        Ok(relative) => relative,
        Err(failure) => {
            record_failure(ctx, snapshot, &previous, &failure, None).await?;
            return Ok(Action::await_change());
        }
    };
    let uri = crate::domain::location::pvc_uri(&to.claim_name, &relative);
    let found = claim(ctx, &namespace, &to.claim_name).await?;
    if let Err(failure) = pvc::claim_usable(found.as_ref(), &to.claim_name) {
        record_failure(ctx, snapshot, &previous, &failure, None).await?;
        return Ok(Action::await_change());
    }
    let encoding = match encoding(ctx, snapshot).await {
        Ok(encoding) => encoding,
        Err(failure) => {
            record_failure(ctx, snapshot, &previous, &failure, None).await?;
            return Ok(Action::await_change());
        }
    };
    let started = decide::started_status(
        &voter.member,
        &uri,
        Timestamp::now(),
        snapshot.metadata.generation,
    );
    write_status(ctx, snapshot, &started).await?;
    let uid = snapshot.metadata.uid.clone().unwrap_or_default();
    let agent = pvc::pod_name(&name(snapshot), &uid, pvc::AgentTask::SAVE);
    let secret_data = pvc::access_secret_data(access);
    let credentials = access.credentials.is_some();
    if let Some(data) = secret_data.clone() {
        let secret = pvc::access_secret(snapshot, &agent, data);
        ctx.act.count_write("Secret");
        match Api::<Secret>::namespaced(ctx.act.client.clone(), &namespace)
            .create(&post_params(), &secret)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                return Err(SnapshotError::Read(
                    format!("Secret {namespace}/{agent}"),
                    e,
                ));
            }
        }
    }
    let task = pvc::AgentTask::Save {
        member: voter.member.clone(),
        endpoint: voter.client_url.clone(),
        access_secret: secret_data.map(|_| agent.clone()),
        credentials,
        encoding: pvc::AgentEncoding {
            compression: encoding.compression,
            recipients: encoding.recipients.iter().map(|r| r.to_string()).collect(),
            identity: snapshot
                .spec
                .encryption
                .as_ref()
                .and_then(|e| e.age.identity_secret_ref.clone()),
        },
    };
    let pod = pvc::agent_pod(snapshot, &to.claim_name, &relative, &task, &ctx.agent_image);
    ctx.act.count_write("Pod");
    match Api::<Pod>::namespaced(ctx.act.client.clone(), &namespace)
        .create(&post_params(), &pod)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        // Refused for good (a quota, an admission policy, a forbidden namespace): say so
        // rather than trying again every few seconds.
        Err(kube::Error::Api(s)) if (400..500).contains(&s.code) && s.code != 429 => {
            let failure = Failure::AgentFailed {
                detail: format!("the snapshot Pod {agent} was refused: {}", s.message),
            };
            record_failure(ctx, snapshot, &started, &failure, None).await?;
            // Its access Secret goes too.
            remove_agent(ctx, snapshot, &pod).await;
            return Ok(Action::await_change());
        }
        Err(e) => return Err(SnapshotError::Read(format!("Pod {namespace}/{agent}"), e)),
    }
    event(
        ctx,
        snapshot,
        "Normal",
        "SnapshotStarted",
        &format!(
            "streaming a snapshot from member {} to {uri} (Pod {agent})",
            voter.member
        ),
    )
    .await;
    info!(namespace = %namespace, snapshot = %name(snapshot), member = %voter.member, uri = %uri, pod = %agent, "snapshot to a claim started");
    Ok(Action::requeue(Duration::from_secs(2)))
}

/// Follows the agent's Pod: waits while it runs, then records its result and removes it.
pub(super) async fn follow_pvc(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    claim_name: &str,
    pod: &Pod,
) -> Result<Action, SnapshotError> {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let found = claim(ctx, &namespace, claim_name).await?;
    let outcome = pvc::pod_outcome(pod, found.as_ref(), claim_name, age_seconds(pod));
    let previous = snapshot.status.clone().unwrap_or_default();
    match outcome {
        pvc::PodOutcome::Running => return Ok(Action::requeue(Duration::from_secs(2))),
        pvc::PodOutcome::Done(pvc::AgentResult::Saved(saved)) => {
            remove_agent(ctx, snapshot, pod).await;
            let access = match cluster(ctx, &namespace, &snapshot.spec.cluster_ref.name).await? {
                Some(cluster) if snapshot.spec.verify == Some(SnapshotVerify::Restore) => {
                    cluster_facts(ctx, &cluster).await?.1
                }
                _ => EtcdAccess::plaintext(),
            };
            return written(
                ctx,
                snapshot,
                &previous,
                &saved.stored(),
                &saved.source(),
                &saved.checked,
                &access,
            )
            .await;
        }
        pvc::PodOutcome::Done(pvc::AgentResult::Failed(failure)) => {
            record_failure(ctx, snapshot, &previous, &failure, None).await?;
        }
        // The file is on the volume: named in status (where people and deletionPolicy find it).
        pvc::PodOutcome::Done(pvc::AgentResult::Unverified { stored, failure }) => {
            record_failure(ctx, snapshot, &previous, &failure, Some(&stored)).await?;
        }
        pvc::PodOutcome::Done(
            other @ (pvc::AgentResult::Removed { .. } | pvc::AgentResult::Served { .. }),
        ) => {
            let failure = Failure::AgentFailed {
                detail: format!("the snapshot Pod answered something else: {other:?}"),
            };
            record_failure(ctx, snapshot, &previous, &failure, None).await?;
        }
    }
    remove_agent(ctx, snapshot, pod).await;
    Ok(Action::await_change())
}

/// `deletionPolicy: Delete` of a file on a claim: a short Pod removes it (only if this
/// snapshot wrote it). `None` while that Pod is at work.
pub(super) async fn delete_pvc_artifact(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
) -> Result<Option<Result<String, Failure>>, SnapshotError> {
    let Some(to) = &snapshot.spec.destination.pvc else {
        return Ok(Some(Ok("no file to delete".to_string())));
    };
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let relative = match pvc::relative_path(to.sub_path.as_deref(), &name(snapshot)) {
        Ok(relative) => relative,
        Err(_) => {
            return Ok(Some(
                Ok("no file was written (invalid subPath)".to_string()),
            ));
        }
    };
    let uri = crate::domain::location::pvc_uri(&to.claim_name, &relative);
    if snapshot
        .status
        .as_ref()
        .and_then(|s| s.artifact.as_ref())
        .is_none()
    {
        return Ok(Some(Ok(format!(
            "{uri} was never written (nothing to delete)"
        ))));
    }
    if let Some(pod) = agent_pods(ctx, snapshot, pvc::AgentTask::REMOVE)
        .await?
        .into_iter()
        .next()
    {
        let found = claim(ctx, &namespace, &to.claim_name).await?;
        let outcome = pvc::pod_outcome(&pod, found.as_ref(), &to.claim_name, age_seconds(&pod));
        let result = match outcome {
            pvc::PodOutcome::Running => return Ok(None),
            pvc::PodOutcome::Done(pvc::AgentResult::Removed { said }) => Ok(said),
            pvc::PodOutcome::Done(pvc::AgentResult::Failed(failure)) => Err(failure),
            pvc::PodOutcome::Done(
                pvc::AgentResult::Saved(_)
                | pvc::AgentResult::Unverified { .. }
                | pvc::AgentResult::Served { .. },
            ) => Err(Failure::AgentFailed {
                detail: "the removal Pod answered as another task".to_string(),
            }),
        };
        remove_agent(ctx, snapshot, &pod).await;
        return Ok(Some(result));
    }
    if claim(ctx, &namespace, &to.claim_name).await?.is_none() {
        return Ok(Some(Ok(format!(
            "PersistentVolumeClaim {} is gone, and {uri} with it",
            to.claim_name
        ))));
    }
    let pod = pvc::agent_pod(
        snapshot,
        &to.claim_name,
        &relative,
        &pvc::AgentTask::Remove,
        &ctx.agent_image,
    );
    ctx.act.count_write("Pod");
    match Api::<Pod>::namespaced(ctx.act.client.clone(), &namespace)
        .create(&post_params(), &pod)
        .await
    {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
        Err(e) => Err(SnapshotError::Read(
            format!("Pod {namespace}/{}", pod.metadata.name.unwrap_or_default()),
            e,
        )),
    }
}
