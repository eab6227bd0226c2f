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

#[test]
fn a_fifth_of_the_open_files_go_to_probes_in_flight() {
    assert_eq!(in_flight_bound(20_000), 4_000);
    assert_eq!(in_flight_bound(1_048_576), 209_715);
    // A small limit still probes.
    assert_eq!(in_flight_bound(1_024), 204);
    assert_eq!(in_flight_bound(100), 64);
    assert_eq!(in_flight_bound(0), 64);
}

#[tokio::test]
async fn a_probe_run_waits_for_a_place_and_its_timeout_starts_with_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let places = Arc::new(tokio::sync::Semaphore::new(1));
    let target = ProbeTarget {
        sockets: crate::network::SocketFactory::in_this_namespace().unwrap(),
        pod_ip: Ipv4Addr::LOCALHOST,
        exec: Arc::new(|_, _| Box::pin(async { Ok(()) })),
        in_flight: places.clone(),
    };
    let action = ProbeAction::TcpSocket { host: None, port };
    assert_eq!(
        target.run(&action, Duration::from_millis(200)).await,
        Ok(())
    );
    assert_eq!(
        places.available_permits(),
        1,
        "the place is returned after a run"
    );
    // Every place taken: the run waits, past its own 200 ms timeout, without failing.
    let held = places.clone().acquire_owned().await.unwrap();
    let waiting = tokio::spawn({
        let target = target.clone();
        let action = action.clone();
        async move { target.run(&action, Duration::from_millis(200)).await }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!waiting.is_finished(), "the run waited for a place");
    drop(held);
    assert_eq!(waiting.await.unwrap(), Ok(()));
    // A failing run returns its place too.
    drop(listener);
    assert!(
        target
            .run(&action, Duration::from_millis(200))
            .await
            .is_err()
    );
    assert_eq!(places.available_permits(), 1);
}
