//! etcd's command line (and its `ETCD_*` environment variables), as far as the simulator
//! reads it, so that `etcd-sim` can stand in for `etcd` in a Pod or a script unchanged.
//!
//! Go's flag syntax: `--flag=value`, `--flag value`, and the same with one dash. Flags the
//! simulator does not read are accepted and ignored (a value that follows one without `=`
//! is taken as its value: etcd has no positional arguments).
//!
//! One flag is the simulator's own: `--hub ADDR` (or `ETCD_SIM_HUB=ADDR` in the environment)
//! makes the process a front of a hub ([`crate::front`]) instead of a member of its own.

use std::collections::BTreeMap;

/// The flags the simulator reads, with etcd's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdFlags {
    /// `--name`.
    pub name: String,
    /// `--data-dir` (created, never written).
    pub data_dir: String,
    /// `--initial-cluster`: name and peer URL, in order (a name may repeat).
    pub initial_cluster: Vec<(String, String)>,
    /// `--initial-cluster-state`: `new` or `existing`.
    pub initial_cluster_state: String,
    /// `--initial-cluster-token`.
    pub initial_cluster_token: String,
    /// `--listen-client-urls`.
    pub listen_client_urls: Vec<String>,
    /// `--advertise-client-urls`.
    pub advertise_client_urls: Vec<String>,
    /// `--listen-metrics-urls`.
    pub listen_metrics_urls: Vec<String>,
    /// `--listen-peer-urls` (read, not listened on: there is no raft).
    pub listen_peer_urls: Vec<String>,
    /// `--initial-advertise-peer-urls`.
    pub initial_advertise_peer_urls: Vec<String>,
    /// `--quota-backend-bytes`, when given.
    pub quota_backend_bytes: Option<i64>,
    /// `--version`: print the version and exit.
    pub version: bool,
    /// `--hub` or `ETCD_SIM_HUB` (not etcd's): the hub (`host:port`) to run this member in.
    pub hub: Option<String>,
    /// The flags given that the simulator ignores.
    pub ignored: Vec<String>,
}

/// The flags whose values the simulator reads.
const VALUED: [&str; 12] = [
    "name",
    "data-dir",
    "initial-cluster",
    "initial-cluster-state",
    "initial-cluster-token",
    "listen-client-urls",
    "advertise-client-urls",
    "listen-metrics-urls",
    "listen-peer-urls",
    "initial-advertise-peer-urls",
    "quota-backend-bytes",
    "hub",
];

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect()
}

/// Parses `args` (without the program name), falling back to `env` (`ETCD_NAME`, ...) for a
/// flag not given, then to etcd's defaults.
pub fn parse(
    args: impl IntoIterator<Item = String>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<EtcdFlags, String> {
    let mut given: BTreeMap<String, String> = BTreeMap::new();
    let mut ignored = Vec::new();
    let mut version = false;
    let mut args = args.into_iter().peekable();
    while let Some(arg) = args.next() {
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            return Err(format!("unexpected argument {arg:?}"));
        };
        let (key, inline) = match flag.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (flag.to_string(), None),
        };
        if key == "version" {
            version = inline.is_none_or(|v| v == "true");
            continue;
        }
        let takes_value = VALUED.contains(&key.as_str());
        let value = match inline {
            Some(v) => Some(v),
            None if args.peek().is_some_and(|next| !next.starts_with('-')) => args.next(),
            None if takes_value => return Err(format!("flag needs an argument: --{key}")),
            None => None,
        };
        if takes_value {
            given.insert(key, value.unwrap_or_default());
        } else {
            ignored.push(key);
        }
    }
    let get = |key: &str| -> Option<String> {
        given.get(key).cloned().or_else(|| {
            let var = format!("ETCD_{}", key.to_ascii_uppercase().replace('-', "_"));
            env(&var)
        })
    };
    let name = get("name").unwrap_or_else(|| "default".to_string());
    let initial_advertise_peer_urls =
        list(&get("initial-advertise-peer-urls").unwrap_or_else(|| "http://localhost:2380".into()));
    let initial_cluster = match get("initial-cluster") {
        Some(text) => parse_initial_cluster(&text)?,
        // etcd's default: this member alone, at its advertised peer URLs.
        None => initial_advertise_peer_urls
            .iter()
            .map(|u| (name.clone(), u.clone()))
            .collect(),
    };
    let quota_backend_bytes = match get("quota-backend-bytes") {
        Some(q) => Some(
            q.parse()
                .map_err(|_| format!("invalid --quota-backend-bytes {q:?}"))?,
        ),
        None => None,
    };
    let state = get("initial-cluster-state").unwrap_or_else(|| "new".into());
    if state != "new" && state != "existing" {
        return Err(format!("unexpected --initial-cluster-state {state:?}"));
    }
    let hub = given
        .get("hub")
        .cloned()
        .or_else(|| env("ETCD_SIM_HUB"))
        .filter(|h| !h.is_empty());
    Ok(EtcdFlags {
        hub,
        data_dir: get("data-dir").unwrap_or_else(|| format!("{name}.etcd")),
        initial_cluster,
        initial_cluster_state: state,
        initial_cluster_token: get("initial-cluster-token")
            .unwrap_or_else(|| "etcd-cluster".into()),
        listen_client_urls: list(
            &get("listen-client-urls").unwrap_or_else(|| "http://localhost:2379".into()),
        ),
        advertise_client_urls: list(
            &get("advertise-client-urls").unwrap_or_else(|| "http://localhost:2379".into()),
        ),
        listen_metrics_urls: list(&get("listen-metrics-urls").unwrap_or_default()),
        listen_peer_urls: list(
            &get("listen-peer-urls").unwrap_or_else(|| "http://localhost:2380".into()),
        ),
        initial_advertise_peer_urls,
        quota_backend_bytes,
        version,
        ignored,
        name,
    })
}

/// `--initial-cluster`'s `name=url,name=url` pairs.
pub fn parse_initial_cluster(text: &str) -> Result<Vec<(String, String)>, String> {
    list(text)
        .into_iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(n, u)| (n.to_string(), u.to_string()))
                .ok_or_else(|| format!("invalid --initial-cluster entry {pair:?}"))
        })
        .collect()
}

/// The initial members, each name once with all its peer URLs, in the order first given.
pub fn initial_members(pairs: &[(String, String)]) -> Vec<(String, Vec<String>)> {
    let mut members: Vec<(String, Vec<String>)> = Vec::new();
    for (name, url) in pairs {
        match members.iter_mut().find(|(n, _)| n == name) {
            Some((_, urls)) => urls.push(url.clone()),
            None => members.push((name.clone(), vec![url.clone()])),
        }
    }
    members
}

/// Member `name`'s peer URLs, sorted, from `--initial-cluster`, which must list exactly its
/// `--initial-advertise-peer-urls` under its name (etcd refuses to bootstrap otherwise).
pub fn own_peer_urls(
    name: &str,
    initial: &[(String, String)],
    advertised: &[String],
) -> Result<Vec<String>, String> {
    let members = initial_members(initial);
    let (_, own) = members
        .iter()
        .find(|(n, _)| n == name)
        .ok_or_else(|| format!("--initial-cluster has no member named {name:?}"))?;
    let mut own = own.clone();
    own.sort();
    let mut advertised = advertised.to_vec();
    advertised.sort();
    if own != advertised {
        return Err(format!(
            "--initial-cluster has {own:?} for {name:?}, --initial-advertise-peer-urls says {advertised:?}"
        ));
    }
    Ok(own)
}

/// The socket address to listen on for a `http://host:port` URL (`localhost` is loopback).
/// `https` and `unix` URLs are refused: the simulator serves no TLS and no sockets yet.
pub fn listen_addr(url: &str) -> Result<String, String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        format!("{url}: only http:// URLs are simulated (no TLS, no unix sockets)")
    })?;
    let authority = rest.trim_end_matches('/');
    let (host, port) = authority
        .rsplit_once(':')
        .ok_or_else(|| format!("{url}: no port"))?;
    let host = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    Ok(format!("{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| a.to_string()).collect()
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn etcds_defaults() {
        let f = parse(Vec::new(), no_env).unwrap();
        assert_eq!(f.name, "default");
        assert_eq!(f.data_dir, "default.etcd");
        assert_eq!(
            f.initial_cluster,
            vec![("default".into(), "http://localhost:2380".into())]
        );
        assert_eq!(f.initial_cluster_token, "etcd-cluster");
        assert_eq!(f.initial_cluster_state, "new");
        assert_eq!(
            f.listen_client_urls,
            vec!["http://localhost:2379".to_string()]
        );
        assert!(f.listen_metrics_urls.is_empty());
        assert!(!f.version);
        assert_eq!(f.hub, None);
    }

    #[test]
    fn both_flag_syntaxes_and_unknown_flags() {
        let f = parse(
            args(&[
                "--name=m-0",
                "-data-dir",
                "/var/lib/etcd",
                "--initial-cluster",
                "m-0=http://a:2380,m-1=http://b:2380",
                "--snapshot-count=10000",
                "--enable-v2",
                "--auto-compaction-mode",
                "revision",
                "--listen-metrics-urls=http://0.0.0.0:2381",
                "--quota-backend-bytes=1024",
            ]),
            no_env,
        )
        .unwrap();
        assert_eq!(f.name, "m-0");
        assert_eq!(f.data_dir, "/var/lib/etcd");
        assert_eq!(f.initial_cluster.len(), 2);
        assert_eq!(
            f.listen_metrics_urls,
            vec!["http://0.0.0.0:2381".to_string()]
        );
        assert_eq!(f.quota_backend_bytes, Some(1024));
        assert_eq!(
            f.ignored,
            vec!["snapshot-count", "enable-v2", "auto-compaction-mode"]
        );
    }

    #[test]
    fn flags_win_over_the_environment() {
        let env = |k: &str| match k {
            "ETCD_NAME" => Some("from-env".to_string()),
            "ETCD_INITIAL_CLUSTER_TOKEN" => Some("tok".to_string()),
            _ => None,
        };
        let f = parse(args(&["--name", "from-flag"]), env).unwrap();
        assert_eq!(f.name, "from-flag");
        assert_eq!(f.initial_cluster_token, "tok");
        assert_eq!(
            f.initial_cluster,
            vec![("from-flag".into(), "http://localhost:2380".into())]
        );
    }

    #[test]
    fn the_hub_comes_from_its_flag_or_etcd_sim_hub() {
        let env = |k: &str| (k == "ETCD_SIM_HUB").then(|| "10.0.0.1:2300".to_string());
        assert_eq!(
            parse(Vec::new(), env).unwrap().hub.as_deref(),
            Some("10.0.0.1:2300")
        );
        let f = parse(args(&["--hub", "127.0.0.1:1", "--name=a"]), env).unwrap();
        assert_eq!(f.hub.as_deref(), Some("127.0.0.1:1"));
        assert_eq!(f.name, "a");
        assert!(f.ignored.is_empty());
        // ETCD_HUB is not read: the hub is no etcd flag.
        let etcd_style = |k: &str| (k == "ETCD_HUB").then(|| "x:1".to_string());
        assert_eq!(parse(Vec::new(), etcd_style).unwrap().hub, None);
    }

    #[test]
    fn own_peer_urls_must_match_the_advertised_ones() {
        let pairs = parse_initial_cluster("a=http://y:1,b=http://z:1,a=http://x:1").unwrap();
        let both = vec!["http://x:1".to_string(), "http://y:1".to_string()];
        assert_eq!(own_peer_urls("a", &pairs, &both).unwrap(), both);
        assert!(own_peer_urls("a", &pairs, &both[..1]).is_err());
        assert!(own_peer_urls("c", &pairs, &both).is_err());
    }

    #[test]
    fn bad_command_lines_are_refused() {
        assert!(parse(args(&["positional"]), no_env).is_err());
        assert!(parse(args(&["--name"]), no_env).is_err());
        assert!(parse(args(&["--initial-cluster=nonsense"]), no_env).is_err());
        assert!(parse(args(&["--initial-cluster-state=maybe"]), no_env).is_err());
        assert!(parse(args(&["--quota-backend-bytes=lots"]), no_env).is_err());
        assert!(parse(args(&["--version"]), no_env).unwrap().version);
    }

    #[test]
    fn initial_members_group_urls_by_name() {
        let pairs = parse_initial_cluster("a=http://x:1,b=http://y:1,a=http://z:1").unwrap();
        let members = initial_members(&pairs);
        assert_eq!(members.len(), 2);
        assert_eq!(
            members[0],
            ("a".into(), vec!["http://x:1".into(), "http://z:1".into()])
        );
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(
            listen_addr("http://localhost:2379").unwrap(),
            "127.0.0.1:2379"
        );
        assert_eq!(listen_addr("http://0.0.0.0:2381/").unwrap(), "0.0.0.0:2381");
        assert_eq!(listen_addr("http://[::1]:2379").unwrap(), "[::1]:2379");
        assert!(listen_addr("https://a:2379").is_err());
        assert!(listen_addr("http://a").is_err());
    }
}
