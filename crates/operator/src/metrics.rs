//! The operator's Prometheus metrics: reconciles and their durations, errors by kind, steps
//! taken, writes to the Kubernetes API, leadership, and per cluster what etcd reports
//! (members, learners, quorum, leader).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::plan::Observed;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    step: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabels {
    namespace: String,
    cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CertificateLabels {
    namespace: String,
    cluster: String,
    secret: String,
}

/// Every metric, registered once; shared by the reconciler and the HTTP server.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabels, Counter>,
    reconcile_duration: Histogram,
    errors: Family<KindLabels, Counter>,
    steps: Family<StepLabels, Counter>,
    kubernetes_writes: Family<ResourceLabels, Counter>,
    leader: Gauge,
    members: Family<ClusterLabels, Gauge>,
    learners: Family<ClusterLabels, Gauge>,
    ready_members: Family<ClusterLabels, Gauge>,
    has_quorum: Family<ClusterLabels, Gauge>,
    has_leader: Family<ClusterLabels, Gauge>,
    certificate_expiry: Family<CertificateLabels, Gauge>,
    /// The Secrets with a `certificate_expiry` series, per cluster, to drop them with it.
    certificate_secrets: std::sync::Mutex<std::collections::HashMap<(String, String), Vec<String>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("etcd_operator");
        let reconciles = Family::<ResultLabels, Counter>::default();
        registry.register(
            "reconciles",
            "Reconcile passes, by result (ok or error)",
            reconciles.clone(),
        );
        let reconcile_duration = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register_with_unit(
            "reconcile_duration",
            "Time one reconcile pass takes: observe, plan, act",
            prometheus_client::registry::Unit::Seconds,
            reconcile_duration.clone(),
        );
        let errors = Family::<KindLabels, Counter>::default();
        registry.register(
            "reconcile_errors",
            "Failed reconcile passes, by error kind (conflict, forbidden, api, etcd_*, ...)",
            errors.clone(),
        );
        let steps = Family::<StepLabels, Counter>::default();
        registry.register(
            "steps",
            "Steps performed (one per pass that changes something), by step",
            steps.clone(),
        );
        let kubernetes_writes = Family::<ResourceLabels, Counter>::default();
        registry.register(
            "kubernetes_writes",
            "Writes to the Kubernetes API (creates, updates, patches, deletes, status), by resource",
            kubernetes_writes.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease and reconciles",
            leader.clone(),
        );
        let members = Family::<ClusterLabels, Gauge>::default();
        registry.register(
            "cluster_members",
            "EtcdMembers of the cluster",
            members.clone(),
        );
        let learners = Family::<ClusterLabels, Gauge>::default();
        registry.register(
            "cluster_learners",
            "Learners in etcd's member list",
            learners.clone(),
        );
        let ready_members = Family::<ClusterLabels, Gauge>::default();
        registry.register(
            "cluster_ready_members",
            "Members that are Ready healthy voters",
            ready_members.clone(),
        );
        let has_quorum = Family::<ClusterLabels, Gauge>::default();
        registry.register(
            "cluster_has_quorum",
            "1 when a voter served a linearizable read in the last pass",
            has_quorum.clone(),
        );
        let has_leader = Family::<ClusterLabels, Gauge>::default();
        registry.register(
            "cluster_has_leader",
            "1 when etcd reported a leader in the last pass",
            has_leader.clone(),
        );
        let certificate_expiry = Family::<CertificateLabels, Gauge>::default();
        registry.register_with_unit(
            "certificate_expiry",
            "Seconds until the certificate in a cluster's TLS Secret expires (negative once it has)",
            prometheus_client::registry::Unit::Seconds,
            certificate_expiry.clone(),
        );
        Metrics {
            registry,
            certificate_expiry,
            certificate_secrets: Default::default(),
            reconciles,
            reconcile_duration,
            errors,
            steps,
            kubernetes_writes,
            leader,
            members,
            learners,
            ready_members,
            has_quorum,
            has_leader,
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    pub fn reconciled(&self, seconds: f64, error_kind: Option<&str>) {
        self.reconcile_duration.observe(seconds);
        let result = if error_kind.is_some() { "error" } else { "ok" };
        self.reconciles
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
        if let Some(kind) = error_kind {
            self.errors
                .get_or_create(&KindLabels {
                    kind: kind.to_string(),
                })
                .inc();
        }
    }

    pub fn step_performed(&self, step: &str) {
        self.steps
            .get_or_create(&StepLabels {
                step: step.to_string(),
            })
            .inc();
    }

    pub fn count_kubernetes_write(&self, resource: &str) {
        self.kubernetes_writes
            .get_or_create(&ResourceLabels {
                resource: resource.to_string(),
            })
            .inc();
    }

    /// Total writes so far (for the steady-state benchmark and tests).
    pub fn kubernetes_writes_total(&self) -> u64 {
        let text = self.encode();
        text.lines()
            .filter(|l| l.starts_with("etcd_operator_kubernetes_writes_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Records what one observation says about a cluster.
    pub fn observed_cluster(&self, observed: &Observed, ready_members: i64) {
        let labels = cluster_labels(observed);
        let learners = observed
            .etcd
            .member_list()
            .iter()
            .filter(|m| m.is_learner)
            .count();
        self.members
            .get_or_create(&labels)
            .set(observed.members.len() as i64);
        self.learners.get_or_create(&labels).set(learners as i64);
        self.ready_members.get_or_create(&labels).set(ready_members);
        self.has_quorum
            .get_or_create(&labels)
            .set(i64::from(observed.etcd.is_healthy()));
        self.has_leader
            .get_or_create(&labels)
            .set(i64::from(observed.etcd.leader().is_some()));
        let now = k8s_openapi::jiff::Timestamp::now();
        let certificates = observed
            .security
            .validity
            .iter()
            .map(|c| (c.secret.clone(), c.seconds_left(now)))
            .collect();
        self.set_certificate_expiry(&labels, certificates);
    }

    /// The `certificate_expiry` series of a cluster become `certificates` (Secret, seconds
    /// left); the series of Secrets no longer among them are dropped.
    fn set_certificate_expiry(&self, cluster: &ClusterLabels, certificates: Vec<(String, i64)>) {
        let series = |secret: String| CertificateLabels {
            namespace: cluster.namespace.clone(),
            cluster: cluster.cluster.clone(),
            secret,
        };
        let secrets: Vec<String> = certificates.iter().map(|(s, _)| s.clone()).collect();
        let previous = self
            .certificate_secrets
            .lock()
            .expect("certificate secrets")
            .insert(
                (cluster.namespace.clone(), cluster.cluster.clone()),
                secrets.clone(),
            )
            .unwrap_or_default();
        for gone in previous.into_iter().filter(|s| !secrets.contains(s)) {
            self.certificate_expiry.remove(&series(gone));
        }
        for (secret, seconds) in certificates {
            self.certificate_expiry
                .get_or_create(&series(secret))
                .set(seconds);
        }
    }

    /// Drops the series of a cluster that is gone.
    pub fn forget_cluster(&self, namespace: &str, cluster: &str) {
        let labels = ClusterLabels {
            namespace: namespace.to_string(),
            cluster: cluster.to_string(),
        };
        self.members.remove(&labels);
        self.learners.remove(&labels);
        self.ready_members.remove(&labels);
        self.has_quorum.remove(&labels);
        self.has_leader.remove(&labels);
        self.set_certificate_expiry(&labels, Vec::new());
        self.certificate_secrets
            .lock()
            .expect("certificate secrets")
            .remove(&(namespace.to_string(), cluster.to_string()));
    }
}

fn cluster_labels(observed: &Observed) -> ClusterLabels {
    ClusterLabels {
        namespace: observed
            .cluster
            .metadata
            .namespace
            .clone()
            .unwrap_or_default(),
        cluster: observed.cluster.metadata.name.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_names_every_metric() {
        let metrics = Metrics::new();
        metrics.reconciled(0.01, None);
        metrics.reconciled(0.02, Some("conflict"));
        metrics.step_performed("CreatePod");
        metrics.count_kubernetes_write("Pod");
        metrics.count_kubernetes_write("EtcdCluster/status");
        metrics.set_leader(true);
        let text = metrics.encode();
        for name in [
            "etcd_operator_reconciles_total{result=\"ok\"} 1",
            "etcd_operator_reconciles_total{result=\"error\"} 1",
            "etcd_operator_reconcile_errors_total{kind=\"conflict\"} 1",
            "etcd_operator_reconcile_duration_seconds_count 2",
            "etcd_operator_steps_total{step=\"CreatePod\"} 1",
            "etcd_operator_leader 1",
        ] {
            assert!(text.contains(name), "{name} missing from:\n{text}");
        }
        assert_eq!(metrics.kubernetes_writes_total(), 2);
    }
}
