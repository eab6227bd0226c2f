//! topologySpreadConstraints.

use serde_json::{Value, json};

use super::{cluster, node, on, placed, pod, refused, three_nodes};

const ZONE: &str = "topology.kubernetes.io/zone";

fn constraint(when: &str, extra: Value) -> Value {
    let mut constraint = json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": when, "labelSelector": {"matchLabels": {"app": "web"}}});
    for (key, value) in extra.as_object().cloned().unwrap_or_default() {
        constraint[key] = value;
    }
    constraint
}

fn web(name: &str, constraints: Vec<Value>) -> k8s_openapi::api::core::v1::Pod {
    pod(
        name,
        json!({"app": "web"}),
        json!({"topologySpreadConstraints": constraints}),
    )
}

fn placed_web(name: &str, node: &str) -> k8s_openapi::api::core::v1::Pod {
    on(pod(name, json!({"app": "web"}), json!({})), node)
}

#[test]
fn do_not_schedule_keeps_zones_within_max_skew() {
    let hard = || web("new", vec![constraint("DoNotSchedule", json!({}))]);
    let two_zones_used = cluster(
        three_nodes(),
        vec![placed_web("a", "node-1"), placed_web("b", "node-2")],
    );
    assert_eq!(placed(&hard(), &two_zones_used), "node-3");
    let a_is_ahead = cluster(
        three_nodes(),
        vec![
            placed_web("a", "node-1"),
            placed_web("a2", "node-1"),
            placed_web("b", "node-2"),
            placed_web("c", "node-3"),
        ],
    );
    assert_eq!(
        placed(&hard(), &a_is_ahead),
        "node-2",
        "zone-a is ahead; b and c tie, node-2 by name"
    );
    // Pods the selector does not match are not counted.
    let others = cluster(
        three_nodes(),
        vec![
            on(pod("x", json!({"app": "other"}), json!({})), "node-3"),
            placed_web("a", "node-1"),
            placed_web("b", "node-2"),
        ],
    );
    assert_eq!(placed(&hard(), &others), "node-3");
    // A larger maxSkew allows more imbalance.
    let pinned = |max_skew: i32| {
        let spread = constraint(
            "DoNotSchedule",
            json!({"maxSkew": max_skew, "nodeAffinityPolicy": "Ignore"}),
        );
        pod(
            "new",
            json!({"app": "web"}),
            json!({"nodeSelector": {"kubernetes.io/hostname": "node-1"}, "topologySpreadConstraints": [spread]}),
        )
    };
    let zone_a_ahead = cluster(three_nodes(), vec![placed_web("a", "node-1")]);
    assert!(
        refused(&pinned(1), &zone_a_ahead)
            .contains("1 node(s) didn't match pod topology spread constraints")
    );
    assert_eq!(placed(&pinned(2), &zone_a_ahead), "node-1");
}

#[test]
fn unsatisfiable_spread_refuses_with_the_reason() {
    let pinned = |policy: &str| {
        pod(
            "new",
            json!({"app": "web"}),
            json!({"nodeSelector": {ZONE: "zone-a"}, "topologySpreadConstraints": [constraint("DoNotSchedule", json!({"nodeAffinityPolicy": policy}))]}),
        )
    };
    let crowded = cluster(
        three_nodes(),
        vec![placed_web("a", "node-1"), placed_web("a2", "node-1")],
    );
    let message = refused(&pinned("Ignore"), &crowded);
    assert_eq!(
        message,
        "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints, 2 node(s) didn't match Pod's node affinity/selector."
    );
    // Honor (the default): only nodes the Pod may use define the domains, so zone-a alone is fine.
    assert_eq!(placed(&pinned("Honor"), &crowded), "node-1");
}

#[test]
fn min_domains_counts_missing_domains_as_empty() {
    let nodes = || {
        vec![
            node("node-1", "zone-a", json!({})),
            node("node-2", "zone-b", json!({})),
        ]
    };
    let spread = |min_domains: Option<i32>| {
        let extra = min_domains.map_or(json!({}), |m| json!({"minDomains": m}));
        web("new", vec![constraint("DoNotSchedule", extra)])
    };
    let one = cluster(nodes(), vec![placed_web("a", "node-1")]);
    assert_eq!(placed(&spread(Some(3)), &one), "node-2");
    let balanced = cluster(
        nodes(),
        vec![placed_web("a", "node-1"), placed_web("b", "node-2")],
    );
    assert_eq!(placed(&spread(None), &balanced), "node-1");
    assert_eq!(
        refused(&spread(Some(3)), &balanced),
        "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints."
    );
}

#[test]
fn a_node_without_the_topology_key_is_refused() {
    let bare = node(
        "node-9",
        "zone-x",
        json!({"metadata": {"labels": {ZONE: null}}}),
    );
    let message = refused(
        &web("new", vec![constraint("DoNotSchedule", json!({}))]),
        &cluster(vec![bare], vec![]),
    );
    assert_eq!(
        message,
        "0/1 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label)."
    );
}

#[test]
fn schedule_anyway_prefers_the_emptier_zone_but_never_refuses() {
    let soft = || web("new", vec![constraint("ScheduleAnyway", json!({}))]);
    // node-3 runs the most Pods, but none that the constraint counts.
    let mut pods = vec![
        placed_web("a", "node-1"),
        placed_web("a2", "node-1"),
        placed_web("b", "node-2"),
    ];
    pods.extend(
        ["x", "y", "z"].map(|name| on(pod(name, json!({"app": "other"}), json!({})), "node-3")),
    );
    assert_eq!(placed(&soft(), &cluster(three_nodes(), pods)), "node-3");
    let single = cluster(
        vec![three_nodes().remove(0)],
        vec![placed_web("a", "node-1"), placed_web("a2", "node-1")],
    );
    assert_eq!(placed(&soft(), &single), "node-1");
}

#[test]
fn match_label_keys_count_only_the_same_revision() {
    let revisioned = |name: &str, revision: &str| {
        pod(
            name,
            json!({"app": "web", "rev": revision}),
            json!({"topologySpreadConstraints": [constraint("DoNotSchedule", json!({"matchLabelKeys": ["rev"]}))]}),
        )
    };
    let old = vec![
        on(revisioned("o1", "1"), "node-2"),
        on(revisioned("o2", "1"), "node-3"),
    ];
    // Old-revision Pods fill zones b and c; for revision 2 every zone is empty.
    assert_eq!(
        placed(&revisioned("n1", "2"), &cluster(three_nodes(), old.clone())),
        "node-1"
    );
    // For revision 1, zone-a is the empty one.
    assert_eq!(
        placed(&revisioned("o3", "1"), &cluster(three_nodes(), old)),
        "node-1"
    );
    let mut old_in_a = vec![
        on(revisioned("o1", "1"), "node-1"),
        on(revisioned("o2", "1"), "node-2"),
    ];
    old_in_a.push(on(revisioned("n1", "2"), "node-1"));
    // Zone-a has a revision-2 Pod now; of the other two, node-3 runs fewer Pods.
    assert_eq!(
        placed(&revisioned("n2", "2"), &cluster(three_nodes(), old_in_a)),
        "node-3"
    );
}

#[test]
fn node_taints_policy_decides_whether_tainted_nodes_make_domains() {
    let tainted = node(
        "node-3",
        "zone-c",
        json!({"spec": {"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}}),
    );
    let nodes = vec![three_nodes().remove(0), three_nodes().remove(1), tainted];
    let existing = vec![placed_web("a", "node-1"), placed_web("b", "node-2")];
    let spread = |policy: &str| {
        web(
            "new",
            vec![constraint(
                "DoNotSchedule",
                json!({"nodeTaintsPolicy": policy}),
            )],
        )
    };
    let message = refused(&spread("Ignore"), &cluster(nodes.clone(), existing.clone()));
    assert_eq!(
        message,
        "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}, 2 node(s) didn't match pod topology spread constraints."
    );
    assert_eq!(
        placed(&spread("Honor"), &cluster(nodes, existing)),
        "node-1"
    );
}
