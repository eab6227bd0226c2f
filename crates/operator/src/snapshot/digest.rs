//! The SHA-256 and size of a snapshot, computed while it streams, and etcd's own check: the
//! last 32 bytes etcd sends are the SHA-256 of everything before them.

use ring::digest::{Context, SHA256};

/// The length of etcd's trailing hash.
pub const TRAILER: usize = 32;

/// Fed every chunk in order; keeps the last 32 bytes aside so that the hash of the database
/// without its trailer is known at the end without buffering more than 32 bytes. One SHA-256
/// runs over the stream: the hash of every byte continues a copy of the body's at the end.
pub struct SnapshotDigest {
    /// Over every byte except the last 32: what etcd's trailer must equal.
    body: Context,
    /// The last (up to) 32 bytes seen, not yet fed to `body`.
    tail: Vec<u8>,
    size: u64,
}

/// What a finished stream amounts to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digested {
    /// Bytes in all, trailer included (the stored object's size).
    pub size: u64,
    /// SHA-256 of all the bytes, lower-case hex.
    pub sha256: String,
    /// Whether the last 32 bytes were the SHA-256 of the rest (etcd's integrity check).
    pub trailer_matches: bool,
}

impl Default for SnapshotDigest {
    fn default() -> Self {
        SnapshotDigest {
            body: Context::new(&SHA256),
            tail: Vec::with_capacity(2 * TRAILER),
            size: 0,
        }
    }
}

impl SnapshotDigest {
    pub fn update(&mut self, chunk: &[u8]) {
        self.size += chunk.len() as u64;
        if chunk.len() >= TRAILER {
            // Everything held back, and all but the chunk's last 32 bytes, are body.
            self.body.update(&self.tail);
            self.body.update(&chunk[..chunk.len() - TRAILER]);
            self.tail.clear();
            self.tail.extend_from_slice(&chunk[chunk.len() - TRAILER..]);
        } else {
            self.tail.extend_from_slice(chunk);
            if self.tail.len() > TRAILER {
                let spill = self.tail.len() - TRAILER;
                self.body.update(&self.tail[..spill]);
                self.tail.drain(..spill);
            }
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn finish(self) -> Digested {
        // Every byte: the body, then what is held back.
        let mut whole = self.body.clone();
        whole.update(&self.tail);
        let body = self.body.finish();
        let trailer_matches = self.tail.len() == TRAILER && body.as_ref() == self.tail.as_slice();
        Digested {
            size: self.size,
            sha256: hex(whole.finish().as_ref()),
            trailer_matches,
        }
    }
}

/// A plain SHA-256 and size over a stream (reading an object back).
pub struct PlainDigest {
    context: Context,
    size: u64,
}

impl Default for PlainDigest {
    fn default() -> Self {
        PlainDigest {
            context: Context::new(&SHA256),
            size: 0,
        }
    }
}

impl PlainDigest {
    pub fn update(&mut self, chunk: &[u8]) {
        self.context.update(chunk);
        self.size += chunk.len() as u64;
    }

    /// (size, hex SHA-256)
    pub fn finish(self) -> (u64, String) {
        (self.size, hex(self.context.finish().as_ref()))
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(bytes: &[u8]) -> Vec<u8> {
        ring::digest::digest(&SHA256, bytes).as_ref().to_vec()
    }

    /// A database followed by etcd's trailer.
    fn snapshot(db: &[u8]) -> Vec<u8> {
        let mut out = db.to_vec();
        out.extend_from_slice(&sha(db));
        out
    }

    fn digest_in_chunks(bytes: &[u8], chunk: usize) -> Digested {
        let mut d = SnapshotDigest::default();
        for piece in bytes.chunks(chunk.max(1)) {
            d.update(piece);
        }
        d.finish()
    }

    #[test]
    fn a_good_trailer_matches_whatever_the_chunking() {
        let db: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let bytes = snapshot(&db);
        for chunk in [1, 5, 31, 32, 33, 64, 1000, 32 * 1024, bytes.len()] {
            let d = digest_in_chunks(&bytes, chunk);
            assert!(d.trailer_matches, "chunk {chunk}");
            assert_eq!(d.size, bytes.len() as u64);
            assert_eq!(d.sha256, hex(&sha(&bytes)), "chunk {chunk}");
        }
    }

    #[test]
    fn a_flipped_byte_anywhere_breaks_the_trailer() {
        let db = vec![42u8; 5000];
        let good = snapshot(&db);
        for at in [0, 100, 4999, 5000, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 1;
            for chunk in [7, 32, 4096] {
                assert!(
                    !digest_in_chunks(&bad, chunk).trailer_matches,
                    "at {at}, chunk {chunk}"
                );
            }
        }
    }

    #[test]
    fn truncated_or_short_streams_do_not_match() {
        let good = snapshot(b"some database bytes");
        assert!(!digest_in_chunks(&good[..good.len() - 1], 8).trailer_matches);
        assert!(!digest_in_chunks(&good[..20], 8).trailer_matches);
        assert!(!digest_in_chunks(b"", 8).trailer_matches);
        // Exactly a trailer over nothing: the hash of the empty database.
        assert!(digest_in_chunks(&sha(b""), 8).trailer_matches);
    }

    #[test]
    fn the_plain_digest_is_sha256_and_size() {
        let mut d = PlainDigest::default();
        d.update(b"hello ");
        d.update(b"world");
        assert_eq!(
            d.finish(),
            (
                11,
                "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9".to_string()
            )
        );
    }
}
