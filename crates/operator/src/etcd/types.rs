//! Plain values for what etcd reports. They carry no connection, so the planner and its tests
//! build them freely.

use std::fmt;

/// One entry of etcd's member list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberInfo {
    /// etcd's member ID. Our API spells it in hex, see [`member_id_hex`].
    pub id: u64,
    /// The member's `--name`; empty until a member added with MemberAdd has started.
    pub name: String,
    pub peer_urls: Vec<String>,
    /// Empty until the member has started and published itself.
    pub client_urls: Vec<String>,
    pub is_learner: bool,
}

impl MemberInfo {
    /// Whether this member has started and published its name (MemberAdd registers only the
    /// peer URLs; the name and client URLs appear once the process joins).
    pub fn has_started(&self) -> bool {
        !self.name.is_empty()
    }
}

/// What the maintenance Status RPC of one endpoint says about the member serving it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointStatus {
    /// The ID of the member that answered (from the response header).
    pub member_id: u64,
    pub cluster_id: u64,
    /// The etcd server version, e.g. `3.5.1`.
    pub version: String,
    /// Physical size of the backend database file.
    pub db_size: i64,
    /// Bytes of the backend in use (etcd 3.4+ `dbSizeInUse`); the rest is reclaimable by defrag.
    pub db_size_in_use: i64,
    /// The leader as this member sees it; 0 means it knows no leader.
    pub leader: u64,
    pub raft_index: u64,
    pub raft_applied_index: u64,
    pub raft_term: u64,
    /// The store's revision in the response header.
    pub revision: i64,
    pub is_learner: bool,
    /// Errors the member reports about itself (e.g. an active alarm), verbatim.
    pub errors: Vec<String>,
    /// The version of the member's storage schema (etcd 3.6+, e.g. `3.6.0`; a downgrade
    /// migrates it to the target); `None` from 3.4 and 3.5, which do not report it.
    pub storage_version: Option<String>,
    /// etcd's downgrade as this member knows it (etcd 3.6+; `None` from 3.4 and 3.5).
    pub downgrade: Option<Downgrade>,
}

/// A downgrade as a member's Status reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Downgrade {
    /// A downgrade is enabled: etcd runs at the target's protocol until every member runs it,
    /// then its leader ends it.
    pub enabled: bool,
    /// `MAJOR.MINOR.0` of the target; empty when none is enabled.
    pub target_version: String,
}

/// The kinds of alarm etcd raises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AlarmKind {
    /// The backend exceeded `--quota-backend-bytes`; writes are refused until space is
    /// reclaimed (compact, defrag) and the alarm is disarmed.
    NoSpace,
    /// A member's data diverged from the others (corruption check failed).
    Corrupt,
}

impl AlarmKind {
    /// Every alarm type etcd raises.
    pub const ALL: [AlarmKind; 2] = [AlarmKind::NoSpace, AlarmKind::Corrupt];
}

impl fmt::Display for AlarmKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AlarmKind::NoSpace => "NOSPACE",
            AlarmKind::Corrupt => "CORRUPT",
        })
    }
}

/// An active alarm: which member raised it, and what kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Alarm {
    pub member_id: u64,
    pub kind: AlarmKind,
}

impl fmt::Display for Alarm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on member {}",
            self.kind,
            member_id_hex(self.member_id)
        )
    }
}

impl Alarm {
    /// The alarms a member lists in its Status (`errors`), each written by etcd as
    /// `memberID:<decimal id> alarm:NOSPACE` (the text form of its `AlarmMember`). Other errors
    /// (`etcdserver: no leader`) and unknown alarm types are skipped. Sorted.
    pub fn from_status_errors(errors: &[String]) -> Vec<Alarm> {
        let mut alarms: Vec<Alarm> = errors
            .iter()
            .filter_map(|e| {
                let mut member_id = None;
                let mut kind = None;
                for field in e.split_whitespace() {
                    match field.split_once(':') {
                        Some(("memberID", id)) => member_id = id.parse::<u64>().ok(),
                        Some(("alarm", "NOSPACE")) => kind = Some(AlarmKind::NoSpace),
                        Some(("alarm", "CORRUPT")) => kind = Some(AlarmKind::Corrupt),
                        _ => {}
                    }
                }
                Some(Alarm {
                    member_id: member_id?,
                    kind: kind?,
                })
            })
            .collect();
        alarms.sort();
        alarms.dedup();
        alarms
    }
}

/// The result of MemberAdd: the new member's ID and the member list etcd returned with it
/// (which includes the new member, so the initial cluster of its Pod can be built from it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberAdded {
    pub id: u64,
    pub members: Vec<MemberInfo>,
}

/// Member IDs are u64 in etcd and lowercase hex, without padding, in our API.
pub fn member_id_hex(id: u64) -> String {
    format!("{id:x}")
}

/// Parses a member ID written by [`member_id_hex`] (or zero-padded, as the Go operator
/// writes it). `None` for anything that is not hex or is zero (etcd never assigns 0).
pub fn parse_member_id(hex: &str) -> Option<u64> {
    let trimmed = hex.trim();
    if trimmed.is_empty() || trimmed.len() > 16 {
        return None;
    }
    u64::from_str_radix(trimmed, 16).ok().filter(|id| *id != 0)
}

/// The current revision and whether everything below it is compacted away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compaction {
    pub revision: i64,
    pub compacted: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_id_round_trips_through_hex() {
        for id in [1u64, 0xae36_f238_164a_08ad, u64::MAX] {
            assert_eq!(parse_member_id(&member_id_hex(id)), Some(id));
        }
        assert_eq!(member_id_hex(0xab), "ab");
    }

    #[test]
    fn parse_member_id_accepts_padding_and_rejects_garbage() {
        assert_eq!(parse_member_id("00000000000000ab"), Some(0xab));
        assert_eq!(parse_member_id(""), None);
        assert_eq!(parse_member_id("0"), None);
        assert_eq!(parse_member_id("xyz"), None);
        assert_eq!(parse_member_id("1ffffffffffffffff"), None);
    }

    #[test]
    fn alarms_are_read_from_a_status_errors_list() {
        let errors = vec![
            "etcdserver: no leader".to_string(),
            "memberID:1234 alarm:NOSPACE ".to_string(),
            "memberID:99 alarm:CORRUPT".to_string(),
            "memberID:7 alarm:SOMETHINGNEW".to_string(),
            "alarm:NOSPACE".to_string(),
        ];
        assert_eq!(
            Alarm::from_status_errors(&errors),
            vec![
                Alarm {
                    member_id: 99,
                    kind: AlarmKind::Corrupt
                },
                Alarm {
                    member_id: 1234,
                    kind: AlarmKind::NoSpace
                },
            ]
        );
        assert!(Alarm::from_status_errors(&[]).is_empty());
    }
}
