//! What the operator can and cannot see of each member, and what it concludes (pure).
//!
//! The operator reaches etcd over the network like any client, so "etcd did not answer me"
//! says as much about the operator's own path as about the member. It therefore never repairs
//! a member for what only it sees, and tells apart, for each running voter:
//!
//! - **isolated**: the member answers Status (its process runs, its data is there) but serves
//!   nothing (no leader known, or a log that lags the leader's) while a majority of the voters
//!   serves without it: cut off from its peers by the network. Recreating its Pod or replacing
//!   it would not reconnect it, and a replacement would throw away a healthy copy of the data;
//!   it is reported (its Ready condition `Isolated`, the cluster's Degraded condition
//!   `MemberIsolated`, a Warning Event) and never recreated or replaced for being isolated,
//!   however long it lasts;
//! - **hidden from the operator**: the member does not answer the operator, but its Pod is
//!   Ready (the kubelet's readiness probe, etcd's own `/health`, passes from the node): the
//!   operator is the one cut off. Reported, never repaired for it;
//! - **silent**: it does not answer and its Pod is not Ready either: hung, crashed, or down.
//!   The repair ladder of rule 7 applies (after the grace period).
//!
//! And for the cluster: when no member answers at all while the voters' Pods are Ready, the
//! operator is cut off from the whole cluster (`EtcdUnreachable`): the Available and Degraded
//! conditions turn `Unknown` with what it cannot see, and nothing is changed until it sees
//! etcd again.

use super::context::{Context, Health, MemberView};

/// How one running voter looks from the operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sight {
    /// Served a linearizable read.
    Serving,
    /// Answers Status, serves nothing, while a majority of the voters serves without it.
    Isolated {
        /// The leader it knows (`None`: none, it is looking for one).
        leader: Option<u64>,
        /// Its raft index, and how far it lags the leader's, when the leader answered.
        raft_index: u64,
        behind: Option<u64>,
    },
    /// Does not answer the operator while its Pod is Ready.
    HiddenFromOperator,
    /// Does not answer, and its Pod is not Ready (or it has none).
    Silent,
    /// Anything else: a learner, a member not asked, a voter without quorum while no majority
    /// serves (rule 8's business), a member etcd does not list.
    Other,
}

/// How the operator sees running voter `m`.
pub fn sight(ctx: &Context<'_>, m: &MemberView<'_>) -> Sight {
    if !m.is_voter() && ctx.observed.etcd.members.is_ok() {
        return Sight::Other;
    }
    let pod_ready = m.pod_ready();
    match m.health {
        Health::Healthy => Sight::Serving,
        Health::NoQuorum if m.is_voter() && ctx.others_have_quorum(m.id) => {
            let Some(status) = m.id.and_then(|id| ctx.observed.etcd.status_of(id)) else {
                return Sight::Other;
            };
            let leader_index = ctx
                .observed
                .etcd
                .leader()
                .filter(|l| Some(*l) != m.id)
                .and_then(|l| ctx.observed.etcd.status_of(l))
                .map(|s| s.raft_index);
            Sight::Isolated {
                leader: (status.leader != 0).then_some(status.leader),
                raft_index: status.raft_index,
                behind: leader_index.map(|l| l.saturating_sub(status.raft_index)),
            }
        }
        Health::Down if pod_ready => Sight::HiddenFromOperator,
        Health::Down => Sight::Silent,
        _ => Sight::Other,
    }
}

/// Whether `m` is isolated from its peers (see [`Sight::Isolated`]).
pub fn isolated(ctx: &Context<'_>, m: &MemberView<'_>) -> bool {
    matches!(sight(ctx, m), Sight::Isolated { .. })
}

/// What an isolated member shows, in words that stay the same while it lasts (they go into
/// conditions, which are written only when they change).
pub fn isolation_detail(sight: Sight) -> String {
    match sight {
        Sight::Isolated { leader: None, .. } => "it answers but knows no leader".to_string(),
        Sight::Isolated {
            behind: Some(n), ..
        } if n > 0 => "it answers but serves no read, and its log lags the leader's".to_string(),
        Sight::Isolated { .. } => "it answers but serves no read".to_string(),
        _ => String::new(),
    }
}

/// The figures of an isolated member (its raft index, how far behind the leader), for the
/// Event that reports it.
pub fn isolation_figures(sight: Sight) -> String {
    match sight {
        Sight::Isolated {
            raft_index,
            behind: Some(n),
            ..
        } => format!("raft index {raft_index}, {n} entries behind the leader"),
        Sight::Isolated { raft_index, .. } => format!("raft index {raft_index}"),
        _ => String::new(),
    }
}

/// The operator is cut off from the whole cluster: no endpoint answered, while a quorum of the
/// voters' Pods is Ready. `Some((ready, voters))` then.
pub fn operator_cut_off(ctx: &Context<'_>) -> Option<(usize, usize)> {
    let etcd = &ctx.observed.etcd;
    if etcd.endpoints.is_empty() || etcd.endpoints.iter().any(|o| o.status.is_ok()) {
        return None;
    }
    let voters: Vec<&MemberView<'_>> = ctx
        .running()
        .filter(|m| {
            m.observed.member.status.as_ref().and_then(|s| s.is_voter) == Some(true) || m.is_voter()
        })
        .collect();
    let ready = voters.iter().filter(|m| m.pod_ready()).count();
    (!voters.is_empty() && ready as u32 >= etcd_operator_api::labels::quorum(voters.len() as u32))
        .then_some((ready, voters.len()))
}

/// The sentence the status and the wait give when the operator is cut off from the cluster.
pub fn cut_off_message(ctx: &Context<'_>, ready: usize, voters: usize) -> String {
    let names: Vec<&str> = ctx.running().map(|m| m.name).collect();
    format!(
        "the operator cannot reach any member ({}), but {ready}/{voters} voters' Pods are Ready (the kubelet's checks of etcd's /health pass): the operator is cut off from the cluster's network, not the cluster from its clients. Nothing is changed until it sees etcd again; check the network between the operator's Pod and the members",
        names.join(", ")
    )
}
