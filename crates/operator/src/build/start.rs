//! A Pod's start instructions (`--initial-cluster`, `--initial-cluster-state`), carried in its
//! annotations and read by etcd through the downward API at each start: see
//! docs/architecture.md, "Start instructions".

use std::collections::BTreeMap;

use etcd_operator_api::labels::{INITIAL_CLUSTER_ANNOTATION, INITIAL_CLUSTER_STATE_ANNOTATION};

/// `--initial-cluster-state`. etcd reads it only when its data directory is empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitialClusterState {
    /// Form a new cluster: only the bootstrap seed, once, before the cluster ID is known.
    New,
    /// Join the cluster whose members are listed in `--initial-cluster`.
    Existing,
}

impl InitialClusterState {
    pub fn as_str(self) -> &'static str {
        match self {
            InitialClusterState::New => "new",
            InitialClusterState::Existing => "existing",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "new" => Some(InitialClusterState::New),
            "existing" => Some(InitialClusterState::Existing),
            _ => None,
        }
    }
}

/// What a member's etcd does when it starts on an empty data directory (on an initialized one
/// etcd ignores both settings and resumes as the member it was).
///
/// The two settings live in the Pod's annotations, which the etcd container reads through
/// the downward API each time it starts, so that the operator can change what a restart of the
/// container does after the Pod was created (a Pod's command is fixed at creation). They only
/// ever move towards [`StartKind::OwnData`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodStart {
    /// `--initial-cluster`: `name=peerURL` pairs.
    pub initial_cluster: String,
    pub state: InitialClusterState,
}

/// What etcd (3.4 and 3.5) says when it starts `existing` on an empty data directory and no
/// peer in `--initial-cluster` tells it the cluster: with [`StartKind::OwnData`] it can only
/// mean the data directory is empty.
pub const DISCOVERY_FAILED: &str = "cannot fetch cluster info from peer urls";

/// The three instructions a member's Pod can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartKind {
    /// `new` with the seed alone: form the cluster (the seed, before etcd has listed it).
    Bootstrap,
    /// `existing` with etcd's member list: join as the member MemberAdd registered (a member
    /// etcd lists but that never started, so it has no data to lose).
    Join,
    /// `existing` with the member alone: resume on its own data; on an empty data directory
    /// etcd finds no peer to join through and exits ("cannot fetch cluster info from peer
    /// urls"), so a member whose data was lost never serves an empty keyspace and never
    /// rejoins under its old identity.
    OwnData,
}

impl PodStart {
    /// Resume on the member's own data, never bootstrap or join: see [`StartKind::OwnData`].
    pub fn own_data(name: &str, peer_url: &str) -> Self {
        Self {
            initial_cluster: format!("{name}={peer_url}"),
            state: InitialClusterState::Existing,
        }
    }

    /// Which instruction this is, for the member `name`.
    pub fn kind(&self, name: &str) -> StartKind {
        match self.state {
            InitialClusterState::New => StartKind::Bootstrap,
            InitialClusterState::Existing => {
                let only_itself = self
                    .initial_cluster
                    .split(',')
                    .all(|pair| pair.split_once('=').is_some_and(|(n, _)| n == name));
                if only_itself {
                    StartKind::OwnData
                } else {
                    StartKind::Join
                }
            }
        }
    }

    /// The Pod's annotations that carry it.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                INITIAL_CLUSTER_ANNOTATION.to_string(),
                self.initial_cluster.clone(),
            ),
            (
                INITIAL_CLUSTER_STATE_ANNOTATION.to_string(),
                self.state.as_str().to_string(),
            ),
        ])
    }

    /// Read back from a Pod's annotations; `None` for a Pod without them (made by an older
    /// version of the operator, whose command line carries both flags).
    pub fn from_annotations(annotations: Option<&BTreeMap<String, String>>) -> Option<Self> {
        let annotations = annotations?;
        Some(Self {
            initial_cluster: annotations.get(INITIAL_CLUSTER_ANNOTATION)?.clone(),
            state: InitialClusterState::parse(annotations.get(INITIAL_CLUSTER_STATE_ANNOTATION)?)?,
        })
    }
}
