//! Version rollouts: the upgrade path check, refusals before anything moves, a member that
//! cannot start on its new version, and the way back.

use etcd_operator_api::MemberPhase;

use super::fixtures::*;
use crate::domain::versions::EtcdVersion;
use crate::plan::rules::version_path::{PathFacts, VersionPath, check_path, parse_version};
use crate::plan::{Step, WaitReason};

#[test]
fn versions_parse_as_major_minor_patch_only() {
    assert_eq!(parse_version("3.5.1"), Some((3, 5, 1)));
    assert_eq!(parse_version("3.4.23"), Some((3, 4, 23)));
    for bad in ["3.5", "3.5.1.2", "x.5.1", "", "3.5.-1"] {
        assert_eq!(parse_version(bad), None, "{bad}");
    }
}

/// The path facts of a cluster whose members all run `lowest` at least.
fn facts(cluster: (u64, u64), lowest: &str, auth: bool) -> PathFacts {
    PathFacts {
        cluster,
        lowest: EtcdVersion::parse(lowest).map(|v| (v, "etcd-1".to_string())),
        auth,
    }
}

#[test]
fn the_upgrade_path_allows_patches_one_minor_up_from_etcds_floor_and_one_down_from_3_6() {
    let ok = [
        ((3, 4), "3.4.23", "3.4.1", false, VersionPath::Patch),
        ((3, 4), "3.4.1", "3.4.23", true, VersionPath::Patch),
        ((3, 4), "3.4.23", "3.5.1", false, VersionPath::Upgrade),
        ((3, 5), "3.5.1", "3.5.0", true, VersionPath::Patch),
        ((3, 5), "3.5.1", "3.5.36", false, VersionPath::Patch),
        ((3, 5), "3.5.32", "3.6.0", false, VersionPath::Upgrade),
        ((3, 5), "3.5.36", "3.6.17", true, VersionPath::Upgrade),
        ((3, 6), "3.6.11", "3.7.4", false, VersionPath::Upgrade),
        ((3, 7), "3.7.4", "3.6.17", true, VersionPath::Downgrade),
        ((3, 6), "3.6.17", "3.5.36", false, VersionPath::Downgrade),
    ];
    for (cluster, lowest, target, auth, path) in ok {
        assert_eq!(
            check_path(&facts(cluster, lowest, auth), target),
            Ok(path),
            "{cluster:?} → {target}"
        );
    }
    let refused = [
        (
            (3, 5),
            "3.5.1",
            "3.4.23",
            false,
            "downgrade below etcd's cluster version 3.5",
        ),
        ((3, 4), "3.4.23", "3.6.0", false, "skips a minor version"),
        (
            (3, 4),
            "3.4.23",
            "4.0.0",
            false,
            "not a version this operator runs",
        ),
        (
            (3, 6),
            "3.6.17",
            "3.8.0",
            false,
            "not a version this operator runs",
        ),
        ((3, 5), "3.5.36", "3.7.0", false, "skips a minor version"),
        (
            (3, 4),
            "3.4.23",
            "3.5.1",
            true,
            "rules out a rolling upgrade from 3.4 with auth enabled",
        ),
        ((3, 5), "3.5.1", "3.4.23", true, "downgrade"),
        // etcd's floors: the patch to take first is named.
        ((3, 5), "3.5.1", "3.6.17", false, "3.5.32 or later first"),
        (
            (3, 5),
            "3.5.31",
            "3.6.0",
            false,
            "Set spec.version to 3.5.32",
        ),
        ((3, 6), "3.6.10", "3.7.4", false, "3.6.11 or later first"),
        // More than one minor down.
        ((3, 7), "3.7.4", "3.5.36", false, "more than one minor"),
    ];
    for (cluster, lowest, target, auth, why) in refused {
        let err = check_path(&facts(cluster, lowest, auth), target).unwrap_err();
        assert!(err.contains(why), "{cluster:?} → {target}: {err}");
        assert!(
            err.contains("allowed from etcd's cluster version") || auth || err.contains("first"),
            "{err}"
        );
    }
    // The floor's refusal names the member below it and etcd's guide.
    let err = check_path(&facts((3, 5), "3.5.1", false), "3.6.17").unwrap_err();
    assert!(err.contains("etcd-1 runs 3.5.1"), "{err}");
    assert!(
        err.contains("https://etcd.io/docs/v3.6/upgrades/upgrade_3_6/"),
        "{err}"
    );
}

/// `cluster_on` of the simulation, for table tests.
fn on(n: u32, old: &str, new: &str) -> Fx {
    let mut fx = Fx::healthy(n);
    let image = fx.obs.settings.etcd_image(old);
    for i in 0..n {
        let m = name(i);
        fx.member_mut(&m).spec.version = old.to_string();
        fx.member_mut(&m).status.get_or_insert_default().version = Some(old.to_string());
        fx.pod_mut(&m).image = Some(image.clone());
        for o in &mut fx.obs.etcd.endpoints {
            if o.endpoint == client(&m)
                && let Ok(s) = &mut o.status
            {
                s.version = old.to_string();
            }
        }
    }
    fx.obs.cluster.spec.version = new.to_string();
    fx.status_mut().observed.as_mut().unwrap().version = new.to_string();
    fx
}

fn refused_with(fx: &Fx) -> String {
    match fx.step() {
        Step::Wait {
            reason: WaitReason::UpgradeRefused,
            message,
        } => message,
        other => panic!("expected UpgradeRefused, got {other:?}"),
    }
}

#[test]
fn refused_paths_move_nothing_and_say_what_is_allowed() {
    // Downgrade after the upgrade completed (every member runs 3.5).
    let msg = refused_with(&on(3, "3.5.1", "3.4.23"));
    assert!(
        msg.contains("downgrade below etcd's cluster version 3.5"),
        "{msg}"
    );
    assert!(msg.contains("3.5.x"), "{msg}");
    // Skipped minor, unknown version.
    assert!(refused_with(&on(3, "3.4.23", "3.6.0")).contains("skips a minor"));
    assert!(refused_with(&on(3, "3.6.0", "3.7.1")).contains("3.6.11 or later first"));
    assert!(refused_with(&on(3, "3.5.1", "3.6.17")).contains("3.5.32 or later first"));
    // Auth on, 3.4 → 3.5.
    let mut fx = on(3, "3.4.23", "3.5.1");
    fx.status_mut().auth_enabled = Some(true);
    assert!(refused_with(&fx).contains("auth"));
    // The Progressing condition carries the refusal, and the Event is a Warning.
    let fx = on(3, "3.4.23", "3.6.0");
    let plan = fx.plan();
    let (status, reason) = cluster_condition(&fx, &plan, "Progressing");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "UpgradeRefused")
    );
    assert_eq!(plan.step.event_type(), crate::build::EventType::Warning);
}

#[test]
fn mid_rollout_the_cluster_version_is_the_lowest_a_member_runs() {
    // etcd-1 runs 3.5.1 already, the others 3.4.23: going back to 3.4 is allowed.
    let mut fx = on(3, "3.4.23", "3.4.23");
    let image = fx.obs.settings.etcd_image("3.5.1");
    fx.member_mut("etcd-1").spec.version = "3.5.1".into();
    fx.pod_mut("etcd-1").image = Some(image);
    for o in &mut fx.obs.etcd.endpoints {
        if o.endpoint == client("etcd-1")
            && let Ok(s) = &mut o.status
        {
            s.version = "3.5.1".into();
        }
    }
    assert_eq!(
        fx.step(),
        Step::SetMemberVersion {
            member: "etcd-1".into(),
            version: "3.4.23".into()
        }
    );
}

/// etcd-1 was set to `bad` and its Pod cannot pull the image; the others run `good`.
fn failing(good: &str, bad: &str) -> Fx {
    let mut fx = on(3, good, bad);
    let image = fx.obs.settings.etcd_image(bad);
    fx.member_mut("etcd-1").spec.version = bad.into();
    let pod = fx.pod_mut("etcd-1");
    pod.image = Some(image);
    pod.ready = false;
    pod.waiting_reason = Some("ImagePullBackOff".into());
    fx.answer("etcd-1", Answer::Down);
    fx.set_phase("etcd-1", MemberPhase::Ready, at(0));
    fx
}

#[test]
fn a_member_that_cannot_start_stops_the_rollout_and_is_rolled_back_on_request() {
    let fx = failing("3.5.1", "3.6.0");
    let plan = fx.plan();
    let Step::Wait {
        reason: WaitReason::UpgradeFailed,
        message,
    } = &plan.step
    else {
        panic!("expected UpgradeFailed, got {:?}", plan.step);
    };
    assert!(
        message.contains("etcd-1 does not start on etcd 3.6.0 (ImagePullBackOff)"),
        "{message}"
    );
    assert!(
        message.contains("Set spec.version back to 3.5.1"),
        "{message}"
    );
    assert!(
        message.contains("cluster version is still 3.5"),
        "{message}"
    );
    let (status, reason) = cluster_condition(&fx, &plan, "Progressing");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "UpgradeFailed")
    );

    // The spec goes back: the latch takes it at once (the target was not reached).
    let mut fx = failing("3.5.1", "3.6.0");
    fx.obs.cluster.spec.version = "3.5.1".into();
    let plan = fx.plan();
    let latched = plan
        .cluster_status
        .as_ref()
        .unwrap()
        .observed
        .as_ref()
        .unwrap();
    assert_eq!(latched.version, "3.5.1");
    fx.write_statuses(&plan);
    assert_eq!(
        fx.step(),
        Step::SetMemberVersion {
            member: "etcd-1".into(),
            version: "3.5.1".into()
        }
    );
    fx.member_mut("etcd-1").spec.version = "3.5.1".into();
    assert!(
        matches!(fx.step(), Step::DeletePod { ref member, .. } if member == "etcd-1"),
        "{:?}",
        fx.step()
    );
}

#[test]
fn a_starting_pod_on_the_new_version_is_not_a_failure() {
    let mut fx = failing("3.4.23", "3.5.1");
    fx.pod_mut("etcd-1").waiting_reason = None;
    fx.pod_mut("etcd-1").restart_count = 0;
    assert!(
        !matches!(
            fx.step(),
            Step::Wait {
                reason: WaitReason::UpgradeFailed,
                ..
            }
        ),
        "{:?}",
        fx.step()
    );
}

#[test]
fn a_member_counts_as_ready_only_with_its_pod_ready() {
    let mut fx = Fx::healthy(3);
    fx.pod_mut("etcd-2").ready = false;
    let plan = fx.plan();
    assert!(
        matches!(&plan.step, Step::Wait { reason: WaitReason::WaitingForMember, message } if message.contains("etcd-2")),
        "{:?}",
        plan.step
    );
    let status = planned_member_status(&fx, &plan, "etcd-2");
    let ready = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "PodNotReady")
    );
    assert_eq!(plan.cluster_status.unwrap().ready_members, Some(2));
}

#[test]
fn a_pod_without_a_config_digest_is_left_alone_and_a_changed_digest_restarts_it() {
    let mut fx = Fx::healthy(3);
    assert_eq!(
        fx.step(),
        Step::Idle,
        "Pods of an older operator: no digest, no restart"
    );
    fx.pod_mut("etcd-2").config_digest = Some("something-else".into());
    assert!(
        matches!(fx.step(), Step::DeletePod { ref member, .. } if member == "etcd-2"),
        "{:?}",
        fx.step()
    );
}

#[test]
fn a_refused_target_gives_way_to_the_next_spec_at_once() {
    let mut fx = on(3, "3.5.1", "3.4.23");
    fx.status_mut().progress_deadline = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        at(200_000),
    ));
    refused_with(&fx);
    fx.obs.cluster.spec.version = "3.5.1".into();
    let plan = fx.plan();
    let latched = plan
        .cluster_status
        .as_ref()
        .unwrap()
        .observed
        .as_ref()
        .unwrap();
    assert_eq!(latched.version, "3.5.1");
    fx.write_statuses(&plan);
    assert_eq!(fx.step(), Step::Idle);
}

#[test]
fn a_rollout_past_its_progress_deadline_is_reported_as_not_progressing() {
    let mut fx = on(3, "3.4.23", "3.5.1");
    // etcd-1 is on its way (its Pod starting), the deadline has passed.
    let image = fx.obs.settings.etcd_image("3.5.1");
    fx.member_mut("etcd-1").spec.version = "3.5.1".into();
    fx.pod_mut("etcd-1").image = Some(image);
    fx.pod_mut("etcd-1").ready = false;
    fx.status_mut().progress_deadline = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        at(99_000),
    ));
    let plan = fx.plan();
    let (status, reason) = cluster_condition(&fx, &plan, "Progressing");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ProgressDeadlineExceeded")
    );
    // Before the deadline the same state is progress.
    fx.status_mut().progress_deadline = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        at(200_000),
    ));
    let plan = fx.plan();
    assert_eq!(
        cluster_condition(&fx, &plan, "Progressing").0,
        "True",
        "{:?} {:?}",
        plan.step,
        cluster_condition(&fx, &plan, "Progressing")
    );
}

#[test]
fn repairs_of_the_other_members_still_run_while_an_upgrade_failed() {
    // etcd-2's Pod is gone (a node went away) while etcd-1 cannot start on 3.6.0: etcd-2 is
    // brought back on its data, and etcd-1 keeps its UpgradeFailed report.
    let mut fx = failing("3.5.1", "3.6.0");
    fx.without_pod("etcd-2");
    fx.answer("etcd-2", Answer::Down);
    let plan = fx.plan();
    assert!(
        matches!(&plan.step, Step::CreatePod(pod) if pod.metadata.name.as_deref() == Some("etcd-2")),
        "{:?}",
        plan.step
    );
    let ready = planned_member_status(&fx, &plan, "etcd-1")
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .expect("etcd-1's Ready condition");
    assert_eq!(ready.reason, "UpgradeFailed", "{ready:?}");

    // Five members: another member's crash loop climbs the ladder (the others keep quorum),
    // the failed one does not, however long it fails.
    let mut fx = on(5, "3.5.1", "3.6.0");
    let image = fx.obs.settings.etcd_image("3.6.0");
    fx.member_mut("etcd-1").spec.version = "3.6.0".into();
    let pod = fx.pod_mut("etcd-1");
    pod.image = Some(image);
    pod.ready = false;
    pod.waiting_reason = Some("CrashLoopBackOff".into());
    pod.restart_count = 9;
    fx.answer("etcd-1", Answer::Down);
    assert!(
        matches!(
            fx.step(),
            Step::Wait {
                reason: WaitReason::UpgradeFailed,
                ..
            }
        ),
        "the failed member alone: {:?}",
        fx.step()
    );
    let pod = fx.pod_mut("etcd-3");
    pod.ready = false;
    pod.waiting_reason = Some("CrashLoopBackOff".into());
    pod.restart_count = 4;
    fx.answer("etcd-3", Answer::Down);
    let plan = fx.plan();
    assert_eq!(
        plan.step,
        Step::SetPhase {
            member: "etcd-3".into(),
            phase: MemberPhase::Recreating
        }
    );
    assert!(
        plan.member_statuses
            .iter()
            .all(|w| w.member != "etcd-1" || w.status.phase == Some(MemberPhase::Ready)),
        "etcd-1 stays out of the ladder"
    );
}

#[test]
fn a_replaced_member_remembers_the_version_it_ran() {
    // A memory-backed member replaced during the rollout forgets its etcd identity, not the
    // version it ran: the rollout can still tell that it failed on the new version.
    let mut fx = on(3, "3.5.1", "3.6.0");
    fx.make_memory_backed();
    fx.member_mut("etcd-1").spec.version = "3.6.0".into();
    fx.without_pod("etcd-1");
    fx.etcd_remove("etcd-1");
    fx.set_phase("etcd-1", MemberPhase::Replacing, at(0));
    let plan = fx.plan();
    let status = planned_member_status(&fx, &plan, "etcd-1");
    assert_eq!(status.phase, Some(MemberPhase::Provisioning), "{plan:?}");
    assert_eq!(status.member_id, None);
    assert_eq!(status.version.as_deref(), Some("3.5.1"));

    // Joined again as a learner on 3.6.0, which does not start: the rollout stops there
    // instead of replacing it again and again.
    fx.write_statuses(&plan);
    fx.etcd_add("etcd-1", true, false);
    let mut pod = running_pod("etcd-1");
    pod.image = Some(fx.obs.settings.etcd_image("3.6.0"));
    pod.ready = false;
    pod.waiting_reason = Some("CrashLoopBackOff".into());
    pod.restart_count = 5;
    fx.with_pod("etcd-1", pod);
    fx.answer("etcd-1", Answer::Down);
    match fx.step() {
        Step::Wait {
            reason: WaitReason::UpgradeFailed,
            message,
        } => assert!(
            message.contains("Set spec.version back to 3.5.1"),
            "{message}"
        ),
        other => panic!("expected UpgradeFailed, got {other:?}"),
    }
}

#[test]
fn etcds_own_cluster_version_bounds_a_downgrade() {
    // Every member was set back to 3.4.23 mid-rollout, but etcd already states 3.5 (say a
    // member that ran 3.5.1 is down with a stale status): the downgrade is refused.
    let mut fx = on(3, "3.4.23", "3.4.23");
    fx.obs.etcd.cluster_version = Some((3, 5));
    fx.member_mut("etcd-1").spec.version = "3.5.1".into();
    let msg = refused_with(&fx);
    assert!(
        msg.contains("downgrade below etcd's cluster version 3.5"),
        "{msg}"
    );
    // etcd still states 3.4 while every member runs 3.5 (the leader raises it within
    // seconds): the members' versions are the higher bound.
    let mut fx = on(3, "3.5.1", "3.4.23");
    fx.obs.etcd.cluster_version = Some((3, 4));
    assert!(refused_with(&fx).contains("downgrade below etcd's cluster version 3.5"));
    // Not stated (not asked, or unreadable): the members' versions stand in.
    let mut fx = on(3, "3.4.23", "3.5.1");
    fx.obs.etcd.cluster_version = None;
    assert!(
        matches!(fx.step(), Step::SetMemberVersion { .. }),
        "{:?}",
        fx.step()
    );
}

/// Pods as this operator records them: the version and hash it rendered, and an image an
/// admission webhook rewrote to a mirror and a digest.
fn rewritten_on(fx: &mut Fx, version: &str) {
    for i in 0..3 {
        let m = name(i);
        let member = fx.member_mut(&m).clone();
        let hash = crate::build::member_rendered_hash(&member, &fx.obs.settings).unwrap();
        let pod = fx.pod_mut(&m);
        pod.rendered = Some((version.to_string(), hash));
        pod.image = Some(format!(
            "mirror.example.com/coreos/etcd:v{version}@sha256:{}",
            "0123abcd".repeat(8)
        ));
    }
}

#[test]
fn a_members_wanted_hash_is_rendered_once_a_pass_and_is_the_rendering() {
    use crate::plan::context::Context;
    let fx = Fx::healthy(3);
    let ctx = Context::new(&fx.obs, now());
    for m in &ctx.members {
        let first = ctx.wanted_rendered_hash(m).expect("renderable");
        assert_eq!(
            Some(first.to_string()),
            crate::build::member_rendered_hash(&m.observed.member, &fx.obs.settings)
        );
        // Asked again in the same pass: the same string, not a new rendering.
        let again = ctx.wanted_rendered_hash(m).unwrap();
        assert!(std::ptr::eq(first, again));
    }
    // Each member its own hash (their names are in their command lines).
    let hashes: std::collections::BTreeSet<_> = ctx
        .members
        .iter()
        .map(|m| ctx.wanted_rendered_hash(m).unwrap())
        .collect();
    assert_eq!(hashes.len(), 3);
    // A new pass renders again: a spec changed between passes is seen.
    let mut fx = Fx::healthy(3);
    let ctx = Context::new(&fx.obs, now());
    let before = ctx
        .wanted_rendered_hash(&ctx.members[0])
        .unwrap()
        .to_string();
    fx.member_mut(&name(0)).spec.version = "3.6.18".into();
    let ctx = Context::new(&fx.obs, now());
    assert_ne!(ctx.wanted_rendered_hash(&ctx.members[0]).unwrap(), before);
}

#[test]
fn a_pod_is_judged_by_what_the_operator_rendered_not_by_its_image() {
    let mut fx = on(3, "3.6.17", "3.6.17");
    rewritten_on(&mut fx, "3.6.17");
    assert_eq!(fx.step(), Step::Idle, "a rewritten image is no change");
    // A real version change still rolls, the follower first.
    fx.obs.cluster.spec.version = "3.6.18".into();
    fx.status_mut().observed.as_mut().unwrap().version = "3.6.18".into();
    assert_eq!(
        fx.step(),
        Step::SetMemberVersion {
            member: "etcd-1".into(),
            version: "3.6.18".into()
        }
    );
    // Once the member's spec moved, its Pod (rendered for 3.6.17) is restarted as an upgrade.
    fx.member_mut("etcd-1").spec.version = "3.6.18".into();
    match fx.step() {
        Step::DeletePod { member, .. } => assert_eq!(member, "etcd-1"),
        other => panic!("expected etcd-1's Pod deleted, got {other:?}"),
    }
    let plan = fx.plan();
    assert_eq!(
        member_condition(&fx, &plan, "etcd-1", "Ready").1,
        "Upgrading"
    );
    // A Pod whose record differs in its command line (rendered by another operator version)
    // is restarted as a configuration change.
    let mut fx = on(3, "3.6.17", "3.6.17");
    rewritten_on(&mut fx, "3.6.17");
    fx.pod_mut("etcd-2").rendered = Some(("3.6.17".into(), "000000000000".into()));
    match fx.step() {
        Step::DeletePod { member, .. } => assert_eq!(member, "etcd-2"),
        other => panic!("expected etcd-2's Pod deleted, got {other:?}"),
    }
    assert_eq!(
        member_condition(&fx, &fx.plan(), "etcd-2", "Ready").1,
        "ConfigChanged"
    );
}

#[test]
fn an_unsupported_version_is_refused_before_anything_starts() {
    let mut fx = on(3, "3.6.17", "3.8.0");
    match fx.step() {
        Step::Wait {
            reason: WaitReason::UnsupportedVersion,
            message,
        } => {
            assert!(message.contains("3.4.x to 3.7.x"), "{message}");
            assert!(message.contains("3.8.0"), "{message}");
        }
        other => panic!("expected UnsupportedVersion, got {other:?}"),
    }
    let plan = fx.plan();
    assert_eq!(
        cluster_condition(&fx, &plan, "Progressing").1,
        "UnsupportedVersion"
    );
    assert_eq!(plan.step.event_type(), crate::build::EventType::Warning);
    // A new cluster on it creates nothing.
    fx.obs.members.clear();
    assert!(matches!(
        fx.step(),
        Step::Wait {
            reason: WaitReason::UnsupportedVersion,
            ..
        }
    ));
}

/// The condition `type_` of `member`'s planned status: (status, reason).
fn member_condition(
    fx: &Fx,
    plan: &crate::plan::Plan,
    member: &str,
    type_: &str,
) -> (String, String) {
    let c = planned_member_status(fx, plan, member)
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition on {member}"));
    (c.status, c.reason)
}

/// Records on each member's PVC that its data was created with `versions[i]` (`None`: no
/// record, a PVC made before the operator recorded it).
fn data_created_with(fx: &mut Fx, versions: &[Option<&str>]) {
    for (i, v) in versions.iter().enumerate() {
        let pvc = fx
            .observed_member(&name(i as u32))
            .pvc
            .as_mut()
            .expect("a PVC-backed member");
        pvc.annotations.clear();
        if let Some(v) = v {
            pvc.annotations.insert(
                crate::build::DATA_VERSION_ANNOTATION.to_string(),
                v.to_string(),
            );
        }
    }
}

/// The member a `RebuildMember` step names, with its reason sentence.
fn rebuilt(fx: &Fx) -> (String, String) {
    match fx.step() {
        Step::RebuildMember { member, why } => (member, why),
        other => panic!("expected RebuildMember, got {other:?}"),
    }
}

#[test]
fn data_from_before_the_3_5_floor_is_rebuilt_member_by_member_before_3_6() {
    // etcd-io/etcd#19557: every member's data made before the operator recorded its version
    // is rebuilt first, followers before the leader (etcd-0 leads).
    let mut fx = on(3, "3.5.36", "3.6.17");
    data_created_with(&mut fx, &[None, None, None]);
    let plan = fx.plan();
    let (member, why) = rebuilt(&fx);
    assert_eq!(member, "etcd-1");
    for said in [
        "etcd-io/etcd#19557",
        "unrecorded version",
        "3.6.17",
        "joins again",
    ] {
        assert!(why.contains(said), "{said:?} in {why}");
    }
    assert_eq!(plan.step.reason(), "MembershipRebuild");
    assert!(
        plan.step
            .message()
            .starts_with("member etcd-1 is now Replacing: ")
    );
    assert!(
        !plan.step.mutates(),
        "the phase is written first, nothing else"
    );
    let status = planned_member_status(&fx, &plan, "etcd-1");
    assert_eq!(status.phase, Some(MemberPhase::Replacing));
    let (ready, reason) = member_condition(&fx, &plan, "etcd-1", "Ready");
    assert_eq!(
        (ready.as_str(), reason.as_str()),
        ("False", "MembershipRebuild")
    );

    // Data created by a patch below the floor says which; the leader goes last.
    data_created_with(&mut fx, &[Some("3.5.1"), Some("3.5.36"), Some("3.5.36")]);
    let (member, why) = rebuilt(&fx);
    assert_eq!(member, "etcd-0");
    assert!(why.contains("created by etcd 3.5.1"), "{why}");
    data_created_with(&mut fx, &[Some("3.5.36"), Some("3.5.31"), Some("3.5.32")]);
    assert_eq!(rebuilt(&fx).0, "etcd-1");

    // Every member's data from the floor on (or from 3.6, after a downgrade): the rollout
    // itself starts, with the first follower's version.
    data_created_with(&mut fx, &[Some("3.5.32"), Some("3.6.17"), Some("3.5.36")]);
    assert!(
        matches!(fx.step(), Step::SetMemberVersion { ref member, .. } if member == "etcd-1"),
        "{:?}",
        fx.step()
    );
}

#[test]
fn no_rebuild_for_other_paths_a_lone_member_or_a_rollout_already_on_3_6() {
    // Patch upgrades and 3.6 → 3.7 roll at once, recorded data or not.
    for (old, new) in [
        ("3.5.32", "3.5.36"),
        ("3.6.11", "3.7.4"),
        ("3.4.23", "3.5.36"),
    ] {
        let mut fx = on(3, old, new);
        data_created_with(&mut fx, &[None, None, None]);
        assert!(
            matches!(fx.step(), Step::SetMemberVersion { .. }),
            "{old} → {new}: {:?}",
            fx.step()
        );
    }
    // One member cannot leave and join again: it is upgraded as it is.
    let mut fx = on(1, "3.5.36", "3.6.17");
    data_created_with(&mut fx, &[None]);
    assert!(
        matches!(fx.step(), Step::SetMemberVersion { .. }),
        "{:?}",
        fx.step()
    );
    // A member already runs 3.6 (a rollout begun by an older operator): no rebuild now.
    let mut fx = on(3, "3.5.36", "3.6.17");
    data_created_with(&mut fx, &[None, None, None]);
    let image = fx.obs.settings.etcd_image("3.6.17");
    fx.member_mut("etcd-1").spec.version = "3.6.17".into();
    fx.member_mut("etcd-1")
        .status
        .get_or_insert_default()
        .version = Some("3.6.17".into());
    fx.pod_mut("etcd-1").image = Some(image);
    for o in &mut fx.obs.etcd.endpoints {
        if o.endpoint == client("etcd-1")
            && let Ok(s) = &mut o.status
        {
            s.version = "3.6.17".into();
        }
    }
    assert!(
        !matches!(fx.step(), Step::RebuildMember { .. }),
        "{:?}",
        fx.step()
    );
}

#[test]
fn a_memory_backed_members_data_is_as_old_as_its_pod() {
    let mut fx = on(3, "3.5.36", "3.6.17");
    fx.make_memory_backed();
    for (i, v) in ["3.5.36", "3.5.1", "3.5.36"].iter().enumerate() {
        fx.pod_mut(&name(i as u32)).rendered = Some((v.to_string(), "hash".into()));
    }
    let (member, why) = rebuilt(&fx);
    assert_eq!(member, "etcd-1");
    assert!(why.contains("created by etcd 3.5.1"), "{why}");
    fx.pod_mut("etcd-1").rendered = Some(("3.5.36".into(), "hash".into()));
    assert!(
        !matches!(fx.step(), Step::RebuildMember { .. }),
        "{:?}",
        fx.step()
    );
}

#[test]
fn a_rebuild_that_would_cost_quorum_waits_and_says_to_scale_out() {
    let mut fx = on(2, "3.5.36", "3.6.17");
    data_created_with(&mut fx, &[None, None]);
    match fx.step() {
        Step::Wait {
            reason: WaitReason::QuorumAtRisk,
            message,
        } => {
            assert!(message.contains("etcd-1 is to be rebuilt"), "{message}");
            assert!(message.contains("scale the cluster out first"), "{message}");
        }
        other => panic!("expected a QuorumAtRisk wait, got {other:?}"),
    }
}
