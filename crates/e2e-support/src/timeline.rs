//! What happened during one run, for explaining a slow one: the cluster's Events (the operator
//! records one per planner step, the kubelet its own about the Pods), the member Pods' creation,
//! start and restarts, the operator Pods' readiness transitions and restarts, and the leader
//! Lease's holder changes and renewals, all relative to the moment the run started (the
//! `kubectl apply` or `kubectl scale`).
//!
//! Events and Pod statuses carry their own timestamps, so they are read once at the end of the
//! run. Readiness transitions and Lease renewals are not kept by the API (a Pod's Ready
//! condition keeps only its last transition), so [`OperatorWatch`] watches the operator's Pods
//! and Lease from before the first run and keeps every change with the time it arrived.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, LogParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

use super::cluster::{OPERATOR_NAMESPACE, pod_ready};

/// The operator's leader Lease, as `deploy/operator/deployment.yaml` names it.
pub const LEASE_NAME: &str = "etcd-operator-leader";
/// The label of the operator's Pods.
const OPERATOR_SELECTOR: &str = "app.kubernetes.io/name=etcd-operator";

/// One line of a timeline.
#[derive(Clone, Debug)]
struct Entry {
    at: Timestamp,
    /// False for the API's whole-second timestamps (creationTimestamp, startedAt, condition
    /// transitions): the moment lies in `[at, at + 1 s)`.
    precise: bool,
    source: String,
    text: String,
}

impl Entry {
    /// Where it sorts: the middle of a whole second.
    fn sort_key(&self) -> Timestamp {
        if self.precise {
            self.at
        } else {
            self.at + k8s_openapi::jiff::SignedDuration::from_millis(500)
        }
    }

    /// Its time after `since`: `+1.23`, or `+0.7..+1.7` for a whole-second timestamp.
    fn relative(&self, since: Timestamp) -> String {
        let t = seconds_between(since, self.at);
        if self.precise {
            format!("{t:+.2}")
        } else {
            format!("{t:+.1}..{:+.1}", t + 1.0)
        }
    }
}

/// What the watch saw, in arrival order.
#[derive(Default)]
struct Seen {
    /// Operator Pod changes (created, Ready changed, restarted, deleted).
    operator: Vec<Entry>,
    /// Lease holder changes.
    holders: Vec<Entry>,
    /// Every renewTime the Lease was seen with, in order.
    renewals: Vec<Timestamp>,
}

/// What is compared between two sightings of an operator Pod.
#[derive(Clone, Debug, PartialEq)]
struct OperatorPodState {
    phase: String,
    ready: bool,
    restarts: i32,
    terminating: bool,
}

fn operator_pod_state(pod: &Pod) -> OperatorPodState {
    let status = pod.status.clone().unwrap_or_default();
    OperatorPodState {
        phase: status.phase.unwrap_or_default(),
        ready: pod_ready(pod),
        restarts: status
            .container_statuses
            .iter()
            .flatten()
            .map(|c| c.restart_count)
            .sum(),
        terminating: pod.metadata.deletion_timestamp.is_some(),
    }
}

/// Watches the operator's Pods and its leader Lease until dropped.
pub struct OperatorWatch {
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for OperatorWatch {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl OperatorWatch {
    /// Starts watching (through `client`, an administrator's).
    pub fn start(client: &Client) -> OperatorWatch {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let pods = tokio::spawn(watch_operator_pods(client.clone(), seen.clone()));
        let lease = tokio::spawn(watch_lease(client.clone(), seen.clone()));
        OperatorWatch {
            seen,
            tasks: vec![pods, lease],
        }
    }

    /// The timeline of a run of cluster `name` in `namespace` that started at `since` and was
    /// looked at until `until`: read now from the API, merged with what the watch saw.
    pub async fn timeline(
        &self,
        client: &Client,
        namespace: &str,
        name: &str,
        since: Timestamp,
        until: Timestamp,
    ) -> String {
        let mut entries = Vec::new();
        entries.extend(namespace_events(client, namespace).await);
        // The operator's own Pods: probe failures, kills, starts during the run.
        entries.extend(
            namespace_events(client, OPERATOR_NAMESPACE)
                .await
                .into_iter()
                .filter(|e| within(e.at, since, until)),
        );
        entries.extend(member_pods(client, namespace, name).await);
        entries.extend(operator_logs(client, since, until).await);
        let renewals;
        {
            let seen = self.seen.lock().unwrap();
            entries.extend(
                seen.operator
                    .iter()
                    .chain(&seen.holders)
                    .filter(|e| within(e.at, since, until))
                    .cloned(),
            );
            renewals = seen.renewals.clone();
        }
        entries.sort_by_key(Entry::sort_key);

        let mut text = String::new();
        let _ = writeln!(
            text,
            "  timeline of {namespace}/{name} (s after the run started at {since}; a..b: the API \
             keeps that time in whole seconds):"
        );
        for e in &entries {
            let _ = writeln!(
                text,
                "  {:>12}  {:<22} {}",
                e.relative(since),
                e.source,
                e.text
            );
        }
        let _ = writeln!(text, "  {}", renewal_summary(&renewals, since, until));
        text
    }
}

impl OperatorWatch {
    /// Every operator Pod change and Lease holder change seen so far, relative to `since`
    /// (for a summary of a whole benchmark: did the operator restart or lose its Lease?).
    pub fn changes(&self, since: Timestamp) -> Vec<String> {
        let seen = self.seen.lock().unwrap();
        let mut entries: Vec<&Entry> = seen.operator.iter().chain(&seen.holders).collect();
        entries.sort_by_key(|e| e.sort_key());
        entries
            .into_iter()
            .map(|e| format!("{:>12}  {:<22} {}", e.relative(since), e.source, e.text))
            .collect()
    }

    /// The longest time between two renewals of the Lease seen so far, and when it began.
    pub fn longest_renewal_gap(&self) -> Option<(f64, Timestamp)> {
        let seen = self.seen.lock().unwrap();
        seen.renewals
            .windows(2)
            .map(|w| (w[1].duration_since(w[0]).as_secs_f64(), w[0]))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }
}

fn within(at: Timestamp, since: Timestamp, until: Timestamp) -> bool {
    // A second of slack before the start: some timestamps are truncated to the second.
    let slack = k8s_openapi::jiff::SignedDuration::from_secs(1);
    at >= since - slack && at <= until
}

fn seconds_between(since: Timestamp, at: Timestamp) -> f64 {
    at.duration_since(since).as_secs_f64()
}

async fn watch_operator_pods(client: Client, seen: Arc<Mutex<Seen>>) {
    let api: Api<Pod> = Api::namespaced(client, OPERATOR_NAMESPACE);
    let config = watcher::Config::default().labels(OPERATOR_SELECTOR);
    let mut last: BTreeMap<String, OperatorPodState> = BTreeMap::new();
    let mut stream = watcher(api, config).default_backoff().boxed();
    while let Some(event) = stream.next().await {
        let (pod, deleted) = match event {
            Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => (pod, false),
            Ok(watcher::Event::Delete(pod)) => (pod, true),
            _ => continue,
        };
        let name = pod.metadata.name.clone().unwrap_or_default();
        let now = Timestamp::now();
        let record = |text: String| {
            seen.lock().unwrap().operator.push(Entry {
                at: now,
                precise: true,
                source: format!("operator {}", short_pod_name(&name)),
                text,
            });
        };
        if deleted {
            last.remove(&name);
            record("Pod deleted".into());
            continue;
        }
        let state = operator_pod_state(&pod);
        match last.get(&name) {
            None => record(format!(
                "seen: phase {}, ready {}, restarts {}",
                state.phase, state.ready, state.restarts
            )),
            Some(before) if *before != state => {
                let mut changes = Vec::new();
                if before.ready != state.ready {
                    changes.push(if state.ready { "Ready" } else { "NOT Ready" }.to_string());
                }
                if before.restarts != state.restarts {
                    changes.push(format!(
                        "RESTARTED (restartCount {} -> {}){}",
                        before.restarts,
                        state.restarts,
                        last_termination(&pod)
                    ));
                }
                if before.phase != state.phase {
                    changes.push(format!("phase {} -> {}", before.phase, state.phase));
                }
                if state.terminating && !before.terminating {
                    changes.push("terminating".into());
                }
                record(changes.join(", "));
            }
            Some(_) => {}
        }
        last.insert(name, state);
    }
}

/// Why the container's previous run ended, when the status says.
fn last_termination(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.last_state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .map(|t| {
            format!(
                "; the last run ended with exit code {} ({})",
                t.exit_code,
                t.reason.clone().unwrap_or_default()
            )
        })
        .unwrap_or_default()
}

fn short_pod_name(name: &str) -> &str {
    // etcd-operator-<replicaset hash>-<pod suffix>: the suffix tells replicas apart.
    name.rsplit('-').next().unwrap_or(name)
}

async fn watch_lease(client: Client, seen: Arc<Mutex<Seen>>) {
    let api: Api<Lease> = Api::namespaced(client, OPERATOR_NAMESPACE);
    let mut holder: Option<String> = None;
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        let lease = match event {
            Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => lease,
            _ => continue,
        };
        if lease.metadata.name.as_deref() != Some(LEASE_NAME) {
            continue;
        }
        let spec = lease.spec.unwrap_or_default();
        let now = Timestamp::now();
        let mut seen = seen.lock().unwrap();
        if let Some(renewed) = &spec.renew_time
            && seen.renewals.last() != Some(&renewed.0)
        {
            seen.renewals.push(renewed.0);
        }
        let current = spec.holder_identity.clone().filter(|h| !h.is_empty());
        if current != holder {
            seen.holders.push(Entry {
                at: now,
                precise: true,
                source: "lease".into(),
                text: format!(
                    "holder {} -> {} (transitions {}, acquired {})",
                    holder.as_deref().unwrap_or("none"),
                    current.as_deref().unwrap_or("none (released)"),
                    spec.lease_transitions.unwrap_or(0),
                    spec.acquire_time
                        .map(|t| t.0.to_string())
                        .unwrap_or_else(|| "-".into())
                ),
            });
            holder = current;
        }
    }
}

/// The Lease's renewals during the run, and the longest gap between two (the holder renews
/// every 2 s; over 10 s without one it steps down and exits).
fn renewal_summary(renewals: &[Timestamp], since: Timestamp, until: Timestamp) -> String {
    let during: Vec<Timestamp> = renewals
        .iter()
        .copied()
        .filter(|t| *t >= since && *t <= until)
        .collect();
    // The gap that spans the start counts too: the renewal before the run.
    let before = renewals.iter().copied().rfind(|t| *t < since);
    let mut longest = (0.0_f64, since);
    let mut previous = before;
    for t in during.iter().copied().chain(std::iter::once(until)) {
        if let Some(p) = previous {
            let gap = t.duration_since(p).as_secs_f64();
            if gap > longest.0 {
                longest = (gap, p);
            }
        }
        previous = Some(t);
    }
    let times: Vec<String> = during
        .iter()
        .map(|t| format!("{:+.1}", seconds_between(since, *t)))
        .collect();
    format!(
        "lease renewals during the run ({}): {}; longest gap without one {:.1} s (from {:+.1})",
        during.len(),
        if times.is_empty() {
            "none".to_string()
        } else {
            times.join(" ")
        },
        longest.0,
        seconds_between(since, longest.1)
    )
}

/// The best time an Event carries: its eventTime (microseconds, precise), else its first
/// timestamp (whole seconds).
fn event_time(event: &Event) -> Option<(Timestamp, bool)> {
    event
        .event_time
        .as_ref()
        .map(|t| (t.0, true))
        .or_else(|| event.first_timestamp.as_ref().map(|t| (t.0, false)))
        .or_else(|| {
            event
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| (t.0, false))
        })
}

/// Every Event in `namespace`, one entry each (a repeated one says how often and until when).
async fn namespace_events(client: &Client, namespace: &str) -> Vec<Entry> {
    let list = match super::events::try_list_events(client, namespace).await {
        Ok(list) => list,
        Err(e) => {
            return vec![Entry {
                at: Timestamp::now(),
                precise: true,
                source: "events".into(),
                text: e,
            }];
        }
    };
    list.into_iter()
        .filter_map(|event| {
            let (at, precise) = event_time(&event)?;
            let object = &event.involved_object;
            let source = format!(
                "{} {}",
                object.kind.clone().unwrap_or_default(),
                object.name.clone().unwrap_or_default()
            );
            let count = event
                .series
                .as_ref()
                .and_then(|s| s.count)
                .or(event.count)
                .unwrap_or(1);
            let last = event
                .series
                .as_ref()
                .and_then(|s| s.last_observed_time.as_ref())
                .map(|t| t.0)
                .or_else(|| event.last_timestamp.as_ref().map(|t| t.0));
            let repeated = match last {
                Some(last) if count > 1 => {
                    format!(" (x{count}, last {last})")
                }
                _ => String::new(),
            };
            Some(Entry {
                at,
                precise,
                source: truncate(&source, 22),
                text: format!(
                    "{} {}: {}{repeated}",
                    event.type_.clone().unwrap_or_default(),
                    event.reason.clone().unwrap_or_default(),
                    event.message.clone().unwrap_or_default()
                ),
            })
        })
        .collect()
}

fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        text.chars().take(width).collect()
    }
}

/// The member Pods of cluster `name`: created, each container run started, restarts, Ready.
async fn member_pods(client: &Client, namespace: &str, name: &str) -> Vec<Entry> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = etcd_operator_api::labels::cluster_selector(name);
    let pods = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut entries = Vec::new();
    for pod in pods {
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let source = format!("Pod {pod_name}");
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_else(|| "no node".into());
        if let Some(created) = &pod.metadata.creation_timestamp {
            entries.push(Entry {
                at: created.0,
                precise: false,
                source: source.clone(),
                text: format!("created (on {node})"),
            });
        }
        let status = pod.status.clone().unwrap_or_default();
        for c in status.container_statuses.iter().flatten() {
            let state = c.state.clone().unwrap_or_default();
            if let Some(started) = state.running.as_ref().and_then(|r| r.started_at.as_ref()) {
                entries.push(Entry {
                    at: started.0,
                    precise: false,
                    source: source.clone(),
                    text: format!(
                        "container {} running (restartCount {})",
                        c.name, c.restart_count
                    ),
                });
            }
            if let Some(t) = c.last_state.as_ref().and_then(|s| s.terminated.as_ref())
                && let Some(finished) = &t.finished_at
            {
                entries.push(Entry {
                    at: finished.0,
                    precise: false,
                    source: source.clone(),
                    text: format!(
                        "container {}'s previous run ended: exit code {} ({})",
                        c.name,
                        t.exit_code,
                        t.reason.clone().unwrap_or_default()
                    ),
                });
            }
        }
        for condition in status.conditions.iter().flatten() {
            if condition.type_ == "Ready"
                && let Some(at) = &condition.last_transition_time
            {
                entries.push(Entry {
                    at: at.0,
                    precise: false,
                    source: source.clone(),
                    text: format!("Ready {} (its last transition)", condition.status),
                });
            }
        }
    }
    entries
}

/// The operator's warnings and errors during the run, from every operator Pod's log (the
/// current run, and the previous one of a restarted container).
/// Every JSON line the operator's Pods logged (now and before their last restart) from
/// `since` on, with its Pod's name and its own timestamp, in log order per Pod.
pub async fn operator_log_lines(
    client: &Client,
    since: Timestamp,
) -> Vec<(String, Timestamp, serde_json::Value)> {
    let api: Api<Pod> = Api::namespaced(client.clone(), OPERATOR_NAMESPACE);
    let pods = api
        .list(&ListParams::default().labels(OPERATOR_SELECTOR))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut lines = Vec::new();
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        for previous in [false, true] {
            // Only what the run can have written, not the whole log of a long benchmark.
            let params = LogParams {
                previous,
                since_seconds: Some(seconds_between(since, Timestamp::now()).ceil() as i64 + 2),
                ..Default::default()
            };
            let Ok(log) = api.logs(&name, &params).await else {
                continue;
            };
            for line in log.lines() {
                let Ok(json) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                let Some(at) = json["timestamp"]
                    .as_str()
                    .and_then(|t| t.parse::<Timestamp>().ok())
                else {
                    continue;
                };
                lines.push((name.clone(), at, json));
            }
        }
    }
    lines
}

/// The least severe operator log level a timeline shows: `TIMELINE_OPERATOR_LOG` (`ERROR`,
/// `WARN`, `INFO` or `DEBUG`; `WARN` when unset). `DEBUG` needs the operator deployed with a
/// `RUST_LOG` that writes debug lines (`etcd_operator=debug`).
fn timeline_log_rank() -> u8 {
    level_rank(
        &std::env::var("TIMELINE_OPERATOR_LOG")
            .unwrap_or_else(|_| "WARN".into())
            .to_ascii_uppercase(),
    )
}

fn level_rank(level: &str) -> u8 {
    match level {
        "ERROR" => 4,
        "WARN" => 3,
        "INFO" => 2,
        "DEBUG" => 1,
        _ => 0,
    }
}

async fn operator_logs(client: &Client, since: Timestamp, until: Timestamp) -> Vec<Entry> {
    let mut entries = Vec::new();
    let least = timeline_log_rank();
    for (name, at, json) in operator_log_lines(client, since).await {
        let level = json["level"].as_str().unwrap_or_default();
        if level_rank(level) < least || !within(at, since, until) {
            continue;
        }
        let mut fields = json.clone();
        if let Some(map) = fields.as_object_mut() {
            map.remove("timestamp");
            map.remove("level");
        }
        entries.push(Entry {
            at,
            precise: true,
            source: format!("log {}", short_pod_name(&name)),
            text: truncate(&format!("{level} {fields}"), 300),
        });
    }
    entries
}
