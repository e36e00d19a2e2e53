//! TLS client configuration from Kafka-style settings: PEM, PKCS#12 and JKS trust and key
//! stores (the Java formats detected from the file's content, [`super::keystore`]), encrypted
//! PEM keys ([`super::private_key`]), TLS versions and optional host name verification. The
//! handshake itself runs inside the sans-IO [`super::connection::Connection`] through
//! `rustls::ClientConnection`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::time_provider::TimeProvider;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use super::config::{KeyStore, Secret, TlsConfig, TrustStore};
use super::keystore::{self, JksError, StoreFormat};
use super::private_key::{self, KeyDecryptError};

/// Which store a problem is in. Its name is the `ssl.<name>.*` key prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreRole {
    Truststore,
    Keystore,
}

impl fmt::Display for StoreRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreRole::Truststore => "truststore",
            StoreRole::Keystore => "keystore",
        })
    }
}

/// A trust or key store that cannot be used: names the file (or the inline key) and says what
/// is wrong with it, and which setting to look at. Never holds a password or key material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsConfigError {
    #[error("cannot read {role} {path}: {source}")]
    Read {
        role: StoreRole,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{role} {path} is neither a JKS nor a PKCS#12 file ({detail}); check ssl.{role}.type and ssl.{role}.location"
    )]
    UnknownFormat {
        role: StoreRole,
        path: PathBuf,
        detail: String,
    },
    #[error("{role} {path} is not a valid {format} store: {source}")]
    Jks {
        role: StoreRole,
        path: PathBuf,
        format: &'static str,
        source: JksError,
    },
    #[error(
        "{role} {path} is not a valid PKCS#12 store, or ssl.{role}.password is wrong: {source}"
    )]
    Pkcs12 {
        role: StoreRole,
        path: PathBuf,
        source: p12_keystore::error::Error,
    },
    #[error("{role} {path} is not valid PEM: {source}")]
    Pem {
        role: StoreRole,
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("{role} {path} holds no certificates")]
    Empty { role: StoreRole, path: PathBuf },
    #[error("keystore {path} holds no private key with a certificate chain")]
    NoPrivateKey { path: PathBuf },
    #[error(
        "the private key in keystore {path} is encrypted (ENCRYPTED PRIVATE KEY): set ssl.key.password"
    )]
    KeyPasswordNeeded { path: PathBuf },
    #[error("the private key in keystore {path} cannot be decrypted: {source}")]
    KeyDecrypt {
        path: PathBuf,
        source: KeyDecryptError,
    },
    #[error(
        "JCEKS keystore {path}: its private keys use a proprietary cipher; convert the store to PKCS#12 (keytool -importkeystore -deststoretype PKCS12)"
    )]
    JceksKeyStore { path: PathBuf },
    #[error("the private key in keystore {path} is not usable: {detail}")]
    InvalidKey { path: PathBuf, detail: String },
    #[error("a certificate in {role} {path} is not a valid X.509 CA certificate: {detail}")]
    Certificate {
        role: StoreRole,
        path: PathBuf,
        detail: String,
    },
    #[error("invalid TLS settings: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Builds the rustls client configuration for one cluster.
pub fn client_config(cfg: &TlsConfig) -> Result<Arc<ClientConfig>, TlsConfigError> {
    client_config_with_time(cfg, None)
}

/// [`client_config`] with certificate validity judged at the time `time` gives (tests).
pub fn client_config_with_time(
    cfg: &TlsConfig,
    time: Option<Arc<dyn TimeProvider>>,
) -> Result<Arc<ClientConfig>, TlsConfigError> {
    let roots = Arc::new(load_roots(&cfg.truststore)?);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    if cfg.versions.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if cfg.versions.tls12 {
        versions.push(&rustls::version::TLS12);
    }
    let builder = match time {
        Some(t) => ClientConfig::builder_with_details(provider.clone(), t),
        None => ClientConfig::builder_with_provider(provider.clone()),
    }
    .with_protocol_versions(&versions)?;
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
            let identity = load_identity(ks)?;
            let path = ks_path(ks);
            builder
                .with_client_auth_cert(identity.chain, identity.key)
                .map_err(|e| TlsConfigError::InvalidKey {
                    path,
                    detail: e.to_string(),
                })?
        }
    };
    Ok(Arc::new(config))
}

fn ks_path(ks: &KeyStore) -> PathBuf {
    match ks {
        KeyStore::PemFile { path, .. }
        | KeyStore::Pkcs12 { path, .. }
        | KeyStore::Jks { path, .. } => path.clone(),
        KeyStore::PemInline { .. } => PathBuf::from("ssl.keystore.key"),
    }
}

/// Loads the trusted CA certificates.
pub fn load_roots(ts: &TrustStore) -> Result<RootCertStore, TlsConfigError> {
    let role = StoreRole::Truststore;
    let mut roots = RootCertStore::empty();
    let (path, certs): (PathBuf, Vec<CertificateDer<'static>>) = match ts {
        TrustStore::PublicRoots => {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            return Ok(roots);
        }
        TrustStore::PemFile(path) => {
            let data = read(role, path)?;
            (path.clone(), pem_certs(role, path, &data)?)
        }
        TrustStore::PemInline(text) => {
            let path = PathBuf::from("ssl.truststore.certificates");
            let certs = pem_certs(role, &path, text.as_bytes())?;
            (path, certs)
        }
        TrustStore::Pkcs12 { path, password } | TrustStore::Jks { path, password } => {
            let data = read(role, path)?;
            let certs = match java_store(role, path, &data)? {
                StoreFormat::Pkcs12 => {
                    let ks = p12(role, path, &data, password.as_ref())?;
                    ks.entries()
                        .flat_map(|(_, e)| match e {
                            p12_keystore::KeyStoreEntry::Certificate(c) => {
                                vec![c.as_der().to_vec()]
                            }
                            p12_keystore::KeyStoreEntry::PrivateKeyChain(ch) => {
                                ch.certs().iter().map(|c| c.as_der().to_vec()).collect()
                            }
                            _ => Vec::new(),
                        })
                        .collect::<Vec<_>>()
                }
                format @ (StoreFormat::Jks | StoreFormat::Jceks) => {
                    keystore::read_jks(&data, password.as_ref())
                        .map_err(|source| TlsConfigError::Jks {
                            role,
                            path: path.clone(),
                            format: format.name(),
                            source,
                        })?
                        .trusted
                }
            };
            (
                path.clone(),
                certs.into_iter().map(CertificateDer::from).collect(),
            )
        }
    };
    if certs.is_empty() {
        return Err(TlsConfigError::Empty { role, path });
    }
    for c in certs {
        roots.add(c).map_err(|e| TlsConfigError::Certificate {
            role,
            path: path.clone(),
            detail: e.to_string(),
        })?;
    }
    Ok(roots)
}

/// The client's certificate chain (leaf first) and private key.
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("chain", &self.chain.len())
            .field("key", &"[redacted]")
            .finish()
    }
}

/// Loads the client certificate and key of a key store.
pub fn load_identity(ks: &KeyStore) -> Result<Identity, TlsConfigError> {
    let role = StoreRole::Keystore;
    match ks {
        KeyStore::PemFile { path, key_password } => {
            let data = read(role, path)?;
            pem_identity(path, &data, key_password.as_ref())
        }
        KeyStore::PemInline {
            key,
            certificate_chain,
            key_password,
        } => {
            let path = PathBuf::from("ssl.keystore.key");
            let mut data = key.expose().as_bytes().to_vec();
            data.push(b'\n');
            data.extend_from_slice(certificate_chain.as_bytes());
            pem_identity(&path, &data, key_password.as_ref())
        }
        KeyStore::Pkcs12 {
            path,
            password,
            key_password,
        }
        | KeyStore::Jks {
            path,
            password,
            key_password,
        } => {
            let data = read(role, path)?;
            // Java's rule (`FileBasedStore.keyPassword`): the key password, else the store's.
            let key_pw = key_password.as_ref().or(password.as_ref());
            match java_store(role, path, &data)? {
                StoreFormat::Pkcs12 => p12_identity(path, &data, password.as_ref(), key_pw),
                StoreFormat::Jks => jks_identity(path, &data, password.as_ref(), key_pw),
                StoreFormat::Jceks => Err(TlsConfigError::JceksKeyStore { path: path.clone() }),
            }
        }
    }
}

fn java_store(role: StoreRole, path: &Path, data: &[u8]) -> Result<StoreFormat, TlsConfigError> {
    keystore::detect(data).ok_or_else(|| TlsConfigError::UnknownFormat {
        role,
        path: path.to_path_buf(),
        detail: keystore::describe_unknown(data),
    })
}

fn p12_identity(
    path: &Path,
    data: &[u8],
    password: Option<&Secret>,
    key_password: Option<&Secret>,
) -> Result<Identity, TlsConfigError> {
    // p12-keystore decrypts the store and its keys with one password: Java's PKCS12 stores hold
    // them under the same one too (keytool ignores a different -keypass for PKCS12).
    let pw = key_password.or(password);
    let ks = p12(StoreRole::Keystore, path, data, pw)?;
    let (_, chain) = ks
        .private_key_chain()
        .ok_or_else(|| TlsConfigError::NoPrivateKey {
            path: path.to_path_buf(),
        })?;
    let certs = chain
        .certs()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()));
    Ok(Identity { chain: certs, key })
}

fn jks_identity(
    path: &Path,
    data: &[u8],
    password: Option<&Secret>,
    key_password: Option<&Secret>,
) -> Result<Identity, TlsConfigError> {
    let jks_err = |source| TlsConfigError::Jks {
        role: StoreRole::Keystore,
        path: path.to_path_buf(),
        format: "JKS",
        source,
    };
    let store = keystore::read_jks(data, password).map_err(jks_err)?;
    let entry = store
        .keys
        .iter()
        .find(|k| !k.chain.is_empty())
        .ok_or_else(|| TlsConfigError::NoPrivateKey {
            path: path.to_path_buf(),
        })?;
    let empty = Secret::new("");
    let key = entry
        .private_key(key_password.unwrap_or(&empty))
        .map_err(jks_err)?;
    Ok(Identity {
        chain: entry
            .chain
            .iter()
            .cloned()
            .map(CertificateDer::from)
            .collect(),
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
    })
}

const ENCRYPTED_KEY_LABEL: &str = "ENCRYPTED PRIVATE KEY";

/// The DER of the first `-----BEGIN <label>-----` block.
fn pem_block(data: &[u8], label: &str) -> Option<Result<Vec<u8>, base64::DecodeError>> {
    let text = std::str::from_utf8(data).ok()?;
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)? + begin.len();
    let stop = start + text[start..].find(&end)?;
    let b64: String = text[start..stop]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    Some(base64::engine::general_purpose::STANDARD.decode(b64))
}

fn pem_identity(
    path: &Path,
    data: &[u8],
    key_password: Option<&Secret>,
) -> Result<Identity, TlsConfigError> {
    let role = StoreRole::Keystore;
    let chain = pem_certs(role, path, data)?;
    if chain.is_empty() {
        return Err(TlsConfigError::Empty {
            role,
            path: path.to_path_buf(),
        });
    }
    let key = match pem_block(data, ENCRYPTED_KEY_LABEL) {
        Some(der) => {
            let der = der.map_err(|_| TlsConfigError::KeyDecrypt {
                path: path.to_path_buf(),
                source: KeyDecryptError::Der("the PEM block is not base64"),
            })?;
            let password = key_password.ok_or_else(|| TlsConfigError::KeyPasswordNeeded {
                path: path.to_path_buf(),
            })?;
            let plain = private_key::decrypt(&der, password.expose()).map_err(|source| {
                TlsConfigError::KeyDecrypt {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(plain))
        }
        // An unencrypted key is used even when ssl.key.password is set (Kafka would refuse it;
        // nothing is gained by refusing).
        None => PrivateKeyDer::from_pem_slice(data).map_err(|e| TlsConfigError::InvalidKey {
            path: path.to_path_buf(),
            detail: format!(
                "no PKCS#8 private key (BEGIN PRIVATE KEY or BEGIN ENCRYPTED PRIVATE KEY) found: {e}"
            ),
        })?,
    };
    Ok(Identity { chain, key })
}

fn read(role: StoreRole, path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    std::fs::read(path).map_err(|source| TlsConfigError::Read {
        role,
        path: path.to_path_buf(),
        source,
    })
}

fn pem_certs(
    role: StoreRole,
    path: &Path,
    data: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    CertificateDer::pem_slice_iter(data)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsConfigError::Pem {
            role,
            path: path.to_path_buf(),
            source,
        })
}

fn p12(
    role: StoreRole,
    path: &Path,
    data: &[u8],
    password: Option<&Secret>,
) -> Result<p12_keystore::KeyStore, TlsConfigError> {
    let pw = password.map(Secret::expose).unwrap_or("");
    p12_keystore::KeyStore::from_pkcs12(data, pw, p12_keystore::Pkcs12ImportPolicy::Relaxed)
        .map_err(|source| TlsConfigError::Pkcs12 {
            role,
            path: path.to_path_buf(),
            source,
        })
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
        rustls::Error::InvalidCertificate(CertificateError::NotValidYet)
        | rustls::Error::InvalidCertificate(CertificateError::NotValidYetContext { .. }) => {
            " (the broker's certificate is not valid yet: check the clocks)"
        }
        rustls::Error::AlertReceived(
            rustls::AlertDescription::CertificateRequired
            | rustls::AlertDescription::BadCertificate
            | rustls::AlertDescription::UnknownCA
            | rustls::AlertDescription::CertificateUnknown
            | rustls::AlertDescription::CertificateExpired
            | rustls::AlertDescription::HandshakeFailure,
        ) => {
            " (the broker refused the handshake: does it require a client certificate (ssl.client.auth=required)? check ssl.keystore.* and that the broker trusts its CA)"
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
    use crate::wire::config::TlsVersions;
    use rustls::server::WebPkiClientVerifier;
    use rustls::{ClientConnection, ServerConfig, ServerConnection};

    const STORE_PW: &str = "test-store-pass";
    const KEY_PW: &str = "test-key-pass";

    /// Test fixtures (`tests/fixtures/tls/generate.sh`): keys that protect nothing.
    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/tls")
            .join(name)
    }

    fn pw(s: &str) -> Option<Secret> {
        Some(Secret::new(s))
    }

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// A broker-like TLS server for localhost/127.0.0.1 that requires a client certificate
    /// from the test CA (`ssl.client.auth=required`), or asks for none.
    fn server(require_client_cert: bool) -> Arc<ServerConfig> {
        let pem = std::fs::read(fixture("server.pem")).unwrap();
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(&pem).unwrap();
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if require_client_cert {
            let roots = load_roots(&TrustStore::PemFile(fixture("ca.pem"))).unwrap();
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        Arc::new(builder.with_single_cert(certs, key).unwrap())
    }

    /// Which side failed a handshake, and why.
    #[derive(Debug)]
    enum Failed {
        Client(rustls::Error),
        #[allow(dead_code)] // read through Debug in failure messages
        Server(rustls::Error),
    }

    /// Runs a TLS handshake in memory. Returns the client certificate the server saw.
    fn handshake(
        client: Arc<ClientConfig>,
        name: &str,
        server: Arc<ServerConfig>,
    ) -> Result<Option<CertificateDer<'static>>, Failed> {
        let mut c = ClientConnection::new(client, ServerName::try_from(name.to_string()).unwrap())
            .map_err(Failed::Client)?;
        let mut s = ServerConnection::new(server).map_err(Failed::Server)?;
        for _ in 0..20 {
            let mut buf = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut buf).unwrap();
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                s.read_tls(&mut rd).unwrap();
            }
            let server_result = s.process_new_packets();
            let mut back = Vec::new();
            while s.wants_write() {
                s.write_tls(&mut back).unwrap();
            }
            let mut rd = &back[..];
            while !rd.is_empty() {
                c.read_tls(&mut rd).unwrap();
            }
            let client_result = c.process_new_packets();
            client_result.map_err(Failed::Client)?;
            server_result.map_err(Failed::Server)?;
            if !c.is_handshaking() && !s.is_handshaking() {
                return Ok(s
                    .peer_certificates()
                    .and_then(|p| p.first().cloned().map(|c| c.into_owned())));
            }
        }
        panic!("the handshake did not finish");
    }

    fn cfg(truststore: TrustStore, keystore: Option<KeyStore>) -> TlsConfig {
        TlsConfig {
            truststore,
            keystore,
            ..TlsConfig::default()
        }
    }

    fn ca() -> TrustStore {
        TrustStore::PemFile(fixture("ca.pem"))
    }

    fn client_leaf() -> CertificateDer<'static> {
        let pem = std::fs::read(fixture("client.pem")).unwrap();
        CertificateDer::pem_slice_iter(&pem)
            .next()
            .unwrap()
            .unwrap()
    }

    #[test]
    fn mutual_tls_with_every_key_store_form() {
        let pem_file = |name: &str, key_password: Option<Secret>| KeyStore::PemFile {
            path: fixture(name),
            key_password,
        };
        let inline_pem = {
            let text = std::fs::read_to_string(fixture("client.enc-pbes2.pem")).unwrap();
            let split = text.find("-----BEGIN CERTIFICATE-----").unwrap();
            KeyStore::PemInline {
                key: Secret::new(&text[..split]),
                certificate_chain: text[split..].to_string(),
                key_password: pw(KEY_PW),
            }
        };
        let stores = [
            ("PEM", pem_file("client.pem", None)),
            (
                "encrypted PEM, PBES2 AES-256",
                pem_file("client.enc-pbes2.pem", pw(KEY_PW)),
            ),
            (
                "encrypted PEM, PBES2 SHA-1 AES-128",
                pem_file("client.enc-pbes2-sha1.pem", pw(KEY_PW)),
            ),
            (
                "encrypted PEM, PBE-SHA1-3DES",
                pem_file("client.enc-3des.pem", pw(KEY_PW)),
            ),
            ("inline encrypted PEM", inline_pem),
            (
                "PKCS12 from openssl",
                KeyStore::Pkcs12 {
                    path: fixture("client.openssl.p12"),
                    password: pw(STORE_PW),
                    key_password: None,
                },
            ),
            (
                "PKCS12 from keytool",
                KeyStore::Pkcs12 {
                    path: fixture("client.keytool.p12"),
                    password: pw(STORE_PW),
                    key_password: pw(STORE_PW),
                },
            ),
            (
                "JKS with its own key password",
                KeyStore::Jks {
                    path: fixture("client.jks"),
                    password: pw(STORE_PW),
                    key_password: pw(KEY_PW),
                },
            ),
            (
                "type JKS, a PKCS12 file (keytool's default)",
                KeyStore::Jks {
                    path: fixture("client.p12-named.jks"),
                    password: pw(STORE_PW),
                    key_password: None,
                },
            ),
            (
                "type PKCS12, a JKS file",
                KeyStore::Pkcs12 {
                    path: fixture("client.jks"),
                    password: pw(STORE_PW),
                    key_password: pw(KEY_PW),
                },
            ),
        ];
        for (what, ks) in stores {
            let config =
                client_config(&cfg(ca(), Some(ks))).unwrap_or_else(|e| panic!("{what}: {e}"));
            let seen = handshake(config, "localhost", server(true))
                .unwrap_or_else(|e| panic!("{what}: {e:?}"));
            assert_eq!(seen, Some(client_leaf()), "{what}");
        }
    }

    #[test]
    fn trust_stores_of_every_form_and_java_type_compat() {
        let stores = [
            ("PEM", ca()),
            (
                "JKS",
                TrustStore::Jks {
                    path: fixture("truststore.jks"),
                    password: pw(STORE_PW),
                },
            ),
            (
                "JKS without a password (no integrity check, as in Java)",
                TrustStore::Jks {
                    path: fixture("truststore.jks"),
                    password: None,
                },
            ),
            (
                "type JKS, a PKCS12 file named .jks (issue 14)",
                TrustStore::Jks {
                    path: fixture("truststore.p12-named.jks"),
                    password: pw(STORE_PW),
                },
            ),
            (
                "PKCS12",
                TrustStore::Pkcs12 {
                    path: fixture("truststore.p12"),
                    password: pw(STORE_PW),
                },
            ),
            (
                "type PKCS12, a JKS file",
                TrustStore::Pkcs12 {
                    path: fixture("truststore.jks"),
                    password: pw(STORE_PW),
                },
            ),
        ];
        for (what, ts) in stores {
            let config = client_config(&cfg(ts, None)).unwrap_or_else(|e| panic!("{what}: {e}"));
            handshake(config, "127.0.0.1", server(false))
                .unwrap_or_else(|e| panic!("{what}: {e:?}"));
        }
    }

    /// Every error below, as text, must name the file and never a password.
    fn refused(c: &TlsConfig) -> String {
        let text = client_config(c).map(|_| ()).unwrap_err().to_string();
        assert!(!text.contains(STORE_PW) && !text.contains(KEY_PW), "{text}");
        text
    }

    #[test]
    fn wrong_passwords_and_unreadable_stores_are_clear_errors() {
        let jks = |password: &str, key_password: &str| KeyStore::Jks {
            path: fixture("client.jks"),
            password: pw(password),
            key_password: pw(key_password),
        };
        let text = refused(&cfg(ca(), Some(jks("nope", KEY_PW))));
        assert!(
            text.contains("client.jks") && text.contains("wrong store password"),
            "{text}"
        );
        let text = refused(&cfg(ca(), Some(jks(STORE_PW, "nope"))));
        assert!(text.contains("wrong key password"), "{text}");
        let text = refused(&cfg(
            ca(),
            Some(KeyStore::Pkcs12 {
                path: fixture("client.openssl.p12"),
                password: pw("nope"),
                key_password: None,
            }),
        ));
        assert!(text.contains("ssl.keystore.password"), "{text}");
        for name in ["client.enc-pbes2.pem", "client.enc-3des.pem"] {
            let text = refused(&cfg(
                ca(),
                Some(KeyStore::PemFile {
                    path: fixture(name),
                    key_password: pw("nope"),
                }),
            ));
            assert!(
                text.contains(name) && text.contains("wrong key password"),
                "{text}"
            );
            let text = refused(&cfg(
                ca(),
                Some(KeyStore::PemFile {
                    path: fixture(name),
                    key_password: None,
                }),
            ));
            assert!(text.contains("set ssl.key.password"), "{text}");
        }
        let text = refused(&cfg(
            TrustStore::Jks {
                path: fixture("truststore.jks"),
                password: pw("nope"),
            },
            None,
        ));
        assert!(
            text.contains("truststore") && text.contains("wrong store password"),
            "{text}"
        );
        // A PEM file declared as JKS: neither JKS nor PKCS#12.
        let text = refused(&cfg(
            TrustStore::Jks {
                path: fixture("ca.pem"),
                password: None,
            },
            None,
        ));
        assert!(
            text.contains("neither a JKS nor a PKCS#12") && text.contains("PEM"),
            "{text}"
        );
        let text = refused(&cfg(
            TrustStore::PemFile("/nonexistent/ca.pem".into()),
            None,
        ));
        assert!(text.contains("/nonexistent/ca.pem"), "{text}");
    }

    #[test]
    fn handshake_failures_are_explained() {
        // The broker requires a client certificate and gets none.
        let config = client_config(&cfg(ca(), None)).unwrap();
        match handshake(config, "localhost", server(true)) {
            // What the client sees is the broker's alert.
            Err(Failed::Client(e)) => {
                assert!(explain(&e).contains("ssl.keystore"), "{}", explain(&e))
            }
            other => panic!("expected the server to refuse: {other:?}"),
        }
        // An untrusted broker.
        let config =
            client_config(&cfg(TrustStore::PemFile(fixture("other-ca.pem")), None)).unwrap();
        let Err(Failed::Client(e)) = handshake(config, "localhost", server(false)) else {
            panic!("expected an unknown issuer");
        };
        assert!(
            explain(&e).contains("ssl.truststore.location"),
            "{}",
            explain(&e)
        );
        // The wrong host name, checked; and not checked, with the chain still verified.
        let config = client_config(&cfg(ca(), None)).unwrap();
        let Err(Failed::Client(e)) = handshake(config, "broker.example", server(false)) else {
            panic!("expected a name mismatch");
        };
        assert!(
            explain(&e).contains("ssl.endpoint.identification.algorithm"),
            "{}",
            explain(&e)
        );
        let mut no_name = cfg(ca(), None);
        no_name.verify_hostname = false;
        handshake(
            client_config(&no_name).unwrap(),
            "broker.example",
            server(false),
        )
        .unwrap();
        no_name.truststore = TrustStore::PemFile(fixture("other-ca.pem"));
        assert!(
            handshake(
                client_config(&no_name).unwrap(),
                "broker.example",
                server(false)
            )
            .is_err()
        );
        // Expired: the same certificates two centuries from now.
        #[derive(Debug)]
        struct Later;
        impl TimeProvider for Later {
            fn current_time(&self) -> Option<UnixTime> {
                Some(UnixTime::since_unix_epoch(std::time::Duration::from_secs(
                    7_300_000_000,
                )))
            }
        }
        let config = client_config_with_time(&cfg(ca(), None), Some(Arc::new(Later))).unwrap();
        let Err(Failed::Client(e)) = handshake(config, "localhost", server(false)) else {
            panic!("expected an expired certificate");
        };
        assert!(explain(&e).contains("expired"), "{}", explain(&e));
    }

    #[test]
    fn enabled_protocols_limit_the_version() {
        let mut only12 = cfg(ca(), None);
        only12.versions = TlsVersions {
            tls12: true,
            tls13: false,
        };
        let mut c = ClientConnection::new(
            client_config(&only12).unwrap(),
            ServerName::try_from("localhost").unwrap(),
        )
        .unwrap();
        let mut s = ServerConnection::new(server(false)).unwrap();
        while c.is_handshaking() || s.is_handshaking() {
            let mut buf = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut buf).unwrap();
            }
            s.read_tls(&mut &buf[..]).unwrap();
            s.process_new_packets().unwrap();
            let mut back = Vec::new();
            while s.wants_write() {
                s.write_tls(&mut back).unwrap();
            }
            c.read_tls(&mut &back[..]).unwrap();
            c.process_new_packets().unwrap();
        }
        assert_eq!(c.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_2));
    }

    #[test]
    fn public_roots_are_not_empty() {
        assert!(!load_roots(&TrustStore::PublicRoots).unwrap().is_empty());
    }
}
