//! Nothing leaks: sandboxes with running Pods (claims, emptyDirs, memory volumes, Services) are
//! started and dropped one after another; afterwards no process, mount, namespace or state
//! directory of theirs remains (needs root).

mod kubelet_support;

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kubelet_support::{Cluster, pod_manifest, shell_container};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(60);

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(command) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let command = String::from_utf8_lossy(&command).replace('\0', " ");
        if command.contains(marker) {
            found.push(format!(
                "{}: {command}",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    found
}

/// Mounts (in this process's namespace) under `dir`.
fn mounts_under(dir: &Path) -> Vec<String> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    mounts
        .lines()
        .filter(|line| line.contains(dir.to_str().unwrap()))
        .map(str::to_string)
        .collect()
}

/// Network namespaces this process holds open.
fn open_network_namespaces() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| target.to_string_lossy().starts_with("net:"))
        })
        .count()
}

async fn busy_cluster(marker: &str) -> Cluster {
    let cluster = kubelet_support::start().await;
    cluster
        .create::<PersistentVolumeClaim>("default", json!({
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }))
        .await;
    cluster
        .create::<Service>("default", json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}))
        .await;
    let mut holder = pod_manifest(
        "holder",
        json!({}),
        None,
        json!([shell_container(
            "main",
            &format!("echo x > /data/f; exec sleep {marker}")
        )]),
    );
    holder["spec"]["containers"][0]["volumeMounts"] = json!([
        {"name": "data", "mountPath": "/data"}, {"name": "scratch", "mountPath": "/scratch"}, {"name": "shm", "mountPath": "/dev/shm"}]);
    holder["spec"]["volumes"] = json!([
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "scratch", "emptyDir": {}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}},
    ]);
    cluster.create::<Pod>("default", holder).await;
    cluster.run_web("default", LIMIT).await;
    cluster.wait_ready("default", "holder", LIMIT).await;
    cluster
}

async fn eventually_empty(what: &str, check: impl Fn() -> Vec<String>) {
    let started = Instant::now();
    loop {
        let left = check();
        if left.is_empty() {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{what} left behind:\n{}",
            left.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_sandboxes_leave_no_process_mount_namespace_or_directory() {
    let namespaces_before = open_network_namespaces();
    for round in 0..3 {
        let marker = format!("{}.{round}{}", 86000 + std::process::id() % 300, round);
        let cluster = busy_cluster(&marker).await;
        assert_eq!(processes_with(&marker).len(), 1, "the Pod's process runs");
        let Cluster { sandbox, dir } = cluster;
        let state = dir.path().join("state");
        drop(sandbox);
        eventually_empty("processes", || processes_with(&marker)).await;
        eventually_empty("mounts", || mounts_under(dir.path())).await;
        eventually_empty("state directories", || {
            std::fs::read_dir(&state)
                .map(|entries| {
                    entries
                        .flatten()
                        .map(|e| e.path().display().to_string())
                        .collect()
                })
                .unwrap_or_default()
        })
        .await;
        eventually_empty("network namespaces", || {
            let open = open_network_namespaces();
            if open > namespaces_before {
                vec![format!(
                    "{} namespaces open, {namespaces_before} before",
                    open
                )]
            } else {
                Vec::new()
            }
        })
        .await;
        for file in ["cluster-network.json", "resolv.conf", "control.sock"] {
            assert!(!dir.path().join(file).exists(), "{file} left behind");
        }
    }
}
