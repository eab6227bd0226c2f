//! What the node agent asks of the runtime: a Pod sandbox with its volumes, and containers,
//! already resolved from the API objects (secrets read, `valueFrom` evaluated).

use std::sync::Arc;

use jiff::Timestamp;

use super::container::Termination;
use super::volumes::ProjectedFile;
use crate::network::NetNamespace;

/// A Pod's sandbox: identity, network, `/etc` files and volumes.
#[derive(Clone, Debug)]
pub struct PodSandboxConfig {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `spec.hostname`, or the Pod name (the UTS hostname of every container).
    pub hostname: String,
    /// The Pod's network namespace (from [`crate::network::PodNetwork::namespace`]).
    pub network: Arc<NetNamespace>,
    /// `/etc/hosts` (see [`super::hosts_file`]).
    pub hosts_file: String,
    /// `/etc/resolv.conf` (see [`crate::network::resolv_conf`]).
    pub resolv_conf: String,
    /// `securityContext.fsGroup`: owner group of the volumes, extra group of every container.
    pub fs_group: Option<u32>,
    pub volumes: Vec<Volume>,
}

#[derive(Clone, Debug)]
pub struct Volume {
    pub name: String,
    pub source: VolumeSource,
}

#[derive(Clone, Debug)]
pub enum VolumeSource {
    /// A directory of the runtime's [`super::PersistentVolumeStore`], in the Pod's namespace;
    /// bound (created) at once if it does not exist yet, and kept when the Pod goes.
    PersistentVolumeClaim { claim_name: String, read_only: bool },
    /// A directory removed with the Pod.
    EmptyDir,
    /// `emptyDir: {medium: Memory}`: a tmpfs of `sizeLimit` bytes (half the RAM when unset).
    Memory { size_limit: Option<u64> },
    /// Files of a secret, configMap, downward API or projected volume; mounted read-only and
    /// refreshed with [`super::PodSandbox::refresh_files`].
    Files(Vec<ProjectedFile>),
}

/// A container to start in a Pod sandbox.
#[derive(Clone, Debug, Default)]
pub struct ContainerConfig {
    pub name: String,
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    /// The final environment, in order (`envFrom`, then `env` with `valueFrom` resolved and
    /// `$(VAR)` expanded by [`super::env::expand_env_list`]); `command` and `args` are expanded
    /// against it by the runtime.
    pub env: Vec<(String, String)>,
    pub working_dir: Option<String>,
    pub run_as_user: Option<u32>,
    pub run_as_group: Option<u32>,
    pub supplemental_groups: Vec<u32>,
    /// `securityContext.privileged`: keep every capability (others keep Docker's default set
    /// without `MKNOD`).
    pub privileged: bool,
    pub volume_mounts: Vec<VolumeMount>,
    /// `terminationMessagePath`: a file the runtime places there, empty at each start; what
    /// the container writes into it is its termination message.
    pub termination_message_path: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct VolumeMount {
    pub name: String,
    pub mount_path: String,
    pub read_only: bool,
    pub sub_path: Option<String>,
}

/// A container as `status.containerStatuses[]` describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerStatus {
    pub name: String,
    pub image: String,
    /// Number of runs before the current one.
    pub restart_count: u32,
    pub state: ContainerState,
    /// `lastState.terminated`: the run before the current one.
    pub last_termination: Option<Termination>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContainerState {
    /// `pid` as this machine sees it (the process is PID 1 in its own PID namespace).
    Running {
        pid: i32,
        started_at: Timestamp,
    },
    Terminated(Termination),
}

/// `/etc/hosts` of a Pod, as the kubelet writes it: localhost entries, then the Pod's address
/// with its fully qualified name when it has a subdomain, then `hostAliases`.
pub fn hosts_file(
    pod_ip: std::net::Ipv4Addr,
    hostname: &str,
    subdomain_fqdn: Option<&str>,
    host_aliases: &[(String, Vec<String>)],
) -> String {
    let mut hosts = String::from(
        "# Kubernetes-managed hosts file.\n\
         127.0.0.1\tlocalhost\n\
         ::1\tlocalhost ip6-localhost ip6-loopback\n\
         fe00::0\tip6-localnet\n\
         fe00::0\tip6-mcastprefix\n\
         fe00::1\tip6-allnodes\n\
         fe00::2\tip6-allrouters\n",
    );
    match subdomain_fqdn {
        Some(fqdn) => hosts.push_str(&format!("{pod_ip}\t{fqdn}\t{hostname}\n")),
        None => hosts.push_str(&format!("{pod_ip}\t{hostname}\n")),
    }
    if !host_aliases.is_empty() {
        hosts.push_str("\n# Entries added by HostAliases.\n");
        for (ip, names) in host_aliases {
            hosts.push_str(&format!("{ip}\t{}\n", names.join("\t")));
        }
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_file_names_the_pod_like_the_kubelet() {
        let hosts = hosts_file(
            "10.244.0.5".parse().unwrap(),
            "etcd-0",
            Some("etcd-0.etcd.default.svc.cluster.local"),
            &[("10.0.0.1".into(), vec!["api".into(), "api.local".into()])],
        );
        assert!(hosts.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"));
        assert!(hosts.contains("\n10.244.0.5\tetcd-0.etcd.default.svc.cluster.local\tetcd-0\n"));
        assert!(hosts.ends_with("# Entries added by HostAliases.\n10.0.0.1\tapi\tapi.local\n"));
        let plain = hosts_file("10.244.0.6".parse().unwrap(), "web", None, &[]);
        assert!(plain.ends_with("fe00::2\tip6-allrouters\n10.244.0.6\tweb\n"));
    }
}
