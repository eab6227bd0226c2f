//! Whole sequences: a tiny model of Kubernetes and etcd executes each planned step, and the
//! planner must reach Idle. Crashes are injected between the status write and the step, and
//! before either, to show every transition resumes.

mod lifecycle;
mod recovery;
mod repair;
mod rollout;

use etcd_operator_api::MemberPhase;
use etcd_operator_api::labels::{ROLE, ROLE_VOTER};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use std::collections::BTreeMap;

use super::fixtures::*;
use crate::plan::{MetadataObject, ObservedMember, PodPhase, Step, StepKind, plan_next_step};

/// Where a simulated operator crashes in a pass.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Crash {
    Never,
    /// Every `n`th pass dies before writing anything; every `n+1`th after the status writes.
    Every(u32),
}

struct Sim {
    fx: Fx,
    t: i64,
    steps: Vec<StepKind>,
    /// Operator-issued certificates in the simulated world (`None`: the cluster has none).
    issued: Option<IssuedWorld>,
}

/// The CA Secret and the leaf Secrets, by CA generation: a leaf records the generation that
/// signed it and the bundle (`"2+1"`: generations trusted) its Secret carries; a Pod records the
/// bundle it was started with (its trusted-ca annotation).
#[derive(Default)]
struct IssuedWorld {
    /// The current CA generation and, during a rotation, the previous one.
    ca: Option<(u32, Option<u32>)>,
    /// Secret name → (signing generation, bundle).
    leaves: std::collections::BTreeMap<String, (u32, String)>,
    /// The `rotate-ca` annotation's value, and the one the CA Secret answered.
    requested: Option<String>,
    rotated_for: Option<String>,
    /// Every issue, in order.
    issued: Vec<String>,
}

impl IssuedWorld {
    fn bundle(&self) -> String {
        match self.ca {
            Some((current, Some(previous))) => format!("{current}+{previous}"),
            Some((current, None)) => current.to_string(),
            None => String::new(),
        }
    }
}

fn trusted(bundle: &str) -> Vec<u32> {
    bundle.split('+').filter_map(|g| g.parse().ok()).collect()
}

impl Sim {
    fn new(fx: Fx) -> Sim {
        Sim {
            fx,
            t: 100_000,
            steps: Vec::new(),
            issued: None,
        }
    }

    /// What `observe` reads of the operator-issued Secrets in the simulated world.
    fn observe_issued(&mut self) {
        use crate::plan::{IssuedFacts, IssuedMember, IssuedState, RotationRequest};
        let Some(world) = &self.issued else {
            return;
        };
        let bundle = world.bundle();
        let previous = world.ca.and_then(|(_, p)| p);
        let state = |secret: &str| match world.leaves.get(secret) {
            None => IssuedState::Missing,
            Some((_, b)) if *b != bundle => IssuedState::Due("bundle changed".into()),
            Some(_) => IssuedState::Current,
        };
        let by_previous = |secret: &str| {
            world
                .leaves
                .get(secret)
                .is_some_and(|(g, _)| Some(*g) == previous)
        };
        let mut trust = std::collections::BTreeMap::new();
        let members = self
            .fx
            .obs
            .members
            .iter()
            .filter(|m| m.member.metadata.deletion_timestamp.is_none())
            .map(|m| {
                let name = m.member.metadata.name.clone().unwrap();
                let secret = format!("{name}-tls");
                if let Some((_, b)) = world.leaves.get(&secret) {
                    trust.insert(name.clone(), b.clone());
                }
                IssuedMember {
                    uid: format!("uid-{name}"),
                    state: state(&secret),
                    by_previous: by_previous(&secret),
                    has_bundle: world.leaves.get(&secret).is_some_and(|(_, b)| *b == bundle),
                    member: name,
                }
            })
            .collect();
        let operator = format!("{CLUSTER}-operator-client-tls");
        let rotation_wanted = world
            .requested
            .clone()
            .filter(|t| world.rotated_for.as_ref() != Some(t) && previous.is_none())
            .map(|t| RotationRequest {
                token: Some(t),
                why: "asked for".into(),
            });
        self.fx.obs.security.issued = Some(IssuedFacts {
            ca: if world.ca.is_some() {
                IssuedState::Current
            } else {
                IssuedState::Missing
            },
            members,
            operator_client: Some(state(&operator)),
            operator_client_by_previous: by_previous(&operator),
            rotating: previous.is_some(),
            rotation_wanted,
        });
        self.fx.obs.security.trust = trust;
    }

    /// Every certificate in use is trusted by every running Pod (what the peers and the
    /// operator present is accepted by whoever they talk to): checked after every step.
    fn assert_trusted(&self) {
        let Some(world) = &self.issued else {
            return;
        };
        for m in &self.fx.obs.members {
            let Some(pod) = m.pod.as_ref().filter(|p| !p.deleting) else {
                continue;
            };
            let pod_trusts = trusted(pod.trusted_ca.as_deref().unwrap_or_default());
            for other in &self.fx.obs.members {
                let name = other.member.metadata.name.clone().unwrap();
                if other.pod.is_none() {
                    continue;
                }
                let secret = format!("{name}-tls");
                if let Some((g, _)) = world.leaves.get(&secret) {
                    assert!(
                        pod_trusts.contains(g),
                        "{name}'s certificate (CA {g}) is not trusted by Pod {} ({pod_trusts:?}); issued {:?}",
                        pod.name,
                        world.issued
                    );
                }
            }
            if let Some((g, _)) = world.leaves.get(&format!("{CLUSTER}-operator-client-tls")) {
                assert!(
                    pod_trusts.contains(g),
                    "the operator's certificate (CA {g}) is not trusted by Pod {}",
                    pod.name
                );
            }
        }
    }

    /// Runs passes until the planner is idle; panics after `limit`.
    fn run(&mut self, limit: usize, crash: Crash) {
        for pass in 0..limit {
            self.observe_issued();
            let plan = plan_next_step(&self.fx.obs, at(self.t));
            self.t += 1;
            if plan.step == Step::Idle {
                self.fx.write_statuses(&plan);
                return;
            }
            match crash {
                Crash::Every(n) if (pass as u32).is_multiple_of(n) => continue,
                Crash::Every(n) if pass as u32 % n == 1 => {
                    self.fx.write_statuses(&plan);
                    continue;
                }
                _ => {}
            }
            self.fx.write_statuses(&plan);
            self.steps.push(plan.step.kind());
            self.apply(plan.step);
            self.assert_trusted();
        }
        panic!(
            "no convergence after {limit} passes; last steps: {:?}",
            &self.steps[self.steps.len().saturating_sub(12)..]
        );
    }

    /// What Kubernetes and etcd do when `act` performs `step`.
    fn apply(&mut self, step: Step) {
        let fx = &mut self.fx;
        match step {
            Step::Idle
            | Step::Wait { .. }
            | Step::SetPhase { .. }
            | Step::RebuildMember { .. }
            | Step::AdoptMember { .. } => {}
            Step::CreateService(svc) => {
                if svc.metadata.name.as_deref() == Some(CLUSTER) {
                    fx.obs.headless_service = Some(*svc);
                } else {
                    fx.obs.client_service = Some(*svc);
                }
            }
            Step::UpdateService(_) => {}
            Step::Compact { .. } | Step::Defragment { .. } => {}
            Step::EnableDowngrade { version } => {
                // etcd: the cluster runs at the target's protocol and every 3.6+ member
                // migrates its storage to it at once.
                for o in &mut fx.obs.etcd.endpoints {
                    if let Ok(s) = &mut o.status
                        && s.downgrade.is_some()
                    {
                        s.downgrade = Some(crate::etcd::Downgrade {
                            enabled: true,
                            target_version: version.clone(),
                        });
                        s.storage_version = Some(version.clone());
                    }
                }
            }
            Step::CancelDowngrade { .. } => {
                for o in &mut fx.obs.etcd.endpoints {
                    if let Ok(s) = &mut o.status
                        && let Some(d) = s.downgrade.as_mut()
                    {
                        *d = Default::default();
                    }
                }
            }
            Step::DisarmAlarm { alarm, .. } => {
                if let Ok(alarms) = fx.obs.etcd.alarms.as_mut() {
                    alarms.retain(|a| *a != alarm);
                }
            }
            Step::CreatePdb(pdb) | Step::UpdatePdb(pdb) => fx.obs.pdb = Some(*pdb),
            Step::DeletePdb { .. } => fx.obs.pdb = None,
            Step::CreateMember(mut member) => {
                let name = member.metadata.name.clone().unwrap();
                member.metadata.uid = Some(format!("uid-{name}"));
                member.metadata.generation = Some(1);
                fx.obs.members.push(ObservedMember {
                    member: *member,
                    pod: None,
                    pvc: None,
                });
            }
            Step::DeleteMember { member } => {
                fx.member_mut(&member).metadata.deletion_timestamp = Some(Time(at(self.t)));
            }
            Step::SetDormant { members, dormant } => {
                for m in members {
                    fx.member_mut(&m).spec.dormant = dormant.then_some(true);
                }
            }
            Step::SetMemberVersion { member, version } => {
                fx.member_mut(&member).spec.version = version;
            }
            Step::SetMemberMetadata { member, metadata } => {
                fx.member_mut(&member).spec.additional_metadata = metadata;
            }
            Step::PatchPodMetadata {
                member,
                labels,
                annotations,
                remove_labels,
                remove_annotations,
                ..
            } => {
                let pod = fx.pod_mut(&member);
                for key in remove_labels {
                    pod.labels.remove(&key);
                }
                for key in remove_annotations {
                    pod.annotations.remove(&key);
                }
                pod.labels.extend(labels);
                pod.annotations.extend(annotations);
            }
            Step::PatchMetadata {
                object,
                name,
                member,
                labels,
                annotations,
                remove_labels,
                remove_annotations,
                record,
            } => {
                let apply =
                    |have_labels: &mut BTreeMap<String, String>,
                     have_annotations: &mut BTreeMap<String, String>| {
                        for key in &remove_labels {
                            have_labels.remove(key);
                        }
                        for key in &remove_annotations {
                            have_annotations.remove(key);
                        }
                        have_labels.extend(labels.clone());
                        have_annotations.extend(annotations.clone());
                        match &record {
                            Some(Some(value)) => {
                                have_annotations.insert(
                                    crate::build::ADDITIONAL_METADATA_RECORD.to_string(),
                                    value.clone(),
                                );
                            }
                            Some(None) => {
                                have_annotations.remove(crate::build::ADDITIONAL_METADATA_RECORD);
                            }
                            None => {}
                        }
                    };
                let on_meta = |meta: &mut ObjectMeta| {
                    let mut l = meta.labels.take().unwrap_or_default();
                    let mut a = meta.annotations.take().unwrap_or_default();
                    apply(&mut l, &mut a);
                    meta.labels = Some(l);
                    meta.annotations = Some(a);
                };
                match object {
                    MetadataObject::Pvc => {
                        let member = member.expect("a PVC's member");
                        let om = fx
                            .obs
                            .members
                            .iter_mut()
                            .find(|m| m.member.metadata.name.as_deref() == Some(member.as_str()))
                            .unwrap();
                        let pvc = om.pvc.as_mut().unwrap();
                        assert_eq!(pvc.name, name);
                        apply(&mut pvc.labels, &mut pvc.annotations);
                    }
                    MetadataObject::Member => on_meta(&mut fx.member_mut(&name).metadata),
                    MetadataObject::Service => {
                        let svc = [&mut fx.obs.headless_service, &mut fx.obs.client_service]
                            .into_iter()
                            .flatten()
                            .find(|s| s.metadata.name.as_deref() == Some(name.as_str()))
                            .unwrap();
                        on_meta(&mut svc.metadata);
                    }
                    MetadataObject::Pdb => on_meta(&mut fx.obs.pdb.as_mut().unwrap().metadata),
                }
            }
            Step::SetMemberConfig { member, config, .. } => {
                let spec = &mut fx.member_mut(&member).spec;
                spec.options = config.options;
                spec.resources = config.resources;
                spec.affinity = config.affinity;
                spec.topology_spread_constraints = config.topology_spread_constraints;
                spec.image_pull_secrets = config.image_pull_secrets;
            }
            Step::RemoveClusterAnnotation { annotation, .. } => {
                if let Some(a) = fx.obs.cluster.metadata.annotations.as_mut() {
                    a.remove(&annotation);
                }
            }
            Step::RemoveFinalizer { member } => {
                let om = fx.observed_member(&member).clone();
                let uid = om.member.metadata.uid.clone();
                if let Some(pvc) = om.pvc.filter(|p| p.owner_uid != uid) {
                    fx.obs.retained_pvcs.push(pvc);
                }
                fx.obs
                    .members
                    .retain(|m| m.member.metadata.name.as_deref() != Some(member.as_str()));
            }
            Step::MarkScaleIn { member, marked } => {
                let annotations = fx
                    .member_mut(&member)
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default);
                if marked {
                    annotations.insert(crate::plan::SCALE_IN_ANNOTATION.into(), "true".into());
                } else {
                    annotations.remove(crate::plan::SCALE_IN_ANNOTATION);
                }
            }
            Step::SetPvcOwner {
                member, pvc, owner, ..
            } => {
                let owner_uid = owner.map(|o| o.uid.clone());
                match member {
                    Some(m) => fx.observed_member(&m).pvc.as_mut().unwrap().owner_uid = owner_uid,
                    None => {
                        for p in fx.obs.retained_pvcs.iter_mut().filter(|p| p.name == pvc) {
                            p.owner_uid = owner_uid.clone();
                        }
                    }
                }
            }
            Step::CreatePvc(pvc) => {
                let name = pvc.metadata.name.clone().unwrap();
                let member = name.strip_prefix("data-").unwrap().to_string();
                let mut facts = bound_pvc(&member);
                facts.requested = crate::plan::PvcFacts::from_pvc(&pvc).requested;
                facts.capacity = facts.requested.clone();
                fx.observed_member(&member).pvc = Some(facts);
            }
            Step::SetMemberStorage { member, size } => {
                fx.member_mut(&member).spec.storage.size = Some(Quantity(size));
            }
            Step::ResizePvc { member, size, .. } => {
                let pvc = fx.observed_member(&member).pvc.as_mut().unwrap();
                pvc.requested = Some(size.clone());
                // The resize controller and the kubelet grow the volume.
                pvc.capacity = Some(size);
            }
            Step::DeletePvc { member, .. } => fx.observed_member(&member).pvc = None,
            Step::CreatePod(pod) => {
                let name = pod.metadata.name.clone().unwrap();
                if let Some(world) = &self.issued {
                    assert!(
                        world.leaves.contains_key(&format!("{name}-tls"))
                            && world
                                .leaves
                                .contains_key(&format!("{CLUSTER}-operator-client-tls")),
                        "Pod {name} created before its certificate: {:?}",
                        world.issued
                    );
                }
                let voter_label = pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(ROLE))
                    .map(String::as_str)
                    == Some(ROLE_VOTER);
                let start =
                    crate::build::PodStart::from_annotations(pod.metadata.annotations.as_ref());
                let mut facts = running_pod(&name);
                facts.tmpfs_size = crate::plan::PodFacts::from_pod(&pod).tmpfs_size;
                facts.start = start.clone();
                facts.uid = format!("pod-{name}-{}", self.t);
                facts.started_at = Some(at(self.t));
                facts.voter_label = voter_label;
                facts.trusted_ca = pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(crate::build::TRUSTED_CA_ANNOTATION))
                    .cloned();
                facts.image = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.containers.first())
                    .and_then(|c| c.image.clone());
                facts.labels = pod.metadata.labels.clone().unwrap_or_default();
                facts.annotations = pod.metadata.annotations.clone().unwrap_or_default();
                facts.config_digest = pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(crate::build::CONFIG_DIGEST_ANNOTATION))
                    .cloned();
                facts.rendered = pod.metadata.annotations.as_ref().and_then(|a| {
                    Some((
                        a.get(crate::build::RENDERED_VERSION_ANNOTATION)?.clone(),
                        a.get(crate::build::RENDERED_HASH_ANNOTATION)?.clone(),
                    ))
                });
                let version = facts
                    .image
                    .as_deref()
                    .and_then(|i| i.rsplit_once(":v"))
                    .map(|(_, v)| v.to_string());
                fx.with_pod(&name, facts);
                let listed = fx
                    .obs
                    .etcd
                    .member_list()
                    .iter()
                    .find(|m| m.id == id_of(&name))
                    .cloned();
                match listed {
                    Some(m) => {
                        fx.etcd_add(&name, m.is_learner, true);
                        fx.answer(
                            &name,
                            if m.is_learner {
                                Answer::Learner
                            } else {
                                Answer::Healthy
                            },
                        );
                    }
                    None if start
                        .is_some_and(|s| s.state == crate::build::InitialClusterState::New) =>
                    {
                        fx.obs.etcd.members = Ok(Vec::new());
                        fx.etcd_add(&name, false, true);
                        fx.answer(&name, Answer::Healthy);
                        fx.set_leader(&name);
                    }
                    None => {}
                }
                if let Some(version) = version {
                    answer_version(fx, &name, &version);
                }
            }
            Step::DeletePod { member, .. } => {
                fx.without_pod(&member);
                if fx
                    .obs
                    .etcd
                    .endpoints
                    .iter()
                    .any(|o| o.endpoint == client(&member))
                {
                    fx.answer(&member, Answer::Down);
                }
            }
            Step::LabelPod { member, voter, .. } => fx.pod_mut(&member).voter_label = voter,
            Step::SetPodStart { member, start, .. } => fx.pod_mut(&member).start = Some(start),
            Step::AddLearner { member, .. } => fx.etcd_add(&member, true, false),
            Step::PromoteLearner { member, .. } => {
                fx.etcd_add(&member, false, true);
                fx.answer(&member, Answer::Healthy);
            }
            Step::RemoveEtcdMember { member, id } => {
                let name = member.unwrap_or_default();
                if let Ok(list) = fx.obs.etcd.members.as_mut() {
                    list.retain(|m| m.id != id);
                }
                fx.obs
                    .etcd
                    .endpoints
                    .retain(|o| o.endpoint != client(&name));
            }
            Step::MoveLeader { to, .. } => fx.set_leader(&to),
            Step::EnableAuth => {
                fx.status_mut().auth_enabled = Some(true);
            }
            Step::ChangeRootPassword => fx.obs.security.root_password_outdated = false,
            Step::IssueCertificate { secret, what, .. } => {
                use crate::plan::{IssuedCertificate, Signer};
                let world = self.issued.as_mut().expect("issued only when asked for");
                world.issued.push(secret.clone());
                let (current, previous) = world.ca.unwrap_or((0, None));
                let signed = |signer: Signer| match signer {
                    Signer::Current => current,
                    Signer::Previous => previous.expect("a previous CA to sign with"),
                };
                match what {
                    IssuedCertificate::Ca => {
                        assert!(world.ca.is_none(), "the CA is made once");
                        world.ca = Some((1, None));
                    }
                    IssuedCertificate::RotateCa { token } => {
                        assert!(previous.is_none(), "one rotation at a time");
                        world.ca = Some((current + 1, Some(current)));
                        world.rotated_for = token;
                    }
                    IssuedCertificate::DropPreviousCa => world.ca = Some((current, None)),
                    IssuedCertificate::Member { signer, .. }
                    | IssuedCertificate::OperatorClient { signer } => {
                        let bundle = world.bundle();
                        world.leaves.insert(secret, (signed(signer), bundle));
                    }
                }
            }
            Step::ApplyCertificate { name, .. } => {
                let certificates = &mut fx.obs.security.certificates;
                if let Some(c) = certificates.iter_mut().find(|c| c.wanted.name == name) {
                    c.exists = true;
                    c.patch = None;
                }
            }
        }
    }

    fn assert_converged(&self, n: usize) {
        let obs = &self.fx.obs;
        assert_eq!(obs.members.len(), n);
        assert_eq!(obs.etcd.member_list().len(), n);
        assert!(obs.etcd.member_list().iter().all(|m| !m.is_learner));
        for m in &obs.members {
            let status = m.member.status.clone().unwrap();
            assert_eq!(
                status.phase,
                Some(MemberPhase::Ready),
                "{:?}",
                m.member.metadata.name
            );
        }
        let status = obs.cluster.status.clone().unwrap();
        assert_eq!(status.ready_members, Some(n as i32));
        assert_eq!(status.cluster_id.as_deref(), Some("c1"));
    }
}

/// `member`'s etcd reports server version `version` from now on. A 3.6+ member reports
/// etcd's downgrade as the others know it and its storage version (the downgrade's target
/// while one is enabled, else its own minor); 3.4 and 3.5 report neither. Once every member
/// runs a downgrade's target, etcd's leader ends it.
fn answer_version(fx: &mut Fx, member: &str, version: &str) {
    let parsed = crate::domain::versions::EtcdVersion::parse(version);
    let reports = parsed.is_some_and(|v| v.minor() >= (3, 6));
    let known = fx
        .obs
        .etcd
        .statuses()
        .filter_map(|s| s.downgrade.clone())
        .find(|d| d.enabled);
    for o in &mut fx.obs.etcd.endpoints {
        if o.endpoint == client(member)
            && let Ok(s) = &mut o.status
        {
            s.version = version.to_string();
            s.downgrade = reports.then(|| known.clone().unwrap_or_default());
            s.storage_version = reports.then(|| match &known {
                Some(d) => d.target_version.clone(),
                None => parsed
                    .map(|v| format!("{}.{}.0", v.major, v.minor))
                    .unwrap_or_default(),
            });
        }
    }
    if let Some(d) = known
        && let Some(target) = crate::domain::versions::EtcdVersion::parse(&d.target_version)
        && fx.obs.etcd.statuses().all(|s| {
            crate::domain::versions::EtcdVersion::parse(&s.version)
                .is_some_and(|v| v.minor() == target.minor())
        })
    {
        for o in &mut fx.obs.etcd.endpoints {
            if let Ok(s) = &mut o.status
                && let Some(d) = s.downgrade.as_mut()
            {
                *d = Default::default();
            }
        }
    }
}

fn kinds_count(steps: &[StepKind], kind: StepKind) -> usize {
    steps.iter().filter(|k| **k == kind).count()
}

/// A converged cluster of `n` members running `old` (spec, Pod image, etcd's answer and
/// the recorded version), with the target (spec and latch) at `new`.
fn cluster_on(n: u32, old: &str, new: &str, memory: bool) -> Fx {
    let mut fx = Fx::healthy(n);
    if memory {
        fx.make_memory_backed();
    }
    let image = fx.obs.settings.etcd_image(old);
    for i in 0..n {
        let m = name(i);
        fx.member_mut(&m).spec.version = old.to_string();
        fx.member_mut(&m).status.get_or_insert_default().version = Some(old.to_string());
        fx.pod_mut(&m).image = Some(image.clone());
        answer_version(&mut fx, &m, old);
    }
    fx.obs.cluster.spec.version = new.to_string();
    fx.status_mut().observed.as_mut().unwrap().version = new.to_string();
    fx
}

/// Runs an upgrade to Idle, asserting at every step: a Pod is deleted only when its member
/// does not lead and every other voter is healthy, at most one member at a time is away.
/// Returns the members whose Pods were deleted, in order.
fn run_upgrade(sim: &mut Sim, limit: usize, crash_every: Option<u32>) -> Vec<String> {
    let mut deleted = Vec::new();
    let mut last = None;
    for pass in 0..limit {
        let plan = plan_next_step(&sim.fx.obs, at(sim.t));
        last = Some(plan.step.clone());
        sim.t += 1;
        if plan.step == Step::Idle {
            sim.fx.write_statuses(&plan);
            return deleted;
        }
        if let Some(n) = crash_every {
            if (pass as u32).is_multiple_of(n) {
                continue;
            }
            if pass as u32 % n == 1 {
                sim.fx.write_statuses(&plan);
                continue;
            }
        }
        if let Step::DeletePod { member, .. } = &plan.step {
            let leader = sim.fx.obs.etcd.leader();
            assert_ne!(
                leader,
                Some(id_of(member)),
                "{member}'s Pod deleted while it leads"
            );
            let away = sim
                .fx
                .obs
                .members
                .iter()
                .filter(|m| m.pod.is_none())
                .count();
            assert_eq!(
                away, 0,
                "{member}'s Pod deleted while another member is away"
            );
            deleted.push(member.clone());
        }
        sim.fx.write_statuses(&plan);
        sim.steps.push(plan.step.kind());
        sim.apply(plan.step);
    }
    panic!(
        "no convergence after {limit} passes; last steps: {:?}; last: {last:?}",
        &sim.steps[sim.steps.len().saturating_sub(12)..]
    );
}

fn assert_all_on(sim: &Sim, version: &str) {
    let image = sim.fx.obs.settings.etcd_image(version);
    for m in &sim.fx.obs.members {
        assert_eq!(m.member.spec.version, version);
        assert_eq!(
            m.pod.as_ref().unwrap().image.as_deref(),
            Some(image.as_str())
        );
    }
}
