//! The sequence of calls sent to both targets through the `etcd-client` crate, each answer
//! reduced to an [`Outcome`]: the facts the operator reads, IDs turned into relations.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{
    AlarmAction, AlarmOptions, AlarmType, Client, CompactionOptions, GetOptions, MemberAddOptions,
};

use super::http_get;
use super::learner::Starter;
use super::table::{Answer, Outcome};

/// A single-member cluster to send the sequence to.
pub struct Target {
    /// Its client URL.
    pub client_url: String,
    /// Its metrics URL.
    pub metrics_url: String,
    /// Free peer URLs for the learners the sequence adds; the last one's member is started.
    pub spare_peer_urls: [String; 3],
    /// How to start a member that MemberAdd registered.
    pub starter: Starter,
}

/// What the sequence learns as it goes, to turn IDs into relations.
pub struct Seen {
    /// The client of the first member.
    pub client: Client,
    /// The first member's ID.
    pub self_id: u64,
    /// The cluster's ID.
    pub cluster_id: u64,
    /// The last learner added.
    pub learner_id: u64,
    /// The raft index last seen.
    pub raft_index: u64,
    /// The answers so far.
    pub answers: Vec<Answer>,
}

/// An accepted call's facts.
pub fn facts<const N: usize>(list: [(&'static str, String); N]) -> Outcome {
    Outcome::Ok(BTreeMap::from(list))
}

impl Seen {
    /// Records one call's answer.
    pub fn push(&mut self, call: &'static str, outcome: Outcome, info: String) {
        self.answers.push(Answer {
            call,
            outcome,
            info,
        });
    }

    /// Records a call whose answer counts only as accepted or refused (the code and message).
    pub fn push_result<T>(&mut self, call: &'static str, result: Result<T, etcd_client::Error>) {
        let outcome = result.map_or_else(Outcome::refused, |_| facts([]));
        self.push(call, outcome, String::new());
    }

    /// Whether the raft index grew since the last look, and the new index.
    pub async fn index_grew(&mut self) -> (bool, u64) {
        let index = self
            .client
            .status()
            .await
            .map(|s| s.raft_index())
            .unwrap_or(0);
        let grew = index > self.raft_index;
        self.raft_index = index;
        (grew, index)
    }

    /// Whether `id` is the first member, as text.
    pub fn is_self(&self, id: u64) -> String {
        (id == self.self_id).to_string()
    }

    /// Whether `header` names the cluster, as text.
    pub fn same_cluster(&self, header: Option<&etcd_client::ResponseHeader>) -> String {
        header
            .is_some_and(|h| h.cluster_id() == self.cluster_id)
            .to_string()
    }
}

/// Sends the whole sequence to `target` and returns its answers in order.
pub async fn run(target: &mut Target) -> Vec<Answer> {
    let client = Client::connect([&target.client_url], None)
        .await
        .expect("connect");
    let mut s = Seen {
        client,
        self_id: 0,
        cluster_id: 0,
        learner_id: 0,
        raft_index: 0,
        answers: Vec::new(),
    };
    membership(&mut s, target).await;
    maintenance(&mut s, target).await;
    reads_and_snapshot(&mut s).await;
    http(&mut s, target).await;
    super::learner::learner_phase(&mut s, target).await;
    s.answers
}

async fn membership(s: &mut Seen, target: &Target) {
    let list = s.client.member_list().await.expect("MemberList");
    let header = list.header().expect("MemberList header");
    s.self_id = header.member_id();
    s.cluster_id = header.cluster_id();
    let me = &list.members()[0];
    let outcome = facts([
        ("members", list.members().len().to_string()),
        (
            "learners",
            list.members()
                .iter()
                .filter(|m| m.is_learner())
                .count()
                .to_string(),
        ),
        ("listed is responder", s.is_self(me.id())),
        ("name set", (!me.name().is_empty()).to_string()),
        ("client URLs", me.client_urls().len().to_string()),
        ("header.revision", header.revision().to_string()),
        ("raft index", s.index_grew().await.1.to_string()),
    ]);
    let info = format!(
        "member {:x} cluster {:x} index {}",
        s.self_id, s.cluster_id, s.raft_index
    );
    s.push("MemberList", outcome, info);

    let learner = MemberAddOptions::new().with_is_learner();
    let first = target.spare_peer_urls[0].clone();
    let outcome = match s.client.member_add([first.as_str()], Some(learner)).await {
        Ok(r) => {
            let added = r.member().expect("added member");
            s.learner_id = added.id();
            let (grew, index) = s.index_grew().await;
            facts([
                ("raft index", index.to_string()),
                ("members", r.member_list().len().to_string()),
                ("added is learner", added.is_learner().to_string()),
                ("added name empty", added.name().is_empty().to_string()),
                (
                    "added peer URLs = asked",
                    (added.peer_urls() == [first.clone()]).to_string(),
                ),
                ("same cluster", s.same_cluster(r.header())),
                ("raft index grew", grew.to_string()),
            ])
        }
        Err(e) => Outcome::refused(e),
    };
    let info = format!("learner {:x} index {}", s.learner_id, s.raft_index);
    s.push("MemberAdd learner", outcome, info);

    let second = target.spare_peer_urls[1].as_str();
    let learner = MemberAddOptions::new().with_is_learner();
    let result = s.client.member_add([second], Some(learner)).await;
    s.push_result("MemberAdd 2nd learner", result);

    // etcd derives an added member's ID from its peer URLs and the second: past the second,
    // the same URL meets the peer-URL check rather than the ID check.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let learner = MemberAddOptions::new().with_is_learner();
    let result = s.client.member_add([first.as_str()], Some(learner)).await;
    s.push_result("MemberAdd same peer URL (1 s on)", result);

    let result = s.client.member_add(["127.0.0.1"], None).await;
    s.push_result("MemberAdd URL without port", result);

    let learner_id = s.learner_id;
    let result = s.client.member_promote(learner_id).await;
    s.push_result("MemberPromote unstarted learner", result);

    let self_id = s.self_id;
    let result = s.client.member_promote(self_id).await;
    s.push_result("MemberPromote voter", result);

    let result = s.client.member_promote(0x1234).await;
    s.push_result("MemberPromote unknown ID", result);

    let outcome = match s.client.member_remove(learner_id).await {
        Ok(r) => {
            let (grew, index) = s.index_grew().await;
            facts([
                ("raft index", index.to_string()),
                ("members", r.members().len().to_string()),
                (
                    "learners",
                    r.members()
                        .iter()
                        .filter(|m| m.is_learner())
                        .count()
                        .to_string(),
                ),
                ("same cluster", s.same_cluster(r.header())),
                ("raft index grew", grew.to_string()),
            ])
        }
        Err(e) => Outcome::refused(e),
    };
    let info = format!("index {}", s.raft_index);
    s.push("MemberRemove learner", outcome, info);

    let result = s.client.member_remove(learner_id).await;
    s.push_result("MemberRemove removed learner", result);

    let result = s.client.member_remove(0x1234).await;
    s.push_result("MemberRemove unknown ID", result);

    let result = s.client.member_remove(self_id).await;
    s.push_result("MemberRemove the only voter", result);
}

/// Status of the first member, reduced.
pub async fn status_outcome(s: &mut Seen) -> (Outcome, String) {
    match s.client.status().await {
        Ok(r) => {
            let h = r.header().expect("Status header");
            let errors: Vec<String> = r
                .errors()
                .iter()
                .map(|e| e.replace(&s.self_id.to_string(), "<self>"))
                .collect();
            let outcome = facts([
                ("leader is responder", s.is_self(r.leader())),
                ("header.member is responder", s.is_self(h.member_id())),
                ("same cluster", s.same_cluster(Some(h))),
                ("header.revision", h.revision().to_string()),
                ("raftTerm", r.raft_term().to_string()),
                ("raftIndex", r.raft_index().to_string()),
                (
                    "header.raft_term = raftTerm",
                    (h.raft_term() == r.raft_term()).to_string(),
                ),
                (
                    "applied = index",
                    (r.raft_applied_index() == r.raft_index()).to_string(),
                ),
                ("isLearner", r.is_learner().to_string()),
                ("version", r.version().to_string()),
                ("storageVersion", r.storage_version().to_string()),
                ("dbSize > 0", (r.db_size() > 0).to_string()),
                (
                    "inUse <= dbSize",
                    (r.raft_used_db_size() <= r.db_size()).to_string(),
                ),
                ("quota", r.db_size_quota().to_string()),
                ("errors", format!("{errors:?}")),
            ]);
            let info = format!(
                "index {} dbSize {} inUse {}",
                r.raft_index(),
                r.db_size(),
                r.raft_used_db_size()
            );
            (outcome, info)
        }
        Err(e) => (Outcome::refused(e), String::new()),
    }
}

async fn alarm(s: &mut Seen, action: AlarmAction, kind: AlarmType) -> Outcome {
    let mut options = AlarmOptions::new();
    if action != AlarmAction::Get {
        options.with_member(s.self_id);
    }
    match s.client.alarm(action, kind, Some(options)).await {
        Ok(r) => {
            let listed: Vec<String> = r
                .alarms()
                .iter()
                .map(|a| {
                    format!(
                        "{:?}@{}",
                        a.alarm(),
                        if a.member_id() == s.self_id {
                            "self"
                        } else {
                            "other"
                        }
                    )
                })
                .collect();
            facts([
                ("alarms", format!("{listed:?}")),
                ("same cluster", s.same_cluster(r.header())),
            ])
        }
        Err(e) => Outcome::refused(e),
    }
}

async fn maintenance(s: &mut Seen, target: &Target) {
    let (outcome, info) = status_outcome(s).await;
    s.push("Status", outcome, info);
    let outcome = alarm(s, AlarmAction::Get, AlarmType::None).await;
    s.push("Alarm GET", outcome, String::new());
    let outcome = alarm(s, AlarmAction::Activate, AlarmType::Nospace).await;
    s.push("Alarm ACTIVATE NOSPACE", outcome, String::new());
    let outcome = alarm(s, AlarmAction::Activate, AlarmType::Nospace).await;
    s.push("Alarm ACTIVATE NOSPACE again", outcome, String::new());
    let outcome = alarm(s, AlarmAction::Get, AlarmType::None).await;
    s.push("Alarm GET (NOSPACE raised)", outcome, String::new());
    let outcome = alarm(s, AlarmAction::Get, AlarmType::Corrupt).await;
    s.push("Alarm GET CORRUPT only", outcome, String::new());
    let (outcome, info) = status_outcome(s).await;
    s.push("Status under NOSPACE", outcome, info);
    for (call, path) in [
        ("GET /health under NOSPACE", "/health"),
        ("GET /health?exclude=NOSPACE", "/health?exclude=NOSPACE"),
    ] {
        let (code, body) = http_get(&target.metrics_url, path).await;
        let outcome = facts([
            ("status", code.to_string()),
            ("body", body.trim_end().to_string()),
        ]);
        s.push(call, outcome, String::new());
    }
    let outcome = alarm(s, AlarmAction::Deactivate, AlarmType::Nospace).await;
    s.push("Alarm DEACTIVATE NOSPACE", outcome, String::new());
    let outcome = alarm(s, AlarmAction::Deactivate, AlarmType::Nospace).await;
    s.push("Alarm DEACTIVATE NOSPACE again", outcome, String::new());
    let outcome = alarm(s, AlarmAction::Get, AlarmType::None).await;
    s.push("Alarm GET (cleared)", outcome, String::new());

    let self_id = s.self_id;
    let outcome = match s.client.move_leader(self_id).await {
        Ok(r) => facts([("header", r.header().is_some().to_string())]),
        Err(e) => Outcome::refused(e),
    };
    s.push("MoveLeader to itself", outcome, String::new());
    let result = s.client.move_leader(0x1234).await;
    s.push_result("MoveLeader unknown ID", result);
    let outcome = match s.client.defragment().await {
        Ok(r) => facts([("header", r.header().is_some().to_string())]),
        Err(e) => Outcome::refused(e),
    };
    s.push("Defragment", outcome, String::new());
}

async fn reads_and_snapshot(s: &mut Seen) {
    let whole = GetOptions::new().with_from_key().with_count_only();
    let outcome = match s.client.get("\0", Some(whole)).await {
        Ok(r) => {
            let h = r.header().expect("Range header");
            facts([
                ("count", r.count().to_string()),
                ("kvs", r.kvs().len().to_string()),
                ("header.revision", h.revision().to_string()),
                ("same cluster", s.same_cluster(Some(h))),
            ])
        }
        Err(e) => Outcome::refused(e),
    };
    s.push("Range linearizable count_only", outcome, String::new());
    let keys = GetOptions::new()
        .with_prefix()
        .with_keys_only()
        .with_serializable();
    let outcome = match s.client.get("health", Some(keys)).await {
        Ok(r) => facts([
            ("count", r.count().to_string()),
            ("kvs", r.kvs().len().to_string()),
        ]),
        Err(e) => Outcome::refused(e),
    };
    s.push("Range serializable keys_only", outcome, String::new());
    let future = GetOptions::new().with_serializable().with_revision(99);
    let result = s.client.get("\0", Some(future)).await;
    s.push_result("Range at a future revision", result);
    let physical = CompactionOptions::new().with_physical();
    let result = s.client.compact(1, Some(physical)).await;
    s.push_result("Compact 1", result);
    let result = s.client.compact(1, None).await;
    s.push_result("Compact 1 again", result);

    let outcome = match s.client.snapshot().await {
        Ok(mut stream) => {
            let mut messages = Vec::new();
            while let Ok(Some(m)) = stream.message().await {
                messages.push(m);
            }
            let first = messages.first();
            let payload: Vec<u8> = messages[..messages.len().saturating_sub(1)]
                .iter()
                .flat_map(|m| m.blob().to_vec())
                .collect();
            let digest = ring_digest(&payload);
            facts([
                (
                    "first header",
                    first.and_then(|m| m.header()).is_some().to_string(),
                ),
                (
                    "first remaining > 0",
                    first.is_some_and(|m| m.remaining_bytes() > 0).to_string(),
                ),
                (
                    "last = SHA-256 of the rest",
                    messages
                        .last()
                        .is_some_and(|m| m.blob() == digest)
                        .to_string(),
                ),
                (
                    "version",
                    first.map(|m| m.version().to_string()).unwrap_or_default(),
                ),
            ])
        }
        Err(e) => Outcome::refused(e),
    };
    s.push("Snapshot", outcome, String::new());
}

fn ring_digest(bytes: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .to_vec()
}

async fn http(s: &mut Seen, target: &Target) {
    for (call, path) in [
        ("GET /health", "/health"),
        ("GET /health?serializable=true", "/health?serializable=true"),
        ("GET /readyz", "/readyz"),
        ("GET /livez", "/livez"),
    ] {
        let (code, body) = http_get(&target.metrics_url, path).await;
        s.push(
            call,
            facts([
                ("status", code.to_string()),
                ("body", body.trim_end().to_string()),
            ]),
            String::new(),
        );
    }
    let (code, body) = http_get(&target.metrics_url, "/metrics").await;
    let line = |l: &str| body.lines().any(|b| b == l).to_string();
    let outcome = facts([
        ("status", code.to_string()),
        ("etcd_server_has_leader 1", line("etcd_server_has_leader 1")),
        ("etcd_server_is_leader 1", line("etcd_server_is_leader 1")),
        ("etcd_server_is_learner 0", line("etcd_server_is_learner 0")),
    ]);
    s.push("GET /metrics", outcome, String::new());
}
