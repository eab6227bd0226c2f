//! Errors from etcd, typed by what the caller does about them.
//!
//! etcd reports most refusals as gRPC statuses whose message is one of its `rpctypes` strings
//! (`etcdserver: unhealthy cluster`, ...). The message is the stable part of that contract
//! (the gRPC code is shared by several refusals), so the kind is derived from it.

use std::fmt;
use std::time::Duration;

/// What went wrong, in the terms the planner and `act` branch on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EtcdErrorKind {
    /// The call did not finish within its timeout (nothing answered, or too slowly).
    Timeout,
    /// No connection could be made, or the connection broke.
    Unreachable,
    /// `etcdserver: unhealthy cluster`: MemberAdd and MemberRemove are refused until every
    /// voter has been connected to the leader for etcd's 5-second health interval (so also for
    /// ~5 s after a new leader takes over, e.g. after MoveLeader), and MemberRemove whenever it
    /// would leave fewer started voters than quorum. Transient after a start or a leader change:
    /// retry promptly.
    UnhealthyCluster,
    /// `etcdserver: too many learner members in cluster`: etcd allows one learner at a time.
    TooManyLearners,
    /// `can only promote a learner member which is in sync with leader`: wait and retry.
    LearnerNotInSync,
    /// `can only promote a learner member`: the member is already a voter.
    MemberNotLearner,
    /// `etcdserver: member not found`: already removed, or never added.
    MemberNotFound,
    /// `etcdserver: Peer URLs already exists`: a member with these peer URLs is registered.
    /// Also `member ID already exist`, which is what etcd says when the same peer URLs are
    /// added twice within a second (it derives the ID from the URLs and the time in seconds).
    PeerUrlExists,
    /// `etcdserver: not leader`: the call (MoveLeader) must go to the leader.
    NotLeader,
    /// `etcdserver: no leader`, or `leader changed`: an election is in progress.
    NoLeader,
    /// `etcdserver: bad leader transferee`: MoveLeader to a learner or unknown member.
    BadLeaderTransferee,
    /// `etcdserver: rpc not supported for learner`: the endpoint serving the call is a learner.
    NotSupportedForLearner,
    /// `mvcc: database space exceeded`: the NOSPACE alarm is active.
    NoSpace,
    /// `etcdserver: corrupt cluster`: the CORRUPT alarm is active.
    Corrupt,
    /// `etcdserver: request timed out` and similar server-side deadline errors.
    ServerTimeout,
    /// `etcdserver: cluster has a downgrade job in progress`: Downgrade VALIDATE or ENABLE while
    /// a downgrade is enabled.
    DowngradeInProgress,
    /// `etcdserver: no inflight downgrade job`: Downgrade CANCEL with none enabled.
    NoDowngradeInProgress,
    /// `etcdserver: invalid downgrade target version`: not exactly one minor below etcd's
    /// cluster version.
    InvalidDowngradeTarget,
    /// Authentication or permission errors.
    PermissionDenied,
    /// The arguments were refused (bad URL, empty endpoint list).
    InvalidArgument,
    /// Anything else; the message says what.
    Other,
}

impl EtcdErrorKind {
    /// Whether retrying the same call soon can succeed without anything else changing first.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            EtcdErrorKind::Timeout
                | EtcdErrorKind::Unreachable
                | EtcdErrorKind::UnhealthyCluster
                | EtcdErrorKind::LearnerNotInSync
                | EtcdErrorKind::NoLeader
                | EtcdErrorKind::ServerTimeout
        )
    }

    fn describe(self) -> &'static str {
        match self {
            EtcdErrorKind::Timeout => "timed out",
            EtcdErrorKind::Unreachable => "unreachable",
            EtcdErrorKind::UnhealthyCluster => "cluster not healthy enough for a membership change",
            EtcdErrorKind::TooManyLearners => "too many learners",
            EtcdErrorKind::LearnerNotInSync => "learner not yet in sync with the leader",
            EtcdErrorKind::MemberNotLearner => "member is not a learner",
            EtcdErrorKind::MemberNotFound => "member not found",
            EtcdErrorKind::PeerUrlExists => "peer URL already registered",
            EtcdErrorKind::NotLeader => "not the leader",
            EtcdErrorKind::NoLeader => "no leader",
            EtcdErrorKind::BadLeaderTransferee => "bad leader transferee",
            EtcdErrorKind::NotSupportedForLearner => "not supported by a learner",
            EtcdErrorKind::NoSpace => "database space exceeded (NOSPACE alarm)",
            EtcdErrorKind::Corrupt => "corrupt cluster (CORRUPT alarm)",
            EtcdErrorKind::ServerTimeout => "etcd timed out serving the request",
            EtcdErrorKind::DowngradeInProgress => "a downgrade is already enabled",
            EtcdErrorKind::NoDowngradeInProgress => "no downgrade in progress",
            EtcdErrorKind::InvalidDowngradeTarget => "not a downgrade target etcd allows",
            EtcdErrorKind::PermissionDenied => "permission denied",
            EtcdErrorKind::InvalidArgument => "invalid argument",
            EtcdErrorKind::Other => "failed",
        }
    }
}

impl fmt::Display for EtcdErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// An etcd call that failed: which call, against which endpoints, what kind, and etcd's text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("etcd {call} via {endpoints}: {kind}: {detail}")]
pub struct EtcdError {
    /// The RPC, e.g. `MemberAdd`.
    pub call: &'static str,
    /// The endpoints the call was sent to, comma-separated.
    pub endpoints: String,
    pub kind: EtcdErrorKind,
    /// etcd's (or the transport's) own message.
    pub detail: String,
}

impl EtcdError {
    pub(crate) fn new(
        call: &'static str,
        endpoints: &[String],
        kind: EtcdErrorKind,
        detail: impl Into<String>,
    ) -> Self {
        EtcdError {
            call,
            endpoints: endpoints.join(","),
            kind,
            detail: detail.into(),
        }
    }

    pub(crate) fn timeout(call: &'static str, endpoints: &[String], after: Duration) -> Self {
        EtcdError::new(
            call,
            endpoints,
            EtcdErrorKind::Timeout,
            format!("no answer within {} ms", after.as_millis()),
        )
    }

    /// Classifies an `etcd-client` error.
    pub(crate) fn from_client(
        call: &'static str,
        endpoints: &[String],
        err: etcd_client::Error,
    ) -> Self {
        let (kind, detail) = match &err {
            etcd_client::Error::GRpcStatus(status) => {
                let message = status.message().to_string();
                let kind = classify_message(&message).unwrap_or(match status.code() {
                    tonic::Code::Unavailable => EtcdErrorKind::Unreachable,
                    tonic::Code::DeadlineExceeded => EtcdErrorKind::Timeout,
                    tonic::Code::PermissionDenied | tonic::Code::Unauthenticated => {
                        EtcdErrorKind::PermissionDenied
                    }
                    tonic::Code::InvalidArgument => EtcdErrorKind::InvalidArgument,
                    tonic::Code::NotFound => EtcdErrorKind::MemberNotFound,
                    _ => EtcdErrorKind::Other,
                });
                (kind, format!("{:?}: {message}", status.code()))
            }
            etcd_client::Error::TransportError(e) => (EtcdErrorKind::Unreachable, error_chain(e)),
            etcd_client::Error::IoError(e) => (EtcdErrorKind::Unreachable, e.to_string()),
            etcd_client::Error::InvalidArgs(m) => (EtcdErrorKind::InvalidArgument, m.clone()),
            etcd_client::Error::InvalidUri(e) => (EtcdErrorKind::InvalidArgument, e.to_string()),
            other => (EtcdErrorKind::Other, other.to_string()),
        };
        EtcdError::new(call, endpoints, kind, detail)
    }
}

/// Maps etcd's `rpctypes` messages to kinds. Longer messages first where one is a prefix of
/// another (`can only promote a learner member` / `... which is in sync with leader`).
pub(crate) fn classify_message(message: &str) -> Option<EtcdErrorKind> {
    const TABLE: &[(&str, EtcdErrorKind)] = &[
        ("unhealthy cluster", EtcdErrorKind::UnhealthyCluster),
        (
            "re-configuration failed due to not enough started members",
            EtcdErrorKind::UnhealthyCluster,
        ),
        ("too many learner members", EtcdErrorKind::TooManyLearners),
        (
            "which is in sync with leader",
            EtcdErrorKind::LearnerNotInSync,
        ),
        (
            "can only promote a learner member",
            EtcdErrorKind::MemberNotLearner,
        ),
        ("member not found", EtcdErrorKind::MemberNotFound),
        ("peer urls already exists", EtcdErrorKind::PeerUrlExists),
        ("member id already exist", EtcdErrorKind::PeerUrlExists),
        ("not leader", EtcdErrorKind::NotLeader),
        ("no leader", EtcdErrorKind::NoLeader),
        ("leader changed", EtcdErrorKind::NoLeader),
        ("bad leader transferee", EtcdErrorKind::BadLeaderTransferee),
        (
            "not supported for learner",
            EtcdErrorKind::NotSupportedForLearner,
        ),
        ("database space exceeded", EtcdErrorKind::NoSpace),
        ("corrupt cluster", EtcdErrorKind::Corrupt),
        ("request timed out", EtcdErrorKind::ServerTimeout),
        (
            "downgrade job in progress",
            EtcdErrorKind::DowngradeInProgress,
        ),
        (
            "no inflight downgrade job",
            EtcdErrorKind::NoDowngradeInProgress,
        ),
        (
            "invalid downgrade target version",
            EtcdErrorKind::InvalidDowngradeTarget,
        ),
        ("permission denied", EtcdErrorKind::PermissionDenied),
        ("authentication failed", EtcdErrorKind::PermissionDenied),
        ("user name is empty", EtcdErrorKind::PermissionDenied),
        ("invalid auth token", EtcdErrorKind::PermissionDenied),
        (
            "given member urls are invalid",
            EtcdErrorKind::InvalidArgument,
        ),
    ];
    let lower = message.to_ascii_lowercase();
    TABLE
        .iter()
        .find(|(needle, _)| lower.contains(needle))
        .map(|(_, kind)| *kind)
}

/// The transport error's text with its sources, which carry the useful part
/// (`connection refused`, `dns error`).
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_etcd_refusals_by_message() {
        let cases = [
            (
                "etcdserver: unhealthy cluster",
                EtcdErrorKind::UnhealthyCluster,
            ),
            (
                "etcdserver: too many learner members in cluster",
                EtcdErrorKind::TooManyLearners,
            ),
            (
                "etcdserver: can only promote a learner member which is in sync with leader",
                EtcdErrorKind::LearnerNotInSync,
            ),
            (
                "etcdserver: can only promote a learner member",
                EtcdErrorKind::MemberNotLearner,
            ),
            (
                "etcdserver: member not found",
                EtcdErrorKind::MemberNotFound,
            ),
            (
                "etcdserver: Peer URLs already exists",
                EtcdErrorKind::PeerUrlExists,
            ),
            ("etcdserver: not leader", EtcdErrorKind::NotLeader),
            ("etcdserver: no leader", EtcdErrorKind::NoLeader),
            (
                "etcdserver: rpc not supported for learner",
                EtcdErrorKind::NotSupportedForLearner,
            ),
            (
                "etcdserver: mvcc: database space exceeded",
                EtcdErrorKind::NoSpace,
            ),
            ("etcdserver: corrupt cluster", EtcdErrorKind::Corrupt),
            (
                "etcdserver: bad leader transferee",
                EtcdErrorKind::BadLeaderTransferee,
            ),
        ];
        for (message, kind) in cases {
            assert_eq!(classify_message(message), Some(kind), "{message}");
        }
        assert_eq!(classify_message("something new"), None);
    }

    #[test]
    fn grpc_status_is_classified_by_message_then_code() {
        let eps = vec!["http://a:2379".to_string()];
        let unhealthy = EtcdError::from_client(
            "MemberAdd",
            &eps,
            etcd_client::Error::GRpcStatus(tonic::Status::unavailable(
                "etcdserver: unhealthy cluster",
            )),
        );
        assert_eq!(unhealthy.kind, EtcdErrorKind::UnhealthyCluster);
        assert!(unhealthy.kind.is_transient());
        assert!(
            unhealthy
                .to_string()
                .contains("MemberAdd via http://a:2379")
        );

        let refused = EtcdError::from_client(
            "Status",
            &eps,
            etcd_client::Error::GRpcStatus(tonic::Status::unavailable("connection refused")),
        );
        assert_eq!(refused.kind, EtcdErrorKind::Unreachable);
    }
}
