//! The reconciler: one pass per EtcdCluster, observe → plan → act, run by a kube-runtime
//! `Controller` that watches EtcdClusters and everything they own.
//!
//! A change to an EtcdMember, Service or PDB wakes the cluster that owns it (owner
//! references); a change to a Pod or PVC, owned by an EtcdMember, wakes the cluster named by
//! its cluster label. The plan says when to look again; a failure is retried promptly when the
//! next observation resolves it (a stale read, etcd's short refusals) and with a bounded
//! exponential backoff otherwise.

mod alarm_probe;
mod backoff;
mod controller;
mod events;
mod fill;
mod finalizer;
mod freshness;
mod slots;

pub use alarm_probe::{AlarmProbe, ProbeTarget};
pub use backoff::Backoff;
pub use controller::{ControllerOptions, run_controller};
pub use fill::FillHistory;
pub use finalizer::{CLUSTER_FINALIZER, has_finalizer};
pub use freshness::wait_for_caches;
pub use slots::PassSlots;

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_operator_api::EtcdCluster;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::{debug, info, warn};

use crate::act::{ActContext, ActError, act};
use crate::metrics::Metrics;
use crate::observe::{ObserveError, Observer};
use crate::plan::{Step, WaitReason, plan_next_step};

/// How long a pass waits for the caches to show its own writes.
const CACHE_LAG_LIMIT: Duration = Duration::from_secs(2);
/// How long a pass waits for the caches' first list before it gives up and retries.
const CACHE_SYNC_LIMIT: Duration = Duration::from_secs(30);

/// Everything a pass needs, shared by all passes.
pub struct Context {
    pub observer: Observer,
    pub act: ActContext,
    pub metrics: Arc<Metrics>,
    pub backoff: Backoff,
    /// Each cluster's backend fill at its previous pass, to look sooner at one filling fast.
    pub fill: FillHistory,
    /// The light look at etcd's alarms between passes (`reconcile/alarm_probe.rs`).
    pub probe: Arc<AlarmProbe>,
    /// `--concurrency`: passes at once, first come first served (`reconcile/slots.rs`).
    pub slots: PassSlots,
}

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Observe(#[from] ObserveError),
    #[error(transparent)]
    Act(#[from] ActError),
    #[error("the watch caches have not completed their first list yet")]
    CachesNotReady,
}

impl ReconcileError {
    /// A short stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            ReconcileError::Observe(_) => "observe",
            ReconcileError::Act(e) => e.kind(),
            ReconcileError::CachesNotReady => "caches_not_ready",
        }
    }

    fn prompt_retry(&self) -> Option<Duration> {
        match self {
            ReconcileError::Act(e) => e.prompt_retry(),
            _ => None,
        }
    }
}

/// One pass over `cluster`.
pub async fn reconcile(
    cluster: Arc<EtcdCluster>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let Some(_slot) = ctx.slots.take().await else {
        // The operator is stopping: this pass never started; the next leader's will.
        return Ok(Action::await_change());
    };
    // The cluster as the cache has it now: the pass may have waited for its slot behind
    // hundreds of others, and kube-runtime handed it the object as it was when it came due.
    let Some(cluster) = ctx
        .observer
        .stores
        .clusters
        .get(&ObjectRef::from_obj(&*cluster))
    else {
        return Ok(Action::await_change());
    };
    let started = Instant::now();
    let result = reconcile_pass(&cluster, &ctx).await;
    let error_kind = result.as_ref().err().map(ReconcileError::kind);
    ctx.metrics
        .reconciled(started.elapsed().as_secs_f64(), error_kind);
    let connections = &ctx.observer.connections;
    ctx.metrics
        .etcd_connections(connections.kept_len(), connections.dials());
    let (namespace, name) = key(&cluster);
    match error_kind {
        None => ctx.backoff.succeeded(&namespace, &name),
        Some(kind) => ctx.metrics.cluster_failed(&namespace, &name, kind),
    }
    result
}

/// When to try again after a failed pass.
pub fn error_policy(
    cluster: Arc<EtcdCluster>,
    error: &ReconcileError,
    ctx: Arc<Context>,
) -> Action {
    let (namespace, name) = key(&cluster);
    match error.prompt_retry() {
        // Expected and short (a stale read, etcd's health window): not worth a warning.
        Some(delay) => {
            debug!(
                namespace = %namespace,
                cluster = %name,
                kind = error.kind(),
                error = %error,
                retry_in_ms = delay.as_millis() as u64,
                "retrying"
            );
            Action::requeue(delay)
        }
        None => {
            let backoff = ctx.backoff.failed(&namespace, &name);
            warn!(
                namespace = %namespace,
                cluster = %name,
                kind = error.kind(),
                error = %error,
                retry_in_ms = backoff.as_millis() as u64,
                "reconcile failed"
            );
            Action::requeue(backoff)
        }
    }
}

async fn reconcile_pass(cluster: &EtcdCluster, ctx: &Context) -> Result<Action, ReconcileError> {
    let stores = &ctx.observer.stores;
    if !stores.wait_until_ready(CACHE_SYNC_LIMIT).await {
        return Err(ReconcileError::CachesNotReady);
    }
    let (namespace, name) = key(cluster);
    let deleting = cluster.metadata.deletion_timestamp.is_some();

    if deleting && !has_finalizer(cluster) {
        // Our finalizer is gone (a pass removed it, or a person did): the cluster goes with
        // what garbage collection takes; nothing is left to do, and nothing to report of it.
        ctx.metrics.forget_cluster(&namespace, &name);
        ctx.fill.forget(&namespace, &name);
        ctx.probe.forget(&namespace, &name);
        return Ok(Action::await_change());
    }
    if !deleting && !has_finalizer(cluster) {
        let written = finalizer::add(&ctx.act, cluster).await?;
        wait_for_caches(stores, &[written], CACHE_LAG_LIMIT).await;
        return Ok(Action::requeue(Duration::ZERO));
    }

    let mut observed = ctx.observer.observe(cluster).await?;
    let now = Timestamp::now();
    let mut plan = plan_next_step(&observed, now);
    if plan.needs_snapshots {
        // Only a pass that may restore from a snapshot lists them (`Observed::snapshots`).
        observed.snapshots = Some(ctx.observer.snapshots(&namespace).await);
        plan = plan_next_step(&observed, now);
    }
    let figures = crate::metrics::cluster_figures(&observed, &plan, now);
    ctx.metrics.observed_cluster(&figures, &observed);

    if deleting && observed.members.is_empty() && !plan.step.mutates() && has_finalizer(cluster) {
        // Every member is gone (and under `whenDeleted: Retain` every PVC released): garbage
        // collection takes the rest once the cluster goes.
        finalizer::remove(&ctx.act, cluster).await?;
        ctx.metrics.forget_cluster(&namespace, &name);
        ctx.fill.forget(&namespace, &name);
        ctx.probe.forget(&namespace, &name);
        info!(namespace = %namespace, cluster = %name, "all members gone; cluster finalizer removed");
        return Ok(Action::await_change());
    }

    // Before the pass's writes: the step after the status write may end the pass (an error, a
    // crash point) before the Events below, and the next pass no longer sees the phase change.
    // A status write that fails is planned again, and then recorded again.
    if let Some(event) = plan.recovery_event(&observed, now) {
        events::record(&ctx.act, event).await;
    }
    // So are the Events that report a condition the status write changes (a wait that needs
    // attention, certificates, isolation): once the status is written the next pass sees no
    // change, and a process that ends between the two (a crash point of another cluster's
    // pass) would lose the Event for good. An Event of an action follows the action.
    let reports_only = matches!(plan.step, Step::Wait { .. });
    if reports_only && let Some(event) = plan.event(&observed, now) {
        events::record(&ctx.act, event).await;
    }
    if let Some(event) = plan.certificates_event(&observed, now) {
        events::record(&ctx.act, event).await;
    }
    if let Some(event) = plan.isolation_event(&observed, now) {
        events::record(&ctx.act, event).await;
    }
    if let Some((source, outcome)) = crate::metrics::recovery_outcome(&observed, &plan) {
        ctx.metrics
            .recovery_step(&namespace, &name, source, outcome);
    }
    let outcome = act(&ctx.act, &plan, &observed).await?;
    let requeue_after = ctx
        .fill
        .look_sooner(
            &namespace,
            &name,
            plan.fullest_backend.map(|b| b.share()),
            now,
        )
        .map_or(plan.requeue_after, |sooner| sooner.min(plan.requeue_after));
    let probe_target =
        plan.etcd_endpoints
            .first()
            .zip(plan.fullest_backend)
            .map(|(endpoint, fullest)| ProbeTarget {
                endpoint: ctx.observer.etcd_urls.map(endpoint),
                access: observed.security.access.clone(),
                fullest,
                near: plan.near_quota,
            });
    ctx.probe.update(&namespace, &name, probe_target);
    log_plan(&namespace, &name, &plan.step, requeue_after);
    if plan.step.mutates()
        || matches!(
            plan.step,
            Step::SetPhase { .. } | Step::RebuildMember { .. } | Step::AdoptMember { .. }
        )
    {
        ctx.metrics
            .step_performed(&format!("{:?}", plan.step.kind()));
    }
    if let Some(repair) = crate::metrics::repair_of(&plan.step) {
        ctx.metrics.repair_started(&namespace, &name, repair);
    }
    if !reports_only && let Some(event) = plan.event(&observed, now) {
        events::record(&ctx.act, event).await;
    }
    wait_for_caches(stores, &outcome.written, CACHE_LAG_LIMIT).await;
    Ok(Action::requeue(requeue_after))
}

fn log_plan(namespace: &str, cluster: &str, step: &Step, requeue: Duration) {
    let requeue_ms = requeue.as_millis() as u64;
    match step {
        Step::Idle => debug!(namespace, cluster, requeue_ms, "converged"),
        Step::Wait { reason, message } if reason_is_routine(*reason) => {
            debug!(namespace, cluster, reason = reason.as_str(), detail = %message, requeue_ms, "waiting")
        }
        Step::Wait { reason, message } => {
            info!(namespace, cluster, reason = reason.as_str(), detail = %message, requeue_ms, "waiting")
        }
        step => info!(
            namespace,
            cluster,
            step = ?step.kind(),
            reason = step.reason(),
            detail = %step.message(),
            "step performed"
        ),
    }
}

fn reason_is_routine(reason: WaitReason) -> bool {
    !reason.needs_attention()
}

fn key(cluster: &EtcdCluster) -> (String, String) {
    (
        cluster.metadata.namespace.clone().unwrap_or_default(),
        cluster.metadata.name.clone().unwrap_or_default(),
    )
}
