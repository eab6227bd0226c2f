//! The rules of [`Cluster`], call by call, without I/O.

use super::*;
use crate::refusal::Refusal;

/// 2026-01-01T00:00:00Z in milliseconds: any fixed instant does.
const T0: u64 = 1_767_225_600_000;
/// Past etcd's health interval after `T0`.
const LATER: u64 = T0 + HEALTH_INTERVAL_MS + 1_000;

fn urls(list: &[&str]) -> Vec<String> {
    list.iter().map(|u| u.to_string()).collect()
}

fn peer(i: usize) -> Vec<String> {
    urls(&[&format!("http://m-{i}.sim:2380")])
}

fn client(i: usize) -> Vec<String> {
    urls(&[&format!("http://m-{i}.sim:2379")])
}

/// A cluster of `n` members, all started at `T0`, and its member IDs by index.
fn started(n: usize) -> (Cluster, Vec<MemberId>) {
    let initial: Vec<(String, Vec<String>)> = (0..n).map(|i| (format!("m-{i}"), peer(i))).collect();
    let mut cluster = Cluster::bootstrap("tok", &initial).unwrap();
    let ids: Vec<MemberId> = (0..n)
        .map(|i| cluster.member_with_peer_url(&peer(i)[0]).unwrap())
        .collect();
    for (i, id) in ids.iter().enumerate() {
        cluster
            .start_member(*id, &format!("m-{i}"), &client(i), T0)
            .unwrap();
    }
    (cluster, ids)
}

fn leader_of(cluster: &Cluster) -> MemberId {
    cluster.leader()
}

#[test]
fn bootstrap_derives_etcds_ids_and_has_no_leader_until_quorum_runs() {
    let initial = vec![
        ("a".to_string(), peer(0)),
        ("b".to_string(), peer(1)),
        ("c".to_string(), peer(2)),
    ];
    let mut cluster = Cluster::bootstrap("tok", &initial).unwrap();
    let ids: Vec<MemberId> = (0..3)
        .map(|i| ids::member_id(&peer(i), "tok", None))
        .collect();
    assert_eq!(cluster.cluster_id(), ids::cluster_id(&ids));
    let members = cluster.members();
    assert_eq!(members.len(), 3);
    assert!(
        members.windows(2).all(|w| w[0].id < w[1].id),
        "listed by ID"
    );
    assert!(
        members
            .iter()
            .all(|m| m.is_started() && m.client_urls.is_empty() && !m.is_learner)
    );
    assert_eq!(cluster.leader(), 0);
    cluster.start_member(ids[0], "a", &client(0), T0).unwrap();
    assert_eq!(cluster.leader(), 0, "one of three is no quorum");
    cluster.start_member(ids[1], "b", &client(1), T0).unwrap();
    assert_eq!(cluster.leader(), ids[0].min(ids[1]));
    let published = cluster
        .members()
        .into_iter()
        .filter(|m| !m.client_urls.is_empty())
        .count();
    assert_eq!(
        published, 2,
        "the running members published their client URLs"
    );
}

#[test]
fn bootstrap_refuses_bad_input() {
    assert!(Cluster::bootstrap("t", &[]).is_err());
    assert!(Cluster::bootstrap("t", &[("a".into(), urls(&["nope"]))]).is_err());
    let twice = [("a".into(), peer(0)), ("b".into(), peer(0))];
    assert!(Cluster::bootstrap("t", &twice).is_err());
}

#[test]
fn a_single_member_leads_itself() {
    let (cluster, ids) = started(1);
    let status = cluster.status(ids[0]).unwrap();
    assert_eq!(status.leader, ids[0]);
    assert_eq!(status.header.member_id, ids[0]);
    assert_eq!(status.header.cluster_id, cluster.cluster_id());
    assert!(status.errors.is_empty());
    assert!(!status.is_learner);
    assert_eq!(status.raft_index, status.raft_applied_index);
    assert_eq!(status.version, VERSION);
    assert_eq!((status.db_size, status.db_size_in_use), FRESH_DB_SIZE);
}

#[test]
fn learners_are_added_one_at_a_time_and_bump_the_raft_index() {
    let (mut cluster, ids) = started(3);
    let before = cluster.raft_index();
    let (header, added, members) = cluster.member_add(ids[0], &peer(3), true, LATER).unwrap();
    assert_eq!(header.member_id, ids[0]);
    assert!(added.is_learner && added.name.is_empty() && added.client_urls.is_empty());
    assert_eq!(added.id, ids::member_id(&peer(3), "", Some(LATER / 1000)));
    assert_eq!(members.len(), 4);
    assert_eq!(cluster.raft_index(), before + 1);
    assert_eq!(
        cluster.member_add(ids[0], &peer(4), true, LATER),
        Err(Refusal::TooManyLearners)
    );
}

#[test]
fn member_add_checks_urls_ids_and_peer_urls_like_etcd() {
    let (mut cluster, ids) = started(3);
    assert_eq!(
        cluster.member_add(ids[0], &urls(&["m-9:2380"]), true, LATER),
        Err(Refusal::MemberBadUrls)
    );
    assert_eq!(
        cluster.member_add(ids[0], &[], true, LATER),
        Err(Refusal::MemberBadUrls)
    );
    // An existing member's peer URL: etcd derives a new ID (the second is in it), then finds
    // the URL taken.
    assert_eq!(
        cluster.member_add(ids[0], &peer(1), true, LATER),
        Err(Refusal::PeerUrlExist)
    );
    // The same peer URL added twice within one second gets the same ID.
    cluster.member_add(ids[0], &peer(3), true, LATER).unwrap();
    assert_eq!(
        cluster.member_add(ids[0], &peer(3), true, LATER + 1),
        Err(Refusal::MemberExist)
    );
    assert_eq!(
        cluster.member_add(ids[0], &peer(3), true, LATER + 1_000),
        Err(Refusal::PeerUrlExist)
    );
}

#[test]
fn refusals_at_apply_time_are_raft_entries_and_earlier_ones_are_not() {
    let (mut cluster, ids) = started(1);
    cluster.member_add(ids[0], &peer(1), true, LATER).unwrap();
    let index = cluster.raft_index();
    // Checked when the entry applies: each refusal still took an index.
    assert_eq!(
        cluster.member_add(ids[0], &peer(2), true, LATER),
        Err(Refusal::TooManyLearners)
    );
    assert_eq!(
        cluster.member_remove(ids[0], 7, LATER),
        Err(Refusal::MemberNotFound)
    );
    assert_eq!(
        cluster.member_promote(ids[0], ids[0], LATER),
        Err(Refusal::MemberNotLearner)
    );
    assert_eq!(cluster.compact(ids[0], 5), Err(Refusal::FutureRev));
    assert_eq!(cluster.raft_index(), index + 4);
    // Checked before proposing: no entry.
    assert_eq!(
        cluster.member_add(ids[0], &urls(&["x"]), true, LATER),
        Err(Refusal::MemberBadUrls)
    );
    assert_eq!(
        cluster.member_remove(ids[0], ids[0], LATER),
        Err(Refusal::NotEnoughStarted)
    );
    assert_eq!(
        cluster.member_promote(ids[0], 7, LATER),
        Err(Refusal::MemberNotFound)
    );
    assert_eq!(
        cluster.move_leader(ids[0], 7),
        Err(Refusal::BadLeaderTransferee)
    );
    assert_eq!(cluster.raft_index(), index + 4);
}

#[test]
fn a_removed_id_cannot_come_back() {
    let (mut cluster, ids) = started(3);
    let (_, added, _) = cluster.member_add(ids[0], &peer(3), true, LATER).unwrap();
    cluster.member_remove(ids[0], added.id, LATER).unwrap();
    assert_eq!(
        cluster.member_add(ids[0], &peer(3), true, LATER),
        Err(Refusal::MemberNotFound)
    );
    assert_eq!(
        cluster.member_remove(ids[0], added.id, LATER),
        Err(Refusal::MemberNotFound)
    );
}

#[test]
fn membership_changes_wait_for_the_health_interval() {
    let (mut cluster, ids) = started(3);
    assert_eq!(
        cluster.member_add(ids[0], &peer(3), true, T0 + 1_000),
        Err(Refusal::Unhealthy)
    );
    assert!(
        cluster
            .member_add(ids[0], &peer(3), true, T0 + HEALTH_INTERVAL_MS)
            .is_ok()
    );
}

#[test]
fn a_voter_down_makes_the_cluster_unhealthy_for_additions() {
    let (mut cluster, ids) = started(3);
    cluster.stop_member(ids[2], LATER);
    assert_ne!(cluster.leader(), 0, "two of three keep quorum");
    assert_eq!(
        cluster.member_add(ids[0], &peer(3), true, LATER),
        Err(Refusal::Unhealthy)
    );
}

#[test]
fn an_unstarted_voter_costs_quorum_and_blocks_the_next_voter() {
    let (mut cluster, ids) = started(1);
    // etcd accepts a second voter into a 1-member cluster (the restore case)...
    let (_, added, _) = cluster.member_add(ids[0], &peer(1), false, LATER).unwrap();
    assert!(!added.is_learner);
    // ...which then has no quorum until it starts.
    assert_eq!(cluster.leader(), 0);
    assert!(
        cluster
            .status(ids[0])
            .unwrap()
            .errors
            .contains(&"etcdserver: no leader".to_string())
    );
    assert_eq!(
        cluster.member_add(ids[0], &peer(2), false, LATER),
        Err(Refusal::NotEnoughStarted)
    );
    cluster
        .start_member(added.id, "m-1", &client(1), LATER)
        .unwrap();
    assert_ne!(cluster.leader(), 0);
}

#[test]
fn promotion_needs_a_running_learner() {
    let (mut cluster, ids) = started(3);
    let (_, learner, _) = cluster.member_add(ids[0], &peer(3), true, LATER).unwrap();
    assert_eq!(
        cluster.member_promote(ids[0], learner.id, LATER),
        Err(Refusal::LearnerNotReady)
    );
    assert_eq!(
        cluster.member_promote(ids[0], ids[1], LATER),
        Err(Refusal::MemberNotLearner)
    );
    assert_eq!(
        cluster.member_promote(ids[0], 42, LATER),
        Err(Refusal::MemberNotFound)
    );
    cluster
        .start_member(learner.id, "m-3", &client(3), LATER)
        .unwrap();
    let listed = cluster
        .members()
        .into_iter()
        .find(|m| m.id == learner.id)
        .unwrap();
    assert_eq!(
        listed.name, "m-3",
        "a started learner has published its name"
    );
    let before = cluster.raft_index();
    let (_, members) = cluster.member_promote(ids[1], learner.id, LATER).unwrap();
    assert!(members.iter().all(|m| !m.is_learner));
    assert_eq!(cluster.raft_index(), before + 1);
    assert_eq!(
        cluster.member_promote(ids[0], learner.id, LATER),
        Err(Refusal::MemberNotLearner)
    );
}

#[test]
fn removals_protect_quorum() {
    let (mut cluster, ids) = started(1);
    assert_eq!(
        cluster.member_remove(ids[0], ids[0], LATER),
        Err(Refusal::NotEnoughStarted)
    );
    assert_eq!(
        cluster.member_remove(ids[0], 7, LATER),
        Err(Refusal::MemberNotFound)
    );

    let (mut cluster, ids) = started(3);
    cluster.stop_member(ids[1], LATER);
    // Removing a running voter while another is down would leave one of two.
    assert_eq!(
        cluster.member_remove(ids[0], ids[2], LATER),
        Err(Refusal::Unhealthy)
    );
    // The member that is down is safe to remove.
    let (_, members) = cluster.member_remove(ids[0], ids[1], LATER).unwrap();
    assert_eq!(members.len(), 2);
}

#[test]
fn removing_the_leader_elects_another_in_a_new_term() {
    let (mut cluster, ids) = started(3);
    let leader = leader_of(&cluster);
    let term = cluster.raft_term();
    let via = *ids.iter().find(|id| **id != leader).unwrap();
    cluster.member_remove(via, leader, LATER).unwrap();
    assert_ne!(cluster.leader(), 0);
    assert_ne!(cluster.leader(), leader);
    assert_eq!(cluster.raft_term(), term + 1);
    assert_eq!(
        cluster.status(leader),
        Err(Refusal::Stopped),
        "a removed member serves nothing"
    );
}

#[test]
fn learners_serve_only_status_serializable_reads_and_snapshots() {
    let (mut cluster, ids) = started(1);
    let (_, learner, _) = cluster.member_add(ids[0], &peer(1), true, LATER).unwrap();
    cluster
        .start_member(learner.id, "m-1", &client(1), LATER)
        .unwrap();
    let l = learner.id;
    assert!(cluster.status(l).unwrap().is_learner);
    assert!(
        cluster
            .range(
                l,
                RangeQuery {
                    serializable: true,
                    revision: 0
                }
            )
            .is_ok()
    );
    assert!(cluster.snapshot(l).is_ok());
    let refused = Err(Refusal::NotSupportedForLearner);
    assert_eq!(cluster.member_list(l, false).map(|_| ()), refused);
    assert_eq!(cluster.range(l, RangeQuery::default()).map(|_| ()), refused);
    assert_eq!(cluster.defragment(l).map(|_| ()), refused);
    assert_eq!(cluster.move_leader(l, ids[0]).map(|_| ()), refused);
    assert_eq!(
        cluster.alarm(l, AlarmAction::Get, 0, None).map(|_| ()),
        refused
    );
    assert_eq!(cluster.compact(l, 1).map(|_| ()), refused);
    assert_eq!(
        cluster.member_add(l, &peer(2), true, LATER).map(|_| ()),
        refused
    );
}

#[test]
fn without_quorum_reads_through_raft_time_out_and_local_ones_answer() {
    let (mut cluster, ids) = started(3);
    cluster.stop_member(ids[1], LATER);
    cluster.stop_member(ids[2], LATER);
    assert_eq!(cluster.leader(), 0);
    assert_eq!(
        cluster.member_list(ids[0], true).map(|_| ()),
        Err(Refusal::Timeout)
    );
    assert_eq!(cluster.member_list(ids[0], false).unwrap().1.len(), 3);
    assert_eq!(
        cluster.range(ids[0], RangeQuery::default()).map(|_| ()),
        Err(Refusal::Timeout)
    );
    assert!(
        cluster
            .range(
                ids[0],
                RangeQuery {
                    serializable: true,
                    revision: 0
                }
            )
            .is_ok()
    );
    assert_eq!(
        cluster.status(ids[0]).unwrap().errors,
        vec!["etcdserver: no leader".to_string()]
    );
    assert_eq!(
        cluster.member_add(ids[0], &peer(3), true, LATER),
        Err(Refusal::Unhealthy)
    );
    let term = cluster.raft_term();
    cluster
        .start_member(ids[1], "m-1", &client(1), LATER)
        .unwrap();
    assert_ne!(cluster.leader(), 0);
    assert!(cluster.raft_term() > term);
    assert_eq!(cluster.status(ids[2]), Err(Refusal::Stopped));
}

#[test]
fn alarms_are_raised_listed_and_cleared_through_raft() {
    let (mut cluster, ids) = started(3);
    let m = ids[1];
    let index = cluster.raft_index();
    let (_, raised) = cluster
        .alarm(ids[0], AlarmAction::Activate, m, Some(AlarmKind::NoSpace))
        .unwrap();
    assert_eq!(
        raised,
        vec![Alarm {
            member_id: m,
            kind: AlarmKind::NoSpace
        }]
    );
    let (_, again) = cluster
        .alarm(ids[0], AlarmAction::Activate, m, Some(AlarmKind::NoSpace))
        .unwrap();
    assert_eq!(again, raised, "an active alarm is answered again");
    assert_eq!(
        cluster.alarm(ids[0], AlarmAction::Get, 0, None).unwrap().1,
        raised
    );
    assert!(
        cluster
            .alarm(ids[0], AlarmAction::Get, 0, Some(AlarmKind::Corrupt))
            .unwrap()
            .1
            .is_empty()
    );
    let errors = cluster.status(ids[2]).unwrap().errors;
    assert_eq!(errors, vec![format!("memberID:{m} alarm:NOSPACE ")]);
    let (_, cleared) = cluster
        .alarm(ids[0], AlarmAction::Deactivate, m, Some(AlarmKind::NoSpace))
        .unwrap();
    assert_eq!(cleared, raised);
    let (_, none) = cluster
        .alarm(ids[0], AlarmAction::Deactivate, m, Some(AlarmKind::NoSpace))
        .unwrap();
    assert!(none.is_empty());
    assert!(
        cluster
            .alarm(ids[0], AlarmAction::Get, 0, None)
            .unwrap()
            .1
            .is_empty()
    );
    assert_eq!(
        cluster.raft_index(),
        index + 7,
        "every Alarm call is a raft entry"
    );
}

#[test]
fn move_leader_is_served_by_the_leader_to_a_running_voter() {
    let (mut cluster, ids) = started(3);
    let leader = leader_of(&cluster);
    let others: Vec<MemberId> = ids.iter().copied().filter(|id| *id != leader).collect();
    assert_eq!(
        cluster.move_leader(others[0], others[1]),
        Err(Refusal::NotLeader)
    );
    assert_eq!(
        cluster.move_leader(leader, 42),
        Err(Refusal::BadLeaderTransferee)
    );
    let term = cluster.raft_term();
    assert!(cluster.move_leader(leader, leader).is_ok());
    assert_eq!(
        cluster.raft_term(),
        term,
        "moving to itself changes nothing"
    );
    cluster.stop_member(others[1], LATER);
    assert_eq!(
        cluster.move_leader(leader, others[1]),
        Err(Refusal::LeaderTransferTimeout)
    );
    cluster.move_leader(leader, others[0]).unwrap();
    assert_eq!(cluster.leader(), others[0]);
    assert_eq!(cluster.raft_term(), term + 1);
    let (_, learner, _) = {
        cluster
            .start_member(others[1], "back", &client(9), LATER)
            .unwrap();
        cluster
            .member_add(others[0], &peer(5), true, LATER + HEALTH_INTERVAL_MS)
            .unwrap()
    };
    assert_eq!(
        cluster.move_leader(others[0], learner.id),
        Err(Refusal::BadLeaderTransferee)
    );
}

#[test]
fn writes_grow_backends_until_nospace_and_defragment_shrinks_them() {
    let (mut cluster, ids) = started(3);
    cluster.set_quota(100_000);
    cluster.record_writes(10, 50_000).unwrap();
    assert_eq!(cluster.revision(), 11);
    assert!(cluster.alarms().is_empty());
    cluster.record_writes(10, 50_000).unwrap();
    assert_eq!(
        cluster.alarms().len(),
        3,
        "every member went over the quota"
    );
    assert_eq!(cluster.record_writes(1, 1), Err(Refusal::NoSpace));
    cluster.set_db_size(ids[0], 200_000, 30_000);
    cluster.defragment(ids[0]).unwrap();
    let status = cluster.status(ids[0]).unwrap();
    assert_eq!((status.db_size, status.db_size_in_use), (30_000, 30_000));
    assert_eq!(status.db_size_quota, 100_000);
}

#[test]
fn corrupt_refuses_writes() {
    let (mut cluster, ids) = started(1);
    cluster
        .alarm(
            ids[0],
            AlarmAction::Activate,
            ids[0],
            Some(AlarmKind::Corrupt),
        )
        .unwrap();
    assert_eq!(cluster.record_writes(1, 1), Err(Refusal::Corrupt));
}

#[test]
fn ranges_and_compaction_follow_revisions() {
    let (mut cluster, ids) = started(1);
    cluster.record_writes(4, 10).unwrap();
    let at = |revision| RangeQuery {
        serializable: true,
        revision,
    };
    assert_eq!(
        cluster.range(ids[0], at(6)).map(|_| ()),
        Err(Refusal::FutureRev)
    );
    assert_eq!(cluster.range(ids[0], at(0)).unwrap().0.revision, 5);
    assert_eq!(cluster.compact(ids[0], 9), Err(Refusal::FutureRev));
    cluster.compact(ids[0], 4).unwrap();
    assert_eq!(
        cluster.range(ids[0], at(3)).map(|_| ()),
        Err(Refusal::Compacted)
    );
    assert!(cluster.range(ids[0], at(4)).is_ok());
    assert_eq!(cluster.compact(ids[0], 4), Err(Refusal::Compacted));
}

#[test]
fn a_stopped_member_serves_nothing_and_a_restart_serves_again() {
    let (mut cluster, ids) = started(3);
    cluster.stop_member(ids[0], LATER);
    assert_eq!(cluster.status(ids[0]), Err(Refusal::Stopped));
    assert!(!cluster.is_running(ids[0]));
    cluster
        .start_member(ids[0], "m-0", &client(0), LATER)
        .unwrap();
    assert!(cluster.status(ids[0]).is_ok());
    assert_eq!(
        cluster.start_member(99, "x", &[], LATER),
        Err(Refusal::MemberNotFound)
    );
}

#[test]
fn the_world_keeps_clusters_apart() {
    let mut world = World::new();
    assert!(world.is_empty());
    let (a, _) = started(1);
    let (b, _) = started(3);
    let ka = world.add(a);
    let kb = world.add(b);
    assert_eq!(world.len(), 2);
    assert_eq!(world.cluster(ka).members().len(), 1);
    assert_eq!(world.cluster_mut(kb).members().len(), 3);
}
