//! `etcd-sim`, in one of three modes:
//!
//! - `etcd-sim <etcd's flags>`: one simulated member of its own ([`etcd_sim::single`]);
//! - `etcd-sim hub --listen ADDR`: the hub holding every cluster ([`etcd_sim::hub`]);
//! - `etcd-sim --hub ADDR <etcd's flags>`, or `ETCD_SIM_HUB=ADDR` in the environment: one
//!   member of a cluster the hub holds ([`etcd_sim::front`]).
//!
//! Each serves until SIGTERM or SIGINT.

use std::process::ExitCode;

use etcd_sim::flags::EtcdFlags;
use etcd_sim::front::Front;
use etcd_sim::server::terminated;
use etcd_sim::state::VERSION;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "hub") {
        return etcd_sim::hub::main(&args[1..]).await;
    }
    let flags = match etcd_sim::flags::parse(args, |k| std::env::var(k).ok()) {
        Ok(flags) => flags,
        Err(e) => {
            eprintln!("etcd-sim: {e}");
            return ExitCode::from(2);
        }
    };
    if flags.version {
        println!(
            "etcd Version: {VERSION}\nGit SHA: etcd-sim\nGo Version: none\nGo OS/Arch: simulated"
        );
        return ExitCode::SUCCESS;
    }
    match flags.hub.clone() {
        Some(hub) => front(&hub, &flags).await,
        None => single(&flags).await,
    }
}

async fn single(flags: &EtcdFlags) -> ExitCode {
    let server = match etcd_sim::single::start(flags).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("etcd-sim: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(
        name = %flags.name,
        member = %format!("{:x}", server.id()),
        listening = ?server.addrs(),
        ignored = ?flags.ignored,
        "ready to serve client requests"
    );
    terminated().await;
    server.stop();
    ExitCode::SUCCESS
}

async fn front(hub: &str, flags: &EtcdFlags) -> ExitCode {
    let mut front = match Front::start(hub, flags).await {
        Ok(front) => front,
        Err(e) => {
            eprintln!("etcd-sim: {e}");
            return ExitCode::FAILURE;
        }
    };
    let registered = front.registered();
    tracing::info!(
        name = %flags.name,
        member = %format!("{:x}", registered.member_id),
        cluster = %format!("{:x}", registered.cluster_id),
        hub = %hub,
        listening = ?front.addrs(),
        ignored = ?flags.ignored,
        "ready to serve client requests (through the hub)"
    );
    tokio::select! {
        _ = terminated() => ExitCode::SUCCESS,
        reason = front.ended() => {
            eprintln!("etcd-sim: {reason}");
            ExitCode::FAILURE
        }
    }
}
