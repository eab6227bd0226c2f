//! [`EtcdClient`]: the calls the operator makes to etcd, each bounded by a timeout.

use std::future::Future;
use std::time::Duration;

use etcd_client::{
    AlarmAction, AlarmOptions, AlarmType, Client, ConnectOptions, DowngradeOptions, GetOptions,
    MemberAddOptions, SnapshotStreaming,
};

use super::access::EtcdAccess;
use super::error::{EtcdError, EtcdErrorKind};
use super::types::{Alarm, AlarmKind, EndpointStatus, MemberAdded, MemberInfo};

/// The connect options of `access` (TLS, credentials) with `timeouts`.
fn connect_options(timeouts: Timeouts, access: &EtcdAccess) -> ConnectOptions {
    let mut options = ConnectOptions::new()
        .with_connect_timeout(timeouts.connect)
        .with_timeout(timeouts.request);
    if let Some(tls) = access.tls_options() {
        options = options.with_tls(tls);
    }
    if let Some((user, password)) = &access.credentials {
        options = options.with_user(user.clone(), password.clone());
    }
    options
}

/// How long etcd calls may take. Every call is also wrapped in a hard deadline of
/// `connect + request`, so nothing can hang a reconcile even if every endpoint is a black hole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Time to establish a connection to one endpoint.
    pub connect: Duration,
    /// Time for one request once connected.
    pub request: Duration,
}

impl Timeouts {
    /// For membership changes: MemberAdd and MemberRemove go through raft and wait for the
    /// entry to apply, which takes a few heartbeats on a busy cluster.
    pub const MEMBERSHIP: Timeouts = Timeouts {
        connect: Duration::from_secs(2),
        request: Duration::from_secs(5),
    };

    /// For observation: a member that cannot answer Status within a second is reported as
    /// unreachable rather than slowing every reconcile down.
    pub const OBSERVE: Timeouts = Timeouts {
        connect: Duration::from_millis(1000),
        request: Duration::from_millis(1500),
    };

    /// For Defragment: it rewrites the whole backend of one member and blocks it meanwhile, a
    /// minute or more for a database of gigabytes.
    pub const DEFRAGMENT: Timeouts = Timeouts {
        connect: Duration::from_secs(2),
        request: Duration::from_secs(300),
    };

    /// For a snapshot stream: etcd enforces the request deadline (sent as `grpc-timeout`) on
    /// the whole stream, so it is long; [`SnapshotStream::next_chunk`] bounds each chunk.
    pub const SNAPSHOT: Timeouts = Timeouts {
        connect: Duration::from_secs(2),
        request: Duration::from_secs(3600),
    };

    /// The hard deadline of one call: connecting plus the request.
    pub fn deadline(&self) -> Duration {
        self.connect + self.request
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts::MEMBERSHIP
    }
}

/// A connection to an etcd cluster through a set of client URLs.
///
/// Connecting is lazy: [`EtcdClient::connect`] does no network I/O, so it never fails because
/// a member is down. Calls are balanced over the endpoints that answer. Use voter endpoints for
/// cluster calls: a learner refuses most of them (`rpc not supported for learner`).
#[derive(Clone)]
pub struct EtcdClient {
    endpoints: Vec<String>,
    client: Client,
    timeouts: Timeouts,
    access: EtcdAccess,
}

impl std::fmt::Debug for EtcdClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdClient")
            .field("endpoints", &self.endpoints)
            .field("timeouts", &self.timeouts)
            .finish()
    }
}

impl EtcdClient {
    /// A client over `endpoints` (client URLs such as `http://m-0.c.ns.svc:2379`). Fails only
    /// on an empty list or a malformed URL. Must run inside a Tokio runtime.
    pub async fn connect<I, S>(
        endpoints: I,
        timeouts: Timeouts,
        access: &EtcdAccess,
    ) -> Result<EtcdClient, EtcdError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let endpoints: Vec<String> = endpoints.into_iter().map(Into::into).collect();
        if endpoints.is_empty() {
            return Err(EtcdError::new(
                "Connect",
                &endpoints,
                EtcdErrorKind::InvalidArgument,
                "no endpoints to connect to",
            ));
        }
        let connecting =
            Client::connect(endpoints.clone(), Some(connect_options(timeouts, access)));
        let client = bounded("Connect", &endpoints, timeouts.deadline(), connecting)
            .await?
            .map_err(|e| EtcdError::from_client("Connect", &endpoints, e))?;
        Ok(EtcdClient {
            endpoints,
            client,
            timeouts,
            access: access.clone(),
        })
    }

    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// etcd's member list, as the answering member knows it.
    pub async fn member_list(&self) -> Result<Vec<MemberInfo>, EtcdError> {
        let mut cluster = self.client.cluster_client();
        let response = self.call("MemberList", cluster.member_list()).await?;
        Ok(response.members().iter().map(member_info).collect())
    }

    /// The ID of the cluster the answering member belongs to, with the member list.
    pub async fn member_list_with_cluster_id(&self) -> Result<(u64, Vec<MemberInfo>), EtcdError> {
        let mut cluster = self.client.cluster_client();
        let response = self.call("MemberList", cluster.member_list()).await?;
        let cluster_id = response
            .header()
            .map(|h| h.cluster_id())
            .unwrap_or_default();
        Ok((
            cluster_id,
            response.members().iter().map(member_info).collect(),
        ))
    }

    /// MemberAdd as a learner with `peer_urls`. Returns the new member's ID and the member list
    /// including it. [`EtcdErrorKind::UnhealthyCluster`] is expected for ~5 s after any voter
    /// (re)connects; [`EtcdErrorKind::TooManyLearners`] while another learner is unpromoted;
    /// [`EtcdErrorKind::PeerUrlExists`] when the member was already added (adopt it instead).
    pub async fn member_add_learner(&self, peer_urls: &[String]) -> Result<MemberAdded, EtcdError> {
        let mut cluster = self.client.cluster_client();
        let adding = cluster.member_add(
            peer_urls.to_vec(),
            Some(MemberAddOptions::new().with_is_learner()),
        );
        let response = self.call("MemberAdd", adding).await?;
        let Some(member) = response.member() else {
            return Err(EtcdError::new(
                "MemberAdd",
                &self.endpoints,
                EtcdErrorKind::Other,
                "etcd answered MemberAdd without the added member",
            ));
        };
        Ok(MemberAdded {
            id: member.id(),
            members: response.member_list().iter().map(member_info).collect(),
        })
    }

    /// MemberPromote: makes a learner a voter. [`EtcdErrorKind::LearnerNotInSync`] until its
    /// log is close to the leader's; [`EtcdErrorKind::MemberNotLearner`] if already promoted.
    pub async fn member_promote(&self, id: u64) -> Result<Vec<MemberInfo>, EtcdError> {
        let mut cluster = self.client.cluster_client();
        let response = self
            .call("MemberPromote", cluster.member_promote(id))
            .await?;
        Ok(response.members().iter().map(member_info).collect())
    }

    /// Turns authentication on with the user `root` (role `root`) and `password`: UserAdd
    /// (an existing root user is kept), UserGrantRole, AuthEnable. Each is idempotent in
    /// effect, so a crash between them resumes.
    pub async fn enable_auth(&self, password: &str) -> Result<(), EtcdError> {
        let mut auth = self.client.auth_client();
        match self
            .call("UserAdd", auth.user_add("root", password, None))
            .await
        {
            Ok(_) => {}
            Err(e) if e.detail.contains("user name already exists") => {}
            Err(e) => return Err(e),
        }
        self.call("UserGrantRole", auth.user_grant_role("root", "root"))
            .await?;
        match self.call("AuthEnable", auth.auth_enable()).await {
            Ok(_) => Ok(()),
            // Enabled already (3.4 answers so when it was): done.
            Err(e) if e.detail.contains("already enabled") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// AuthDisable (as a user with the root role; a no-op when authentication is off).
    pub async fn disable_auth(&self) -> Result<(), EtcdError> {
        let mut auth = self.client.auth_client();
        self.call("AuthDisable", auth.auth_disable())
            .await
            .map(drop)
    }

    /// UserChangePassword of `root` to `password` (the client authenticated with the old one).
    pub async fn change_root_password(&self, password: &str) -> Result<(), EtcdError> {
        let mut auth = self.client.auth_client();
        self.call(
            "UserChangePassword",
            auth.user_change_password("root", password),
        )
        .await
        .map(|_| ())
    }

    /// MemberRemove. [`EtcdErrorKind::MemberNotFound`] when it is already gone (callers that
    /// finish a leave sequence treat that as done).
    ///
    /// When the call reaches the member being removed, that member applies its own removal and
    /// stops before answering (`server stopped`); so after a transport failure or a server-side
    /// timeout the member list is asked again, up to three times 200 ms apart, and a member no
    /// longer listed counts as removed. A list that still has it may come from that member
    /// before it stopped or from a follower that has not applied the removal yet, so it is
    /// asked again too (so is a list that fails: the balanced client may pick the stopped
    /// member again); after the third, the call's own error is returned.
    pub async fn member_remove(&self, id: u64) -> Result<Vec<MemberInfo>, EtcdError> {
        let mut cluster = self.client.cluster_client();
        match self.call("MemberRemove", cluster.member_remove(id)).await {
            Ok(response) => Ok(response.members().iter().map(member_info).collect()),
            Err(e)
                if matches!(
                    e.kind,
                    EtcdErrorKind::Unreachable
                        | EtcdErrorKind::Timeout
                        | EtcdErrorKind::ServerTimeout
                ) =>
            {
                for attempt in 0..3 {
                    if attempt > 0 {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    if let Ok(members) = self.member_list().await
                        && members.iter().all(|m| m.id != id)
                    {
                        return Ok(members);
                    }
                }
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// The Status of one endpoint (which need not be one of this client's endpoints), on a
    /// connection of its own.
    pub async fn endpoint_status(&self, endpoint: &str) -> Result<EndpointStatus, EtcdError> {
        self.single(endpoint).await?.status().await
    }

    /// The Status of the member that answers (for a client of one endpoint: that member's).
    pub async fn status(&self) -> Result<EndpointStatus, EtcdError> {
        let mut maintenance = self.client.maintenance_client();
        let response = self.call("Status", maintenance.status()).await?;
        let header = response.header();
        Ok(EndpointStatus {
            member_id: header.map(|h| h.member_id()).unwrap_or_default(),
            cluster_id: header.map(|h| h.cluster_id()).unwrap_or_default(),
            version: response.version().to_string(),
            db_size: response.db_size(),
            db_size_in_use: response.raft_used_db_size(),
            leader: response.leader(),
            raft_index: response.raft_index(),
            raft_applied_index: response.raft_applied_index(),
            raft_term: response.raft_term(),
            revision: header.map(|h| h.revision()).unwrap_or_default(),
            is_learner: response.is_learner(),
            errors: response.errors().to_vec(),
            storage_version: Some(response.storage_version().to_string()).filter(|v| !v.is_empty()),
            downgrade: response.downgrade_info().map(|d| super::types::Downgrade {
                enabled: d.enabled(),
                target_version: d.target_version().to_string(),
            }),
        })
    }

    /// etcd's downgrade procedure, first part: `Downgrade VALIDATE` to `version` (etcd checks
    /// that it is exactly one minor below its cluster version and that no downgrade is
    /// enabled), then `Downgrade ENABLE`. An ENABLE refused because a downgrade is already
    /// enabled counts as done when it is this one (a crash between the call and the next
    /// observation), which the Status of the members says.
    pub async fn enable_downgrade(&self, version: &str) -> Result<(), EtcdError> {
        let mut maintenance = self.client.maintenance_client();
        let validated = self
            .call(
                "DowngradeValidate",
                maintenance.downgrade(DowngradeOptions::Validate(version.to_string())),
            )
            .await;
        match validated {
            Ok(_) => {}
            Err(e) if e.kind == EtcdErrorKind::DowngradeInProgress => {
                if self.downgrade_enabled_to(version).await {
                    return Ok(());
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        }
        let mut maintenance = self.client.maintenance_client();
        match self
            .call(
                "DowngradeEnable",
                maintenance.downgrade(DowngradeOptions::Enable(version.to_string())),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e)
                if e.kind == EtcdErrorKind::DowngradeInProgress
                    && self.downgrade_enabled_to(version).await =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Whether some endpoint of this client reports a downgrade enabled to `version`'s minor.
    async fn downgrade_enabled_to(&self, version: &str) -> bool {
        let minor = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
        for endpoint in &self.endpoints {
            if let Ok(status) = self.endpoint_status(endpoint).await
                && status
                    .downgrade
                    .is_some_and(|d| d.enabled && minor(&d.target_version) == minor(version))
            {
                return true;
            }
        }
        false
    }

    /// etcd `Downgrade CANCEL`.
    pub async fn cancel_downgrade(&self) -> Result<(), EtcdError> {
        let mut maintenance = self.client.maintenance_client();
        self.call(
            "DowngradeCancel",
            maintenance.downgrade(DowngradeOptions::Cancel),
        )
        .await
        .map(|_| ())
    }

    /// Defragment of the member serving `endpoint` (only that member: the call is never
    /// balanced onto another), bounded by [`Timeouts::DEFRAGMENT`] whatever this client's
    /// timeouts are. The member blocks reads and writes until it is done.
    pub async fn defragment(&self, endpoint: &str) -> Result<(), EtcdError> {
        let single =
            EtcdClient::connect_endpoint(endpoint, Timeouts::DEFRAGMENT, &self.access).await?;
        let mut maintenance = single.client.maintenance_client();
        single
            .call("Defragment", maintenance.defragment())
            .await
            .map(|_| ())
    }

    /// A linearizable health check of one endpoint, the way `etcdctl endpoint health` does it:
    /// a linearizable read of the key `health` must go through raft, so it succeeds only when
    /// the member is connected to a leader with quorum. `permission denied` still proves that
    /// (the request was ordered through consensus before the auth check refused it).
    pub async fn endpoint_health(&self, endpoint: &str) -> Result<(), EtcdError> {
        let single = self.single(endpoint).await?;
        single.linearizable_read().await
    }

    /// The same linearizable read through this client's endpoints: the cluster can serve
    /// linearizable requests.
    pub async fn cluster_health(&self) -> Result<(), EtcdError> {
        self.linearizable_read().await
    }

    async fn linearizable_read(&self) -> Result<(), EtcdError> {
        let mut kv = self.client.kv_client();
        match self.call("Health", kv.get("health", None)).await {
            Ok(_) => Ok(()),
            // The read reached etcd and was refused the key: etcd serves.
            Err(e) if e.kind == EtcdErrorKind::PermissionDenied && !refused_credentials(&e) => {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The current revision as the answering member has applied it (a serializable,
    /// count-only read: no keys are transferred).
    pub async fn revision(&self) -> Result<i64, EtcdError> {
        let mut kv = self.client.kv_client();
        let reading = kv.get(
            "\0",
            Some(GetOptions::new().with_serializable().with_count_only()),
        );
        let response = self.call("Range", reading).await?;
        Ok(response.header().map(|h| h.revision()).unwrap_or_default())
    }

    /// The revision and the number of keys of the whole keyspace: a linearizable,
    /// count-only read of every key (the restore check of a snapshot).
    pub async fn key_count(&self) -> Result<(i64, i64), EtcdError> {
        let mut kv = self.client.kv_client();
        let reading = kv.get(
            "\0",
            Some(GetOptions::new().with_from_key().with_count_only()),
        );
        let response = self.call("Range", reading).await?;
        Ok((
            response.header().map(|h| h.revision()).unwrap_or_default(),
            response.count(),
        ))
    }

    /// The current revision, and whether the keyspace is compacted up to it: a serializable,
    /// count-only read one revision back is refused as compacted exactly when it is.
    pub async fn compaction(&self) -> Result<super::types::Compaction, EtcdError> {
        let revision = self.revision().await?;
        if revision <= 1 {
            return Ok(super::types::Compaction {
                revision,
                compacted: true,
            });
        }
        let mut kv = self.client.kv_client();
        let reading = kv.get(
            "\0",
            Some(
                GetOptions::new()
                    .with_serializable()
                    .with_count_only()
                    .with_revision(revision - 1),
            ),
        );
        let compacted = match self.call("Range", reading).await {
            Ok(_) => false,
            Err(e) if is_compacted(&e) => true,
            Err(e) => return Err(e),
        };
        Ok(super::types::Compaction {
            revision,
            compacted,
        })
    }

    /// Compact the keyspace up to `revision`, physically (the call returns once the pages
    /// are free, so a defragmentation right after reclaims them). A revision already
    /// compacted counts as done.
    pub async fn compact(&self, revision: i64) -> Result<(), EtcdError> {
        let mut kv = self.client.kv_client();
        let compacting = kv.compact(
            revision,
            Some(etcd_client::CompactionOptions::new().with_physical()),
        );
        match self.call("Compact", compacting).await {
            Ok(_) => Ok(()),
            Err(e) if is_compacted(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// etcd's Maintenance.Snapshot from the answering member (use a client of one endpoint,
    /// [`EtcdClient::connect_endpoint`] with [`Timeouts::SNAPSHOT`]): the backend database as a
    /// stream of chunks, the last 32 bytes of which are the SHA-256 of everything before them.
    pub async fn snapshot(&self) -> Result<SnapshotStream, EtcdError> {
        let mut maintenance = self.client.maintenance_client();
        let connect = Timeouts {
            connect: self.timeouts.connect,
            request: CHUNK_IDLE_LIMIT,
        };
        let stream = bounded(
            "Snapshot",
            &self.endpoints,
            connect.deadline(),
            maintenance.snapshot(),
        )
        .await?
        .map_err(|e| EtcdError::from_client("Snapshot", &self.endpoints, e))?;
        Ok(SnapshotStream {
            stream,
            endpoints: self.endpoints.clone(),
        })
    }

    /// The cluster's active alarms.
    pub async fn alarms(&self) -> Result<Vec<Alarm>, EtcdError> {
        let mut maintenance = self.client.maintenance_client();
        let listing = maintenance.alarm(AlarmAction::Get, AlarmType::None, None);
        let response = self.call("AlarmList", listing).await?;
        Ok(response
            .alarms()
            .iter()
            .filter_map(|a| {
                let kind = match a.alarm() {
                    AlarmType::Nospace => AlarmKind::NoSpace,
                    AlarmType::Corrupt => AlarmKind::Corrupt,
                    AlarmType::None => return None,
                };
                Some(Alarm {
                    member_id: a.member_id(),
                    kind,
                })
            })
            .collect())
    }

    /// Disarms one alarm. Only useful once its cause is gone: etcd raises NOSPACE again on the
    /// next write while the backend is still over quota.
    pub async fn disarm(&self, alarm: Alarm) -> Result<(), EtcdError> {
        let mut maintenance = self.client.maintenance_client();
        let mut options = AlarmOptions::new();
        options.with_member(alarm.member_id);
        let kind = match alarm.kind {
            AlarmKind::NoSpace => AlarmType::Nospace,
            AlarmKind::Corrupt => AlarmType::Corrupt,
        };
        let disarming = maintenance.alarm(AlarmAction::Deactivate, kind, Some(options));
        self.call("AlarmDisarm", disarming).await?;
        Ok(())
    }

    /// MoveLeader to `target`, sent to the current leader, which it finds by asking every
    /// endpoint of this client for its Status (and, if the leader is not one of them, by its
    /// client URLs in the member list). A no-op when `target` already leads.
    pub async fn move_leader(&self, target: u64) -> Result<(), EtcdError> {
        let statuses = futures::future::join_all(
            self.endpoints
                .iter()
                .map(|ep| async move { (ep.clone(), self.endpoint_status(ep).await) }),
        )
        .await;
        let mut leader = 0;
        let mut leader_endpoint = None;
        for (endpoint, status) in &statuses {
            if let Ok(status) = status {
                if status.leader != 0 {
                    leader = status.leader;
                }
                if status.member_id == status.leader && status.leader != 0 {
                    leader_endpoint = Some(endpoint.clone());
                }
            }
        }
        if leader == 0 {
            let detail = statuses
                .iter()
                .map(|(ep, s)| match s {
                    Ok(_) => format!("{ep}: knows no leader"),
                    Err(e) => format!("{ep}: {}", e.detail),
                })
                .collect::<Vec<_>>()
                .join("; ");
            return Err(EtcdError::new(
                "MoveLeader",
                &self.endpoints,
                EtcdErrorKind::NoLeader,
                detail,
            ));
        }
        if leader == target {
            return Ok(());
        }
        let leader_endpoint = match leader_endpoint {
            Some(endpoint) => endpoint,
            None => self.client_url_of(leader).await?,
        };
        self.move_leader_at(&leader_endpoint, target).await
    }

    /// MoveLeader sent to `leader_endpoint`. etcd refuses it with
    /// [`EtcdErrorKind::NotLeader`] unless that endpoint's member leads.
    pub async fn move_leader_at(
        &self,
        leader_endpoint: &str,
        target: u64,
    ) -> Result<(), EtcdError> {
        let single = self.single(leader_endpoint).await?;
        let mut maintenance = single.client.maintenance_client();
        single
            .call("MoveLeader", maintenance.move_leader(target))
            .await?;
        Ok(())
    }

    async fn client_url_of(&self, id: u64) -> Result<String, EtcdError> {
        let members = self.member_list().await?;
        members
            .into_iter()
            .find(|m| m.id == id)
            .and_then(|m| m.client_urls.into_iter().next())
            .ok_or_else(|| {
                EtcdError::new(
                    "MoveLeader",
                    &self.endpoints,
                    EtcdErrorKind::NoLeader,
                    format!("the leader {id:x} publishes no client URL"),
                )
            })
    }

    /// A client for exactly one endpoint, connected eagerly: per-endpoint RPCs (Status,
    /// MoveLeader, the health read) must not be balanced onto another member, and a member that
    /// is down should fail fast (connection refused, no DNS record for a Pod not yet created)
    /// instead of waiting out the deadline in the balancer.
    pub async fn connect_endpoint(
        endpoint: &str,
        timeouts: Timeouts,
        access: &EtcdAccess,
    ) -> Result<EtcdClient, EtcdError> {
        let channel = dial_channel(endpoint, timeouts, access).await?;
        EtcdClient::over_channel(endpoint, channel, timeouts, access).await
    }

    /// A client of one endpoint over an established `channel` (see [`dial_channel`]), with
    /// `access`'s credentials (Authenticate is one call through raft, made here). Clients made
    /// over one channel share its connection.
    pub(crate) async fn over_channel(
        endpoint: &str,
        channel: tonic::transport::Channel,
        timeouts: Timeouts,
        access: &EtcdAccess,
    ) -> Result<EtcdClient, EtcdError> {
        let endpoints = vec![endpoint.to_string()];
        let mut options = ConnectOptions::new()
            .with_connect_timeout(timeouts.connect)
            .with_timeout(timeouts.request);
        if let Some((user, password)) = &access.credentials {
            // A kept client outlives etcd's token TTL (300 s of disuse by default, or a JWT's
            // expiry): an expired token is renewed once and the call retried.
            options = options
                .with_user(user.clone(), password.clone())
                .with_auto_token_refresh(true);
        }
        let connecting = Client::from_channel(etcd_client::Channel::Tonic(channel), Some(options));
        let client = bounded("Connect", &endpoints, timeouts.deadline(), connecting)
            .await?
            .map_err(|e| EtcdError::from_client("Connect", &endpoints, e))?;
        Ok(EtcdClient {
            endpoints,
            client,
            timeouts,
            access: access.clone(),
        })
    }

    async fn single(&self, endpoint: &str) -> Result<EtcdClient, EtcdError> {
        EtcdClient::connect_endpoint(endpoint, self.timeouts, &self.access).await
    }

    async fn call<T, F>(&self, call: &'static str, future: F) -> Result<T, EtcdError>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        let result = bounded(call, &self.endpoints, self.timeouts.deadline(), future).await?;
        result.map_err(|e| EtcdError::from_client(call, &self.endpoints, e))
    }
}

/// How long a snapshot stream may go without a chunk before it counts as stalled.
const CHUNK_IDLE_LIMIT: Duration = Duration::from_secs(30);

/// A snapshot being received (see [`EtcdClient::snapshot`]).
pub struct SnapshotStream {
    stream: SnapshotStreaming,
    endpoints: Vec<String>,
}

impl SnapshotStream {
    /// The next chunk, `None` at the end of the stream. Fails when etcd reports an error or
    /// sends nothing for 30 s.
    pub async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, EtcdError> {
        let message = bounded(
            "Snapshot",
            &self.endpoints,
            CHUNK_IDLE_LIMIT,
            self.stream.message(),
        )
        .await?
        .map_err(|e| EtcdError::from_client("Snapshot", &self.endpoints, e))?;
        Ok(message.map(|m| m.blob().to_vec()))
    }
}

/// Connects to exactly one endpoint with `access`'s TLS (its credentials are not used: see
/// [`EtcdClient::over_channel`]). Fails fast when nothing listens or the name does not resolve.
pub(crate) async fn dial_channel(
    endpoint: &str,
    timeouts: Timeouts,
    access: &EtcdAccess,
) -> Result<tonic::transport::Channel, EtcdError> {
    let endpoints = vec![endpoint.to_string()];
    let target = tonic::transport::Endpoint::from_shared(endpoint.to_string())
        .map_err(|e| {
            EtcdError::new(
                "Connect",
                &endpoints,
                EtcdErrorKind::InvalidArgument,
                e.to_string(),
            )
        })?
        .connect_timeout(timeouts.connect)
        .timeout(timeouts.request);
    let target = match access.tls_options() {
        Some(tls) => target.tls_config(tls).map_err(|e| {
            EtcdError::new(
                "Connect",
                &endpoints,
                EtcdErrorKind::InvalidArgument,
                format!("TLS configuration: {e}"),
            )
        })?,
        None => target,
    };
    bounded("Connect", &endpoints, timeouts.deadline(), target.connect())
        .await?
        .map_err(|e| EtcdError::from_client("Connect", &endpoints, e.into()))
}

/// Runs `future` with a hard deadline. The balanced channel waits for a ready endpoint without
/// any timeout of its own, so this is what bounds a call when every endpoint is down.
async fn bounded<T, F>(
    call: &'static str,
    endpoints: &[String],
    deadline: Duration,
    future: F,
) -> Result<T, EtcdError>
where
    F: Future<Output = T>,
{
    tokio::time::timeout(deadline, future)
        .await
        .map_err(|_| EtcdError::timeout(call, endpoints, deadline))
}

fn member_info(m: &etcd_client::Member) -> MemberInfo {
    MemberInfo {
        id: m.id(),
        name: m.name().to_string(),
        peer_urls: m.peer_urls().to_vec(),
        client_urls: m.client_urls().to_vec(),
        is_learner: m.is_learner(),
    }
}

/// etcd refused the credentials themselves (a kept client's token renewal with a password
/// that changed since), not the key: the same answer as a new connection's Authenticate.
fn refused_credentials(e: &EtcdError) -> bool {
    let detail = e.detail.to_ascii_lowercase();
    [
        "authentication failed",
        "invalid auth token",
        "user name is empty",
    ]
    .iter()
    .any(|needle| detail.contains(needle))
}

/// `mvcc: required revision has been compacted`.
fn is_compacted(e: &EtcdError) -> bool {
    e.detail.contains("has been compacted")
}
