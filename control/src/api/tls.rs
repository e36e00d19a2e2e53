//! TLS for the REST API (`strait.api.ssl.keystore.*`): the server's certificate and key from a
//! key store, read as the clients' key stores are (PEM with an optionally encrypted key,
//! PKCS#12 or JKS told apart by content), and a listener that completes handshakes off the
//! accept loop so that a slow or silent client holds back nobody else.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use strait_dataplane::wire::config::{KeyStore, Secret};
use strait_dataplane::wire::tls::{TlsConfigError, load_identity};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Longest a client may take to complete its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at most; further connections wait in the kernel's backlog.
const MAX_HANDSHAKES: usize = 64;
/// Connections handshaken but not yet taken by the HTTP server.
const READY_QUEUE: usize = 64;

/// The API's key store, as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeyStore {
    /// `strait.api.ssl.keystore.location`.
    pub path: PathBuf,
    /// `strait.api.ssl.keystore.password` (PKCS#12 and JKS).
    pub password: Option<String>,
    /// `strait.api.ssl.key.password` (an encrypted PEM key; for PKCS#12 and JKS the store's
    /// password when unset, as in Java).
    pub key_password: Option<String>,
}

/// Why the API's TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ApiTlsError {
    #[error("strait.api.ssl.keystore.location {path}: {error}")]
    Read {
        path: PathBuf,
        /// In the message, so not a `#[source]` (the CLI prints error chains).
        error: std::io::Error,
    },
    #[error("strait.api.ssl.keystore.location: {0}")]
    Store(TlsConfigError),
    #[error("strait.api.ssl.keystore.location {path}: the certificate and key do not fit: {error}")]
    Config { path: PathBuf, error: rustls::Error },
}

impl ApiKeyStore {
    /// The key store as the data plane's loader takes it: PEM when the file is text, else
    /// PKCS#12 or JKS (told apart by content when loaded).
    fn key_store(&self) -> Result<KeyStore, ApiTlsError> {
        let head = std::fs::read(&self.path).map_err(|error| ApiTlsError::Read {
            path: self.path.clone(),
            error,
        })?;
        let secret = |s: &Option<String>| s.as_ref().map(|v| Secret::new(v.clone()));
        Ok(if head.starts_with(b"-----BEGIN") {
            KeyStore::PemFile {
                path: self.path.clone(),
                key_password: secret(&self.key_password),
            }
        } else {
            KeyStore::Pkcs12 {
                path: self.path.clone(),
                password: secret(&self.password),
                key_password: secret(&self.key_password),
            }
        })
    }

    /// The rustls server configuration (HTTP/1.1, no client certificates).
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, ApiTlsError> {
        let identity = load_identity(&self.key_store()?).map_err(ApiTlsError::Store)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| ApiTlsError::Config {
                path: self.path.clone(),
                error,
            })?
            .with_no_client_auth()
            .with_single_cert(identity.chain, identity.key)
            .map_err(|error| ApiTlsError::Config {
                path: self.path.clone(),
                error,
            })?;
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }
}

/// Accepts TCP connections and hands over those whose TLS handshake completed.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<tokio::net::TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `listener`: each handshake runs in its own task, bounded in number
    /// and time; a failed one is logged at debug level (scanners and plain-HTTP clients).
    pub fn new(listener: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(READY_QUEUE);
        let acceptor = TlsAcceptor::from(config);
        let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
        tokio::spawn(async move {
            loop {
                let Ok(permit) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of descriptors and the like: wait a moment, as axum does.
                        tracing::warn!(error = %e, "REST API: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "REST API: TLS handshake failed")
                        }
                        Err(_) => tracing::debug!(%peer, "REST API: TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { ready, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept task ended (the runtime is stopping): serve nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}
