//! Inter-pod affinity and anti-affinity.

use serde_json::{Value, json};

use super::{cluster, in_namespace, node, on, placed, pod, refused, three_nodes};

const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

fn term(labels: Value, topology_key: &str) -> Value {
    json!({"labelSelector": {"matchLabels": labels}, "topologyKey": topology_key})
}

fn anti(terms: Value) -> Value {
    json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}})
}

fn affinity(terms: Value) -> Value {
    json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}})
}

fn etcd(name: &str) -> k8s_openapi::api::core::v1::Pod {
    pod(
        name,
        json!({"app": "etcd"}),
        anti(json!([term(json!({"app": "etcd"}), HOSTNAME)])),
    )
}

#[test]
fn anti_affinity_on_hostname_spreads_then_refuses_the_fourth() {
    let mut pods = Vec::new();
    let mut nodes_used = Vec::new();
    for name in ["etcd-0", "etcd-1", "etcd-2"] {
        let chosen = placed(&etcd(name), &cluster(three_nodes(), pods.clone()));
        pods.push(on(etcd(name), &chosen));
        nodes_used.push(chosen);
    }
    assert_eq!(nodes_used, ["node-1", "node-2", "node-3"]);
    let message = refused(&etcd("etcd-3"), &cluster(three_nodes(), pods));
    assert_eq!(
        message,
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    );
}

#[test]
fn existing_pods_anti_affinity_keeps_others_away() {
    // The placed Pod refuses company labelled app=web in its zone; the newcomer has no rules.
    let guard = on(
        pod(
            "guard",
            json!({"app": "db"}),
            anti(json!([term(json!({"app": "web"}), ZONE)])),
        ),
        "node-1",
    );
    let cluster = cluster(
        vec![
            node("node-1", "zone-a", json!({})),
            node("node-2", "zone-a", json!({})),
        ],
        vec![guard],
    );
    let message = refused(&pod("web", json!({"app": "web"}), json!({})), &cluster);
    assert_eq!(
        message,
        "0/2 nodes are available: 2 node(s) didn't satisfy existing pods anti-affinity rules."
    );
    assert_eq!(
        placed(&pod("api", json!({"app": "api"}), json!({})), &cluster),
        "node-2"
    );
}

#[test]
fn affinity_follows_matching_pods_within_the_topology() {
    let cache = on(pod("cache", json!({"app": "cache"}), json!({})), "node-2");
    let cluster = cluster(three_nodes(), vec![cache]);
    let near_cache = pod(
        "web",
        json!({"app": "web"}),
        affinity(json!([term(json!({"app": "cache"}), ZONE)])),
    );
    assert_eq!(placed(&near_cache, &cluster), "node-2");
    let near_nothing = pod(
        "web",
        json!({"app": "web"}),
        affinity(json!([term(json!({"app": "queue"}), ZONE)])),
    );
    assert_eq!(
        refused(&near_nothing, &cluster),
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules."
    );
}

#[test]
fn first_pod_of_a_self_affine_group_may_go_anywhere() {
    let group = |name: &str| {
        pod(
            name,
            json!({"app": "pair"}),
            affinity(json!([term(json!({"app": "pair"}), ZONE)])),
        )
    };
    let first = placed(&group("a"), &cluster(three_nodes(), vec![]));
    assert_eq!(first, "node-1");
    let second = placed(
        &group("b"),
        &cluster(three_nodes(), vec![on(group("a"), &first)]),
    );
    assert_eq!(second, first, "the second follows the first");
    // A node without the topology key never satisfies affinity, even for the first Pod.
    let bare = node(
        "bare",
        "zone-x",
        json!({"metadata": {"labels": {ZONE: null}}}),
    );
    let message = refused(&group("a"), &cluster(vec![bare], vec![]));
    assert_eq!(
        message,
        "0/1 nodes are available: 1 node(s) didn't match pod affinity rules."
    );
}

#[test]
fn terms_select_their_own_namespace_unless_told_otherwise() {
    let other = in_namespace(
        on(pod("other", json!({"app": "etcd"}), json!({})), "node-1"),
        "team-a",
    );
    let cluster = cluster(three_nodes(), vec![other]);
    // Same labels in another namespace do not count by default: node-1 stays available.
    let plain = pod(
        "p",
        json!({}),
        anti(json!([term(json!({"app": "etcd"}), HOSTNAME)])),
    );
    assert_eq!(
        placed(&plain, &cluster),
        "node-2",
        "node-1 is busier, not excluded"
    );
    let named = pod(
        "p",
        json!({}),
        anti(json!([{
            "labelSelector": {"matchLabels": {"app": "etcd"}}, "topologyKey": HOSTNAME, "namespaces": ["team-a"],
        }])),
    );
    let by_selector = pod(
        "p",
        json!({}),
        anti(json!([{
            "labelSelector": {"matchLabels": {"app": "etcd"}}, "topologyKey": HOSTNAME, "namespaceSelector": {"matchLabels": {"team": "a"}},
        }])),
    );
    let all_namespaces = pod(
        "p",
        json!({}),
        anti(json!([{
            "labelSelector": {"matchLabels": {"app": "etcd"}}, "topologyKey": HOSTNAME, "namespaceSelector": {},
        }])),
    );
    let other_team = pod(
        "p",
        json!({}),
        anti(json!([{
            "labelSelector": {"matchLabels": {"app": "etcd"}}, "topologyKey": HOSTNAME, "namespaceSelector": {"matchLabels": {"team": "b"}},
        }])),
    );
    let lone = cluster.clone();
    let only_node_1 = super::cluster(vec![three_nodes().remove(0)], lone.pods.clone());
    for excluded in [&named, &by_selector, &all_namespaces] {
        let message = refused(excluded, &only_node_1);
        assert_eq!(
            message,
            "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."
        );
    }
    assert_eq!(placed(&other_team, &only_node_1), "node-1");
    // Without a label selector a term selects no Pod at all.
    let no_selector = pod(
        "p",
        json!({}),
        anti(json!([{"topologyKey": HOSTNAME, "namespaceSelector": {}}])),
    );
    assert_eq!(placed(&no_selector, &only_node_1), "node-1");
}

#[test]
fn match_label_keys_narrow_the_selector_to_the_pods_own_values() {
    // Revision-scoped anti-affinity: only Pods of the same revision repel each other.
    let rule = |revision: &str, name: &str| {
        pod(
            name,
            json!({"app": "web", "revision": revision}),
            anti(
                json!([{"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME, "matchLabelKeys": ["revision"]}]),
            ),
        )
    };
    let placed_pods = vec![on(rule("1", "old"), "node-1")];
    let one_node = cluster(vec![three_nodes().remove(0)], placed_pods);
    assert_eq!(
        placed(&rule("2", "new"), &one_node),
        "node-1",
        "another revision does not repel"
    );
    assert!(
        refused(&rule("1", "twin"), &one_node).contains("didn't match pod anti-affinity rules")
    );
    let mismatch = pod(
        "m",
        json!({"app": "web", "tenant": "x"}),
        affinity(
            json!([{"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME, "mismatchLabelKeys": ["tenant"]}]),
        ),
    );
    let tenant_x = vec![on(
        pod("x", json!({"app": "web", "tenant": "x"}), json!({})),
        "node-1",
    )];
    let message = refused(&mismatch, &cluster(vec![three_nodes().remove(0)], tenant_x));
    assert!(
        message.contains("didn't match pod affinity rules"),
        "{message}"
    );
}

#[test]
fn preferred_terms_attract_and_repel() {
    let web = on(pod("web", json!({"app": "web"}), json!({})), "node-2");
    let cluster = cluster(three_nodes(), vec![web]);
    let attracted = pod(
        "a",
        json!({}),
        json!({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "podAffinityTerm": term(json!({"app": "web"}), HOSTNAME)},
        ]}}}),
    );
    assert_eq!(placed(&attracted, &cluster), "node-2");
    let repelled = pod(
        "r",
        json!({}),
        json!({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "podAffinityTerm": term(json!({"app": "web"}), ZONE)},
        ]}}}),
    );
    assert_eq!(placed(&repelled, &cluster), "node-1");
    // Preferred anti-affinity never refuses: on a single busy node the Pod still goes there.
    let single = super::cluster(vec![three_nodes().remove(1)], cluster.pods.clone());
    assert_eq!(placed(&repelled, &single), "node-2");
}

#[test]
fn existing_pods_preferences_about_the_newcomer_count() {
    // A placed Pod that prefers app=web near it draws web Pods to its node.
    let host = on(
        pod(
            "host",
            json!({"app": "host"}),
            json!({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 80, "podAffinityTerm": term(json!({"app": "web"}), HOSTNAME)},
            ]}}}),
        ),
        "node-3",
    );
    let cluster = cluster(three_nodes(), vec![host]);
    assert_eq!(
        placed(&pod("web", json!({"app": "web"}), json!({})), &cluster),
        "node-3"
    );
    assert_eq!(
        placed(&pod("api", json!({"app": "api"}), json!({})), &cluster),
        "node-1"
    );
}
