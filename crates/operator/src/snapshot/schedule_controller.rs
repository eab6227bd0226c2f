//! The I/O of the EtcdSnapshotSchedule controller: read the schedule and its stamped
//! EtcdSnapshots fresh, perform what [`super::schedule::decide`] decides (stamp one snapshot,
//! delete those retention no longer keeps: the EtcdSnapshot controller deletes their stored
//! objects first, by their `Delete` policy), write the status, record the Event.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use etcd_operator_api::snapshot::SnapshotDeletionPolicy;
use etcd_operator_api::{EtcdSnapshot, EtcdSnapshotSchedule, EtcdSnapshotSpec};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tracing::{debug, warn};

use super::schedule::{self, SCHEDULE_LABEL, ScheduleFacts, SnapshotFacts};
use crate::defrag::controller::{Stamping, perform_stamping, record_event};
use crate::defrag::policy::run_name;
use crate::metrics::Metrics;
use crate::observe::Scope;

/// Runs the EtcdSnapshotSchedule controller until `shutdown` completes. A change to a stamped
/// EtcdSnapshot (it completed, it went) wakes its schedule.
pub async fn run_schedule_controller(
    client: Client,
    metrics: Arc<Metrics>,
    scope: Scope,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    Controller::new(
        scope.api::<EtcdSnapshotSchedule>(&client),
        watcher::Config::default(),
    )
    .watches(
        scope.api::<EtcdSnapshot>(&client),
        watcher::Config::default().labels(SCHEDULE_LABEL),
        |snapshot: EtcdSnapshot| {
            let schedule = snapshot.labels().get(SCHEDULE_LABEL)?.clone();
            Some(ObjectRef::new(&schedule).within(&snapshot.namespace()?))
        },
    )
    .graceful_shutdown_on(shutdown)
    .run(reconcile_schedule, retry, Arc::new((client, metrics)))
    .for_each(|result| async move {
        if let Err(e) = result {
            debug!(error = %e, "snapshot schedule controller event");
        }
    })
    .await;
}

fn retry(
    schedule: Arc<EtcdSnapshotSchedule>,
    error: &kube::Error,
    _: Arc<(Client, Arc<Metrics>)>,
) -> Action {
    warn!(
        namespace = schedule.namespace().unwrap_or_default(),
        schedule = schedule.name_any(),
        error = %error,
        "snapshot schedule pass failed; retrying in 5 s"
    );
    Action::requeue(Duration::from_secs(5))
}

/// One pass over an EtcdSnapshotSchedule.
async fn reconcile_schedule(
    object: Arc<EtcdSnapshotSchedule>,
    ctx: Arc<(Client, Arc<Metrics>)>,
) -> Result<Action, kube::Error> {
    let (client, metrics) = (&ctx.0, &ctx.1);
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    let cluster = &object.spec.cluster_ref.name;
    let api: Api<EtcdSnapshotSchedule> = Api::namespaced(client.clone(), &namespace);
    let Some(found) = api.get_opt(&name).await? else {
        metrics.snapshot_schedule(&namespace, &name, cluster, None);
        return Ok(Action::await_change());
    };
    if found.metadata.deletion_timestamp.is_some() {
        metrics.snapshot_schedule(&namespace, &name, cluster, None);
        return Ok(Action::await_change());
    }
    let snapshots: Api<EtcdSnapshot> = Api::namespaced(client.clone(), &namespace);
    let stamped = snapshots
        .list(&ListParams::default().labels(&format!("{SCHEDULE_LABEL}={name}")))
        .await?
        .items;
    let facts: Vec<SnapshotFacts> = stamped
        .iter()
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .map(snapshot_facts)
        .collect();
    let now = Timestamp::now();
    let created = found
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(now);
    let decision = schedule::decide(
        ScheduleFacts {
            spec: &found.spec,
            status: found.status.as_ref(),
            name: &name,
            created,
            generation: found.metadata.generation,
        },
        &facts,
        now,
    );
    metrics.snapshot_schedule(
        &namespace,
        &name,
        &found.spec.cluster_ref.name,
        decision.freshness.map(|f| (f.last_success, f.interval)),
    );
    let updated = (found.status.as_ref() != Some(&decision.status)).then(|| {
        let mut updated = found.clone();
        updated.status = Some(decision.status.clone());
        updated
    });
    let stamp = decision.stamp.map(|tick| stamped_snapshot(&found, tick));
    if let Some(soon) = perform_stamping(
        client,
        &api,
        Stamping {
            policy: &found,
            runs: &snapshots,
            delete: &decision.delete,
            stamp,
            updated,
            event: decision.event.as_ref(),
            now,
        },
    )
    .await?
    {
        return Ok(soon);
    }
    if !decision.delete.is_empty() {
        record_event(
            client,
            &found,
            false,
            "SnapshotsPruned",
            &format!(
                "deleted {} by retention (their stored objects go with them): {}",
                decision.delete.len(),
                decision.delete.join(", ")
            ),
            now,
        )
        .await;
    }
    Ok(decision
        .requeue
        .map(Action::requeue)
        .unwrap_or_else(Action::await_change))
}

fn snapshot_facts(snapshot: &EtcdSnapshot) -> SnapshotFacts {
    let status = snapshot.status.as_ref();
    let time = |text: Option<&String>| text.and_then(|t| t.parse::<Timestamp>().ok());
    SnapshotFacts {
        name: snapshot.name_any(),
        phase: status.and_then(|s| s.phase),
        verified: status.and_then(|s| s.verified),
        created: snapshot.metadata.creation_timestamp.as_ref().map(|t| t.0),
        completed: time(status.and_then(|s| s.completion_time.as_ref())),
    }
}

/// The EtcdSnapshot a schedule stamps for `tick`: labelled with the schedule and the cluster,
/// `deletionPolicy: Delete` (retention decides what is kept). It is not owned by the schedule:
/// deleting a schedule leaves its backups in place.
pub fn stamped_snapshot(schedule: &EtcdSnapshotSchedule, tick: Timestamp) -> EtcdSnapshot {
    let name = schedule.name_any();
    let labels = BTreeMap::from([
        (SCHEDULE_LABEL.to_string(), name.clone()),
        (
            etcd_operator_api::labels::CLUSTER.to_string(),
            schedule.spec.cluster_ref.name.clone(),
        ),
    ]);
    EtcdSnapshot {
        metadata: ObjectMeta {
            name: Some(run_name(&name, tick)),
            namespace: schedule.metadata.namespace.clone(),
            labels: Some(labels),
            ..Default::default()
        },
        spec: EtcdSnapshotSpec {
            cluster_ref: schedule.spec.cluster_ref.clone(),
            destination: schedule.spec.template.destination.clone(),
            deletion_policy: Some(SnapshotDeletionPolicy::Delete),
            compression: schedule.spec.template.compression,
            encryption: schedule.spec.template.encryption.clone(),
            verify: schedule.spec.template.verify,
        },
        status: None,
    }
}
