//! A WebSocket as a byte stream: what client-go's `TunnelingConnection` makes of one, so that
//! SPDY can run inside it. Each write is one binary message; reads run the binary messages'
//! bytes together; a close (or the end of the socket) is the end of the stream.

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// The subprotocol prefix client-go puts before the tunnelled protocol.
pub const SPDY_TUNNEL_PREFIX: &str = "SPDY/3.1+";

/// The byte stream of `socket`; the tasks that carry it end with either side.
pub fn bytes_of<S>(socket: WebSocketStream<S>) -> DuplexStream
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (inner, outer) = tokio::io::duplex(256 * 1024);
    let (mut from_inner, mut to_inner) = tokio::io::split(inner);
    let (mut sink, mut messages) = socket.split();
    tokio::spawn(async move {
        while let Some(Ok(message)) = messages.next().await {
            match message {
                Message::Binary(bytes) if to_inner.write_all(&bytes).await.is_err() => break,
                Message::Close(_) => break,
                _ => {}
            }
        }
        let _ = to_inner.shutdown().await;
    });
    tokio::spawn(async move {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match from_inner.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if sink
                        .send(Message::binary(buffer[..n].to_vec()))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
        let _ = sink
            .send(Message::Close(Some(CloseFrame {
                code: CloseCode::Normal,
                reason: "".into(),
            })))
            .await;
        let _ = sink.close().await;
    });
    outer
}
