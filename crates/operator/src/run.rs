//! `etcd-operator run`: the process. Connects to the API server, serves the probes and
//! metrics, elects a leader, reconciles while leading, and shuts down gracefully on SIGTERM
//! or SIGINT (the passes in flight finish, the Lease is released).

use std::sync::Arc;

use anyhow::Context as _;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::config::{RunArgs, in_pod_namespace};
use crate::leader::{HoldEnd, LeaderElector, LeaseConfig, default_identity};
use crate::metrics::Metrics;
use crate::observe::EtcdUrlMap;
use crate::reconcile::{ControllerOptions, run_controller};
use crate::server::Probes;

/// Runs the operator until a signal arrives (Ok) or leadership is lost (Err, so the Pod
/// restarts and stands by again).
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    crate::logging::init(args.log_format, &args.log_level)?;
    crate::failpoints::setup_from_env();
    let scope = args.scope()?;
    let client = kube_client(&args).await?;
    info!(version = env!("CARGO_PKG_VERSION"), scope = ?scope, "etcd-operator starting");

    let metrics = Arc::new(Metrics::new());
    let probes = Arc::new(Probes::new());
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    // Bound before leader election, so a busy port fails at once rather than when leading.
    let listener = tokio::net::TcpListener::bind(args.metrics_addr)
        .await
        .with_context(|| format!("binding --metrics-addr {}", args.metrics_addr))?;
    let server = tokio::spawn({
        let (metrics, probes, shutdown) = (metrics.clone(), probes.clone(), shutdown.clone());
        async move {
            axum::serve(listener, crate::server::router(metrics, probes))
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await
        }
    });

    let options = ControllerOptions {
        scope,
        settings: args.settings(),
        etcd_urls: EtcdUrlMap::identity(),
        concurrency: args.concurrency,
        etcd_connections_kept: args.etcd_connections_kept,
    };
    let outcome = if args.leader_elect {
        lead_then_reconcile(&args, client, options, metrics, probes.clone(), &shutdown).await
    } else {
        // Without an election this replica is the one that reconciles.
        metrics.set_leader(true);
        reconcile_until(
            client,
            options,
            metrics.clone(),
            probes.clone(),
            shutdown.clone(),
        )
        .await;
        metrics.set_leader(false);
        Ok(())
    };
    shutdown.cancel();
    server
        .await
        .context("the HTTP server task failed")?
        .context("serving /metrics")?;
    info!("etcd-operator stopped");
    outcome
}

async fn lead_then_reconcile(
    args: &RunArgs,
    client: Client,
    options: ControllerOptions,
    metrics: Arc<Metrics>,
    probes: Arc<Probes>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let namespace = args.lease_namespace(in_pod_namespace())?;
    let (lease_duration, renew_deadline, retry_period) = args.lease_timings()?;
    let identity = args
        .leader_identity
        .clone()
        .unwrap_or_else(default_identity);
    let config = LeaseConfig {
        lease_duration,
        renew_deadline,
        retry_period,
        ..LeaseConfig::new(&namespace, &args.lease_name, &identity)
    };
    let mut elector = LeaderElector::new(client.clone(), config);
    // A standby is ready: it serves its purpose by waiting.
    probes.set_ready(true);
    if !elector.acquire(shutdown).await {
        return Ok(());
    }
    probes.set_ready(false);
    metrics.set_leader(true);

    let controller_stop = CancellationToken::new();
    let holding = tokio::spawn({
        let (shutdown, controller_stop) = (shutdown.clone(), controller_stop.clone());
        async move {
            let end = elector.hold(&shutdown).await;
            controller_stop.cancel();
            (elector, end)
        }
    });
    reconcile_until(
        client,
        options,
        metrics.clone(),
        probes.clone(),
        controller_stop.clone(),
    )
    .await;
    if !controller_stop.is_cancelled() {
        error!("the controller stopped by itself; shutting down");
        probes.set_live(false);
        shutdown.cancel();
    }
    let (mut elector, end) = holding.await.context("the lease renewal task failed")?;
    metrics.set_leader(false);
    match end {
        HoldEnd::Shutdown => {
            if let Err(e) = elector.release().await {
                error!(error = %e, "could not release the lease; a standby takes over when it expires");
            }
            Ok(())
        }
        HoldEnd::Lost => anyhow::bail!(
            "lost the leader lease {}/{}: exiting so that only one replica acts",
            elector.config().namespace,
            elector.config().name
        ),
    }
}

async fn reconcile_until(
    client: Client,
    options: ControllerOptions,
    metrics: Arc<Metrics>,
    probes: Arc<Probes>,
    stop: CancellationToken,
) {
    let ready = probes.clone();
    run_controller(
        client,
        options,
        metrics,
        async move { stop.cancelled().await },
        move || ready.set_ready(true),
    )
    .await;
}

/// The client: from `--kubeconfig`, else the in-cluster service account when running in a
/// Pod, else $KUBECONFIG or ~/.kube/config.
async fn kube_client(args: &RunArgs) -> anyhow::Result<Client> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading --kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("using --kubeconfig {}", path.display()))?
        }
        None if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => kube::Config::incluster()
            .context("reading the in-cluster configuration (service account token and CA)")?,
        None => kube::Config::infer().await.context(
            "no --kubeconfig, not in a Pod, and no usable $KUBECONFIG or ~/.kube/config",
        )?,
    };
    etcd_operator_api::kube_client::client_for(config).context("building the Kubernetes client")
}

async fn cancel_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut terminate) = signal(SignalKind::terminate()) else {
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => info!("SIGINT: shutting down"),
        _ = terminate.recv() => info!("SIGTERM: shutting down"),
        _ = shutdown.cancelled() => {}
    }
    shutdown.cancel();
}
