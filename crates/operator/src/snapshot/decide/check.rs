//! What is verified: the figures computed while writing ([`Stored`]) against what the read-back
//! decoded ([`check_read_back`]) and, with `verify: Restore`, what a restored etcd served
//! ([`check_restored`]).

use etcd_operator_api::snapshot::{
    EtcdSnapshotStatus, SnapshotCompression, SnapshotPhase, SnapshotVerify,
};

use super::super::codec::{Decoded, Encoded, Layers};
use super::failure::Failure;

/// What was written: the artifact (the stored bytes), etcd's bytes, the layers applied and
/// what the database's pages hold. The PVC agent sends it back as JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stored {
    pub uri: String,
    /// The stored bytes' size and SHA-256 (the artifact).
    pub size: u64,
    pub sha256: String,
    /// etcd's bytes (before compression and encryption).
    #[serde(default)]
    pub snapshot_size: u64,
    #[serde(default)]
    pub snapshot_sha256: String,
    #[serde(default)]
    pub compression: SnapshotCompression,
    /// The fingerprints of the age recipients; empty when not encrypted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipients: Vec<String>,
    /// From the database's pages; `None` when they could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_keys: Option<u64>,
}

impl Stored {
    /// From what the encoder computed.
    pub fn of(uri: &str, encoded: &Encoded, recipients: Vec<String>) -> Stored {
        Stored {
            uri: uri.to_string(),
            size: encoded.stored_size,
            sha256: encoded.stored_sha256.clone(),
            snapshot_size: encoded.snapshot.size,
            snapshot_sha256: encoded.snapshot.sha256.clone(),
            compression: encoded.layers.compression,
            recipients,
            revision: encoded.scanned.map(|s| s.revision),
            total_keys: encoded.scanned.map(|s| s.total_keys),
        }
    }

    pub fn encrypted(&self) -> bool {
        !self.recipients.is_empty()
    }

    /// The layers, as decoding reports them.
    pub fn layers(&self) -> Layers {
        Layers {
            compression: self.compression,
            encrypted: self.encrypted(),
        }
    }

    /// Back from a status that recorded it (the artifact and the snapshot's figures), for
    /// the verification that follows.
    pub fn from_status(status: &EtcdSnapshotStatus) -> Option<Stored> {
        let artifact = status.artifact.as_ref()?;
        let hex = |c: &Option<String>| {
            c.as_deref()
                .and_then(|c| c.strip_prefix("sha256:"))
                .map(str::to_string)
        };
        Some(Stored {
            uri: artifact.uri.clone(),
            size: artifact.size_bytes? as u64,
            sha256: hex(&artifact.checksum)?,
            snapshot_size: status.snapshot_size_bytes.unwrap_or(artifact.size_bytes?) as u64,
            snapshot_sha256: hex(&status.snapshot_checksum).or_else(|| hex(&artifact.checksum))?,
            compression: status.compression.unwrap_or_default(),
            recipients: status
                .encryption
                .as_ref()
                .map(|e| e.recipients.clone())
                .unwrap_or_default(),
            revision: status
                .verification
                .as_ref()
                .and_then(|v| v.revision)
                .or(status.revision),
            total_keys: status
                .verification
                .as_ref()
                .and_then(|v| v.total_keys)
                .map(|k| k as u64),
        })
    }
}

/// The read-back check of the stored bytes alone: the same size and SHA-256 as computed while
/// writing.
pub fn verify(written: &Stored, read_size: u64, read_sha256: &str) -> Result<(), Failure> {
    if read_size != written.size {
        return Err(Failure::VerificationFailed {
            detail: format!("has {read_size} bytes where {} were written", written.size),
        });
    }
    if read_sha256 != written.sha256 {
        return Err(Failure::VerificationFailed {
            detail: format!(
                "has SHA-256 {read_sha256} where sha256:{} was written",
                written.sha256
            ),
        });
    }
    Ok(())
}

/// What a verification found, for the status (the PVC agent sends it back as JSON).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checked {
    pub method: SnapshotVerify,
    /// The content (decrypted, decompressed) was checked, not only the stored bytes.
    pub content_checked: bool,
    pub revision: Option<i64>,
    pub total_keys: Option<u64>,
    /// `Restore`: the keys the restored etcd served.
    pub keys: Option<i64>,
    pub message: String,
}

/// The read-back check (verify `Checksum`): the stored bytes' size and SHA-256, then, when
/// they could be decoded (`decoded`; `None` for an encrypted snapshot without an identity),
/// the layers, etcd's bytes (size, SHA-256, etcd's own trailing hash) and what the pages hold,
/// each equal to what was computed while writing.
pub fn check_read_back(
    written: &Stored,
    read_size: u64,
    read_sha256: &str,
    decoded: Option<&Decoded>,
) -> Result<Checked, Failure> {
    verify(written, read_size, read_sha256)?;
    let Some(decoded) = decoded else {
        return Ok(Checked {
            method: SnapshotVerify::Checksum,
            content_checked: false,
            revision: None,
            total_keys: None,
            keys: None,
            message: format!(
                "the stored object ({} bytes) has the SHA-256 written; it is encrypted and no identity was given, so its content was checked only while it was written",
                written.size
            ),
        });
    };
    let mismatch = |detail: String| Err(Failure::VerificationFailed { detail });
    if decoded.layers != written.layers() {
        return mismatch(format!(
            "is encoded as {} where {} was written",
            decoded.layers.describe(),
            written.layers().describe()
        ));
    }
    if !decoded.snapshot.trailer_matches {
        return mismatch(
            "decodes to bytes that fail etcd's integrity check (their last 32 bytes are not the SHA-256 of the rest)"
                .to_string(),
        );
    }
    if decoded.snapshot.size != written.snapshot_size
        || decoded.snapshot.sha256 != written.snapshot_sha256
    {
        return mismatch(format!(
            "decodes to {} bytes with SHA-256 {} where etcd sent {} bytes with sha256:{}",
            decoded.snapshot.size,
            decoded.snapshot.sha256,
            written.snapshot_size,
            written.snapshot_sha256
        ));
    }
    let read = decoded.scanned.map(|s| (s.revision, s.total_keys));
    let wrote = written.revision.zip(written.total_keys);
    if wrote.is_some() && read != wrote {
        return mismatch(format!(
            "holds revision and keys {read:?} where {wrote:?} were streamed"
        ));
    }
    Ok(Checked {
        method: SnapshotVerify::Checksum,
        content_checked: true,
        revision: read.map(|r| r.0),
        total_keys: read.map(|r| r.1),
        keys: None,
        message: format!(
            "read back: {} bytes with the SHA-256 written; decoded ({}) to etcd's {} bytes, etcd's hash matches{}",
            written.size,
            written.layers().describe(),
            written.snapshot_size,
            read.map(|(r, k)| format!(", revision {r}, {k} keys in the database"))
                .unwrap_or_else(
                    || ", its pages could not be read for revision and keys".to_string()
                )
        ),
    })
}

/// The restore check (verify `Restore`): the restored etcd must serve the revision the
/// snapshot's pages hold.
pub fn check_restored(
    written: &Stored,
    checksum: &Checked,
    served_revision: i64,
    served_keys: i64,
) -> Result<Checked, Failure> {
    let expected = checksum.revision.or(written.revision);
    if let Some(expected) = expected
        && expected != served_revision
    {
        return Err(Failure::VerificationFailed {
            detail: format!(
                "restored into a throwaway etcd, serves revision {served_revision} where the snapshot holds revision {expected}"
            ),
        });
    }
    Ok(Checked {
        method: SnapshotVerify::Restore,
        content_checked: true,
        revision: Some(served_revision),
        total_keys: checksum.total_keys.or(written.total_keys),
        keys: Some(served_keys),
        message: format!(
            "{}; restored into a throwaway etcd, which served revision {served_revision} and {served_keys} keys",
            checksum.message
        ),
    })
}

/// Whether a snapshot waits for its restore check: stored and read back, `Restore` asked,
/// not finished.
pub fn restore_check_pending(status: &EtcdSnapshotStatus) -> bool {
    status.phase == Some(SnapshotPhase::Started)
        && status.artifact.is_some()
        && status
            .verification
            .as_ref()
            .is_some_and(|v| v.method == SnapshotVerify::Restore && v.time.is_none())
}

/// The checksum part of a verification recorded in a status (the restore check adds to it).
pub fn checked_from_status(status: &EtcdSnapshotStatus) -> Option<Checked> {
    let v = status.verification.as_ref()?;
    Some(Checked {
        method: SnapshotVerify::Checksum,
        content_checked: v.content_checked.unwrap_or(false),
        revision: v.revision,
        total_keys: v.total_keys.map(|k| k as u64),
        keys: None,
        message: v.message.clone().unwrap_or_default(),
    })
}
