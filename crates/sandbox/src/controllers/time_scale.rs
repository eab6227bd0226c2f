//! The sandbox-wide time scale: every lifecycle duration of the control plane is multiplied by
//! it, so a test can live through a 5-minute eviction timeout in 3 seconds.

use std::time::Duration;

/// A factor applied to cluster durations to get the real durations the control plane waits.
///
/// Scaled: node monitor period and grace period, eviction timeout and `tolerationSeconds`,
/// `activeDeadlineSeconds`, `ttlSecondsAfterFinished`, the Job's failure backoff,
/// `minReadySeconds` and `progressDeadlineSeconds`, and the scheduler's retry period.
/// Timestamps written to objects stay wall-clock times; only the waits shrink.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeScale(f64);

/// A time scale that is not a positive finite number.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error(
    "the time scale must be a positive finite number (1.0 is real time, 0.01 is 100 times faster), got {0}"
)]
pub struct InvalidTimeScale(pub f64);

impl TimeScale {
    /// Real time: every duration as Kubernetes defines it.
    pub const REAL: Self = Self(1.0);

    pub fn new(factor: f64) -> Result<Self, InvalidTimeScale> {
        if factor.is_finite() && factor > 0.0 {
            Ok(Self(factor))
        } else {
            Err(InvalidTimeScale(factor))
        }
    }

    pub fn factor(&self) -> f64 {
        self.0
    }

    /// The real duration of a cluster duration.
    pub fn scale(&self, cluster: Duration) -> Duration {
        cluster.mul_f64(self.0)
    }

    /// The real duration of a number of cluster seconds (negative counts as zero).
    pub fn seconds(&self, seconds: i64) -> Duration {
        self.scale(Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
    }

    /// A cluster duration as a signed span, for arithmetic with timestamps.
    pub fn span(&self, cluster: Duration) -> jiff::SignedDuration {
        jiff::SignedDuration::try_from(self.scale(cluster)).unwrap_or(jiff::SignedDuration::MAX)
    }

    /// `seconds` cluster seconds as a signed span.
    pub fn span_seconds(&self, seconds: i64) -> jiff::SignedDuration {
        self.span(Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
    }
}

impl Default for TimeScale {
    fn default() -> Self {
        Self::REAL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_cluster_durations_and_refuses_nonsense() {
        let scale = TimeScale::new(0.01).unwrap();
        assert_eq!(scale.seconds(300), Duration::from_secs(3));
        assert_eq!(scale.seconds(-5), Duration::ZERO);
        assert_eq!(scale.span_seconds(100), jiff::SignedDuration::from_secs(1));
        assert_eq!(
            TimeScale::default().scale(Duration::from_secs(7)),
            Duration::from_secs(7)
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(TimeScale::new(bad).is_err(), "{bad} refused");
        }
        assert!(
            TimeScale::new(0.0)
                .unwrap_err()
                .to_string()
                .contains("positive finite")
        );
    }
}
