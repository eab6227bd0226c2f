//! The commands that read and change a running cluster: `status`, `members`, `health`,
//! `defrag`, `compact`, alarms, leadership and membership.

use super::*;

pub(super) fn member_name(member: &ObservedMember) -> &str {
    member.member.metadata.name.as_deref().unwrap_or_default()
}

/// The member ID: etcd's Status at its endpoint, else the member list by name, else the
/// EtcdMember's status.
pub(super) fn member_id(session: &Session, member: &ObservedMember) -> Option<u64> {
    let view = &session.observed.etcd;
    let url = etcd_operator::build::member_client_url(&member.member);
    view.observation_at(&url)
        .and_then(|o| o.member_id())
        .or_else(|| {
            view.member_list()
                .iter()
                .find(|m| m.name == member_name(member))
                .map(|m| m.id)
        })
        .or_else(|| {
            member
                .member
                .status
                .as_ref()
                .and_then(|s| s.member_id.as_deref())
                .and_then(parse_member_id)
        })
}

pub(super) fn quota(session: &Session) -> i64 {
    session
        .observed
        .cluster
        .spec
        .options
        .as_ref()
        .and_then(|o| o.quota_backend_bytes)
        .filter(|q| *q > 0)
        .unwrap_or(DEFAULT_QUOTA)
}

pub(super) fn pick<'a>(
    session: &'a Session,
    only: Option<&str>,
) -> anyhow::Result<Vec<&'a ObservedMember>> {
    let all: Vec<&ObservedMember> = session.observed.members.iter().collect();
    match only {
        None => Ok(all),
        Some(name) => {
            let found: Vec<_> = all.into_iter().filter(|m| member_name(m) == name).collect();
            if found.is_empty() {
                session.local_url(name)?;
            }
            Ok(found)
        }
    }
}

pub(super) fn status(session: &Session, only: Option<&str>) -> anyhow::Result<Printed> {
    let view = &session.observed.etcd;
    let quota = quota(session);
    let mut table = Table::new(&[
        "NAME",
        "ID",
        "LEADER",
        "LEARNER",
        "VERSION",
        "DB SIZE",
        "IN USE",
        "QUOTA",
        "RAFT INDEX",
        "RAFT TERM",
        "ALARMS",
        "POD",
        "MEMBER",
        "ERROR",
    ]);
    let mut rows = Vec::new();
    for member in pick(session, only)? {
        let name = member_name(member).to_string();
        let url = etcd_operator::build::member_client_url(&member.member);
        let observation = view.observation_at(&url);
        let status = observation.and_then(|o| o.status.as_ref().ok());
        let id = member_id(session, member);
        let alarms: Vec<String> = id
            .map(|id| {
                view.active_alarms()
                    .iter()
                    .filter(|a| a.member_id == id)
                    .map(|a| a.kind.to_string())
                    .collect()
            })
            .unwrap_or_default();
        let pod_phase = member
            .pod
            .as_ref()
            .map(|p| format!("{:?}", p.phase))
            .unwrap_or_else(|| "Missing".into());
        let member_phase = member
            .member
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .map(|p| p.to_string())
            .unwrap_or_else(|| "-".into());
        let error = match observation.map(|o| &o.status) {
            Some(Err(err)) => session
                .forward_error(&name)
                .unwrap_or_else(|| err.to_string()),
            Some(Ok(_)) => String::new(),
            None if member.pod.is_none() => "no Pod".into(),
            None => "not observed".into(),
        };
        let percent = status.map(|s| (s.db_size as f64) * 100.0 / quota as f64);
        rows.push(json!({
            "name": name,
            "id": id.map(member_id_hex),
            "leader": status.map(|s| s.leader != 0 && s.leader == s.member_id),
            "learner": status.map(|s| s.is_learner),
            "version": status.map(|s| s.version.clone()),
            "dbSize": status.map(|s| s.db_size),
            "dbSizeInUse": status.map(|s| s.db_size_in_use),
            "quotaBytes": quota,
            "quotaPercent": percent.map(|p| (p * 10.0).round() / 10.0),
            "raftIndex": status.map(|s| s.raft_index),
            "raftAppliedIndex": status.map(|s| s.raft_applied_index),
            "raftTerm": status.map(|s| s.raft_term),
            "alarms": alarms,
            "podPhase": pod_phase,
            "memberPhase": member_phase,
            "error": (!error.is_empty()).then_some(error.clone()),
        }));
        let dash = || "-".to_string();
        table.push(vec![
            name,
            id.map(member_id_hex).unwrap_or_else(dash),
            status
                .map(|s| (s.leader != 0 && s.leader == s.member_id).to_string())
                .unwrap_or_else(dash),
            status
                .map(|s| s.is_learner.to_string())
                .unwrap_or_else(dash),
            status.map(|s| s.version.clone()).unwrap_or_else(dash),
            status.map(|s| bytes(s.db_size)).unwrap_or_else(dash),
            status.map(|s| bytes(s.db_size_in_use)).unwrap_or_else(dash),
            percent.map(|p| format!("{p:.1}%")).unwrap_or_else(dash),
            status
                .map(|s| s.raft_index.to_string())
                .unwrap_or_else(dash),
            status.map(|s| s.raft_term.to_string()).unwrap_or_else(dash),
            if alarms.is_empty() {
                dash()
            } else {
                alarms.join(",")
            },
            pod_phase,
            member_phase,
            if error.is_empty() { dash() } else { error },
        ]);
    }
    Ok(Printed {
        value: json!({"cluster": session.name, "namespace": session.namespace, "members": rows}),
        table: Some(table),
        lines: Vec::new(),
        code: 0,
    })
}

pub(super) fn members(session: &Session) -> anyhow::Result<Printed> {
    let view = &session.observed.etcd;
    let list = view
        .members
        .as_ref()
        .map_err(|e| anyhow!("etcd's member list is not available: {e}"))?;
    let mut table = Table::new(&[
        "ID",
        "NAME",
        "STARTED",
        "LEARNER",
        "PEER URLS",
        "CLIENT URLS",
        "ETCDMEMBER",
    ]);
    let mut rows = Vec::new();
    for member in list {
        let object = session
            .observed
            .members
            .iter()
            .find(|m| member_name(m) == member.name)
            .map(|m| member_name(m).to_string());
        rows.push(json!({
            "id": member_id_hex(member.id),
            "name": member.name,
            "started": member.has_started(),
            "learner": member.is_learner,
            "peerURLs": member.peer_urls,
            "clientURLs": member.client_urls,
            "etcdMember": object,
        }));
        table.push(vec![
            member_id_hex(member.id),
            if member.name.is_empty() {
                "-".into()
            } else {
                member.name.clone()
            },
            member.has_started().to_string(),
            member.is_learner.to_string(),
            member.peer_urls.join(","),
            if member.client_urls.is_empty() {
                "-".into()
            } else {
                member.client_urls.join(",")
            },
            object.unwrap_or_else(|| "-".into()),
        ]);
    }
    Ok(Printed {
        value: json!({"clusterID": view.cluster_id.map(member_id_hex), "members": rows}),
        table: Some(table),
        lines: Vec::new(),
        code: 0,
    })
}

pub(super) fn health(session: &Session) -> Printed {
    let view = &session.observed.etcd;
    let mut voters = Vec::new();
    let mut learners = Vec::new();
    let listed = view.members.as_ref().ok();
    for member in &session.observed.members {
        let name = member_name(member).to_string();
        let id = member_id(session, member);
        let learner = listed
            .and_then(|l| l.iter().find(|m| Some(m.id) == id || m.name == name))
            .map(|m| m.is_learner)
            .unwrap_or(false);
        let url = etcd_operator::build::member_client_url(&member.member);
        let observation = view.observation_at(&url);
        let healthy = observation.is_some_and(|o| o.is_healthy());
        let detail = match observation {
            _ if member.pod.is_none() => "no Pod".to_string(),
            None => "not observed".to_string(),
            Some(o) => match (&o.status, &o.health) {
                (Err(err), _) => session
                    .forward_error(&name)
                    .unwrap_or_else(|| format!("unreachable: {err}")),
                (Ok(_), Some(Ok(()))) => "healthy".to_string(),
                (Ok(_), Some(Err(err))) => format!("answers Status but not a read: {err}"),
                (Ok(s), None) if s.is_learner => "learner (not asked for a read)".into(),
                (Ok(_), None) => "not asked".into(),
            },
        };
        let evidence = VoterEvidence {
            name,
            healthy,
            detail,
        };
        if learner {
            learners.push(evidence);
        } else {
            voters.push(evidence);
        }
    }
    let state = classify(&voters);
    let healthy = voters.iter().filter(|v| v.healthy).count();
    let quorum = voters.len() / 2 + 1;
    let mut table = Table::new(&["MEMBER", "ROLE", "HEALTHY", "DETAIL"]);
    for (role, list) in [("voter", &voters), ("learner", &learners)] {
        for v in list {
            table.push(vec![
                v.name.clone(),
                role.into(),
                v.healthy.to_string(),
                v.detail.clone(),
            ]);
        }
    }
    let summary = format!(
        "{}: {healthy} of {} voters healthy, quorum is {quorum}{}",
        state.as_str(),
        voters.len(),
        match state {
            Health::Healthy => String::new(),
            Health::MinorityLost => format!(
                "; etcd serves, but losing {} more voter(s) stops it",
                healthy + 1 - quorum
            ),
            Health::QuorumLost => "; etcd refuses writes until a majority of voters is back".into(),
        }
    );
    let alarms: Vec<String> = view.active_alarms().iter().map(|a| a.to_string()).collect();
    let mut lines = vec![String::new(), summary.clone()];
    if !alarms.is_empty() {
        lines.push(format!("active alarms: {}", alarms.join(", ")));
    }
    Printed {
        value: json!({
            "cluster": session.name, "namespace": session.namespace,
            "health": state, "healthyVoters": healthy, "voters": voters.len(), "quorum": quorum,
            "summary": summary, "evidence": {"voters": voters, "learners": learners},
            "alarms": alarms,
        }),
        table: Some(table),
        lines,
        code: state.exit_code(),
    }
}

/// Members in the order defrag visits them: followers first, the leader last.
pub(super) fn followers_first<'a>(
    session: &Session,
    members: Vec<&'a ObservedMember>,
) -> Vec<&'a ObservedMember> {
    let leader = session.observed.etcd.leader();
    let mut members = members;
    members.sort_by_key(|m| member_id(session, m).is_some_and(|id| Some(id) == leader));
    members
}

pub(super) async fn defrag(session: &Session, only: Option<&str>) -> anyhow::Result<Printed> {
    let members = followers_first(session, pick(session, only)?);
    let mut table = Table::new(&["NAME", "DB SIZE BEFORE", "DB SIZE AFTER", "IN USE"]);
    let mut rows = Vec::new();
    for member in members {
        let name = member_name(member);
        if member.pod.is_none() {
            bail!(
                "member {name} has no Pod: nothing to defragment; run again once it is back, or with --member for the others"
            );
        }
        let client = session.etcd_member(name, Timeouts::DEFRAGMENT).await?;
        let url = session.local_url(name)?;
        let before = client
            .endpoint_status(url)
            .await
            .map_err(|e| anyhow!(e.to_string()))?;
        client.defragment(url).await.map_err(|e| {
            anyhow!("defragmenting {name}: {e}; the members before it were defragmented")
        })?;
        let after = client
            .endpoint_status(url)
            .await
            .map_err(|e| anyhow!(e.to_string()))?;
        rows.push(json!({"name": name, "dbSizeBefore": before.db_size, "dbSizeAfter": after.db_size, "dbSizeInUse": after.db_size_in_use}));
        table.push(vec![
            name.to_string(),
            bytes(before.db_size),
            bytes(after.db_size),
            bytes(after.db_size_in_use),
        ]);
    }
    Ok(Printed {
        value: json!({"defragmented": rows}),
        table: Some(table),
        lines: Vec::new(),
        code: 0,
    })
}

pub(super) async fn compact(session: &Session, revision: Option<i64>) -> anyhow::Result<Printed> {
    let client = session.etcd().await?;
    let current = client
        .revision()
        .await
        .map_err(|e| anyhow!(e.to_string()))?;
    let revision = revision.unwrap_or(current);
    if revision > current {
        bail!(Usage(format!(
            "revision {revision} is in the future: the current revision is {current}"
        )));
    }
    client.compact(revision).await.map_err(|e| {
        anyhow!("compacting to revision {revision}: {e} (a revision already compacted cannot be compacted again; pick a newer one)")
    })?;
    Ok(Printed {
        value: json!({"compactedRevision": revision, "currentRevision": current}),
        table: None,
        lines: vec![format!(
            "compacted revision {revision} (current revision {current})"
        )],
        code: 0,
    })
}

pub(super) fn name_of_id(session: &Session, id: u64) -> String {
    session
        .observed
        .etcd
        .member_list()
        .iter()
        .find(|m| m.id == id)
        .map(|m| m.name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "-".into())
}

pub(super) fn alarm_list(session: &Session) -> anyhow::Result<Printed> {
    let alarms = session
        .observed
        .etcd
        .alarms
        .as_ref()
        .map_err(|e| anyhow!("etcd's alarm list is not available: {e}"))?;
    let mut table = Table::new(&["MEMBER ID", "NAME", "ALARM"]);
    let mut rows = Vec::new();
    for alarm in alarms {
        let name = name_of_id(session, alarm.member_id);
        rows.push(json!({"memberID": member_id_hex(alarm.member_id), "name": name, "alarm": alarm.kind.to_string()}));
        table.push(vec![
            member_id_hex(alarm.member_id),
            name,
            alarm.kind.to_string(),
        ]);
    }
    let lines = if alarms.is_empty() {
        vec!["no active alarms".to_string()]
    } else {
        Vec::new()
    };
    Ok(Printed {
        value: json!({"alarms": rows}),
        table: (!alarms.is_empty()).then_some(table),
        lines,
        code: 0,
    })
}

pub(super) async fn alarm_disarm(session: &Session, only: Option<&str>) -> anyhow::Result<Printed> {
    let client = session.etcd().await?;
    let alarms = client.alarms().await.map_err(|e| anyhow!(e.to_string()))?;
    let only_id = match only {
        Some(name) => {
            let member = pick(session, Some(name))?;
            Some(
                member
                    .first()
                    .and_then(|m| member_id(session, m))
                    .ok_or_else(|| anyhow!("member {name} has no etcd member ID yet"))?,
            )
        }
        None => None,
    };
    let mut disarmed = Vec::new();
    for alarm in alarms
        .into_iter()
        .filter(|a| only_id.is_none_or(|id| a.member_id == id))
    {
        client
            .disarm(alarm)
            .await
            .map_err(|e| anyhow!(e.to_string()))?;
        disarmed.push(alarm);
    }
    let still = client.alarms().await.map_err(|e| anyhow!(e.to_string()))?;
    let mut lines: Vec<String> = disarmed.iter().map(|a| format!("disarmed {a}")).collect();
    if disarmed.is_empty() {
        lines.push("no active alarms to disarm".into());
    }
    for alarm in &still {
        lines.push(format!(
            "still active: {alarm} (etcd raised it again: free space first with `kubectl etcdop compact` and `kubectl etcdop defrag`, or raise spec.options.quotaBackendBytes)"
        ));
    }
    Ok(Printed {
        value: json!({
            "disarmed": disarmed.iter().map(|a| json!({"memberID": member_id_hex(a.member_id), "alarm": a.kind.to_string()})).collect::<Vec<_>>(),
            "active": still.iter().map(|a| json!({"memberID": member_id_hex(a.member_id), "alarm": a.kind.to_string()})).collect::<Vec<_>>(),
        }),
        table: None,
        lines,
        code: if still.is_empty() { 0 } else { 1 },
    })
}

pub(super) async fn forfeit_leadership(
    session: &Session,
    to: Option<&str>,
) -> anyhow::Result<Printed> {
    let view = &session.observed.etcd;
    let Some(leader) = view.leader() else {
        bail!("no member reports a leader: etcd has no quorum; see `kubectl etcdop health`");
    };
    let leader_member = session
        .observed
        .members
        .iter()
        .find(|m| member_id(session, m) == Some(leader))
        .ok_or_else(|| {
            anyhow!(
                "the leader {} is not one of the cluster's EtcdMembers",
                member_id_hex(leader)
            )
        })?;
    let candidates: Vec<&ObservedMember> = session
        .observed
        .members
        .iter()
        .filter(|m| {
            let id = member_id(session, m);
            id.is_some() && id != Some(leader)
        })
        .filter(|m| {
            let url = etcd_operator::build::member_client_url(&m.member);
            view.observation_at(&url)
                .is_some_and(|o| o.is_healthy() && o.status.as_ref().is_ok_and(|s| !s.is_learner))
        })
        .filter(|m| to.is_none_or(|t| member_name(m) == t))
        .collect();
    let Some(target) = candidates.first() else {
        bail!(match to {
            Some(to) => format!(
                "member {to} is not a healthy voter other than the leader; see `kubectl etcdop status`"
            ),
            None =>
                "no other healthy voter to hand leadership to; see `kubectl etcdop health`".into(),
        });
    };
    let target_id = member_id(session, target).unwrap_or_default();
    let client = session.etcd().await?;
    let leader_url = session.local_url(member_name(leader_member))?;
    client
        .move_leader_at(leader_url, target_id)
        .await
        .map_err(|e| anyhow!("moving leadership: {e}"))?;
    let (from, to) = (member_name(leader_member), member_name(target));
    Ok(Printed {
        value: json!({"from": from, "to": to, "fromID": member_id_hex(leader), "toID": member_id_hex(target_id)}),
        table: None,
        lines: vec![format!("leadership moved from {from} to {to}")],
        code: 0,
    })
}

pub(super) async fn remove_member(session: &Session, member: &str) -> anyhow::Result<Printed> {
    let list = session.observed.etcd.member_list();
    let id = list
        .iter()
        .find(|m| m.name == member)
        .map(|m| m.id)
        .or_else(|| parse_member_id(member).filter(|id| list.iter().any(|m| m.id == *id)))
        .ok_or_else(|| {
            Usage(format!(
                "etcd has no member named or numbered {member}; see `kubectl etcdop members`"
            ))
        })?;
    let voters = list.iter().filter(|m| !m.is_learner).count();
    let removing_voter = list.iter().any(|m| m.id == id && !m.is_learner);
    if removing_voter && voters == 1 {
        bail!(Usage(format!(
            "member {member} is the only voter: removing it would leave no cluster"
        )));
    }
    let client = session.etcd().await?;
    let remaining = client
        .member_remove(id)
        .await
        .map_err(|e| anyhow!("removing member {}: {e}", member_id_hex(id)))?;
    Ok(Printed {
        value: json!({"removed": member_id_hex(id), "members": remaining.iter().map(|m| member_id_hex(m.id)).collect::<Vec<_>>()}),
        table: None,
        lines: vec![format!(
            "removed member {} ({member}); {} member(s) remain. The operator sees the change on its next pass (spec.replicas still counts it)",
            member_id_hex(id),
            remaining.len()
        )],
        code: 0,
    })
}

pub(super) async fn add_member(session: &Session, peer_url: &str) -> anyhow::Result<Printed> {
    if !(peer_url.starts_with("http://") || peer_url.starts_with("https://")) {
        bail!(Usage(format!(
            "--peer-url {peer_url:?} is not a URL such as https://<member>.<cluster>.<namespace>.svc:2380"
        )));
    }
    let client = session.etcd().await?;
    let added = client
        .member_add_learner(&[peer_url.to_string()])
        .await
        .map_err(|e| anyhow!("adding a learner at {peer_url}: {e}"))?;
    Ok(Printed {
        value: json!({"id": member_id_hex(added.id), "learner": true, "peerURLs": [peer_url]}),
        table: None,
        lines: vec![format!(
            "added learner {} at {peer_url}; start etcd there with --initial-cluster-state=existing, then promote it",
            member_id_hex(added.id)
        )],
        code: 0,
    })
}
