//! How full each cluster's fullest backend was at its previous pass, so that a cluster filling
//! fast is looked at before it nears its quota ([`fill_look`]): etcd raises NOSPACE without any
//! Kubernetes event, and a cluster at rest is otherwise looked at only every
//! [`crate::plan::IDLE_POLL`]. Memory only: after a restart (or a leader change) the
//! first pass has nothing to compare with, and the plan's own poll applies until the second.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::plan::{FillSample, fill_look};

/// The previous pass's fill per cluster (namespace, name).
#[derive(Default)]
pub struct FillHistory {
    samples: Mutex<HashMap<(String, String), FillSample>>,
}

impl FillHistory {
    /// Records this pass's `fill` (`None` when no member answered: the history is dropped, a
    /// rate across an outage means nothing) and returns how soon to look again if sooner
    /// than the plan says.
    pub fn look_sooner(
        &self,
        namespace: &str,
        name: &str,
        fill: Option<f64>,
        now: Timestamp,
    ) -> Option<Duration> {
        let mut samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        let key = (namespace.to_string(), name.to_string());
        let Some(fill) = fill else {
            samples.remove(&key);
            return None;
        };
        let current = FillSample { at: now, fill };
        let before = samples.insert(key, current);
        fill_look(before, current)
    }

    /// Forgets a cluster that is gone.
    pub fn forget(&self, namespace: &str, name: &str) {
        let mut samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        samples.remove(&(namespace.to_string(), name.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_each_pass_with_the_previous_one_of_the_same_cluster() {
        let history = FillHistory::default();
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t30 = t0 + Duration::from_secs(30);
        assert_eq!(history.look_sooner("ns", "a", Some(0.1), t0), None);
        assert_eq!(history.look_sooner("ns", "b", Some(0.7), t0), None);
        // a: 10 % → 40 % in 30 s, 40 s to 80 %: looked at in 20 s.
        assert_eq!(
            history.look_sooner("ns", "a", Some(0.4), t30),
            Some(Duration::from_secs(20))
        );
        // b did not grow.
        assert_eq!(history.look_sooner("ns", "b", Some(0.7), t30), None);
        // An outage drops the history: the next answer starts over.
        assert_eq!(history.look_sooner("ns", "a", None, t30), None);
        let t60 = t0 + Duration::from_secs(60);
        assert_eq!(history.look_sooner("ns", "a", Some(0.7), t60), None);
        history.forget("ns", "b");
        assert_eq!(history.look_sooner("ns", "b", Some(0.75), t60), None);
    }
}
