//! Deployments through ReplicaSets against a real sandbox API server, with the scheduler binding
//! their Pods and a fake node agent starting them.

mod controllers_support;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube_sandbox::controllers::ControlPlaneOptions;
use serde_json::json;

use controllers_support::{ControlPlane, FakeKubelet, eventually, fast, list, start};

async fn deployment_sandbox() -> ControlPlane {
    start(
        ControlPlaneOptions::default()
            .time_scale(fast())
            .without_node_lifecycle(),
    )
    .await
}

fn web(replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": image}]}},
        },
    }))
    .unwrap()
}

/// Live (not deleting) Pods of the Deployment.
async fn live_pods(pods: &Api<Pod>) -> Vec<Pod> {
    list(pods, "app=web")
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Waits until the Deployment reports `replicas` everywhere and exactly that many live Pods exist.
async fn rolled_out(deployments: &Api<Deployment>, pods: &Api<Pod>, replicas: i32) -> Vec<Pod> {
    eventually(&format!("{replicas} available replicas"), 30, || async {
        let status = deployments.get("web").await.unwrap().status?;
        let settled = [
            status.replicas,
            status.ready_replicas,
            status.available_replicas,
            status.updated_replicas,
        ] == [Some(replicas); 4];
        let live = live_pods(pods).await;
        (settled && live.len() == replicas as usize).then_some(live)
    })
    .await
}

fn available_condition(deployment: &Deployment) -> Option<(String, String)> {
    let condition = deployment
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Available")?;
    Some((
        condition.status.clone(),
        condition.reason.clone().unwrap_or_default(),
    ))
}

#[tokio::test]
async fn controllers_deployment_scales_one_three_one_and_replaces_deleted_pods() {
    let cluster = deployment_sandbox().await;
    let deployments: Api<Deployment> = Api::default_namespaced(cluster.client());
    let replica_sets: Api<ReplicaSet> = Api::default_namespaced(cluster.client());
    let pods = cluster.pods();
    let _kubelet = FakeKubelet::start(pods.clone());
    deployments
        .create(&PostParams::default(), &web(1, "nginx:1"))
        .await
        .unwrap();
    let first = rolled_out(&deployments, &pods, 1).await;
    let deployment = deployments.get("web").await.unwrap();
    assert_eq!(
        available_condition(&deployment),
        Some(("True".into(), "MinimumReplicasAvailable".into()))
    );
    assert_eq!(
        deployment
            .annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("1")
    );
    let owned = replica_sets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(owned.len(), 1);
    let replica_set = &owned[0];
    assert_eq!(
        replica_set.owner_references()[0].uid,
        deployment.uid().unwrap()
    );
    assert_eq!(
        first[0].owner_references()[0].uid,
        replica_set.uid().unwrap(),
        "Pods belong to the ReplicaSet"
    );
    assert_eq!(
        first[0].labels().get("pod-template-hash"),
        replica_set.labels().get("pod-template-hash")
    );

    let scale = |replicas: i32| json!({"spec": {"replicas": replicas}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(scale(3)))
        .await
        .unwrap();
    let three = rolled_out(&deployments, &pods, 3).await;
    assert!(
        three.iter().any(|p| p.name_any() == first[0].name_any()),
        "scaling up keeps the first Pod"
    );

    // A deleted Pod (finished by its node agent) is replaced.
    let victim = three[1].name_any();
    pods.delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    let replaced = eventually("a replacement Pod", 30, || async {
        let live = live_pods(&pods).await;
        (live.len() == 3 && live.iter().all(|p| p.name_any() != victim)).then_some(live)
    })
    .await;
    assert_eq!(replaced.len(), 3);
    rolled_out(&deployments, &pods, 3).await;

    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(scale(1)))
        .await
        .unwrap();
    rolled_out(&deployments, &pods, 1).await;
    eventually("the surplus Pods gone", 30, || async {
        (list(&pods, "app=web").await.len() == 1).then_some(())
    })
    .await;
    assert_eq!(
        replica_sets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1,
        "scaling never makes a new ReplicaSet"
    );
}

#[tokio::test]
async fn controllers_deployment_rolls_a_new_template_and_replaces_failed_pods() {
    let cluster = deployment_sandbox().await;
    let deployments: Api<Deployment> = Api::default_namespaced(cluster.client());
    let replica_sets: Api<ReplicaSet> = Api::default_namespaced(cluster.client());
    let pods = cluster.pods();
    let _kubelet = FakeKubelet::start(pods.clone());
    deployments
        .create(&PostParams::default(), &web(2, "nginx:1"))
        .await
        .unwrap();
    let old = rolled_out(&deployments, &pods, 2).await;

    // A Pod that fails is no longer counted; the ReplicaSet starts another.
    controllers_support::set_phase(&pods, &old[0].name_any(), "Failed", false).await;
    eventually("a replacement for the failed Pod", 30, || async {
        let running = live_pods(&pods)
            .await
            .into_iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        (running == 2).then_some(())
    })
    .await;

    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let rolled = eventually("every Pod on the new template", 30, || async {
        let status = deployments.get("web").await.unwrap().status?;
        let live: Vec<Pod> = live_pods(&pods)
            .await
            .into_iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .collect();
        let new = live
            .iter()
            .all(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("nginx:2"));
        (new && live.len() == 2
            && status.updated_replicas == Some(2)
            && status.available_replicas == Some(2)
            && status.replicas == Some(2))
        .then_some(live)
    })
    .await;
    assert_eq!(rolled.len(), 2);
    let deployment = deployments.get("web").await.unwrap();
    assert_eq!(
        deployment
            .annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("2")
    );
    let progressing = deployment
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap();
    assert_eq!(
        progressing.reason.as_deref(),
        Some("NewReplicaSetAvailable")
    );
    let mut sizes: Vec<i32> = replica_sets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|rs| rs.spec.as_ref().unwrap().replicas.unwrap())
        .collect();
    sizes.sort();
    assert_eq!(sizes, [0, 2], "the old ReplicaSet is kept, scaled to zero");
}
