//! Bootstrap from a snapshot: a failing restore of the seed's data directory stops the pass
//! with the agent's reason (the kubelet retries the init container by itself; nothing else
//! may act on a cluster that has not formed from its snapshot yet).

use crate::build::parse_restore_failure;
use crate::plan::context::Context;
use crate::plan::decision::{Decision, MemberEdit};
use crate::plan::step::WaitReason;
use crate::plan::timing;

/// A member's Pod whose restore init container fails now; or one restoring now, which
/// nothing may disturb (a large snapshot takes longer than the not-ready grace period, and
/// recreating the Pod would start the download over, forever).
pub fn restore_failed(ctx: &Context<'_>) -> Option<Decision> {
    ctx.members.iter().filter(|m| !m.deleting).find_map(|m| {
        let pod = m.observed.pod.as_ref().filter(|p| !p.deleting)?;
        if let Some(step) = pod.restoring.as_deref()
            && pod.restore_failure.is_none()
        {
            return Some(Decision::wait(
                WaitReason::WaitingForMember,
                format!(
                    "restoring {} from {} ({step})",
                    m.name,
                    restore_source_uri(ctx).unwrap_or_else(|| "its snapshot".to_string())
                ),
                timing::BLOCKED_POLL,
            ));
        }
        let line = pod.restore_failure.as_deref()?;
        let (reason, detail) = parse_restore_failure(line);
        let message = format!(
            "restoring {} from {} failed ({reason}): {detail}",
            m.name,
            restore_source_uri(ctx).unwrap_or_else(|| "its snapshot".to_string())
        );
        Some(
            Decision::wait(
                WaitReason::RestoreFailed,
                message.clone(),
                timing::BLOCKED_POLL,
            )
            .with(MemberEdit::new(m.name).not_ready("RestoreFailed", message)),
        )
    })
}

/// `s3://<bucket>/<key>`, `gs://...`, `azure://...` or `pvc://<claim>/<subPath>` of
/// `spec.bootstrap.restore`.
pub fn restore_source_uri(ctx: &Context<'_>) -> Option<String> {
    if let Some(r) = ctx
        .observed
        .cluster
        .status
        .as_ref()
        .and_then(|s| s.quorum_recovery.as_ref())
        .filter(|r| r.restoring_from_snapshot())
        .and_then(|r| r.snapshot.as_ref())
    {
        return Some(r.uri.clone());
    }
    let source = &ctx
        .observed
        .cluster
        .spec
        .bootstrap
        .as_ref()?
        .restore
        .as_ref()?
        .source;
    crate::domain::location::source_uri(source)
}
