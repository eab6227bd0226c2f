//! [`Step`]: the one thing `act` does in a pass.
//!
//! Contract with `act`: first write the statuses the [`super::Plan`] carries (cluster, then
//! members); if any write fails, stop and requeue: the step must not run. Then perform the
//! step. A step that is only a status change ([`Step::SetPhase`]) is complete once those
//! writes succeed.

use etcd_operator_api::{EtcdMember, MemberPhase};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

pub use super::wait::WaitReason;
use crate::build::{EventType, PodStart, StartKind};

/// The one next step of a pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Converged: nothing to do until something changes.
    Idle,
    /// Nothing to do now: something is in progress (a Pod starting, a learner catching up), or
    /// the operator is blocked on something only a human can fix. The status says which.
    Wait {
        reason: WaitReason,
        message: String,
    },

    /// Status only: the member's new phase is in the plan's member statuses. Phases are
    /// written, and observed, before the mutation they announce.
    SetPhase {
        member: String,
        phase: MemberPhase,
    },

    /// Status only: the member goes to `Replacing` (the phase is in the plan's member
    /// statuses) to be rebuilt on fresh data before a 3.5 → 3.6 upgrade, because data created
    /// by an older 3.5 patch may list promoted voters as learners (etcd-io/etcd#19557); `why`
    /// says so in the Event.
    RebuildMember {
        member: String,
        why: String,
    },

    /// Status only: an EtcdMember the reference operator made is taken over as it is (its
    /// phase, `phase`, is in the plan's member statuses); its Pod and PVC are not touched.
    AdoptMember {
        member: String,
        phase: MemberPhase,
        /// etcd's ID for it (unchanged).
        id: u64,
        pod: String,
    },

    /// Create the Service (headless or client).
    CreateService(Box<Service>),
    /// Replace the Service with this one (its owned fields drifted); keeps its
    /// resourceVersion, so a concurrent change makes the write fail and the pass retry.
    UpdateService(Box<Service>),
    CreatePdb(Box<PodDisruptionBudget>),
    /// Replace the PodDisruptionBudget's spec with this one.
    UpdatePdb(Box<PodDisruptionBudget>),
    DeletePdb {
        name: String,
    },

    /// Create this EtcdMember (it carries the finalizer and the owner reference).
    CreateMember(Box<EtcdMember>),
    /// Delete the EtcdMember: its finalizer holds it while the leave sequence runs.
    DeleteMember {
        member: String,
    },
    /// Set `spec.dormant` on these members (all at once: a cluster stops and resumes whole,
    /// since quorum needs its members together).
    SetDormant {
        members: Vec<String>,
        dormant: bool,
    },
    /// Set the EtcdMember's `spec.version` (a rolling upgrade or a roll-back of one member):
    /// its running Pod is untouched; the Pod is replaced in a later step.
    SetMemberVersion {
        member: String,
        version: String,
    },
    /// Set the restart-relevant config of the EtcdMember's spec (a config rollout): its running
    /// Pod is untouched; the Pod is replaced in a later step.
    SetMemberConfig {
        member: String,
        config: Box<crate::build::MemberConfig>,
        /// The fields that change, for the Event.
        changed: Vec<&'static str>,
    },
    /// Set the EtcdMember's `spec.storage.size` (storage growth): a PVC-backed member's PVC is
    /// expanded next, a memory-backed member's Pod is replaced with the larger tmpfs next.
    SetMemberStorage {
        member: String,
        size: String,
    },
    /// Raise the PVC's `spec.resources.requests.storage` to `size` (expansion in place, where
    /// its StorageClass allows it); the Pod is untouched.
    ResizePvc {
        member: String,
        pvc: String,
        size: String,
    },
    /// Set the EtcdMember's `spec.additionalMetadata` to the target's (no restart).
    SetMemberMetadata {
        member: String,
        metadata: Option<etcd_operator_api::shared::AdditionalMetadata>,
    },
    /// Add or update these labels and annotations on the member's running Pod, in place, and
    /// remove the `remove_*` keys (taken out of `additionalMetadata`).
    PatchPodMetadata {
        member: String,
        pod: String,
        labels: std::collections::BTreeMap<String, String>,
        annotations: std::collections::BTreeMap<String, String>,
        remove_labels: Vec<String>,
        remove_annotations: Vec<String>,
    },
    /// Add or update these labels and annotations on another object the operator made for the
    /// cluster (a member's PVC or EtcdMember, the Services, the PodDisruptionBudget), in
    /// place, and remove the `remove_*` keys (taken out of `additionalMetadata`). `record` is
    /// the new value of the object's record of what `additionalMetadata` gave it (the Services'
    /// and the PodDisruptionBudget's annotation [`crate::build::ADDITIONAL_METADATA_RECORD`]):
    /// `Some(None)` removes it, `None` leaves it (members keep theirs in their spec).
    PatchMetadata {
        object: MetadataObject,
        name: String,
        member: Option<String>,
        labels: std::collections::BTreeMap<String, String>,
        annotations: std::collections::BTreeMap<String, String>,
        remove_labels: Vec<String>,
        remove_annotations: Vec<String>,
        record: Option<Option<String>>,
    },
    /// Remove `annotation` from the EtcdCluster (the recover-quorum request, once handled).
    RemoveClusterAnnotation {
        annotation: String,
        why: String,
    },
    /// Remove the `member-cleanup` finalizer: the member has left etcd and its Pod and PVC
    /// are gone.
    RemoveFinalizer {
        member: String,
    },

    CreatePvc(Box<PersistentVolumeClaim>),
    DeletePvc {
        member: String,
        pvc: String,
    },
    /// Replace the PVC's owner references (precondition: its observed `resource_version`): with the EtcdCluster's
    /// (`owner`), so the PVC of a member deleted by hand outlives the member
    /// (`persistentVolumeClaimRetentionPolicy`), or with none (`owner` is `None`), so it
    /// outlives the cluster (`whenDeleted: Retain`).
    SetPvcOwner {
        member: Option<String>,
        pvc: String,
        resource_version: Option<String>,
        owner: Option<Box<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>,
    },
    /// Set (`marked`) or remove the member's scale-in annotation: the operator is about to
    /// delete it to scale in (so its PVC follows `whenScaled`), or no longer is.
    MarkScaleIn {
        member: String,
        marked: bool,
    },
    CreatePod(Box<Pod>),
    /// Delete the Pod with the precondition `uid` (never a newer Pod of the same name).
    DeletePod {
        member: String,
        pod: String,
        uid: String,
    },
    /// Set (`voter`) or remove the `etcd-operator.cozystack.io/role=voter` label of the Pod.
    LabelPod {
        member: String,
        pod: String,
        voter: bool,
    },

    /// Set the Pod's start instruction (its initial-cluster annotations): what the next start
    /// of its etcd container does on an empty data directory. Only ever towards
    /// [`StartKind::OwnData`](crate::build::StartKind::OwnData).
    SetPodStart {
        member: String,
        pod: String,
        start: PodStart,
    },

    /// Create the cert-manager Certificate `name` (`object`, owned by the cluster), or, when it
    /// exists, merge-patch its `spec` with `patch`: only the fields the operator sets.
    ApplyCertificate {
        name: String,
        object: Option<Box<kube::api::DynamicObject>>,
        patch: Option<Box<serde_json::Value>>,
    },

    /// Operator-issued certificates (`spec.tls.*.operatorIssued`): make the cluster's CA, a
    /// member's certificate, or the operator's client certificate, and write it to its Secret
    /// (`secret`), created or replaced. `act` generates the key and signs with the CA read from
    /// its Secret; no key material is part of a step. `why` says what made it due.
    IssueCertificate {
        secret: String,
        what: IssuedCertificate,
        why: String,
    },

    /// etcd MemberAdd as a learner with the member's peer URL. `act` may record the returned
    /// ID in `status.memberID`; if it does not (or crashes first), the next pass adopts the
    /// learner by its peer URL. `UnhealthyCluster` and `TooManyLearners` are retried after
    /// [`retry_after`](super::retry_after).
    AddLearner {
        member: String,
        peer_url: String,
    },
    /// etcd MemberPromote. `LearnerNotInSync` means wait and retry.
    PromoteLearner {
        member: String,
        id: u64,
    },
    /// etcd MemberRemove. `member` is `None` for a stray etcd member no EtcdMember claims.
    /// `MemberNotFound` means it is already gone: done.
    RemoveEtcdMember {
        member: Option<String>,
        id: u64,
    },
    /// Turn etcd's authentication on: add the user `root` with the password of
    /// `spec.auth.rootCredentialsSecretRef` (`act` reads it from the observation; it is never
    /// part of a step), grant it the role `root`, `auth enable`. Each part that is already
    /// done counts as done. `act` then latches `status.authEnabled`.
    EnableAuth,
    /// etcd UserChangePassword of `root` to the password of `spec.auth.rootCredentialsSecretRef`
    /// (`act` reads it from the observation), authenticated with the one etcd still has.
    ChangeRootPassword,
    /// etcd's downgrade procedure, first part: `Downgrade VALIDATE` then `Downgrade ENABLE` to
    /// `version` (`MAJOR.MINOR.0`, one minor below etcd's cluster version). From then on etcd
    /// runs at the target's protocol and migrates each member's storage version to it. A
    /// downgrade already enabled to that target counts as done.
    EnableDowngrade {
        version: String,
    },
    /// etcd `Downgrade CANCEL`: `spec.version` went back up while a downgrade was enabled (or
    /// etcd has a downgrade to another minor than the target's). None in progress counts as
    /// done.
    CancelDowngrade {
        target: String,
    },
    /// etcd MoveLeader to `to`, sent to the current leader (`EtcdClient::move_leader` finds it).
    MoveLeader {
        from: Option<String>,
        to: String,
        to_id: u64,
    },
    /// etcd Alarm DEACTIVATE of `alarm`, once its cause is gone (a CORRUPT member removed from
    /// etcd). `member` names the EtcdMember the alarm named, if one does.
    DisarmAlarm {
        member: Option<String>,
        alarm: crate::etcd::Alarm,
    },
    /// etcd Compact (physical) up to `revision`, the current one: the first step of the
    /// NOSPACE remediation. A revision already compacted counts as done.
    Compact {
        revision: i64,
    },
    /// etcd Defragment of member `member` alone at its client URL `endpoint` (the NOSPACE
    /// remediation, one member per pass, followers first, the leader last). `db_size` is its
    /// backend size before, for the Event.
    Defragment {
        member: String,
        endpoint: String,
        db_size: i64,
        leader: bool,
    },
}

/// What [`Step::IssueCertificate`] makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IssuedCertificate {
    /// The cluster's CA (Secret `<cluster>-ca`, owned by the EtcdCluster).
    Ca,
    /// The start of a CA rotation: a new CA in the CA Secret, the old one kept beside it as the
    /// previous CA, and the bundle of both as what everyone trusts. `token` is the `rotate-ca`
    /// annotation value it answers.
    RotateCa { token: Option<String> },
    /// The end of a CA rotation: the previous CA leaves the CA Secret and the bundle.
    DropPreviousCa,
    /// A member's certificate for both listeners (Secret `<member>-tls`, owned by that
    /// EtcdMember, whose UID is `uid`).
    Member {
        member: String,
        uid: String,
        signer: Signer,
    },
    /// The operator's client certificate (Secret `<cluster>-operator-client-tls`).
    OperatorClient { signer: Signer },
}

/// Which CA signs a leaf: during a rotation the previous one, until every member trusts the
/// new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signer {
    Current,
    Previous,
}

impl IssuedCertificate {
    pub fn describe(&self) -> String {
        let by = |signer: &Signer| match signer {
            Signer::Current => "",
            Signer::Previous => {
                " (signed by the previous CA until every member trusts the new one)"
            }
        };
        match self {
            IssuedCertificate::Ca => "the cluster's CA".to_string(),
            IssuedCertificate::RotateCa { .. } => {
                "a new CA (the rotation starts: both CAs trusted)".to_string()
            }
            IssuedCertificate::DropPreviousCa => {
                "the CA alone (the rotation ends: the previous CA is no longer trusted)".to_string()
            }
            IssuedCertificate::Member { member, signer, .. } => {
                format!("the certificate of member {member}{}", by(signer))
            }
            IssuedCertificate::OperatorClient { signer } => {
                format!("the operator's client certificate{}", by(signer))
            }
        }
    }
}

/// The Event message of an `additionalMetadata` patch of `what` ("Pod etcd-0").
fn metadata_message(
    what: &str,
    labels: &std::collections::BTreeMap<String, String>,
    annotations: &std::collections::BTreeMap<String, String>,
    remove_labels: &[String],
    remove_annotations: &[String],
) -> String {
    let keys = |m: &std::collections::BTreeMap<String, String>| {
        m.keys().cloned().collect::<Vec<_>>().join(", ")
    };
    let mut message = format!(
        "{what} gets spec.additionalMetadata in place (labels: {}; annotations: {})",
        keys(labels),
        keys(annotations)
    );
    if !remove_labels.is_empty() || !remove_annotations.is_empty() {
        message.push_str(&format!(
            "; removed (labels: {}; annotations: {})",
            remove_labels.join(", "),
            remove_annotations.join(", ")
        ));
    }
    message
}

/// An object whose labels and annotations `Step::PatchMetadata` changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataObject {
    Pvc,
    Member,
    Service,
    Pdb,
}

impl MetadataObject {
    pub fn kind(self) -> &'static str {
        match self {
            MetadataObject::Pvc => "PVC",
            MetadataObject::Member => "EtcdMember",
            MetadataObject::Service => "Service",
            MetadataObject::Pdb => "PodDisruptionBudget",
        }
    }
}

/// The kind of a [`Step`], without its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepKind {
    Idle,
    Wait,
    SetPhase,
    RebuildMember,
    AdoptMember,
    CreateService,
    UpdateService,
    CreatePdb,
    UpdatePdb,
    DeletePdb,
    CreateMember,
    DeleteMember,
    SetDormant,
    SetMemberVersion,
    SetMemberConfig,
    SetMemberStorage,
    ResizePvc,
    SetMemberMetadata,
    PatchPodMetadata,
    PatchMetadata,
    RemoveClusterAnnotation,
    RemoveFinalizer,
    CreatePvc,
    DeletePvc,
    SetPvcOwner,
    MarkScaleIn,
    CreatePod,
    DeletePod,
    LabelPod,
    SetPodStart,
    ApplyCertificate,
    IssueCertificate,
    AddLearner,
    PromoteLearner,
    RemoveEtcdMember,
    MoveLeader,
    EnableDowngrade,
    CancelDowngrade,
    EnableAuth,
    ChangeRootPassword,
    DisarmAlarm,
    Compact,
    Defragment,
}

impl Step {
    pub fn kind(&self) -> StepKind {
        match self {
            Step::Idle => StepKind::Idle,
            Step::Wait { .. } => StepKind::Wait,
            Step::SetPhase { .. } => StepKind::SetPhase,
            Step::RebuildMember { .. } => StepKind::RebuildMember,
            Step::AdoptMember { .. } => StepKind::AdoptMember,
            Step::CreateService(_) => StepKind::CreateService,
            Step::UpdateService(_) => StepKind::UpdateService,
            Step::CreatePdb(_) => StepKind::CreatePdb,
            Step::UpdatePdb(_) => StepKind::UpdatePdb,
            Step::DeletePdb { .. } => StepKind::DeletePdb,
            Step::CreateMember(_) => StepKind::CreateMember,
            Step::DeleteMember { .. } => StepKind::DeleteMember,
            Step::SetDormant { .. } => StepKind::SetDormant,
            Step::SetMemberVersion { .. } => StepKind::SetMemberVersion,
            Step::SetMemberConfig { .. } => StepKind::SetMemberConfig,
            Step::SetMemberStorage { .. } => StepKind::SetMemberStorage,
            Step::ResizePvc { .. } => StepKind::ResizePvc,
            Step::SetMemberMetadata { .. } => StepKind::SetMemberMetadata,
            Step::PatchPodMetadata { .. } => StepKind::PatchPodMetadata,
            Step::PatchMetadata { .. } => StepKind::PatchMetadata,
            Step::RemoveClusterAnnotation { .. } => StepKind::RemoveClusterAnnotation,
            Step::RemoveFinalizer { .. } => StepKind::RemoveFinalizer,
            Step::CreatePvc(_) => StepKind::CreatePvc,
            Step::DeletePvc { .. } => StepKind::DeletePvc,
            Step::SetPvcOwner { .. } => StepKind::SetPvcOwner,
            Step::MarkScaleIn { .. } => StepKind::MarkScaleIn,
            Step::CreatePod(_) => StepKind::CreatePod,
            Step::DeletePod { .. } => StepKind::DeletePod,
            Step::LabelPod { .. } => StepKind::LabelPod,
            Step::SetPodStart { .. } => StepKind::SetPodStart,
            Step::ApplyCertificate { .. } => StepKind::ApplyCertificate,
            Step::IssueCertificate { .. } => StepKind::IssueCertificate,
            Step::AddLearner { .. } => StepKind::AddLearner,
            Step::PromoteLearner { .. } => StepKind::PromoteLearner,
            Step::RemoveEtcdMember { .. } => StepKind::RemoveEtcdMember,
            Step::MoveLeader { .. } => StepKind::MoveLeader,
            Step::EnableDowngrade { .. } => StepKind::EnableDowngrade,
            Step::CancelDowngrade { .. } => StepKind::CancelDowngrade,
            Step::EnableAuth => StepKind::EnableAuth,
            Step::ChangeRootPassword => StepKind::ChangeRootPassword,
            Step::DisarmAlarm { .. } => StepKind::DisarmAlarm,
            Step::Compact { .. } => StepKind::Compact,
            Step::Defragment { .. } => StepKind::Defragment,
        }
    }

    /// Steps that change something outside the statuses.
    pub fn mutates(&self) -> bool {
        !matches!(
            self,
            Step::Idle
                | Step::Wait { .. }
                | Step::SetPhase { .. }
                | Step::RebuildMember { .. }
                | Step::AdoptMember { .. }
        )
    }

    /// Steps that take a member (or its data) away: they pass the quorum checks first.
    pub fn is_destructive(&self) -> bool {
        matches!(
            self,
            Step::DeleteMember { .. }
                | Step::DeletePvc { .. }
                | Step::DeletePod { .. }
                | Step::RemoveEtcdMember { .. }
                | Step::DeletePdb { .. }
        ) || matches!(self, Step::SetDormant { dormant: true, .. })
    }

    /// Steps that change etcd's membership.
    pub fn is_membership_change(&self) -> bool {
        matches!(
            self,
            Step::AddLearner { .. } | Step::PromoteLearner { .. } | Step::RemoveEtcdMember { .. }
        )
    }

    /// The member the step acts on, if it acts on one.
    pub fn member(&self) -> Option<&str> {
        match self {
            Step::SetPhase { member, .. }
            | Step::RebuildMember { member, .. }
            | Step::AdoptMember { member, .. }
            | Step::DeleteMember { member }
            | Step::RemoveFinalizer { member }
            | Step::SetMemberVersion { member, .. }
            | Step::SetMemberConfig { member, .. }
            | Step::SetMemberStorage { member, .. }
            | Step::ResizePvc { member, .. }
            | Step::SetMemberMetadata { member, .. }
            | Step::PatchPodMetadata { member, .. }
            | Step::DeletePvc { member, .. }
            | Step::MarkScaleIn { member, .. }
            | Step::DeletePod { member, .. }
            | Step::LabelPod { member, .. }
            | Step::SetPodStart { member, .. }
            | Step::AddLearner { member, .. }
            | Step::PromoteLearner { member, .. }
            | Step::Defragment { member, .. } => Some(member),
            Step::RemoveEtcdMember { member, .. }
            | Step::DisarmAlarm { member, .. }
            | Step::SetPvcOwner { member, .. }
            | Step::PatchMetadata { member, .. } => member.as_deref(),
            Step::CreateMember(m) => m.metadata.name.as_deref(),
            Step::CreatePod(p) => p.metadata.name.as_deref(),
            Step::CreatePvc(p) => p
                .metadata
                .name
                .as_deref()
                .and_then(|n| n.strip_prefix("data-")),
            _ => None,
        }
    }

    /// The Event reason for this step (CamelCase, stable).
    pub fn reason(&self) -> &'static str {
        match self {
            Step::Idle => "Reconciled",
            Step::Wait { reason, .. } => reason.as_str(),
            Step::SetPhase { .. } => "MemberPhaseChanged",
            Step::RebuildMember { .. } => "MembershipRebuild",
            Step::AdoptMember { .. } => "Adopted",
            Step::CreateService(_) => "ServiceCreated",
            Step::UpdateService(_) => "ServiceUpdated",
            Step::CreatePdb(_) => "PodDisruptionBudgetCreated",
            Step::UpdatePdb(_) => "PodDisruptionBudgetUpdated",
            Step::DeletePdb { .. } => "PodDisruptionBudgetDeleted",
            Step::CreateMember(_) => "MemberCreated",
            Step::DeleteMember { .. } => "MemberDeleted",
            Step::SetDormant { dormant: true, .. } => "ClusterStopping",
            Step::SetDormant { dormant: false, .. } => "ClusterResuming",
            Step::SetMemberVersion { .. } => "MemberVersionChanged",
            Step::SetMemberConfig { .. } => "MemberConfigChanged",
            Step::SetMemberStorage { .. } => "MemberStorageChanged",
            Step::ResizePvc { .. } => "VolumeExpanding",
            Step::SetMemberMetadata { .. } => "MemberMetadataChanged",
            Step::PatchPodMetadata { .. } => "PodMetadataPatched",
            Step::PatchMetadata { .. } => "MetadataPatched",
            Step::RemoveClusterAnnotation { .. } => "QuorumRecoveryRequestHandled",
            Step::RemoveFinalizer { .. } => "MemberCleanedUp",
            Step::CreatePvc(_) => "VolumeCreated",
            Step::DeletePvc { .. } => "VolumeDeleted",
            Step::SetPvcOwner { owner: Some(_), .. } => "VolumeRetained",
            Step::SetPvcOwner { owner: None, .. } => "VolumeReleased",
            Step::MarkScaleIn { marked: true, .. } => "MemberScalingIn",
            Step::MarkScaleIn { marked: false, .. } => "MemberScaleInCancelled",
            Step::CreatePod(_) => "PodCreated",
            Step::DeletePod { .. } => "PodDeleted",
            Step::LabelPod { .. } => "PodRoleLabelled",
            Step::SetPodStart { .. } => "PodStartChanged",
            Step::ApplyCertificate {
                object: Some(_), ..
            } => "CertificateCreated",
            Step::ApplyCertificate { .. } => "CertificateUpdated",
            Step::IssueCertificate { .. } => "CertificateIssued",
            Step::AddLearner { .. } => "LearnerAdded",
            Step::PromoteLearner { .. } => "LearnerPromoted",
            Step::RemoveEtcdMember { .. } => "MemberRemoved",
            Step::MoveLeader { .. } => "LeaderMoved",
            Step::EnableDowngrade { .. } => "DowngradeEnabled",
            Step::CancelDowngrade { .. } => "DowngradeCancelled",
            Step::EnableAuth => "AuthEnabled",
            Step::ChangeRootPassword => "RootPasswordChanged",
            Step::DisarmAlarm { .. } => "AlarmDisarmed",
            Step::Compact { .. } => "KeyspaceCompacted",
            Step::Defragment { .. } => "MemberDefragmented",
        }
    }

    /// A sentence for the Event and the logs.
    pub fn message(&self) -> String {
        match self {
            Step::Idle => "the cluster matches its spec".to_string(),
            Step::Wait { message, .. } => message.clone(),
            Step::SetPhase { member, phase } => format!("member {member} is now {phase}"),
            Step::RebuildMember { member, why } => {
                format!("member {member} is now Replacing: {why}")
            }
            Step::AdoptMember {
                member,
                phase,
                id,
                pod,
            } => format!(
                "EtcdMember {member} (etcd member {id:x}) taken over from the reference operator as {phase}: its Pod {pod} and PVC are kept as they are (no restart)"
            ),
            Step::CreateService(s) | Step::UpdateService(s) => {
                format!("Service {}", s.metadata.name.as_deref().unwrap_or_default())
            }
            Step::CreatePdb(_) | Step::UpdatePdb(_) => {
                "PodDisruptionBudget over the voting members".to_string()
            }
            Step::DeletePdb { name } => format!("PodDisruptionBudget {name}: no voters to protect"),
            Step::CreateMember(m) => {
                format!(
                    "EtcdMember {}",
                    m.metadata.name.as_deref().unwrap_or_default()
                )
            }
            Step::DeleteMember { member } => format!("EtcdMember {member} leaves the cluster"),
            Step::SetDormant { members, dormant } => format!(
                "{} members: {}",
                if *dormant { "stopping" } else { "resuming" },
                members.join(", ")
            ),
            Step::SetMemberVersion { member, version } => format!(
                "member {member} is to run etcd {version} (its Pod is created again on its data next)"
            ),
            Step::SetMemberConfig {
                member, changed, ..
            } => format!(
                "member {member} takes the new {} (its Pod is created again on its data next)",
                changed.join(", ")
            ),
            Step::SetMemberStorage { member, size } => format!(
                "member {member}'s storage grows to {size} (its PVC is expanded next, or a memory-backed member's Pod is replaced with the larger tmpfs)"
            ),
            Step::ResizePvc { member, pvc, size } => {
                format!("PVC {pvc} of member {member} is expanded to {size} in place (no restart)")
            }
            Step::SetMemberMetadata { member, .. } => {
                format!("member {member} takes the new additionalMetadata (no restart)")
            }
            Step::PatchPodMetadata {
                pod,
                labels,
                annotations,
                remove_labels,
                remove_annotations,
                ..
            } => metadata_message(
                &format!("Pod {pod}"),
                labels,
                annotations,
                remove_labels,
                remove_annotations,
            ),
            Step::PatchMetadata {
                object,
                name,
                labels,
                annotations,
                remove_labels,
                remove_annotations,
                ..
            } => metadata_message(
                &format!("{} {name}", object.kind()),
                labels,
                annotations,
                remove_labels,
                remove_annotations,
            ),
            Step::RemoveClusterAnnotation { annotation, why } => {
                format!("annotation {annotation} removed: {why}")
            }
            Step::RemoveFinalizer { member } => format!("member {member} has left the cluster"),
            Step::CreatePvc(p) => {
                format!("PVC {}", p.metadata.name.as_deref().unwrap_or_default())
            }
            Step::DeletePvc { member, pvc } => format!("PVC {pvc} of member {member}"),
            Step::SetPvcOwner {
                member,
                pvc,
                owner: Some(_),
                ..
            } => format!(
                "PVC {pvc}{} is retained: it now belongs to the EtcdCluster, and its ordinal is not used again while it exists",
                member
                    .as_ref()
                    .map(|m| format!(" of member {m}, deleted by hand,"))
                    .unwrap_or_default()
            ),
            Step::SetPvcOwner { pvc, .. } => format!(
                "PVC {pvc} is released (no owner): it outlives the cluster (whenDeleted: Retain)"
            ),
            Step::MarkScaleIn {
                member,
                marked: true,
            } => format!("member {member} is to leave the cluster: scaling in"),
            Step::MarkScaleIn { member, .. } => {
                format!("member {member} stays: the scale-in was called off")
            }
            Step::CreatePod(p) => {
                format!("Pod {}", p.metadata.name.as_deref().unwrap_or_default())
            }
            Step::DeletePod { member, pod, .. } => format!("Pod {pod} of member {member}"),
            Step::LabelPod { pod, voter, .. } => {
                format!(
                    "Pod {pod} {} the voter label",
                    if *voter { "gets" } else { "loses" }
                )
            }
            Step::SetPodStart { member, pod, start } => format!(
                "Pod {pod} now restarts {}",
                match start.kind(member) {
                    StartKind::Bootstrap => "by forming a new cluster".to_string(),
                    StartKind::OwnData =>
                        "only on its own data (an empty data directory keeps etcd from starting)"
                            .to_string(),
                    StartKind::Join => format!("by joining {}", start.initial_cluster),
                }
            ),
            Step::ApplyCertificate {
                name,
                object,
                patch,
            } => match (object, patch) {
                (Some(_), _) => format!("cert-manager Certificate {name} created"),
                (None, Some(patch)) => format!(
                    "cert-manager Certificate {name} patched back to what the operator sets ({})",
                    patch
                        .as_object()
                        .map(|o| o.keys().cloned().collect::<Vec<_>>().join(", "))
                        .unwrap_or_default()
                ),
                (None, None) => format!("cert-manager Certificate {name} left as it is"),
            },
            Step::IssueCertificate { secret, what, why } => {
                format!("{} issued into Secret {secret} ({why})", what.describe())
            }
            Step::AddLearner { member, peer_url } => {
                format!("member {member} added to etcd as a learner at {peer_url}")
            }
            Step::PromoteLearner { member, id } => format!("learner {member} ({id:x}) promoted"),
            Step::RemoveEtcdMember { member, id } => match member {
                Some(m) => format!("member {m} ({id:x}) removed from etcd"),
                None => format!("stray etcd member {id:x} (no EtcdMember claims it) removed"),
            },
            Step::EnableDowngrade { version } => format!(
                "etcd's downgrade to {version} validated and enabled: the cluster runs at {version}'s protocol and etcd migrates each member's storage to it; the members are then rolled to it one at a time, the leader last"
            ),
            Step::CancelDowngrade { target } => format!(
                "etcd's downgrade cancelled: spec.version is {target}, above the downgrade's target"
            ),
            Step::EnableAuth => {
                "authentication enabled: user root (role root) added, auth enable".to_string()
            }
            Step::ChangeRootPassword => {
                "etcd's root password changed to the one in the root credentials Secret".to_string()
            }
            Step::MoveLeader { from, to, .. } => match from {
                Some(from) => format!("leadership moved from {from} to {to}"),
                None => format!("leadership moved to {to}"),
            },
            Step::DisarmAlarm { member, alarm } => {
                let who = member
                    .as_ref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default();
                match alarm.kind {
                    crate::etcd::AlarmKind::Corrupt => {
                        format!("{alarm}{who} disarmed: etcd no longer lists the member it names")
                    }
                    crate::etcd::AlarmKind::NoSpace => format!(
                        "{alarm}{who} disarmed: every member's backend is below 90 % of its quota"
                    ),
                }
            }
            Step::Compact { revision } => format!(
                "NOSPACE remediation: keyspace compacted up to revision {revision} (older versions of keys are dropped)"
            ),
            Step::Defragment {
                member,
                db_size,
                leader,
                ..
            } => format!(
                "NOSPACE remediation: {} {member} defragmented (backend {db_size} bytes before)",
                if *leader { "leader" } else { "member" }
            ),
        }
    }

    /// Warnings for what needs a human or signals trouble; Normal otherwise.
    pub fn event_type(&self) -> EventType {
        match self {
            Step::Wait { reason, .. } if reason.needs_attention() => EventType::Warning,
            Step::RemoveEtcdMember { member: None, .. } => EventType::Warning,
            Step::RemoveClusterAnnotation { why, .. } if why.contains("nothing to recover") => {
                EventType::Warning
            }
            _ => EventType::Normal,
        }
    }
}
