//! Wiring the reconciler into a kube-runtime `Controller`: one watch per kind, each feeding
//! both a cache `observe` reads and the controller's triggers.

use std::future::Future;
use std::sync::Arc;

use etcd_operator_api::{EtcdCluster, EtcdMember};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::controller::{Config, Controller};
use kube::{Client, ResourceExt};
use tracing::debug;

use super::{Backoff, Context, error_policy, reconcile};
use crate::act::ActContext;
use crate::domain::settings::OperatorSettings;
use crate::metrics::Metrics;
use crate::observe::{
    CachedPod, CachedPvc, EtcdUrlMap, Fills, Observer, Scope, Stores, cluster_of, reflect,
    reflect_applied, reflect_indexed,
};

/// What the controller needs besides the client.
#[derive(Clone, Debug)]
pub struct ControllerOptions {
    pub scope: Scope,
    pub settings: OperatorSettings,
    pub etcd_urls: EtcdUrlMap,
    /// Clusters reconciled at the same time (each cluster is only ever reconciled by one pass
    /// at a time).
    pub concurrency: u16,
    /// Member endpoints whose etcd connections are kept between passes (see
    /// [`crate::etcd::EtcdConnections::with_limit`]).
    pub etcd_connections_kept: usize,
}

/// Runs the controller until `shutdown` completes (then the passes in flight finish).
/// `on_ready` is called once the caches have completed their first list.
pub async fn run_controller(
    client: Client,
    options: ControllerOptions,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    on_ready: impl FnOnce() + Send + 'static,
) {
    let scope = &options.scope;
    // Both controllers stop on the same signal.
    let shutdown: std::pin::Pin<Box<dyn Future<Output = ()> + Send + Sync>> = Box::pin(shutdown);
    let shutdown = shutdown.shared();
    let (members, member_index, members_filled, members_changed) =
        reflect_indexed::<EtcdMember>(scope.api(&client));
    let (pods, pods_filled, pods_changed) = reflect::<CachedPod>(scope.api(&client));
    let (pvcs, pvc_index, pvcs_filled, pvcs_changed) =
        reflect_indexed::<CachedPvc>(scope.api(&client));
    let (services, services_filled, services_changed) = reflect::<Service>(scope.api(&client));
    let (pdbs, pdbs_filled, pdbs_changed) = reflect::<PodDisruptionBudget>(scope.api(&client));

    let (clusters_store, clusters_filled, clusters_applied) =
        reflect_applied(scope.api::<EtcdCluster>(&client));
    // No limit in kube-runtime: its limit serves waiting clusters in no fair order, so the
    // passes take `Context::slots` instead (`reconcile/slots.rs`).
    let controller = Controller::for_stream(clusters_applied, clusters_store)
        .with_config(Config::default().concurrency(0));
    let stores = Stores {
        clusters: controller.store(),
        members,
        member_index,
        pods,
        pvcs,
        pvc_index,
        services,
        pdbs,
        fills: Fills {
            clusters: clusters_filled,
            members: members_filled,
            pods: pods_filled,
            pvcs: pvcs_filled,
            services: services_filled,
            pdbs: pdbs_filled,
        },
    };
    // The alarm probe wakes a cluster's reconciler when etcd shows NOSPACE or a backend at the
    // near-quota mark between passes.
    let (wake, woken) = futures::channel::mpsc::unbounded();
    let connections = Arc::new(crate::etcd::EtcdConnections::with_limit(
        options.etcd_connections_kept,
    ));
    let probe = Arc::new(super::AlarmProbe::new(wake, connections.clone()));
    let prober = tokio::spawn(probe.clone().run());
    let ctx = Arc::new(Context {
        observer: Observer {
            client: client.clone(),
            stores: stores.clone(),
            settings: options.settings.clone(),
            etcd_urls: options.etcd_urls.clone(),
            root_passwords: Default::default(),
            connections,
        },
        act: ActContext {
            client: client.clone(),
            etcd_urls: options.etcd_urls.clone(),
            metrics: metrics.clone(),
        },
        metrics,
        backoff: Backoff::default(),
        slots: super::PassSlots::new(options.concurrency),
        fill: super::FillHistory::default(),
        probe: probe.clone(),
    });

    let readiness = {
        let fills = stores.fills.clone();
        tokio::spawn(async move {
            if fills.wait().await {
                on_ready();
            }
        })
    };

    // Series of clusters that are gone from the cache are dropped (see
    // `Metrics::forget_clusters_except`), and etcd connections that outlived their use are
    // closed even when no pass asks for one.
    let sweeper = {
        let (stores, metrics) = (stores.clone(), ctx.metrics.clone());
        let connections = ctx.observer.connections.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                connections.sweep();
                if !stores.fills.clusters.is_filled() {
                    continue;
                }
                let present: std::collections::HashSet<(String, String)> = stores
                    .clusters
                    .state()
                    .iter()
                    .map(|c| (c.namespace().unwrap_or_default(), c.name_any()))
                    .collect();
                metrics.forget_clusters_except(&present);
            }
        })
    };

    let ctx_observer = ctx.observer.clone();
    let defrag_shutdown = shutdown.clone();
    let snapshots = crate::snapshot::run_snapshot_controller(
        scope.clone(),
        Arc::new(
            crate::snapshot::SnapshotContext::new(ctx.observer.clone(), ctx.act.clone())
                .with_agent_image(&ctx.observer.settings.agent_image)
                .with_local_store_root(&ctx.observer.settings.local_store_root),
        ),
        shutdown.clone(),
    );
    // On shutdown the passes waiting for a slot do not start.
    let closing = ctx.slots.close_when(shutdown.clone());
    let clusters = controller
        .owns_stream(members_changed)
        .owns_stream(services_changed)
        .owns_stream(pdbs_changed)
        .watches_stream(pods_changed, |pod| cluster_of(&pod))
        .watches_stream(pvcs_changed, |pvc| cluster_of(&pvc))
        .reconcile_on(woken)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                debug!(error = %e, "controller event");
            }
        });
    // The EtcdDefrag and EtcdDefragPolicy controllers too, on the same caches and the same
    // view of etcd.
    let defrag_stop = tokio_util::sync::CancellationToken::new();
    let defrags = crate::defrag::run_defrag_controllers(
        client.clone(),
        scope.clone(),
        ctx_observer,
        defrag_stop.clone(),
    );
    let stop_defrags = async move {
        defrag_shutdown.await;
        defrag_stop.cancel();
    };
    futures::join!(clusters, snapshots, defrags, stop_defrags);
    readiness.abort();
    sweeper.abort();
    prober.abort();
    closing.abort();
}
