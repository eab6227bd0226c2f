//! A client workload that runs while a scenario disrupts the cluster: it writes `key-N = N`
//! through the `<cluster>-client` Service from inside the sandbox's cluster network with a real
//! etcd client, reads each key back, and remembers every acknowledged write and every failed
//! request with its time. Stopped, it reads every acknowledged key back with one linearizable
//! range read and reports the keys lost and the longest window without a successful request.
//!
//! A write that timed out is not acknowledged: etcd may or may not have applied it, so it is
//! neither required nor forbidden afterwards. An acknowledged write that is missing (or holds
//! another value) is a lost write, and [`WorkloadReport::assert_no_loss`] fails the test with it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions};
use kube_sandbox::network::ClusterNetwork;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long one request may take before it counts as failed.
pub const REQUEST_TIMEOUT: Duration = Duration::from_millis(1000);
/// Pause after a failed request, so a refused connection does not spin.
const AFTER_FAILURE: Duration = Duration::from_millis(50);
/// Pause between two successful rounds: keeps the load light on 2 shared cores while still
/// timing availability to a few tens of milliseconds.
const BETWEEN_ROUNDS: Duration = Duration::from_millis(20);
/// How long the final read-back may retry while the cluster settles.
const READ_BACK_LIMIT: Duration = Duration::from_secs(60);

/// One failed request.
#[derive(Clone, Debug)]
pub struct FailedRequest {
    /// Since the workload started.
    pub at: Duration,
    pub what: String,
    pub error: String,
}

/// What the workload saw while it ran.
#[derive(Debug, Default)]
struct Journal {
    /// Acknowledged writes: the N of `key-N`, and when (since the start).
    acknowledged: Vec<(u64, Duration)>,
    failed: Vec<FailedRequest>,
    /// Reads that answered with something other than what was acknowledged.
    wrong_reads: Vec<String>,
    /// The longest stretch without a successful request: (from, length), since the start.
    longest_gap: (Duration, Duration),
    ran_for: Duration,
}

/// The workload's verdict.
#[derive(Debug)]
pub struct WorkloadReport {
    pub label: String,
    pub acknowledged: usize,
    pub failed: usize,
    /// Acknowledged keys missing from the final read, or holding another value.
    pub lost: Vec<String>,
    /// Read-backs during the run that did not return the value just acknowledged.
    pub wrong_reads: Vec<String>,
    /// The longest window without a successful request, and when it began (since the start).
    pub longest_unavailable: Duration,
    pub unavailable_from: Duration,
    pub ran_for: Duration,
    /// The first few failed requests, for the log.
    pub first_failures: Vec<FailedRequest>,
}

impl WorkloadReport {
    /// One line for the test log.
    pub fn summary(&self) -> String {
        format!(
            "workload {}: {} writes acknowledged, {} requests failed, {} lost, {} wrong reads, longest unavailability {} ms (from {:.1} s), ran {:.1} s",
            self.label,
            self.acknowledged,
            self.failed,
            self.lost.len(),
            self.wrong_reads.len(),
            self.longest_unavailable.as_millis(),
            self.unavailable_from.as_secs_f64(),
            self.ran_for.as_secs_f64(),
        )
    }

    /// Fails the test if an acknowledged write was lost or a read contradicted one; prints the
    /// summary either way.
    pub fn assert_no_loss(&self) {
        println!("{}", self.summary());
        assert!(
            self.acknowledged > 0,
            "workload {}: no write was ever acknowledged; failures: {:?}",
            self.label,
            self.first_failures
        );
        assert!(
            self.lost.is_empty() && self.wrong_reads.is_empty(),
            "workload {}: acknowledged writes lost: {:?}; wrong reads: {:?}",
            self.label,
            self.lost,
            self.wrong_reads
        );
    }
}

/// A running workload; [`Workload::stop`] ends it and checks the data.
pub struct Workload {
    label: String,
    network: Arc<ClusterNetwork>,
    endpoint: String,
    secure: Option<SharedSecure>,
    stop: CancellationToken,
    task: JoinHandle<Journal>,
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

impl Workload {
    /// Starts writing through the client Service of `namespace/cluster`. `label` names the
    /// keys (`<label>/key-N`), so workloads one after another on a cluster do not mix.
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
    /// `http://etcd.ns.svc:2379`) rather than the `<cluster>-client` Service.
    pub fn start_at(
        network: Arc<ClusterNetwork>,
        endpoint: &str,
        label: &str,
        secure: Option<SharedSecure>,
    ) -> Workload {
        let endpoint = endpoint.to_string();
        let stop = CancellationToken::new();
        let task = tokio::spawn(run(
            network.clone(),
            endpoint.clone(),
            label.to_string(),
            stop.clone(),
            secure.clone(),
        ));
        Workload {
            label: label.to_string(),
            network,
            endpoint,
            secure,
            stop,
            task,
        }
    }

    /// Stops writing, then reads every acknowledged key back (linearizable, retried for up to
    /// a minute while the cluster settles) and reports.
    pub async fn stop(self) -> WorkloadReport {
        self.stop.cancel();
        let journal = self.task.await.expect("the workload task does not panic");
        let secure = self.secure.as_ref().map(|s| s.lock().unwrap().clone());
        let stored = read_back(&self.network, &self.endpoint, &self.label, secure.as_ref()).await;
        let lost = journal
            .acknowledged
            .iter()
            .filter(|(n, _)| stored.get(n) != Some(&n.to_string()))
            .map(|(n, at)| {
                format!(
                    "{} (acknowledged at {:.2} s, read {:?})",
                    key(&self.label, *n),
                    at.as_secs_f64(),
                    stored.get(n)
                )
            })
            .collect();
        WorkloadReport {
            label: self.label,
            acknowledged: journal.acknowledged.len(),
            failed: journal.failed.len(),
            lost,
            wrong_reads: journal.wrong_reads,
            longest_unavailable: journal.longest_gap.1,
            unavailable_from: journal.longest_gap.0,
            ran_for: journal.ran_for,
            first_failures: journal.failed.into_iter().take(5).collect(),
        }
    }
}

fn key(label: &str, n: u64) -> String {
    format!("{label}/key-{n}")
}

/// A real etcd client whose connections are made inside the cluster network and resolved by
/// the cluster DNS, as a Pod's would be.
pub async fn cluster_client(
    network: &Arc<ClusterNetwork>,
    endpoint: &str,
    secure: Option<&Secure>,
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
        .connect_timeout(REQUEST_TIMEOUT)
        .timeout(REQUEST_TIMEOUT);
    let mut options = None;
    if let Some(secure) = secure {
        let mut tls = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&secure.ca_pem));
        if let Some((cert, key)) = &secure.identity {
            tls = tls.identity(tonic::transport::Identity::from_pem(cert, key));
        }
        target = target.tls_config(tls).map_err(|e| e.to_string())?;
        if let Some((user, password)) = &secure.credentials {
            options = Some(
                etcd_client::ConnectOptions::new()
                    .with_timeout(REQUEST_TIMEOUT)
                    .with_user(user.clone(), password.clone()),
            );
        }
    }
    let channel = target.connect_with_connector_lazy(connector);
    Client::from_channel(etcd_client::Channel::Tonic(channel), options)
        .await
        .map_err(|e| e.to_string())
}

/// The loop: put `key-N`, read it back, next N. After a failure the client is rebuilt, as an
/// application would reconnect: the Service then routes the new connection to a serving member
/// instead of the one that hung.
async fn run(
    network: Arc<ClusterNetwork>,
    endpoint: String,
    label: String,
    stop: CancellationToken,
    secure: Option<SharedSecure>,
) -> Journal {
    let started = Instant::now();
    let mut journal = Journal::default();
    let mut client: Option<Client> = None;
    let mut last_success = started;
    let mut n: u64 = 0;
    while !stop.is_cancelled() {
        let current = match client.take() {
            Some(c) => c,
            None => match cluster_client(
                &network,
                &endpoint,
                secure.as_ref().map(|s| s.lock().unwrap().clone()).as_ref(),
            )
            .await
            {
                Ok(c) => c,
                Err(e) => {
                    journal.failed.push(FailedRequest {
                        at: started.elapsed(),
                        what: "connect".into(),
                        error: e,
                    });
                    tokio::time::sleep(AFTER_FAILURE).await;
                    continue;
                }
            },
        };
        let name = key(&label, n);
        let value = n.to_string();
        let mut kv = current.kv_client();
        let put = tokio::time::timeout(REQUEST_TIMEOUT, kv.put(name.clone(), value.clone(), None));
        match put.await {
            Ok(Ok(_)) => {
                let at = started.elapsed();
                journal.acknowledged.push((n, at));
                note_success(&mut journal, &mut last_success, started);
            }
            outcome => {
                let error = match outcome {
                    Ok(Err(e)) => e.to_string(),
                    _ => "timed out".to_string(),
                };
                journal.failed.push(FailedRequest {
                    at: started.elapsed(),
                    what: format!("put {name}"),
                    error,
                });
                n += 1;
                tokio::time::sleep(AFTER_FAILURE).await;
                continue;
            }
        }
        let get = tokio::time::timeout(REQUEST_TIMEOUT, kv.get(name.clone(), None));
        match get.await {
            Ok(Ok(response)) => {
                let read = response
                    .kvs()
                    .first()
                    .map(|kv| kv.value_str().unwrap_or_default().to_string());
                if read.as_deref() != Some(value.as_str()) {
                    journal.wrong_reads.push(format!(
                        "{name}: acknowledged {value}, read {read:?} at {:.2} s",
                        started.elapsed().as_secs_f64()
                    ));
                }
                note_success(&mut journal, &mut last_success, started);
                client = Some(current);
                tokio::time::sleep(BETWEEN_ROUNDS).await;
            }
            outcome => {
                let error = match outcome {
                    Ok(Err(e)) => e.to_string(),
                    _ => "timed out".to_string(),
                };
                journal.failed.push(FailedRequest {
                    at: started.elapsed(),
                    what: format!("get {name}"),
                    error,
                });
                tokio::time::sleep(AFTER_FAILURE).await;
            }
        }
        n += 1;
    }
    journal.ran_for = started.elapsed();
    // A window still open when the workload stops counts too.
    let open = last_success.elapsed();
    if open > journal.longest_gap.1 {
        journal.longest_gap = (last_success - started, open);
    }
    journal
}

fn note_success(journal: &mut Journal, last_success: &mut Instant, started: Instant) {
    let now = Instant::now();
    let gap = now - *last_success;
    if gap > journal.longest_gap.1 {
        journal.longest_gap = (*last_success - started, gap);
    }
    *last_success = now;
}

/// Every `<label>/key-N` stored, by N, from one linearizable range read (retried until the
/// cluster answers, at most [`READ_BACK_LIMIT`]).
async fn read_back(
    network: &Arc<ClusterNetwork>,
    endpoint: &str,
    label: &str,
    secure: Option<&Secure>,
) -> std::collections::HashMap<u64, String> {
    let prefix = format!("{label}/key-");
    let started = Instant::now();
    let mut last_error = String::new();
    while started.elapsed() < READ_BACK_LIMIT {
        let attempt = async {
            let client = cluster_client(network, endpoint, secure).await?;
            let mut kv = client.kv_client();
            let response = tokio::time::timeout(
                Duration::from_secs(5),
                kv.get(prefix.clone(), Some(GetOptions::new().with_prefix())),
            )
            .await
            .map_err(|_| "timed out".to_string())?
            .map_err(|e| e.to_string())?;
            Ok::<_, String>(
                response
                    .kvs()
                    .iter()
                    .filter_map(|kv| {
                        let n = kv.key_str().ok()?.strip_prefix(&prefix)?.parse().ok()?;
                        Some((n, kv.value_str().ok()?.to_string()))
                    })
                    .collect(),
            )
        };
        match attempt.await {
            Ok(stored) => return stored,
            Err(e) => last_error = e,
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!(
        "reading the workload's keys back through {endpoint} failed for {READ_BACK_LIMIT:?}: {last_error}"
    );
}
