//! The Deployment rollout plan on plain values.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use serde_json::{Value, json};

use super::{
    DeploymentPlan, POD_TEMPLATE_HASH, REVISION, RolloutStep, plan_deployment, template_hash,
};
use crate::controllers::TimeScale;

fn now() -> Timestamp {
    "2025-01-01T12:00:00Z".parse().unwrap()
}

fn deployment(replicas: i32, image: &str, strategy: Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "deploy-uid", "generation": 2},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": strategy,
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": image}]}},
        },
    }))
    .unwrap()
}

fn rolling() -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
}

/// The ReplicaSet the Deployment would make for `image`, with `replicas` wanted and `available`
/// of them available, at `revision`, created `age` seconds ago.
fn replica_set(image: &str, replicas: i32, available: i32, revision: i64, age: i64) -> ReplicaSet {
    let plan = plan_deployment(
        &deployment(replicas, image, rolling()),
        &[],
        now(),
        TimeScale::REAL,
    );
    let RolloutStep::Create(replica_set) = &plan.steps[0] else {
        panic!("creates a ReplicaSet")
    };
    let mut replica_set = replica_set.as_ref().clone();
    replica_set.metadata.creation_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            now() - jiff::SignedDuration::from_secs(age),
        ));
    replica_set
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(REVISION.into(), revision.to_string());
    replica_set.spec.as_mut().unwrap().replicas = Some(replicas);
    replica_set.status = Some(serde_json::from_value(json!({"replicas": replicas, "readyReplicas": available, "availableReplicas": available})).unwrap());
    replica_set
}

fn scales(plan: &DeploymentPlan) -> Vec<(String, i32)> {
    plan.steps
        .iter()
        .filter_map(|s| match s {
            RolloutStep::Scale { name, replicas } => Some((name.clone(), *replicas)),
            _ => None,
        })
        .collect()
}

fn name_for(image: &str) -> String {
    format!(
        "web-{}",
        template_hash(&deployment(1, image, rolling()).spec.unwrap().template)
    )
}

#[test]
fn a_new_deployment_gets_a_replica_set_for_its_template() {
    let plan = plan_deployment(
        &deployment(3, "nginx:1", rolling()),
        &[],
        now(),
        TimeScale::REAL,
    );
    let [RolloutStep::Create(replica_set)] = plan.steps.as_slice() else {
        panic!("one creation: {:?}", plan.steps)
    };
    let hash = template_hash(&deployment(3, "nginx:1", rolling()).spec.unwrap().template);
    assert_eq!(
        replica_set.metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    assert!(
        hash.chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
    );
    let spec = replica_set.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(3));
    assert_eq!(
        spec.selector.match_labels.as_ref().unwrap()[POD_TEMPLATE_HASH],
        hash
    );
    assert_eq!(
        spec.template
            .as_ref()
            .unwrap()
            .metadata
            .as_ref()
            .unwrap()
            .labels
            .as_ref()
            .unwrap()[POD_TEMPLATE_HASH],
        hash
    );
    let owner = &replica_set.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Deployment", "deploy-uid", Some(true))
    );
    assert_eq!(plan.revision, "1");
    let progressing = plan
        .status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap();
    assert_eq!(progressing.reason.as_deref(), Some("NewReplicaSetCreated"));
    assert_ne!(
        hash,
        template_hash(&deployment(3, "nginx:2", rolling()).spec.unwrap().template)
    );
}

#[test]
fn scaling_resizes_the_current_replica_set() {
    let current = replica_set("nginx:1", 1, 1, 1, 60);
    let up = plan_deployment(
        &deployment(3, "nginx:1", rolling()),
        std::slice::from_ref(&current),
        now(),
        TimeScale::REAL,
    );
    assert_eq!(scales(&up), [(name_for("nginx:1"), 3)]);
    let three = replica_set("nginx:1", 3, 3, 1, 60);
    let down = plan_deployment(
        &deployment(1, "nginx:1", rolling()),
        &[three],
        now(),
        TimeScale::REAL,
    );
    assert_eq!(scales(&down), [(name_for("nginx:1"), 1)]);
}

#[test]
fn a_rolling_update_surges_then_scales_old_down_as_new_becomes_available() {
    let old = replica_set("nginx:1", 3, 3, 1, 600);
    let start = plan_deployment(
        &deployment(3, "nginx:2", rolling()),
        std::slice::from_ref(&old),
        now(),
        TimeScale::REAL,
    );
    let RolloutStep::Create(new) = &start.steps[0] else {
        panic!("creates the new ReplicaSet")
    };
    assert_eq!(
        new.spec.as_ref().unwrap().replicas,
        Some(1),
        "maxSurge 25% of 3 rounds up to 1"
    );
    assert_eq!(start.revision, "2");
    // The new Pod is not available yet: maxUnavailable 25% of 3 rounds down to 0, so wait.
    let new_unavailable = replica_set("nginx:2", 1, 0, 2, 10);
    let waiting = plan_deployment(
        &deployment(3, "nginx:2", rolling()),
        &[old.clone(), new_unavailable],
        now(),
        TimeScale::REAL,
    );
    assert!(waiting.steps.is_empty(), "{:?}", waiting.steps);
    let available = waiting
        .status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "Available")
        .unwrap();
    assert_eq!(available.status, "True");
    // Available now: one old replica goes.
    let new_available = replica_set("nginx:2", 1, 1, 2, 10);
    let step = plan_deployment(
        &deployment(3, "nginx:2", rolling()),
        &[old, new_available],
        now(),
        TimeScale::REAL,
    );
    assert_eq!(scales(&step), [(name_for("nginx:1"), 2)]);
    assert_eq!(
        (step.status.replicas, step.status.updated_replicas),
        (Some(4), Some(1))
    );
}

#[test]
fn recreate_empties_old_replica_sets_first() {
    let recreate = json!({"type": "Recreate"});
    let old = replica_set("nginx:1", 2, 2, 1, 600);
    let first = plan_deployment(
        &deployment(2, "nginx:2", recreate.clone()),
        std::slice::from_ref(&old),
        now(),
        TimeScale::REAL,
    );
    assert!(
        matches!(&first.steps[0], RolloutStep::Create(rs) if rs.spec.as_ref().unwrap().replicas == Some(0))
    );
    assert_eq!(scales(&first), [(name_for("nginx:1"), 0)]);
    let mut drained = replica_set("nginx:1", 0, 0, 1, 600);
    drained.status.as_mut().unwrap().replicas = 0;
    let empty_new = replica_set("nginx:2", 0, 0, 2, 5);
    let second = plan_deployment(
        &deployment(2, "nginx:2", recreate),
        &[drained, empty_new],
        now(),
        TimeScale::REAL,
    );
    assert_eq!(scales(&second), [(name_for("nginx:2"), 2)]);
}

#[test]
fn a_complete_rollout_reports_available_and_trims_history() {
    let mut history: Vec<ReplicaSet> = (1..=3)
        .map(|r| replica_set(&format!("nginx:{r}"), 0, 0, r, 1000 - r))
        .collect();
    for rs in &mut history {
        rs.status.as_mut().unwrap().replicas = 0;
    }
    history.push(replica_set("nginx:4", 2, 2, 4, 10));
    let mut spec = deployment(2, "nginx:4", rolling());
    spec.spec.as_mut().unwrap().revision_history_limit = Some(1);
    let plan = plan_deployment(&spec, &history, now(), TimeScale::REAL);
    let deleted: Vec<&RolloutStep> = plan
        .steps
        .iter()
        .filter(|s| matches!(s, RolloutStep::Delete(_)))
        .collect();
    assert_eq!(
        deleted,
        [
            &RolloutStep::Delete(name_for("nginx:1")),
            &RolloutStep::Delete(name_for("nginx:2"))
        ]
    );
    let status = &plan.status;
    assert_eq!(
        (
            status.replicas,
            status.updated_replicas,
            status.available_replicas,
            status.unavailable_replicas
        ),
        (Some(2), Some(2), Some(2), Some(0))
    );
    let progressing = status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap();
    assert_eq!(
        progressing.reason.as_deref(),
        Some("NewReplicaSetAvailable")
    );
    assert_eq!(status.observed_generation, Some(2));
}

#[test]
fn rolling_back_revives_the_old_replica_set_with_the_next_revision() {
    let first = replica_set("nginx:1", 0, 0, 1, 600);
    let second = replica_set("nginx:2", 2, 2, 2, 60);
    let plan = plan_deployment(
        &deployment(2, "nginx:1", rolling()),
        &[first, second],
        now(),
        TimeScale::REAL,
    );
    assert!(plan.steps.contains(&RolloutStep::Revise {
        name: name_for("nginx:1"),
        revision: 3
    }));
    assert_eq!(plan.revision, "3");
    assert_eq!(
        scales(&plan),
        [(name_for("nginx:1"), 1)],
        "surges the revived ReplicaSet"
    );
}
