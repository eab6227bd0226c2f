//! The command line of `etcd-operator run`, and the settings it resolves to.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::domain::settings::{
    DEFAULT_CLUSTER_DOMAIN, DEFAULT_ETCD_IMAGE_REPOSITORY, OperatorSettings, RepairTiming,
};
use crate::observe::Scope;

/// Where a Pod finds its own namespace.
pub const SERVICE_ACCOUNT_NAMESPACE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// `etcd-operator run`.
#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    /// Kubeconfig to use; without it, the in-cluster service account (and $KUBECONFIG or
    /// ~/.kube/config when not in a Pod).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// The namespace whose EtcdClusters to manage, or `all`.
    #[arg(long, env = "WATCH_NAMESPACE", default_value = "all")]
    pub namespace: String,

    /// Repository of the etcd image (the tag is `v<spec.version>`).
    #[arg(long, env = "ETCD_IMAGE_REPOSITORY", default_value = DEFAULT_ETCD_IMAGE_REPOSITORY)]
    pub etcd_image_repository: String,

    /// The operator's own image, which restore init containers run (a cluster bootstrapped
    /// from a snapshot); keep it equal to the image of the operator's Deployment.
    #[arg(long, env = "ETCD_OPERATOR_AGENT_IMAGE", default_value = crate::domain::settings::DEFAULT_AGENT_IMAGE)]
    pub agent_image: String,

    /// The directory under which EtcdSnapshots with `destination.local` may write: a volume
    /// mounted into the operator's Pod (docs/backups.md, "To a local directory"). A
    /// `local.path` outside it is refused.
    #[arg(long, env = "ETCD_OPERATOR_LOCAL_STORE_ROOT", default_value = crate::domain::location::DEFAULT_LOCAL_ROOT)]
    pub local_store_root: PathBuf,

    /// Address of the HTTP server for /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,

    /// Elect a leader among replicas through a Lease (`--leader-elect=false` to run alone).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,

    /// Namespace of the leader Lease; defaults to the operator's own namespace.
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// Name of the leader Lease.
    #[arg(long, default_value = "etcd-operator-leader")]
    pub lease_name: String,

    /// This replica's identity in the Lease; defaults to $POD_NAME or the host name.
    #[arg(long)]
    pub leader_identity: Option<String>,

    /// Seconds a Lease stays valid without renewal.
    #[arg(long, default_value_t = 15)]
    pub lease_duration_seconds: u64,

    /// Clusters reconciled at the same time.
    #[arg(long, default_value_t = 16)]
    pub concurrency: u16,

    /// Member endpoints whose etcd connections are kept from one pass to the next (about
    /// 62 KiB each). Past it the pool keeps the ones it has, and the others are dialled for
    /// each look and closed after it; 0 keeps none between passes.
    #[arg(long, default_value_t = crate::etcd::DEFAULT_KEPT)]
    pub etcd_connections_kept: usize,

    /// Seconds a member's Pod may stay not ready, with its etcd not answering, before the Pod
    /// is recreated (repair level 1). At least 1.
    #[arg(long, default_value_t = 180, value_parser = clap::value_parser!(u64).range(1..))]
    pub not_ready_grace_seconds: u64,

    /// Seconds to wait before repairing a member again; doubles with each repair of the same
    /// member, up to 30 times this. At least 1, so a deterministic failure never churns.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub repair_backoff_seconds: u64,

    /// The cluster's DNS domain, for the names in cert-manager Certificates.
    #[arg(long, env = "CLUSTER_DOMAIN", default_value = DEFAULT_CLUSTER_DOMAIN)]
    pub cluster_domain: String,

    /// Log format: one JSON object per line, or text for a terminal.
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,

    /// Log filter, in `tracing`'s EnvFilter syntax (e.g. `info`, `etcd_operator=debug`).
    #[arg(long, env = "RUST_LOG", default_value = "info")]
    pub log_level: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

/// Why the command line cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(
        "the leader election namespace is unknown: pass --leader-election-namespace NS (or set POD_NAMESPACE), or run a single replica with --leader-elect=false"
    )]
    NoLeaseNamespace,
    #[error("--namespace must be a namespace name or `all`, not {0:?}")]
    BadNamespace(String),
    #[error("--lease-duration-seconds must be at least 3, not {0}")]
    LeaseTooShort(u64),
}

impl RunArgs {
    pub fn scope(&self) -> Result<Scope, ConfigError> {
        match self.namespace.as_str() {
            "all" | "" => Ok(Scope::All),
            ns if is_dns_label(ns) => Ok(Scope::Namespace(ns.to_string())),
            other => Err(ConfigError::BadNamespace(other.to_string())),
        }
    }

    pub fn settings(&self) -> OperatorSettings {
        OperatorSettings {
            etcd_image_repository: self.etcd_image_repository.clone(),
            repair: RepairTiming::from_seconds(
                self.not_ready_grace_seconds,
                self.repair_backoff_seconds,
            ),
            cluster_domain: self.cluster_domain.clone(),
            agent_image: self.agent_image.clone(),
            local_store_root: self.local_store_root.clone(),
        }
    }

    /// The Lease's namespace: the flag, else the namespace of the Pod we run in.
    pub fn lease_namespace(&self, in_pod_namespace: Option<String>) -> Result<String, ConfigError> {
        self.leader_election_namespace
            .clone()
            .filter(|s| !s.is_empty())
            .or(in_pod_namespace)
            .ok_or(ConfigError::NoLeaseNamespace)
    }

    /// The Lease timings, scaled from its duration as client-go's defaults are (15/10/2).
    pub fn lease_timings(
        &self,
    ) -> Result<
        (
            std::time::Duration,
            std::time::Duration,
            std::time::Duration,
        ),
        ConfigError,
    > {
        let secs = self.lease_duration_seconds;
        if secs < 3 {
            return Err(ConfigError::LeaseTooShort(secs));
        }
        let lease = std::time::Duration::from_secs(secs);
        Ok((lease, lease * 2 / 3, lease * 2 / 15))
    }
}

/// The namespace of the Pod we run in, from the service account mount.
pub fn in_pod_namespace() -> Option<String> {
    std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> RunArgs {
        Cli::parse_from(std::iter::once("run").chain(args.iter().copied())).run
    }

    #[test]
    fn defaults_watch_everything_and_elect_a_leader() {
        let args = parse(&[]);
        assert!(args.leader_elect);
        assert_eq!(args.lease_name, "etcd-operator-leader");
        assert_eq!(args.log_format, LogFormat::Json);
    }

    #[test]
    fn repair_timing_defaults_and_flags() {
        assert_eq!(parse(&[]).settings().repair, RepairTiming::default());
        let repair = parse(&[
            "--not-ready-grace-seconds",
            "20",
            "--repair-backoff-seconds",
            "2",
        ])
        .settings()
        .repair;
        assert_eq!(repair.not_ready_grace, std::time::Duration::from_secs(20));
        assert_eq!(repair.backoff(1), std::time::Duration::from_secs(2));
        assert_eq!(repair.backoff(10), std::time::Duration::from_secs(60));
        for flag in ["--not-ready-grace-seconds", "--repair-backoff-seconds"] {
            let refused = Cli::try_parse_from(["run", flag, "0"]);
            assert!(refused.is_err(), "{flag} 0 is refused");
        }
    }

    #[test]
    fn namespace_scope_is_validated() {
        assert_eq!(parse(&["--namespace", "all"]).scope(), Ok(Scope::All));
        assert_eq!(
            parse(&["--namespace", "prod"]).scope(),
            Ok(Scope::Namespace("prod".into()))
        );
        assert!(parse(&["--namespace", "Prod_1"]).scope().is_err());
    }

    #[test]
    fn lease_namespace_comes_from_the_flag_or_the_pod() {
        let args = parse(&["--leader-election-namespace", "ops"]);
        assert_eq!(args.lease_namespace(None), Ok("ops".to_string()));
        let args = RunArgs {
            leader_election_namespace: None,
            ..parse(&[])
        };
        assert_eq!(
            args.lease_namespace(Some("etcd-operator-system".into())),
            Ok("etcd-operator-system".to_string())
        );
        assert_eq!(
            args.lease_namespace(None),
            Err(ConfigError::NoLeaseNamespace)
        );
    }

    #[test]
    fn leader_election_can_be_turned_off_and_timings_scale() {
        let args = parse(&["--leader-elect=false", "--lease-duration-seconds", "30"]);
        assert!(!args.leader_elect);
        let (lease, renew, retry) = args.lease_timings().unwrap();
        assert_eq!(lease.as_secs(), 30);
        assert_eq!(renew.as_secs(), 20);
        assert_eq!(retry.as_secs(), 4);
        assert!(
            parse(&["--lease-duration-seconds", "1"])
                .lease_timings()
                .is_err()
        );
    }
}
