//! The hub's registration decisions, pure (no I/O, no locks): from a front's etcd flags and
//! the clusters the hub holds, whether the member bootstraps its cluster, starts in a cluster
//! the hub holds (its first start, a join after MemberAdd, or a restart), or is refused as
//! etcd would refuse to start.

use std::collections::HashMap;

use crate::flags::{initial_members, own_peer_urls, parse_initial_cluster};
use crate::state::{ClusterKey, MemberId, World};

/// What a front asks for: the etcd flags that decide where its member belongs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// `--name`.
    pub name: String,
    /// `--initial-cluster-token`: which cluster of the hub.
    pub token: String,
    /// `--initial-cluster-state=existing` (join a running cluster) rather than `new`.
    pub existing: bool,
    /// `--initial-cluster`: name and peer URL pairs.
    pub initial_cluster: Vec<(String, String)>,
    /// `--initial-advertise-peer-urls`: the member's identity within its cluster.
    pub peer_urls: Vec<String>,
}

impl Wanted {
    /// The wanted member of a registration's flags.
    pub fn from_registration(r: &super::pb::Registration) -> Result<Wanted, Refused> {
        let existing = match r.initial_cluster_state.as_str() {
            "new" | "" => false,
            "existing" => true,
            other => {
                return Err(Refused::invalid(format!(
                    "unexpected --initial-cluster-state {other:?}"
                )));
            }
        };
        Ok(Wanted {
            name: r.name.clone(),
            token: r.initial_cluster_token.clone(),
            existing,
            initial_cluster: parse_initial_cluster(&r.initial_cluster).map_err(Refused::invalid)?,
            peer_urls: r.initial_advertise_peer_urls.clone(),
        })
    }
}

/// Where a registering member runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No member of the token's cluster registered yet and the state is `new`: bootstrap the
    /// cluster from `--initial-cluster` (`initial`), then start the member whose peer URLs
    /// are `peer_urls`.
    Bootstrap {
        /// The initial members, name and peer URLs each.
        initial: Vec<(String, Vec<String>)>,
        /// The registering member's peer URLs, sorted.
        peer_urls: Vec<String>,
    },
    /// Start member `id` of cluster `key`, which the hub holds with its state.
    Start {
        /// The cluster.
        key: ClusterKey,
        /// The member.
        id: MemberId,
    },
}

/// Why a member cannot start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The flags contradict themselves (rather than the hub's clusters).
    pub invalid: bool,
    /// What etcd would have failed on, in words.
    pub reason: String,
}

impl Refused {
    fn invalid(reason: impl Into<String>) -> Refused {
        Refused {
            invalid: true,
            reason: reason.into(),
        }
    }

    fn precondition(reason: impl Into<String>) -> Refused {
        Refused {
            invalid: false,
            reason: reason.into(),
        }
    }
}

/// Decides where `wanted` runs, given the hub's clusters (`world`) and the cluster each
/// `--initial-cluster-token` bootstrapped (`tokens`).
///
/// - The token names a cluster: the member whose peer URLs are `wanted`'s starts in it,
///   whatever the state (`new`: a restart, etcd ignores `--initial-cluster` once it has
///   data; `existing`: the member MemberAdd registered). No such member: refused (never
///   added, or removed).
/// - The token names none: `new` bootstraps it from `--initial-cluster`, which must list the
///   member under its name with its advertised peer URLs; `existing` is refused (there is no
///   running cluster to join).
pub fn decide(
    tokens: &HashMap<String, ClusterKey>,
    world: &World,
    wanted: &Wanted,
) -> Result<Decision, Refused> {
    if wanted.peer_urls.is_empty() {
        return Err(Refused::invalid("no --initial-advertise-peer-urls"));
    }
    let mut peer_urls = wanted.peer_urls.clone();
    peer_urls.sort();
    let name = &wanted.name;
    let token = &wanted.token;
    let Some(&key) = tokens.get(token) else {
        if wanted.existing {
            return Err(Refused::precondition(format!(
                "no cluster with --initial-cluster-token {token:?} on the hub \
                 (--initial-cluster-state=existing joins a running cluster, and no member of \
                 it has registered)"
            )));
        }
        let peer_urls = own_peer_urls(name, &wanted.initial_cluster, &wanted.peer_urls)
            .map_err(Refused::invalid)?;
        return Ok(Decision::Bootstrap {
            initial: initial_members(&wanted.initial_cluster),
            peer_urls,
        });
    };
    let cluster = world.cluster(key);
    match cluster.members().iter().find(|m| m.peer_urls == peer_urls) {
        Some(member) => Ok(Decision::Start { key, id: member.id }),
        None => Err(Refused::precondition(format!(
            "the cluster {:x} of --initial-cluster-token {token:?} has no \
             member with peer URLs {peer_urls:?} (not added with MemberAdd, or removed): etcd \
             would not start",
            cluster.cluster_id()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Cluster, HEALTH_INTERVAL_MS};

    const T0: u64 = 1_767_225_600_000;

    fn initial_cluster() -> Vec<(String, String)> {
        parse_initial_cluster("m-0=http://m-0.c:2380,m-1=http://m-1.c:2380,m-2=http://m-2.c:2380")
            .unwrap()
    }

    fn wanted(name: &str, existing: bool) -> Wanted {
        Wanted {
            name: name.to_string(),
            token: "tok".to_string(),
            existing,
            initial_cluster: initial_cluster(),
            peer_urls: vec![format!("http://{name}.c:2380")],
        }
    }

    /// The hub after `m-0` bootstrapped the cluster of token `tok`.
    fn bootstrapped() -> (HashMap<String, ClusterKey>, World, ClusterKey) {
        let mut world = World::new();
        let key =
            world.add(Cluster::bootstrap("tok", &initial_members(&initial_cluster())).unwrap());
        let tokens = HashMap::from([("tok".to_string(), key)]);
        (tokens, world, key)
    }

    #[test]
    fn the_first_member_of_a_new_cluster_bootstraps_it_from_initial_cluster() {
        let decision = decide(&HashMap::new(), &World::new(), &wanted("m-1", false)).unwrap();
        assert_eq!(
            decision,
            Decision::Bootstrap {
                initial: initial_members(&initial_cluster()),
                peer_urls: vec!["http://m-1.c:2380".to_string()],
            }
        );
    }

    #[test]
    fn a_new_member_must_be_in_its_initial_cluster_as_advertised() {
        let mut w = wanted("m-1", false);
        w.peer_urls = vec!["http://elsewhere:2380".to_string()];
        let refused = decide(&HashMap::new(), &World::new(), &w).unwrap_err();
        assert!(refused.invalid, "{refused:?}");
        assert!(refused.reason.contains("--initial-advertise-peer-urls"));
        w.peer_urls.clear();
        assert!(
            decide(&HashMap::new(), &World::new(), &w)
                .unwrap_err()
                .invalid
        );
    }

    #[test]
    fn the_other_initial_members_start_in_the_bootstrapped_cluster() {
        let (tokens, world, key) = bootstrapped();
        for name in ["m-0", "m-1", "m-2"] {
            let id = world
                .cluster(key)
                .member_with_peer_url(&format!("http://{name}.c:2380"))
                .unwrap();
            assert_eq!(
                decide(&tokens, &world, &wanted(name, false)).unwrap(),
                Decision::Start { key, id }
            );
        }
    }

    #[test]
    fn an_existing_member_joins_where_member_add_registered_it() {
        let (tokens, mut world, key) = bootstrapped();
        let cluster = world.cluster_mut(key);
        let ids: Vec<MemberId> = cluster.members().iter().map(|m| m.id).collect();
        for (i, id) in ids.iter().enumerate() {
            cluster
                .start_member(*id, &format!("m-{i}"), &[], T0)
                .unwrap();
        }
        let later = T0 + HEALTH_INTERVAL_MS + 1_000;
        let (_, added, _) = cluster
            .member_add(ids[0], &["http://m-3.c:2380".to_string()], true, later)
            .unwrap();
        let mut joiner = wanted("m-3", true);
        joiner
            .initial_cluster
            .push(("m-3".into(), "http://m-3.c:2380".into()));
        assert_eq!(
            decide(&tokens, &world, &joiner).unwrap(),
            Decision::Start { key, id: added.id }
        );
    }

    #[test]
    fn a_member_the_cluster_does_not_have_is_refused() {
        let (tokens, world, _) = bootstrapped();
        // Joining without MemberAdd.
        let refused = decide(&tokens, &world, &wanted("m-3", true)).unwrap_err();
        assert!(!refused.invalid);
        assert!(refused.reason.contains("http://m-3.c:2380"), "{refused:?}");
        assert!(refused.reason.contains("MemberAdd"), "{refused:?}");
        // A `new` member once its token's cluster is bootstrapped without it.
        assert!(decide(&tokens, &world, &wanted("m-3", false)).is_err());
        // Joining a cluster no member of which has registered.
        let refused = decide(&HashMap::new(), &World::new(), &wanted("m-0", true)).unwrap_err();
        assert!(!refused.invalid);
        assert!(refused.reason.contains("\"tok\""), "{refused:?}");
    }

    #[test]
    fn registering_again_keeps_the_member_id_until_it_is_removed() {
        let (tokens, mut world, key) = bootstrapped();
        let Decision::Start { id, .. } = decide(&tokens, &world, &wanted("m-1", false)).unwrap()
        else {
            panic!("a bootstrapped member starts");
        };
        let cluster = world.cluster_mut(key);
        let ids: Vec<MemberId> = cluster.members().iter().map(|m| m.id).collect();
        for (i, member) in ids.iter().enumerate() {
            cluster
                .start_member(*member, &format!("m-{i}"), &[], T0)
                .unwrap();
        }
        cluster.stop_member(id, T0 + 1);
        // Restarted, with either state: the same member.
        for existing in [false, true] {
            assert_eq!(
                decide(&tokens, &world, &wanted("m-1", existing)).unwrap(),
                Decision::Start { key, id }
            );
        }
        let via = *ids.iter().find(|m| **m != id).unwrap();
        world
            .cluster_mut(key)
            .member_remove(via, id, T0 + HEALTH_INTERVAL_MS + 1_000)
            .unwrap();
        let refused = decide(&tokens, &world, &wanted("m-1", false)).unwrap_err();
        assert!(refused.reason.contains("removed"), "{refused:?}");
    }

    #[test]
    fn registrations_parse_the_state() {
        let mut r = super::super::pb::Registration {
            name: "m-0".into(),
            initial_cluster: "m-0=http://m-0.c:2380".into(),
            initial_cluster_state: "existing".into(),
            initial_cluster_token: "tok".into(),
            initial_advertise_peer_urls: vec!["http://m-0.c:2380".into()],
            ..Default::default()
        };
        assert!(Wanted::from_registration(&r).unwrap().existing);
        r.initial_cluster_state = "maybe".into();
        assert!(Wanted::from_registration(&r).unwrap_err().invalid);
        r.initial_cluster_state = "new".into();
        r.initial_cluster = "nonsense".into();
        assert!(Wanted::from_registration(&r).unwrap_err().invalid);
    }
}
