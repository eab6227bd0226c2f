//! The wrapper's membership calls against real etcd 3.5.1 and 3.4.23: a learner joins, catches
//! up and is promoted, leadership moves, a member is removed.

mod etcd_harness;

use std::time::Duration;

use etcd_harness::{
    EtcdProcess, EtcdVersion, add_learner_retrying, client_for, eventually, initial_cluster,
    initial_cluster_from, promote_retrying, remove_retrying, wait_healthy,
};
use etcd_operator::etcd::{EtcdClient, EtcdError, EtcdErrorKind, Timeouts};

/// Adds `joining` as a learner through `client`, starts it with `existing` and the initial
/// cluster from etcd's own member list, and promotes it once it has caught up.
async fn join(client: &EtcdClient, joining: &mut EtcdProcess) -> u64 {
    let (id, members, _) = add_learner_retrying(client, joining).await;
    let learner = members
        .iter()
        .find(|m| m.id == id)
        .expect("MemberAdd lists the new member");
    assert!(learner.is_learner, "added as a learner");
    assert!(
        !learner.has_started(),
        "a member added but not started has no name yet"
    );
    assert_eq!(learner.peer_urls, vec![joining.peer_url()]);

    joining.start(&initial_cluster_from(&members, joining), "existing", &[]);
    promote_retrying(client, id).await;
    id
}

async fn learner_joins_is_promoted_leader_moves_and_member_leaves(version: EtcdVersion) {
    let mut seed = EtcdProcess::new(version, "m0");
    seed.start(&initial_cluster(&[&seed]), "new", &[]);
    wait_healthy(&[&seed]).await;

    let client = client_for(&[&seed]).await;
    let members = client.member_list().await.expect("member list");
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].name, "m0");
    let seed_id = members[0].id;

    let mut m1 = EtcdProcess::new(version, "m1");
    let m1_id = join(&client, &mut m1).await;
    let mut m2 = EtcdProcess::new(version, "m2");
    let m2_id = join(&client, &mut m2).await;
    wait_healthy(&[&seed, &m1, &m2]).await;

    let client = client_for(&[&seed, &m1, &m2]).await;
    let members = client.member_list().await.expect("member list");
    assert_eq!(members.len(), 3);
    assert!(members.iter().all(|m| !m.is_learner && m.has_started()));

    // The status of each endpoint names the member that answered and its version.
    let status = client
        .endpoint_status(&m2.client_url())
        .await
        .expect("status of m2");
    assert_eq!(status.member_id, m2_id);
    assert_eq!(status.version, version.reported());
    assert!(!status.is_learner);
    assert!(status.raft_applied_index > 0 && status.db_size > 0);

    // MoveLeader: whichever member leads, leadership ends up on m2.
    client.move_leader(m2_id).await.expect("move leader to m2");
    eventually("m2 to lead", Duration::from_secs(10), || {
        let client = client.clone();
        let url = m2.client_url();
        async move {
            let status = client.endpoint_status(&url).await.ok()?;
            (status.leader == m2_id).then_some(())
        }
    })
    .await;
    // Moving to the member that already leads is a no-op.
    client
        .move_leader(m2_id)
        .await
        .expect("move leader to the leader");

    // MemberRemove: m1 leaves and stops itself; the others keep quorum. The new leader refuses
    // membership changes ("unhealthy cluster") until its peers have been connected for 5 s.
    let (remaining, _) = remove_retrying(&client, m1_id).await;
    assert_eq!(remaining.len(), 2);
    assert!(remaining.iter().all(|m| m.id != m1_id));
    eventually("removed m1 to exit", Duration::from_secs(15), || {
        let running = m1.is_running();
        async move { (!running).then_some(()) }
    })
    .await;
    let client = client_for(&[&seed, &m2]).await;
    client
        .cluster_health()
        .await
        .expect("healthy after the removal");
    let ids: Vec<u64> = client
        .member_list()
        .await
        .expect("list")
        .iter()
        .map(|m| m.id)
        .collect();
    assert!(ids.contains(&seed_id) && ids.contains(&m2_id) && ids.len() == 2);
}

#[tokio::test]
async fn learner_joins_is_promoted_leader_moves_and_member_leaves_v3_5() {
    learner_joins_is_promoted_leader_moves_and_member_leaves(EtcdVersion::V3_5).await;
}

#[tokio::test]
async fn learner_joins_is_promoted_leader_moves_and_member_leaves_v3_4() {
    learner_joins_is_promoted_leader_moves_and_member_leaves(EtcdVersion::V3_4).await;
}

/// The refusals the planner and `act` branch on come back typed.
/// MemberAdd of a learner at `peer_url`, expected to be refused: the refusal other than
/// `unhealthy cluster`. etcd checks that first, at the member the call reaches, and in a
/// cluster just started a follower may have been connected to a peer for less than etcd's 5 s
/// health interval; that refusal is transient, so it is waited out (as the operator does).
async fn add_refused(client: &EtcdClient, peer_url: &str) -> EtcdError {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let err = client
            .member_add_learner(&[peer_url.to_string()])
            .await
            .expect_err("MemberAdd is refused");
        if err.kind != EtcdErrorKind::UnhealthyCluster || std::time::Instant::now() > deadline {
            return err;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn membership_refusals_are_typed(version: EtcdVersion) {
    let mut m0 = EtcdProcess::new(version, "m0");
    let mut m1 = EtcdProcess::new(version, "m1");
    let mut m2 = EtcdProcess::new(version, "m2");
    let cluster = initial_cluster(&[&m0, &m1, &m2]);
    m0.start(&cluster, "new", &[]);
    m1.start(&cluster, "new", &[]);
    m2.start(&cluster, "new", &[]);
    wait_healthy(&[&m0, &m1, &m2]).await;
    let client = client_for(&[&m0, &m1, &m2]).await;

    // A learner that never starts: a second learner is refused, and it can never be promoted.
    let absent = EtcdProcess::new(version, "absent");
    let (absent_id, _, _) = add_learner_retrying(&client, &absent).await;
    let second = EtcdProcess::new(version, "second");
    let err = add_refused(&client, &second.peer_url()).await;
    assert_eq!(err.kind, EtcdErrorKind::TooManyLearners, "{err}");
    let err = client.member_promote(absent_id).await.unwrap_err();
    assert_eq!(err.kind, EtcdErrorKind::LearnerNotInSync, "{err}");
    assert!(err.kind.is_transient());
    let err = add_refused(&client, &absent.peer_url()).await;
    assert_eq!(err.kind, EtcdErrorKind::PeerUrlExists, "{err}");

    client
        .member_remove(absent_id)
        .await
        .expect("remove the absent learner");
    let err = client.member_remove(absent_id).await.unwrap_err();
    assert_eq!(err.kind, EtcdErrorKind::MemberNotFound, "{err}");

    // Promoting a voter, and MoveLeader sent to a follower.
    let members = client.member_list().await.expect("list");
    let err = client.member_promote(members[0].id).await.unwrap_err();
    assert_eq!(err.kind, EtcdErrorKind::MemberNotLearner, "{err}");
    let m0_status = client
        .endpoint_status(&m0.client_url())
        .await
        .expect("status");
    let follower_url = if m0_status.leader == m0_status.member_id {
        m1.client_url()
    } else {
        m0.client_url()
    };
    let err = client
        .move_leader_at(&follower_url, m0_status.leader)
        .await
        .unwrap_err();
    assert_eq!(err.kind, EtcdErrorKind::NotLeader, "{err}");

    // With a voter down, the leader refuses MemberAdd: "unhealthy cluster" (not every voter
    // connected for etcd's 5 s health interval), to be retried. Three voters, a follower
    // down: the leader keeps its quorum, so the refusal cannot race the leader stepping down
    // (with two voters it did, under load: the call then timed out with no leader).
    let leader = client
        .endpoint_status(&m0.client_url())
        .await
        .expect("status")
        .leader;
    let mut members = [m0, m1, m2];
    let mut statuses = Vec::new();
    for m in &members {
        statuses.push(
            client
                .endpoint_status(&m.client_url())
                .await
                .expect("status"),
        );
    }
    let lost = statuses
        .iter()
        .position(|s| s.member_id != leader)
        .expect("a follower");
    members[lost].kill();
    let survivors: Vec<&EtcdProcess> = members
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != lost)
        .map(|(_, m)| m)
        .collect();
    let client = client_for(&survivors).await;
    // The leader sees the follower's streams break within milliseconds.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let third = EtcdProcess::new(version, "third");
    let err = client
        .member_add_learner(&[third.peer_url()])
        .await
        .unwrap_err();
    assert_eq!(err.kind, EtcdErrorKind::UnhealthyCluster, "{err}");
    assert!(err.kind.is_transient());
}

#[tokio::test]
async fn membership_refusals_are_typed_v3_5() {
    membership_refusals_are_typed(EtcdVersion::V3_5).await;
}

#[tokio::test]
async fn membership_refusals_are_typed_v3_4() {
    membership_refusals_are_typed(EtcdVersion::V3_4).await;
}

/// Calls against endpoints that are down or do not exist fail within their deadline with an
/// `Unreachable` or `Timeout` error naming the endpoint; none hangs.
#[tokio::test]
async fn calls_to_a_dead_cluster_fail_within_the_deadline() {
    let timeouts = Timeouts {
        connect: Duration::from_millis(300),
        request: Duration::from_millis(500),
    };
    let nobody = EtcdProcess::new(EtcdVersion::V3_5, "nobody");
    let client = EtcdClient::connect([nobody.client_url()], timeouts, &Default::default())
        .await
        .expect("lazy connect");
    let started = std::time::Instant::now();
    let err = client.member_list().await.unwrap_err();
    assert!(started.elapsed() < timeouts.deadline() + Duration::from_millis(500));
    assert!(
        matches!(
            err.kind,
            EtcdErrorKind::Unreachable | EtcdErrorKind::Timeout
        ),
        "{err}"
    );
    assert!(err.to_string().contains(&nobody.client_url()), "{err}");

    let started = std::time::Instant::now();
    let err = client
        .endpoint_status(&nobody.client_url())
        .await
        .unwrap_err();
    assert_eq!(err.kind, EtcdErrorKind::Unreachable, "{err}");
    assert!(started.elapsed() < timeouts.deadline());

    let err = EtcdClient::connect(Vec::<String>::new(), timeouts, &Default::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind, EtcdErrorKind::InvalidArgument);
}
