//! What is verified: a written snapshot's read-back recorded, and with `verify: Restore` the
//! restore check's Pod started, followed and recorded.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_operator_api::EtcdSnapshot;
use etcd_operator_api::snapshot::SnapshotVerify;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::controller::Action;
use tracing::info;

use super::super::decide::{self, Checked, Failure, Source, Stored};
use super::super::pvc;
use super::super::verify;
use super::context::{
    SnapshotContext, SnapshotError, age_seconds, agent_pods, cluster, cluster_facts, event, name,
    record_failure_verified, remove_agent, write_status,
};
use crate::act::post_params;
use crate::etcd::EtcdAccess;

/// A snapshot stored and read back: Complete, or (`verify: Restore`) its restore check
/// started.
pub(super) async fn written(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    previous: &etcd_operator_api::EtcdSnapshotStatus,
    stored: &Stored,
    source: &Source,
    checked: &Checked,
    access: &EtcdAccess,
) -> Result<Action, SnapshotError> {
    if snapshot.spec.verify == Some(SnapshotVerify::Restore) {
        let pod = verify::pod_name(snapshot);
        let status = decide::verifying_status(
            previous,
            stored,
            source,
            checked,
            &pod,
            Timestamp::now(),
            snapshot.metadata.generation,
        );
        write_status(ctx, snapshot, &status).await?;
        ctx.mark_verifying(snapshot);
        return start_restore_check(ctx, snapshot, &status, access).await;
    }
    complete(ctx, snapshot, previous, stored, source, checked).await?;
    Ok(Action::await_change())
}

/// Records `Complete` and its Event.
pub(super) async fn complete(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    previous: &etcd_operator_api::EtcdSnapshotStatus,
    stored: &Stored,
    source: &Source,
    checked: &Checked,
) -> Result<(), SnapshotError> {
    let status = decide::complete_status(
        previous,
        stored,
        source,
        checked,
        Timestamp::now(),
        snapshot.metadata.generation,
    );
    write_status(ctx, snapshot, &status).await?;
    ctx.mark_finished(snapshot);
    let message = status
        .conditions
        .as_ref()
        .map(|c| c[0].message.clone())
        .unwrap_or_default();
    info!(namespace = snapshot.metadata.namespace.as_deref().unwrap_or_default(), snapshot = %name(snapshot), uri = %stored.uri, size = stored.size, "snapshot complete");
    event(ctx, snapshot, "Normal", "SnapshotComplete", &message).await;
    Ok(())
}

/// Creates the restore check's Pod (and, for a cluster with authentication, a Secret with
/// the root credentials the check reads the restored etcd with).
pub(super) async fn start_restore_check(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    status: &etcd_operator_api::EtcdSnapshotStatus,
    access: &EtcdAccess,
) -> Result<Action, SnapshotError> {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let pod_name = verify::pod_name(snapshot);
    let Some(source) = check_source(snapshot, status) else {
        let failure = Failure::VerificationFailed {
            detail: "cannot be located for the restore check (no artifact recorded)".to_string(),
        };
        record_failure_verified(
            ctx,
            snapshot,
            status,
            &failure,
            None,
            SnapshotVerify::Restore,
        )
        .await?;
        return Ok(Action::await_change());
    };
    let credentials = access.credentials.as_ref().map(|(user, password)| {
        BTreeMap::from([
            (
                "username".to_string(),
                ByteString(user.clone().into_bytes()),
            ),
            (
                "password".to_string(),
                ByteString(password.clone().into_bytes()),
            ),
        ])
    });
    if let Some(data) = credentials.clone() {
        let secret = pvc::access_secret(snapshot, &pod_name, data);
        ctx.act.count_write("Secret");
        match Api::<Secret>::namespaced(ctx.act.client.clone(), &namespace)
            .create(&post_params(), &secret)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                return Err(SnapshotError::Read(
                    format!("Secret {namespace}/{pod_name}"),
                    e,
                ));
            }
        }
    }
    let version = status
        .etcd_version
        .clone()
        .unwrap_or_else(|| "3.5.1".to_string());
    let identity = snapshot
        .spec
        .encryption
        .as_ref()
        .and_then(|e| e.age.identity_secret_ref.clone());
    let pod = verify::check_pod(
        &verify::CheckPod {
            snapshot,
            source: &source,
            identity: identity.as_ref(),
            version: &version,
            credentials_secret: credentials.as_ref().map(|_| pod_name.as_str()),
        },
        &crate::domain::settings::OperatorSettings {
            agent_image: ctx.agent_image.clone(),
            ..ctx.observer.settings.clone()
        },
    );
    let Some(pod) = pod else {
        return Ok(Action::await_change());
    };
    ctx.act.count_write("Pod");
    match Api::<Pod>::namespaced(ctx.act.client.clone(), &namespace)
        .create(&post_params(), &pod)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(kube::Error::Api(s)) if (400..500).contains(&s.code) && s.code != 429 => {
            let failure = Failure::VerificationFailed {
                detail: format!(
                    "could not be restored: the check's Pod {pod_name} was refused: {}",
                    s.message
                ),
            };
            let stored = Stored::from_status(status);
            record_failure_verified(
                ctx,
                snapshot,
                status,
                &failure,
                stored.as_ref(),
                SnapshotVerify::Restore,
            )
            .await?;
            remove_agent(ctx, snapshot, &pod).await;
            return Ok(Action::await_change());
        }
        Err(e) => {
            return Err(SnapshotError::Read(
                format!("Pod {namespace}/{pod_name}"),
                e,
            ));
        }
    }
    event(
        ctx,
        snapshot,
        "Normal",
        "SnapshotVerifying",
        &format!(
            "restoring {} into a throwaway etcd {version} (Pod {pod_name}) to verify it",
            status
                .artifact
                .as_ref()
                .map(|a| a.uri.as_str())
                .unwrap_or_default()
        ),
    )
    .await;
    Ok(Action::requeue(Duration::from_secs(2)))
}

/// Where the restore check reads the artifact: the exact object of its store, or the claim's
/// exact file; `None` when it cannot be located (or is in a local store, which admission
/// refuses for `verify: Restore`).
pub(super) fn check_source(
    snapshot: &EtcdSnapshot,
    status: &etcd_operator_api::EtcdSnapshotStatus,
) -> Option<etcd_operator_api::shared::SnapshotLocation> {
    let uri = &status.artifact.as_ref()?.uri;
    snapshot.spec.destination.restore_source(uri).ok()
}

/// Follows the restore check: its Pod is made if missing (an operator that stopped between
/// the status and the Pod), read when done, then removed.
pub(super) async fn follow_restore_check(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
) -> Result<Action, SnapshotError> {
    let status = snapshot.status.clone().unwrap_or_default();
    let Some(pod) = agent_pods(ctx, snapshot, verify::ROLE)
        .await?
        .into_iter()
        .next()
    else {
        let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
        let access = match cluster(ctx, &namespace, &snapshot.spec.cluster_ref.name).await? {
            Some(cluster) => cluster_facts(ctx, &cluster).await?.1,
            None => EtcdAccess::plaintext(),
        };
        return start_restore_check(ctx, snapshot, &status, &access).await;
    };
    let stored = Stored::from_status(&status);
    let checksum = decide::checked_from_status(&status);
    let outcome = verify::check_outcome(&pod, age_seconds(&pod));
    let source = Source {
        member: status.member.clone().unwrap_or_default(),
        revision: status.revision,
        etcd_version: status.etcd_version.clone(),
    };
    let verdict = match (outcome, &stored, &checksum) {
        (verify::CheckOutcome::Running, _, _) => {
            return Ok(Action::requeue(Duration::from_secs(2)));
        }
        (verify::CheckOutcome::Served { revision, keys }, Some(stored), Some(checksum)) => {
            decide::check_restored(stored, checksum, revision, keys)
        }
        (verify::CheckOutcome::Served { .. }, _, _) => Err(Failure::VerificationFailed {
            detail: "was restored, but its status lost what was written".to_string(),
        }),
        (verify::CheckOutcome::Failed(why), _, _) => Err(Failure::VerificationFailed {
            detail: format!("could not be restored and read: {why}"),
        }),
    };
    match (verdict, stored) {
        (Ok(checked), Some(stored)) => {
            complete(ctx, snapshot, &status, &stored, &source, &checked).await?;
        }
        (Ok(_), None) => {}
        (Err(failure), stored) => {
            record_failure_verified(
                ctx,
                snapshot,
                &status,
                &failure,
                stored.as_ref(),
                SnapshotVerify::Restore,
            )
            .await?;
        }
    }
    remove_agent(ctx, snapshot, &pod).await;
    Ok(Action::await_change())
}
