//! The legacy operator's API, `etcd.aenix.io/v1alpha1` (aenix-io/etcd-operator, continued on
//! cozystack/etcd-operator's `v1alpha1` line), read-only: the fields the migration reads, with
//! the JSON names of its Go types, and the names its factory gives the objects it creates.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EmptyDirVolumeSource, LocalObjectReference, PersistentVolumeClaimSpec, PodSpec, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "etcd.aenix.io";
pub const VERSION: &str = "v1alpha1";
pub const API_VERSION: &str = "etcd.aenix.io/v1alpha1";

/// The image the legacy operator runs when the pod template names none.
pub const DEFAULT_IMAGE: &str = "quay.io/coreos/etcd:v3.5.12";
/// Where the legacy Pods mount their data volume, and etcd's data directory below it.
pub const DATA_MOUNT: &str = "/var/run/etcd";
pub const DATA_SUBDIR: &str = "default.etcd";
/// The etcd flags every legacy Pod runs with, whatever the spec says (`generateEtcdArgs`).
pub const FIXED_AUTO_COMPACTION_RETENTION: &str = "5m";
pub const FIXED_SNAPSHOT_COUNT: i64 = 10000;

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// `EtcdClusterSpec`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    #[serde(default)]
    pub replicas: Option<i32>,
    #[serde(default)]
    pub options: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub pod_template: Option<PodTemplate>,
    #[serde(default)]
    pub service_template: Option<ServiceTemplate>,
    #[serde(default)]
    pub headless_service_template: Option<MetadataTemplate>,
    #[serde(default)]
    pub pod_disruption_budget_template: Option<serde_json::Value>,
    #[serde(default)]
    pub storage: Storage,
    #[serde(default)]
    pub security: Option<Security>,
    #[serde(default)]
    pub bootstrap: Option<serde_json::Value>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
pub struct PodTemplate {
    #[serde(default)]
    pub metadata: Option<Metadata>,
    #[serde(default)]
    pub spec: Option<PodSpecLoose>,
}

/// `podTemplate.spec`: a strategic-merge overlay of a PodSpec, whose `containers` may lack
/// fields a full PodSpec requires; read leniently.
pub type PodSpecLoose = serde_json::Value;

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
pub struct ServiceTemplate {
    #[serde(default)]
    pub metadata: Option<Metadata>,
    #[serde(default)]
    pub spec: Option<ServiceSpec>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
pub struct MetadataTemplate {
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    #[serde(default)]
    pub empty_dir: Option<EmptyDirVolumeSource>,
    #[serde(default)]
    pub volume_claim_template: Option<ClaimTemplate>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
pub struct ClaimTemplate {
    #[serde(default)]
    pub metadata: Option<Metadata>,
    #[serde(default)]
    pub spec: Option<PersistentVolumeClaimSpec>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Security {
    #[serde(default)]
    pub tls: Option<Tls>,
    #[serde(default)]
    pub enable_auth: Option<bool>,
}

/// `TLSSpec`: six Secret names.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Tls {
    #[serde(default, rename = "peerTrustedCASecret")]
    pub peer_trusted_ca_secret: Option<String>,
    #[serde(default)]
    pub peer_secret: Option<String>,
    #[serde(default, rename = "serverTrustedCASecret")]
    pub server_trusted_ca_secret: Option<String>,
    #[serde(default)]
    pub server_secret: Option<String>,
    #[serde(default, rename = "clientTrustedCASecret")]
    pub client_trusted_ca_secret: Option<String>,
    #[serde(default)]
    pub client_secret: Option<String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
pub struct ClusterStatus {
    #[serde(default)]
    pub conditions: Option<Vec<Condition>>,
}

/// `EtcdBackupSpec` and `EtcdBackupScheduleSpec` share the destination.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackupSpec {
    #[serde(default)]
    pub cluster_ref: Option<LocalObjectReference>,
    #[serde(default)]
    pub destination: Option<serde_json::Value>,
    /// Schedules only.
    #[serde(default)]
    pub schedule: Option<String>,
    #[serde(default)]
    pub successful_jobs_history_limit: Option<i32>,
    #[serde(default)]
    pub failed_jobs_history_limit: Option<i32>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
pub struct BackupStatus {
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default)]
    pub snapshot: Option<serde_json::Value>,
}

fn template_name(metadata: Option<&Metadata>) -> Option<String> {
    metadata
        .and_then(|m| m.name.clone())
        .filter(|n| !n.is_empty())
}

impl ClusterSpec {
    /// `GetHeadlessServiceName`: the template's name, else `<cluster>-headless`.
    pub fn headless_service_name(&self, cluster: &str) -> String {
        template_name(
            self.headless_service_template
                .as_ref()
                .and_then(|t| t.metadata.as_ref()),
        )
        .unwrap_or_else(|| format!("{cluster}-headless"))
    }

    /// `GetServiceName`: the template's name, else the cluster's.
    pub fn client_service_name(&self, cluster: &str) -> String {
        template_name(
            self.service_template
                .as_ref()
                .and_then(|t| t.metadata.as_ref()),
        )
        .unwrap_or_else(|| cluster.to_string())
    }

    /// `GetPVCName`: the claim template's name, else `data`; claims are `<it>-<cluster>-<N>`.
    pub fn claim_template_name(&self) -> String {
        template_name(
            self.storage
                .volume_claim_template
                .as_ref()
                .and_then(|t| t.metadata.as_ref()),
        )
        .unwrap_or_else(|| "data".to_string())
    }

    pub fn tls(&self) -> Tls {
        self.security
            .as_ref()
            .and_then(|s| s.tls.clone())
            .unwrap_or_default()
    }

    pub fn auth_enabled(&self) -> bool {
        self.security
            .as_ref()
            .and_then(|s| s.enable_auth)
            .unwrap_or(false)
    }
}

/// The legacy cluster-state ConfigMap (`<cluster>-cluster-state`), read by every Pod's
/// `envFrom` at each container start.
pub fn state_config_map(cluster: &str) -> String {
    format!("{cluster}-cluster-state")
}

/// The token the legacy operator bootstrapped with (`ETCD_INITIAL_CLUSTER_TOKEN`).
pub fn cluster_token(cluster: &str, namespace: &str) -> String {
    format!("{cluster}-{namespace}")
}

/// The StatefulSet's Pod spec, unused fields aside: what actually runs.
pub type RunningPodSpec = PodSpec;

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

impl Tls {
    pub fn server(&self) -> Option<&str> {
        non_empty(&self.server_secret)
    }
    pub fn client(&self) -> Option<&str> {
        non_empty(&self.client_secret)
    }
    pub fn peer(&self) -> Option<&str> {
        non_empty(&self.peer_secret)
    }
    pub fn server_ca(&self) -> Option<&str> {
        non_empty(&self.server_trusted_ca_secret)
    }
    pub fn client_ca(&self) -> Option<&str> {
        non_empty(&self.client_trusted_ca_secret)
    }
    pub fn peer_ca(&self) -> Option<&str> {
        non_empty(&self.peer_trusted_ca_secret)
    }
}
