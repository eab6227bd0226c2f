//! Real etcd processes for the wrapper's tests: each on its own 127.x.y.z address and temp
//! dir, killed when dropped, so tests run in parallel (nextest runs each in its own process).

#![allow(dead_code)]

pub use etcd_operator_e2e_support::loopback::free_address;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use etcd_operator::etcd::{EtcdClient, EtcdErrorKind, MemberInfo, Timeouts};

/// The etcd versions the operator supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EtcdVersion {
    V3_5,
    V3_4,
}

impl EtcdVersion {
    pub fn binary(self) -> PathBuf {
        let path = PathBuf::from(match self {
            EtcdVersion::V3_5 => "/usr/local/lib/etcd-3.5.1/etcd",
            EtcdVersion::V3_4 => "/usr/bin/etcd",
        });
        assert!(
            path.exists(),
            "etcd {self:?} is not installed at {}: run `bash scripts/install-deps.sh` from the \
             repository root to install etcd 3.4.23 and 3.5.1",
            path.display()
        );
        path
    }

    /// The version etcd reports in Status.
    pub fn reported(self) -> &'static str {
        match self {
            EtcdVersion::V3_5 => "3.5.1",
            EtcdVersion::V3_4 => "3.4.23",
        }
    }
}

/// One etcd process.
pub struct EtcdProcess {
    pub name: String,
    pub ip: Ipv4Addr,
    pub version: EtcdVersion,
    dir: tempfile::TempDir,
    child: Option<Child>,
    args: Vec<String>,
}

impl EtcdProcess {
    pub fn client_url(&self) -> String {
        format!("http://{}:2379", self.ip)
    }

    pub fn peer_url(&self) -> String {
        format!("http://{}:2380", self.ip)
    }

    pub fn metrics_url(&self) -> String {
        format!("http://{}:2381", self.ip)
    }

    /// Prepares (does not start) a member called `name` on a fresh address.
    pub fn new(version: EtcdVersion, name: &str) -> EtcdProcess {
        EtcdProcess {
            name: name.to_string(),
            ip: free_address(),
            version,
            dir: tempfile::tempdir().expect("temp dir for etcd data"),
            child: None,
            args: Vec::new(),
        }
    }

    /// Starts etcd with `--initial-cluster` and `--initial-cluster-state` (`new` or
    /// `existing`), plus `extra` flags.
    pub fn start(&mut self, initial_cluster: &str, state: &str, extra: &[&str]) {
        let mut args = vec![
            format!("--name={}", self.name),
            format!("--data-dir={}", self.data_dir().display()),
            format!("--listen-client-urls={}", self.client_url()),
            format!("--advertise-client-urls={}", self.client_url()),
            format!("--listen-peer-urls={}", self.peer_url()),
            format!("--initial-advertise-peer-urls={}", self.peer_url()),
            format!("--listen-metrics-urls={}", self.metrics_url()),
            format!("--initial-cluster={initial_cluster}"),
            format!("--initial-cluster-state={state}"),
            "--initial-cluster-token=wrapper-test".to_string(),
            "--heartbeat-interval=50".to_string(),
            "--election-timeout=500".to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        self.args = args;
        self.spawn();
    }

    /// Starts again with the same flags and data (after [`EtcdProcess::kill`]).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "{} is still running", self.name);
        self.spawn();
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("etcd log file");
        let child = Command::new(self.version.binary())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.child = Some(child);
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => child.try_wait().expect("poll etcd").is_none(),
            None => false,
        }
    }

    /// SIGKILLs the process and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The last lines of the member's log, for failure messages.
    pub fn log_tail(&self) -> String {
        tail(&self.log_path(), 25)
    }
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- log of etcd member {} ({}) ---\n{}",
                self.name,
                self.ip,
                self.log_tail()
            );
        }
        self.kill();
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// `name=peer,...` for processes forming a new cluster together.
pub fn initial_cluster(members: &[&EtcdProcess]) -> String {
    members
        .iter()
        .map(|m| format!("{}={}", m.name, m.peer_url()))
        .collect::<Vec<_>>()
        .join(",")
}

/// `--initial-cluster` for a member joining: every member etcd lists, each by its name, or, for
/// the joining member that has not started yet, by `joining`'s name.
pub fn initial_cluster_from(members: &[MemberInfo], joining: &EtcdProcess) -> String {
    members
        .iter()
        .map(|m| {
            let name = if m.peer_urls.contains(&joining.peer_url()) {
                joining.name.clone()
            } else {
                m.name.clone()
            };
            format!("{name}={}", m.peer_urls[0])
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Starts `n` members together as a new cluster (static bootstrap; the wrapper's membership
/// calls are tested separately).
pub fn start_cluster(version: EtcdVersion, n: usize, extra: &[&str]) -> Vec<EtcdProcess> {
    let mut members: Vec<EtcdProcess> = (0..n)
        .map(|i| EtcdProcess::new(version, &format!("m{i}")))
        .collect();
    let cluster = initial_cluster(&members.iter().collect::<Vec<_>>());
    for member in &mut members {
        member.start(&cluster, "new", extra);
    }
    members
}

/// Polls `check` every 100 ms until it returns `Some`, or panics after `within`.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            start.elapsed() < within,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A client over `members`' client URLs.
pub async fn client_for(members: &[&EtcdProcess]) -> EtcdClient {
    EtcdClient::connect(
        members.iter().map(|m| m.client_url()),
        Timeouts::MEMBERSHIP,
        &Default::default(),
    )
    .await
    .expect("client")
}

/// Waits until every member's endpoint passes the linearizable health check.
pub async fn wait_healthy(members: &[&EtcdProcess]) {
    let client = client_for(members).await;
    for member in members {
        let url = member.client_url();
        eventually(
            &format!("{} to be healthy", member.name),
            Duration::from_secs(20),
            || {
                let client = client.clone();
                let url = url.clone();
                async move { client.endpoint_health(&url).await.ok() }
            },
        )
        .await;
    }
}

/// MemberAdd as a learner, retrying while etcd says the cluster is unhealthy (its 5 s window
/// after a voter connects). Returns the new ID, the member list, and how many times etcd said
/// unhealthy first.
pub async fn add_learner_retrying(
    client: &EtcdClient,
    joining: &EtcdProcess,
) -> (u64, Vec<MemberInfo>, usize) {
    let mut unhealthy = 0;
    let start = Instant::now();
    loop {
        match client.member_add_learner(&[joining.peer_url()]).await {
            Ok(added) => return (added.id, added.members, unhealthy),
            Err(e) if e.kind == EtcdErrorKind::UnhealthyCluster => {
                unhealthy += 1;
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "still unhealthy: {e}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("MemberAdd of {} failed: {e}", joining.name),
        }
    }
}

/// MemberPromote, retrying while the learner is not in sync. Returns how many times etcd said
/// "not in sync" first.
pub async fn promote_retrying(client: &EtcdClient, id: u64) -> usize {
    let mut not_in_sync = 0;
    let start = Instant::now();
    loop {
        match client.member_promote(id).await {
            Ok(members) => {
                let promoted = members
                    .iter()
                    .find(|m| m.id == id)
                    .expect("promoted member listed");
                assert!(
                    !promoted.is_learner,
                    "member {id:x} still a learner after promote"
                );
                return not_in_sync;
            }
            Err(e) if e.kind.is_transient() => {
                not_in_sync += 1;
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "promote never succeeded: {e}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("MemberPromote of {id:x} failed: {e}"),
        }
    }
}

/// MemberRemove, retrying while etcd says the cluster is unhealthy (after a leader change the
/// new leader refuses membership changes until its peers have been connected for 5 s).
pub async fn remove_retrying(client: &EtcdClient, id: u64) -> (Vec<MemberInfo>, usize) {
    let mut unhealthy = 0;
    let start = Instant::now();
    loop {
        match client.member_remove(id).await {
            Ok(members) => return (members, unhealthy),
            Err(e) if e.kind == EtcdErrorKind::UnhealthyCluster => {
                unhealthy += 1;
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "still unhealthy: {e}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("MemberRemove of {id:x} failed: {e}"),
        }
    }
}
