//! A node's heartbeat, as the kubelet keeps it: its Lease in `kube-node-lease` renewed every
//! 10 s (scaled), and its Ready condition and addresses posted on start and whenever someone
//! else changed them (the node lifecycle marks a silent node Unknown). With a real control
//! plane the node also registers itself, as the kubelet does: it creates its Node object and
//! posts what the scheduler and the API server read of it (capacity, the kubelet endpoint, its
//! version and declared features).

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::worker::NodeContext;
use crate::controllers::node_lifecycle::NODE_LEASE_NAMESPACE;

/// The kubelet's lease duration (`nodeLeaseDurationSeconds`) and renewal interval.
const LEASE_DURATION_SECONDS: i32 = 40;
const RENEW_INTERVAL: Duration = Duration::from_secs(10);

fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    current: Option<&Node>,
    now: &str,
) -> Value {
    let previous = current
        .and_then(|node| node.status.as_ref())
        .and_then(|status| status.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == type_));
    let transition = match previous {
        Some(previous) if previous.status == status => previous
            .last_transition_time
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_else(|| now.to_string()),
        _ => now.to_string(),
    };
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "lastHeartbeatTime": now, "lastTransitionTime": transition})
}

async fn post_conditions(
    context: &NodeContext,
    ready: bool,
    message: &str,
) -> Result<(), kube::Error> {
    let api = Api::<Node>::all(context.kubelet.client.clone());
    let current = api.get_opt(&context.name).await?;
    let now =
        jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", Timestamp::now()).unwrap_or_default();
    let current = current.as_ref();
    let (status, reason) = if ready {
        ("True", "KubeletReady")
    } else {
        ("False", "KubeletNotReady")
    };
    let mut patch = json!({"status": {
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", current, &now),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", current, &now),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", current, &now),
            condition("Ready", status, reason, message, current, &now),
        ],
        "addresses": [
            {"type": "InternalIP", "address": context.host_ip.to_string()},
            {"type": "Hostname", "address": context.name},
        ],
    }});
    if context.kubelet.control_plane_ca.is_some() {
        let status = &mut patch["status"];
        status["capacity"] = node_capacity();
        status["allocatable"] = node_capacity();
        status["daemonEndpoints"] =
            json!({"kubeletEndpoint": {"Port": super::server::KUBELET_PORT}});
        status["declaredFeatures"] = json!([super::server::WEBSOCKETS_FEATURE]);
        status["nodeInfo"] = json!({
            "kubeletVersion": format!("v{}", crate::kubernetes::KUBERNETES_VERSION),
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
            "containerRuntimeVersion": "kube-sandbox://0.1",
            "osImage": "kube-sandbox",
            "kernelVersion": "",
            "machineID": context.name,
            "systemUUID": context.name,
            "bootID": "",
        });
    }
    api.patch_status(
        &context.name,
        &PatchParams::default(),
        &Patch::Strategic(&patch),
    )
    .await?;
    Ok(())
}

/// What each node offers the scheduler (the sandbox's nodes share one machine; these are the
/// numbers a small node has, so requests and limits mean something).
fn node_capacity() -> Value {
    json!({"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"})
}

/// Registers the node as the kubelet does when it starts: its Node object, labelled with its
/// hostname, OS, architecture and zone, unless it exists already (the node restarted, or the
/// sandbox's own API server made it).
pub async fn register(context: &NodeContext) -> Result<(), kube::Error> {
    let api = Api::<Node>::all(context.kubelet.client.clone());
    if api.get_opt(&context.name).await?.is_some() {
        return Ok(());
    }
    let mut labels = json!({
        "kubernetes.io/hostname": context.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    });
    if let Some(zone) = context.kubelet.zones.get(&context.name) {
        labels["topology.kubernetes.io/zone"] = json!(zone);
    }
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": context.name, "labels": labels},
        "spec": {},
    }))
    .map_err(kube::Error::SerdeError)?;
    match api.create(&PostParams::default(), &node).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error),
    }
}

/// Ready=True with the node's address in the cluster network.
pub async fn post_ready(context: &NodeContext) -> Result<(), kube::Error> {
    post_conditions(context, true, "kubelet is posting ready status").await?;
    renew_lease(context).await
}

/// Ready=False (a graceful shutdown began).
pub async fn post_not_ready(context: &NodeContext, message: &str) -> Result<(), kube::Error> {
    post_conditions(context, false, message).await
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

async fn renew_lease(context: &NodeContext) -> Result<(), kube::Error> {
    let api = Api::<Lease>::namespaced(context.kubelet.client.clone(), NODE_LEASE_NAMESPACE);
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(Timestamp::now());
    let patch = json!({"spec": {"holderIdentity": context.name, "leaseDurationSeconds": LEASE_DURATION_SECONDS, "renewTime": now}});
    match api
        .patch(
            &context.name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            let node = Api::<Node>::all(context.kubelet.client.clone())
                .get_opt(&context.name)
                .await?;
            let owner = node.and_then(|node| node.metadata.uid).map(|uid| {
                json!([{"apiVersion": "v1", "kind": "Node", "name": context.name, "uid": uid}])
            });
            let lease: Lease = serde_json::from_value(json!({
                "metadata": {"name": context.name, "namespace": NODE_LEASE_NAMESPACE, "ownerReferences": owner},
                "spec": patch["spec"],
            }))
            .map_err(kube::Error::SerdeError)?;
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
                Err(error) => Err(error),
            }
        }
        Err(error) => Err(error),
    }
}

/// Renews the Lease until the node agent stops; re-posts Ready when it was changed.
pub async fn run(context: Arc<NodeContext>) {
    let interval = context
        .kubelet
        .time_scale
        .scale(RENEW_INTERVAL)
        .max(Duration::from_millis(100));
    let nodes = Api::<Node>::all(context.kubelet.client.clone());
    let mut tick: u64 = 0;
    loop {
        tokio::select! {
            () = context.token.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        tick += 1;
        if let Err(error) = renew_lease(&context).await {
            tracing::warn!(node = %context.name, %error, "renewing the node Lease failed");
        }
        if tick.is_multiple_of(3) {
            let ready = nodes
                .get_opt(&context.name)
                .await
                .ok()
                .flatten()
                .is_some_and(|node| is_ready(&node));
            if !ready && let Err(error) = post_ready(&context).await {
                tracing::warn!(node = %context.name, %error, "posting the node Ready failed");
            }
        }
    }
}
