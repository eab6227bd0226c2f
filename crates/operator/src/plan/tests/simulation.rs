//! Whole sequences: a tiny model of Kubernetes and etcd executes each planned step, and the
//! planner must reach Idle. Crashes are injected between the status write and the step, and
//! before either, to show every transition resumes.

use etcd_operator_api::MemberPhase;
use etcd_operator_api::labels::{ROLE, ROLE_VOTER};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::fixtures::*;
use crate::plan::{ObservedMember, PodPhase, Step, StepKind, plan_next_step};

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
    /// Operator-issued certificates: the Secrets issued so far (`None`: the cluster has none).
    issued: Option<std::collections::BTreeSet<String>>,
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
        use crate::plan::{IssuedFacts, IssuedMember, IssuedState};
        let Some(secrets) = &self.issued else {
            return;
        };
        let state = |secret: String| {
            if secrets.contains(&secret) {
                IssuedState::Current
            } else {
                IssuedState::Missing
            }
        };
        let members = self
            .fx
            .obs
            .members
            .iter()
            .filter(|m| m.member.metadata.deletion_timestamp.is_none())
            .map(|m| {
                let name = m.member.metadata.name.clone().unwrap();
                IssuedMember {
                    uid: format!("uid-{name}"),
                    state: state(format!("{name}-tls")),
                    member: name,
                }
            })
            .collect();
        self.fx.obs.security.issued = Some(IssuedFacts {
            ca: state(format!("{CLUSTER}-ca")),
            members,
            operator_client: Some(state(format!("{CLUSTER}-operator-client-tls"))),
        });
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
            Step::Idle | Step::Wait { .. } | Step::SetPhase { .. } => {}
            Step::CreateService(svc) => {
                if svc.metadata.name.as_deref() == Some(CLUSTER) {
                    fx.obs.headless_service = Some(*svc);
                } else {
                    fx.obs.client_service = Some(*svc);
                }
            }
            Step::UpdateService(_) => {}
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
            Step::RemoveFinalizer { member } => {
                fx.obs
                    .members
                    .retain(|m| m.member.metadata.name.as_deref() != Some(member.as_str()));
            }
            Step::CreatePvc(pvc) => {
                let name = pvc.metadata.name.unwrap();
                let member = name.strip_prefix("data-").unwrap().to_string();
                fx.observed_member(&member).pvc = Some(bound_pvc(&member));
            }
            Step::DeletePvc { member, .. } => fx.observed_member(&member).pvc = None,
            Step::CreatePod(pod) => {
                let name = pod.metadata.name.clone().unwrap();
                if let Some(secrets) = &self.issued {
                    assert!(
                        secrets.contains(&format!("{name}-tls"))
                            && secrets.contains(&format!("{CLUSTER}-operator-client-tls")),
                        "Pod {name} created before its certificate: {secrets:?}"
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
                facts.start = start.clone();
                facts.uid = format!("pod-{name}-{}", self.t);
                facts.started_at = Some(at(self.t));
                facts.voter_label = voter_label;
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
            Step::IssueCertificate { secret, .. } => {
                let secrets = self.issued.as_mut().expect("issued only when asked for");
                assert!(secrets.insert(secret.clone()), "{secret} issued twice");
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
        sim.issued = Some(Default::default());
        sim.run(400, crash);
        sim.assert_converged(3);
        sim.fx.obs.cluster.spec.replicas = Some(5);
        sim.run(400, crash);
        sim.assert_converged(5);
        sim.fx.obs.cluster.spec.replicas = Some(3);
        sim.run(400, crash);
        sim.assert_converged(3);
        let secrets = sim.issued.as_ref().unwrap();
        assert_eq!(
            secrets.iter().map(String::as_str).collect::<Vec<_>>(),
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
