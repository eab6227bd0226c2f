//! The cluster network with real namespaces, veth pairs, DNS and proxy (needs root).
//!
//! Pods here are bare network namespaces with listeners opened from a thread that joined them;
//! the runtime tests run real processes in them.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener as StdTcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_sandbox::network::dns::{EndpointDns, PortDns, PortProtocol, ServiceDns};
use kube_sandbox::network::{
    ClusterNetwork, ClusterNetworkConfig, ClusterNetworkInfo, Impairment, NetNamespace,
    NetworkError,
};
use nix::sched::{CloneFlags, setns};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Fails to compile unless the future is `Send` (the node agent spawns these on tokio).
fn sendable<F: std::future::Future + Send>(future: F) -> F {
    future
}

async fn network(dir: &tempfile::TempDir) -> ClusterNetwork {
    sendable(ClusterNetwork::create(ClusterNetworkConfig::new(
        dir.path(),
    )))
    .await
    .expect("create the cluster network (run the tests as root)")
}

/// Runs `job` on a new thread that joined `namespace`, as a process of the Pod would run.
fn inside<R: Send + 'static>(
    namespace: Arc<NetNamespace>,
    job: impl FnOnce() -> R + Send + 'static,
) -> R {
    std::thread::spawn(move || {
        setns(namespace.as_ref(), CloneFlags::CLONE_NEWNET).expect("join the Pod namespace");
        job()
    })
    .join()
    .expect("thread inside the namespace")
}

/// A server in `namespace` on 0.0.0.0:`port` that greets every connection with `greeting`.
fn greet_from(namespace: Arc<NetNamespace>, port: u16, greeting: &'static str) {
    let listener = inside(namespace, move || {
        StdTcpListener::bind(("0.0.0.0", port)).expect("bind")
    });
    listener.set_nonblocking(true).unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.write_all(greeting.as_bytes()).await;
        }
    });
}

async fn greeting_of(stream: std::io::Result<tokio::net::TcpStream>) -> String {
    let mut stream = stream.expect("connect");
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut text))
        .await
        .expect("greeting in time")
        .expect("read greeting");
    text
}

/// Connects to `target` from the calling thread's namespace and reads until the server closes,
/// each step within 2 s (a stale ARP entry or a missing route never answers).
fn read_within_2s(target: &SocketAddr) -> Result<String, String> {
    let mut stream = std::net::TcpStream::connect_timeout(target, Duration::from_secs(2))
        .map_err(|error| format!("connect: {error}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .map_err(|error| format!("read: {error}"))?;
    Ok(text)
}

fn headless(name: &str, pods: &[(&str, Ipv4Addr)]) -> ServiceDns {
    ServiceDns {
        namespace: "default".into(),
        name: name.into(),
        cluster_ip: None,
        ports: vec![PortDns {
            name: "client".into(),
            protocol: PortProtocol::Tcp,
            port: 2379,
        }],
        endpoints: pods
            .iter()
            .map(|(hostname, ip)| EndpointDns {
                ip: *ip,
                hostname: Some(hostname.to_string()),
                ready: true,
            })
            .collect(),
        publish_not_ready_addresses: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pods_bind_the_same_port_and_are_reached_by_dns_name() {
    let dir = tempfile::tempdir().unwrap();
    let network = network(&dir).await;
    let a = network.attach_pod().await.unwrap();
    let b = network.attach_pod().await.unwrap();
    assert_ne!(a.ip(), b.ip());
    assert!(network.config().pod_cidr.contains(a.ip()));
    greet_from(a.namespace(), 2379, "from a");
    greet_from(b.namespace(), 2379, "from b");
    network.dns().set_service(headless(
        "members",
        &[("member-a", a.ip()), ("member-b", b.ip())],
    ));

    let found = sendable(network.lookup("member-b.members.default.svc")).await;
    assert_eq!(found.unwrap(), vec![b.ip()]);
    assert_eq!(
        greeting_of(
            network
                .connect_host("member-a.members.default.svc.cluster.local.", 2379)
                .await
        )
        .await,
        "from a"
    );

    // From inside Pod a, with the plain socket API: b by address, across the bridge.
    let b_ip = b.ip();
    let from_a = inside(a.namespace(), move || {
        let mut stream = std::net::TcpStream::connect((b_ip, 2379)).unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    });
    assert_eq!(from_a, "from b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_in_the_cluster_network_use_the_cluster_dns() {
    let dir = tempfile::tempdir().unwrap();
    let network = network(&dir).await;
    let pod = network.attach_pod().await.unwrap();
    network
        .dns()
        .set_service(headless("db", &[("db-0", pod.ip())]));
    let host_resolv_conf = std::fs::read_to_string("/etc/resolv.conf").unwrap();

    // As `kube-sandbox exec --dir DIR` does: only the state directory is known.
    let info = ClusterNetworkInfo::load(dir.path()).unwrap();
    let output = tokio::task::spawn_blocking(move || {
        info.command("getent")
            .unwrap()
            .args(["hosts", "db-0.db.default.svc.cluster.local"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(output.status.success(), "getent failed: {output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).starts_with(&pod.ip().to_string()));

    let output = network
        .command("ip")
        .unwrap()
        .args(["-4", "-o", "addr"])
        .output()
        .unwrap();
    let addresses = String::from_utf8_lossy(&output.stdout);
    assert!(
        addresses.contains(&format!("{}/16", network.gateway())),
        "{addresses}"
    );
    assert_eq!(
        std::fs::read_to_string("/etc/resolv.conf").unwrap(),
        host_resolv_conf
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_proxy_balances_and_follows_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let network = network(&dir).await;
    let a = network.attach_pod().await.unwrap();
    let b = network.attach_pod().await.unwrap();
    greet_from(a.namespace(), 8080, "a");
    greet_from(b.namespace(), 8080, "b");
    let frontend = SocketAddrV4::new(Ipv4Addr::new(10, 96, 0, 50), 80);
    let endpoint = |ip: Ipv4Addr| SocketAddr::from((ip, 8080));
    sendable(
        network
            .proxy()
            .set_service(frontend, vec![endpoint(a.ip()), endpoint(b.ip())]),
    )
    .await
    .unwrap();

    // From a Pod, through its default route to the cluster network.
    let namespace = a.namespace();
    let seen = inside(namespace.clone(), move || {
        (0..4)
            .map(|_| {
                let mut text = String::new();
                std::net::TcpStream::connect(frontend)
                    .unwrap()
                    .read_to_string(&mut text)
                    .unwrap();
                text
            })
            .collect::<Vec<_>>()
    });
    assert_eq!(
        seen.iter().filter(|greeting| *greeting == "a").count(),
        2,
        "{seen:?}"
    );
    assert_eq!(
        seen.iter().filter(|greeting| *greeting == "b").count(),
        2,
        "{seen:?}"
    );

    network
        .proxy()
        .set_service(frontend, vec![endpoint(b.ip())])
        .await
        .unwrap();
    for _ in 0..3 {
        assert_eq!(
            greeting_of(network.connect(SocketAddr::V4(frontend)).await).await,
            "b"
        );
    }

    network
        .proxy()
        .set_service(frontend, Vec::new())
        .await
        .unwrap();
    assert_eq!(
        greeting_of(network.connect(SocketAddr::V4(frontend)).await).await,
        ""
    );
    network.proxy().remove_service(frontend);
    assert!(network.proxy().frontends().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_reach_a_server_on_the_machine_loopback_through_a_service() {
    let dir = tempfile::tempdir().unwrap();
    let network = network(&dir).await;
    let pod = network.attach_pod().await.unwrap();
    // As the API server: listening on the machine's loopback only.
    let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api_address = api.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = api.accept().await {
            let _ = stream.write_all(b"apiserver").await;
        }
    });
    let kubernetes = SocketAddrV4::new(Ipv4Addr::new(10, 96, 0, 1), 443);
    network
        .proxy()
        .set_service_to_machine(kubernetes, api_address)
        .await
        .unwrap();
    let seen = inside(pod.namespace(), move || {
        let mut text = String::new();
        std::net::TcpStream::connect(kubernetes)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text
    });
    assert_eq!(seen, "apiserver");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_cut_a_pod_off_and_heal() {
    let dir = tempfile::tempdir().unwrap();
    let network = network(&dir).await;
    let a = network.attach_pod().await.unwrap();
    let b = network.attach_pod().await.unwrap();
    greet_from(a.namespace(), 2380, "a");
    greet_from(b.namespace(), 2380, "b");
    let a_address = SocketAddr::from((a.ip(), 2380));
    let b_address = SocketAddr::from((b.ip(), 2380));
    // Positive checks get time to spare on a loaded machine; a cut link never connects.
    let connects_within = |address, limit| {
        let sockets = network.sockets().clone();
        async move {
            matches!(
                tokio::time::timeout(limit, sockets.connect(address)).await,
                Ok(Ok(_))
            )
        }
    };
    let reachable = |address| connects_within(address, Duration::from_secs(5));
    let unreachable = async |address| !connects_within(address, Duration::from_millis(700)).await;
    assert!(reachable(a_address).await);

    a.set_link_up(false).await.unwrap();
    assert!(unreachable(a_address).await);
    assert!(reachable(b_address).await);
    a.set_link_up(true).await.unwrap();
    // Healing takes a neighbour lookup and maybe a SYN retransmission: a few seconds at most.
    assert!(reachable(a_address).await);

    // A partition between two Pods only: a cannot reach b, the cluster still reaches both.
    a.block_peer(b.ip()).await.unwrap();
    let blocked = inside(a.namespace(), move || {
        std::net::TcpStream::connect_timeout(&b_address, Duration::from_millis(700)).is_err()
    });
    assert!(blocked);
    assert!(reachable(b_address).await);
    a.unblock_peer(b.ip()).await.unwrap();
    let healed = inside(a.namespace(), move || {
        std::net::TcpStream::connect_timeout(&b_address, Duration::from_secs(5)).is_ok()
    });
    assert!(healed);

    // Delay with netem where the kernel has it; otherwise a clear error.
    match a
        .set_impairment(Impairment {
            delay: Duration::from_millis(200),
            ..Default::default()
        })
        .await
    {
        Ok(()) => {
            let started = Instant::now();
            let _ = greeting_of(network.connect(a_address).await).await;
            assert!(started.elapsed() >= Duration::from_millis(200));
            a.clear_impairment().await.unwrap();
        }
        Err(NetworkError::Unsupported(reason)) => assert!(reason.contains("netem")),
        Err(other) => panic!("unexpected error from netem: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_networks_in_one_process_do_not_collide() {
    let dir_one = tempfile::tempdir().unwrap();
    let dir_two = tempfile::tempdir().unwrap();
    let one = network(&dir_one).await;
    let two = network(&dir_two).await;
    let pod_one = one.attach_pod().await.unwrap();
    let pod_two = two.attach_pod().await.unwrap();
    assert_eq!(
        pod_one.ip(),
        pod_two.ip(),
        "same ranges, same first address"
    );
    greet_from(pod_one.namespace(), 2379, "one");
    greet_from(pod_two.namespace(), 2379, "two");
    let address = SocketAddr::from((pod_one.ip(), 2379));
    assert_eq!(greeting_of(one.connect(address).await).await, "one");
    assert_eq!(greeting_of(two.connect(address).await).await, "two");
    assert_ne!(one.namespace().inode(), two.namespace().inode());
}

/// Open descriptors with what they point to.
fn open_descriptors() -> Vec<String> {
    let mut all: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .map(|target| target.display().to_string())
        .collect();
    all.sort();
    all
}

fn host_interfaces() -> String {
    std::fs::read_to_string("/proc/net/dev")
        .unwrap()
        .lines()
        .map(|line| line.split(':').next().unwrap_or("").trim().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

fn netns_of_this_process() -> String {
    std::fs::read_link("/proc/self/ns/net")
        .unwrap()
        .display()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn dropping_the_network_leaves_nothing_behind() {
    // tokio's process-wide signal pipe comes with the first child process and stays.
    tokio::process::Command::new("true").status().await.unwrap();
    let before_fds = open_descriptors();
    let host_netns = netns_of_this_process();
    let host_links = host_interfaces();
    let host_routes = std::fs::read_to_string("/proc/net/route").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let network = network(&dir).await;
    let pod = network.attach_pod().await.unwrap();
    let frontend = SocketAddrV4::new(Ipv4Addr::new(10, 96, 0, 60), 80);
    network
        .proxy()
        .set_service(frontend, vec![SocketAddr::from((pod.ip(), 80))])
        .await
        .unwrap();
    assert_eq!(
        network.lookup("kubernetes").await.unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
    assert!(dir.path().join(ClusterNetworkInfo::FILE_NAME).exists());
    // The bridge and veth pairs live in the cluster's namespace, not in the machine's.
    assert_eq!(host_interfaces(), host_links);
    assert_eq!(
        std::fs::read_to_string("/proc/net/route").unwrap(),
        host_routes
    );
    let netns_path = network.info().netns_path.clone();
    drop(pod);
    drop(network);
    // Aborted server tasks release their sockets on the runtime's next turn.
    tokio::time::sleep(Duration::from_millis(200)).await;

    assert!(!dir.path().join(ClusterNetworkInfo::FILE_NAME).exists());
    assert!(!dir.path().join("resolv.conf").exists());
    assert!(!netns_path.exists(), "the network's thread is gone");
    assert_eq!(open_descriptors(), before_fds);
    assert_eq!(netns_of_this_process(), host_netns);
    assert_eq!(host_interfaces(), host_links);
}

/// Regression for the operator Pod's stalls during Pod churn: a Linux bridge without a MAC of
/// its own takes the lowest MAC of its ports and changes it as Pods come and go, and every Pod's
/// ARP entry for the gateway (the API server, DNS and Services) then points at a MAC nobody
/// answers for until it expires, 30 s and more. The bridge keeps one MAC, derived from its
/// address, and a Pod that stays reaches the gateway at once after each departure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_coming_and_going_never_cut_the_others_off_the_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let network = network(&dir).await;
    let bridge = network.config().bridge_name.clone();
    let bridge_mac = || {
        let output = network
            .command("ip")
            .unwrap()
            .args(["-br", "link", "show", &bridge])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        text.split_whitespace()
            .nth(2)
            .unwrap_or_default()
            .to_string()
    };
    let gateway = SocketAddr::from((network.gateway(), 7070));
    let listener = network.sockets().bind_tcp(gateway).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.write_all(b"gateway").await;
        }
    });
    // From inside a Pod: the gateway answers within 2 s (a stale ARP entry never does).
    let reaches = |namespace: Arc<NetNamespace>| {
        inside(namespace, move || {
            read_within_2s(&gateway).map_err(|error| format!("the gateway: {error}"))
        })
    };

    let wanted = kube_sandbox::network::mac_for(network.gateway());
    let staying = network.attach_pod().await.unwrap();
    assert_eq!(reaches(staying.namespace()), Ok("gateway".to_string()));
    for round in 0..8 {
        let passing = network.attach_pod().await.unwrap();
        assert_eq!(bridge_mac(), wanted, "round {round}: a Pod came");
        assert_eq!(reaches(passing.namespace()), Ok("gateway".to_string()));
        // The staying Pod resolves the gateway afresh, as it does whenever its ARP entry
        // ages (every 30 s or so): it learns whatever MAC the bridge has now.
        let flushed = inside(staying.namespace(), || {
            std::process::Command::new("ip")
                .args(["neigh", "flush", "all"])
                .status()
        });
        assert!(flushed.unwrap().success(), "ip neigh flush in the Pod");
        assert_eq!(reaches(staying.namespace()), Ok("gateway".to_string()));
        drop(passing);
        assert_eq!(bridge_mac(), wanted, "round {round}: a Pod went");
        assert_eq!(
            reaches(staying.namespace()),
            Ok("gateway".to_string()),
            "round {round}: the staying Pod after another one went"
        );
    }
}

/// A Linux bridge takes at most 1,023 ports, and issue 29's scale run puts 3,000 Pods on one
/// network: past `pods_per_bridge` Pods the network chains another bridge to the first. Pods on
/// every bridge reach each other and the gateway, and a departed Pod's place is used again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_beyond_one_bridge_share_one_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ClusterNetworkConfig::new(dir.path());
    config.pods_per_bridge = 2;
    let network = ClusterNetwork::create(config).await.unwrap();
    let bridge_of = |link: &str| {
        let output = network
            .command("ip")
            .unwrap()
            .args(["-o", "link", "show", link])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        let words: Vec<&str> = text.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "master");
        at.map(|i| words[i + 1].to_string())
            .unwrap_or_else(|| format!("no master in {text:?}"))
    };
    let mut pods = Vec::new();
    for _ in 0..5 {
        pods.push(network.attach_pod().await.unwrap());
    }
    let bridges: Vec<String> = pods.iter().map(|p| bridge_of(p.host_link())).collect();
    assert_eq!(bridges, ["cbr0", "cbr0", "sbr1", "sbr1", "sbr2"]);

    let gateway = SocketAddr::from((network.gateway(), 7070));
    let listener = network.sockets().bind_tcp(gateway).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.write_all(b"gateway").await;
        }
    });
    for (i, pod) in pods.iter().enumerate() {
        greet_from(pod.namespace(), 2379, ["p0", "p1", "p2", "p3", "p4"][i]);
    }
    let targets: Vec<SocketAddr> = std::iter::once(gateway)
        .chain(pods.iter().map(|p| SocketAddr::from((p.ip(), 2379))))
        .collect();
    for (i, pod) in pods.iter().enumerate() {
        let targets = targets.clone();
        let heard = inside(pod.namespace(), move || {
            targets
                .iter()
                .map(|target| read_within_2s(target).map_err(|e| format!("{target}: {e}")))
                .collect::<Result<Vec<_>, _>>()
        });
        assert_eq!(
            heard,
            Ok(["gateway", "p0", "p1", "p2", "p3", "p4"]
                .map(String::from)
                .to_vec()),
            "from Pod {i} on {}",
            bridges[i]
        );
    }
    // The connections the cluster network makes (the sandbox's probes) reach the last bridge.
    assert_eq!(greeting_of(network.connect(targets[5]).await).await, "p4");

    // A Pod leaves the first bridge: the next one takes its place there.
    drop(pods.remove(1));
    let next = network.attach_pod().await.unwrap();
    assert_eq!(bridge_of(next.host_link()), "cbr0");
    let sixth = network.attach_pod().await.unwrap();
    assert_eq!(bridge_of(sixth.host_link()), "sbr2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_per_bridge_beyond_the_kernel_limit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ClusterNetworkConfig::new(dir.path());
    config.pods_per_bridge = 1023;
    match ClusterNetwork::create(config).await {
        Err(NetworkError::Config(message)) => assert!(
            message.contains("pods per bridge 1023 must be 1 to 1000"),
            "{message}"
        ),
        Err(other) => panic!("another error: {other}"),
        Ok(_) => panic!("a network with 1,023 Pods per bridge was made"),
    }
}
