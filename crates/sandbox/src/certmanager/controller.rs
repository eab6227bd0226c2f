//! The controller loop: watches Certificates, Issuers, ClusterIssuers and Secrets; after every
//! change, and when a renewal, an expiry or the end of a failure back-off comes due, one pass
//! brings every issuer's Ready condition and every Certificate's Secret and status in line.
//! Decisions are taken on the caches and re-checked against the API before anything is issued,
//! so a cache that trails the controller's own writes never issues twice.

use std::collections::HashMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::CertManagerOptions;
use super::certificates::{
    self, CA_CRT, Evaluation, FIELD_MANAGER, READY_MESSAGE, TLS_CRT, TLS_KEY, desired_secret,
    evaluate, secret_up_to_date,
};
use super::issuers::{self, IssuerState};
use super::types::{
    CLUSTER_ISSUER_KIND, Certificate, CertificateStatus, ClusterIssuer, Condition, GROUP,
    ISSUER_KIND, Issuer, IssuerStatus,
};
use crate::controllers::informer::Informers;
use crate::controllers::{ControllerError, TimeScale};

/// cert-manager's back-off after a failed issuance: an hour, doubled with each further
/// failure, at most 32 hours (cluster time).
const FAILURE_BACKOFF: Duration = Duration::from_secs(3600);
const FAILURE_BACKOFF_MAX: Duration = Duration::from_secs(32 * 3600);

struct Context {
    client: Client,
    options: CertManagerOptions,
    time_scale: TimeScale,
    recorder: Recorder,
    certificates: Store<Certificate>,
    issuers: Store<Issuer>,
    cluster_issuers: Store<ClusterIssuer>,
    secrets: Store<Secret>,
    /// The generation of each Certificate (by uid) whose last issuance failed: a new
    /// generation is tried at once, as cert-manager retries a changed spec.
    failed_generations: HashMap<String, Option<i64>>,
}

/// Runs until `token` is cancelled.
pub async fn run(
    client: Client,
    options: CertManagerOptions,
    time_scale: TimeScale,
    token: CancellationToken,
) {
    let mut informers = Informers::new(&token);
    let certificates = informers.watch(Api::<Certificate>::all(client.clone()));
    let issuers = informers.watch(Api::<Issuer>::all(client.clone()));
    let cluster_issuers = informers.watch(Api::<ClusterIssuer>::all(client.clone()));
    let secrets = informers.watch(Api::<Secret>::all(client.clone()));
    if !informers.synced().await {
        return;
    }
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "cert-manager".into(),
            instance: None,
        },
    );
    let mut context = Context {
        client,
        options,
        time_scale,
        recorder,
        certificates,
        issuers,
        cluster_issuers,
        secrets,
        failed_generations: HashMap::new(),
    };
    loop {
        let next = pass(&mut context).await;
        let wait = next.map_or(Duration::from_secs(3600), |at| {
            Duration::try_from(at.duration_since(Timestamp::now()))
                .unwrap_or_default()
                .max(Duration::from_millis(20))
        });
        tokio::select! {
            () = token.cancelled() => return,
            () = informers.changed.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

type IssuerKey = (&'static str, String, String);

fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One pass over every issuer and Certificate; when the next one is due by the clock.
async fn pass(context: &mut Context) -> Option<Timestamp> {
    let mut states: HashMap<IssuerKey, IssuerState> = HashMap::new();
    let mut retry = false;
    for issuer in context.cluster_issuers.state() {
        let namespace = context.options.cluster_resource_namespace.clone();
        let description = format!("ClusterIssuer '{}'", issuer.name_any());
        let state = issuer_state(context, &issuer.spec.config, &description, &namespace);
        let api: Api<ClusterIssuer> = Api::all(context.client.clone());
        let written = sync_issuer_status(
            context,
            &api,
            issuer.as_ref(),
            issuer.status.as_ref(),
            &state,
        )
        .await;
        if let Err(error) = written {
            tracing::debug!(%error, issuer = %issuer.name_any(), "writing an issuer's status failed");
            retry = true;
        }
        states.insert(
            (CLUSTER_ISSUER_KIND, String::new(), issuer.name_any()),
            state,
        );
    }
    for issuer in context.issuers.state() {
        let namespace = issuer.namespace().unwrap_or_default();
        let description = format!("Issuer '{namespace}/{}'", issuer.name_any());
        let state = issuer_state(context, &issuer.spec.config, &description, &namespace);
        let api: Api<Issuer> = Api::namespaced(context.client.clone(), &namespace);
        let written = sync_issuer_status(
            context,
            &api,
            issuer.as_ref(),
            issuer.status.as_ref(),
            &state,
        )
        .await;
        if let Err(error) = written {
            tracing::debug!(%error, issuer = %issuer.name_any(), "writing an issuer's status failed");
            retry = true;
        }
        states.insert((ISSUER_KIND, namespace, issuer.name_any()), state);
    }
    let live: Vec<String> = context
        .certificates
        .state()
        .iter()
        .filter_map(|c| c.uid())
        .collect();
    context
        .failed_generations
        .retain(|uid, _| live.contains(uid));
    let mut next = retry.then(|| Timestamp::now() + SignedDuration::from_millis(500));
    for certificate in context.certificates.state() {
        // One Certificate's trouble does not hold up the others: it is looked at again soon.
        let due = match sync_certificate(context, &certificate, &states).await {
            Ok(due) => due,
            Err(error) => {
                tracing::debug!(%error, certificate = %certificate.name_any(), "syncing a Certificate failed; retrying");
                Some(Timestamp::now() + SignedDuration::from_millis(500))
            }
        };
        next = earliest(next, due);
    }
    next
}

fn issuer_state(
    context: &Context,
    spec: &super::types::IssuerSpec,
    description: &str,
    namespace: &str,
) -> IssuerState {
    let secret = issuers::ca_secret_name(spec)
        .and_then(|name| context.secrets.get(&ObjectRef::new(name).within(namespace)));
    issuers::evaluate(spec, description, namespace, secret.as_deref())
}

fn now_time() -> Time {
    Time(Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now()))
}

/// `wanted` with the last transition time of the matching condition of `previous` when its
/// status did not change.
fn with_transition(mut wanted: Condition, previous: &[Condition]) -> Condition {
    wanted.last_transition_time = previous
        .iter()
        .find(|c| c.type_ == wanted.type_ && c.status == wanted.status)
        .and_then(|c| c.last_transition_time.clone())
        .or_else(|| Some(now_time()));
    wanted
}

async fn sync_issuer_status<K>(
    context: &Context,
    api: &Api<K>,
    issuer: &K,
    status: Option<&IssuerStatus>,
    state: &IssuerState,
) -> Result<(), ControllerError>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let previous = status.map(|s| s.conditions.clone()).unwrap_or_default();
    let ready = with_transition(
        Condition {
            type_: "Ready".into(),
            status: if state.ready() { "True" } else { "False" }.into(),
            last_transition_time: None,
            reason: Some(state.reason.into()),
            message: Some(state.message.clone()),
            observed_generation: issuer.meta().generation,
        },
        &previous,
    );
    let mut conditions: Vec<Condition> = previous
        .iter()
        .filter(|c| c.type_ != "Ready")
        .cloned()
        .collect();
    conditions.push(ready);
    if conditions == previous {
        return Ok(());
    }
    let patch = json!({"status": {"conditions": conditions}});
    let patched = api
        .patch_status(
            &issuer.meta().name.clone().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await;
    match patched {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(error) => return Err(error.into()),
    }
    let type_ = if state.ready() {
        EventType::Normal
    } else {
        EventType::Warning
    };
    // As cert-manager: the CA issuer reports its checks, the selfSigned one says nothing.
    if !state.message.is_empty() {
        publish(
            context,
            issuer.object_ref(&()),
            type_,
            (state.reason, "Setup"),
            &state.message,
        )
        .await;
    }
    Ok(())
}

/// An Event. Events of one object with the same reason and `action` count as one series
/// (kube-runtime's recorder keeps the first note), so each distinct step has its own action.
async fn publish(
    context: &Context,
    reference: k8s_openapi::api::core::v1::ObjectReference,
    type_: EventType,
    (reason, action): (&str, &str),
    note: &str,
) {
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: (!note.is_empty()).then(|| note.to_string()),
        action: action.into(),
        secondary: None,
    };
    if let Err(error) = context.recorder.publish(&event, &reference).await {
        tracing::debug!(%error, "publishing a cert-manager event failed");
    }
}

/// Where the Certificate's issuer stands.
enum IssuerLookup<'a> {
    Ready(&'a IssuerState),
    /// Issuance waits: the Issuing condition's reason and message.
    Blocked(&'static str, String),
}

fn lookup<'a>(
    certificate: &Certificate,
    states: &'a HashMap<IssuerKey, IssuerState>,
) -> IssuerLookup<'a> {
    let reference = &certificate.spec.issuer_ref;
    if reference.group() != GROUP {
        return IssuerLookup::Blocked(
            "IssuerNotFound",
            format!(
                "Referenced issuer group {:?} is not served by kube-sandbox's cert-manager (it runs cert-manager.io Issuers and ClusterIssuers)",
                reference.group()
            ),
        );
    }
    let key = match reference.kind() {
        ISSUER_KIND => (
            ISSUER_KIND,
            certificate.namespace().unwrap_or_default(),
            reference.name.clone(),
        ),
        CLUSTER_ISSUER_KIND => (CLUSTER_ISSUER_KIND, String::new(), reference.name.clone()),
        other => {
            return IssuerLookup::Blocked(
                "IssuerNotFound",
                format!("Referenced issuer kind {other:?} is neither Issuer nor ClusterIssuer"),
            );
        }
    };
    match states.get(&key) {
        None => IssuerLookup::Blocked(
            "IssuerNotFound",
            format!(
                "Referenced \"{}\" not found: {}s.{GROUP} \"{}\" not found",
                key.0,
                key.0.to_lowercase(),
                key.2
            ),
        ),
        Some(state) if state.ready() => IssuerLookup::Ready(state),
        Some(state) => IssuerLookup::Blocked(
            "IssuerNotReady",
            format!(
                "Referenced issuer does not have a Ready status condition ({} \"{}\": {}: {})",
                key.0, key.2, state.reason, state.message
            ),
        ),
    }
}

fn backoff_delay(scale: TimeScale, attempts: i64) -> Duration {
    let exponent = u32::try_from(attempts.saturating_sub(1).clamp(0, 16)).unwrap_or(0);
    let delay = FAILURE_BACKOFF
        .checked_mul(2u32.saturating_pow(exponent))
        .unwrap_or(FAILURE_BACKOFF_MAX)
        .min(FAILURE_BACKOFF_MAX);
    scale.scale(delay)
}

/// When a failed Certificate may be tried again, if it is backing off.
fn backoff_until(context: &Context, certificate: &Certificate) -> Option<Timestamp> {
    let status = certificate.status.as_ref()?;
    let failed_at = status.last_failure_time.as_ref()?.0;
    let uid = certificate.uid().unwrap_or_default();
    if let Some(generation) = context.failed_generations.get(&uid)
        && *generation != certificate.metadata.generation
    {
        return None;
    }
    let delay = backoff_delay(
        context.time_scale,
        status.failed_issuance_attempts.unwrap_or(1),
    );
    let until = failed_at
        .checked_add(SignedDuration::try_from(delay).ok()?)
        .ok()?;
    (Timestamp::now() < until).then_some(until)
}

fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        last_transition_time: None,
        reason: Some(reason.into()),
        message: Some(message),
        observed_generation: generation,
    }
}

/// The status the Certificate should have, from its evaluation: Ready, the validity of the
/// Secret's certificate, and the Issuing condition given (`None`: not issuing).
fn status_for(
    certificate: &Certificate,
    evaluation: &Evaluation,
    issuing: Option<Condition>,
    waiting_on: Option<&str>,
) -> CertificateStatus {
    let previous = certificate.status.clone().unwrap_or_default();
    let generation = certificate.metadata.generation;
    let ready = match &evaluation.not_ready {
        None => condition("Ready", true, "Ready", READY_MESSAGE.into(), generation),
        Some((reason, message)) => {
            let message = match waiting_on {
                Some(issuer) => format!("{message}: {issuer}"),
                None => message.clone(),
            };
            condition("Ready", false, reason, message, generation)
        }
    };
    let mut conditions = vec![with_transition(ready, &previous.conditions)];
    if let Some(issuing) = issuing {
        conditions.push(with_transition(issuing, &previous.conditions));
    }
    let certificate_times = evaluation.current.as_ref().map(|c| &c.certificate);
    CertificateStatus {
        conditions,
        not_before: certificate_times.map(|c| Time(c.not_before)),
        not_after: certificate_times.map(|c| Time(c.not_after)),
        renewal_time: evaluation.renewal_time.map(Time),
        ..previous
    }
}

fn status_patch(status: &CertificateStatus) -> Result<Value, ControllerError> {
    let mut value = serde_json::to_value(status)?;
    let fields = value.as_object_mut().expect("a status is an object");
    for key in [
        "conditions",
        "lastFailureTime",
        "notBefore",
        "notAfter",
        "renewalTime",
        "revision",
        "nextPrivateKeySecretName",
        "failedIssuanceAttempts",
    ] {
        fields.entry(key).or_insert(Value::Null);
    }
    Ok(json!({"status": value}))
}

async fn write_status(
    api: &Api<Certificate>,
    certificate: &Certificate,
    status: &CertificateStatus,
) -> Result<(), ControllerError> {
    if certificate.status.as_ref() == Some(status) {
        return Ok(());
    }
    let patch = status_patch(status)?;
    match api
        .patch_status(
            &certificate.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

fn secret_text(secret: Option<&Secret>, key: &str) -> Option<Vec<u8>> {
    secret?.data.as_ref()?.get(key).map(|b| b.0.clone())
}

/// The Secret as it should be for the certificate it holds now, when it holds a valid one.
fn desired_for_current(
    certificate: &Certificate,
    evaluation: &Evaluation,
    secret: Option<&Secret>,
) -> Option<Value> {
    let request = evaluation.request.as_ref().ok()?;
    evaluation.current.as_ref()?;
    let secret_ref = secret?;
    desired_secret(
        certificate,
        request,
        &secret_text(secret, TLS_CRT)?,
        &secret_text(secret, TLS_KEY)?,
        secret_text(secret, CA_CRT).as_deref(),
        secret_ref.type_.as_deref(),
    )
    .ok()
}

/// What the Certificate needs, decided on one view of it and its Secret.
enum Plan {
    /// Status only (and the Secret's metadata when it drifted).
    Settle {
        status: Box<CertificateStatus>,
        secret: Option<Value>,
    },
    /// A new certificate, now.
    Issue,
}

fn plan(
    context: &Context,
    certificate: &Certificate,
    secret: Option<&Secret>,
    states: &HashMap<IssuerKey, IssuerState>,
    evaluation: &Evaluation,
) -> Plan {
    let generation = certificate.metadata.generation;
    let previous_issuing = certificate
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Issuing").cloned());
    if evaluation.trigger.is_none() {
        let issuing = evaluation.request.as_ref().err().map(|error| {
            condition(
                "Issuing",
                false,
                "Failed",
                format!(
                    "The certificate request has failed to complete and will be retried: {error}"
                ),
                generation,
            )
        });
        let drift = desired_for_current(certificate, evaluation, secret)
            .filter(|desired| secret.is_some_and(|s| !secret_up_to_date(s, desired)));
        return Plan::Settle {
            status: Box::new(status_for(certificate, evaluation, issuing, None)),
            secret: drift,
        };
    }
    match lookup(certificate, states) {
        IssuerLookup::Blocked(blocked_reason, blocked_message) => {
            let issuing = condition(
                "Issuing",
                true,
                blocked_reason,
                blocked_message.clone(),
                generation,
            );
            Plan::Settle {
                status: Box::new(status_for(
                    certificate,
                    evaluation,
                    Some(issuing),
                    Some(&blocked_message),
                )),
                secret: None,
            }
        }
        IssuerLookup::Ready(_) if backoff_until(context, certificate).is_some() => Plan::Settle {
            status: Box::new(status_for(certificate, evaluation, previous_issuing, None)),
            secret: None,
        },
        IssuerLookup::Ready(_) => Plan::Issue,
    }
}

/// Brings one Certificate in line; when it next needs a look by the clock.
async fn sync_certificate(
    context: &mut Context,
    cached: &Certificate,
    states: &HashMap<IssuerKey, IssuerState>,
) -> Result<Option<Timestamp>, ControllerError> {
    let namespace = cached.namespace().unwrap_or_default();
    let secret_ref = ObjectRef::new(&cached.spec.secret_name).within(&namespace);
    let cached_secret = context.secrets.get(&secret_ref);
    let evaluation = evaluate(cached, cached_secret.as_deref(), Timestamp::now());
    let cached_plan = plan(
        context,
        cached,
        cached_secret.as_deref(),
        states,
        &evaluation,
    );
    let settled = matches!(&cached_plan, Plan::Settle { status, secret: None } if cached.status.as_ref() == Some(status.as_ref()));
    if settled {
        return Ok(due(context, cached, &evaluation));
    }
    // Act on what the API holds now, not on caches that may trail our own writes.
    let certificates: Api<Certificate> = Api::namespaced(context.client.clone(), &namespace);
    let secrets: Api<Secret> = Api::namespaced(context.client.clone(), &namespace);
    let Some(certificate) = certificates.get_opt(&cached.name_any()).await? else {
        return Ok(None);
    };
    let secret = secrets.get_opt(&certificate.spec.secret_name).await?;
    let evaluation = evaluate(&certificate, secret.as_ref(), Timestamp::now());
    match plan(context, &certificate, secret.as_ref(), states, &evaluation) {
        Plan::Settle {
            status,
            secret: drift,
        } => {
            if let Some(desired) = drift {
                match apply_secret(&secrets, &certificate.spec.secret_name, &desired).await {
                    Ok(()) => {}
                    // Refused (a secretTemplate label the API finds invalid...): said once per
                    // look, not retried in a loop; the certificate itself is still valid.
                    Err(ControllerError::Kube(kube::Error::Api(status)))
                        if matches!(status.code, 400 | 403 | 422) =>
                    {
                        let note = format!(
                            "updating Secret {:?} failed: {}",
                            certificate.spec.secret_name, status.message
                        );
                        publish(
                            context,
                            certificate.object_ref(&()),
                            EventType::Warning,
                            ("SecretUpdateFailed", "UpdateSecret"),
                            &note,
                        )
                        .await;
                    }
                    Err(error) => return Err(error),
                }
            }
            write_status(&certificates, &certificate, &status).await?;
            Ok(due(context, &certificate, &evaluation))
        }
        Plan::Issue => {
            issue(
                context,
                &certificates,
                &secrets,
                &certificate,
                secret.as_ref(),
                states,
                evaluation,
            )
            .await
        }
    }
}

/// The next time the clock matters to a settled Certificate: renewal, expiry, end of back-off.
fn due(context: &Context, certificate: &Certificate, evaluation: &Evaluation) -> Option<Timestamp> {
    let now = Timestamp::now();
    let future = |at: Option<Timestamp>| at.filter(|at| *at > now);
    let mut next = future(evaluation.renewal_time);
    next = earliest(
        next,
        future(evaluation.current.as_ref().map(|c| c.certificate.not_after)),
    );
    earliest(next, backoff_until(context, certificate))
}

async fn apply_secret(
    api: &Api<Secret>,
    name: &str,
    desired: &Value,
) -> Result<(), ControllerError> {
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(desired),
    )
    .await?;
    Ok(())
}

async fn issue(
    context: &mut Context,
    certificates: &Api<Certificate>,
    secrets: &Api<Secret>,
    certificate: &Certificate,
    secret: Option<&Secret>,
    states: &HashMap<IssuerKey, IssuerState>,
    evaluation: Evaluation,
) -> Result<Option<Timestamp>, ControllerError> {
    let IssuerLookup::Ready(state) = lookup(certificate, states) else {
        return Ok(None);
    };
    let signer = state.signer.clone().expect("a Ready issuer signs");
    let (trigger_reason, trigger_message) = evaluation.trigger.clone().unwrap_or_default();
    let reference = certificate.object_ref(&());
    publish(
        context,
        reference.clone(),
        EventType::Normal,
        ("Issuing", trigger_reason),
        &trigger_message,
    )
    .await;
    let now = Timestamp::now();
    let previous_key = evaluation.current.map(|c| c.key).or_else(|| {
        secret_text(secret, TLS_KEY).and_then(|pem| super::pki::PrivateKey::from_pem(&pem).ok())
    });
    // Off the async workers: an RSA key (openssl) takes a while.
    let issued = match evaluation.request.clone() {
        Ok(request) => tokio::task::spawn_blocking(move || {
            certificates::issue(&request, &signer, previous_key, now)
        })
        .await
        .unwrap_or_else(|error| Err(format!("issuing panicked: {error}"))),
        Err(error) => Err(error),
    };
    let outcome = evaluation.request.clone().and_then(|request| {
        let issued = issued?;
        let desired = desired_secret(
            certificate,
            &request,
            issued.tls_crt.as_bytes(),
            issued.tls_key.as_bytes(),
            Some(issued.ca_crt.as_bytes()),
            secret.and_then(|s| s.type_.as_deref()),
        )?;
        Ok((request, desired))
    });
    let outcome = match outcome {
        Ok((request, desired)) => {
            match apply_secret(secrets, &certificate.spec.secret_name, &desired).await {
                Ok(()) => Ok(request),
                // The API refuses the Secret (a secretTemplate label it finds invalid...).
                Err(ControllerError::Kube(kube::Error::Api(status)))
                    if matches!(status.code, 400 | 403 | 422) =>
                {
                    Err(format!(
                        "writing Secret {:?}: {}",
                        certificate.spec.secret_name, status.message
                    ))
                }
                Err(error) => return Err(error),
            }
        }
        Err(error) => Err(error),
    };
    let generation = certificate.metadata.generation;
    let previous = certificate.status.clone().unwrap_or_default();
    match outcome {
        Ok(request) => {
            let written = secrets.get_opt(&certificate.spec.secret_name).await?;
            let after = evaluate(certificate, written.as_ref(), Timestamp::now());
            let mut status = status_for(certificate, &after, None, None);
            status.revision = Some(previous.revision.unwrap_or(0) + 1);
            status.last_failure_time = None;
            status.failed_issuance_attempts = None;
            write_status(certificates, certificate, &status).await?;
            context
                .failed_generations
                .remove(&certificate.uid().unwrap_or_default());
            publish(
                context,
                reference,
                EventType::Normal,
                ("Issuing", "Issued"),
                "The certificate has been successfully issued",
            )
            .await;
            tracing::debug!(certificate = %certificate.name_any(), reason = trigger_reason, key = %request.key, "issued");
            Ok(due(context, certificate, &after))
        }
        Err(error) => {
            let message = format!(
                "The certificate request has failed to complete and will be retried: {error}"
            );
            let issuing = condition("Issuing", false, "Failed", message.clone(), generation);
            let mut status = status_for(
                certificate,
                &evaluation_without_current(certificate, secret),
                Some(issuing),
                None,
            );
            status.last_failure_time = Some(now_time());
            status.failed_issuance_attempts =
                Some(previous.failed_issuance_attempts.unwrap_or(0) + 1);
            write_status(certificates, certificate, &status).await?;
            context
                .failed_generations
                .insert(certificate.uid().unwrap_or_default(), generation);
            publish(
                context,
                reference,
                EventType::Warning,
                ("Failed", "Issue"),
                &message,
            )
            .await;
            let delay = backoff_delay(
                context.time_scale,
                status.failed_issuance_attempts.unwrap_or(1),
            );
            Ok(Timestamp::now()
                .checked_add(SignedDuration::try_from(delay).unwrap_or_default())
                .ok())
        }
    }
}

/// The evaluation again (the one moved into issuance kept the Secret's key).
fn evaluation_without_current(certificate: &Certificate, secret: Option<&Secret>) -> Evaluation {
    evaluate(certificate, secret, Timestamp::now())
}
