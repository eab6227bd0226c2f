//! Defaults the real server fills in for built-in kinds, on which clients depend (kubectl's
//! printers, controllers comparing specs). Custom resources are defaulted from their schema.

use serde_json::{Map, Value, json};

/// Fills the defaults of a built-in `kind` into a new or updated object.
pub fn apply(group: &str, kind: &str, object: &mut Value) {
    match (group, kind) {
        ("", "Pod") => pod(object),
        ("", "Service") => service(object),
        ("", "Namespace") => namespace(object),
        ("", "PersistentVolumeClaim") => persistent_volume_claim(object),
        ("", "Secret") => secret(object),
        ("apps", "Deployment") => deployment(object),
        ("apps", "StatefulSet") => stateful_set(object),
        ("batch", "Job") => job(object),
        ("policy", "PodDisruptionBudget") => pod_disruption_budget(object),
        _ => {}
    }
}

/// A Secret: `type` Opaque by default, and `stringData` folded into `data` (base64), each of
/// its keys overwriting the same key of `data`, and never stored: the real server does this
/// on every write (its v1 conversion), so a client that patches `stringData` changes `data`.
fn secret(object: &mut Value) {
    use base64::Engine;
    set_default(object, "type", json!("Opaque"));
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let Some(Value::Object(strings)) = map.remove("stringData") else {
        return;
    };
    let data = map
        .entry("data".to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if data.is_null() {
        *data = Value::Object(Map::new());
    }
    if let Some(data) = data.as_object_mut() {
        for (key, value) in strings {
            let text = value.as_str().unwrap_or_default();
            data.insert(
                key,
                json!(base64::engine::general_purpose::STANDARD.encode(text)),
            );
        }
    }
}

/// Sets `object[key]` to `value` when it is absent or null.
fn set_default(object: &mut Value, key: &str, value: Value) {
    if let Some(map) = object.as_object_mut() {
        let slot = map.entry(key.to_string()).or_insert(Value::Null);
        if slot.is_null() {
            *slot = value;
        }
    }
}

/// The object at `object[key]`, created empty when absent.
fn child<'a>(object: &'a mut Value, key: &str) -> &'a mut Value {
    set_default(object, key, Value::Object(Map::new()));
    &mut object[key]
}

/// A Pod: the scheme's PodSpec defaults plus what admission adds to Pods themselves (service
/// account, priority) and the initial status.
pub fn pod(pod: &mut Value) {
    let spec = child(pod, "spec");
    pod_spec(spec);
    set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    set_default(spec, "priority", json!(0));
    set_default(spec, "serviceAccountName", json!("default"));
    let account = spec["serviceAccountName"].clone();
    set_default(spec, "serviceAccount", account);
    let status = child(pod, "status");
    set_default(status, "phase", json!("Pending"));
    set_default(status, "qosClass", json!("BestEffort"));
}

/// The defaults of a PodSpec wherever it appears (Pods and the templates of workloads).
fn pod_spec(spec: &mut Value) {
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "enableServiceLinks", json!(true));
    for list in ["initContainers", "containers"] {
        if let Some(containers) = spec[list].as_array_mut() {
            containers.iter_mut().for_each(container);
        }
    }
}

fn container(container: &mut Value) {
    set_default(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    set_default(container, "terminationMessagePolicy", json!("File"));
    set_default(container, "resources", json!({}));
    let image = container["image"].as_str().unwrap_or_default();
    let tagged = image
        .rsplit('/')
        .next()
        .is_some_and(|last| last.contains(':') || last.contains('@'));
    let policy = if !tagged || image.ends_with(":latest") {
        "Always"
    } else {
        "IfNotPresent"
    };
    set_default(container, "imagePullPolicy", json!(policy));
    if let Some(ports) = container["ports"].as_array_mut() {
        for port in ports {
            set_default(port, "protocol", json!("TCP"));
        }
    }
}

/// Everything of a Service's defaults but the ClusterIP, which the allocator assigns.
pub fn service(service: &mut Value) {
    let spec = child(service, "spec");
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    if let Some(ports) = spec["ports"].as_array_mut() {
        for port in ports {
            set_default(port, "protocol", json!("TCP"));
            let number = port["port"].clone();
            set_default(port, "targetPort", number);
        }
    }
    set_default(service, "status", json!({"loadBalancer": {}}));
}

fn namespace(namespace: &mut Value) {
    set_default(
        child(namespace, "spec"),
        "finalizers",
        json!(["kubernetes"]),
    );
    set_default(child(namespace, "status"), "phase", json!("Active"));
    // The real server labels every namespace with its own name.
    let name = namespace["metadata"]["name"].clone();
    if let Some(name) = name.as_str() {
        let labels = child(child(namespace, "metadata"), "labels");
        set_default(labels, "kubernetes.io/metadata.name", json!(name));
    }
}

/// The sandbox has no volume provisioner: a claim is Bound on creation, with what it asked for.
fn persistent_volume_claim(claim: &mut Value) {
    let spec = child(claim, "spec");
    set_default(spec, "volumeMode", json!("Filesystem"));
    let requested = spec["resources"]["requests"].clone();
    let modes = spec["accessModes"].clone();
    let status = child(claim, "status");
    set_default(status, "phase", json!("Bound"));
    set_default(status, "accessModes", modes);
    set_default(status, "capacity", requested);
}

fn deployment(deployment: &mut Value) {
    let spec = child(deployment, "spec");
    set_default(spec, "replicas", json!(1));
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    set_default(
        spec,
        "strategy",
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
    );
    pod_template(spec);
}

/// The scheme's StatefulSet defaults (apps/v1 `SetDefaults_StatefulSet`).
fn stateful_set(set: &mut Value) {
    let spec = child(set, "spec");
    set_default(spec, "replicas", json!(1));
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "podManagementPolicy", json!("OrderedReady"));
    set_default(
        spec,
        "updateStrategy",
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
    );
    set_default(
        spec,
        "persistentVolumeClaimRetentionPolicy",
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
    );
    if let Some(claims) = spec["volumeClaimTemplates"].as_array_mut() {
        for claim in claims {
            let claim_spec = child(claim, "spec");
            set_default(claim_spec, "volumeMode", json!("Filesystem"));
        }
    }
    pod_template(spec);
}

fn job(job: &mut Value) {
    let uid = job["metadata"]["uid"].clone();
    let name = job["metadata"]["name"].clone();
    let spec = child(job, "spec");
    set_default(spec, "parallelism", json!(1));
    set_default(spec, "completions", json!(1));
    set_default(spec, "backoffLimit", json!(6));
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    set_default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    // Without manualSelector the server selects the Job's Pods by its uid, and labels the template.
    if spec["manualSelector"] != true && uid.is_string() {
        let labels = json!({"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name, "controller-uid": uid, "job-name": name});
        set_default(
            spec,
            "selector",
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
        );
        let template_labels = child(child(child(spec, "template"), "metadata"), "labels");
        if let (Some(target), Some(source)) = (template_labels.as_object_mut(), labels.as_object())
        {
            for (k, v) in source {
                target.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    pod_template(spec);
}

fn pod_template(spec: &mut Value) {
    if spec["template"]["spec"].is_object() {
        pod_spec(&mut spec["template"]["spec"]);
    }
}

fn pod_disruption_budget(pdb: &mut Value) {
    // An empty selector in policy/v1 selects every Pod of the namespace; keep it explicit.
    set_default(child(pdb, "spec"), "selector", json!({}));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secrets_string_data_overwrites_its_data_and_is_not_kept() {
        let mut secret = json!({"metadata": {"name": "s"},
            "data": {"password": "b2xk", "username": "cm9vdA=="},
            "stringData": {"password": "new", "extra": "x"}});
        apply("", "Secret", &mut secret);
        assert_eq!(secret["type"], "Opaque");
        assert!(secret.get("stringData").is_none(), "{secret}");
        assert_eq!(secret["data"]["password"], "bmV3");
        assert_eq!(secret["data"]["username"], "cm9vdA==");
        assert_eq!(secret["data"]["extra"], "eA==");
        let mut only_strings = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/basic-auth",
            "stringData": {"password": "p"}});
        apply("", "Secret", &mut only_strings);
        assert_eq!(only_strings["data"]["password"], "cA==");
        assert_eq!(only_strings["type"], "kubernetes.io/basic-auth");
    }

    #[test]
    fn pod_defaults_match_the_real_server() {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "etcd:v3.5.1", "ports": [{"containerPort": 2379}]},
            {"name": "d", "image": "busybox"}]}});
        pod(&mut p);
        assert_eq!(p["spec"]["restartPolicy"], "Always");
        assert_eq!(p["spec"]["terminationGracePeriodSeconds"], 30);
        assert_eq!(
            p["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert_eq!(p["spec"]["containers"][1]["imagePullPolicy"], "Always");
        assert_eq!(p["spec"]["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(p["status"]["phase"], "Pending");
    }

    #[test]
    fn service_ports_default_their_target_port() {
        let mut s = json!({"spec": {"ports": [{"port": 2379}]}});
        service(&mut s);
        assert_eq!(s["spec"]["ports"][0]["targetPort"], 2379);
        assert_eq!(s["spec"]["type"], "ClusterIP");
    }

    #[test]
    fn deployment_template_is_defaulted_as_a_pod() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x:1"}]}}}});
        deployment(&mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
        assert!(d["spec"]["template"]["status"].is_null());
        assert!(
            d["spec"]["template"]["spec"]["serviceAccountName"].is_null(),
            "admission sets it on Pods only"
        );
    }
}
