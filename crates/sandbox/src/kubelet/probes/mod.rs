//! Startup, liveness and readiness probes with the kubelet's semantics: a probe's result
//! changes only after `successThreshold` successes or `failureThreshold` failures in a row;
//! readiness starts as failed, liveness as passed; liveness and readiness wait for the
//! startup probe. Probes run from the cluster network, as a kubelet probes from its node.

mod actions;

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub use actions::{http_get, tcp_connect};

use crate::network::SocketFactory;

/// What a probe does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeAction {
    HttpGet {
        https: bool,
        host: Option<String>,
        port: u16,
        path: String,
        headers: Vec<(String, String)>,
    },
    TcpSocket {
        host: Option<String>,
        port: u16,
    },
    Exec {
        command: Vec<String>,
    },
    /// A probe that cannot run (a named port the container does not declare, gRPC): every run
    /// fails with this reason, as the kubelet's prober reports an error as a failure.
    Unusable(String),
}

/// A probe of a container with its timing, in real durations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSpec {
    pub action: ProbeAction,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

/// The probes of one container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerProbes {
    pub startup: Option<ProbeSpec>,
    pub liveness: Option<ProbeSpec>,
    pub readiness: Option<ProbeSpec>,
}

impl ContainerProbes {
    /// The probes of `container`.
    pub fn of(container: &Container) -> Self {
        let parse = |probe: &Option<Probe>| probe.as_ref().map(|p| ProbeSpec::parse(container, p));
        Self {
            startup: parse(&container.startup_probe),
            liveness: parse(&container.liveness_probe),
            readiness: parse(&container.readiness_probe),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.startup.is_none() && self.liveness.is_none() && self.readiness.is_none()
    }
}

fn seconds(value: Option<i32>, default: u64) -> Duration {
    Duration::from_secs(value.and_then(|v| u64::try_from(v).ok()).unwrap_or(default))
}

fn resolve_port(container: &Container, port: &IntOrString) -> Result<u16, String> {
    match port {
        IntOrString::Int(number) => {
            u16::try_from(*number).map_err(|_| format!("invalid port {number}"))
        }
        IntOrString::String(name) => {
            if let Ok(number) = name.parse::<u16>() {
                return Ok(number);
            }
            container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
                .ok_or_else(|| {
                    format!(
                        "couldn't find port {name:?} in container {}",
                        container.name
                    )
                })
        }
    }
}

impl ProbeSpec {
    pub fn parse(container: &Container, probe: &Probe) -> Self {
        let action = Self::action(container, probe).unwrap_or_else(ProbeAction::Unusable);
        Self {
            action,
            initial_delay: seconds(probe.initial_delay_seconds, 0),
            period: seconds(probe.period_seconds, 10).max(Duration::from_secs(1)),
            timeout: seconds(probe.timeout_seconds, 1).max(Duration::from_secs(1)),
            success_threshold: probe
                .success_threshold
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(1)
                .max(1),
            failure_threshold: probe
                .failure_threshold
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(3)
                .max(1),
        }
    }

    fn action(container: &Container, probe: &Probe) -> Result<ProbeAction, String> {
        Ok(if let Some(http) = &probe.http_get {
            ProbeAction::HttpGet {
                https: http
                    .scheme
                    .as_deref()
                    .is_some_and(|s| s.eq_ignore_ascii_case("HTTPS")),
                host: http.host.clone().filter(|h| !h.is_empty()),
                port: resolve_port(container, &http.port)?,
                path: http
                    .path
                    .clone()
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| "/".into()),
                headers: http
                    .http_headers
                    .iter()
                    .flatten()
                    .map(|h| (h.name.clone(), h.value.clone()))
                    .collect(),
            }
        } else if let Some(tcp) = &probe.tcp_socket {
            ProbeAction::TcpSocket {
                host: tcp.host.clone().filter(|h| !h.is_empty()),
                port: resolve_port(container, &tcp.port)?,
            }
        } else if let Some(exec) = &probe.exec {
            ProbeAction::Exec {
                command: exec.command.clone().unwrap_or_default(),
            }
        } else if probe.grpc.is_some() {
            return Err(
                "gRPC probes are not supported by kube-sandbox; use httpGet, tcpSocket or exec"
                    .into(),
            );
        } else {
            return Err("the probe has no handler (httpGet, tcpSocket or exec)".into());
        })
    }
}

/// The reported result of a probe, changing only after enough equal results in a row (the
/// kubelet's prober worker).
#[derive(Clone, Debug)]
pub struct ProbeTracker {
    success_threshold: u32,
    failure_threshold: u32,
    last: Option<bool>,
    run: u32,
    reported: Option<bool>,
}

impl ProbeTracker {
    /// `initial`: readiness starts failed, liveness passed, startup unknown.
    pub fn new(spec: &ProbeSpec, initial: Option<bool>) -> Self {
        Self {
            success_threshold: spec.success_threshold,
            failure_threshold: spec.failure_threshold,
            last: None,
            run: 0,
            reported: initial,
        }
    }

    /// Records one result; returns the new reported result when it changed.
    pub fn record(&mut self, passed: bool) -> Option<bool> {
        if self.last == Some(passed) {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = Some(passed);
            self.run = 1;
        }
        let threshold = if passed {
            self.success_threshold
        } else {
            self.failure_threshold
        };
        if self.run < threshold || self.reported == Some(passed) {
            return None;
        }
        self.reported = Some(passed);
        Some(passed)
    }
}

/// What the probes of a container tell its worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeEvent {
    /// The startup probe passed (or there is none): liveness and readiness begin.
    Started,
    /// The startup probe failed `failureThreshold` times: the container is killed.
    StartupFailed,
    /// The readiness probe's result changed.
    Ready(bool),
    /// The liveness probe failed `failureThreshold` times: the container is killed.
    LivenessFailed,
    /// One run of a probe failed (`Unhealthy` events, as the kubelet records them).
    Unhealthy { message: String },
}

/// Runs an exec probe's command in the container; `Ok(())` when it exited 0, else why not.
pub type ExecProbe =
    Arc<dyn Fn(Vec<String>, Duration) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// Where a container's probes connect and how they run commands in it.
#[derive(Clone)]
pub struct ProbeTarget {
    pub sockets: SocketFactory,
    pub pod_ip: Ipv4Addr,
    pub exec: ExecProbe,
    /// Probe runs in flight at once, shared by every container of the process
    /// ([`in_flight`]): a run waits for a place before its timeout starts.
    pub in_flight: Arc<tokio::sync::Semaphore>,
}

/// The places for probe runs in flight in this process, shared by all its nodes' containers.
///
/// Every node agent of a sandbox runs in one process, so its open-file limit covers every
/// Pod's descriptors (four or more each) and every probe's connection. A real kubelet has a
/// node's Pods to probe (110 at most); here thousands of Pods are probed from one process,
/// and when their targets stall together (a loaded machine) each probe holds a connection
/// until its timeout: two per Pod (liveness and readiness), 6,000 at 3,000 Pods, a third of
/// this machine's limit (docs/testing.md, "Thousands of Pods"). A run past the bound waits
/// for a place instead, so a probe result comes late rather than the process failing.
pub fn in_flight() -> Arc<tokio::sync::Semaphore> {
    static PLACES: std::sync::LazyLock<Arc<tokio::sync::Semaphore>> =
        std::sync::LazyLock::new(|| {
            let limit = crate::runtime::open_files_limit().map_or(1024, |(soft, _)| soft);
            Arc::new(tokio::sync::Semaphore::new(in_flight_bound(limit)))
        });
    PLACES.clone()
}

/// Probe runs in flight for a process allowed `open_files` descriptors: a fifth of them (at
/// least 64), which leaves four fifths to the Pods (four a Pod) and the Services.
pub(crate) fn in_flight_bound(open_files: u64) -> usize {
    usize::try_from(open_files / 5)
        .unwrap_or(usize::MAX)
        .max(64)
}

impl ProbeTarget {
    /// One run of a probe: `Ok(())` when it passed, else the kubelet's failure message.
    pub async fn run(&self, action: &ProbeAction, timeout: Duration) -> Result<(), String> {
        // Held until the run ends (its connection or command closed); the places are never
        // closed, so the error is only for completeness.
        let _place = self
            .in_flight
            .acquire()
            .await
            .map_err(|_| "probe places closed".to_string())?;
        let host = |host: &Option<String>| host.clone().unwrap_or_else(|| self.pod_ip.to_string());
        match action {
            ProbeAction::HttpGet {
                https,
                host: h,
                port,
                path,
                headers,
            } => {
                http_get(
                    &self.sockets,
                    &host(h),
                    *port,
                    path,
                    headers,
                    *https,
                    timeout,
                )
                .await
            }
            ProbeAction::TcpSocket { host: h, port } => {
                tcp_connect(&self.sockets, &host(h), *port, timeout).await
            }
            ProbeAction::Exec { command } => (self.exec)(command.clone(), timeout).await,
            ProbeAction::Unusable(reason) => Err(reason.clone()),
        }
    }
}

/// Runs a container's probes until the task is dropped, reporting through `report`.
pub async fn supervise(
    probes: ContainerProbes,
    target: ProbeTarget,
    report: impl Fn(ProbeEvent) + Send + Sync,
) {
    // Every failed run is worth an event (the kubelet's `Unhealthy`); its text is returned.
    let run = |kind: &'static str, spec: &ProbeSpec| {
        let target = &target;
        let report = &report;
        let action = spec.action.clone();
        let timeout = spec.timeout;
        async move {
            let outcome = target.run(&action, timeout).await;
            outcome.map_err(|reason| {
                let message = format!("{kind} probe failed: {reason}");
                report(ProbeEvent::Unhealthy {
                    message: message.clone(),
                });
                message
            })
        }
    };
    if let Some(startup) = &probes.startup {
        tokio::time::sleep(startup.initial_delay).await;
        let mut tracker = ProbeTracker::new(startup, None);
        loop {
            let outcome = run("Startup", startup).await;
            match tracker.record(outcome.is_ok()) {
                Some(true) => break,
                Some(false) => {
                    report(ProbeEvent::StartupFailed);
                    return;
                }
                None => tokio::time::sleep(startup.period).await,
            }
        }
    }
    report(ProbeEvent::Started);
    let liveness = async {
        let Some(spec) = &probes.liveness else {
            return futures::future::pending::<()>().await;
        };
        tokio::time::sleep(spec.initial_delay).await;
        let mut tracker = ProbeTracker::new(spec, Some(true));
        loop {
            let outcome = run("Liveness", spec).await;
            if tracker.record(outcome.is_ok()) == Some(false) {
                report(ProbeEvent::LivenessFailed);
                return futures::future::pending::<()>().await;
            }
            tokio::time::sleep(spec.period).await;
        }
    };
    let readiness = async {
        let Some(spec) = &probes.readiness else {
            return;
        };
        tokio::time::sleep(spec.initial_delay).await;
        let mut tracker = ProbeTracker::new(spec, Some(false));
        loop {
            let outcome = run("Readiness", spec).await;
            if let Some(ready) = tracker.record(outcome.is_ok()) {
                report(ProbeEvent::Ready(ready));
            }
            tokio::time::sleep(spec.period).await;
        }
    };
    tokio::join!(liveness, readiness);
}

#[cfg(test)]
mod tests;
