//! The kubelet's restart back-off, as client-go's `flowcontrol.Backoff` gives it to the kubelet:
//! the first restart is immediate, then 10 s, doubling up to 5 min; a container that last
//! restarted more than twice the maximum ago starts over. The same policy (other bounds) paces
//! image pulls (`ImagePullBackOff`). Durations are real ones: the caller scales them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::controllers::TimeScale;

/// The kubelet's `--container restart` back-off: 10 s initial, 5 min maximum.
pub const CRASH_LOOP_INITIAL: Duration = Duration::from_secs(10);
pub const CRASH_LOOP_MAX: Duration = Duration::from_secs(300);

/// Back-off per key (a container of a Pod, or an image).
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    entries: HashMap<String, Entry>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    backoff: Duration,
    last_update: Instant,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            entries: HashMap::new(),
        }
    }

    /// The kubelet's CrashLoopBackOff and ImagePullBackOff bounds, shortened by `scale`.
    pub fn kubelet(scale: TimeScale) -> Self {
        Self::new(scale.scale(CRASH_LOOP_INITIAL), scale.scale(CRASH_LOOP_MAX))
    }

    fn expired(&self, entry: &Entry, at: Instant) -> bool {
        at.saturating_duration_since(entry.last_update) > self.max * 2
    }

    /// How much longer `key` must wait before restarting after an event (the container's end)
    /// at `event`; `None` when it may restart now.
    pub fn remaining(&self, key: &str, event: Instant, now: Instant) -> Option<Duration> {
        let entry = self.entries.get(key)?;
        if self.expired(entry, event) {
            return None;
        }
        let waited = now.saturating_duration_since(event);
        (waited < entry.backoff).then(|| entry.backoff - waited)
    }

    /// Records a restart at `now`: the next one waits twice as long (up to the maximum).
    pub fn next(&mut self, key: &str, now: Instant) {
        let initial = self.initial;
        let max = self.max;
        let fresh = Entry {
            backoff: initial,
            last_update: now,
        };
        match self.entries.get(key).copied() {
            Some(entry) if !self.expired(&entry, now) => {
                self.entries.insert(
                    key.to_string(),
                    Entry {
                        backoff: (entry.backoff * 2).min(max),
                        last_update: now,
                    },
                );
            }
            _ => {
                self.entries.insert(key.to_string(), fresh);
            }
        }
    }

    /// The current back-off of `key` (what the `back-off 10s restarting ...` message says).
    pub fn current(&self, key: &str) -> Option<Duration> {
        self.entries.get(key).map(|entry| entry.backoff)
    }

    /// Forgets `key` (its container succeeded for good, or the Pod is gone).
    pub fn forget(&mut self, key: &str) {
        self.entries.remove(key);
    }
}

/// `10s`, `2m40s`, `5m0s`: a duration as Go's `time.Duration.String` prints whole seconds.
pub fn go_duration(duration: Duration) -> String {
    let total = duration.as_secs_f64();
    if total < 1.0 {
        return format!("{}ms", duration.as_millis());
    }
    let seconds = duration.as_secs();
    let (hours, minutes, rest) = (seconds / 3600, (seconds % 3600) / 60, seconds % 60);
    let fraction = duration.subsec_millis();
    let rest = if fraction == 0 {
        format!("{rest}s")
    } else {
        format!("{rest}.{}s", format!("{fraction:03}").trim_end_matches('0'))
    };
    match (hours, minutes) {
        (0, 0) => rest,
        (0, minutes) => format!("{minutes}m{rest}"),
        (hours, minutes) => format!("{hours}h{minutes}m{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_restart_is_immediate_then_doubles_to_the_maximum() {
        let mut backoff = Backoff::new(Duration::from_secs(10), Duration::from_secs(300));
        let start = Instant::now();
        assert_eq!(backoff.remaining("c", start, start), None);
        backoff.next("c", start);
        // It crashed again 1 s later: 10 s from that crash.
        let crash = start + Duration::from_secs(1);
        assert_eq!(
            backoff.remaining("c", crash, crash),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            backoff.remaining("c", crash, crash + Duration::from_secs(4)),
            Some(Duration::from_secs(6))
        );
        assert_eq!(
            backoff.remaining("c", crash, crash + Duration::from_secs(10)),
            None
        );
        let mut at = crash + Duration::from_secs(10);
        let mut seen = Vec::new();
        for _ in 0..7 {
            backoff.next("c", at);
            seen.push(backoff.current("c").unwrap().as_secs());
            at += Duration::from_secs(1);
        }
        assert_eq!(seen, [20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn a_long_healthy_run_starts_the_backoff_over() {
        let mut backoff = Backoff::new(Duration::from_secs(10), Duration::from_secs(300));
        let start = Instant::now();
        for step in 0..5 {
            backoff.next("c", start + Duration::from_secs(step));
        }
        assert_eq!(backoff.current("c"), Some(Duration::from_secs(160)));
        let much_later = start + Duration::from_secs(700);
        assert_eq!(backoff.remaining("c", much_later, much_later), None);
        backoff.next("c", much_later);
        assert_eq!(backoff.current("c"), Some(Duration::from_secs(10)));
        backoff.forget("c");
        assert_eq!(backoff.current("c"), None);
    }

    #[test]
    fn time_scale_shortens_the_bounds() {
        let mut backoff = Backoff::kubelet(TimeScale::new(0.01).unwrap());
        let now = Instant::now();
        backoff.next("c", now);
        assert_eq!(backoff.current("c"), Some(Duration::from_millis(100)));
    }

    #[test]
    fn durations_print_as_go_does() {
        assert_eq!(go_duration(Duration::from_secs(10)), "10s");
        assert_eq!(go_duration(Duration::from_secs(160)), "2m40s");
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_millis(100)), "100ms");
    }
}
