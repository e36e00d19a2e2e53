//! Encrypted private keys: PKCS#8 `EncryptedPrivateKeyInfo` as Kafka's PEM loader and Java key
//! stores hold them.
//!
//! Supported encryptions, the ones a working Kafka client setup uses:
//! - PBES2 (RFC 8018) with PBKDF2 (HMAC-SHA-1/224/256/384/512) and AES-128/192/256-CBC or
//!   DES-EDE3-CBC: OpenSSL 3's default (`openssl pkcs8 -topk8`), read by newer JDKs;
//! - `pbeWithSHAAnd3-KeyTripleDES-CBC` (PKCS#12 PBE, RFC 7292 appendix B): `openssl pkcs8 -topk8
//!   -v1 PBE-SHA1-3DES`, the form Kafka's `DefaultSslEngineFactory` reads on Java 17;
//! - Sun's JKS key protector (`1.3.6.1.4.1.42.2.17.1.1`), for private keys inside JKS stores.
//!
//! Every length and count comes from a file and is checked before use; the key-derivation work a
//! file may ask for is bounded ([`MAX_KDF_ITERATIONS`]).

use cbc::cipher::{BlockModeDecrypt, KeyIvInit, block_padding::Pkcs7};
use pkcs5::der::Decode as _;
use sha1::{Digest, Sha1};

/// The most PBKDF2 or PKCS#12 KDF iterations a key file may ask for. OpenSSL writes 2048, Java
/// 10 000; a million takes well under a second, more is a hostile or broken file.
pub const MAX_KDF_ITERATIONS: u32 = 1_000_000;

/// Why an encrypted private key could not be decrypted. Never holds key material or passwords.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyDecryptError {
    #[error("malformed DER: {0}")]
    Der(&'static str),
    #[error(
        "the key is encrypted with {0}, which strait does not read; re-encrypt it with `openssl pkcs8 -topk8 -v2 aes-256-cbc` (PBES2) or `-v1 PBE-SHA1-3DES`"
    )]
    UnsupportedAlgorithm(String),
    #[error(
        "the key asks for {0} key-derivation iterations, more than the {MAX_KDF_ITERATIONS} strait allows"
    )]
    TooManyIterations(u64),
    #[error("wrong key password (ssl.key.password), or the key is corrupt")]
    WrongPassword,
}

/// OIDs (DER content bytes) of the algorithms we read.
mod oid {
    /// 1.2.840.113549.1.5.13, PBES2.
    pub const PBES2: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x05, 0x0d];
    /// 1.2.840.113549.1.12.1.3, pbeWithSHAAnd3-KeyTripleDES-CBC.
    pub const PBE_SHA1_3DES: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x0c, 0x01, 0x03];
    /// 1.2.840.113549.1.12.1.x: the other PKCS#12 PBE algorithms (RC2, RC4, 2-key 3DES).
    pub const PKCS12_PBE_PREFIX: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x0c, 0x01];
    /// 1.2.840.113549.1.5.x: PBES1 (MD5/SHA-1 with DES or RC2).
    pub const PBES1_PREFIX: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x05];
    /// 1.3.6.1.4.1.42.2.17.1.1, Sun's JKS key protector.
    pub const SUN_JKS: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x2a, 0x02, 0x11, 0x01, 0x01];
    /// 1.3.6.1.4.1.42.2.19.1, Sun's JCEKS key protector (PBEWithMD5AndTripleDES).
    pub const SUN_JCEKS: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x2a, 0x02, 0x13, 0x01];
}

/// Decrypts a DER `EncryptedPrivateKeyInfo` into the DER PKCS#8 `PrivateKeyInfo` it protects.
pub fn decrypt(der: &[u8], password: &str) -> Result<Vec<u8>, KeyDecryptError> {
    let info = EncryptedInfo::parse(der)?;
    match info.algorithm {
        oid::PBES2 => pbes2(&info, password),
        oid::PBE_SHA1_3DES => pkcs12_3des(&info, password),
        oid::SUN_JKS => sun_jks(info.data, password),
        other => Err(KeyDecryptError::UnsupportedAlgorithm(algorithm_name(other))),
    }
}

fn algorithm_name(oid_bytes: &[u8]) -> String {
    let name = match oid_bytes {
        oid::SUN_JCEKS => "Sun's JCEKS key protector (PBEWithMD5AndTripleDES)",
        o if o.starts_with(oid::PKCS12_PBE_PREFIX) => "a PKCS#12 PBE other than SHA1-3DES",
        o if o.starts_with(oid::PBES1_PREFIX) => "PBES1 (DES or RC2)",
        _ => "",
    };
    let dotted = dotted_oid(oid_bytes);
    if name.is_empty() {
        format!("algorithm {dotted}")
    } else {
        format!("{name} ({dotted})")
    }
}

/// `1.2.840...` text of an OID's content bytes, for messages.
fn dotted_oid(bytes: &[u8]) -> String {
    let mut arcs: Vec<u64> = Vec::new();
    let mut value: u64 = 0;
    for &b in bytes {
        value = value.saturating_mul(128) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (value / 40).min(2);
                arcs.push(first);
                arcs.push(value - first * 40);
            } else {
                arcs.push(value);
            }
            value = 0;
        }
    }
    arcs.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

/// `EncryptedPrivateKeyInfo ::= SEQUENCE { encryptionAlgorithm AlgorithmIdentifier,
/// encryptedData OCTET STRING }`, borrowed from the input.
struct EncryptedInfo<'a> {
    algorithm: &'a [u8],
    /// The algorithm's parameters, a whole DER element (tag and length included).
    params: &'a [u8],
    data: &'a [u8],
}

impl<'a> EncryptedInfo<'a> {
    fn parse(der: &'a [u8]) -> Result<Self, KeyDecryptError> {
        let mut outer = Der::new(der);
        let mut seq = Der::new(outer.expect(TAG_SEQUENCE, "EncryptedPrivateKeyInfo")?);
        let mut alg = Der::new(seq.expect(TAG_SEQUENCE, "AlgorithmIdentifier")?);
        let algorithm = alg.expect(TAG_OID, "algorithm OID")?;
        let params = alg.rest();
        let data = seq.expect(TAG_OCTET_STRING, "encryptedData")?;
        Ok(EncryptedInfo {
            algorithm,
            params,
            data,
        })
    }
}

const TAG_SEQUENCE: u8 = 0x30;
const TAG_OID: u8 = 0x06;
const TAG_OCTET_STRING: u8 = 0x04;
const TAG_INTEGER: u8 = 0x02;

/// A minimal DER reader: definite lengths only, every length checked against the bytes left.
struct Der<'a> {
    data: &'a [u8],
}

impl<'a> Der<'a> {
    fn new(data: &'a [u8]) -> Self {
        Der { data }
    }

    fn rest(&self) -> &'a [u8] {
        self.data
    }

    /// The content of the next element, which must have tag `tag`.
    fn expect(&mut self, tag: u8, what: &'static str) -> Result<&'a [u8], KeyDecryptError> {
        let (&t, after_tag) = self.data.split_first().ok_or(KeyDecryptError::Der(what))?;
        if t != tag {
            return Err(KeyDecryptError::Der(what));
        }
        let (&first, mut rest) = after_tag.split_first().ok_or(KeyDecryptError::Der(what))?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return Err(KeyDecryptError::Der(what));
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
            rest = &rest[n..];
            len
        };
        if rest.len() < len {
            return Err(KeyDecryptError::Der(what));
        }
        let (content, after) = rest.split_at(len);
        self.data = after;
        Ok(content)
    }
}

fn pbes2(info: &EncryptedInfo<'_>, password: &str) -> Result<Vec<u8>, KeyDecryptError> {
    let params = pkcs5::pbes2::Parameters::from_der(info.params).map_err(|_| {
        KeyDecryptError::UnsupportedAlgorithm("PBES2 with unknown parameters".into())
    })?;
    match &params.kdf {
        pkcs5::pbes2::Kdf::Pbkdf2(p) if p.iteration_count > MAX_KDF_ITERATIONS => {
            return Err(KeyDecryptError::TooManyIterations(p.iteration_count.into()));
        }
        pkcs5::pbes2::Kdf::Pbkdf2(_) => {}
        _ => {
            return Err(KeyDecryptError::UnsupportedAlgorithm(
                "PBES2 with scrypt (Kafka's PEM loader does not read it either)".into(),
            ));
        }
    }
    params
        .decrypt(password.as_bytes(), info.data)
        .map_err(|e| match e {
            pkcs5::Error::UnsupportedAlgorithm { oid } => {
                KeyDecryptError::UnsupportedAlgorithm(format!("PBES2 with {oid}"))
            }
            _ => KeyDecryptError::WrongPassword,
        })
}

/// `pbeWithSHAAnd3-KeyTripleDES-CBC`: key and IV from the PKCS#12 KDF with SHA-1.
fn pkcs12_3des(info: &EncryptedInfo<'_>, password: &str) -> Result<Vec<u8>, KeyDecryptError> {
    // pkcs-12PbeParams ::= SEQUENCE { salt OCTET STRING, iterations INTEGER }
    let mut params = Der::new(Der::new(info.params).expect(TAG_SEQUENCE, "PBE parameters")?);
    let salt = params.expect(TAG_OCTET_STRING, "PBE salt")?;
    let iterations = params.expect(TAG_INTEGER, "PBE iteration count")?;
    if iterations.is_empty() || iterations.len() > 8 || iterations[0] & 0x80 != 0 {
        return Err(KeyDecryptError::Der("PBE iteration count"));
    }
    let iterations = iterations
        .iter()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    if iterations == 0 {
        return Err(KeyDecryptError::Der("PBE iteration count"));
    }
    if iterations > u64::from(MAX_KDF_ITERATIONS) {
        return Err(KeyDecryptError::TooManyIterations(iterations));
    }
    let iterations = iterations as u32;
    let key = pkcs12_kdf(password, salt, Pkcs12KeyId::Key, iterations, 24);
    let iv = pkcs12_kdf(password, salt, Pkcs12KeyId::Iv, iterations, 8);
    let cipher = cbc::Decryptor::<des::TdesEde3>::new_from_slices(&key, &iv)
        .map_err(|_| KeyDecryptError::Der("3DES key size"))?;
    cipher
        .decrypt_padded_vec::<Pkcs7>(info.data)
        .map_err(|_| KeyDecryptError::WrongPassword)
}

/// The purpose byte of the PKCS#12 KDF (RFC 7292 B.3).
#[derive(Clone, Copy)]
enum Pkcs12KeyId {
    Key = 1,
    Iv = 2,
}

/// RFC 7292 appendix B.2 with SHA-1 (u = 20, v = 64). The password is a BMPString with its
/// two-byte terminator, as Java and OpenSSL encode it.
fn pkcs12_kdf(
    password: &str,
    salt: &[u8],
    id: Pkcs12KeyId,
    iterations: u32,
    len: usize,
) -> Vec<u8> {
    const U: usize = 20;
    const V: usize = 64;
    let mut bmp: Vec<u8> = password.encode_utf16().flat_map(u16::to_be_bytes).collect();
    bmp.extend_from_slice(&[0, 0]);
    let fill = |src: &[u8]| -> Vec<u8> {
        if src.is_empty() {
            return Vec::new();
        }
        let n = V * src.len().div_ceil(V);
        src.iter().copied().cycle().take(n).collect()
    };
    let mut i_block = fill(salt);
    i_block.extend(fill(&bmp));
    let d = [id as u8; V];
    let mut out = Vec::with_capacity(len + U);
    while out.len() < len {
        let mut a: [u8; U] = Sha1::new()
            .chain_update(d)
            .chain_update(&i_block)
            .finalize()
            .into();
        for _ in 1..iterations {
            a = Sha1::digest(a).into();
        }
        out.extend_from_slice(&a);
        if out.len() >= len {
            break;
        }
        // I_j = (I_j + B + 1) mod 2^(8v) for each v-byte block, B = A repeated.
        let b: Vec<u8> = a.iter().copied().cycle().take(V).collect();
        for block in i_block.chunks_mut(V) {
            let mut carry: u16 = 1;
            for k in (0..V).rev() {
                let sum = u16::from(block[k]) + u16::from(b[k]) + carry;
                block[k] = sum as u8;
                carry = sum >> 8;
            }
        }
    }
    out.truncate(len);
    out
}

/// Sun's JKS key protector: salt (20 bytes) || key XOR keystream || SHA-1 check (20 bytes); the
/// keystream is SHA-1 chained over the UTF-16BE password, starting from the salt.
fn sun_jks(data: &[u8], password: &str) -> Result<Vec<u8>, KeyDecryptError> {
    const SALT: usize = 20;
    const CHECK: usize = 20;
    if data.len() < SALT + CHECK {
        return Err(KeyDecryptError::Der("JKS protected key"));
    }
    let (salt, rest) = data.split_at(SALT);
    let (encrypted, check) = rest.split_at(rest.len() - CHECK);
    let pw: Vec<u8> = password.encode_utf16().flat_map(u16::to_be_bytes).collect();
    let mut plain = Vec::with_capacity(encrypted.len());
    let mut digest: [u8; 20] = salt.try_into().expect("split at 20");
    for chunk in encrypted.chunks(20) {
        digest = Sha1::new()
            .chain_update(&pw)
            .chain_update(digest)
            .finalize()
            .into();
        plain.extend(chunk.iter().zip(digest).map(|(c, k)| c ^ k));
    }
    let expected: [u8; 20] = Sha1::new()
        .chain_update(&pw)
        .chain_update(&plain)
        .finalize()
        .into();
    if expected.as_slice() != check {
        return Err(KeyDecryptError::WrongPassword);
    }
    Ok(plain)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Wraps `data` as an EncryptedPrivateKeyInfo with algorithm `oid` and DER `params`.
    pub(crate) fn encrypted_info(oid_bytes: &[u8], params: &[u8], data: &[u8]) -> Vec<u8> {
        fn element(tag: u8, content: &[u8]) -> Vec<u8> {
            let mut out = vec![tag];
            let len = content.len();
            if len < 0x80 {
                out.push(len as u8);
            } else {
                let bytes: Vec<u8> = len
                    .to_be_bytes()
                    .into_iter()
                    .skip_while(|b| *b == 0)
                    .collect();
                out.push(0x80 | bytes.len() as u8);
                out.extend(bytes);
            }
            out.extend_from_slice(content);
            out
        }
        let mut alg = element(TAG_OID, oid_bytes);
        alg.extend_from_slice(params);
        let mut body = element(TAG_SEQUENCE, &alg);
        body.extend(element(TAG_OCTET_STRING, data));
        element(TAG_SEQUENCE, &body)
    }

    /// The inverse of [`sun_jks`], to test it without a JDK (the fixtures test it against
    /// `keytool`'s output).
    pub(crate) fn sun_jks_protect(plain: &[u8], password: &str, salt: [u8; 20]) -> Vec<u8> {
        let pw: Vec<u8> = password.encode_utf16().flat_map(u16::to_be_bytes).collect();
        let mut out = salt.to_vec();
        let mut digest = salt;
        for chunk in plain.chunks(20) {
            digest = Sha1::new()
                .chain_update(&pw)
                .chain_update(digest)
                .finalize()
                .into();
            out.extend(chunk.iter().zip(digest).map(|(c, k)| c ^ k));
        }
        let check: [u8; 20] = Sha1::new()
            .chain_update(&pw)
            .chain_update(plain)
            .finalize()
            .into();
        out.extend_from_slice(&check);
        out
    }

    #[test]
    fn pkcs12_kdf_matches_a_published_vector() {
        // From the test vectors widely used for RFC 7292's KDF (password "smeg", SHA-1, ID 1,
        // 1 iteration, salt 0A58CF64530D823F).
        let salt = [0x0a, 0x58, 0xcf, 0x64, 0x53, 0x0d, 0x82, 0x3f];
        let key = pkcs12_kdf("smeg", &salt, Pkcs12KeyId::Key, 1, 24);
        assert_eq!(
            key,
            [
                0x8a, 0xaa, 0xe6, 0x29, 0x7b, 0x6c, 0xb0, 0x46, 0x42, 0xab, 0x5b, 0x07, 0x78, 0x51,
                0x28, 0x4e, 0xb7, 0x12, 0x8f, 0x1a, 0x2a, 0x7f, 0xbc, 0xa3
            ]
        );
        let iv = pkcs12_kdf("smeg", &salt, Pkcs12KeyId::Iv, 1, 8);
        assert_eq!(iv, [0x79, 0x99, 0x3d, 0xfe, 0x04, 0x8d, 0x3b, 0x76]);
    }

    #[test]
    fn unsupported_algorithms_are_named() {
        let jceks = encrypted_info(oid::SUN_JCEKS, &[0x05, 0x00], &[0; 48]);
        let err = decrypt(&jceks, "pw").unwrap_err();
        assert!(
            err.to_string().contains("JCEKS") && err.to_string().contains("1.3.6.1.4.1.42.2.19.1"),
            "{err}"
        );
        let rc2 = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x0c, 0x01, 0x06];
        let err = decrypt(&encrypted_info(&rc2, &[0x05, 0x00], &[0; 8]), "pw").unwrap_err();
        assert!(err.to_string().contains("1.2.840.113549.1.12.1.6"), "{err}");
    }

    #[test]
    fn hostile_iteration_counts_are_refused_before_any_work() {
        // salt (8 bytes), iterations 2^31
        let params = [
            0x30, 0x10, 0x04, 0x08, 1, 2, 3, 4, 5, 6, 7, 8, 0x02, 0x04, 0x7f, 0xff, 0xff, 0xff,
        ];
        let file = encrypted_info(oid::PBE_SHA1_3DES, &params, &[0; 16]);
        assert_eq!(
            decrypt(&file, "pw"),
            Err(KeyDecryptError::TooManyIterations(0x7fff_ffff))
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn sun_jks_round_trips_and_refuses_wrong_passwords(
            key in proptest::collection::vec(any::<u8>(), 0..200),
            password in "\\PC{0,12}",
            wrong in "\\PC{1,4}",
            salt in any::<[u8; 20]>(),
        ) {
            let protected = sun_jks_protect(&key, &password, salt);
            let file = encrypted_info(oid::SUN_JKS, &[0x05, 0x00], &protected);
            prop_assert_eq!(decrypt(&file, &password), Ok(key));
            let other = format!("{password}{wrong}");
            prop_assert_eq!(decrypt(&file, &other), Err(KeyDecryptError::WrongPassword));
        }

        #[test]
        fn hostile_input_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decrypt(&data, "pw");
            let _ = EncryptedInfo::parse(&data);
        }

        #[test]
        fn truncations_never_panic(cut in 0usize..120) {
            let protected = sun_jks_protect(&[7; 60], "pw", [1; 20]);
            let file = encrypted_info(oid::SUN_JKS, &[0x05, 0x00], &protected);
            let _ = decrypt(&file[..cut.min(file.len())], "pw");
        }
    }
}
