use serde_json::json;

use super::*;

fn container(probes: serde_json::Value) -> Container {
    let mut value = json!({"name": "etcd", "ports": [{"name": "client", "containerPort": 2379}]});
    value
        .as_object_mut()
        .unwrap()
        .extend(probes.as_object().unwrap().clone());
    serde_json::from_value(value).unwrap()
}

#[test]
fn probes_parse_with_kubernetes_defaults_and_named_ports() {
    let probes = ContainerProbes::of(&container(json!({
        "readinessProbe": {"httpGet": {"path": "/health", "port": "client"}},
        "livenessProbe": {"tcpSocket": {"port": 2380}, "periodSeconds": 2, "failureThreshold": 5},
        "startupProbe": {"exec": {"command": ["cat", "/tmp/ready"]}, "initialDelaySeconds": 3},
    })));
    let readiness = probes.readiness.unwrap();
    assert_eq!(
        readiness.action,
        ProbeAction::HttpGet {
            https: false,
            host: None,
            port: 2379,
            path: "/health".into(),
            headers: vec![]
        }
    );
    assert_eq!(readiness.period, Duration::from_secs(10));
    assert_eq!(readiness.timeout, Duration::from_secs(1));
    assert_eq!(
        (readiness.success_threshold, readiness.failure_threshold),
        (1, 3)
    );
    let liveness = probes.liveness.unwrap();
    assert_eq!(
        liveness.action,
        ProbeAction::TcpSocket {
            host: None,
            port: 2380
        }
    );
    assert_eq!(
        (liveness.period, liveness.failure_threshold),
        (Duration::from_secs(2), 5)
    );
    assert_eq!(
        probes.startup.unwrap().initial_delay,
        Duration::from_secs(3)
    );
    let unknown_port = ContainerProbes::of(&container(
        json!({"readinessProbe": {"httpGet": {"port": "peer"}}}),
    ));
    assert_eq!(
        unknown_port.readiness.unwrap().action,
        ProbeAction::Unusable("couldn't find port \"peer\" in container etcd".into())
    );
    let grpc = ContainerProbes::of(&container(
        json!({"livenessProbe": {"grpc": {"port": 2379}}}),
    ));
    assert!(
        matches!(grpc.liveness.unwrap().action, ProbeAction::Unusable(reason) if reason.contains("gRPC probes are not supported"))
    );
}

fn spec(success: u32, failure: u32) -> ProbeSpec {
    ProbeSpec {
        action: ProbeAction::TcpSocket {
            host: None,
            port: 1,
        },
        initial_delay: Duration::ZERO,
        period: Duration::from_secs(1),
        timeout: Duration::from_secs(1),
        success_threshold: success,
        failure_threshold: failure,
    }
}

#[test]
fn results_change_only_after_the_thresholds() {
    let mut readiness = ProbeTracker::new(&spec(2, 3), Some(false));
    assert_eq!(readiness.record(true), None, "one success of two");
    assert_eq!(readiness.record(true), Some(true));
    assert_eq!(readiness.record(true), None, "no change, nothing reported");
    assert_eq!(readiness.record(false), None);
    assert_eq!(readiness.record(true), None, "the failure run was broken");
    assert_eq!(readiness.record(false), None);
    assert_eq!(readiness.record(false), None);
    assert_eq!(readiness.record(false), Some(false));
    let mut liveness = ProbeTracker::new(&spec(1, 1), Some(true));
    assert_eq!(liveness.record(true), None);
    assert_eq!(liveness.record(false), Some(false));
    let mut startup = ProbeTracker::new(&spec(1, 2), None);
    assert_eq!(startup.record(false), None);
    assert_eq!(startup.record(true), Some(true));
}
