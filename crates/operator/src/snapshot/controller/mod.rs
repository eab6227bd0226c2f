//! The EtcdSnapshot controller: a kube-runtime `Controller` on EtcdSnapshots beside the
//! EtcdCluster one (same process, same leader, same caches). One pass per snapshot: decide
//! (pure, `decide`), then at most one snapshot taken, streamed etcd → the store (S3, GCS,
//! Azure, a local directory), read back, recorded.
//!
//! - here: the controller and the pass that dispatches;
//! - `context`: what every pass shares (the context, the cluster, agent Pods, status, Events);
//! - `take`: what is stored where (the stream into an object store, the read-back);
//! - `pvc_destination`: the agent Pod that writes onto a claim;
//! - `verification`: what is verified (the read-back recorded, the restore check's Pod);
//! - `deletion`: `deletionPolicy: Delete` and the artifact finalizer.

mod context;
mod deletion;
mod pvc_destination;
mod take;
mod verification;

pub use context::{SnapshotContext, SnapshotError, snapshot_event};
pub use deletion::ARTIFACT_FINALIZER;

use std::sync::Arc;
use std::time::Duration;

use etcd_operator_api::EtcdSnapshot;
use etcd_operator_api::shared::StoreKind;
use etcd_operator_api::snapshot::SnapshotVerify;
use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::{Action, Config, Controller};
use tracing::{debug, info, warn};

use super::decide::{self, Next};
use super::pvc;
use super::store;
use super::verify;
use crate::etcd::EtcdAccess;
use crate::observe::{Filled, Scope, reflect_applied};
use context::{
    agent_pods, cluster, cluster_facts, event, name, record_failure, remove_agent, write_status,
};
use deletion::deletion;
use pvc_destination::{follow_pvc, start_pvc};
use take::take;
use verification::{follow_restore_check, written};

/// Runs the EtcdSnapshot controller until `shutdown` completes.
pub async fn run_snapshot_controller(
    scope: Scope,
    ctx: Arc<SnapshotContext>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.act.client.clone();
    let ctx_metrics = ctx.act.metrics.clone();
    // The controller's own cache, with a first-list mark that `record_successes` waits on
    // (see `Filled`: kube-runtime's readiness wakes only one of two waiters).
    let (cache, filled, applied) = reflect_applied(scope.api::<EtcdSnapshot>(&client));
    let controller = Controller::for_stream(applied, cache)
        // At most `SNAPSHOTS_AT_ONCE` at a time, through `SnapshotContext::slots`.
        .with_config(Config::default().concurrency(0));
    let successes = tokio::spawn(record_successes(
        controller.store(),
        filled,
        ctx.act.metrics.clone(),
    ));
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown)
        as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + Sync>>);
    // On shutdown the snapshots waiting for a slot do not start.
    let closing = ctx.slots.close_when(shutdown.clone());
    let snapshots = controller
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile_snapshot, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                debug!(error = %e, "snapshot controller event");
            }
        });
    let schedules =
        super::schedule_controller::run_schedule_controller(client, ctx_metrics, scope, shutdown);
    futures::join!(snapshots, schedules);
    successes.abort();
    closing.abort();
}

/// Every 10 s, the time of each cluster's newest Complete and verified snapshot goes to the
/// `snapshot_last_success_timestamp_seconds` series (from the watch cache: an operator that
/// restarts reports the same figure).
async fn record_successes(
    store: kube::runtime::reflector::Store<EtcdSnapshot>,
    filled: Filled,
    metrics: Arc<crate::metrics::Metrics>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    loop {
        tick.tick().await;
        if !filled.wait().await {
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
    let Some(_slot) = ctx.slots.take().await else {
        // The operator is stopping: no snapshot starts now; the next leader's pass takes it.
        return Ok(Action::await_change());
    };
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
