//! The commands that move data or the cluster's state: `snapshot save` (streamed, verified,
//! published whole), `pause`/`resume`, `recover-quorum`, `snapshot create` and `restore`.

use super::*;

/// Streams a snapshot into `.<file>.part` (created new, fsynced), checks etcd's trailing
/// SHA-256, links it as `file` (never over an existing file) and fsyncs the directory: `file`
/// is either absent or a whole, verified snapshot.
pub(super) async fn snapshot_save(
    session: &Session,
    file: &Path,
    only: Option<&str>,
) -> anyhow::Result<Printed> {
    let leader = session.observed.etcd.leader();
    let member = match only {
        Some(name) => name.to_string(),
        None => {
            // A healthy member, the leader if it is one.
            let mut healthy: Vec<&ObservedMember> = session
                .observed
                .members
                .iter()
                .filter(|m| {
                    let url = etcd_operator::build::member_client_url(&m.member);
                    session
                        .observed
                        .etcd
                        .observation_at(&url)
                        .is_some_and(|o| o.is_healthy())
                })
                .collect();
            healthy.sort_by_key(|m| member_id(session, m) != leader);
            healthy
                .first()
                .map(|m| member_name(m).to_string())
                .ok_or_else(|| {
                    anyhow!(
                        "no healthy member to take a snapshot from; see `kubectl etcdop health`"
                    )
                })?
        }
    };
    if file.exists() {
        bail!(Usage(format!(
            "{} exists; remove it or choose another file name",
            file.display()
        )));
    }
    let client = session.etcd_member(&member, Timeouts::SNAPSHOT).await?;
    let (size, sha, revision) = write_snapshot(&client, &member, file).await?;
    Ok(Printed {
        value: json!({"file": file.display().to_string(), "sizeBytes": size, "sha256": sha, "member": member, "revision": revision}),
        table: None,
        lines: vec![format!(
            "saved {} ({size} bytes) from {member}{}\nsha256:{sha}",
            file.display(),
            revision
                .map(|r| format!(" at revision {r}"))
                .unwrap_or_default()
        )],
        code: 0,
    })
}

/// Streams a snapshot from `client` (one member, `member` for messages) into `file`: a new
/// temporary file beside it, etcd's trailing SHA-256 checked, fsync, then published under
/// `file` (never replacing one). Returns the size, the file's SHA-256 and the revision.
pub(crate) async fn write_snapshot(
    client: &etcd_operator::etcd::EtcdClient,
    member: &str,
    file: &Path,
) -> anyhow::Result<(u64, String, Option<i64>)> {
    use std::io::Write;
    let revision = client.revision().await.ok();
    let mut stream = client
        .snapshot()
        .await
        .map_err(|e| anyhow!("starting a snapshot from {member}: {e}"))?;
    let directory = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let file_name = file
        .file_name()
        .ok_or_else(|| Usage(format!("{} is not a file name", file.display())))?;
    let temporary = directory.join(format!(".{}.part", file_name.to_string_lossy()));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .with_context(|| {
            format!(
                "creating {} (remove it if a previous snapshot was interrupted)",
                temporary.display()
            )
        })?;
    let result: anyhow::Result<(u64, String)> = async {
        let mut whole = ring::digest::Context::new(&ring::digest::SHA256);
        let mut body = ring::digest::Context::new(&ring::digest::SHA256);
        // The last 32 bytes are etcd's SHA-256 of everything before them.
        let mut tail: Vec<u8> = Vec::new();
        let mut size = 0u64;
        while let Some(chunk) = stream
            .next_chunk()
            .await
            .map_err(|e| anyhow!("receiving the snapshot from {member}: {e}"))?
        {
            out.write_all(&chunk)
                .with_context(|| format!("writing {}", temporary.display()))?;
            whole.update(&chunk);
            size += chunk.len() as u64;
            tail.extend_from_slice(&chunk);
            if tail.len() > 32 {
                let keep = tail.split_off(tail.len() - 32);
                body.update(&tail);
                tail = keep;
            }
        }
        if tail.len() != 32 || body.finish().as_ref() != tail.as_slice() {
            bail!("the snapshot from {member} fails its integrity check (etcd's trailing SHA-256 does not match); nothing was written to {}", file.display());
        }
        out.sync_all()
            .with_context(|| format!("fsync of {}", temporary.display()))?;
        Ok((size, hex(whole.finish().as_ref())))
    }
    .await;
    drop(out);
    let (size, sha) = match result {
        Ok(done) => done,
        Err(err) => {
            let _ = std::fs::remove_file(&temporary);
            return Err(err);
        }
    };
    // A hard link publishes the whole file atomically and, unlike rename, never replaces an
    // existing one; the temporary name goes after.
    let linked = std::fs::hard_link(&temporary, file);
    let _ = std::fs::remove_file(&temporary);
    linked.map_err(|err| {
        if err.kind() == std::io::ErrorKind::AlreadyExists {
            anyhow!(Usage(format!(
                "{} exists; remove it or choose another file name (nothing was written)",
                file.display()
            )))
        } else {
            anyhow!(err).context(format!(
                "publishing {} as {}",
                temporary.display(),
                file.display()
            ))
        }
    })?;
    if let Ok(dir) = std::fs::File::open(&directory) {
        let _ = dir.sync_all();
    }
    Ok((size, sha, revision))
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) async fn pause(
    cli: &Cli,
    cluster: Option<String>,
    paused: bool,
) -> anyhow::Result<Printed> {
    let target = target(cli, cluster);
    let (client, namespace) = session::kube_client(&target).await?;
    let found = session::find_cluster(&client, &namespace, target.cluster.as_deref()).await?;
    let name = found.metadata.name.clone().unwrap_or_default();
    let api: Api<EtcdCluster> = Api::namespaced(client, &namespace);
    let value = if paused { json!(true) } else { Value::Null };
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": value}})),
    )
    .await
    .with_context(|| format!("patching EtcdCluster {namespace}/{name}"))?;
    let word = if paused { "paused" } else { "resumed" };
    Ok(Printed {
        value: json!({"cluster": name, "namespace": namespace, "paused": paused}),
        table: None,
        lines: vec![format!("etcdcluster/{name} {word}")],
        code: 0,
    })
}

pub(super) async fn recover_quorum(
    cli: &Cli,
    cluster: Option<String>,
    member: Option<String>,
    wait: Option<Duration>,
) -> anyhow::Result<Printed> {
    use etcd_operator_api::cluster::RECOVER_QUORUM_ANNOTATION;
    let target = target(cli, cluster);
    let (client, namespace) = session::kube_client(&target).await?;
    let found = session::find_cluster(&client, &namespace, target.cluster.as_deref()).await?;
    let name = found.metadata.name.clone().unwrap_or_default();
    if let Some(m) = member
        .as_deref()
        .filter(|m| !m.starts_with(etcd_operator_api::cluster::RECOVER_FROM_SNAPSHOT_PREFIX))
    {
        let members: Api<etcd_operator_api::EtcdMember> =
            Api::namespaced(client.clone(), &namespace);
        let known = members
            .get_opt(m)
            .await
            .with_context(|| format!("reading EtcdMember {namespace}/{m}"))?
            .is_some_and(|em| em.spec.cluster_name == name);
        if !known {
            bail!(Usage(format!(
                "{m} is not a member of etcdcluster/{name}; see kubectl etcdop status"
            )));
        }
    }
    let value = member.clone().unwrap_or_else(|| "auto".to_string());
    let api: Api<EtcdCluster> = Api::namespaced(client, &namespace);
    let requested_at = k8s_openapi::jiff::Timestamp::now();
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {RECOVER_QUORUM_ANNOTATION: value}}})),
    )
    .await
    .with_context(|| format!("annotating EtcdCluster {namespace}/{name}"))?;
    if let Some(timeout) = wait {
        let (lines, code) = ops::wait_recovery(&api, &name, requested_at, timeout).await?;
        let status = api.get(&name).await.ok().and_then(|c| c.status);
        return Ok(Printed {
            value: json!({"cluster": name, "namespace": namespace, "recoverQuorum": value,
                "quorumRecovery": status.and_then(|s| s.quorum_recovery)}),
            table: None,
            lines,
            code,
        });
    }
    Ok(Printed {
        value: json!({"cluster": name, "namespace": namespace, "recoverQuorum": value}),
        table: None,
        lines: vec![format!(
            "etcdcluster/{name} annotated {RECOVER_QUORUM_ANNOTATION}={value}: the operator recovers from {} if quorum is lost (see status.quorumRecovery and the Events); a cluster whose majority serves is left alone",
            member.as_deref().unwrap_or(
                "the survivor with the highest raft index (or, when no member's data survives, the newest verified EtcdSnapshot of the cluster)"
            )
        )],
        code: 0,
    })
}

pub(super) async fn snapshot_create(
    cli: &Cli,
    cluster: Option<String>,
    name: &str,
    destination: Value,
    timeout: Duration,
) -> anyhow::Result<Printed> {
    let target = target(cli, cluster);
    let (client, namespace) = session::kube_client(&target).await?;
    let found = session::find_cluster(&client, &namespace, target.cluster.as_deref()).await?;
    let cluster_name = found.metadata.name.clone().unwrap_or_default();
    let snapshot: EtcdSnapshot = serde_json::from_value(json!({
        "apiVersion": "etcd-operator.cozystack.io/v1alpha2",
        "kind": "EtcdSnapshot",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterRef": {"name": cluster_name}, "destination": destination},
    }))
    .context("building the EtcdSnapshot")?;
    let api: Api<EtcdSnapshot> = Api::namespaced(client, &namespace);
    api.create(&PostParams::default(), &snapshot)
        .await
        .with_context(|| format!("creating EtcdSnapshot {namespace}/{name}"))?;
    let started = std::time::Instant::now();
    loop {
        let current = api
            .get(name)
            .await
            .with_context(|| format!("reading EtcdSnapshot {namespace}/{name}"))?;
        let status = current.status.unwrap_or_default();
        let phase = status.phase.map(|p| format!("{p:?}"));
        let message = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| format!("{}: {}", c.reason, c.message));
        match phase.as_deref() {
            Some("Complete") => {
                let artifact = status.artifact.unwrap_or_default();
                return Ok(Printed {
                    value: json!({"name": name, "phase": "Complete", "artifact": artifact}),
                    table: None,
                    lines: vec![format!(
                        "etcdsnapshot/{name} complete: {} ({} bytes, {})",
                        artifact.uri,
                        artifact.size_bytes.unwrap_or_default(),
                        artifact.checksum.unwrap_or_default()
                    )],
                    code: 0,
                });
            }
            Some("Failed") => bail!(
                "etcdsnapshot/{name} failed: {}",
                message.unwrap_or_else(|| "no reason given".into())
            ),
            _ if started.elapsed() > timeout => bail!(
                "etcdsnapshot/{name} is not done after {timeout:?} (phase {}, {}); it goes on: watch it with `kubectl get etcdsnapshot {name} -n {namespace} -w`",
                phase.unwrap_or_else(|| "none".into()),
                message.unwrap_or_default()
            ),
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// `restore`: the new cluster created from the snapshot, then watched until Available with
/// `status.restoredFrom` recorded (or the operator's reason for not getting there).
pub(super) async fn restore_cluster(
    cli: &Cli,
    name: &str,
    snapshot_name: &str,
    overrides: &restore::Overrides,
    wait: Option<Duration>,
) -> anyhow::Result<Printed> {
    let (client, namespace) = session::kube_client(&target(cli, None)).await?;
    let snapshots: Api<EtcdSnapshot> = Api::namespaced(client.clone(), &namespace);
    let Some(snapshot) = snapshots
        .get_opt(snapshot_name)
        .await
        .with_context(|| format!("reading EtcdSnapshot {namespace}/{snapshot_name}"))?
    else {
        bail!(Usage(format!(
            "there is no etcdsnapshot/{snapshot_name} in namespace {namespace}; see kubectl get etcdsnapshots -n {namespace}"
        )));
    };
    let clusters: Api<EtcdCluster> = Api::namespaced(client, &namespace);
    let taken_of = clusters
        .get_opt(&snapshot.spec.cluster_ref.name)
        .await
        .with_context(|| {
            format!(
                "reading EtcdCluster {namespace}/{}",
                snapshot.spec.cluster_ref.name
            )
        })?;
    let plan = restore::plan(name, &namespace, &snapshot, taken_of.as_ref(), overrides)
        .map_err(|e| anyhow!(Usage(e)))?;
    if overrides.dry_run {
        return Ok(Printed {
            value: plan.manifest.clone(),
            table: None,
            lines: std::iter::once(serde_yaml::to_string(&plan.manifest)?)
                .chain(plan.notes.iter().map(|n| format!("# {n}")))
                .collect(),
            code: 0,
        });
    }
    if clusters
        .get_opt(name)
        .await
        .with_context(|| format!("reading EtcdCluster {namespace}/{name}"))?
        .is_some()
    {
        bail!(Usage(format!(
            "etcdcluster/{name} already exists: a restore only creates a new cluster; pick another name or delete it first"
        )));
    }
    let cluster: EtcdCluster =
        serde_json::from_value(plan.manifest.clone()).context("building the EtcdCluster")?;
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .with_context(|| format!("creating EtcdCluster {namespace}/{name}"))?;
    let mut lines = vec![format!(
        "etcdcluster/{name} created from etcdsnapshot/{snapshot_name} ({})",
        plan.uri
    )];
    lines.extend(plan.notes.iter().map(|n| format!("note: {n}")));
    let Some(timeout) = wait else {
        return Ok(Printed {
            value: json!({"name": name, "namespace": namespace, "source": plan.uri, "created": true}),
            table: None,
            lines,
            code: 0,
        });
    };
    let started = std::time::Instant::now();
    loop {
        let current = clusters
            .get(name)
            .await
            .with_context(|| format!("reading EtcdCluster {namespace}/{name}"))?;
        let status = current.status.clone().unwrap_or_default();
        let condition = |kind: &str| {
            status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == kind)
                .cloned()
        };
        let available = condition("Available").is_some_and(|c| c.status == "True");
        if available && let Some(restored) = &status.restored_from {
            lines.push(format!(
                "etcdcluster/{name} available: {} of {} members ready, restored from {} at revision {}",
                status.ready_members.unwrap_or_default(),
                current.spec.replicas_or_default(),
                restored.uri,
                restored
                    .revision
                    .map(|r| r.to_string())
                    .unwrap_or_else(|| "unknown".into())
            ));
            return Ok(Printed {
                value: json!({"name": name, "namespace": namespace, "source": plan.uri,
                    "restoredFrom": restored, "readyMembers": status.ready_members}),
                table: None,
                lines,
                code: 0,
            });
        }
        if started.elapsed() > timeout {
            let why = ["Progressing", "Available", "Degraded"]
                .iter()
                .filter_map(|k| condition(k))
                .map(|c| format!("{} {}: {}", c.type_, c.reason, c.message))
                .collect::<Vec<_>>()
                .join("; ");
            bail!(
                "etcdcluster/{name} is not Available after {timeout:?} ({why}); it goes on: watch it with `kubectl get etcdcluster {name} -n {namespace} -w` and `kubectl describe etcdcluster {name}`"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
