//! Bounded exponential backoff per EtcdCluster for failures that the next observation does not
//! fix by itself (RBAC, an invalid object, an unreachable API server).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// The first delay; it doubles with each consecutive failure up to [`MAX_DELAY`].
pub const BASE_DELAY: Duration = Duration::from_millis(500);
pub const MAX_DELAY: Duration = Duration::from_secs(60);

/// Consecutive failures per cluster (namespace, name).
#[derive(Default)]
pub struct Backoff {
    failures: Mutex<HashMap<(String, String), u32>>,
}

impl Backoff {
    /// Records a failure; returns the delay before the next attempt.
    pub fn failed(&self, namespace: &str, name: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let count = failures
            .entry((namespace.to_string(), name.to_string()))
            .or_insert(0);
        *count = count.saturating_add(1);
        delay(*count)
    }

    /// Forgets the failures of a cluster that reconciled.
    pub fn succeeded(&self, namespace: &str, name: &str) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        failures.remove(&(namespace.to_string(), name.to_string()));
    }
}

/// The delay after `failures` consecutive failures.
pub fn delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    BASE_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_doubles_and_is_bounded() {
        assert_eq!(delay(1), BASE_DELAY);
        assert_eq!(delay(2), BASE_DELAY * 2);
        assert_eq!(delay(100), MAX_DELAY);
    }

    #[test]
    fn success_resets_the_count() {
        let backoff = Backoff::default();
        assert_eq!(backoff.failed("ns", "a"), BASE_DELAY);
        assert_eq!(backoff.failed("ns", "a"), BASE_DELAY * 2);
        assert_eq!(backoff.failed("ns", "b"), BASE_DELAY);
        backoff.succeeded("ns", "a");
        assert_eq!(backoff.failed("ns", "a"), BASE_DELAY);
    }
}
