//! Whole sequences: a tiny model of Kubernetes and etcd executes each planned step, and the
//! planner must reach Idle. Crashes are injected between the status write and the step, and
//! before either, to show every transition resumes.

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
            Step::Idle | Step::Wait { .. } | Step::SetPhase { .. } | Step::AdoptMember { .. } => {}
            Step::CreateService(svc) => {
                if svc.metadata.name.as_deref() == Some(CLUSTER) {
                    fx.obs.headless_service = Some(*svc);
                } else {
                    fx.obs.client_service = Some(*svc);
                }
            }
            Step::UpdateService(_) => {}
            Step::Compact { .. } | Step::Defragment { .. } => {}
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

/// `member`'s etcd reports server version `version` from now on.
fn answer_version(fx: &mut Fx, member: &str, version: &str) {
    for o in &mut fx.obs.etcd.endpoints {
        if o.endpoint == client(member)
            && let Ok(s) = &mut o.status
        {
            s.version = version.to_string();
        }
    }
}

fn kinds_count(steps: &[StepKind], kind: StepKind) -> usize {
    steps.iter().filter(|k| **k == kind).count()
}

#[test]
fn bootstrap_of_three_members_converges_one_member_at_a_time() {
    let mut sim = Sim::new(Fx::empty(3));
    sim.fx.obs.headless_service = None;
    sim.fx.obs.client_service = None;
    sim.run(100, Crash::Never);
    sim.assert_converged(3);
    assert_eq!(
        kinds_count(&sim.steps, StepKind::AddLearner),
        2,
        "the seed is never added"
    );
    assert_eq!(kinds_count(&sim.steps, StepKind::PromoteLearner), 2);
    assert_eq!(kinds_count(&sim.steps, StepKind::CreatePod), 3);
    assert!(sim.fx.obs.pdb.is_some());
    // The order of one join.
    let join: Vec<StepKind> = sim
        .steps
        .iter()
        .copied()
        .skip_while(|k| *k != StepKind::AddLearner)
        .take(5)
        .collect();
    assert_eq!(
        join,
        [
            StepKind::AddLearner,
            StepKind::CreatePod,
            // Once it has started, its Pod may restart only on its own data; then it votes.
            StepKind::SetPodStart,
            StepKind::PromoteLearner,
            StepKind::LabelPod
        ]
    );
}

#[test]
fn bootstrap_survives_crashes_between_every_two_steps() {
    for n in [3, 4, 5] {
        let mut sim = Sim::new(Fx::empty(3));
        sim.run(400, Crash::Every(n));
        sim.assert_converged(3);
        assert_eq!(
            kinds_count(&sim.steps, StepKind::AddLearner),
            2,
            "never added twice (crash every {n})"
        );
    }
}

#[test]
fn whole_cluster_reboot_recovers_without_quorum() {
    let mut sim = Sim::new(Fx::healthy(3));
    for i in 0..3 {
        let m = name(i);
        sim.fx.pod_mut(&m).phase = PodPhase::Succeeded;
        sim.fx.answer(&m, Answer::Down);
    }
    sim.run(50, Crash::Never);
    sim.assert_converged(3);
    assert_eq!(kinds_count(&sim.steps, StepKind::DeletePod), 3);
    assert_eq!(
        kinds_count(&sim.steps, StepKind::RemoveEtcdMember),
        0,
        "same members, same data"
    );
}

#[test]
fn scale_out_then_in_then_to_zero_and_back() {
    let mut sim = Sim::new(Fx::healthy(3));
    let set_replicas = |sim: &mut Sim, n: i32| {
        sim.fx.obs.cluster.spec.replicas = Some(n);
    };
    set_replicas(&mut sim, 5);
    sim.run(100, Crash::Never);
    sim.assert_converged(5);

    set_replicas(&mut sim, 3);
    sim.run(100, Crash::Every(4));
    sim.assert_converged(3);
    let names: Vec<_> = sim
        .fx
        .obs
        .members
        .iter()
        .map(|m| m.member.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        ["etcd-0", "etcd-1", "etcd-2"],
        "highest ordinals left first"
    );

    set_replicas(&mut sim, 0);
    sim.run(100, Crash::Never);
    assert!(
        sim.fx
            .obs
            .members
            .iter()
            .all(|m| m.pod.is_none() && m.pvc.is_some())
    );
    assert_eq!(sim.fx.obs.members.len(), 3, "members and data are kept");

    // While stopped, etcd is not reachable; on resume every member comes back at once.
    sim.fx.obs.etcd.endpoints.clear();
    set_replicas(&mut sim, 3);
    let before = sim.steps.len();
    sim.run(100, Crash::Never);
    let resumed = &sim.steps[before..];
    assert_eq!(resumed[0], StepKind::SetDormant);
    assert_eq!(
        kinds_count(resumed, StepKind::AddLearner),
        0,
        "same identities"
    );
}

#[test]
fn memory_member_loss_is_replaced_by_a_fresh_learner() {
    let mut fx = Fx::healthy(3);
    fx.make_memory_backed();
    fx.without_pod("etcd-1");
    fx.answer("etcd-1", Answer::Down);
    let mut sim = Sim::new(fx);
    sim.run(60, Crash::Every(5));
    sim.assert_converged(3);
    let steps = &sim.steps;
    let removed = steps
        .iter()
        .position(|k| *k == StepKind::RemoveEtcdMember)
        .expect("removed");
    let added = steps
        .iter()
        .position(|k| *k == StepKind::AddLearner)
        .expect("re-added");
    assert!(removed < added, "{steps:?}");
}

/// Operator-issued certificates through bootstrap and a scale 3→5→3 with crashes between steps:
/// the CA, each member's certificate and the operator's are issued once each, always before the
/// Pod that mounts them (asserted at every `CreatePod`), and the cluster converges as without.
#[test]
fn operator_issued_certificates_come_before_every_pod_through_bootstrap_and_scaling() {
    for crash in [Crash::Never, Crash::Every(3), Crash::Every(4)] {
        let mut sim = Sim::new(Fx::empty(3));
        sim.issued = Some(IssuedWorld::default());
        sim.run(400, crash);
        sim.assert_converged(3);
        sim.fx.obs.cluster.spec.replicas = Some(5);
        sim.run(400, crash);
        sim.assert_converged(5);
        sim.fx.obs.cluster.spec.replicas = Some(3);
        sim.run(400, crash);
        sim.assert_converged(3);
        let world = sim.issued.as_ref().unwrap();
        let mut issued = world.issued.clone();
        issued.sort();
        assert_eq!(
            issued,
            [
                "etcd-0-tls",
                "etcd-1-tls",
                "etcd-2-tls",
                "etcd-3-tls",
                "etcd-4-tls",
                "etcd-ca",
                "etcd-operator-client-tls"
            ]
        );
        assert_eq!(kinds_count(&sim.steps, StepKind::IssueCertificate), 7);
    }
}

/// A CA rotation through crashes between steps: the new CA beside the old, every member's Secret
/// given the bundle and its Pod restarted to trust both (one at a time, the leader last), the
/// leaves issued again from the new CA, the old CA dropped and the Pods restarted again. At every
/// step every certificate in use is trusted by every running Pod (`assert_trusted`); at the end
/// everything is signed by the new CA and trusted alone, and no member was replaced.
#[test]
fn a_ca_rotation_keeps_every_certificate_trusted_at_every_step() {
    for crash in [Crash::Never, Crash::Every(3), Crash::Every(5)] {
        let mut sim = Sim::new(Fx::empty(3));
        sim.issued = Some(IssuedWorld::default());
        sim.run(400, crash);
        sim.assert_converged(3);
        let ids = |sim: &Sim| {
            let mut ids: Vec<_> = sim.fx.obs.etcd.member_list().iter().map(|m| m.id).collect();
            ids.sort();
            ids
        };
        let before = ids(&sim);
        sim.steps.clear();
        sim.issued.as_mut().unwrap().requested = Some("2026-12-02".into());
        sim.run(600, crash);
        sim.assert_converged(3);
        let world = sim.issued.as_ref().unwrap();
        assert_eq!(
            world.ca,
            Some((2, None)),
            "rotated once, the old CA dropped"
        );
        assert!(
            world.leaves.values().all(|(g, b)| *g == 2 && b == "2"),
            "{:?}",
            world.leaves
        );
        for m in &sim.fx.obs.members {
            assert_eq!(m.pod.as_ref().unwrap().trusted_ca.as_deref(), Some("2"));
        }
        assert_eq!(
            ids(&sim),
            before,
            "the same members: Pods restarted on their data, none replaced"
        );
        assert_eq!(
            kinds_count(&sim.steps, StepKind::DeletePod),
            6,
            "each Pod restarted twice (trust both, then trust the new CA alone)"
        );
        // Asked again with the same value: nothing more happens.
        sim.steps.clear();
        sim.run(50, Crash::Never);
        assert!(sim.steps.is_empty(), "{:?}", sim.steps);
    }
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
    for pass in 0..limit {
        let plan = plan_next_step(&sim.fx.obs, at(sim.t));
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
        "no convergence after {limit} passes; last steps: {:?}",
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

#[test]
fn a_version_upgrade_rolls_followers_first_and_the_leader_last() {
    for n in [3, 5] {
        let mut sim = Sim::new(cluster_on(n, "3.4.23", "3.5.1", false));
        let deleted = run_upgrade(&mut sim, 400, None);
        sim.assert_converged(n as usize);
        assert_all_on(&sim, "3.5.1");
        // Followers by ordinal, then etcd-0 (the leader at the start), each exactly once.
        let mut expected: Vec<String> = (1..n).map(name).collect();
        expected.push(name(0));
        assert_eq!(deleted, expected, "{n} members");
        assert_eq!(
            kinds_count(&sim.steps, StepKind::SetMemberVersion),
            n as usize
        );
        assert_eq!(kinds_count(&sim.steps, StepKind::MoveLeader), 1);
        assert_eq!(
            kinds_count(&sim.steps, StepKind::AddLearner),
            0,
            "same identities"
        );
        // etcd-0 handed leadership to the lowest-ordinal other Ready voter before it went.
        assert_eq!(sim.fx.obs.etcd.leader(), Some(id_of(&name(1))));
    }
}

#[test]
fn a_version_upgrade_resumes_after_crashes_between_every_two_steps() {
    for every in [3, 4, 7] {
        let mut sim = Sim::new(cluster_on(3, "3.4.23", "3.5.1", false));
        let deleted = run_upgrade(&mut sim, 600, Some(every));
        sim.assert_converged(3);
        assert_all_on(&sim, "3.5.1");
        assert_eq!(
            deleted,
            vec![name(1), name(2), name(0)],
            "crash every {every}"
        );
    }
}

#[test]
fn a_memory_backed_upgrade_replaces_one_member_at_a_time() {
    let mut sim = Sim::new(cluster_on(3, "3.4.23", "3.5.1", true));
    let deleted = run_upgrade(&mut sim, 600, Some(4));
    sim.assert_converged(3);
    assert_all_on(&sim, "3.5.1");
    assert_eq!(deleted, vec![name(1), name(2), name(0)]);
    assert_eq!(
        kinds_count(&sim.steps, StepKind::AddLearner),
        3,
        "each replaced"
    );
}

#[test]
fn a_patch_change_and_the_way_back_before_the_cluster_version_moved_are_rolled() {
    let mut sim = Sim::new(cluster_on(3, "3.5.1", "3.5.2", false));
    run_upgrade(&mut sim, 400, None);
    assert_all_on(&sim, "3.5.2");
    sim.fx.obs.cluster.spec.version = "3.5.1".into();
    sim.fx.status_mut().observed.as_mut().unwrap().version = "3.5.1".into();
    run_upgrade(&mut sim, 400, None);
    assert_all_on(&sim, "3.5.1");
}

#[test]
fn a_config_change_rolls_every_member_leader_last_and_none_twice() {
    use etcd_operator_api::shared::EtcdOptions;
    // Pods created by this operator carry the digest of their member's config.
    let mut fx = cluster_on(3, "3.5.1", "3.5.1", false);
    for i in 0..3 {
        let m = name(i);
        let digest = crate::build::MemberConfig::of_member(&fx.member_mut(&m).spec).digest();
        fx.pod_mut(&m).config_digest = Some(digest);
    }
    let options = EtcdOptions {
        quota_backend_bytes: Some(1 << 30),
        auto_compaction_retention: Some("5m".into()),
        ..Default::default()
    };
    fx.obs.cluster.spec.options = Some(options.clone());
    fx.status_mut().observed.as_mut().unwrap().options = Some(options.clone());
    let mut sim = Sim::new(fx);
    let deleted = run_upgrade(&mut sim, 400, Some(4));
    sim.assert_converged(3);
    assert_eq!(deleted, vec![name(1), name(2), name(0)]);
    assert_eq!(kinds_count(&sim.steps, StepKind::SetMemberConfig), 3);
    for m in &sim.fx.obs.members {
        assert_eq!(m.member.spec.options.as_ref(), Some(&options));
        let digest = crate::build::MemberConfig::of_member(&m.member.spec).digest();
        assert_eq!(
            m.pod.as_ref().unwrap().config_digest.as_ref(),
            Some(&digest)
        );
    }
    // Converged: another pass restarts nothing.
    assert_eq!(run_upgrade(&mut sim, 10, None), Vec::<String>::new());
}

#[test]
fn additional_metadata_is_patched_onto_running_pods_without_a_restart() {
    use etcd_operator_api::shared::AdditionalMetadata;
    let mut fx = cluster_on(3, "3.5.1", "3.5.1", false);
    let metadata = AdditionalMetadata {
        labels: Some([("team".to_string(), "storage".to_string())].into()),
        annotations: Some([("owner".to_string(), "ops".to_string())].into()),
    };
    fx.obs.cluster.spec.additional_metadata = Some(metadata.clone());
    fx.status_mut()
        .observed
        .as_mut()
        .unwrap()
        .additional_metadata = Some(metadata.clone());
    // The Services come from the fixture without the record (as an older operator made them);
    // the PodDisruptionBudget is made by this one with it.
    fx.obs.pdb = Some(crate::build::voter_pdb(&fx.obs.cluster, 3).unwrap());
    let mut sim = Sim::new(fx);
    let deleted = run_upgrade(&mut sim, 200, Some(4));
    assert!(deleted.is_empty(), "no restart: {deleted:?}");
    assert_eq!(kinds_count(&sim.steps, StepKind::SetMemberMetadata), 3);
    assert_eq!(kinds_count(&sim.steps, StepKind::PatchPodMetadata), 3);
    // Each PVC and EtcdMember once, both Services once; the PodDisruptionBudget was built with
    // the target already.
    assert_eq!(kinds_count(&sim.steps, StepKind::PatchMetadata), 8);
    // Every object the operator made carries the user's keys, next to the operator's own.
    let has = |labels: &BTreeMap<String, String>, annotations: &BTreeMap<String, String>| {
        labels.get("team").map(String::as_str) == Some("storage")
            && annotations.get("owner").map(String::as_str) == Some("ops")
    };
    let meta_has = |meta: &ObjectMeta| {
        has(
            &meta.labels.clone().unwrap_or_default(),
            &meta.annotations.clone().unwrap_or_default(),
        )
    };
    let record = crate::build::metadata_record(Some(&metadata)).unwrap();
    for meta in [
        &sim.fx.obs.headless_service.as_ref().unwrap().metadata,
        &sim.fx.obs.client_service.as_ref().unwrap().metadata,
        &sim.fx.obs.pdb.as_ref().unwrap().metadata,
    ] {
        assert!(meta_has(meta), "{meta:?}");
        // The operator's own labels stay.
        assert!(
            meta.labels
                .as_ref()
                .unwrap()
                .contains_key(etcd_operator_api::labels::CLUSTER),
            "{meta:?}"
        );
        assert_eq!(
            meta.annotations
                .as_ref()
                .unwrap()
                .get(crate::build::ADDITIONAL_METADATA_RECORD),
            Some(&record)
        );
    }
    for m in &sim.fx.obs.members {
        assert_eq!(m.member.spec.additional_metadata.as_ref(), Some(&metadata));
        let pod = m.pod.as_ref().unwrap();
        assert!(has(&pod.labels, &pod.annotations), "{pod:?}");
        let pvc = m.pvc.as_ref().unwrap();
        assert!(has(&pvc.labels, &pvc.annotations), "{pvc:?}");
        assert!(meta_has(&m.member.metadata), "{:?}", m.member.metadata);
    }

    // A key taken out (and another changed) is removed from the running Pods, still without
    // a restart, through crashes; the operator's own labels stay.
    let smaller = AdditionalMetadata {
        labels: Some([("team".to_string(), "db".to_string())].into()),
        annotations: None,
    };
    sim.fx.obs.cluster.spec.additional_metadata = Some(smaller.clone());
    sim.fx
        .status_mut()
        .observed
        .as_mut()
        .unwrap()
        .additional_metadata = Some(smaller.clone());
    let deleted = run_upgrade(&mut sim, 200, Some(3));
    assert!(deleted.is_empty(), "no restart: {deleted:?}");
    let changed = |labels: &BTreeMap<String, String>, annotations: &BTreeMap<String, String>| {
        labels.get("team").map(String::as_str) == Some("db") && !annotations.contains_key("owner")
    };
    for meta in [
        &sim.fx.obs.headless_service.as_ref().unwrap().metadata,
        &sim.fx.obs.client_service.as_ref().unwrap().metadata,
        &sim.fx.obs.pdb.as_ref().unwrap().metadata,
    ] {
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert!(
            changed(&meta.labels.clone().unwrap_or_default(), &annotations),
            "{meta:?}"
        );
        assert_eq!(
            annotations.get(crate::build::ADDITIONAL_METADATA_RECORD),
            crate::build::metadata_record(Some(&smaller)).as_ref()
        );
    }
    for m in &sim.fx.obs.members {
        assert_eq!(m.member.spec.additional_metadata.as_ref(), Some(&smaller));
        let pod = m.pod.as_ref().unwrap();
        assert!(changed(&pod.labels, &pod.annotations), "{pod:?}");
        let pvc = m.pvc.as_ref().unwrap();
        assert!(changed(&pvc.labels, &pvc.annotations), "{pvc:?}");
        let meta = &m.member.metadata;
        assert!(
            changed(
                &meta.labels.clone().unwrap_or_default(),
                &meta.annotations.clone().unwrap_or_default()
            ),
            "{meta:?}"
        );
    }

    // All of it taken out: every key and every record goes.
    sim.fx.obs.cluster.spec.additional_metadata = None;
    sim.fx
        .status_mut()
        .observed
        .as_mut()
        .unwrap()
        .additional_metadata = None;
    let deleted = run_upgrade(&mut sim, 200, Some(5));
    assert!(deleted.is_empty(), "no restart: {deleted:?}");
    for meta in [
        &sim.fx.obs.headless_service.as_ref().unwrap().metadata,
        &sim.fx.obs.client_service.as_ref().unwrap().metadata,
        &sim.fx.obs.pdb.as_ref().unwrap().metadata,
    ] {
        let labels = meta.labels.clone().unwrap_or_default();
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert!(!labels.contains_key("team"), "{meta:?}");
        assert!(
            !annotations.contains_key(crate::build::ADDITIONAL_METADATA_RECORD),
            "{meta:?}"
        );
    }
    for m in &sim.fx.obs.members {
        assert!(!m.pod.as_ref().unwrap().labels.contains_key("team"));
        assert!(!m.pvc.as_ref().unwrap().labels.contains_key("team"));
        assert!(
            !m.member
                .metadata
                .labels
                .clone()
                .unwrap_or_default()
                .contains_key("team")
        );
    }
}

/// CORRUPT against a follower, then against the leader, with crashes between steps: each is
/// moved off leadership if it leads, removed, the alarm disarmed only after the removal, and a
/// fresh learner joins and is promoted; never two members out at once.
#[test]
fn corrupt_member_is_replaced_then_the_alarm_disarmed() {
    for (victim, crash) in [
        ("etcd-1", Crash::Never),
        ("etcd-0", Crash::Never),
        ("etcd-2", Crash::Every(4)),
        ("etcd-0", Crash::Every(3)),
    ] {
        let mut fx = Fx::healthy(3);
        fx.alarm(victim, crate::etcd::AlarmKind::Corrupt);
        let mut sim = Sim::new(fx);
        sim.run(80, crash);
        sim.assert_converged(3);
        assert_eq!(sim.fx.obs.etcd.alarms.as_deref(), Ok(&[][..]), "{victim}");
        let steps = &sim.steps;
        let at = |kind: StepKind| {
            steps
                .iter()
                .position(|k| *k == kind)
                .unwrap_or_else(|| panic!("no {kind:?} for {victim}: {steps:?}"))
        };
        let removed = at(StepKind::RemoveEtcdMember);
        assert!(removed < at(StepKind::DisarmAlarm), "{steps:?}");
        assert!(
            at(StepKind::DisarmAlarm) < at(StepKind::AddLearner),
            "{steps:?}"
        );
        assert_eq!(
            kinds_count(steps, StepKind::RemoveEtcdMember),
            1,
            "{steps:?}"
        );
        assert_eq!(kinds_count(steps, StepKind::DisarmAlarm), 1, "{steps:?}");
        if victim == "etcd-0" {
            assert!(at(StepKind::MoveLeader) < removed, "{steps:?}");
        }
    }
}

/// Storage growth of PVC-backed members through crashes: each member's spec then its PVC,
/// one member at a time (the resize controller takes a few passes to grow a volume, and no
/// other PVC is asked to grow meanwhile), no Pod deleted, every PVC at the new size.
#[test]
fn pvc_storage_grows_one_member_at_a_time_without_a_restart() {
    for crash_every in [None, Some(3), Some(4)] {
        let mut fx = cluster_on(3, "3.5.1", "3.5.1", false);
        fx.status_mut().observed.as_mut().unwrap().storage.size = Some(Quantity("3Gi".into()));
        for m in &mut fx.obs.members {
            m.pvc.as_mut().unwrap().expansion = crate::plan::ClassExpansion::Allowed;
        }
        let mut sim = Sim::new(fx);
        // PVC → passes left until its capacity reaches its request.
        let mut growing: Vec<(String, u32)> = Vec::new();
        let mut resized = Vec::new();
        let mut idle = false;
        for pass in 0..400u32 {
            for (member, left) in &mut growing {
                *left -= 1;
                if *left == 0 {
                    let pvc = sim.fx.observed_member(member).pvc.as_mut().unwrap();
                    pvc.capacity = pvc.requested.clone();
                }
            }
            growing.retain(|(_, left)| *left > 0);
            let plan = plan_next_step(&sim.fx.obs, at(sim.t));
            sim.t += 1;
            if plan.step == Step::Idle {
                sim.fx.write_statuses(&plan);
                idle = true;
                break;
            }
            if let Some(n) = crash_every
                && pass % n == 0
            {
                continue;
            }
            sim.fx.write_statuses(&plan);
            assert!(
                !matches!(plan.step, Step::DeletePod { .. }),
                "a PVC expansion restarted a Pod: {:?}",
                plan.step
            );
            if let Step::ResizePvc { member, size, .. } = &plan.step {
                assert!(
                    growing.iter().all(|(m, _)| m == member),
                    "{member}'s PVC asked to grow while {growing:?} still grows"
                );
                let pvc = sim.fx.observed_member(member).pvc.as_mut().unwrap();
                pvc.requested = Some(size.clone());
                if !growing.iter().any(|(m, _)| m == member) {
                    growing.push((member.clone(), 3));
                    resized.push(member.clone());
                }
                sim.steps.push(plan.step.kind());
                continue;
            }
            sim.steps.push(plan.step.kind());
            sim.apply(plan.step);
        }
        assert!(idle, "no convergence ({crash_every:?}): {:?}", sim.steps);
        sim.assert_converged(3);
        assert_eq!(resized, vec![name(0), name(1), name(2)], "{crash_every:?}");
        for m in &sim.fx.obs.members {
            assert_eq!(m.member.spec.storage.size_or_default().0, "3Gi");
            let pvc = m.pvc.as_ref().unwrap();
            assert_eq!(pvc.requested.as_deref(), Some("3Gi"));
            assert_eq!(pvc.capacity.as_deref(), Some("3Gi"));
        }
    }
}

/// Memory-backed members roll to the larger tmpfs by replacement, followers first and the
/// leader last, through crashes; every new Pod has the new size limit.
#[test]
fn memory_backed_storage_grows_by_replacement_leader_last() {
    for crash_every in [None, Some(4)] {
        let mut fx = cluster_on(3, "3.5.1", "3.5.1", true);
        for i in 0..3 {
            fx.pod_mut(&name(i)).tmpfs_size = Some("1Gi".into());
        }
        fx.status_mut().observed.as_mut().unwrap().storage.size = Some(Quantity("2Gi".into()));
        let mut sim = Sim::new(fx);
        let deleted = run_upgrade(&mut sim, 600, crash_every);
        sim.assert_converged(3);
        assert_eq!(deleted, vec![name(1), name(2), name(0)], "{crash_every:?}");
        assert_eq!(kinds_count(&sim.steps, StepKind::AddLearner), 3);
        for m in &sim.fx.obs.members {
            assert_eq!(m.member.spec.storage.size_or_default().0, "2Gi");
            assert_eq!(m.pod.as_ref().unwrap().tmpfs_size.as_deref(), Some("2Gi"));
        }
    }
}

#[test]
fn a_member_deleted_by_hand_keeps_its_pvc_and_the_cluster_heals_on_a_new_ordinal() {
    let mut sim = Sim::new(Fx::healthy(3));
    sim.fx.member_mut("etcd-1").metadata.deletion_timestamp = Some(Time(at(sim.t)));
    sim.run(150, Crash::Every(3));
    sim.assert_converged(3);
    let names: Vec<_> = sim
        .fx
        .obs
        .members
        .iter()
        .map(|m| m.member.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        ["etcd-0", "etcd-2", "etcd-3"],
        "ordinal 1 is not reused"
    );
    let retained: Vec<_> = sim
        .fx
        .obs
        .retained_pvcs
        .iter()
        .map(|p| (p.name.as_str(), p.owner_uid.as_deref()))
        .collect();
    assert_eq!(retained, [("data-etcd-1", Some("uid-etcd"))]);
    assert_eq!(kinds_count(&sim.steps, StepKind::DeletePvc), 0);
}

#[test]
fn scale_in_deletes_pvcs_by_default_and_keeps_them_under_when_scaled_retain() {
    use etcd_operator_api::cluster::{PvcRetention, PvcRetentionPolicy};
    for (when_scaled, kept) in [(None, 0), (Some(PvcRetention::Retain), 2)] {
        let mut sim = Sim::new(Fx::healthy(5));
        sim.fx
            .obs
            .cluster
            .spec
            .persistent_volume_claim_retention_policy = Some(PvcRetentionPolicy {
            when_deleted: None,
            when_scaled,
        });
        sim.fx.obs.cluster.spec.replicas = Some(3);
        sim.run(150, Crash::Every(4));
        sim.assert_converged(3);
        assert_eq!(sim.fx.obs.retained_pvcs.len(), kept, "{when_scaled:?}");
        // Scaling out again never lands on a retained ordinal.
        sim.fx.obs.cluster.spec.replicas = Some(5);
        sim.run(150, Crash::Never);
        sim.assert_converged(5);
        let names: Vec<_> = sim
            .fx
            .obs
            .members
            .iter()
            .map(|m| m.member.metadata.name.clone().unwrap())
            .collect();
        let expected: &[&str] = if kept == 0 {
            &["etcd-0", "etcd-1", "etcd-2", "etcd-3", "etcd-4"]
        } else {
            &["etcd-0", "etcd-1", "etcd-2", "etcd-5", "etcd-6"]
        };
        assert_eq!(names, expected, "{when_scaled:?}");
    }
}

/// Where one pass of the operator dies, for the exhaustive crash matrices of the lost-quorum
/// recoveries. `act` writes the cluster status, then each member status, then performs the
/// step; a death after the step (the crash points `after_pod_delete`, `after_pod_create`,
/// `after_pod_metadata_patch`, `after_member_remove`, `after_pvc_delete`, ...) leaves the
/// world exactly as a pass that went on would, since the planner keeps nothing between passes:
/// the next process plans from what it observes, which is the uncrashed run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CrashAt {
    /// The pass planned and wrote nothing.
    BeforeWrites,
    /// The cluster status (the recovery's record) written, no member status.
    AfterClusterStatus,
    /// The cluster status and the first member status written (`after_phase_write`).
    AfterFirstMemberStatus,
    /// Every status written, the step not performed.
    BeforeStep,
}

const CRASH_POSITIONS: [CrashAt; 4] = [
    CrashAt::BeforeWrites,
    CrashAt::AfterClusterStatus,
    CrashAt::AfterFirstMemberStatus,
    CrashAt::BeforeStep,
];

/// Runs passes from `fx` until `done`, performing each step with `apply`, with the operator
/// dying once at pass `crash` (if any) at `at`. Returns the steps performed, in order.
fn run_crashing(
    fx: &mut Fx,
    apply: &mut dyn FnMut(&mut Fx, &Step),
    done: &dyn Fn(&Fx) -> bool,
    crash: Option<(usize, CrashAt)>,
    limit: usize,
) -> Vec<Step> {
    let mut performed = Vec::new();
    for pass in 0..limit {
        if done(fx) {
            return performed;
        }
        let plan = plan_next_step(&fx.obs, at(200_000 + pass as i64));
        if let Some((when, position)) = crash
            && when == pass
        {
            match position {
                CrashAt::BeforeWrites => {}
                CrashAt::AfterClusterStatus => {
                    if let Some(status) = &plan.cluster_status {
                        fx.obs.cluster.status = Some(status.clone());
                    }
                }
                CrashAt::AfterFirstMemberStatus => {
                    if let Some(status) = &plan.cluster_status {
                        fx.obs.cluster.status = Some(status.clone());
                    }
                    if let Some(write) = plan.member_statuses.first() {
                        fx.member_mut(&write.member).status = Some(write.status.clone());
                    }
                }
                CrashAt::BeforeStep => fx.write_statuses(&plan),
            }
            continue;
        }
        fx.write_statuses(&plan);
        apply(fx, &plan.step);
        performed.push(plan.step);
    }
    panic!(
        "no end after {limit} passes (crash {crash:?}); last steps: {:?}",
        performed
            .iter()
            .rev()
            .take(8)
            .map(Step::kind)
            .collect::<Vec<_>>()
    );
}

fn recovery_record(fx: &Fx) -> Option<etcd_operator_api::cluster::QuorumRecoveryStatus> {
    fx.obs.cluster.status.as_ref()?.quorum_recovery.clone()
}

fn recovery_done(fx: &Fx) -> bool {
    use etcd_operator_api::cluster::{QuorumRecoveryPhase, RECOVER_QUORUM_ANNOTATION};
    recovery_record(fx).and_then(|r| r.phase) == Some(QuorumRecoveryPhase::Completed)
        && fx
            .obs
            .cluster
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(RECOVER_QUORUM_ANNOTATION))
}

fn forced(step: &Step) -> bool {
    matches!(step, Step::CreatePod(pod) if pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::plan::FORCE_NEW_CLUSTER_ANNOTATION))
        .is_some_and(|v| v == "true"))
}

/// The recovery from a survivor (2 of 3 members wiped), asked for and automatic, with the
/// operator dying once at every pass and at every point of a pass: it always completes, the
/// survivor's Pod is recreated with --force-new-cluster exactly once and never touched after,
/// each lost member is reset exactly once, and the flag ends "false".
#[test]
fn a_recovery_from_the_survivor_completes_whichever_pass_and_point_the_operator_dies_at() {
    use super::quorum::{apply, automatic, available_false_since, request, two_of_three_wiped};
    for trigger in ["asked", "automatic"] {
        let start = || {
            let mut fx = two_of_three_wiped();
            if trigger == "asked" {
                request(&mut fx, "auto");
            } else {
                automatic(&mut fx, "1s");
                available_false_since(&mut fx, 0);
            }
            fx
        };
        let mut counter = 0;
        let uncrashed = run_crashing(
            &mut start(),
            &mut |fx, step| apply(fx, step, &mut counter),
            &recovery_done,
            None,
            80,
        );
        let mut runs = 0;
        for pass in 0..=uncrashed.len() {
            for position in CRASH_POSITIONS {
                let mut fx = start();
                let mut counter = 0;
                let steps = run_crashing(
                    &mut fx,
                    &mut |fx, step| apply(fx, step, &mut counter),
                    &recovery_done,
                    Some((pass, position)),
                    80,
                );
                runs += 1;
                let context = format!("{trigger}, crash at pass {pass} {position:?}: {steps:?}");
                assert_eq!(steps.iter().filter(|s| forced(s)).count(), 1, "{context}");
                let forced_at = steps.iter().position(forced).unwrap();
                assert!(
                    steps[forced_at..]
                        .iter()
                        .all(|s| !(s.is_destructive() && s.member() == Some("etcd-0"))),
                    "the survivor is not touched once forced: {context}"
                );
                for m in ["etcd-1", "etcd-2"] {
                    let pvc_deletes = steps
                        .iter()
                        .filter(|s| matches!(s, Step::DeletePvc { member, .. } if member == m))
                        .count();
                    assert_eq!(pvc_deletes, 1, "{m} reset once: {context}");
                }
                let survivor = fx.obs.members[0].pod.as_ref().unwrap();
                assert_eq!(
                    survivor
                        .annotations
                        .get(crate::plan::FORCE_NEW_CLUSTER_ANNOTATION)
                        .map(String::as_str),
                    Some("false"),
                    "{context}"
                );
                assert_eq!(fx.obs.etcd.member_list().len(), 1, "{context}");
            }
        }
        assert!(runs >= 4 * 8, "{trigger}: {runs} runs");
    }
}

/// The recovery from a snapshot (every member's data lost), memory-backed and PVC-backed,
/// with the operator dying once at every pass and every point of a pass: it always completes,
/// the seed is restored exactly once, and the restored cluster's ID is latched.
#[test]
fn a_recovery_from_a_snapshot_completes_whichever_pass_and_point_the_operator_dies_at() {
    use super::quorum::request;
    use super::snapshot_recovery::{NEW_CLUSTER_ID, all_pods_lost, apply, settle, snapshot};
    for memory in [true, false] {
        let start = || {
            let mut fx = if memory {
                all_pods_lost(vec![snapshot("newest", CLUSTER, 900, true)])
            } else {
                let mut fx = Fx::healthy(3);
                for i in 0..3 {
                    fx.observed_member(&name(i)).pvc = None;
                    fx.without_pod(&name(i));
                }
                fx.obs.etcd = crate::etcd::EtcdView::not_observed("no member has a Pod");
                fx.obs.snapshots = Ok(vec![snapshot("newest", CLUSTER, 900, true)]);
                settle(&mut fx);
                fx
            };
            request(&mut fx, "auto");
            fx
        };
        let mut restores = 0;
        let uncrashed = run_crashing(
            &mut start(),
            &mut |fx, step| apply(fx, step, &mut restores),
            &recovery_done,
            None,
            80,
        );
        assert_eq!(restores, 1);
        for pass in 0..=uncrashed.len() {
            for position in CRASH_POSITIONS {
                let mut fx = start();
                let mut restores = 0;
                let steps = run_crashing(
                    &mut fx,
                    &mut |fx, step| apply(fx, step, &mut restores),
                    &recovery_done,
                    Some((pass, position)),
                    80,
                );
                let context =
                    format!("memory={memory}, crash at pass {pass} {position:?}: {steps:?}");
                assert_eq!(restores, 1, "restored exactly once: {context}");
                assert_eq!(
                    fx.obs
                        .cluster
                        .status
                        .as_ref()
                        .unwrap()
                        .cluster_id
                        .as_deref(),
                    Some(crate::etcd::member_id_hex(NEW_CLUSTER_ID).as_str()),
                    "{context}"
                );
            }
        }
    }
}
