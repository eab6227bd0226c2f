//! PersistentVolumeClaims as kube-apiserver admits them: the `DefaultStorageClass` admission
//! plugin (a claim created without `storageClassName` gets the default StorageClass, the one
//! annotated `storageclass.kubernetes.io/is-default-class: "true"`), the claim's update
//! validation (a claim's requested storage cannot shrink) and the `PersistentVolumeClaimResize`
//! admission plugin (a claim may grow only when the StorageClass that provisioned it has
//! `allowVolumeExpansion: true`). Growing the volume itself is the claim controller's
//! (`kubelet/claims.rs`): it reflects the new size in `status.capacity`, as Kubernetes'
//! resize controller does once the volume has grown.

use serde_json::{Value, json};

use crate::apiserver::error::{ApiError, ApiResult};
use crate::apiserver::registry::ResourceType;
use crate::apiserver::server::ApiServer;
use crate::apiserver::store::ResourceId;

/// The annotation that marks the default StorageClass.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

fn is_claim(kind: &ResourceType) -> bool {
    kind.group.is_empty() && kind.kind == "PersistentVolumeClaim"
}

fn storage_classes(server: &ApiServer) -> Vec<std::sync::Arc<Value>> {
    server
        .store
        .list(
            &ResourceId::new("storage.k8s.io", "storageclasses"),
            None,
            None,
            None,
            &|_| true,
        )
        .items
}

/// `DefaultStorageClass`: a new claim without `storageClassName` (absent, not `""`) gets the
/// default StorageClass; with several defaults, the newest, as Kubernetes picks.
pub fn default_storage_class(server: &ApiServer, kind: &ResourceType, claim: &mut Value) {
    if !is_claim(kind) || !claim["spec"]["storageClassName"].is_null() {
        return;
    }
    let default = storage_classes(server)
        .into_iter()
        .filter(|sc| sc["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION] == "true")
        .max_by(|a, b| {
            let created = |v: &Value| {
                v["metadata"]["creationTimestamp"]
                    .as_str()
                    .map(str::to_string)
            };
            created(a).cmp(&created(b))
        });
    if let Some(name) = default
        .as_ref()
        .and_then(|sc| sc["metadata"]["name"].as_str())
        && let Some(spec) = claim.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.insert("storageClassName".into(), json!(name));
    }
}

/// The requested storage of a claim, in bytes.
fn requested(claim: &Value) -> Option<f64> {
    claim["spec"]["resources"]["requests"]["storage"]
        .as_str()
        .and_then(quantity)
}

/// A change of a claim's spec (not its status): its request cannot shrink, and can grow only
/// when its StorageClass allows expansion.
pub fn check_resize(
    server: &ApiServer,
    kind: &ResourceType,
    subresource: Option<&str>,
    current: &Value,
    object: &Value,
) -> ApiResult<()> {
    if !is_claim(kind) || subresource.is_some() {
        return Ok(());
    }
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    let (Some(old), Some(new)) = (requested(current), requested(object)) else {
        return Ok(());
    };
    if new < old {
        return Err(ApiError::invalid_field(
            "",
            "PersistentVolumeClaim",
            name,
            "spec.resources.requests.storage",
            "FieldValueForbidden",
            "Forbidden: field can not be less than previous value",
        ));
    }
    if new == old {
        return Ok(());
    }
    let class = object["spec"]["storageClassName"].as_str().unwrap_or("");
    let allowed = !class.is_empty()
        && server
            .store
            .get(
                &ResourceId::new("storage.k8s.io", "storageclasses"),
                "",
                class,
            )
            .is_some_and(|sc| sc["allowVolumeExpansion"] == true);
    if !allowed {
        return Err(ApiError::forbidden(format!(
            "persistentvolumeclaims \"{name}\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"
        )));
    }
    Ok(())
}

/// A Kubernetes quantity (`1Gi`, `500M`, `1.5Gi`, `1e9`, `1024`) in bytes.
pub fn quantity(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let multiplier = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exponent if exponent.starts_with(['e', 'E']) => {
            10f64.powi(exponent[1..].parse::<i32>().ok()?)
        }
        _ => return None,
    };
    Some(value * multiplier)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_compare_across_units() {
        assert_eq!(quantity("1Gi"), quantity("1024Mi"));
        assert_eq!(quantity("1073741824"), quantity("1Gi"));
        assert!(quantity("2Gi") > quantity("2G"));
        assert_eq!(quantity("1e3"), quantity("1k"));
        assert_eq!(quantity("lots"), None);
    }
}
