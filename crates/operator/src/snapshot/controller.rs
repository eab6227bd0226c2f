//! The EtcdSnapshot controller: a kube-runtime `Controller` on EtcdSnapshots beside the
//! EtcdCluster one (same process, same leader, same caches). One pass per snapshot: decide
//! (pure, `decide`), then at most one snapshot taken, streamed etcd → the store (S3, GCS, Azure, a local directory), read back, recorded.

use std::sync::Arc;
use std::time::Duration;

use std::collections::BTreeMap;

use etcd_operator_api::shared::StoreKind;
use etcd_operator_api::snapshot::{
    AGE_IDENTITY_KEY, AGE_RECIPIENTS_KEY, SecretKeyRef, SnapshotCompression,
    SnapshotDeletionPolicy, SnapshotVerify,
};
use etcd_operator_api::{EtcdCluster, EtcdSnapshot};
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use object_store::path::Path;
use serde_json::json;
use tracing::{debug, info, warn};

use super::codec;
use super::decide::{self, Checked, ClusterFacts, Existing, Failure, Next, Source, Stored, Voter};
use super::pvc;
use super::store::{self, PARTS_IN_FLIGHT, StoreCredentials};
use super::verify;
use crate::act::{ActContext, post_params};
use crate::etcd::{EtcdAccess, EtcdClient, Timeouts};
use crate::observe::{Observer, Scope};

/// What the snapshot passes share.
pub struct SnapshotContext {
    pub observer: Observer,
    pub act: ActContext,
    /// UIDs of the snapshots this process finished (Complete or Failed). The watch cache
    /// shows a status write a moment later; the pass that the write itself triggers must not
    /// read the old `Started` from it and take the snapshot again.
    pub finished: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The operator's image, run by the agent Pods of `destination.pvc`.
    pub agent_image: String,
    /// Where `destination.local` may write.
    pub stores: store::StoreSettings,
    /// UIDs of the snapshots whose restore check this process recorded (`Started`, stored):
    /// a pass reading the cache before that status shows must not take them again.
    pub verifying: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl SnapshotContext {
    pub fn new(observer: Observer, act: ActContext) -> SnapshotContext {
        SnapshotContext {
            observer,
            act,
            finished: Default::default(),
            verifying: Default::default(),
            agent_image: crate::domain::settings::DEFAULT_AGENT_IMAGE.to_string(),
            stores: store::StoreSettings::default(),
        }
    }

    /// The directory `destination.local` snapshots must lie under (`--local-store-root`).
    pub fn with_local_store_root(mut self, root: &std::path::Path) -> SnapshotContext {
        self.stores.local_root = root.to_path_buf();
        self
    }

    /// The image of the PVC agent Pods (the operator's `--agent-image`).
    pub fn with_agent_image(mut self, image: &str) -> SnapshotContext {
        self.agent_image = image.to_string();
        self
    }

    fn is_finished(&self, snapshot: &EtcdSnapshot) -> bool {
        let uid = snapshot.metadata.uid.clone().unwrap_or_default();
        self.finished.lock().expect("finished set").contains(&uid)
    }

    fn is_verifying(&self, snapshot: &EtcdSnapshot) -> bool {
        let uid = snapshot.metadata.uid.clone().unwrap_or_default();
        self.verifying.lock().expect("verifying set").contains(&uid)
    }

    fn mark_verifying(&self, snapshot: &EtcdSnapshot) {
        let uid = snapshot.metadata.uid.clone().unwrap_or_default();
        self.verifying.lock().expect("verifying set").insert(uid);
    }

    fn mark_finished(&self, snapshot: &EtcdSnapshot) {
        let uid = snapshot.metadata.uid.clone().unwrap_or_default();
        self.finished.lock().expect("finished set").insert(uid);
    }
}

/// A pass that could not record its outcome (a status write or a read of the API failed).
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("writing the status of EtcdSnapshot {0}: {1}")]
    Status(String, #[source] kube::Error),
    #[error("reading {0}: {1}")]
    Read(String, #[source] kube::Error),
    #[error("the watch caches have not completed their first list yet")]
    CachesNotReady,
}

/// Runs the EtcdSnapshot controller until `shutdown` completes.
pub async fn run_snapshot_controller(
    scope: Scope,
    ctx: Arc<SnapshotContext>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.act.client.clone();
    let controller = Controller::new(
        scope.api::<EtcdSnapshot>(&client),
        watcher::Config::default(),
    )
    // Snapshots stream for as long as the database takes: two at a time at most.
    .with_config(Config::default().concurrency(2));
    let successes = tokio::spawn(record_successes(
        controller.store(),
        ctx.act.metrics.clone(),
    ));
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown)
        as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + Sync>>);
    let snapshots = controller
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile_snapshot, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                debug!(error = %e, "snapshot controller event");
            }
        });
    let schedules = super::schedule_controller::run_schedule_controller(client, scope, shutdown);
    futures::join!(snapshots, schedules);
    successes.abort();
}

/// Every 10 s, the time of each cluster's newest Complete and verified snapshot goes to the
/// `snapshot_last_success_timestamp_seconds` series (from the watch cache: an operator that
/// restarts reports the same figure).
async fn record_successes(
    store: kube::runtime::reflector::Store<EtcdSnapshot>,
    metrics: Arc<crate::metrics::Metrics>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    loop {
        tick.tick().await;
        if store.wait_until_ready().await.is_err() {
            return;
        }
        metrics.snapshot_successes(&decide::latest_successes(&store.state()));
    }
}

fn error_policy(
    snapshot: Arc<EtcdSnapshot>,
    error: &SnapshotError,
    _ctx: Arc<SnapshotContext>,
) -> Action {
    warn!(
        namespace = snapshot.metadata.namespace.as_deref().unwrap_or_default(),
        snapshot = snapshot.metadata.name.as_deref().unwrap_or_default(),
        error = %error,
        "snapshot pass failed; retrying in 5 s"
    );
    Action::requeue(Duration::from_secs(5))
}

async fn reconcile_snapshot(
    snapshot: Arc<EtcdSnapshot>,
    ctx: Arc<SnapshotContext>,
) -> Result<Action, SnapshotError> {
    if let Some(action) = deletion(&ctx, &snapshot).await? {
        return Ok(action);
    }
    let phase = snapshot.status.as_ref().and_then(|s| s.phase);
    if decide::next(phase, &snapshot.spec.destination, "", None) == Next::Nothing {
        if snapshot.spec.destination.pvc.is_some() {
            // Finished, but the operator may have stopped before removing the agent's Pod.
            for pod in agent_pods(&ctx, &snapshot, pvc::AgentTask::SAVE).await? {
                remove_agent(&ctx, &snapshot, &pod).await;
            }
        }
        if snapshot.spec.verify == Some(SnapshotVerify::Restore) {
            for pod in agent_pods(&ctx, &snapshot, verify::ROLE).await? {
                remove_agent(&ctx, &snapshot, &pod).await;
            }
        }
        return Ok(Action::await_change());
    }
    if ctx.is_finished(&snapshot) {
        // Finished by this process; the cache has not caught up with the status yet.
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    if !ctx
        .observer
        .stores
        .wait_until_ready(Duration::from_secs(30))
        .await
    {
        return Err(SnapshotError::CachesNotReady);
    }
    // Stored and read back, the restore check to run or running.
    if snapshot
        .status
        .as_ref()
        .is_some_and(decide::restore_check_pending)
    {
        return follow_restore_check(&ctx, &snapshot).await;
    }
    if ctx.is_verifying(&snapshot) {
        // This process recorded the restore check; the cache has not caught up yet.
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    // An agent Pod of this snapshot at work (the operator restarted meanwhile) is followed,
    // never made twice.
    if let Some(to) = snapshot
        .spec
        .destination
        .pvc
        .as_ref()
        .filter(|_| snapshot.spec.destination.store() == Some(StoreKind::Pvc))
        && let Some(pod) = agent_pods(&ctx, &snapshot, pvc::AgentTask::SAVE)
            .await?
            .into_iter()
            .next()
    {
        return follow_pvc(&ctx, &snapshot, &to.claim_name, &pod).await;
    }
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let cluster_name = snapshot.spec.cluster_ref.name.clone();
    let cluster = cluster(&ctx, &namespace, &cluster_name).await?;
    let (facts, access) = match &cluster {
        Some(cluster) => {
            let (facts, access) = cluster_facts(&ctx, cluster).await?;
            (Some(facts), access)
        }
        None => (None, EtcdAccess::plaintext()),
    };
    let previous = snapshot.status.clone().unwrap_or_default();
    let generation = snapshot.metadata.generation;
    match decide::next(
        phase,
        &snapshot.spec.destination,
        &cluster_name,
        facts.as_ref(),
    ) {
        Next::Nothing => Ok(Action::await_change()),
        Next::Fail(failure) => {
            record_failure(&ctx, &snapshot, &previous, &failure, None).await?;
            Ok(Action::await_change())
        }
        Next::TakeToPvc { voter, pvc: to } => {
            start_pvc(&ctx, &snapshot, &voter, &to, &access).await
        }
        Next::Take { voter, to } => {
            let (key, uri) = match store::target(&to, &name(&snapshot)) {
                Ok(target) => (target.key, target.uri),
                Err(failure) => {
                    record_failure(&ctx, &snapshot, &previous, &failure, None).await?;
                    return Ok(Action::await_change());
                }
            };
            let started = decide::started_status(&voter.member, &uri, Timestamp::now(), generation);
            write_status(&ctx, &snapshot, &started).await?;
            event(
                &ctx,
                &snapshot,
                "Normal",
                "SnapshotStarted",
                &format!("streaming a snapshot from member {} to {uri}", voter.member),
            )
            .await;
            info!(namespace = %namespace, snapshot = %name(&snapshot), member = %voter.member, uri = %uri, "snapshot started");
            match take(&ctx, &snapshot, &voter, &to, &key, &uri, &access).await {
                Ok((stored, source, checked)) => {
                    written(
                        &ctx, &snapshot, &started, &stored, &source, &checked, &access,
                    )
                    .await
                }
                Err((failure, stored)) => {
                    record_failure(&ctx, &snapshot, &started, &failure, stored.as_ref()).await?;
                    Ok(Action::await_change())
                }
            }
        }
    }
}

/// A snapshot stored and read back: Complete, or (`verify: Restore`) its restore check
/// started.
async fn written(
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
async fn complete(
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
async fn start_restore_check(
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
fn check_source(
    snapshot: &EtcdSnapshot,
    status: &etcd_operator_api::EtcdSnapshotStatus,
) -> Option<etcd_operator_api::shared::SnapshotLocation> {
    let uri = &status.artifact.as_ref()?.uri;
    snapshot.spec.destination.restore_source(uri).ok()
}

/// Follows the restore check: its Pod is made if missing (an operator that stopped between
/// the status and the Pod), read when done, then removed.
async fn follow_restore_check(
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

/// The finalizer of an EtcdSnapshot with `deletionPolicy: Delete`: its stored object is
/// deleted before the EtcdSnapshot goes.
pub const ARTIFACT_FINALIZER: &str = "etcd-operator.cozystack.io/snapshot-artifact";

/// How often a stored object that could not be deleted is tried again.
const ARTIFACT_RETRY: Duration = Duration::from_secs(30);

fn wants_artifact_deleted(snapshot: &EtcdSnapshot) -> bool {
    snapshot.spec.deletion_policy == Some(SnapshotDeletionPolicy::Delete)
}

fn has_artifact_finalizer(snapshot: &EtcdSnapshot) -> bool {
    snapshot
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == ARTIFACT_FINALIZER))
}

/// The deletion policy's part of a pass: with `Delete`, the finalizer is put on first; once
/// the EtcdSnapshot is being deleted, its stored object is deleted (only an object this snapshot
/// wrote) and the finalizer removed. `Some` ends the pass.
async fn deletion(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
) -> Result<Option<Action>, SnapshotError> {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let api: Api<EtcdSnapshot> = Api::namespaced(ctx.act.client.clone(), &namespace);
    let own = name(snapshot);
    let finalizers = |list: Vec<String>| json!({"metadata": {"finalizers": list, "resourceVersion": snapshot.metadata.resource_version}});
    let current: Vec<String> = snapshot.metadata.finalizers.clone().unwrap_or_default();
    if snapshot.metadata.deletion_timestamp.is_none() {
        if wants_artifact_deleted(snapshot) && !has_artifact_finalizer(snapshot) {
            let mut list = current;
            list.push(ARTIFACT_FINALIZER.to_string());
            ctx.act.count_write("EtcdSnapshot");
            api.patch(
                &own,
                &PatchParams::default(),
                &Patch::Merge(finalizers(list)),
            )
            .await
            .map_err(|e| SnapshotError::Read(format!("EtcdSnapshot {namespace}/{own}"), e))?;
        }
        return Ok(None);
    }
    if !has_artifact_finalizer(snapshot) {
        return Ok(Some(Action::await_change()));
    }
    let deleted = if snapshot.spec.destination.pvc.is_some() {
        match delete_pvc_artifact(ctx, snapshot).await? {
            Some(outcome) => outcome,
            // The removal Pod is at work.
            None => return Ok(Some(Action::requeue(Duration::from_secs(2)))),
        }
    } else {
        delete_artifact(ctx, snapshot).await
    };
    match deleted {
        Ok(said) => {
            info!(namespace = %namespace, snapshot = %own, "{said}");
            event(ctx, snapshot, "Normal", "ArtifactDeleted", &said).await;
        }
        Err(failure) => {
            let message = format!(
                "cannot delete the stored snapshot: {}; retrying every {} s. To keep the object \
                 and let the EtcdSnapshot go, remove the finalizer {ARTIFACT_FINALIZER}",
                failure.message(),
                ARTIFACT_RETRY.as_secs()
            );
            warn!(namespace = %namespace, snapshot = %own, "{message}");
            event(ctx, snapshot, "Warning", "ArtifactNotDeleted", &message).await;
            return Ok(Some(Action::requeue(ARTIFACT_RETRY)));
        }
    }
    let list: Vec<String> = current
        .into_iter()
        .filter(|f| f != ARTIFACT_FINALIZER)
        .collect();
    ctx.act.count_write("EtcdSnapshot");
    match api
        .patch(
            &own,
            &PatchParams::default(),
            &Patch::Merge(finalizers(list)),
        )
        .await
    {
        Ok(_) => Ok(Some(Action::await_change())),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Some(Action::await_change())),
        Err(e) => Err(SnapshotError::Read(
            format!("EtcdSnapshot {namespace}/{own}"),
            e,
        )),
    }
}

/// Deletes the stored object of `snapshot` if this snapshot wrote it; says what was done.
async fn delete_artifact(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
) -> Result<String, Failure> {
    let destination = &snapshot.spec.destination;
    let Ok(target) = store::target(destination, &name(snapshot)) else {
        return Ok("no object-store artifact to delete".to_string());
    };
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let uid = snapshot.metadata.uid.clone().unwrap_or_default();
    let uri = target.uri;
    let credentials = credentials(ctx, &namespace, destination).await?;
    let store = store::open(destination, &credentials, &ctx.stores)?;
    let path = target.path;
    match store::existing(&store, &path).await? {
        Existing::Absent => Ok(format!("{uri} is not in the store (nothing to delete)")),
        Existing::Present {
            writer: Some(writer),
        } if writer == uid => {
            store::delete(&store, &path).await?;
            Ok(format!("deleted {uri} (deletionPolicy Delete)"))
        }
        Existing::Present { .. } => Ok(format!(
            "{uri} was written by another EtcdSnapshot: left in the store"
        )),
    }
}

/// The agent Pods of `snapshot` doing `role` (found by label, so that an operator that
/// restarts finds the Pod its predecessor made).
async fn agent_pods(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    role: &str,
) -> Result<Vec<Pod>, SnapshotError> {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let uid = snapshot.metadata.uid.clone().unwrap_or_default();
    let selector = format!(
        "{}={uid},{}={role}",
        pvc::SNAPSHOT_UID_LABEL,
        pvc::ROLE_LABEL
    );
    Api::<Pod>::namespaced(ctx.act.client.clone(), &namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .map(|list| list.items)
        .map_err(|e| {
            SnapshotError::Read(
                format!("the agent Pods of {namespace}/{}", name(snapshot)),
                e,
            )
        })
}

/// Deletes an agent Pod and its access Secret (same name); failures are logged, and the
/// garbage collector removes both with the EtcdSnapshot anyway.
async fn remove_agent(ctx: &SnapshotContext, snapshot: &EtcdSnapshot, pod: &Pod) {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    ctx.act.count_write("Pod");
    if let Err(e) = Api::<Pod>::namespaced(ctx.act.client.clone(), &namespace)
        .delete(&pod_name, &DeleteParams::default())
        .await
        && !matches!(&e, kube::Error::Api(s) if s.code == 404)
    {
        warn!(namespace = %namespace, pod = %pod_name, error = %e, "cannot delete the snapshot agent's Pod");
    }
    let uses_secret = pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) == Some(&pod_name));
    if uses_secret {
        ctx.act.count_write("Secret");
        if let Err(e) = Api::<Secret>::namespaced(ctx.act.client.clone(), &namespace)
            .delete(&pod_name, &DeleteParams::default())
            .await
            && !matches!(&e, kube::Error::Api(s) if s.code == 404)
        {
            warn!(namespace = %namespace, secret = %pod_name, error = %e, "cannot delete the snapshot agent's access Secret");
        }
    }
}

async fn claim(
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
async fn start_pvc(
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

fn age_seconds(pod: &Pod) -> i64 {
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| Timestamp::now().as_second() - t.0.as_second())
        .unwrap_or_default()
}

/// Follows the agent's Pod: waits while it runs, then records its result and removes it.
async fn follow_pvc(
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
async fn delete_pvc_artifact(
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
            pvc::PodOutcome::Done(pvc::AgentResult::Saved(_) | pvc::AgentResult::Served { .. }) => {
                Err(Failure::AgentFailed {
                    detail: "the removal Pod answered as another task".to_string(),
                })
            }
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

fn name(snapshot: &EtcdSnapshot) -> String {
    snapshot.metadata.name.clone().unwrap_or_default()
}

async fn cluster(
    ctx: &SnapshotContext,
    namespace: &str,
    name: &str,
) -> Result<Option<Arc<EtcdCluster>>, SnapshotError> {
    let key = ObjectRef::<EtcdCluster>::new(name).within(namespace);
    if let Some(cluster) = ctx.observer.stores.clusters.get(&key) {
        return Ok(Some(cluster));
    }
    // Not cached (created a moment ago): ask once.
    Api::<EtcdCluster>::namespaced(ctx.act.client.clone(), namespace)
        .get_opt(name)
        .await
        .map(|c| c.map(Arc::new))
        .map_err(|e| SnapshotError::Read(format!("EtcdCluster {namespace}/{name}"), e))
}

/// The facts that need no etcd (a cluster that cannot be snapshotted anyway).
fn shallow_facts(cluster: &EtcdCluster) -> ClusterFacts {
    ClusterFacts {
        name: cluster.metadata.name.clone().unwrap_or_default(),
        deleting: cluster.metadata.deletion_timestamp.is_some(),
        paused: cluster.spec.is_paused(),
        replicas: cluster.spec.replicas_or_default(),
        ..Default::default()
    }
}

/// The cluster as `observe` sees it: its voters, their health, and how to dial them.
async fn cluster_facts(
    ctx: &SnapshotContext,
    cluster: &EtcdCluster,
) -> Result<(ClusterFacts, EtcdAccess), SnapshotError> {
    let facts = shallow_facts(cluster);
    if facts.deleting || facts.paused || facts.replicas == 0 {
        return Ok((facts, EtcdAccess::plaintext()));
    }
    let observed = ctx
        .observer
        .observe(cluster)
        .await
        .map_err(|e| SnapshotError::Read(format!("{}/{}", e.namespace, e.name), e.source))?;
    let facts = decide::cluster_facts(&observed, |url| ctx.observer.etcd_urls.map(url));
    Ok((facts, observed.security.access.clone()))
}

/// Reads the credentials Secret the destination names (none for a local directory).
async fn credentials(
    ctx: &SnapshotContext,
    namespace: &str,
    location: &etcd_operator_api::shared::SnapshotLocation,
) -> Result<StoreCredentials, Failure> {
    let Some(secret) = location.credentials_secret() else {
        return store::credentials_from_secret(location, namespace, None);
    };
    let found = Api::<Secret>::namespaced(ctx.act.client.clone(), namespace)
        .get_opt(secret)
        .await
        .map_err(|e| Failure::CredentialsSecret {
            detail: format!("cannot read the credentials Secret {secret}: {e}"),
        })?;
    let data = found.map(|s| s.data.unwrap_or_default());
    store::credentials_from_secret(location, namespace, data.as_ref())
}

/// The layers a snapshot's spec asks for: the compression, the age recipients (with their
/// fingerprints) and the identities that decrypt it (for the read-back), from their Secrets.
pub(crate) struct Encoding {
    pub compression: SnapshotCompression,
    pub recipients: Vec<age::x25519::Recipient>,
    pub fingerprints: Vec<String>,
    pub identities: Vec<age::x25519::Identity>,
}

/// The text of one key of a Secret (never printed), or why it cannot be had.
async fn secret_text(
    ctx: &SnapshotContext,
    namespace: &str,
    reference: &SecretKeyRef,
    default_key: &str,
    field: &str,
) -> Result<String, Failure> {
    let key = reference.key_or(default_key);
    let name = &reference.name;
    let found = Api::<Secret>::namespaced(ctx.act.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| Failure::EncryptionSecret {
            detail: format!("cannot read the Secret {name} ({field}): {e}"),
        })?
        .ok_or_else(|| Failure::EncryptionSecret {
            detail: format!("the Secret {name} ({field}) does not exist in namespace {namespace}"),
        })?;
    found
        .data
        .unwrap_or_default()
        .get(key)
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| Failure::EncryptionSecret {
            detail: format!("the Secret {name} ({field}) has no (or an empty) key {key}"),
        })
}

/// The encoding of `snapshot` (its Secrets read now).
pub(crate) async fn encoding(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
) -> Result<Encoding, Failure> {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let mut encoding = Encoding {
        compression: snapshot.spec.compression.unwrap_or_default(),
        recipients: Vec::new(),
        fingerprints: Vec::new(),
        identities: Vec::new(),
    };
    let Some(age) = snapshot.spec.encryption.as_ref().map(|e| &e.age) else {
        return Ok(encoding);
    };
    let field = "spec.encryption.age.recipientsSecretRef";
    let text = secret_text(
        ctx,
        &namespace,
        &age.recipients_secret_ref,
        AGE_RECIPIENTS_KEY,
        field,
    )
    .await?;
    encoding.recipients =
        codec::parse_recipients(&text).map_err(|e| Failure::EncryptionSecret {
            detail: format!(
                "the Secret {} ({field}): {e}",
                age.recipients_secret_ref.name
            ),
        })?;
    encoding.fingerprints = encoding.recipients.iter().map(codec::fingerprint).collect();
    if let Some(identity) = &age.identity_secret_ref {
        let field = "spec.encryption.age.identitySecretRef";
        let text = secret_text(ctx, &namespace, identity, AGE_IDENTITY_KEY, field).await?;
        encoding.identities =
            codec::parse_identities(&text).map_err(|e| Failure::EncryptionSecret {
                detail: format!("the Secret {} ({field}): {e}", identity.name),
            })?;
        let theirs: Vec<String> = encoding
            .identities
            .iter()
            .map(|i| codec::fingerprint(&i.to_public()))
            .collect();
        if !theirs.iter().any(|f| encoding.fingerprints.contains(f)) {
            return Err(Failure::EncryptionSecret {
                detail: format!(
                    "the identity in Secret {} ({field}) belongs to none of the recipients (its recipient is {}), so the snapshot could not be read back",
                    identity.name,
                    theirs.join(", ")
                ),
            });
        }
    }
    Ok(encoding)
}

/// Streams a snapshot from `voter` to the object at `key` through the codec, then reads it
/// back and decodes it. On failure, the multipart upload is aborted (nothing that looks
/// complete is left), and the stored object is returned only when it exists but failed the
/// read-back.
async fn take(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    voter: &Voter,
    to: &etcd_operator_api::shared::SnapshotLocation,
    key: &str,
    uri: &str,
    access: &EtcdAccess,
) -> Result<(Stored, Source, Checked), (Failure, Option<Stored>)> {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let uid = snapshot.metadata.uid.clone().unwrap_or_default();
    let credentials = credentials(ctx, &namespace, to)
        .await
        .map_err(|f| (f, None))?;
    let store = store::open(to, &credentials, &ctx.stores).map_err(|f| (f, None))?;
    let encoding = encoding(ctx, snapshot).await.map_err(|f| (f, None))?;
    let path = Path::from(key);
    let object_name = format!("{namespace}/{}", name(snapshot));
    let existing = match store::existing(&store, &path).await {
        Ok(existing) => existing,
        // A refused HEAD has no body to say why: the upload's first request tells bad
        // credentials from a missing permission. Without a read, the guard cannot decide.
        Err(refused @ Failure::AccessDenied { .. }) => {
            let failure = match store::start_upload(&store, &path, &uid, &object_name).await {
                Ok(writer) => {
                    let _ = writer.abort().await;
                    refused
                }
                Err(failure) => failure,
            };
            return Err((failure, None));
        }
        Err(failure) => return Err((failure, None)),
    };
    decide::may_write(&existing, &uid, uri).map_err(|f| (f, None))?;

    let etcd_failure = |detail: String| Failure::Etcd {
        member: voter.member.clone(),
        detail,
    };
    let client = EtcdClient::connect_endpoint(&voter.endpoint, Timeouts::SNAPSHOT, access)
        .await
        .map_err(|e| (etcd_failure(e.to_string()), None))?;
    let etcd_version = client
        .endpoint_status(&voter.endpoint)
        .await
        .ok()
        .map(|s| s.version);
    // Asked before the stream: only a fallback for a snapshot whose pages cannot be read.
    let asked_revision = client.revision().await.ok();
    let mut stream = client
        .snapshot()
        .await
        .map_err(|e| (etcd_failure(e.to_string()), None))?;

    let mut encoder =
        codec::Encoder::new(encoding.compression, &encoding.recipients).map_err(|e| {
            (
                Failure::Encoding {
                    detail: e.to_string(),
                },
                None,
            )
        })?;
    let mut writer = store::start_upload(&store, &path, &uid, &object_name)
        .await
        .map_err(|f| (f, None))?;
    loop {
        match stream.next_chunk().await {
            Ok(Some(chunk)) => {
                let bytes = match encoder.push(&chunk) {
                    Ok(bytes) => bytes,
                    Err(e) => {
                        let _ = writer.abort().await;
                        return Err((
                            Failure::Encoding {
                                detail: e.to_string(),
                            },
                            None,
                        ));
                    }
                };
                if bytes.is_empty() {
                    continue;
                }
                if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                    let _ = writer.abort().await;
                    return Err((store.classify(&e), None));
                }
                writer.write(bytes);
            }
            Ok(None) => break,
            Err(e) => {
                let _ = writer.abort().await;
                return Err((etcd_failure(e.to_string()), None));
            }
        }
    }
    let (last, encoded) = match encoder.finish() {
        Ok(done) => done,
        Err(e) => {
            let _ = writer.abort().await;
            return Err((
                Failure::Encoding {
                    detail: e.to_string(),
                },
                None,
            ));
        }
    };
    if !encoded.snapshot.trailer_matches {
        let _ = writer.abort().await;
        return Err((
            Failure::Corrupt {
                member: voter.member.clone(),
            },
            None,
        ));
    }
    if !last.is_empty() {
        writer.write(&last);
    }
    writer
        .finish()
        .await
        .map_err(|e| (store.classify(&e), None))?;
    let stored = Stored::of(uri, &encoded, encoding.fingerprints.clone());
    let source = Source {
        member: voter.member.clone(),
        revision: asked_revision,
        etcd_version,
    };
    let checked = read_back(&store, &path, &stored, &encoding)
        .await
        .map_err(|f| (f, Some(stored.clone())))?;
    Ok((stored, source, checked))
}

/// Reads the object back (streamed) and checks it: decoded when it can be (not encrypted, or
/// an identity given), else the stored bytes only.
async fn read_back(
    store: &store::SnapshotStore,
    path: &Path,
    stored: &Stored,
    encoding: &Encoding,
) -> Result<Checked, Failure> {
    if stored.encrypted() && encoding.identities.is_empty() {
        let (size, sha256) = store::read_back(store, path).await?;
        return decide::check_read_back(stored, size, &sha256, None);
    }
    let result = store
        .store
        .get_opts(path, object_store::GetOptions::default())
        .await
        .map_err(|e| store.classify(&e))?;
    let (decoded, failed) = codec::decode_stream(
        result.into_stream(),
        encoding.identities.clone(),
        Box::new(|_| Ok(())),
    )
    .await;
    match decoded {
        Ok(decoded) => decide::check_read_back(
            stored,
            decoded.stored_size,
            &decoded.stored_sha256,
            Some(&decoded),
        ),
        Err(_) if failed.is_some() => Err(store.classify(&failed.expect("checked"))),
        Err(e) => Err(Failure::VerificationFailed {
            detail: format!("cannot be decoded: {e}"),
        }),
    }
}

async fn record_failure(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    previous: &etcd_operator_api::EtcdSnapshotStatus,
    failure: &Failure,
    stored: Option<&Stored>,
) -> Result<(), SnapshotError> {
    record_failure_verified(
        ctx,
        snapshot,
        previous,
        failure,
        stored,
        SnapshotVerify::Checksum,
    )
    .await
}

/// [`record_failure`], naming the verification that failed (when it is one).
async fn record_failure_verified(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    previous: &etcd_operator_api::EtcdSnapshotStatus,
    failure: &Failure,
    stored: Option<&Stored>,
    method: SnapshotVerify,
) -> Result<(), SnapshotError> {
    let status = decide::failed_status(
        previous,
        failure,
        stored,
        Some(method),
        Timestamp::now(),
        snapshot.metadata.generation,
    );
    write_status(ctx, snapshot, &status).await?;
    ctx.mark_finished(snapshot);
    warn!(
        namespace = snapshot.metadata.namespace.as_deref().unwrap_or_default(),
        snapshot = %name(snapshot),
        reason = failure.reason(),
        detail = %failure.message(),
        "snapshot failed"
    );
    event(
        ctx,
        snapshot,
        "Warning",
        failure.reason(),
        &failure.message(),
    )
    .await;
    Ok(())
}

async fn write_status(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    status: &etcd_operator_api::EtcdSnapshotStatus,
) -> Result<(), SnapshotError> {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let api: Api<EtcdSnapshot> = Api::namespaced(ctx.act.client.clone(), &namespace);
    ctx.act.count_write("EtcdSnapshot/status");
    api.patch_status(
        &name(snapshot),
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .map(|_| ())
    .map_err(|e| SnapshotError::Status(format!("{namespace}/{}", name(snapshot)), e))
}

/// An Event about `snapshot`; a failure to record it is logged, never fails the pass.
async fn event(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    kind: &str,
    reason: &str,
    message: &str,
) {
    let event = snapshot_event(snapshot, kind, reason, message, Timestamp::now());
    let namespace = event.metadata.namespace.clone().unwrap_or_default();
    ctx.act.count_write("Event");
    if let Err(e) = Api::<Event>::namespaced(ctx.act.client.clone(), &namespace)
        .create(&post_params(), &event)
        .await
    {
        warn!(namespace = %namespace, reason, error = %e, "cannot record an Event");
    }
}

/// The Event object: involving the EtcdSnapshot, named `<snapshot>.<nanoseconds in hex>`.
pub fn snapshot_event(
    snapshot: &EtcdSnapshot,
    kind: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Event {
    let kind = if kind == "Warning" {
        crate::build::EventType::Warning
    } else {
        crate::build::EventType::Normal
    };
    crate::build::event_about(snapshot, kind, reason, message, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_involve_the_snapshot() {
        let mut snapshot = EtcdSnapshot::new("daily", Default::default());
        snapshot.metadata.namespace = Some("prod".into());
        snapshot.metadata.uid = Some("uid-1".into());
        let now: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let e = snapshot_event(&snapshot, "Warning", "Unauthorized", &"x".repeat(2000), now);
        assert_eq!(e.involved_object.kind.as_deref(), Some("EtcdSnapshot"));
        assert_eq!(e.involved_object.uid.as_deref(), Some("uid-1"));
        assert_eq!(e.metadata.namespace.as_deref(), Some("prod"));
        assert!(e.metadata.name.unwrap().starts_with("daily."));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert!(e.message.unwrap().len() <= 1024);
    }
}
