//! The Job controller against a real sandbox API server, with the scheduler binding its Pods and
//! the test playing the node agent (Pod phases through `pods/status`).

mod controllers_support;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube_sandbox::controllers::ControlPlaneOptions;
use serde_json::{Value, json};

use controllers_support::{
    ControlPlane, eventually, fast, finish_terminating, list, node_of, set_phase, start,
};

async fn job_sandbox() -> ControlPlane {
    start(
        ControlPlaneOptions::default()
            .time_scale(fast())
            .without_node_lifecycle(),
    )
    .await
}

fn job(name: &str, spec: Value) -> Job {
    let mut full = json!({"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}});
    for (key, value) in spec.as_object().cloned().unwrap_or_default() {
        full[key] = value;
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": full})).unwrap()
}

/// The Job's condition of `type_` with status True, as (reason, message).
fn condition(job: &Job, type_: &str) -> Option<(String, String)> {
    let condition = job
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")?;
    Some((
        condition.reason.clone().unwrap_or_default(),
        condition.message.clone().unwrap_or_default(),
    ))
}

/// The Job's active (neither finished nor deleted) Pods, once the scheduler has bound them.
async fn bound_active_pods(pods: &Api<Pod>, job: &str, count: usize) -> Vec<Pod> {
    eventually(&format!("{count} bound Pods of {job}"), 20, || async {
        let active: Vec<Pod> = list(pods, &format!("job-name={job}"))
            .await
            .into_iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && matches!(
                        p.status.as_ref().and_then(|s| s.phase.as_deref()),
                        Some("Pending" | "Running")
                    )
            })
            .collect();
        (active.len() == count && active.iter().all(|p| node_of(p).is_some())).then_some(active)
    })
    .await
}

#[tokio::test]
async fn controllers_job_completes_when_its_pods_succeed() {
    let cluster = job_sandbox().await;
    let jobs: Api<Job> = Api::default_namespaced(cluster.client());
    let pods = cluster.pods();
    jobs.create(
        &PostParams::default(),
        &job("pi", json!({"completions": 2, "parallelism": 2})),
    )
    .await
    .unwrap();
    let running = bound_active_pods(&pods, "pi", 2).await;
    let job_uid = jobs.get("pi").await.unwrap().uid().unwrap();
    for pod in &running {
        let owner = &pod.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Job", job_uid.as_str(), Some(true))
        );
        assert!(
            pod.finalizers()
                .contains(&"batch.kubernetes.io/job-tracking".to_string())
        );
        assert_eq!(pod.labels()["job-name"], "pi");
        set_phase(&pods, &pod.name_any(), "Running", true).await;
    }
    eventually("status.active and ready 2", 20, || async {
        let status = jobs.get("pi").await.unwrap().status?;
        (status.active == Some(2) && status.ready == Some(2) && status.start_time.is_some())
            .then_some(())
    })
    .await;
    for pod in &running {
        set_phase(&pods, &pod.name_any(), "Succeeded", false).await;
    }
    let done = eventually("the Job complete", 20, || async {
        let job = jobs.get("pi").await.unwrap();
        condition(&job, "Complete").map(|_| job)
    })
    .await;
    assert_eq!(
        condition(&done, "Complete").unwrap().0,
        "CompletionsReached"
    );
    assert!(condition(&done, "SuccessCriteriaMet").is_some());
    let status = done.status.unwrap();
    assert_eq!(
        (status.succeeded, status.failed, status.active),
        (Some(2), Some(0), Some(0))
    );
    assert!(status.completion_time.is_some());
    for pod in list(&pods, "job-name=pi").await {
        assert!(
            !pod.finalizers()
                .contains(&"batch.kubernetes.io/job-tracking".to_string()),
            "counted Pods lose the finalizer"
        );
    }
}

#[tokio::test]
async fn controllers_job_fails_past_its_backoff_limit() {
    let cluster = job_sandbox().await;
    let jobs: Api<Job> = Api::default_namespaced(cluster.client());
    let pods = cluster.pods();
    jobs.create(
        &PostParams::default(),
        &job("flaky", json!({"backoffLimit": 1})),
    )
    .await
    .unwrap();
    // Each attempt fails; the replacement comes after the (scaled) failure backoff.
    for attempt in 0..2 {
        let pod = bound_active_pods(&pods, "flaky", 1).await.remove(0);
        set_phase(&pods, &pod.name_any(), "Failed", false).await;
        eventually(&format!("failure {attempt} counted"), 20, || async {
            (jobs.get("flaky").await.unwrap().status?.failed? > attempt).then_some(())
        })
        .await;
    }
    let failed = eventually("the Job failed", 20, || async {
        let job = jobs.get("flaky").await.unwrap();
        condition(&job, "Failed").map(|_| job)
    })
    .await;
    let reason = (
        "BackoffLimitExceeded".to_string(),
        "Job has reached the specified backoff limit".to_string(),
    );
    assert_eq!(condition(&failed, "Failed"), Some(reason.clone()));
    assert_eq!(condition(&failed, "FailureTarget"), Some(reason));
    assert_eq!(failed.status.as_ref().unwrap().failed, Some(2));
    assert!(failed.status.as_ref().unwrap().completion_time.is_none());
    assert_eq!(
        list(&pods, "job-name=flaky").await.len(),
        2,
        "failed Pods stay for inspection; no third attempt"
    );
}

#[tokio::test]
async fn controllers_job_fails_past_its_active_deadline() {
    let cluster = job_sandbox().await;
    let jobs: Api<Job> = Api::default_namespaced(cluster.client());
    let pods = cluster.pods();
    // 500 cluster seconds at the test's time scale are five real seconds: time enough to see
    // the Pod run first even on a loaded machine.
    jobs.create(
        &PostParams::default(),
        &job("slow", json!({"activeDeadlineSeconds": 500})),
    )
    .await
    .unwrap();
    let pod = bound_active_pods(&pods, "slow", 1).await.remove(0);
    set_phase(&pods, &pod.name_any(), "Running", true).await;
    let job = jobs.get("slow").await.unwrap();
    assert!(
        condition(&job, "FailureTarget").is_none(),
        "not before the deadline"
    );
    // Past the deadline the running Pod is deleted; the Job fails once it is gone.
    eventually("the running Pod deleted", 20, || async {
        pods.get(&pod.name_any())
            .await
            .ok()?
            .metadata
            .deletion_timestamp
            .map(|_| ())
    })
    .await;
    let target = eventually("FailureTarget", 10, || async {
        condition(&jobs.get("slow").await.unwrap(), "FailureTarget")
    })
    .await;
    assert_eq!(target.0, "DeadlineExceeded");
    assert!(
        condition(&jobs.get("slow").await.unwrap(), "Failed").is_none(),
        "a Pod is still terminating"
    );
    finish_terminating(&pods).await;
    let failed = eventually("the Job failed", 20, || async {
        condition(&jobs.get("slow").await.unwrap(), "Failed")
    })
    .await;
    assert_eq!(
        failed,
        (
            "DeadlineExceeded".to_string(),
            "Job was active longer than specified deadline".to_string()
        )
    );
    assert_eq!(
        jobs.get("slow").await.unwrap().status.unwrap().failed,
        Some(1),
        "the deleted Pod counts as failed"
    );
}

#[tokio::test]
async fn controllers_job_is_deleted_after_its_ttl_with_its_pods() {
    let cluster = job_sandbox().await;
    let jobs: Api<Job> = Api::default_namespaced(cluster.client());
    let pods = cluster.pods();
    // 300 cluster seconds after finishing: three real seconds.
    jobs.create(
        &PostParams::default(),
        &job("once", json!({"ttlSecondsAfterFinished": 300})),
    )
    .await
    .unwrap();
    let pod = bound_active_pods(&pods, "once", 1).await.remove(0);
    set_phase(&pods, &pod.name_any(), "Succeeded", false).await;
    let completed = eventually("the Job complete", 20, || async {
        let job = jobs.get("once").await.ok()?;
        condition(&job, "Complete")?;
        job.status?.completion_time
    })
    .await;
    eventually("the Job deleted", 20, || async {
        jobs.get_opt("once").await.unwrap().is_none().then_some(())
    })
    .await;
    // The completion time has whole seconds, so the Job lived at least 2 s of it after it.
    let lived = jiff::Timestamp::now().duration_since(completed.0);
    assert!(
        lived >= jiff::SignedDuration::from_secs(2),
        "kept until the TTL passed: deleted {lived:?} after its completion time"
    );
    eventually("its Pod collected", 20, || async {
        pods.get_opt(&pod.name_any())
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
}
