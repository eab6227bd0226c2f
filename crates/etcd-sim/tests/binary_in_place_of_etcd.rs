//! The `etcd-sim` binary started with etcd's own flags, beside a real etcd 3.6.17 started
//! with the same member flags: the same member and cluster IDs, the same answers to the
//! first calls a client makes, and a clean exit on SIGTERM.

#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "compare/real.rs"]
mod real;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{connect_when_up, http_status};

struct SimProcess(Child);

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_sim_takes_etcds_flags_and_derives_etcds_ids() {
    let etcd = real::RealEtcd::start().await;
    let mut real_client = connect_when_up(&etcd.client_url, Duration::from_secs(20)).await;
    let real_list = real_client.member_list().await.expect("MemberList");
    let real_member = real_list.members()[0].clone();
    let real_header = real_list.header().expect("header").clone();
    let peer_url = real_member.peer_urls()[0].clone();

    let ports = real::free_ports(2);
    let client_url = format!("http://127.0.0.1:{}", ports[0]);
    let metrics_url = format!("http://127.0.0.1:{}", ports[1]);
    let dir = tempfile::tempdir().expect("temporary directory");
    let data_dir = dir.path().join("data");
    let child = Command::new(env!("CARGO_BIN_EXE_etcd-sim"))
        .arg(format!("--name={}", real_member.name()))
        .arg(format!("--data-dir={}", data_dir.display()))
        .arg(format!("--listen-client-urls={client_url}"))
        .arg(format!("--advertise-client-urls={client_url}"))
        .arg(format!("--listen-peer-urls={peer_url}"))
        .arg(format!("--initial-advertise-peer-urls={peer_url}"))
        .arg(format!(
            "--initial-cluster={}={peer_url}",
            real_member.name()
        ))
        .args(["--initial-cluster-token", "compare"])
        .arg("--initial-cluster-state=new")
        .arg(format!("--listen-metrics-urls={metrics_url}"))
        // Flags etcd-sim does not read are accepted.
        .args([
            "--heartbeat-interval=100",
            "--election-timeout=1000",
            "--snapshot-count",
            "10000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start etcd-sim");
    let mut sim = SimProcess(child);
    let mut sim_client = connect_when_up(&client_url, Duration::from_secs(20)).await;

    let sim_list = sim_client.member_list().await.expect("MemberList");
    let sim_member = &sim_list.members()[0];
    let sim_header = sim_list.header().expect("header");
    assert_eq!(
        sim_member.id(),
        real_member.id(),
        "etcd's member ID from the same flags"
    );
    assert_eq!(
        sim_header.cluster_id(),
        real_header.cluster_id(),
        "etcd's cluster ID"
    );
    assert_eq!(sim_member.name(), real_member.name());
    assert_eq!(sim_member.peer_urls(), real_member.peer_urls());
    assert_eq!(sim_member.client_urls(), std::slice::from_ref(&client_url));

    let real_status = real_client.status().await.expect("Status");
    let sim_status = sim_client.status().await.expect("Status");
    assert_eq!(sim_status.leader(), real_status.leader());
    assert_eq!(sim_status.version(), real_status.version());
    assert_eq!(sim_status.raft_term(), real_status.raft_term());
    assert_eq!(sim_status.raft_index(), real_status.raft_index());
    assert!(data_dir.is_dir(), "the data directory is created");

    // etcd answers /health on its metrics URL and on its client URL.
    assert_eq!(http_status(&metrics_url, "/health").await, 200);
    assert_eq!(http_status(&client_url, "/health").await, 200);
    assert_eq!(http_status(&etcd.client_url, "/health").await, 200);

    let pid = sim.0.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(5);
    let exit = loop {
        if let Some(status) = sim.0.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "etcd-sim did not stop on SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn etcd_sim_prints_a_version_like_etcd_and_refuses_tls() {
    let out = Command::new(env!("CARGO_BIN_EXE_etcd-sim"))
        .arg("--version")
        .output()
        .expect("run etcd-sim");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("etcd Version: 3.6.17"));

    let dir = tempfile::tempdir().expect("temporary directory");
    let out = Command::new(env!("CARGO_BIN_EXE_etcd-sim"))
        .arg(format!("--data-dir={}", dir.path().display()))
        .arg("--listen-client-urls=https://127.0.0.1:0")
        .output()
        .expect("run etcd-sim");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("only http:// URLs"));
}
