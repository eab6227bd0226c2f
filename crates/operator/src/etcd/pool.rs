//! [`EtcdConnections`]: the operator's connections to etcd's members, kept from one pass to the
//! next.
//!
//! Without it every pass dialled every member anew: a TCP (and TLS) handshake per member for
//! Status, another with an `Authenticate` (a raft proposal) per voter for the health read once
//! authentication is on, and one more for the member list. Kept connections make a settled
//! cluster's pass a handful of requests on open connections.
//!
//! One connection per member endpoint, shared by the anonymous client (Status, which learners
//! answer) and one client per set of credentials (the health read and cluster calls). An entry
//! is dialled again when:
//! - the TLS material differs (a rotated CA or client certificate is used from the next pass on,
//!   as before: [`EtcdAccess`] is built from the Secrets at every observation);
//! - the credentials differ (a changed password authenticates anew; the old client is kept
//!   beside it, since a pass may try the previous password too);
//! - a call on it failed at the transport (unreachable, timed out) or was refused its
//!   credentials: [`EtcdConnections::forget`] drops it, so the next pass dials as if for the
//!   first time and a member that went away fails as fast, with the same kind, as it always did;
//! - it went unused for [`IDLE_LIMIT`] (a deleted cluster's or a removed member's);
//! - the pool holds more than its limit ([`EtcdConnections::with_limit`], the operator's
//!   `--etcd-connections-kept`) after a dial, or at a sweep: the least recently used entries
//!   go, down to nine tenths of the limit, but never one used in the last [`IN_USE`] (a
//!   pass's own calls share it).
//!
//! Each kept connection costs about 62 KiB of the gRPC stack's buffers (docs/benchmarks.md,
//! "What a kept etcd connection costs"): the limit bounds that memory, at the price of a dial
//! per member per look for the clusters whose entries were let go.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::access::{ClientTls, EtcdAccess};
use super::client::{EtcdClient, Timeouts, dial_channel};
use super::error::{EtcdError, EtcdErrorKind};

/// An entry unused this long is closed. Every cluster is observed at least every 30 s (the
/// idle requeue), so only the connections of members and clusters that are gone reach it.
pub const IDLE_LIMIT: Duration = Duration::from_secs(120);

/// How often at most the idle entries are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// The default limit of kept entries (`--etcd-connections-kept`): 333 clusters of 3 members
/// keep all of theirs, in about 62 MiB.
pub const DEFAULT_KEPT: usize = 1000;

/// An entry used this recently is never let go for the limit: the calls of one pass (Status,
/// the health read, the member list, the next step's call) share it.
pub const IN_USE: Duration = Duration::from_secs(10);

/// Credentials kept per endpoint: the Secret's and one other (a previous password being tried).
const CREDENTIALS_KEPT: usize = 2;

/// Kept connections, by endpoint URL. Cheap to share (`Arc`); every method takes `&self`.
pub struct EtcdConnections {
    entries: Mutex<Entries>,
    dials: AtomicU64,
    authentications: AtomicU64,
    evictions: AtomicU64,
    limit: usize,
    in_use: Duration,
}

impl Default for EtcdConnections {
    fn default() -> Self {
        EtcdConnections::with_limit(DEFAULT_KEPT)
    }
}

/// The kept entries, and when the idle ones were last dropped.
#[derive(Default)]
struct Entries {
    by_endpoint: HashMap<String, Entry>,
    swept: Option<Instant>,
}

impl Entries {
    /// Drops the entries unused for [`IDLE_LIMIT`], and the least recently used past `limit`
    /// (see [`over_limit`]), at most once per [`SWEEP_EVERY`]: a lookup costs one hash probe,
    /// not a scan of every endpoint (thousands at scale). The entries let go for the limit.
    fn sweep(&mut self, now: Instant, limit: usize, in_use: Duration) -> usize {
        if !sweep_due(self.swept, now) {
            return 0;
        }
        self.swept = Some(now);
        self.by_endpoint
            .retain(|_, e| now.duration_since(e.used) < IDLE_LIMIT);
        self.enforce_limit(now, limit, in_use)
    }

    /// Lets the least recently used entries go while more than `limit` are kept; how many went.
    fn enforce_limit(&mut self, now: Instant, limit: usize, in_use: Duration) -> usize {
        if self.by_endpoint.len() <= limit {
            return 0;
        }
        let used: Vec<(&str, Instant)> = self
            .by_endpoint
            .iter()
            .map(|(endpoint, entry)| (endpoint.as_str(), entry.used))
            .collect();
        let gone: Vec<String> = over_limit(used, limit, in_use, now)
            .into_iter()
            .map(str::to_string)
            .collect();
        for endpoint in &gone {
            self.by_endpoint.remove(endpoint);
        }
        gone.len()
    }
}

/// Whether the idle entries are to be looked for, last looked for at `swept`.
fn sweep_due(swept: Option<Instant>, now: Instant) -> bool {
    swept.is_none_or(|at| now.duration_since(at) >= SWEEP_EVERY)
}

struct Entry {
    tls: Option<ClientTls>,
    timeouts: Timeouts,
    channel: tonic::transport::Channel,
    anonymous: EtcdClient,
    /// Clients with credentials over the same channel, most recently used last.
    authenticated: Vec<((String, String), EtcdClient)>,
    used: Instant,
}

impl EtcdConnections {
    /// A pool that keeps at most `limit` endpoints' connections (more for a moment when more
    /// than that were used in the last [`IN_USE`]). 0 keeps each only while passes use it.
    pub fn with_limit(limit: usize) -> Self {
        EtcdConnections::with_limit_and_window(limit, IN_USE)
    }

    /// [`EtcdConnections::with_limit`] with another protected window than [`IN_USE`] (tests).
    pub fn with_limit_and_window(limit: usize, in_use: Duration) -> Self {
        EtcdConnections {
            entries: Mutex::default(),
            dials: AtomicU64::new(0),
            authentications: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            limit,
            in_use,
        }
    }

    /// A client of exactly `endpoint` with `access` (anonymous when it has no credentials):
    /// the kept one when its TLS and timeouts match, else a new connection, kept.
    pub async fn endpoint(
        &self,
        endpoint: &str,
        timeouts: Timeouts,
        access: &EtcdAccess,
    ) -> Result<EtcdClient, EtcdError> {
        Ok(self.endpoint_kept(endpoint, timeouts, access).await?.0)
    }

    /// [`EtcdConnections::endpoint`], and whether the connection was kept from before (`false`:
    /// dialled by this call). A call that fails on a kept connection may have met one that
    /// broke since (the member restarted); one that fails on a new one met the member as it is.
    pub async fn endpoint_kept(
        &self,
        endpoint: &str,
        timeouts: Timeouts,
        access: &EtcdAccess,
    ) -> Result<(EtcdClient, bool), EtcdError> {
        let (channel, credentials, kept) = match self.kept(endpoint, timeouts, access) {
            Kept::Client(client) => return Ok((*client, true)),
            Kept::Channel(channel, credentials) => (channel, credentials, true),
            Kept::Nothing => {
                self.dials.fetch_add(1, Ordering::Relaxed);
                let channel = dial_channel(endpoint, timeouts, access).await?;
                let anonymous = EtcdClient::over_channel(
                    endpoint,
                    channel.clone(),
                    timeouts,
                    &access.anonymous(),
                )
                .await?;
                self.store(
                    endpoint,
                    Entry {
                        tls: access.tls.clone(),
                        timeouts,
                        channel: channel.clone(),
                        anonymous: anonymous.clone(),
                        authenticated: Vec::new(),
                        used: Instant::now(),
                    },
                );
                match access.credentials.clone() {
                    None => return Ok((anonymous, false)),
                    Some(credentials) => (channel, credentials, false),
                }
            }
        };
        // Credentials over a kept (or just made) connection: one Authenticate.
        self.authentications.fetch_add(1, Ordering::Relaxed);
        let client = EtcdClient::over_channel(endpoint, channel, timeouts, access).await?;
        if let Some(entry) = self
            .entries
            .lock()
            .expect("connections")
            .by_endpoint
            .get_mut(endpoint)
        {
            entry.authenticated.retain(|(c, _)| *c != credentials);
            entry.authenticated.push((credentials, client.clone()));
            let excess = entry.authenticated.len().saturating_sub(CREDENTIALS_KEPT);
            entry.authenticated.drain(..excess);
        }
        Ok((client, kept))
    }

    /// Drops what is kept for `endpoint` after `error` from a call through it, when the error
    /// says the connection or its credentials can no longer be trusted. etcd's own refusals
    /// (no leader, not supported for a learner, ...) keep it.
    pub fn forget_after(&self, endpoint: &str, error: &EtcdError) {
        if drops_connection(error.kind) {
            self.forget(endpoint);
        }
    }

    /// Drops what is kept for `endpoint`: the next call dials it anew.
    pub fn forget(&self, endpoint: &str) {
        self.entries
            .lock()
            .expect("connections")
            .by_endpoint
            .remove(endpoint);
    }

    /// Connections dialled since the start (each a TCP, and TLS, handshake).
    pub fn dials(&self) -> u64 {
        self.dials.load(Ordering::Relaxed)
    }

    /// Authenticate calls made since the start (each a raft proposal in etcd).
    pub fn authentications(&self) -> u64 {
        self.authentications.load(Ordering::Relaxed)
    }

    /// Entries let go for the limit since the start.
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// Endpoints with a kept connection.
    pub fn len(&self) -> usize {
        self.entries.lock().expect("connections").by_endpoint.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn kept(&self, endpoint: &str, timeouts: Timeouts, access: &EtcdAccess) -> Kept {
        let mut entries = self.entries.lock().expect("connections");
        let now = Instant::now();
        let gone = entries.sweep(now, self.limit, self.in_use);
        self.evictions.fetch_add(gone as u64, Ordering::Relaxed);
        let Some(entry) = entries.by_endpoint.get_mut(endpoint) else {
            return Kept::Nothing;
        };
        if entry.tls != access.tls
            || entry.timeouts != timeouts
            || now.duration_since(entry.used) >= IDLE_LIMIT
        {
            entries.by_endpoint.remove(endpoint);
            return Kept::Nothing;
        }
        entry.used = now;
        match &access.credentials {
            None => Kept::Client(Box::new(entry.anonymous.clone())),
            Some(credentials) => entry
                .authenticated
                .iter()
                .find(|(c, _)| c == credentials)
                .map(|(_, client)| Kept::Client(Box::new(client.clone())))
                .unwrap_or_else(|| Kept::Channel(entry.channel.clone(), credentials.clone())),
        }
    }

    fn store(&self, endpoint: &str, entry: Entry) {
        let now = entry.used;
        let mut entries = self.entries.lock().expect("connections");
        entries.by_endpoint.insert(endpoint.to_string(), entry);
        let gone = entries.enforce_limit(now, self.limit, self.in_use);
        self.evictions.fetch_add(gone as u64, Ordering::Relaxed);
    }
}

/// The entries to let go when more than `limit` are kept, from when each was last `used`: the
/// least recently used first, down to nine tenths of the limit (so the next few dials do not
/// each sort the pool again), sparing every entry used within `in_use` of `now`.
fn over_limit(
    mut used: Vec<(&str, Instant)>,
    limit: usize,
    in_use: Duration,
    now: Instant,
) -> Vec<&str> {
    if used.len() <= limit {
        return Vec::new();
    }
    let keep = limit - limit / 10;
    let excess = used.len() - keep;
    used.sort_by_key(|(endpoint, at)| (*at, *endpoint));
    used.into_iter()
        .take(excess)
        .filter(|(_, at)| now.saturating_duration_since(*at) >= in_use)
        .map(|(endpoint, _)| endpoint)
        .collect()
}

enum Kept {
    /// Boxed: an `EtcdClient` is nearly 4 KB.
    Client(Box<EtcdClient>),
    /// The kept connection, for a client with these credentials.
    Channel(tonic::transport::Channel, (String, String)),
    Nothing,
}

/// Whether an error from a call means the connection (or the credentials it carries) should
/// not be used again: the transport failed or timed out, or etcd refused the credentials. An
/// error of a kind etcd answers over a working connection keeps it.
pub fn drops_connection(kind: EtcdErrorKind) -> bool {
    matches!(
        kind,
        EtcdErrorKind::Timeout
            | EtcdErrorKind::Unreachable
            | EtcdErrorKind::PermissionDenied
            | EtcdErrorKind::InvalidArgument
            | EtcdErrorKind::Other
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_entries_are_looked_for_at_most_every_sweep_interval() {
        let start = Instant::now();
        assert!(sweep_due(None, start), "the first lookup sweeps");
        assert!(!sweep_due(Some(start), start));
        assert!(!sweep_due(
            Some(start),
            start + SWEEP_EVERY - Duration::from_millis(1)
        ));
        assert!(sweep_due(Some(start), start + SWEEP_EVERY));
    }

    #[test]
    fn past_the_limit_the_least_recently_used_go_down_to_nine_tenths() {
        let start = Instant::now();
        let now = start + Duration::from_secs(100);
        let at = |s: u64| start + Duration::from_secs(s);
        let names: Vec<String> = (0..12).map(|i| format!("e{i:02}")).collect();
        // e00 used at 0 s, e01 at 1 s, ... e11 at 11 s: all long before `now`.
        let used = |n: usize| -> Vec<(&str, Instant)> {
            names[..n]
                .iter()
                .enumerate()
                .map(|(i, e)| (e.as_str(), at(i as u64)))
                .collect()
        };
        let window = Duration::from_secs(10);
        assert!(
            over_limit(used(10), 10, window, now).is_empty(),
            "at the limit"
        );
        assert_eq!(
            over_limit(used(11), 10, window, now),
            ["e00", "e01"],
            "11 → 9"
        );
        assert_eq!(
            over_limit(used(12), 10, window, now),
            ["e00", "e01", "e02"],
            "12 → 9"
        );
        // The order of the input does not matter.
        let mut shuffled = used(11);
        shuffled.reverse();
        assert_eq!(over_limit(shuffled, 10, window, now), ["e00", "e01"]);
        // A limit of 0 lets every idle entry go.
        assert_eq!(over_limit(used(3), 0, window, now), ["e00", "e01", "e02"]);
    }

    #[test]
    fn entries_in_use_are_spared_even_past_the_limit() {
        let start = Instant::now();
        let window = Duration::from_secs(10);
        let used = vec![
            ("old", start),
            ("busy-1", start + Duration::from_secs(95)),
            ("busy-2", start + Duration::from_secs(91)),
        ];
        let now = start + Duration::from_secs(100);
        // Two must go for a limit of 1, but only `old` is idle long enough.
        assert_eq!(over_limit(used.clone(), 1, window, now), ["old"]);
        // Used exactly `window` ago counts as idle.
        let now = start + Duration::from_secs(101);
        assert_eq!(over_limit(used, 1, window, now), ["old", "busy-2"]);
    }

    #[test]
    fn only_transport_and_credential_failures_drop_a_connection() {
        for kind in [
            EtcdErrorKind::Timeout,
            EtcdErrorKind::Unreachable,
            EtcdErrorKind::PermissionDenied,
            EtcdErrorKind::Other,
        ] {
            assert!(drops_connection(kind), "{kind:?}");
        }
        for kind in [
            EtcdErrorKind::NoLeader,
            EtcdErrorKind::NotSupportedForLearner,
            EtcdErrorKind::NoSpace,
            EtcdErrorKind::UnhealthyCluster,
            EtcdErrorKind::ServerTimeout,
        ] {
            assert!(!drops_connection(kind), "{kind:?}");
        }
    }
}
