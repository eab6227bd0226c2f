//! What a kept etcd connection costs in the operator's resident memory (issue 29, items 5 and 6).
//!
//! The operator keeps one connection per member endpoint across passes (`EtcdConnections`), so
//! at 1,000 clusters of 3 members it holds 3,000 of them. This benchmark opens
//! `CONNECTIONS_BENCH_N` kept connections to one real etcd through the operator's own pool
//! (each endpoint a different loopback address of the same etcd, which listens on 0.0.0.0),
//! makes `CONNECTIONS_BENCH_PASSES` observation-like passes over them (Status, then MemberList),
//! and prints the process's resident memory per connection. The floor, measured in the same
//! run, is the same number of bare connections: a tonic channel and an `etcd-client` client
//! over it, making the same calls, with nothing of the operator's around them. Each side runs
//! in a process of its own (this binary again), so neither inherits the other's heap.
//!
//! ```sh
//! cargo bench -p etcd-operator --bench connections
//! ```
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `CONNECTIONS_BENCH_N` | 1000 | connections (endpoints) |
//! | `CONNECTIONS_BENCH_PASSES` | 20 | Status + MemberList calls on each connection |
//! | `CONNECTIONS_BENCH_VERSION` | 3.6.17 | the etcd version (`/usr/local/lib/etcd-<v>/etcd`) |
//! | `CONNECTIONS_BENCH_KEPT` | N | the pool's limit (`--etcd-connections-kept`); under N, a third side runs: the pool at that limit, its dials and time beside |

#[path = "common/mod.rs"]
mod bench_support;
use etcd_operator_e2e_support::loopback;

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bench_support::env_or;
use etcd_operator::etcd::{EtcdAccess, EtcdConnections, Timeouts};

const SIDE: &str = "CONNECTIONS_BENCH_SIDE";
const PORT: &str = "CONNECTIONS_BENCH_PORT";

fn main() {
    if let Ok(side) = std::env::var(SIDE) {
        let port: u16 = env_or(PORT, 0);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(measure(&side, port));
        return;
    }
    let version: String = env_or("CONNECTIONS_BENCH_VERSION", "3.6.17".to_string());
    let n: usize = env_or("CONNECTIONS_BENCH_N", 1000);
    let passes: usize = env_or("CONNECTIONS_BENCH_PASSES", 20);
    let etcd = Etcd::start(&version);
    println!("{n} kept connections to one etcd {version}, {passes} passes (Status + MemberList)");
    println!("| side | RSS before | RSS after | per connection |");
    println!("|---|---:|---:|---:|");
    let kept: usize = env_or("CONNECTIONS_BENCH_KEPT", n);
    let floor = run_side("floor", etcd.port);
    let pool = run_side("pool", etcd.port);
    println!("| bare tonic channel + etcd-client (floor) | {floor} |");
    println!("| the operator's EtcdConnections | {pool} |");
    if kept < n {
        let limited = run_side("limited", etcd.port);
        println!("| EtcdConnections, at most {kept} kept | {limited} |");
    }
}

/// Runs one side in a process of its own; its one line of figures.
fn run_side(side: &str, port: u16) -> String {
    let output = Command::new(std::env::current_exe().expect("this benchmark"))
        .env(SIDE, side)
        .env(PORT, port.to_string())
        .stderr(Stdio::inherit())
        .output()
        .expect("run a side");
    assert!(output.status.success(), "the {side} side failed");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// The `index`th endpoint: a distinct loopback address (127.1.x.y) of the same etcd.
fn endpoint(index: usize, port: u16) -> String {
    let ip = Ipv4Addr::new(127, 1, (index / 250) as u8, (index % 250 + 1) as u8);
    format!("http://{ip}:{port}")
}

async fn measure(side: &str, port: u16) {
    let n: usize = env_or("CONNECTIONS_BENCH_N", 1000);
    let passes: usize = env_or("CONNECTIONS_BENCH_PASSES", 20);
    let timeouts = Timeouts {
        connect: Duration::from_secs(5),
        request: Duration::from_secs(5),
    };
    let access = EtcdAccess::default();
    // One connection first, so one-time allocations (the runtime's, the pool's) are not counted.
    let pool = if side == "limited" {
        // Entries dialled past the limit live 5 s unused: passes here come faster than that,
        // so their life is shortened to close them between passes, as between looks 30 s apart.
        EtcdConnections::with_limit_and_passing(
            env_or("CONNECTIONS_BENCH_KEPT", n),
            Duration::from_millis(1),
        )
    } else {
        EtcdConnections::with_limit(usize::MAX)
    };
    let warm = pool
        .endpoint(&endpoint(n, port), timeouts, &access)
        .await
        .expect("warm-up connection");
    warm.status().await.expect("Status");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_kib();
    let started = Instant::now();
    let mut bare = Vec::new();
    for pass in 0..passes {
        for i in 0..n {
            let url = endpoint(i, port);
            if side != "floor" {
                let client = pool.endpoint(&url, timeouts, &access).await.expect("kept");
                client.status().await.expect("Status");
                client.member_list().await.expect("MemberList");
            } else {
                if pass == 0 {
                    let channel = tonic::transport::Endpoint::from_shared(url)
                        .expect("endpoint")
                        .connect_timeout(timeouts.connect)
                        .timeout(timeouts.request)
                        .connect()
                        .await
                        .expect("connect");
                    let client = etcd_client::Client::from_channel(
                        etcd_client::Channel::Tonic(channel),
                        None,
                    )
                    .await
                    .expect("client");
                    bare.push(client);
                }
                let client: &mut etcd_client::Client = &mut bare[i];
                client.status().await.expect("Status");
                client.member_list().await.expect("MemberList");
            }
        }
    }
    let elapsed = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib();
    if side == "pool" {
        assert_eq!(pool.len(), n + 1, "one kept entry per endpoint");
    }
    let dials = if side == "floor" {
        String::new()
    } else {
        format!(", {} kept, {} dials", pool.kept_len(), pool.dials())
    };
    println!(
        "{before} KiB | {after} KiB | {:.1} KiB ({:.2} s of calls{dials})",
        (after.saturating_sub(before)) as f64 / n as f64,
        elapsed.as_secs_f64()
    );
    drop(warm);
}

fn rss_kib() -> u64 {
    bench_support::try_memory_mib(std::process::id(), "VmRSS:")
        .map(|mib| (mib * 1024.0) as u64)
        .expect("VmRSS")
}

/// One etcd listening on every address, so each 127.1.x.y is a separate endpoint of it.
struct Etcd {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Etcd {
    fn start(version: &str) -> Etcd {
        let dir = tempfile::tempdir().expect("temp dir");
        let ip = loopback::free_address();
        // A port free on every address: etcd listens on 0.0.0.0.
        let client = std::net::TcpListener::bind("0.0.0.0:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let binary = format!("/usr/local/lib/etcd-{version}/etcd");
        let peer = format!("http://{ip}:2380");
        let child = Command::new(&binary)
            .args([
                format!("--data-dir={}", dir.path().join("data").display()),
                format!("--listen-client-urls=http://0.0.0.0:{client}"),
                format!("--advertise-client-urls=http://{ip}:{client}"),
                format!("--listen-peer-urls={peer}"),
                format!("--initial-advertise-peer-urls={peer}"),
                format!("--initial-cluster=default={peer}"),
                format!("--listen-metrics-urls=http://{ip}:2381"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{binary}: {e} (run scripts/install-deps.sh)"));
        let etcd = Etcd {
            child,
            port: client,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect((ip, client)).is_err() {
            assert!(Instant::now() < deadline, "etcd did not listen within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        etcd
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
