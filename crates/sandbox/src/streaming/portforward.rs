//! `portforward.k8s.io` over SPDY, as the kubelet serves it: for each connection the client
//! forwards, it opens an error stream and a data stream, both with the headers `streamType`
//! (`error`, `data`), `port` and `requestID`. Once both of a request have arrived, the server
//! connects to the Pod's port and copies bytes between the data stream and that connection;
//! when one direction ends it waits up to a second for the other (as containerd does), then
//! closes both streams. A failure is written on the error stream (the client then ends the
//! whole forward, as kubectl reports "lost connection to pod").

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::spdy::{self, Stream};
use crate::apiserver::PodStreams;

/// The protocol name both sides agree on (`X-Stream-Protocol-Version`, or after the tunnel
/// prefix in the WebSocket subprotocol).
pub const PROTOCOL: &str = "portforward.k8s.io";

/// How long the first stream of a pair waits for the second (the kubelet's
/// `streamCreationTimeout` is 30 s).
const PAIR_WAIT: Duration = Duration::from_secs(30);
/// How long the other direction gets once one has ended.
const DRAIN: Duration = Duration::from_secs(1);

/// Serves port forwarding to `ip` over a SPDY session on `io`, until the client ends it.
/// `pod` names the Pod in error messages (`pod NAME, uid UID`).
pub async fn serve<T>(io: T, streams: Arc<dyn PodStreams>, ip: IpAddr, pod: String)
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let stop = CancellationToken::new();
    let mut accepted = spdy::serve(io, stop.clone());
    let mut waiting: HashMap<String, (Stream, tokio::time::Instant)> = HashMap::new();
    while let Some(stream) = accepted.recv().await {
        waiting.retain(|_, (_, since)| since.elapsed() < PAIR_WAIT);
        let kind = stream.header("streamtype").unwrap_or("").to_string();
        if kind != "error" && kind != "data" {
            tracing::debug!(%kind, "a port-forward stream of unknown type is reset");
            stream.writer().reset().await;
            continue;
        }
        let request = request_id(&stream, &kind);
        match waiting.remove(&request) {
            Some((other, _)) if other.header("streamtype") != Some(kind.as_str()) => {
                let (data, error) = if kind == "data" {
                    (stream, other)
                } else {
                    (other, stream)
                };
                tokio::spawn(forward(data, error, streams.clone(), ip, pod.clone()));
            }
            Some((other, _)) => {
                // Two streams of one type for one request: the client is confused.
                other.writer().reset().await;
                stream.writer().reset().await;
            }
            None => {
                waiting.insert(request, (stream, tokio::time::Instant::now()));
            }
        }
    }
    stop.cancel();
}

/// The request a stream belongs to: its `requestID` header, or for clients older than that
/// header, its stream ID (a data stream) or the ID of the data stream that follows it (an
/// error stream, opened just before: two IDs on).
fn request_id(stream: &Stream, kind: &str) -> String {
    match stream.header("requestid") {
        Some(id) if !id.is_empty() => id.to_string(),
        _ if kind == "error" => (stream.id() + 2).to_string(),
        _ => stream.id().to_string(),
    }
}

async fn forward(
    data: Stream,
    error: Stream,
    streams: Arc<dyn PodStreams>,
    ip: IpAddr,
    pod: String,
) {
    let error_writer = error.writer();
    // The client closes its side of the error stream at once and only reads it.
    drop(error);
    let port = data.header("port").and_then(|p| p.parse::<u16>().ok());
    let outcome = match port {
        Some(port) if port > 0 => copy(data, streams, SocketAddr::new(ip, port)).await,
        _ => {
            let writer = data.writer();
            let _ = writer.close().await;
            Err(format!(
                "invalid port {:?}: a port is a number from 1 to 65535",
                data.header("port").unwrap_or("")
            ))
        }
    };
    if let Err(message) = outcome {
        let port = port.unwrap_or(0);
        let _ = error_writer
            .write(format!("error forwarding port {port} to {pod}: {message}").as_bytes())
            .await;
    }
    let _ = error_writer.close().await;
}

/// Copies between the data stream and a connection to `address` until both directions end
/// (or one has ended and the other had a second more); the data stream is closed after.
async fn copy(
    data: Stream,
    streams: Arc<dyn PodStreams>,
    address: SocketAddr,
) -> Result<(), String> {
    let (mut incoming, writer) = data.split();
    let tcp = match streams.connect(address).await {
        Ok(tcp) => tcp,
        Err(err) => {
            let _ = writer.close().await;
            return Err(format!("failed to connect to {address}: {err}"));
        }
    };
    let (mut from_pod, mut to_pod) = tcp.into_split();
    let upstream = async move {
        while let Some(bytes) = incoming.recv().await {
            to_pod.write_all(&bytes).await?;
        }
        to_pod.shutdown().await
    };
    let out = writer.clone();
    // The Pod's end of the connection closes the data stream's server side at once (a
    // half-close): the client then ends its side, and both directions are done.
    let downstream = async move {
        let mut buffer = vec![0u8; spdy::MAX_DATA];
        let outcome = loop {
            match from_pod.read(&mut buffer).await {
                Ok(0) => break Ok::<(), io::Error>(()),
                Ok(n) => {
                    if let Err(err) = out.write(&buffer[..n]).await {
                        break Err(err);
                    }
                }
                Err(err) => break Err(err),
            }
        };
        let _ = out.close().await;
        outcome
    };
    tokio::pin!(upstream, downstream);
    let first = tokio::select! {
        outcome = &mut upstream => {
            if tokio::time::timeout(DRAIN, &mut downstream).await.is_err() {
                let _ = writer.close().await;
            }
            outcome
        }
        outcome = &mut downstream => {
            let _ = tokio::time::timeout(DRAIN, &mut upstream).await;
            outcome
        }
    };
    match first {
        // A reset or a closed session is how clients end a forward.
        Err(err) if err.kind() != io::ErrorKind::BrokenPipe => Err(err.to_string()),
        _ => Ok(()),
    }
}
