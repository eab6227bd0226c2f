//! PodDisruptionBudgets: their status (currentHealthy, desiredHealthy, disruptionsAllowed,
//! expectedPods) and the eviction subresource that honours them with 429.

use serde_json::{Value, json};

use super::error::{ApiError, ApiResult, StatusCause};
use super::objects::metadata::now;
use super::objects::{self, DeleteOptions, WriteOptions};
use super::selector::LabelSelector;
use super::server::ApiServer;
use super::store::ResourceId;

pub fn pods() -> ResourceId {
    ResourceId::new("", "pods")
}

pub fn budgets() -> ResourceId {
    ResourceId::new("policy", "poddisruptionbudgets")
}

/// A Pod counts as healthy when Ready and not being deleted.
pub fn is_healthy(pod: &Value) -> bool {
    pod["metadata"]["deletionTimestamp"].is_null()
        && pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn selects(pdb: &Value, pod: &Value) -> bool {
    LabelSelector::from_object(&pdb["spec"]["selector"])
        .is_some_and(|s| s.matches(&pod["metadata"]["labels"]))
}

/// `minAvailable`/`maxUnavailable` as a count of `expected` (percentages rounded up, as the
/// disruption controller rounds them).
fn count_of(value: &Value, expected: i64) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let percent: i64 = s.strip_suffix('%')?.parse().ok()?;
            Some((percent * expected + 99) / 100)
        }
        _ => None,
    }
}

/// The status the disruption controller would write for `pdb` given the namespace's Pods.
pub fn compute_status(pdb: &Value, pods: &[std::sync::Arc<Value>], now: &str) -> Value {
    let selected: Vec<&Value> = pods
        .iter()
        .map(|p| p.as_ref())
        .filter(|p| selects(pdb, p))
        .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
        .collect();
    let expected = selected.len() as i64;
    let healthy = selected.iter().filter(|p| is_healthy(p)).count() as i64;
    let spec = &pdb["spec"];
    let desired = if let Some(min) = count_of(&spec["minAvailable"], expected) {
        min
    } else if let Some(max) = count_of(&spec["maxUnavailable"], expected) {
        (expected - max).max(0)
    } else {
        1
    };
    // Evictions already granted count against the budget until their Pods are gone.
    let mut disrupted = serde_json::Map::new();
    for (pod, at) in pdb["status"]["disruptedPods"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if selected.iter().any(|p| {
            p["metadata"]["name"] == pod.as_str() && p["metadata"]["deletionTimestamp"].is_null()
        }) {
            disrupted.insert(pod.clone(), at.clone());
        }
    }
    let allowed = (healthy - desired - disrupted.len() as i64).max(0);
    let previous_allowed = pdb["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "DisruptionAllowed")
        .cloned();
    let status = if allowed > 0 { "True" } else { "False" };
    let condition = match previous_allowed {
        Some(c) if c["status"] == status => c,
        _ => json!({
            "type": "DisruptionAllowed",
            "status": status,
            "reason": if allowed > 0 { "SufficientPods" } else { "InsufficientPods" },
            "message": "",
            "observedGeneration": pdb["metadata"]["generation"],
            "lastTransitionTime": now,
        }),
    };
    let mut result = json!({
        "observedGeneration": pdb["metadata"]["generation"],
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": allowed,
        "expectedPods": expected,
        "conditions": [condition],
    });
    if !disrupted.is_empty() {
        result["disruptedPods"] = Value::Object(disrupted);
    }
    result
}

/// Recomputes and writes the status of every PDB in `namespace` whose status changed.
pub fn refresh_namespace(server: &ApiServer, namespace: &str) {
    let budgets_now = server
        .store
        .list(&budgets(), Some(namespace), None, None, &|_| true)
        .items;
    if budgets_now.is_empty() {
        return;
    }
    let pods_now = server
        .store
        .list(&pods(), Some(namespace), None, None, &|_| true)
        .items;
    let kind = server.registry.get("policy", "poddisruptionbudgets");
    let Some(kind) = kind else { return };
    for pdb in budgets_now {
        let name = pdb["metadata"]["name"].as_str().unwrap_or("").to_string();
        let status = compute_status(&pdb, &pods_now, &now());
        if pdb["status"] == status {
            continue;
        }
        let _ = objects::update_with(
            server,
            &kind,
            "v1",
            namespace,
            &name,
            Some("status"),
            &WriteOptions::internal("kube-controller-manager"),
            &mut |current| {
                let mut updated = current.clone();
                updated["status"] = compute_status(current, &pods_now, &now());
                Ok(updated)
            },
        );
    }
}

/// The eviction subresource: deletes the Pod unless a PDB covering it would be broken (429).
pub fn evict(
    server: &ApiServer,
    namespace: &str,
    pod_name: &str,
    options: &DeleteOptions,
) -> ApiResult<()> {
    let pod_kind = server
        .registry
        .get("", "pods")
        .ok_or_else(|| ApiError::internal("pods are not served"))?;
    let pod = server
        .store
        .get(&pods(), namespace, pod_name)
        .ok_or_else(|| ApiError::not_found("", "pods", pod_name))?;
    let matching: Vec<_> = server
        .store
        .list(&budgets(), Some(namespace), None, None, &|pdb| {
            selects(pdb, &pod)
        })
        .items;
    if matching.len() > 1 {
        return Err(ApiError::internal(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    // An unhealthy or already terminating Pod can always go: evicting it loses nothing.
    if let Some(pdb) = matching.first()
        && is_healthy(&pod)
    {
        let pdb_kind = server
            .registry
            .get("policy", "poddisruptionbudgets")
            .ok_or_else(|| ApiError::internal("PDBs are not served"))?;
        let pdb_name = pdb["metadata"]["name"].as_str().unwrap_or("").to_string();
        let pods_now = server
            .store
            .list(&pods(), Some(namespace), None, None, &|_| true)
            .items;
        let granted = objects::update_with(
            server,
            &pdb_kind,
            "v1",
            namespace,
            &pdb_name,
            Some("status"),
            &WriteOptions {
                dry_run: options.dry_run,
                ..WriteOptions::internal("kube-apiserver")
            },
            &mut |current| {
                let status = compute_status(current, &pods_now, &now());
                if status["disruptionsAllowed"].as_i64().unwrap_or(0) <= 0 {
                    let mut err = ApiError::too_many_requests(
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                    );
                    err.causes = vec![StatusCause {
                        reason: "DisruptionBudget".into(),
                        message: format!(
                            "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                            status["desiredHealthy"], status["currentHealthy"]
                        ),
                        field: String::new(),
                    }];
                    return Err(err);
                }
                let mut updated = current.clone();
                let mut status = status;
                status["disruptionsAllowed"] =
                    json!(status["disruptionsAllowed"].as_i64().unwrap_or(1) - 1);
                status["disruptedPods"][pod_name] = json!(now());
                updated["status"] = status;
                Ok(updated)
            },
        );
        granted?;
    }
    objects::delete(server, &pod_kind, namespace, pod_name, options)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn pod(name: &str, ready: bool) -> Arc<Value> {
        Arc::new(
            json!({"metadata": {"name": name, "labels": {"app": "etcd"}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}}),
        )
    }

    #[test]
    fn status_counts_healthy_pods_against_the_budget() {
        let pods = vec![pod("a", true), pod("b", true), pod("c", false)];
        let pdb = json!({"metadata": {"generation": 1}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "etcd"}}}});
        let status = compute_status(&pdb, &pods, "t");
        assert_eq!(
            (
                status["expectedPods"].as_i64(),
                status["currentHealthy"].as_i64(),
                status["desiredHealthy"].as_i64(),
                status["disruptionsAllowed"].as_i64()
            ),
            (Some(3), Some(2), Some(2), Some(0))
        );
        assert_eq!(status["conditions"][0]["reason"], "InsufficientPods");
        let pdb = json!({"spec": {"maxUnavailable": "34%", "selector": {"matchLabels": {"app": "etcd"}}}});
        let status = compute_status(&pdb, &pods, "t");
        assert_eq!(status["desiredHealthy"], 1);
        assert_eq!(status["disruptionsAllowed"], 1);
    }

    #[test]
    fn granted_evictions_count_until_the_pod_is_gone() {
        let pods = vec![pod("a", true), pod("b", true), pod("c", true)];
        let pdb = json!({"spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "etcd"}}},
            "status": {"disruptedPods": {"a": "t", "gone": "t"}}});
        let status = compute_status(&pdb, &pods, "t");
        assert_eq!(status["disruptionsAllowed"], 1);
        assert_eq!(status["disruptedPods"].as_object().unwrap().len(), 1);
    }
}
