//! The I/O of the EtcdDefrag and EtcdDefragPolicy controllers: read the objects fresh, observe
//! the cluster with the operator's [`Observer`] (so TLS and credentials are the ones the
//! cluster's own reconciler uses), perform what [`super::decide`] and [`super::policy`] decide,
//! one member per pass, and write the status before looking again.

use std::sync::Arc;
use std::time::Duration;

use etcd_operator_api::defrag::{DefragOutcome, DefragPhase, EtcdDefragStatus, MemberRole};
use etcd_operator_api::{EtcdCluster, EtcdDefrag, EtcdDefragPolicy, EtcdDefragSpec};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::decide::{self, ClusterFacts, Expiry, MemberFacts, MemberStatusFacts, Verdict};
use super::policy::{self, POLICY_LABEL, PolicyFacts, RunFacts};
use crate::act::post_params;
use crate::build::member_client_url;
use crate::etcd::{EtcdAccess, EtcdClient, Timeouts, parse_member_id};
use crate::observe::{ObserveError, Observer, Scope};

/// How often a queued or waiting run looks again.
const WAIT_REQUEUE: Duration = Duration::from_secs(3);

/// What the defrag controllers share.
pub struct DefragContext {
    pub client: Client,
    pub observer: Observer,
}

/// Why a pass failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum DefragError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Observe(#[from] ObserveError),
}

/// Runs both controllers until `stop` is cancelled.
pub async fn run_defrag_controllers(
    client: Client,
    scope: Scope,
    observer: Observer,
    stop: CancellationToken,
) {
    let ctx = Arc::new(DefragContext {
        client: client.clone(),
        observer,
    });
    let defrags = Controller::new(scope.api::<EtcdDefrag>(&client), watcher::Config::default())
        .graceful_shutdown_on(stop.clone().cancelled_owned())
        .run(reconcile_defrag, retry, ctx.clone())
        .for_each(|result| async move {
            if let Err(e) = result {
                debug!(error = %e, "defrag controller event");
            }
        });
    let policies = Controller::new(
        scope.api::<EtcdDefragPolicy>(&client),
        watcher::Config::default(),
    )
    .owns(scope.api::<EtcdDefrag>(&client), watcher::Config::default())
    .graceful_shutdown_on(stop.cancelled_owned())
    .run(reconcile_policy, retry, ctx)
    .for_each(|result| async move {
        if let Err(e) = result {
            debug!(error = %e, "defrag policy controller event");
        }
    });
    futures::join!(defrags, policies);
}

fn retry<K: ResourceExt>(object: Arc<K>, error: &DefragError, _: Arc<DefragContext>) -> Action {
    warn!(
        namespace = object.namespace().unwrap_or_default(),
        name = object.name_any(),
        error = %error,
        "defrag pass failed; retrying"
    );
    Action::requeue(Duration::from_secs(5))
}

/// One pass over an EtcdDefrag: at most one member is processed.
pub async fn reconcile_defrag(
    object: Arc<EtcdDefrag>,
    ctx: Arc<DefragContext>,
) -> Result<Action, DefragError> {
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    let api: Api<EtcdDefrag> = Api::namespaced(ctx.client.clone(), &namespace);
    // Fresh, not from the cache: the previous pass's status must be seen, or a member would be
    // defragmented twice.
    let Some(defrag) = api.get_opt(&name).await? else {
        return Ok(Action::await_change());
    };
    let now = Timestamp::now();
    if decide::is_finished(&defrag) {
        return match decide::expiry(&defrag, now) {
            Expiry::Delete => {
                info!(
                    namespace,
                    name, "ttlSecondsAfterFinished passed; deleting the EtcdDefrag"
                );
                match api.delete(&name, &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(e) if status_code(&e) == Some(404) => {}
                    Err(e) => return Err(e.into()),
                }
                Ok(Action::await_change())
            }
            Expiry::After(left) => Ok(Action::requeue(left)),
            Expiry::Keep => Ok(Action::await_change()),
        };
    }
    if defrag.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let mut run = Run::new(&ctx, api, defrag, now);

    if let Some(message) = decide::deadline_passed(&run.defrag, now) {
        return run.fail("DeadlineExceeded", &message).await;
    }
    let all = run.api.list(&ListParams::default()).await?.items;
    if let Some(ahead) = decide::ahead_in_queue(&run.defrag, &all) {
        let message = format!(
            "queued: EtcdDefrag {ahead} of the same cluster runs first (one run per cluster at a time, oldest first)"
        );
        return run.wait("Queued", &message, false).await;
    }
    let cluster_name = run.defrag.spec.cluster_ref.name.clone();
    let clusters: Api<EtcdCluster> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(cluster) = clusters.get_opt(&cluster_name).await? else {
        let message = format!(
            "EtcdCluster {cluster_name} not found in namespace {namespace}; create a new EtcdDefrag naming an existing cluster"
        );
        return run.fail("ClusterNotFound", &message).await;
    };
    if cluster.spec.is_paused() {
        let message = format!(
            "EtcdCluster {cluster_name} has spec.paused set: the run waits until it is cleared, and fails after its deadline"
        );
        return run.wait("ClusterPaused", &message, true).await;
    }
    let observer = &ctx.observer;
    if !observer
        .stores
        .wait_until_ready(Duration::from_secs(30))
        .await
    {
        return Ok(Action::requeue(WAIT_REQUEUE));
    }
    let observed = observer.observe(&cluster).await?;
    if !observed.security.problems.is_empty() {
        let message = format!(
            "cannot reach etcd of EtcdCluster {cluster_name} with its TLS and credentials: {}",
            observed.security.problems.join("; ")
        );
        return run.wait("ClusterNotReachable", &message, true).await;
    }
    let facts = facts_of(&observed, observer);
    if let Err(why) = decide::health_gate(&facts) {
        let message = format!(
            "EtcdCluster {cluster_name} is not fully healthy, the run waits (it fails after its deadline): {why}"
        );
        return run.wait("ClusterNotHealthy", &message, true).await;
    }

    if run.status.members.as_deref().unwrap_or_default().is_empty() {
        run.status.members = Some(decide::plan_members(&facts));
        run.status.phase = Some(DefragPhase::Running);
        run.status.started_at = Some(Time(now));
        let order = run
            .status
            .members
            .iter()
            .flatten()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let message = format!("defragmenting one member at a time in the order {order}");
        run.condition(true, "Running", &message);
        run.event(false, "DefragStarted", &message);
        return run.write(Action::requeue(Duration::ZERO)).await;
    }
    run.status.phase = Some(DefragPhase::Running);
    run.condition(
        true,
        "Running",
        "defragmenting one member at a time, followers first, the leader last",
    );
    let members = run.status.members.clone().unwrap_or_default();
    let Some(next) = decide::next_member(&members, facts.leader_name()).map(str::to_string) else {
        return run.finish(&facts, &observed.security.access).await;
    };
    let role = decide::current_role(&facts, &next);
    let Some(member) = facts.members.iter().find(|m| m.name == next) else {
        run.mark(
            &next,
            role,
            DefragOutcome::Failed,
            Some("MemberGone"),
            None,
            None,
        );
        run.event(
            true,
            "DefragFailed",
            &format!("member {next} is no longer part of the cluster"),
        );
        return run.write(Action::requeue(Duration::ZERO)).await;
    };
    let before = member.status.as_ref().map(|s| s.db_size);
    let in_use = member.status.as_ref().map(|s| s.db_size_in_use);
    let verdict = decide::rule_verdict(
        run.defrag.spec.rule.as_ref(),
        before.unwrap_or_default(),
        in_use.unwrap_or_default(),
        facts.quota_bytes,
    );
    if let Verdict::Skip(reason) = verdict {
        run.mark(
            &next,
            role,
            DefragOutcome::Skipped,
            Some(reason),
            before,
            None,
        );
        return run.write(Action::requeue(Duration::ZERO)).await;
    }
    let access = &observed.security.access;
    let outcome =
        match EtcdClient::connect_endpoint(&member.endpoint, Timeouts::OBSERVE, access).await {
            Ok(client) => match client.defragment(&member.endpoint).await {
                Ok(()) => Ok(client
                    .endpoint_status(&member.endpoint)
                    .await
                    .ok()
                    .map(|s| s.db_size)),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
    match outcome {
        Ok(after) => {
            let reason = after.is_none().then_some("AfterSizeUnavailable");
            run.mark(
                &next,
                role,
                DefragOutcome::Defragmented,
                reason,
                before,
                after,
            );
            let sizes = match (before, after) {
                (Some(b), Some(a)) => format!(": {b} → {a} bytes"),
                _ => String::new(),
            };
            run.event(
                false,
                "MemberDefragmented",
                &format!("member {next} ({}) defragmented{sizes}", role_name(role)),
            );
        }
        Err(e) => {
            run.mark(
                &next,
                role,
                DefragOutcome::Failed,
                Some("RPCError"),
                before,
                None,
            );
            run.event(
                true,
                "DefragFailed",
                &format!("defragmenting member {next} failed: {e}"),
            );
        }
    }
    run.write(Action::requeue(Duration::ZERO)).await
}

fn role_name(role: MemberRole) -> &'static str {
    match role {
        MemberRole::Leader => "leader",
        MemberRole::Follower => "follower",
    }
}

/// The facts the decisions read, from one observation.
fn facts_of(observed: &crate::plan::Observed, observer: &Observer) -> ClusterFacts {
    let cluster = &observed.cluster;
    let members = observed
        .members
        .iter()
        .filter(|m| m.member.spec.dormant != Some(true))
        .filter(|m| m.member.metadata.deletion_timestamp.is_none())
        .map(|m| {
            let id = m
                .member
                .status
                .as_ref()
                .and_then(|s| s.member_id.as_deref())
                .and_then(parse_member_id);
            let observation = id.and_then(|id| observed.etcd.observation_of(id));
            let problem = observation.and_then(|o| match (&o.status, &o.health) {
                (Err(e), _) => Some(e.to_string()),
                (Ok(_), Some(Err(e))) => Some(e.to_string()),
                _ => None,
            });
            MemberFacts {
                name: m.member.name_any(),
                id,
                endpoint: observer.etcd_urls.map(&member_client_url(&m.member)),
                status: observation.and_then(|o| o.status.as_ref().ok()).map(|s| {
                    MemberStatusFacts {
                        db_size: s.db_size,
                        db_size_in_use: s.db_size_in_use,
                        leader: s.leader,
                        is_learner: s.is_learner,
                        errors: s.errors.clone(),
                    }
                }),
                healthy: observation.is_some_and(|o| o.is_healthy()),
                problem: problem.or_else(|| {
                    id.is_none()
                        .then(|| "etcd's member ID is not recorded yet".to_string())
                }),
            }
        })
        .collect();
    ClusterFacts {
        paused: cluster.spec.is_paused(),
        deleting: cluster.metadata.deletion_timestamp.is_some(),
        replicas: cluster.spec.replicas_or_default(),
        members,
        quota_bytes: decide::effective_quota(
            cluster
                .spec
                .options
                .as_ref()
                .and_then(|o| o.quota_backend_bytes),
        ),
        alarms: observed.etcd.active_alarms().to_vec(),
    }
}

/// One pass's working copy of a run.
struct Run<'a> {
    ctx: &'a DefragContext,
    api: Api<EtcdDefrag>,
    defrag: EtcdDefrag,
    status: EtcdDefragStatus,
    original: EtcdDefragStatus,
    events: Vec<(bool, &'static str, String)>,
    now: Timestamp,
}

impl<'a> Run<'a> {
    fn new(
        ctx: &'a DefragContext,
        api: Api<EtcdDefrag>,
        defrag: EtcdDefrag,
        now: Timestamp,
    ) -> Self {
        let status = defrag.status.clone().unwrap_or_default();
        Run {
            ctx,
            api,
            original: status.clone(),
            status,
            defrag,
            events: Vec::new(),
            now,
        }
    }

    fn condition(&mut self, ok: bool, reason: &str, message: &str) -> bool {
        decide::set_condition(
            &mut self.status,
            ok,
            reason,
            message,
            self.defrag.metadata.generation,
            self.now,
        )
    }

    fn event(&mut self, warning: bool, reason: &'static str, message: &str) {
        self.events.push((warning, reason, message.to_string()));
    }

    fn mark(
        &mut self,
        name: &str,
        role: MemberRole,
        outcome: DefragOutcome,
        reason: Option<&str>,
        before: Option<i64>,
        after: Option<i64>,
    ) {
        decide::mark_member(
            &mut self.status,
            name,
            role,
            outcome,
            reason,
            before,
            after,
            self.now,
        );
    }

    /// Pending (or still Running, once started) with the reason; an Event when it changed.
    async fn wait(
        mut self,
        reason: &'static str,
        message: &str,
        warn: bool,
    ) -> Result<Action, DefragError> {
        if self.status.started_at.is_none() {
            self.status.phase = Some(DefragPhase::Pending);
        }
        // One Event per reason, not one per changed detail of the message.
        let before = self
            .status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == decide::CONDITION)
            .map(|c| c.reason.clone());
        self.condition(false, reason, message);
        if before.as_deref() != Some(reason) {
            self.event(warn, if warn { "DefragDeferred" } else { reason }, message);
        }
        self.write(Action::requeue(WAIT_REQUEUE)).await
    }

    async fn fail(mut self, reason: &'static str, message: &str) -> Result<Action, DefragError> {
        self.status.phase = Some(DefragPhase::Failed);
        self.status.completed_at = Some(Time(self.now));
        self.condition(false, reason, message);
        self.event(true, reason, message);
        let after = self.after_finish();
        self.write(after).await
    }

    fn after_finish(&self) -> Action {
        let mut finished = self.defrag.clone();
        finished.status = Some(self.status.clone());
        match decide::expiry(&finished, self.now) {
            Expiry::Delete => Action::requeue(Duration::ZERO),
            Expiry::After(left) => Action::requeue(left),
            Expiry::Keep => Action::await_change(),
        }
    }

    /// Every member processed: the phase, NOSPACE disarmed where it is cured.
    async fn finish(
        mut self,
        facts: &ClusterFacts,
        access: &EtcdAccess,
    ) -> Result<Action, DefragError> {
        let members = self.status.members.clone().unwrap_or_default();
        let (phase, reason, message) = decide::sweep_result(&members);
        let ids: Vec<(String, u64)> = facts
            .members
            .iter()
            .filter_map(|m| Some((m.name.clone(), m.id?)))
            .collect();
        let disarm = decide::alarms_to_disarm(&facts.alarms, &members, &ids, facts.quota_bytes);
        if !disarm.is_empty() {
            let endpoints: Vec<String> = facts.members.iter().map(|m| m.endpoint.clone()).collect();
            match EtcdClient::connect(endpoints, Timeouts::MEMBERSHIP, access).await {
                Ok(client) => {
                    for alarm in disarm {
                        match client.disarm(alarm).await {
                            Ok(()) => self.event(
                                false,
                                "AlarmDisarmed",
                                &format!("{alarm} disarmed: the member's backend is below its quota after the defragmentation"),
                            ),
                            Err(e) => self.event(
                                true,
                                "AlarmDisarmFailed",
                                &format!("could not disarm {alarm}: {e}; disarm it with etcdctl alarm disarm"),
                            ),
                        }
                    }
                }
                Err(e) => self.event(
                    true,
                    "AlarmDisarmFailed",
                    &format!("could not disarm NOSPACE: {e}"),
                ),
            }
        }
        self.status.phase = Some(phase);
        self.status.completed_at = Some(Time(self.now));
        let ok = phase == DefragPhase::Complete;
        self.condition(ok, reason, &message);
        self.event(
            !ok,
            if ok { "DefragComplete" } else { "DefragFailed" },
            &message,
        );
        let after = self.after_finish();
        self.write(after).await
    }

    /// Writes the status (when it changed) with the resourceVersion read, then the Events.
    async fn write(self, then: Action) -> Result<Action, DefragError> {
        if self.status != self.original {
            let mut updated = self.defrag.clone();
            updated.status = Some(self.status.clone());
            match self
                .api
                .replace_status(&self.defrag.name_any(), &post_params(), &updated)
                .await
            {
                Ok(_) => {}
                // Someone wrote in between: read again and decide again.
                Err(e) if status_code(&e) == Some(409) => {
                    return Ok(Action::requeue(Duration::from_millis(200)));
                }
                Err(e) => return Err(e.into()),
            }
        }
        for (warning, reason, message) in &self.events {
            record_event(
                &self.ctx.client,
                &self.defrag,
                *warning,
                reason,
                message,
                self.now,
            )
            .await;
        }
        Ok(then)
    }
}

fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Records an Event about `object`; a failure is logged only.
pub(crate) async fn record_event<K>(
    client: &Client,
    object: &K,
    warning: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
) where
    K: Resource<DynamicType = ()>,
{
    let namespace = object.meta().namespace.clone().unwrap_or_default();
    let kind = if warning {
        crate::build::EventType::Warning
    } else {
        crate::build::EventType::Normal
    };
    let mut event = crate::build::event_about(object, kind, reason, message, now);
    // Named from the clock at the call, not the pass's `now`: a pass may record several.
    event.metadata.name = Some(format!(
        "{}.{:x}",
        object.meta().name.as_deref().unwrap_or_default(),
        Timestamp::now().as_nanosecond()
    ));
    let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    if let Err(e) = api.create(&post_params(), &event).await {
        warn!(namespace, reason, error = %e, "cannot record an Event");
    }
}

/// One pass over an EtcdDefragPolicy.
pub async fn reconcile_policy(
    object: Arc<EtcdDefragPolicy>,
    ctx: Arc<DefragContext>,
) -> Result<Action, DefragError> {
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    let api: Api<EtcdDefragPolicy> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(policy) = api.get_opt(&name).await? else {
        return Ok(Action::await_change());
    };
    if policy.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let defrags: Api<EtcdDefrag> = Api::namespaced(ctx.client.clone(), &namespace);
    let stamped = defrags
        .list(&ListParams::default().labels(&format!("{POLICY_LABEL}={name}")))
        .await?
        .items;
    let runs: Vec<RunFacts> = stamped
        .iter()
        .filter(|d| d.metadata.deletion_timestamp.is_none())
        .map(|d| RunFacts {
            name: d.name_any(),
            phase: d.status.as_ref().and_then(|s| s.phase),
            created: d.metadata.creation_timestamp.as_ref().map(|t| t.0),
            completed: d
                .status
                .as_ref()
                .and_then(|s| s.completed_at.as_ref())
                .map(|t| t.0),
        })
        .collect();
    let now = Timestamp::now();
    let created = policy
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(now);
    let decision = policy::decide(
        PolicyFacts {
            spec: &policy.spec,
            status: policy.status.as_ref(),
            name: &name,
            created,
            generation: policy.metadata.generation,
        },
        &runs,
        now,
    );
    let updated = (policy.status.as_ref() != Some(&decision.status)).then(|| {
        let mut updated = policy.clone();
        updated.status = Some(decision.status.clone());
        updated
    });
    let stamp = decision.stamp.map(|tick| stamped_run(&policy, tick));
    if let Some(soon) = perform_stamping(
        &ctx.client,
        &api,
        Stamping {
            policy: &policy,
            runs: &defrags,
            delete: &decision.delete,
            stamp,
            updated,
            event: decision.event.as_ref(),
            now,
        },
    )
    .await?
    {
        return Ok(soon);
    }
    Ok(decision
        .requeue
        .map(Action::requeue)
        .unwrap_or_else(Action::await_change))
}

/// What one pass of a stamping schedule (an EtcdDefragPolicy, an EtcdSnapshotSchedule)
/// performs once its pure decision is made.
pub(crate) struct Stamping<'a, P, R> {
    pub policy: &'a P,
    /// Where its runs live.
    pub runs: &'a Api<R>,
    /// Runs to delete (gone already is fine).
    pub delete: &'a [String],
    /// The run to create (there already is fine: a tick is stamped once).
    pub stamp: Option<R>,
    /// The policy with its new status, when the status changed.
    pub updated: Option<P>,
    pub event: Option<&'a policy::PolicyEvent>,
    pub now: Timestamp,
}

/// Deletes, creates, replaces the status, records the Event, in that order. `Some` is a
/// prompt retry: the status write met a newer version of the policy.
pub(crate) async fn perform_stamping<P, R>(
    client: &Client,
    api: &Api<P>,
    stamping: Stamping<'_, P, R>,
) -> Result<Option<Action>, kube::Error>
where
    P: Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    R: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for old in stamping.delete {
        match stamping.runs.delete(old, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if status_code(&e) == Some(404) => {}
            Err(e) => return Err(e),
        }
    }
    if let Some(run) = &stamping.stamp {
        match stamping.runs.create(&post_params(), run).await {
            Ok(_) => {}
            Err(e) if status_code(&e) == Some(409) => {}
            Err(e) => return Err(e),
        }
    }
    if let Some(updated) = &stamping.updated {
        let name = updated.meta().name.clone().unwrap_or_default();
        match api.replace_status(&name, &post_params(), updated).await {
            Ok(_) => {}
            Err(e) if status_code(&e) == Some(409) => {
                return Ok(Some(Action::requeue(Duration::from_millis(200))));
            }
            Err(e) => return Err(e),
        }
    }
    if let Some(event) = stamping.event {
        record_event(
            client,
            stamping.policy,
            event.warning,
            event.reason,
            &event.message,
            stamping.now,
        )
        .await;
    }
    Ok(None)
}

/// The EtcdDefrag a policy stamps for `tick`: owned by the policy (deleted with it), labelled
/// with it and with the cluster, the rule and TTL copied.
pub fn stamped_run(policy: &EtcdDefragPolicy, tick: Timestamp) -> EtcdDefrag {
    let name = policy.name_any();
    let mut labels = std::collections::BTreeMap::new();
    labels.insert(POLICY_LABEL.to_string(), name.clone());
    labels.insert(
        etcd_operator_api::labels::CLUSTER.to_string(),
        policy.spec.cluster_ref.name.clone(),
    );
    let owner = OwnerReference {
        api_version: EtcdDefragPolicy::api_version(&()).into_owned(),
        kind: EtcdDefragPolicy::kind(&()).into_owned(),
        name: name.clone(),
        uid: policy.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    EtcdDefrag {
        metadata: ObjectMeta {
            name: Some(policy::run_name(&name, tick)),
            namespace: policy.metadata.namespace.clone(),
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: EtcdDefragSpec {
            cluster_ref: policy.spec.cluster_ref.clone(),
            rule: policy.spec.rule.clone(),
            ttl_seconds_after_finished: policy.spec.ttl_seconds_after_finished,
        },
        status: None,
    }
}
