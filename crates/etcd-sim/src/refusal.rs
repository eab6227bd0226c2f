//! etcd's refusals: each with the gRPC status code and the exact message etcd 3.6 sends
//! (api/v3rpc/rpctypes/error.go, and server/etcdserver/errors for the few errors that reach
//! the client through `togRPCError` as `codes.Unknown` with their own text). The codes of
//! the refusals `tests/compare_with_etcd.rs` provokes are checked against etcd 3.6.17 there.
//!
//! The operator classifies etcd's errors by message first and code second
//! (`crates/operator/src/etcd/error.rs`), so both must be etcd's to the letter.

use std::fmt;

/// The gRPC status codes etcd's refusals use (a subset of gRPC's; numbers are gRPC's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// 2
    Unknown,
    /// 3
    InvalidArgument,
    /// 5
    NotFound,
    /// 8
    ResourceExhausted,
    /// 9
    FailedPrecondition,
    /// 11
    OutOfRange,
    /// 14
    Unavailable,
    /// 15
    DataLoss,
}

impl Code {
    /// The code's number in the gRPC protocol.
    pub fn number(self) -> i32 {
        match self {
            Code::Unknown => 2,
            Code::InvalidArgument => 3,
            Code::NotFound => 5,
            Code::ResourceExhausted => 8,
            Code::FailedPrecondition => 9,
            Code::OutOfRange => 11,
            Code::Unavailable => 14,
            Code::DataLoss => 15,
        }
    }
}

/// A refusal of a call, as etcd words it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// `ErrGRPCNotSupportedForLearner`: a learner serves only Status and serializable Range.
    NotSupportedForLearner,
    /// `ErrGRPCMemberBadURLs`: a peer URL that does not parse as `http(s)://host:port`.
    MemberBadUrls,
    /// `ErrMemberNotEnoughStarted`: the change would leave fewer started voters than quorum.
    NotEnoughStarted,
    /// `ErrGRPCUnhealthy`: some voter has not been connected to the serving member for etcd's
    /// 5-second health interval.
    Unhealthy,
    /// `ErrGRPCMemberExist`: the ID (derived from the peer URLs and the second) is taken.
    MemberExist,
    /// `ErrGRPCPeerURLExist`: a member already has one of these peer URLs.
    PeerUrlExist,
    /// `ErrGRPCTooManyLearners`: etcd allows one learner at a time.
    TooManyLearners,
    /// `ErrGRPCMemberNotFound`: no such member (also one removed before).
    MemberNotFound,
    /// `ErrGRPCLearnerNotReady`: the learner has not caught up with the leader.
    LearnerNotReady,
    /// `ErrGRPCMemberNotLearner`: promoting a voter.
    MemberNotLearner,
    /// `ErrGRPCNotLeader`: MoveLeader sent to a member that does not lead.
    NotLeader,
    /// `ErrGRPCBadLeaderTransferee`: MoveLeader to a learner or an unknown member.
    BadLeaderTransferee,
    /// `ErrTimeoutLeaderTransfer`: the transferee did not take over in time (not in etcd's
    /// gRPC error map, so `codes.Unknown` with the server error's text).
    LeaderTransferTimeout,
    /// `ErrGRPCNoLeader`.
    NoLeader,
    /// `ErrGRPCTimeout`: what a call that needs consensus gets when there is no quorum.
    Timeout,
    /// `ErrGRPCCompacted`.
    Compacted,
    /// `ErrGRPCFutureRev`.
    FutureRev,
    /// `ErrGRPCNoSpace`: a write under the NOSPACE alarm.
    NoSpace,
    /// `ErrGRPCCorrupt`: under the CORRUPT alarm.
    Corrupt,
    /// `ErrGRPCStopped`: the member was removed from its cluster and stopped serving.
    Stopped,
}

impl Refusal {
    /// Every refusal, for tests that check the table.
    pub const ALL: [Refusal; 20] = [
        Refusal::NotSupportedForLearner,
        Refusal::MemberBadUrls,
        Refusal::NotEnoughStarted,
        Refusal::Unhealthy,
        Refusal::MemberExist,
        Refusal::PeerUrlExist,
        Refusal::TooManyLearners,
        Refusal::MemberNotFound,
        Refusal::LearnerNotReady,
        Refusal::MemberNotLearner,
        Refusal::NotLeader,
        Refusal::BadLeaderTransferee,
        Refusal::LeaderTransferTimeout,
        Refusal::NoLeader,
        Refusal::Timeout,
        Refusal::Compacted,
        Refusal::FutureRev,
        Refusal::NoSpace,
        Refusal::Corrupt,
        Refusal::Stopped,
    ];

    /// The gRPC code etcd answers with.
    pub fn code(self) -> Code {
        match self {
            Refusal::Unhealthy | Refusal::NoLeader | Refusal::Timeout | Refusal::Stopped => {
                Code::Unavailable
            }
            Refusal::MemberBadUrls => Code::InvalidArgument,
            // etcd maps this one to its client-side error value, not a gRPC status, so gRPC
            // sends it as Unknown (seen from etcd 3.6.17 by tests/compare_with_etcd.rs).
            Refusal::NotEnoughStarted | Refusal::LeaderTransferTimeout => Code::Unknown,
            // FailedPrecondition in etcd 3.6 (3.4 and 3.5 sent Unavailable).
            Refusal::NotSupportedForLearner
            | Refusal::MemberExist
            | Refusal::PeerUrlExist
            | Refusal::TooManyLearners
            | Refusal::LearnerNotReady
            | Refusal::MemberNotLearner
            | Refusal::NotLeader
            | Refusal::BadLeaderTransferee => Code::FailedPrecondition,
            Refusal::MemberNotFound => Code::NotFound,
            Refusal::Compacted | Refusal::FutureRev => Code::OutOfRange,
            Refusal::NoSpace => Code::ResourceExhausted,
            Refusal::Corrupt => Code::DataLoss,
        }
    }

    /// etcd's message, verbatim.
    pub fn message(self) -> &'static str {
        match self {
            Refusal::NotSupportedForLearner => "etcdserver: rpc not supported for learner",
            Refusal::MemberBadUrls => "etcdserver: given member URLs are invalid",
            Refusal::NotEnoughStarted => {
                "etcdserver: re-configuration failed due to not enough started members"
            }
            Refusal::Unhealthy => "etcdserver: unhealthy cluster",
            Refusal::MemberExist => "etcdserver: member ID already exist",
            Refusal::PeerUrlExist => "etcdserver: Peer URLs already exists",
            Refusal::TooManyLearners => "etcdserver: too many learner members in cluster",
            Refusal::MemberNotFound => "etcdserver: member not found",
            Refusal::LearnerNotReady => {
                "etcdserver: can only promote a learner member which is in sync with leader"
            }
            Refusal::MemberNotLearner => "etcdserver: can only promote a learner member",
            Refusal::NotLeader => "etcdserver: not leader",
            Refusal::BadLeaderTransferee => "etcdserver: bad leader transferee",
            Refusal::LeaderTransferTimeout => {
                "etcdserver: request timed out, leader transfer took too long"
            }
            Refusal::NoLeader => "etcdserver: no leader",
            Refusal::Timeout => "etcdserver: request timed out",
            Refusal::Compacted => "etcdserver: mvcc: required revision has been compacted",
            Refusal::FutureRev => "etcdserver: mvcc: required revision is a future revision",
            Refusal::NoSpace => "etcdserver: mvcc: database space exceeded",
            Refusal::Corrupt => "etcdserver: corrupt cluster",
            Refusal::Stopped => "etcdserver: server stopped",
        }
    }

    /// Whether etcd answers this only after waiting out its request timeout (a proposal that
    /// no quorum commits), so a faithful server should not answer it at once.
    pub fn is_slow(self) -> bool {
        matches!(self, Refusal::Timeout | Refusal::LeaderTransferTimeout)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Refusal {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_is_etcds_server_prefix_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for r in Refusal::ALL {
            assert!(r.message().starts_with("etcdserver: "), "{r:?}");
            assert!(
                seen.insert(r.message()),
                "duplicate message {}",
                r.message()
            );
        }
    }

    #[test]
    fn codes_match_etcds_table() {
        // A few spot checks against rpctypes/error.go, the ones the operator branches on.
        assert_eq!(Refusal::MemberNotFound.code().number(), 5);
        assert_eq!(Refusal::TooManyLearners.code().number(), 9);
        assert_eq!(Refusal::Unhealthy.code().number(), 14);
        assert_eq!(Refusal::NoSpace.code().number(), 8);
        assert_eq!(Refusal::Corrupt.code().number(), 15);
        assert_eq!(Refusal::MemberBadUrls.code().number(), 3);
    }
}
