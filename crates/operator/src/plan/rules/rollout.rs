//! Rolling version changes (issue 12): a changed `spec.version` rolls the members one at a
//! time on their own data, behind the readiness gate, followers first and the leader last
//! with its leadership moved first (the same mechanism as the CA trust rollout), after the
//! upgrade path has been checked against etcd's cluster version.
//!
//! Per member, progress is read from the objects, so a crash anywhere resumes:
//! 1. `spec.version` of the EtcdMember differs from the target: [`Step::SetMemberVersion`]
//!    (its running Pod is untouched);
//! 2. its Pod's etcd image is not the image of its `spec.version`: leadership moved away if it
//!    leads, then its Pod deleted (its status says `Ready=False Upgrading` first);
//! 3. the repair rule creates the Pod again on its PVC (a memory-backed member is replaced,
//!    only while the others keep quorum) and the advance rules bring it back to Ready; the
//!    gate holds the next member until etcd reports it healthy and its Pod is Ready.
//!
//! A member that does not come up on its new version (image not pulled, crash loop) stops the
//! rollout after it ([`stalled_upgrade`], ahead of the repair ladder, which would otherwise
//! replace it); setting `spec.version` back rolls it back while etcd's cluster version has not
//! moved.

use etcd_operator_api::MemberPhase;

use crate::build::MemberConfig;
use crate::plan::context::{Context, MemberView};
use crate::plan::decision::{Decision, MemberEdit};
use crate::plan::observed::{ClassExpansion, PodFacts};
use crate::plan::step::{Step, WaitReason};
use crate::plan::timing;

use crate::domain::versions::{
    EtcdVersion, is_supported, membership_store_trusted, supported_range,
};

use super::helpers::{delete_pod, leadership_first};
pub use super::metadata::metadata_rollout;
use super::repair::member_repair_except;
use super::version_path::{PathFacts, check_path, parse_version};

/// Container waiting reasons that mean the container cannot start as it is.
const CANNOT_START: &[&str] = &[
    "CrashLoopBackOff",
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerError",
    "CreateContainerConfigError",
    "RunContainerError",
];

/// The cluster's target version (`status.observed.version`, latched).
pub fn target_version(ctx: &Context<'_>) -> Option<String> {
    ctx.cluster
        .status
        .as_ref()
        .and_then(|s| s.observed.as_ref())
        .map(|o| o.version.clone())
}

/// The version `m`'s etcd runs: what it answers now, else what it last answered (its
/// `status.version`).
pub fn running_version(ctx: &Context<'_>, m: &MemberView<'_>) -> Option<String> {
    m.id.and_then(|id| ctx.observed.etcd.status_of(id))
        .map(|s| s.version.clone())
        .or_else(|| m.status().version)
}

/// etcd's cluster version (`MAJOR.MINOR`): the higher of what etcd states (`/version`'s
/// `etcdcluster`, observed while a version change is pending) and the lowest minor the running
/// members run. The second is how etcd sets it (its leader raises the cluster version to the
/// lowest server version of all members once every member runs it, within seconds), read from
/// the server versions each member reports (or last reported) in its Status, never from the
/// image tags; it stands in when `/version` cannot be read, and covers the seconds before
/// the leader raises it after the last member moved (etcd never lowers it, so the higher of
/// the two is the one a downgrade must respect).
pub fn cluster_version(ctx: &Context<'_>) -> Option<(u64, u64)> {
    let members = ctx
        .running()
        .filter_map(|m| running_version(ctx, m))
        .filter_map(|v| parse_version(&v))
        .map(|(a, b, _)| (a, b))
        .min();
    members.max(ctx.observed.etcd.cluster_version)
}

/// The lowest version a running member runs (what it answers, else what it last answered),
/// and which member: what etcd's upgrade floors are checked against.
pub fn lowest_member_version(ctx: &Context<'_>) -> Option<(EtcdVersion, String)> {
    ctx.running()
        .filter_map(|m| {
            let v = EtcdVersion::parse(&running_version(ctx, m)?)?;
            Some((v, m.name.to_string()))
        })
        .min()
}

/// What the path check reads of this pass.
fn path_facts(ctx: &Context<'_>) -> Option<PathFacts> {
    Some(PathFacts {
        cluster: cluster_version(ctx)?,
        lowest: lowest_member_version(ctx),
        auth: auth_on(ctx),
    })
}

/// etcd's downgrade as the members report it (3.6+): the target minor of an enabled one.
fn enabled_downgrade(ctx: &Context<'_>) -> Option<(u64, u64)> {
    ctx.observed
        .etcd
        .statuses()
        .filter_map(|s| s.downgrade.as_ref())
        .filter(|d| d.enabled)
        .find_map(|d| EtcdVersion::parse(&d.target_version))
        .map(EtcdVersion::minor)
}

fn auth_on(ctx: &Context<'_>) -> bool {
    ctx.cluster.status.as_ref().and_then(|s| s.auth_enabled) == Some(true)
        || ctx.observed.security.auth_found_enabled
        || ctx
            .observed
            .cluster
            .spec
            .auth
            .as_ref()
            .is_some_and(etcd_operator_api::cluster::AuthSpec::is_enabled)
}

/// The image `m`'s Pod should run.
fn wanted_image(ctx: &Context<'_>, m: &MemberView<'_>) -> String {
    ctx.observed
        .settings
        .etcd_image(&m.observed.member.spec.version)
}

/// `m`'s live Pod is not what the operator would render for it now. A Pod the operator made
/// records the version and a hash of what it rendered (image and command line,
/// [`crate::build::RENDERED_HASH_ANNOTATION`]), and is judged by them alone: the image it
/// runs may have been rewritten on admission (to a digest, to a mirror) and is not read. A
/// Pod without the record (an older operator's, the reference operator's) is judged by its
/// image, as before.
fn image_outdated(ctx: &Context<'_>, m: &MemberView<'_>) -> bool {
    let Some(pod) = m.observed.pod.as_ref().filter(|p| !p.deleting) else {
        return false;
    };
    match &pod.rendered {
        Some((version, hash)) => {
            *version != m.observed.member.spec.version
                || ctx
                    .wanted_rendered_hash(m)
                    .is_some_and(|wanted| wanted != hash)
        }
        None => pod
            .image
            .as_deref()
            .is_some_and(|image| image != wanted_image(ctx, m)),
    }
}

/// `m`'s live Pod runs another etcd version than its spec's (by its record, else its image).
fn version_outdated(ctx: &Context<'_>, m: &MemberView<'_>) -> bool {
    let Some(pod) = m.observed.pod.as_ref().filter(|p| !p.deleting) else {
        return false;
    };
    match &pod.rendered {
        Some((version, _)) => *version != m.observed.member.spec.version,
        None => image_outdated(ctx, m),
    }
}

/// `m`'s live Pod was created with another config than its spec's (a Pod without the digest,
/// made by an older operator, is left alone).
fn config_outdated(m: &MemberView<'_>) -> bool {
    m.observed
        .pod
        .as_ref()
        .filter(|p| !p.deleting)
        .and_then(|p| p.config_digest.as_deref())
        .is_some_and(|d| d != MemberConfig::of_member(&m.observed.member.spec).digest())
}

/// `m`'s live Pod is not what its spec says (image, config, or a memory-backed member's
/// tmpfs smaller than its storage size).
fn pod_outdated(ctx: &Context<'_>, m: &MemberView<'_>) -> bool {
    image_outdated(ctx, m) || config_outdated(m) || tmpfs_outdated(m)
}

/// `a` is a smaller quantity than `b` (both readable).
fn smaller(a: Option<&str>, b: Option<&str>) -> bool {
    let bytes = |q: Option<&str>| q.and_then(crate::domain::quantity::quantity_bytes);
    matches!((bytes(a), bytes(b)), (Some(a), Some(b)) if a < b)
}

/// The target's storage size (`status.observed.storage.size`, latched).
fn target_storage(ctx: &Context<'_>) -> Option<String> {
    ctx.cluster
        .status
        .as_ref()
        .and_then(|s| s.observed.as_ref())
        .map(|o| o.storage.size_or_default().0)
}

/// `m`'s storage size (its EtcdMember's `spec.storage.size`).
fn member_storage(m: &MemberView<'_>) -> String {
    m.observed.member.spec.storage.size_or_default().0
}

/// `m`'s spec has a smaller storage size than the target.
fn storage_spec_outdated(ctx: &Context<'_>, m: &MemberView<'_>) -> bool {
    smaller(Some(&member_storage(m)), target_storage(ctx).as_deref())
}

/// A memory-backed member's live Pod has a smaller tmpfs than its spec's storage size (a Pod
/// without a readable size limit is left alone).
fn tmpfs_outdated(m: &MemberView<'_>) -> bool {
    m.memory
        && m.observed
            .pod
            .as_ref()
            .filter(|p| !p.deleting)
            .is_some_and(|p| smaller(p.tmpfs_size.as_deref(), Some(&member_storage(m))))
}

/// A PVC-backed member's storage is to grow: its spec is below the target, its PVC asks for
/// less than its spec, or the PVC's capacity has not reached its request yet.
fn pvc_storage_outdated(ctx: &Context<'_>, m: &MemberView<'_>) -> bool {
    if m.memory {
        return false;
    }
    let pvc = m.observed.pvc.as_ref().filter(|p| !p.deleting);
    storage_spec_outdated(ctx, m)
        || pvc.is_some_and(|p| {
            smaller(p.requested.as_deref(), Some(&member_storage(m)))
                || smaller(p.capacity.as_deref(), p.requested.as_deref())
        })
}

/// The restart-relevant config of the target (`status.observed`).
fn target_config(ctx: &Context<'_>) -> Option<MemberConfig> {
    ctx.cluster
        .status
        .as_ref()
        .and_then(|s| s.observed.as_ref())
        .map(MemberConfig::of_target)
}

/// The fields of `m`'s spec that differ from the target's config.
fn config_changes(ctx: &Context<'_>, m: &MemberView<'_>) -> Vec<&'static str> {
    target_config(ctx)
        .map(|t| t.differences(&MemberConfig::of_member(&m.observed.member.spec)))
        .unwrap_or_default()
}

/// Running members that do not run the target yet (version, config or storage, by spec, by
/// Pod or by PVC).
pub fn outdated_members<'c, 'a>(ctx: &'c Context<'a>) -> Vec<&'c MemberView<'a>> {
    let Some(target) = target_version(ctx) else {
        return Vec::new();
    };
    ctx.running()
        .filter(|m| restart_outdated(ctx, m, &target) || pvc_storage_outdated(ctx, m))
        .collect()
}

/// `m` is to restart for the target: its version, config or (memory-backed) storage size
/// differs, by spec or by Pod.
fn restart_outdated(ctx: &Context<'_>, m: &MemberView<'_>, target: &str) -> bool {
    m.observed.member.spec.version != target
        || !config_changes(ctx, m).is_empty()
        || pod_outdated(ctx, m)
        || (m.memory && storage_spec_outdated(ctx, m))
}

/// The path check for `target`, as a refusal to report.
fn refusal(ctx: &Context<'_>, target: &str) -> Option<Decision> {
    let Some(facts) = path_facts(ctx) else {
        return Some(Decision::wait(
            WaitReason::WaitingForMember,
            format!(
                "spec.version {target}: waiting for the members to report their etcd version before checking the upgrade path"
            ),
            timing::MEMBER_POLL,
        ));
    };
    check_path(&facts, target)
        .err()
        .map(|why| Decision::wait(WaitReason::UpgradeRefused, why, timing::BLOCKED_POLL))
}

/// etcd's downgrade procedure around a rollout to `target` (etcd's downgrade guides for
/// 3.6 → 3.5 and 3.7 → 3.6):
/// - a downgrade enabled to a minor below the target's (`spec.version` went back up, or one
///   was enabled by hand) is cancelled first;
/// - while a member still runs a minor above the target's, the downgrade must be enabled
///   to the target (`Downgrade VALIDATE`, then `ENABLE`), and every such member must report
///   its storage migrated to the target before the first of them is restarted;
/// - once every member runs the target, etcd's leader ends the downgrade by itself (3.6+
///   targets report it; a 3.5 member does not report downgrades).
fn downgrade_procedure(ctx: &Context<'_>, target: &str) -> Option<Decision> {
    let wanted = EtcdVersion::parse(target)?;
    let enabled = enabled_downgrade(ctx);
    if let Some(minor) = enabled
        && minor < wanted.minor()
    {
        return Some(Decision::act(Step::CancelDowngrade {
            target: target.to_string(),
        }));
    }
    let above: Vec<_> = ctx
        .running()
        .filter(|m| {
            running_version(ctx, m)
                .and_then(|v| EtcdVersion::parse(&v))
                .is_some_and(|v| v.minor() > wanted.minor())
        })
        .collect();
    if above.is_empty() {
        if enabled == Some(wanted.minor())
            && ctx
                .running()
                .all(|m| running_version(ctx, m).as_deref() == Some(target))
        {
            return Some(Decision::wait(
                WaitReason::WaitingForMember,
                format!(
                    "every member runs etcd {target}; waiting for etcd's leader to end the downgrade (it checks every few seconds)"
                ),
                timing::MEMBER_POLL,
            ));
        }
        return None;
    }
    // A rollback in the middle of an upgrade (etcd's cluster version not raised yet) is no
    // downgrade: only a cluster version above the target's minor calls for etcd's procedure.
    if cluster_version(ctx).is_none_or(|c| c <= wanted.minor()) {
        return None;
    }
    let (major, minor) = wanted.minor();
    let version = format!("{major}.{minor}.0");
    if enabled != Some(wanted.minor()) {
        return Some(Decision::act(Step::EnableDowngrade { version }));
    }
    let unmigrated: Vec<String> = above
        .iter()
        .filter_map(|m| {
            let status = m.id.and_then(|id| ctx.observed.etcd.status_of(id))?;
            let storage = status.storage_version.as_deref()?;
            EtcdVersion::parse(storage)
                .is_some_and(|v| v.minor() > wanted.minor())
                .then(|| format!("{} reports storage {storage}", m.name))
        })
        .collect();
    if !unmigrated.is_empty() {
        return Some(Decision::wait(
            WaitReason::WaitingForMember,
            format!(
                "etcd's downgrade to {version} is enabled; waiting for etcd to migrate every member's storage to {major}.{minor} before the first member restarts on etcd {target} ({})",
                unmigrated.join(", ")
            ),
            timing::MEMBER_POLL,
        ));
    }
    None
}

/// The version `m`'s data was created with, as far as it is known: its PVC's record
/// ([`crate::build::DATA_VERSION_ANNOTATION`]), or for a memory-backed member its Pod's
/// rendered version (its data lives and dies with the Pod).
fn data_created_with<'a>(m: &'a MemberView<'_>) -> Option<&'a str> {
    if m.memory {
        return m
            .observed
            .pod
            .as_ref()
            .and_then(|p| p.rendered.as_ref())
            .map(|(version, _)| version.as_str());
    }
    m.observed
        .pvc
        .as_ref()
        .and_then(|p| p.annotations.get(crate::build::DATA_VERSION_ANNOTATION))
        .map(String::as_str)
}

/// Before the first member of a 3.5 → 3.6 upgrade moves: each member whose data was not
/// created by a 3.5 patch at or above the floor (etcd-io/etcd#19557, see
/// [`membership_store_trusted`]) is rebuilt on fresh data first, as a replacement does it
/// (`Replacing`: leadership moved, removed from etcd, Pod and PVC deleted, joined again empty
/// as a learner and promoted, all on the 3.5 patch it runs), one at a time, followers first
/// and the leader last, each only while the others keep quorum. A one-member cluster is not
/// rebuilt (its only member cannot leave), nor a cluster where a member already runs 3.6.
fn membership_rebuild(ctx: &Context<'_>, target: &str) -> Option<Decision> {
    if EtcdVersion::parse(target)?.minor() != (3, 6) || cluster_version(ctx) != Some((3, 5)) {
        return None;
    }
    let running: Vec<_> = ctx.running().collect();
    let on_35 = |m: &MemberView<'_>| {
        running_version(ctx, m)
            .and_then(|v| EtcdVersion::parse(&v))
            .is_some_and(|v| v.minor() == (3, 5))
    };
    if running.len() < 2 || !running.iter().all(|m| on_35(m)) {
        return None;
    }
    let leader = ctx.observed.etcd.leader();
    let m = *running
        .iter()
        .filter(|m| !membership_store_trusted(data_created_with(m)))
        .min_by_key(|m| m.id.is_some() && m.id == leader)?;
    if !ctx.others_have_quorum(m.id) {
        let (healthy, voters, quorum) = ctx.quorum_numbers();
        return Some(Decision::wait(
            WaitReason::QuorumAtRisk,
            format!(
                "spec.version {target}: {} is to be rebuilt on fresh data before the upgrade (etcd-io/etcd#19557), and the others lack quorum without it ({healthy}/{voters} voters healthy, quorum {quorum}); bring the other members back, or scale the cluster out first (3 members or more)",
                m.name
            ),
            timing::BLOCKED_POLL,
        ));
    }
    let created = data_created_with(m).map_or_else(
        || "an unrecorded version (a member made before the operator recorded it)".to_string(),
        |v| format!("etcd {v}"),
    );
    let why = format!(
        "rebuilt on fresh data before the upgrade to {target}: its data was created by {created}, and 3.5 patches before the 3.5 → 3.6 floor may have kept promoted voters as learners in the store 3.6 reads (etcd-io/etcd#19557); it leaves etcd and joins again empty from the others"
    );
    Some(
        Decision::act(Step::RebuildMember {
            member: m.name.to_string(),
            why: why.clone(),
        })
        .with(
            MemberEdit::new(m.name)
                .phase(MemberPhase::Replacing)
                .not_ready("MembershipRebuild", why),
        ),
    )
}

/// Behind the readiness gate: the next member of a version rollout, one step.
pub fn version_rollout(ctx: &Context<'_>) -> Option<Decision> {
    let target = target_version(ctx)?;
    let outdated: Vec<_> = ctx
        .running()
        .filter(|m| restart_outdated(ctx, m, &target))
        .collect();
    if outdated
        .iter()
        .any(|m| m.observed.member.spec.version != target)
        && let Some(refused) = refusal(ctx, &target)
    {
        return Some(refused);
    }
    if let Some(step) = downgrade_procedure(ctx, &target) {
        return Some(step);
    }
    if outdated.is_empty() {
        return None;
    }
    if outdated
        .iter()
        .any(|m| m.observed.member.spec.version != target)
        && let Some(step) = membership_rebuild(ctx, &target)
    {
        return Some(step);
    }
    let leader = ctx.observed.etcd.leader();
    // Followers first (lowest ordinal first), the leader last.
    let m = *outdated
        .iter()
        .min_by_key(|m| m.id.is_some() && m.id == leader)?;
    let version = &m.observed.member.spec.version;
    if *version != target {
        return Some(Decision::act(Step::SetMemberVersion {
            member: m.name.to_string(),
            version: target,
        }));
    }
    let changed = config_changes(ctx, m);
    if !changed.is_empty() {
        return Some(Decision::act(Step::SetMemberConfig {
            member: m.name.to_string(),
            config: Box::new(target_config(ctx)?),
            changed,
        }));
    }
    if m.memory && storage_spec_outdated(ctx, m) {
        return Some(Decision::act(Step::SetMemberStorage {
            member: m.name.to_string(),
            size: target_storage(ctx)?,
        }));
    }
    let pod = m.observed.pod.as_ref().filter(|p| !p.deleting)?;
    if m.memory && !ctx.others_have_quorum(m.id) {
        return Some(Decision::wait(
            WaitReason::QuorumAtRisk,
            format!(
                "{} is to restart on a new version or configuration; it is memory-backed, so its restart is a replacement, and the others cannot keep quorum without it. Scale the cluster out first (3 members or more)",
                m.name
            ),
            timing::BLOCKED_POLL,
        ));
    }
    let (reason, why) = if version_outdated(ctx, m) {
        let was = running_version(ctx, m).unwrap_or_else(|| "another version".to_string());
        (
            "Upgrading",
            format!(
                "{} is restarted on etcd {version} (it ran {was}): its Pod is created again on its data",
                m.name
            ),
        )
    } else if !config_outdated(m) && tmpfs_outdated(m) {
        (
            "StorageResized",
            format!(
                "{}'s storage grows to {}: it is memory-backed, so it is replaced by a member with a tmpfs of that size",
                m.name,
                member_storage(m)
            ),
        )
    } else {
        (
            "ConfigChanged",
            format!(
                "{}'s configuration changed: its Pod is created again on its data with it",
                m.name
            ),
        )
    };
    leadership_first(ctx, m).or_else(|| {
        Some(Decision::act(delete_pod(m, pod)).with(MemberEdit::new(m.name).not_ready(reason, why)))
    })
}

/// Behind the readiness gate, after the other rollouts: storage growth of PVC-backed members,
/// one member at a time. Where the PVCs' StorageClass allows expansion, the member's
/// `spec.storage.size` takes the target, then its PVC's request is raised (expansion in place,
/// no restart), and the next member waits until the PVC's capacity has reached its request.
/// Where it does not (or there is no StorageClass), nothing is changed and the refusal is
/// reported with what to do.
pub fn storage_rollout(ctx: &Context<'_>) -> Option<Decision> {
    let target = target_storage(ctx)?;
    let members: Vec<_> = ctx
        .running()
        .filter(|m| pvc_storage_outdated(ctx, m))
        .collect();
    // One at a time: an expansion under way holds the next.
    if let Some((m, pvc)) = members.iter().find_map(|m| {
        let pvc = m.observed.pvc.as_ref().filter(|p| !p.deleting)?;
        smaller(pvc.capacity.as_deref(), pvc.requested.as_deref()).then_some((m, pvc))
    }) {
        let (from, to) = (
            pvc.capacity.as_deref().unwrap_or("?"),
            pvc.requested.as_deref().unwrap_or("?"),
        );
        if let Some(failure) = &pvc.resize_failure {
            return Some(Decision::wait(
                WaitReason::StorageExpansionFailed,
                format!(
                    "PVC {} of {} could not be expanded from {from} to {to}: Kubernetes reports {failure}. {} keeps serving on its current capacity and the other members wait. Fix what the storage driver names (its maximum volume size, a quota, free capacity); Kubernetes retries the expansion by itself, and the rollout goes on once the capacity reaches the request",
                    pvc.name, m.name, m.name
                ),
                timing::BLOCKED_POLL,
            ));
        }
        let progress = pvc
            .resize_progress
            .as_deref()
            .map(|p| format!(" ({p})"))
            .unwrap_or_default();
        return Some(Decision::wait(
            WaitReason::VolumeResizing,
            format!(
                "PVC {} of {} is being expanded from {from} to {to}{progress}; the next member waits for it",
                pvc.name, m.name,
            ),
            timing::MEMBER_POLL,
        ));
    }
    let m = members.first()?;
    let pvc = m.observed.pvc.as_ref().filter(|p| !p.deleting)?;
    match &pvc.expansion {
        ClassExpansion::Refused(why) => {
            return Some(Decision::wait(
                WaitReason::StorageExpansionRefused,
                format!(
                    "spec.storage.size {target} cannot be applied to the running members' PVCs: {why}. Nothing was changed (members created from now on get {target})"
                ),
                timing::BLOCKED_POLL,
            ));
        }
        ClassExpansion::Unknown => {
            return Some(Decision::wait(
                WaitReason::VolumeResizing,
                format!(
                    "PVC {} of {} is to grow to {target}; waiting to read its StorageClass {}",
                    pvc.name,
                    m.name,
                    pvc.storage_class.as_deref().unwrap_or("(none)")
                ),
                timing::MEMBER_POLL,
            ));
        }
        ClassExpansion::Allowed => {}
    }
    if storage_spec_outdated(ctx, m) {
        return Some(Decision::act(Step::SetMemberStorage {
            member: m.name.to_string(),
            size: target,
        }));
    }
    Some(Decision::act(Step::ResizePvc {
        member: m.name.to_string(),
        pvc: pvc.name.clone(),
        size: member_storage(m),
    }))
}

/// A PVC-backed member's storage is to grow and its StorageClass does not allow it.
fn storage_refused(ctx: &Context<'_>) -> bool {
    ctx.running().any(|m| {
        pvc_storage_outdated(ctx, m)
            && m.observed
                .pvc
                .as_ref()
                .is_some_and(|p| matches!(p.expansion, ClassExpansion::Refused(_)))
    })
}

/// Why `pod` cannot start as it is (image not pulled, crash loop, ended), if it cannot.
fn pod_failing(pod: &PodFacts) -> Option<String> {
    if pod.deleting || pod.ready {
        return None;
    }
    if let Some(reason) = pod
        .waiting_reason
        .as_deref()
        .filter(|r| CANNOT_START.contains(r))
    {
        Some(reason.to_string())
    } else if pod.restart_count >= 2 {
        Some(format!(
            "its etcd container restarted {} times",
            pod.restart_count
        ))
    } else if pod.phase.is_terminal() {
        Some(format!("its Pod ended in phase {:?}", pod.phase))
    } else {
        None
    }
}

/// A member whose Pod cannot start and is part of a rollout: it runs a version etcd has not
/// yet reported for it, its Pod is not what its spec says, or its spec is not the target's.
/// With the reason.
pub fn failed_upgrade<'c, 'a>(ctx: &'c Context<'a>) -> Option<(&'c MemberView<'a>, String)> {
    let target = target_version(ctx)?;
    ctx.running().find_map(|m| {
        let why = pod_failing(m.observed.pod.as_ref()?)?;
        let spec = &m.observed.member.spec;
        let in_rollout = m.status().version.is_some_and(|ran| ran != spec.version)
            || pod_outdated(ctx, m)
            || spec.version != target
            || !config_changes(ctx, m).is_empty();
        in_rollout.then_some((m, why))
    })
}

/// Ahead of the repair ladder: a member that cannot start on its new version stops the
/// rollout (reported, the others keep serving); once `spec.version` changes again to a path
/// allowed from etcd's cluster version (back to the version it ran, typically), the member
/// takes that version and its failing Pod is replaced on its data.
pub fn stalled_upgrade(ctx: &Context<'_>) -> Option<Decision> {
    if let Some(decision) = replace_outdated_failing_pod(ctx) {
        return Some(decision);
    }
    let (m, why) = failed_upgrade(ctx)?;
    let target = target_version(ctx)?;
    let version = &m.observed.member.spec.version;
    let ran = m.status().version.unwrap_or_default();
    if *version != target {
        if let Some(refused) = refusal(ctx, &target) {
            return Some(refused);
        }
        return Some(
            Decision::act(Step::SetMemberVersion {
                member: m.name.to_string(),
                version: target.clone(),
            })
            .with(MemberEdit::new(m.name).not_ready(
                "UpgradeFailed",
                format!(
                    "{} did not start on etcd {version} ({why}); it goes to {target} on its data",
                    m.name
                ),
            )),
        );
    }
    let changed = config_changes(ctx, m);
    if !changed.is_empty() {
        let message = format!(
            "{} did not start with its configuration ({why}); it takes the target's {}",
            m.name,
            changed.join(", ")
        );
        return Some(
            Decision::act(Step::SetMemberConfig {
                member: m.name.to_string(),
                config: Box::new(target_config(ctx)?),
                changed,
            })
            .with(MemberEdit::new(m.name).not_ready("RolloutFailed", message)),
        );
    }
    if ran == *version || ran.is_empty() {
        // Not a version change: a configuration that does not start is repaired like any
        // failing member (the rest of the rollout waits behind the gate).
        return None;
    }
    let allowed_back = cluster_version(ctx)
        .map(|(a, b)| format!(" (allowed while etcd's cluster version is still {a}.{b})"))
        .unwrap_or_default();
    let held = MemberEdit::new(m.name).not_ready(
        "UpgradeFailed",
        format!("etcd {version} does not start ({why}); it ran {ran}"),
    );
    // The rollout stops, the repairs do not: another member's dead Pod or failing etcd is
    // repaired as usual (the failed member is held out of the ladder, which would recreate and
    // then replace it on the version that does not start).
    if let Some(repair) = member_repair_except(ctx, Some(m.name)).filter(|d| {
        !matches!(d.step, Step::Wait { .. } | Step::Idle)
            && d.edits.iter().all(|e| e.member != m.name)
    }) {
        return Some(repair.with(held));
    }
    Some(
        Decision::wait(
            WaitReason::UpgradeFailed,
            format!(
                "{} does not start on etcd {version} ({why}): the rollout stopped after it, and the other members keep serving. Set spec.version back to {ran}{allowed_back}, or to a version whose image starts",
                m.name
            ),
            timing::BLOCKED_POLL,
        )
        .with(held),
    )
}

/// A Pod that is not Ready and runs another image than its member's `spec.version` (the
/// member was set back after a failed upgrade) is deleted, to be created again on its data:
/// it serves nothing. A memory-backed member's only while the others keep quorum.
fn replace_outdated_failing_pod(ctx: &Context<'_>) -> Option<Decision> {
    let m = ctx.running().find(|m| {
        pod_outdated(ctx, m)
            && m.observed.pod.as_ref().and_then(pod_failing).is_some()
            && (!m.memory || ctx.others_have_quorum(m.id))
    })?;
    let pod = m.observed.pod.as_ref()?;
    Some(
        Decision::act(delete_pod(m, pod)).with(MemberEdit::new(m.name).not_ready(
            "Upgrading",
            format!(
                "{} runs etcd {} now; its Pod, which did not start, is created again on its data",
                m.name, m.observed.member.spec.version
            ),
        )),
    )
}

/// Whether a new `spec.version` or config is adopted as the target although the previous
/// target is not reached: a member of the rollout failed to start on the previous target
/// (going back must not wait for the progress deadline). Only when nothing else changed.
pub fn retarget_version(
    ctx: &Context<'_>,
    current: &etcd_operator_api::cluster::ObservedClusterSpec,
    wanted: &etcd_operator_api::cluster::ObservedClusterSpec,
) -> bool {
    let mut same_but_rollout = current.clone();
    same_but_rollout.version = wanted.version.clone();
    same_but_rollout.options = wanted.options.clone();
    same_but_rollout.resources = wanted.resources.clone();
    same_but_rollout.affinity = wanted.affinity.clone();
    same_but_rollout.topology_spread_constraints = wanted.topology_spread_constraints.clone();
    same_but_rollout.image_pull_secrets = wanted.image_pull_secrets.clone();
    if target_refused(ctx) {
        // Nothing moved for a refused target: any new spec is taken at once.
        return true;
    }
    same_but_rollout == *wanted && current != wanted && failed_upgrade(ctx).is_some()
}

/// The latched version is one the operator does not run: why, naming the supported range.
pub fn target_unsupported(ctx: &Context<'_>) -> Option<String> {
    let target = target_version(ctx)?;
    let parsed = EtcdVersion::parse(&target).filter(|_| parse_version(&target).is_some());
    if parsed.is_some_and(is_supported) {
        return None;
    }
    Some(format!(
        "spec.version {target} is not a version this operator runs: it runs etcd {} ({}). Nothing is started or changed for it; set spec.version to a supported version",
        supported_range(),
        crate::domain::versions::SUPPORTED_MINORS
            .iter()
            .map(|(a, b)| format!("{a}.{b}"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The latched version is refused (`UpgradeRefused`): some member is still to take it and the
/// path from etcd's cluster version does not allow it.
pub fn target_refused(ctx: &Context<'_>) -> bool {
    let Some(target) = target_version(ctx) else {
        return false;
    };
    if storage_refused(ctx) || target_unsupported(ctx).is_some() {
        return true;
    }
    ctx.running()
        .any(|m| m.observed.member.spec.version != target)
        && refusal(ctx, &target).is_some_and(|d| {
            matches!(
                d.step,
                Step::Wait {
                    reason: WaitReason::UpgradeRefused,
                    ..
                }
            )
        })
}
