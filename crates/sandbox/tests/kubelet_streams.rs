//! `pods/exec` and `pods/portforward` over WebSocket (needs root): kube-rs's `Api::exec` and
//! `Api::portforward`, and the real kubectl v1.32 (PATH) and v1.33 (install-deps.sh) `exec`.
//! kubectl's `exec -it` runs from a pseudo-terminal, as a person's would. kubectl's
//! `port-forward` speaks SPDY, tunnelled in a WebSocket (what v1.31 and newer send first) or by
//! a plain upgrade (`KUBECTL_PORT_FORWARD_WEBSOCKETS=false`): both are served, for a forward
//! that stays up under traffic past client-go's 10 s ping period.

mod kubelet_support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams};
use kubelet_support::{Forward, KUBECTL_133, http_get, kubectl};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const LIMIT: Duration = Duration::from_secs(60);

async fn read_all(reader: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let mut text = String::new();
    if let Some(mut reader) = reader {
        reader.read_to_string(&mut text).await.unwrap();
    }
    text
}

/// Runs `command` through kube-rs's exec with stdin `input` (closed after it); stdout,
/// stderr and the final Status.
async fn exec(pods: &Api<Pod>, command: &[&str], input: Option<&str>) -> (String, String, Status) {
    let params = AttachParams::default()
        .stdin(input.is_some())
        .stdout(true)
        .stderr(true);
    let mut attached = pods.exec("web", command.to_vec(), &params).await.unwrap();
    if let (Some(text), Some(mut stdin)) = (input, attached.stdin()) {
        stdin.write_all(text.as_bytes()).await.unwrap();
        stdin.shutdown().await.unwrap();
        drop(stdin);
    }
    let stdout = attached.stdout();
    let stderr = attached.stderr();
    let status = attached.take_status().unwrap();
    let (out, err) = tokio::join!(read_all(stdout), read_all(stderr));
    let status = tokio::time::timeout(LIMIT, status).await.unwrap().unwrap();
    (out, err, status)
}

/// Runs kubectl as a person at a terminal would: a pseudo-terminal of `rows`×`cols` is its
/// stdin and stdout; `input` is typed once it runs. Everything the terminal showed, and the
/// exit code.
async fn kubectl_on_terminal(
    binary: &str,
    kubeconfig: &std::path::Path,
    args: &[&str],
    (rows, cols): (u16, u16),
    input: &str,
) -> (String, Option<i32>) {
    use std::io::{Read, Write};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: libc calls on descriptors opened and owned here.
    let (master, slave) = unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
        let slave = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        assert!(
            slave >= 0,
            "open the terminal: {}",
            std::io::Error::last_os_error()
        );
        let window = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        assert_eq!(libc::ioctl(slave, libc::TIOCSWINSZ, &window), 0);
        (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave))
    };
    let mut child = std::process::Command::new(binary)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::from(slave.try_clone().unwrap()))
        .stdout(std::process::Stdio::from(slave.try_clone().unwrap()))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{binary} runs: {e}"));
    drop(slave);
    let mut typed = std::fs::File::from(master.try_clone().unwrap());
    let input = input.to_string();
    let mut screen = std::fs::File::from(master);
    let fd = screen.as_raw_fd();
    let reading = tokio::task::spawn_blocking(move || {
        std::thread::sleep(Duration::from_secs(2));
        typed.write_all(input.as_bytes()).unwrap();
        let mut shown = Vec::new();
        let mut buffer = [0u8; 4096];
        // The terminal reads EIO once kubectl, its only other holder, has exited.
        while let Ok(n) = screen.read(&mut buffer) {
            if n == 0 {
                break;
            }
            shown.extend_from_slice(&buffer[..n]);
        }
        let _ = fd;
        String::from_utf8_lossy(&shown).into_owned()
    });
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    let shown = tokio::time::timeout(LIMIT, reading)
        .await
        .expect("the terminal closes after kubectl")
        .unwrap();
    (shown, status.code())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_and_port_forward_over_websocket() {
    kubelet_support::require_binary(KUBECTL_133);
    let cluster = kubelet_support::start_with(kubelet_support::ClusterOptions {
        nodes: 1,
        ..Default::default()
    })
    .await;
    cluster.run_web("default", LIMIT).await;
    let pods = cluster.pods("default");

    // kube-rs exec: stdout, stderr and a non-zero exit code in the Status.
    let started = Instant::now();
    let (out, err, status) = exec(
        &pods,
        &["sh", "-c", "hostname; echo to-stderr >&2; exit 3"],
        None,
    )
    .await;
    eprintln!("kube-rs exec answered in {:?}", started.elapsed());
    assert_eq!(out, "web\n", "the command runs in the Pod's UTS namespace");
    assert_eq!(err, "to-stderr\n");
    assert_eq!(status.status.as_deref(), Some("Failure"), "{status:?}");
    assert_eq!(status.reason.as_deref(), Some("NonZeroExitCode"));
    let causes = status.details.and_then(|d| d.causes).unwrap_or_default();
    assert!(
        causes
            .iter()
            .any(|c| c.reason.as_deref() == Some("ExitCode") && c.message.as_deref() == Some("3")),
        "{causes:?}"
    );
    // Stdin, closed with v5's close signal, reaches the command; success is a Success status.
    let (out, _, status) = exec(&pods, &["sh", "-c", "tr a-z A-Z"], Some("piped in\n")).await;
    assert_eq!(out, "PIPED IN\n");
    assert_eq!(status.status.as_deref(), Some("Success"), "{status:?}");
    // A command that does not exist fails the same way a container runtime reports it.
    let missing = AttachParams::default().stdout(true).stderr(true);
    let mut attached = pods
        .exec("web", vec!["/no/such/program"], &missing)
        .await
        .map(Some)
        .unwrap_or(None);
    if let Some(attached) = attached.as_mut() {
        let status = attached.take_status().unwrap().await.unwrap();
        assert_ne!(status.status.as_deref(), Some("Success"), "{status:?}");
    }

    // kube-rs port-forward: an HTTP exchange with the Pod's server, twice at once.
    let exchange = |pods: Api<Pod>| async move {
        let mut forwarder = pods.portforward("web", &[8080]).await.unwrap();
        let mut stream = forwarder.take_stream(8080).unwrap();
        stream
            .write_all(b"GET / HTTP/1.0\r\nHost: web\r\n\r\n")
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        drop(stream);
        // The server closed the socket when the Pod closed its connection (as the kubelet
        // does); kube-rs then fails to send its own Close (SendAfterClosing), which is harmless.
        let _ = forwarder.join().await;
        response
    };
    let (first, second) = tokio::join!(exchange(pods.clone()), exchange(pods.clone()));
    for response in [first, second] {
        assert!(response.starts_with("HTTP/1.0 200"), "{response}");
        assert!(response.ends_with("\r\n\r\nweb"), "{response}");
    }
    // A port nothing listens on: the error channel says so.
    let mut forwarder = pods.portforward("web", &[9999]).await.unwrap();
    let error = forwarder.take_error(9999).unwrap().await;
    let error = error.expect("an error message for a closed port");
    assert!(error.contains("error forwarding port 9999"), "{error}");
    forwarder.abort();

    // The real kubectl exec, v1.32 and v1.33: output, stdin and the exit code.
    let kubeconfig = cluster.kubeconfig();
    for binary in ["kubectl", KUBECTL_133] {
        let output = kubectl(
            binary,
            &kubeconfig,
            &[
                "exec",
                "web",
                "--",
                "sh",
                "-c",
                "echo out $HOSTNAME; echo err >&2; exit 4",
            ],
            None,
        )
        .await;
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "out web\n",
            "{binary}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.starts_with("err\n"), "{binary}: {stderr}");
        assert_eq!(
            output.status.code(),
            Some(4),
            "{binary} exits with the command's code: {stderr}"
        );
        let output = kubectl(
            binary,
            &kubeconfig,
            &["exec", "-i", "web", "-c", "web", "--", "wc", "-l"],
            Some("one\ntwo\nthree\n"),
        )
        .await;
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            "3",
            "{binary}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success());
        let output = kubectl(
            binary,
            &kubeconfig,
            &["exec", "web", "-c", "nope", "--", "true"],
            None,
        )
        .await;
        assert!(!output.status.success());
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("nope"),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    // kubectl exec -it from a terminal: the command runs on a terminal of its own (stdin and
    // stdout are terminals, of kubectl's window size), reads what is typed, and its exit code
    // is kubectl's.
    for binary in ["kubectl", KUBECTL_133] {
        let (shown, code) = kubectl_on_terminal(
            binary,
            &kubeconfig,
            &[
                "exec",
                "-it",
                "web",
                "--",
                "sh",
                "-c",
                "test -t 0 && test -t 1 && echo on-a-terminal; stty size; read line; echo got:$line; exit 3",
            ],
            (33, 101),
            "hello\r",
        )
        .await;
        assert!(shown.contains("on-a-terminal"), "{binary}: {shown:?}");
        assert!(
            shown.contains("33 101"),
            "{binary}: the window size: {shown:?}"
        );
        assert!(shown.contains("got:hello"), "{binary}: {shown:?}");
        assert_eq!(code, Some(3), "{binary}: {shown:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forward_over_spdy() {
    kubelet_support::require_binary(KUBECTL_133);
    let cluster = kubelet_support::start_with(kubelet_support::ClusterOptions {
        nodes: 1,
        ..Default::default()
    })
    .await;
    cluster.run_web("default", LIMIT).await;
    let kubeconfig = cluster.kubeconfig();
    // v1.32 and v1.33 tunnel SPDY in a WebSocket; with the WebSocket off, v1.33 upgrades to
    // SPDY directly (the fallback kubectl takes against servers without the tunnel).
    let cases: [kubelet_support::ForwardCase; 3] = [
        ("kubectl", &[], 18081),
        (KUBECTL_133, &[], 18082),
        (
            KUBECTL_133,
            &[("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")],
            18083,
        ),
    ];
    for (binary, env, port) in cases {
        let forward = Forward::start(binary, &kubeconfig, &format!("{port}:8080"), env).await;
        // Traffic for 12 s (past client-go's first 10 s ping), four connections at a time.
        let started = Instant::now();
        let mut exchanges = 0;
        while started.elapsed() < Duration::from_secs(12) {
            let responses = futures::future::join_all((0..4).map(|_| http_get(port))).await;
            for response in responses {
                assert!(
                    response.starts_with("HTTP/1.0 200") && response.ends_with("\r\n\r\nweb"),
                    "{binary} {env:?}: {response:?}"
                );
                exchanges += 1;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let stderr = forward.stop().await;
        eprintln!(
            "{binary} {env:?}: {exchanges} exchanges in {:?}",
            started.elapsed()
        );
        assert!(exchanges >= 40, "{binary} {env:?}: {exchanges} exchanges");
        assert!(
            !stderr.contains("error") && !stderr.contains("lost connection"),
            "{binary} {env:?}: {stderr}"
        );
    }
    // A port nothing listens on: the error stream says so, and kubectl ends the forward.
    for (binary, env, port) in cases {
        let forward = Forward::start(binary, &kubeconfig, &format!("{port}:9999"), env).await;
        let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(LIMIT, socket.read_to_end(&mut rest)).await;
        let mut child = forward.child;
        let status = tokio::time::timeout(LIMIT, child.wait())
            .await
            .expect("kubectl ends the forward after the error")
            .unwrap();
        let stderr = forward.stderr.await.unwrap();
        assert!(!status.success(), "{binary} {env:?}: {stderr}");
        assert!(
            stderr.contains("error forwarding port 9999"),
            "{binary} {env:?}: {stderr}"
        );
    }
}
