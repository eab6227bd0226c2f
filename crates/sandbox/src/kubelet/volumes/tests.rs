use std::net::Ipv4Addr;

use serde_json::json;

use super::*;

fn pod(volumes: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "team", "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "main", "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}]}],
                 "volumes": volumes},
    }))
    .unwrap()
}

fn addresses() -> PodAddresses {
    PodAddresses {
        pod_ip: Some(Ipv4Addr::new(10, 244, 0, 5)),
        host_ip: Ipv4Addr::new(10, 244, 0, 2),
    }
}

fn inputs() -> VolumeInputs {
    let mut inputs = VolumeInputs::default();
    inputs.objects.config_maps.insert(
        "settings".into(),
        serde_json::from_value(
            json!({"metadata": {"name": "settings"}, "data": {"a.conf": "A", "b.conf": "B"}}),
        )
        .unwrap(),
    );
    inputs.objects.config_maps.insert(
        ROOT_CA_CONFIG_MAP.into(),
        serde_json::from_value(
            json!({"metadata": {"name": ROOT_CA_CONFIG_MAP}, "data": {"ca.crt": "PEM"}}),
        )
        .unwrap(),
    );
    inputs.objects.secrets.insert(
        "tls".into(),
        serde_json::from_value(json!({"metadata": {"name": "tls"}, "data": {"tls.key": "a2V5"}}))
            .unwrap(),
    );
    inputs.tokens.insert(None, "token-value".into());
    inputs
}

fn files(volume: &Volume) -> Vec<(String, String, u32)> {
    match &volume.source {
        VolumeSource::Files(files) => files
            .iter()
            .map(|f| {
                (
                    f.path.clone(),
                    String::from_utf8(f.content.clone()).unwrap(),
                    f.mode,
                )
            })
            .collect(),
        other => panic!("not files: {other:?}"),
    }
}

#[test]
fn every_supported_kind_becomes_a_runtime_volume() {
    let pod = pod(json!([
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-0", "readOnly": true}},
        {"name": "scratch", "emptyDir": {}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
        {"name": "cfg", "configMap": {"name": "settings", "items": [{"key": "b.conf", "path": "conf/b", "mode": 0o600}], "defaultMode": 0o640}},
        {"name": "keys", "secret": {"secretName": "tls", "defaultMode": 0o400}},
        {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
    ]));
    let volumes = pod_volumes(&pod, addresses(), &inputs()).unwrap();
    assert!(
        matches!(&volumes[0].source, VolumeSource::PersistentVolumeClaim { claim_name, read_only: true } if claim_name == "data-0")
    );
    assert!(matches!(volumes[1].source, VolumeSource::EmptyDir));
    assert!(matches!(
        volumes[2].source,
        VolumeSource::Memory {
            size_limit: Some(67_108_864)
        }
    ));
    assert_eq!(
        files(&volumes[3]),
        [("conf/b".to_string(), "B".to_string(), 0o600)]
    );
    assert_eq!(
        files(&volumes[4]),
        [("tls.key".to_string(), "key".to_string(), 0o400)]
    );
    assert_eq!(
        files(&volumes[5]),
        [("labels".to_string(), "app=\"x\"".to_string(), 0o644)]
    );
}

#[test]
fn missing_sources_fail_the_mount_unless_optional() {
    let missing = pod(json!([{"name": "cfg", "configMap": {"name": "absent"}}]));
    let error = pod_volumes(&missing, addresses(), &inputs()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "MountVolume.SetUp failed for volume \"cfg\" : configmap \"absent\" not found"
    );
    let optional = pod(json!([{"name": "cfg", "configMap": {"name": "absent", "optional": true}}]));
    assert_eq!(
        files(&pod_volumes(&optional, addresses(), &inputs()).unwrap()[0]),
        []
    );
    let key = pod(
        json!([{"name": "cfg", "secret": {"secretName": "tls", "items": [{"key": "tls.crt", "path": "c"}]}}]),
    );
    assert!(
        pod_volumes(&key, addresses(), &inputs())
            .unwrap_err()
            .reason
            .contains("couldn't find key tls.crt in Secret team/tls")
    );
    let host = pod(json!([{"name": "cfg", "hostPath": {"path": "/etc"}}]));
    assert!(
        pod_volumes(&host, addresses(), &inputs())
            .unwrap_err()
            .reason
            .starts_with("hostPath volumes are not supported")
    );
}

#[test]
fn the_service_account_volume_is_added_as_admission_does() {
    let original = pod(json!([]));
    let pod = with_service_account_volume(&original, None);
    let mounts = pod.spec.as_ref().unwrap().containers[0]
        .volume_mounts
        .clone()
        .unwrap();
    assert!(
        mounts
            .iter()
            .any(|m| m.mount_path == SERVICE_ACCOUNT_PATH && m.read_only == Some(true))
    );
    assert_eq!(token_audiences(&pod), [None]);
    let volumes = pod_volumes(&pod, addresses(), &inputs()).unwrap();
    let projected = files(
        volumes
            .iter()
            .find(|v| v.name == SERVICE_ACCOUNT_VOLUME)
            .unwrap(),
    );
    assert_eq!(
        projected,
        [
            ("token".to_string(), "token-value".to_string(), 0o644),
            ("ca.crt".to_string(), "PEM".to_string(), 0o644),
            ("namespace".to_string(), "team".to_string(), 0o644),
        ]
    );
    let mut opted_out = original.clone();
    opted_out
        .spec
        .as_mut()
        .unwrap()
        .automount_service_account_token = Some(false);
    assert!(
        with_service_account_volume(&opted_out, Some(true))
            .spec
            .unwrap()
            .volumes
            .unwrap()
            .is_empty()
    );
    assert!(
        with_service_account_volume(&original, Some(false))
            .spec
            .unwrap()
            .volumes
            .unwrap()
            .is_empty()
    );
}
