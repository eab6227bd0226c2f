//! Tables for every decision of the defrag controllers: EtcdDefrag's here, EtcdDefragPolicy's
//! in `policy.rs`.

mod policy;

use std::time::Duration;

use etcd_operator_api::EtcdDefrag;
use etcd_operator_api::defrag::{
    DefragOutcome, DefragPhase, DefragRule, EtcdDefragStatus, MemberDefragStatus, MemberRole,
};
use etcd_operator_api::defrag_policy::{ConcurrencyPolicy, EtcdDefragPolicySpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::decide::*;
use super::policy::*;
use crate::domain::etcd::DEFAULT_QUOTA_BACKEND_BYTES;
use crate::etcd::{Alarm, AlarmKind};

const MI: i64 = 1 << 20;

fn ts(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn member(name: &str, id: u64, leader: u64) -> MemberFacts {
    MemberFacts {
        name: name.into(),
        id: Some(id),
        endpoint: format!("http://{name}:2379"),
        status: Some(MemberStatusFacts {
            db_size: 100 * MI,
            db_size_in_use: 10 * MI,
            leader,
            is_learner: false,
            errors: vec![],
        }),
        healthy: true,
        problem: None,
    }
}

/// Three healthy members, `etcd-1` (id 2) leading.
fn healthy() -> ClusterFacts {
    ClusterFacts {
        paused: false,
        deleting: false,
        replicas: 3,
        members: vec![
            member("etcd-0", 1, 2),
            member("etcd-1", 2, 2),
            member("etcd-2", 3, 2),
        ],
        quota_bytes: DEFAULT_QUOTA_BACKEND_BYTES,
        alarms: vec![],
    }
}

fn defrag(name: &str, cluster: &str, created: &str, phase: Option<DefragPhase>) -> EtcdDefrag {
    let mut d = EtcdDefrag::new(name, Default::default());
    d.metadata.namespace = Some("ns".into());
    d.metadata.creation_timestamp = Some(Time(ts(created)));
    d.spec.cluster_ref.name = cluster.into();
    d.status = phase.map(|p| EtcdDefragStatus {
        phase: Some(p),
        ..Default::default()
    });
    d
}

fn rule(free: Option<&str>, quota: Option<&str>, min: Option<&str>) -> DefragRule {
    DefragRule {
        all: None,
        free_space_above: free.map(|q| Quantity(q.into())),
        quota_usage_above: quota.map(str::to_string),
        min_reclaim: min.map(|q| Quantity(q.into())),
    }
}

#[test]
fn percentages_are_integers_from_one_to_a_hundred() {
    assert_eq!(parse_percent("80%"), Some(80));
    assert_eq!(parse_percent("100%"), Some(100));
    assert_eq!(parse_percent("1%"), Some(1));
    for bad in ["0%", "101%", "80", "8.5%", "%", "x%"] {
        assert_eq!(parse_percent(bad), None, "{bad}");
    }
}

#[test]
fn the_quota_is_the_specs_or_etcds_default() {
    assert_eq!(effective_quota(None), 2 << 30);
    assert_eq!(effective_quota(Some(0)), 2 << 30);
    assert_eq!(effective_quota(Some(-5)), 2 << 30);
    assert_eq!(effective_quota(Some(64 * MI)), 64 * MI);
}

#[test]
fn the_rule_table() {
    let gib = 1i64 << 30;
    let all = DefragRule {
        all: Some(true),
        ..Default::default()
    };
    type Case = (&'static str, Option<DefragRule>, i64, i64, i64, Verdict);
    let cases: Vec<Case> = vec![
        // No rule: the 200Mi default gate, strictly above.
        (
            "no rule, 201Mi free",
            None,
            300 * MI,
            99 * MI,
            gib,
            Verdict::Defragment,
        ),
        (
            "no rule, 200Mi free",
            None,
            300 * MI,
            100 * MI,
            gib,
            Verdict::Skip("BelowThreshold"),
        ),
        (
            "no rule, nothing free",
            None,
            300 * MI,
            300 * MI,
            gib,
            Verdict::Skip("BelowThreshold"),
        ),
        // An empty rule is the same as none.
        (
            "empty rule",
            Some(DefragRule::default()),
            300 * MI,
            100 * MI,
            gib,
            Verdict::Skip("BelowThreshold"),
        ),
        // all: regardless of size, even with nothing to reclaim.
        ("all", Some(all.clone()), 1, 1, gib, Verdict::Defragment),
        (
            "all: false is no rule",
            Some(DefragRule {
                all: Some(false),
                ..Default::default()
            }),
            300 * MI,
            99 * MI,
            gib,
            Verdict::Defragment,
        ),
        // freeSpaceAbove.
        (
            "free above 1Mi, 2Mi free",
            Some(rule(Some("1Mi"), None, None)),
            3 * MI,
            MI,
            gib,
            Verdict::Defragment,
        ),
        (
            "free above 1Gi, 200Mi free",
            Some(rule(Some("1Gi"), None, None)),
            300 * MI,
            100 * MI,
            gib,
            Verdict::Skip("BelowThreshold"),
        ),
        // quotaUsageAbove lowers the gate to minReclaim (32Mi by default) above that share.
        (
            "quota 80%, db 90% of quota, 40Mi free",
            Some(rule(None, Some("80%"), None)),
            90 * MI,
            50 * MI,
            100 * MI,
            Verdict::Defragment,
        ),
        (
            "quota 80%, db 90% of quota, 31Mi free",
            Some(rule(None, Some("80%"), None)),
            90 * MI,
            59 * MI,
            100 * MI,
            Verdict::Skip("BelowThreshold"),
        ),
        (
            "quota 80%, db 80% of quota exactly",
            Some(rule(None, Some("80%"), None)),
            80 * MI,
            10 * MI,
            100 * MI,
            Verdict::Skip("BelowThreshold"),
        ),
        (
            "quota 80%, db below",
            Some(rule(None, Some("80%"), None)),
            70 * MI,
            10 * MI,
            100 * MI,
            Verdict::Skip("BelowThreshold"),
        ),
        (
            "quota 80% minReclaim 1Mi, 2Mi free",
            Some(rule(None, Some("80%"), Some("1Mi"))),
            90 * MI,
            88 * MI,
            100 * MI,
            Verdict::Defragment,
        ),
        (
            "quota 80% minReclaim 1Mi exactly",
            Some(rule(None, Some("80%"), Some("1Mi"))),
            90 * MI,
            89 * MI,
            100 * MI,
            Verdict::Defragment,
        ),
        (
            "quota 80% minReclaim 2Mi, 1Mi free",
            Some(rule(None, Some("80%"), Some("2Mi"))),
            90 * MI,
            89 * MI,
            100 * MI,
            Verdict::Skip("BelowThreshold"),
        ),
        // The quota arm is measured against the default quota when the spec sets none.
        (
            "quota 50% of 2Gi",
            Some(rule(None, Some("50%"), None)),
            gib + MI,
            gib - 40 * MI,
            DEFAULT_QUOTA_BACKEND_BYTES,
            Verdict::Defragment,
        ),
        // freeSpaceAbove still applies beside the quota arm.
        (
            "both arms, free wins",
            Some(rule(Some("1Mi"), Some("99%"), Some("1Mi"))),
            10 * MI,
            5 * MI,
            gib,
            Verdict::Defragment,
        ),
        // An in-use figure above the size (3.4 rounding) reclaims nothing.
        (
            "in use above size",
            None,
            MI,
            2 * MI,
            gib,
            Verdict::Skip("BelowThreshold"),
        ),
    ];
    for (what, rule, size, in_use, quota, verdict) in cases {
        assert_eq!(
            rule_verdict(rule.as_ref(), size, in_use, quota),
            verdict,
            "{what}"
        );
    }
}

#[test]
fn the_oldest_unfinished_run_of_a_cluster_goes_first() {
    let a = defrag("a", "etcd", "2026-01-01T00:00:00Z", None);
    let b = defrag("b", "etcd", "2026-01-01T00:00:01Z", None);
    let other = defrag("c", "other", "2025-01-01T00:00:00Z", None);
    let done = defrag(
        "d",
        "etcd",
        "2025-01-01T00:00:00Z",
        Some(DefragPhase::Complete),
    );
    let failed = defrag(
        "e",
        "etcd",
        "2025-01-01T00:00:00Z",
        Some(DefragPhase::Failed),
    );
    let all = vec![a.clone(), b.clone(), other.clone(), done, failed];
    assert_eq!(ahead_in_queue(&a, &all), None);
    assert_eq!(ahead_in_queue(&b, &all), Some("a"));
    assert_eq!(
        ahead_in_queue(&other, &all),
        None,
        "other clusters do not queue"
    );
    // Same creation second: by name.
    let a2 = defrag("a2", "etcd", "2026-01-01T00:00:00Z", None);
    let all = vec![a2.clone(), a.clone()];
    assert_eq!(ahead_in_queue(&a2, &all), Some("a"));
    // A running run keeps its place ahead of older pending ones only by age: the oldest runs.
    let running = defrag(
        "z",
        "etcd",
        "2026-01-01T00:00:00Z",
        Some(DefragPhase::Running),
    );
    let later = defrag(
        "y",
        "etcd",
        "2026-01-02T00:00:00Z",
        Some(DefragPhase::Pending),
    );
    assert_eq!(ahead_in_queue(&later, &[running, later.clone()]), Some("z"));
    // Another namespace's run of a same-named cluster does not count.
    let mut elsewhere = defrag("0", "etcd", "2020-01-01T00:00:00Z", None);
    elsewhere.metadata.namespace = Some("other".into());
    assert_eq!(ahead_in_queue(&a, &[elsewhere, a.clone()]), None);
}

#[test]
fn deadlines_count_from_the_start_or_the_creation() {
    let created = "2026-01-01T00:00:00Z";
    let d = defrag("a", "etcd", created, None);
    assert_eq!(deadline_passed(&d, ts("2026-01-01T00:29:00Z")), None);
    let message = deadline_passed(&d, ts("2026-01-01T00:31:00Z")).unwrap();
    assert!(message.contains("could not start"), "{message}");
    let mut started = d.clone();
    started.status = Some(EtcdDefragStatus {
        phase: Some(DefragPhase::Running),
        started_at: Some(Time(ts("2026-01-01T00:20:00Z"))),
        ..Default::default()
    });
    assert_eq!(deadline_passed(&started, ts("2026-01-01T00:31:00Z")), None);
    assert!(
        deadline_passed(&started, ts("2026-01-01T00:51:00Z"))
            .unwrap()
            .contains("did not complete")
    );
}

#[test]
fn finished_runs_expire_after_their_ttl() {
    let mut d = defrag(
        "a",
        "etcd",
        "2026-01-01T00:00:00Z",
        Some(DefragPhase::Complete),
    );
    assert_eq!(
        expiry(&d, ts("2030-01-01T00:00:00Z")),
        Expiry::Keep,
        "no TTL"
    );
    d.spec.ttl_seconds_after_finished = Some(60);
    assert_eq!(
        expiry(&d, ts("2030-01-01T00:00:00Z")),
        Expiry::Keep,
        "no completedAt"
    );
    d.status.as_mut().unwrap().completed_at = Some(Time(ts("2026-01-01T00:01:00Z")));
    assert_eq!(
        expiry(&d, ts("2026-01-01T00:01:30Z")),
        Expiry::After(Duration::from_secs(30))
    );
    assert_eq!(expiry(&d, ts("2026-01-01T00:02:00Z")), Expiry::Delete);
    d.spec.ttl_seconds_after_finished = Some(0);
    assert_eq!(expiry(&d, ts("2026-01-01T00:01:00Z")), Expiry::Delete);
    assert!(is_finished(&d));
    assert!(!is_finished(&defrag(
        "b",
        "etcd",
        "2026-01-01T00:00:00Z",
        Some(DefragPhase::Running)
    )));
    assert!(!is_finished(&defrag(
        "b",
        "etcd",
        "2026-01-01T00:00:00Z",
        None
    )));
}

#[test]
fn the_health_gate_wants_every_voter_healthy() {
    assert_eq!(health_gate(&healthy()), Ok(()));
    let mut cases: Vec<(&str, ClusterFacts, &str)> = Vec::new();
    let mut f = healthy();
    f.members.pop();
    cases.push(("short of replicas", f, "runs 2 members and wants 3"));
    let mut f = healthy();
    f.members[0].status = None;
    f.members[0].problem = Some("connection refused".into());
    cases.push(("no Status", f, "etcd-0 does not answer: connection refused"));
    let mut f = healthy();
    f.members[2].healthy = false;
    cases.push(("health read failed", f, "etcd-2 is not healthy"));
    let mut f = healthy();
    f.members[1].status.as_mut().unwrap().is_learner = true;
    cases.push(("a learner", f, "etcd-1 is still a learner"));
    let mut f = healthy();
    f.members[0].status.as_mut().unwrap().leader = 0;
    cases.push(("no leader", f, "etcd-0 knows no leader"));
    let mut f = healthy();
    f.members[0].status.as_mut().unwrap().leader = 3;
    cases.push(("disagreement", f, "disagree on the leader"));
    let mut f = healthy();
    f.members[0].status.as_mut().unwrap().errors = vec!["memberID:1 alarm:CORRUPT".into()];
    cases.push(("a CORRUPT error", f, "reports: memberID:1 alarm:CORRUPT"));
    let mut f = healthy();
    f.alarms = vec![Alarm {
        member_id: 3,
        kind: AlarmKind::Corrupt,
    }];
    cases.push(("a CORRUPT alarm", f, "CORRUPT alarm"));
    let mut f = healthy();
    f.deleting = true;
    cases.push(("deleting", f, "being deleted"));
    let mut f = healthy();
    f.members.clear();
    f.replicas = 0;
    cases.push(("no members", f, "no running members"));
    for (what, facts, expected) in cases {
        let err = health_gate(&facts).expect_err(what);
        assert!(err.contains(expected), "{what}: {err}");
    }
    // NOSPACE is what a defragmentation cures: it does not hold the run.
    let mut f = healthy();
    f.members[0].status.as_mut().unwrap().errors = vec!["memberID:1 alarm:NOSPACE".into()];
    f.alarms = vec![Alarm {
        member_id: 1,
        kind: AlarmKind::NoSpace,
    }];
    assert_eq!(health_gate(&f), Ok(()));
}

#[test]
fn followers_are_planned_first_and_the_leader_last() {
    let rows = plan_members(&healthy());
    let order: Vec<(&str, Option<MemberRole>)> =
        rows.iter().map(|r| (r.name.as_str(), r.role)).collect();
    assert_eq!(
        order,
        [
            ("etcd-0", Some(MemberRole::Follower)),
            ("etcd-2", Some(MemberRole::Follower)),
            ("etcd-1", Some(MemberRole::Leader)),
        ]
    );
    assert!(
        rows.iter()
            .all(|r| r.outcome == Some(DefragOutcome::Pending))
    );
    assert_eq!(healthy().leader_name(), Some("etcd-1"));
}

fn rows(outcomes: &[(&str, DefragOutcome)]) -> Vec<MemberDefragStatus> {
    outcomes
        .iter()
        .map(|(n, o)| MemberDefragStatus {
            name: n.to_string(),
            outcome: Some(*o),
            ..Default::default()
        })
        .collect()
}

#[test]
fn the_next_member_is_a_pending_follower_and_the_leader_only_last() {
    use DefragOutcome::*;
    let planned = rows(&[("a", Pending), ("b", Pending), ("c", Pending)]);
    assert_eq!(next_member(&planned, Some("c")), Some("a"));
    // Leadership moved to the first planned follower: it waits until last.
    assert_eq!(next_member(&planned, Some("a")), Some("b"));
    let two_done = rows(&[("a", Defragmented), ("b", Skipped), ("c", Pending)]);
    assert_eq!(next_member(&two_done, Some("c")), Some("c"));
    let leader_left = rows(&[("a", Pending), ("b", Failed), ("c", Defragmented)]);
    assert_eq!(next_member(&leader_left, Some("a")), Some("a"));
    assert_eq!(next_member(&planned, None), Some("a"));
    let all_done = rows(&[("a", Defragmented), ("b", Skipped), ("c", Failed)]);
    assert_eq!(next_member(&all_done, Some("a")), None);
    assert_eq!(next_member(&[], None), None);
}

#[test]
fn marking_records_sizes_role_and_the_count() {
    let now = ts("2026-01-01T00:00:00Z");
    let mut status = EtcdDefragStatus {
        members: Some(rows(&[
            ("a", DefragOutcome::Pending),
            ("b", DefragOutcome::Pending),
        ])),
        ..Default::default()
    };
    mark_member(
        &mut status,
        "a",
        MemberRole::Follower,
        DefragOutcome::Defragmented,
        None,
        Some(100),
        Some(40),
        now,
    );
    mark_member(
        &mut status,
        "b",
        MemberRole::Leader,
        DefragOutcome::Skipped,
        Some("BelowThreshold"),
        Some(100),
        None,
        now,
    );
    mark_member(
        &mut status,
        "zz",
        MemberRole::Leader,
        DefragOutcome::Defragmented,
        None,
        None,
        None,
        now,
    );
    let m = status.members.as_ref().unwrap();
    assert_eq!(m[0].reclaimed_bytes, Some(60));
    assert_eq!(
        (m[0].db_size_before, m[0].db_size_after),
        (Some(100), Some(40))
    );
    assert_eq!(m[0].role, Some(MemberRole::Follower));
    assert_eq!(m[0].finished_at, Some(Time(now)));
    assert_eq!(m[1].outcome, Some(DefragOutcome::Skipped));
    assert_eq!(m[1].reason.as_deref(), Some("BelowThreshold"));
    assert_eq!(m[1].reclaimed_bytes, None);
    assert_eq!(
        status.defragmented,
        Some(1),
        "an unknown member is not counted"
    );
    // A defragmentation that grew the file (3.4 with little to reclaim) reclaims zero.
    let mut grown = EtcdDefragStatus {
        members: Some(rows(&[("a", DefragOutcome::Pending)])),
        ..Default::default()
    };
    mark_member(
        &mut grown,
        "a",
        MemberRole::Leader,
        DefragOutcome::Defragmented,
        None,
        Some(10),
        Some(12),
        now,
    );
    assert_eq!(grown.members.unwrap()[0].reclaimed_bytes, Some(0));
}

#[test]
fn a_sweep_fails_when_any_member_failed() {
    use DefragOutcome::*;
    let (phase, reason, message) = sweep_result(&rows(&[("a", Defragmented), ("b", Skipped)]));
    assert_eq!((phase, reason), (DefragPhase::Complete, "Complete"));
    assert_eq!(message, "1 of 2 members defragmented, 1 skipped, 0 failed");
    let (phase, reason, _) = sweep_result(&rows(&[("a", Defragmented), ("b", Failed)]));
    assert_eq!((phase, reason), (DefragPhase::Failed, "MemberFailed"));
    let (phase, _, _) = sweep_result(&rows(&[("a", Skipped)]));
    assert_eq!(
        phase,
        DefragPhase::Complete,
        "all skipped is a complete run"
    );
}

#[test]
fn nospace_is_disarmed_only_where_a_defragmented_backend_is_under_quota() {
    let nospace = |id| Alarm {
        member_id: id,
        kind: AlarmKind::NoSpace,
    };
    let corrupt = Alarm {
        member_id: 1,
        kind: AlarmKind::Corrupt,
    };
    let ids = vec![
        ("a".to_string(), 1),
        ("b".to_string(), 2),
        ("c".to_string(), 3),
    ];
    let mut members = rows(&[
        ("a", DefragOutcome::Defragmented),
        ("b", DefragOutcome::Defragmented),
        ("c", DefragOutcome::Skipped),
    ]);
    members[0].db_size_after = Some(50);
    members[1].db_size_after = Some(150);
    members[2].db_size_before = Some(10);
    let alarms = vec![nospace(1), nospace(2), nospace(3), nospace(9), corrupt];
    assert_eq!(
        alarms_to_disarm(&alarms, &members, &ids, 100),
        vec![nospace(1), nospace(3)]
    );
    let skipped_only = rows(&[("a", DefragOutcome::Skipped)]);
    assert!(alarms_to_disarm(&alarms, &skipped_only, &ids, 100).is_empty());
}

#[test]
fn conditions_change_only_when_their_content_does() {
    let t0 = ts("2026-01-01T00:00:00Z");
    let t1 = ts("2026-01-01T00:01:00Z");
    let mut status = EtcdDefragStatus::default();
    assert!(set_condition(
        &mut status,
        false,
        "Queued",
        "behind a",
        Some(1),
        t0
    ));
    assert!(!set_condition(
        &mut status,
        false,
        "Queued",
        "behind a",
        Some(1),
        t1
    ));
    assert!(set_condition(
        &mut status,
        false,
        "ClusterNotHealthy",
        "x",
        Some(1),
        t1
    ));
    let c = &status.conditions.as_ref().unwrap()[0];
    assert_eq!(
        c.last_transition_time,
        Time(t0),
        "same status: no transition"
    );
    assert!(set_condition(
        &mut status,
        true,
        "Running",
        "y",
        Some(1),
        t1
    ));
    let c = &status.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (c.status.as_str(), c.last_transition_time.clone()),
        ("True", Time(t1))
    );
    assert_eq!(status.conditions.unwrap().len(), 1);
}
