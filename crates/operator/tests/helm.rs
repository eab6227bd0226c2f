//! The Helm chart (`deploy/helm/etcd-operator`) with the real `helm` (v4, installed by
//! `scripts/install-deps.sh`):
//!
//! - `helm lint` passes; `helm lint` and `helm template` refuse values of the wrong type
//!   (`values.schema.json`) and contradictory settings with a message naming the value;
//! - `helm template` with the default values renders the objects of `deploy/` (CRDs, RBAC,
//!   Deployment, metrics Service), the CRDs marked `helm.sh/resource-policy: keep`; every flag
//!   the chart passes exists in `etcd-operator run --help`, and the ones `deploy/` leaves out
//!   carry the binary's defaults;
//! - every value takes effect in the rendered objects (parsed as the k8s-openapi types);
//! - against one kube-sandbox with nodes: `helm install` (CRDs from the chart) and a 1-member
//!   EtcdCluster reconciled to Available; `helm upgrade` to another image, two replicas, text
//!   logs, one watched namespace, a node selector with a toleration for a tainted node, and a
//!   scale to 3 members; `helm rollback` to the first revision, whose operator takes up a
//!   cluster the upgraded one left alone; `helm uninstall` removing the release and its history
//!   and leaving the CRDs and the clusters; `helm install` again with `crds.install=false`;
//! - `helm upgrade` from the previous chart version (`tests/fixtures/chart-0.2.0`): a
//!   3-member cluster running under the previous chart keeps its Pods, member IDs, data and
//!   EtcdMember objects untouched through the upgrade, and the new chart's operator scales it.

use etcd_operator_e2e_support as support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_operator_api::EtcdCluster;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, LogParams};
use kube::{Api, Client};
use kube_sandbox::runtime::ImageMap;
use kube_sandbox::{Sandbox, SandboxOptions};
use serde_yaml::Value;
use support::cluster::{ETCDCTL, OPERATOR_IMAGE, client_endpoint, pod_ready};
use support::status::available;
use support::{
    TestSandbox, cluster_yaml, create_namespace, eventually, get_cluster, kubectl, repo_root,
};

const NAMESPACE: &str = "etcd-operator-system";
const RELEASE: &str = "etcd-operator";
const LIMIT: Duration = Duration::from_secs(180);
/// The image the upgrade switches to; the sandbox maps it to the same binary.
const OTHER_IMAGE: &str = "registry.example.com/platform/etcd-operator";
const KEEP: &str = "helm.sh/resource-policy";
/// Chart.yaml's version and appVersion, as the standard labels carry them.
const CHART_VERSION: &str = "0.3.0";
const APP_VERSION: &str = "0.1.0";
/// helm's wait strategy. The default (`watcher`, kstatus) panics on the sandbox's Pods: their
/// container states carry explicit nulls (`"waiting": null`) where a real API server omits the
/// field (see docs/helm.md). `legacy` is helm 3's readiness check; the test checks readiness
/// itself as well.
const WAIT: &str = "--wait=legacy";

fn chart() -> PathBuf {
    repo_root().join("deploy/helm/etcd-operator")
}

/// `helm` with its cache, configuration and data in a directory of its own (so a test neither
/// reads nor writes the user's), against `kubeconfig` when given.
struct Helm {
    home: tempfile::TempDir,
    kubeconfig: Option<PathBuf>,
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Helm {
    fn new(kubeconfig: Option<&Path>) -> Helm {
        Helm {
            home: tempfile::tempdir().expect("a temporary directory"),
            kubeconfig: kubeconfig.map(Path::to_path_buf),
        }
    }

    fn run(&self, args: &[&str]) -> Run {
        let mut command = Command::new(std::env::var_os("HELM").unwrap_or_else(|| "helm".into()));
        for (var, sub) in [
            ("HELM_CACHE_HOME", "cache"),
            ("HELM_CONFIG_HOME", "config"),
            ("HELM_DATA_HOME", "data"),
        ] {
            command.env(var, self.home.path().join(sub));
        }
        if let Some(kubeconfig) = &self.kubeconfig {
            command.arg("--kubeconfig").arg(kubeconfig);
        }
        let output = command.args(args).output().unwrap_or_else(|e| {
            panic!("running helm {args:?}: {e} (scripts/install-deps.sh installs helm)")
        });
        Run {
            ok: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs helm and panics with its output unless it succeeds; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let run = self.run(args);
        assert!(
            run.ok,
            "helm {args:?} failed:\n{}\n{}",
            run.stderr, run.stdout
        );
        run.stdout
    }

    /// A values file in helm's directory.
    fn values(&self, name: &str, yaml: &str) -> String {
        let path = self.home.path().join(name);
        std::fs::write(&path, yaml).expect("writing a values file");
        path.to_str().unwrap().to_string()
    }

    /// `helm template` of the chart in the operator's namespace with `extra` arguments: the
    /// rendered objects.
    fn template(&self, extra: &[&str]) -> Vec<Value> {
        let chart = chart();
        // As a cluster of 1.30 or newer answers discovery: the protection policy renders only
        // where the API server serves ValidatingAdmissionPolicy.
        let mut args = vec![
            "template",
            RELEASE,
            chart.to_str().unwrap(),
            "--namespace",
            NAMESPACE,
            "--api-versions",
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
            "--api-versions",
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding",
        ];
        args.extend_from_slice(extra);
        documents(&self.ok(&args))
    }
}

fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).expect("helm renders valid YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every object in the YAML files of `deploy/<dir>`.
fn plain_objects(dir: &str) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join("deploy").join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files.iter().flat_map(|f| documents(&read(f))).collect()
}

fn kind_name(object: &Value) -> (String, String) {
    (
        object["kind"].as_str().expect("a kind").to_string(),
        object["metadata"]["name"]
            .as_str()
            .expect("a name")
            .to_string(),
    )
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| kind_name(o) == (kind.to_string(), name.to_string()))
}

fn typed<T: serde::de::DeserializeOwned>(object: &Value) -> T {
    serde_yaml::from_value(object.clone()).unwrap_or_else(|e| {
        panic!(
            "{:?} does not parse as its k8s-openapi type: {e}",
            kind_name(object)
        )
    })
}

fn deployment(objects: &[Value]) -> Deployment {
    typed(find(objects, "Deployment", "etcd-operator").expect("the chart renders the Deployment"))
}

/// `--flag=value` arguments as `flag → value`.
fn flags(args: &[String]) -> BTreeMap<String, String> {
    args.iter()
        .filter_map(|a| a.strip_prefix("--"))
        .map(|a| {
            let (flag, value) = a.split_once('=').unwrap_or((a, ""));
            (flag.to_string(), value.to_string())
        })
        .collect()
}

/// The flags of `etcd-operator run --help` with their defaults (None for a flag without one).
fn binary_flags() -> BTreeMap<String, Option<String>> {
    let output = Command::new(env!("CARGO_BIN_EXE_etcd-operator"))
        .args(["run", "--help"])
        .output()
        .expect("etcd-operator runs");
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut table = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in help.lines() {
        let trimmed = line.trim_start();
        if let Some(flag) = trimmed.strip_prefix("--") {
            let name = flag.split([' ', '=']).next().unwrap().to_string();
            table.insert(name.clone(), None);
            current = Some(name);
        } else if let (Some(flag), Some(start)) = (&current, trimmed.find("[default: ")) {
            let rest = &trimmed[start + "[default: ".len()..];
            let value = rest.split(']').next().unwrap().to_string();
            table.insert(flag.clone(), Some(value));
        }
    }
    assert!(
        table.contains_key("namespace") && table.contains_key("log-format"),
        "unexpected help text:\n{help}"
    );
    table
}

fn container_args(deployment: &Deployment) -> Vec<String> {
    deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .args
        .clone()
        .unwrap_or_default()
}

/// Every flag the Deployment passes is a flag of the binary.
fn assert_flags_exist(deployment: &Deployment) {
    let known = binary_flags();
    let args = container_args(deployment);
    assert_eq!(args.first().map(String::as_str), Some("run"));
    for flag in flags(&args).keys() {
        assert!(
            known.contains_key(flag),
            "the chart passes --{flag}, which `etcd-operator run` does not have (it has {:?})",
            known.keys().collect::<Vec<_>>()
        );
    }
}

#[test]
fn helm_lint_passes_with_the_default_values() {
    let helm = Helm::new(None);
    let out = helm.ok(&["lint", "--strict", chart().to_str().unwrap()]);
    assert!(
        out.contains("1 chart(s) linted, 0 chart(s) failed"),
        "{out}"
    );
}

#[test]
fn the_schema_refuses_wrong_values_with_a_clear_message() {
    let helm = Helm::new(None);
    let chart = chart();
    let chart = chart.to_str().unwrap();
    // (the setting, what helm must say, the commands that refuse it). `helm lint` turns the
    // templates' `fail` into a log line by design, so a contradiction the schema cannot
    // express is refused by template (and so install and upgrade) only.
    let schema = &["lint", "template"][..];
    let refused: &[(&[&str], &str, &[&str])] = &[
        (
            &["--set", "replicas=two"],
            "at '/replicas': got string, want integer",
            schema,
        ),
        (
            &["--set", "image.pullPolicy=Sometimes"],
            "at '/image/pullPolicy'",
            schema,
        ),
        (&["--set", "logFormat=xml"], "at '/logFormat'", schema),
        (
            &["--set", "serviceMonitor.interval=often"],
            "at '/serviceMonitor/interval'",
            schema,
        ),
        (
            &["--set", "prometheusRule.enabled=yes"],
            "at '/prometheusRule/enabled': got string, want boolean",
            schema,
        ),
        (
            &["--set", "dashboard.labels=x"],
            "at '/dashboard/labels'",
            schema,
        ),
        (
            &["--set", "crds.keep=maybe"],
            "at '/crds/keep': got string, want boolean",
            schema,
        ),
        (
            &["--set", "leaderElection.leaseDurationSeconds=1"],
            "at '/leaderElection/leaseDurationSeconds'",
            schema,
        ),
        (
            &["--set", "watchNamespace=Team_A"],
            "at '/watchNamespace'",
            schema,
        ),
        (
            &["--set", "nodeSelector=disk"],
            "at '/nodeSelector': got string, want object",
            schema,
        ),
        (
            &["--set", "tolerations.key=x"],
            "at '/tolerations': got object, want array",
            schema,
        ),
        (
            &["--set", "imagee.tag=v1"],
            "additional properties 'imagee' not allowed",
            schema,
        ),
        (
            &[
                "--set",
                "replicas=2",
                "--set",
                "leaderElection.enabled=false",
            ],
            "replicas is 2 but leaderElection.enabled is false",
            &["template"],
        ),
        (
            &["--set", "localStore.root=snapshots"],
            "at '/localStore/root'",
            schema,
        ),
        (
            &["--set", "localStore.root=/var/../etc"],
            "at '/localStore/root'",
            schema,
        ),
        (
            &["--set", "localStore.enabled=true"],
            "neither localStore.existingClaim nor localStore.volume is set",
            &["template"],
        ),
        (
            &[
                "--set",
                "localStore.enabled=true",
                "--set",
                "localStore.existingClaim=snapshots",
                "--set",
                "localStore.volume.hostPath.path=/srv",
            ],
            "localStore.existingClaim and localStore.volume are both set",
            &["template"],
        ),
    ];
    for (settings, message, commands) in refused {
        for &command in *commands {
            let mut args = vec![command, chart];
            args.extend_from_slice(settings);
            let run = helm.run(&args);
            assert!(
                !run.ok,
                "helm {args:?} accepted {settings:?}:\n{}",
                run.stdout
            );
            let said = format!("{}{}", run.stderr, run.stdout);
            assert!(
                said.contains(message),
                "helm {args:?} refused {settings:?} without saying {message:?}:\n{said}"
            );
        }
    }
    // The same settings of the right type pass.
    helm.ok(&[
        "template",
        chart,
        "--set",
        "replicas=2",
        "--set",
        "logFormat=text",
    ]);
}

#[test]
fn the_default_render_is_the_plain_manifests() {
    let helm = Helm::new(None);
    let rendered = helm.template(&[]);
    let (crds, objects): (Vec<Value>, Vec<Value>) = rendered
        .into_iter()
        .partition(|o| o["kind"] == "CustomResourceDefinition");

    // The CRDs: those of deploy/crds/, each marked to be kept on uninstall.
    let plain_crds = plain_objects("crds");
    assert_eq!(crds.len(), plain_crds.len());
    for plain in &plain_crds {
        let (kind, name) = kind_name(plain);
        let charted = find(&crds, &kind, &name).unwrap_or_else(|| panic!("no CRD {name}"));
        assert_eq!(charted["metadata"]["annotations"][KEEP], "keep");
        let mut expected = plain.clone();
        expected["metadata"]["annotations"] = serde_yaml::from_str("{}").unwrap();
        expected["metadata"]["annotations"][KEEP] = Value::from("keep");
        assert!(
            charted == &expected,
            "the chart's CRD {name} differs from deploy/crds"
        );
    }

    // Every object carries the chart's standard labels beside deploy/'s (the Pods the
    // release's name and part); without them it is deploy/'s object.
    let objects: Vec<Value> = objects
        .into_iter()
        .map(|mut object| {
            let (kind, name) = kind_name(&object);
            let labels = object["metadata"]["labels"].as_mapping_mut().unwrap();
            for (label, value) in [
                ("helm.sh/chart", format!("etcd-operator-{CHART_VERSION}")),
                ("app.kubernetes.io/instance", RELEASE.to_string()),
                ("app.kubernetes.io/version", APP_VERSION.to_string()),
                ("app.kubernetes.io/managed-by", "Helm".to_string()),
                ("app.kubernetes.io/part-of", "etcd-operator".to_string()),
            ] {
                assert_eq!(
                    labels.remove(label),
                    Some(Value::from(value)),
                    "{kind} {name}: the label {label}"
                );
            }
            if let Some(labels) = object
                .get_mut("spec")
                .and_then(|s| s.get_mut("template"))
                .and_then(|t| t.get_mut("metadata"))
                .and_then(|m| m.get_mut("labels"))
                .and_then(Value::as_mapping_mut)
            {
                for (label, value) in [
                    ("app.kubernetes.io/instance", RELEASE),
                    ("app.kubernetes.io/part-of", "etcd-operator"),
                ] {
                    assert_eq!(
                        labels.remove(label),
                        Some(Value::from(value)),
                        "{kind} {name}'s Pods: {label}"
                    );
                }
            }
            object
        })
        .collect();

    // Everything of deploy/rbac and deploy/operator but the Namespace (helm's
    // --create-namespace makes it), and nothing else.
    let plain: Vec<Value> = ["rbac", "operator"]
        .iter()
        .flat_map(|d| plain_objects(d))
        .filter(|o| o["kind"] != "Namespace")
        .collect();
    let mut rendered_names: Vec<_> = objects.iter().map(kind_name).collect();
    let mut plain_names: Vec<_> = plain.iter().map(kind_name).collect();
    rendered_names.sort();
    plain_names.sort();
    assert_eq!(rendered_names, plain_names);

    let defaults = binary_flags();
    for object in &objects {
        let (kind, name) = kind_name(object);
        let plain = find(&plain, &kind, &name).unwrap();
        if kind != "Deployment" {
            assert_eq!(
                object, plain,
                "the chart's {kind} {name} differs from deploy/"
            );
            continue;
        }
        // The Deployment: the same but for flags deploy/ leaves to the binary's defaults,
        // which the chart passes with exactly those defaults.
        let charted: Deployment = typed(object);
        assert_flags_exist(&charted);
        let expected: Deployment = typed(plain);
        let charted_flags = flags(&container_args(&charted));
        let plain_flags = flags(&container_args(&expected));
        for (flag, value) in &plain_flags {
            assert_eq!(charted_flags.get(flag), Some(value), "--{flag}");
        }
        let extra: Vec<_> = charted_flags
            .iter()
            .filter(|(f, _)| !plain_flags.contains_key(*f))
            .collect();
        assert!(!extra.is_empty());
        for (flag, value) in extra {
            assert_eq!(
                defaults[flag].as_deref(),
                Some(value.as_str()),
                "the chart's default --{flag}={value} is not the binary's default"
            );
        }
        let mut same = charted.clone();
        same.spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .args = Some(container_args(&expected));
        assert_eq!(
            same, expected,
            "the chart's Deployment differs from deploy/"
        );
    }
}

#[test]
fn every_value_takes_effect() {
    let helm = Helm::new(None);
    let values = helm.values(
        "all.yaml",
        r#"
image: {repository: registry.example.com/platform/etcd-operator, tag: v9.9.9, pullPolicy: Always}
imagePullSecrets: [{name: registry-login}]
replicas: 3
leaderElection: {enabled: true, leaseName: my-lease, leaseDurationSeconds: 30}
watchNamespace: team-a
concurrency: 4
etcdConnectionsKept: 250
metricsPort: 9090
etcdImageRepository: registry.example.com/mirror/etcd
clusterDomain: k8s.example.internal
repair: {notReadyGraceSeconds: 60, backoffSeconds: 5}
logFormat: text
logLevel: etcd_operator=debug,info
resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {cpu: "1", memory: 512Mi}}
nodeSelector: {node-role.example.com/ops: "true"}
tolerations: [{key: dedicated, operator: Equal, value: ops, effect: NoSchedule}]
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector: {matchLabels: {app.kubernetes.io/name: etcd-operator}}
priorityClassName: platform-critical
podLabels: {team: platform}
podAnnotations: {prometheus.io/scrape: "true"}
serviceAccount: {annotations: {iam.example.com/role: etcd-operator}}
podSecurityContext: {runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, seccompProfile: {type: Localhost, localhostProfile: operator.json}}
securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: {drop: [ALL]}}
crds: {install: true, keep: false}
localStore: {enabled: true, root: /backups/etcd, existingClaim: operator-snapshots}
"#,
    );
    let objects = helm.template(&["--values", &values]);
    let deployment = deployment(&objects);
    assert_flags_exist(&deployment);
    let spec = deployment.spec.clone().unwrap();
    assert_eq!(spec.replicas, Some(3));
    let template = spec.template;
    let labels = template.metadata.clone().unwrap().labels.unwrap();
    assert_eq!(labels["team"], "platform");
    assert_eq!(labels["app.kubernetes.io/name"], "etcd-operator");
    assert_eq!(
        template.metadata.unwrap().annotations.unwrap()["prometheus.io/scrape"],
        "true"
    );
    let pod = template.spec.unwrap();
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("platform-critical")
    );
    assert_eq!(
        pod.node_selector.unwrap()["node-role.example.com/ops"],
        "true"
    );
    let toleration = &pod.tolerations.unwrap()[0];
    assert_eq!(
        (
            toleration.key.as_deref(),
            toleration.value.as_deref(),
            toleration.effect.as_deref()
        ),
        (Some("dedicated"), Some("ops"), Some("NoSchedule"))
    );
    let anti = pod.affinity.unwrap().pod_anti_affinity.unwrap();
    assert_eq!(
        anti.preferred_during_scheduling_ignored_during_execution
            .unwrap()[0]
            .weight,
        100
    );
    assert_eq!(pod.image_pull_secrets.unwrap()[0].name, "registry-login");
    let pod_security = pod.security_context.unwrap();
    assert_eq!(pod_security.run_as_user, Some(1000));
    assert_eq!(pod_security.fs_group, Some(1000));
    assert_eq!(
        pod_security
            .seccomp_profile
            .unwrap()
            .localhost_profile
            .as_deref(),
        Some("operator.json")
    );
    let container = &pod.containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("registry.example.com/platform/etcd-operator:v9.9.9")
    );
    assert_eq!(container.image_pull_policy.as_deref(), Some("Always"));
    let security = container.security_context.clone().unwrap();
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    let resources = container.resources.clone().unwrap();
    assert_eq!(resources.limits.unwrap()["cpu"].0, "1");
    assert_eq!(resources.requests.unwrap()["memory"].0, "128Mi");
    let set = flags(&container_args(&deployment));
    for (flag, value) in [
        ("namespace", "team-a"),
        ("metrics-addr", "0.0.0.0:9090"),
        ("leader-elect", "true"),
        ("lease-name", "my-lease"),
        ("lease-duration-seconds", "30"),
        ("etcd-image-repository", "registry.example.com/mirror/etcd"),
        (
            "agent-image",
            "registry.example.com/platform/etcd-operator:v9.9.9",
        ),
        ("not-ready-grace-seconds", "60"),
        ("repair-backoff-seconds", "5"),
        ("concurrency", "4"),
        ("etcd-connections-kept", "250"),
        ("log-format", "text"),
        ("cluster-domain", "k8s.example.internal"),
        ("local-store-root", "/backups/etcd"),
    ] {
        assert_eq!(set.get(flag).map(String::as_str), Some(value), "--{flag}");
    }
    // The local store: the claim mounted at the root the operator is told.
    let volumes = pod.volumes.clone().unwrap();
    assert_eq!(volumes.len(), 1, "{volumes:?}");
    assert_eq!(volumes[0].name, "local-store");
    assert_eq!(
        volumes[0]
            .persistent_volume_claim
            .as_ref()
            .map(|c| c.claim_name.as_str()),
        Some("operator-snapshots")
    );
    let mounts = container.volume_mounts.clone().unwrap();
    assert_eq!(
        (mounts[0].name.as_str(), mounts[0].mount_path.as_str()),
        ("local-store", "/backups/etcd")
    );
    let env = container.env.clone().unwrap();
    let rust_log = env.iter().find(|e| e.name == "RUST_LOG").unwrap();
    assert_eq!(rust_log.value.as_deref(), Some("etcd_operator=debug,info"));
    assert_eq!(container.ports.clone().unwrap()[0].container_port, 9090);

    let service: Service = typed(find(&objects, "Service", "etcd-operator-metrics").unwrap());
    assert_eq!(service.spec.unwrap().ports.unwrap()[0].port, 9090);
    let account: ServiceAccount = typed(find(&objects, "ServiceAccount", "etcd-operator").unwrap());
    assert_eq!(
        account.metadata.annotations.unwrap()["iam.example.com/role"],
        "etcd-operator"
    );
    // crds.keep=false: the CRDs without the keep annotation.
    let crds: Vec<CustomResourceDefinition> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .map(typed)
        .collect();
    assert_eq!(crds.len(), plain_objects("crds").len());
    for crd in &crds {
        let annotations = crd.metadata.annotations.clone().unwrap_or_default();
        assert!(!annotations.contains_key(KEEP), "{annotations:?}");
    }
}

/// The local store's volume source is any volume, and the operator's group can write it
/// (fsGroup from runAsGroup unless the values set one); off by default, nothing is mounted.
#[test]
fn the_local_store_mounts_any_volume_writable_by_the_operator() {
    let helm = Helm::new(None);
    let pod = |objects: &[Value]| deployment(objects).spec.unwrap().template.spec.unwrap();
    let default = pod(&helm.template(&[]));
    assert_eq!(default.volumes, None);
    assert_eq!(
        default.security_context.and_then(|s| s.fs_group),
        None,
        "no fsGroup without the local store"
    );
    let objects = helm.template(&[
        "--set",
        "localStore.enabled=true",
        "--set",
        "localStore.volume.nfs.server=nfs.example.internal",
        "--set",
        "localStore.volume.nfs.path=/exports/etcd",
    ]);
    let flags = flags(&container_args(&deployment(&objects)));
    assert_eq!(
        flags.get("local-store-root").map(String::as_str),
        Some("/var/lib/etcd-operator/snapshots")
    );
    let spec = pod(&objects);
    assert_eq!(spec.security_context.unwrap().fs_group, Some(65532));
    let nfs = spec.volumes.unwrap()[0].nfs.clone().unwrap();
    assert_eq!(
        (nfs.server.as_str(), nfs.path.as_str()),
        ("nfs.example.internal", "/exports/etcd")
    );
}

/// The protection policy allows the release's own service account (in whatever namespace the
/// release goes) and can be turned off.
#[test]
fn the_protection_policy_follows_the_release_and_can_be_left_out() {
    let helm = Helm::new(None);
    let objects = helm.template(&["--namespace", "platform-etcd"]);
    let policy = find(
        &objects,
        "ValidatingAdmissionPolicy",
        "etcd-operator-protect-members",
    )
    .expect("the protection policy renders by default");
    let allowed = policy["spec"]["variables"][0]["expression"]
        .as_str()
        .unwrap_or_default();
    assert!(
        allowed.contains("'system:serviceaccount:platform-etcd:etcd-operator'"),
        "{allowed}"
    );
    assert!(
        find(
            &objects,
            "ValidatingAdmissionPolicyBinding",
            "etcd-operator-protect-members"
        )
        .is_some()
    );
    let off = helm.template(&["--set", "protection.enabled=false"]);
    assert!(
        !off.iter()
            .any(|o| kind_name(o).0.starts_with("ValidatingAdmissionPolicy")),
        "protection.enabled=false leaves the policy out"
    );
}

#[test]
fn crds_and_the_leader_role_can_be_left_out() {
    let helm = Helm::new(None);
    let objects = helm.template(&[
        "--set",
        "crds.install=false",
        "--set",
        "leaderElection.enabled=false",
    ]);
    let kinds: Vec<String> = objects.iter().map(|o| kind_name(o).0).collect();
    assert!(
        !kinds.iter().any(|k| k == "CustomResourceDefinition"),
        "{kinds:?}"
    );
    assert!(
        !kinds.iter().any(|k| k == "Role" || k == "RoleBinding"),
        "{kinds:?}"
    );
    assert!(kinds.iter().any(|k| k == "ClusterRole"), "{kinds:?}");
    let set = flags(&container_args(&deployment(&objects)));
    assert_eq!(set["leader-elect"], "false");
    // The defaults do render both.
    let defaults: Vec<String> = helm.template(&[]).iter().map(|o| kind_name(o).0).collect();
    assert!(defaults.iter().any(|k| k == "CustomResourceDefinition"));
    assert!(defaults.iter().any(|k| k == "Role"));
}

/// The monitoring objects: none by default (the default render is `deploy/`, checked above);
/// enabled, a PrometheusRule carrying the rules of `deploy/prometheus/alerts.yaml` with
/// EtcdMemberDown waiting the repair grace (and passing `promtool check` and the rules' unit
/// tests as rendered), a ServiceMonitor and a PodMonitor whose selectors match the metrics
/// Service and the etcd Pods, the dashboard ConfigMap carrying `deploy/grafana/`'s JSON.
#[test]
fn monitoring_objects_render_when_enabled() {
    let helm = Helm::new(None);
    let defaults: Vec<(String, String)> = helm.template(&[]).iter().map(kind_name).collect();
    for kind in [
        "ServiceMonitor",
        "PodMonitor",
        "PrometheusRule",
        "ConfigMap",
    ] {
        assert!(
            !defaults.iter().any(|(k, _)| k == kind),
            "{kind} rendered by default"
        );
    }
    let values = helm.values(
        "monitoring.yaml",
        "serviceMonitor: {enabled: true, labels: {release: kps}, interval: 15s}\n\
         prometheusRule: {enabled: true, labels: {release: kps}}\n\
         dashboard: {enabled: true, namespace: grafana}\n\
         repair: {notReadyGraceSeconds: 45, backoffSeconds: 10}\n",
    );
    let objects = helm.template(&["--values", &values]);

    // The PrometheusRule: deploy/prometheus/alerts.yaml but EtcdMemberDown's `for`.
    let rule = find(&objects, "PrometheusRule", "etcd-operator").expect("a PrometheusRule");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["metadata"]["labels"]["release"], "kps");
    let plain_path = repo_root().join("deploy/prometheus/alerts.yaml");
    let mut expected: Value = serde_yaml::from_str(&read(&plain_path)).unwrap();
    for group in expected["groups"].as_sequence_mut().unwrap() {
        for r in group["rules"].as_sequence_mut().unwrap() {
            if r["alert"] == "EtcdMemberDown" {
                r["for"] = Value::from("45s");
            }
        }
    }
    assert!(
        rule["spec"] == expected,
        "the PrometheusRule's spec: {:?}",
        rule["spec"]
    );
    // As rendered, the rules pass promtool and (with the default grace) their unit tests.
    let dir = tempfile::tempdir().unwrap();
    let default_rule = helm.template(&["--set", "prometheusRule.enabled=true"]);
    let default_rule = find(&default_rule, "PrometheusRule", "etcd-operator").unwrap();
    let rendered = dir.path().join("rendered.yaml");
    std::fs::write(
        &rendered,
        serde_yaml::to_string(&default_rule["spec"]).unwrap(),
    )
    .unwrap();
    let tests = read(&repo_root().join("deploy/prometheus/tests/alerts_test.yaml"))
        .replace("  - ../alerts.yaml", "  - rendered.yaml");
    std::fs::write(dir.path().join("tests.yaml"), tests).unwrap();
    for args in [
        &["check", "rules", "rendered.yaml"][..],
        &["test", "rules", "tests.yaml"],
    ] {
        let output = Command::new("promtool")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("running promtool (scripts/install-deps.sh installs prometheus)");
        assert!(
            output.status.success(),
            "promtool {args:?} on the chart's rules:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    // The ServiceMonitor selects the metrics Service by its labels and port name.
    let monitor = find(&objects, "ServiceMonitor", "etcd-operator").expect("a ServiceMonitor");
    let service: Service = typed(find(&objects, "Service", "etcd-operator-metrics").unwrap());
    let service_labels = service.metadata.labels.clone().unwrap_or_default();
    for (key, value) in monitor["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .unwrap()
    {
        assert_eq!(
            service_labels
                .get(key.as_str().unwrap())
                .map(String::as_str),
            value.as_str()
        );
    }
    let port = monitor["spec"]["endpoints"][0]["port"].as_str().unwrap();
    assert!(
        service
            .spec
            .unwrap()
            .ports
            .unwrap()
            .iter()
            .any(|p| p.name.as_deref() == Some(port)),
        "the Service has no port {port}"
    );
    assert_eq!(monitor["spec"]["endpoints"][0]["interval"], "15s");
    assert_eq!(monitor["metadata"]["labels"]["release"], "kps");

    // The PodMonitor selects etcd member Pods (their labels as the operator builds them).
    let pods = find(&objects, "PodMonitor", "etcd-operator-etcd-members").expect("a PodMonitor");
    let member_labels = etcd_operator_api::labels::member_labels("etcd", "etcd-0");
    for (key, value) in pods["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .unwrap()
    {
        assert_eq!(
            member_labels.get(key.as_str().unwrap()).map(String::as_str),
            value.as_str(),
            "{key:?}"
        );
    }
    let cluster_label = format!(
        "__meta_kubernetes_pod_label_{}",
        etcd_operator_api::labels::CLUSTER.replace(['.', '/', '-'], "_")
    );
    assert_eq!(
        pods["spec"]["podMetricsEndpoints"][0]["relabelings"][0]["sourceLabels"][0],
        cluster_label.as_str()
    );
    let no_pods = helm.template(&[
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "serviceMonitor.etcdPods=false",
    ]);
    assert!(find(&no_pods, "PodMonitor", "etcd-operator-etcd-members").is_none());

    // The dashboard ConfigMap, in the namespace asked for, with Grafana's sidecar label.
    let dashboard = find(&objects, "ConfigMap", "etcd-operator-dashboard").expect("a ConfigMap");
    assert_eq!(dashboard["metadata"]["namespace"], "grafana");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let json: serde_json::Value =
        serde_json::from_str(dashboard["data"]["etcd-operator.json"].as_str().unwrap()).unwrap();
    let plain: serde_json::Value = serde_json::from_str(&read(
        &repo_root().join("deploy/grafana/etcd-operator.json"),
    ))
    .unwrap();
    assert_eq!(json, plain);
}

// --- Against a sandbox. --------------------------------------------------------------------

/// A sandbox with 3 nodes and no CRDs (the chart brings them), the operator's two image names
/// mapped to a private copy of the binary this build made.
async fn start_sandbox() -> TestSandbox {
    start_sandbox_on(support::control_plane()).await
}

/// [`start_sandbox`] on `control_plane`.
async fn start_sandbox_on(control_plane: kube_sandbox::ControlPlane) -> TestSandbox {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("temporary directory");
    let binary = dir.path().join("etcd-operator");
    std::fs::copy(env!("CARGO_BIN_EXE_etcd-operator"), &binary).expect("copying the operator");
    let mut yaml = String::from("images:\n");
    for image in [OPERATOR_IMAGE, OTHER_IMAGE] {
        yaml.push_str(&format!(
            "  - image: \"{image}:*\"\n    entrypoint: [/usr/local/bin/etcd-operator]\n    files:\n      /usr/local/bin/etcd-operator: {}\n",
            binary.display()
        ));
    }
    let images = ImageMap::from_yaml(&yaml, Path::new("/")).expect("the image map");
    let options = SandboxOptions::cluster(dir.path())
        .nodes(3)
        .images(images)
        .control_plane(control_plane);
    let sandbox = Sandbox::start(options)
        .await
        .expect("the sandbox starts (the helm install tests run as root)");
    TestSandbox {
        sandbox: Arc::new(sandbox),
        dir,
    }
}

async fn operator_pods(client: &Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels("app.kubernetes.io/name=etcd-operator"))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

async fn operator_logs(client: &Client) -> String {
    let api = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let mut text = String::new();
    for pod in operator_pods(client).await {
        let name = pod.metadata.name.unwrap_or_default();
        let params = LogParams {
            tail_lines: Some(40),
            ..Default::default()
        };
        let log = api.logs(&name, &params).await.unwrap_or_default();
        text.push_str(&format!("--- {name} ---\n{log}\n"));
    }
    text
}

/// Waits until exactly `replicas` operator Pods, all running `image`, are Ready.
async fn wait_operator(client: &Client, replicas: usize, image: &str) -> Vec<Pod> {
    eventually(
        &format!("{replicas} ready operator Pods running {image}"),
        LIMIT,
        || async {
            let pods = operator_pods(client).await;
            let image_of = |p: &Pod| {
                p.spec.as_ref().unwrap().containers[0]
                    .image
                    .clone()
                    .unwrap_or_default()
            };
            if pods.len() == replicas && pods.iter().all(|p| pod_ready(p) && image_of(p) == image) {
                Ok(pods)
            } else {
                Err(format!(
                    "{:?}",
                    pods.iter()
                        .map(|p| (&p.metadata.name, image_of(p), pod_ready(p)))
                        .collect::<Vec<_>>()
                ))
            }
        },
    )
    .await
}

fn etcdctl(sandbox: &TestSandbox, endpoint: &str, args: &[&str]) -> Result<String, String> {
    let output = sandbox
        .network()
        .expect("a cluster network")
        .command(ETCDCTL)
        .map_err(|e| e.to_string())?
        .arg(format!("--endpoints={endpoint}"))
        .arg("--command-timeout=5s")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// Waits until the EtcdCluster is Available with `replicas` ready members and etcd, through
/// the client Service, lists that many voting members.
async fn wait_available(sandbox: &TestSandbox, namespace: &str, name: &str, replicas: i32) {
    let client = sandbox.client();
    eventually(
        &format!("{namespace}/{name} Available with {replicas} members"),
        LIMIT,
        || async {
            let cluster = get_cluster(&client, namespace, name).await;
            if let Err(why) = available(&cluster, replicas) {
                return Err(format!("{why}\n{}", operator_logs(&client).await));
            }
            let endpoint = client_endpoint(namespace, name);
            let list = etcdctl(sandbox, &endpoint, &["member", "list", "-w", "json"])?;
            let list: serde_json::Value =
                serde_json::from_str(&list).map_err(|e| format!("{e}: {list}"))?;
            let voters = list["members"]
                .as_array()
                .map(|m| {
                    m.iter()
                        .filter(|m| m["isLearner"].as_bool() != Some(true))
                        .count()
                })
                .unwrap_or(0);
            if voters == replicas as usize {
                Ok(())
            } else {
                Err(format!("etcd lists {list}"))
            }
        },
    )
    .await;
}

fn put(sandbox: &TestSandbox, namespace: &str, name: &str, key: &str, value: &str) {
    let out = etcdctl(
        sandbox,
        &client_endpoint(namespace, name),
        &["put", key, value],
    )
    .unwrap_or_else(|e| panic!("put {key} into {namespace}/{name}: {e}"));
    assert!(out.contains("OK"), "{out}");
}

fn get(sandbox: &TestSandbox, namespace: &str, name: &str, key: &str) -> String {
    etcdctl(
        sandbox,
        &client_endpoint(namespace, name),
        &["get", key, "--print-value-only"],
    )
    .unwrap_or_else(|e| panic!("get {key} from {namespace}/{name}: {e}"))
    .trim_end()
    .to_string()
}

/// The release's Secrets (helm's storage), as `(name, status label)`, sorted.
async fn release_secrets(client: &Client) -> Vec<(String, String)> {
    let list = Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels(&format!("owner=helm,name={RELEASE}")))
        .await
        .expect("listing Secrets");
    let mut secrets: Vec<(String, String)> = list
        .items
        .iter()
        .map(|s| {
            assert_eq!(s.type_.as_deref(), Some("helm.sh/release.v1"));
            (
                s.metadata.name.clone().unwrap_or_default(),
                s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("status"))
                    .cloned()
                    .unwrap_or_default(),
            )
        })
        .collect();
    secrets.sort();
    secrets
}

async fn crds(client: &Client) -> Vec<CustomResourceDefinition> {
    Api::<CustomResourceDefinition>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("listing CRDs")
        .items
        .into_iter()
        .filter(|c| c.spec.group == "etcd-operator.cozystack.io")
        .collect()
}

fn timed(what: &str, started: Instant) {
    eprintln!(
        "helm e2e: {what} after {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn helm_install_upgrade_rollback_and_uninstall_on_a_sandbox() {
    let started = Instant::now();
    let sandbox = start_sandbox().await;
    let client = sandbox.client();
    let helm = Helm::new(Some(sandbox.kubeconfig_path()));
    let chart = chart();
    let chart = chart.to_str().unwrap();
    let default_image = format!("{OPERATOR_IMAGE}:v{}", env!("CARGO_PKG_VERSION"));
    timed("sandbox up", started);

    // 1. helm install with the default values: CRDs, RBAC, the operator; a 1-member cluster.
    let out = helm.ok(&[
        "install",
        RELEASE,
        chart,
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        WAIT,
        "--timeout",
        "3m",
    ]);
    assert!(out.contains("STATUS: deployed"), "{out}");
    timed("helm install", started);
    assert_eq!(
        release_secrets(&client).await,
        vec![(
            format!("sh.helm.release.v1.{RELEASE}.v1"),
            "deployed".into()
        )]
    );
    let installed = crds(&client).await;
    assert_eq!(installed.len(), plain_objects("crds").len());
    for crd in &installed {
        let annotations = crd.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.get(KEEP).map(String::as_str), Some("keep"));
        assert_eq!(
            annotations
                .get("meta.helm.sh/release-name")
                .map(String::as_str),
            Some(RELEASE)
        );
    }
    let pods = wait_operator(&client, 1, &default_image).await;
    let pod_spec = pods[0].spec.clone().unwrap();
    assert_eq!(
        pod_spec.security_context.unwrap().run_as_non_root,
        Some(true)
    );
    let listed = helm.ok(&["list", "--namespace", NAMESPACE, "--output", "json"]);
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["name"], RELEASE);
    assert_eq!(listed[0]["status"], "deployed");

    create_namespace(&client, "team-a").await;
    create_namespace(&client, "team-b").await;
    let (ok, _, stderr) = support::kubectl_with_stdin(
        &sandbox,
        &["apply", "-f", "-"],
        Some(&cluster_yaml("etcd", "team-a", 1, "")),
    );
    assert!(ok, "kubectl apply: {stderr}");
    wait_available(&sandbox, "team-a", "etcd", 1).await;
    put(&sandbox, "team-a", "etcd", "installed-by", "helm");
    timed("team-a/etcd Available (1 member)", started);

    // 2. helm upgrade: another image, two replicas on a tainted node picked by a label, text
    // logs at debug, team-a watched alone.
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let ops_node = nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .max()
        .expect("a node");
    for args in [
        vec!["label", "node", &ops_node, "example.com/pool=operators"],
        vec!["taint", "node", &ops_node, "dedicated=operators:NoSchedule"],
    ] {
        let (ok, _, stderr) = kubectl(&sandbox, &args);
        assert!(ok, "kubectl {args:?}: {stderr}");
    }
    let values = helm.values(
        "upgrade.yaml",
        &format!(
            r#"
image: {{repository: {OTHER_IMAGE}, tag: upgraded, pullPolicy: Always}}
replicas: 2
watchNamespace: team-a
logFormat: text
logLevel: etcd_operator=debug,info
nodeSelector: {{example.com/pool: operators}}
tolerations: [{{key: dedicated, operator: Equal, value: operators, effect: NoSchedule}}]
podLabels: {{team: platform}}
resources: {{requests: {{cpu: 10m, memory: 32Mi}}, limits: {{memory: 128Mi}}}}
"#
        ),
    );
    let out = helm.ok(&[
        "upgrade",
        RELEASE,
        chart,
        "--namespace",
        NAMESPACE,
        "--values",
        &values,
        WAIT,
        "--timeout",
        "3m",
    ]);
    assert!(out.contains("REVISION: 2"), "{out}");
    timed("helm upgrade", started);
    let new_image = format!("{OTHER_IMAGE}:upgraded");
    let pods = wait_operator(&client, 2, &new_image).await;
    for pod in &pods {
        let spec = pod.spec.clone().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some(ops_node.as_str()));
        assert_eq!(
            spec.containers[0].image_pull_policy.as_deref(),
            Some("Always")
        );
        assert_eq!(
            pod.metadata
                .labels
                .as_ref()
                .unwrap()
                .get("team")
                .map(String::as_str),
            Some("platform")
        );
    }
    assert_eq!(
        release_secrets(&client).await,
        vec![
            (
                format!("sh.helm.release.v1.{RELEASE}.v1"),
                "superseded".into()
            ),
            (
                format!("sh.helm.release.v1.{RELEASE}.v2"),
                "deployed".into()
            ),
        ]
    );
    // metricsPort is not changed here: the sandbox's server-side apply keeps the old
    // container and Service port beside the new one (a list-map key whose `protocol` is
    // defaulted, see docs/helm.md), so the new Pods' probes would hit the old port.

    // The upgraded operator scales team-a to 3 and leaves team-b alone.
    let (ok, _, stderr) = support::kubectl_with_stdin(
        &sandbox,
        &["apply", "-f", "-"],
        Some(&cluster_yaml("etcd", "team-b", 1, "")),
    );
    assert!(ok, "kubectl apply: {stderr}");
    let (ok, _, stderr) = kubectl(
        &sandbox,
        &["-n", "team-a", "scale", "etcdcluster/etcd", "--replicas=3"],
    );
    assert!(ok, "kubectl scale: {stderr}");
    wait_available(&sandbox, "team-a", "etcd", 3).await;
    assert_eq!(get(&sandbox, "team-a", "etcd", "installed-by"), "helm");
    timed("team-a/etcd scaled to 3 by the upgraded operator", started);
    let team_b = get_cluster(&client, "team-b", "etcd").await;
    assert!(
        team_b.status.is_none() && team_b.metadata.finalizers.is_none(),
        "the operator watching team-a only touched team-b: {:?}",
        team_b.status
    );
    // Text logs at debug level: no JSON line, and debug lines present.
    let logs = operator_logs(&client).await;
    let lines: Vec<&str> = logs
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("--- "))
        .collect();
    assert!(!lines.is_empty(), "{logs}");
    assert!(
        lines.iter().all(|l| !l.starts_with('{')),
        "JSON logs: {logs}"
    );
    assert!(
        lines.iter().any(|l| l.contains("DEBUG")),
        "no debug lines: {logs}"
    );

    // 3. helm rollback to the first revision: the default image, one replica watching every
    // namespace again, which takes up team-b.
    let out = helm.ok(&[
        "rollback",
        RELEASE,
        "1",
        "--namespace",
        NAMESPACE,
        WAIT,
        "--timeout",
        "3m",
    ]);
    assert!(out.contains("Rollback was a success"), "{out}");
    timed("helm rollback", started);
    wait_operator(&client, 1, &default_image).await;
    wait_available(&sandbox, "team-b", "etcd", 1).await;
    timed(
        "team-b/etcd Available under the rolled-back operator",
        started,
    );
    assert_eq!(
        release_secrets(&client).await,
        vec![
            (
                format!("sh.helm.release.v1.{RELEASE}.v1"),
                "superseded".into()
            ),
            (
                format!("sh.helm.release.v1.{RELEASE}.v2"),
                "superseded".into()
            ),
            (
                format!("sh.helm.release.v1.{RELEASE}.v3"),
                "deployed".into()
            ),
        ]
    );

    // 4. helm uninstall: the operator, its RBAC and the release's history go (helm deletes
    // its Secrets with a protobuf DeleteOptions body); the CRDs (kept) and the clusters stay.
    let out = helm.ok(&[
        "uninstall",
        RELEASE,
        "--namespace",
        NAMESPACE,
        WAIT,
        "--timeout",
        "3m",
    ]);
    assert!(out.contains("uninstalled"), "{out}");
    timed("helm uninstall", started);
    eventually("the release's objects to be gone", LIMIT, || async {
        let deployment = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
            .get_opt("etcd-operator")
            .await
            .map_err(|e| e.to_string())?;
        let account = Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
            .get_opt("etcd-operator")
            .await
            .map_err(|e| e.to_string())?;
        let role = Api::<ClusterRole>::all(client.clone())
            .get_opt("etcd-operator")
            .await
            .map_err(|e| e.to_string())?;
        let lease_role = Api::<Role>::namespaced(client.clone(), NAMESPACE)
            .get_opt("etcd-operator-leader-election")
            .await
            .map_err(|e| e.to_string())?;
        let pods = operator_pods(&client).await;
        if deployment.is_none()
            && account.is_none()
            && role.is_none()
            && lease_role.is_none()
            && pods.is_empty()
        {
            Ok(())
        } else {
            Err(format!(
                "deployment {}, account {}, cluster role {}, lease role {}, {} pods",
                deployment.is_some(),
                account.is_some(),
                role.is_some(),
                lease_role.is_some(),
                pods.len()
            ))
        }
    })
    .await;
    assert_eq!(release_secrets(&client).await, vec![]);
    let status = helm.run(&["status", RELEASE, "--namespace", NAMESPACE]);
    assert!(
        !status.ok && status.stderr.contains("not found"),
        "no release left: {} {}",
        status.stdout,
        status.stderr
    );
    assert_eq!(crds(&client).await.len(), plain_objects("crds").len());
    assert!(
        Api::<EtcdCluster>::namespaced(client.clone(), "team-a")
            .get_opt("etcd")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(get(&sandbox, "team-a", "etcd", "installed-by"), "helm");

    // 5. helm install again, leaving the (kept) CRDs out of the release: the operator, watching
    // every namespace, takes up a new cluster in team-c and keeps the others.
    let out = helm.ok(&[
        "install",
        RELEASE,
        chart,
        "--namespace",
        NAMESPACE,
        "--set",
        "crds.install=false",
        WAIT,
        "--timeout",
        "3m",
    ]);
    assert!(out.contains("STATUS: deployed"), "{out}");
    timed("helm install --set crds.install=false", started);
    let manifest = helm.ok(&["get", "manifest", RELEASE, "--namespace", NAMESPACE]);
    assert!(
        !manifest.contains("kind: CustomResourceDefinition"),
        "{manifest}"
    );
    assert!(manifest.contains("kind: Deployment"), "{manifest}");
    wait_operator(&client, 1, &default_image).await;
    create_namespace(&client, "team-c").await;
    let (ok, _, stderr) = support::kubectl_with_stdin(
        &sandbox,
        &["apply", "-f", "-"],
        Some(&cluster_yaml("etcd", "team-c", 1, "")),
    );
    assert!(ok, "kubectl apply: {stderr}");
    wait_available(&sandbox, "team-c", "etcd", 1).await;
    wait_available(&sandbox, "team-b", "etcd", 1).await;
    wait_available(&sandbox, "team-a", "etcd", 3).await;
    assert_eq!(get(&sandbox, "team-a", "etcd", "installed-by"), "helm");
    timed(
        "team-c/etcd Available under the reinstalled operator",
        started,
    );
}

/// The chart of the previous version, as released: `tests/fixtures/chart-<version>/`, the
/// chart directory as it stood before the commit that brought the current version (a fixture
/// rather than `git archive`, so the test needs no history: CI may clone shallow). Copied into
/// `dir`; returns its path and its version. When the chart's version is bumped, the fixture is
/// replaced by the chart as it was before the bump.
fn previous_chart(dir: &Path) -> (PathBuf, String) {
    let version_of = |chart_yaml: &str| -> String {
        let chart: Value = serde_yaml::from_str(chart_yaml).expect("Chart.yaml parses");
        chart["version"].as_str().expect("a version").to_string()
    };
    let current = version_of(&read(&chart().join("Chart.yaml")));
    let fixtures = repo_root().join("crates/operator/tests/fixtures");
    let mut previous: Vec<PathBuf> = std::fs::read_dir(&fixtures)
        .expect("crates/operator/tests/fixtures")
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("chart-"))
        })
        .collect();
    assert_eq!(
        previous.len(),
        1,
        "exactly one previous chart in {}: {previous:?}",
        fixtures.display()
    );
    let source = previous.remove(0);
    let version = version_of(&read(&source.join("Chart.yaml")));
    assert_ne!(
        version,
        current,
        "{} has the current chart version {current}: it must be the previous release",
        source.display()
    );
    let target = dir.join("etcd-operator");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(&source)
        .arg(&target)
        .status()
        .expect("cp");
    assert!(copied.success(), "copying {}", source.display());
    eprintln!(
        "helm e2e: the previous chart is {version}, from {}",
        source.display()
    );
    (target, version)
}

/// What "untouched" compares: each etcd Pod's UID and restart count, each EtcdMember's member
/// ID and resourceVersion, by name.
async fn etcd_fingerprint(
    client: &Client,
    namespace: &str,
) -> BTreeMap<String, (String, i32, String, String)> {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&etcd_operator_api::labels::cluster_selector("etcd")))
        .await
        .expect("listing Pods")
        .items;
    let members = support::members(client, namespace, "etcd").await;
    members
        .iter()
        .map(|m| {
            let name = m.metadata.name.clone().unwrap_or_default();
            let pod = pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name.as_str()));
            let uid = pod.and_then(|p| p.metadata.uid.clone()).unwrap_or_default();
            let restarts = pod
                .and_then(|p| p.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .map(|c| c.iter().map(|c| c.restart_count).sum())
                .unwrap_or(-1);
            let id = m
                .status
                .as_ref()
                .and_then(|s| s.member_id.clone())
                .unwrap_or_default();
            let rv = m.metadata.resource_version.clone().unwrap_or_default();
            (name, (uid, restarts, id, rv))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn helm_upgrade_from_the_previous_chart_version_leaves_running_clusters_untouched() {
    let started = Instant::now();
    let sandbox = start_sandbox().await;
    let client = sandbox.client();
    let helm = Helm::new(Some(sandbox.kubeconfig_path()));
    let old_dir = tempfile::tempdir().expect("a temporary directory");
    let (old_chart, old_version) = previous_chart(old_dir.path());
    let current_version = {
        let chart: Value = serde_yaml::from_str(&read(&chart().join("Chart.yaml"))).unwrap();
        chart["version"].as_str().unwrap().to_string()
    };
    let default_image = format!("{OPERATOR_IMAGE}:v{}", env!("CARGO_PKG_VERSION"));
    timed("sandbox up", started);

    // The previous chart, and a 3-member cluster it reconciles.
    let out = helm.ok(&[
        "install",
        RELEASE,
        old_chart.to_str().unwrap(),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        WAIT,
        "--timeout",
        "3m",
    ]);
    assert!(out.contains("STATUS: deployed"), "{out}");
    let old_operator = wait_operator(&client, 1, &default_image).await;
    create_namespace(&client, "prev").await;
    let (ok, _, stderr) = support::kubectl_with_stdin(
        &sandbox,
        &["apply", "-f", "-"],
        Some(&cluster_yaml("etcd", "prev", 3, "")),
    );
    assert!(ok, "kubectl apply: {stderr}");
    wait_available(&sandbox, "prev", "etcd", 3).await;
    put(&sandbox, "prev", "etcd", "written-under", &old_version);
    timed("prev/etcd Available under the previous chart", started);
    // At rest: nothing changes any more.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = etcd_fingerprint(&client, "prev").await;
    assert_eq!(before.len(), 3, "{before:?}");
    let etcd_ids_before = {
        let list = etcdctl(
            &sandbox,
            &client_endpoint("prev", "etcd"),
            &["member", "list", "-w", "json"],
        )
        .unwrap();
        let list: serde_json::Value = serde_json::from_str(&list).unwrap();
        let mut ids: Vec<u64> = list["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["ID"].as_u64().unwrap())
            .collect();
        ids.sort();
        ids
    };

    // helm upgrade to the current chart (a pod label makes the Deployment roll, so a new
    // operator Pod takes over from the old one while the cluster runs).
    let out = helm.ok(&[
        "upgrade",
        RELEASE,
        chart().to_str().unwrap(),
        "--namespace",
        NAMESPACE,
        "--set",
        &format!("podLabels.chart-version={current_version}"),
        WAIT,
        "--timeout",
        "3m",
    ]);
    assert!(out.contains("REVISION: 2"), "{out}");
    timed("helm upgrade to the current chart", started);
    let listed = helm.ok(&["list", "--namespace", NAMESPACE, "--output", "json"]);
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(
        listed[0]["chart"],
        format!("etcd-operator-{current_version}"),
        "{listed}"
    );
    let new_operator = wait_operator(&client, 1, &default_image).await;
    assert_ne!(
        new_operator[0].metadata.uid, old_operator[0].metadata.uid,
        "a new operator Pod runs"
    );
    let crd = crds(&client)
        .await
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some("etcdclusters.etcd-operator.cozystack.io"))
        .expect("the EtcdCluster CRD");
    assert_eq!(
        crd.metadata
            .annotations
            .unwrap_or_default()
            .get("meta.helm.sh/release-name")
            .map(String::as_str),
        Some(RELEASE),
        "the CRDs stay in the release"
    );

    // The new operator looks at the cluster (it is leading and ready) and leaves it as it is.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let after = etcd_fingerprint(&client, "prev").await;
    assert_eq!(
        after, before,
        "(Pod UID, restarts, member ID, EtcdMember resourceVersion) by member"
    );
    let etcd_ids_after = {
        let list = etcdctl(
            &sandbox,
            &client_endpoint("prev", "etcd"),
            &["member", "list", "-w", "json"],
        )
        .unwrap();
        let list: serde_json::Value = serde_json::from_str(&list).unwrap();
        let mut ids: Vec<u64> = list["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["ID"].as_u64().unwrap())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(etcd_ids_after, etcd_ids_before);
    assert_eq!(get(&sandbox, "prev", "etcd", "written-under"), old_version);

    // The operator of the new chart reconciles: a scale to 5 keeps the three members.
    let (ok, _, stderr) = kubectl(
        &sandbox,
        &["-n", "prev", "scale", "etcdcluster/etcd", "--replicas=5"],
    );
    assert!(ok, "kubectl scale: {stderr}");
    wait_available(&sandbox, "prev", "etcd", 5).await;
    let scaled = etcd_fingerprint(&client, "prev").await;
    for (name, (uid, _, id, _)) in &before {
        let (now_uid, _, now_id, _) = &scaled[name];
        assert_eq!(
            (now_uid, now_id),
            (uid, id),
            "{name} untouched by the scale"
        );
    }
    assert_eq!(get(&sandbox, "prev", "etcd", "written-under"), old_version);
    timed("prev/etcd scaled to 5 by the new chart's operator", started);
}

/// The chart, our CRDs and a cluster's life on the Kubernetes release before the one the
/// suite runs on: `helm install` (the CRDs from the chart), a 3-member cluster Available and
/// scaled to 1, `helm uninstall` leaving the CRDs and the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn helm_install_a_cluster_and_uninstall_on_the_previous_kubernetes_release() {
    use kube_sandbox::kubernetes::{KubernetesOptions, PREVIOUS_KUBERNETES_VERSION};
    let sandbox = start_sandbox_on(kube_sandbox::ControlPlane::Kubernetes(
        KubernetesOptions::release(PREVIOUS_KUBERNETES_VERSION),
    ))
    .await;
    let client = sandbox.client();
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(
        version.git_version,
        format!("v{PREVIOUS_KUBERNETES_VERSION}")
    );
    let helm = Helm::new(Some(sandbox.kubeconfig_path()));
    let chart = chart();
    let out = helm.ok(&[
        "install",
        RELEASE,
        chart.to_str().unwrap(),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--wait",
        "--timeout",
        "3m",
    ]);
    assert!(out.contains("STATUS: deployed"), "{out}");
    assert_eq!(crds(&client).await.len(), plain_objects("crds").len());
    create_namespace(&client, "team").await;
    let (ok, _, stderr) = support::kubectl_with_stdin(
        &sandbox,
        &["apply", "-f", "-"],
        Some(&cluster_yaml("etcd", "team", 3, "")),
    );
    assert!(ok, "kubectl apply: {stderr}");
    wait_available(&sandbox, "team", "etcd", 3).await;
    put(&sandbox, "team", "etcd", "on", PREVIOUS_KUBERNETES_VERSION);
    let (ok, _, stderr) = kubectl(
        &sandbox,
        &["-n", "team", "scale", "etcdcluster/etcd", "--replicas=1"],
    );
    assert!(ok, "kubectl scale: {stderr}");
    wait_available(&sandbox, "team", "etcd", 1).await;
    assert_eq!(
        get(&sandbox, "team", "etcd", "on"),
        PREVIOUS_KUBERNETES_VERSION
    );
    let out = helm.ok(&["uninstall", RELEASE, "--namespace", NAMESPACE, "--wait"]);
    assert!(out.contains("uninstalled"), "{out}");
    assert_eq!(release_secrets(&client).await, vec![]);
    assert_eq!(crds(&client).await.len(), plain_objects("crds").len());
    assert!(
        Api::<EtcdCluster>::namespaced(client.clone(), "team")
            .get_opt("etcd")
            .await
            .unwrap()
            .is_some()
    );
}
