//! `observe_cluster` against real etcd: a healthy cluster, one member down, quorum lost, a
//! learner, and endpoints that never existed. Unreachability is data in the view. The
//! member-loss walk observes over connections kept from one observation to the next, as the
//! operator does (`EtcdConnections`): the errors mean what they mean on fresh connections, a
//! settled cluster is observed without a new connection, and a member that comes back is
//! dialled again.

mod etcd_harness;

use std::time::{Duration, Instant};

use etcd_harness::{
    EtcdProcess, EtcdVersion, add_learner_retrying, client_for, eventually, initial_cluster_from,
    start_cluster, wait_healthy,
};
use etcd_operator::etcd::{
    EtcdAccess, EtcdClient, EtcdConnections, EtcdErrorKind, EtcdView, Timeouts, cluster_version,
    observe_cluster, observe_cluster_with,
};

fn urls(members: &[EtcdProcess]) -> Vec<String> {
    members.iter().map(EtcdProcess::client_url).collect()
}

/// The TCP sockets of this network namespace, in any state (a closed connection stays in
/// `TIME_WAIT` for a minute), whose remote end is a member's client port.
fn tcp_sockets_to(members: &[EtcdProcess]) -> usize {
    sockets_to(members, |_| true)
}

/// The established TCP connections of this network namespace to a member's client port.
fn established_to(members: &[EtcdProcess]) -> usize {
    sockets_to(members, |state| state == "01")
}

/// The sockets of `/proc/net/tcp` to a member's client port whose state (hex) `state` accepts.
fn sockets_to(members: &[EtcdProcess], state: impl Fn(&str) -> bool) -> usize {
    let wanted: Vec<String> = members
        .iter()
        .map(|m| format!("{:08X}:094B", u32::from_le_bytes(m.ip.octets())))
        .collect();
    std::fs::read_to_string("/proc/net/tcp")
        .expect("reading /proc/net/tcp")
        .lines()
        .skip(1)
        .filter(|line| {
            let mut fields = line.split_whitespace();
            let remote = fields.nth(2);
            let current = fields.next();
            remote.is_some_and(|r| wanted.iter().any(|w| w == r)) && current.is_some_and(&state)
        })
        .count()
}

/// Observation stays fast: bounded by a few deadlines however many members are down.
const OBSERVE_BOUND: Duration = Duration::from_secs(8);

async fn observe_timed(endpoints: &[String]) -> EtcdView {
    observe_kept(&EtcdConnections::default(), endpoints).await
}

/// [`observe_timed`] over `connections` kept between calls.
async fn observe_kept(connections: &EtcdConnections, endpoints: &[String]) -> EtcdView {
    let started = Instant::now();
    let view = observe_cluster_with(
        connections,
        endpoints,
        Timeouts::OBSERVE,
        &Default::default(),
    )
    .await;
    assert!(
        started.elapsed() < OBSERVE_BOUND,
        "observation took {:?}",
        started.elapsed()
    );
    view
}

async fn observe_through_member_loss(version: EtcdVersion) {
    let mut members = start_cluster(version, 3, &[]);
    wait_healthy(&members.iter().collect::<Vec<_>>()).await;
    let endpoints = urls(&members);
    let kept = EtcdConnections::default();

    // Healthy: every endpoint answers, one leader, three voters, no alarms.
    let view = observe_kept(&kept, &endpoints).await;
    assert_eq!(kept.dials(), 3, "one connection per member");
    let sockets = tcp_sockets_to(&members);
    let view_again = observe_kept(&kept, &endpoints).await;
    assert!(view_again.is_healthy(), "{:?}", view_again.health);
    assert_eq!(
        kept.dials(),
        3,
        "a settled cluster is observed on kept connections"
    );
    // Counted by the kernel, not by the pool: a call that dials beside the pool (each Status
    // on a connection of its own, as observations did until 2026-12-06) leaves sockets.
    assert_eq!(
        tcp_sockets_to(&members),
        sockets,
        "a settled cluster's observation opens no TCP connection to etcd"
    );
    // Observing writes nothing to etcd's log: no AlarmList proposal (the alarms come from the
    // leader's Status), no Authenticate. With a proposal per observation the leader's applied
    // index would move every time.
    let applied = |view: &EtcdView| view.leader_applied_index().expect("the leader answers");
    let mut before = applied(&view_again);
    let mut unchanged = false;
    for _ in 0..5 {
        let next = applied(&observe_kept(&kept, &endpoints).await);
        if next == before {
            unchanged = true;
            break;
        }
        before = next; // etcd's own start-up entries may still land
    }
    assert!(
        unchanged,
        "each observation added a raft entry (at {before})"
    );
    assert!(view.is_healthy(), "{:?}", view.health);
    assert_eq!(view.endpoints.len(), 3);
    assert!(
        view.endpoints
            .iter()
            .all(|o| o.status.is_ok() && o.is_healthy())
    );
    let leader = view.leader().expect("a leader");
    assert!(view.member_list().iter().any(|m| m.id == leader));
    assert_eq!(view.member_list().len(), 3);
    assert!(view.cluster_id.is_some());
    assert_eq!(view.alarms.as_deref(), Ok(&[][..]));
    for status in view.statuses() {
        assert_eq!(status.version, version.reported());
        assert!(!status.is_learner);
    }
    assert!(view.leader_applied_index().is_some());
    // etcd's own cluster version (`/version`), as the upgrade path check reads it.
    let (major, minor) = match version {
        EtcdVersion::V3_5 => (3, 5),
        EtcdVersion::V3_4 => (3, 4),
    };
    let stated = eventually(
        "etcd states its cluster version",
        Duration::from_secs(20),
        || {
            let endpoint = endpoints[0].clone();
            async move {
                match cluster_version(&endpoint, &Default::default(), Duration::from_secs(2)).await
                {
                    Ok(Some(v)) => Some(v),
                    _ => None,
                }
            }
        },
    )
    .await;
    assert_eq!(stated, (major, minor));
    let nowhere = cluster_version(
        "http://127.0.0.1:9",
        &Default::default(),
        Duration::from_secs(2),
    )
    .await;
    assert!(nowhere.is_err(), "{nowhere:?}");

    // One member down: the view says which, with the error text; the rest is healthy.
    // A follower, so no election is in progress when the next observation runs.
    let down = view
        .endpoints
        .iter()
        .position(|o| o.member_id() != Some(leader))
        .unwrap();
    members[down].kill();
    let view = observe_kept(&kept, &endpoints).await;
    let lost = &view.endpoints[down];
    let err = lost
        .status
        .as_ref()
        .expect_err("the killed member does not answer");
    assert_eq!(err.kind, EtcdErrorKind::Unreachable, "{err}");
    assert!(err.to_string().contains(&endpoints[down]), "{err}");
    assert!(lost.health.is_none());
    assert!(
        view.is_healthy(),
        "two of three voters keep quorum: {:?}",
        view.health
    );
    assert_eq!(view.member_list().len(), 3, "membership is unchanged");
    assert_eq!(view.statuses().count(), 2);
    // Its kept connection is dropped; the next observation dials it, fails the same way, fast.
    let dials = kept.dials();
    let view = observe_kept(&kept, &endpoints).await;
    let err = view.endpoints[down]
        .status
        .as_ref()
        .expect_err("still down");
    assert_eq!(err.kind, EtcdErrorKind::Unreachable, "{err}");
    assert_eq!(
        kept.dials(),
        dials + 1,
        "only the lost member is dialled again"
    );

    // Back: dialled again, and answering on the new connection.
    members[down].restart();
    let view = eventually(
        "the restarted member answers",
        Duration::from_secs(20),
        || {
            let (kept, endpoints) = (&kept, &endpoints);
            async move {
                let view = observe_kept(kept, endpoints).await;
                view.endpoints[down].is_healthy().then_some(view)
            }
        },
    )
    .await;
    assert!(view.is_healthy(), "{:?}", view.health);
    members[down].kill();
    let view = observe_kept(&kept, &endpoints).await;
    let err = view.endpoints[down]
        .status
        .as_ref()
        .expect_err("down again");
    assert_eq!(err.kind, EtcdErrorKind::Unreachable, "{err}");

    // Quorum lost: still a view, never an error; health says why.
    let second = if down == 0 { 1 } else { 0 };
    members[second].kill();
    let view = observe_kept(&kept, &endpoints).await;
    assert!(!view.is_healthy());
    let err = view.health.as_ref().unwrap_err();
    assert!(
        err.detail.contains("no voter served a linearizable read"),
        "{err}"
    );
    assert_eq!(
        view.statuses().count(),
        1,
        "the survivor still answers Status"
    );
    let survivor = view.statuses().next().unwrap();
    assert!(
        view.alarms.is_err(),
        "listing alarms needs quorum: {:?}",
        view.alarms
    );
    // The survivor still serves its own (stale) member list.
    assert_eq!(
        view.member_list().len(),
        3,
        "survivor {:x}",
        survivor.member_id
    );

    // Once the survivor knows it has no leader, nothing is asked that would wait out a
    // deadline (the linearizable read, AlarmList): a pass without quorum stays short.
    let timed = eventually(
        "the survivor knows it has no leader",
        Duration::from_secs(10),
        || {
            let (kept, endpoints) = (&kept, &endpoints);
            async move {
                let started = Instant::now();
                let view = observe_kept(kept, endpoints).await;
                let leaderless = view.statuses().all(|s| s.leader == 0);
                leaderless.then(|| (started.elapsed(), view))
            }
        },
    )
    .await;
    let (took, view) = timed;
    assert!(
        took < Timeouts::OBSERVE.request,
        "an observation without quorum took {took:?}"
    );
    assert!(!view.is_healthy() && view.alarms.is_err(), "{view:?}");
    assert_eq!(view.member_list().len(), 3);

    // Everything down: every field carries an error, and observation is still quick.
    let last = 3 - down - second;
    members[last].kill();
    let view = observe_kept(&kept, &endpoints).await;
    assert!(view.endpoints.iter().all(|o| o.status.is_err()));
    assert_eq!(
        view.health.as_ref().unwrap_err().kind,
        EtcdErrorKind::Unreachable
    );
    assert!(view.members.is_err() && view.alarms.is_err());
    assert_eq!(view.leader(), None);
}

#[tokio::test]
async fn observe_through_member_loss_v3_5() {
    observe_through_member_loss(EtcdVersion::V3_5).await;
}

#[tokio::test]
async fn observe_through_member_loss_v3_4() {
    observe_through_member_loss(EtcdVersion::V3_4).await;
}

/// A learner answers Status (with isLearner) but is not asked for a linearizable read; an
/// endpoint whose name does not resolve is reported unreachable at once.
async fn observe_learner_and_missing_endpoint(version: EtcdVersion) {
    let mut seed = EtcdProcess::new(version, "m0");
    seed.start(&format!("m0={}", seed.peer_url()), "new", &[]);
    wait_healthy(&[&seed]).await;
    let client = client_for(&[&seed]).await;
    let mut learner = EtcdProcess::new(version, "m1");
    let (learner_id, members, _) = add_learner_retrying(&client, &learner).await;

    // Before its process starts, the learner is in the member list without a name.
    let missing = "http://m9.nowhere.invalid:2379".to_string();
    let view = observe_timed(&[seed.client_url(), learner.client_url(), missing.clone()]).await;
    let listed = view
        .member_list()
        .iter()
        .find(|m| m.id == learner_id)
        .unwrap();
    assert!(listed.is_learner && !listed.has_started());
    let unresolved = view.observation_at(&missing).unwrap();
    assert_eq!(
        unresolved.status.as_ref().unwrap_err().kind,
        EtcdErrorKind::Unreachable
    );
    assert!(view.is_healthy());

    learner.start(&initial_cluster_from(&members, &learner), "existing", &[]);
    let endpoints = vec![seed.client_url(), learner.client_url()];
    let started = Instant::now();
    let view = loop {
        let view = observe_timed(&endpoints).await;
        if view.status_of(learner_id).is_some() {
            break view;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "learner never answered"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let status = view.status_of(learner_id).unwrap();
    assert!(status.is_learner);
    let observation = view.observation_of(learner_id).unwrap();
    assert!(
        observation.health.is_none(),
        "learners are not asked for linearizable reads"
    );
    assert!(view.is_healthy());
    assert_ne!(view.leader(), Some(learner_id));
}

#[tokio::test]
async fn observe_learner_and_missing_endpoint_v3_5() {
    observe_learner_and_missing_endpoint(EtcdVersion::V3_5).await;
}

#[tokio::test]
async fn observe_learner_and_missing_endpoint_v3_4() {
    observe_learner_and_missing_endpoint(EtcdVersion::V3_4).await;
}

#[tokio::test]
async fn observe_nothing_is_a_view_not_an_error() {
    let view = observe_cluster(&[], Timeouts::OBSERVE, &Default::default()).await;
    assert!(view.endpoints.is_empty());
    assert!(!view.is_healthy());
    assert!(view.members.is_err());
}

/// With authentication on, kept connections authenticate once per credentials (Authenticate is
/// a raft proposal), a changed password is tried on the same connection and the old one is
/// refused as before.
async fn kept_connections_authenticate_once(version: EtcdVersion) {
    let members = start_cluster(version, 1, &[]);
    wait_healthy(&members.iter().collect::<Vec<_>>()).await;
    let endpoints = urls(&members);
    client_for(&members.iter().collect::<Vec<_>>())
        .await
        .enable_auth("first")
        .await
        .expect("auth enabled");
    let first = EtcdAccess {
        tls: None,
        credentials: Some(("root".into(), "first".into())),
    };
    let kept = EtcdConnections::default();
    for _ in 0..3 {
        let view = observe_cluster_with(&kept, &endpoints, Timeouts::OBSERVE, &first).await;
        assert!(view.is_healthy(), "{:?}", view.health);
        assert!(view.members.is_ok() && view.alarms.is_ok(), "{view:?}");
    }
    assert_eq!(kept.dials(), 1, "one connection");
    assert_eq!(
        kept.authentications(),
        1,
        "one Authenticate for three observations"
    );

    let root = EtcdClient::connect_endpoint(&endpoints[0], Timeouts::OBSERVE, &first)
        .await
        .expect("root connects");
    root.change_root_password("second").await.expect("changed");
    let second = EtcdAccess {
        tls: None,
        credentials: Some(("root".into(), "second".into())),
    };
    let view = observe_cluster_with(&kept, &endpoints, Timeouts::OBSERVE, &second).await;
    assert!(view.is_healthy(), "{:?}", view.health);
    assert_eq!(
        kept.dials(),
        1,
        "the new password is tried on the same connection"
    );
    assert_eq!(kept.authentications(), 2);
    // The old password's kept client is refused (its token is renewed and fails), never served.
    let view = observe_cluster_with(&kept, &endpoints, Timeouts::OBSERVE, &first).await;
    let err = view.endpoints[0]
        .health
        .as_ref()
        .expect("asked")
        .as_ref()
        .expect_err("the old password is refused");
    assert_eq!(err.kind, EtcdErrorKind::PermissionDenied, "{err}");
}

#[tokio::test]
async fn kept_connections_authenticate_once_v3_5() {
    kept_connections_authenticate_once(EtcdVersion::V3_5).await;
}

/// The alarm probe asks over the passes' kept connection: an observation dials the member
/// once, and the probe adds no connection of its own while its Status of a backend past the
/// near-quota mark wakes the cluster's reconciler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alarm_probe_asks_over_the_kept_connection() {
    use etcd_operator::plan::BackendFill;
    use etcd_operator::reconcile::{AlarmProbe, ProbeTarget};
    use futures::StreamExt;

    let members = start_cluster(EtcdVersion::V3_5, 1, &[]);
    wait_healthy(&members.iter().collect::<Vec<_>>()).await;
    let endpoints = urls(&members);
    let kept = std::sync::Arc::new(EtcdConnections::default());
    let view = observe_kept(&kept, &endpoints).await;
    assert!(view.is_healthy(), "{:?}", view.health);
    let db_size = view.statuses().next().expect("a Status").db_size;
    let sockets = tcp_sockets_to(&members);

    let (wake, mut woken) = futures::channel::mpsc::unbounded();
    let probe = std::sync::Arc::new(AlarmProbe::new(wake, kept.clone()));
    let running = tokio::spawn(probe.clone().run());
    // The pass saw nothing in use against a quota whose near mark (80 %) the backend's real
    // size passes: the probe's Status shows what the pass did not see.
    probe.update(
        "ns",
        "c",
        Some(ProbeTarget {
            endpoint: endpoints[0].clone(),
            access: EtcdAccess::plaintext(),
            fullest: BackendFill {
                used: 0,
                quota: db_size,
            },
            near: false,
        }),
    );
    let cluster = tokio::time::timeout(Duration::from_secs(5), woken.next())
        .await
        .expect("the probe wakes the reconciler within 5 s")
        .expect("the wake channel is open");
    assert_eq!(
        (cluster.name.as_str(), cluster.namespace.as_deref()),
        ("c", Some("ns"))
    );
    running.abort();
    assert_eq!(kept.dials(), 1, "the probe used the kept connection");
    assert_eq!(
        tcp_sockets_to(&members),
        sockets,
        "the probe opened no TCP connection to etcd"
    );
}

/// Past its limit the pool keeps the connections it has and lets the others pass: a pass uses
/// them, they close soon after, and the next look dials them again and sees the same cluster;
/// the kept one stays open throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_limit_the_pool_keeps_its_connections_and_lets_the_others_pass() {
    let members = start_cluster(EtcdVersion::V3_5, 3, &[]);
    wait_healthy(&members.iter().collect::<Vec<_>>()).await;
    let endpoints = urls(&members);
    // etcd's own gateway connections to its client port, if any, are there before and after;
    // the harness's health check's connection closes on its own time: wait until it has.
    let before = settled_connections(&members).await;
    let passing = Duration::from_secs(1);
    let kept = EtcdConnections::with_limit_and_passing(1, passing);
    let view = observe_kept(&kept, &endpoints).await;
    assert!(view.is_healthy(), "{:?}", view.health);
    assert_eq!(kept.dials(), 3, "one dial per member");
    assert_eq!(
        (kept.len(), kept.kept_len(), kept.passed()),
        (3, 1, 0),
        "one kept, two passing, all open while the pass may use them"
    );
    tokio::time::sleep(passing + Duration::from_millis(200)).await;
    assert_eq!(
        kept.sweep(),
        2,
        "the two passing entries close after their pass"
    );
    assert_eq!((kept.len(), kept.kept_len(), kept.passed()), (1, 1, 2));
    eventually_connections(&members, before + 1).await;
    // The next look dials the two members again, and only them, and sees the same cluster.
    let view = observe_kept(&kept, &endpoints).await;
    assert!(view.is_healthy(), "{:?}", view.health);
    assert_eq!(view.statuses().count(), 3);
    assert_eq!(kept.dials(), 5);
    assert_eq!((kept.len(), kept.kept_len()), (3, 1));
    tokio::time::sleep(passing + Duration::from_millis(200)).await;
    kept.sweep();
    eventually_connections(&members, before + 1).await;
    assert_eq!(kept.kept_len(), 1, "the kept connection stayed throughout");
    // Forgetting the endpoints (as after failed calls) frees their places: the next look's
    // first dial is kept again, the others pass.
    for endpoint in &endpoints {
        kept.forget(endpoint);
    }
    assert_eq!((kept.len(), kept.kept_len()), (0, 0));
    let view = observe_kept(&kept, &endpoints).await;
    assert!(view.is_healthy(), "{:?}", view.health);
    assert_eq!(
        (kept.len(), kept.kept_len()),
        (3, 1),
        "one kept, as at the start"
    );
}

/// The established connections to the members once their number has held for a second.
async fn settled_connections(members: &[EtcdProcess]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut last, mut since) = (established_to(members), Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = established_to(members);
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() >= Duration::from_secs(1) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "the connections to the members did not settle in 10 s"
        );
    }
}

/// Waits until `count` connections to the members are established (a closed channel's
/// connection task ends on its own time).
async fn eventually_connections(members: &[EtcdProcess], count: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = established_to(members);
        if now == count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{now} connections to the members are established, not {count}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
