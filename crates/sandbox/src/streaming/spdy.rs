//! SPDY/3.1 as Kubernetes speaks it for `pods/portforward`: the framing of
//! github.com/moby/spdystream (the library client-go and the kubelet use), the server's side.
//!
//! - A control frame: `1 | version (15 bits, 3) | type (16) | flags (8) | length (24)`, then
//!   its fields; a data frame: `0 | stream ID (31) | flags (8) | length (24)`, then the bytes.
//! - Header blocks (SYN_STREAM, SYN_REPLY, HEADERS) are zlib streams compressed with the
//!   SPDY/3 dictionary, one compression context per direction for the whole session, each
//!   block ended by a sync flush. Names are lower case; a block is `count (32)` then, per
//!   header, `length (32) name length (32) value` (several values joined by NUL).
//! - The client opens every stream (odd IDs); the server answers each SYN_STREAM with an empty
//!   SYN_REPLY, echoes the client's PINGs (client-go pings every 10 s through a tunnel), and
//!   ends the session on GOAWAY or when the connection ends. FLAG_FIN on a data frame closes
//!   that direction of a stream; RST_STREAM closes both.
//! - No flow control: spdystream neither sends nor honours WINDOW_UPDATE, so SETTINGS and
//!   WINDOW_UPDATE are read and ignored.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const VERSION: u16 = 3;
const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const FLAG_FIN: u8 = 0x01;
/// RST_STREAM status: the stream is cancelled (what spdystream's `Reset` sends).
const CANCEL: u32 = 5;
/// The largest data frame this side writes (spdystream reads up to 2^24 - 1).
pub const MAX_DATA: usize = 32 * 1024;
/// The largest frame this side accepts: a header block or data of a reasonable client.
const MAX_FRAME: usize = 1 << 24;

/// The SPDY/3 header compression dictionary (section 2.6.10.1 of the SPDY/3 draft).
const DICTIONARY: &[u8] = b"\
\x00\x00\x00\x07options\x00\x00\x00\x04head\x00\x00\x00\x04post\x00\x00\x00\x03put\x00\x00\
\x00\x06delete\x00\x00\x00\x05trace\x00\x00\x00\x06accept\x00\x00\x00\x0eaccept-charset\
\x00\x00\x00\x0faccept-encoding\x00\x00\x00\x0faccept-language\x00\x00\x00\x0daccept-ra\
nges\x00\x00\x00\x03age\x00\x00\x00\x05allow\x00\x00\x00\x0dauthorization\x00\x00\x00\x0d\
cache-control\x00\x00\x00\x0aconnection\x00\x00\x00\x0ccontent-base\x00\x00\x00\x10cont\
ent-encoding\x00\x00\x00\x10content-language\x00\x00\x00\x0econtent-length\x00\x00\x00\x10\
content-location\x00\x00\x00\x0bcontent-md5\x00\x00\x00\x0dcontent-range\x00\x00\x00\x0c\
content-type\x00\x00\x00\x04date\x00\x00\x00\x04etag\x00\x00\x00\x06expect\x00\x00\x00\x07\
expires\x00\x00\x00\x04from\x00\x00\x00\x04host\x00\x00\x00\x08if-match\x00\x00\x00\x11\
if-modified-since\x00\x00\x00\x0dif-none-match\x00\x00\x00\x08if-range\x00\x00\x00\x13i\
f-unmodified-since\x00\x00\x00\x0dlast-modified\x00\x00\x00\x08location\x00\x00\x00\x0c\
max-forwards\x00\x00\x00\x06pragma\x00\x00\x00\x12proxy-authenticate\x00\x00\x00\x13pro\
xy-authorization\x00\x00\x00\x05range\x00\x00\x00\x07referer\x00\x00\x00\x0bretry-after\
\x00\x00\x00\x06server\x00\x00\x00\x02te\x00\x00\x00\x07trailer\x00\x00\x00\x11transfer\
-encoding\x00\x00\x00\x07upgrade\x00\x00\x00\x0auser-agent\x00\x00\x00\x04vary\x00\x00\x00\
\x03via\x00\x00\x00\x07warning\x00\x00\x00\x10www-authenticate\x00\x00\x00\x06method\x00\
\x00\x00\x03get\x00\x00\x00\x06status\x00\x00\x00\x06200 OK\x00\x00\x00\x07version\x00\x00\
\x00\x08HTTP/1.1\x00\x00\x00\x03url\x00\x00\x00\x06public\x00\x00\x00\x0aset-cookie\x00\
\x00\x00\x0akeep-alive\x00\x00\x00\x06origin1001012012022052063003023033043053063074024\
05406407408409410411412413414415416417502504505203 Non-Authoritative Information204 No \
Content301 Moved Permanently400 Bad Request401 Unauthorized403 Forbidden404 Not Found50\
0 Internal Server Error501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Ju\
n Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/\
html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,tex\
t/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-\
,*,enq=0.";

/// A header block's name-value pairs, names in lower case.
pub type Headers = Vec<(String, String)>;

/// What the session's writer sends, in order (the header compressor is stateful).
enum Out {
    Reply { stream: u32 },
    Data { stream: u32, data: Bytes, fin: bool },
    Reset { stream: u32 },
    Ping { id: u32 },
}

/// One stream the client opened.
pub struct Stream {
    id: u32,
    headers: Headers,
    incoming: mpsc::Receiver<Bytes>,
    writer: StreamWriter,
}

/// The writing half of a [`Stream`].
#[derive(Clone)]
pub struct StreamWriter {
    id: u32,
    out: mpsc::Sender<Out>,
    /// Set when the client reset the stream: nothing more is written to it.
    reset: Arc<AtomicBool>,
}

impl Stream {
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The value of header `name` (case-insensitive), the first if it has several.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.split('\0').next().unwrap_or(""))
    }

    /// The next bytes the client sent; `None` once it closed its side or reset the stream.
    pub async fn read(&mut self) -> Option<Bytes> {
        self.incoming.recv().await
    }

    pub fn writer(&self) -> StreamWriter {
        self.writer.clone()
    }

    /// The reading half and the writing half.
    pub fn split(self) -> (mpsc::Receiver<Bytes>, StreamWriter) {
        (self.incoming, self.writer)
    }
}

impl StreamWriter {
    /// Sends `data` on the stream in frames of at most [`MAX_DATA`] bytes.
    pub async fn write(&self, data: &[u8]) -> io::Result<()> {
        for chunk in data.chunks(MAX_DATA) {
            self.send(Out::Data {
                stream: self.id,
                data: Bytes::copy_from_slice(chunk),
                fin: false,
            })
            .await?;
        }
        Ok(())
    }

    /// Closes this side of the stream (an empty data frame with FLAG_FIN).
    pub async fn close(&self) -> io::Result<()> {
        self.send(Out::Data {
            stream: self.id,
            data: Bytes::new(),
            fin: true,
        })
        .await
    }

    /// Resets the stream (RST_STREAM, CANCEL).
    pub async fn reset(&self) {
        if !self.reset.swap(true, Ordering::SeqCst) {
            let _ = self.out.send(Out::Reset { stream: self.id }).await;
        }
    }

    async fn send(&self, frame: Out) -> io::Result<()> {
        if self.reset.load(Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the stream was reset",
            ));
        }
        self.out
            .send(frame)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the SPDY session ended"))
    }
}

/// The server's side of a SPDY session over `io`: the streams the client opens arrive on the
/// returned receiver; the session ends when the connection does, when the client sends GOAWAY,
/// or when `stop` is cancelled (then the connection is closed).
pub fn serve<T>(io: T, stop: CancellationToken) -> mpsc::Receiver<Stream>
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (read, write) = tokio::io::split(io);
    let (out, outgoing) = mpsc::channel::<Out>(64);
    let (accepted, streams) = mpsc::channel(16);
    let done = stop.child_token();
    tokio::spawn(write_frames(write, outgoing, done.clone()));
    tokio::spawn(async move {
        let outcome = tokio::select! {
            outcome = read_frames(BufReader::new(read), out, accepted) => outcome,
            () = done.cancelled() => Ok(()),
        };
        if let Err(err) = outcome {
            tracing::debug!(%err, "a SPDY session ended with an error");
        }
        done.cancel();
    });
    streams
}

/// A stream's entry in the reader's table.
struct Entry {
    incoming: Option<mpsc::Sender<Bytes>>,
    reset: Arc<AtomicBool>,
}

async fn read_frames<R>(
    mut reader: R,
    out: mpsc::Sender<Out>,
    accepted: mpsc::Sender<Stream>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
{
    let mut inflater = HeaderInflater::new();
    let mut streams: HashMap<u32, Entry> = HashMap::new();
    loop {
        let mut head = [0u8; 8];
        match reader.read_exact(&mut head).await {
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(err) => return Err(err),
        }
        let flags = head[4];
        let length = usize::from(head[5]) << 16 | usize::from(head[6]) << 8 | usize::from(head[7]);
        if length > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a SPDY frame of {length} bytes"),
            ));
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).await?;
        if head[0] & 0x80 == 0 {
            // A data frame.
            let id = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) & 0x7fff_ffff;
            let Some(entry) = streams.get_mut(&id) else {
                continue;
            };
            if !body.is_empty()
                && let Some(sender) = &entry.incoming
                && sender.send(Bytes::from(body)).await.is_err()
            {
                // Nobody reads the stream any more: what comes is dropped.
                entry.incoming = None;
            }
            if flags & FLAG_FIN != 0 {
                entry.incoming = None;
            }
            continue;
        }
        let version = u16::from_be_bytes([head[0] & 0x7f, head[1]]);
        let kind = u16::from_be_bytes([head[2], head[3]]);
        if version != VERSION {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("SPDY version {version}; only SPDY/3.1 is spoken"),
            ));
        }
        match kind {
            SYN_STREAM => {
                if body.len() < 10 {
                    return Err(invalid("a SYN_STREAM frame shorter than its fields"));
                }
                let id = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) & 0x7fff_ffff;
                let headers = inflater.headers(&body[10..])?;
                let (sender, incoming) = mpsc::channel(32);
                let reset = Arc::new(AtomicBool::new(false));
                let fin = flags & FLAG_FIN != 0;
                streams.insert(
                    id,
                    Entry {
                        incoming: (!fin).then_some(sender),
                        reset: reset.clone(),
                    },
                );
                if out.send(Out::Reply { stream: id }).await.is_err() {
                    return Ok(());
                }
                let stream = Stream {
                    id,
                    headers,
                    incoming,
                    writer: StreamWriter {
                        id,
                        out: out.clone(),
                        reset,
                    },
                };
                if accepted.send(stream).await.is_err() {
                    return Ok(());
                }
            }
            RST_STREAM if body.len() >= 4 => {
                let id = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) & 0x7fff_ffff;
                if let Some(entry) = streams.remove(&id) {
                    entry.reset.store(true, Ordering::SeqCst);
                }
            }
            PING if body.len() >= 4 => {
                let id = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
                // The client's pings have odd IDs; the server echoes them.
                if id % 2 == 1 && out.send(Out::Ping { id }).await.is_err() {
                    return Ok(());
                }
            }
            GOAWAY => return Ok(()),
            // SYN_REPLY (the server opens no streams), SETTINGS, HEADERS, WINDOW_UPDATE, and
            // anything newer: read and ignored, as spdystream does.
            _ => {}
        }
    }
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

async fn write_frames<W>(mut writer: W, mut outgoing: mpsc::Receiver<Out>, done: CancellationToken)
where
    W: AsyncWrite + Unpin,
{
    let mut deflater = HeaderDeflater::new();
    loop {
        let frame = tokio::select! {
            frame = outgoing.recv() => frame,
            () = done.cancelled() => None,
        };
        let Some(frame) = frame else {
            break;
        };
        let bytes = match frame {
            Out::Reply { stream } => match deflater.block(&[]) {
                Ok(block) => {
                    let mut body = stream.to_be_bytes().to_vec();
                    body.extend_from_slice(&block);
                    control_frame(SYN_REPLY, 0, &body)
                }
                Err(err) => {
                    tracing::debug!(%err, "compressing a SPDY header block failed");
                    break;
                }
            },
            Out::Data { stream, data, fin } => data_frame(stream, fin, &data),
            Out::Reset { stream } => {
                let mut body = stream.to_be_bytes().to_vec();
                body.extend_from_slice(&CANCEL.to_be_bytes());
                control_frame(RST_STREAM, 0, &body)
            }
            Out::Ping { id } => control_frame(PING, 0, &id.to_be_bytes()),
        };
        if writer.write_all(&bytes).await.is_err() || writer.flush().await.is_err() {
            break;
        }
    }
    done.cancel();
    let _ = writer.shutdown().await;
}

fn control_frame(kind: u16, flags: u8, body: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(8 + body.len());
    frame.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    frame.extend_from_slice(&kind.to_be_bytes());
    frame.push(flags);
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    frame.extend_from_slice(body);
    frame
}

fn data_frame(stream: u32, fin: bool, data: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(8 + data.len());
    frame.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    frame.push(if fin { FLAG_FIN } else { 0 });
    frame.extend_from_slice(&(data.len() as u32).to_be_bytes()[1..]);
    frame.extend_from_slice(data);
    frame
}

/// The reading side's header decompression: one zlib stream for the whole session.
struct HeaderInflater {
    zlib: Decompress,
}

impl HeaderInflater {
    fn new() -> Self {
        Self {
            zlib: Decompress::new(true),
        }
    }

    /// The name-value pairs of one compressed header block.
    fn headers(&mut self, block: &[u8]) -> io::Result<Headers> {
        let plain = self.inflate(block)?;
        parse_headers(&plain)
    }

    fn inflate(&mut self, block: &[u8]) -> io::Result<Vec<u8>> {
        let mut plain = Vec::with_capacity(block.len() * 4 + 64);
        let mut input = block;
        loop {
            if plain.capacity() - plain.len() < 256 {
                plain.reserve(plain.capacity().max(1024));
            }
            let before = self.zlib.total_in();
            let outcome = self
                .zlib
                .decompress_vec(input, &mut plain, FlushDecompress::Sync);
            let consumed = usize::try_from(self.zlib.total_in() - before).unwrap_or(0);
            input = &input[consumed..];
            match outcome {
                Ok(Status::StreamEnd) => return Ok(plain),
                Ok(_) => {
                    // Done when the block is used up and the output buffer kept room to spare.
                    if input.is_empty() && plain.len() < plain.capacity() {
                        return Ok(plain);
                    }
                }
                Err(err) if err.needs_dictionary().is_some() => {
                    self.zlib
                        .set_dictionary(DICTIONARY)
                        .map_err(|e| invalid(&format!("the SPDY dictionary: {e}")))?;
                }
                Err(err) => return Err(invalid(&format!("a SPDY header block: {err}"))),
            }
        }
    }
}

/// The writing side's header compression: one zlib stream for the whole session.
struct HeaderDeflater {
    zlib: Compress,
}

impl HeaderDeflater {
    fn new() -> Self {
        let mut zlib = Compress::new(Compression::best(), true);
        zlib.set_dictionary(DICTIONARY)
            .expect("a new zlib stream takes a dictionary");
        Self { zlib }
    }

    /// One header block, compressed and sync-flushed.
    fn block(&mut self, headers: &[(&str, &str)]) -> io::Result<Vec<u8>> {
        let plain = encode_headers(headers);
        let mut compressed = Vec::with_capacity(plain.len() + 64);
        let mut input = plain.as_slice();
        loop {
            if compressed.capacity() - compressed.len() < 64 {
                compressed.reserve(compressed.capacity().max(256));
            }
            let before = self.zlib.total_in();
            self.zlib
                .compress_vec(input, &mut compressed, FlushCompress::Sync)
                .map_err(|e| invalid(&format!("compressing a header block: {e}")))?;
            let consumed = usize::try_from(self.zlib.total_in() - before).unwrap_or(0);
            input = &input[consumed..];
            if input.is_empty() && compressed.len() < compressed.capacity() {
                return Ok(compressed);
            }
        }
    }
}

fn encode_headers(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut plain = (headers.len() as u32).to_be_bytes().to_vec();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        plain.extend_from_slice(&(name.len() as u32).to_be_bytes());
        plain.extend_from_slice(name.as_bytes());
        plain.extend_from_slice(&(value.len() as u32).to_be_bytes());
        plain.extend_from_slice(value.as_bytes());
    }
    plain
}

fn parse_headers(plain: &[u8]) -> io::Result<Headers> {
    let short = || invalid("a SPDY header block shorter than it says");
    let mut at = 0usize;
    let word = |at: &mut usize| -> io::Result<usize> {
        let bytes = plain.get(*at..*at + 4).ok_or_else(short)?;
        *at += 4;
        Ok(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize)
    };
    let count = word(&mut at)?;
    let mut headers = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let length = word(&mut at)?;
        let name = plain.get(at..at + length).ok_or_else(short)?;
        at += length;
        let length = word(&mut at)?;
        let value = plain.get(at..at + length).ok_or_else(short)?;
        at += length;
        headers.push((
            String::from_utf8_lossy(name).to_ascii_lowercase(),
            String::from_utf8_lossy(value).into_owned(),
        ));
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a client sends: SYN_STREAM frames with compressed headers (this side's encoder
    /// stands in for the client's: the same zlib stream format with the same dictionary).
    struct Client {
        deflater: HeaderDeflater,
        inflater: HeaderInflater,
    }

    impl Client {
        fn new() -> Self {
            Self {
                deflater: HeaderDeflater::new(),
                inflater: HeaderInflater::new(),
            }
        }

        fn syn_stream(&mut self, id: u32, headers: &[(&str, &str)]) -> Vec<u8> {
            let mut body = id.to_be_bytes().to_vec();
            body.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
            body.extend_from_slice(&self.deflater.block(headers).unwrap());
            control_frame(SYN_STREAM, 0, &body)
        }
    }

    /// Reads one frame: (control type or None for data, stream or ping ID, flags, body).
    async fn frame<R: AsyncRead + Unpin>(reader: &mut R) -> (Option<u16>, u32, u8, Vec<u8>) {
        let mut head = [0u8; 8];
        reader.read_exact(&mut head).await.unwrap();
        let length = usize::from(head[5]) << 16 | usize::from(head[6]) << 8 | usize::from(head[7]);
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).await.unwrap();
        if head[0] & 0x80 == 0 {
            let id = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
            return (None, id, head[4], body);
        }
        let kind = u16::from_be_bytes([head[2], head[3]]);
        let id = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) & 0x7fff_ffff;
        (Some(kind), id, head[4], body)
    }

    #[test]
    fn the_dictionary_is_the_one_of_the_spdy3_draft() {
        // Length and Adler-32 of the draft's dictionary, as zlib's FDICT field names it.
        assert_eq!(DICTIONARY.len(), 1423);
        let mut zlib = Compress::new(Compression::best(), true);
        assert_eq!(zlib.set_dictionary(DICTIONARY).unwrap(), 3_821_447_106);
    }

    #[test]
    fn header_blocks_survive_one_compression_context_across_frames() {
        let mut deflater = HeaderDeflater::new();
        let mut inflater = HeaderInflater::new();
        for round in 0..5 {
            let port = format!("{}", 2379 + round);
            let block = deflater
                .block(&[("streamType", "data"), ("port", &port), ("requestID", "7")])
                .unwrap();
            let headers = inflater.headers(&block).unwrap();
            assert_eq!(
                headers,
                vec![
                    ("streamtype".to_string(), "data".to_string()),
                    ("port".to_string(), port.clone()),
                    ("requestid".to_string(), "7".to_string()),
                ]
            );
        }
        assert!(inflater.headers(&[0xff, 0x00, 0x13]).is_err());
        assert!(parse_headers(&[0, 0, 0, 1, 0, 0, 0, 9, b'x']).is_err());
    }

    #[tokio::test]
    async fn streams_are_replied_to_pinged_back_and_closed() {
        let (client_io, server_io) = tokio::io::duplex(1 << 16);
        let stop = CancellationToken::new();
        let mut streams = serve(server_io, stop.clone());
        let (mut from_server, mut to_server) = tokio::io::split(client_io);
        let mut client = Client::new();
        to_server
            .write_all(&client.syn_stream(1, &[("streamType", "error"), ("port", "80")]))
            .await
            .unwrap();
        let (kind, id, _, body) = frame(&mut from_server).await;
        assert_eq!((kind, id), (Some(SYN_REPLY), 1));
        assert!(client.inflater.headers(&body[4..]).unwrap().is_empty());
        let mut stream = streams.recv().await.unwrap();
        assert_eq!(stream.header("StreamType"), Some("error"));
        assert_eq!(stream.header("port"), Some("80"));

        // Data both ways; FIN ends the client's side.
        to_server
            .write_all(&data_frame(1, false, b"hello"))
            .await
            .unwrap();
        to_server
            .write_all(&data_frame(1, true, b""))
            .await
            .unwrap();
        assert_eq!(stream.read().await.unwrap(), Bytes::from_static(b"hello"));
        assert_eq!(stream.read().await, None);
        let writer = stream.writer();
        writer.write(&vec![7u8; MAX_DATA + 10]).await.unwrap();
        writer.close().await.unwrap();
        let (kind, id, flags, body) = frame(&mut from_server).await;
        assert_eq!((kind, id, flags, body.len()), (None, 1, 0, MAX_DATA));
        let (_, _, _, body) = frame(&mut from_server).await;
        assert_eq!(body.len(), 10);
        let (kind, id, flags, body) = frame(&mut from_server).await;
        assert_eq!((kind, id, flags, body.len()), (None, 1, FLAG_FIN, 0));

        // A client ping is echoed; a server-side ID (even) is not.
        to_server
            .write_all(&control_frame(PING, 0, &2u32.to_be_bytes()))
            .await
            .unwrap();
        to_server
            .write_all(&control_frame(PING, 0, &5u32.to_be_bytes()))
            .await
            .unwrap();
        let (kind, id, _, _) = frame(&mut from_server).await;
        assert_eq!((kind, id), (Some(PING), 5));

        // A reset stream refuses writes.
        to_server
            .write_all(&client.syn_stream(3, &[("streamType", "data")]))
            .await
            .unwrap();
        let _ = frame(&mut from_server).await;
        let second = streams.recv().await.unwrap();
        let mut rst = 3u32.to_be_bytes().to_vec();
        rst.extend_from_slice(&CANCEL.to_be_bytes());
        to_server
            .write_all(&control_frame(RST_STREAM, 0, &rst))
            .await
            .unwrap();
        let writer = second.writer();
        let refused = async {
            loop {
                if writer.write(b"x").await.is_err() {
                    return;
                }
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), refused)
            .await
            .expect("writes to a reset stream fail");

        // GOAWAY ends the session: no more streams, the connection closes.
        to_server
            .write_all(&control_frame(GOAWAY, 0, &[0; 8]))
            .await
            .unwrap();
        assert!(streams.recv().await.is_none());
        let mut rest = Vec::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            from_server.read_to_end(&mut rest),
        )
        .await
        .expect("the connection closes")
        .unwrap();
    }
}
