//! The agent's I/O, in its Pod: the snapshot streamed onto the claim and written atomically
//! (temporary file, fsync, owner file, rename, fsync of the directory), read back, removed
//! under `deletionPolicy: Delete`, and the result reported in the termination message.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::super::codec;
use super::super::decide::{Checked, Failure, Stored};
use super::UID_SUFFIX;
use super::outcome::{AgentResult, Saved, result_line};
use crate::etcd::{ClientTls, EtcdAccess, EtcdClient, Timeouts};

/// `snapshot-save`'s arguments.
#[derive(Clone, Debug)]
pub struct SaveArgs {
    pub endpoint: String,
    pub member: String,
    /// `<mount>/<subPath>/<name>.db`.
    pub file: PathBuf,
    pub uri: String,
    pub uid: String,
    pub access_dir: Option<PathBuf>,
    pub credentials: Option<(String, String)>,
    pub compression: etcd_operator_api::snapshot::SnapshotCompression,
    /// age recipients (`age1...`); none: not encrypted.
    pub recipients: Vec<String>,
    /// The age identity file's text (from the environment), to read the file back with.
    pub identity: Option<String>,
}

/// An I/O failure on the claim, `NoSpace` when the volume is full.
pub(super) fn volume_failure(uri: &str, what: &str, e: &std::io::Error) -> Failure {
    if e.raw_os_error() == Some(libc_enospc()) || e.kind() == std::io::ErrorKind::StorageFull {
        Failure::NoSpace {
            uri: uri.to_string(),
            detail: format!("{what}: {e}"),
        }
    } else {
        Failure::Volume {
            detail: format!("{what} for {uri}: {e}"),
        }
    }
}

pub(super) const fn libc_enospc() -> i32 {
    28
}

/// The owner recorded beside `file`, if any.
pub(super) fn writer_of(file: &Path) -> Option<String> {
    let mut path = file.as_os_str().to_owned();
    path.push(UID_SUFFIX);
    std::fs::read_to_string(PathBuf::from(path))
        .ok()
        .map(|s| s.trim().to_string())
}

pub(super) fn uid_file(file: &Path) -> PathBuf {
    let mut path = file.as_os_str().to_owned();
    path.push(UID_SUFFIX);
    PathBuf::from(path)
}

pub(super) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// What the agent dials etcd with: the files of the access Secret, the credentials from the
/// environment.
pub(super) fn access(args: &SaveArgs) -> Result<EtcdAccess, Failure> {
    let mut access = EtcdAccess::plaintext();
    if let Some(dir) = &args.access_dir {
        let read = |name: &str| std::fs::read(dir.join(name)).ok();
        if let Some(ca_pem) = read("ca.crt") {
            let identity = read("tls.crt").zip(read("tls.key"));
            access.tls = Some(ClientTls { ca_pem, identity });
        }
    }
    access.credentials = args.credentials.clone();
    Ok(access)
}

/// Streams the snapshot through the codec to `<file>` atomically and reads it back: `Saved`,
/// or `Unverified` when the file is in place but its read-back failed (the file stays, named
/// in the result, so the snapshot's status and its `deletionPolicy` can find it), or `Failed`
/// when nothing was put in place.
pub async fn save(args: &SaveArgs) -> AgentResult {
    let written = match write(args).await {
        Ok(written) => written,
        Err(failure) => return AgentResult::Failed(failure),
    };
    match read_back_file(&args.file, &args.uri, &written.stored, &written.identities) {
        Ok(checked) => AgentResult::Saved(Box::new(Saved {
            stored: written.stored,
            member: args.member.clone(),
            asked_revision: written.asked_revision,
            etcd_version: written.etcd_version,
            checked,
        })),
        Err(failure) => AgentResult::Unverified {
            stored: Box::new(written.stored),
            failure,
        },
    }
}

/// A file in place, not yet read back.
struct Written {
    stored: Stored,
    asked_revision: Option<i64>,
    etcd_version: Option<String>,
    /// Parsed before anything was written (a bad identity fails first).
    identities: Vec<age::x25519::Identity>,
}

/// Writes the file and puts it in place; the read-back is [`save`]'s.
async fn write(args: &SaveArgs) -> Result<Written, Failure> {
    let uri = args.uri.as_str();
    let dir = args.file.parent().unwrap_or(Path::new("/")).to_path_buf();
    let recipients = codec::parse_recipients(&args.recipients.join("\n"))
        .or_else(|e| {
            if args.recipients.is_empty() {
                Ok(Vec::new())
            } else {
                Err(e)
            }
        })
        .map_err(|e| Failure::EncryptionSecret {
            detail: format!("the recipients given to the agent: {e}"),
        })?;
    let identities = match &args.identity {
        Some(text) => codec::parse_identities(text).map_err(|e| Failure::EncryptionSecret {
            detail: format!("the identity given to the agent: {e}"),
        })?,
        None => Vec::new(),
    };
    std::fs::create_dir_all(&dir).map_err(|e| volume_failure(uri, "creating the directory", &e))?;
    if args.file.exists() {
        match writer_of(&args.file) {
            Some(writer) if writer == args.uid => {}
            writer => {
                return Err(Failure::FileExists {
                    uri: uri.to_string(),
                    writer,
                });
            }
        }
    }
    let etcd_failure = |detail: String| Failure::Etcd {
        member: args.member.clone(),
        detail,
    };
    let access = access(args)?;
    let client = EtcdClient::connect_endpoint(&args.endpoint, Timeouts::SNAPSHOT, &access)
        .await
        .map_err(|e| etcd_failure(e.to_string()))?;
    let etcd_version = client
        .endpoint_status(&args.endpoint)
        .await
        .ok()
        .map(|s| s.version);
    // Asked before the stream: only a fallback for a snapshot whose pages cannot be read.
    let asked_revision = client.revision().await.ok();
    let mut stream = client
        .snapshot()
        .await
        .map_err(|e| etcd_failure(e.to_string()))?;

    let name = args
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let uid8: String = args.uid.chars().take(8).collect();
    let temporary = dir.join(format!(".{name}.{uid8}.tmp"));
    let written = async {
        let mut file = std::fs::File::create(&temporary)
            .map_err(|e| volume_failure(uri, "creating the temporary file", &e))?;
        let mut encoder =
            codec::Encoder::new(args.compression, &recipients).map_err(|e| Failure::Encoding {
                detail: e.to_string(),
            })?;
        loop {
            match stream.next_chunk().await {
                Ok(Some(chunk)) => {
                    let bytes = encoder.push(&chunk).map_err(|e| Failure::Encoding {
                        detail: e.to_string(),
                    })?;
                    file.write_all(bytes)
                        .map_err(|e| volume_failure(uri, "writing the snapshot", &e))?;
                }
                Ok(None) => break,
                Err(e) => return Err(etcd_failure(e.to_string())),
            }
        }
        let (last, encoded) = encoder.finish().map_err(|e| Failure::Encoding {
            detail: e.to_string(),
        })?;
        if !encoded.snapshot.trailer_matches {
            return Err(Failure::Corrupt {
                member: args.member.clone(),
            });
        }
        file.write_all(&last)
            .map_err(|e| volume_failure(uri, "writing the snapshot", &e))?;
        file.sync_all()
            .map_err(|e| volume_failure(uri, "syncing the snapshot", &e))?;
        Ok(encoded)
    }
    .await;
    let encoded = match written {
        Ok(encoded) => encoded,
        Err(failure) => {
            let _ = std::fs::remove_file(&temporary);
            return Err(failure);
        }
    };
    // The owner first (a crash between the two leaves our own uid beside the old or no
    // file, which this same snapshot may replace), then the file.
    let owner_temporary = dir.join(format!(".{name}{UID_SUFFIX}.{uid8}.tmp"));
    let finish = || -> std::io::Result<()> {
        let mut owner = std::fs::File::create(&owner_temporary)?;
        owner.write_all(args.uid.as_bytes())?;
        owner.sync_all()?;
        std::fs::rename(&owner_temporary, uid_file(&args.file))?;
        std::fs::rename(&temporary, &args.file)?;
        sync_dir(&dir)
    };
    if let Err(e) = finish() {
        let _ = std::fs::remove_file(&temporary);
        let _ = std::fs::remove_file(&owner_temporary);
        return Err(volume_failure(uri, "moving the snapshot into place", &e));
    }
    let fingerprints = recipients.iter().map(codec::fingerprint).collect();
    Ok(Written {
        stored: Stored::of(uri, &encoded, fingerprints),
        asked_revision,
        etcd_version,
        identities,
    })
}

/// Reads the written file back and checks it: decoded when it can be (not encrypted, or an
/// identity given), else its bytes only.
pub(super) fn read_back_file(
    file: &Path,
    uri: &str,
    stored: &Stored,
    identities: &[age::x25519::Identity],
) -> Result<Checked, Failure> {
    if stored.encrypted() && identities.is_empty() {
        let (size, sha256) =
            hash_file(file).map_err(|e| volume_failure(uri, "reading the snapshot back", &e))?;
        return super::super::decide::check_read_back(stored, size, &sha256, None);
    }
    let input = std::fs::File::open(file)
        .map_err(|e| volume_failure(uri, "reading the snapshot back", &e))?;
    match codec::decode(input, identities, &mut |_| Ok(())) {
        Ok(decoded) => super::super::decide::check_read_back(
            stored,
            decoded.stored_size,
            &decoded.stored_sha256,
            Some(&decoded),
        ),
        Err(codec::DecodeError::Input(e)) => {
            Err(volume_failure(uri, "reading the snapshot back", &e))
        }
        Err(e) => Err(Failure::VerificationFailed {
            detail: format!("cannot be decoded: {e}"),
        }),
    }
}

/// Size and SHA-256 of a file, read in 1 MiB pieces.
pub fn hash_file(path: &Path) -> std::io::Result<(u64, String)> {
    let mut file = std::fs::File::open(path)?;
    let mut digest = super::super::digest::PlainDigest::default();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        digest.update(&buffer[..read]);
    }
    Ok(digest.finish())
}

/// `snapshot-remove`: removes `<file>` and its owner file if `uid` wrote it; says what was
/// done. A file written by another EtcdSnapshot (or by hand) is left.
pub fn remove(file: &Path, uri: &str, uid: &str) -> Result<String, Failure> {
    if !file.exists() {
        let _ = std::fs::remove_file(uid_file(file));
        return Ok(format!("{uri} is not on the volume (nothing to delete)"));
    }
    match writer_of(file) {
        Some(writer) if writer == uid => {
            std::fs::remove_file(file).map_err(|e| volume_failure(uri, "removing the file", &e))?;
            let _ = std::fs::remove_file(uid_file(file));
            if let Some(dir) = file.parent() {
                let _ = sync_dir(dir);
            }
            Ok(format!("deleted {uri} (deletionPolicy Delete)"))
        }
        _ => Ok(format!(
            "{uri} was written by another EtcdSnapshot: left on the volume"
        )),
    }
}

/// Writes the result where the kubelet reads it (and to stdout for people reading the log).
pub fn report(result: &AgentResult, termination_log: &Path) {
    let line = result_line(result);
    println!("{line}");
    if let Err(e) = std::fs::write(termination_log, format!("{line}\n")) {
        eprintln!("cannot write {}: {e}", termination_log.display());
    }
}
