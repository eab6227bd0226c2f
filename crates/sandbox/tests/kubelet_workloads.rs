//! Workloads on the nodes: a Job completes, a Deployment runs an in-cluster kube-rs program
//! with its service-account token, an eviction a PodDisruptionBudget refuses answers 429
//! (needs root).

mod kubelet_support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, EvictParams, ListParams};
use kubelet_support::{LIST_PODS_IMAGE, pod_manifest, shell_container, web_container};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_to_completion() {
    let cluster = kubelet_support::start().await;
    cluster
        .create::<Job>("default", json!({
            "metadata": {"name": "count"},
            "spec": {"completions": 2, "parallelism": 2, "backoffLimit": 2, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [shell_container("main", "echo counted $HOSTNAME")],
            }}},
        }))
        .await;
    let jobs: Api<Job> = Api::namespaced(cluster.client(), "default");
    cluster
        .eventually("the Job complete", LIMIT, || async {
            jobs.get("count")
                .await
                .ok()
                .and_then(|j| j.status)
                .and_then(|s| s.succeeded)
                == Some(2)
        })
        .await;
    let job = jobs.get("count").await.unwrap();
    let complete = job.status.unwrap().conditions.unwrap_or_default();
    assert!(
        complete
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True"),
        "{complete:?}"
    );
    let pods = cluster
        .pods("default")
        .list(&ListParams::default().labels("job-name=count"))
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 2);
    for pod in pods.items {
        assert_eq!(kubelet_support::phase(&pod), "Succeeded");
        let name = pod.metadata.name.unwrap();
        assert_eq!(
            cluster.logs("default", &name, "main").await,
            format!("counted {name}\n")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_runs_an_in_cluster_client_that_lists_pods() {
    let cluster = kubelet_support::start().await;
    cluster
        .create::<Role>("default", json!({
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        }))
        .await;
    cluster
        .create::<RoleBinding>("default", json!({
            "metadata": {"name": "pod-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}],
        }))
        .await;
    cluster
        .create::<Deployment>("default", json!({
            "metadata": {"name": "lister"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "lister"}}, "template": {
                "metadata": {"labels": {"app": "lister"}},
                "spec": {"containers": [{"name": "lister", "image": LIST_PODS_IMAGE}]},
            }},
        }))
        .await;
    let pods = cluster.pods("default");
    cluster
        .eventually("the Deployment's Pod listing Pods", LIMIT, || {
            let pods = pods.clone();
            let cluster = &cluster;
            async move {
                let Ok(list) = pods.list(&ListParams::default().labels("app=lister")).await else {
                    return false;
                };
                for pod in list.items {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    if cluster
                        .logs("default", &name, "lister")
                        .await
                        .contains(&format!("pods in default: {name}"))
                    {
                        return true;
                    }
                }
                false
            }
        })
        .await;
    let list = pods
        .list(&ListParams::default().labels("app=lister"))
        .await
        .unwrap();
    let name = list.items[0].metadata.name.clone().unwrap();
    assert!(
        !cluster
            .logs("default", &name, "lister")
            .await
            .contains("failed")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_refused_by_a_disruption_budget_answers_429() {
    let cluster = kubelet_support::start().await;
    cluster
        .create::<PodDisruptionBudget>(
            "default",
            json!({
                "metadata": {"name": "web"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            }),
        )
        .await;
    cluster
        .create::<Pod>(
            "default",
            pod_manifest(
                "web-0",
                json!({"app": "web"}),
                None,
                json!([web_container(8080)]),
            ),
        )
        .await;
    cluster.wait_ready("default", "web-0", LIMIT).await;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(cluster.client(), "default");
    cluster
        .eventually("the budget counting the ready Pod", LIMIT, || async {
            budgets
                .get("web")
                .await
                .ok()
                .and_then(|b| b.status)
                .is_some_and(|s| s.current_healthy == 1)
        })
        .await;
    let pods: Api<Pod> = Api::namespaced(cluster.client_without_retries().await, "default");
    match pods.evict("web-0", &EvictParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 429, "{status:?}"),
        other => panic!("the eviction was not refused: {other:?}"),
    }
    assert!(kubelet_support::is_ready(
        &cluster.pods("default").get("web-0").await.unwrap()
    ));
}
