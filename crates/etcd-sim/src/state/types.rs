//! The plain values the simulated cluster answers with.

/// An etcd member ID.
pub type MemberId = u64;

/// The alarms etcd raises (etcdserverpb.AlarmType, without NONE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlarmKind {
    /// The backend exceeded its quota (`--quota-backend-bytes`).
    NoSpace,
    /// The corruption check found diverged data.
    Corrupt,
}

impl AlarmKind {
    /// etcd's name of the alarm type, as it prints it.
    pub fn name(self) -> &'static str {
        match self {
            AlarmKind::NoSpace => "NOSPACE",
            AlarmKind::Corrupt => "CORRUPT",
        }
    }

    /// The enum's number in etcdserverpb.AlarmType.
    pub fn number(self) -> i32 {
        match self {
            AlarmKind::NoSpace => 1,
            AlarmKind::Corrupt => 2,
        }
    }

    /// The kind of an etcdserverpb.AlarmType number; `None` for NONE and unknown numbers.
    pub fn from_number(number: i32) -> Option<AlarmKind> {
        match number {
            1 => Some(AlarmKind::NoSpace),
            2 => Some(AlarmKind::Corrupt),
            _ => None,
        }
    }
}

/// An active alarm: the member it is raised for, and its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Alarm {
    /// The member the alarm is for.
    pub member_id: MemberId,
    /// What was raised.
    pub kind: AlarmKind,
}

impl Alarm {
    /// The alarm as etcd's Status lists it in `errors` (the protobuf text form of its
    /// `AlarmMember`).
    pub fn status_error(&self) -> String {
        format!("memberID:{} alarm:{} ", self.member_id, self.kind.name())
    }
}

/// What an Alarm call asks for (etcdserverpb.AlarmRequest.AlarmAction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlarmAction {
    /// List the active alarms (of one kind, or all when the kind is NONE).
    Get,
    /// Raise an alarm.
    Activate,
    /// Clear an alarm.
    Deactivate,
}

/// One entry of the member list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// etcd's member ID.
    pub id: MemberId,
    /// Its `--name`; empty until a member added by MemberAdd has started and published it.
    pub name: String,
    /// Its peer URLs, sorted (etcd keeps them sorted).
    pub peer_urls: Vec<String>,
    /// Its client URLs; empty until it has started and published them.
    pub client_urls: Vec<String>,
    /// Whether it is a raft learner (a non-voting member).
    pub is_learner: bool,
}

impl Member {
    /// etcd's `IsStarted`: the member has a name.
    pub fn is_started(&self) -> bool {
        !self.name.is_empty()
    }
}

/// The header of every response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// The cluster's ID.
    pub cluster_id: u64,
    /// The ID of the member that answered.
    pub member_id: MemberId,
    /// The key-value store's revision.
    pub revision: i64,
    /// The raft term the answering member knows.
    pub raft_term: u64,
}

/// What a member's Status says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The response header (cluster and member ID, revision, term).
    pub header: Header,
    /// The server version, e.g. `3.6.17`.
    pub version: String,
    /// The storage schema version, e.g. `3.6.0`.
    pub storage_version: String,
    /// The backend's physical size in bytes.
    pub db_size: i64,
    /// The bytes of the backend in use (the rest a defragmentation reclaims).
    pub db_size_in_use: i64,
    /// The backend quota in bytes (`--quota-backend-bytes`).
    pub db_size_quota: i64,
    /// The leader this member knows; 0 for none.
    pub leader: MemberId,
    /// The committed raft index.
    pub raft_index: u64,
    /// The applied raft index.
    pub raft_applied_index: u64,
    /// The raft term.
    pub raft_term: u64,
    /// Whether this member is a learner.
    pub is_learner: bool,
    /// `etcdserver: no leader` when it knows none, then one entry per active alarm.
    pub errors: Vec<String>,
}

/// The parts of a Range request the simulator reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RangeQuery {
    /// Served from the member's own state, without asking the leader (allowed on learners).
    pub serializable: bool,
    /// The revision to read at; 0 or less for the newest.
    pub revision: i64,
}
