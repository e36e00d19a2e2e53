//! A sans-IO Kafka client connection: framing, correlation ids, ApiVersions negotiation, TLS
//! (rustls, with Java and PEM stores) and SASL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER), and the
//! small HTTP of OAuth token endpoints. Nothing here owns a socket or reads a clock; the drivers
//! in [`crate::io`] move the bytes.
#![forbid(unsafe_code)]
#![deny(clippy::disallowed_methods)]

pub mod config;
pub mod connection;
pub mod frame;
pub mod http;
pub mod keystore;
pub mod oauth;
pub mod private_key;
pub mod produce;
pub mod sasl;
pub mod tls;
pub mod versions;

pub use config::{
    ClaimValue, ClientCredentials, ConnConfig, KeyStore, OAuthLogin, SaslConfig, SaslCredentials,
    SaslMechanism, Secret, SecurityProtocol, TlsConfig, TlsVersions, TokenRefresh, TrustStore,
    UnsecuredLogin,
};
pub use connection::{Connection, ConnectionParams, Event, Response};
pub use frame::{FrameBuilder, Segments};

/// Errors of the connection layer. Every variant names the broker; API-level variants name the
/// API too. Cloneable, so one failure can be reported to every request waiting on a connection.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    #[error("cannot connect to broker {broker}: {message}")]
    Connect { broker: String, message: String },
    #[error("I/O error talking to broker {broker}: {message}")]
    Io {
        broker: String,
        kind: std::io::ErrorKind,
        message: String,
    },
    #[error("connection to broker {broker} closed: {reason}")]
    Closed { broker: String, reason: String },
    #[error("TLS error with broker {broker}: {message}")]
    Tls { broker: String, message: String },
    #[error("TLS configuration for broker {broker}: {message}")]
    TlsConfig { broker: String, message: String },
    #[error("SASL {mechanism} authentication with broker {broker} failed: {message}")]
    Authentication {
        broker: String,
        mechanism: String,
        message: String,
    },
    #[error(
        "broker {broker} supports no version of {api} that strait speaks (strait {}..={}, broker {})",
        ours.0, ours.1,
        theirs.map(|t| format!("{}..={}", t.0, t.1)).unwrap_or_else(|| "none".into())
    )]
    UnsupportedVersion {
        broker: String,
        api: &'static str,
        ours: (i16, i16),
        theirs: Option<(i16, i16)>,
    },
    #[error("protocol error in {api} with broker {broker}: {message}")]
    Protocol {
        broker: String,
        api: &'static str,
        message: String,
    },
    #[error("{api} request to broker {broker} timed out after {after_ms} ms")]
    Timeout {
        broker: String,
        api: &'static str,
        after_ms: u64,
    },
}

impl WireError {
    /// The broker this error concerns.
    pub fn broker(&self) -> &str {
        match self {
            WireError::Connect { broker, .. }
            | WireError::Io { broker, .. }
            | WireError::Closed { broker, .. }
            | WireError::Tls { broker, .. }
            | WireError::TlsConfig { broker, .. }
            | WireError::Authentication { broker, .. }
            | WireError::UnsupportedVersion { broker, .. }
            | WireError::Protocol { broker, .. }
            | WireError::Timeout { broker, .. } => broker,
        }
    }

    /// Whether retrying on a fresh connection may help. Authentication, TLS trust and version
    /// problems will not fix themselves.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            WireError::Connect { .. }
                | WireError::Io { .. }
                | WireError::Closed { .. }
                | WireError::Timeout { .. }
        )
    }
}
