//! The little DER the stand-in needs beyond rcgen: private keys between PKCS#8 (all that ring
//! reads and writes) and the PKCS#1 and SEC 1 forms cert-manager writes by default, and the
//! Authority Information Access extension of `ca` issuers.

/// A tag, its content and what follows it.
pub(crate) fn read(input: &[u8]) -> Result<(u8, &[u8], &[u8]), String> {
    let truncated = || "truncated DER".to_string();
    let (&tag, rest) = input.split_first().ok_or_else(truncated)?;
    let (&first, rest) = rest.split_first().ok_or_else(truncated)?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return Err("unsupported DER length".into());
        }
        let length = rest[..count]
            .iter()
            .fold(0usize, |acc, byte| (acc << 8) | usize::from(*byte));
        (length, &rest[count..])
    };
    if rest.len() < length {
        return Err(truncated());
    }
    Ok((tag, &rest[..length], &rest[length..]))
}

/// One element of a constructed value: its tag, whole encoding and content.
pub(crate) type Element<'a> = (u8, &'a [u8], &'a [u8]);

/// Every element of a constructed value's content.
pub(crate) fn elements(mut content: &[u8]) -> Result<Vec<Element<'_>>, String> {
    let mut out = Vec::new();
    while !content.is_empty() {
        let (tag, inner, rest) = read(content)?;
        let whole = &content[..content.len() - rest.len()];
        out.push((tag, whole, inner));
        content = rest;
    }
    Ok(out)
}

/// `tag`, length, `content`.
pub(crate) fn write(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let length = content.len();
    if length < 0x80 {
        out.push(u8::try_from(length).unwrap_or(0));
    } else {
        let bytes: Vec<u8> = length
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | u8::try_from(bytes.len()).unwrap_or(0));
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

pub(crate) const SEQUENCE: u8 = 0x30;
pub(crate) const INTEGER: u8 = 0x02;
pub(crate) const OCTET_STRING: u8 = 0x04;
pub(crate) const NULL: u8 = 0x05;
pub(crate) const OID: u8 = 0x06;
pub(crate) const CONTEXT_0: u8 = 0xa0;

/// Contents of the object identifiers used here.
pub(crate) mod oid {
    pub const RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
    pub const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
    pub const P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
    pub const P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
    pub const P521: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x23];
    pub const ED25519: &[u8] = &[0x2b, 0x65, 0x70];
    /// id-ad-ocsp
    pub const OCSP: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01];
    /// id-ad-caIssuers
    pub const CA_ISSUERS: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x02];
}

/// The algorithm of a PKCS#8 key: its OID and, for EC keys, the curve's.
pub(crate) fn pkcs8_algorithm(pkcs8: &[u8]) -> Result<(Vec<u8>, Option<Vec<u8>>), String> {
    let (tag, content, _) = read(pkcs8)?;
    if tag != SEQUENCE {
        return Err("not a PKCS#8 private key".into());
    }
    let fields = elements(content)?;
    let (_, _, algorithm) = fields
        .get(1)
        .filter(|(tag, _, _)| *tag == SEQUENCE)
        .ok_or("a PKCS#8 key without its algorithm")?;
    let parts = elements(algorithm)?;
    let oid = parts
        .first()
        .filter(|(tag, _, _)| *tag == OID)
        .map(|(_, _, content)| content.to_vec())
        .ok_or("a PKCS#8 key without an algorithm OID")?;
    let curve = parts
        .get(1)
        .filter(|(tag, _, _)| *tag == OID)
        .map(|(_, _, content)| content.to_vec());
    Ok((oid, curve))
}

/// The private key structure inside a PKCS#8 key (RSAPrivateKey, ECPrivateKey...).
fn pkcs8_inner(pkcs8: &[u8]) -> Result<&[u8], String> {
    let (_, content, _) = read(pkcs8)?;
    let fields = elements(content)?;
    fields
        .get(2)
        .filter(|(tag, _, _)| *tag == OCTET_STRING)
        .map(|(_, _, content)| *content)
        .ok_or_else(|| "a PKCS#8 key without its private key".to_string())
}

/// A PKCS#8 key as PKCS#1 (`RSA PRIVATE KEY`).
pub(crate) fn pkcs8_to_pkcs1(pkcs8: &[u8]) -> Result<Vec<u8>, String> {
    Ok(pkcs8_inner(pkcs8)?.to_vec())
}

/// A PKCS#1 RSA key as PKCS#8.
pub(crate) fn pkcs1_to_pkcs8(pkcs1: &[u8]) -> Vec<u8> {
    let algorithm = write(
        SEQUENCE,
        &[write(OID, oid::RSA_ENCRYPTION), write(NULL, &[])].concat(),
    );
    write(
        SEQUENCE,
        &[write(INTEGER, &[0]), algorithm, write(OCTET_STRING, pkcs1)].concat(),
    )
}

/// A PKCS#8 EC key as SEC 1 (`EC PRIVATE KEY`), with its curve, as OpenSSL and Go write it.
pub(crate) fn pkcs8_to_sec1(pkcs8: &[u8]) -> Result<Vec<u8>, String> {
    let (_, curve) = pkcs8_algorithm(pkcs8)?;
    let curve = curve.ok_or("an EC key without its curve")?;
    let (_, content, _) = read(pkcs8_inner(pkcs8)?)?;
    let fields = elements(content)?;
    let mut out = Vec::new();
    for (index, (tag, whole, _)) in fields.iter().enumerate() {
        if *tag == CONTEXT_0 {
            continue;
        }
        out.extend_from_slice(whole);
        if index == 1 {
            out.extend(write(CONTEXT_0, &write(OID, &curve)));
        }
    }
    Ok(write(SEQUENCE, &out))
}

/// A SEC 1 EC key (with its curve) as PKCS#8.
pub(crate) fn sec1_to_pkcs8(sec1: &[u8]) -> Result<Vec<u8>, String> {
    let (tag, content, _) = read(sec1)?;
    if tag != SEQUENCE {
        return Err("not an EC private key".into());
    }
    let curve = elements(content)?
        .into_iter()
        .find(|(tag, _, _)| *tag == CONTEXT_0)
        .map(|(_, _, inner)| inner.to_vec())
        .ok_or("an EC private key without its curve")?;
    let algorithm = write(SEQUENCE, &[write(OID, oid::EC_PUBLIC_KEY), curve].concat());
    Ok(write(
        SEQUENCE,
        &[write(INTEGER, &[0]), algorithm, write(OCTET_STRING, sec1)].concat(),
    ))
}

/// The modulus length of a PKCS#8 RSA key, in bits.
pub(crate) fn rsa_modulus_bits(pkcs8: &[u8]) -> Result<usize, String> {
    let (_, content, _) = read(pkcs8_inner(pkcs8)?)?;
    let fields = elements(content)?;
    let (_, _, modulus) = fields.get(1).ok_or("an RSA key without its modulus")?;
    let significant = modulus.iter().skip_while(|b| **b == 0).count();
    Ok(significant * 8)
}

/// The content of an Authority Information Access extension: OCSP responders and the
/// issuing certificate's URLs.
pub(crate) fn authority_info_access(ocsp: &[String], issuers: &[String]) -> Vec<u8> {
    let description = |method: &[u8], uri: &str| {
        // accessLocation: GeneralName uniformResourceIdentifier [6] IA5String
        write(
            SEQUENCE,
            &[write(OID, method), write(0x86, uri.as_bytes())].concat(),
        )
    };
    let all: Vec<u8> = ocsp
        .iter()
        .map(|uri| description(oid::OCSP, uri))
        .chain(issuers.iter().map(|uri| description(oid::CA_ISSUERS, uri)))
        .flatten()
        .collect();
    write(SEQUENCE, &all)
}
