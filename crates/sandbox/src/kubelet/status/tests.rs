use super::*;

fn running(name: &str) -> ContainerRecord {
    ContainerRecord {
        state: RecordState::Running {
            started_at: Timestamp::UNIX_EPOCH,
        },
        ready: true,
        started: true,
        ..ContainerRecord::waiting(name, "img", "ContainerCreating")
    }
}

fn ended(code: i32) -> Ended {
    Ended {
        exit_code: code,
        signal: None,
        reason: if code == 0 { "Completed" } else { "Error" }.into(),
        message: None,
        started_at: None,
        finished_at: None,
        container_id: None,
    }
}

fn exited(name: &str, code: i32) -> ContainerRecord {
    ContainerRecord {
        state: RecordState::Terminated(ended(code)),
        ..ContainerRecord::waiting(name, "img", "")
    }
}

fn crash_looping(name: &str, last_code: i32) -> ContainerRecord {
    ContainerRecord {
        state: RecordState::Waiting {
            reason: "CrashLoopBackOff".into(),
            message: None,
        },
        restart_count: 3,
        last_termination: Some(ended(last_code)),
        ..ContainerRecord::waiting(name, "img", "")
    }
}

#[test]
fn phases_follow_the_kubelet() {
    let waiting = ContainerRecord::waiting("a", "img", "ContainerCreating");
    assert_eq!(
        pod_phase("Always", &[], std::slice::from_ref(&waiting)),
        "Pending"
    );
    assert_eq!(pod_phase("Always", &[], &[running("a")]), "Running");
    // A crash-looping container counts as stopped: the Pod stays Running.
    assert_eq!(
        pod_phase("Always", &[], &[crash_looping("a", 1)]),
        "Running"
    );
    assert_eq!(pod_phase("Always", &[], &[exited("a", 0)]), "Running");
    assert_eq!(pod_phase("Never", &[], &[exited("a", 0)]), "Succeeded");
    assert_eq!(
        pod_phase("Never", &[], &[exited("a", 0), exited("b", 2)]),
        "Failed"
    );
    assert_eq!(pod_phase("OnFailure", &[], &[exited("a", 0)]), "Succeeded");
    assert_eq!(
        pod_phase("OnFailure", &[], &[crash_looping("a", 1)]),
        "Running"
    );
    assert_eq!(
        pod_phase("Never", &[], &[exited("a", 0), running("b")]),
        "Running"
    );
}

#[test]
fn init_containers_gate_the_phase() {
    let pending = ContainerRecord::waiting("main", "img", "PodInitializing");
    assert_eq!(
        pod_phase("Always", &[running("init")], std::slice::from_ref(&pending)),
        "Pending"
    );
    assert_eq!(
        pod_phase(
            "Never",
            &[exited("init", 1)],
            std::slice::from_ref(&pending)
        ),
        "Failed"
    );
    assert_eq!(
        pod_phase(
            "Always",
            &[exited("init", 1)],
            std::slice::from_ref(&pending)
        ),
        "Pending"
    );
    assert_eq!(
        pod_phase(
            "Always",
            &[crash_looping("init", 1)],
            std::slice::from_ref(&pending)
        ),
        "Pending"
    );
    assert_eq!(
        pod_phase("Always", &[exited("init", 0)], &[running("main")]),
        "Running"
    );
    assert!(initialized(&[exited("a", 0), exited("b", 0)]));
    assert!(!initialized(&[exited("a", 0), running("b")]));
}

fn pod_with(status: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "restartPolicy": "Always",
                 "readinessGates": [{"conditionType": "example.com/gate"}]},
        "status": status,
    }))
    .unwrap()
}

#[test]
fn conditions_name_the_unready_containers_and_keep_transition_times() {
    let pod = pod_with(json!({"conditions": [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Initialized", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"},
        {"type": "example.com/gate", "status": "True"},
    ]}));
    let containers = [running("a"), crash_looping("b", 1)];
    let now: Timestamp = "2024-05-01T00:00:00Z".parse().unwrap();
    let facts = PodFacts {
        pod: &pod,
        host_ip: Ipv4Addr::new(10, 244, 0, 2),
        pod_ip: Some(Ipv4Addr::new(10, 244, 0, 9)),
        sandbox_ready: true,
        start_time: Some(now),
        init: &[],
        containers: &containers,
        terminal: None,
    };
    let status = desired_status(&facts, now);
    assert_eq!(status.phase.as_deref(), Some("Running"));
    let conditions = status.conditions.clone().unwrap();
    let find = |t: &str| conditions.iter().find(|c| c.type_ == t).unwrap().clone();
    assert_eq!(
        find("Initialized")
            .last_transition_time
            .unwrap()
            .0
            .to_string(),
        "2020-01-01T00:00:00Z"
    );
    let ready = find("Ready");
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some("containers with unready status: [b]")
    );
    assert_eq!(ready.last_transition_time.unwrap().0, now);
    assert!(
        conditions.iter().all(|c| c.type_ != "PodScheduled"),
        "others' conditions are not written"
    );
    assert_eq!(status.pod_ip.as_deref(), Some("10.244.0.9"));
    let statuses = status.container_statuses.clone().unwrap();
    assert_eq!(statuses[1].restart_count, 3);
    assert_eq!(
        statuses[1]
            .state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("CrashLoopBackOff")
    );
    assert_eq!(
        statuses[1]
            .last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        1
    );
    assert!(needs_update(&pod, &status));
    let patch = status_patch(&status);
    let first = &patch["status"]["containerStatuses"][0];
    assert_eq!(
        first["state"]["waiting"],
        serde_json::Value::Null,
        "states it is not in are removed"
    );
    assert!(first["state"]["running"].is_object());
}

/// The facts of `pod` with its sandbox up and `containers` started, no address or start time.
fn running_facts<'a>(pod: &'a Pod, containers: &'a [ContainerRecord]) -> PodFacts<'a> {
    PodFacts {
        pod,
        host_ip: Ipv4Addr::new(10, 244, 0, 2),
        pod_ip: None,
        sandbox_ready: true,
        start_time: None,
        init: &[],
        containers,
        terminal: None,
    }
}

#[test]
fn a_condition_without_reason_or_message_patches_them_away() {
    let pod = pod_with(json!({}));
    let containers = [running("a")];
    let facts = running_facts(&pod, &containers);
    let status = desired_status(&facts, Timestamp::UNIX_EPOCH);
    let patch = status_patch(&status);
    let initialized = patch["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Initialized")
        .unwrap();
    assert_eq!(initialized["status"], "True");
    for key in ["reason", "message"] {
        assert_eq!(
            initialized.get(key),
            Some(&serde_json::Value::Null),
            "{key}: a strategic merge keeps what the patch leaves out"
        );
    }
}

#[test]
fn readiness_gates_hold_the_ready_condition() {
    let pod = pod_with(json!({}));
    let containers = [running("a"), running("b")];
    let facts = running_facts(&pod, &containers);
    let status = desired_status(&facts, Timestamp::UNIX_EPOCH);
    let conditions = status.conditions.unwrap();
    let ready = conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason.as_deref(), Some("ReadinessGatesNotReady"));
    let containers_ready = conditions
        .iter()
        .find(|c| c.type_ == "ContainersReady")
        .unwrap();
    assert_eq!(containers_ready.status, "True");
}

#[test]
fn an_applied_status_needs_no_update() {
    let pod = pod_with(json!({}));
    let containers = [running("a"), exited("b", 0)];
    let terminal = TerminalPhase {
        phase: "Failed",
        reason: Some("Terminated".into()),
        message: Some("Pod was terminated in response to imminent node shutdown.".into()),
        disruption: None,
    };
    let facts = PodFacts {
        pod: &pod,
        host_ip: Ipv4Addr::new(10, 244, 0, 2),
        pod_ip: Some(Ipv4Addr::new(10, 244, 0, 3)),
        sandbox_ready: false,
        start_time: None,
        init: &[],
        containers: &containers,
        terminal: Some(&terminal),
    };
    let status = desired_status(&facts, Timestamp::UNIX_EPOCH);
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("Terminated"));
    let mut applied = pod.clone();
    applied.status = Some(status.clone());
    assert!(!needs_update(&applied, &status));
}
