//! [`ActError`]: why a status write or a step failed, typed by what the reconciler does next.

use std::time::Duration;

use crate::build::BuildError;
use crate::etcd::{EtcdError, EtcdErrorKind};
use crate::plan::retry_after;

/// How soon a MemberAdd or MemberRemove refused with `unhealthy cluster` is tried again.
pub const UNHEALTHY_CLUSTER_RETRY: Duration = Duration::from_millis(100);

/// How soon a Pod refused for a ServiceAccount not made yet is tried again: the ServiceAccount
/// controller makes a new namespace's `default` within a second or so.
pub const SERVICE_ACCOUNT_RETRY: Duration = Duration::from_millis(500);

/// A failed write or step. `what` names the object or call in the terms of the step.
#[derive(Debug, thiserror::Error)]
pub enum ActError {
    /// A resourceVersion or UID precondition failed: the object changed since it was observed
    /// (or a newer object took its name). Nothing was written; the next pass observes again.
    #[error("{what}: the object changed since it was observed; observing again")]
    Conflict {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// An object of that name already exists: the cache had not caught up, or someone else
    /// made it. The next pass reads it and decides.
    #[error("{what}: an object of that name already exists; observing again")]
    AlreadyExists {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// RBAC refused the request: the operator's ClusterRole lacks a permission.
    #[error(
        "{what}: forbidden: the operator's service account lacks this permission; apply the ClusterRole from deploy/rbac/ ({source})"
    )]
    Forbidden {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// A Pod refused because the ServiceAccount it runs as does not exist yet (kube-apiserver's
    /// ServiceAccount admission answers 403 "error looking up service account"): in a namespace
    /// just made, until its `default` ServiceAccount is made by kube-controller-manager. Not a
    /// permission the operator lacks (docs/testing.md, "What the real control plane showed", item 20).
    #[error(
        "{what}: the namespace has no ServiceAccount for the Pod yet (kube-controller-manager makes `default` shortly after a namespace is created; if this lasts, make the ServiceAccount the Pod runs as) ({source})"
    )]
    ServiceAccountMissing {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// The API server refused the object as invalid.
    #[error("{what}: the API server refused the object: {source}")]
    Invalid {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// Any other API failure (unreachable API server, timeouts, server errors).
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// etcd refused or did not answer the step's call.
    #[error(transparent)]
    Etcd(#[from] EtcdError),
    /// An etcd step with no voter to send it to (the planner never plans one).
    #[error("{what}: no healthy voter to send it to")]
    NoEndpoint { what: String },
    /// The plan names an object this pass did not observe (the planner never does).
    #[error("{what}: not among the observed objects")]
    NotObserved { what: String },
    /// An object could not be built.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// An operator-issued certificate could not be made (its CA unusable, a name that is no
    /// DNS name).
    #[error("issuing a certificate: {why}")]
    Certificate { why: String },
}

impl ActError {
    /// Classifies a Kubernetes API error by its HTTP status.
    pub fn from_kube(what: impl Into<String>, source: kube::Error) -> ActError {
        let what = what.into();
        match status_code(&source) {
            Some(409) if reason(&source) == Some("AlreadyExists") => {
                ActError::AlreadyExists { what, source }
            }
            Some(409) => ActError::Conflict { what, source },
            Some(403) if looks_up_a_missing_service_account(&source) => {
                ActError::ServiceAccountMissing { what, source }
            }
            Some(403) => ActError::Forbidden { what, source },
            Some(422) | Some(400) => ActError::Invalid { what, source },
            _ => ActError::Api { what, source },
        }
    }

    /// A short stable label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            ActError::Conflict { .. } => "conflict",
            ActError::AlreadyExists { .. } => "already_exists",
            ActError::Forbidden { .. } => "forbidden",
            ActError::ServiceAccountMissing { .. } => "service_account_missing",
            ActError::Invalid { .. } => "invalid",
            ActError::Api { .. } => "api",
            ActError::Etcd(e) => etcd_kind_label(e.kind),
            ActError::NoEndpoint { .. } => "no_endpoint",
            ActError::NotObserved { .. } => "not_observed",
            ActError::Build(_) => "build",
            ActError::Certificate { .. } => "certificate",
        }
    }

    /// When to try again: soon for what the next observation resolves (a stale read, etcd's
    /// short refusals), `None` for what needs the growing backoff.
    ///
    /// `unhealthy cluster` on MemberAdd lasts until every voter has been connected for etcd's
    /// 5-second health interval, i.e. it ends at a moment the operator cannot observe; each
    /// retry is one cheap call, so it is retried every [`UNHEALTHY_CLUSTER_RETRY`] to join
    /// the next member as close to that moment as a script would.
    pub fn prompt_retry(&self) -> Option<Duration> {
        match self {
            ActError::Conflict { .. } | ActError::AlreadyExists { .. } => {
                Some(Duration::from_millis(100))
            }
            ActError::ServiceAccountMissing { .. } => Some(SERVICE_ACCOUNT_RETRY),
            ActError::Etcd(e) if e.kind == EtcdErrorKind::UnhealthyCluster => {
                Some(UNHEALTHY_CLUSTER_RETRY)
            }
            ActError::Etcd(e)
                if e.kind.is_transient() || e.kind == EtcdErrorKind::TooManyLearners =>
            {
                Some(retry_after(e.kind))
            }
            _ => None,
        }
    }
}

/// The HTTP status of an API error, if the server answered.
pub fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

fn reason(error: &kube::Error) -> Option<&str> {
    match error {
        kube::Error::Api(status) => Some(status.reason.as_str()),
        _ => None,
    }
}

/// A 403 from kube-apiserver's ServiceAccount admission: the Pod's ServiceAccount was not
/// found (`error looking up service account <ns>/<name>: serviceaccount "<name>" not found`).
fn looks_up_a_missing_service_account(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => {
            status.message.contains("error looking up service account")
                && status.message.contains("not found")
        }
        _ => false,
    }
}

/// Whether the API said 404.
pub fn is_not_found(error: &kube::Error) -> bool {
    status_code(error) == Some(404)
}

fn etcd_kind_label(kind: EtcdErrorKind) -> &'static str {
    match kind {
        EtcdErrorKind::Timeout => "etcd_timeout",
        EtcdErrorKind::Unreachable => "etcd_unreachable",
        EtcdErrorKind::UnhealthyCluster => "etcd_unhealthy_cluster",
        EtcdErrorKind::TooManyLearners => "etcd_too_many_learners",
        EtcdErrorKind::LearnerNotInSync => "etcd_learner_not_in_sync",
        EtcdErrorKind::MemberNotLearner => "etcd_member_not_learner",
        EtcdErrorKind::MemberNotFound => "etcd_member_not_found",
        EtcdErrorKind::PeerUrlExists => "etcd_peer_url_exists",
        EtcdErrorKind::NotLeader => "etcd_not_leader",
        EtcdErrorKind::NoLeader => "etcd_no_leader",
        EtcdErrorKind::BadLeaderTransferee => "etcd_bad_leader_transferee",
        EtcdErrorKind::NotSupportedForLearner => "etcd_not_supported_for_learner",
        EtcdErrorKind::NoSpace => "etcd_no_space",
        EtcdErrorKind::Corrupt => "etcd_corrupt",
        EtcdErrorKind::ServerTimeout => "etcd_server_timeout",
        EtcdErrorKind::DowngradeInProgress => "etcd_downgrade_in_progress",
        EtcdErrorKind::NoDowngradeInProgress => "etcd_no_downgrade_in_progress",
        EtcdErrorKind::InvalidDowngradeTarget => "etcd_invalid_downgrade_target",
        EtcdErrorKind::PermissionDenied => "etcd_permission_denied",
        EtcdErrorKind::InvalidArgument => "etcd_invalid_argument",
        EtcdErrorKind::Other => "etcd_other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status::failure("refused", reason).with_code(code)))
    }

    #[test]
    fn api_errors_are_classified_by_status_and_reason() {
        let conflict = ActError::from_kube("EtcdCluster a", api_error(409, "Conflict"));
        assert_eq!(conflict.kind(), "conflict");
        assert!(conflict.prompt_retry().is_some());
        let exists = ActError::from_kube("Pod a-0", api_error(409, "AlreadyExists"));
        assert_eq!(exists.kind(), "already_exists");
        let forbidden = ActError::from_kube("Pod a-0", api_error(403, "Forbidden"));
        assert_eq!(forbidden.kind(), "forbidden");
        assert!(forbidden.prompt_retry().is_none());
        assert!(forbidden.to_string().contains("deploy/rbac/"));
        assert_eq!(
            ActError::from_kube("x", api_error(422, "Invalid")).kind(),
            "invalid"
        );
        assert_eq!(
            ActError::from_kube("x", api_error(500, "InternalError")).kind(),
            "api"
        );
        assert!(is_not_found(&api_error(404, "NotFound")));
    }

    #[test]
    fn short_etcd_refusals_retry_promptly() {
        let unhealthy = ActError::Etcd(EtcdError {
            call: "MemberAdd",
            endpoints: "http://a:2379".into(),
            kind: EtcdErrorKind::UnhealthyCluster,
            detail: "etcdserver: unhealthy cluster".into(),
        });
        assert_eq!(unhealthy.kind(), "etcd_unhealthy_cluster");
        assert_eq!(unhealthy.prompt_retry(), Some(UNHEALTHY_CLUSTER_RETRY));
        let other = ActError::Etcd(EtcdError {
            call: "MemberAdd",
            endpoints: "http://a:2379".into(),
            kind: EtcdErrorKind::PermissionDenied,
            detail: "denied".into(),
        });
        assert!(other.prompt_retry().is_none());
    }

    /// The refusal kube-apiserver v1.37.2 sent the 1,000-cluster benchmark for a Pod made
    /// right after its namespace: a 403, but no permission is missing.
    #[test]
    fn a_pod_refused_for_a_service_account_not_made_yet_is_not_called_a_missing_permission() {
        let refusal = Status::failure(
            "pods \"etcd-0\" is forbidden: error looking up service account idle-139/default: serviceaccount \"default\" not found",
            "Forbidden",
        )
        .with_code(403);
        let error = ActError::from_kube(
            "creating Pod idle-139/etcd-0",
            kube::Error::Api(Box::new(refusal)),
        );
        assert_eq!(error.kind(), "service_account_missing");
        assert_eq!(error.prompt_retry(), Some(SERVICE_ACCOUNT_RETRY));
        let message = error.to_string();
        assert!(!message.contains("lacks this permission"), "{message}");
        assert!(
            message.contains("no ServiceAccount for the Pod yet"),
            "{message}"
        );
        // Any other 403 is still RBAC's.
        let rbac = Status::failure(
            "pods is forbidden: User \"system:serviceaccount:x:y\" cannot create resource \"pods\"",
            "Forbidden",
        )
        .with_code(403);
        assert_eq!(
            ActError::from_kube("creating Pod a/etcd-0", kube::Error::Api(Box::new(rbac))).kind(),
            "forbidden"
        );
    }
}
