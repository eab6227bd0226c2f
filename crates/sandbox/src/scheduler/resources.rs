//! Resource requests against node allocatable (the NodeResourcesFit plugin): the filter refuses
//! a node without room, the score prefers the least allocated node.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::cluster::ClusterIndex;

pub const REASON_TOO_MANY_PODS: &str = "Too many pods";

/// Requests of one Pod in milli-units (milli-cores, milli-bytes), by resource name.
pub type Requests = BTreeMap<String, i128>;

/// What the scheduler assumes a container without requests uses, when scoring only.
const DEFAULT_MILLI_CPU: i128 = 100;
const DEFAULT_MEMORY_MILLI_BYTES: i128 = 200 * 1024 * 1024 * 1000;

/// Parses a Kubernetes quantity ("500m", "2", "1Gi", "1e3", "1.5k") into milli-units.
pub fn parse_milli(quantity: &str) -> Option<i128> {
    let text = quantity.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (multiplier_num, multiplier_den): (i128, i128) = match suffix {
        "" => (1000, 1),
        "m" => (1, 1),
        "u" => (1, 1000),
        "n" => (1, 1_000_000),
        "k" => (1000_i128.pow(2), 1),
        "M" => (1000_i128.pow(3), 1),
        "G" => (1000_i128.pow(4), 1),
        "T" => (1000_i128.pow(5), 1),
        "P" => (1000_i128.pow(6), 1),
        "E" => (1000_i128.pow(7), 1),
        "Ki" => (1000 << 10, 1),
        "Mi" => (1000 << 20, 1),
        "Gi" => (1000 << 30, 1),
        "Ti" => (1000 << 40, 1),
        "Pi" => (1000 << 50, 1),
        "Ei" => (1000 << 60, 1),
        exponent if exponent.starts_with(['e', 'E']) => {
            let power: u32 = exponent[1..].parse().ok()?;
            (1000 * 10_i128.checked_pow(power)?, 1)
        }
        _ => return None,
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let negative = whole.starts_with('-');
    let whole: i128 = whole.trim_start_matches(['+', '-']).parse().unwrap_or(0);
    let scale = 10_i128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
    let fraction: i128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().ok()?
    };
    let value = (whole * scale + fraction).checked_mul(multiplier_num)? / scale / multiplier_den;
    Some(if negative { -value } else { value })
}

fn add_container(requests: &mut Requests, container: &Container) {
    for (name, quantity) in container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .into_iter()
        .flatten()
    {
        *requests.entry(name.clone()).or_default() += parse_milli(&quantity.0).unwrap_or(0);
    }
}

/// A Pod's effective requests: the sum over its containers, or the largest init container's
/// when that is more (init containers run one at a time, before the others), plus overhead.
pub fn pod_requests(pod: &Pod) -> Requests {
    let Some(spec) = pod.spec.as_ref() else {
        return Requests::new();
    };
    let mut requests = Requests::new();
    spec.containers
        .iter()
        .for_each(|c| add_container(&mut requests, c));
    for init in spec.init_containers.iter().flatten() {
        let mut one = Requests::new();
        add_container(&mut one, init);
        for (name, value) in one {
            let slot = requests.entry(name).or_default();
            *slot = (*slot).max(value);
        }
    }
    for (name, quantity) in spec.overhead.iter().flatten() {
        *requests.entry(name.clone()).or_default() += parse_milli(&quantity.0).unwrap_or(0);
    }
    requests
}

fn allocatable(node: &Node) -> BTreeMap<String, i128> {
    let status = node.status.as_ref();
    let quantities: Option<&BTreeMap<String, Quantity>> =
        status.and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()));
    quantities
        .into_iter()
        .flatten()
        .filter_map(|(name, q)| Some((name.clone(), parse_milli(&q.0)?)))
        .collect()
}

/// The reasons a node cannot hold the Pod's requests ("Too many pods", "Insufficient cpu"), as
/// many as apply. A node that reports no allocatable at all is not limited.
pub fn reject(pod: &Pod, node: &Node, cluster: &ClusterIndex<'_>) -> Vec<String> {
    let allocatable = allocatable(node);
    if allocatable.is_empty() {
        return Vec::new();
    }
    let mut reasons = Vec::new();
    if let Some(pods) = allocatable.get("pods")
        && (cluster.pod_count(node) as i128 + 1) * 1000 > *pods
    {
        reasons.push(REASON_TOO_MANY_PODS.to_string());
    }
    let mut used = Requests::new();
    for placed in cluster.pods_on(node) {
        for (name, value) in pod_requests(placed) {
            *used.entry(name).or_default() += value;
        }
    }
    for (name, wanted) in pod_requests(pod).into_iter().filter(|(_, v)| *v > 0) {
        let free =
            allocatable.get(&name).copied().unwrap_or(0) - used.get(&name).copied().unwrap_or(0);
        if wanted > free {
            reasons.push(format!("Insufficient {name}"));
        }
    }
    reasons
}

fn scoring_requests(pod: &Pod) -> (i128, i128) {
    let requests = pod_requests(pod);
    let cpu = requests
        .get("cpu")
        .copied()
        .filter(|v| *v > 0)
        .unwrap_or(DEFAULT_MILLI_CPU);
    let memory = requests
        .get("memory")
        .copied()
        .filter(|v| *v > 0)
        .unwrap_or(DEFAULT_MEMORY_MILLI_BYTES);
    (cpu, memory)
}

/// LeastAllocated: the mean over cpu and memory of the free share after placing the Pod, 0..=100.
pub fn least_allocated_score(pod: &Pod, node: &Node, cluster: &ClusterIndex<'_>) -> i64 {
    let allocatable = allocatable(node);
    let (mut cpu, mut memory) = scoring_requests(pod);
    for placed in cluster.pods_on(node) {
        let (c, m) = scoring_requests(placed);
        cpu += c;
        memory += m;
    }
    let share = |used: i128, name: &str| -> i128 {
        match allocatable.get(name).copied().filter(|a| *a > 0) {
            Some(total) if used <= total => (total - used) * 100 / total,
            _ => 0,
        }
    };
    ((share(cpu, "cpu") + share(memory, "memory")) / 2) as i64
}
