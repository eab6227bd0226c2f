//! `pods/exec` and `pods/portforward` over WebSocket, as the kubelet serves them (and
//! kube-apiserver in front of it). Every binary message starts with a channel byte.
//!
//! - exec, `v5.channel.k8s.io` / `v4.channel.k8s.io`: 0 stdin, 1 stdout, 2 stderr, 3 the
//!   final `Status` (JSON; `NonZeroExitCode` with cause `ExitCode`), 4 terminal resize
//!   (`{"Width":W,"Height":H}`), and in v5 only 255 "close": `[255, 0]` closes the command's
//!   stdin. With `tty=true` the command runs on a pseudo-terminal, as the kubelet's runtime
//!   gives it one: the terminal is its stdin, stdout and stderr and its controlling terminal
//!   (a new session), its output (stderr merged) comes on channel 1, and resizes set its
//!   window size; the command starts once the first resize has set it (or after a second).
//! - port-forward, `v4.channel.k8s.io` (and the older `channel.k8s.io`): port *i* of the
//!   `ports` parameter gets data channel 2*i* and error channel 2*i*+1; the server first sends
//!   the port number (two bytes, little endian) on both, then the bytes of one TCP connection
//!   to the Pod's IP. The socket closes when every connection to the Pod has ended.
//!
//! - port-forward over SPDY/3.1 (`portforward.k8s.io`, see [`crate::streaming`]): kubectl 1.31
//!   and newer tunnel it inside a WebSocket (subprotocol `SPDY/3.1+portforward.k8s.io`) and
//!   fall back to a plain `Upgrade: SPDY/3.1`; both are served. exec is served over WebSocket
//!   only (kubectl 1.30 and newer, kube-rs).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::Body;
use futures::{SinkExt, StreamExt};
use http::{HeaderMap, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use crate::apiserver::error::{ApiError, ApiResult};
use crate::apiserver::streams::{ExecRequest, PodStreams};

const EXEC_PROTOCOLS: &[&str] = &["v5.channel.k8s.io", "v4.channel.k8s.io"];
const PORTFORWARD_PROTOCOLS: &[&str] = &["v4.channel.k8s.io", "channel.k8s.io"];
const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;
const CHUNK: usize = 32 * 1024;

/// Every value of a query parameter, in order (`command=a&command=b`), each also split on
/// commas when `split` (`ports=2379,2380`).
pub fn query_values(raw: &str, name: &str) -> Vec<String> {
    raw.split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .filter(|(key, _)| *key == name)
        .map(|(_, value)| {
            crate::apiserver::request::parse_query(Some(&format!("v={value}")))
                .remove("v")
                .unwrap_or_default()
        })
        .collect()
}

/// A pseudo-terminal for `exec -t`: the master stays with the API server, the slave is given
/// to the command. Both close on exec, so no other child inherits them.
struct Pty {
    master: std::os::fd::OwnedFd,
    slave: std::os::fd::OwnedFd,
}

fn open_pty() -> std::io::Result<Pty> {
    use std::os::fd::FromRawFd;
    let last = std::io::Error::last_os_error;
    // SAFETY: libc calls on descriptors this function opens and owns; `name` is a NUL-
    // terminated buffer ptsname_r fills.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        if master < 0 {
            return Err(last());
        }
        let master = std::os::fd::OwnedFd::from_raw_fd(master);
        use std::os::fd::AsRawFd;
        if libc::grantpt(master.as_raw_fd()) != 0 || libc::unlockpt(master.as_raw_fd()) != 0 {
            return Err(last());
        }
        let mut name = [0 as libc::c_char; 128];
        if libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()) != 0 {
            return Err(last());
        }
        let slave = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if slave < 0 {
            return Err(last());
        }
        Ok(Pty {
            master,
            slave: std::os::fd::OwnedFd::from_raw_fd(slave),
        })
    }
}

/// A resize message (`{"Width":W,"Height":H}`) applied to the terminal `fd`.
fn resize_terminal(fd: &std::os::fd::OwnedFd, message: &[u8]) {
    use std::os::fd::AsRawFd;
    let Ok(size) = serde_json::from_slice::<Value>(message) else {
        return;
    };
    let dimension = |key: &str| {
        size[key]
            .as_u64()
            .and_then(|v| u16::try_from(v).ok())
            .unwrap_or(0)
    };
    let window = libc::winsize {
        ws_row: dimension("Height"),
        ws_col: dimension("Width"),
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from a valid pointer; fd is open.
    unsafe {
        libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &window);
    }
}

/// Every value of header `name`, each also split on commas (`Upgrade`, `Sec-WebSocket-Protocol`
/// and `X-Stream-Protocol-Version` list several).
fn header_values(headers: &HeaderMap, name: &http::HeaderName) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
}

/// The subprotocol both sides speak, after checking this is a WebSocket handshake.
fn websocket_protocol(
    headers: &HeaderMap,
    supported: &[&'static str],
    what: &str,
) -> ApiResult<(&'static str, String)> {
    let header = |name: &http::HeaderName| header_values(headers, name);
    let upgrade = header(&http::header::UPGRADE);
    let offered = header(&http::header::SEC_WEBSOCKET_PROTOCOL);
    if !upgrade.iter().any(|u| u.eq_ignore_ascii_case("websocket")) {
        return Err(ApiError::bad_request(format!(
            "kube-sandbox serves {what} over WebSocket only (subprotocols {}), not over a SPDY upgrade (Upgrade: {}); use a client that speaks WebSocket (kube-rs, client-go's WebSocket executor, kubectl exec v1.30 or newer)",
            supported.join(", "),
            upgrade.join(", ")
        )));
    }
    let Some(key) = headers
        .get(http::header::SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
    else {
        return Err(ApiError::bad_request(
            "a WebSocket upgrade needs Sec-WebSocket-Key",
        ));
    };
    let Some(protocol) = supported.iter().find(|p| offered.iter().any(|o| o == *p)) else {
        return Err(ApiError::bad_request(format!(
            "kube-sandbox does not speak any of the WebSocket subprotocols offered for {what} ({}); it speaks {}{}",
            offered.join(", "),
            supported.join(", "),
            ""
        )));
    };
    Ok((
        protocol,
        tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes()),
    ))
}

fn switching_protocols(protocol: &str, accept: &str) -> Response<Body> {
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(http::header::UPGRADE, "websocket")
        .header(http::header::CONNECTION, "Upgrade")
        .header(http::header::SEC_WEBSOCKET_ACCEPT, accept)
        .header(http::header::SEC_WEBSOCKET_PROTOCOL, protocol)
        .body(Body::empty())
        .unwrap_or_default()
}

/// The WebSocket once the 101 has gone out.
async fn websocket(
    upgrade: hyper::upgrade::OnUpgrade,
) -> Option<WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>> {
    match upgrade.await {
        Ok(upgraded) => {
            Some(WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await)
        }
        Err(err) => {
            tracing::debug!(%err, "a WebSocket upgrade did not complete");
            None
        }
    }
}

fn normal_close() -> Message {
    Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    }))
}

fn frame(channel: u8, data: &[u8]) -> Message {
    let mut bytes = Vec::with_capacity(data.len() + 1);
    bytes.push(channel);
    bytes.extend_from_slice(data);
    Message::binary(bytes)
}

/// Answers an exec upgrade for `request`: negotiates the WebSocket channel protocol, prepares
/// the command (on a terminal with `tty`), takes the connection's upgrade and runs the command
/// over it once the 101 has gone out.
pub fn exec(
    headers: &HeaderMap,
    request: ExecRequest,
    streams: Arc<dyn PodStreams>,
    take_upgrade: impl FnOnce() -> ApiResult<hyper::upgrade::OnUpgrade>,
) -> ApiResult<Response<Body>> {
    let (protocol, accept) = websocket_protocol(headers, EXEC_PROTOCOLS, "pods/exec")?;
    let mut command = streams
        .exec_command(&request)
        .map_err(ApiError::bad_request)?;
    let piped = |on: bool| {
        if on {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        }
    };
    let pty = if request.tty {
        let pty = open_pty().map_err(|err| {
            ApiError::bad_request(format!("cannot allocate a TTY for the exec: {err}"))
        })?;
        let stdio = || {
            pty.slave
                .try_clone()
                .map(std::process::Stdio::from)
                .map_err(|err| ApiError::bad_request(format!("cannot allocate a TTY: {err}")))
        };
        command.stdin(stdio()?).stdout(stdio()?).stderr(stdio()?);
        // SAFETY: runs in the forked child before exec, after the container's namespaces are
        // joined; two system calls, no allocation.
        unsafe {
            use std::os::unix::process::CommandExt;
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Some(pty)
    } else {
        command
            .stdin(piped(request.stdin))
            .stdout(piped(request.stdout))
            .stderr(piped(request.stderr));
        None
    };
    let upgrade = take_upgrade()?;
    let mut command = tokio::process::Command::from(command);
    command.kill_on_drop(true);
    let close_signal = protocol == "v5.channel.k8s.io";
    let launch = match pty {
        // On a terminal the command starts once the client's window size is set (below).
        Some(pty) => Launch::OnTerminal(command, pty),
        None => {
            let child = command
                .spawn()
                .map_err(|err| ApiError::bad_request(spawn_failure(&request, &err)))?;
            Launch::Started(child)
        }
    };
    tokio::spawn(async move {
        let Some(socket) = websocket(upgrade).await else {
            if let Launch::Started(mut child) = launch {
                let _ = child.kill().await;
            }
            return;
        };
        run_exec(socket, launch, close_signal, request).await;
    });
    Ok(switching_protocols(protocol, &accept))
}

fn spawn_failure(request: &ExecRequest, err: &std::io::Error) -> String {
    format!(
        "failed to exec in container {}: {}: {err}",
        request.container, request.command[0]
    )
}

/// How long a command on a terminal waits for the client's first window size. kubectl sends
/// it as soon as the socket is up; a client that sends none (kube-rs without a size) gets
/// the command after this, on a terminal of size 0 0.
const WINDOW_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The exec's command: started before the upgrade, or (with `tty`) started by `run_exec`
/// once the terminal has the client's window size. The kubelet's runtime sets the size
/// before the process starts; started at once, a command such as `stty size` raced the
/// client's first resize message and saw `0 0`.
enum Launch {
    Started(tokio::process::Child),
    OnTerminal(tokio::process::Command, Pty),
}

async fn pump(
    mut reader: impl tokio::io::AsyncRead + Unpin,
    channel: u8,
    out: mpsc::Sender<Message>,
) {
    let mut buffer = vec![0u8; CHUNK];
    loop {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if out.send(frame(channel, &buffer[..n])).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The `Status` written on the error channel when the command ends, as the kubelet writes it.
fn exit_status(request: &ExecRequest, status: std::process::ExitStatus) -> Value {
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    if code == 0 {
        return json!({"metadata": {}, "status": "Success"});
    }
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "command terminated with non-zero exit code: error executing command {:?}, exit code {code}",
            request.command
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

async fn run_exec<S>(
    socket: WebSocketStream<S>,
    launch: Launch,
    close_signal: bool,
    request: ExecRequest,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, incoming) = socket.split();
    let (out, mut outgoing) = mpsc::channel::<Message>(16);
    let writer = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            if sink.send(message).await.is_err() {
                return;
            }
        }
        // A normal closure (1000): client-go reads a close without a status (1005) as an error.
        let _ = sink.send(normal_close()).await;
        let _ = sink.close().await;
    });
    let mut incoming = incoming.boxed();
    let (mut child, terminal) = match launch {
        Launch::Started(child) => (child, None),
        Launch::OnTerminal(mut command, Pty { master, slave }) => {
            // Messages before the first resize (typed input, a close) are kept for the reader.
            let mut early = Vec::new();
            let _ = tokio::time::timeout(WINDOW_WAIT, async {
                while let Some(message) = incoming.next().await {
                    match message {
                        Ok(Message::Binary(bytes)) if bytes.first() == Some(&RESIZE) => {
                            resize_terminal(&master, &bytes[1..]);
                            return;
                        }
                        Ok(Message::Close(_)) | Err(_) => {
                            early.push(message);
                            return;
                        }
                        Ok(_) => early.push(message),
                    }
                }
            })
            .await;
            incoming = futures::stream::iter(early).chain(incoming).boxed();
            let spawned = command.spawn();
            // The command has its copies of the terminal; the API server keeps the master
            // only (a slave left open here would keep the master from ever reading the end).
            drop(command);
            drop(slave);
            match spawned {
                Ok(child) => (child, Some(master)),
                Err(err) => {
                    let status = json!({
                        "metadata": {},
                        "status": "Failure",
                        "message": spawn_failure(&request, &err),
                        "reason": "InternalError",
                        "code": 500,
                    });
                    let _ = out.send(frame(ERROR, status.to_string().as_bytes())).await;
                    drop(out);
                    let _ = writer.await;
                    return;
                }
            }
        }
    };
    let mut pumps = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        pumps.push(tokio::spawn(pump(stdout, STDOUT, out.clone())));
    }
    if let Some(stderr) = child.stderr.take() {
        pumps.push(tokio::spawn(pump(stderr, STDERR, out.clone())));
    }
    let mut stdin: Option<Box<dyn tokio::io::AsyncWrite + Unpin + Send>> = child
        .stdin
        .take()
        .map(|pipe| Box::new(pipe) as Box<dyn tokio::io::AsyncWrite + Unpin + Send>);
    let mut resize = None;
    if let Some(master) = terminal {
        let (Ok(input), Ok(window)) = (master.try_clone(), master.try_clone()) else {
            let _ = child.kill().await;
            return;
        };
        let file = |fd: std::os::fd::OwnedFd| tokio::fs::File::from_std(std::fs::File::from(fd));
        // The terminal's output, stderr included; it ends (EIO) once the command and every
        // process it left on the terminal are gone.
        pumps.push(tokio::spawn(pump(file(master), STDOUT, out.clone())));
        if request.stdin {
            stdin = Some(Box::new(file(input)));
        }
        resize = Some(window);
    }
    let reader = async move {
        while let Some(Ok(message)) = incoming.next().await {
            match message {
                Message::Binary(bytes) if !bytes.is_empty() => match bytes[0] {
                    STDIN => {
                        if let Some(pipe) = stdin.as_mut()
                            && (pipe.write_all(&bytes[1..]).await.is_err()
                                || pipe.flush().await.is_err())
                        {
                            stdin = None;
                        }
                    }
                    RESIZE => {
                        if let Some(fd) = &resize {
                            resize_terminal(fd, &bytes[1..]);
                        }
                    }
                    CLOSE if close_signal && bytes.get(1) == Some(&STDIN) => stdin = None,
                    _ => {}
                },
                Message::Close(_) => break,
                _ => {}
            }
        }
    };
    let status = tokio::select! {
        status = child.wait() => status.ok(),
        () = reader => None,
    };
    let Some(status) = status else {
        // The client went away: the command goes too, as the kubelet kills it.
        let _ = child.kill().await;
        drop(out);
        writer.abort();
        return;
    };
    for pump in pumps {
        let _ = pump.await;
    }
    let status = exit_status(&request, status);
    let _ = out.send(frame(ERROR, status.to_string().as_bytes())).await;
    drop(out);
    let _ = writer.await;
}

/// How a port-forward request asks to talk.
enum ForwardProtocol {
    /// The channel protocol (`v4.channel.k8s.io`, `channel.k8s.io`), with the accept key.
    Channels(&'static str, String),
    /// SPDY tunnelled in a WebSocket, with the accept key.
    SpdyTunnel(String),
    /// A plain SPDY/3.1 upgrade.
    Spdy,
}

fn forward_protocol(headers: &HeaderMap) -> ApiResult<ForwardProtocol> {
    let values = |name: &http::HeaderName| header_values(headers, name);
    let upgrade = values(&http::header::UPGRADE);
    let tunnel = format!(
        "{}{}",
        super::tunnel::SPDY_TUNNEL_PREFIX,
        super::portforward::PROTOCOL
    );
    if upgrade.iter().any(|u| u.eq_ignore_ascii_case("websocket"))
        && values(&http::header::SEC_WEBSOCKET_PROTOCOL).contains(&tunnel)
    {
        let key = headers
            .get(http::header::SEC_WEBSOCKET_KEY)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| ApiError::bad_request("a WebSocket upgrade needs Sec-WebSocket-Key"))?;
        return Ok(ForwardProtocol::SpdyTunnel(
            tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes()),
        ));
    }
    if upgrade.iter().any(|u| u.eq_ignore_ascii_case("SPDY/3.1")) {
        let offered = values(&http::HeaderName::from_static("x-stream-protocol-version"));
        if !offered.iter().any(|p| p == super::portforward::PROTOCOL) {
            return Err(ApiError::forbidden(format!(
                "unable to upgrade connection: unable to negotiate protocol: client supports {offered:?}, server accepts [{:?}]",
                super::portforward::PROTOCOL
            )));
        }
        return Ok(ForwardProtocol::Spdy);
    }
    let (protocol, accept) =
        websocket_protocol(headers, PORTFORWARD_PROTOCOLS, "pods/portforward")?;
    Ok(ForwardProtocol::Channels(protocol, accept))
}

/// Answers a port-forward upgrade to the Pod at `ip` (`described` names it in errors): the
/// WebSocket channel protocol (ports from the `ports` parameter of `raw_query`), or SPDY
/// tunnelled in a WebSocket or by plain upgrade (ports in each stream's headers).
pub fn portforward(
    headers: &HeaderMap,
    raw_query: &str,
    ip: IpAddr,
    described: String,
    streams: Arc<dyn PodStreams>,
    take_upgrade: impl FnOnce() -> ApiResult<hyper::upgrade::OnUpgrade>,
) -> ApiResult<Response<Body>> {
    let protocol = forward_protocol(headers)?;
    let (protocol, accept) = match protocol {
        ForwardProtocol::Channels(protocol, accept) => (protocol, accept),
        ForwardProtocol::SpdyTunnel(accept) => {
            // The ports come in each stream's headers.
            let upgrade = take_upgrade()?;
            tokio::spawn(async move {
                let Some(socket) = websocket(upgrade).await else {
                    return;
                };
                let bytes = super::tunnel::bytes_of(socket);
                super::portforward::serve(bytes, streams, ip, described).await;
            });
            let protocol = format!(
                "{}{}",
                super::tunnel::SPDY_TUNNEL_PREFIX,
                super::portforward::PROTOCOL
            );
            return Ok(switching_protocols(&protocol, &accept));
        }
        ForwardProtocol::Spdy => {
            let upgrade = take_upgrade()?;
            tokio::spawn(async move {
                match upgrade.await {
                    Ok(upgraded) => {
                        super::portforward::serve(TokioIo::new(upgraded), streams, ip, described)
                            .await;
                    }
                    Err(err) => tracing::debug!(%err, "a SPDY upgrade did not complete"),
                }
            });
            return Ok(Response::builder()
                .status(StatusCode::SWITCHING_PROTOCOLS)
                .header(http::header::CONNECTION, "Upgrade")
                .header(http::header::UPGRADE, "SPDY/3.1")
                .header("X-Stream-Protocol-Version", super::portforward::PROTOCOL)
                .body(Body::empty())
                .unwrap_or_default());
        }
    };
    let mut ports = Vec::new();
    for value in query_values(raw_query, "ports") {
        for port in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match port.parse::<u16>() {
                Ok(port) if port > 0 => ports.push(port),
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "invalid port {port:?}: a port is a number from 1 to 65535"
                    )));
                }
            }
        }
    }
    if ports.is_empty() {
        return Err(ApiError::bad_request(
            "query parameter \"ports\" is required",
        ));
    }
    let upgrade = take_upgrade()?;
    tokio::spawn(async move {
        let Some(socket) = websocket(upgrade).await else {
            return;
        };
        run_portforward(socket, streams, ip, ports, described).await;
    });
    Ok(switching_protocols(protocol, &accept))
}

async fn run_portforward<S>(
    socket: WebSocketStream<S>,
    streams: Arc<dyn PodStreams>,
    ip: IpAddr,
    ports: Vec<u16>,
    pod: String,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut incoming) = socket.split();
    let (out, mut outgoing) = mpsc::channel::<Message>(16);
    let writer = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            if sink.send(message).await.is_err() {
                return;
            }
        }
        // A normal closure (1000): client-go reads a close without a status (1005) as an error.
        let _ = sink.send(normal_close()).await;
        let _ = sink.close().await;
    });
    let mut writers = Vec::with_capacity(ports.len());
    let mut pumps = Vec::new();
    for (index, port) in ports.iter().enumerate() {
        let data = (2 * index) as u8;
        let prefix = port.to_le_bytes();
        let _ = out.send(frame(data, &prefix)).await;
        let _ = out.send(frame(data + 1, &prefix)).await;
        match streams.connect(SocketAddr::new(ip, *port)).await {
            Ok(tcp) => {
                let (read, write) = tcp.into_split();
                writers.push(Some(write));
                pumps.push(tokio::spawn(pump(read, data, out.clone())));
            }
            Err(err) => {
                writers.push(None);
                let message = format!(
                    "error forwarding port {port} to {pod}: failed to connect to {ip}:{port}: {err}"
                );
                let _ = out.send(frame(data + 1, message.as_bytes())).await;
            }
        }
    }
    drop(out);
    let reader = async {
        while let Some(Ok(message)) = incoming.next().await {
            match message {
                Message::Binary(bytes) if bytes.len() > 1 && bytes[0] % 2 == 0 => {
                    let index = usize::from(bytes[0] / 2);
                    if let Some(slot) = writers.get_mut(index)
                        && let Some(write) = slot.as_mut()
                        && write.write_all(&bytes[1..]).await.is_err()
                    {
                        *slot = None;
                    }
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
    };
    let pumps_done = futures::future::join_all(pumps);
    tokio::select! {
        _ = pumps_done => {
            // Every connection to the Pod has ended: the writer closes the socket.
            let _ = writer.await;
        }
        () = reader => {
            writer.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::query_values;

    #[test]
    fn repeated_and_encoded_values_are_kept_in_order() {
        let raw = "command=sh&command=-c&command=echo%20a%26b&container=etcd&ports=2379%2C2380";
        assert_eq!(query_values(raw, "command"), ["sh", "-c", "echo a&b"]);
        assert_eq!(query_values(raw, "ports"), ["2379,2380"]);
        assert!(query_values(raw, "stdin").is_empty());
    }
}
