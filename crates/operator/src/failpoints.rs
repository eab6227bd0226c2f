//! Crash points for the crash-safety tests: the operator can be made to die right after an
//! etcd call or a Kubernetes write, before anything records what it did, as a crash would.
//!
//! Compiled in only with the `failpoints` feature (the tests turn it on); without it the
//! functions here do nothing. With it, the points are inert unless
//! `ETCD_OPERATOR_FAILPOINTS_DIR` names a directory: a point fires when a file of its name
//! exists there. Firing removes the file, then exits the process at once (no destructors, no
//! graceful shutdown, no Lease release). The file is what makes "dies there exactly once"
//! observable: the test arms a point by creating it, sees it fire when it disappears, and the
//! process the kubelet starts next passes the point unharmed. A file rather than an
//! environment variable, because the restarted process has the environment of the dead one.

use crate::plan::Step;

/// The crash points, each named after the call it follows.
pub const CRASH_POINTS: &[&str] = &[
    "after_member_add",
    "after_member_promote",
    "after_member_remove",
    "after_move_leader",
    "after_phase_write",
    "after_pod_create",
    "after_pod_delete",
    "after_pvc_create",
    "after_pvc_delete",
    "after_member_create",
    "after_member_delete",
    "after_finalizer_remove",
    "after_pod_start_set",
    "after_member_version_set",
    "after_member_config_set",
    "after_member_storage_set",
    "after_pvc_resize",
    "after_alarm_disarm",
    "after_pod_metadata_patch",
    "after_metadata_patch",
    "after_scale_in_mark",
    "after_pvc_owner_set",
    "after_member_adopt",
    "after_downgrade_enable",
];

/// The environment variable naming the directory of armed points.
pub const FAILPOINTS_DIR_ENV: &str = "ETCD_OPERATOR_FAILPOINTS_DIR";

/// The exit status of a process that died at a crash point.
pub const CRASH_EXIT_CODE: i32 = 86;

/// Registers every crash point when `ETCD_OPERATOR_FAILPOINTS_DIR` is set; does nothing
/// otherwise (or without the `failpoints` feature). Returns whether the points are live.
pub fn setup_from_env() -> bool {
    #[cfg(feature = "failpoints")]
    {
        let Some(dir) = std::env::var_os(FAILPOINTS_DIR_ENV).filter(|d| !d.is_empty()) else {
            return false;
        };
        let dir = std::path::PathBuf::from(dir);
        for name in CRASH_POINTS {
            let dir = dir.clone();
            // The names are distinct; registering a callback cannot fail.
            let _ = fail::cfg_callback(*name, move || crash_if_armed(&dir, name));
        }
        tracing::warn!(dir = %dir.display(), "crash points are live (a test build)");
        true
    }
    #[cfg(not(feature = "failpoints"))]
    false
}

/// The crash point right after `step` succeeded, if it has one.
pub fn after_step(step: &Step) {
    #[cfg(feature = "failpoints")]
    match step {
        Step::AddLearner { .. } => fail::fail_point!("after_member_add"),
        Step::PromoteLearner { .. } => fail::fail_point!("after_member_promote"),
        Step::RemoveEtcdMember { .. } => fail::fail_point!("after_member_remove"),
        Step::MoveLeader { .. } => fail::fail_point!("after_move_leader"),
        Step::EnableDowngrade { .. } => fail::fail_point!("after_downgrade_enable"),
        Step::DisarmAlarm { .. } => fail::fail_point!("after_alarm_disarm"),
        Step::CreatePod(_) => fail::fail_point!("after_pod_create"),
        Step::DeletePod { .. } => fail::fail_point!("after_pod_delete"),
        Step::CreatePvc(_) => fail::fail_point!("after_pvc_create"),
        Step::DeletePvc { .. } => fail::fail_point!("after_pvc_delete"),
        Step::CreateMember(_) => fail::fail_point!("after_member_create"),
        Step::DeleteMember { .. } => fail::fail_point!("after_member_delete"),
        Step::RemoveFinalizer { .. } => fail::fail_point!("after_finalizer_remove"),
        Step::SetPodStart { .. } => fail::fail_point!("after_pod_start_set"),
        Step::SetMemberVersion { .. } => fail::fail_point!("after_member_version_set"),
        Step::SetMemberConfig { .. } => fail::fail_point!("after_member_config_set"),
        Step::SetMemberStorage { .. } => fail::fail_point!("after_member_storage_set"),
        Step::ResizePvc { .. } => fail::fail_point!("after_pvc_resize"),
        Step::PatchPodMetadata { .. } => fail::fail_point!("after_pod_metadata_patch"),
        Step::PatchMetadata { .. } => fail::fail_point!("after_metadata_patch"),
        Step::MarkScaleIn { .. } => fail::fail_point!("after_scale_in_mark"),
        Step::SetPvcOwner { .. } => fail::fail_point!("after_pvc_owner_set"),
        Step::AdoptMember { .. } => fail::fail_point!("after_member_adopt"),
        _ => {}
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = step;
}

/// The crash point right after a member status write that changed its phase.
pub fn after_phase_write() {
    #[cfg(feature = "failpoints")]
    fail::fail_point!("after_phase_write");
}

/// Exits the process if `<dir>/<name>` exists, after removing it. A point whose file cannot
/// be removed does not fire: it would fire again in every new process.
#[cfg(feature = "failpoints")]
fn crash_if_armed(dir: &std::path::Path, name: &str) {
    let armed = dir.join(name);
    if std::fs::remove_file(&armed).is_ok() {
        eprintln!("crash point {name}: exiting with status {CRASH_EXIT_CODE}");
        std::process::exit(CRASH_EXIT_CODE);
    }
}

#[cfg(all(test, feature = "failpoints"))]
mod tests {
    use super::*;

    #[test]
    fn an_unarmed_point_does_not_fire() {
        let dir = tempfile::tempdir().unwrap();
        // No file: passing the point returns.
        crash_if_armed(dir.path(), "after_member_add");
        assert!(CRASH_POINTS.contains(&"after_member_add"));
    }
}
