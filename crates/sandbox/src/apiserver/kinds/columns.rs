//! Printer columns of the built-in kinds, as `kubectl get` shows them against a real cluster.

use serde_json::{Value, json};

use crate::apiserver::registry::{ColumnSource, PrinterColumn};

fn path(name: &str, column_type: &str, json_path: &str) -> PrinterColumn {
    PrinterColumn {
        name: name.into(),
        column_type: column_type.into(),
        format: String::new(),
        description: String::new(),
        priority: 0,
        source: ColumnSource::JsonPath(json_path.into()),
    }
}

fn computed(name: &str, compute: fn(&Value) -> Value) -> PrinterColumn {
    PrinterColumn {
        name: name.into(),
        column_type: "string".into(),
        format: String::new(),
        description: String::new(),
        priority: 0,
        source: ColumnSource::Computed(compute),
    }
}

fn wide(mut column: PrinterColumn) -> PrinterColumn {
    column.priority = 1;
    column
}

/// The Age column every kind ends with.
pub fn age() -> PrinterColumn {
    path("Age", "date", ".metadata.creationTimestamp")
}

/// Kinds with nothing but a name: NAME (added by the table writer) and AGE.
pub fn name_age() -> Vec<PrinterColumn> {
    vec![age()]
}

/// The CRD list shows the creation time itself, not an age.
pub fn created_at() -> Vec<PrinterColumn> {
    let mut column = computed("Created At", |crd| {
        crd["metadata"]["creationTimestamp"].clone()
    });
    column.column_type = "date".into();
    vec![column]
}

pub fn namespace() -> Vec<PrinterColumn> {
    vec![path("Status", "string", ".status.phase"), age()]
}

pub fn node() -> Vec<PrinterColumn> {
    vec![
        computed("Status", |node| {
            let ready = conditions(node)
                .find(|c| c["type"] == "Ready")
                .map(|c| c["status"] == "True")
                .unwrap_or(false);
            let mut status = if ready { "Ready" } else { "NotReady" }.to_string();
            if node["spec"]["unschedulable"] == true {
                status.push_str(",SchedulingDisabled");
            }
            json!(status)
        }),
        computed("Roles", |node| {
            let roles: Vec<&str> = node["metadata"]["labels"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
                .collect();
            json!(if roles.is_empty() {
                "<none>".to_string()
            } else {
                roles.join(",")
            })
        }),
        age(),
        path("Version", "string", ".status.nodeInfo.kubeletVersion"),
    ]
}

pub fn pod() -> Vec<PrinterColumn> {
    vec![
        computed("Ready", |pod| {
            let statuses = pod["status"]["containerStatuses"].as_array();
            let ready = statuses
                .into_iter()
                .flatten()
                .filter(|s| s["ready"] == true)
                .count();
            let total = pod["spec"]["containers"].as_array().map_or(0, Vec::len);
            json!(format!("{ready}/{total}"))
        }),
        computed("Status", pod_status),
        computed("Restarts", |pod| {
            let restarts: i64 = pod["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["restartCount"].as_i64())
                .sum();
            json!(restarts)
        }),
        age(),
        wide(path("IP", "string", ".status.podIP")),
        wide(path("Node", "string", ".spec.nodeName")),
    ]
}

/// The STATUS kubectl shows: Terminating, a container's waiting/terminated reason, or the phase.
fn pod_status(pod: &Value) -> Value {
    if pod["metadata"]["deletionTimestamp"].is_string() {
        return json!("Terminating");
    }
    if let Some(reason) = pod["status"]["reason"].as_str() {
        return json!(reason);
    }
    for status in pod["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for state in ["waiting", "terminated"] {
            if let Some(reason) = status["state"][state]["reason"].as_str()
                && reason != "Completed"
            {
                return json!(reason);
            }
        }
    }
    json!(pod["status"]["phase"].as_str().unwrap_or("Pending"))
}

pub fn persistent_volume_claim() -> Vec<PrinterColumn> {
    vec![
        path("Status", "string", ".status.phase"),
        path("Volume", "string", ".spec.volumeName"),
        path("Capacity", "string", ".status.capacity.storage"),
        computed("Access Modes", |pvc| {
            let modes: Vec<&str> = pvc["status"]["accessModes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|m| match m {
                    "ReadWriteOnce" => "RWO",
                    "ReadOnlyMany" => "ROX",
                    "ReadWriteMany" => "RWX",
                    "ReadWriteOncePod" => "RWOP",
                    other => other,
                })
                .collect();
            json!(modes.join(","))
        }),
        path("StorageClass", "string", ".spec.storageClassName"),
        age(),
    ]
}

fn map_len(value: &Value) -> usize {
    value.as_object().map_or(0, serde_json::Map::len)
}

pub fn config_map() -> Vec<PrinterColumn> {
    vec![
        computed("Data", |cm| {
            json!(map_len(&cm["data"]) + map_len(&cm["binaryData"]))
        }),
        age(),
    ]
}

pub fn secret() -> Vec<PrinterColumn> {
    vec![
        path("Type", "string", ".type"),
        computed("Data", |secret| json!(map_len(&secret["data"]))),
        age(),
    ]
}

pub fn service() -> Vec<PrinterColumn> {
    vec![
        path("Type", "string", ".spec.type"),
        path("Cluster-IP", "string", ".spec.clusterIP"),
        computed("External-IP", |svc| {
            let ips: Vec<&str> = svc["spec"]["externalIPs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            json!(if ips.is_empty() {
                "<none>".to_string()
            } else {
                ips.join(",")
            })
        }),
        computed("Port(s)", |svc| {
            let ports: Vec<String> = svc["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    let protocol = p["protocol"].as_str().unwrap_or("TCP");
                    match p["nodePort"].as_i64() {
                        Some(node_port) => format!("{}:{node_port}/{protocol}", p["port"]),
                        None => format!("{}/{protocol}", p["port"]),
                    }
                })
                .collect();
            json!(if ports.is_empty() {
                "<none>".to_string()
            } else {
                ports.join(",")
            })
        }),
        age(),
    ]
}

pub fn core_event() -> Vec<PrinterColumn> {
    vec![
        path("Last Seen", "date", ".lastTimestamp"),
        path("Type", "string", ".type"),
        path("Reason", "string", ".reason"),
        computed("Object", |event| {
            let object = &event["involvedObject"];
            json!(format!(
                "{}/{}",
                object["kind"].as_str().unwrap_or("").to_lowercase(),
                object["name"].as_str().unwrap_or("")
            ))
        }),
        path("Message", "string", ".message"),
    ]
}

pub fn pod_disruption_budget() -> Vec<PrinterColumn> {
    vec![
        computed("Min Available", |pdb| {
            or_not_applicable(&pdb["spec"]["minAvailable"])
        }),
        computed("Max Unavailable", |pdb| {
            or_not_applicable(&pdb["spec"]["maxUnavailable"])
        }),
        path(
            "Allowed Disruptions",
            "integer",
            ".status.disruptionsAllowed",
        ),
        age(),
    ]
}

/// A number as text, or "N/A" when unset, as kubectl prints PDB bounds.
fn or_not_applicable(value: &Value) -> Value {
    match value {
        Value::Null => json!("N/A"),
        Value::Number(n) => json!(n.to_string()),
        other => other.clone(),
    }
}

pub fn lease() -> Vec<PrinterColumn> {
    vec![path("Holder", "string", ".spec.holderIdentity"), age()]
}

pub fn job() -> Vec<PrinterColumn> {
    vec![
        computed("Status", |job| {
            let is = |t: &str| conditions(job).any(|c| c["type"] == t && c["status"] == "True");
            json!(if is("Complete") {
                "Complete"
            } else if is("Failed") {
                "Failed"
            } else {
                "Running"
            })
        }),
        computed("Completions", |job| {
            let succeeded = job["status"]["succeeded"].as_i64().unwrap_or(0);
            let completions = job["spec"]["completions"].as_i64().unwrap_or(1);
            json!(format!("{succeeded}/{completions}"))
        }),
        age(),
    ]
}

pub fn deployment() -> Vec<PrinterColumn> {
    vec![
        computed("Ready", |d| {
            let ready = d["status"]["readyReplicas"].as_i64().unwrap_or(0);
            let wanted = d["spec"]["replicas"].as_i64().unwrap_or(1);
            json!(format!("{ready}/{wanted}"))
        }),
        computed("Up-to-date", |d| {
            json!(d["status"]["updatedReplicas"].as_i64().unwrap_or(0))
        }),
        computed("Available", |d| {
            json!(d["status"]["availableReplicas"].as_i64().unwrap_or(0))
        }),
        age(),
    ]
}

pub fn stateful_set() -> Vec<PrinterColumn> {
    vec![
        computed("Ready", |s| {
            let ready = s["status"]["readyReplicas"].as_i64().unwrap_or(0);
            let wanted = s["spec"]["replicas"].as_i64().unwrap_or(1);
            json!(format!("{ready}/{wanted}"))
        }),
        age(),
    ]
}

pub fn role_binding() -> Vec<PrinterColumn> {
    vec![
        computed("Role", |b| {
            json!(format!(
                "{}/{}",
                b["roleRef"]["kind"].as_str().unwrap_or(""),
                b["roleRef"]["name"].as_str().unwrap_or("")
            ))
        }),
        age(),
    ]
}

fn conditions(object: &Value) -> impl Iterator<Item = &Value> {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_status_prefers_terminating_then_container_reason_then_phase() {
        let running = json!({"status": {"phase": "Running"}});
        assert_eq!(pod_status(&running), "Running");
        let crashing = json!({"status": {"phase": "Running", "containerStatuses": [
            {"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        assert_eq!(pod_status(&crashing), "CrashLoopBackOff");
        let deleting = json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}});
        assert_eq!(pod_status(&deleting), "Terminating");
    }
}
