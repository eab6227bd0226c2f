//! A light look at etcd between passes, for what etcd changes without any Kubernetes event: its
//! NOSPACE alarm, and a backend nearing its quota. A pass looks at a cluster at rest only every
//! [`IDLE_POLL`](crate::plan::IDLE_POLL), and a burst of writes into a small quota fills it in
//! less than that; a full pass more often would cost every cluster a member list and an alarm
//! list (which goes through raft, a log entry each time).
//!
//! So each pass leaves its cluster here with where to ask and how full its fullest backend is,
//! and a probe asks one member for its Status (answered locally, no raft) as often as
//! [`probe_period`] says: the time a burst needs to bring the backend to the near-quota mark.
//! Status lists the alarms the member knows of and its sizes; when they show the alarm or the
//! mark that the last pass did not see, the cluster is reconciled at once, and from there the
//! plan's own near-quota poll takes over. The probe decides nothing else: it only wakes the
//! reconciler. Memory only; a cluster's entry is replaced by each pass and dropped with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_operator_api::EtcdCluster;
use futures::channel::mpsc::UnboundedSender;
use kube::runtime::reflector::ObjectRef;
use tokio::time::Instant;
use tracing::debug;

use crate::etcd::{EndpointStatus, EtcdAccess, EtcdConnections, Timeouts};
use crate::plan::{BackendFill, probe_period};

/// How often the probe loop wakes to see which clusters are due.
const TICK: Duration = Duration::from_millis(50);

/// What a pass leaves for the probe.
#[derive(Clone, Debug)]
pub struct ProbeTarget {
    /// The client URL to ask (as dialled: [`crate::observe::EtcdUrlMap`] applied).
    pub endpoint: String,
    pub access: EtcdAccess,
    pub fullest: BackendFill,
    /// The pass saw the near-quota mark or the alarm already (its own poll is short).
    pub near: bool,
}

struct Entry {
    target: ProbeTarget,
    due: Instant,
    /// A probe is running for this entry.
    busy: bool,
}

/// The clusters to probe, the channel that wakes their reconciler, and the passes' kept
/// connections, which the probe asks over (a connection of its own per cluster would be one
/// more per cluster, about 60 KiB each).
pub struct AlarmProbe {
    entries: Mutex<HashMap<(String, String), Entry>>,
    wake: UnboundedSender<ObjectRef<EtcdCluster>>,
    connections: Arc<EtcdConnections>,
}

/// Whether a Status answer shows what the last pass did not see: the NOSPACE alarm, or the
/// backend at the near-quota mark (`quota` being what the fullest member runs with).
pub fn status_needs_a_pass(status: &EndpointStatus, quota: i64, pass_saw_near: bool) -> bool {
    if pass_saw_near {
        return false;
    }
    let nospace = status.errors.iter().any(|e| e.contains("NOSPACE"));
    nospace || status_fill(status, quota).is_near()
}

/// How full the answering member's backend is, against `quota`.
fn status_fill(status: &EndpointStatus, quota: i64) -> BackendFill {
    BackendFill {
        used: status.db_size.max(status.db_size_in_use),
        quota,
    }
}

impl AlarmProbe {
    pub fn new(
        wake: UnboundedSender<ObjectRef<EtcdCluster>>,
        connections: Arc<EtcdConnections>,
    ) -> AlarmProbe {
        AlarmProbe {
            entries: Mutex::new(HashMap::new()),
            wake,
            connections,
        }
    }

    /// What this pass saw of the cluster: probed from now on as often as its headroom asks, or
    /// not at all when the passes suffice (`target` is `None`: no member answered, or the
    /// cluster is near its quota already and polled by the plan).
    pub fn update(&self, namespace: &str, name: &str, target: Option<ProbeTarget>) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let key = (namespace.to_string(), name.to_string());
        let Some(target) = target.filter(|t| !t.near) else {
            entries.remove(&key);
            return;
        };
        let Some(period) = probe_period(target.fullest) else {
            entries.remove(&key);
            return;
        };
        let due = Instant::now() + period;
        match entries.get_mut(&key) {
            Some(entry) => {
                entry.target = target;
                entry.due = due;
            }
            None => {
                entries.insert(
                    key,
                    Entry {
                        target,
                        due,
                        busy: false,
                    },
                );
            }
        }
    }

    /// Forgets a cluster that is gone.
    pub fn forget(&self, namespace: &str, name: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.remove(&(namespace.to_string(), name.to_string()));
    }

    /// Probes the due clusters, forever; each probe runs on its own task.
    pub async fn run(self: std::sync::Arc<Self>) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = Instant::now();
            let due: Vec<((String, String), ProbeTarget)> = {
                let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
                entries
                    .iter_mut()
                    .filter(|(_, e)| !e.busy && e.due <= now)
                    .map(|(key, e)| {
                        e.busy = true;
                        (key.clone(), e.target.clone())
                    })
                    .collect()
            };
            for (key, target) in due {
                let probe = self.clone();
                tokio::spawn(async move { probe.probe(key, target).await });
            }
        }
    }

    async fn probe(&self, key: (String, String), target: ProbeTarget) {
        // Status needs no credentials: the anonymous client of the member's kept connection.
        let anonymous = target.access.anonymous();
        let answer = match self
            .connections
            .endpoint(&target.endpoint, Timeouts::OBSERVE, &anonymous)
            .await
        {
            Ok(client) => client.status().await,
            Err(e) => Err(e),
        };
        if let Err(e) = &answer {
            self.connections.forget_after(&target.endpoint, e);
        }
        let wake = match &answer {
            Ok(status) => status_needs_a_pass(status, target.fullest.quota, target.near),
            Err(error) => {
                debug!(namespace = %key.0, cluster = %key.1, %error, "alarm probe: no answer");
                false
            }
        };
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = entries.get_mut(&key) else {
            return;
        };
        entry.busy = false;
        if entry.target.endpoint != target.endpoint || entry.target.access != target.access {
            // A pass changed the target meanwhile: this answer is not about it.
            return;
        }
        let fullest = match &answer {
            Ok(status) => status_fill(status, entry.target.fullest.quota),
            Err(_) => entry.target.fullest,
        };
        // Past the mark (the pass it wakes takes over, or this looks again soon), or with more
        // headroom than a burst can fill before the next pass.
        let period = probe_period(fullest).unwrap_or(if wake {
            crate::plan::NEAR_QUOTA_POLL
        } else {
            crate::plan::IDLE_POLL
        });
        entry.due = Instant::now() + period;
        if wake {
            debug!(namespace = %key.0, cluster = %key.1, "alarm probe: NOSPACE or near the quota; reconciling now");
            let _ = self
                .wake
                .unbounded_send(ObjectRef::new(&key.1).within(&key.0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(db_size: i64, in_use: i64, errors: &[&str]) -> EndpointStatus {
        EndpointStatus {
            db_size,
            db_size_in_use: in_use,
            errors: errors.iter().map(|e| e.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_status_wakes_the_reconciler_for_what_the_last_pass_did_not_see() {
        const QUOTA: i64 = 100 << 20;
        // etcd's Status lists each alarm as `memberID:<id> alarm:NOSPACE`.
        let nospace = status(10 << 20, 10 << 20, &["memberID:1234 alarm:NOSPACE "]);
        assert!(status_needs_a_pass(&nospace, QUOTA, false));
        assert!(status_needs_a_pass(
            &status(80 << 20, 1 << 20, &[]),
            QUOTA,
            false
        ));
        assert!(status_needs_a_pass(
            &status(1 << 20, 80 << 20, &[]),
            QUOTA,
            false
        ));
        // Nothing new: under the mark, no alarm (a lost leader is the passes' business).
        assert!(!status_needs_a_pass(
            &status(79 << 20, 79 << 20, &[]),
            QUOTA,
            false
        ));
        assert!(!status_needs_a_pass(
            &status(1 << 20, 1 << 20, &["etcdserver: no leader"]),
            QUOTA,
            false
        ));
        // The last pass saw it already: its own near-quota poll runs.
        assert!(!status_needs_a_pass(&nospace, QUOTA, true));
    }

    fn target(used: i64, quota: i64, near: bool) -> ProbeTarget {
        ProbeTarget {
            endpoint: "http://m-0.c.ns.svc:2379".into(),
            access: EtcdAccess::plaintext(),
            fullest: BackendFill { used, quota },
            near,
        }
    }

    #[tokio::test]
    async fn only_clusters_a_burst_can_fill_before_the_next_pass_are_probed() {
        let (wake, _woken) = futures::channel::mpsc::unbounded();
        let probe = AlarmProbe::new(wake, Default::default());
        probe.update("ns", "small", Some(target(1 << 20, 64 << 20, false)));
        probe.update("ns", "large", Some(target(1 << 20, 8 << 30, false)));
        probe.update("ns", "near", Some(target(60 << 20, 64 << 20, true)));
        probe.update("ns", "down", None);
        let probed = |name: &str| {
            probe
                .entries
                .lock()
                .unwrap()
                .contains_key(&("ns".to_string(), name.to_string()))
        };
        assert!(probed("small"));
        assert!(!probed("large"));
        assert!(!probed("near"));
        assert!(!probed("down"));
        // A pass that finds the cluster near its quota stops its probe; so does its deletion.
        probe.update("ns", "small", Some(target(60 << 20, 64 << 20, true)));
        assert!(!probed("small"));
        probe.update("ns", "small", Some(target(1 << 20, 64 << 20, false)));
        probe.forget("ns", "small");
        assert!(!probed("small"));
    }
}
