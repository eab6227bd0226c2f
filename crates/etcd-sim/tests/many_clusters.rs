//! Many simulated 3-member clusters in one process, each member on listeners of its own,
//! reached through the real `etcd-client`: every member answers for its own cluster, and
//! stopping one member of one cluster changes nothing in the others.

use std::time::Instant;

use etcd_client::Client;
use etcd_sim::server::{Sim, SimConfig, start_cluster};

const CLUSTERS: usize = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_three_member_clusters_answer_from_one_process() {
    let sim = Sim::new(SimConfig::default());
    let started = Instant::now();
    let mut clusters = Vec::new();
    for i in 0..CLUSTERS {
        clusters.push(
            start_cluster(&sim, &format!("c{i}"), 3)
                .await
                .expect("cluster"),
        );
    }
    let start_time = started.elapsed();
    assert_eq!(sim.world().len(), CLUSTERS);

    let asked = Instant::now();
    let mut cluster_ids = std::collections::HashSet::new();
    for members in &clusters {
        let mut leaders = Vec::new();
        for member in members {
            let mut client = Client::connect([member.client_url()], None)
                .await
                .expect("connect");
            let status = client.status().await.expect("Status");
            assert_eq!(status.header().expect("header").member_id(), member.id());
            leaders.push(status.leader());
            cluster_ids.insert(status.header().expect("header").cluster_id());
        }
        assert!(
            leaders.iter().all(|l| *l == leaders[0] && *l != 0),
            "one leader per cluster"
        );
    }
    assert_eq!(
        cluster_ids.len(),
        CLUSTERS,
        "every cluster has an ID of its own"
    );
    let ask_time = asked.elapsed();

    // Stop the leader of the first cluster: it elects another; the second is untouched.
    let mut first = clusters.remove(0);
    let leader_at = first
        .iter()
        .position(|m| m.id() == sim.with(m.cluster(), |c| c.leader()));
    let leader = first.remove(leader_at.expect("a member leads"));
    let old_leader = leader.id();
    leader.stop();
    let mut client = Client::connect([first[0].client_url()], None)
        .await
        .expect("connect");
    let status = client.status().await.expect("Status");
    assert_ne!(status.leader(), 0);
    assert_ne!(status.leader(), old_leader);
    let list = client.member_list().await.expect("MemberList");
    assert_eq!(list.members().len(), 3, "a stopped member stays a member");
    let second = &clusters[0];
    let mut client = Client::connect([second[0].client_url()], None)
        .await
        .expect("connect");
    assert_eq!(client.status().await.expect("Status").raft_term(), 2);
    println!(
        "{CLUSTERS} clusters of 3 started in {start_time:?}; {} Status calls in {ask_time:?}",
        CLUSTERS * 3
    );
}
