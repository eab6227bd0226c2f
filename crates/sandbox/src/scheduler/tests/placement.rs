//! The decision as a whole: tie-break, terminal Pods, resources, gates, no nodes.

use serde_json::json;

use super::{cluster, node, on, placed, pod, refused, three_nodes};
use crate::scheduler::{Cluster, NO_NODES_MESSAGE, parse_milli, schedule};

#[test]
fn ties_go_to_the_least_loaded_node_then_the_smaller_name() {
    let empty = cluster(three_nodes(), vec![]);
    assert_eq!(placed(&pod("p", json!({}), json!({})), &empty), "node-1");
    let one_busy = cluster(
        three_nodes(),
        vec![on(pod("a", json!({}), json!({})), "node-1")],
    );
    assert_eq!(placed(&pod("p", json!({}), json!({})), &one_busy), "node-2");
    // Finished Pods take no room.
    let mut done = on(pod("done", json!({}), json!({})), "node-1");
    done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
    assert_eq!(
        placed(
            &pod("p", json!({}), json!({})),
            &cluster(three_nodes(), vec![done])
        ),
        "node-1"
    );
    // The same inputs always give the same answer.
    let answers: Vec<String> = (0..5)
        .map(|_| placed(&pod("p", json!({}), json!({})), &one_busy))
        .collect();
    assert!(answers.iter().all(|a| a == "node-2"));
}

#[test]
fn requests_must_fit_the_allocatable() {
    let big = |name: &str, cpu: &str, memory: &str| {
        pod(
            name,
            json!({}),
            json!({"containers": [{"name": "main", "image": "etcd", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}),
        )
    };
    let pods = vec![
        on(big("a", "6", "1Gi"), "node-1"),
        on(big("b", "1500m", "15Gi"), "node-2"),
    ];
    let cluster = cluster(three_nodes(), pods);
    let wants_three_cpus = big("p", "3", "2Gi");
    let only_node_3 = super::cluster(three_nodes()[..2].to_vec(), cluster.pods.clone());
    assert_eq!(
        refused(&wants_three_cpus, &only_node_3),
        "0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."
    );
    assert_eq!(placed(&wants_three_cpus, &cluster), "node-3");
    // Init containers run first and alone: the larger of their peak and the containers' sum counts.
    let init_heavy = pod(
        "i",
        json!({}),
        json!({"initContainers": [{"name": "init", "image": "x", "resources": {"requests": {"cpu": "7"}}}]}),
    );
    assert_eq!(placed(&init_heavy, &cluster), "node-3");
    let full = node(
        "tiny",
        "zone-a",
        json!({"status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "1"}}}),
    );
    let message = refused(
        &pod("p", json!({}), json!({})),
        &super::cluster(vec![full], vec![on(pod("a", json!({}), json!({})), "tiny")]),
    );
    assert_eq!(message, "0/1 nodes are available: 1 Too many pods.");
}

#[test]
fn quantities_parse_to_milli_units() {
    assert_eq!(parse_milli("500m"), Some(500));
    assert_eq!(parse_milli("2"), Some(2000));
    assert_eq!(parse_milli("1.5"), Some(1500));
    assert_eq!(parse_milli("1Ki"), Some(1024 * 1000));
    assert_eq!(parse_milli("1Gi"), Some((1 << 30) * 1000));
    assert_eq!(parse_milli("1k"), Some(1_000_000));
    assert_eq!(parse_milli("1e3"), Some(1_000_000));
    assert_eq!(parse_milli("100M"), Some(100_000_000_000));
    assert_eq!(parse_milli("0.5Gi"), Some((1 << 29) * 1000));
    assert_eq!(parse_milli("12x"), None);
}

#[test]
fn no_nodes_and_scheduling_gates() {
    let error = schedule(&pod("p", json!({}), json!({})), &Cluster::default()).unwrap_err();
    assert_eq!(
        (error.reason.as_str(), error.message.as_str()),
        ("Unschedulable", NO_NODES_MESSAGE)
    );
    let gated = pod(
        "g",
        json!({}),
        json!({"schedulingGates": [{"name": "example.com/wait"}]}),
    );
    let error = schedule(&gated, &cluster(three_nodes(), vec![])).unwrap_err();
    assert_eq!(error.reason, "SchedulingGated");
    assert_eq!(
        error.message,
        "Scheduling is blocked due to non-empty scheduling gates"
    );
}
