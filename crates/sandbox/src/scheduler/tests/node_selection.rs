//! nodeSelector and node affinity.

use serde_json::{Value, json};

use super::{cluster, node, placed, pod, refused, three_nodes};

const NODE_AFFINITY: &str =
    "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.";

fn required(terms: Value) -> Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
}

fn expression(key: &str, operator: &str, values: &[&str]) -> Value {
    json!({"matchExpressions": [{"key": key, "operator": operator, "values": values}]})
}

/// Nodes labelled `rank` 1, 2, 3 and `disk=ssd` on node-2 only.
fn ranked_nodes() -> Vec<k8s_openapi::api::core::v1::Node> {
    vec![
        node(
            "node-1",
            "zone-a",
            json!({"metadata": {"labels": {"rank": "1"}}}),
        ),
        node(
            "node-2",
            "zone-b",
            json!({"metadata": {"labels": {"rank": "2", "disk": "ssd"}}}),
        ),
        node(
            "node-3",
            "zone-c",
            json!({"metadata": {"labels": {"rank": "3"}}}),
        ),
    ]
}

#[test]
fn node_selector_needs_every_label() {
    let cluster = cluster(ranked_nodes(), vec![]);
    assert_eq!(
        placed(
            &pod("p", json!({}), json!({"nodeSelector": {"disk": "ssd"}})),
            &cluster
        ),
        "node-2"
    );
    let message = refused(
        &pod(
            "p",
            json!({}),
            json!({"nodeSelector": {"disk": "ssd", "rank": "1"}}),
        ),
        &cluster,
    );
    assert_eq!(message, NODE_AFFINITY);
}

#[test]
fn required_affinity_operators() {
    let cluster = cluster(ranked_nodes(), vec![]);
    let only = |terms: Value| placed(&pod("p", json!({}), required(terms)), &cluster);
    assert_eq!(
        only(json!([expression("rank", "In", &["3", "9"])])),
        "node-3"
    );
    assert_eq!(only(json!([expression("rank", "Gt", &["2"])])), "node-3");
    assert_eq!(only(json!([expression("rank", "Lt", &["2"])])), "node-1");
    assert_eq!(only(json!([expression("disk", "Exists", &[])])), "node-2");
    // NotIn and DoesNotExist also match nodes without the label: node-1 and node-3 are left,
    // and the tie goes to the smaller name.
    assert_eq!(
        only(json!([expression("disk", "NotIn", &["ssd"])])),
        "node-1"
    );
    assert_eq!(
        only(json!([expression("disk", "DoesNotExist", &[])])),
        "node-1"
    );
    // Gt/Lt need exactly one integer value; anything else matches nothing.
    let message = refused(
        &pod(
            "p",
            json!({}),
            required(json!([expression("rank", "Gt", &["x"])])),
        ),
        &cluster,
    );
    assert_eq!(message, NODE_AFFINITY);
    let message = refused(
        &pod(
            "p",
            json!({}),
            required(json!([expression("zone", "Gt", &["1"])])),
        ),
        &cluster,
    );
    assert_eq!(message, NODE_AFFINITY);
}

#[test]
fn terms_are_ored_and_expressions_anded() {
    let cluster = cluster(ranked_nodes(), vec![]);
    let anded = json!([{"matchExpressions": [
        {"key": "rank", "operator": "In", "values": ["1", "2"]},
        {"key": "disk", "operator": "DoesNotExist"},
    ]}]);
    assert_eq!(
        placed(&pod("p", json!({}), required(anded)), &cluster),
        "node-1"
    );
    let ored = json!([
        expression("rank", "In", &["3"]),
        expression("disk", "Exists", &[])
    ]);
    let pods = vec![super::on(pod("busy", json!({}), json!({})), "node-2")];
    let busy = super::cluster(ranked_nodes(), pods);
    assert_eq!(
        placed(&pod("p", json!({}), required(ored)), &busy),
        "node-3",
        "both terms match; node-3 is less loaded"
    );
    // An empty term matches no node; no terms at all matches nothing either.
    assert_eq!(
        refused(&pod("p", json!({}), required(json!([{}]))), &cluster),
        NODE_AFFINITY
    );
    assert_eq!(
        refused(&pod("p", json!({}), required(json!([]))), &cluster),
        NODE_AFFINITY
    );
}

#[test]
fn match_fields_select_by_node_name() {
    let cluster = cluster(three_nodes(), vec![]);
    let fields = |operator: &str, names: &[&str]| json!([{"matchFields": [{"key": "metadata.name", "operator": operator, "values": names}]}]);
    assert_eq!(
        placed(
            &pod("p", json!({}), required(fields("In", &["node-3"]))),
            &cluster
        ),
        "node-3"
    );
    assert_eq!(
        placed(
            &pod(
                "p",
                json!({}),
                required(fields("NotIn", &["node-1", "node-2"]))
            ),
            &cluster
        ),
        "node-3"
    );
    let other_field =
        json!([{"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["node-1"]}]}]);
    assert_eq!(
        refused(&pod("p", json!({}), required(other_field)), &cluster),
        NODE_AFFINITY
    );
}

#[test]
fn preferred_affinity_weighs_matching_terms() {
    let cluster = cluster(ranked_nodes(), vec![]);
    let preferred = json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": expression("disk", "Exists", &[])},
        {"weight": 30, "preference": expression("rank", "Gt", &["2"])},
        {"weight": 5, "preference": {}},
    ]}}});
    assert_eq!(placed(&pod("p", json!({}), preferred), &cluster), "node-3");
    // A preference never excludes: with nothing matching, the least loaded node wins.
    let unmatched = json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": expression("gpu", "Exists", &[])},
    ]}}});
    let busy = super::cluster(
        ranked_nodes(),
        vec![super::on(pod("busy", json!({}), json!({})), "node-1")],
    );
    assert_eq!(placed(&pod("p", json!({}), unmatched), &busy), "node-2");
}
