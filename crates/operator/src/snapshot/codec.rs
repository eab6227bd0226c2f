//! The byte pipeline of a snapshot: etcd's chunks → compress (zstd, gzip) → encrypt (age) →
//! the store, and back. Streaming both ways with bounded memory.
//!
//! Encoding ([`Encoder`]) is fed etcd's chunks in order and hands back, for each, the bytes
//! to store now. On the way it computes what the status records and what verification later
//! compares: the SHA-256 and size of etcd's bytes with etcd's trailing hash checked
//! ([`SnapshotDigest`]), the revision and key count from the database's pages
//! ([`SnapshotScan`]), and the SHA-256 and size of the stored bytes (the artifact's checksum).
//!
//! Decoding ([`decode`]) reads stored bytes, recognises each layer by its first bytes (age's
//! header line, zstd's and gzip's magic numbers; anything else is taken as etcd's bytes as
//! they are), decrypts with the identities given, decompresses, and computes the same
//! figures on both sides. Nothing is trusted that a layer's own integrity check does not
//! confirm: age authenticates every 64 KiB chunk and the end of the stream, zstd frames carry
//! a checksum (written by the encoder here), gzip a CRC-32, and etcd's trailing SHA-256 covers
//! the database. A truncated stream, trailing bytes, a wrong identity or a flipped byte are
//! each reported as such ([`DecodeError`]).
//!
//! Memory: zstd level 3 keeps a window of at most 8 MiB, gzip 32 KiB, age one 64 KiB
//! chunk; the bytes handed back for one chunk are about that chunk's size.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use etcd_operator_api::snapshot::SnapshotCompression;

use super::digest::{Digested, PlainDigest, SnapshotDigest, hex};
use super::revision::{Scanned, SnapshotScan};

/// age's header line, the first bytes of every age file.
pub const AGE_MAGIC: &[u8] = b"age-encryption.org/v1\n";
/// zstd's frame magic number (little-endian 0xFD2FB528).
pub const ZSTD_MAGIC: &[u8] = &[0x28, 0xB5, 0x2F, 0xFD];
/// gzip's magic number.
pub const GZIP_MAGIC: &[u8] = &[0x1F, 0x8B];
/// zstd's level: its default, a good ratio at several hundred MB/s.
pub const ZSTD_LEVEL: i32 = 3;
/// The size of the pieces decoding reads and hands on.
const READ_BUFFER: usize = 256 * 1024;

/// What is applied to etcd's bytes before they are stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layers {
    pub compression: SnapshotCompression,
    /// Encrypted with age.
    pub encrypted: bool,
}

impl Layers {
    /// In words, for messages: "zstd, age", "gzip", "none".
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match self.compression {
            SnapshotCompression::None => {}
            SnapshotCompression::Zstd => parts.push("zstd"),
            SnapshotCompression::Gzip => parts.push("gzip"),
        }
        if self.encrypted {
            parts.push("age");
        }
        if parts.is_empty() {
            "none (etcd's bytes as they are)".to_string()
        } else {
            parts.join(" + ")
        }
    }
}

/// The age recipients of a Secret's text: one `age1...` a line, blank lines and `#` comments
/// allowed. Never echoes a line it cannot read (it might be a secret pasted by mistake).
pub fn parse_recipients(text: &str) -> Result<Vec<age::x25519::Recipient>, String> {
    let mut recipients = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with("AGE-SECRET-KEY-") {
            return Err(format!(
                "line {} is an age identity (a private key), not a recipient: put the recipient (age-keygen -y) there",
                n + 1
            ));
        }
        recipients.push(age::x25519::Recipient::from_str(line).map_err(|e| {
            format!(
                "line {} is not an age X25519 recipient (age1...): {e}",
                n + 1
            )
        })?);
    }
    if recipients.is_empty() {
        return Err("it holds no age recipient (age1...)".to_string());
    }
    Ok(recipients)
}

/// The age identities of a Secret's text (an age identity file: `AGE-SECRET-KEY-1...` lines,
/// blank lines and `#` comments allowed). Errors never contain the text.
pub fn parse_identities(text: &str) -> Result<Vec<age::x25519::Identity>, String> {
    let mut identities = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        identities.push(age::x25519::Identity::from_str(line).map_err(|_| {
            format!(
                "line {} is not an age X25519 identity (AGE-SECRET-KEY-1...)",
                n + 1
            )
        })?);
    }
    if identities.is_empty() {
        return Err("it holds no age identity (AGE-SECRET-KEY-1...)".to_string());
    }
    Ok(identities)
}

/// A recipient's fingerprint for the status: "sha256:" and the first 16 hex digits of the
/// SHA-256 of its text (`printf %s age1... | sha256sum | cut -c1-16`).
pub fn fingerprint(recipient: &age::x25519::Recipient) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, recipient.to_string().as_bytes());
    format!("sha256:{}", &hex(digest.as_ref())[..16])
}

/// Where the encoding layers write: a buffer the encoder drains after each chunk.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("sink poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The encryption layer.
enum Encrypt {
    Plain(Sink),
    Age(age::stream::StreamWriter<Sink>),
}

impl Write for Encrypt {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encrypt::Plain(w) => w.write(buf),
            Encrypt::Age(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encrypt::Plain(w) => w.flush(),
            Encrypt::Age(w) => w.flush(),
        }
    }
}

impl Encrypt {
    fn finish(self) -> io::Result<()> {
        match self {
            Encrypt::Plain(_) => Ok(()),
            Encrypt::Age(w) => w.finish().map(|_| ()),
        }
    }
}

/// The compression layer, writing into the encryption layer.
enum Compress {
    None(Encrypt),
    Zstd(zstd::stream::write::Encoder<'static, Encrypt>),
    Gzip(flate2::write::GzEncoder<Encrypt>),
}

impl Compress {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Compress::None(w) => w.write_all(buf),
            Compress::Zstd(w) => w.write_all(buf),
            Compress::Gzip(w) => w.write_all(buf),
        }
    }

    fn finish(self) -> io::Result<()> {
        match self {
            Compress::None(w) => w.finish(),
            Compress::Zstd(w) => w.finish()?.finish(),
            Compress::Gzip(w) => w.finish()?.finish(),
        }
    }
}

/// What an encoded stream amounts to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// etcd's bytes: size, SHA-256, and whether etcd's trailing hash matched.
    pub snapshot: Digested,
    /// Revision and key count from the database's pages (`None`: not readable).
    pub scanned: Option<Scanned>,
    /// The stored bytes: size and SHA-256 (the artifact's checksum).
    pub stored_size: u64,
    pub stored_sha256: String,
    pub layers: Layers,
}

/// Fed etcd's chunks; hands back the bytes to store. See the module's documentation.
pub struct Encoder {
    /// `None` for etcd's bytes as they are (no layer: chunks are handed back unchanged).
    layers: Option<(Compress, Sink)>,
    out: Vec<u8>,
    snapshot: SnapshotDigest,
    scan: SnapshotScan,
    stored: PlainDigest,
    kind: Layers,
}

impl Encoder {
    /// An encoder compressing with `compression` and encrypting to `recipients` (none: no
    /// encryption).
    pub fn new(
        compression: SnapshotCompression,
        recipients: &[age::x25519::Recipient],
    ) -> io::Result<Encoder> {
        let kind = Layers {
            compression,
            encrypted: !recipients.is_empty(),
        };
        let layers = if kind == Layers::default() {
            None
        } else {
            let sink = Sink::default();
            let encrypt = if recipients.is_empty() {
                Encrypt::Plain(sink.clone())
            } else {
                let encryptor = age::Encryptor::with_recipients(
                    recipients.iter().map(|r| r as &dyn age::Recipient),
                )
                .map_err(|e| io::Error::other(format!("age: {e}")))?;
                Encrypt::Age(encryptor.wrap_output(sink.clone())?)
            };
            let compress = match compression {
                SnapshotCompression::None => Compress::None(encrypt),
                SnapshotCompression::Zstd => {
                    let mut encoder = zstd::stream::write::Encoder::new(encrypt, ZSTD_LEVEL)?;
                    encoder.include_checksum(true)?;
                    Compress::Zstd(encoder)
                }
                SnapshotCompression::Gzip => Compress::Gzip(flate2::write::GzEncoder::new(
                    encrypt,
                    flate2::Compression::default(),
                )),
            };
            Some((compress, sink))
        };
        Ok(Encoder {
            layers,
            out: Vec::new(),
            snapshot: SnapshotDigest::default(),
            scan: SnapshotScan::default(),
            stored: PlainDigest::default(),
            kind,
        })
    }

    /// Bytes of etcd's snapshot seen so far.
    pub fn snapshot_size(&self) -> u64 {
        self.snapshot.size()
    }

    /// Takes the next chunk of etcd's snapshot; returns the bytes to store now (possibly
    /// none: the compressor holds them until it has a block).
    pub fn push<'a>(&'a mut self, chunk: &'a [u8]) -> io::Result<&'a [u8]> {
        self.snapshot.update(chunk);
        self.scan.update(chunk);
        let Some((compress, sink)) = self.layers.as_mut() else {
            // Stored as they are: the stored bytes' digest is the snapshot's (finish).
            return Ok(chunk);
        };
        compress.write_all(chunk)?;
        self.out.clear();
        std::mem::swap(
            &mut *sink
                .0
                .lock()
                .map_err(|_| io::Error::other("sink poisoned"))?,
            &mut self.out,
        );
        self.stored.update(&self.out);
        Ok(&self.out)
    }

    /// Ends the stream: the last bytes to store and what it all amounted to.
    pub fn finish(mut self) -> io::Result<(Vec<u8>, Encoded)> {
        let mut last = Vec::new();
        if let Some((compress, sink)) = self.layers.take() {
            compress.finish()?;
            last = std::mem::take(
                &mut *sink
                    .0
                    .lock()
                    .map_err(|_| io::Error::other("sink poisoned"))?,
            );
            self.stored.update(&last);
        }
        let snapshot = self.snapshot.finish();
        let (stored_size, stored_sha256) = if self.kind == Layers::default() {
            (snapshot.size, snapshot.sha256.clone())
        } else {
            self.stored.finish()
        };
        Ok((
            last,
            Encoded {
                snapshot,
                scanned: self.scan.finish(),
                stored_size,
                stored_sha256,
                layers: self.kind,
            },
        ))
    }
}

/// Why stored bytes could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// age-encrypted, and no identity was given.
    #[error("it is encrypted with age, and no identity was given to decrypt it")]
    Encrypted,
    /// None of the identities is one of the recipients'.
    #[error(
        "none of the age identities given can decrypt it (it was encrypted to other recipients)"
    )]
    WrongIdentity,
    /// A layer's integrity check failed, or the stream ended early.
    #[error("its {layer} layer is damaged or truncated: {detail}")]
    Corrupt { layer: &'static str, detail: String },
    /// Bytes after the end of the outermost layer.
    #[error("{extra} bytes follow the end of its {layer} stream")]
    TrailingData { layer: &'static str, extra: u64 },
    /// Reading the stored bytes failed (the store, the volume).
    #[error("reading it failed: {0}")]
    Input(io::Error),
    /// Handing on the decoded bytes failed (writing the restored file).
    #[error("writing the decoded snapshot failed: {0}")]
    Output(io::Error),
}

/// What decoding found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub layers: Layers,
    /// The stored bytes: size and SHA-256.
    pub stored_size: u64,
    pub stored_sha256: String,
    /// etcd's bytes: size, SHA-256, whether etcd's trailing hash matched.
    pub snapshot: Digested,
    pub scanned: Option<Scanned>,
}

/// Reads the input, hashing every byte and keeping the first error it gave (so that a
/// failing store is not mistaken for damaged data). The hashing stops (`digest` taken) once
/// the input is known to be etcd's bytes as they are: their digest is the snapshot's.
struct Counted<R> {
    inner: R,
    digest: Arc<Mutex<Option<PlainDigest>>>,
    failure: Arc<Mutex<Option<io::Error>>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => {
                if let Ok(mut digest) = self.digest.lock()
                    && let Some(digest) = digest.as_mut()
                {
                    digest.update(&buf[..n]);
                }
                Ok(n)
            }
            Err(e) => {
                if let Ok(mut slot) = self.failure.lock()
                    && slot.is_none()
                {
                    *slot = Some(io::Error::new(e.kind(), e.to_string()));
                }
                Err(e)
            }
        }
    }
}

fn starts_with(reader: &mut impl BufRead, magic: &[u8]) -> io::Result<bool> {
    // fill_buf may return fewer bytes than asked at a boundary: a magic number is short and
    // sits at the very start, where BufReader's first fill gets all the reader gives.
    let buffered = reader.fill_buf()?;
    Ok(buffered.len() >= magic.len() && &buffered[..magic.len()] == magic)
}

fn compression_of(reader: &mut impl BufRead) -> io::Result<SnapshotCompression> {
    Ok(if starts_with(reader, ZSTD_MAGIC)? {
        SnapshotCompression::Zstd
    } else if starts_with(reader, GZIP_MAGIC)? {
        SnapshotCompression::Gzip
    } else {
        SnapshotCompression::None
    })
}

fn layer_name(compression: SnapshotCompression) -> &'static str {
    match compression {
        SnapshotCompression::Zstd => "zstd",
        SnapshotCompression::Gzip => "gzip",
        SnapshotCompression::None => "snapshot",
    }
}

/// Reads every byte of `plain` (etcd's bytes) into the digests and `out`.
fn drain(
    plain: &mut dyn Read,
    layer: &'static str,
    out: &mut dyn FnMut(&[u8]) -> io::Result<()>,
) -> Result<(Digested, Option<Scanned>), DecodeError> {
    let mut digest = SnapshotDigest::default();
    let mut scan = SnapshotScan::default();
    let mut buffer = vec![0u8; READ_BUFFER];
    loop {
        let n = match plain.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(DecodeError::Corrupt {
                    layer,
                    detail: e.to_string(),
                });
            }
        };
        digest.update(&buffer[..n]);
        scan.update(&buffer[..n]);
        out(&buffer[..n]).map_err(DecodeError::Output)?;
    }
    Ok((digest.finish(), scan.finish()))
}

/// Reads what is left of `reader` after a layer ended: the bytes counted (none, for a sound
/// stream), an error as damage of `layer`.
fn rest(reader: &mut dyn Read, layer: &'static str) -> Result<u64, DecodeError> {
    let mut extra = 0u64;
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => return Ok(extra),
            Ok(n) => extra += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(DecodeError::Corrupt {
                    layer,
                    detail: e.to_string(),
                });
            }
        }
    }
}

/// Decodes stored bytes (see the module's documentation), handing etcd's bytes to `out` in
/// pieces of at most 256 KiB. Blocking: run it on a blocking thread.
pub fn decode(
    input: impl Read,
    identities: &[age::x25519::Identity],
    out: &mut dyn FnMut(&[u8]) -> io::Result<()>,
) -> Result<Decoded, DecodeError> {
    let failure = Arc::new(Mutex::new(None));
    let stored = Arc::new(Mutex::new(Some(PlainDigest::default())));
    let counted = Counted {
        inner: input,
        digest: stored.clone(),
        failure: failure.clone(),
    };
    // An error of the input itself wins over what a layer made of it.
    let input_failed = |e: DecodeError| match failure.lock().ok().and_then(|mut f| f.take()) {
        Some(e) => DecodeError::Input(e),
        None => e,
    };
    let mut reader = BufReader::with_capacity(READ_BUFFER, counted);
    let encrypted = starts_with(&mut reader, AGE_MAGIC).map_err(DecodeError::Input)?;
    let mut layers = Layers {
        compression: SnapshotCompression::None,
        encrypted,
    };
    let age_damage = |e: &dyn std::fmt::Display| DecodeError::Corrupt {
        layer: "age",
        detail: e.to_string(),
    };
    let (snapshot, scanned) = if encrypted {
        if identities.is_empty() {
            return Err(DecodeError::Encrypted);
        }
        let decryptor =
            age::Decryptor::new_buffered(reader).map_err(|e| input_failed(age_damage(&e)))?;
        let stream = decryptor
            .decrypt(identities.iter().map(|i| i as &dyn age::Identity))
            .map_err(|e| match e {
                age::DecryptError::NoMatchingKeys => DecodeError::WrongIdentity,
                other => input_failed(age_damage(&other)),
            })?;
        let mut inner = BufReader::with_capacity(READ_BUFFER, stream);
        layers.compression =
            compression_of(&mut inner).map_err(|e| input_failed(age_damage(&e)))?;
        let outer = if layers.compression == SnapshotCompression::None {
            "age"
        } else {
            layer_name(layers.compression)
        };
        let result =
            decompress(&mut inner, layers.compression, outer, out).map_err(input_failed)?;
        // age authenticates its last chunk only when read to the end; plaintext after the
        // compressed stream is not part of it.
        let extra = rest(&mut inner, "age").map_err(input_failed)?;
        if extra > 0 {
            return Err(DecodeError::TrailingData {
                layer: layer_name(layers.compression),
                extra,
            });
        }
        result
    } else {
        layers.compression = compression_of(&mut reader).map_err(DecodeError::Input)?;
        if layers.compression == SnapshotCompression::None
            && let Ok(mut digest) = stored.lock()
        {
            // No layer: every stored byte goes through the snapshot's digest (the peeked
            // ones are still in the reader's buffer), which gives the stored bytes' too.
            *digest = None;
        }
        let result =
            decompress(&mut reader, layers.compression, "snapshot", out).map_err(input_failed)?;
        let extra = rest(&mut reader, layer_name(layers.compression)).map_err(input_failed)?;
        if extra > 0 {
            return Err(DecodeError::TrailingData {
                layer: layer_name(layers.compression),
                extra,
            });
        }
        result
    };
    let counted = std::mem::take(
        &mut *stored
            .lock()
            .map_err(|_| DecodeError::Input(io::Error::other("digest poisoned")))?,
    );
    let (stored_size, stored_sha256) = match counted {
        Some(digest) => digest.finish(),
        None => (snapshot.size, snapshot.sha256.clone()),
    };
    Ok(Decoded {
        layers,
        stored_size,
        stored_sha256,
        snapshot,
        scanned,
    })
}

/// The decompression layer over `reader` (the compression recognised already); when there is
/// none, etcd's bytes are read as they are. `outer` names the layer a failure of `reader`
/// itself belongs to.
fn decompress<R: BufRead>(
    reader: &mut R,
    compression: SnapshotCompression,
    outer: &'static str,
    out: &mut dyn FnMut(&[u8]) -> io::Result<()>,
) -> Result<(Digested, Option<Scanned>), DecodeError> {
    match compression {
        SnapshotCompression::None => drain(reader, outer, out),
        SnapshotCompression::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(reader).map_err(|e| {
                DecodeError::Corrupt {
                    layer: "zstd",
                    detail: e.to_string(),
                }
            })?;
            drain(&mut decoder, "zstd", out)
        }
        SnapshotCompression::Gzip => {
            let mut decoder = flate2::bufread::MultiGzDecoder::new(reader);
            drain(&mut decoder, "gzip", out)
        }
    }
}

/// A blocking reader over chunks sent from async code (the store's stream), for [`decode`]
/// on a blocking thread.
pub struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<io::Result<bytes::Bytes>>,
    current: bytes::Bytes,
}

impl ChannelReader {
    /// The reader and the sender its chunks come from (an error ends the stream with it; a
    /// dropped sender is the end of the input).
    pub fn new(depth: usize) -> (tokio::sync::mpsc::Sender<io::Result<bytes::Bytes>>, Self) {
        let (tx, rx) = tokio::sync::mpsc::channel(depth);
        (
            tx,
            ChannelReader {
                rx,
                current: bytes::Bytes::new(),
            },
        )
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(chunk)) => self.current = chunk,
                Some(Err(e)) => return Err(e),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

/// Where decoding hands etcd's bytes, on the decoding thread.
pub type ChunkSink = Box<dyn FnMut(&[u8]) -> io::Result<()> + Send>;

/// [`decode`] of an async stream of stored bytes (an object being read), on a blocking
/// thread, handing etcd's bytes to `out` there. Also returns the first error the stream gave,
/// in its own type, so that the caller can word a store failure as one.
pub async fn decode_stream<S, E>(
    mut stream: S,
    identities: Vec<age::x25519::Identity>,
    mut out: ChunkSink,
) -> (Result<Decoded, DecodeError>, Option<E>)
where
    S: futures::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    use futures::StreamExt;
    let (tx, reader) = ChannelReader::new(8);
    let decoding = tokio::task::spawn_blocking(move || decode(reader, &identities, &mut *out));
    let mut failed = None;
    while let Some(item) = stream.next().await {
        let item = match item {
            Ok(chunk) => Ok(chunk),
            Err(e) => {
                let error = io::Error::other(e.to_string());
                failed = Some(e);
                Err(error)
            }
        };
        let stop = item.is_err();
        // The decoder stops reading when it fails: the rest is not needed.
        if tx.send(item).await.is_err() || stop {
            break;
        }
    }
    drop(tx);
    let result = match decoding.await {
        Ok(result) => result,
        Err(e) => Err(DecodeError::Input(io::Error::other(format!(
            "the decoding thread failed: {e}"
        )))),
    };
    (result, failed)
}

#[cfg(test)]
mod tests;
