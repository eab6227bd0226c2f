//! [`Observed`]: everything one planning pass looks at, gathered by `observe`.
//!
//! Pods and PVCs are reduced to the facts the planner reads ([`PodFacts`], [`PvcFacts`]), so
//! tests and property generators build them directly; `from_pod`/`from_pvc` derive them from
//! the API objects.

use etcd_operator_api::{EtcdCluster, EtcdMember};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;

use crate::build::{DISCOVERY_FAILED, ETCD_CONTAINER, PodStart, StartKind};
use crate::domain::settings::OperatorSettings;
use crate::etcd::EtcdView;

/// One observation of a cluster and everything it owns.
#[derive(Clone, Debug)]
pub struct Observed {
    /// The EtcdCluster. When it is gone but EtcdMembers with the finalizer remain, `observe`
    /// passes the last known object with `metadata.deletionTimestamp` set, so cleanup finishes.
    pub cluster: EtcdCluster,
    /// Every EtcdMember labelled with the cluster, with its Pod and PVC.
    pub members: Vec<ObservedMember>,
    /// The headless Service `<cluster>`.
    pub headless_service: Option<Service>,
    /// The client Service `<cluster>-client`.
    pub client_service: Option<Service>,
    /// The PodDisruptionBudget `<cluster>`.
    pub pdb: Option<PodDisruptionBudget>,
    /// What etcd says, from `observe_cluster` over the client URLs of the members that have a
    /// Pod (or [`EtcdView::not_observed`] when none has).
    pub etcd: EtcdView,
    /// Operator-wide settings (the etcd image repository).
    pub settings: OperatorSettings,
    /// The cluster's TLS and credentials, from the Secrets its spec names.
    pub security: SecurityFacts,
    /// PVCs labelled with the cluster that belong to no observed EtcdMember: the data of
    /// members deleted by hand or scaled in under `persistentVolumeClaimRetentionPolicy`
    /// (retained), by name. Their ordinals are not used again.
    pub retained_pvcs: Vec<PvcFacts>,
    /// The EtcdSnapshots of the namespace (a lost-quorum recovery with no member's data left
    /// restores from one); `Err` with the reason when the list failed; `None` when not read.
    /// `observe` reads them only while a recovery from a snapshot runs; otherwise a plan that
    /// needs them says so ([`crate::plan::Plan::needs_snapshots`]) and the reconciler reads them
    /// and plans again, so passes that do not need them skip the LIST (a consistent read that
    /// waits up to 0.1 s on a real API server; docs/testing.md).
    pub snapshots: Option<Result<Vec<SnapshotFacts>, String>>,
}

/// What a lost-quorum recovery needs of one EtcdSnapshot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SnapshotFacts {
    pub name: String,
    /// `spec.clusterRef.name`: only a snapshot of this cluster is ever restored.
    pub cluster: String,
    /// Phase Complete.
    pub complete: bool,
    /// `status.verified` is true: read back and matched.
    pub verified: bool,
    pub revision: Option<i64>,
    /// `status.completionTime` (RFC 3339).
    pub completed_at: Option<Timestamp>,
    /// `status.artifact.uri`.
    pub uri: Option<String>,
    /// The destination it was written to.
    pub destination: etcd_operator_api::shared::SnapshotLocation,
    pub deleting: bool,
    /// Stored encrypted (`status.encryption`).
    pub encrypted: bool,
    /// `spec.encryption.age.identitySecretRef`: how a restore decrypts it.
    pub identity: Option<etcd_operator_api::snapshot::SecretKeyRef>,
}

impl SnapshotFacts {
    /// From the object.
    pub fn from_snapshot(s: &etcd_operator_api::EtcdSnapshot) -> SnapshotFacts {
        let status = s.status.clone().unwrap_or_default();
        SnapshotFacts {
            name: s.metadata.name.clone().unwrap_or_default(),
            cluster: s.spec.cluster_ref.name.clone(),
            complete: status.phase == Some(etcd_operator_api::snapshot::SnapshotPhase::Complete),
            verified: status.verified == Some(true),
            revision: status.revision,
            completed_at: status
                .completion_time
                .as_deref()
                .and_then(|t| t.parse::<Timestamp>().ok()),
            uri: status.artifact.map(|a| a.uri),
            destination: s.spec.destination.clone(),
            deleting: s.metadata.deletion_timestamp.is_some(),
            encrypted: status.encryption.is_some(),
            identity: s
                .spec
                .encryption
                .as_ref()
                .and_then(|e| e.age.identity_secret_ref.clone()),
        }
    }
}

/// What the Secrets of `spec.tls` (and `spec.auth`) amount to.
#[derive(Clone, Debug, Default)]
pub struct SecurityFacts {
    /// How the operator dials etcd (what `observe` used, and what `act` uses).
    pub access: crate::etcd::EtcdAccess,
    /// What is wrong with the Secrets the spec names, one sentence each naming the Secret and
    /// the problem. Empty when every one is usable.
    pub problems: Vec<String>,
    /// The root password from `spec.auth.rootCredentialsSecretRef` (never printed).
    pub root_password: Option<Password>,
    /// etcd asked for credentials although `status.authEnabled` is not latched (authentication
    /// was enabled and the operator stopped before it recorded so): the status latches it.
    pub auth_found_enabled: bool,
    /// etcd refuses the Secret's root password but took an earlier one (the Secret's
    /// `previousPassword`, or the last one that worked): `access` carries the earlier one, and
    /// the password is to be changed to the Secret's.
    pub root_password_outdated: bool,
    /// The validity of each usable certificate the cluster runs on.
    pub validity: Vec<crate::security::CertificateValidity>,
    /// The cert-manager Certificates `spec.tls` asks for, as observed.
    pub certificates: Vec<CertificateFacts>,
    /// Operator-issued certificates (`spec.tls.*.operatorIssued`), as observed; `None` without.
    pub issued: Option<IssuedFacts>,
    /// What each member's etcd would trust if it started now: a digest of the CA certificates
    /// its Secrets hold (`ca.crt` of the client and the peer Secret), by member. A Pod records
    /// the digest it was created with ([`PodFacts::trusted_ca`]); etcd reads its trusted CAs
    /// only at start-up, so a Pod whose digest differs is restarted to trust the new ones.
    /// Absent for a member whose Secrets are not usable.
    pub trust: std::collections::BTreeMap<String, String>,
}

/// The operator-issued certificates of a cluster: its CA, each member's, the operator's own.
#[derive(Clone, Debug, Default)]
pub struct IssuedFacts {
    /// The CA Secret `<cluster>-ca`.
    pub ca: IssuedState,
    /// Each EtcdMember that is not being deleted, in member order.
    pub members: Vec<IssuedMember>,
    /// The operator's client certificate; `None` when the client API is not mutual TLS.
    pub operator_client: Option<IssuedState>,
    /// The operator's client certificate is signed by the previous CA (during a rotation).
    pub operator_client_by_previous: bool,
    /// A CA rotation runs: the CA Secret holds the previous CA beside the new one.
    pub rotating: bool,
    /// A CA rotation should start, and why (asked for by the annotation, or the CA is in its
    /// last third); `None` while one runs or none is wanted.
    pub rotation_wanted: Option<RotationRequest>,
}

/// Why a CA rotation starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RotationRequest {
    /// The value of the `rotate-ca` annotation it answers (recorded on the CA Secret so it is
    /// answered once), or `None` for a rotation because the CA nears its end.
    pub token: Option<String>,
    pub why: String,
}

/// One member's operator-issued certificate.
#[derive(Clone, Debug)]
pub struct IssuedMember {
    pub member: String,
    /// The EtcdMember's UID, which owns the Secret.
    pub uid: String,
    pub state: IssuedState,
    /// Its certificate is signed by the previous CA (during a rotation).
    pub by_previous: bool,
    /// Its Secret's `ca.crt` is the CA Secret's bundle (what the cluster trusts now).
    pub has_bundle: bool,
}

/// An operator-issued Secret as observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum IssuedState {
    /// Usable, signed by the current CA, not yet due for renewal.
    #[default]
    Current,
    /// Not there yet.
    Missing,
    /// To be issued again, and why (renewal due, signed by another CA, owned by an earlier
    /// member of the same name, names or usages not right, unusable).
    Due(String),
    /// Cannot be issued: the reason is among the security problems (for the CA: gone while
    /// members run on certificates it signed).
    Blocked,
}

/// One cert-manager Certificate the operator wants, as the API has it.
#[derive(Clone, Debug)]
pub struct CertificateFacts {
    pub wanted: crate::security::certmanager::WantedCertificate,
    /// It exists in the API.
    pub exists: bool,
    /// The merge patch of its `spec` that restores what the operator sets; `None` when it
    /// matches (or does not exist).
    pub patch: Option<serde_json::Value>,
    /// Why it is not Ready (or does not exist yet), naming a missing issuer.
    pub not_ready: Option<String>,
}

/// A password: kept out of every Debug output, log line, Event and status.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(pub String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

/// An EtcdMember with its Pod and PVC.
#[derive(Clone, Debug)]
pub struct ObservedMember {
    pub member: EtcdMember,
    /// The Pod named after the member, if any.
    pub pod: Option<PodFacts>,
    /// The PVC `data-<member>`, if any.
    pub pvc: Option<PvcFacts>,
}

/// The phase Kubernetes reports for a Pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    fn parse(phase: Option<&str>) -> PodPhase {
        match phase {
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            Some("Pending") => PodPhase::Pending,
            _ => PodPhase::Unknown,
        }
    }

    /// Succeeded and Failed are final: the kubelet never restarts containers of such a Pod
    /// (a graceful node shutdown leaves every etcd Pod Succeeded or Failed).
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// What the planner reads of a member's Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFacts {
    pub name: String,
    pub uid: String,
    pub phase: PodPhase,
    /// The Pod's Ready condition.
    pub ready: bool,
    /// `metadata.deletionTimestamp` is set: it is going away; leave it alone.
    pub deleting: bool,
    /// Restarts of the etcd container.
    pub restart_count: i32,
    /// Why the etcd container is waiting, e.g. `CrashLoopBackOff`.
    pub waiting_reason: Option<String>,
    /// Why the etcd container last terminated, e.g. `OOMKilled`.
    pub last_termination_reason: Option<String>,
    /// `status.startTime`, else `metadata.creationTimestamp`.
    pub started_at: Option<Timestamp>,
    /// When the Pod's Ready condition last changed (`lastTransitionTime`).
    pub ready_changed_at: Option<Timestamp>,
    pub node: Option<String>,
    /// The Pod carries `etcd-operator.cozystack.io/role=voter`.
    pub voter_label: bool,
    /// UID of the Pod's controller owner; a Pod owned by something else is not ours to use.
    pub owner_uid: Option<String>,
    /// What a start of its etcd container does on an empty data directory (the Pod's
    /// annotations); `None` for a Pod made by an older operator that has the flags in its
    /// command line.
    pub start: Option<PodStart>,
    /// The etcd container's termination message of its current or last ended run (the tail of
    /// its log: `terminationMessagePolicy: FallbackToLogsOnError`).
    pub termination_message: Option<String>,
    /// The trust digest the Pod was created with ([`TRUSTED_CA_ANNOTATION`]); `None` for a Pod
    /// without TLS or made by an older operator.
    ///
    /// [`TRUSTED_CA_ANNOTATION`]: crate::build::TRUSTED_CA_ANNOTATION
    pub trusted_ca: Option<String>,
    /// A restore init container of the seed's Pod failed: the agent's last line
    /// (`RestoreFailed <Reason>: <message>`), from that container's termination message.
    pub restore_failure: Option<String>,
    /// The restore init container running now (a seed's first Pod filling its data
    /// directory from a snapshot), while none fails.
    pub restoring: Option<String>,
    /// The image of the etcd container (what a rolling upgrade compares with the image of the
    /// member's `spec.version`); `None` when the Pod has no etcd container.
    pub image: Option<String>,
    /// The config digest the Pod was created with ([`CONFIG_DIGEST_ANNOTATION`]); `None`
    /// for a Pod made by an older operator (left alone by config rollouts).
    ///
    /// [`CONFIG_DIGEST_ANNOTATION`]: crate::build::CONFIG_DIGEST_ANNOTATION
    pub config_digest: Option<String>,
    /// The version and the rendered hash the Pod was created with
    /// ([`RENDERED_VERSION_ANNOTATION`], [`RENDERED_HASH_ANNOTATION`]): what a rollout compares
    /// with what the operator would render now. `None` for a Pod made by an older operator
    /// (or by the reference operator), which is judged by its image instead.
    ///
    /// [`RENDERED_VERSION_ANNOTATION`]: crate::build::RENDERED_VERSION_ANNOTATION
    /// [`RENDERED_HASH_ANNOTATION`]: crate::build::RENDERED_HASH_ANNOTATION
    pub rendered: Option<(String, String)>,
    /// The Pod's labels and annotations (for `additionalMetadata` patched in place).
    pub labels: std::collections::BTreeMap<String, String>,
    pub annotations: std::collections::BTreeMap<String, String>,
    /// The size limit of the Pod's memory-backed data volume (a tmpfs `emptyDir`), if it has
    /// one: a memory-backed member whose Pod has a smaller one rolls to its new size.
    pub tmpfs_size: Option<String>,
    /// The `--flag=value` arguments of the etcd container's command line (what a Pod made by
    /// the reference operator runs with: its name, peer URL, data directory, start state),
    /// with the `$(VAR)` references the kubelet expands resolved against the container's
    /// literal and `metadata.name`/`metadata.namespace` variables (how the legacy
    /// `etcd.aenix.io` operator's StatefulSet Pods name themselves).
    pub etcd_flags: std::collections::BTreeMap<String, String>,
    /// The PVC the Pod's `data` volume mounts, if it is a claim.
    pub data_claim: Option<String>,
    /// Where the etcd container mounts the `data` volume (this operator: `/var/lib/etcd`; the
    /// legacy operator: `/var/run/etcd`): what `--data-dir` is relative to.
    pub data_mount: Option<String>,
}

impl PodFacts {
    /// The facts of `pod`: what the operator's cache keeps of it ([`crate::observe::Cached`]),
    /// so a pure function of the Pod alone.
    pub fn from_pod(pod: &Pod) -> PodFacts {
        let status = pod.status.clone().unwrap_or_default();
        let etcd = status
            .container_statuses
            .iter()
            .flatten()
            .find(|c| c.name == ETCD_CONTAINER);
        let ready_condition = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready");
        let ready = ready_condition.is_some_and(|c| c.status == "True");
        let ready_changed_at = ready_condition
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0);
        let restore_failure = crate::build::restore_failure(&status);
        let restoring = crate::build::restore_in_progress(&status);
        PodFacts {
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            phase: PodPhase::parse(status.phase.as_deref()),
            ready,
            deleting: pod.metadata.deletion_timestamp.is_some(),
            restart_count: etcd.map(|c| c.restart_count).unwrap_or_default(),
            waiting_reason: etcd
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.clone()),
            last_termination_reason: etcd
                .and_then(|c| c.last_state.as_ref())
                .and_then(|s| s.terminated.as_ref())
                .and_then(|t| t.reason.clone()),
            started_at: status
                .start_time
                .map(|t| t.0)
                .or_else(|| pod.metadata.creation_timestamp.clone().map(|t| t.0)),
            ready_changed_at,
            node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            voter_label: pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(etcd_operator_api::labels::ROLE))
                .is_some_and(|v| v == etcd_operator_api::labels::ROLE_VOTER),
            owner_uid: controller_uid(&pod.metadata),
            start: PodStart::from_annotations(pod.metadata.annotations.as_ref()),
            trusted_ca: pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::build::TRUSTED_CA_ANNOTATION))
                .cloned(),
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            annotations: pod.metadata.annotations.clone().unwrap_or_default(),
            config_digest: pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::build::CONFIG_DIGEST_ANNOTATION))
                .cloned(),
            rendered: pod.metadata.annotations.as_ref().and_then(|a| {
                Some((
                    a.get(crate::build::RENDERED_VERSION_ANNOTATION)?.clone(),
                    a.get(crate::build::RENDERED_HASH_ANNOTATION)?.clone(),
                ))
            }),
            image: pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|c| c.name == ETCD_CONTAINER))
                .and_then(|c| c.image.clone()),
            termination_message: etcd.and_then(|c| {
                let ended = |s: Option<&k8s_openapi::api::core::v1::ContainerState>| {
                    s.and_then(|s| s.terminated.as_ref())
                        .and_then(|t| t.message.clone())
                };
                ended(c.state.as_ref()).or_else(|| ended(c.last_state.as_ref()))
            }),
            restore_failure,
            restoring,
            tmpfs_size: pod
                .spec
                .as_ref()
                .and_then(|s| s.volumes.as_ref())
                .and_then(|v| v.iter().find(|v| v.name == "data"))
                .and_then(|v| v.empty_dir.as_ref())
                .filter(|e| e.medium.as_deref() == Some("Memory"))
                .and_then(|e| e.size_limit.as_ref())
                .map(|q| q.0.clone()),
            etcd_flags: pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|c| c.name == ETCD_CONTAINER))
                .map(|c| {
                    let env = container_variables(pod, c);
                    etcd_flags(c.command.iter().flatten().chain(c.args.iter().flatten()))
                        .into_iter()
                        .map(|(k, v)| (k, expand_variables(&v, &env)))
                        .collect()
                })
                .unwrap_or_default(),
            data_mount: pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|c| c.name == ETCD_CONTAINER))
                .and_then(|c| c.volume_mounts.iter().flatten().find(|m| m.name == "data"))
                .map(|m| m.mount_path.clone()),
            data_claim: pod
                .spec
                .as_ref()
                .and_then(|s| s.volumes.as_ref())
                .and_then(|v| v.iter().find(|v| v.name == "data"))
                .and_then(|v| v.persistent_volume_claim.as_ref())
                .map(|c| c.claim_name.clone()),
        }
    }

    /// etcd refused to start because its data directory is empty while the Pod allows it only
    /// to resume on its own data ([`StartKind::OwnData`]): the member's data is lost.
    pub fn data_dir_lost(&self, member: &str) -> bool {
        self.start
            .as_ref()
            .is_some_and(|s| s.kind(member) == StartKind::OwnData)
            && self
                .termination_message
                .as_deref()
                .is_some_and(|m| m.contains(DISCOVERY_FAILED))
    }

    /// Crash-looping: the kubelet keeps restarting etcd and it keeps failing.
    pub fn is_crash_looping(&self) -> bool {
        !self.ready
            && self.restart_count >= 3
            && self.waiting_reason.as_deref() == Some("CrashLoopBackOff")
    }

    /// Killed for memory: recreating it with the same limits will not help.
    pub fn was_oom_killed(&self) -> bool {
        self.last_termination_reason.as_deref() == Some("OOMKilled")
    }
}

/// What the planner reads of a member's PVC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PvcFacts {
    pub name: String,
    pub uid: String,
    pub resource_version: Option<String>,
    /// `status.phase`: Pending, Bound or Lost.
    pub phase: Option<String>,
    pub deleting: bool,
    pub owner_uid: Option<String>,
    /// `spec.resources.requests.storage`.
    pub requested: Option<String>,
    /// `status.capacity.storage`: what the volume has (an expansion is done when it reaches
    /// the request).
    pub capacity: Option<String>,
    /// `spec.storageClassName`.
    pub storage_class: Option<String>,
    /// Whether the PVC's StorageClass allows expansion; asked only while the PVC is smaller
    /// than its member's (or the cluster's) storage size.
    pub expansion: ClassExpansion,
    /// A failed expansion as Kubernetes reports it: `status.allocatedResourceStatuses.storage`
    /// `ControllerResizeFailed`/`ControllerResizeInfeasible`/`NodeResizeFailed`/
    /// `NodeResizeInfeasible`, or a `ControllerResizeError`/`NodeResizeError` condition, with
    /// the driver's message.
    pub resize_failure: Option<String>,
    /// An expansion in progress as Kubernetes reports it (the `Resizing` or
    /// `FileSystemResizePending` condition, or the allocated resource status), for the
    /// waiting message.
    pub resize_progress: Option<String>,
    /// Its labels and annotations (for `additionalMetadata` changed in place).
    pub labels: std::collections::BTreeMap<String, String>,
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// The resize failure and progress a PVC's status reports (see [`PvcFacts`]).
fn resize_report(
    status: Option<&k8s_openapi::api::core::v1::PersistentVolumeClaimStatus>,
) -> (Option<String>, Option<String>) {
    let Some(status) = status else {
        return (None, None);
    };
    let allocated = status
        .allocated_resource_statuses
        .as_ref()
        .and_then(|s| s.get("storage"))
        .map(String::as_str);
    let conditions: Vec<_> = status
        .conditions
        .iter()
        .flatten()
        .filter(|c| c.status == "True")
        .collect();
    let describe = |c: &k8s_openapi::api::core::v1::PersistentVolumeClaimCondition| match c
        .message
        .as_deref()
        .filter(|m| !m.is_empty())
    {
        Some(message) => format!("{}: {message}", c.type_),
        None => c.type_.clone(),
    };
    let error = conditions.iter().find(|c| {
        matches!(
            c.type_.as_str(),
            "ControllerResizeError" | "NodeResizeError"
        )
    });
    let failed_state =
        allocated.filter(|a| a.ends_with("ResizeFailed") || a.ends_with("ResizeInfeasible"));
    let failure = match (failed_state, error) {
        (Some(state), Some(c)) => Some(format!("{state} ({})", describe(c))),
        (Some(state), None) => Some(state.to_string()),
        (None, Some(c)) => Some(describe(c)),
        (None, None) => None,
    };
    let progress = conditions
        .iter()
        .find(|c| matches!(c.type_.as_str(), "Resizing" | "FileSystemResizePending"))
        .map(|c| describe(c))
        .or_else(|| allocated.filter(|_| failure.is_none()).map(str::to_string));
    (failure, progress)
}

/// What the StorageClass of a PVC says about growing it (`allowVolumeExpansion`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ClassExpansion {
    /// Not asked (no growth wanted), or the StorageClass could not be read.
    #[default]
    Unknown,
    /// `allowVolumeExpansion: true`.
    Allowed,
    /// No expansion, and why, naming the StorageClass (or its absence) and what to do.
    Refused(String),
}

impl PvcFacts {
    pub fn from_pvc(pvc: &PersistentVolumeClaim) -> PvcFacts {
        let (resize_failure, resize_progress) = resize_report(pvc.status.as_ref());
        PvcFacts {
            name: pvc.metadata.name.clone().unwrap_or_default(),
            uid: pvc.metadata.uid.clone().unwrap_or_default(),
            resource_version: pvc.metadata.resource_version.clone(),
            phase: pvc.status.as_ref().and_then(|s| s.phase.clone()),
            deleting: pvc.metadata.deletion_timestamp.is_some(),
            owner_uid: controller_uid(&pvc.metadata),
            requested: pvc
                .spec
                .as_ref()
                .and_then(|s| s.resources.as_ref())
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("storage"))
                .map(|q| q.0.clone()),
            capacity: pvc
                .status
                .as_ref()
                .and_then(|s| s.capacity.as_ref())
                .and_then(|c| c.get("storage"))
                .map(|q| q.0.clone()),
            storage_class: pvc.spec.as_ref().and_then(|s| s.storage_class_name.clone()),
            expansion: ClassExpansion::Unknown,
            resize_failure,
            resize_progress,
            labels: pvc.metadata.labels.clone().unwrap_or_default(),
            annotations: pvc.metadata.annotations.clone().unwrap_or_default(),
        }
    }
}

/// The `--flag=value` arguments among `args`, by flag name (without the dashes).
fn etcd_flags<'a>(
    args: impl Iterator<Item = &'a String>,
) -> std::collections::BTreeMap<String, String> {
    args.filter_map(|a| a.strip_prefix("--")?.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The container's variables that can be known from the Pod alone: literal `value`s and the
/// downward API's `metadata.name` and `metadata.namespace` (later entries see earlier ones, as
/// the kubelet resolves them).
fn container_variables(
    pod: &Pod,
    container: &k8s_openapi::api::core::v1::Container,
) -> std::collections::BTreeMap<String, String> {
    let mut env = std::collections::BTreeMap::new();
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(value), _) => Some(expand_variables(value, &env)),
            (None, Some(from)) => {
                from.field_ref
                    .as_ref()
                    .and_then(|f| match f.field_path.as_str() {
                        "metadata.name" => pod.metadata.name.clone(),
                        "metadata.namespace" => pod.metadata.namespace.clone(),
                        _ => None,
                    })
            }
            (None, None) => Some(String::new()),
        };
        if let Some(value) = value {
            env.insert(var.name.clone(), value);
        }
    }
    env
}

/// `text` with `$(NAME)` replaced by `env`'s value of NAME, `$$` read as a literal `$`, and
/// unknown references left as they are: Kubernetes' expansion of command and args.
fn expand_variables(text: &str, env: &std::collections::BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match env.get(name) {
                Some(value) => out.push_str(value),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn controller_uid(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<String> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
}

#[cfg(test)]
mod tests;
