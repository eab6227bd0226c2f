use super::*;
use age::secrecy::ExposeSecret;

fn sha(bytes: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .to_vec()
}

/// A database of some compressible and some random-looking bytes, with etcd's trailer.
fn snapshot(len: usize) -> Vec<u8> {
    let mut db: Vec<u8> = (0..len)
        .map(|i| {
            if i % 3 == 0 {
                (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1]
            } else {
                b'a' + (i % 7) as u8
            }
        })
        .collect();
    let trailer = sha(&db);
    db.extend_from_slice(&trailer);
    db
}

fn encode(
    bytes: &[u8],
    chunk: usize,
    compression: SnapshotCompression,
    recipients: &[age::x25519::Recipient],
) -> (Vec<u8>, Encoded) {
    let mut encoder = Encoder::new(compression, recipients).unwrap();
    let mut stored = Vec::new();
    for piece in bytes.chunks(chunk) {
        stored.extend_from_slice(encoder.push(piece).unwrap());
    }
    let (last, encoded) = encoder.finish().unwrap();
    stored.extend_from_slice(&last);
    (stored, encoded)
}

fn decode_all(
    stored: &[u8],
    identities: &[age::x25519::Identity],
) -> Result<(Vec<u8>, Decoded), DecodeError> {
    let mut plain = Vec::new();
    let decoded = decode(stored, identities, &mut |b| {
        plain.extend_from_slice(b);
        Ok(())
    })?;
    Ok((plain, decoded))
}

const ALL: [SnapshotCompression; 3] = [
    SnapshotCompression::None,
    SnapshotCompression::Zstd,
    SnapshotCompression::Gzip,
];

#[test]
fn every_combination_round_trips_with_the_same_figures() {
    let identity = age::x25519::Identity::generate();
    let other = age::x25519::Identity::generate();
    let bytes = snapshot(3 << 20);
    for compression in ALL {
        for recipients in [
            vec![],
            vec![identity.to_public()],
            vec![other.to_public(), identity.to_public()],
        ] {
            for chunk in [1000, 64 * 1024 + 1, 4 << 20] {
                let (stored, encoded) = encode(&bytes, chunk, compression, &recipients);
                let case = format!(
                    "{compression:?}, {} recipients, chunk {chunk}",
                    recipients.len()
                );
                assert!(encoded.snapshot.trailer_matches, "{case}");
                assert_eq!(encoded.snapshot.size, bytes.len() as u64, "{case}");
                assert_eq!(encoded.snapshot.sha256, hex(&sha(&bytes)), "{case}");
                assert_eq!(encoded.stored_size, stored.len() as u64, "{case}");
                assert_eq!(encoded.stored_sha256, hex(&sha(&stored)), "{case}");
                assert_eq!(encoded.layers.compression, compression);
                assert_eq!(encoded.layers.encrypted, !recipients.is_empty());
                if compression != SnapshotCompression::None {
                    assert!(stored.len() < bytes.len() * 3 / 4, "{case}: compressed");
                }
                if recipients.is_empty() && compression == SnapshotCompression::None {
                    assert_eq!(stored, bytes, "no layer: stored as etcd sent it");
                }
                let (plain, decoded) =
                    decode_all(&stored, std::slice::from_ref(&identity)).unwrap();
                assert!(plain == bytes, "{case}: the bytes come back");
                assert_eq!(decoded.snapshot, encoded.snapshot, "{case}");
                assert_eq!(decoded.layers, encoded.layers, "{case}");
                assert_eq!(decoded.stored_size, encoded.stored_size, "{case}");
                assert_eq!(decoded.stored_sha256, encoded.stored_sha256, "{case}");
            }
        }
    }
}

#[test]
fn the_layers_are_the_standard_formats() {
    let bytes = snapshot(100_000);
    let (zst, _) = encode(&bytes, 4096, SnapshotCompression::Zstd, &[]);
    assert!(zst.starts_with(ZSTD_MAGIC));
    assert_eq!(zstd::decode_all(&zst[..]).unwrap(), bytes);
    let (gz, _) = encode(&bytes, 4096, SnapshotCompression::Gzip, &[]);
    assert!(gz.starts_with(GZIP_MAGIC));
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut plain)
        .unwrap();
    assert_eq!(plain, bytes);
    let identity = age::x25519::Identity::generate();
    let (aged, _) = encode(
        &bytes,
        4096,
        SnapshotCompression::Zstd,
        &[identity.to_public()],
    );
    assert!(aged.starts_with(AGE_MAGIC));
    let decrypted = age::decrypt(&identity, &aged).unwrap();
    assert_eq!(zstd::decode_all(&decrypted[..]).unwrap(), bytes);
}

#[test]
fn a_wrong_or_missing_identity_is_told_apart() {
    let identity = age::x25519::Identity::generate();
    let stranger = age::x25519::Identity::generate();
    let (stored, _) = encode(
        &snapshot(50_000),
        8192,
        SnapshotCompression::Gzip,
        &[identity.to_public()],
    );
    assert!(matches!(
        decode_all(&stored, &[]),
        Err(DecodeError::Encrypted)
    ));
    assert!(matches!(
        decode_all(&stored, &[stranger]),
        Err(DecodeError::WrongIdentity)
    ));
}

#[test]
fn a_flipped_byte_anywhere_is_caught() {
    let identity = age::x25519::Identity::generate();
    let bytes = snapshot(300_000);
    for compression in ALL {
        for recipients in [vec![], vec![identity.to_public()]] {
            let (stored, _) = encode(&bytes, 10_000, compression, &recipients);
            for at in [
                stored.len() / 3,
                stored.len() / 2,
                stored.len() - 40,
                stored.len() - 1,
            ] {
                let mut bad = stored.clone();
                bad[at] ^= 0x10;
                let case = format!(
                    "{compression:?}, {} recipients, byte {at}",
                    recipients.len()
                );
                match decode_all(&bad, std::slice::from_ref(&identity)) {
                    Err(DecodeError::Corrupt { .. } | DecodeError::TrailingData { .. }) => {}
                    Ok((_, d)) => assert!(
                        !d.snapshot.trailer_matches,
                        "{case}: a damaged snapshot passed"
                    ),
                    Err(other) => panic!("{case}: {other}"),
                }
            }
        }
    }
}

#[test]
fn truncated_streams_and_trailing_bytes_fail() {
    let identity = age::x25519::Identity::generate();
    let bytes = snapshot(500_000);
    for compression in [SnapshotCompression::Zstd, SnapshotCompression::Gzip] {
        for recipients in [vec![], vec![identity.to_public()]] {
            let (stored, _) = encode(&bytes, 10_000, compression, &recipients);
            let case = format!("{compression:?}, {} recipients", recipients.len());
            for cut in [stored.len() - 1, stored.len() / 2, 30] {
                let error =
                    decode_all(&stored[..cut], std::slice::from_ref(&identity)).unwrap_err();
                assert!(
                    matches!(error, DecodeError::Corrupt { .. }),
                    "{case}, cut at {cut}: {error}"
                );
            }
            let mut longer = stored.clone();
            longer.extend_from_slice(b"garbage after the end");
            let error = decode_all(&longer, std::slice::from_ref(&identity)).unwrap_err();
            assert!(
                matches!(
                    error,
                    DecodeError::TrailingData { .. } | DecodeError::Corrupt { .. }
                ),
                "{case}: {error}"
            );
        }
    }
    // Etcd's bytes as they are, truncated: decoding succeeds, etcd's trailer does not.
    let (_, d) = decode_all(&bytes[..bytes.len() - 5], &[]).unwrap();
    assert!(!d.snapshot.trailer_matches);
}

#[test]
fn a_failing_input_is_not_mistaken_for_damage() {
    struct Failing(usize);
    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0 == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    "store went away",
                ));
            }
            let n = buf.len().min(self.0);
            buf[..n].fill(0x28);
            self.0 -= n;
            Ok(n)
        }
    }
    let error = decode(Failing(1000), &[], &mut |_| Ok(())).unwrap_err();
    assert!(matches!(error, DecodeError::Input(_)), "{error}");
    assert!(error.to_string().contains("store went away"));
}

#[test]
fn keys_are_read_from_secret_text_without_echoing_it() {
    let identity = age::x25519::Identity::generate();
    let secret = identity.to_string();
    let recipient = identity.to_public().to_string();
    let text = format!("# backups\n\n{recipient}\n");
    assert_eq!(parse_recipients(&text).unwrap().len(), 1);
    let pasted_secret = parse_recipients(secret.expose_secret()).unwrap_err();
    assert!(pasted_secret.contains("identity"));
    assert!(!pasted_secret.contains(secret.expose_secret()));
    assert!(parse_recipients("# nothing\n").is_err());
    let garbage = parse_recipients("age1notakey").unwrap_err();
    assert!(garbage.contains("line 1"));
    let identities = format!("# created: today\n{}\n", secret.expose_secret());
    assert_eq!(parse_identities(&identities).unwrap().len(), 1);
    let wrong = parse_identities("AGE-SECRET-KEY-1XYZ\n")
        .err()
        .expect("not an identity");
    assert!(!wrong.contains("XYZ"), "{wrong}");
    let fp = fingerprint(&identity.to_public());
    assert!(fp.starts_with("sha256:") && fp.len() == 7 + 16, "{fp}");
    assert_eq!(
        &fp[7..],
        &hex(&sha(recipient.as_bytes()))[..16],
        "sha256sum of the recipient's text"
    );
}

#[test]
fn the_channel_reader_carries_chunks_and_errors() {
    let (tx, mut reader) = ChannelReader::new(2);
    let feeder = std::thread::spawn(move || {
        for piece in [&b"hello "[..], &b""[..], &b"world"[..]] {
            tx.blocking_send(Ok(bytes::Bytes::copy_from_slice(piece)))
                .unwrap();
        }
    });
    let mut all = String::new();
    reader.read_to_string(&mut all).unwrap();
    feeder.join().unwrap();
    assert_eq!(all, "hello world");
    let (tx, mut reader) = ChannelReader::new(1);
    tx.blocking_send(Err(io::Error::other("boom"))).unwrap();
    assert!(reader.read(&mut [0u8; 4]).is_err());
}
