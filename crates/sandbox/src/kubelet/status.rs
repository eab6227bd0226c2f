//! A Pod's status as the kubelet computes it from what it knows of its containers: phase
//! (`getPhase`), the conditions it owns, container statuses, addresses. Pure: the worker
//! gathers the facts, this turns them into the API's shape, and [`needs_update`] says whether
//! the object already says so.

use std::net::Ipv4Addr;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

/// The conditions the kubelet writes; others (PodScheduled by the scheduler, DisruptionTarget
/// by evictions) are left as they are.
pub const OWNED_CONDITIONS: &[&str] = &[
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
];

/// How a container run ended, in the words of `state.terminated`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    pub exit_code: i32,
    pub signal: Option<i32>,
    /// `Completed`, `Error`, `ContainerStatusUnknown`, ...
    pub reason: String,
    pub message: Option<String>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub container_id: Option<String>,
}

impl Ended {
    pub fn from_runtime(
        termination: &crate::runtime::Termination,
        container_id: Option<String>,
    ) -> Self {
        Self {
            exit_code: termination.exit_code,
            signal: termination.signal,
            reason: termination.reason.as_str().to_string(),
            message: None,
            started_at: Some(termination.started_at),
            finished_at: Some(termination.finished_at),
            container_id,
        }
    }

    fn to_api(&self) -> ContainerStateTerminated {
        ContainerStateTerminated {
            exit_code: self.exit_code,
            signal: self.signal,
            reason: Some(self.reason.clone()),
            message: self.message.clone(),
            started_at: self.started_at.map(Time),
            finished_at: self.finished_at.map(Time),
            container_id: self.container_id.clone(),
        }
    }
}

/// The state of a container as the kubelet reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordState {
    Waiting {
        reason: String,
        message: Option<String>,
    },
    Running {
        started_at: Timestamp,
    },
    Terminated(Ended),
}

/// Everything `containerStatuses[]` says about one container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerRecord {
    pub name: String,
    pub image: String,
    pub restart_count: u32,
    pub state: RecordState,
    pub last_termination: Option<Ended>,
    /// Running and its readiness probe passed (or it has none).
    pub ready: bool,
    /// Running and its startup probe passed (or it has none).
    pub started: bool,
    pub container_id: Option<String>,
}

impl ContainerRecord {
    /// A container that has not run yet.
    pub fn waiting(name: &str, image: &str, reason: &str) -> Self {
        Self {
            name: name.to_string(),
            image: image.to_string(),
            restart_count: 0,
            state: RecordState::Waiting {
                reason: reason.to_string(),
                message: None,
            },
            last_termination: None,
            ready: false,
            started: false,
            container_id: None,
        }
    }

    fn succeeded(&self) -> bool {
        matches!(&self.state, RecordState::Terminated(ended) if ended.exit_code == 0)
    }

    pub fn to_api(&self) -> ContainerStatus {
        let state = match &self.state {
            RecordState::Waiting { reason, message } => ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.clone()),
                    message: message.clone(),
                }),
                ..ContainerState::default()
            },
            RecordState::Running { started_at } => ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(Time(*started_at)),
                }),
                ..ContainerState::default()
            },
            RecordState::Terminated(ended) => ContainerState {
                terminated: Some(ended.to_api()),
                ..ContainerState::default()
            },
        };
        let running = matches!(self.state, RecordState::Running { .. });
        ContainerStatus {
            name: self.name.clone(),
            image: self.image.clone(),
            image_id: self.image.clone(),
            container_id: self.container_id.clone(),
            restart_count: i32::try_from(self.restart_count).unwrap_or(i32::MAX),
            ready: running && self.ready,
            started: Some(running && self.started),
            state: Some(state),
            last_state: Some(ContainerState {
                terminated: self.last_termination.as_ref().map(Ended::to_api),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }
    }
}

/// A phase the kubelet forces, with the reason it gives (graceful node shutdown, deletion).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminalPhase {
    pub phase: &'static str,
    pub reason: Option<String>,
    pub message: Option<String>,
    /// A `DisruptionTarget` condition with this message (`TerminationByKubelet`).
    pub disruption: Option<String>,
}

/// `DisruptionTarget=True` (`TerminationByKubelet`), as the kubelet sets it on Pods it stops
/// for a node shutdown; the transition time is kept if it was already set.
pub fn disruption_condition(pod: &Pod, message: &str) -> PodCondition {
    let existing = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")
        });
    PodCondition {
        last_transition_time: Some(
            existing
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or(Time(Timestamp::now())),
        ),
        ..condition(
            "DisruptionTarget",
            true,
            Some("TerminationByKubelet"),
            Some(message.to_string()),
        )
    }
}

/// The facts a status is computed from.
#[derive(Clone, Debug)]
pub struct PodFacts<'a> {
    pub pod: &'a Pod,
    pub host_ip: Ipv4Addr,
    pub pod_ip: Option<Ipv4Addr>,
    /// The sandbox and its network exist.
    pub sandbox_ready: bool,
    pub start_time: Option<Timestamp>,
    /// Every init container of the spec, in order.
    pub init: &'a [ContainerRecord],
    /// Every container of the spec, in order.
    pub containers: &'a [ContainerRecord],
    pub terminal: Option<&'a TerminalPhase>,
}

fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// Whether every init container has completed successfully.
pub fn initialized(init: &[ContainerRecord]) -> bool {
    init.iter().all(ContainerRecord::succeeded)
}

/// The phase, by the rules of the kubelet's `getPhase` (no restartable init containers).
pub fn pod_phase(
    restart_policy: &str,
    init: &[ContainerRecord],
    containers: &[ContainerRecord],
) -> &'static str {
    let mut pending_initialization = 0;
    let mut failed_initialization = 0;
    for record in init {
        match &record.state {
            RecordState::Terminated(ended) if ended.exit_code == 0 => {}
            RecordState::Terminated(_) => failed_initialization += 1,
            RecordState::Running { .. } => pending_initialization += 1,
            RecordState::Waiting { .. } => match &record.last_termination {
                Some(last) if last.exit_code != 0 => failed_initialization += 1,
                Some(_) => {}
                None => pending_initialization += 1,
            },
        }
    }
    if failed_initialization > 0 && restart_policy == "Never" {
        return "Failed";
    }
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for record in containers {
        match &record.state {
            RecordState::Running { .. } => running += 1,
            RecordState::Terminated(ended) => {
                stopped += 1;
                if ended.exit_code == 0 {
                    succeeded += 1;
                }
            }
            RecordState::Waiting { .. } if record.last_termination.is_some() => stopped += 1,
            RecordState::Waiting { .. } => waiting += 1,
        }
    }
    if pending_initialization > 0 || failed_initialization > 0 || waiting > 0 {
        return "Pending";
    }
    if running > 0 {
        return "Running";
    }
    if stopped > 0 {
        return match restart_policy {
            "Always" => "Running",
            _ if stopped == succeeded => "Succeeded",
            "Never" => "Failed",
            _ => "Running",
        };
    }
    "Pending"
}

fn names(records: &[&ContainerRecord]) -> String {
    let names: Vec<&str> = records.iter().map(|record| record.name.as_str()).collect();
    format!("[{}]", names.join(" "))
}

fn condition(
    type_: &str,
    status: bool,
    reason: Option<&str>,
    message: Option<String>,
) -> PodCondition {
    PodCondition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.map(str::to_string),
        message,
        ..PodCondition::default()
    }
}

/// The conditions the kubelet owns, for `phase`.
fn owned_conditions(facts: &PodFacts<'_>, phase: &str) -> Vec<PodCondition> {
    let completed = phase == "Succeeded";
    let mut conditions = vec![condition(
        "PodReadyToStartContainers",
        facts.sandbox_ready,
        None,
        None,
    )];
    let incomplete: Vec<&ContainerRecord> = facts.init.iter().filter(|r| !r.succeeded()).collect();
    conditions.push(if incomplete.is_empty() {
        condition("Initialized", true, None, None)
    } else if completed {
        condition("Initialized", true, Some("PodCompleted"), None)
    } else {
        condition(
            "Initialized",
            false,
            Some("ContainersNotInitialized"),
            Some(format!(
                "containers with incomplete status: {}",
                names(&incomplete)
            )),
        )
    });
    let unready: Vec<&ContainerRecord> = facts
        .containers
        .iter()
        .filter(|r| !(r.ready && matches!(r.state, RecordState::Running { .. })))
        .collect();
    let containers_ready = if completed {
        condition("ContainersReady", false, Some("PodCompleted"), None)
    } else if unready.is_empty() {
        condition("ContainersReady", true, None, None)
    } else {
        condition(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: {}",
                names(&unready)
            )),
        )
    };
    let mut ready = containers_ready.clone();
    ready.type_ = "Ready".into();
    if ready.status == "True"
        && let Some(message) = unready_gates(facts.pod)
    {
        ready = condition(
            "Ready",
            false,
            Some("ReadinessGatesNotReady"),
            Some(message),
        );
    }
    conditions.push(containers_ready);
    conditions.push(ready);
    conditions
}

/// `spec.readinessGates` whose condition is not True, as the kubelet words it.
fn unready_gates(pod: &Pod) -> Option<String> {
    let gates = pod.spec.as_ref()?.readiness_gates.as_ref()?;
    let conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut problems = Vec::new();
    for gate in gates {
        match conditions.iter().find(|c| c.type_ == gate.condition_type) {
            None => problems.push(format!(
                "corresponding condition of pod readiness gate \"{}\" does not exist.",
                gate.condition_type
            )),
            Some(c) if c.status != "True" => problems.push(format!(
                "the status of pod readiness gate \"{}\" is not \"True\", but {}",
                gate.condition_type, c.status
            )),
            Some(_) => {}
        }
    }
    (!problems.is_empty()).then(|| problems.join(", "))
}

/// The status the kubelet wants the Pod to have now. Condition transition times are kept
/// from the current object when the condition's status did not change.
pub fn desired_status(facts: &PodFacts<'_>, now: Timestamp) -> PodStatus {
    let phase = match facts.terminal {
        Some(terminal) => terminal.phase,
        None => pod_phase(restart_policy(facts.pod), facts.init, facts.containers),
    };
    let current = facts.pod.status.clone().unwrap_or_default();
    let existing = current.conditions.unwrap_or_default();
    let conditions = owned_conditions(facts, phase)
        .into_iter()
        .map(|mut wanted| {
            let previous = existing.iter().find(|c| c.type_ == wanted.type_);
            wanted.last_transition_time = Some(match previous {
                Some(previous) if previous.status == wanted.status => {
                    previous.last_transition_time.clone().unwrap_or(Time(now))
                }
                _ => Time(now),
            });
            wanted
        })
        .collect();
    let host_ip = facts.host_ip.to_string();
    let pod_ip = facts.pod_ip.map(|ip| ip.to_string());
    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions),
        host_ip: Some(host_ip.clone()),
        host_ips: Some(vec![HostIP { ip: host_ip }]),
        pod_ip: pod_ip.clone().or(current.pod_ip),
        pod_ips: pod_ip.map(|ip| vec![PodIP { ip }]).or(current.pod_ips),
        start_time: current.start_time.or_else(|| facts.start_time.map(Time)),
        init_container_statuses: (!facts.init.is_empty())
            .then(|| facts.init.iter().map(ContainerRecord::to_api).collect()),
        container_statuses: Some(
            facts
                .containers
                .iter()
                .map(ContainerRecord::to_api)
                .collect(),
        ),
        reason: facts
            .terminal
            .and_then(|t| t.reason.clone())
            .or(current.reason),
        message: facts
            .terminal
            .and_then(|t| t.message.clone())
            .or(current.message),
        ..PodStatus::default()
    }
}

/// A strategic merge patch of `pods/status` that sets `desired`: conditions merge by type
/// (leaving others' conditions alone) and container statuses by name; the states a container
/// is not in are sent as null, so a merge removes them (as the kubelet's two-way patch does).
pub fn status_patch(desired: &PodStatus) -> Value {
    let mut status = serde_json::to_value(desired).unwrap_or_else(|_| json!({}));
    // A strategic merge patch merges each condition into the served one of its type: a field
    // it leaves out stays. The kubelet's patches name the fields a condition no longer has
    // (null), so a Ready condition that turns True loses the `ContainersNotReady` reason and
    // message it had while False.
    for condition in status
        .get_mut("conditions")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        for key in ["reason", "message"] {
            condition.entry(key).or_insert(Value::Null);
        }
    }
    for list in ["containerStatuses", "initContainerStatuses"] {
        for item in status
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            for state in ["state", "lastState"] {
                if let Some(state) = item.get_mut(state).and_then(Value::as_object_mut) {
                    for key in ["running", "terminated", "waiting"] {
                        state.entry(key).or_insert(Value::Null);
                    }
                }
            }
            if let Some(item) = item.as_object_mut() {
                item.entry("containerID").or_insert(Value::Null);
            }
        }
    }
    json!({ "status": status })
}

/// Whether the Pod's status differs from `desired` in anything the kubelet owns.
pub fn needs_update(pod: &Pod, desired: &PodStatus) -> bool {
    let current = serde_json::to_value(pod.status.clone().unwrap_or_default()).unwrap_or_default();
    let wanted = serde_json::to_value(desired).unwrap_or_default();
    let Some(wanted) = wanted.as_object() else {
        return false;
    };
    wanted.iter().any(|(key, value)| match key.as_str() {
        "conditions" => {
            let present = current[key].as_array().cloned().unwrap_or_default();
            value.as_array().into_iter().flatten().any(|condition| {
                !present
                    .iter()
                    .any(|existing| same_condition(existing, condition))
            })
        }
        _ => current.get(key) != Some(value),
    })
}

fn same_condition(existing: &Value, wanted: &Value) -> bool {
    ["type", "status", "reason", "message"]
        .iter()
        .all(|field| existing.get(field) == wanted.get(field))
}

#[cfg(test)]
mod tests;
