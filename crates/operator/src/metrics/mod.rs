//! The operator's Prometheus metrics: reconciles and their durations, errors by kind, steps
//! taken, writes to the Kubernetes API, leadership, and per cluster what etcd reports
//! (members desired, ready, learners, voters, quorum, leader and its changes, alarms, database
//! size against quota per member, repairs and replacements, reconcile errors by kind).
//!
//! What a pass says about a cluster is computed by pure functions (`figures`:
//! [`cluster_figures`], [`repair_of`], [`leader_changed`]) from the pass's `Observed` and
//! `Plan`; [`Metrics`] (here) only records the figures. `docs/observability.md` lists every
//! series.

mod figures;

pub use figures::{
    ClusterFigures, MemberFigures, Repair, cluster_figures, leader_changed, recovery_outcome,
    repair_of, rollout_done,
};

use k8s_openapi::jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::etcd::AlarmKind;
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
struct ScheduleLabels {
    namespace: String,
    schedule: String,
    cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RecoveryLabels {
    namespace: String,
    cluster: String,
    /// `survivor` or `snapshot`.
    source: String,
    /// `started`, `completed` or `aborted`.
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MemberLabels {
    namespace: String,
    cluster: String,
    member: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlarmLabels {
    namespace: String,
    cluster: String,
    alarm: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterKindLabels {
    namespace: String,
    cluster: String,
    kind: String,
}

/// What the series of one cluster were last set from, to drop those that no longer apply.
#[derive(Default)]
struct ClusterSeries {
    /// The Secrets with a `certificate_expiry` series.
    secrets: Vec<String>,
    /// The members with per-member series.
    members: Vec<String>,
    /// The last leader etcd reported.
    leader: Option<u64>,
    /// The error kinds with a `cluster_reconcile_errors` series.
    error_kinds: Vec<String>,
    /// A rollout seen in progress (members outdated): when its target was latched.
    rollout_since: Option<Timestamp>,
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
    etcd_connections_kept: Gauge,
    etcd_dials: Counter,
    members: Family<ClusterLabels, Gauge>,
    learners: Family<ClusterLabels, Gauge>,
    outdated_members: Family<ClusterLabels, Gauge>,
    rollout_duration: Family<ClusterLabels, Histogram, fn() -> Histogram>,
    ready_members: Family<ClusterLabels, Gauge>,
    has_quorum: Family<ClusterLabels, Gauge>,
    has_leader: Family<ClusterLabels, Gauge>,
    desired_members: Family<ClusterLabels, Gauge>,
    voters: Family<ClusterLabels, Gauge>,
    leader_changes: Family<ClusterLabels, Counter>,
    alarms: Family<AlarmLabels, Gauge>,
    repairs: Family<ClusterLabels, Counter>,
    replacements: Family<ClusterLabels, Counter>,
    cluster_errors: Family<ClusterKindLabels, Counter>,
    member_ready: Family<MemberLabels, Gauge>,
    member_db_size: Family<MemberLabels, Gauge>,
    member_db_size_in_use: Family<MemberLabels, Gauge>,
    member_db_quota: Family<MemberLabels, Gauge>,
    certificate_expiry: Family<CertificateLabels, Gauge>,
    snapshot_last_success: Family<ClusterLabels, Gauge>,
    schedule_last_success: Family<ScheduleLabels, Gauge>,
    schedule_interval: Family<ScheduleLabels, Gauge>,
    /// Per schedule (namespace, name), the labels of its two series.
    schedules: std::sync::Mutex<std::collections::HashMap<(String, String), ScheduleLabels>>,
    quorum_recoveries: Family<RecoveryLabels, Counter>,
    /// The clusters with a `snapshot_last_success` series.
    snapshot_clusters: std::sync::Mutex<std::collections::BTreeSet<(String, String)>>,
    /// Per cluster, what its series were last set from.
    series: std::sync::Mutex<std::collections::HashMap<(String, String), ClusterSeries>>,
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
            "1 while this replica reconciles: it holds the leader Lease, or leader election is off",
            leader.clone(),
        );
        let etcd_connections_kept = Gauge::default();
        registry.register(
            "etcd_connections_kept",
            "Member endpoints whose etcd connection is kept between passes (at most --etcd-connections-kept; the others are dialled for each pass and closed after it)",
            etcd_connections_kept.clone(),
        );
        let etcd_dials = Counter::default();
        registry.register(
            "etcd_dials",
            "Connections dialled to etcd members (each a TCP, and TLS, handshake); growing at rest means the kept connections do not cover every member",
            etcd_dials.clone(),
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
        let outdated_members = Family::<ClusterLabels, Gauge>::default();
        registry.register(
            "cluster_outdated_members",
            "Running members not yet on the target version or configuration (a rollout in progress or stopped)",
            outdated_members.clone(),
        );
        let rollout_duration: Family<ClusterLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(5.0, 2.0, 10)));
        registry.register_with_unit(
            "cluster_rollout_duration",
            "Time from a target's adoption (status.observed) to every member running it Ready, for targets that rolled members (version, configuration, storage), observed when the rollout completes",
            prometheus_client::registry::Unit::Seconds,
            rollout_duration.clone(),
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
        let desired_members = Family::<ClusterLabels, Gauge>::default();
        registry.register(
            "cluster_desired_members",
            "spec.replicas of the cluster (0 while it is dormant)",
            desired_members.clone(),
        );
        let voters = Family::<ClusterLabels, Gauge>::default();
        registry.register(
            "cluster_voters",
            "Voting members in etcd's member list",
            voters.clone(),
        );
        let leader_changes = Family::<ClusterLabels, Counter>::default();
        registry.register(
            "cluster_leader_changes",
            "Times the operator saw etcd report a different leader than the last one it knew",
            leader_changes.clone(),
        );
        let alarms = Family::<AlarmLabels, Gauge>::default();
        registry.register(
            "cluster_alarms",
            "Active etcd alarms by type (NOSPACE, CORRUPT); last known value while etcd cannot list them",
            alarms.clone(),
        );
        let repairs = Family::<ClusterLabels, Counter>::default();
        registry.register(
            "cluster_member_repairs",
            "Member repairs started: a member's Pod created again on its data (phase Recreating)",
            repairs.clone(),
        );
        let replacements = Family::<ClusterLabels, Counter>::default();
        registry.register(
            "cluster_member_replacements",
            "Member replacements started: removed from etcd, data deleted, added again (phase Replacing)",
            replacements.clone(),
        );
        let cluster_errors = Family::<ClusterKindLabels, Counter>::default();
        registry.register(
            "cluster_reconcile_errors",
            "Failed reconcile passes of the cluster, by error kind",
            cluster_errors.clone(),
        );
        let member_ready = Family::<MemberLabels, Gauge>::default();
        registry.register(
            "member_ready",
            "1 when the member is Ready: phase Ready and a healthy voter",
            member_ready.clone(),
        );
        let member_db_size = Family::<MemberLabels, Gauge>::default();
        registry.register_with_unit(
            "member_db_size",
            "Physical size of the member's backend database (etcd Status dbSize)",
            prometheus_client::registry::Unit::Bytes,
            member_db_size.clone(),
        );
        let member_db_size_in_use = Family::<MemberLabels, Gauge>::default();
        registry.register_with_unit(
            "member_db_size_in_use",
            "Bytes of the member's backend in use (etcd Status dbSizeInUse); the rest is reclaimed by defragmentation",
            prometheus_client::registry::Unit::Bytes,
            member_db_size_in_use.clone(),
        );
        let member_db_quota = Family::<MemberLabels, Gauge>::default();
        registry.register_with_unit(
            "member_db_quota",
            "The member's --quota-backend-bytes: at this database size etcd raises NOSPACE",
            prometheus_client::registry::Unit::Bytes,
            member_db_quota.clone(),
        );
        let snapshot_last_success = Family::<ClusterLabels, Gauge>::default();
        registry.register_with_unit(
            "snapshot_last_success_timestamp",
            "When the newest Complete and verified EtcdSnapshot of the cluster completed (Unix time)",
            prometheus_client::registry::Unit::Seconds,
            snapshot_last_success.clone(),
        );
        let schedule_last_success = Family::<ScheduleLabels, Gauge>::default();
        registry.register_with_unit(
            "snapshot_schedule_last_success_timestamp",
            "When the newest verified EtcdSnapshot of the schedule completed, or when the schedule was created if none has (Unix time); no series while it is suspended or invalid",
            prometheus_client::registry::Unit::Seconds,
            schedule_last_success.clone(),
        );
        let schedule_interval = Family::<ScheduleLabels, Gauge>::default();
        registry.register_with_unit(
            "snapshot_schedule_interval",
            "The time between two ticks of the EtcdSnapshotSchedule",
            prometheus_client::registry::Unit::Seconds,
            schedule_interval.clone(),
        );
        let quorum_recoveries = Family::<RecoveryLabels, Counter>::default();
        registry.register(
            "quorum_recoveries",
            "Lost-quorum recoveries by source (survivor: --force-new-cluster from the member with the highest raft index; snapshot: restored from an EtcdSnapshot when no member's data survived) and outcome (started, completed, aborted)",
            quorum_recoveries.clone(),
        );
        Metrics {
            registry,
            quorum_recoveries,
            certificate_expiry,
            snapshot_last_success,
            schedule_last_success,
            schedule_interval,
            schedules: Default::default(),
            snapshot_clusters: Default::default(),
            series: Default::default(),
            desired_members,
            voters,
            leader_changes,
            alarms,
            repairs,
            replacements,
            cluster_errors,
            member_ready,
            member_db_size,
            member_db_size_in_use,
            member_db_quota,
            reconciles,
            reconcile_duration,
            errors,
            steps,
            kubernetes_writes,
            leader,
            etcd_connections_kept,
            etcd_dials,
            members,
            learners,
            outdated_members,
            rollout_duration,
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

    /// The kept etcd connections and the dials so far (`EtcdConnections::len` and `dials`).
    pub fn etcd_connections(&self, kept: usize, dials: u64) {
        self.etcd_connections_kept
            .set(i64::try_from(kept).unwrap_or(i64::MAX));
        // Passes run side by side: the largest count read wins, so the counter never goes back.
        self.etcd_dials
            .inner()
            .fetch_max(dials, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Records what one pass says about a cluster (the gauges, and a leader change); the
    /// certificate expiry comes from the observation.
    pub fn observed_cluster(&self, figures: &ClusterFigures, observed: &Observed) {
        let labels = ClusterLabels {
            namespace: figures.namespace.clone(),
            cluster: figures.cluster.clone(),
        };
        self.desired_members
            .get_or_create(&labels)
            .set(figures.desired);
        self.members.get_or_create(&labels).set(figures.members);
        self.learners.get_or_create(&labels).set(figures.learners);
        self.outdated_members
            .get_or_create(&labels)
            .set(figures.outdated);
        self.voters.get_or_create(&labels).set(figures.voters);
        self.ready_members.get_or_create(&labels).set(figures.ready);
        self.has_quorum
            .get_or_create(&labels)
            .set(i64::from(figures.quorum));
        self.has_leader
            .get_or_create(&labels)
            .set(i64::from(figures.leader.is_some()));
        // Counters exist from the first pass on, so a new cluster shows 0 (and `increase()`
        // sees its first change).
        let _ = self.leader_changes.get_or_create(&labels);
        if let Some(alarms) = &figures.alarms {
            for (kind, count) in alarms {
                self.alarms
                    .get_or_create(&alarm_labels(&labels, *kind))
                    .set(*count);
            }
        }
        for source in ["survivor", "snapshot"] {
            // At 0 from the first pass, so the first recovery is an increase.
            let _ = self.quorum_recoveries.get_or_create(&RecoveryLabels {
                namespace: labels.namespace.clone(),
                cluster: labels.cluster.clone(),
                source: source.to_string(),
                outcome: "started".to_string(),
            });
        }
        let _ = self.repairs.get_or_create(&labels);
        let _ = self.replacements.get_or_create(&labels);

        let names: Vec<String> = figures
            .member_figures
            .iter()
            .map(|m| m.member.clone())
            .collect();
        let (gone, changed, rolled) = {
            let mut series = self.series.lock().expect("cluster series");
            let record = series
                .entry((labels.namespace.clone(), labels.cluster.clone()))
                .or_default();
            let rolled = rollout_done(&mut record.rollout_since, figures);
            let gone: Vec<String> = record
                .members
                .iter()
                .filter(|m| !names.contains(m))
                .cloned()
                .collect();
            record.members = names;
            let changed = leader_changed(record.leader, figures.leader);
            if figures.leader.is_some() {
                record.leader = figures.leader;
            }
            (gone, changed, rolled)
        };
        let histogram = self.rollout_duration.get_or_create(&labels);
        if let Some(seconds) = rolled {
            histogram.observe(seconds);
        }
        if changed {
            self.leader_changes.get_or_create(&labels).inc();
        }
        for member in gone {
            self.forget_member(&member_labels(&labels, &member));
        }
        for m in &figures.member_figures {
            let series = member_labels(&labels, &m.member);
            self.member_ready
                .get_or_create(&series)
                .set(i64::from(m.ready));
            self.member_db_quota.get_or_create(&series).set(m.quota);
            // A member that did not answer keeps no size: the last one would be stale.
            match (m.db_size, m.db_size_in_use) {
                (Some(size), Some(in_use)) => {
                    self.member_db_size.get_or_create(&series).set(size);
                    self.member_db_size_in_use
                        .get_or_create(&series)
                        .set(in_use);
                }
                _ => {
                    self.member_db_size.remove(&series);
                    self.member_db_size_in_use.remove(&series);
                }
            }
        }

        let now = k8s_openapi::jiff::Timestamp::now();
        let certificates = observed
            .security
            .validity
            .iter()
            .map(|c| (c.secret.clone(), c.seconds_left(now)))
            .collect();
        self.set_certificate_expiry(&labels, certificates);
    }

    /// Counts the repair a performed step started.
    pub fn repair_started(&self, namespace: &str, cluster: &str, repair: Repair) {
        let labels = ClusterLabels {
            namespace: namespace.to_string(),
            cluster: cluster.to_string(),
        };
        match repair {
            Repair::Recreate => self.repairs.get_or_create(&labels).inc(),
            Repair::Replace => self.replacements.get_or_create(&labels).inc(),
        };
    }

    /// Counts what a pass did to a lost-quorum recovery ([`recovery_outcome`]).
    pub fn recovery_step(&self, namespace: &str, cluster: &str, source: &str, outcome: &str) {
        self.quorum_recoveries
            .get_or_create(&RecoveryLabels {
                namespace: namespace.to_string(),
                cluster: cluster.to_string(),
                source: source.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// Counts a failed pass over a cluster by the error's kind.
    pub fn cluster_failed(&self, namespace: &str, cluster: &str, kind: &str) {
        {
            let mut series = self.series.lock().expect("cluster series");
            let record = series
                .entry((namespace.to_string(), cluster.to_string()))
                .or_default();
            if !record.error_kinds.iter().any(|k| k == kind) {
                record.error_kinds.push(kind.to_string());
            }
        }
        self.cluster_errors
            .get_or_create(&ClusterKindLabels {
                namespace: namespace.to_string(),
                cluster: cluster.to_string(),
                kind: kind.to_string(),
            })
            .inc();
    }

    fn forget_member(&self, series: &MemberLabels) {
        self.member_ready.remove(series);
        self.member_db_size.remove(series);
        self.member_db_size_in_use.remove(series);
        self.member_db_quota.remove(series);
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
        let previous = {
            let mut all = self.series.lock().expect("cluster series");
            let record = all
                .entry((cluster.namespace.clone(), cluster.cluster.clone()))
                .or_default();
            std::mem::replace(&mut record.secrets, secrets.clone())
        };
        for gone in previous.into_iter().filter(|s| !secrets.contains(s)) {
            self.certificate_expiry.remove(&series(gone));
        }
        for (secret, seconds) in certificates {
            self.certificate_expiry
                .get_or_create(&series(secret))
                .set(seconds);
        }
    }

    /// The `snapshot_last_success_timestamp_seconds` series become `latest` (per namespace and
    /// cluster, the Unix time the newest Complete, verified snapshot completed); clusters no
    /// longer in it lose their series.
    pub fn snapshot_successes(&self, latest: &std::collections::BTreeMap<(String, String), i64>) {
        let mut known = self.snapshot_clusters.lock().expect("snapshot clusters");
        for (namespace, cluster) in known.iter() {
            if !latest.contains_key(&(namespace.clone(), cluster.clone())) {
                self.snapshot_last_success.remove(&ClusterLabels {
                    namespace: namespace.clone(),
                    cluster: cluster.clone(),
                });
            }
        }
        for ((namespace, cluster), seconds) in latest {
            self.snapshot_last_success
                .get_or_create(&ClusterLabels {
                    namespace: namespace.clone(),
                    cluster: cluster.clone(),
                })
                .set(*seconds);
        }
        *known = latest.keys().cloned().collect();
    }

    /// The series of the EtcdSnapshotSchedule `namespace/schedule` of `cluster`: the time of its
    /// last success (or creation) and its interval, in seconds; `None` removes them (a schedule
    /// deleted, suspended or invalid).
    pub fn snapshot_schedule(
        &self,
        namespace: &str,
        schedule: &str,
        cluster: &str,
        freshness: Option<(i64, i64)>,
    ) {
        let key = (namespace.to_string(), schedule.to_string());
        let mut known = self.schedules.lock().expect("schedule series");
        let labels = ScheduleLabels {
            namespace: namespace.to_string(),
            schedule: schedule.to_string(),
            cluster: cluster.to_string(),
        };
        if let Some(old) = known.get(&key)
            && (freshness.is_none() || *old != labels)
        {
            self.schedule_last_success.remove(old);
            self.schedule_interval.remove(old);
            known.remove(&key);
        }
        if let Some((last_success, interval)) = freshness {
            self.schedule_last_success
                .get_or_create(&labels)
                .set(last_success);
            self.schedule_interval.get_or_create(&labels).set(interval);
            known.insert(key, labels);
        }
    }

    /// Drops the series of every cluster that `present` does not name (the clusters in the
    /// operator's cache). The reconcile forgets a cluster when it removes the finalizer, but a
    /// pass that started from a stale copy (a cache that had not yet seen the finalizer go) can
    /// record its series again, or count its failure, after that; nothing reconciles a cluster
    /// that is gone, so this sweep is what takes such series away.
    pub fn forget_clusters_except(&self, present: &std::collections::HashSet<(String, String)>) {
        let gone: Vec<(String, String)> = self
            .series
            .lock()
            .expect("cluster series")
            .keys()
            .filter(|key| !present.contains(*key))
            .cloned()
            .collect();
        for (namespace, cluster) in gone {
            self.forget_cluster(&namespace, &cluster);
        }
    }

    /// Drops the series of a cluster that is gone.
    pub fn forget_cluster(&self, namespace: &str, cluster: &str) {
        let labels = ClusterLabels {
            namespace: namespace.to_string(),
            cluster: cluster.to_string(),
        };
        self.set_certificate_expiry(&labels, Vec::new());
        let record = self
            .series
            .lock()
            .expect("cluster series")
            .remove(&(namespace.to_string(), cluster.to_string()))
            .unwrap_or_default();
        for family in [
            &self.members,
            &self.learners,
            &self.outdated_members,
            &self.ready_members,
            &self.has_quorum,
            &self.has_leader,
            &self.desired_members,
            &self.voters,
        ] {
            family.remove(&labels);
        }
        for family in [&self.leader_changes, &self.repairs, &self.replacements] {
            family.remove(&labels);
        }
        self.rollout_duration.remove(&labels);
        for source in ["survivor", "snapshot"] {
            for outcome in ["started", "completed", "aborted"] {
                self.quorum_recoveries.remove(&RecoveryLabels {
                    namespace: namespace.to_string(),
                    cluster: cluster.to_string(),
                    source: source.to_string(),
                    outcome: outcome.to_string(),
                });
            }
        }
        for kind in AlarmKind::ALL {
            self.alarms.remove(&alarm_labels(&labels, kind));
        }
        for member in &record.members {
            self.forget_member(&member_labels(&labels, member));
        }
        for kind in record.error_kinds {
            self.cluster_errors.remove(&ClusterKindLabels {
                namespace: namespace.to_string(),
                cluster: cluster.to_string(),
                kind,
            });
        }
    }
}

fn alarm_labels(cluster: &ClusterLabels, kind: AlarmKind) -> AlarmLabels {
    AlarmLabels {
        namespace: cluster.namespace.clone(),
        cluster: cluster.cluster.clone(),
        alarm: kind.to_string(),
    }
}

fn member_labels(cluster: &ClusterLabels, member: &str) -> MemberLabels {
    MemberLabels {
        namespace: cluster.namespace.clone(),
        cluster: cluster.cluster.clone(),
        member: member.to_string(),
    }
}

#[cfg(test)]
mod tests;
