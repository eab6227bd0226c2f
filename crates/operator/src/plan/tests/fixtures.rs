//! Small observed states for the planner's tests: a cluster `etcd` in namespace `prod`, members
//! `etcd-<n>` with etcd ID `0x100 + n`, and helpers that keep the etcd view consistent.

use etcd_operator_api::cluster::EtcdClusterStatus;
use etcd_operator_api::{EtcdMember, MemberPhase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::build::tests_support::{latched_cluster, member};
use crate::build::{client_service, headless_service, voter_pdb};
use crate::domain::settings::OperatorSettings;
use crate::etcd::{
    Alarm, EndpointObservation, EndpointStatus, EtcdError, EtcdErrorKind, EtcdView, MemberInfo,
    member_id_hex,
};
use crate::plan::{
    Observed, ObservedMember, Plan, PodFacts, PodPhase, PvcFacts, Step, WaitReason, plan_next_step,
};

pub const CLUSTER: &str = "etcd";
pub const CLUSTER_ID: u64 = 0xc1;

pub fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).expect("valid timestamp")
}

/// The time every test plans at.
pub fn now() -> Timestamp {
    at(100_000)
}

pub fn name(ordinal: u32) -> String {
    format!("{CLUSTER}-{ordinal}")
}

/// etcd's ID of `etcd-<n>`; names without an ordinal get one from their bytes.
pub fn id_of(member: &str) -> u64 {
    match member
        .strip_prefix("etcd-")
        .and_then(|n| n.parse::<u64>().ok())
    {
        Some(n) => 0x100 + n,
        None => 0x9000 + member.bytes().map(u64::from).sum::<u64>(),
    }
}

pub fn peer(member: &str) -> String {
    format!("http://{member}.{CLUSTER}.prod.svc:2380")
}

pub fn client(member: &str) -> String {
    format!("http://{member}.{CLUSTER}.prod.svc:2379")
}

/// A running, ready Pod with the voter label, started long ago.
pub fn running_pod(member: &str) -> PodFacts {
    PodFacts {
        name: member.to_string(),
        uid: format!("pod-{member}"),
        phase: PodPhase::Running,
        ready: true,
        deleting: false,
        restart_count: 0,
        waiting_reason: None,
        last_termination_reason: None,
        started_at: Some(at(0)),
        ready_changed_at: None,
        node: Some("node-a".into()),
        voter_label: true,
        owner_uid: Some(format!("uid-{member}")),
        start: Some(crate::build::PodStart::own_data(member, &peer(member))),
        termination_message: None,
        trusted_ca: None,
        restore_failure: None,
        restoring: None,
        image: None,
        config_digest: None,
        rendered: None,
        labels: Default::default(),
        annotations: Default::default(),
        tmpfs_size: None,
        etcd_flags: Default::default(),
        data_claim: Some(format!("data-{member}")),
        data_mount: Some(crate::build::DATA_DIR.into()),
    }
}

pub fn bound_pvc(member: &str) -> PvcFacts {
    PvcFacts {
        name: format!("data-{member}"),
        uid: format!("pvc-{member}"),
        resource_version: Some("1".into()),
        phase: Some("Bound".into()),
        deleting: false,
        owner_uid: Some(format!("uid-{member}")),
        requested: Some("1Gi".into()),
        capacity: Some("1Gi".into()),
        storage_class: Some("standard".into()),
        expansion: crate::plan::observed::ClassExpansion::Unknown,
        resize_failure: None,
        resize_progress: None,
        labels: Default::default(),
        annotations: Default::default(),
    }
}

/// How a member's endpoint answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Healthy,
    Learner,
    NoQuorum,
    Down,
}

fn unreachable(call: &'static str, what: &str) -> EtcdError {
    EtcdError {
        call,
        endpoints: what.to_string(),
        kind: EtcdErrorKind::Unreachable,
        detail: "connection refused".into(),
    }
}

/// A test world: an [`Observed`] and the helpers that change it.
pub struct Fx {
    pub obs: Observed,
}

impl Fx {
    /// A latched cluster with `replicas`, its Services, no members, etcd not observed.
    pub fn empty(replicas: i32) -> Fx {
        let cluster = latched_cluster(CLUSTER, replicas);
        let headless_service = Some(headless_service(&cluster).unwrap());
        let client_service = Some(client_service(&cluster).unwrap());
        Fx {
            obs: Observed {
                cluster,
                members: Vec::new(),
                headless_service,
                client_service,
                pdb: None,
                etcd: EtcdView::not_observed("no member has a Pod"),
                settings: OperatorSettings::default(),
                security: Default::default(),
                retained_pvcs: Vec::new(),
                snapshots: Some(Ok(Vec::new())),
            },
        }
    }

    /// A formed cluster of `n` Ready members, all healthy voters, `etcd-0` leading, PDB set.
    pub fn healthy(n: u32) -> Fx {
        let mut fx = Fx::empty(n as i32);
        fx.status_mut().cluster_id = Some(member_id_hex(CLUSTER_ID));
        fx.obs.etcd.members = Ok(Vec::new());
        for i in 0..n {
            let m = name(i);
            fx.add_member(&m, MemberPhase::Ready);
            fx.with_pod(&m, running_pod(&m));
            fx.etcd_add(&m, false, true);
            fx.answer(&m, Answer::Healthy);
        }
        fx.set_leader(&name(0));
        fx.obs.pdb = Some(voter_pdb(&fx.obs.cluster, n).unwrap());
        fx
    }

    pub fn plan(&self) -> Plan {
        plan_next_step(&self.obs, now())
    }

    pub fn step(&self) -> Step {
        self.plan().step
    }

    pub fn status_mut(&mut self) -> &mut EtcdClusterStatus {
        self.obs.cluster.status.get_or_insert_with(Default::default)
    }

    /// An EtcdMember in `phase` with a bound PVC and no Pod, not in etcd.
    pub fn add_member(&mut self, member_name: &str, phase: MemberPhase) {
        let mut m = member(CLUSTER, member_name);
        let status = m.status.get_or_insert_with(Default::default);
        status.phase = Some(phase);
        status.last_phase_transition_time = Some(Time(at(0)));
        if phase == MemberPhase::Ready {
            status.member_id = Some(member_id_hex(id_of(member_name)));
            status.is_voter = Some(true);
            status.pod_uid = Some(format!("pod-{member_name}"));
        }
        self.obs.members.push(ObservedMember {
            member: m,
            pod: None,
            pvc: Some(bound_pvc(member_name)),
        });
    }

    pub fn observed_member(&mut self, member_name: &str) -> &mut ObservedMember {
        self.obs
            .members
            .iter_mut()
            .find(|m| m.member.metadata.name.as_deref() == Some(member_name))
            .unwrap_or_else(|| panic!("no member {member_name}"))
    }

    pub fn member_mut(&mut self, member_name: &str) -> &mut EtcdMember {
        &mut self.observed_member(member_name).member
    }

    pub fn with_pod(&mut self, member_name: &str, pod: PodFacts) {
        self.observed_member(member_name).pod = Some(pod);
    }

    pub fn pod_mut(&mut self, member_name: &str) -> &mut PodFacts {
        self.observed_member(member_name)
            .pod
            .as_mut()
            .expect("member has a Pod")
    }

    pub fn without_pod(&mut self, member_name: &str) {
        self.observed_member(member_name).pod = None;
    }

    pub fn set_phase(&mut self, member_name: &str, phase: MemberPhase, since: Timestamp) {
        let status = self
            .member_mut(member_name)
            .status
            .get_or_insert_with(Default::default);
        status.phase = Some(phase);
        status.last_phase_transition_time = Some(Time(since));
    }

    pub fn make_memory_backed(&mut self) {
        use etcd_operator_api::shared::StorageMedium;
        for om in &mut self.obs.members {
            om.member.spec.storage.medium = Some(StorageMedium::Memory);
            om.pvc = None;
        }
        let observed = self.status_mut().observed.as_mut().unwrap();
        observed.storage.medium = Some(StorageMedium::Memory);
        self.obs.cluster.spec.storage = Some(observed.storage.clone());
    }

    /// Lists `member_name` in etcd's member list.
    pub fn etcd_add(&mut self, member_name: &str, learner: bool, started: bool) {
        let info = MemberInfo {
            id: id_of(member_name),
            name: if started {
                member_name.to_string()
            } else {
                String::new()
            },
            peer_urls: vec![peer(member_name)],
            client_urls: if started {
                vec![client(member_name)]
            } else {
                vec![]
            },
            is_learner: learner,
        };
        if self.obs.etcd.members.is_err() {
            self.obs.etcd.members = Ok(Vec::new());
        }
        let list = self.obs.etcd.members.as_mut().expect("just set");
        list.retain(|m| m.id != info.id);
        list.push(info);
        self.obs.etcd.cluster_id = Some(CLUSTER_ID);
        self.refresh();
    }

    pub fn etcd_remove(&mut self, member_name: &str) {
        if let Ok(list) = self.obs.etcd.members.as_mut() {
            list.retain(|m| m.id != id_of(member_name));
        }
        self.obs
            .etcd
            .endpoints
            .retain(|o| o.endpoint != client(member_name));
        self.refresh();
    }

    /// How `member_name`'s endpoint answers Status and the linearizable read.
    pub fn answer(&mut self, member_name: &str, answer: Answer) {
        let id = id_of(member_name);
        let leader = self.obs.etcd.leader().unwrap_or(0);
        // A member answers with the version it answered before; a new one with the target's
        // (it was created on it), else 3.5.1.
        let version = self
            .obs
            .etcd
            .status_of(id)
            .map(|s| s.version.clone())
            .or_else(|| {
                self.obs
                    .cluster
                    .status
                    .as_ref()
                    .and_then(|s| s.observed.as_ref())
                    .map(|o| o.version.clone())
            })
            .unwrap_or_else(|| "3.5.1".into());
        let status = EndpointStatus {
            member_id: id,
            cluster_id: CLUSTER_ID,
            version,
            db_size: 1 << 20,
            db_size_in_use: 1 << 19,
            leader: if answer == Answer::NoQuorum {
                0
            } else {
                leader
            },
            raft_index: 1000,
            raft_applied_index: 1000,
            raft_term: 2,
            revision: 42,
            is_learner: answer == Answer::Learner,
            errors: vec![],
            storage_version: None,
            downgrade: None,
        };
        let observation = EndpointObservation {
            endpoint: client(member_name),
            status: match answer {
                Answer::Down => Err(unreachable("Status", &client(member_name))),
                _ => Ok(status),
            },
            health: match answer {
                Answer::Healthy => Some(Ok(())),
                Answer::NoQuorum => Some(Err(unreachable("Health", &client(member_name)))),
                Answer::Learner | Answer::Down => None,
            },
        };
        self.obs
            .etcd
            .endpoints
            .retain(|o| o.endpoint != observation.endpoint);
        self.obs.etcd.endpoints.push(observation);
        self.refresh();
    }

    /// Every endpoint that knows a leader (all but those without quorum) names `leader`.
    pub fn set_leader(&mut self, leader: &str) {
        for o in &mut self.obs.etcd.endpoints {
            let knows_leader = !matches!(o.health, Some(Err(_)));
            if let Ok(s) = o.status.as_mut()
                && knows_leader
            {
                s.leader = id_of(leader);
            }
        }
    }

    /// The applied index of a member's endpoint (to model a learner catching up).
    pub fn applied_index(&mut self, member_name: &str, index: u64) {
        for o in &mut self.obs.etcd.endpoints {
            if o.endpoint == client(member_name)
                && let Ok(s) = o.status.as_mut()
            {
                s.raft_applied_index = index;
            }
        }
    }

    pub fn alarm(&mut self, member_name: &str, kind: crate::etcd::AlarmKind) {
        self.obs.etcd.alarms = Ok(vec![Alarm {
            member_id: id_of(member_name),
            kind,
        }]);
    }

    /// Keeps the view's derived fields (health, alarms reachability) consistent.
    pub fn refresh(&mut self) {
        let healthy = self.obs.etcd.endpoints.iter().any(|o| o.is_healthy());
        self.obs.etcd.health = if healthy {
            Ok(())
        } else {
            Err(EtcdError {
                call: "Health",
                endpoints: "all".into(),
                kind: EtcdErrorKind::NoLeader,
                detail: "no voter served a linearizable read".into(),
            })
        };
        if healthy && self.obs.etcd.alarms.is_err() {
            self.obs.etcd.alarms = Ok(vec![]);
        }
        if !healthy {
            self.obs.etcd.alarms = Err(unreachable("AlarmList", "all"));
        }
    }

    /// Applies a plan's status writes (what `act` does before the step).
    pub fn write_statuses(&mut self, plan: &Plan) {
        if let Some(status) = &plan.cluster_status {
            self.obs.cluster.status = Some(status.clone());
        }
        for write in &plan.member_statuses {
            self.member_mut(&write.member).status = Some(write.status.clone());
        }
    }
}

/// The planned status of `member` (or its observed one when the plan does not change it).
pub fn planned_member_status(
    fx: &Fx,
    plan: &Plan,
    member_name: &str,
) -> etcd_operator_api::EtcdMemberStatus {
    plan.member_statuses
        .iter()
        .find(|w| w.member == member_name)
        .map(|w| w.status.clone())
        .or_else(|| {
            fx.obs
                .members
                .iter()
                .find(|m| m.member.metadata.name.as_deref() == Some(member_name))
                .and_then(|m| m.member.status.clone())
        })
        .unwrap_or_default()
}

/// The condition `type_` of the planned cluster status: (status, reason).
pub fn cluster_condition(fx: &Fx, plan: &Plan, type_: &str) -> (String, String) {
    let status = plan
        .cluster_status
        .clone()
        .or_else(|| fx.obs.cluster.status.clone())
        .unwrap_or_default();
    let c = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition"));
    (c.status, c.reason)
}

/// The reason of a `Wait` step (panics on another step).
pub fn wait_reason(step: &Step) -> WaitReason {
    match step {
        Step::Wait { reason, .. } => *reason,
        other => panic!("expected a wait, got {other:?}"),
    }
}

/// Sets the cluster's replicas in its spec and in its latched target.
pub fn target(fx: &mut Fx, replicas: i32) {
    fx.obs.cluster.spec.replicas = Some(replicas);
    fx.status_mut().observed.as_mut().unwrap().replicas = replicas;
}
