//! The security rules: unusable TLS Secrets and auth Secrets stop everything but deletion,
//! with every problem in the message; the root password's changes.

use etcd_operator_api::MemberPhase;

use super::fixtures::*;
use crate::plan::{PodPhase, Step, StepKind, WaitReason};

/// Unusable TLS Secrets stop everything but deletion, with every problem in the message, and
/// nothing is started; once they are fixed the cluster proceeds.
#[test]
fn tls_secret_problems_stop_everything_but_deletion() {
    let mut fx = Fx::empty(3);
    fx.obs.security.problems = vec![
        "Secret etcd-server (client-API server certificate) not found".to_string(),
        "Secret etcd-peer (peer certificate): tls.key does not belong to the certificate in tls.crt"
            .to_string(),
    ];
    let plan = fx.plan();
    match &plan.step {
        Step::Wait { reason, message } => {
            assert_eq!(*reason, WaitReason::InvalidSecret);
            assert!(
                message.contains("Secret etcd-server (client-API server certificate) not found")
            );
            assert!(message.contains("tls.key does not belong"));
            assert!(message.contains("Nothing is started"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(plan.step.event_type(), crate::build::EventType::Warning);

    let mut healthy = Fx::healthy(3);
    healthy.obs.security.problems = vec!["Secret x: expired".into()];
    healthy.without_pod("etcd-1");
    assert_eq!(
        wait_reason(&healthy.step()),
        WaitReason::InvalidSecret,
        "no Pod on a broken configuration"
    );
    healthy.obs.security.problems.clear();
    assert_eq!(healthy.step().kind(), StepKind::CreatePod);

    let mut deleting = Fx::healthy(3);
    deleting.obs.security.problems = vec!["Secret x: expired".into()];
    deleting.obs.cluster.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(0)));
    assert_ne!(deleting.step().kind(), StepKind::Wait, "deletion proceeds");
}

#[test]
fn rule10_cluster_lost_is_not_bootstrapped_again() {
    let mut fx = Fx::healthy(3);
    fx.obs.members.clear();
    fx.obs.etcd = crate::etcd::EtcdView::not_observed("no members");
    assert_eq!(wait_reason(&fx.step()), WaitReason::ClusterLost);
}

#[test]
fn rule10_dormant_member_pod_terminal_is_not_recreated() {
    let mut fx = Fx::healthy(1);
    target(&mut fx, 0);
    fx.member_mut("etcd-0").spec.dormant = Some(true);
    fx.pod_mut("etcd-0").phase = PodPhase::Succeeded;
    assert_eq!(fx.step().kind(), StepKind::DeletePod);
    fx.without_pod("etcd-0");
    assert_ne!(fx.step().kind(), StepKind::CreatePod);
}

/// cert-manager's Certificates come before the Secret problems they explain: a missing one is
/// created (owned by the cluster, labelled with it), one edited by hand is patched back with
/// only the fields that differ, and a matching one is left alone; deletion still comes first.
#[test]
fn cert_manager_certificates_are_created_and_kept_before_secret_problems() {
    use crate::plan::CertificateFacts;
    use crate::security::certmanager::{spec_patch, wanted_certificates};
    use etcd_operator_api::cluster::{
        EtcdClusterTls, IssuerReference, PeerCertManagerTls, PeerTls,
    };

    let mut fx = Fx::healthy(3);
    fx.obs.cluster.metadata.uid = Some("cluster-uid".into());
    fx.obs.cluster.spec.tls = Some(EtcdClusterTls {
        client: None,
        peer: Some(PeerTls {
            cert_manager: Some(PeerCertManagerTls {
                issuer_ref: IssuerReference {
                    name: "ca".into(),
                    kind: None,
                },
            }),
            ..Default::default()
        }),
    });
    let wanted = wanted_certificates(&fx.obs.cluster, "cluster.local").remove(0);
    fx.obs.security.problems = vec!["Certificate etcd-peer is being created".into()];
    fx.obs.security.certificates = vec![CertificateFacts {
        wanted: wanted.clone(),
        exists: false,
        patch: None,
        not_ready: Some("Certificate etcd-peer is being created".into()),
    }];
    match fx.step() {
        Step::ApplyCertificate {
            name,
            object: Some(object),
            patch: None,
        } => {
            assert_eq!(name, "etcd-peer");
            assert_eq!(object.metadata.name.as_deref(), Some("etcd-peer"));
            let owner = &object.metadata.owner_references.as_ref().unwrap()[0];
            assert_eq!(
                (owner.kind.as_str(), owner.uid.as_str()),
                ("EtcdCluster", "cluster-uid")
            );
            assert_eq!(owner.controller, Some(true));
            assert_eq!(object.data["spec"], wanted.spec);
            assert!(
                object
                    .metadata
                    .labels
                    .as_ref()
                    .unwrap()
                    .contains_key(etcd_operator_api::labels::CLUSTER)
            );
        }
        other => panic!("{other:?}"),
    }

    // Created but not Ready: the Secret problem waits, nothing is created again.
    fx.obs.security.certificates[0].exists = true;
    assert_eq!(wait_reason(&fx.step()), WaitReason::InvalidSecret);

    // Edited by hand: patched back, only what differs.
    let mut edited = wanted.spec.clone();
    edited["dnsNames"] = serde_json::json!(["*.etcd.default.svc"]);
    fx.obs.security.certificates[0].patch = spec_patch(&edited, &wanted.spec);
    match fx.step() {
        Step::ApplyCertificate {
            object: None,
            patch: Some(patch),
            ..
        } => assert_eq!(
            *patch,
            serde_json::json!({"dnsNames": wanted.spec["dnsNames"]})
        ),
        other => panic!("{other:?}"),
    }

    // Matching and its Secret usable: the cluster carries on.
    fx.obs.security.certificates[0].patch = None;
    fx.obs.security.problems.clear();
    assert_ne!(fx.step().kind(), StepKind::ApplyCertificate);

    let mut deleting = fx;
    deleting.obs.security.certificates[0].exists = false;
    deleting.obs.cluster.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(0)));
    assert_ne!(
        deleting.step().kind(),
        StepKind::ApplyCertificate,
        "deletion first"
    );
}

/// A changed root password (etcd took the earlier one) is applied before anything else that
/// talks to etcd, and only then; without the Secret's password there is nothing to apply.
#[test]
fn a_changed_root_password_is_applied_first() {
    let mut fx = Fx::healthy(3);
    fx.status_mut().auth_enabled = Some(true);
    fx.obs.security.root_password = Some(crate::plan::Password("new".into()));
    fx.obs.security.root_password_outdated = true;
    fx.without_pod("etcd-2");
    assert_eq!(fx.step(), Step::ChangeRootPassword);
    let message = fx.step().message();
    assert!(
        !message.contains("new"),
        "the password is never in a message: {message}"
    );
    fx.obs.security.root_password_outdated = false;
    assert_eq!(fx.step().kind(), StepKind::CreatePod, "then the rest");
    fx.obs.security.root_password_outdated = true;
    fx.obs.security.root_password = None;
    assert_ne!(fx.step(), Step::ChangeRootPassword);
    // Paused: nothing, not even this.
    fx.obs.security.root_password = Some(crate::plan::Password("new".into()));
    fx.obs.cluster.spec.paused = Some(true);
    assert_ne!(fx.step(), Step::ChangeRootPassword);
}

/// A certificate in its last third of validity turns `CertificatesValid` False with the
/// Secret named, and a Warning Event is made once, when it turns; renewed, it is True again.
#[test]
fn an_expiring_certificate_is_a_false_condition_and_one_warning() {
    use crate::security::{CertificateValidity, Purpose};
    use etcd_operator_api::conditions::cluster::CERTIFICATES_VALID;
    use k8s_openapi::jiff::SignedDuration;

    let mut fx = Fx::healthy(3);
    fx.obs.cluster.metadata.uid = Some("uid".into());
    fx.obs.cluster.spec.tls = Some(Default::default());
    let days = |d: i64| {
        now()
            .saturating_add(SignedDuration::from_hours(24 * d))
            .unwrap()
    };
    fx.obs.security.validity = vec![CertificateValidity {
        secret: "etcd-peer".into(),
        what: Purpose::Peer.what(),
        not_before: days(-80),
        not_after: days(10),
        renew_at: None,
    }];
    let plan = fx.plan();
    let status = plan.cluster_status.clone().expect("the status changes");
    let condition = status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == CERTIFICATES_VALID)
        .expect("the condition")
        .clone();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "ExpiringSoon")
    );
    assert!(
        condition
            .message
            .contains("Secret etcd-peer (peer certificate) expires at")
    );
    let event = plan
        .certificates_event(&fx.obs, now())
        .expect("a Warning when it turns")
        .unwrap();
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reason.as_deref(), Some("CertificateExpiring"));

    // Already False: no new Event.
    fx.obs.cluster.status = Some(status);
    assert!(fx.plan().certificates_event(&fx.obs, now()).is_none());

    // Renewed: True again, no Event.
    fx.obs.security.validity[0].not_before = days(0);
    fx.obs.security.validity[0].not_after = days(90);
    let plan = fx.plan();
    let renewed = plan.cluster_status.clone().expect("the status changes");
    let condition = renewed
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == CERTIFICATES_VALID)
        .unwrap();
    assert_eq!(condition.status, "True");
    assert!(plan.certificates_event(&fx.obs, now()).is_none());

    // Without TLS, no such condition at all.
    fx.obs.cluster.spec.tls = None;
    fx.obs.cluster.status = None;
    let none = fx.plan().cluster_status.unwrap_or_default();
    assert!(
        none.conditions
            .unwrap_or_default()
            .iter()
            .all(|c| c.type_ != CERTIFICATES_VALID)
    );
}

/// Operator-issued certificates: the CA first, then each member's missing or due certificate in
/// member order, then the operator's; before the Secret problems and Pod creation (a Pod mounts
/// its member's certificate); nothing while the CA is blocked (its reason is a problem), and
/// deletion and pause still come first.
#[test]
fn operator_issued_certificates_are_issued_ca_first_then_members_then_the_operator() {
    use crate::plan::{IssuedCertificate, IssuedFacts, IssuedMember, IssuedState};

    let issued_step = |fx: &Fx| match fx.step() {
        Step::IssueCertificate { secret, what, why } => Some((secret, what, why)),
        _ => None,
    };
    let mut fx = Fx::empty(3);
    let member = |name: &str, state: IssuedState| IssuedMember {
        member: name.into(),
        uid: format!("uid-{name}"),
        state,
        by_previous: false,
        has_bundle: true,
    };
    fx.obs.security.issued = Some(IssuedFacts {
        ca: IssuedState::Missing,
        members: vec![],
        operator_client: Some(IssuedState::Missing),
        ..Default::default()
    });
    let (secret, what, _) = issued_step(&fx).expect("the CA is issued");
    assert_eq!((secret.as_str(), what), ("etcd-ca", IssuedCertificate::Ca));

    // The CA there, a member without its certificate and one due: the first in member order.
    let issued = fx.obs.security.issued.as_mut().unwrap();
    issued.ca = IssuedState::Current;
    issued.members = vec![
        member("etcd-0", IssuedState::Current),
        member("etcd-1", IssuedState::Due("renewal due".into())),
        member("etcd-2", IssuedState::Missing),
    ];
    let (secret, what, why) = issued_step(&fx).expect("a member's certificate is issued");
    assert_eq!(secret, "etcd-1-tls");
    assert_eq!(
        what,
        IssuedCertificate::Member {
            member: "etcd-1".into(),
            uid: "uid-etcd-1".into(),
            signer: crate::plan::Signer::Current,
        }
    );
    assert_eq!(why, "renewal due");
    // Before a Secret problem of another side, which would hold everything else back.
    fx.obs.security.problems = vec!["Secret peer not found".into()];
    assert_eq!(issued_step(&fx).unwrap().0, "etcd-1-tls");
    fx.obs.security.problems.clear();

    let issued = fx.obs.security.issued.as_mut().unwrap();
    issued.members[1].state = IssuedState::Current;
    assert_eq!(issued_step(&fx).unwrap().0, "etcd-2-tls");
    let issued = fx.obs.security.issued.as_mut().unwrap();
    issued.members[2].state = IssuedState::Current;
    let (secret, what, _) = issued_step(&fx).expect("the operator's certificate");
    assert_eq!(
        (secret.as_str(), what),
        (
            "etcd-operator-client-tls",
            IssuedCertificate::OperatorClient {
                signer: crate::plan::Signer::Current
            }
        )
    );
    let issued = fx.obs.security.issued.as_mut().unwrap();
    issued.operator_client = Some(IssuedState::Current);
    assert!(
        issued_step(&fx).is_none(),
        "all current: the cluster carries on"
    );
    assert_eq!(fx.step().kind(), StepKind::CreateMember);

    // A blocked CA issues nothing, whatever the members need; its problem is what waits.
    let issued = fx.obs.security.issued.as_mut().unwrap();
    issued.ca = IssuedState::Blocked;
    issued.members[0].state = IssuedState::Missing;
    fx.obs.security.problems = vec!["Secret etcd-ca (operator-issued CA) is gone".into()];
    assert!(issued_step(&fx).is_none());
    assert_eq!(wait_reason(&fx.step()), WaitReason::InvalidSecret);

    // Paused: nothing is issued.
    fx.obs.security.problems.clear();
    fx.obs.security.issued.as_mut().unwrap().ca = IssuedState::Missing;
    fx.obs.cluster.spec.paused = Some(true);
    assert!(issued_step(&fx).is_none(), "pause first");
}

/// A Pod whose trusted CAs differ from what its Secrets hold now is restarted on its data: one
/// at a time, only behind the readiness gate, followers first, the leader last with its
/// leadership moved away first; a Pod that recorded nothing (made by an older operator) is left
/// alone.
#[test]
fn changed_trust_restarts_pods_one_at_a_time_followers_first_leader_last() {
    let mut fx = Fx::healthy(3);
    fx.set_leader("etcd-0");
    for m in ["etcd-0", "etcd-1", "etcd-2"] {
        fx.pod_mut(m).trusted_ca = Some("old".into());
        fx.obs.security.trust.insert(m.into(), "old".into());
    }
    assert_eq!(fx.step(), Step::Idle, "nothing changed: nothing restarts");

    for m in ["etcd-0", "etcd-1", "etcd-2"] {
        fx.obs.security.trust.insert(m.into(), "new".into());
    }
    let plan = fx.plan();
    match &plan.step {
        Step::DeletePod { member, .. } => assert_eq!(member, "etcd-1", "a follower first"),
        other => panic!("{other:?}"),
    }
    let status = planned_member_status(&fx, &plan, "etcd-1");
    let ready = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .expect("a Ready condition");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "TrustChanged"),
        "Ready=False is written before the Pod goes"
    );

    // etcd-1 restarted (trusting the new CAs) but not yet Ready: the gate holds the next.
    fx.pod_mut("etcd-1").trusted_ca = Some("new".into());
    fx.pod_mut("etcd-1").ready = false;
    fx.set_phase("etcd-1", MemberPhase::Provisioning, at(0));
    assert_ne!(fx.step().kind(), StepKind::DeletePod, "one at a time");

    fx.pod_mut("etcd-1").ready = true;
    fx.set_phase("etcd-1", MemberPhase::Ready, at(0));
    match fx.step() {
        Step::DeletePod { member, .. } => assert_eq!(member, "etcd-2"),
        other => panic!("{other:?}"),
    }
    fx.pod_mut("etcd-2").trusted_ca = Some("new".into());
    // The leader last, its leadership moved away first.
    match fx.step() {
        Step::MoveLeader { from, .. } => assert_eq!(from.as_deref(), Some("etcd-0")),
        other => panic!("{other:?}"),
    }
    fx.set_leader("etcd-1");
    match fx.step() {
        Step::DeletePod { member, .. } => assert_eq!(member, "etcd-0"),
        other => panic!("{other:?}"),
    }
    // A Pod that recorded nothing is left alone.
    fx.pod_mut("etcd-0").trusted_ca = None;
    assert_eq!(fx.step(), Step::Idle);
}

/// A cert-manager Certificate that is not Ready while its Secret still holds a usable
/// certificate (renewal failing, e.g. its Issuer deleted) does not stop the cluster, but turns
/// `CertificatesValid` False with the Certificate's reason and when the certificate ends, with a
/// Warning Event `CertificateNotReady`.
#[test]
fn a_certificate_not_ready_over_a_usable_secret_is_reported_without_stopping() {
    use crate::plan::CertificateFacts;
    use crate::security::certmanager::wanted_certificates;
    use crate::security::{CertificateValidity, Purpose};
    use etcd_operator_api::cluster::{
        EtcdClusterTls, IssuerReference, PeerCertManagerTls, PeerTls,
    };
    use etcd_operator_api::conditions::cluster::CERTIFICATES_VALID;
    use k8s_openapi::jiff::SignedDuration;

    let mut fx = Fx::healthy(3);
    fx.obs.cluster.metadata.uid = Some("uid".into());
    fx.obs.cluster.spec.tls = Some(EtcdClusterTls {
        client: None,
        peer: Some(PeerTls {
            cert_manager: Some(PeerCertManagerTls {
                issuer_ref: IssuerReference {
                    name: "ca".into(),
                    kind: None,
                },
            }),
            ..Default::default()
        }),
    });
    let wanted = wanted_certificates(&fx.obs.cluster, "cluster.local").remove(0);
    let days = |d: i64| {
        now()
            .saturating_add(SignedDuration::from_hours(24 * d))
            .unwrap()
    };
    fx.obs.security.validity = vec![CertificateValidity {
        secret: wanted.secret_name.clone(),
        what: Purpose::Peer.what(),
        not_before: days(-10),
        not_after: days(80),
        renew_at: None,
    }];
    fx.obs.security.certificates = vec![CertificateFacts {
        wanted,
        exists: true,
        patch: None,
        not_ready: Some(
            "Certificate etcd-peer is not Ready (IssuerNotFound: ...); Issuer ca not found in namespace default: create it"
                .into(),
        ),
    }];
    let plan = fx.plan();
    assert_eq!(
        plan.step,
        Step::Idle,
        "nothing stops: the Secret still serves"
    );
    let status = plan.cluster_status.clone().expect("the status changes");
    let condition = status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == CERTIFICATES_VALID)
        .unwrap()
        .clone();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "CertificateNotReady")
    );
    assert!(
        condition.message.contains("Issuer ca not found"),
        "{}",
        condition.message
    );
    assert!(
        condition.message.contains("etcd-peer-tls still holds"),
        "{}",
        condition.message
    );
    let event = plan.certificates_event(&fx.obs, now()).unwrap().unwrap();
    assert_eq!(event.reason.as_deref(), Some("CertificateNotReady"));

    // Ready again: True.
    fx.obs.security.certificates[0].not_ready = None;
    fx.obs.cluster.status = Some(status);
    let status = fx.plan().cluster_status.expect("the status changes");
    let condition = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == CERTIFICATES_VALID)
        .unwrap();
    assert_eq!(condition.status, "True");
}

/// A memory-backed member whose trusted CAs changed is restarted (which replaces it) only when
/// the others keep quorum without it; a one-member memory-backed cluster waits with the reason
/// instead of losing its data.
#[test]
fn changed_trust_never_restarts_a_memory_member_the_others_cannot_do_without() {
    let mut fx = Fx::healthy(1);
    fx.make_memory_backed();
    fx.set_leader("etcd-0");
    fx.pod_mut("etcd-0").trusted_ca = Some("old".into());
    fx.obs.security.trust.insert("etcd-0".into(), "new".into());
    match fx.step() {
        Step::Wait {
            reason, message, ..
        } => {
            assert_eq!(reason, WaitReason::QuorumAtRisk);
            assert!(message.contains("memory-backed"), "{message}");
        }
        other => panic!("{other:?}"),
    }

    let mut fx = Fx::healthy(3);
    fx.make_memory_backed();
    fx.set_leader("etcd-0");
    for m in ["etcd-0", "etcd-1", "etcd-2"] {
        fx.pod_mut(m).trusted_ca = Some("old".into());
        fx.obs.security.trust.insert(m.into(), "new".into());
    }
    assert_eq!(
        fx.step().kind(),
        StepKind::DeletePod,
        "three members: one at a time"
    );
}
