//! Setting `metav1.Condition`s without churn: `lastTransitionTime` moves only when the status
//! flips, so a status computed twice from the same facts is equal and is not written again.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// A condition the planner wants, before timestamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub type_: &'static str,
    pub status: bool,
    /// The operator cannot tell (status `Unknown`; `status` is then ignored).
    pub unknown: bool,
    pub reason: String,
    pub message: String,
}

impl Wanted {
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: &str,
        message: impl Into<String>,
    ) -> Wanted {
        Wanted {
            type_,
            status,
            unknown: false,
            reason: reason.to_string(),
            message: message.into(),
        }
    }

    /// A condition whose status the operator cannot tell (`Unknown`), with why.
    pub fn unknown(type_: &'static str, reason: &str, message: impl Into<String>) -> Wanted {
        Wanted {
            unknown: true,
            ..Wanted::new(type_, false, reason, message)
        }
    }

    /// `True`, `False` or `Unknown`.
    pub fn status_text(&self) -> &'static str {
        match (self.unknown, self.status) {
            (true, _) => "Unknown",
            (false, true) => "True",
            (false, false) => "False",
        }
    }
}

/// Inserts or updates `wanted` in `conditions`.
pub fn set(
    conditions: &mut Vec<Condition>,
    wanted: Wanted,
    generation: Option<i64>,
    now: Timestamp,
) {
    let status = wanted.status_text().to_string();
    match conditions.iter_mut().find(|c| c.type_ == wanted.type_) {
        Some(existing) => {
            if existing.status != status {
                existing.last_transition_time = Time(now);
            }
            existing.status = status;
            existing.reason = wanted.reason;
            existing.message = wanted.message;
            existing.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: wanted.type_.to_string(),
            status,
            reason: wanted.reason,
            message: wanted.message,
            observed_generation: generation,
            last_transition_time: Time(now),
        }),
    }
}

/// The condition of `type_`, if present.
pub fn find<'a>(conditions: Option<&'a Vec<Condition>>, type_: &str) -> Option<&'a Condition> {
    conditions?.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let mut conditions = Vec::new();
        set(
            &mut conditions,
            Wanted::new("Ready", false, "A", "a"),
            Some(1),
            t0,
        );
        set(
            &mut conditions,
            Wanted::new("Ready", false, "B", "b"),
            Some(2),
            t1,
        );
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, Time(t0));
        assert_eq!(conditions[0].reason, "B");
        assert_eq!(conditions[0].observed_generation, Some(2));
        set(
            &mut conditions,
            Wanted::new("Ready", true, "C", "c"),
            Some(2),
            t1,
        );
        assert_eq!(conditions[0].last_transition_time, Time(t1));
        assert_eq!(conditions[0].status, "True");
    }
}
