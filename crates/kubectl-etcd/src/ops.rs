//! The commands added for day-2 work beyond the operator's own view: `promote-member`,
//! `hashkv` (are the members' keyspaces the same?), `check perf`, `certificate` (a client
//! certificate from an operator-issued CA), `report` (what a support request needs, no
//! secrets), and `recover-quorum --wait`.
//!
//! They reach etcd exactly as the rest of the plugin does: through `pods/portforward` to the
//! member Pods, with the cluster's own TLS material and credentials.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use etcd_operator::etcd::{member_id_hex, parse_member_id};
use etcd_operator_api::EtcdCluster;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Event, Pod, Secret};
use kube::api::{Api, ListParams, LogParams, PostParams};
use serde_json::{Value, json};

use crate::output::{Printed, Table};
use crate::session::{Session, Usage};

/// A raw etcd client of exactly one member (HashKV and Put are not in the operator's client),
/// through its port-forward, with the cluster's TLS and credentials.
async fn member_client(
    session: &Session,
    member: &str,
    timeout: Duration,
) -> anyhow::Result<etcd_client::Client> {
    let url = session.local_url(member)?.to_string();
    let access = &session.observed.security.access;
    let mut endpoint = tonic::transport::Endpoint::from_shared(url.clone())
        .map_err(|e| anyhow!("{url}: {e}"))?
        .connect_timeout(Duration::from_secs(5))
        .timeout(timeout);
    if let Some(tls) = access.tls_options() {
        endpoint = endpoint
            .tls_config(tls)
            .map_err(|e| anyhow!("TLS configuration for {member}: {e}"))?;
    }
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| anyhow!("connecting to {member}: {e}"))?;
    let mut options = etcd_client::ConnectOptions::new().with_timeout(timeout);
    if let Some((user, password)) = &access.credentials {
        options = options.with_user(user.clone(), password.clone());
    }
    etcd_client::Client::from_channel(etcd_client::Channel::Tonic(channel), Some(options))
        .await
        .map_err(|e| anyhow!("connecting to {member}: {e}"))
}

fn member_names(session: &Session) -> Vec<String> {
    session
        .observed
        .members
        .iter()
        .filter_map(|m| m.member.metadata.name.clone())
        .collect()
}

/// `promote-member`: a learner (by EtcdMember name or hex ID) promoted to voter. etcd refuses a
/// learner that has not caught up with the leader ("can only promote a learner member which
/// is in sync with leader"); the operator promotes learners by itself, so this is for a member
/// added by hand or a promotion you do not want to wait for.
pub async fn promote_member(session: &Session, member: &str) -> anyhow::Result<Printed> {
    let list = session.observed.etcd.member_list();
    let found = list
        .iter()
        .find(|m| m.name == member)
        .or_else(|| parse_member_id(member).and_then(|id| list.iter().find(|m| m.id == id)))
        .ok_or_else(|| {
            Usage(format!(
                "etcd has no member named or numbered {member}; see `kubectl etcdop members`"
            ))
        })?;
    if !found.is_learner {
        bail!(Usage(format!(
            "member {member} ({}) is a voter already; only learners are promoted",
            member_id_hex(found.id)
        )));
    }
    let id = found.id;
    let client = session.etcd().await?;
    let members = client.member_promote(id).await.map_err(|e| {
        anyhow!(
            "promoting {member} ({}): {e}; a learner is promoted only once it has caught up with the leader: try again in a moment",
            member_id_hex(id)
        )
    })?;
    let voters = members.iter().filter(|m| !m.is_learner).count();
    Ok(Printed {
        value: json!({"promoted": member_id_hex(id), "name": member, "voters": voters}),
        table: None,
        lines: vec![format!(
            "promoted {member} ({}) to voter; the cluster has {voters} voter(s)",
            member_id_hex(id)
        )],
        code: 0,
    })
}

/// `hashkv`: every member's hash of its keyspace at one revision every member has applied
/// (the lowest current revision among them, or `revision`). Equal hashes mean the same keys,
/// values and revisions; a member that differs holds other data than the others (exit code 5).
pub async fn hashkv(session: &Session, revision: Option<i64>) -> anyhow::Result<Printed> {
    let names = member_names(session);
    let mut clients = Vec::new();
    let mut errors = BTreeMap::new();
    for name in &names {
        match member_client(session, name, Duration::from_secs(30)).await {
            Ok(client) => clients.push((name.clone(), client)),
            Err(e) => {
                errors.insert(name.clone(), e.to_string());
            }
        }
    }
    if clients.is_empty() {
        bail!("no member could be reached: {errors:?}");
    }
    let revision = match revision {
        Some(r) => r,
        None => {
            let mut lowest = i64::MAX;
            for (name, client) in &mut clients {
                let status = client
                    .status()
                    .await
                    .map_err(|e| anyhow!("status of {name}: {e}"))?;
                let current = status.header().map(|h| h.revision()).unwrap_or_default();
                lowest = lowest.min(current);
            }
            lowest
        }
    };
    let mut table = Table::new(&["NAME", "ID", "REVISION", "COMPACTED", "HASH", "ERROR"]);
    let mut rows = Vec::new();
    let mut hashes = BTreeMap::new();
    for (name, client) in &mut clients {
        match client.hash_kv(revision).await {
            Ok(response) => {
                let id = response.header().map(|h| h.member_id()).unwrap_or_default();
                let hash = response.hash();
                let compacted = response.compact_version();
                hashes.insert(name.clone(), hash);
                table.push(vec![
                    name.clone(),
                    member_id_hex(id),
                    revision.to_string(),
                    compacted.to_string(),
                    hash.to_string(),
                    "-".into(),
                ]);
                rows.push(json!({"name": name, "id": member_id_hex(id), "revision": revision, "compactRevision": compacted, "hash": hash}));
            }
            Err(e) => {
                errors.insert(name.clone(), e.to_string());
            }
        }
    }
    for (name, error) in &errors {
        table.push(vec![
            name.clone(),
            "-".into(),
            revision.to_string(),
            "-".into(),
            "-".into(),
            error.clone(),
        ]);
        rows.push(json!({"name": name, "error": error}));
    }
    let distinct: std::collections::BTreeSet<u32> = hashes.values().copied().collect();
    let (verdict, code) = match (distinct.len(), errors.is_empty()) {
        (1, true) => (
            format!(
                "consistent: {} members have the same keyspace at revision {revision}",
                hashes.len()
            ),
            0,
        ),
        (1, false) => (
            format!(
                "the {} members that answered agree at revision {revision}; {} did not answer",
                hashes.len(),
                errors.len()
            ),
            1,
        ),
        _ => (
            format!(
                "INCONSISTENT: the members' keyspaces differ at revision {revision}; a member whose hash differs from the majority's holds other data: replace it (docs/runbooks/corrupt-alarm.md)"
            ),
            5,
        ),
    };
    Ok(Printed {
        value: json!({"revision": revision, "members": rows, "consistent": code == 0}),
        table: Some(table),
        lines: vec![verdict],
        code,
    })
}

/// The loads of `check perf`, as etcdctl's: puts per second to sustain, clients, duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PerfLoad {
    /// 150 puts/s from 50 clients.
    S,
    /// 1000 puts/s from 200 clients.
    M,
    /// 8000 puts/s from 500 clients.
    L,
}

impl PerfLoad {
    fn rate_and_clients(self) -> (u64, usize) {
        match self {
            PerfLoad::S => (150, 50),
            PerfLoad::M => (1000, 200),
            PerfLoad::L => (8000, 500),
        }
    }
}

/// The prefix `check perf` writes under, and deletes afterwards.
pub const PERF_PREFIX: &str = "/etcdop-check-perf/";

/// `check perf`: puts of 1 KiB values at the load's rate for `duration` through the members'
/// port-forwards, then the keys deleted. Passes (exit 0) when at least 90 % of the rate was
/// sustained, the slowest put took under 500 ms and the latencies' standard deviation is
/// under 100 ms (etcdctl's criteria); else exit code 6. The latencies include the API
/// server's port-forward, so a pass is conservative and a failure may be the path, not etcd.
pub async fn check_perf(
    session: &Session,
    load: PerfLoad,
    duration: Duration,
) -> anyhow::Result<Printed> {
    let (rate, clients_count) = load.rate_and_clients();
    let names = member_names(session);
    let mut clients = Vec::new();
    for name in &names {
        if let Ok(client) = member_client(session, name, Duration::from_secs(10)).await {
            clients.push(client);
        }
    }
    if clients.is_empty() {
        bail!("no member could be reached for the check");
    }
    let total = rate * duration.as_secs().max(1);
    let started = Instant::now();
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let value = vec![b'x'; 1024];
    let (sender, receiver) = tokio::sync::mpsc::channel::<u64>(clients_count * 2);
    let receiver = std::sync::Arc::new(tokio::sync::Mutex::new(receiver));
    let mut workers = Vec::new();
    for worker in 0..clients_count {
        let mut client = clients[worker % clients.len()].clone();
        let receiver = receiver.clone();
        let value = value.clone();
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut failures = 0u64;
            loop {
                let next = receiver.lock().await.recv().await;
                let Some(n) = next else { break };
                let key = format!("{PERF_PREFIX}{n:016x}");
                let put = Instant::now();
                match client.put(key, value.clone(), None).await {
                    Ok(_) => latencies.push(put.elapsed().as_secs_f64()),
                    Err(_) => failures += 1,
                }
            }
            (latencies, failures)
        }));
    }
    let deadline = started + duration;
    let mut sent = 0u64;
    while sent < total && Instant::now() < deadline {
        let due = started + interval.mul_f64(sent as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        if sender.send(sent).await.is_err() {
            break;
        }
        sent += 1;
    }
    drop(sender);
    let mut latencies = Vec::new();
    let mut failures = 0;
    for worker in workers {
        let (l, f) = worker.await.context("a put worker")?;
        latencies.extend(l);
        failures += f;
    }
    let elapsed = started.elapsed().as_secs_f64();
    // Clean up what the check wrote.
    let mut cleanup = clients[0].clone();
    let deleted = cleanup
        .delete(
            PERF_PREFIX,
            Some(etcd_client::DeleteOptions::new().with_prefix()),
        )
        .await
        .map(|r| r.deleted())
        .map_err(|e| anyhow!("deleting {PERF_PREFIX}: {e}"))?;
    latencies.sort_by(f64::total_cmp);
    let done = latencies.len() as f64;
    let throughput = done / elapsed;
    let mean = latencies.iter().sum::<f64>() / done.max(1.0);
    let stddev = (latencies.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / done.max(1.0)).sqrt();
    let slowest = latencies.last().copied().unwrap_or_default();
    let p99 = latencies
        .get(((done * 0.99) as usize).min(latencies.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default();
    let checks = [
        (
            throughput >= 0.9 * rate as f64,
            format!(
                "throughput {throughput:.0} puts/s (at least {:.0} wanted)",
                0.9 * rate as f64
            ),
        ),
        (
            slowest < 0.5,
            format!(
                "slowest put {:.0} ms (under 500 ms wanted)",
                slowest * 1000.0
            ),
        ),
        (
            stddev < 0.1,
            format!(
                "latency standard deviation {:.1} ms (under 100 ms wanted)",
                stddev * 1000.0
            ),
        ),
        (failures == 0, format!("{failures} failed put(s)")),
    ];
    let passed = checks.iter().all(|(ok, _)| *ok);
    let mut lines: Vec<String> = checks
        .iter()
        .map(|(ok, what)| format!("{} {what}", if *ok { "PASS" } else { "FAIL" }))
        .collect();
    lines.push(format!(
        "{}: {} puts of 1 KiB in {elapsed:.1} s from {clients_count} clients, p99 {:.1} ms; {deleted} keys under {PERF_PREFIX} deleted. Latencies include the API server's port-forward.",
        if passed { "PASS" } else { "FAIL" },
        latencies.len(),
        p99 * 1000.0
    ));
    Ok(Printed {
        value: json!({
            "load": format!("{load:?}").to_lowercase(), "rate": rate, "clients": clients_count,
            "puts": latencies.len(), "failures": failures, "seconds": elapsed,
            "throughput": throughput, "slowestSeconds": slowest, "stddevSeconds": stddev,
            "p99Seconds": p99, "passed": passed, "deletedKeys": deleted,
        }),
        table: None,
        lines,
        code: if passed { 0 } else { 6 },
    })
}

/// `certificate`: a client certificate signed by the cluster's operator-issued CA (Secret
/// `<cluster>-ca`), ECDSA P-256, usage clientAuth, CN `common_name` (etcd's user name under
/// authentication), valid for `validity` but never past the CA. Written to a Secret of type
/// kubernetes.io/tls (`tls.crt`, `tls.key`, `ca.crt`: the bundle the members trust) or to
/// files in a directory. The operator does not renew it.
pub async fn certificate(
    session: &Session,
    common_name: &str,
    validity: Duration,
    secret: Option<&str>,
    out_dir: Option<&Path>,
) -> anyhow::Result<Printed> {
    use etcd_operator::security::issuer;
    let cluster = &session.observed.cluster;
    let issued = cluster
        .spec
        .tls
        .as_ref()
        .and_then(|t| t.client.as_ref())
        .is_some_and(|c| c.operator_issued.is_some());
    if !issued {
        bail!(Usage(format!(
            "EtcdCluster {} has no operator-issued client TLS (spec.tls.client.operatorIssued); sign client certificates with the CA its Secrets or cert-manager use (docs/connecting-clients.md)",
            session.name
        )));
    }
    if common_name.is_empty() {
        bail!(Usage("--common-name must not be empty".into()));
    }
    let ca_name = issuer::ca_secret_name(&session.name);
    let secrets: Api<Secret> = Api::namespaced(session.client.clone(), &session.namespace);
    let ca_secret = secrets.get(&ca_name).await.with_context(|| {
        format!(
            "reading Secret {}/{ca_name} (the cluster's CA)",
            session.namespace
        )
    })?;
    let ca = issuer::ca_from_secret(&ca_name, &ca_secret).map_err(|e| anyhow!(e))?;
    let trusted = issuer::ca_bundle(&ca_secret).unwrap_or_else(|| ca.cert_pem.clone());

    // The CA as rcgen's issuer: its subject (one CN, as the operator writes it) and its key.
    let mut ca_params = rcgen::CertificateParams::default();
    let mut ca_subject = rcgen::DistinguishedName::new();
    ca_subject.push(
        rcgen::DnType::CommonName,
        issuer::ca_common_name(&session.name, &session.namespace),
    );
    ca_params.distinguished_name = ca_subject;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    let ca_key = rcgen::KeyPair::from_pem(&ca.key_pem).map_err(|e| anyhow!("the CA's key: {e}"))?;
    let signer = rcgen::Issuer::new(ca_params, ca_key);

    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|e| anyhow!("generating a key: {e}"))?;
    let mut params = rcgen::CertificateParams::default();
    let mut subject = rcgen::DistinguishedName::new();
    subject.push(rcgen::DnType::CommonName, common_name);
    params.distinguished_name = subject;
    params.is_ca = rcgen::IsCa::ExplicitNoCa;
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    params.use_authority_key_identifier_extension = true;
    let now = time::OffsetDateTime::now_utc();
    let ca_end = time::OffsetDateTime::from_unix_timestamp(ca.not_after.as_second())
        .map_err(|e| anyhow!("the CA's end: {e}"))?;
    let wanted_end = now + time::Duration::seconds(validity.as_secs() as i64);
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = wanted_end.min(ca_end);
    let cert = params
        .signed_by(&key, &signer)
        .map_err(|e| anyhow!("signing the certificate: {e}"))?;
    let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
    let until = params
        .not_after
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();

    let written = match (secret, out_dir) {
        (Some(name), None) => {
            let object = Secret {
                metadata: kube::api::ObjectMeta {
                    name: Some(name.to_string()),
                    labels: Some(BTreeMap::from([(
                        etcd_operator_api::labels::CLUSTER.to_string(),
                        session.name.clone(),
                    )])),
                    ..Default::default()
                },
                type_: Some("kubernetes.io/tls".into()),
                data: Some(BTreeMap::from([
                    (
                        "tls.crt".to_string(),
                        ByteString(cert_pem.clone().into_bytes()),
                    ),
                    (
                        "tls.key".to_string(),
                        ByteString(key_pem.clone().into_bytes()),
                    ),
                    (
                        "ca.crt".to_string(),
                        ByteString(trusted.clone().into_bytes()),
                    ),
                ])),
                ..Default::default()
            };
            secrets
                .create(&PostParams::default(), &object)
                .await
                .with_context(|| {
                    format!(
                        "creating Secret {}/{name} (delete it first to issue it again)",
                        session.namespace
                    )
                })?;
            format!("Secret {name}")
        }
        (None, Some(dir)) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            for (file, text, mode) in [
                ("tls.crt", &cert_pem, 0o644),
                ("tls.key", &key_pem, 0o600),
                ("ca.crt", &trusted, 0o644),
            ] {
                let path = dir.join(file);
                if path.exists() {
                    bail!(Usage(format!(
                        "{} exists; choose another directory",
                        path.display()
                    )));
                }
                write_private(&path, text.as_bytes(), mode)?;
            }
            format!("{}/{{tls.crt,tls.key,ca.crt}}", dir.display())
        }
        _ => bail!(Usage(
            "say where the certificate goes: --secret <name> or --out-dir <directory>".into()
        )),
    };
    Ok(Printed {
        value: json!({"commonName": common_name, "notAfter": until, "written": written}),
        table: None,
        lines: vec![format!(
            "certificate for CN={common_name}, valid until {until}, written to {written}; the operator does not renew it, and after a CA rotation it must be issued again"
        )],
        code: 0,
    })
}

fn write_private(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))
}

/// Object metadata that is noise in a report.
fn tidy(mut value: Value) -> Value {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
    value
}

/// `report`: a directory with what a support request needs about one cluster: the
/// EtcdCluster, its EtcdMembers, Pods, PVCs, Services, PodDisruptionBudget, snapshots,
/// defragmentations and schedules, the namespace's Events about them, every member's log (and
/// its previous run's), etcd's status and health as the plugin sees them, the operator's log
/// when it can be read. Never a Secret: Secrets are not read, and every file is checked for
/// private keys and the root password before the report is kept.
pub async fn report(
    session: &Session,
    status: Value,
    health: Value,
    out: Option<&Path>,
    tail: i64,
) -> anyhow::Result<Printed> {
    let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
    let dir: PathBuf = out.map(Path::to_path_buf).unwrap_or_else(|| {
        PathBuf::from(format!(
            "etcdop-report-{}-{}-{stamp}",
            session.namespace, session.name
        ))
    });
    if dir.exists() {
        bail!(Usage(format!(
            "{} exists; choose another directory with --dir",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir.join("logs"))
        .with_context(|| format!("creating {}", dir.display()))?;
    let mut files: Vec<(String, String)> = Vec::new();
    let yaml = |value: &Value| serde_yaml::to_string(value).unwrap_or_default();
    let client = session.client.clone();
    let ns = session.namespace.clone();
    let selector = etcd_operator_api::labels::cluster_selector(&session.name);
    let mut notes = Vec::new();

    let cluster = tidy(serde_json::to_value(&session.observed.cluster)?);
    files.push(("etcdcluster.yaml".into(), yaml(&cluster)));
    let members: Vec<Value> = session
        .observed
        .members
        .iter()
        .map(|m| tidy(serde_json::to_value(&m.member).unwrap_or_default()))
        .collect();
    files.push(("etcdmembers.yaml".into(), yaml(&Value::from(members))));

    // Everything labelled with the cluster, by kind, as kubectl would list it.
    let dynamic = |group: &str, version: &str, kind: &str, plural: &str| {
        let resource = kube::api::ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: if group.is_empty() {
                version.to_string()
            } else {
                format!("{group}/{version}")
            },
            kind: kind.into(),
            plural: plural.into(),
        };
        Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), &ns, &resource)
    };
    for (group, version, kind, plural, labelled) in [
        ("", "v1", "Pod", "pods", true),
        (
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
        ),
        ("", "v1", "Service", "services", true),
        (
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            true,
        ),
        (
            "etcd-operator.cozystack.io",
            "v1alpha2",
            "EtcdSnapshot",
            "etcdsnapshots",
            false,
        ),
        (
            "etcd-operator.cozystack.io",
            "v1alpha2",
            "EtcdSnapshotSchedule",
            "etcdsnapshotschedules",
            false,
        ),
        (
            "etcd-operator.cozystack.io",
            "v1alpha2",
            "EtcdDefrag",
            "etcddefrags",
            false,
        ),
        (
            "etcd-operator.cozystack.io",
            "v1alpha2",
            "EtcdDefragPolicy",
            "etcddefragpolicies",
            false,
        ),
    ] {
        let params = if labelled {
            ListParams::default().labels(&selector)
        } else {
            ListParams::default()
        };
        match dynamic(group, version, kind, plural).list(&params).await {
            Ok(list) => {
                let items: Vec<Value> = list
                    .items
                    .into_iter()
                    .map(|o| tidy(serde_json::to_value(o).unwrap_or_default()))
                    // Snapshots, schedules and defragmentations of this cluster only.
                    .filter(|o| {
                        labelled || o["spec"]["clusterRef"]["name"] == session.name.as_str()
                    })
                    .collect();
                files.push((format!("{plural}.yaml"), yaml(&Value::from(items))));
            }
            Err(e) => notes.push(format!("{plural}: {e}")),
        }
    }

    // Events of the namespace about the cluster's objects.
    let mut names: std::collections::BTreeSet<String> = member_names(session).into_iter().collect();
    names.insert(session.name.clone());
    for m in &session.observed.members {
        if let Some(status) = &m.member.status {
            names.extend(status.pod_name.clone());
            names.extend(status.pvc_name.clone());
        }
    }
    match Api::<Event>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => {
            let mut events: Vec<&Event> = list
                .items
                .iter()
                .filter(|e| {
                    e.involved_object.name.as_ref().is_some_and(|n| {
                        names.contains(n) || n.starts_with(&format!("{}-", session.name))
                    })
                })
                .collect();
            events.sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0));
            let lines: Vec<String> = events
                .iter()
                .map(|e| {
                    format!(
                        "{}\t{}\t{}/{}\t{}\t{}",
                        e.last_timestamp
                            .as_ref()
                            .map(|t| t.0.to_string())
                            .unwrap_or_default(),
                        e.type_.clone().unwrap_or_default(),
                        e.involved_object.kind.clone().unwrap_or_default(),
                        e.involved_object.name.clone().unwrap_or_default(),
                        e.reason.clone().unwrap_or_default(),
                        e.message.clone().unwrap_or_default().replace('\n', " ")
                    )
                })
                .collect();
            files.push(("events.tsv".into(), lines.join("\n") + "\n"));
        }
        Err(e) => notes.push(format!("events: {e}")),
    }

    // Every member's log, and the previous run's when there is one.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for m in &session.observed.members {
        let Some(facts) = &m.pod else { continue };
        let pod_name = facts.name.clone();
        let Ok(pod) = pods.get(&pod_name).await else {
            notes.push(format!("Pod {pod_name}: not readable"));
            continue;
        };
        let containers: Vec<String> = pod
            .spec
            .iter()
            .flat_map(|s| {
                s.init_containers
                    .iter()
                    .flatten()
                    .chain(s.containers.iter())
            })
            .map(|c| c.name.clone())
            .collect();
        for container in containers {
            for previous in [false, true] {
                let params = LogParams {
                    container: Some(container.clone()),
                    previous,
                    tail_lines: Some(tail),
                    ..Default::default()
                };
                match pods.logs(&pod_name, &params).await {
                    Ok(text) if !text.is_empty() => files.push((
                        format!(
                            "logs/{pod_name}-{container}{}.log",
                            if previous { "-previous" } else { "" }
                        ),
                        text,
                    )),
                    Ok(_) => {}
                    Err(e) if !previous => {
                        notes.push(format!("log of {pod_name}/{container}: {e}"))
                    }
                    Err(_) => {}
                }
            }
        }
    }
    // The operator's log, wherever it runs (needs list on Pods cluster-wide).
    let operators = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().labels("app.kubernetes.io/name=etcd-operator"))
        .await;
    match operators {
        Ok(list) => {
            for pod in list.items {
                let (Some(name), Some(pod_ns)) =
                    (pod.metadata.name.clone(), pod.metadata.namespace.clone())
                else {
                    continue;
                };
                let api: Api<Pod> = Api::namespaced(client.clone(), &pod_ns);
                let params = LogParams {
                    tail_lines: Some(tail),
                    ..Default::default()
                };
                if let Ok(text) = api.logs(&name, &params).await {
                    let mine: Vec<&str> = text
                        .lines()
                        .filter(|l| l.contains(&session.name) || !l.contains("\"cluster\""))
                        .collect();
                    files.push((format!("logs/operator-{name}.log"), mine.join("\n") + "\n"));
                }
            }
        }
        Err(e) => notes.push(format!("the operator's log: {e}")),
    }
    files.push((
        "etcd-status.json".into(),
        serde_json::to_string_pretty(&status)? + "\n",
    ));
    files.push((
        "etcd-health.json".into(),
        serde_json::to_string_pretty(&health)? + "\n",
    ));
    files.push((
        "README.txt".into(),
        format!(
            "etcdop report of EtcdCluster {ns}/{} at {stamp} (unix seconds).\nNo Secret was read; files were checked for private keys and the root password.\nNot collected:\n{}\n",
            session.name,
            if notes.is_empty() { "  nothing".to_string() } else { notes.iter().map(|n| format!("  {n}")).collect::<Vec<_>>().join("\n") }
        ),
    ));

    // No secrets: refuse to keep a report that carries key material or the root password.
    let password = session
        .observed
        .security
        .access
        .credentials
        .as_ref()
        .map(|(_, p)| p.clone())
        .filter(|p| !p.is_empty());
    for (name, text) in &mut files {
        if text.contains("PRIVATE KEY-----") {
            *text = format!("(left out: {name} held private key material)\n");
        }
        if let Some(password) = password.as_deref().filter(|p| text.contains(p)) {
            *text = text.replace(password, "<redacted>");
        }
    }
    for (name, text) in &files {
        std::fs::write(dir.join(name), text).with_context(|| format!("writing {name}"))?;
    }
    Ok(Printed {
        value: json!({"directory": dir.display().to_string(), "files": files.iter().map(|(n, _)| n).collect::<Vec<_>>(), "notCollected": notes}),
        table: None,
        lines: vec![format!(
            "wrote {} files to {}/ (no Secrets); attach it to the support request: tar czf {0}.tgz {0}",
            files.len(),
            dir.display()
        )],
        code: 0,
    })
}

/// `recover-quorum --wait`: follows `status.quorumRecovery` from the request on until the
/// recovery completed (and the cluster is Available) or was aborted or refused, printing each
/// phase as it is reached.
pub async fn wait_recovery(
    api: &Api<EtcdCluster>,
    name: &str,
    requested_at: k8s_openapi::jiff::Timestamp,
    timeout: Duration,
) -> anyhow::Result<(Vec<String>, i32)> {
    let started = Instant::now();
    let mut seen: Vec<String> = Vec::new();
    loop {
        let cluster = api
            .get(name)
            .await
            .with_context(|| format!("reading EtcdCluster {name}"))?;
        let status = cluster.status.clone().unwrap_or_default();
        let conditions = status.conditions.clone().unwrap_or_default();
        let condition = |kind: &str| conditions.iter().find(|c| c.type_ == kind).cloned();
        let record = status.quorum_recovery.as_ref().filter(|r| {
            r.start_time.as_ref().is_some_and(|t| {
                t.0 >= requested_at - k8s_openapi::jiff::SignedDuration::from_secs(5)
            })
        });
        if let Some(record) = record {
            let phase = record.phase.map(|p| format!("{p:?}")).unwrap_or_default();
            if seen.last() != Some(&phase) {
                seen.push(phase.clone());
                eprintln!("quorum recovery of {name}: {phase}");
            }
            let available = condition("Available").is_some_and(|c| c.status == "True");
            match phase.as_str() {
                "Completed" if available => {
                    let lost = record.may_have_lost.clone().unwrap_or_default();
                    return Ok((
                        vec![
                            format!(
                                "quorum recovery of etcdcluster/{name} completed: {}",
                                seen.join(" → ")
                            ),
                            format!("may have been lost: {lost}"),
                        ],
                        0,
                    ));
                }
                "Aborted" => {
                    return Ok((
                        vec![format!(
                            "quorum recovery of etcdcluster/{name} aborted: {}",
                            record.message.clone().unwrap_or_default()
                        )],
                        1,
                    ));
                }
                _ => {}
            }
        } else if let Some(progressing) =
            condition("Progressing").filter(|c| c.reason == "QuorumRecoveryRefused")
        {
            return Ok((
                vec![format!(
                    "the operator refused the recovery of etcdcluster/{name}: {}",
                    progressing.message
                )],
                1,
            ));
        } else if condition("Available").is_some_and(|c| c.status == "True")
            && cluster.metadata.annotations.as_ref().is_none_or(|a| {
                !a.contains_key(etcd_operator_api::cluster::RECOVER_QUORUM_ANNOTATION)
            })
        {
            return Ok((
                vec![format!(
                    "etcdcluster/{name} serves with a majority: nothing was recovered (the operator removed the request)"
                )],
                0,
            ));
        }
        if started.elapsed() > timeout {
            bail!(
                "the recovery of etcdcluster/{name} did not finish within {}s (phases seen: {}); see kubectl describe etcdcluster {name}",
                timeout.as_secs(),
                if seen.is_empty() {
                    "none".into()
                } else {
                    seen.join(" → ")
                }
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
