//! The start instruction of each member's Pod, kept safe as the member's life goes on.
//!
//! A Pod's command is fixed when it is created, but a data directory can be lost under a
//! running Pod (a wiped or replaced volume) and the kubelet then restarts etcd in the same Pod.
//! So etcd reads `--initial-cluster` and `--initial-cluster-state` from the Pod's annotations
//! at each start (the downward API), and this rule moves them to
//! [`StartKind::OwnData`] as soon as a member has started: from then on a start on an empty
//! data directory cannot bootstrap a new cluster (the seed's `new`) nor rejoin under the old
//! member ID (a joiner's list); etcd exits instead, and rule 7 replaces the member.
//!
//! It runs before every rule that could depend on it (repairs, joins, promotions); a learner
//! is promoted only once its Pod carries the instruction. Instructions only ever move towards
//! `OwnData`, and only on positive evidence (etcd lists the member as started, which it does
//! only once the member's data directory is initialized), so an operator crash between any
//! two steps, or an etcd that does not answer, leaves every Pod at least as safe as before.

use crate::build::{PodStart, StartKind};
use crate::plan::context::{Context, MemberView};
use crate::plan::decision::Decision;
use crate::plan::step::Step;

/// The first member whose live Pod still carries `Bootstrap` or `Join` although etcd lists it
/// as started: its instruction becomes `OwnData`.
pub fn pod_start_instructions(ctx: &Context<'_>) -> Option<Decision> {
    ctx.members.iter().find_map(|m| {
        let pod = m.observed.pod.as_ref()?;
        if pod.deleting || pod.phase.is_terminal() {
            return None;
        }
        let current = pod.start.as_ref()?;
        let started = m.etcd.is_some_and(|e| e.has_started());
        (started && current.kind(m.name) != StartKind::OwnData).then(|| {
            Decision::act(Step::SetPodStart {
                member: m.name.to_string(),
                pod: pod.name.clone(),
                start: PodStart::own_data(m.name, &m.peer_url),
            })
        })
    })
}

/// Whether `m`'s Pod restarts only on its own data (a Pod of an older operator, without the
/// annotations, has its start fixed in its command line: nothing to wait for).
pub fn restarts_on_own_data_only(m: &MemberView<'_>) -> bool {
    m.observed.pod.as_ref().is_none_or(|p| {
        p.start
            .as_ref()
            .is_none_or(|s| s.kind(m.name) == StartKind::OwnData)
    })
}
