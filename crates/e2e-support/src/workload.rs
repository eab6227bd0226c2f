//! A client workload that runs while a scenario disrupts the cluster, recording a history that
//! the history checker proves correct (`support::history`).
//!
//! Several clients run at once from inside the sandbox's cluster network with a real etcd
//! client: two through the `<cluster>-client` Service and two through individual members
//! (found in etcd's member list; a client moves to the next member after repeated failures).
//! Each picks, among a few keys, a put of a unique value, a linearizable get, a range over all
//! the keys, a compare-and-swap txn on a key's mod revision, or a delete, and records its call
//! and return instants (one monotonic clock), its request and its outcome: ok with the
//! response header's revision, failed with a definite error, or unknown (a timeout, a lost
//! connection). Two watches on the keys (one through the Service, one through a member) record
//! every event with its revision, request progress notifications, and resume with
//! `start_revision` after a cut.
//!
//! Stopped, it reads every key once more (linearizable, retried while the cluster settles),
//! lets the watches catch up to that read's revision, replays the keys' whole history with a
//! fresh watch from the first revision, and runs the checker: the history must be
//! linearizable, every acknowledged write must be in the final history, and the watches must
//! keep their guarantees. [`WorkloadReport::assert_no_loss`] fails the test otherwise, naming
//! the violations and where the history and its visualization were written.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{
    Client, Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use kube_sandbox::network::ClusterNetwork;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::history::{
    self, History, HistoryClient, KeyValue, LostWrite, OpType, Operation, Outcome, Progress,
    Resume, Verdict, WatchEvent, WatchRecord,
};

/// How long one request may take before its outcome counts as unknown.
pub const REQUEST_TIMEOUT: Duration = Duration::from_millis(1000);
/// Pause after a failed request, so a refused connection does not spin.
const AFTER_FAILURE: Duration = Duration::from_millis(50);
/// Pause after a successful request, per client: four clients then make about 80 requests a
/// second, light on 2 shared cores, while availability is still timed to a few tens of ms.
const PACE: Duration = Duration::from_millis(40);
/// How long the final read may retry while the cluster settles.
const READ_BACK_LIMIT: Duration = Duration::from_secs(60);
/// How long the watches may take to catch up with the final read, and the replay to run.
const WATCH_CATCH_UP: Duration = Duration::from_secs(30);
/// How often a watch asks for a progress notification.
const PROGRESS_EVERY: Duration = Duration::from_millis(1000);
/// How long a watch may stay short of the final revision before it reconnects elsewhere.
const STALLED: Duration = Duration::from_secs(5);
/// The keys each workload writes; few, so operations on one key overlap and order matters.
const KEYS: usize = 6;
const SERVICE_CLIENTS: usize = 2;
const MEMBER_CLIENTS: usize = 2;
/// Failures in a row after which a member's client moves to the next member.
const FAILURES_BEFORE_MOVING: u32 = 3;

/// One failed request.
#[derive(Clone, Debug)]
pub struct FailedRequest {
    /// Since the workload started.
    pub at: Duration,
    pub what: String,
    pub error: String,
}

/// The workload's verdict.
#[derive(Debug)]
pub struct WorkloadReport {
    pub label: String,
    /// Operations recorded (the final read included).
    pub operations: usize,
    /// Writes etcd acknowledged.
    pub acknowledged: usize,
    /// Requests that failed or whose outcome is unknown, and failed connections.
    pub failed: usize,
    pub watch_events: usize,
    /// Acknowledged writes missing from the cluster's final history, as the checker found them.
    pub lost: Vec<String>,
    pub lost_writes: Vec<LostWrite>,
    /// What the checker found wrong (a lost write among them unless loss was allowed).
    pub violations: Vec<String>,
    pub verdict: Verdict,
    /// How many of the workload's keys the final read found.
    pub keys_stored: usize,
    /// The longest window without a successful request through the Service, and when it began
    /// (since the start).
    pub longest_unavailable: Duration,
    pub unavailable_from: Duration,
    pub ran_for: Duration,
    /// The first few failed requests, for the log.
    pub first_failures: Vec<FailedRequest>,
    /// Where the history, the verdict and the visualization are.
    pub dir: PathBuf,
}

impl WorkloadReport {
    /// One line for the test log.
    pub fn summary(&self) -> String {
        format!(
            "workload {}: {} operations checked ({} writes acknowledged, {} requests failed or unknown), {} watch events; linearizability {}, {} lost, {} violations (checker: {}, {} ms); longest unavailability {} ms (from {:.1} s), ran {:.1} s; history in {}",
            self.label,
            self.operations,
            self.acknowledged,
            self.failed,
            self.watch_events,
            self.verdict.linearizability,
            self.lost.len(),
            self.violations.len(),
            self.verdict.result,
            self.verdict.check_ms,
            self.longest_unavailable.as_millis(),
            self.unavailable_from.as_secs_f64(),
            self.ran_for.as_secs_f64(),
            self.dir.display(),
        )
    }

    fn failure_text(&self) -> String {
        let mut text = format!(
            "workload {}: the history checker found {} violation(s):\n",
            self.label,
            self.violations.len()
        );
        for v in self.violations.iter().take(20) {
            text.push_str(&format!("  {v}\n"));
        }
        for n in &self.verdict.notes {
            text.push_str(&format!("  note: {n}\n"));
        }
        text.push_str(&format!(
            "history: {}/history.json, verdict: {}/verdict.json",
            self.dir.display(),
            self.dir.display()
        ));
        if let Some(v) = &self.verdict.visualization {
            text.push_str(&format!(", visualization (open in a browser): {v}"));
        }
        text
    }

    /// Fails the test unless the checker proved the history correct: linearizable, no
    /// acknowledged write lost, the watch guarantees kept. An "unknown" verdict (the search
    /// timed out) is printed, not failed: nothing was found, nothing was proven.
    pub fn assert_no_loss(&self) {
        println!("{}", self.summary());
        assert!(
            self.acknowledged > 0,
            "workload {}: no write was ever acknowledged; failures: {:?}",
            self.label,
            self.first_failures
        );
        self.assert_checked();
    }

    /// Fails the test if the checker found a violation (with loss allowed, lost writes are
    /// not violations: the test asserts them itself from [`WorkloadReport::lost_writes`]).
    pub fn assert_checked(&self) {
        if self.verdict.result == "unknown" {
            println!(
                "workload {}: the history checker could not decide within its limit (UNKNOWN): {:?}",
                self.label, self.verdict.notes
            );
        }
        assert!(self.violations.is_empty(), "{}", self.failure_text());
    }
}

/// [`Secure`] that a test may change while the workload runs (a rotated CA, a new client
/// certificate): every new connection takes the current value, as a client that re-reads its
/// files would.
pub type SharedSecure = Arc<std::sync::Mutex<Secure>>;

/// TLS and credentials for a workload on a secured cluster: the CA its server certificates
/// chain to, the client certificate and key (under mutual TLS), and a user and password.
#[derive(Clone, Default)]
pub struct Secure {
    pub ca_pem: Vec<u8>,
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    pub credentials: Option<(String, String)>,
}

/// The client URL of the `<cluster>-client` Service.
pub fn client_service_url(namespace: &str, cluster: &str) -> String {
    format!("http://{cluster}-client.{namespace}.svc:2379")
}

/// What every task of one workload shares.
struct Context {
    network: Arc<ClusterNetwork>,
    secure: Option<SharedSecure>,
    /// The Service's (or the given) client URL.
    endpoint: String,
    prefix: String,
    keys: Vec<String>,
    origin: Instant,
}

impl Context {
    fn now(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    fn secure(&self) -> Option<Secure> {
        self.secure.as_ref().map(|s| s.lock().unwrap().clone())
    }

    async fn client(&self, endpoint: &str, timeout: Option<Duration>) -> Result<Client, String> {
        cluster_client_with(&self.network, endpoint, self.secure().as_ref(), timeout).await
    }

    /// The members' client URLs, from etcd's member list through the Service.
    async fn member_urls(&self) -> Result<Vec<String>, String> {
        let mut client = self.client(&self.endpoint, Some(REQUEST_TIMEOUT)).await?;
        let list = tokio::time::timeout(REQUEST_TIMEOUT, client.member_list())
            .await
            .map_err(|_| "timed out".to_string())?
            .map_err(|e| e.to_string())?;
        let mut urls: Vec<String> = list
            .members()
            .iter()
            .filter(|m| !m.is_learner())
            .filter_map(|m| m.client_urls().first().cloned())
            .collect();
        urls.sort();
        if urls.is_empty() {
            return Err("no voter lists a client URL".into());
        }
        Ok(urls)
    }
}

/// What the supervisor learned before the clients started.
struct Setup {
    start_revision: i64,
    etcd_version: Option<String>,
}

/// One client's record.
#[derive(Default)]
struct ClientJournal {
    operations: Vec<Operation>,
    failures: Vec<FailedRequest>,
    endpoints: Vec<String>,
}

struct Running {
    setup: Setup,
    clients: Vec<(String, ClientJournal)>,
    watches: Vec<JoinHandle<WatchRecord>>,
}

/// A running workload; [`Workload::stop`] ends it and checks the history.
pub struct Workload {
    label: String,
    context: Arc<Context>,
    stop: CancellationToken,
    finish: watch::Sender<Option<i64>>,
    task: JoinHandle<Option<Running>>,
}

/// The key prefix of a new workload: `<label>/`, or `<label>/<n>/` for the n-th workload of
/// this process with that label, so a second one on the same cluster writes keys of its own.
fn fresh_prefix(label: &str) -> String {
    static USED: Mutex<Option<HashMap<String, usize>>> = Mutex::new(None);
    let mut used = USED.lock().unwrap();
    let count = used
        .get_or_insert_with(HashMap::new)
        .entry(label.to_string())
        .or_insert(0);
    *count += 1;
    if *count == 1 {
        format!("{label}/")
    } else {
        format!("{label}/{}/", *count)
    }
}

impl Workload {
    /// Starts the workload on the cluster `namespace/cluster`, through its client Service and
    /// its members. `label` names the keys (`<label>/k0` ...), so workloads one after another
    /// on a cluster do not mix, and names the history's directory.
    pub fn start(
        network: Arc<ClusterNetwork>,
        namespace: &str,
        cluster: &str,
        label: &str,
    ) -> Workload {
        Workload::start_with(network, namespace, cluster, label, None)
    }

    /// As [`Workload::start`], over TLS (`https`) with `secure`'s CA, certificate and
    /// credentials when given.
    pub fn start_with(
        network: Arc<ClusterNetwork>,
        namespace: &str,
        cluster: &str,
        label: &str,
        secure: Option<Secure>,
    ) -> Workload {
        Workload::start_shared(
            network,
            namespace,
            cluster,
            label,
            secure.map(|s| Arc::new(std::sync::Mutex::new(s))),
        )
    }

    /// As [`Workload::start_with`], with TLS material the test may change while it runs.
    pub fn start_shared(
        network: Arc<ClusterNetwork>,
        namespace: &str,
        cluster: &str,
        label: &str,
        secure: Option<SharedSecure>,
    ) -> Workload {
        let mut endpoint = client_service_url(namespace, cluster);
        if secure.is_some() {
            endpoint = endpoint.replacen("http://", "https://", 1);
        }
        Workload::start_at(network, &endpoint, label, secure)
    }

    /// As [`Workload::start_shared`], through `endpoint` (a client URL such as
    /// `http://etcd.ns.svc:2379`) rather than the `<cluster>-client` Service; the members are
    /// those etcd lists there.
    pub fn start_at(
        network: Arc<ClusterNetwork>,
        endpoint: &str,
        label: &str,
        secure: Option<SharedSecure>,
    ) -> Workload {
        let prefix = fresh_prefix(label);
        let keys = (0..KEYS).map(|i| format!("{prefix}k{i}")).collect();
        let context = Arc::new(Context {
            network,
            secure,
            endpoint: endpoint.to_string(),
            prefix,
            keys,
            origin: Instant::now(),
        });
        let stop = CancellationToken::new();
        let (finish, finish_rx) = watch::channel(None);
        let task = tokio::spawn(supervise(context.clone(), stop.clone(), finish_rx));
        Workload {
            label: label.to_string(),
            context,
            stop,
            finish,
            task,
        }
    }

    /// Stops the clients and checks the history: every acknowledged write must be kept.
    pub async fn stop(self) -> WorkloadReport {
        self.finish(false).await
    }

    /// As [`Workload::stop`], for a scenario that may lose acknowledged writes (lost-quorum
    /// recovery, a restore from a snapshot): the checker names every acknowledged write missing
    /// from the final history ([`WorkloadReport::lost_writes`]) for the test to judge, and
    /// checks the rest as far as a loss allows.
    pub async fn stop_allowing_loss(self) -> WorkloadReport {
        self.finish(true).await
    }

    async fn finish(self, allow_loss: bool) -> WorkloadReport {
        let context = self.context;
        // Named by the key prefix: a second workload with the same label (`<label>/2/`) gets
        // a directory of its own (`<label>_2`).
        let dir = history::history_dir(context.prefix.trim_end_matches('/'));
        self.stop.cancel();
        let running = self.task.await.expect("the workload task does not panic");
        let ran_for = context.origin.elapsed();
        let Some(running) = running else {
            // Stopped before etcd ever answered: nothing was recorded.
            return WorkloadReport {
                label: self.label,
                operations: 0,
                acknowledged: 0,
                failed: 0,
                watch_events: 0,
                lost: Vec::new(),
                lost_writes: Vec::new(),
                violations: Vec::new(),
                verdict: Verdict {
                    result: "not run".into(),
                    linearizability: "not run".into(),
                    ..Default::default()
                },
                keys_stored: 0,
                longest_unavailable: ran_for,
                unavailable_from: Duration::ZERO,
                ran_for,
                first_failures: vec![FailedRequest {
                    at: ran_for,
                    what: "setup".into(),
                    error: "etcd never answered through the Service".into(),
                }],
                dir,
            };
        };
        let final_client = running.clients.len();
        let (final_read, final_revision) = final_read(&context, final_client).await;
        let keys_stored = final_read.kvs.len();
        let _ = self.finish.send(Some(final_revision));
        let mut watches = Vec::new();
        for handle in running.watches {
            watches.push(handle.await.expect("a watch task does not panic"));
        }
        // The replay ends at the last revision of the workload's keys that anything saw (a
        // watch's event, an acknowledged write), not at the cluster's final revision: it asks
        // for no progress notification, since etcd before 3.5.8 and 3.4.24 may answer one
        // with the current revision before an unsynced watch delivered its past events
        // (etcd-io/etcd#15220), which would end the replay early and empty.
        let last_write = watches
            .iter()
            .flat_map(|w| w.events.iter().map(|e| e.revision))
            .chain(
                running
                    .clients
                    .iter()
                    .flat_map(|(_, j)| j.operations.iter())
                    .filter(|op| {
                        op.status == Outcome::Ok
                            && match op.kind {
                                OpType::Put => true,
                                OpType::Txn => op.succeeded,
                                OpType::Delete => op.deleted > 0,
                                _ => false,
                            }
                    })
                    .map(|op| op.revision),
            )
            .filter(|r| *r <= final_revision)
            .max()
            .unwrap_or(running.setup.start_revision);
        let (_never, finish_now) = watch::channel(Some(last_write));
        let replay = run_watch(
            context.clone(),
            watches.len(),
            "replay".into(),
            Route::Service,
            running.setup.start_revision + 1,
            true,
            finish_now,
        )
        .await;
        watches.push(replay);

        let mut clients = Vec::new();
        let mut operations = Vec::new();
        let mut failures = Vec::new();
        let mut service_successes = Vec::new();
        for (id, (name, journal)) in running.clients.into_iter().enumerate() {
            let mut endpoints = journal.endpoints.clone();
            endpoints.dedup();
            clients.push(HistoryClient {
                id,
                name: name.clone(),
                endpoint: endpoints.join(","),
            });
            for op in &journal.operations {
                if name.starts_with("service") && op.status == Outcome::Ok {
                    service_successes.push(op.ret);
                }
                if op.status != Outcome::Ok {
                    failures.push(FailedRequest {
                        at: Duration::from_nanos(op.call),
                        what: format!("{name} {:?} {}", op.kind, op.key),
                        error: op.error.clone(),
                    });
                }
            }
            operations.extend(journal.operations);
            failures.extend(journal.failures);
        }
        clients.push(HistoryClient {
            id: final_client,
            name: "final".into(),
            endpoint: context.endpoint.clone(),
        });
        operations.push(final_read);
        failures.sort_by_key(|f| f.at);
        let (unavailable_from, longest_unavailable) =
            longest_gap(&mut service_successes, ran_for.as_nanos() as u64);

        let recorded = History {
            version: 1,
            label: self.label.clone(),
            prefix: context.prefix.clone(),
            keys: context.keys.clone(),
            start_revision: running.setup.start_revision,
            final_revision,
            allow_loss,
            etcd_version: running.setup.etcd_version.clone(),
            clients,
            operations,
            watches,
        };
        let verdict = history::check(&recorded, &dir).await;
        let acknowledged = recorded
            .operations
            .iter()
            .filter(|op| {
                op.status == Outcome::Ok
                    && match op.kind {
                        OpType::Put => true,
                        OpType::Txn => op.succeeded,
                        OpType::Delete => op.deleted > 0,
                        _ => false,
                    }
            })
            .count();
        WorkloadReport {
            label: self.label,
            operations: recorded.operations.len(),
            acknowledged,
            failed: failures.len(),
            watch_events: recorded.watches.iter().map(|w| w.events.len()).sum(),
            lost: verdict.lost_writes.iter().map(|w| w.to_string()).collect(),
            lost_writes: verdict.lost_writes.clone(),
            violations: verdict.violation_lines(),
            verdict,
            keys_stored,
            longest_unavailable,
            unavailable_from,
            ran_for,
            first_failures: failures.into_iter().take(5).collect(),
            dir,
        }
    }
}

/// The longest window without a success (times in ns since the start), and when it began.
fn longest_gap(successes: &mut [u64], end: u64) -> (Duration, Duration) {
    successes.sort_unstable();
    let mut last = 0u64;
    let mut best = (0u64, 0u64);
    for &t in successes.iter().chain(std::iter::once(&end)) {
        if t.saturating_sub(last) > best.1 {
            best = (last, t - last);
        }
        last = last.max(t);
    }
    (Duration::from_nanos(best.0), Duration::from_nanos(best.1))
}

/// Learns the start revision, then runs the clients and watches until stopped; returns what
/// they recorded (the watches still running, to catch up with the final read).
async fn supervise(
    context: Arc<Context>,
    stop: CancellationToken,
    finish: watch::Receiver<Option<i64>>,
) -> Option<Running> {
    let setup = loop {
        if stop.is_cancelled() {
            return None;
        }
        match learn_start(&context).await {
            Ok(setup) => break setup,
            Err(_) => {
                tokio::select! {
                    _ = stop.cancelled() => return None,
                    _ = tokio::time::sleep(Duration::from_millis(250)) => {}
                }
            }
        }
    };
    let members = context.member_urls().await.unwrap_or_default();
    let mut handles = Vec::new();
    for i in 0..SERVICE_CLIENTS {
        handles.push((
            format!("service-{i}"),
            tokio::spawn(run_client(context.clone(), i, Route::Service, stop.clone())),
        ));
    }
    for i in 0..MEMBER_CLIENTS {
        let route = Route::Member {
            members: members.clone(),
            index: i,
        };
        handles.push((
            format!("member-{i}"),
            tokio::spawn(run_client(
                context.clone(),
                SERVICE_CLIENTS + i,
                route,
                stop.clone(),
            )),
        ));
    }
    let watches = vec![
        tokio::spawn(run_watch(
            context.clone(),
            0,
            "service".into(),
            Route::Service,
            setup.start_revision + 1,
            false,
            finish.clone(),
        )),
        tokio::spawn(run_watch(
            context.clone(),
            1,
            "member".into(),
            Route::Member { members, index: 1 },
            setup.start_revision + 1,
            false,
            finish,
        )),
    ];
    let mut clients = Vec::new();
    for (name, handle) in handles {
        clients.push((name, handle.await.expect("a client task does not panic")));
    }
    Some(Running {
        setup,
        clients,
        watches,
    })
}

async fn learn_start(context: &Context) -> Result<Setup, String> {
    let client = context
        .client(&context.endpoint, Some(REQUEST_TIMEOUT))
        .await?;
    let mut kv = client.kv_client();
    let response = tokio::time::timeout(
        REQUEST_TIMEOUT,
        kv.get(
            context.prefix.clone(),
            Some(GetOptions::new().with_prefix().with_count_only()),
        ),
    )
    .await
    .map_err(|_| "timed out".to_string())?
    .map_err(|e| e.to_string())?;
    let start_revision = response.header().map(|h| h.revision()).unwrap_or_default();
    let mut maintenance = client.maintenance_client();
    let etcd_version = tokio::time::timeout(REQUEST_TIMEOUT, maintenance.status())
        .await
        .ok()
        .and_then(|r| r.ok())
        .map(|s| s.version().to_string());
    Ok(Setup {
        start_revision,
        etcd_version,
    })
}

/// Where a client or a watch connects.
#[derive(Clone)]
enum Route {
    /// The Service (or the endpoint the workload was given).
    Service,
    /// One member at a time, the next after repeated failures.
    Member { members: Vec<String>, index: usize },
}

impl Route {
    fn endpoint(&self, context: &Context) -> String {
        match self {
            Route::Member { members, index } if !members.is_empty() => {
                members[index % members.len()].clone()
            }
            _ => context.endpoint.clone(),
        }
    }

    /// After repeated failures: the next member, from a fresh member list when etcd gives one.
    async fn move_on(&mut self, context: &Context) {
        if let Route::Member { members, index } = self {
            if let Ok(fresh) = context.member_urls().await {
                *members = fresh;
            }
            *index += 1;
        }
    }
}

/// A small deterministic generator (xorshift), so the workload needs no dependency for it.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// How an error leaves a request: refused for sure (etcd's own refusals, which it answers
/// before applying anything), or unknown (anything the network or a timeout could cause
/// after the request left). `ResourceExhausted` is unknown too: etcd's "mvcc: database space
/// exceeded" comes both from the check before a write is proposed (nothing applied) and from
/// the apply of the write that crossed the quota, which etcd applies and then answers with
/// that error (`quotaApplierV3.Put`/`Txn`, 3.4 to 3.7); the history checker caught one on
/// 3.7.4 (`failed-write-applied`).
fn classify(error: &etcd_client::Error) -> Outcome {
    use tonic::Code;
    match error {
        etcd_client::Error::GRpcStatus(status) => match status.code() {
            Code::InvalidArgument
            | Code::FailedPrecondition
            | Code::PermissionDenied
            | Code::Unauthenticated
            | Code::OutOfRange
            | Code::AlreadyExists
            | Code::NotFound
            | Code::Unimplemented => Outcome::Failed,
            _ => Outcome::Unknown,
        },
        _ => Outcome::Unknown,
    }
}

fn key_values(kvs: &[etcd_client::KeyValue]) -> Vec<KeyValue> {
    kvs.iter()
        .map(|kv| KeyValue {
            key: kv.key_str().unwrap_or_default().to_string(),
            value: kv.value_str().unwrap_or_default().to_string(),
            mod_revision: kv.mod_revision(),
        })
        .collect()
}

/// One client's loop: a random operation on a random key, recorded; after a failure the
/// client is rebuilt, as an application would reconnect.
async fn run_client(
    context: Arc<Context>,
    id: usize,
    mut route: Route,
    stop: CancellationToken,
) -> ClientJournal {
    let mut journal = ClientJournal::default();
    let mut dice =
        Dice(0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9));
    let mut client: Option<Client> = None;
    let mut failures_in_a_row = 0u32;
    let mut written = 0u64;
    // The mod revision this client last saw for each key (0: absent), for its txns.
    let mut seen: HashMap<String, i64> = HashMap::new();
    while !stop.is_cancelled() {
        let endpoint = route.endpoint(&context);
        let current = match client.take() {
            Some(c) => c,
            None => match context.client(&endpoint, Some(REQUEST_TIMEOUT)).await {
                Ok(c) => {
                    journal.endpoints.push(endpoint.clone());
                    c
                }
                Err(e) => {
                    journal.failures.push(FailedRequest {
                        at: context.origin.elapsed(),
                        what: format!("connect {endpoint}"),
                        error: e,
                    });
                    failures_in_a_row += 1;
                    if failures_in_a_row >= FAILURES_BEFORE_MOVING {
                        route.move_on(&context).await;
                        failures_in_a_row = 0;
                    }
                    tokio::time::sleep(AFTER_FAILURE).await;
                    continue;
                }
            },
        };
        let key = context.keys[dice.roll(context.keys.len() as u64) as usize].clone();
        let roll = dice.roll(100);
        let kind = match roll {
            0..35 => OpType::Put,
            35..65 => OpType::Get,
            65..80 => OpType::Txn,
            80..90 => OpType::Range,
            _ => OpType::Delete,
        };
        let value = if matches!(kind, OpType::Put | OpType::Txn) {
            written += 1;
            format!("c{id}-{written}")
        } else {
            String::new()
        };
        let mut op = Operation {
            client: id,
            call: 0,
            ret: 0,
            kind,
            key: if kind == OpType::Range {
                context.prefix.clone()
            } else {
                key.clone()
            },
            value,
            expected_mod_revision: if kind == OpType::Txn {
                seen.get(&key).copied().unwrap_or(0)
            } else {
                0
            },
            status: Outcome::Ok,
            error: String::new(),
            revision: 0,
            kvs: Vec::new(),
            succeeded: false,
            deleted: 0,
        };
        let mut kv = current.kv_client();
        op.call = context.now();
        let result = tokio::time::timeout(REQUEST_TIMEOUT, perform(&mut kv, &mut op)).await;
        op.ret = context.now();
        let ok = match result {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                op.status = classify(&e);
                op.error = e.to_string();
                false
            }
            Err(_) => {
                op.status = Outcome::Unknown;
                op.error = "timed out".into();
                false
            }
        };
        if ok {
            match op.kind {
                OpType::Put => {
                    seen.insert(op.key.clone(), op.revision);
                }
                OpType::Delete => {
                    seen.insert(op.key.clone(), 0);
                }
                OpType::Txn if op.succeeded => {
                    seen.insert(op.key.clone(), op.revision);
                }
                _ => {
                    for k in &context.keys {
                        if op.kind == OpType::Range || *k == op.key {
                            let m = op
                                .kvs
                                .iter()
                                .find(|kv| kv.key == *k)
                                .map_or(0, |kv| kv.mod_revision);
                            seen.insert(k.clone(), m);
                        }
                    }
                }
            }
        }
        journal.operations.push(op);
        if ok {
            failures_in_a_row = 0;
            client = Some(current);
            tokio::time::sleep(PACE).await;
        } else {
            failures_in_a_row += 1;
            if failures_in_a_row >= FAILURES_BEFORE_MOVING {
                route.move_on(&context).await;
                failures_in_a_row = 0;
            }
            tokio::time::sleep(AFTER_FAILURE).await;
        }
    }
    journal
}

/// Sends `op` and fills in its response.
async fn perform(
    kv: &mut etcd_client::KvClient,
    op: &mut Operation,
) -> Result<(), etcd_client::Error> {
    let revision = |h: Option<&etcd_client::ResponseHeader>| h.map(|h| h.revision()).unwrap_or(0);
    match op.kind {
        OpType::Put => {
            let r = kv.put(op.key.clone(), op.value.clone(), None).await?;
            op.revision = revision(r.header());
        }
        OpType::Get => {
            let r = kv.get(op.key.clone(), None).await?;
            op.revision = revision(r.header());
            op.kvs = key_values(r.kvs());
        }
        OpType::Range => {
            let r = kv
                .get(op.key.clone(), Some(GetOptions::new().with_prefix()))
                .await?;
            op.revision = revision(r.header());
            op.kvs = key_values(r.kvs());
        }
        OpType::Txn => {
            let txn = Txn::new()
                .when([Compare::mod_revision(
                    op.key.clone(),
                    CompareOp::Equal,
                    op.expected_mod_revision,
                )])
                .and_then([TxnOp::put(op.key.clone(), op.value.clone(), None)])
                .or_else([TxnOp::get(op.key.clone(), None)]);
            let r = kv.txn(txn).await?;
            op.revision = revision(r.header());
            op.succeeded = r.succeeded();
            if !op.succeeded {
                for response in r.op_responses() {
                    if let TxnOpResponse::Get(get) = response {
                        op.kvs = key_values(get.kvs());
                    }
                }
            }
        }
        OpType::Delete => {
            let r = kv.delete(op.key.clone(), None).await?;
            op.revision = revision(r.header());
            op.deleted = r.deleted();
        }
    }
    Ok(())
}

/// The final read: every key, linearizable, through the Service, retried until the cluster
/// answers (at most [`READ_BACK_LIMIT`]). Recorded as the last operation of the history.
async fn final_read(context: &Context, client: usize) -> (Operation, i64) {
    let started = Instant::now();
    let mut last_error = String::new();
    while started.elapsed() < READ_BACK_LIMIT {
        let mut op = Operation {
            client,
            call: 0,
            ret: 0,
            kind: OpType::Range,
            key: context.prefix.clone(),
            value: String::new(),
            expected_mod_revision: 0,
            status: Outcome::Ok,
            error: String::new(),
            revision: 0,
            kvs: Vec::new(),
            succeeded: false,
            deleted: 0,
        };
        match context.client(&context.endpoint, None).await {
            Ok(c) => {
                let mut kv = c.kv_client();
                op.call = context.now();
                match tokio::time::timeout(Duration::from_secs(5), perform(&mut kv, &mut op)).await
                {
                    Ok(Ok(())) => {
                        op.ret = context.now();
                        let revision = op.revision;
                        return (op, revision);
                    }
                    Ok(Err(e)) => last_error = e.to_string(),
                    Err(_) => last_error = "timed out".into(),
                }
            }
            Err(e) => last_error = e,
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!(
        "reading the workload's keys back through {} failed for {READ_BACK_LIMIT:?}: {last_error}",
        context.endpoint
    );
}

/// A watch on the workload's keys from `start_revision`, across reconnections, until it has
/// delivered everything up to the revision `finish` names (or [`WATCH_CATCH_UP`] after it was
/// named).
async fn run_watch(
    context: Arc<Context>,
    id: usize,
    name: String,
    mut route: Route,
    start_revision: i64,
    replay: bool,
    mut finish: watch::Receiver<Option<i64>>,
) -> WatchRecord {
    let mut record = WatchRecord {
        id,
        name,
        replay,
        start_revision,
        ..Default::default()
    };
    let mut next = start_revision;
    let mut reached = start_revision - 1;
    let mut resume_reason: Option<String> = None;
    let mut deadline: Option<Instant> = None;
    let done =
        |finish: &watch::Receiver<Option<i64>>, reached: i64, deadline: &mut Option<Instant>| {
            let Some(target) = *finish.borrow() else {
                return false;
            };
            let limit = *deadline.get_or_insert_with(|| Instant::now() + WATCH_CATCH_UP);
            reached >= target || Instant::now() >= limit
        };
    loop {
        if done(&finish, reached, &mut deadline) {
            return record;
        }
        if let Some(reason) = resume_reason.take() {
            record.resumes.push(Resume {
                at: context.now(),
                start_revision: next,
                compact_revision: 0,
                reason,
            });
        }
        let endpoint = route.endpoint(&context);
        let opened = async {
            let client = context.client(&endpoint, None).await?;
            let mut watcher = client.watch_client();
            tokio::time::timeout(
                REQUEST_TIMEOUT * 3,
                watcher.watch(
                    context.prefix.clone(),
                    Some(WatchOptions::new().with_prefix().with_start_revision(next)),
                ),
            )
            .await
            .map_err(|_| "opening the watch timed out".to_string())?
            .map_err(|e| e.to_string())
        };
        let stream = match opened.await {
            Ok(stream) => stream,
            Err(e) => {
                resume_reason = Some(format!("{endpoint}: {e}"));
                route.move_on(&context).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let (mut sender, mut responses) = stream.split();
        let mut ticker = tokio::time::interval(PROGRESS_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Once the final revision is named, a watch that stops advancing short of it (its
        // member cut off, say) tries the next member.
        let mut advanced = (reached, Instant::now());
        let reason = loop {
            if done(&finish, reached, &mut deadline) {
                return record;
            }
            if reached > advanced.0 {
                advanced = (reached, Instant::now());
            } else if finish.borrow().is_some() && advanced.1.elapsed() > STALLED {
                break format!("{endpoint}: no progress past rev {reached} for {STALLED:?}");
            }
            tokio::select! {
                _ = ticker.tick(), if !replay => {
                    if let Err(e) = sender.request_progress().await {
                        break format!("requesting progress: {e}");
                    }
                }
                _ = finish.changed() => {}
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                message = responses.message() => match message {
                    Ok(Some(response)) => {
                        if response.canceled() {
                            let compacted = response.compact_revision();
                            if compacted > next {
                                // etcd compacted the revisions from `next`: the watch resumes
                                // where it says, and the checker excuses that range.
                                record.resumes.push(Resume {
                                    at: context.now(),
                                    start_revision: next,
                                    compact_revision: compacted,
                                    reason: "compacted".into(),
                                });
                                next = compacted;
                                break String::new();
                            }
                            break format!("canceled: {}", response.cancel_reason());
                        }
                        if response.created() && response.events().is_empty() {
                            continue;
                        }
                        let at = context.now();
                        if response.events().is_empty() {
                            let revision = response.header().map(|h| h.revision()).unwrap_or(0);
                            record.progress.push(Progress { at, revision });
                            reached = reached.max(revision);
                            continue;
                        }
                        for event in response.events() {
                            let Some(kv) = event.kv() else { continue };
                            let revision = kv.mod_revision();
                            let delete = matches!(event.event_type(), etcd_client::EventType::Delete);
                            record.events.push(WatchEvent {
                                at,
                                revision,
                                kind: if delete { "delete" } else { "put" },
                                key: kv.key_str().unwrap_or_default().to_string(),
                                value: if delete { String::new() } else { kv.value_str().unwrap_or_default().to_string() },
                            });
                            next = next.max(revision + 1);
                            reached = reached.max(revision);
                        }
                    }
                    Ok(None) => break format!("{endpoint}: the stream ended"),
                    Err(e) => break format!("{endpoint}: {e}"),
                },
            }
        };
        // An empty reason: resumed after a compaction, already recorded.
        resume_reason = (!reason.is_empty()).then_some(reason);
        if resume_reason.is_some() {
            route.move_on(&context).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A real etcd client whose connections are made inside the cluster network and resolved by
/// the cluster DNS, as a Pod's would be; each request limited to [`REQUEST_TIMEOUT`].
pub async fn cluster_client(
    network: &Arc<ClusterNetwork>,
    endpoint: &str,
    secure: Option<&Secure>,
) -> Result<Client, String> {
    cluster_client_with(network, endpoint, secure, Some(REQUEST_TIMEOUT)).await
}

/// As [`cluster_client`], with `timeout` for each request (none for a watch's stream).
pub async fn cluster_client_with(
    network: &Arc<ClusterNetwork>,
    endpoint: &str,
    secure: Option<&Secure>,
    timeout: Option<Duration>,
) -> Result<Client, String> {
    let network = network.clone();
    let connector = tower::service_fn(move |uri: http::Uri| {
        let network = network.clone();
        async move {
            let host = uri.host().unwrap_or_default().to_string();
            let port = uri.port_u16().unwrap_or(2379);
            let stream = network.connect_host(&host, port).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
        }
    });
    let mut target = tonic::transport::Endpoint::from_shared(endpoint.to_string())
        .map_err(|e| e.to_string())?
        .connect_timeout(REQUEST_TIMEOUT);
    if let Some(timeout) = timeout {
        target = target.timeout(timeout);
    }
    // A member without a leader refuses at once (and ends its watches) rather than hang.
    let mut options = etcd_client::ConnectOptions::new().with_require_leader(true);
    if let Some(secure) = secure {
        let mut tls = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&secure.ca_pem));
        if let Some((cert, key)) = &secure.identity {
            tls = tls.identity(tonic::transport::Identity::from_pem(cert, key));
        }
        target = target.tls_config(tls).map_err(|e| e.to_string())?;
        if let Some((user, password)) = &secure.credentials {
            options = options.with_user(user.clone(), password.clone());
        }
    }
    let channel = target.connect_with_connector_lazy(connector);
    Client::from_channel(etcd_client::Channel::Tonic(channel), Some(options))
        .await
        .map_err(|e| e.to_string())
}
