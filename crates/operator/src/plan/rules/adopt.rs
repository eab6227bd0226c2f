//! Taking over members the reference operator (cozystack/etcd-operator, same API group and
//! kinds) made, once its Deployment is scaled to zero: see docs/migration.md.
//!
//! Its objects already have the shape this operator uses: the same labels, the Pod and PVC
//! named after the EtcdMember and owned by it, `spec.bootstrap`/`initialCluster`/
//! `clusterToken` and `status.memberID`/`podUID`/`isVoter` with the same meaning. What such a
//! member lacks is `status.phase` (this operator's lifecycle), and its Pod carries its start
//! settings in the command line rather than in this operator's annotations. Without this rule
//! the member would go through the join path (Pending → Provisioning), which deletes a Pod
//! etcd does not list at its peer URL; here nothing is deleted or restarted: a member that
//! matches etcd exactly is recorded (a status write, the commit point: a crash before it
//! adopts again, after it there is nothing left to do), and any other is reported, with the
//! object and the reason, and nothing in the cluster is changed until a person resolves it.

use etcd_operator_api::MemberPhase;

use crate::build::{DATA_DIR, member_data_dir};
use crate::etcd::parse_member_id;
use crate::plan::context::{Context, MemberView};
use crate::plan::decision::{Decision, MemberEdit};
use crate::plan::step::{Step, WaitReason};
use crate::plan::timing;

/// What to do with one EtcdMember the reference operator made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assessment {
    /// Record it in `phase` (Ready for a started voter, Provisioning for a learner or a
    /// member that has not started yet, which rule 9 then takes on).
    Adopt { phase: MemberPhase, id: u64 },
    /// Its Pod lacks the voter label the PodDisruptionBudget selects on: label it first.
    LabelVoter,
    /// Not decidable now (etcd's member list could not be read): look again.
    Wait(String),
    /// Cannot be taken over safely: the object and why.
    Refuse(String),
}

/// An EtcdMember this operator never recorded (no `status.phase`), not being deleted, whose
/// Pod exists without this operator's start annotations: made by the reference operator.
pub fn is_candidate(m: &MemberView<'_>) -> bool {
    let unrecorded = m
        .observed
        .member
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .is_none();
    unrecorded && !m.deleting && m.observed.pod.as_ref().is_some_and(|p| p.start.is_none())
}

/// Whether `m` can be taken over as it is, checked against what this operator would build
/// for it and against etcd's member list.
pub fn assess(ctx: &Context<'_>, m: &MemberView<'_>) -> Assessment {
    let Some(pod) = m.observed.pod.as_ref() else {
        return Assessment::Wait(format!("{} has no Pod", m.name));
    };
    let uid = m
        .observed
        .member
        .metadata
        .uid
        .as_deref()
        .unwrap_or_default();
    if pod.owner_uid.as_deref() != Some(uid) {
        return Assessment::Refuse(format!(
            "Pod {} is controlled by {}, not by EtcdMember {} (uid {uid})",
            pod.name,
            pod.owner_uid
                .as_deref()
                .map_or("nothing".to_string(), |o| format!(
                    "the object with uid {o}"
                )),
            m.name
        ));
    }
    if pod.deleting {
        return Assessment::Wait(format!("{}: its Pod {} is being deleted", m.name, pod.name));
    }
    if m.memory {
        if pod.tmpfs_size.is_none() {
            return Assessment::Refuse(format!(
                "Pod {} has no memory-backed data volume, but EtcdMember {} says storage.medium Memory",
                pod.name, m.name
            ));
        }
    } else {
        let pvc_name = crate::build::pvc_name(m.name);
        match m.observed.pvc.as_ref() {
            None => {
                return Assessment::Refuse(format!(
                    "PVC {pvc_name} of EtcdMember {} does not exist while its Pod {} runs",
                    m.name, pod.name
                ));
            }
            Some(pvc) if pvc.owner_uid.as_deref() != Some(uid) => {
                return Assessment::Refuse(format!(
                    "PVC {} is controlled by {}, not by EtcdMember {} (uid {uid})",
                    pvc.name,
                    pvc.owner_uid
                        .as_deref()
                        .map_or("nothing".to_string(), |o| format!(
                            "the object with uid {o}"
                        )),
                    m.name
                ));
            }
            Some(_) => {}
        }
        if pod.data_claim.as_deref() != Some(pvc_name.as_str()) {
            return Assessment::Refuse(format!(
                "Pod {} mounts {} as its data volume, not PVC {pvc_name}: a Pod made again would start on other data",
                pod.name,
                pod.data_claim
                    .as_deref()
                    .map_or("no claim".to_string(), |c| format!("PVC {c}"))
            ));
        }
    }
    let data_dir = member_data_dir(&m.observed.member);
    let expected = [
        ("name", m.name.to_string()),
        ("initial-advertise-peer-urls", m.peer_url.clone()),
    ];
    for (flag, want) in expected {
        let have = pod.etcd_flags.get(flag);
        if have != Some(&want) {
            return Assessment::Refuse(format!(
                "Pod {} runs etcd with --{flag}={}, where this operator would use {want}",
                pod.name,
                have.map_or("(unset)", String::as_str)
            ));
        }
    }
    // The data directory is compared where it lies on the volume: a Pod mounting the volume
    // elsewhere (the legacy operator's /var/run/etcd) runs on the same data when its
    // --data-dir is the same place below the mount.
    let have = pod.etcd_flags.get("data-dir");
    let on_volume = |dir: &str, mount: &str| {
        dir.strip_prefix(mount.trim_end_matches('/'))
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))
            .map(|rest| rest.trim_start_matches('/').to_string())
    };
    let same_place = match (have, pod.data_mount.as_deref()) {
        (Some(have), Some(mount)) => {
            on_volume(have, mount).is_some()
                && on_volume(have, mount) == on_volume(&data_dir, DATA_DIR)
        }
        (Some(have), None) => *have == data_dir,
        (None, _) => false,
    };
    if !same_place {
        return Assessment::Refuse(format!(
            "Pod {} runs etcd with --data-dir={}{}, where this operator would use {data_dir} (the volume mounted at {DATA_DIR})",
            pod.name,
            have.map_or("(unset)", String::as_str),
            pod.data_mount.as_deref().map_or(String::new(), |m| format!(
                " (its data volume mounted at {m})"
            )),
        ));
    }
    if let Err(e) = &ctx.observed.etcd.members {
        return Assessment::Wait(format!(
            "{}: etcd's member list could not be read ({e}); adoption waits",
            m.name
        ));
    }
    let Some(etcd) = m.etcd else {
        return Assessment::Refuse(format!(
            "EtcdMember {}: etcd lists no member at its peer URL {} (removed, or never added)",
            m.name, m.peer_url
        ));
    };
    let recorded = m
        .observed
        .member
        .status
        .as_ref()
        .and_then(|s| s.member_id.as_deref());
    if let Some(text) = recorded.filter(|t| !t.is_empty()) {
        match parse_member_id(text) {
            Some(id) if id == etcd.id => {}
            _ => {
                return Assessment::Refuse(format!(
                    "EtcdMember {} records status.memberID {text}, but etcd lists member {:x} at its peer URL {}",
                    m.name, etcd.id, m.peer_url
                ));
            }
        }
    }
    if etcd.has_started() && etcd.name != m.name {
        return Assessment::Refuse(format!(
            "EtcdMember {}: the etcd member at its peer URL is named {}",
            m.name, etcd.name
        ));
    }
    let voter = etcd.has_started() && !etcd.is_learner;
    if voter && !pod.voter_label {
        return Assessment::LabelVoter;
    }
    Assessment::Adopt {
        phase: if voter {
            MemberPhase::Ready
        } else {
            MemberPhase::Provisioning
        },
        id: etcd.id,
    }
}

/// The rule, right after the cluster-ID safety stop: adopts one member per pass; once only
/// members that cannot be adopted are left, reports them and stops every later rule (the
/// join path would otherwise delete a Pod etcd does not list).
pub fn adopt_members(ctx: &Context<'_>) -> Option<Decision> {
    let mut refused = Vec::new();
    let mut waiting = Vec::new();
    for m in ctx.members.iter().filter(|m| is_candidate(m)) {
        let pod = m.observed.pod.as_ref()?;
        match assess(ctx, m) {
            Assessment::Adopt { phase, id } => {
                return Some(
                    Decision::act(Step::AdoptMember {
                        member: m.name.to_string(),
                        phase,
                        id,
                        pod: pod.name.clone(),
                    })
                    .with(MemberEdit::new(m.name).phase(phase)),
                );
            }
            Assessment::LabelVoter => {
                return Some(Decision::act(Step::LabelPod {
                    member: m.name.to_string(),
                    pod: pod.name.clone(),
                    voter: true,
                }));
            }
            Assessment::Wait(why) => waiting.push(why),
            Assessment::Refuse(why) => refused.push(why),
        }
    }
    if !refused.is_empty() {
        return Some(Decision::wait(
            WaitReason::NotAdoptable,
            format!(
                "left alone, not taken over from the reference operator: {}",
                refused.join("; ")
            ),
            timing::BLOCKED_POLL,
        ));
    }
    (!waiting.is_empty()).then(|| {
        Decision::wait(
            WaitReason::WaitingForMember,
            waiting.join("; "),
            timing::MEMBER_POLL,
        )
    })
}
