//! Nothing leaks: not when everything is dropped, not when the owning process is killed
//! (needs root).

mod runtime_support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use kube_sandbox::runtime::{
    ContainerRuntime, ContainerState, RuntimeConfig, Volume, VolumeMount, VolumeSource,
};
use runtime_support::{Sandbox, etcd, eventually, image_map, shell};

/// Children of this process (all threads), from /proc.
fn child_processes() -> Vec<u32> {
    let mut children = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            children.extend(
                list.split_whitespace()
                    .filter_map(|pid| pid.parse::<u32>().ok()),
            );
        }
    }
    children
}

fn mount_table() -> String {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap()
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).map_or_else(
        |_| Vec::new(),
        |entries| entries.flatten().map(|e| e.path()).collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_everything_leaves_no_mounts_processes_or_directories() {
    let mounts_before = mount_table();
    let sandbox = Sandbox::new().await;
    let state_root = sandbox.dir.path().join("state");
    let state_dir = sandbox.runtime.state_dir().to_path_buf();
    let memory = Volume {
        name: "shm".into(),
        source: VolumeSource::Memory {
            size_limit: Some(1 << 20),
        },
    };
    let data = Volume {
        name: "data".into(),
        source: VolumeSource::PersistentVolumeClaim {
            claim_name: "data-etcd-0".into(),
            read_only: false,
        },
    };
    let member = sandbox.pod("etcd-0", vec![data, memory], None).await;
    let mut config = etcd("etcd-0", member.ip());
    config.volume_mounts.push(VolumeMount {
        name: "shm".into(),
        mount_path: "/dev/shm".into(),
        ..Default::default()
    });
    member.start(&config);
    let other = sandbox.pod("sleeper", Vec::new(), None).await;
    other.start(&shell("sleep", "sleep 600"));
    let pids: Vec<i32> = [&member, &other]
        .iter()
        .flat_map(|pod| pod.sandbox.container_statuses())
        .filter_map(|status| match status.state {
            ContainerState::Running { pid, .. } => Some(pid),
            ContainerState::Terminated(_) => None,
        })
        .collect();
    assert_eq!(pids.len(), 2);
    assert_eq!(child_processes().len(), 2);
    // Mounts of the containers are in their own namespaces: the machine's table is unchanged.
    assert_eq!(mount_table(), mounts_before);

    drop(member);
    drop(other);
    drop(sandbox);
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} is gone"
        );
    }
    assert!(child_processes().is_empty());
    assert_eq!(mount_table(), mounts_before);
    assert!(
        !state_dir.exists(),
        "the runtime's state directory is removed"
    );
    assert!(entries(&state_root).is_empty());
}

/// Run as a helper by the test below (with `KUBE_SANDBOX_HOLDER_ROOT` set): starts a Pod,
/// reports it and waits to be killed. Run alone, it checks the Pod runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_holder() {
    let holder_root = std::env::var_os("KUBE_SANDBOX_HOLDER_ROOT");
    let sandbox = Sandbox::new().await;
    let runtime = match &holder_root {
        Some(root) => ContainerRuntime::new(RuntimeConfig {
            state_root: PathBuf::from(root),
            images: image_map(),
        })
        .unwrap(),
        None => sandbox.runtime.clone(),
    };
    let network = sandbox.network.attach_pod().await.unwrap();
    let pod = runtime
        .create_pod(kube_sandbox::runtime::PodSandboxConfig {
            uid: "holder".into(),
            namespace: "default".into(),
            name: "holder".into(),
            hostname: "holder".into(),
            network: network.namespace(),
            hosts_file: String::new(),
            resolv_conf: String::new(),
            fs_group: None,
            volumes: Vec::new(),
        })
        .unwrap();
    pod.start_container(&shell("sleep", "sleep 600")).unwrap();
    let Some(ContainerState::Running { pid, .. }) = pod.container_status("sleep").map(|s| s.state)
    else {
        panic!("the container runs");
    };
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    if holder_root.is_some() {
        println!("POD_PID={pid}");
        println!("STATE_DIR={}", runtime.state_dir().display());
        tokio::time::sleep(Duration::from_secs(600)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_owner_kills_its_pods_and_the_next_runtime_sweeps_its_state() {
    let root = tempfile::tempdir().unwrap();
    let mut holder = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "pod_holder", "--nocapture", "--test-threads=1"])
        .env("KUBE_SANDBOX_HOLDER_ROOT", root.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut pod_pid = None;
    let mut state_dir = None;
    for line in BufReader::new(holder.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        // libtest prints "test pod_holder ... " before the test's own output, on the same line.
        if let Some((_, pid)) = line.split_once("POD_PID=") {
            pod_pid = Some(pid.parse::<i32>().unwrap());
        }
        if let Some((_, dir)) = line.split_once("STATE_DIR=") {
            state_dir = Some(PathBuf::from(dir));
            break;
        }
    }
    let pod_pid = pod_pid.expect("the holder reports its Pod");
    let state_dir = state_dir.expect("the holder reports its state");
    assert!(Path::new(&format!("/proc/{pod_pid}")).exists());

    holder.kill().unwrap();
    holder.wait().unwrap();
    eventually(
        "the Pod's process ends with its owner",
        Duration::from_secs(5),
        || !Path::new(&format!("/proc/{pod_pid}")).exists(),
    )
    .await;
    assert!(
        state_dir.exists(),
        "a killed process cannot clean up after itself"
    );

    let next = ContainerRuntime::new(RuntimeConfig {
        state_root: root.path().to_path_buf(),
        images: image_map(),
    })
    .unwrap();
    assert!(
        !state_dir.exists(),
        "the next runtime removed the abandoned state"
    );
    assert_eq!(entries(root.path()), vec![next.state_dir().to_path_buf()]);
}
