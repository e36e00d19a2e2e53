//! Java key and trust stores, read as Java reads them: the format comes from the file's content,
//! not from `ssl.*.type` (Java's `keystore.type.compat`: a `JKS` store reads PKCS#12 files and a
//! `PKCS12` store reads JKS files; modern `keytool` writes PKCS#12 even for `truststore.jks`).
//!
//! JKS and JCEKS are parsed here (trusted certificates, and JKS private keys through Sun's key
//! protector in [`super::private_key`]); PKCS#12 goes through `p12-keystore`. Every length read
//! from a file is checked against the bytes present before anything is allocated.

use sha1::{Digest, Sha1};

use super::config::Secret;
use super::private_key::{self, KeyDecryptError};

/// What a store file holds, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFormat {
    Jks,
    Jceks,
    Pkcs12,
}

impl StoreFormat {
    pub fn name(self) -> &'static str {
        match self {
            StoreFormat::Jks => "JKS",
            StoreFormat::Jceks => "JCEKS",
            StoreFormat::Pkcs12 => "PKCS#12",
        }
    }
}

const JKS_MAGIC: u32 = 0xFEED_FEED;
const JCEKS_MAGIC: u32 = 0xCECE_CECE;
const JKS_PRIVATE_KEY: u32 = 1;
const JKS_TRUSTED_CERT: u32 = 2;
const JCEKS_SECRET_KEY: u32 = 3;
const JKS_DIGEST_LEN: usize = 20;

/// Detects the store format as Java's dual-format key stores do: the JKS or JCEKS magic number,
/// or a DER SEQUENCE (PKCS#12's `PFX`). `None` for anything else (PEM text, say).
pub fn detect(data: &[u8]) -> Option<StoreFormat> {
    match data {
        [a, b, c, d, ..] if u32::from_be_bytes([*a, *b, *c, *d]) == JKS_MAGIC => {
            Some(StoreFormat::Jks)
        }
        [a, b, c, d, ..] if u32::from_be_bytes([*a, *b, *c, *d]) == JCEKS_MAGIC => {
            Some(StoreFormat::Jceks)
        }
        [0x30, ..] => Some(StoreFormat::Pkcs12),
        _ => None,
    }
}

/// Describes the first bytes of a file that is no store, for the error message.
pub fn describe_unknown(data: &[u8]) -> String {
    if data.starts_with(b"-----BEGIN") {
        return "it is PEM text; set the type to PEM".to_string();
    }
    if data.is_empty() {
        return "the file is empty".to_string();
    }
    let head: Vec<String> = data.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("it starts with bytes {}", head.join(" "))
}

/// A JKS/JCEKS problem. Holds no key material or password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JksError {
    #[error("truncated at byte {at} (wanted {wanted} more)")]
    Truncated { at: usize, wanted: usize },
    #[error("bad magic {0:#010x}")]
    BadMagic(u32),
    #[error("unsupported JKS version {0}")]
    Version(u32),
    #[error("entry {entry} has unknown tag {tag}")]
    UnknownTag { entry: u32, tag: u32 },
    #[error("certificate type {0:?} is not X.509")]
    NotX509(String),
    #[error("integrity check failed: wrong store password, or the file is corrupt")]
    Integrity,
    #[error("the private key `{alias}` cannot be read: {source}")]
    Key {
        alias: String,
        source: KeyDecryptError,
    },
}

/// A private key entry: its certificate chain (leaf first, DER) and the protected key.
#[derive(Clone)]
pub struct JksKeyEntry {
    pub alias: String,
    pub chain: Vec<Vec<u8>>,
    /// DER `EncryptedPrivateKeyInfo` (JKS: Sun's key protector; JCEKS: PBEWithMD5AndTripleDES).
    protected_key: Vec<u8>,
}

impl std::fmt::Debug for JksKeyEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JksKeyEntry")
            .field("alias", &self.alias)
            .field("chain", &self.chain.len())
            .finish()
    }
}

impl JksKeyEntry {
    /// The DER PKCS#8 private key, decrypted with `key_password`.
    pub fn private_key(&self, key_password: &Secret) -> Result<Vec<u8>, JksError> {
        private_key::decrypt(&self.protected_key, key_password.expose()).map_err(|source| {
            JksError::Key {
                alias: self.alias.clone(),
                source,
            }
        })
    }
}

/// The entries of a JKS or JCEKS store.
#[derive(Debug, Clone, Default)]
pub struct JksContents {
    /// Trusted certificate entries (DER), in file order.
    pub trusted: Vec<Vec<u8>>,
    /// Private key entries, in file order.
    pub keys: Vec<JksKeyEntry>,
}

/// Reads a JKS or JCEKS store. When a password is given, the store's SHA-1 integrity digest is
/// checked as `keytool` does; without one it is not (Java's `KeyStore.load(in, null)` behaves
/// the same way).
pub fn read_jks(data: &[u8], password: Option<&Secret>) -> Result<JksContents, JksError> {
    let mut r = Reader { data, pos: 0 };
    let magic = r.u32()?;
    if magic != JKS_MAGIC && magic != JCEKS_MAGIC {
        return Err(JksError::BadMagic(magic));
    }
    let version = r.u32()?;
    if version != 1 && version != 2 {
        return Err(JksError::Version(version));
    }
    let count = r.u32()?;
    let mut out = JksContents::default();
    for entry in 0..count {
        let tag = r.u32()?;
        let alias = String::from_utf8_lossy(r.utf()?).into_owned();
        r.take(8)?; // creation time
        match tag {
            JKS_TRUSTED_CERT => out.trusted.push(r.cert(version)?.to_vec()),
            JKS_PRIVATE_KEY => {
                let protected_key = r.blob()?.to_vec();
                let chain_len = r.u32()?;
                let mut chain = Vec::new();
                for _ in 0..chain_len {
                    chain.push(r.cert(version)?.to_vec());
                }
                out.keys.push(JksKeyEntry {
                    alias,
                    chain,
                    protected_key,
                });
            }
            JCEKS_SECRET_KEY if magic == JCEKS_MAGIC => {
                // A serialized Java object of unknown length follows: nothing after it can be
                // found. Secret keys have no place in a TLS store.
                return Err(JksError::UnknownTag { entry, tag });
            }
            other => return Err(JksError::UnknownTag { entry, tag: other }),
        }
    }
    let body_end = r.pos;
    // Java ignores whatever follows the digest; so does strait.
    let digest = r.take(JKS_DIGEST_LEN)?;
    if let Some(pw) = password {
        let mut h = Sha1::new();
        for unit in pw.expose().encode_utf16() {
            h.update(unit.to_be_bytes());
        }
        h.update(b"Mighty Aphrodite");
        h.update(&data[..body_end]);
        if h.finalize().as_slice() != digest {
            return Err(JksError::Integrity);
        }
    }
    Ok(out)
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], JksError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or(JksError::Truncated {
                at: self.pos,
                wanted: n,
            })?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, JksError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn utf(&mut self) -> Result<&'a [u8], JksError> {
        let b = self.take(2)?;
        let n = u16::from_be_bytes([b[0], b[1]]) as usize;
        self.take(n)
    }
    fn blob(&mut self) -> Result<&'a [u8], JksError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn cert(&mut self, version: u32) -> Result<&'a [u8], JksError> {
        if version == 2 {
            let kind = self.utf()?;
            if kind != b"X.509" {
                return Err(JksError::NotX509(
                    String::from_utf8_lossy(kind).into_owned(),
                ));
            }
        }
        self.blob()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wire::private_key::tests::{encrypted_info, sun_jks_protect};
    use proptest::prelude::*;

    const SUN_JKS_OID: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x2a, 0x02, 0x11, 0x01, 0x01];

    /// One entry of a hand-built store.
    pub(crate) enum Entry<'a> {
        Trusted(&'a [u8]),
        Key {
            pkcs8: &'a [u8],
            key_password: &'a str,
            chain: Vec<&'a [u8]>,
        },
    }

    /// Builds a JKS file by hand (format as `keytool` writes it) so that the reader's
    /// integrity check and entry walk are tested without a JDK.
    pub(crate) fn jks(entries: &[Entry<'_>], password: &str, version: u32) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend_from_slice(&JKS_MAGIC.to_be_bytes());
        d.extend_from_slice(&version.to_be_bytes());
        d.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        let cert = |d: &mut Vec<u8>, c: &[u8]| {
            if version == 2 {
                d.extend_from_slice(&5u16.to_be_bytes());
                d.extend_from_slice(b"X.509");
            }
            d.extend_from_slice(&(c.len() as u32).to_be_bytes());
            d.extend_from_slice(c);
        };
        for (i, e) in entries.iter().enumerate() {
            let tag = match e {
                Entry::Trusted(_) => JKS_TRUSTED_CERT,
                Entry::Key { .. } => JKS_PRIVATE_KEY,
            };
            d.extend_from_slice(&tag.to_be_bytes());
            let alias = format!("entry{i}");
            d.extend_from_slice(&(alias.len() as u16).to_be_bytes());
            d.extend_from_slice(alias.as_bytes());
            d.extend_from_slice(&0u64.to_be_bytes());
            match e {
                Entry::Trusted(c) => cert(&mut d, c),
                Entry::Key {
                    pkcs8,
                    key_password,
                    chain,
                } => {
                    let protected = encrypted_info(
                        SUN_JKS_OID,
                        &[0x05, 0x00],
                        &sun_jks_protect(pkcs8, key_password, [7; 20]),
                    );
                    d.extend_from_slice(&(protected.len() as u32).to_be_bytes());
                    d.extend_from_slice(&protected);
                    d.extend_from_slice(&(chain.len() as u32).to_be_bytes());
                    for c in chain {
                        cert(&mut d, c);
                    }
                }
            }
        }
        let mut h = Sha1::new();
        for u in password.encode_utf16() {
            h.update(u.to_be_bytes());
        }
        h.update(b"Mighty Aphrodite");
        h.update(&d);
        let digest = h.finalize();
        d.extend_from_slice(&digest);
        d
    }

    #[test]
    fn reader_checks_integrity() {
        let file = jks(
            &[Entry::Trusted(b"cert-one"), Entry::Trusted(b"cert-two")],
            "changeit",
            2,
        );
        let pw = Secret::new("changeit");
        assert_eq!(
            read_jks(&file, Some(&pw)).unwrap().trusted,
            vec![b"cert-one".to_vec(), b"cert-two".to_vec()]
        );
        assert_eq!(read_jks(&file, None).unwrap().trusted.len(), 2);
        assert_eq!(
            read_jks(&file, Some(&Secret::new("wrong"))).unwrap_err(),
            JksError::Integrity
        );
        let v1 = jks(&[Entry::Trusted(b"c")], "pw", 1);
        assert_eq!(
            read_jks(&v1, Some(&Secret::new("pw")))
                .unwrap()
                .trusted
                .len(),
            1
        );
    }

    #[test]
    fn private_keys_come_out_with_the_key_password() {
        let file = jks(
            &[Entry::Key {
                pkcs8: b"pkcs8-bytes",
                key_password: "keypass",
                chain: vec![b"leaf", b"ca"],
            }],
            "storepass",
            2,
        );
        let store = read_jks(&file, Some(&Secret::new("storepass"))).unwrap();
        assert_eq!(store.keys.len(), 1);
        assert_eq!(store.keys[0].chain, vec![b"leaf".to_vec(), b"ca".to_vec()]);
        assert_eq!(
            store.keys[0].private_key(&Secret::new("keypass")).unwrap(),
            b"pkcs8-bytes"
        );
        let err = store.keys[0]
            .private_key(&Secret::new("storepass"))
            .unwrap_err();
        assert!(err.to_string().contains("wrong key password"), "{err}");
        assert!(!format!("{:?}", store.keys[0]).contains("pkcs8"));
    }

    #[test]
    fn detection_follows_content() {
        assert_eq!(detect(&JKS_MAGIC.to_be_bytes()), Some(StoreFormat::Jks));
        assert_eq!(detect(&JCEKS_MAGIC.to_be_bytes()), Some(StoreFormat::Jceks));
        assert_eq!(detect(&[0x30, 0x82, 0x04, 0x92]), Some(StoreFormat::Pkcs12));
        assert_eq!(detect(b"-----BEGIN CERTIFICATE-----"), None);
        assert!(describe_unknown(b"-----BEGIN X").contains("PEM"));
        assert!(describe_unknown(b"\x01\x02").contains("01 02"));
    }

    #[test]
    fn hostile_lengths_do_not_allocate() {
        let file = jks(&[Entry::Trusted(b"cert-one")], "changeit", 2);
        // A length field claiming 4 GiB must not allocate.
        let mut bad = file.clone();
        let len_pos = 12 + 4 + 2 + 6 + 8 + 2 + 5;
        bad[len_pos..len_pos + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            read_jks(&bad, None),
            Err(JksError::Truncated { .. })
        ));
    }

    proptest! {
        #[test]
        fn truncations_and_flips_never_panic(cut in 0usize..200, flip in 0usize..200, bit in 0u8..8) {
            let file = jks(
                &[Entry::Trusted(b"cert-one"), Entry::Key { pkcs8: b"k", key_password: "p", chain: vec![b"c"] }],
                "changeit",
                2,
            );
            let cut = cut.min(file.len());
            let _ = read_jks(&file[..cut], Some(&Secret::new("changeit")));
            let mut flipped = file.clone();
            let at = flip % flipped.len();
            flipped[at] ^= 1 << bit;
            if let Ok(store) = read_jks(&flipped, None) {
                for k in &store.keys {
                    let _ = k.private_key(&Secret::new("p"));
                }
            }
        }
    }
}
