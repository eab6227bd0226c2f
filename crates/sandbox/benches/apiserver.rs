//! API server throughput, latency and memory with 10,000 objects, measured through kube-rs
//! over HTTPS as a client sees them. Prints figures; asserts nothing about timing.
//!
//! `cargo bench -p kube-sandbox --bench apiserver` (set `SANDBOX_BENCH_OBJECTS` to change N).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube_sandbox::{Sandbox, SandboxOptions};
use serde_json::json;

const CONCURRENCY: usize = 64;
/// Watchers of the fan-out measurement.
const WATCHERS: usize = 50;

fn objects() -> usize {
    std::env::var("SANDBOX_BENCH_OBJECTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "bench", "shard": (name.bytes().last().unwrap_or(0) % 4).to_string()}},
        "data": {"config": "listen-client-urls: http://0.0.0.0:2379\nlisten-peer-urls: http://0.0.0.0:2380\n", "member": name},
    }))
    .expect("a ConfigMap")
}

/// Resident memory of this process in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

struct Latencies(Vec<Duration>);

impl Latencies {
    fn report(mut self, what: &str, total: Duration) {
        self.0.sort();
        let at = |q: f64| self.0[((self.0.len() as f64 - 1.0) * q) as usize];
        println!(
            "{what:<28} {:>9.0} ops/s   p50 {:>7.2} ms   p99 {:>7.2} ms   max {:>7.2} ms   ({} in {:.2} s)",
            self.0.len() as f64 / total.as_secs_f64(),
            at(0.5).as_secs_f64() * 1e3,
            at(0.99).as_secs_f64() * 1e3,
            at(1.0).as_secs_f64() * 1e3,
            self.0.len(),
            total.as_secs_f64(),
        );
    }
}

async fn create_all(
    api: &Api<ConfigMap>,
    prefix: &str,
    n: usize,
    created_at: Option<Arc<Mutex<HashMap<String, Instant>>>>,
) -> (Latencies, Duration) {
    let started = Instant::now();
    let latencies: Vec<Duration> = futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let created_at = created_at.clone();
            async move {
                let name = format!("{prefix}-{i:05}");
                let at = Instant::now();
                if let Some(map) = &created_at {
                    map.lock().unwrap().insert(name.clone(), at);
                }
                api.create(&PostParams::default(), &config_map(&name))
                    .await
                    .expect("create");
                at.elapsed()
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    (Latencies(latencies), started.elapsed())
}

async fn ensure_namespace(client: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("namespace");
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; a test runner listing tests (`--list`, as nextest does with
    // `--all-targets`) finds none here rather than starting a benchmark.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let n = objects();
    let dir = tempfile::tempdir().expect("temporary directory");
    let sandbox = Sandbox::start(SandboxOptions::new(dir.path()).nodes(3))
        .await
        .expect("sandbox");
    let client = sandbox.client();
    ensure_namespace(&client, "bench").await;
    ensure_namespace(&client, "bench-watch").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "bench");
    println!(
        "kube-sandbox API server, {n} ConfigMaps, {CONCURRENCY} concurrent requests over HTTPS (kube-rs client in the same process)"
    );

    let rss_before = rss_kib();
    let (latencies, total) = create_all(&api, "cm", n, None).await;
    latencies.report("create", total);
    let rss_after = rss_kib();

    let started = Instant::now();
    let gets: Vec<Duration> = futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                let at = Instant::now();
                api.get(&format!("cm-{i:05}")).await.expect("get");
                at.elapsed()
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    Latencies(gets).report("get", started.elapsed());

    let mut full = Vec::new();
    let started = Instant::now();
    for _ in 0..5 {
        let at = Instant::now();
        let list = api.list(&ListParams::default()).await.expect("list");
        // The namespace also holds its kube-root-ca.crt.
        assert!(list.items.len() > n);
        full.push(at.elapsed());
    }
    Latencies(full).report(&format!("list all {n}"), started.elapsed());

    let started = Instant::now();
    let mut pages = Vec::new();
    let mut params = ListParams::default().limit(500);
    let mut seen = 0;
    loop {
        let at = Instant::now();
        let page = api.list(&params).await.expect("page");
        pages.push(at.elapsed());
        seen += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    assert!(seen > n);
    Latencies(pages).report("list pages of 500", started.elapsed());

    let started = Instant::now();
    let selected = api
        .list(&ListParams::default().labels("shard=1"))
        .await
        .expect("selected list");
    println!(
        "{:<28} {:>9.2} ms for {} of {n} objects",
        "list with label selector",
        started.elapsed().as_secs_f64() * 1e3,
        selected.items.len()
    );

    // Watch: one watcher receives every change while N objects are created elsewhere.
    let watched: Api<ConfigMap> = Api::namespaced(client.clone(), "bench-watch");
    let from = watched
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let created_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::new(Mutex::new(HashMap::new()));
    let mut stream = watched
        .watch(&WatchParams::default().timeout(290), &from)
        .await
        .expect("watch")
        .boxed();
    let receipts = Arc::clone(&created_at);
    let receiver = tokio::spawn(async move {
        let mut delays = Vec::with_capacity(n);
        while delays.len() < n {
            match stream.try_next().await.expect("watch event") {
                Some(WatchEvent::Added(cm)) => {
                    let at = receipts
                        .lock()
                        .unwrap()
                        .get(&cm.name_any())
                        .copied()
                        .expect("created before seen");
                    delays.push(at.elapsed());
                }
                Some(_) => {}
                None => panic!("watch ended early"),
            }
        }
        delays
    });
    let started = Instant::now();
    create_all(&watched, "w", n, Some(created_at)).await;
    let delays = receiver.await.expect("receiver");
    Latencies(delays).report("watch (create to event)", started.elapsed());

    // Updates: one merge patch per object.
    let started = Instant::now();
    let patches: Vec<Duration> = futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                let at = Instant::now();
                let patch = Patch::Merge(json!({"data": {"member": format!("patched-{i}")}}));
                api.patch(&format!("cm-{i:05}"), &PatchParams::default(), &patch)
                    .await
                    .expect("patch");
                at.elapsed()
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    Latencies(patches).report("patch (merge)", started.elapsed());

    // Fan-out: many controllers watching the same namespace, as dozens of operators' caches do.
    ensure_namespace(&client, "bench-fan").await;
    let fanned: Api<ConfigMap> = Api::namespaced(client.clone(), "bench-fan");
    let from = fanned
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let fan_objects = (n / 10).max(1);
    let mut receivers = Vec::new();
    for _ in 0..WATCHERS {
        let mut stream = fanned
            .watch(&WatchParams::default().timeout(290), &from)
            .await
            .expect("watch")
            .boxed();
        receivers.push(tokio::spawn(async move {
            let mut seen = 0;
            while seen < fan_objects {
                if let Some(WatchEvent::Added(_)) = stream.try_next().await.expect("watch event") {
                    seen += 1;
                }
            }
        }));
    }
    let started = Instant::now();
    create_all(&fanned, "f", fan_objects, None).await;
    for receiver in receivers {
        receiver.await.expect("watcher");
    }
    let elapsed = started.elapsed();
    println!(
        "{:<28} {:>9.0} events/s delivered to {WATCHERS} watchers ({fan_objects} objects each, all seen in {:.2} s)",
        "watch fan-out",
        (fan_objects * WATCHERS) as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64(),
    );

    let store = &sandbox
        .api_server()
        .expect("the sandbox's own API server")
        .store;
    println!(
        "{:<28} {:>9} KiB RSS growth for {n} objects ({} objects stored, {:.0} KiB per 10,000)",
        "memory",
        rss_after.saturating_sub(rss_before),
        store.object_count(),
        rss_after.saturating_sub(rss_before) as f64 * 10_000.0 / n as f64,
    );
}
