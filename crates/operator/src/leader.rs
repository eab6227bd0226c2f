//! Leader election over a coordination.k8s.io/v1 Lease, so that of several operator replicas
//! exactly one reconciles.
//!
//! The rules are client-go's: the holder renews the Lease every `retry_period`; a candidate
//! takes it over only after it has seen the same Lease record unchanged for
//! `lease_duration` (measured on its own clock, so clock skew between machines does not
//! matter), or at once when the holder released it. A holder that cannot renew within
//! `renew_deadline` steps down; since `renew_deadline < lease_duration`, it stops acting before
//! anyone else can take over. On shutdown the holder releases the Lease so a standby takes
//! over at its next retry.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Where and how to elect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// This replica's identity (its Pod name, by default).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(namespace: &str, name: &str, identity: &str) -> LeaseConfig {
        LeaseConfig {
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// The result of one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// We hold the Lease (acquired or renewed).
    Leading,
    /// Someone else holds an unexpired Lease.
    Following,
    /// A concurrent write won (409): try again at the next retry.
    Contended,
}

/// Why holding the lease ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldEnd {
    /// The shutdown token was cancelled: release the Lease.
    Shutdown,
    /// Renewal failed for longer than the renew deadline, or another replica holds the Lease.
    Lost,
}

/// One candidate.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    /// The last Lease record seen (by resourceVersion) and when it was first seen.
    last_seen: Option<(String, Instant)>,
}

impl LeaderElector {
    pub fn new(client: Client, config: LeaseConfig) -> LeaderElector {
        LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
            last_seen: None,
        }
    }

    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// Retries until this replica leads (true) or `shutdown` is cancelled (false).
    pub async fn acquire(&mut self, shutdown: &CancellationToken) -> bool {
        let mut announced = false;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Leading) => {
                    info!(lease = %self.config.name, identity = %self.config.identity, "leader election: acquired the lease");
                    return true;
                }
                Ok(_) if !announced => {
                    info!(lease = %self.config.name, "leader election: another replica leads; standing by");
                    announced = true;
                }
                Ok(_) => {}
                Err(e) => warn!(error = %e, "leader election: cannot read or write the lease"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return false,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
    }

    /// Renews the Lease every retry period until `shutdown` is cancelled or leadership is lost.
    pub async fn hold(&mut self, shutdown: &CancellationToken) -> HoldEnd {
        let mut renewed = Instant::now();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return HoldEnd::Shutdown,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Leading) => renewed = Instant::now(),
                Ok(Attempt::Following) => {
                    warn!("leader election: another replica holds the lease; stepping down");
                    return HoldEnd::Lost;
                }
                Ok(Attempt::Contended) => {}
                Err(e) => warn!(error = %e, "leader election: renewing the lease failed"),
            }
            if renewed.elapsed() > self.config.renew_deadline {
                warn!(
                    "leader election: could not renew the lease within the renew deadline; stepping down"
                );
                return HoldEnd::Lost;
            }
        }
    }

    /// Gives the Lease up (if we still hold it) so a standby takes over without waiting.
    pub async fn release(&mut self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await?;
        info!(lease = %self.config.name, "leader election: released the lease");
        Ok(())
    }

    /// One round: create, renew, take over an expired or released Lease, or follow.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let now = MicroTime(Timestamp::now());
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(self.held_spec(now.clone(), now, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Leading),
                Err(e) if is_conflict(&e) => Ok(Attempt::Contended),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let first_seen = match &self.last_seen {
            Some((seen, at)) if *seen == version => *at,
            _ => {
                let at = Instant::now();
                self.last_seen = Some((version, at));
                at
            }
        };
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let ours = holder.as_deref() == Some(self.config.identity.as_str());
        let duration = spec
            .lease_duration_seconds
            .map(|s| Duration::from_secs(s.max(0) as u64))
            .unwrap_or(self.config.lease_duration);
        let expired = first_seen.elapsed() > duration;
        if holder.is_some() && !ours && !expired {
            return Ok(Attempt::Following);
        }
        lease.spec = Some(if ours {
            let acquired = spec.acquire_time.clone().unwrap_or_else(|| now.clone());
            self.held_spec(acquired, now, spec.lease_transitions.unwrap_or(0))
        } else {
            self.held_spec(now.clone(), now, spec.lease_transitions.unwrap_or(0) + 1)
        });
        // The resourceVersion read above makes a concurrent takeover fail with 409.
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.last_seen = written
                    .metadata
                    .resource_version
                    .map(|v| (v, Instant::now()));
                Ok(Attempt::Leading)
            }
            Err(e) if is_conflict(&e) => Ok(Attempt::Contended),
            Err(e) => Err(e),
        }
    }

    fn held_spec(&self, acquired: MicroTime, renewed: MicroTime, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_duration.as_secs() as i32),
            acquire_time: Some(acquired),
            renew_time: Some(renewed),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }
}

fn is_conflict(error: &kube::Error) -> bool {
    crate::act::status_code(error) == Some(409)
}

/// This replica's identity: `$POD_NAME` (set from the Downward API in the Deployment), else
/// the host name, with the process ID so two processes on one machine differ.
pub fn default_identity() -> String {
    let base = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "etcd-operator".to_string());
    format!("{base}_{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_stop_acting_before_anyone_can_take_over() {
        let config = LeaseConfig::new("ns", "lease", "me");
        assert!(config.renew_deadline < config.lease_duration);
        assert!(config.retry_period < config.renew_deadline);
    }

    #[test]
    fn identity_is_never_empty() {
        assert!(!default_identity().is_empty());
    }
}
