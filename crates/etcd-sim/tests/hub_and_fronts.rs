//! A hub and its fronts, each a process of the `etcd-sim` binary, as the operator's Pods would
//! run them: three fronts started with etcd's flags for a 3-member cluster form one cluster
//! held by the hub, reached through the fronts' own client and metrics URLs with the real
//! `etcd-client`; a killed front's member stops (a new leader is elected), a restarted front
//! serves the same member again, a fourth front joins as the learner MemberAdd registered.

#[path = "common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{connect_when_up, http_status};
use etcd_client::MemberAddOptions;

const BIN: &str = env!("CARGO_BIN_EXE_etcd-sim");
/// Generous: a loaded 2-core machine may be slow to start processes; nothing here is timed.
const DEADLINE: Duration = Duration::from_secs(60);
const TOKEN: &str = "ns-hubtest-uid";

/// Free loopback ports: bound at once (so distinct), then released for the fronts to take.
fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local address").port())
        .collect()
}

/// A process of the binary, killed on drop; its stderr goes to `log`.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn signal_term(&self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.expect("kill").success());
    }

    /// Waits (up to the deadline) for the process to exit.
    async fn exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "{:?} did not exit", self.log);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Prints every process's log when the test fails.
struct Logs<'a>(&'a Path);

impl Drop for Logs<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let Ok(entries) = std::fs::read_dir(self.0) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "log") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                eprintln!("==> {} <==\n{text}", path.display());
            }
        }
    }
}

/// Starts `etcd-sim hub --listen 127.0.0.1:0`; returns it and the address it printed.
fn start_hub(dir: &Path) -> (Proc, String) {
    let log = dir.join("hub.log");
    let mut child = Command::new(BIN)
        .args(["hub", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("start the hub");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the hub's address");
    let addr = line
        .trim()
        .strip_prefix("etcd-sim hub listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (Proc { child, log }, addr)
}

/// One member's etcd-shaped flags, as the operator renders them (peer URLs are DNS names
/// nothing resolves: there is no raft traffic).
struct Member {
    name: String,
    client_url: String,
    metrics_url: String,
    peer_url: String,
}

impl Member {
    fn new(i: usize, ports: &[u16]) -> Member {
        let name = format!("hubtest-{i}");
        Member {
            client_url: format!("http://127.0.0.1:{}", ports[2 * i]),
            metrics_url: format!("http://127.0.0.1:{}", ports[2 * i + 1]),
            peer_url: format!("http://{name}.hubtest.ns.svc:2380"),
            name,
        }
    }

    fn initial(members: &[Member]) -> String {
        let pairs: Vec<String> = members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url))
            .collect();
        pairs.join(",")
    }

    /// Starts this member's front: the hub given by `--hub`, or by `ETCD_SIM_HUB` with an
    /// unchanged etcd command line when `via_env`.
    fn front(&self, dir: &Path, hub: &str, initial: &str, state: &str, via_env: bool) -> Proc {
        let log = dir.join(format!(
            "{}-{}.log",
            self.name,
            Instant::now().elapsed().as_nanos()
        ));
        let log = unique(log);
        let mut command = Command::new(BIN);
        if via_env {
            command.env("ETCD_SIM_HUB", hub);
        } else {
            command.arg(format!("--hub={hub}"));
        }
        let child = command
            .arg(format!("--name={}", self.name))
            .arg(format!("--data-dir={}", dir.join(&self.name).display()))
            .arg("--listen-peer-urls=http://0.0.0.0:2380")
            .arg(format!("--listen-client-urls={}", self.client_url))
            .arg(format!("--advertise-client-urls={}", self.client_url))
            .arg(format!("--initial-advertise-peer-urls={}", self.peer_url))
            .arg(format!("--initial-cluster-token={TOKEN}"))
            .arg(format!("--listen-metrics-urls={}", self.metrics_url))
            .env("ETCD_INITIAL_CLUSTER", initial)
            .env("ETCD_INITIAL_CLUSTER_STATE", state)
            .args([
                "--snapshot-count=10000",
                "--auto-compaction-mode",
                "periodic",
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start a front");
        Proc { child, log }
    }
}

/// `path`, or `path` with a counter before its extension when it exists already.
fn unique(path: PathBuf) -> PathBuf {
    let mut candidate = path.clone();
    let mut n = 1;
    while candidate.exists() {
        candidate = path.with_extension(format!("{n}.log"));
        n += 1;
    }
    candidate
}

/// Repeats `call` while etcd refuses it for a condition that passes with time (its 5-second
/// health interval after a member starts: "unhealthy cluster").
macro_rules! retry_while_unhealthy {
    ($call:expr) => {{
        let deadline = Instant::now() + DEADLINE;
        loop {
            match $call {
                Err(e) if e.to_string().contains("unhealthy cluster") => {
                    assert!(Instant::now() < deadline, "still unhealthy: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                other => break other,
            }
        }
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_fronts_form_one_cluster_held_by_the_hub() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let _logs = Logs(dir.path());
    let (_hub, hub) = start_hub(dir.path());
    let ports = free_ports(8);
    let members: Vec<Member> = (0..4).map(|i| Member::new(i, &ports)).collect();
    let initial = Member::initial(&members[..3]);
    let mut fronts: Vec<Option<Proc>> = (0..3)
        .map(|i| Some(members[i].front(dir.path(), &hub, &initial, "new", i == 0)))
        .collect();
    let mut clients = Vec::new();
    for m in &members[..3] {
        clients.push(connect_when_up(&m.client_url, DEADLINE).await);
    }

    // One cluster, listed alike by every front.
    let mut ids = Vec::new();
    let mut cluster_ids = Vec::new();
    for client in &mut clients {
        let list = client.member_list().await.expect("MemberList");
        cluster_ids.push(list.header().expect("header").cluster_id());
        assert_eq!(list.members().len(), 3);
        let mut by_name: Vec<(String, u64, Vec<String>)> = list
            .members()
            .iter()
            .map(|m| (m.name().to_string(), m.id(), m.client_urls().to_vec()))
            .collect();
        by_name.sort();
        ids = by_name.iter().map(|(_, id, _)| *id).collect();
        for (m, (name, _, client_urls)) in members.iter().zip(&by_name) {
            assert_eq!(name, &m.name, "every member started and published its name");
            assert_eq!(client_urls, &vec![m.client_url.clone()]);
        }
    }
    assert!(cluster_ids.iter().all(|c| *c == cluster_ids[0] && *c != 0));
    let mut leaders = Vec::new();
    for (client, id) in clients.iter_mut().zip(&ids) {
        let status = client.status().await.expect("Status");
        assert_eq!(status.header().expect("header").member_id(), *id);
        assert!(!status.is_learner());
        leaders.push(status.leader());
    }
    let leader = leaders[0];
    assert!(leaders.iter().all(|l| *l == leader) && ids.contains(&leader));
    for m in &members[..3] {
        assert_eq!(http_status(&m.metrics_url, "/health").await, 200);
    }

    // Killing the leader's front stops its member: the others elect another.
    let at = ids
        .iter()
        .position(|id| *id == leader)
        .expect("a member leads");
    fronts[at].take().expect("running").kill();
    let others: Vec<usize> = (0..3).filter(|i| *i != at).collect();
    let deadline = Instant::now() + DEADLINE;
    let new_leader = loop {
        let mut seen = Vec::new();
        for i in &others {
            seen.push(clients[*i].status().await.expect("Status").leader());
        }
        if seen
            .iter()
            .all(|l| *l == seen[0] && *l != 0 && *l != leader)
        {
            break seen[0];
        }
        assert!(Instant::now() < deadline, "no new leader: {seen:x?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let list = clients[others[0]].member_list().await.expect("MemberList");
    assert_eq!(list.members().len(), 3, "the stopped member stays a member");
    assert!(list.members().iter().any(|m| m.id() == leader));
    assert_eq!(
        http_status(&members[others[0]].metrics_url, "/health").await,
        200
    );

    // Restarted, its front serves the same member again.
    fronts[at] = Some(members[at].front(dir.path(), &hub, &initial, "new", false));
    clients[at] = connect_when_up(&members[at].client_url, DEADLINE).await;
    let status = clients[at].status().await.expect("Status");
    assert_eq!(status.header().expect("header").member_id(), leader);
    assert_eq!(status.leader(), new_leader);
    let list = clients[at].member_list().await.expect("MemberList");
    assert_eq!(list.members().len(), 3);
    assert_eq!(list.header().expect("header").cluster_id(), cluster_ids[0]);

    // A fourth member with --initial-cluster-state=existing: refused before MemberAdd (etcd
    // would not start), a learner after it.
    let joined = Member::initial(&members);
    let mut refused = members[3].front(dir.path(), &hub, &joined, "existing", false);
    let exit = refused.exit().await;
    assert!(!exit.success(), "{exit:?}");
    assert!(
        refused.stderr().contains("MemberAdd"),
        "{}",
        refused.stderr()
    );
    let via = others[0];
    let added = retry_while_unhealthy!(
        clients[via]
            .member_add(
                [members[3].peer_url.as_str()],
                Some(MemberAddOptions::new().with_is_learner()),
            )
            .await
    )
    .expect("MemberAdd learner");
    let learner = added.member().expect("added").id();
    let mut fourth = members[3].front(dir.path(), &hub, &joined, "existing", true);
    let mut learner_client = connect_when_up(&members[3].client_url, DEADLINE).await;
    let status = learner_client.status().await.expect("Status");
    assert!(status.is_learner());
    assert_eq!(status.header().expect("header").member_id(), learner);
    assert_eq!(status.leader(), new_leader);

    let promoted = clients[via]
        .member_promote(learner)
        .await
        .expect("MemberPromote");
    assert!(promoted.members().iter().all(|m| !m.is_learner()));
    assert!(!learner_client.status().await.expect("Status").is_learner());

    let removed =
        retry_while_unhealthy!(clients[via].member_remove(learner).await).expect("MemberRemove");
    assert_eq!(removed.members().len(), 3);
    assert!(removed.members().iter().all(|m| m.id() != learner));
    fourth.signal_term();
    let exit = fourth.exit().await;
    assert!(exit.success(), "SIGTERM stops a front cleanly: {exit:?}");
    let status = clients[via].status().await.expect("Status");
    assert_eq!(status.leader(), new_leader);
    drop(fronts);
}

#[test]
fn a_front_whose_hub_is_not_listening_exits_non_zero_naming_it() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let hub = format!("127.0.0.1:{}", free_ports(1)[0]);
    let ports = free_ports(2);
    let out = Command::new(BIN)
        .env("ETCD_SIM_HUB", &hub)
        .arg("--name=lonely")
        .arg(format!("--data-dir={}", dir.path().join("data").display()))
        .arg(format!(
            "--listen-client-urls=http://127.0.0.1:{}",
            ports[0]
        ))
        .arg(format!(
            "--listen-metrics-urls=http://127.0.0.1:{}",
            ports[1]
        ))
        .output()
        .expect("run etcd-sim");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{:?}: {stderr}", out.status);
    assert!(stderr.contains(&hub), "{stderr}");
    assert!(stderr.contains("cannot reach the hub"), "{stderr}");
}
