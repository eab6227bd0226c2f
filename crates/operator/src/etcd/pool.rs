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
//! - it was dialled while the pool already kept its limit ([`EtcdConnections::with_limit`], the
//!   operator's `--etcd-connections-kept`): such an entry only passes. Its pass's calls share
//!   it, and it is closed once unused for [`PASSING`].
//!
//! Each kept connection costs about 62 KiB of the gRPC stack's buffers (docs/benchmarks.md,
//! "What a kept etcd connection costs"): the limit bounds that memory, at the price of a dial
//! per member per look for the endpoints beyond it. Past the limit the pool keeps the entries
//! it has rather than the most recently used ones: every cluster is looked at in turn, so an
//! LRU pool smaller than the endpoints misses on every look (measured: 1,602 dials a minute
//! for 600 endpoints and a limit of 200, more than the looks' 1,200), while keeping the
//! incumbents dials only the endpoints beyond the limit.

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

/// How often at most the idle entries are looked for (more often when [`PASSING`] is shorter).
const SWEEP_EVERY: Duration = Duration::from_secs(2);

/// The default limit of kept entries (`--etcd-connections-kept`): 333 clusters of 3 members
/// keep all of theirs, in about 62 MiB.
pub const DEFAULT_KEPT: usize = 1000;

/// How long an entry dialled past the limit lives unused: the calls of one pass (Status, the
/// health read, the member list, the next step's call) share it, and it is closed soon after.
pub const PASSING: Duration = Duration::from_secs(5);

/// Credentials kept per endpoint: the Secret's and one other (a previous password being tried).
const CREDENTIALS_KEPT: usize = 2;

/// Kept connections, by endpoint URL. Cheap to share (`Arc`); every method takes `&self`.
pub struct EtcdConnections {
    entries: Mutex<Entries>,
    dials: AtomicU64,
    authentications: AtomicU64,
    passed: AtomicU64,
    limit: usize,
    passing: Duration,
}

impl Default for EtcdConnections {
    fn default() -> Self {
        EtcdConnections::with_limit(DEFAULT_KEPT)
    }
}

/// The kept entries, how many of them are kept (not only passing), and when the idle ones were
/// last dropped. The count is kept beside the map, so that storing an entry and reading the
/// count cost no scan of every endpoint (thousands at scale; a scan per store was 2 % of the
/// operator's samples while 1,000 clusters bootstrapped).
#[derive(Default)]
struct Entries {
    by_endpoint: HashMap<String, Entry>,
    kept: usize,
    swept: Option<Instant>,
}

impl Entries {
    /// Drops the entries that outlived their use ([`outlived`]), at most once per
    /// [`sweep_every`]: a lookup costs one hash probe, not a scan of every endpoint (thousands
    /// at scale). How many of those that only passed went.
    fn sweep(&mut self, now: Instant, passing: Duration) -> usize {
        if !sweep_due(self.swept, now, sweep_every(passing)) {
            return 0;
        }
        self.swept = Some(now);
        let (mut passed, mut kept_gone) = (0, 0);
        self.by_endpoint.retain(|_, e| {
            let gone = outlived(e.kept, now.duration_since(e.used), passing);
            passed += usize::from(gone && !e.kept);
            kept_gone += usize::from(gone && e.kept);
            !gone
        });
        self.kept -= kept_gone;
        passed
    }

    /// Entries kept (not only passing).
    fn kept(&self) -> usize {
        self.kept
    }

    /// Stores `entry` for `endpoint` in place of any it had.
    fn insert(&mut self, endpoint: &str, entry: Entry) {
        self.remove(endpoint);
        self.kept += usize::from(entry.kept);
        self.by_endpoint.insert(endpoint.to_string(), entry);
    }

    /// Drops what is stored for `endpoint`.
    fn remove(&mut self, endpoint: &str) {
        if let Some(gone) = self.by_endpoint.remove(endpoint) {
            self.kept -= usize::from(gone.kept);
        }
    }
}

/// How often the entries are looked for when passing ones live `passing`.
fn sweep_every(passing: Duration) -> Duration {
    SWEEP_EVERY.min(passing / 2)
}

/// Whether the entries are to be looked for, last looked for at `swept`.
fn sweep_due(swept: Option<Instant>, now: Instant, every: Duration) -> bool {
    swept.is_none_or(|at| now.duration_since(at) >= every)
}

/// Whether an entry unused for `idle` is to be closed: a kept one after [`IDLE_LIMIT`] (its
/// member or cluster is gone), one that only passed after `passing`.
fn outlived(kept: bool, idle: Duration, passing: Duration) -> bool {
    idle >= if kept { IDLE_LIMIT } else { passing }
}

/// Whether a new entry is kept when the pool keeps `kept` entries: while under `limit`.
fn keeps_new(kept: usize, limit: usize) -> bool {
    kept < limit
}

struct Entry {
    tls: Option<ClientTls>,
    timeouts: Timeouts,
    channel: tonic::transport::Channel,
    anonymous: EtcdClient,
    /// Clients with credentials over the same channel, most recently used last.
    authenticated: Vec<((String, String), EtcdClient)>,
    used: Instant,
    /// Kept under the limit; `false`: dialled past it, only passing.
    kept: bool,
}

impl EtcdConnections {
    /// A pool that keeps at most `limit` endpoints' connections; the others it dials only
    /// pass (closed once unused for [`PASSING`]). 0 keeps none past the passes using them.
    pub fn with_limit(limit: usize) -> Self {
        EtcdConnections::with_limit_and_passing(limit, PASSING)
    }

    /// [`EtcdConnections::with_limit`] with another life than [`PASSING`] for the entries
    /// past the limit (tests).
    pub fn with_limit_and_passing(limit: usize, passing: Duration) -> Self {
        EtcdConnections {
            entries: Mutex::default(),
            dials: AtomicU64::new(0),
            authentications: AtomicU64::new(0),
            passed: AtomicU64::new(0),
            limit,
            passing,
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
                        kept: false,
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
        self.entries.lock().expect("connections").remove(endpoint);
    }

    /// Connections dialled since the start (each a TCP, and TLS, handshake).
    pub fn dials(&self) -> u64 {
        self.dials.load(Ordering::Relaxed)
    }

    /// Authenticate calls made since the start (each a raft proposal in etcd).
    pub fn authentications(&self) -> u64 {
        self.authentications.load(Ordering::Relaxed)
    }

    /// Entries dialled past the limit and closed after their pass, since the start.
    pub fn passed(&self) -> u64 {
        self.passed.load(Ordering::Relaxed)
    }

    /// Endpoints with a connection, kept or passing.
    pub fn len(&self) -> usize {
        self.entries.lock().expect("connections").by_endpoint.len()
    }

    /// Endpoints with a kept connection (at most the limit).
    pub fn kept_len(&self) -> usize {
        self.entries.lock().expect("connections").kept()
    }

    /// Closes the entries that outlived their use now, as the next lookup would: passing
    /// ones are closed even when no pass asks for a connection for a while. How many of
    /// those that only passed went.
    pub fn sweep(&self) -> usize {
        let gone = self
            .entries
            .lock()
            .expect("connections")
            .sweep(Instant::now(), self.passing);
        self.passed.fetch_add(gone as u64, Ordering::Relaxed);
        gone
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn kept(&self, endpoint: &str, timeouts: Timeouts, access: &EtcdAccess) -> Kept {
        let mut entries = self.entries.lock().expect("connections");
        let now = Instant::now();
        let gone = entries.sweep(now, self.passing);
        self.passed.fetch_add(gone as u64, Ordering::Relaxed);
        let Some(entry) = entries.by_endpoint.get_mut(endpoint) else {
            return Kept::Nothing;
        };
        if entry.tls != access.tls
            || entry.timeouts != timeouts
            || outlived(entry.kept, now.duration_since(entry.used), self.passing)
        {
            entries.remove(endpoint);
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

    /// Stores a new entry, kept while the pool keeps fewer than its limit (an entry it
    /// replaces does not count), passing otherwise.
    fn store(&self, endpoint: &str, mut entry: Entry) {
        let mut entries = self.entries.lock().expect("connections");
        entries.remove(endpoint);
        entry.kept = keeps_new(entries.kept(), self.limit);
        entries.insert(endpoint, entry);
    }
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
    fn entries_are_looked_for_at_most_every_sweep_interval() {
        let start = Instant::now();
        let every = sweep_every(PASSING);
        assert!(sweep_due(None, start, every), "the first lookup sweeps");
        assert!(!sweep_due(Some(start), start, every));
        assert!(!sweep_due(
            Some(start),
            start + every - Duration::from_millis(1),
            every
        ));
        assert!(sweep_due(Some(start), start + every, every));
        // Often enough that a passing entry is closed within one and a half of its life.
        assert!(every <= PASSING / 2);
        assert_eq!(
            sweep_every(Duration::from_millis(500)),
            Duration::from_millis(250)
        );
        assert_eq!(sweep_every(Duration::from_secs(60)), SWEEP_EVERY);
    }

    #[test]
    fn a_kept_entry_lives_until_idle_a_passing_one_only_through_its_pass() {
        let passing = PASSING;
        assert!(!outlived(true, passing, passing));
        assert!(!outlived(
            true,
            IDLE_LIMIT - Duration::from_millis(1),
            passing
        ));
        assert!(outlived(true, IDLE_LIMIT, passing));
        assert!(!outlived(
            false,
            passing - Duration::from_millis(1),
            passing
        ));
        assert!(outlived(false, passing, passing));
        // A pass's calls come within a second or two: a passing entry outlives them.
        assert!(PASSING >= Duration::from_secs(3));
        assert!(
            PASSING < Duration::from_secs(30),
            "shorter than the idle look interval"
        );
    }

    #[test]
    fn new_entries_are_kept_only_under_the_limit() {
        assert!(keeps_new(0, 3));
        assert!(keeps_new(2, 3));
        assert!(!keeps_new(3, 3));
        assert!(
            !keeps_new(4, 3),
            "a pool over its limit (never, but) keeps no more"
        );
        assert!(!keeps_new(0, 0), "a limit of 0 keeps nothing");
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
