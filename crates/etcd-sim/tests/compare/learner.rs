//! The last part of the sequence: a learner that starts, answers as a learner, is promoted,
//! and becomes the leader; and the refusals on the way (a learner serves no MemberList, a
//! follower does not serve MoveLeader).

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, MemberAddOptions};
use etcd_sim::server::{MemberServer, Sim, loopback};
use etcd_sim::state::ClusterKey;

use super::real::RealEtcd;
use super::steps::{Seen, Target, facts, status_outcome};
use super::table::Outcome;

/// How a target starts a member that MemberAdd registered.
pub enum Starter {
    /// Real etcd processes, kept running until the end of the test.
    Real(Vec<RealEtcd>),
    /// Simulated members of cluster `key`.
    Sim {
        /// The simulator.
        sim: Arc<Sim>,
        /// The cluster.
        key: ClusterKey,
        /// The members started, kept serving until the end of the test.
        servers: Vec<MemberServer>,
    },
}

impl Starter {
    /// Starts member `id` named `name` on `peer_url`, joining `initial_cluster`; returns its
    /// client URL.
    async fn start(
        &mut self,
        id: u64,
        name: &str,
        peer_url: &str,
        initial_cluster: &str,
    ) -> String {
        match self {
            Starter::Real(started) => {
                let etcd = RealEtcd::join(name, peer_url, initial_cluster).await;
                let url = etcd.client_url.clone();
                started.push(etcd);
                url
            }
            Starter::Sim { sim, key, servers } => {
                let listeners = vec![
                    loopback().await.expect("bind"),
                    loopback().await.expect("bind"),
                ];
                let server = sim
                    .serve_member(*key, id, name, listeners, &[])
                    .expect("serve learner");
                let url = server.client_url();
                servers.push(server);
                url
            }
        }
    }
}

/// Promotes `id`, retrying while etcd says the learner is not in sync yet (a real learner
/// needs a moment to catch up); the first other answer counts.
async fn promote_when_in_sync(
    client: &mut Client,
    id: u64,
) -> Result<etcd_client::MemberPromoteResponse, etcd_client::Error> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.member_promote(id).await {
            Err(e)
                if e.to_string().contains("in sync with leader") && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

/// The learner phase; `s` is where the earlier calls left the single-member cluster.
pub async fn learner_phase(s: &mut Seen, target: &mut Target) {
    let peer_url = target.spare_peer_urls[2].clone();
    let list = s.client.member_list().await.expect("MemberList");
    let first = &list.members()[0];
    let initial = format!(
        "{}={},learner={peer_url}",
        first.name(),
        first.peer_urls()[0]
    );

    let options = MemberAddOptions::new().with_is_learner();
    let added = s
        .client
        .member_add([peer_url.as_str()], Some(options))
        .await
        .expect("MemberAdd learner");
    let learner_id = added.member().expect("added member").id();
    s.learner_id = learner_id;
    let learner_url = target
        .starter
        .start(learner_id, "learner", &peer_url, &initial)
        .await;
    let mut learner = Client::connect([learner_url], None)
        .await
        .expect("connect to the learner");

    let outcome = match learner.status().await {
        Ok(r) => {
            let h = r.header().expect("header");
            facts([
                ("isLearner", r.is_learner().to_string()),
                ("leader is the first member", s.is_self(r.leader())),
                (
                    "header.member is the learner",
                    (h.member_id() == learner_id).to_string(),
                ),
                ("same cluster", s.same_cluster(Some(h))),
                ("raftTerm", r.raft_term().to_string()),
            ])
        }
        Err(e) => Outcome::refused(e),
    };
    s.push("Status of the started learner", outcome, String::new());

    let result = learner.member_list().await;
    s.push_result("MemberList via the learner", result);
    let result = learner.move_leader(learner_id).await;
    s.push_result("MoveLeader via the learner", result);

    // The learner publishes its name and client URLs through raft once it has joined.
    let deadline = Instant::now() + Duration::from_secs(10);
    let outcome = loop {
        let list = s.client.member_list().await.expect("MemberList");
        let entry = list
            .members()
            .iter()
            .find(|m| m.id() == learner_id)
            .cloned();
        let published = entry.as_ref().is_some_and(|m| !m.name().is_empty());
        if published || Instant::now() > deadline {
            break facts([
                ("members", list.members().len().to_string()),
                (
                    "learner name",
                    entry
                        .as_ref()
                        .map(|m| m.name().to_string())
                        .unwrap_or_default(),
                ),
                (
                    "learner client URLs",
                    entry
                        .map(|m| m.client_urls().len())
                        .unwrap_or(0)
                        .to_string(),
                ),
            ]);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    s.push("MemberList (learner started)", outcome, String::new());

    let outcome = match promote_when_in_sync(&mut s.client, learner_id).await {
        Ok(r) => facts([
            ("members", r.members().len().to_string()),
            (
                "learners",
                r.members()
                    .iter()
                    .filter(|m| m.is_learner())
                    .count()
                    .to_string(),
            ),
        ]),
        Err(e) => Outcome::refused(e),
    };
    s.push("MemberPromote started learner", outcome, String::new());

    // The new voter must have applied its own promotion before the leadership moves to it:
    // etcd's MoveLeader waits, without a deadline of its own, for a transfer that raft drops
    // when the transferee still thinks itself a learner ("is unpromotable and can not
    // campaign", seen on a loaded machine). A condition, not compared.
    let deadline = Instant::now() + Duration::from_secs(60);
    while learner.status().await.is_ok_and(|r| r.is_learner()) {
        assert!(
            Instant::now() < deadline,
            "the promoted learner still says it is a learner after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Not compared: removing the new voter at once, which etcd refuses ("unhealthy cluster")
    // only while the voter's peer connection is younger than its 5-second health interval, so
    // a loaded machine's real answer depends on timing. The simulator's rule is unit-tested.

    let result = s.client.move_leader(learner_id).await;
    s.push_result("MoveLeader to the new voter", result);

    let outcome = match s.client.status().await {
        Ok(r) => facts([
            (
                "leader is the new voter",
                (r.leader() == learner_id).to_string(),
            ),
            ("isLearner", r.is_learner().to_string()),
            ("errors", format!("{:?}", r.errors())),
        ]),
        Err(e) => Outcome::refused(e),
    };
    s.push("Status after MoveLeader", outcome, String::new());

    let self_id = s.self_id;
    let result = s.client.move_leader(self_id).await;
    s.push_result("MoveLeader via a follower", result);
    let (outcome, _) = status_outcome(s).await;
    s.push("Status of the follower", outcome, String::new());
}
