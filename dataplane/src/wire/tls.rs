//! TLS client configuration from Kafka-style settings: PEM, PKCS#12 and JKS truststores, an
//! optional client certificate, and optional hostname verification. The handshake itself runs
//! inside the sans-IO [`super::connection::Connection`] through `rustls::ClientConnection`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use sha1::{Digest, Sha1};

use super::config::{KeyStore, Secret, TlsConfig, TrustStore};

/// A truststore or keystore that cannot be used. Names the file and says what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsConfigError {
    #[error("cannot read {what} {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {path} is not valid {format}: {detail}")]
    Parse {
        what: &'static str,
        path: PathBuf,
        format: &'static str,
        detail: String,
    },
    #[error("{what} {path} holds no certificates")]
    Empty { what: &'static str, path: PathBuf },
    #[error("keystore {path} holds no private key with a certificate chain")]
    NoPrivateKey { path: PathBuf },
    #[error(
        "JKS keystore {path}: JKS private keys use a proprietary cipher; convert the keystore to PKCS#12 (keytool -importkeystore -deststoretype PKCS12) or PEM"
    )]
    JksKeyStore { path: PathBuf },
    #[error("invalid TLS settings: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Builds the rustls client configuration for one cluster.
pub fn client_config(cfg: &TlsConfig) -> Result<Arc<ClientConfig>, TlsConfigError> {
    let roots = Arc::new(load_roots(&cfg.truststore)?);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
        .build()
        .map_err(|e| TlsConfigError::Rustls(rustls::Error::General(e.to_string())))?;
    let builder = if cfg.verify_hostname {
        builder.with_webpki_verifier(webpki)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnlyVerifier { inner: webpki }))
    };
    let config = match &cfg.keystore {
        None => builder.with_no_client_auth(),
        Some(ks) => {
            let (chain, key) = load_identity(ks)?;
            builder.with_client_auth_cert(chain, key)?
        }
    };
    Ok(Arc::new(config))
}

/// Loads the trusted CA certificates.
pub fn load_roots(ts: &TrustStore) -> Result<RootCertStore, TlsConfigError> {
    let mut roots = RootCertStore::empty();
    let (what, path, certs): (_, PathBuf, Vec<CertificateDer<'static>>) = match ts {
        TrustStore::PublicRoots => {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            return Ok(roots);
        }
        TrustStore::PemFile(path) => {
            let data = read("truststore", path)?;
            (
                "truststore",
                path.clone(),
                pem_certs("truststore", path, &data)?,
            )
        }
        TrustStore::PemInline(text) => {
            let path = PathBuf::from("ssl.truststore.certificates");
            (
                "truststore",
                path.clone(),
                pem_certs("truststore", &path, text.as_bytes())?,
            )
        }
        TrustStore::Pkcs12 { path, password } => {
            let data = read("truststore", path)?;
            let ks = p12(&data, path, password.as_ref(), "truststore")?;
            let certs = ks
                .entries()
                .flat_map(|(_, e)| match e {
                    p12_keystore::KeyStoreEntry::Certificate(c) => vec![c.as_der().to_vec()],
                    p12_keystore::KeyStoreEntry::PrivateKeyChain(ch) => {
                        ch.certs().iter().map(|c| c.as_der().to_vec()).collect()
                    }
                    _ => Vec::new(),
                })
                .map(CertificateDer::from)
                .collect();
            ("truststore", path.clone(), certs)
        }
        TrustStore::Jks { path, password } => {
            let data = read("truststore", path)?;
            let certs = jks_trusted_certs(&data, password.as_ref()).map_err(|detail| {
                TlsConfigError::Parse {
                    what: "truststore",
                    path: path.clone(),
                    format: "JKS",
                    detail,
                }
            })?;
            (
                "truststore",
                path.clone(),
                certs.into_iter().map(CertificateDer::from).collect(),
            )
        }
    };
    if certs.is_empty() {
        return Err(TlsConfigError::Empty { what, path });
    }
    for c in certs {
        roots.add(c).map_err(|e| TlsConfigError::Parse {
            what,
            path: path.clone(),
            format: "X.509",
            detail: e.to_string(),
        })?;
    }
    Ok(roots)
}

type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn load_identity(ks: &KeyStore) -> Result<Identity, TlsConfigError> {
    match ks {
        KeyStore::PemFile(path) => {
            let data = read("keystore", path)?;
            pem_identity(path, &data)
        }
        KeyStore::PemInline {
            key,
            certificate_chain,
        } => {
            let path = PathBuf::from("ssl.keystore.key");
            let mut data = key.expose().as_bytes().to_vec();
            data.push(b'\n');
            data.extend_from_slice(certificate_chain.as_bytes());
            pem_identity(&path, &data)
        }
        KeyStore::Pkcs12 { path, password } => {
            let data = read("keystore", path)?;
            let ks = p12(&data, path, password.as_ref(), "keystore")?;
            let (_, chain) = ks
                .private_key_chain()
                .ok_or_else(|| TlsConfigError::NoPrivateKey { path: path.clone() })?;
            let certs = chain
                .certs()
                .iter()
                .map(|c| CertificateDer::from(c.as_der().to_vec()))
                .collect();
            let key = PrivateKeyDer::try_from(chain.key().as_der().to_vec()).map_err(|e| {
                TlsConfigError::Parse {
                    what: "keystore",
                    path: path.clone(),
                    format: "PKCS#8",
                    detail: e.to_string(),
                }
            })?;
            Ok((certs, key))
        }
    }
}

fn pem_identity(path: &Path, data: &[u8]) -> Result<Identity, TlsConfigError> {
    let certs = pem_certs("keystore", path, data)?;
    if certs.is_empty() {
        return Err(TlsConfigError::Empty {
            what: "keystore",
            path: path.to_path_buf(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(data).map_err(|e| TlsConfigError::Parse {
        what: "keystore",
        path: path.to_path_buf(),
        format: "PEM",
        detail: format!(
            "no usable unencrypted private key ({e}); encrypted keys are not supported, decrypt with `openssl pkcs8 -topk8 -nocrypt`"
        ),
    })?;
    Ok((certs, key))
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    std::fs::read(path).map_err(|source| TlsConfigError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

fn pem_certs(
    what: &'static str,
    path: &Path,
    data: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    CertificateDer::pem_slice_iter(data)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsConfigError::Parse {
            what,
            path: path.to_path_buf(),
            format: "PEM",
            detail: e.to_string(),
        })
}

fn p12(
    data: &[u8],
    path: &Path,
    password: Option<&Secret>,
    what: &'static str,
) -> Result<p12_keystore::KeyStore, TlsConfigError> {
    let pw = password.map(Secret::expose).unwrap_or("");
    p12_keystore::KeyStore::from_pkcs12(data, pw, p12_keystore::Pkcs12ImportPolicy::Relaxed)
        .map_err(|e| TlsConfigError::Parse {
            what,
            path: path.to_path_buf(),
            format: "PKCS#12",
            detail: format!("{e} (wrong password?)"),
        })
}

const JKS_MAGIC: u32 = 0xFEED_FEED;
const JCEKS_MAGIC: u32 = 0xCECE_CECE;
const JKS_PRIVATE_KEY: u32 = 1;
const JKS_TRUSTED_CERT: u32 = 2;
const JCEKS_SECRET_KEY: u32 = 3;
const JKS_DIGEST_LEN: usize = 20;

/// Reads the trusted certificates of a JKS or JCEKS store. When a password is given, the
/// store's SHA-1 integrity digest is checked as `keytool` does; without one it is not (Java's
/// `KeyStore.load(in, null)` behaves the same way). Every length is checked against the bytes
/// present before anything is allocated.
pub fn jks_trusted_certs(data: &[u8], password: Option<&Secret>) -> Result<Vec<Vec<u8>>, String> {
    let mut r = Reader { data, pos: 0 };
    let magic = r.u32()?;
    if magic != JKS_MAGIC && magic != JCEKS_MAGIC {
        return Err(format!(
            "bad magic {magic:#010x} (is it a PKCS#12 file? then set ssl.truststore.type=PKCS12)"
        ));
    }
    let version = r.u32()?;
    if version != 1 && version != 2 {
        return Err(format!("unsupported JKS version {version}"));
    }
    let count = r.u32()?;
    let mut certs = Vec::new();
    for i in 0..count {
        let tag = r.u32()?;
        r.utf()?; // alias
        r.take(8)?; // creation time
        match tag {
            JKS_TRUSTED_CERT => certs.push(r.cert(version)?.to_vec()),
            JKS_PRIVATE_KEY => {
                r.blob()?; // protected key
                let chain_len = r.u32()?;
                for _ in 0..chain_len {
                    r.cert(version)?;
                }
            }
            JCEKS_SECRET_KEY => {
                return Err("JCEKS secret-key entries are not supported in a truststore".into());
            }
            other => return Err(format!("entry {i} has unknown tag {other}")),
        }
    }
    let body_end = r.pos;
    let digest = r.take(JKS_DIGEST_LEN)?;
    if let Some(pw) = password {
        let mut h = Sha1::new();
        for unit in pw.expose().encode_utf16() {
            h.update(unit.to_be_bytes());
        }
        h.update(b"Mighty Aphrodite");
        h.update(&data[..body_end]);
        if h.finalize().as_slice() != digest {
            return Err("integrity check failed: wrong password, or the file is corrupt".into());
        }
    }
    Ok(certs)
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| format!("truncated at byte {} (wanted {n} more)", self.pos))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn utf(&mut self) -> Result<&'a [u8], String> {
        let b = self.take(2)?;
        let n = u16::from_be_bytes([b[0], b[1]]) as usize;
        self.take(n)
    }
    fn blob(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn cert(&mut self, version: u32) -> Result<&'a [u8], String> {
        if version == 2 {
            let kind = self.utf()?;
            if kind != b"X.509" {
                return Err(format!(
                    "certificate type {:?} is not X.509",
                    String::from_utf8_lossy(kind)
                ));
            }
        }
        self.blob()
    }
}

/// Verifies the chain and signatures but not the host name: Kafka's
/// `ssl.endpoint.identification.algorithm=` (empty).
#[derive(Debug)]
struct ChainOnlyVerifier {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnlyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A one-line explanation of a TLS handshake failure for operators.
pub fn explain(err: &rustls::Error) -> String {
    let hint = match err {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            " (the broker's certificate is not signed by a CA in the configured truststore: check ssl.truststore.location)"
        }
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => {
            " (the certificate does not name the host we dialled; fix the certificate's SAN, or set ssl.endpoint.identification.algorithm= to skip the name check)"
        }
        rustls::Error::InvalidCertificate(CertificateError::Expired)
        | rustls::Error::InvalidCertificate(CertificateError::ExpiredContext { .. }) => {
            " (the broker's certificate has expired)"
        }
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            " (is this a TLS listener? security.protocol may not match the broker's listener)"
        }
        _ => "",
    };
    format!("{err}{hint}")
}

impl fmt::Display for ChainOnlyVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("chain-only verifier (no hostname check)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a JKS file by hand (format as `keytool` writes it) so that the reader's
    /// integrity check and entry walk are tested without a JDK.
    fn jks(certs: &[&[u8]], password: &str, version: u32) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend_from_slice(&JKS_MAGIC.to_be_bytes());
        d.extend_from_slice(&version.to_be_bytes());
        d.extend_from_slice(&(certs.len() as u32).to_be_bytes());
        for (i, c) in certs.iter().enumerate() {
            d.extend_from_slice(&JKS_TRUSTED_CERT.to_be_bytes());
            let alias = format!("ca{i}");
            d.extend_from_slice(&(alias.len() as u16).to_be_bytes());
            d.extend_from_slice(alias.as_bytes());
            d.extend_from_slice(&0u64.to_be_bytes());
            if version == 2 {
                d.extend_from_slice(&5u16.to_be_bytes());
                d.extend_from_slice(b"X.509");
            }
            d.extend_from_slice(&(c.len() as u32).to_be_bytes());
            d.extend_from_slice(c);
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
    fn jks_reader_checks_integrity() {
        let file = jks(&[b"cert-one", b"cert-two"], "changeit", 2);
        let pw = Secret::new("changeit");
        assert_eq!(
            jks_trusted_certs(&file, Some(&pw)).unwrap(),
            vec![b"cert-one".to_vec(), b"cert-two".to_vec()]
        );
        assert_eq!(jks_trusted_certs(&file, None).unwrap().len(), 2);
        let err = jks_trusted_certs(&file, Some(&Secret::new("wrong"))).unwrap_err();
        assert!(err.contains("wrong password"), "{err}");
        let v1 = jks(&[b"c"], "pw", 1);
        assert_eq!(
            jks_trusted_certs(&v1, Some(&Secret::new("pw")))
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn jks_reader_survives_hostile_input() {
        let file = jks(&[b"cert-one"], "changeit", 2);
        for cut in 0..file.len() {
            let _ = jks_trusted_certs(&file[..cut], None);
        }
        // A length field claiming 4 GiB must not allocate.
        let mut bad = file.clone();
        let len_pos = 12 + 4 + 2 + 3 + 8 + 2 + 5;
        bad[len_pos..len_pos + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(jks_trusted_certs(&bad, None).is_err());
        assert!(
            jks_trusted_certs(b"0\x82\x01\x02", None)
                .unwrap_err()
                .contains("PKCS#12")
        );
    }

    #[test]
    fn missing_files_name_the_path() {
        let err = load_roots(&TrustStore::PemFile("/nonexistent/ca.pem".into())).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
    }

    #[test]
    fn public_roots_are_not_empty() {
        assert!(!load_roots(&TrustStore::PublicRoots).unwrap().is_empty());
    }
}
