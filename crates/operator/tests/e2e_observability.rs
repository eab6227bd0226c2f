//! Metrics, alerts and the dashboard against a real Prometheus (Debian's `prometheus`, installed
//! by `scripts/install-deps.sh`), end to end in one sandbox:
//!
//! - the operator deployed from `deploy/` (short repair settings: a member not ready for 20 s is
//!   recreated) with a 3-member etcd 3.5.1 cluster and a 1-member etcd 3.4.23 cluster;
//! - Prometheus started by the test inside the cluster network (a free port, a generated
//!   config, its data in a temporary directory) scraping the operator's metrics Service and
//!   every etcd Pod's metrics port 2381, with the rules of `deploy/prometheus/alerts.yaml`;
//! - every query of `deploy/grafana/etcd-operator.json` (and its variables) asked of that
//!   Prometheus: each must parse and evaluate (`/api/v1/query` answers `success`);
//! - the leader's etcd frozen (SIGSTOP: a hung member; a SIGKILLed etcd is restarted by the
//!   kubelet within a second, before any alert could fire): `EtcdMemberDown` fires in
//!   `/api/v1/alerts`; the operator recreates the member after its grace, and the alert
//!   resolves; the repair and the leader change are counted, no cluster-wide alert fires. The test's copy of the rules shortens that one rule's `for:` from 3m (the
//!   production grace) to 5 s, shorter than the test operator's 20 s grace;
//! - the cluster deleted: the operator drops its series.

use etcd_operator_e2e_support as support;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_sandbox::network::ClusterNetwork;
use serde_json::Value;
use support::cluster::OPERATOR_NAMESPACE;
use support::healing::{OperatorDeployment, start_healing_cluster};
use support::{cluster_yaml, cluster_yaml_on, create_namespace, eventually, repo_root};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::block_in_place;

const NS: &str = "obs";
const LIMIT: Duration = Duration::from_secs(180);
const PROMETHEUS: &str = "/usr/bin/prometheus";
/// The member-down rule's `for:` in the test's copy of the rules.
const MEMBER_DOWN_FOR: &str = "5s";

/// A Prometheus process inside the cluster network; killed (by its own pid) when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    network: Arc<ClusterNetwork>,
    dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `deploy/prometheus/alerts.yaml` with `EtcdMemberDown`'s `for:` set to `for_`.
fn rules_with_member_down_for(for_: &str) -> String {
    let path = repo_root().join("deploy/prometheus/alerts.yaml");
    let text = std::fs::read_to_string(&path).expect("deploy/prometheus/alerts.yaml");
    let mut rules: serde_yaml::Value = serde_yaml::from_str(&text).expect("the rules parse");
    let mut found = false;
    for group in rules["groups"].as_sequence_mut().expect("groups") {
        for rule in group["rules"].as_sequence_mut().expect("rules") {
            if rule["alert"] == "EtcdMemberDown" {
                rule["for"] = serde_yaml::Value::from(for_);
                found = true;
            }
        }
    }
    assert!(found, "no EtcdMemberDown rule in {}", path.display());
    serde_yaml::to_string(&rules).unwrap()
}

impl Prometheus {
    /// Starts Prometheus inside `network`, scraping `etcd_targets` (host:port, with their
    /// namespace and cluster) and the operator's metrics Service every 2 s.
    fn start(network: Arc<ClusterNetwork>, etcd_targets: &[(&str, &str, String)]) -> Prometheus {
        let dir = tempfile::tempdir().expect("a directory for Prometheus");
        let port = network
            .enter(|| {
                std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                    .and_then(|l| l.local_addr())
                    .map(|a| a.port())
            })
            .expect("entering the cluster network")
            .expect("a free port inside the cluster network");
        std::fs::write(
            dir.path().join("rules.yaml"),
            rules_with_member_down_for(MEMBER_DOWN_FOR),
        )
        .unwrap();
        let mut etcd_jobs = String::new();
        for (namespace, cluster, target) in etcd_targets {
            etcd_jobs.push_str(&format!(
                "      - targets: [\"{target}\"]\n        labels: {{namespace: {namespace}, cluster: {cluster}}}\n"
            ));
        }
        let config = format!(
            "global:\n  scrape_interval: 2s\n  scrape_timeout: 1s\n  evaluation_interval: 2s\nrule_files: [rules.yaml]\nscrape_configs:\n  - job_name: etcd-operator\n    static_configs:\n      - targets: [\"etcd-operator-metrics.{OPERATOR_NAMESPACE}.svc:8080\"]\n  - job_name: etcd\n    static_configs:\n{etcd_jobs}"
        );
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, &config).unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = network
            .command(PROMETHEUS)
            .expect("a command inside the cluster network")
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("starting {PROMETHEUS}: {e} (scripts/install-deps.sh installs it)")
            });
        Prometheus {
            child,
            port,
            network,
            dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// GET `path_and_query` of the HTTP API; the JSON body, or why not.
    async fn get(&self, path_and_query: &str) -> Result<Value, String> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let mut stream = self
            .network
            .connect(address)
            .await
            .map_err(|e| format!("connecting to Prometheus: {e}"))?;
        // HTTP/1.0: the body runs to the end of the connection (no chunked encoding).
        let request = format!("GET {path_and_query} HTTP/1.0\r\nHost: prometheus\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut response = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
            .await
            .map_err(|_| "Prometheus did not answer in 10 s".to_string())?
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&response);
        let (_, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("not an HTTP response: {text}"))?;
        serde_json::from_str(body).map_err(|e| format!("{e}: {body}"))
    }

    /// An instant query: its result vector, or Prometheus's error.
    async fn query(&self, promql: &str) -> Result<Vec<Value>, String> {
        let answer = self
            .get(&format!("/api/v1/query?query={}", encode(promql)))
            .await?;
        if answer["status"] != "success" {
            return Err(format!("{promql}: {answer}"));
        }
        Ok(answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// The value of a query that returns one sample.
    async fn value(&self, promql: &str) -> Result<f64, String> {
        let result = self.query(promql).await?;
        match result.as_slice() {
            [one] => one["value"][1]
                .as_str()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{promql}: {one}")),
            other => Err(format!("{promql}: {} samples: {other:?}", other.len())),
        }
    }

    /// The alerts in `/api/v1/alerts` named `name`, as (state, labels).
    async fn alerts(&self, name: &str) -> Result<Vec<(String, Value)>, String> {
        let answer = self.get("/api/v1/alerts").await?;
        Ok(answer["data"]["alerts"]
            .as_array()
            .ok_or_else(|| format!("no alerts in {answer}"))?
            .iter()
            .filter(|a| a["labels"]["alertname"] == name)
            .map(|a| {
                (
                    a["state"].as_str().unwrap_or("").to_string(),
                    a["labels"].clone(),
                )
            })
            .collect())
    }
}

/// Percent-encoding of a query parameter.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// (panel title, query) or (metric, label) pairs.
type Pairs = Vec<(String, String)>;

/// Every query of the dashboard, with Grafana's variables given values Prometheus accepts; and
/// the metric and label of each `label_values(...)` variable.
fn dashboard_queries(path: &Path) -> (Pairs, Pairs) {
    let text = std::fs::read_to_string(path).expect("the dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let substitute = |expr: &str| {
        expr.replace("$namespace", ".*")
            .replace("$cluster", ".*")
            .replace("$__rate_interval", "1m")
    };
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("every target has an expr");
            let title = panel["title"].as_str().unwrap_or_default().to_string();
            queries.push((title, substitute(expr)));
        }
    }
    let mut variables = Vec::new();
    for variable in dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
    {
        let Some(definition) = variable["definition"].as_str() else {
            continue;
        };
        let inner = definition
            .strip_prefix("label_values(")
            .and_then(|d| d.strip_suffix(')'))
            .unwrap_or_else(|| panic!("a variable that is not label_values(): {definition}"));
        let (metric, label) = inner.rsplit_once(',').expect("label_values(metric, label)");
        variables.push((substitute(metric.trim()), label.trim().to_string()));
    }
    (queries, variables)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_prometheus_alerts_fire_and_resolve_and_the_dashboard_queries_evaluate() {
    let started = Instant::now();
    let cluster = start_healing_cluster(3).await;
    cluster
        .deploy_operator_with(&OperatorDeployment::repairing())
        .await;
    let client = cluster.client();
    create_namespace(&client, NS).await;
    block_in_place(|| {
        cluster.apply(&cluster_yaml("etcd", NS, 3, ""));
        cluster.apply(&cluster_yaml_on("etcd34", NS, 1, "3.4.23", ""));
    });
    cluster.wait_converged(NS, "etcd", 3, LIMIT).await;
    cluster.wait_converged(NS, "etcd34", 1, LIMIT).await;
    println!(
        "clusters converged: {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let mut targets: Vec<(&str, &str, String)> = (0..3)
        .map(|i| (NS, "etcd", format!("etcd-{i}.etcd.{NS}.svc:2381")))
        .collect();
    targets.push((NS, "etcd34", format!("etcd34-0.etcd34.{NS}.svc:2381")));
    let prometheus = block_in_place(|| Prometheus::start(cluster.network.clone(), &targets));

    // Every target up: the operator through its Service, each etcd Pod on port 2381.
    eventually("Prometheus to scrape every target", LIMIT, || async {
        let up = prometheus.query("up").await?;
        let healthy = up.iter().filter(|s| s["value"][1] == "1").count();
        (up.len() == 5 && healthy == 5)
            .then_some(())
            .ok_or_else(|| format!("up: {up:?}\nlog:\n{}", prometheus.log()))
    })
    .await;
    let rules = prometheus.get("/api/v1/rules").await.unwrap();
    let loaded: usize = rules["data"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["rules"].as_array().map_or(0, Vec::len))
        .sum();
    // Every rule the file declares is loaded (counted from the file, so a new rule cannot make
    // this check stale).
    let declared: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo_root().join("deploy/prometheus/alerts.yaml")).unwrap(),
    )
    .unwrap();
    let declared = declared["groups"]
        .as_sequence()
        .expect("groups in deploy/prometheus/alerts.yaml")
        .iter()
        .map(|g| g["rules"].as_sequence().map_or(0, Vec::len))
        .sum::<usize>();
    assert!(
        declared >= 10,
        "deploy/prometheus/alerts.yaml declares {declared} rules"
    );
    assert_eq!(
        loaded, declared,
        "the rules of deploy/prometheus/alerts.yaml: {rules}"
    );
    println!(
        "Prometheus scraping 5 targets: {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // What the operator reports, as Prometheus has it.
    let cluster_series = format!("namespace=\"{NS}\",cluster=\"etcd\"");
    eventually("the operator's figures in Prometheus", LIMIT, || async {
        for (metric, want) in [
            ("etcd_operator_cluster_desired_members", 3.0),
            ("etcd_operator_cluster_ready_members", 3.0),
            ("etcd_operator_cluster_voters", 3.0),
            ("etcd_operator_cluster_learners", 0.0),
            ("etcd_operator_cluster_has_quorum", 1.0),
            ("etcd_operator_cluster_has_leader", 1.0),
        ] {
            let got = prometheus
                .value(&format!("{metric}{{{cluster_series}}}"))
                .await?;
            if got != want {
                return Err(format!("{metric} is {got}, not {want}"));
            }
        }
        let ready = prometheus
            .value(&format!("sum(etcd_operator_member_ready{{{cluster_series}}})"))
            .await?;
        let sized = prometheus
            .query(&format!(
                "etcd_operator_member_db_size_bytes{{{cluster_series}}} / etcd_operator_member_db_quota_bytes{{{cluster_series}}} < 0.8"
            ))
            .await?;
        let etcd_leaders = prometheus.value("sum(etcd_server_has_leader)").await?;
        (ready == 3.0 && sized.len() == 3 && etcd_leaders == 4.0)
            .then_some(())
            .ok_or_else(|| {
                format!("ready {ready}, {} sized members, {etcd_leaders} etcd with a leader", sized.len())
            })
    })
    .await;
    assert_eq!(
        prometheus
            .value(&format!(
                "etcd_operator_cluster_alarms{{{cluster_series},alarm=\"NOSPACE\"}}"
            ))
            .await
            .unwrap(),
        0.0
    );

    // The dashboard: every query parses and evaluates; the variables' labels exist.
    let (queries, variables) =
        dashboard_queries(&repo_root().join("deploy/grafana/etcd-operator.json"));
    let mut with_data = 0;
    for (panel, expr) in &queries {
        let result = prometheus
            .query(expr)
            .await
            .unwrap_or_else(|e| panic!("dashboard panel {panel:?}: {e}"));
        with_data += usize::from(!result.is_empty());
    }
    for (metric, label) in &variables {
        let result = prometheus
            .query(&format!("count by ({label}) ({metric})"))
            .await
            .unwrap_or_else(|e| panic!("dashboard variable {label}: {e}"));
        let want = if label == "namespace" { NS } else { "etcd" };
        assert!(
            result.iter().any(|s| s["metric"][label.as_str()] == want),
            "the dashboard variable {label} finds no {want}: {result:?}"
        );
    }
    println!(
        "dashboard: {} queries evaluated ({with_data} with data now), {} variables",
        queries.len(),
        variables.len()
    );
    assert!(queries.len() >= 20, "{} queries", queries.len());
    assert!(
        prometheus
            .alerts("EtcdMemberDown")
            .await
            .unwrap()
            .is_empty()
    );

    // The leader hangs: etcd elects another, the alert fires, the operator recreates the
    // member, the alert resolves.
    let victim = block_in_place(|| cluster.leader(NS, "etcd")).expect("etcd's leader");
    let victim = victim.as_str();
    let repairs = format!("etcd_operator_cluster_member_repairs_total{{{cluster_series}}}");
    let repairs_before = prometheus.value(&repairs).await.unwrap();
    let changes = format!("etcd_operator_cluster_leader_changes_total{{{cluster_series}}}");
    let changes_before = prometheus.value(&changes).await.unwrap();
    let frozen_at = Instant::now();
    cluster.kubelet.freeze_container(NS, victim, None).unwrap();
    eventually("EtcdMemberDown to fire", LIMIT, || async {
        let alerts = prometheus.alerts("EtcdMemberDown").await?;
        alerts
            .iter()
            .any(|(state, labels)| {
                state == "firing"
                    && labels["member"] == victim
                    && labels["namespace"] == NS
                    && labels["cluster"] == "etcd"
                    && labels["severity"] == "warning"
            })
            .then_some(())
            .ok_or_else(|| format!("{alerts:?}"))
    })
    .await;
    let fired = frozen_at.elapsed();
    println!(
        "EtcdMemberDown firing {:.1} s after the freeze",
        fired.as_secs_f64()
    );
    eventually("EtcdMemberDown to resolve", LIMIT, || async {
        let alerts = prometheus.alerts("EtcdMemberDown").await?;
        let ready = prometheus
            .value(&format!(
                "etcd_operator_member_ready{{{cluster_series},member=\"{victim}\"}}"
            ))
            .await?;
        (alerts.is_empty() && ready == 1.0)
            .then_some(())
            .ok_or_else(|| format!("ready {ready}, alerts {alerts:?}"))
    })
    .await;
    let resolved = frozen_at.elapsed();
    println!(
        "EtcdMemberDown resolved {:.1} s after the freeze",
        resolved.as_secs_f64()
    );
    cluster.wait_converged(NS, "etcd", 3, LIMIT).await;
    let repairs_after = prometheus.value(&repairs).await.unwrap();
    assert!(
        repairs_after > repairs_before,
        "the repair is counted: {repairs_before} then {repairs_after}"
    );
    let changes_after = prometheus.value(&changes).await.unwrap();
    assert!(
        changes_after > changes_before,
        "the leader change is counted: {changes_before} then {changes_after}"
    );
    // etcd's own port went silent too while it hung.
    let victim_up = prometheus
        .value(&format!(
            "min_over_time(up{{job=\"etcd\",instance=\"{victim}.etcd.{NS}.svc:2381\"}}[10m])"
        ))
        .await
        .unwrap();
    assert_eq!(
        victim_up, 0.0,
        "Prometheus saw {victim}'s metrics port down"
    );
    for alert in [
        "EtcdClusterQuorumLost",
        "EtcdClusterNoLeader",
        "EtcdOperatorDown",
        "EtcdOperatorNotLeading",
    ] {
        assert!(
            prometheus.alerts(alert).await.unwrap().is_empty(),
            "{alert} fired on a single member's outage"
        );
    }

    // The 3.4.23 cluster deleted: the operator drops its series (Prometheus marks them stale).
    let (ok, _, stderr) = block_in_place(|| {
        support::kubectl(
            &cluster,
            &["-n", NS, "delete", "etcdcluster", "etcd34", "--wait=false"],
        )
    });
    assert!(ok, "kubectl delete: {stderr}");
    // First the cluster itself goes (its members left, the finalizer removed), then its series:
    // a failure says which of the two did not happen.
    eventually("the deleted cluster to go", LIMIT, || async {
        let (_, out, err) = block_in_place(|| {
            support::kubectl(
                &cluster,
                &["-n", NS, "get", "etcdcluster,etcdmember", "-o", "name"],
            )
        });
        (!out.contains("etcd34"))
            .then_some(())
            .ok_or_else(|| format!("still there: {out}{err}"))
    })
    .await;
    eventually("the deleted cluster's series to go", LIMIT, || async {
        let left = prometheus
            .query(&format!(
                "{{__name__=~\"etcd_operator_.+\",namespace=\"{NS}\",cluster=\"etcd34\"}}"
            ))
            .await?;
        left.is_empty()
            .then_some(())
            .ok_or_else(|| format!("{} series left: {left:?}", left.len()))
    })
    .await;
    let kept = prometheus
        .query(&format!(
            "etcd_operator_cluster_desired_members{{{cluster_series}}}"
        ))
        .await
        .unwrap();
    assert_eq!(kept.len(), 1, "the other cluster's series stay");
    println!("total: {:.1} s", started.elapsed().as_secs_f64());
}
