//! One member's gRPC services: etcd's KV, Cluster and Maintenance, as far as the operator
//! calls them, answering from the shared state through [`crate::state::Cluster`].
//!
//! What is etcd's wire behaviour rather than its rules lives here: which responses carry a
//! header and whether it has a revision (the Cluster service's header has none; MoveLeader's
//! and Defragment's responses have no header at all), refusals as gRPC statuses, the wait
//! before a refusal etcd gives only after its request timeout, and the `hasleader` metadata.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::pb;
use crate::refusal::Refusal;
use crate::server::{Sim, now_ms};
use crate::state::{
    Alarm, AlarmAction, AlarmKind, Cluster, ClusterKey, Header, Member, MemberId, RangeQuery,
    STORAGE_VERSION,
};

/// The API of one member: which cluster, which member, and the shared simulator.
#[derive(Clone, Debug)]
pub struct MemberApi {
    sim: Arc<Sim>,
    key: ClusterKey,
    id: MemberId,
}

/// Bytes of each snapshot message, as etcd sends them.
const SNAPSHOT_CHUNK: usize = 32 * 1024;

impl MemberApi {
    /// The API of member `id` of cluster `key`.
    pub fn new(sim: Arc<Sim>, key: ClusterKey, id: MemberId) -> MemberApi {
        MemberApi { sim, key, id }
    }

    /// The simulator behind it.
    pub fn sim(&self) -> &Arc<Sim> {
        &self.sim
    }

    /// The member it answers for.
    pub fn id(&self) -> MemberId {
        self.id
    }

    /// Runs `f` on this member's cluster.
    pub fn with<R>(&self, f: impl FnOnce(&mut Cluster) -> R) -> R {
        self.sim.with(self.key, f)
    }

    /// The three services as an axum router (gRPC over HTTP/2), to merge with the HTTP
    /// routes: etcd serves both on its client URLs.
    pub fn routes(self) -> axum::Router {
        tonic::service::Routes::new(pb::kv_server::KvServer::new(self.clone()))
            .add_service(pb::cluster_server::ClusterServer::new(self.clone()))
            .add_service(pb::maintenance_server::MaintenanceServer::new(self))
            .into_axum_router()
    }

    /// Runs one call's rules, after the interceptor's `hasleader` check, and turns a refusal
    /// into etcd's gRPC status (waiting first where etcd would).
    async fn call<T, R>(
        &self,
        request: &Request<T>,
        rule: impl FnOnce(&mut Cluster, MemberId) -> Result<R, Refusal>,
    ) -> Result<R, Status> {
        let requires_leader = request
            .metadata()
            .get("hasleader")
            .is_some_and(|v| v.as_bytes() == b"true");
        let id = self.id;
        let result = self.with(|c| {
            if requires_leader && c.leader() == 0 && c.is_running(id) {
                return Err(Refusal::NoLeader);
            }
            rule(c, id)
        });
        match result {
            Ok(answer) => Ok(answer),
            Err(refusal) => {
                if refusal.is_slow() {
                    tokio::time::sleep(self.sim.config().slow_refusal_delay).await;
                }
                Err(status(refusal))
            }
        }
    }
}

/// etcd's refusal as a gRPC status.
pub fn status(refusal: Refusal) -> Status {
    Status::new(
        tonic::Code::from(refusal.code().number()),
        refusal.message(),
    )
}

/// The header the Maintenance and KV services send (`header.fill`: with the revision).
fn full_header(h: Header) -> Option<pb::ResponseHeader> {
    Some(pb::ResponseHeader {
        cluster_id: h.cluster_id,
        member_id: h.member_id,
        revision: h.revision,
        raft_term: h.raft_term,
    })
}

/// The header the Cluster service sends: cluster, member and term, no revision.
fn cluster_header(h: Header) -> Option<pb::ResponseHeader> {
    Some(pb::ResponseHeader {
        cluster_id: h.cluster_id,
        member_id: h.member_id,
        revision: 0,
        raft_term: h.raft_term,
    })
}

fn member(m: &Member) -> pb::Member {
    pb::Member {
        id: m.id,
        name: m.name.clone(),
        peer_ur_ls: m.peer_urls.clone(),
        client_ur_ls: m.client_urls.clone(),
        is_learner: m.is_learner,
    }
}

fn members(list: &[Member]) -> Vec<pb::Member> {
    list.iter().map(member).collect()
}

fn alarm_member(a: &Alarm) -> pb::AlarmMember {
    pb::AlarmMember {
        member_id: a.member_id,
        alarm: a.kind.number(),
    }
}

#[tonic::async_trait]
impl pb::cluster_server::Cluster for MemberApi {
    async fn member_add(
        &self,
        request: Request<pb::MemberAddRequest>,
    ) -> Result<Response<pb::MemberAddResponse>, Status> {
        let r = request.get_ref();
        let (h, added, list) = self
            .call(&request, |c, via| {
                c.member_add(via, &r.peer_ur_ls, r.is_learner, now_ms())
            })
            .await?;
        Ok(Response::new(pb::MemberAddResponse {
            header: cluster_header(h),
            member: Some(member(&added)),
            members: members(&list),
        }))
    }

    async fn member_remove(
        &self,
        request: Request<pb::MemberRemoveRequest>,
    ) -> Result<Response<pb::MemberRemoveResponse>, Status> {
        let target = request.get_ref().id;
        let (h, list) = self
            .call(&request, |c, via| c.member_remove(via, target, now_ms()))
            .await?;
        Ok(Response::new(pb::MemberRemoveResponse {
            header: cluster_header(h),
            members: members(&list),
        }))
    }

    async fn member_list(
        &self,
        request: Request<pb::MemberListRequest>,
    ) -> Result<Response<pb::MemberListResponse>, Status> {
        let linearizable = request.get_ref().linearizable;
        let (h, list) = self
            .call(&request, |c, via| c.member_list(via, linearizable))
            .await?;
        Ok(Response::new(pb::MemberListResponse {
            header: cluster_header(h),
            members: members(&list),
        }))
    }

    async fn member_promote(
        &self,
        request: Request<pb::MemberPromoteRequest>,
    ) -> Result<Response<pb::MemberPromoteResponse>, Status> {
        let target = request.get_ref().id;
        let (h, list) = self
            .call(&request, |c, via| c.member_promote(via, target, now_ms()))
            .await?;
        Ok(Response::new(pb::MemberPromoteResponse {
            header: cluster_header(h),
            members: members(&list),
        }))
    }
}

#[tonic::async_trait]
impl pb::maintenance_server::Maintenance for MemberApi {
    async fn alarm(
        &self,
        request: Request<pb::AlarmRequest>,
    ) -> Result<Response<pb::AlarmResponse>, Status> {
        let r = request.get_ref();
        let action = match pb::alarm_request::AlarmAction::try_from(r.action) {
            Ok(pb::alarm_request::AlarmAction::Activate) => AlarmAction::Activate,
            Ok(pb::alarm_request::AlarmAction::Deactivate) => AlarmAction::Deactivate,
            _ => AlarmAction::Get,
        };
        let kind = AlarmKind::from_number(r.alarm);
        let member_id = r.member_id;
        let (h, alarms) = self
            .call(&request, |c, via| c.alarm(via, action, member_id, kind))
            .await?;
        Ok(Response::new(pb::AlarmResponse {
            header: full_header(h),
            alarms: alarms.iter().map(alarm_member).collect(),
        }))
    }

    async fn status(
        &self,
        request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let s = self.call(&request, |c, via| c.status(via)).await?;
        Ok(Response::new(pb::StatusResponse {
            header: full_header(s.header),
            version: s.version,
            db_size: s.db_size,
            leader: s.leader,
            raft_index: s.raft_index,
            raft_term: s.raft_term,
            raft_applied_index: s.raft_applied_index,
            errors: s.errors,
            db_size_in_use: s.db_size_in_use,
            is_learner: s.is_learner,
            storage_version: s.storage_version,
            db_size_quota: s.db_size_quota,
            downgrade_info: Some(pb::DowngradeInfo {
                enabled: false,
                target_version: String::new(),
            }),
        }))
    }

    async fn defragment(
        &self,
        request: Request<pb::DefragmentRequest>,
    ) -> Result<Response<pb::DefragmentResponse>, Status> {
        self.call(&request, |c, via| c.defragment(via)).await?;
        Ok(Response::new(pb::DefragmentResponse { header: None }))
    }

    type SnapshotStream =
        tokio_stream::Iter<std::vec::IntoIter<Result<pb::SnapshotResponse, Status>>>;

    async fn snapshot(
        &self,
        request: Request<pb::SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        let h = self.call(&request, |c, via| c.snapshot(via)).await?;
        let messages = snapshot_messages(h).into_iter().map(Ok).collect::<Vec<_>>();
        Ok(Response::new(tokio_stream::iter(messages)))
    }

    async fn move_leader(
        &self,
        request: Request<pb::MoveLeaderRequest>,
    ) -> Result<Response<pb::MoveLeaderResponse>, Status> {
        let target = request.get_ref().target_id;
        self.call(&request, |c, via| c.move_leader(via, target))
            .await?;
        Ok(Response::new(pb::MoveLeaderResponse { header: None }))
    }
}

#[tonic::async_trait]
impl pb::kv_server::Kv for MemberApi {
    async fn range(
        &self,
        request: Request<pb::RangeRequest>,
    ) -> Result<Response<pb::RangeResponse>, Status> {
        let r = request.get_ref();
        let query = RangeQuery {
            serializable: r.serializable,
            revision: r.revision,
        };
        let (h, count) = self.call(&request, |c, via| c.range(via, query)).await?;
        Ok(Response::new(pb::RangeResponse {
            header: full_header(h),
            kvs: Vec::new(),
            more: false,
            count,
        }))
    }

    async fn compact(
        &self,
        request: Request<pb::CompactionRequest>,
    ) -> Result<Response<pb::CompactionResponse>, Status> {
        let revision = request.get_ref().revision;
        let h = self
            .call(&request, |c, via| c.compact(via, revision))
            .await?;
        Ok(Response::new(pb::CompactionResponse {
            header: full_header(h),
        }))
    }
}

/// A snapshot stream the way etcd 3.6 sends one: the database in chunks (here a small,
/// fixed, bbolt-sized payload, not a real bbolt file), each with the bytes still to come and
/// the storage version, then one message of the payload's SHA-256. Like etcd 3.6, no message
/// carries a header.
pub fn snapshot_messages(_header: Header) -> Vec<pb::SnapshotResponse> {
    let payload = snapshot_payload();
    let mut messages = Vec::new();
    let mut sent = 0;
    for chunk in payload.chunks(SNAPSHOT_CHUNK) {
        sent += chunk.len();
        messages.push(pb::SnapshotResponse {
            header: None,
            remaining_bytes: (payload.len() - sent) as u64,
            blob: chunk.to_vec(),
            version: STORAGE_VERSION.to_string(),
        });
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, &payload);
    messages.push(pb::SnapshotResponse {
        header: None,
        remaining_bytes: 0,
        blob: digest.as_ref().to_vec(),
        version: STORAGE_VERSION.to_string(),
    });
    messages
}

/// 20 KiB of deterministic bytes (a fresh member's database size).
fn snapshot_payload() -> Vec<u8> {
    (0..20_480u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect()
}
