//! The life of a Pod on a node: restarts with their count and last state, CrashLoopBackOff,
//! init containers in order, restart policies and terminal phases, liveness probes, image
//! errors, graceful deletion, `kubectl logs` (needs root).

mod kubelet_support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, LogParams};
use kubelet_support::{
    condition, container_status, phase, pod_manifest, restart_count, shell_container,
    waiting_reason,
};
use nix::sys::signal::Signal;
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(60);

fn last_exit_code(pod: &Pod, container: &str) -> Option<i32> {
    Some(
        container_status(pod, container)?
            .last_state
            .as_ref()?
            .terminated
            .as_ref()?
            .exit_code,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_container_restarts_and_repeated_failures_back_off() {
    let cluster = kubelet_support::start().await;
    cluster
        .create::<Pod>(
            "default",
            pod_manifest(
                "sleeper",
                json!({}),
                None,
                json!([shell_container("main", "echo started; exec sleep 3600")]),
            ),
        )
        .await;
    cluster
        .create::<Pod>(
            "default",
            pod_manifest(
                "crasher",
                json!({}),
                None,
                json!([shell_container("main", "echo boom; exit 3")]),
            ),
        )
        .await;
    cluster.wait_ready("default", "sleeper", LIMIT).await;
    cluster
        .kubelet()
        .signal_container("default", "sleeper", Some("main"), Signal::SIGKILL)
        .unwrap();
    let restarted = cluster
        .wait_pod("default", "sleeper", LIMIT, |pod| {
            restart_count(pod, "main") == 1 && kubelet_support::is_ready(pod)
        })
        .await;
    let last = container_status(&restarted, "main")
        .unwrap()
        .last_state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(
        (last.exit_code, last.signal, last.reason.as_deref()),
        (137, Some(9), Some("Error"))
    );

    let crashing = cluster
        .wait_pod("default", "crasher", LIMIT, |pod| {
            waiting_reason(pod, "main") == Some("CrashLoopBackOff")
                && restart_count(pod, "main") >= 2
        })
        .await;
    assert_eq!(
        phase(&crashing),
        "Running",
        "a crash-looping Pod with restartPolicy Always stays Running"
    );
    assert_eq!(last_exit_code(&crashing, "main"), Some(3));
    let waiting = container_status(&crashing, "main")
        .unwrap()
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap();
    assert!(
        waiting.message.unwrap().starts_with("back-off "),
        "the kubelet's message"
    );
    let previous = cluster
        .pods("default")
        .logs(
            "crasher",
            &LogParams {
                previous: true,
                ..LogParams::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(previous, "boom\n");
    // A new image replaces the running container, whatever the restart policy.
    cluster
        .kubectl(&["set", "image", "pod/sleeper", "main=sandbox.local/tools:v2"])
        .await;
    let replaced = cluster
        .wait_pod("default", "sleeper", LIMIT, |pod| {
            restart_count(pod, "main") == 2 && kubelet_support::is_ready(pod)
        })
        .await;
    assert_eq!(
        container_status(&replaced, "main").unwrap().image,
        "sandbox.local/tools:v2"
    );
    let kubectl = cluster.kubectl(&["logs", "sleeper", "--previous"]).await;
    assert_eq!(kubectl, "started\n");
    let tail = cluster.kubectl(&["logs", "sleeper", "--tail=1"]).await;
    assert_eq!(tail, "started\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_run_in_order_and_restart_policies_decide_the_phase() {
    let cluster = kubelet_support::start().await;
    let mut ordered = pod_manifest(
        "ordered",
        json!({}),
        None,
        json!([shell_container("main", "cat /work/order")]),
    );
    ordered["spec"]["restartPolicy"] = json!("Never");
    ordered["spec"]["initContainers"] = json!([
        shell_container("first", "echo first >> /work/order"),
        shell_container("second", "sleep 0.3; echo second >> /work/order")
    ]);
    for list in ["initContainers", "containers"] {
        for container in ordered["spec"][list].as_array_mut().unwrap() {
            container["volumeMounts"] = json!([{"name": "work", "mountPath": "/work"}]);
        }
    }
    ordered["spec"]["volumes"] = json!([{"name": "work", "emptyDir": {}}]);
    cluster.create::<Pod>("default", ordered).await;

    let mut init_fails = pod_manifest(
        "init-fails",
        json!({}),
        None,
        json!([shell_container("main", "echo never")]),
    );
    init_fails["spec"]["restartPolicy"] = json!("Never");
    init_fails["spec"]["initContainers"] = json!([shell_container("setup", "exit 1")]);
    cluster.create::<Pod>("default", init_fails).await;

    let mut retried = pod_manifest(
        "on-failure",
        json!({}),
        None,
        json!([shell_container(
            "main",
            "test -f /work/second || { touch /work/second; exit 1; }"
        )]),
    );
    retried["spec"]["restartPolicy"] = json!("OnFailure");
    retried["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "work", "mountPath": "/work"}]);
    retried["spec"]["volumes"] = json!([{"name": "work", "emptyDir": {}}]);
    cluster.create::<Pod>("default", retried).await;

    let ordered = cluster
        .wait_pod("default", "ordered", LIMIT, |pod| phase(pod) == "Succeeded")
        .await;
    assert_eq!(
        cluster.logs("default", "ordered", "main").await,
        "first\nsecond\n"
    );
    assert_eq!(
        kubelet_support::condition(&ordered, "Initialized"),
        Some("True")
    );
    let init_statuses = ordered
        .status
        .as_ref()
        .unwrap()
        .init_container_statuses
        .clone()
        .unwrap();
    let reasons: Vec<Option<String>> = init_statuses
        .iter()
        .map(|s| s.state.as_ref()?.terminated.as_ref()?.reason.clone())
        .collect();
    assert_eq!(
        reasons,
        [Some("Completed".to_string()), Some("Completed".to_string())],
        "{init_statuses:#?}"
    );

    let failed = cluster
        .wait_pod("default", "init-fails", LIMIT, |pod| phase(pod) == "Failed")
        .await;
    assert_eq!(waiting_reason(&failed, "main"), Some("PodInitializing"));
    assert_eq!(
        kubelet_support::condition(&failed, "Initialized"),
        Some("False")
    );

    let retried = cluster
        .wait_pod("default", "on-failure", LIMIT, |pod| {
            phase(pod) == "Succeeded"
        })
        .await;
    assert_eq!(restart_count(&retried, "main"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_liveness_probe_restarts_the_container() {
    let cluster = kubelet_support::start().await;
    let mut pod = pod_manifest(
        "unhealthy",
        json!({}),
        None,
        json!([shell_container(
            "main",
            "touch /tmp/alive; sleep 2; rm /tmp/alive; exec sleep 3600"
        )]),
    );
    pod["spec"]["containers"][0]["startupProbe"] =
        json!({"exec": {"command": ["test", "-f", "/tmp/alive"]}, "periodSeconds": 1});
    pod["spec"]["containers"][0]["livenessProbe"] = json!({"exec": {"command": ["test", "-f", "/tmp/alive"]}, "periodSeconds": 1, "failureThreshold": 2});
    cluster.create::<Pod>("default", pod).await;
    cluster.wait_ready("default", "unhealthy", LIMIT).await;
    let restarted = cluster
        .wait_pod("default", "unhealthy", LIMIT, |pod| {
            restart_count(pod, "main") >= 1
        })
        .await;
    assert_eq!(
        last_exit_code(&restarted, "main"),
        Some(137),
        "killed: PID 1 ignores SIGTERM, the grace runs out"
    );
    let events = cluster
        .kubectl(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=unhealthy",
            "-o",
            "jsonpath={.items[*].reason}",
        ])
        .await;
    assert!(
        events.contains("Unhealthy") && events.contains("Killing"),
        "{events}"
    );
}

/// A Pod not ready at first, then ready: its served conditions say only that it is ready, as a
/// kubelet's do (the reason and message of the not-ready condition go with it). A node agent
/// that left them also kept seeing a difference and patched the status at every wake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_turns_ready_keeps_no_reason_for_being_unready() {
    let cluster = kubelet_support::start().await;
    let mut pod = pod_manifest(
        "late",
        json!({}),
        None,
        json!([shell_container(
            "main",
            "sleep 2; touch /tmp/ready; exec sleep 3600"
        )]),
    );
    pod["spec"]["containers"][0]["readinessProbe"] =
        json!({"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 1});
    cluster.create::<Pod>("default", pod).await;
    let unready = cluster
        .wait_pod("default", "late", LIMIT, |pod| {
            phase(pod) == "Running" && condition(pod, "Ready") == Some("False")
        })
        .await;
    let reason = |pod: &Pod, type_: &str| {
        pod.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == type_))
            .map(|c| (c.reason.clone(), c.message.clone()))
    };
    assert_eq!(
        reason(&unready, "Ready")
            .and_then(|(reason, _)| reason)
            .as_deref(),
        Some("ContainersNotReady")
    );
    let ready = cluster.wait_ready("default", "late", LIMIT).await;
    for type_ in ["Ready", "ContainersReady"] {
        assert_eq!(reason(&ready, type_), Some((None, None)), "{type_}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmapped_image_waits_in_image_pull_back_off() {
    let cluster = kubelet_support::start().await;
    let containers = json!([{"name": "main", "image": "registry.example/unknown:1.0"}]);
    cluster
        .create::<Pod>(
            "default",
            pod_manifest("unmapped", json!({}), None, containers),
        )
        .await;
    let pulling = cluster
        .wait_pod("default", "unmapped", LIMIT, |pod| {
            waiting_reason(pod, "main") == Some("ErrImagePull")
        })
        .await;
    let message = container_status(&pulling, "main")
        .unwrap()
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap()
        .message
        .unwrap();
    assert!(
        message.contains("registry.example/unknown:1.0") && message.contains("add a rule"),
        "{message}"
    );
    let backing_off = cluster
        .wait_pod("default", "unmapped", LIMIT, |pod| {
            waiting_reason(pod, "main") == Some("ImagePullBackOff")
        })
        .await;
    assert_eq!(phase(&backing_off), "Pending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_sends_sigterm_and_waits_out_the_grace_period_only_when_needed() {
    let cluster = kubelet_support::start().await;
    let polite = shell_container(
        "main",
        "trap 'echo bye; exit 0' TERM; while true; do sleep 0.1; done",
    );
    let mut handles_term = pod_manifest("handles-term", json!({}), None, json!([polite]));
    handles_term["spec"]["terminationGracePeriodSeconds"] = json!(30);
    cluster.create::<Pod>("default", handles_term).await;
    let mut ignores_term = pod_manifest(
        "ignores-term",
        json!({}),
        None,
        json!([shell_container("main", "exec sleep 3600")]),
    );
    ignores_term["spec"]["terminationGracePeriodSeconds"] = json!(2);
    cluster.create::<Pod>("default", ignores_term).await;
    for name in ["handles-term", "ignores-term"] {
        cluster.wait_ready("default", name, LIMIT).await;
    }
    let started = Instant::now();
    cluster
        .pods("default")
        .delete("handles-term", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = cluster.pods("default").get("handles-term").await;
    assert!(
        terminating.is_ok_and(|pod| pod.metadata.deletion_timestamp.is_some()),
        "the Pod waits for its node"
    );
    cluster.wait_gone("default", "handles-term", LIMIT).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "gone as soon as it exited, not after 30 s"
    );

    let started = Instant::now();
    cluster
        .pods("default")
        .delete("ignores-term", &DeleteParams::default())
        .await
        .unwrap();
    cluster.wait_gone("default", "ignores-term", LIMIT).await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(10),
        "SIGKILL after the grace period: {waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_contexts_host_network_and_followed_logs() {
    use futures::{AsyncBufReadExt, TryStreamExt};
    let cluster = kubelet_support::start().await;
    let mut as_user = pod_manifest(
        "as-user",
        json!({}),
        None,
        json!([shell_container(
            "main",
            "id -u; id -G; touch /work/file && echo wrote; i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done"
        )]),
    );
    as_user["spec"]["securityContext"] =
        json!({"runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 2000, "runAsNonRoot": true});
    as_user["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "work", "mountPath": "/work"}]);
    as_user["spec"]["volumes"] = json!([{"name": "work", "emptyDir": {}}]);
    cluster.create::<Pod>("default", as_user).await;
    let mut root = pod_manifest(
        "root",
        json!({}),
        None,
        json!([shell_container("main", "sleep 1")]),
    );
    root["spec"]["containers"][0]["securityContext"] = json!({"runAsNonRoot": true});
    cluster.create::<Pod>("default", root).await;
    let mut host = pod_manifest(
        "host",
        json!({}),
        None,
        json!([shell_container("main", "exec sleep 3600")]),
    );
    host["spec"]["hostNetwork"] = json!(true);
    cluster.create::<Pod>("default", host).await;

    let refused = cluster
        .wait_pod("default", "root", LIMIT, |pod| {
            waiting_reason(pod, "main") == Some("CreateContainerConfigError")
        })
        .await;
    let message = container_status(&refused, "main")
        .unwrap()
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap()
        .message;
    assert_eq!(
        message.as_deref(),
        Some("container has runAsNonRoot and image will run as root")
    );

    let host = cluster.wait_ready("default", "host", LIMIT).await;
    let status = host.status.unwrap();
    assert_eq!(
        status.pod_ip, status.host_ip,
        "a hostNetwork Pod has its node's address"
    );

    cluster.wait_ready("default", "as-user", LIMIT).await;
    let params = LogParams {
        follow: true,
        ..LogParams::default()
    };
    let mut lines = cluster
        .pods("default")
        .log_stream("as-user", &params)
        .await
        .unwrap()
        .lines();
    let mut seen = Vec::new();
    while seen.len() < 6 {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.try_next())
            .await
            .expect("the log follows")
            .unwrap()
            .unwrap();
        seen.push(line);
    }
    assert_eq!(&seen[..3], ["65532", "65532 2000", "wrote"]);
    assert_eq!(seen[3..], ["tick 1", "tick 2", "tick 3"]);
}

/// What a restarted container gets: its environment from the Pod's annotations as they are
/// now (the downward API reads the current Pod, so an annotation changed after admission
/// reaches the next run), and with `terminationMessagePolicy: FallbackToLogsOnError` the tail
/// of a failed run's log as its termination message (none for `File`, none for success).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_read_current_annotations_and_failures_leave_their_log_tail() {
    let cluster = kubelet_support::start().await;
    let script = "echo \"mode=$MODE\"; i=0; while [ $i -lt 100 ]; do echo line-$i; i=$((i+1)); done; [ \"$MODE\" = stay ] && exec sleep 3600; exit 4";
    let mut manifest = pod_manifest(
        "annotated",
        json!({}),
        None,
        json!([{
            "name": "main", "image": kubelet_support::TOOLS_IMAGE,
            "command": ["/bin/sh", "-c", script],
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "env": [{"name": "MODE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['example.com/mode']"}}}],
        }, {
            "name": "quiet", "image": kubelet_support::TOOLS_IMAGE,
            "command": ["/bin/sh", "-c", "echo nothing to see; exit 5"],
        }]),
    );
    manifest["metadata"]["annotations"] = json!({"example.com/mode": "fail"});
    cluster.create::<Pod>("default", manifest).await;
    let failed = cluster
        .wait_pod("default", "annotated", LIMIT, |pod| {
            last_exit_code(pod, "main") == Some(4) && last_exit_code(pod, "quiet") == Some(5)
        })
        .await;
    let message = |pod: &Pod, container: &str| {
        container_status(pod, container)
            .and_then(|s| s.last_state.clone())
            .and_then(|s| s.terminated)
            .and_then(|t| t.message)
    };
    let tail = message(&failed, "main").expect("the failed run's log as its message");
    assert!(tail.ends_with("line-99\n"), "{tail}");
    assert!(
        tail.contains("line-20\n") && !tail.contains("line-19\n"),
        "the last 80 lines: {tail}"
    );
    assert!(tail.len() <= 2048);
    assert_eq!(message(&failed, "quiet"), None, "policy File: no message");

    cluster
        .kubectl(&[
            "annotate",
            "--overwrite",
            "pod/annotated",
            "example.com/mode=stay",
        ])
        .await;
    let staying = cluster
        .wait_pod("default", "annotated", LIMIT, |pod| {
            container_status(pod, "main")
                .and_then(|s| s.state.as_ref())
                .is_some_and(|s| s.running.is_some())
                && restart_count(pod, "main") >= 1
        })
        .await;
    cluster
        .eventually(
            "the restarted run reads the new annotation",
            LIMIT,
            || async {
                cluster
                    .logs("default", "annotated", "main")
                    .await
                    .starts_with("mode=stay\n")
            },
        )
        .await;
    assert!(restart_count(&staying, "main") >= 1);
}

/// What a container writes to its `terminationMessagePath` (default `/dev/termination-log`)
/// is its termination message, on success too and whatever the policy; a custom path works
/// the same, and the file is writable by a non-root user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_termination_message_file_is_read_back() {
    let cluster = kubelet_support::start().await;
    let mut manifest = pod_manifest(
        "reporting",
        json!({}),
        None,
        json!([{
            "name": "default-path", "image": kubelet_support::TOOLS_IMAGE,
            "command": ["/bin/sh", "-c", "echo noise; printf 'result: 42' > /dev/termination-log"],
        }, {
            "name": "custom-path", "image": kubelet_support::TOOLS_IMAGE,
            "command": ["/bin/sh", "-c", "printf 'failed: why' > /tmp/out/message; exit 3"],
            "terminationMessagePath": "/tmp/out/message",
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }]),
    );
    manifest["spec"]["restartPolicy"] = json!("Never");
    manifest["spec"]["securityContext"] = json!({"runAsUser": 65532});
    cluster.create::<Pod>("default", manifest).await;
    let ended = |pod: &Pod, container: &str| {
        container_status(pod, container)
            .and_then(|s| s.state.clone())
            .and_then(|s| s.terminated)
    };
    let done = cluster
        .wait_pod("default", "reporting", LIMIT, |pod| {
            ended(pod, "default-path").is_some() && ended(pod, "custom-path").is_some()
        })
        .await;
    let first = ended(&done, "default-path").unwrap();
    assert_eq!(first.exit_code, 0);
    assert_eq!(first.message.as_deref(), Some("result: 42"));
    let second = ended(&done, "custom-path").unwrap();
    assert_eq!(second.exit_code, 3);
    assert_eq!(
        second.message.as_deref(),
        Some("failed: why"),
        "the file wins over the log tail"
    );
}
