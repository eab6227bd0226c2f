//! Taint-based eviction, pure: when a Pod on a node with NoExecute taints must go, as the taint
//! eviction controller decides it from the Pod's tolerations.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, Taint, Toleration};

use crate::controllers::TimeScale;
use crate::scheduler::taints::{NO_EXECUTE, NOT_READY, UNREACHABLE, tolerates};

/// When a Pod is to be evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// It tolerates every NoExecute taint of its node for ever (or there are none).
    Never,
    /// At this time (now or in the past: at once).
    At(Timestamp),
}

/// The tolerations the DefaultTolerationSeconds admission plugin would have added: not-ready
/// and unreachable NoExecute for `default_seconds`, unless the Pod tolerates them itself.
fn with_default_tolerations(pod: &Pod, default_seconds: i64) -> Vec<Toleration> {
    let mut tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    for key in [NOT_READY, UNREACHABLE] {
        let probe = Taint {
            key: key.to_string(),
            effect: NO_EXECUTE.to_string(),
            value: None,
            time_added: None,
        };
        if !tolerations.iter().any(|t| tolerates(t, &probe)) {
            tolerations.push(Toleration {
                key: Some(key.to_string()),
                operator: Some("Exists".to_string()),
                effect: Some(NO_EXECUTE.to_string()),
                toleration_seconds: Some(default_seconds),
                value: None,
            });
        }
    }
    tolerations
}

/// When `pod` must leave a node tainted with `taints`: at once if a NoExecute taint is not
/// tolerated, else when the shortest `tolerationSeconds` among the tolerations in use has
/// passed since the newest NoExecute taint was added (scaled), or never if none is bounded.
pub fn eviction_time(
    pod: &Pod,
    taints: &[Taint],
    default_toleration: Duration,
    scale: TimeScale,
    now: Timestamp,
) -> Eviction {
    let no_execute: Vec<&Taint> = taints.iter().filter(|t| t.effect == NO_EXECUTE).collect();
    if no_execute.is_empty() {
        return Eviction::Never;
    }
    let default_seconds = i64::try_from(default_toleration.as_secs()).unwrap_or(i64::MAX);
    let tolerations = with_default_tolerations(pod, default_seconds);
    let mut shortest: Option<i64> = None;
    for taint in &no_execute {
        let used: Vec<&Toleration> = tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if used.is_empty() {
            return Eviction::At(now);
        }
        for seconds in used.iter().filter_map(|t| t.toleration_seconds) {
            shortest = Some(shortest.map_or(seconds, |s| s.min(seconds)));
        }
    }
    let Some(seconds) = shortest else {
        return Eviction::Never;
    };
    let since = no_execute
        .iter()
        .filter_map(|t| t.time_added.as_ref().map(|t| t.0))
        .max()
        .unwrap_or(now);
    Eviction::At(since + scale.span_seconds(seconds.max(0)))
}
